#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use rocketstore_format::index::{
    entry_position, index_file_size, index_key, index_slot, slot_position,
};
use rocketstore_format::{index_key_hash, java_string_hash, sysflag, IndexEntry, IndexHeader};

use super::*;

const T0: i64 = 1_700_000_000_000;

fn req<'a>(phy: i64, ts: i64, uniq: Option<&'a str>, keys: Option<&'a str>) -> IndexRequest<'a> {
    IndexRequest {
        topic: "TopicTest",
        phy_offset: phy,
        store_timestamp: ts,
        sys_flag: 0,
        uniq_key: uniq,
        keys,
    }
}

fn service(root: &Path, slots: u32, entries: u32) -> IndexService {
    IndexService::load(root, slots, entries, true, true, 0).unwrap()
}

fn all(s: &IndexService, key: &str) -> Vec<i64> {
    s.query("TopicTest", key, usize::MAX, 0, i64::MAX)
        .phy_offsets
}

fn read_at(path: &Path, pos: u64, len: usize) -> Vec<u8> {
    let mut f = std::fs::File::open(path).unwrap();
    f.seek(SeekFrom::Start(pos)).unwrap();
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf).unwrap();
    buf
}

fn patch(path: &Path, pos: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(pos)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn header_offsets_match_the_codec() {
    let h = IndexHeader {
        begin_timestamp: 0x0102_0304_0506_0708,
        end_timestamp: 0x1112_1314_1516_1718,
        begin_phy_offset: 0x2122_2324_2526_2728,
        end_phy_offset: 0x3132_3334_3536_3738,
        hash_slot_count: 0x4142_4344,
        index_count: 0x5152_5354,
    };
    let b = h.encode();
    let at8 = |o: usize| i64::from_be_bytes(b[o..o + 8].try_into().unwrap());
    let at4 = |o: usize| i32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(at8(H_BEGIN_TIMESTAMP), h.begin_timestamp);
    assert_eq!(at8(H_END_TIMESTAMP), h.end_timestamp);
    assert_eq!(at8(H_BEGIN_PHY_OFFSET), h.begin_phy_offset);
    assert_eq!(at8(H_END_PHY_OFFSET), h.end_phy_offset);
    assert_eq!(at4(H_HASH_SLOT_COUNT), h.hash_slot_count);
    assert_eq!(at4(H_INDEX_COUNT), h.index_count);
}

/// Spec §16 vectors 14 and 15 with the default 5,000,000 slots / 20,000,000 entries (a 420 MB
/// fallocated file).
#[test]
fn vectors_14_and_15_default_size() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 5_000_000, 20_000_000);
    let ts = 1_700_000_000_123;
    s.build_index(&req(0, ts, None, Some("OrderID001")))
        .unwrap();
    let files = s.files();
    assert_eq!(files.len(), 1);
    let path = &files[0];
    assert_eq!(std::fs::metadata(path).unwrap().len(), 420_000_040);
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
    // Entry #1 at 20,000,060.
    assert_eq!(
        read_at(path, 20_000_060, 20),
        [0x49, 0x63, 0xBB, 0xB6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // Slot 1272886 at 5,091,584 = 1.
    assert_eq!(read_at(path, 5_091_584, 4), [0, 0, 0, 1]);
    let header = IndexHeader {
        begin_timestamp: ts,
        end_timestamp: ts,
        begin_phy_offset: 0,
        end_phy_offset: 0,
        hash_slot_count: 1,
        index_count: 2,
    };
    assert_eq!(read_at(path, 0, 40), header.encode());
    assert_eq!(s.headers(), [header]);
    assert_eq!(
        s.query("TopicTest", "OrderID001", 32, 0, i64::MAX)
            .phy_offsets,
        [0]
    );
    assert!(s
        .query("TopicTest", "OrderID001", 32, ts + 1, i64::MAX)
        .phy_offsets
        .is_empty());
    let r = s.query("TopicTest", "nothing", 32, 0, i64::MAX);
    assert_eq!(
        (
            r.index_last_update_timestamp,
            r.index_last_update_phy_offset
        ),
        (ts, 0)
    );

    // Vector 14: `TopicTest#ogaQmc` hashes to Integer.MIN_VALUE -> key hash 0, slot 0 (byte 40);
    // `TopicTest#KEY1` is in slot 1969516.
    s.build_index(&req(100, ts + 5000, None, Some("ogaQmc KEY1")))
        .unwrap();
    assert_eq!(read_at(path, 40, 4), [0, 0, 0, 2]);
    assert_eq!(read_at(path, slot_position(1_969_516), 4), [0, 0, 0, 3]);
    let e2 = IndexEntry::decode(&read_at(path, 20_000_080, 20)).unwrap();
    assert_eq!(
        e2,
        IndexEntry {
            key_hash: 0,
            phy_offset: 100,
            time_diff: 5,
            prev_index: 0
        }
    );
    assert_eq!(all(&s, "ogaQmc"), [100]);
    assert_eq!(all(&s, "KEY1"), [100]);
    s.flush().unwrap();
    assert_eq!(s.last_full_end_timestamp(), 0);
}

/// The same positions with a small layout (the 1,000 slots / 4,000 entries).
#[test]
fn small_layout_positions() {
    let dir = tempfile::tempdir().unwrap();
    let (slots, entries) = (1000u32, 4000u32);
    let s = service(dir.path(), slots, entries);
    let ts = 1_700_000_000_123;
    s.build_index(&req(0, ts, None, Some("OrderID001")))
        .unwrap();
    let path = &s.files()[0];
    assert_eq!(
        std::fs::metadata(path).unwrap().len(),
        index_file_size(slots, entries)
    );
    let h = index_key_hash("TopicTest#OrderID001");
    assert_eq!(h, 0x4963_BBB6);
    assert_eq!(
        read_at(path, entry_position(slots, 1), 20),
        IndexEntry {
            key_hash: h,
            ..Default::default()
        }
        .encode()
    );
    assert_eq!(entry_position(slots, 1), 40 + 4000 + 20);
    assert_eq!(
        read_at(path, slot_position(index_slot(h, slots)), 4),
        [0, 0, 0, 1]
    );
    assert_eq!(read_at(path, 0, 40), s.headers()[0].encode());
}

#[test]
fn uniq_key_and_keys_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 1000, 4000);
    s.build_index(&req(500, T0, Some("UNIQ1"), Some("  a b  a ")))
        .unwrap();
    // Entries: UNIQ1, a, b, a (empty tokens skipped, duplicates kept).
    let h = s.headers()[0];
    assert_eq!(h.index_count, 5);
    assert_eq!(all(&s, "UNIQ1"), [500]);
    assert_eq!(all(&s, "a"), [500, 500]);
    assert_eq!(all(&s, "b"), [500]);
    assert!(all(&s, "").is_empty());
    assert!(s
        .query("OtherTopic", "a", 10, 0, i64::MAX)
        .phy_offsets
        .is_empty());
    // No keys at all: nothing indexed (the file still exists).
    s.build_index(&req(600, T0, None, None)).unwrap();
    s.build_index(&req(700, T0, None, Some(""))).unwrap();
    assert_eq!(s.headers()[0].index_count, 5);
}

#[test]
fn skip_rules() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 100, 400);
    s.build_index(&req(1000, T0, None, Some("k"))).unwrap();
    // Below endPhyOffset: skipped. Equal (recovery re-dispatches the newest indexed record):
    // keys already in the file are not put twice, missing ones are (strict comparison, §6.3).
    s.build_index(&req(999, T0, None, Some("k"))).unwrap();
    assert_eq!(all(&s, "k"), [1000]);
    s.build_index(&req(1000, T0, None, Some("k"))).unwrap();
    assert_eq!(all(&s, "k"), [1000]);
    s.build_index(&req(1000, T0, None, Some("k k2"))).unwrap();
    assert_eq!(all(&s, "k"), [1000]);
    assert_eq!(all(&s, "k2"), [1000]);
    // ROLLBACK is skipped; PREPARED and COMMIT are indexed.
    for (phy, flag) in [
        (1100, sysflag::TRANSACTION_ROLLBACK_TYPE),
        (1200, sysflag::TRANSACTION_PREPARED_TYPE),
        (
            1300,
            sysflag::TRANSACTION_COMMIT_TYPE | sysflag::BORNHOST_V6_FLAG,
        ),
    ] {
        let mut r = req(phy, T0, None, Some("tx"));
        r.sys_flag = flag;
        s.build_index(&r).unwrap();
    }
    assert_eq!(all(&s, "tx"), [1300, 1200]);
}

#[test]
fn hash_collisions() {
    let dir = tempfile::tempdir().unwrap();
    let slots = 1000;
    let s = service(dir.path(), slots, 4000);
    // Same Java hash ("Aa" and "BB" hash alike, so do the prefixed keys): false positives.
    assert_eq!(
        java_string_hash("TopicTest#Aa"),
        java_string_hash("TopicTest#BB")
    );
    s.build_index(&req(10, T0, None, Some("Aa"))).unwrap();
    s.build_index(&req(20, T0, None, Some("BB"))).unwrap();
    assert_eq!(all(&s, "Aa"), [20, 10]);
    assert_eq!(all(&s, "BB"), [20, 10]);
    // Same slot, different hashes: each query returns only its own key.
    let h = |k: &str| index_key_hash(&index_key("TopicTest", k));
    let base = "k0";
    let other = (1..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| h(k) != h(base) && index_slot(h(k), slots) == index_slot(h(base), slots))
        .unwrap();
    s.build_index(&req(30, T0, None, Some(base))).unwrap();
    s.build_index(&req(40, T0, None, Some(&other))).unwrap();
    s.build_index(&req(50, T0, None, Some(base))).unwrap();
    assert_eq!(all(&s, base), [50, 30]);
    assert_eq!(all(&s, &other), [40]);
    let hdr = s.headers()[0];
    assert_eq!(hdr.index_count, 6);
    assert_eq!(hdr.hash_slot_count, 2);
}

/// `query_with` reports each offset as the walk finds it: exactly the offsets `query` returns,
/// in the same order (newest first), none past `max_num`, none of another key's hash.
#[test]
fn query_with_reports_each_hit_as_found() {
    let dir = tempfile::tempdir().unwrap();
    let slots = 1000;
    let s = service(dir.path(), slots, 4000);
    let h = |k: &str| index_key_hash(&index_key("TopicTest", k));
    let base = "k0";
    let other = (1..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| h(k) != h(base) && index_slot(h(k), slots) == index_slot(h(base), slots))
        .unwrap();
    for (phy, key) in [(10, base), (20, other.as_str()), (30, base), (40, base)] {
        s.build_index(&req(phy, T0, None, Some(key))).unwrap();
    }
    for max_num in [1, 2, 3, 32] {
        let mut seen = Vec::new();
        let r = s.query_with("TopicTest", base, max_num, 0, i64::MAX, |phy| {
            seen.push(phy)
        });
        assert_eq!(r, s.query("TopicTest", base, max_num, 0, i64::MAX));
        assert_eq!(seen, r.phy_offsets, "max_num {max_num}");
        assert_eq!(&[40, 30, 10][..max_num.min(3)], seen.as_slice());
    }
    let mut seen = Vec::new();
    let r = s.query_with("TopicTest", "absent", 32, 0, i64::MAX, |phy| seen.push(phy));
    assert!(seen.is_empty() && r.phy_offsets.is_empty());
}

#[test]
fn roll_when_full_and_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (slots, entries) = (1000u32, 4000u32);
    let s = service(dir.path(), slots, entries);
    // 10,000 records, one key each; 3999 entries per file -> 3 files. A 5 s pause before the
    // record that rolls to file 1 makes its entry #1 time diff visible.
    let ts = |i: i64| T0 + i * 100 + if i >= 3999 { 5_000 } else { 0 };
    for i in 0..10_000i64 {
        let key = if i % 4000 == 7 {
            "dup".to_string()
        } else {
            format!("key{i}")
        };
        s.build_index(&req(i * 10, ts(i), None, Some(&key)))
            .unwrap();
        if i == 3999 {
            // The roll happened on this record: file 0 is full and waits for its flush.
            assert!(s.has_unflushed_full());
        }
    }
    let files = s.files();
    assert_eq!(files.len(), 3);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    let headers = s.headers();
    assert_eq!(
        headers.iter().map(|h| h.index_count).collect::<Vec<_>>(),
        [4000, 4000, 2003]
    );
    // File 1 starts at record 3999; its entry #1's time diff is relative to file 0's end
    // (record 3998): the RocketMQ quirk.
    assert_eq!(headers[1].begin_phy_offset, 3999 * 10);
    assert_eq!(headers[1].begin_timestamp, ts(3999));
    assert_eq!(headers[0].end_timestamp, ts(3998));
    let e1 = IndexEntry::decode(&read_at(&files[1], entry_position(slots, 1), 20)).unwrap();
    assert_eq!(e1.phy_offset, 3999 * 10);
    assert_eq!(i64::from(e1.time_diff), (ts(3999) - ts(3998)) / 1000);
    assert_eq!(e1.time_diff, 5);
    // Every key is found; the duplicate key newest file first.
    for i in [0i64, 1, 3998, 3999, 4000, 7998, 7999, 9999] {
        assert_eq!(all(&s, &format!("key{i}")), [i * 10], "key{i}");
    }
    assert_eq!(all(&s, "dup"), [8007 * 10, 4007 * 10, 7 * 10]);
    assert_eq!(
        s.query("TopicTest", "dup", 2, 0, i64::MAX).phy_offsets,
        [8007 * 10, 4007 * 10]
    );
    // Flushing records the newest full file's end timestamp for the checkpoint.
    assert_eq!(s.last_full_end_timestamp(), 0);
    s.flush().unwrap();
    assert!(!s.has_unflushed_full());
    assert_eq!(s.last_full_end_timestamp(), headers[1].end_timestamp);
    let r = s.query("TopicTest", "x", 1, 0, i64::MAX);
    assert_eq!(
        (
            r.index_last_update_timestamp,
            r.index_last_update_phy_offset
        ),
        (ts(9999), 99_990)
    );
}

#[test]
fn max_num_and_time_window() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 16, 64);
    // Key "w" every 10 s; times are exact multiples of 1 s after the file's begin.
    for i in 0..10i64 {
        s.build_index(&req(i * 100, T0 + i * 10_000, None, Some("w")))
            .unwrap();
    }
    assert_eq!(
        all(&s, "w"),
        (0..10).rev().map(|i| i * 100).collect::<Vec<_>>()
    );
    assert_eq!(
        s.query("TopicTest", "w", 3, 0, i64::MAX).phy_offsets,
        [900, 800, 700]
    );
    assert!(s
        .query("TopicTest", "w", 0, 0, i64::MAX)
        .phy_offsets
        .is_empty());
    let window = s
        .query("TopicTest", "w", 64, T0 + 20_000, T0 + 50_000)
        .phy_offsets;
    assert_eq!(window, [500, 400, 300, 200]);
    let window = s
        .query("TopicTest", "w", 64, T0 + 20_001, T0 + 49_999)
        .phy_offsets;
    assert_eq!(window, [400, 300]);
    assert!(s
        .query("TopicTest", "w", 64, T0 + 100_000, i64::MAX)
        .phy_offsets
        .is_empty());
    assert!(s
        .query("TopicTest", "w", 64, 0, T0 - 1)
        .phy_offsets
        .is_empty());
}

#[test]
fn many_rolls_get_unique_sorted_names() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 2, 2); // one entry per file
    for i in 0..40i64 {
        s.build_index(&req(i, T0 + i, None, Some("k"))).unwrap();
    }
    let names: Vec<String> = s
        .files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 40);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(names.iter().all(|n| n.len() == 17));
    assert_eq!(all(&s, "k"), (0..40).rev().collect::<Vec<_>>());
}

/// Builds a read-only service over one crafted file (slots 16, entries 64) written by `f`.
fn crafted(f: impl FnOnce(&Path)) -> (tempfile::TempDir, IndexService) {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let s = service(dir.path(), 16, 64);
        for i in 0..30i64 {
            s.build_index(&req(
                1000 + i,
                T0 + i * 1000,
                None,
                Some(&format!("c{}", i % 5)),
            ))
            .unwrap();
        }
        s.flush().unwrap();
        s.files()[0].clone()
    };
    // Damage the file only once nothing maps it.
    f(&path);
    let s = IndexService::load(dir.path(), 16, 64, false, true, 0).unwrap();
    (dir, s)
}

fn entry_bytes(key_hash: i32, prev: i32) -> [u8; 20] {
    IndexEntry {
        key_hash,
        phy_offset: 77,
        time_diff: 0,
        prev_index: prev,
    }
    .encode()
}

#[test]
fn corrupted_files_terminate() {
    let hash = |k: &str| index_key_hash(&index_key("TopicTest", k));
    let slot_of = |k: &str| index_slot(hash(k), 16);
    let head_of = |p: &Path, k: &str| {
        u32::from_be_bytes(read_at(p, slot_position(slot_of(k)), 4).try_into().unwrap())
    };

    // c0 is in entries 1, 6, ..., 26. A prev-index cycle 26 -> 21 -> 26: the walk stops at 21.
    let (_d, s) = crafted(|p| {
        assert_eq!(head_of(p, "c0"), 26);
        patch(p, entry_position(16, 21), &entry_bytes(hash("c0"), 26));
    });
    assert_eq!(all(&s, "c0"), [1025, 77]);
    // The head pointing up to a newer entry: stops at the head.
    let (_d, s) = crafted(|p| patch(p, entry_position(16, 26) + 16, &29i32.to_be_bytes()));
    assert_eq!(all(&s, "c0"), [1025]);

    // A self loop.
    let (_d, s) = crafted(|p| {
        let head = head_of(p, "c1");
        patch(
            p,
            entry_position(16, head),
            &entry_bytes(hash("c1"), head as i32),
        );
    });
    assert_eq!(all(&s, "c1"), [77]);

    // A slot value beyond indexCount: nothing from that slot.
    let (_d, s) = crafted(|p| patch(p, slot_position(slot_of("c2")), &1000i32.to_be_bytes()));
    assert!(all(&s, "c2").is_empty());

    // Garbage header (negative indexCount: read as 1, an empty file).
    let (_d, s) = crafted(|p| patch(p, 0, &[0xA5; 40]));
    for k in ["c0", "c1", "c2", "c3", "c4", "zz"] {
        assert!(
            s.query("TopicTest", k, usize::MAX, i64::MIN, i64::MAX)
                .phy_offsets
                .is_empty(),
            "{k}"
        );
    }
    // indexCount far beyond the capacity: walks stay inside the entry table.
    let (_d, s) = crafted(|p| patch(p, 36, &i32::MAX.to_be_bytes()));
    for k in ["c0", "c1", "c2", "c3", "c4"] {
        let r = s.query("TopicTest", k, usize::MAX, i64::MIN, i64::MAX);
        assert_eq!(r.phy_offsets.len(), 6, "{k}");
    }

    // The whole file is garbage (spaces): bounded, only entries inside the file are returned.
    let (_d, s) = crafted(|p| {
        let len = std::fs::metadata(p).unwrap().len() as usize;
        std::fs::write(p, vec![b' '; len]).unwrap();
    });
    let spaces = i64::from_be_bytes([b' '; 8]);
    for k in ["c0", "c1", "zz", "Aa"] {
        let r = s.query("TopicTest", k, usize::MAX, i64::MIN, i64::MAX);
        assert!(r.phy_offsets.iter().all(|&p| p == spaces));
        assert!(r.phy_offsets.len() <= 1);
    }

    // Random garbage everywhere, many keys: every walk ends, every result is an entry's offset.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let (dir, s) = crafted(|p| {
        let len = std::fs::metadata(p).unwrap().len() as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Small numbers keep many chains walkable.
                if seed.is_multiple_of(3) {
                    (seed >> 8) as u8
                } else {
                    (seed % 40) as u8
                }
            })
            .collect();
        std::fs::write(p, bytes).unwrap();
    });
    let file = std::fs::read(&s.files()[0]).unwrap();
    let offsets: BTreeSet<i64> = (1..64u32)
        .map(|n| {
            rocketstore_format::index::read_entry(&file, 16, n)
                .unwrap()
                .phy_offset
        })
        .collect();
    for i in 0..2000 {
        let r = s.query(
            "TopicTest",
            &format!("g{i}"),
            usize::MAX,
            i64::MIN,
            i64::MAX,
        );
        assert!(r.phy_offsets.len() <= 63);
        assert!(r.phy_offsets.iter().all(|p| offsets.contains(p)));
    }
    drop(s);
    // A writable service on the same garbage keeps working without panics.
    let w = IndexService::load(dir.path(), 16, 64, true, true, 0).unwrap();
    for i in 0..200i64 {
        w.build_index(&req(i64::MAX / 2 + i, T0, None, Some(&format!("g{i}"))))
            .unwrap();
    }
    for i in 0..200 {
        assert!(all(&w, &format!("g{i}")).len() <= 63);
    }
}

#[test]
fn abnormal_exit_drops_files_newer_than_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ends;
    {
        let s = service(dir.path(), 4, 4); // 3 entries per file
        for i in 0..8i64 {
            s.build_index(&req(i * 10, T0 + i * 1000, None, Some("k")))
                .unwrap();
        }
        ends = s
            .headers()
            .iter()
            .map(|h| h.end_timestamp)
            .collect::<Vec<_>>();
        assert_eq!(ends, [T0 + 2000, T0 + 5000, T0 + 7000]);
        s.flush().unwrap();
    }
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d.join("index"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let on_disk = names(dir.path());
    // Normal exit: everything loads.
    let normal = IndexService::load(dir.path(), 4, 4, false, true, ends[0]).unwrap();
    assert_eq!(normal.files().len(), 3);
    assert_eq!(normal.last_full_end_timestamp(), ends[1]);
    // Abnormal exit, read-only: newer files are kept (the store checks every hit against its
    // record and covers the tail with an in-memory key map), nothing deleted.
    let s = IndexService::load(dir.path(), 4, 4, false, false, ends[0]).unwrap();
    assert_eq!(s.files().len(), 3);
    assert_eq!(all(&s, "k"), all(&normal, "k"));
    assert_eq!(names(dir.path()), on_disk);
    // Abnormal exit, writable: they are deleted; indexing resumes in a new file.
    let s = IndexService::load(dir.path(), 4, 4, true, false, ends[0]).unwrap();
    assert_eq!(s.files().len(), 1);
    assert_eq!(names(dir.path()).len(), 1);
    s.build_index(&req(30, T0 + 3000, None, Some("k"))).unwrap();
    assert_eq!(s.files().len(), 2);
    assert_eq!(all(&s, "k"), [30, 20, 10, 0]);
}

#[test]
fn load_refuses_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("index");
    std::fs::create_dir(&idx).unwrap();
    std::fs::write(idx.join("20231114221320004"), vec![0u8; 100]).unwrap();
    assert!(matches!(
        IndexService::load(dir.path(), 4, 4, false, true, 0),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(idx.join("20231114221320004")).unwrap();
    std::fs::write(idx.join("notes.txt"), b"x").unwrap();
    assert!(matches!(
        IndexService::load(dir.path(), 4, 4, false, true, 0),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(idx.join("notes.txt")).unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::os::unix::fs::symlink(outside.path(), idx.join("20231114221320005")).unwrap();
    assert!(matches!(
        IndexService::load(dir.path(), 4, 4, false, true, 0),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(idx.join("20231114221320005")).unwrap();
    // An empty last file (a crash while creating it): ignored read-only, deleted writable.
    std::fs::write(idx.join("20231114221320006"), b"").unwrap();
    assert!(IndexService::load(dir.path(), 4, 4, false, true, 0)
        .unwrap()
        .files()
        .is_empty());
    assert!(idx.join("20231114221320006").exists());
    assert!(IndexService::load(dir.path(), 4, 4, true, true, 0)
        .unwrap()
        .files()
        .is_empty());
    assert!(!idx.join("20231114221320006").exists());
    // Impossible layouts.
    assert!(matches!(
        IndexService::load(dir.path(), 0, 4, false, true, 0),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        IndexService::load(dir.path(), 4, 1, false, true, 0),
        Err(Error::Config { .. })
    ));
    // Read-only: building is refused.
    let ro = IndexService::load(dir.path(), 4, 4, false, true, 0).unwrap();
    assert!(matches!(
        ro.build_index(&req(0, T0, None, Some("k"))),
        Err(Error::ReadOnly { .. })
    ));
}

#[test]
fn delete_expired_and_truncate_after() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 4, 4); // 3 entries per file
    for i in 0..12i64 {
        s.build_index(&req(i * 10, T0 + i * 1000, None, Some("k")))
            .unwrap();
    }
    // Files: [0..20], [30..50], [60..80], [90..110].
    assert_eq!(s.files().len(), 4);
    assert_eq!(s.delete_expired(20).unwrap(), 0);
    assert_eq!(s.delete_expired(21).unwrap(), 1);
    assert_eq!(s.files().len(), 3);
    assert_eq!(s.delete_expired(1_000_000).unwrap(), 2);
    assert_eq!(s.files().len(), 1, "never the last file");
    assert_eq!(all(&s, "k"), [110, 100, 90]);
    for i in 12..20i64 {
        s.build_index(&req(i * 10, T0 + i * 1000, None, Some("k")))
            .unwrap();
    }
    // Files: [90..110], [120..140], [150..170], [180..190].
    assert_eq!(s.files().len(), 4);
    let paths = s.files();
    s.truncate_after(150, &|_| None).unwrap();
    assert_eq!(s.files(), paths[..2]);
    assert!(!paths[2].exists() && !paths[3].exists());
    assert_eq!(all(&s, "k"), [140, 130, 120, 110, 100, 90]);
    // Re-dispatch after the truncation point rebuilds the index (a new file, the last is full).
    s.build_index(&req(150, T0 + 15_000, None, Some("k")))
        .unwrap();
    assert_eq!(all(&s, "k")[0], 150);
    s.destroy_all().unwrap();
    assert!(s.files().is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path().join("index")).unwrap().count(),
        0
    );
}

#[test]
fn concurrent_queries_while_building() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(service(dir.path(), 64, 512));
    let keys: Vec<String> = (0..50).map(|i| format!("ck{i}")).collect();
    let hashes: Vec<i32> = keys
        .iter()
        .map(|k| index_key_hash(&index_key("TopicTest", k)))
        .collect();
    let writer = {
        let s = Arc::clone(&s);
        let keys = keys.clone();
        std::thread::spawn(move || {
            for i in 0..20_000i64 {
                let k = &keys[(i % 50) as usize];
                s.build_index(&req(i, T0 + i, None, Some(k))).unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let s = Arc::clone(&s);
            let keys = keys.clone();
            let hashes = hashes.clone();
            std::thread::spawn(move || {
                let mut n = 0usize;
                while n < 3000 {
                    let k = (n * 7 + r) % 50;
                    for phy in s.query("TopicTest", &keys[k], 64, 0, i64::MAX).phy_offsets {
                        assert!((0..20_000).contains(&phy));
                        assert_eq!(
                            hashes[(phy % 50) as usize],
                            hashes[k],
                            "phy {phy} for key {k}"
                        );
                    }
                    n += 1;
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(
        s.query("TopicTest", "ck3", 3, 0, i64::MAX).phy_offsets,
        [19_953, 19_903, 19_853]
    );
}

#[test]
fn bump_digits_keeps_width() {
    assert_eq!(bump_digits("0099"), "0100");
    assert_eq!(bump_digits("20231114221320999"), "20231114221321000");
    assert_eq!(bump_digits("99"), "100");
}

#[test]
fn prefix_hash_continues_to_the_key_hash() {
    for (t, k) in [
        ("BenchTopic", "7F000001000018B4AAC2A1B2C3D40000"),
        ("", ""),
        ("t\u{e9}", "\u{1F600}key"),
        ("TopicTest", "ORDER-1"),
        ("polygenelubricants", "GydZG_"),
    ] {
        assert_eq!(
            index_key_hash_after(index_prefix_hash(t), k),
            rocketstore_format::index_key_hash_of(t, k),
            "{t}#{k}"
        );
    }
}

#[test]
fn finds_agrees_with_query_across_files() {
    // Three files (small), a key repeated 70 times, colliding slots (few slots), unique keys.
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 7, 100);
    let mut written: Vec<(i64, String)> = Vec::new();
    for i in 0..250i64 {
        let key = if i % 3 == 0 {
            "hot".to_string()
        } else {
            format!("k{i}")
        };
        s.build_index(&req(i * 10, T0 + i, None, Some(&key)))
            .unwrap();
        written.push((i * 10, key));
    }
    assert!(s.files().len() >= 3);
    for max in [1usize, 5, 64] {
        for (phy, key) in &written {
            let hits = s.query("TopicTest", key, max, 0, i64::MAX).phy_offsets;
            let want = if hits.contains(phy) {
                Ok(())
            } else {
                Err(hits.len())
            };
            assert_eq!(
                s.finds("TopicTest", key, *phy, max),
                want,
                "{key} at {phy}, max {max}"
            );
        }
        let none = s.query("TopicTest", "absent", max, 0, i64::MAX).phy_offsets;
        assert_eq!(s.finds("TopicTest", "absent", 5, max), Err(none.len()));
    }
    // A wrong offset of a present key: every hit counted, not found.
    assert_eq!(s.finds("TopicTest", "k1", 11, 64), Err(1));
}

/// `stage` (each record's keys put when the next record is staged, the last by `put_staged`)
/// writes the same files as `build` per record: interleaved topics (more than the prefix
/// cache holds), records with no key, a UNIQ_KEY only, several and empty KEYS tokens, a
/// ROLLBACK record, a record below the index's end (skipped), and rolls every few records.
#[test]
fn staged_puts_write_the_same_files_as_build() {
    let topics: Vec<String> = (0..20).map(|t| format!("Topic{t}")).collect();
    let keys = [
        None,
        Some("k1"),
        Some("a b  c"),
        Some(" "),
        Some("x y z w v u"),
    ];
    let mut reqs = Vec::new();
    for i in 0..600i64 {
        let uniq = (i % 3 != 0).then(|| format!("U{i:031}"));
        let phy = if i == 300 { 10 } else { i * 100 };
        let sys_flag = if i % 97 == 5 {
            sysflag::TRANSACTION_ROLLBACK_TYPE
        } else {
            0
        };
        reqs.push((
            topics[(i as usize * 7) % topics.len()].as_str(),
            phy,
            T0 + i * 10,
            sys_flag,
            uniq,
            keys[i as usize % keys.len()],
        ));
    }
    type Rec<'a> = (&'a str, i64, i64, i32, Option<String>, Option<&'static str>);
    fn as_req<'a>(r: &'a Rec<'a>) -> IndexRequest<'a> {
        IndexRequest {
            topic: r.0,
            phy_offset: r.1,
            store_timestamp: r.2,
            sys_flag: r.3,
            uniq_key: r.4.as_deref(),
            keys: r.5,
        }
    }
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (service(da.path(), 13, 40), service(db.path(), 13, 40));
    for r in &reqs {
        a.build_index(&as_req(r)).unwrap();
    }
    {
        let mut batch = b.batch().unwrap();
        for r in &reqs {
            batch.stage(&as_req(r)).unwrap();
        }
        batch.put_staged().unwrap();
        batch.put_staged().unwrap(); // nothing left: a no-op
    }
    let (fa, fb) = (a.files(), b.files());
    assert!(fa.len() > 10, "{} files", fa.len());
    assert_eq!(fa.len(), fb.len());
    for (x, y) in fa.iter().zip(&fb) {
        assert!(
            std::fs::read(x).unwrap() == std::fs::read(y).unwrap(),
            "{x:?} vs {y:?}"
        );
    }
    for key in ["k1", "a", "c", "z", "u", "U000000000000000000000000000001"] {
        for t in &topics {
            assert_eq!(
                a.query(t, key, usize::MAX, 0, i64::MAX).phy_offsets,
                b.query(t, key, usize::MAX, 0, i64::MAX).phy_offsets,
                "{t}#{key}"
            );
        }
    }
}

/// The dispatcher creates index files without waiting for the disk; the next flush makes the
/// creation durable (directory and file) before it msyncs the file.
#[test]
fn file_creation_is_synced_by_the_next_flush_not_by_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 64, 4);
    s.build_index(&req(100, T0, Some("U0"), None)).unwrap();
    let pending = |s: &IndexService| s.unsynced.pending();
    // `<root>/index` (its parent gained an entry) and the file.
    assert_eq!(pending(&s), 2);
    s.flush().unwrap();
    assert_eq!(pending(&s), 0);
    // A roll creates the next file: pending again until the next flush.
    for i in 1..8 {
        s.build_index(&req(100 + i, T0 + i, Some(&format!("U{i}")), None))
            .unwrap();
    }
    assert!(s.snapshot().len() >= 2);
    assert!(pending(&s) >= 1);
    s.flush().unwrap();
    assert_eq!(pending(&s), 0);
    assert_eq!(all(&s, "U7"), vec![107]);
}
