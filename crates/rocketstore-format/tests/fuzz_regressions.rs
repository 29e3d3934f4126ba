//! Replays saved fuzz inputs: every file under `fuzz/regressions/<target>/` (except dotfiles such
//! as `.gitkeep`) is run through the same check as the cargo-fuzz target `<target>`. Copy a crasher
//! from `fuzz/artifacts/<target>/` into `fuzz/regressions/<target>/` once it is fixed, and
//! `cargo test` keeps it fixed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../fuzz/src/lib.rs"]
mod checks;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn regressions_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = regressions_root().join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let mut failures = Vec::new();
    for path in inputs(target) {
        let data = fs::read(&path).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| checks::run(target, &data)));
        match outcome {
            Ok(true) => {}
            Ok(false) => panic!("unknown fuzz target {target}"),
            Err(_) => failures.push(path.display().to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "{target}: failing regression inputs: {failures:?}"
    );
}

#[test]
fn replay_decode_record() {
    replay("decode_record");
}

#[test]
fn replay_decode_cq() {
    replay("decode_cq");
}

#[test]
fn replay_index_header_entries() {
    replay("index_header_entries");
}

#[test]
fn replay_checkpoint_parse() {
    replay("checkpoint_parse");
}

/// Every directory under `fuzz/regressions/` is a known target (catches typos that would make a
/// saved crasher silently skipped).
#[test]
fn regression_dirs_match_targets() {
    let mut dirs: Vec<String> = fs::read_dir(regressions_root())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // The engine's target (`fuzz/src/store_open.rs`), replayed by the engine crate's
        // `tests/fuzz_regressions.rs`.
        .filter(|d| d != "store_open")
        .collect();
    dirs.sort();
    let mut targets: Vec<String> = checks::TARGETS.iter().map(|s| s.to_string()).collect();
    targets.sort();
    assert_eq!(dirs, targets);
}

/// The checks themselves run on meaningful inputs (so they are exercised even while the
/// regression directories are empty): spec vector 7, a blank, CQ units, an index file, a
/// checkpoint.
#[test]
fn checks_accept_seed_inputs() {
    use rocketstore_format::index::{index_file_size, put_key};
    use rocketstore_format::*;

    let hdr = RecordHeader {
        queue_id: 1,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_timestamp: 1_700_000_000_123,
        store_host: "10.0.0.1:10911".parse().unwrap(),
        ..RecordHeader::default()
    };
    let rec = record::encode_record_to_vec(&hdr, b"hi", "T", b"TAGS\x01A\x02").unwrap();
    checks::decode_record_check(&rec);
    checks::decode_record_check(&rec[..50]);
    let mut blank = [0u8; 8];
    encode_blank(&mut blank, 100);
    checks::decode_record_check(&blank);

    let mut cq = Vec::new();
    cq.extend_from_slice(&CqUnit::PREFILL.encode());
    cq.extend_from_slice(
        &CqUnit {
            phy_offset: 0,
            size: 101,
            tags_code: 65,
        }
        .encode(),
    );
    cq.extend_from_slice(&[0u8; 25]);
    checks::decode_cq_check(&cq);

    let (slots, entries) = (4u32, 16u32);
    let mut file = vec![0u8; index_file_size(slots, entries) as usize];
    for i in 0..10 {
        put_key(
            &mut file,
            slots,
            entries,
            i % 3,
            i64::from(i) * 100,
            1_700_000_000_000 + i64::from(i),
        )
        .unwrap();
    }
    let mut input = Vec::new();
    for v in [slots as u16, entries as u16, 1u16, 100u16] {
        input.extend_from_slice(&v.to_be_bytes());
    }
    input.extend_from_slice(&file);
    checks::index_header_entries_check(&input);

    let cp = Checkpoint {
        physic_msg_timestamp: 1_700_000_000_500,
        ext: Some(CheckpointExt {
            durable_commitlog_offset: 9,
            clean_shutdown: true,
            generation: 3,
            window: None,
        }),
        ..Checkpoint::default()
    };
    checks::checkpoint_parse_check(&cp.encode());
    checks::checkpoint_parse_check(&[1, 2, 3]);
}
