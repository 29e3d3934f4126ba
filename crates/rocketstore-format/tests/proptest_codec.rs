//! Property tests of the codecs: round trips, robustness on arbitrary bytes, truncation and
//! single-bit damage of records, and checkpoint damage detection.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::IpAddr;

use proptest::collection::vec;
use proptest::prelude::*;

use rocketstore_format::checkpoint::CHECKPOINT_EXT_END;
use rocketstore_format::index::{self, IndexEntry, IndexHeader};
use rocketstore_format::properties::java_hashmap_order;
use rocketstore_format::record::encode_record_to_vec;
use rocketstore_format::*;

const CASES: u32 = 256;

fn arb_host() -> impl Strategy<Value = HostAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<i32>())
            .prop_map(|(ip, port)| HostAddr::new(IpAddr::from(ip), port)),
        (any::<[u8; 16]>(), any::<i32>())
            .prop_map(|(ip, port)| HostAddr::new(IpAddr::from(ip), port)),
    ]
}

/// Topics that pass `validate_topic`: 1..=127 bytes (V1) or 128..=255 bytes (V2).
fn arb_topic() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9_%|-]{1,127}",
        1 => "[a-zA-Z0-9_%|-]{128,255}",
    ]
}

/// Valid property pairs (non-empty, no \x00-\x02), possibly with repeated names.
fn arb_props() -> impl Strategy<Value = Vec<(String, String)>> {
    vec(("[A-Z_]{1,3}", "[^\\x00-\\x02]{1,24}"), 0..8)
}

fn arb_header() -> impl Strategy<Value = RecordHeader> {
    (
        (any::<i32>(), any::<i32>(), any::<i64>(), any::<i64>()),
        0..=sysflag::KNOWN_BITS,
        (any::<i64>(), arb_host(), any::<i64>(), arb_host()),
        (any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                (queue_id, flag, queue_offset, physical_offset),
                sys_flag,
                (born_timestamp, born_host, store_timestamp, store_host),
                (reconsume_times, prepared_transaction_offset),
            )| RecordHeader {
                queue_id,
                flag,
                queue_offset,
                physical_offset,
                sys_flag,
                born_timestamp,
                born_host,
                store_timestamp,
                store_host,
                reconsume_times,
                prepared_transaction_offset,
            },
        )
}

/// A generated record and its parts.
#[derive(Debug, Clone)]
struct Rec {
    hdr: RecordHeader,
    version: MessageVersion,
    body: Vec<u8>,
    topic: String,
    props: Vec<u8>,
    bytes: Vec<u8>,
}

fn arb_record(max_body: usize) -> impl Strategy<Value = Rec> {
    (
        arb_header(),
        arb_topic(),
        vec(any::<u8>(), 0..max_body),
        arb_props(),
        any::<bool>(),
    )
        .prop_map(|(hdr, topic, body, pairs, force_v2)| {
            let mut props = Vec::new();
            encode_properties(
                pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                &mut props,
            );
            let version = if force_v2 {
                MessageVersion::V2
            } else {
                MessageVersion::for_topic(topic.len())
            };
            let len = record_len(
                hdr.born_host.is_v6(),
                hdr.store_host.is_v6(),
                version,
                body.len(),
                topic.len(),
                props.len(),
            );
            let mut bytes = vec![0u8; len];
            encode_record(
                &mut bytes,
                &hdr,
                version,
                &body,
                crc32_masked(&body),
                &topic,
                &props,
            )
            .unwrap();
            Rec {
                hdr,
                version,
                body,
                topic,
                props,
                bytes,
            }
        })
}

fn strict(rec: &Rec) -> DecodeOptions {
    DecodeOptions {
        check_crc: true,
        expected_physical_offset: Some(rec.hdr.physical_offset),
        ..DecodeOptions::default()
    }
}

fn reencode(v: &RecordView<'_>) -> Vec<u8> {
    let mut out = vec![0u8; v.bytes().len()];
    encode_record(
        &mut out,
        &v.header,
        v.version,
        v.body,
        v.body_crc,
        v.topic,
        v.properties_raw,
    )
    .unwrap();
    out
}

fn all_option_sets() -> Vec<DecodeOptions> {
    let d = DecodeOptions::default();
    vec![
        d,
        DecodeOptions {
            check_crc: false,
            check_topic: false,
            reject_unknown_sysflag: false,
            ..d
        },
        DecodeOptions {
            accept_v2: false,
            max_total_size: 1000,
            expected_physical_offset: Some(0),
            ..d
        },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// encode → decode is the identity for arbitrary headers (v4/v6 hosts), V1/V2 topics, bodies
    /// of 0..2048 bytes and properties; trailing bytes after the record are ignored.
    #[test]
    fn record_round_trip(rec in arb_record(2048), trailing in vec(any::<u8>(), 0..16)) {
        let mut buf = rec.bytes.clone();
        buf.extend_from_slice(&trailing);
        let v = match decode_record(&buf, &strict(&rec)) {
            Ok(Decoded::Message(v)) => v,
            other => panic!("{other:?}"),
        };
        prop_assert_eq!(v.header, RecordHeader { sys_flag: rec.hdr.effective_sys_flag(), ..rec.hdr });
        prop_assert_eq!(v.version, rec.version);
        prop_assert_eq!(v.body, &rec.body[..]);
        prop_assert_eq!(v.body_crc, crc32_masked(&rec.body));
        prop_assert_eq!(v.topic, rec.topic.as_str());
        prop_assert_eq!(v.properties_raw, &rec.props[..]);
        prop_assert_eq!(v.bytes(), &rec.bytes[..]);
        prop_assert_eq!(v.total_size as usize, rec.bytes.len());
        prop_assert_eq!(record::peek_store_timestamp(&buf), Some(rec.hdr.store_timestamp));
        prop_assert_eq!(decode_offset_msg_id(&v.msg_id()).unwrap(), (rec.hdr.store_host, rec.hdr.physical_offset));
        prop_assert_eq!(reencode(&v), rec.bytes.clone());
        // encode_record_to_vec agrees when it picks the same version.
        if rec.version == MessageVersion::for_topic(rec.topic.len()) {
            prop_assert_eq!(encode_record_to_vec(&rec.hdr, &rec.body, &rec.topic, &rec.props).unwrap(), rec.bytes.clone());
        }
    }

    /// A view's layout views the same bytes again as the same view, and views any other bytes
    /// (shorter, damaged, another record's) without reading outside them.
    #[test]
    fn record_layout_views_again(
        rec in arb_record(512),
        other in vec(any::<u8>(), 0..600),
        cut in any::<prop::sample::Index>(),
    ) {
        let v = match decode_record(&rec.bytes, &strict(&rec)) {
            Ok(Decoded::Message(v)) => v,
            other => panic!("{other:?}"),
        };
        let layout = v.layout();
        prop_assert_eq!(layout.view(&rec.bytes), Some(v));
        prop_assert_eq!(layout.view(&rec.bytes[..cut.index(rec.bytes.len())]), None);
        let _ = layout.view(&other);
    }

    /// `decode_record` on arbitrary bytes never panics, with any options.
    #[test]
    fn decode_arbitrary_bytes(data in vec(any::<u8>(), 0..512)) {
        for opts in all_option_sets() {
            let _ = decode_record(&data, &opts);
        }
    }

    /// Arbitrary bytes behind a plausible TOTALSIZE + magic reach the deeper checks; still no
    /// panic, and anything accepted is canonical.
    #[test]
    fn decode_structured_garbage(mut data in vec(any::<u8>(), 8..400), magic in prop_oneof![
        Just(MESSAGE_MAGIC_CODE_V1), Just(MESSAGE_MAGIC_CODE_V2), Just(BLANK_MAGIC_CODE)
    ], sys_flag in 0..0x40i32) {
        let len = i32::try_from(data.len()).unwrap();
        data[0..4].copy_from_slice(&len.to_be_bytes());
        data[4..8].copy_from_slice(&magic.to_be_bytes());
        if data.len() >= 40 {
            data[36..40].copy_from_slice(&sys_flag.to_be_bytes());
        }
        for opts in all_option_sets() {
            if let Ok(Decoded::Message(v)) = decode_record(&data, &opts) {
                if v.sys_flag & !sysflag::KNOWN_BITS == 0 {
                    prop_assert_eq!(reencode(&v), v.bytes().to_vec());
                }
            }
        }
    }

    /// Every strict prefix of a valid record is `Incomplete` (never a message).
    #[test]
    fn truncated_record_is_incomplete(rec in arb_record(256)) {
        for k in 0..rec.bytes.len() {
            match decode_record(&rec.bytes[..k], &strict(&rec)) {
                Err(e) => prop_assert!(e.is_incomplete(), "prefix {}: {:?}", k, e),
                Ok(d) => panic!("prefix {k} decoded as {d:?}"),
            }
        }
    }

    /// Flipping any single bit of a record either is detected (an error) or yields a record that
    /// re-encodes to exactly the flipped bytes (the decode is canonical, so nothing is silently
    /// "repaired").
    ///
    /// Without a whole-record CRC these fields can flip undetected: QUEUEID, FLAG, QUEUEOFFSET,
    /// SYSFLAG bits 0-3 and 6-10 (compression, multi-tags, transaction type, inner batch),
    /// BORNTIMESTAMP, BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED TX OFFSET,
    /// BODYCRC when the body is empty, topic bytes that stay valid topic characters (e.g. case
    /// flips), and property bytes. Detected: TOTALSIZE and the length fields (length mismatch),
    /// MAGIC, unknown SYSFLAG bits and usually the v6 bits (layout shift), PHYSICALOFFSET (checked
    /// against the expected position), and every body bit (BODYCRC, when `check_crc`).
    #[test]
    fn single_bit_flips(rec in arb_record(64)) {
        let born_len = rec.hdr.born_host.encoded_len();
        let store_len = rec.hdr.store_host.encoded_len();
        let body_start = 72 + born_len + store_len;
        let body_end = body_start + rec.body.len();
        let opts = strict(&rec);
        for bit in 0..rec.bytes.len() * 8 {
            let mut flipped = rec.bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let byte = bit / 8;
            match decode_record(&flipped, &opts) {
                Err(e) => {
                    if (body_start..body_end).contains(&byte) {
                        prop_assert!(matches!(e, DecodeError::CrcMismatch { .. }), "body byte {} gave {:?}", byte, e);
                    }
                }
                Ok(Decoded::Message(v)) => {
                    prop_assert!(!(body_start..body_end).contains(&byte), "body flip at {} undetected", byte);
                    prop_assert_eq!(reencode(&v), flipped);
                }
                Ok(Decoded::Blank { .. }) => panic!("bit {bit} turned a record into a blank"),
            }
        }
    }

    /// A record whose properties end with the `__CRC32#` placeholder can be sealed in place; it
    /// then verifies, still decodes, and its properties carry the CRC digits.
    #[test]
    fn prop_crc_seal_verify(rec in arb_record(256)) {
        let mut props = rec.props.clone();
        prop_crc::append_placeholder(&mut props);
        let mut bytes = encode_record_to_vec(&rec.hdr, &rec.body, &rec.topic, &props).unwrap();
        prop_assert_eq!(prop_crc::verify(&bytes), Some(false));
        prop_assert!(prop_crc::seal(&mut bytes));
        prop_assert_eq!(prop_crc::verify(&bytes), Some(true));
        let v = match decode_record(&bytes, &strict(&rec)) {
            Ok(Decoded::Message(v)) => v,
            other => panic!("{other:?}"),
        };
        let crc = crc32_masked(&bytes[..bytes.len() - prop_crc::PROP_CRC_LEN]);
        let digits = prop_crc::digits(crc);
        let parsed = v.properties();
        prop_assert_eq!(parsed.get(property::CRC32), Some(std::str::from_utf8(&digits).unwrap()));
        // The generated property names never spell `__CRC32#`, so the plain record has none.
        prop_assert_eq!(prop_crc::verify(&rec.bytes), None);
    }

    /// `prop_crc::verify` never panics on arbitrary bytes.
    #[test]
    fn prop_crc_arbitrary(data in vec(any::<u8>(), 0..64)) {
        let _ = prop_crc::verify(&data);
        let mut d = data.clone();
        let _ = prop_crc::seal(&mut d);
    }

    /// Properties: parse(encode(pairs)) is the last-wins map of the pairs, and re-encoding the
    /// parsed map parses back to itself.
    #[test]
    fn properties_round_trip(pairs in arb_props()) {
        let mut bytes = Vec::new();
        encode_properties(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), &mut bytes);
        prop_assert_eq!(bytes.len(), encoded_properties_len(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        let parsed = parse_properties(&bytes);
        let expected: Properties = pairs.iter().cloned().collect();
        prop_assert_eq!(&parsed, &expected);
        prop_assert_eq!(parse_properties(&parsed.to_bytes()), parsed);
    }

    /// Property parsing never fails or panics on arbitrary bytes; every parsed pair is non-empty.
    #[test]
    fn properties_arbitrary(data in vec(any::<u8>(), 0..256)) {
        for (k, v) in parse_properties(&data).iter() {
            prop_assert!(!k.is_empty() && !v.is_empty());
            let has = |text: &str, c: char| text.contains(c);
            prop_assert!(!has(k, '\x02') && !has(v, '\x02') && !has(k, '\x01'));
        }
    }

    /// `java_hashmap_order` returns each distinct key once.
    #[test]
    fn hashmap_order_is_permutation(keys in vec("[a-zA-Z]{1,6}", 0..40), cap in 0usize..300) {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let order = java_hashmap_order(&refs, cap);
        let mut seen: Vec<&str> = order.iter().map(|&i| refs[i]).collect();
        seen.sort_unstable();
        let mut distinct = refs.clone();
        distinct.sort_unstable();
        distinct.dedup();
        prop_assert_eq!(seen, distinct);
    }

    /// Checkpoint encode → decode is the identity, with and without the extension.
    #[test]
    fn checkpoint_round_trip(fields in any::<[i64; 5]>(), ext in proptest::option::of((any::<i64>(), any::<bool>(), any::<u64>()))) {
        let cp = Checkpoint {
            physic_msg_timestamp: fields[0],
            logics_msg_timestamp: fields[1],
            index_msg_timestamp: fields[2],
            master_flushed_offset: fields[3],
            confirm_phy_offset: fields[4],
            ext: ext.map(|(d, c, g)| CheckpointExt { durable_commitlog_offset: d, clean_shutdown: c, generation: g, window: None }),
        };
        prop_assert_eq!(Checkpoint::decode(&cp.encode()), Ok(cp));
    }

    /// A torn checkpoint (any single byte in [0, CRC end) changed) is detected when the extension
    /// is present.
    #[test]
    fn torn_checkpoint_detected(fields in any::<[i64; 5]>(), d in any::<i64>(), g in any::<u64>(), c in any::<bool>(),
                                pos in 0usize..CHECKPOINT_EXT_END, xor in 1u8..=255) {
        let cp = Checkpoint {
            physic_msg_timestamp: fields[0],
            logics_msg_timestamp: fields[1],
            index_msg_timestamp: fields[2],
            master_flushed_offset: fields[3],
            confirm_phy_offset: fields[4],
            ext: Some(CheckpointExt { durable_commitlog_offset: d, clean_shutdown: c, generation: g, window: None }),
        };
        let mut b = cp.encode();
        b[pos] ^= xor;
        prop_assert!(Checkpoint::decode(&b).is_err());
    }

    /// Checkpoint parsing of arbitrary 4096-byte buffers never panics.
    #[test]
    fn checkpoint_arbitrary(head in vec(any::<u8>(), 0..64), tail in vec(any::<u8>(), 0..40)) {
        let mut b = [0u8; CHECKPOINT_FILE_SIZE];
        b[..head.len()].copy_from_slice(&head);
        b[3968..3968 + tail.len().min(128)].copy_from_slice(&tail);
        if let Ok(cp) = Checkpoint::decode(&b) {
            prop_assert_eq!(Checkpoint::decode(&cp.encode()), Ok(cp));
        }
    }

    /// CQ units, index headers and entries round-trip.
    #[test]
    fn small_structs_round_trip(a in any::<i64>(), b in any::<i32>(), c in any::<i64>(), d in any::<i64>(), e in any::<i32>(), f in any::<i32>()) {
        let u = CqUnit { phy_offset: a, size: b, tags_code: c };
        prop_assert_eq!(CqUnit::decode(&u.encode()), Some(u));
        let h = IndexHeader { begin_timestamp: a, end_timestamp: c, begin_phy_offset: d, end_phy_offset: -a, hash_slot_count: e, index_count: f };
        prop_assert_eq!(IndexHeader::decode(&h.encode()), Some(h));
        let en = IndexEntry { key_hash: b, phy_offset: d, time_diff: e, prev_index: f };
        prop_assert_eq!(IndexEntry::decode(&en.encode()), Some(en));
    }

    /// The chain walk over arbitrary index bytes terminates, respects `max_steps`, and visits
    /// strictly decreasing entry numbers.
    #[test]
    fn walk_chain_arbitrary(file in vec(any::<u8>(), 0..600), slots in 0u32..8, entries in 0u32..32, slot in 0u32..10, max_steps in 0usize..64) {
        let chain = index::walk_chain(&file, slots, entries, slot, max_steps);
        prop_assert!(chain.len() <= max_steps);
        prop_assert!(chain.len() <= entries as usize);
        // e[i].prev_index is the entry number of e[i+1], so for every entry but the last it is
        // positive, and those numbers strictly decrease.
        for i in 0..chain.len().saturating_sub(1) {
            prop_assert!(chain[i].prev_index > 0);
            if i + 2 < chain.len() {
                prop_assert!(chain[i + 1].prev_index < chain[i].prev_index);
            }
        }
    }

    /// Host strings, file names and offset message ids round-trip.
    #[test]
    fn names_round_trip(host in arb_host(), offset in any::<i64>(), port in any::<u16>(), file_offset in 0u64..=i64::MAX as u64) {
        let h = HostAddr::new(host.ip, i32::from(port));
        prop_assert_eq!(h.to_string().parse::<HostAddr>().unwrap(), h);
        prop_assert_eq!(decode_offset_msg_id(&offset_msg_id(&host, offset)).unwrap(), (host, offset));
        prop_assert_eq!(parse_file_name(&offset_to_file_name(file_offset)), Some(file_offset));
    }
}
