//! Invariant checks shared by the cargo-fuzz targets (`fuzz_targets/*.rs`) and by the regression
//! replay test of the format crate (`crates/rocketstore-format/tests/fuzz_regressions.rs`, which
//! includes this file with `#[path]`). Every function takes arbitrary bytes and panics only if an
//! invariant of `rocketstore-format` is violated; the decoders themselves must never panic.
//!
//! This file must stay includable as a plain module: no crate-only attributes, only
//! `rocketstore_format` as a dependency.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use rocketstore_format::checkpoint::{CHECKPOINT_CRC_POS, CHECKPOINT_EXT_END};
use rocketstore_format::cq::CqUnit;
use rocketstore_format::index::{self, IndexEntry, IndexHeader};
use rocketstore_format::record::{peek_magic, peek_store_timestamp, peek_total_size};
use rocketstore_format::{
    decode_offset_msg_id, decode_record, encode_record, sysflag, Checkpoint, CheckpointError,
    CheckpointExt, DecodeOptions, Decoded, CHECKPOINT_FILE_SIZE, CQ_STORE_UNIT_SIZE,
    INDEX_HEADER_SIZE,
};

/// Names of the fuzz targets; each has a directory under `fuzz/regressions/`.
pub const TARGETS: &[&str] = &[
    "decode_record",
    "decode_cq",
    "index_header_entries",
    "checkpoint_parse",
];

/// Runs the check of `target` on `data`. Returns `false` for an unknown target name.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "decode_record" => decode_record_check(data),
        "decode_cq" => decode_cq_check(data),
        "index_header_entries" => index_header_entries_check(data),
        "checkpoint_parse" => checkpoint_parse_check(data),
        _ => return false,
    }
    true
}

fn option_sets() -> [DecodeOptions; 4] {
    let default = DecodeOptions::default();
    [
        default,
        // Everything optional off: the most permissive decode.
        DecodeOptions {
            check_crc: false,
            max_total_size: 0,
            accept_v2: true,
            check_topic: false,
            reject_unknown_sysflag: false,
            expected_physical_offset: None,
        },
        // 4.x-like: V1 only, size limit.
        DecodeOptions {
            accept_v2: false,
            max_total_size: 4 * 1024 * 1024 + 64 * 1024,
            ..default
        },
        DecodeOptions {
            expected_physical_offset: Some(0),
            ..default
        },
    ]
}

/// `decode_record` on arbitrary bytes: never panics; every `Ok` is self-consistent and
/// canonical (re-encoding the view gives back exactly the record bytes); stricter options never
/// accept what laxer ones reject.
pub fn decode_record_check(data: &[u8]) {
    // The whole-record CRC property helper must cope with any bytes too.
    let _ = rocketstore_format::prop_crc::verify(data);
    let sets = option_sets();
    let results: Vec<_> = sets.iter().map(|o| decode_record(data, o)).collect();
    for (opts, r) in sets.iter().zip(&results) {
        match r {
            Ok(Decoded::Message(v)) => {
                let len = usize::try_from(v.total_size).expect("TOTALSIZE > 0");
                assert!(len <= data.len());
                assert_eq!(v.bytes(), &data[..len]);
                assert_eq!(peek_total_size(data), Some(v.total_size));
                assert_eq!(peek_magic(data), Some(v.version.magic_code()));
                assert_eq!(peek_store_timestamp(data), Some(v.store_timestamp));
                let _ = v.properties();
                // Its layout views the same bytes as the same view, and their prefixes (and
                // the bytes after the record) without a panic.
                let layout = v.layout();
                assert_eq!(layout.view(data), Some(*v));
                let _ = layout.view(&data[..len / 2]);
                let _ = layout.view(&data[len..]);
                assert_eq!(
                    decode_offset_msg_id(&v.msg_id()),
                    Ok((v.store_host, v.physical_offset))
                );
                if opts.reject_unknown_sysflag {
                    assert_eq!(v.sys_flag & !sysflag::KNOWN_BITS, 0);
                }
                if v.sys_flag & !sysflag::KNOWN_BITS == 0 {
                    let mut again = vec![0u8; len];
                    encode_record(
                        &mut again,
                        &v.header,
                        v.version,
                        v.body,
                        v.body_crc,
                        v.topic,
                        v.properties_raw,
                    )
                    .expect("a decoded record re-encodes");
                    assert_eq!(again, v.bytes(), "decode is not canonical");
                }
            }
            Ok(Decoded::Blank { total_size }) => assert!(*total_size >= 8),
            Err(e) => {
                let _ = e.to_string();
                if let rocketstore_format::DecodeError::Incomplete { needed, available } = e {
                    assert_eq!(*available, data.len());
                    assert!(*needed > data.len());
                }
            }
        }
    }
    // The permissive decode accepts everything the default decode accepts, with the same view.
    if let Ok(d) = &results[0] {
        assert_eq!(results[1].as_ref().ok(), Some(d));
    }
}

/// CQ units over arbitrary bytes: every full 20-byte chunk decodes and re-encodes identically;
/// a shorter tail does not decode; the recovery scan (first invalid unit ends the queue) is
/// bounded by the data.
pub fn decode_cq_check(data: &[u8]) {
    let chunks = data.chunks_exact(CQ_STORE_UNIT_SIZE);
    let tail = chunks.remainder();
    let mut valid_prefix = 0usize;
    let mut still_valid = true;
    for chunk in chunks {
        let unit = CqUnit::decode(chunk).expect("20 bytes decode");
        assert_eq!(unit.encode().as_slice(), chunk);
        if unit.is_prefill() {
            assert!(unit.is_valid());
        }
        still_valid &= unit.is_valid();
        if still_valid {
            valid_prefix += 1;
        }
    }
    assert!(valid_prefix * CQ_STORE_UNIT_SIZE <= data.len());
    if !tail.is_empty() {
        assert_eq!(CqUnit::decode(tail), None);
    }
    // Decoding at every byte offset must not panic either.
    for start in 0..data.len().min(64) {
        let _ = CqUnit::decode(&data[start..]);
    }
}

/// Index header + a bounded chain walk over arbitrary bytes. Input layout: bytes 0..2 slot count
/// (mod 256), 2..4 entry count (mod 1024), 4..6 slot, 6..8 max steps (mod 4096); the rest is the
/// index file.
pub fn index_header_entries_check(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let u16_at = |i: usize| u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
    let slots = u16_at(0) % 256;
    let entries = u16_at(2) % 1024;
    let slot = u16_at(4);
    let max_steps = (u16_at(6) % 4096) as usize;
    let file = &data[8..];

    let header = IndexHeader::decode(file);
    assert_eq!(header.is_some(), file.len() >= INDEX_HEADER_SIZE);
    if let Some(h) = header {
        assert_eq!(IndexHeader::decode(&h.encode()), Some(h));
    }
    for s in 0..slots.min(64) {
        let _ = index::read_slot(file, s);
    }
    for n in 0..entries.min(64) {
        if let Some(e) = index::read_entry(file, slots, n) {
            assert_eq!(IndexEntry::decode(&e.encode()), Some(e));
        }
    }

    let chain = index::walk_chain(file, slots, entries, slot, max_steps);
    assert!(chain.len() <= max_steps);
    assert!(chain.len() <= entries as usize);
    if chain.is_empty() {
        return;
    }
    let h = header.expect("a non-empty walk read the header");
    assert!(slot < slots);
    assert!(h.index_count > 1);
    // Reconstruct the entry numbers: n0 = slot value, n(i+1) = e(i).prev_index.
    let mut n = index::read_slot(file, slot).expect("slot was read");
    for (i, e) in chain.iter().enumerate() {
        assert!(n > 0 && n <= h.index_count);
        let num = u32::try_from(n).expect("positive");
        assert!(num < entries);
        assert_eq!(index::read_entry(file, slots, num), Some(*e));
        if i + 1 < chain.len() {
            assert!(
                e.prev_index > 0 && e.prev_index < n,
                "numbers strictly decrease"
            );
            n = e.prev_index;
        }
    }
}

/// Checkpoint parsing: never panics; wrong lengths are rejected; anything accepted round-trips;
/// with the extension present, any single damaged byte in `[0, 4000)` is detected.
pub fn checkpoint_parse_check(data: &[u8]) {
    let r = Checkpoint::decode(data);
    if data.len() != CHECKPOINT_FILE_SIZE {
        assert_eq!(r, Err(CheckpointError::BadLength { len: data.len() }));
    }
    if let Ok(cp) = r {
        assert_eq!(Checkpoint::decode(&cp.encode()), Ok(cp));
        assert_eq!(cp.encode()[..40], data[..40]);
    }

    // Structure-aware part: spread the input over the fields of a full-size file.
    let mut file = [0u8; CHECKPOINT_FILE_SIZE];
    let head = data.len().min(40);
    file[..head].copy_from_slice(&data[..head]);
    let rest = &data[head..];
    let ext_len = rest.len().min(CHECKPOINT_EXT_END - 3968);
    file[3968..3968 + ext_len].copy_from_slice(&rest[..ext_len]);
    if let Ok(cp) = Checkpoint::decode(&file) {
        assert_eq!(Checkpoint::decode(&cp.encode()), Ok(cp));
    }

    // Build a checkpoint with the extension from the input, then damage one byte.
    let word = |i: usize| -> i64 {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = data.get(i * 8 + j).copied().unwrap_or(0);
        }
        i64::from_be_bytes(b)
    };
    let cp = Checkpoint {
        physic_msg_timestamp: word(0),
        logics_msg_timestamp: word(1),
        index_msg_timestamp: word(2),
        master_flushed_offset: word(3),
        confirm_phy_offset: word(4),
        ext: Some(CheckpointExt {
            durable_commitlog_offset: word(5),
            clean_shutdown: word(6) & 1 == 1,
            generation: word(7) as u64,
            window: None,
        }),
    };
    let mut enc = cp.encode();
    assert_eq!(Checkpoint::decode(&enc), Ok(cp));
    let pos = (word(8) as u64 % CHECKPOINT_EXT_END as u64) as usize;
    let xor = data.get(72).copied().filter(|&x| x != 0).unwrap_or(0x01);
    enc[pos] ^= xor;
    assert!(
        Checkpoint::decode(&enc).is_err(),
        "damage at byte {pos} (CRC covers [0, {CHECKPOINT_CRC_POS})) went undetected"
    );
}
