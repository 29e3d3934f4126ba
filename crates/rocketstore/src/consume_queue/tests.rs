#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rocketstore_format::{tags_code, CqUnit};

use super::*;

const TOPIC: &str = "TopicTest";
/// 300 units per file (the validator configuration).
const SMALL: u64 = 6000;

fn unit(phy: i64, size: i32, tag: i64) -> CqUnit {
    CqUnit {
        phy_offset: phy,
        size,
        tags_code: tag,
    }
}

/// Unit `i` of the synthetic queues: phy `base + i*100`, size 100, tag `i`.
fn nth(i: i64, base: i64) -> CqUnit {
    unit(base + i * 100, 100, i)
}

fn open(root: &Path, file_size: u64) -> ConsumeQueue {
    let q = ConsumeQueue::open(root, TOPIC, 0, file_size, true).unwrap();
    q.recover().unwrap();
    q
}

fn fill(q: &ConsumeQueue, from: i64, to: i64) {
    for i in from..to {
        assert!(q.put(nth(i, 0), i).unwrap(), "put {i}");
    }
}

fn file_path(root: &Path, from: u64) -> PathBuf {
    root.join("consumequeue")
        .join(TOPIC)
        .join("0")
        .join(offset_to_file_name(from))
}

fn patch(path: &Path, pos: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(pos)).unwrap();
    f.write_all(bytes).unwrap();
}

fn dir_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Spec §16 vector 12: the unit bytes, three pre-fill units at 0/20/40, min 3 / max 4.
#[test]
fn vector_12_unit_bytes_and_prefill() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), 6_000_000);
    let u = unit(1_073_741_824, 124, tags_code(Some("TagA")));
    assert!(q.put(u, 3).unwrap());
    assert_eq!((q.min_offset(), q.max_offset()), (3, 4));
    assert_eq!(q.get(3), Some(u));
    assert_eq!(q.get(2), None);
    assert_eq!(q.get(4), None);
    assert_eq!(q.last_unit(), Some((3, u)));
    assert_eq!(q.max_physic_offset(), 1_073_741_824 + 124);
    let bytes = std::fs::read(file_path(dir.path(), 0)).unwrap();
    assert_eq!(bytes.len(), 6_000_000);
    let blank = [
        0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    for pos in [0, 20, 40] {
        assert_eq!(bytes[pos..pos + 20], blank);
    }
    assert_eq!(
        bytes[60..80],
        [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0x7C, 0, 0, 0, 0, 0, 0x27, 0xA8, 0x07]
    );
    assert!(bytes[80..].iter().all(|&b| b == 0));
    drop(q);

    // After a restart: RocketMQ HEAD keeps min 0 when the commit log starts at 0 (the first unit
    // at the previous min 0 is a pre-fill unit with phy 0 >= 0), and finds 3 otherwise.
    let q = open(dir.path(), 6_000_000);
    assert_eq!(q.max_offset(), 4);
    assert_eq!(q.max_physic_offset(), 1_073_741_824 + 124);
    q.correct_min_offset(0);
    assert_eq!(q.min_offset(), 0);
    assert_eq!(q.get(0), Some(CqUnit::PREFILL));
    q.correct_min_offset(1_073_741_824);
    assert_eq!(q.min_offset(), 3);
}

/// Spec §5.4 quirk: first file `00000000000000006000` (units 300..), 6 pre-fill and 142 real
/// units from 306. Before a restart min is 306; after it, with commit-log min 0, HEAD reports 304.
#[test]
fn prefill_quirk_after_restart_reports_304() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    for i in 306..448 {
        assert!(q.put(nth(i, 1000), i).unwrap());
    }
    assert_eq!((q.min_offset(), q.max_offset()), (306, 448));
    assert_eq!(q.file_count(), 1);
    assert!(file_path(dir.path(), 6000).exists());
    assert!(!file_path(dir.path(), 0).exists());
    drop(q);

    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 448);
    q.correct_min_offset(0);
    assert_eq!(q.min_offset(), 304);
    assert!(q.min_offset() <= q.max_offset());
    assert_eq!(q.get(304), Some(CqUnit::PREFILL));
    drop(q);

    // With the commit log starting at the first real record the min is the real start.
    let q = open(dir.path(), SMALL);
    q.correct_min_offset(nth(306, 1000).phy_offset as u64);
    assert_eq!(q.min_offset(), 306);
}

#[test]
fn put_is_idempotent_and_never_leaves_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 10);
    // Re-dispatch of an already built unit: skipped.
    assert!(!q.put(nth(5, 0), 5).unwrap());
    assert!(!q.put(nth(9, 0), 9).unwrap());
    // A new record for an offset that is already taken: skipped (expect < current).
    assert!(!q.put(nth(50, 0), 3).unwrap());
    assert_eq!(q.max_offset(), 10);
    // A gap: typed corruption naming the expected offset, nothing written.
    match q.put(nth(12, 0), 12) {
        Err(Error::Corruption {
            kind: CorruptionKind::Invalid(msg),
            ..
        }) => {
            assert!(msg.contains("next offset to write is 10"), "{msg}");
        }
        other => panic!("expected a gap error, got {other:?}"),
    }
    assert_eq!(q.max_offset(), 10);
    assert!(q.put(nth(10, 0), 10).unwrap());
    assert_eq!(q.max_offset(), 11);
    assert!(matches!(
        q.put(unit(0, 0, 0), 11),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        q.put(unit(-1, 10, 0), 11),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        q.put(CqUnit::PREFILL, 11),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        q.put(nth(11, 0), -1),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(q.max_offset(), 11);
}

#[test]
fn get_and_units_from_across_file_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    assert_eq!(q.units_per_file(), 300);
    assert_eq!(q.max_offset(), 0);
    assert_eq!(q.last_unit(), None);
    fill(&q, 0, 1000);
    assert_eq!(q.file_count(), 4);
    for from in [0, 6000, 12000, 18000] {
        assert!(file_path(dir.path(), from).exists());
    }
    for i in 0..1000 {
        assert_eq!(q.get(i), Some(nth(i, 0)), "unit {i}");
    }
    assert_eq!(q.get(1000), None);
    assert_eq!(q.get(-1), None);
    let offsets = |v: Vec<(i64, CqUnit)>| v.iter().map(|(o, _)| *o).collect::<Vec<_>>();
    assert_eq!(
        offsets(q.units_from(295, 100)),
        (295..300).collect::<Vec<_>>()
    );
    assert_eq!(
        offsets(q.units_from(300, 10)),
        (300..310).collect::<Vec<_>>()
    );
    assert_eq!(
        offsets(q.units_from(990, 100)),
        (990..1000).collect::<Vec<_>>()
    );
    assert!(q.units_from(1000, 5).is_empty());
    assert!(q.units_from(-1, 5).is_empty());
    assert!(q.units_from(10, 0).is_empty());
    for (o, u) in q.units_from(599, 3) {
        assert_eq!(u, nth(o, 0));
    }
    assert_eq!(q.last_unit(), Some((999, nth(999, 0))));
    assert_eq!(q.max_physic_offset(), 999 * 100 + 100);
}

#[test]
fn recovery_stops_at_zeroed_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 10);
    drop(q);
    let q = ConsumeQueue::open(dir.path(), TOPIC, 0, SMALL, true).unwrap();
    // Loaded files are not writable before recovery.
    assert!(matches!(
        q.put(nth(10, 0), 10),
        Err(Error::Corruption { .. })
    ));
    q.recover().unwrap();
    assert_eq!((q.min_offset(), q.max_offset()), (0, 10));
    assert_eq!(q.max_physic_offset(), 1000);
    assert!(q.put(nth(10, 0), 10).unwrap());
}

#[test]
fn recovery_stops_at_garbage_and_zero_fills_it() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 10);
    drop(q);
    let path = file_path(dir.path(), 0);
    // Garbage: a unit with a negative phy offset, then one that would look valid.
    let mut garbage = vec![0xFFu8; 20];
    garbage.extend_from_slice(&nth(11, 0).encode());
    patch(&path, 200, &garbage);

    // Read-only: same end, not one byte changed.
    let before = std::fs::read(&path).unwrap();
    let ro = ConsumeQueue::open(dir.path(), TOPIC, 0, SMALL, false).unwrap();
    ro.recover().unwrap();
    assert_eq!(ro.max_offset(), 10);
    assert!(matches!(
        ro.put(nth(10, 0), 10),
        Err(Error::ReadOnly { .. })
    ));
    drop(ro);
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 10);
    assert_eq!(q.max_physic_offset(), 1000);
    let after = std::fs::read(&path).unwrap();
    assert!(
        after[200..].iter().all(|&b| b == 0),
        "stale tail is zero-filled"
    );
    assert_eq!(after[..200], before[..200]);
    assert!(q.put(nth(10, 0), 10).unwrap());
}

#[test]
fn recovery_stops_at_a_size_zero_unit_and_deletes_later_files() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 700);
    drop(q);
    // Unit 450 (file 1, position 150*20) gets size 0.
    patch(
        &file_path(dir.path(), 6000),
        150 * 20 + 8,
        &0i32.to_be_bytes(),
    );
    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 450);
    assert_eq!(q.max_physic_offset(), 449 * 100 + 100);
    assert_eq!(q.file_count(), 2);
    assert!(!file_path(dir.path(), 12000).exists());
    assert_eq!(q.get(449), Some(nth(449, 0)));
    assert_eq!(q.get(450), None);
    assert!(q.put(nth(450, 0), 450).unwrap());
}

#[test]
fn recovery_starts_at_the_third_file_from_last() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 1500); // 5 full files
    drop(q);
    // Damage in file 0: outside the scanned window (files 2..4), so not seen (RocketMQ rule).
    patch(&file_path(dir.path(), 0), 20 * 20, &[0xFF; 20]);
    // All scanned files are full and valid: max is the end of the last one.
    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 1500);
    assert_eq!(q.file_count(), 5);
    assert_eq!(q.max_physic_offset(), 1499 * 100 + 100);
    assert!(q.put(nth(1500, 0), 1500).unwrap());
    assert_eq!(q.file_count(), 6);
}

#[test]
fn recovery_of_a_negative_phy_at_a_file_start_truncates_there() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 700);
    drop(q);
    patch(&file_path(dir.path(), 6000), 0, &(-5i64).to_be_bytes());
    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 300);
    assert_eq!(q.max_physic_offset(), 30000);
    // The empty file 1 stays (RocketMQ keeps the file holding the end), file 2 is gone.
    assert_eq!(q.file_count(), 2);
    assert!(!file_path(dir.path(), 12000).exists());
    assert!(q.put(nth(300, 0), 300).unwrap());
    assert_eq!(q.get(300), Some(nth(300, 0)));
}

#[test]
fn truncate_dirty_cases() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 750);
    assert_eq!(q.file_count(), 3);

    // Beyond the end: nothing changes.
    q.truncate_dirty(10_000_000).unwrap();
    assert_eq!((q.max_offset(), q.file_count()), (750, 3));

    // Inside file 1: file 2 (first unit 600 >= limit) is deleted, file 1 keeps 300..499.
    q.truncate_dirty(nth(500, 0).phy_offset as u64).unwrap();
    assert_eq!((q.max_offset(), q.file_count()), (500, 2));
    assert_eq!(q.max_physic_offset(), 50_000);
    assert!(!file_path(dir.path(), 12000).exists());
    let f1 = std::fs::read(file_path(dir.path(), 6000)).unwrap();
    assert!(f1[200 * 20..].iter().all(|&b| b == 0));
    assert!(q.put(nth(500, 0), 500).unwrap());

    // At a file boundary: file 1 starts at the limit and goes; file 0 stays full.
    q.truncate_dirty(nth(300, 0).phy_offset as u64).unwrap();
    assert_eq!((q.max_offset(), q.file_count()), (300, 1));
    assert_eq!(q.max_physic_offset(), 30_000);
    assert!(q.put(nth(300, 0), 300).unwrap());
    assert_eq!(q.file_count(), 2);

    // Everything: all files deleted; the next put starts a new (pre-filled) first file.
    q.truncate_dirty(0).unwrap();
    assert_eq!((q.min_offset(), q.max_offset(), q.file_count()), (0, 0, 0));
    assert_eq!(q.max_physic_offset(), -1);
    assert!(!file_path(dir.path(), 0).exists());
    assert!(q.put(nth(750, 0), 750).unwrap());
    assert_eq!((q.min_offset(), q.max_offset()), (750, 751));
    assert!(file_path(dir.path(), 12000).exists());
    assert_eq!(q.get(750), Some(nth(750, 0)));
}

#[test]
fn truncate_keeps_prefill_but_not_as_max_physic() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    assert!(q.put(unit(1000, 100, 0), 3).unwrap());
    assert!(q.put(unit(1100, 100, 0), 4).unwrap());
    q.truncate_dirty(1000).unwrap();
    assert_eq!(q.max_offset(), 3);
    assert_eq!(q.min_offset(), 3);
    assert_eq!(q.max_physic_offset(), -1);
    assert!(q.put(unit(1000, 100, 0), 3).unwrap());
    assert_eq!((q.min_offset(), q.max_offset()), (3, 4));
    // Reopened after the truncation, a queue holding only pre-fill units is not "built" up to
    // 2^31 - 1 (RocketMQ's maxPhysicOffset would be 0 + 0x7FFFFFFF).
    q.truncate_dirty(1000).unwrap();
    drop(q);
    let q = open(dir.path(), SMALL);
    assert_eq!(q.max_offset(), 3);
    assert_eq!(q.max_physic_offset(), -1);
    assert!(q.put(unit(1000, 100, 0), 3).unwrap());
}

#[test]
fn delete_expired_never_deletes_the_last_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    fill(&q, 0, 900);
    assert_eq!(q.delete_expired(0).unwrap(), 0);
    // File 0's last unit (phy 29900) is below 35000; file 1's (59900) is not.
    assert_eq!(q.delete_expired(35_000).unwrap(), 1);
    assert!(!file_path(dir.path(), 0).exists());
    assert_eq!(q.min_offset(), 350);
    assert_eq!(q.get(349), None);
    assert_eq!(q.get(350), Some(nth(350, 0)));
    // Everything is below the commit log: only non-last files go, the queue becomes empty.
    assert_eq!(q.delete_expired(1_000_000_000).unwrap(), 1);
    assert_eq!(q.file_count(), 1);
    assert_eq!(q.delete_expired(1_000_000_000).unwrap(), 0);
    assert_eq!((q.min_offset(), q.max_offset()), (900, 900));
    assert_eq!(q.get(899), None);
    assert_eq!(q.last_unit(), Some((899, nth(899, 0))));
    assert!(q.put(nth(900, 0), 900).unwrap());
    assert_eq!((q.min_offset(), q.max_offset()), (900, 901));
}

#[test]
fn correct_min_offset_binary_search_and_empty_queue() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    q.correct_min_offset(5);
    assert_eq!(
        (q.min_offset(), q.max_offset(), q.max_physic_offset()),
        (0, 0, -1)
    );
    fill(&q, 0, 250);
    for (cl_min, want) in [
        (0u64, 0i64),
        (100, 1),
        (150, 2),
        (12_300, 123),
        (24_900, 249),
    ] {
        let q = open(dir.path(), SMALL);
        q.correct_min_offset(cl_min);
        assert_eq!(q.min_offset(), want, "commitlog min {cl_min}");
    }
    // Last unit below the commit log min: min == max.
    let q2 = open(dir.path(), SMALL);
    q2.correct_min_offset(25_000);
    assert_eq!((q2.min_offset(), q2.max_offset()), (250, 250));
    // The previous min is kept when its unit is still valid (HEAD's "intact" shortcut).
    q.correct_min_offset(12_300);
    assert_eq!(q.min_offset(), 123);
    q.correct_min_offset(100);
    assert_eq!(q.min_offset(), 123);
}

/// `offset_by_time` against a brute-force model: for non-decreasing store times, LOWER is the
/// first offset with time >= ts (max if none) and UPPER the last with time <= ts (min if none).
#[test]
fn offset_by_time_lower_and_upper() {
    let dir = tempfile::tempdir().unwrap();
    // 10 units per file, 35 units: 4 files; runs of 3 equal timestamps cross file boundaries.
    let q = open(dir.path(), 200);
    let times: Vec<i64> = (0..35).map(|i| 1000 + (i / 3) * 10).collect();
    fill(&q, 0, 35);
    assert_eq!(q.file_count(), 4);
    let store_time = |phy: i64, _size: i32| times.get((phy / 100) as usize).copied();
    let lower = |ts: i64| times.iter().position(|&t| t >= ts).map_or(35, |i| i as i64);
    let upper = |ts: i64| times.iter().rposition(|&t| t <= ts).map_or(0, |i| i as i64);
    for ts in 990..=1130 {
        assert_eq!(
            q.offset_by_time(ts, false, &store_time, 0),
            lower(ts),
            "LOWER {ts}"
        );
        assert_eq!(
            q.offset_by_time(ts, true, &store_time, 0),
            upper(ts),
            "UPPER {ts}"
        );
    }
    // Exact runs: 1030 is at 9, 10, 11 (crossing the file 0/1 boundary).
    assert_eq!(q.offset_by_time(1030, false, &store_time, 0), 9);
    assert_eq!(q.offset_by_time(1030, true, &store_time, 0), 11);

    // Unavailable records read as time -1: the answer is clamped into [min, max].
    let gone = |_: i64, _: i32| None;
    let r = q.offset_by_time(1050, false, &gone, 0);
    assert!((0..=35).contains(&r));

    // Units below the commit log min. HEAD's correctMinOffset only searches the first file, so
    // with file 0 wholly below the commit log it keeps the old min; deletion removes file 0 and
    // then finds 12. Results are clamped to the min.
    q.correct_min_offset(1200);
    assert_eq!(q.min_offset(), 0);
    assert_eq!(q.delete_expired(1200).unwrap(), 1);
    assert_eq!(q.min_offset(), 12);
    assert_eq!(q.offset_by_time(990, false, &store_time, 1200), 12);
    assert_eq!(q.offset_by_time(990, true, &store_time, 1200), 12);
    assert_eq!(q.offset_by_time(1070, false, &store_time, 1200), 21);
    assert_eq!(q.offset_by_time(1070, true, &store_time, 1200), 23);
}

#[test]
fn offset_by_time_all_equal_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), 200);
    fill(&q, 0, 35);
    let same = |_: i64, _: i32| Some(5000);
    assert_eq!(q.offset_by_time(5000, false, &same, 0), 0);
    assert_eq!(q.offset_by_time(5000, true, &same, 0), 34);
    assert_eq!(q.offset_by_time(4999, false, &same, 0), 0);
    assert_eq!(q.offset_by_time(5001, false, &same, 0), 35);
    assert_eq!(q.offset_by_time(5001, true, &same, 0), 34);
    let empty = open(tempfile::tempdir().unwrap().path(), 200);
    assert_eq!(empty.offset_by_time(5000, false, &same, 0), 0);
}

#[test]
fn flush_and_destroy() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), SMALL);
    assert!(!q.flush(0).unwrap());
    fill(&q, 0, 10);
    assert!(q.flush(0).unwrap());
    assert!(!q.flush(0).unwrap());
    q.destroy().unwrap();
    assert_eq!(
        (q.max_offset(), q.file_count(), q.max_physic_offset()),
        (0, 0, -1)
    );
    assert!(!q.dir().exists());
}

#[test]
fn store_load_skips_foreign_entries_and_refuses_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    {
        let s = ConsumeQueueStore::load(root, SMALL, true).unwrap();
        assert!(s.all().is_empty());
        assert!(!root.join("consumequeue").exists(), "load creates nothing");
        for (t, q) in [("TopicA", 0), ("TopicA", 1), ("%RETRY%group", 0)] {
            let cq = s.find_or_create(t, q).unwrap();
            assert!(cq.put(nth(q as i64, 0), 0).unwrap());
        }
        // The same queue twice is the same object.
        assert!(Arc::ptr_eq(
            &s.find_or_create("TopicA", 1).unwrap(),
            &s.get("TopicA", 1).unwrap()
        ));
    }
    let cq = root.join("consumequeue");
    // A topic directory whose name is not UTF-8 is skipped; any UTF-8 name a broker could have
    // written (here "a.b", outside the client's character set) is a topic.
    let not_utf8 = {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b"bad\xFFtopic").to_os_string()
    };
    std::fs::create_dir_all(cq.join(&not_utf8).join("0")).unwrap();
    std::fs::write(
        cq.join(&not_utf8).join("0").join(offset_to_file_name(0)),
        b"junk",
    )
    .unwrap();
    for junk in ["a.b/0", "TopicA/abc", "TopicA/-1", "TopicA/07", "TopicA/+2"] {
        std::fs::create_dir_all(cq.join(junk)).unwrap();
    }
    std::fs::write(cq.join("README"), b"x").unwrap();
    std::fs::write(cq.join("TopicA/5"), b"x").unwrap();
    let before = dir_bytes(&cq);

    let s = ConsumeQueueStore::load(root, SMALL, false).unwrap();
    s.recover_all().unwrap();
    let names: Vec<(String, i32)> = s
        .all()
        .iter()
        .map(|q| (q.topic().to_string(), q.queue_id()))
        .collect();
    assert_eq!(
        names,
        [
            ("%RETRY%group".to_string(), 0),
            ("TopicA".into(), 0),
            ("TopicA".into(), 1),
            ("a.b".into(), 0)
        ]
    );
    assert_eq!(s.get("TopicA", 1).unwrap().get(0), Some(nth(1, 0)));
    assert_eq!(s.max_physic_offset(), 200);
    drop(s);
    assert_eq!(dir_bytes(&cq), before, "a read-only load changes nothing");

    // A symlinked queue dir, a symlinked topic dir, a RocksDB layout: refused.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), cq.join("TopicA/9")).unwrap();
    assert!(matches!(
        ConsumeQueueStore::load(root, SMALL, false),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(cq.join("TopicA/9")).unwrap();
    std::os::unix::fs::symlink(outside.path(), cq.join("TopicB")).unwrap();
    assert!(matches!(
        ConsumeQueueStore::load(root, SMALL, false),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(cq.join("TopicB")).unwrap();
    std::fs::write(cq.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
    assert!(matches!(
        ConsumeQueueStore::load(root, SMALL, false),
        Err(Error::UnsupportedFormat { .. })
    ));
    std::fs::remove_file(cq.join("CURRENT")).unwrap();
    assert!(ConsumeQueueStore::load(root, SMALL, false).is_ok());
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());

    // `consumequeue` itself a symlink: refused.
    let other = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&cq, other.path().join("consumequeue")).unwrap();
    assert!(matches!(
        ConsumeQueueStore::load(other.path(), SMALL, false),
        Err(Error::UnsupportedFormat { .. })
    ));
}

/// Reliability G3: a hostile topic never builds a path outside `<root>/consumequeue`.
#[test]
fn find_or_create_refuses_hostile_topics() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let s = ConsumeQueueStore::load(&root, SMALL, true).unwrap();
    let too_long = "\u{e9}".repeat(128); // 256 bytes: over the file-name limit
    for bad in [
        "../../x",
        "..",
        ".",
        "a/b",
        "/abs",
        "",
        "t\0x",
        too_long.as_str(),
    ] {
        assert!(
            matches!(s.find_or_create(bad, 0), Err(Error::InvalidArgument { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        s.find_or_create("T", -1),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        ConsumeQueue::open(&root, "../x", 0, SMALL, true),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing created next to the root"
    );
    assert!(!root.join("consumequeue").exists());
    // A topic outside the client's character set that is a safe directory name (as a broker
    // of another implementation writes it) is a queue like any other.
    let foreign = "T\u{f3}pico-\u{4e2d}\u{6587}-\u{1f600}";
    let q = s.find_or_create(foreign, 0).unwrap();
    assert!(q.put(nth(0, 0), 0).unwrap());
    assert!(root.join("consumequeue").join(foreign).join("0").is_dir());
    assert!(matches!(
        ConsumeQueue::open(&root, "T", 0, 30, true),
        Err(Error::Config { .. })
    ));
}

#[test]
fn store_wide_operations() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let s = ConsumeQueueStore::load(root, SMALL, true).unwrap();
    assert_eq!(s.max_physic_offset(), -1);
    let a = s.find_or_create("A", 0).unwrap();
    let b = s.find_or_create("B", 3).unwrap();
    for i in 0..700 {
        // Interleaved: A gets even records, B odd ones.
        let q = if i % 2 == 0 { &a } else { &b };
        let off = i64::from(i / 2);
        assert!(q.put(unit(i64::from(i) * 100, 100, 0), off).unwrap());
    }
    assert_eq!(s.max_physic_offset(), 70_000);
    s.flush_all(0).unwrap();
    s.truncate_all(35_000).unwrap();
    assert_eq!((a.max_offset(), b.max_offset()), (175, 175));
    assert_eq!(s.max_physic_offset(), 35_000);
    assert_eq!(s.delete_expired_all(20_000).unwrap(), 0);
    s.correct_min_offsets(20_000);
    assert_eq!((a.min_offset(), b.min_offset()), (100, 100));
    drop((a, b));
    drop(s);

    let s = ConsumeQueueStore::load(root, SMALL, true).unwrap();
    s.recover_all().unwrap();
    assert_eq!(s.all().len(), 2);
    assert_eq!(s.max_physic_offset(), 35_000);
    s.destroy_all().unwrap();
    assert!(s.all().is_empty());
    assert!(!root.join("consumequeue/A").exists());
    assert_eq!(s.max_physic_offset(), -1);
}

#[test]
fn readers_never_see_unpublished_units() {
    let dir = tempfile::tempdir().unwrap();
    let q = Arc::new(open(dir.path(), 200));
    let writer = {
        let q = Arc::clone(&q);
        std::thread::spawn(move || {
            for i in 0..3000 {
                assert!(q.put(nth(i, 0), i).unwrap());
            }
        })
    };
    let mut seen = 0;
    while seen < 3000 {
        let max = q.max_offset();
        assert!(max >= seen);
        if max > 0 {
            let i = max - 1;
            assert_eq!(q.get(i), Some(nth(i, 0)));
            for (o, u) in q.units_from(i.saturating_sub(7).max(0), 8) {
                assert_eq!(u, nth(o, 0));
            }
        }
        seen = max;
    }
    writer.join().unwrap();
}

fn pending(cqs: &ConsumeQueueStore) -> Vec<String> {
    lock(&cqs.syncs.pending)
        .iter()
        .map(|c| match c {
            Created::File(p, _) | Created::Dir(p) => p.display().to_string(),
        })
        .collect()
}

#[test]
fn creations_are_left_to_the_next_flush_which_syncs_them_first() {
    let dir = tempfile::tempdir().unwrap();
    let cqs = ConsumeQueueStore::load(dir.path(), SMALL, true).unwrap();
    let q = cqs.find_or_create(TOPIC, 0).unwrap();
    fill(&q, 0, 301); // two files
    let root = dir.path().display().to_string();
    let qdir = q.dir().display().to_string();
    let got = pending(&cqs);
    // The root, consumequeue/ and the topic directory gained an entry; then the two files.
    assert_eq!(
        got,
        vec![
            root.clone(),
            format!("{root}/consumequeue"),
            format!("{root}/consumequeue/{TOPIC}"),
            format!("{qdir}/00000000000000000000"),
            format!("{qdir}/00000000000000006000"),
        ]
    );
    // A flush of one queue makes every creation durable before it msyncs a unit.
    assert!(q.flush(0).unwrap());
    assert!(pending(&cqs).is_empty());
    cqs.flush_all(0).unwrap();
}

#[test]
fn a_pending_creation_never_keeps_a_file_shared_nor_fails_once_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let cqs = ConsumeQueueStore::load(dir.path(), SMALL, true).unwrap();
    let q = cqs.find_or_create(TOPIC, 0).unwrap();
    fill(&q, 0, 400);
    // Truncation needs the files exclusively: the pending list holds paths only.
    q.truncate_dirty(0).unwrap();
    assert_eq!(q.file_count(), 0);
    assert!(!pending(&cqs).is_empty());
    cqs.sync_creations().unwrap();
    assert!(pending(&cqs).is_empty());
    // A file created again under the same name is synced again.
    assert!(q.put(nth(0, 0), 0).unwrap());
    assert_eq!(pending(&cqs).len(), 1);
    cqs.flush_below(u64::MAX).unwrap();
    assert!(pending(&cqs).is_empty());
}

/// Appends that take the held append handle (the unit right after the last one in its file)
/// and those that cannot (a roll, a duplicate, a gap, after a truncation or a destroy) leave
/// the same queue: every unit where a fresh queue written in one go has it, byte for byte.
#[test]
fn appends_through_the_held_handle_match_appends_that_take_the_file_list() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path(), 60); // 3 units per file: a roll every third put
    fill(&q, 0, 8);
    // A duplicate and an older unit are skipped; a gap is refused; nothing changes.
    assert!(!q.put(nth(7, 0), 7).unwrap());
    assert!(!q.put(nth(5, 0), 5).unwrap());
    assert!(q.put(nth(10, 0), 10).is_err());
    assert_eq!(q.max_offset(), 8);
    // Cut back to 5 units (in the second file), then append again from there.
    q.truncate_dirty(nth(5, 0).phy_offset as u64).unwrap();
    assert_eq!(q.max_offset(), 5);
    fill(&q, 5, 11);
    for i in 0..11 {
        assert_eq!(q.get(i), Some(nth(i, 0)), "unit {i}");
    }
    let cut = dir_bytes(dir.path());
    let fresh = tempfile::tempdir().unwrap();
    let f = open(fresh.path(), 60);
    fill(&f, 0, 11);
    drop((q, f));
    let names = |v: Vec<(PathBuf, Vec<u8>)>, root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        v.into_iter()
            .map(|(p, b)| (p.strip_prefix(root).unwrap().to_path_buf(), b))
            .collect()
    };
    assert_eq!(
        names(cut, dir.path()),
        names(dir_bytes(fresh.path()), fresh.path())
    );
    // A destroyed queue starts again at the next put's offset.
    let q = open(dir.path(), 60);
    q.destroy().unwrap();
    let q = open(dir.path(), 60);
    fill(&q, 11, 14);
    assert_eq!((q.min_offset(), q.max_offset()), (11, 14));
    assert_eq!(q.get(12), Some(nth(12, 0)));
}
