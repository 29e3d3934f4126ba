//! Expired-file cleanup (spec §10, issue #4 "Must show"): an injected clock deletes exactly the
//! expired commit log files, oldest first, never the last one and never from the middle; the
//! consume queues and index files follow; readers of deleted data get `OFFSET_TOO_SMALL` /
//! `MESSAGE_WAS_REMOVING`, never a crash; an injected disk-full state refuses puts with a typed
//! error and puts succeed again after cleanup.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::{TimeZone, Timelike};
use rocketstore::format::IndexHeader;
use rocketstore::{
    ConfigValue, Error, GetStatus, PutMessage, PutStatus, ServiceKind, Store, StoreConfig,
};

const FILE: u64 = 64 * 1024;
const HOUR_MS: i64 = 3_600_000;

fn config(pairs: &[(&str, ConfigValue)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", ConfigValue::Int(FILE as i64)),
        ("mapped_file_size_consume_queue", ConfigValue::Int(50 * 20)),
        ("max_hash_slot_num", ConfigValue::Int(64)),
        ("max_index_num", ConfigValue::Int(100)),
        ("delete_commit_log_files_interval", ConfigValue::Int(0)),
        ("delete_consume_queue_files_interval", ConfigValue::Int(0)),
        ("background_threads", ConfigValue::Bool(false)),
    ] {
        c.set(k, v).unwrap();
    }
    for (k, v) in pairs {
        c.set(k, v.clone()).unwrap();
    }
    c
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn local_hour(ms: i64) -> u32 {
    chrono::Local.timestamp_millis_opt(ms).unwrap().hour()
}

/// Puts ~1 KiB messages over two queues until the commit log has `files` files.
fn fill(store: &Store, files: usize) -> Vec<(i32, i64, u64)> {
    let body = vec![7u8; 1000];
    let mut out = Vec::new();
    let mut i = 0u64;
    while store.commitlog_files().len() < files {
        let key = format!("key-{i}");
        let keys = [key.as_str()];
        let r = store
            .put(&PutMessage {
                topic: "Clean",
                body: &body,
                queue_id: (i % 2) as i32,
                keys: &keys,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        out.push(((i % 2) as i32, r.queue_offset, r.commitlog_offset as u64));
        i += 1;
    }
    store.flush().unwrap();
    out
}

fn set_mtime(path: &Path, ms: i64) {
    let t = SystemTime::UNIX_EPOCH + Duration::from_millis(ms as u64);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn fixed(ms: i64) -> rocketstore::Clock {
    Arc::new(move || ms)
}

fn low_usage() -> rocketstore::DiskUsageProbe {
    Arc::new(|_: &Path| Some(0.10))
}

fn index_headers(files: &[PathBuf]) -> Vec<IndexHeader> {
    files
        .iter()
        .map(|p| IndexHeader::decode(&std::fs::read(p).unwrap()[..40]).unwrap())
        .collect()
}

#[test]
fn injected_clock_deletes_exactly_the_expired_files() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms();
    let later = now + 12 * HOUR_MS;
    let store = Store::open(
        dir.path(),
        config(&[
            ("file_reserved_time", ConfigValue::Int(24)),
            (
                "delete_when",
                ConfigValue::Str(format!("{:02}", local_hour(later))),
            ),
        ]),
    )
    .unwrap();
    store.set_disk_usage_probe(low_usage());
    let puts = fill(&store, 7);
    let files = store.commitlog_files();
    assert_eq!(files.len(), 7);
    // Files 0..=2 and 4 were last written 14 h ago: expired 12 h later (26 h > 24 h). File 3 is
    // fresh, so file 4 must survive (no deletion from the middle); 5 and 6 are fresh.
    for i in [0, 1, 2, 4] {
        set_mtime(&files[i], now - 14 * HOUR_MS);
    }
    let index_before = store.index_files();
    assert!(index_before.len() >= 3, "{index_before:?}");

    // Not the hour of `delete_when`: a scheduled pass deletes nothing.
    store.set_clock(fixed(now));
    store.run_service_once(ServiceKind::Cleanup).unwrap();
    assert_eq!(store.commitlog_files().len(), 7);
    // The hour of `delete_when`, 12 h later: files 0..=2 and 4 are now older than 24 h.
    store.set_clock(fixed(later));
    store.run_service_once(ServiceKind::Cleanup).unwrap();
    let left = store.commitlog_files();
    assert_eq!(left, files[3..].to_vec(), "exactly files 0, 1, 2");
    for f in &files[..3] {
        assert!(!f.exists(), "{} still on disk", f.display());
    }
    let min = store.min_commitlog_offset();
    assert_eq!(min, 3 * FILE);

    // Consume queues: min offsets moved to the first unit at or after the new minimum; older
    // offsets are OFFSET_TOO_SMALL.
    for qid in 0..2 {
        let first_kept = puts
            .iter()
            .filter(|(q, _, phy)| *q == qid && *phy >= min)
            .map(|(_, off, _)| *off)
            .min()
            .unwrap();
        assert_eq!(store.min_offset_in_queue("Clean", qid), first_kept);
        let g = store.get_message("Clean", qid, 0, 8, None, None).unwrap();
        assert_eq!(g.status, GetStatus::OffsetTooSmall);
        assert_eq!(g.next_begin_offset, first_kept);
        let g = store
            .get_message("Clean", qid, first_kept, 8, None, None)
            .unwrap();
        assert_eq!(g.status, GetStatus::Found);
        assert!(g.messages[0].commitlog_offset() as u64 >= min);
    }
    // Consume queue files whose last unit points below the minimum are gone (50 units per file,
    // ~190 messages per queue were deleted).
    for qid in 0..2 {
        let qdir = dir.path().join("consumequeue/Clean").join(qid.to_string());
        let names: Vec<u64> = std::fs::read_dir(&qdir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
            .collect();
        let first = names.iter().min().copied().unwrap();
        assert!(first > 0, "queue {qid} kept its first file");
        assert!(first / 20 <= store.min_offset_in_queue("Clean", qid) as u64);
    }
    // Index files whose end offset is below the minimum are gone; the rest are kept.
    let index_after = store.index_files();
    assert!(index_after.len() < index_before.len());
    let headers = index_headers(&index_after);
    assert!(headers[0].end_phy_offset >= min as i64);
    for p in index_before.iter().filter(|p| !index_after.contains(p)) {
        assert!(!p.exists());
    }
    // Key queries for deleted messages find nothing; for kept ones they work.
    assert!(store
        .query_message("Clean", "key-0", 32, 0, i64::MAX)
        .unwrap()
        .messages
        .is_empty());
    let last = puts.len() - 1;
    assert_eq!(
        store
            .query_message("Clean", &format!("key-{last}"), 32, 0, i64::MAX)
            .unwrap()
            .messages
            .len(),
        1
    );

    // Everything expired: everything but the last file goes, at most `delete_file_batch_max`
    // per pass.
    for f in store.commitlog_files() {
        set_mtime(&f, now - 14 * HOUR_MS);
    }
    store.run_service_once(ServiceKind::Cleanup).unwrap();
    let left = store.commitlog_files();
    assert_eq!(left, vec![files[6].clone()], "never the last file");
    for qid in 0..2 {
        store
            .put(&PutMessage {
                topic: "Clean",
                body: b"fresh",
                queue_id: qid,
                ..Default::default()
            })
            .unwrap();
    }
    store.close().unwrap();

    // The state survives a reopen (normal and abnormal recovery).
    for abnormal in [false, true] {
        if abnormal {
            std::fs::write(dir.path().join("abort"), b"1").unwrap();
        }
        let store = Store::open(dir.path(), config(&[])).unwrap();
        assert_eq!(store.min_commitlog_offset(), 6 * FILE);
        for qid in 0..2 {
            let min = store.min_offset_in_queue("Clean", qid);
            let g = store.get_message("Clean", qid, min, 1, None, None).unwrap();
            assert_eq!(g.status, GetStatus::Found, "abnormal={abnormal}");
            let g = store
                .get_message("Clean", qid, min - 1, 1, None, None)
                .unwrap();
            assert!(
                matches!(
                    g.status,
                    GetStatus::OffsetTooSmall | GetStatus::MessageWasRemoving
                ),
                "{:?}",
                g.status
            );
        }
        store.close().unwrap();
    }
}

#[test]
fn batch_max_and_force() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        config(&[("delete_file_batch_max", ConfigValue::Int(2))]),
    )
    .unwrap();
    store.set_disk_usage_probe(low_usage());
    fill(&store, 6);
    // Nothing is expired (72 h): an on-demand pass deletes nothing.
    let r = store.delete_expired_files(false).unwrap();
    assert!(r.commitlog_files_deleted.is_empty());
    // Forced: oldest first, two per pass, never the last.
    let files = store.commitlog_files();
    let r = store.delete_expired_files(true).unwrap();
    assert_eq!(r.commitlog_files_deleted, files[..2].to_vec());
    assert_eq!(r.min_commitlog_offset, 2 * FILE);
    assert!(r.consume_queue_files_deleted > 0);
    let r = store.delete_expired_files(true).unwrap();
    assert_eq!(r.commitlog_files_deleted, files[2..4].to_vec());
    let r = store.delete_expired_files(true).unwrap();
    assert_eq!(r.commitlog_files_deleted, files[4..5].to_vec());
    let r = store.delete_expired_files(true).unwrap();
    assert!(r.commitlog_files_deleted.is_empty());
    assert_eq!(store.commitlog_files(), vec![files[5].clone()]);
    // The store keeps working.
    let r = store
        .put(&PutMessage {
            topic: "Clean",
            body: b"after",
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    store.close().unwrap();

    let ro = Store::open_read_only(dir.path(), config(&[])).unwrap();
    assert!(matches!(
        ro.delete_expired_files(true),
        Err(Error::ReadOnly { .. })
    ));
}

#[test]
fn readers_of_deleted_files_get_statuses_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), config(&[])).unwrap());
    store.set_disk_usage_probe(low_usage());
    fill(&store, 6);
    // A message read before the deletion stays usable afterwards.
    let held = store.get_message("Clean", 0, 0, 4, None, None).unwrap();
    assert_eq!(held.status, GetStatus::Found);
    // A scanner positioned in the first file.
    let mut scanner = store.scan(0).unwrap();
    let first = scanner.next().unwrap().unwrap();
    assert_eq!(first.commitlog_offset(), 0);
    // Concurrent readers hammer the oldest offsets while cleanup runs.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|qid| {
            let store = Arc::clone(&store);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !stop.load(Ordering::Relaxed) {
                    for off in [0, 10, 40, 60] {
                        let g = store.get_message("Clean", qid, off, 4, None, None).unwrap();
                        for m in &g.messages {
                            assert_eq!(m.body.len(), 1000);
                            assert!(m.crc_ok());
                        }
                        seen.insert(format!("{:?}", g.status));
                    }
                }
                seen
            })
        })
        .collect();
    let r = store.delete_expired_files(true).unwrap();
    assert_eq!(r.commitlog_files_deleted.len(), 5);
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        let seen = h.join().unwrap();
        for s in &seen {
            assert!(
                // OFFSET_FOUND_NULL: the consume queue file went away between the range
                // check and the read (RocketMQ reports the same).
                [
                    "Found",
                    "OffsetTooSmall",
                    "MessageWasRemoving",
                    "OffsetFoundNull"
                ]
                .contains(&s.as_str()),
                "{seen:?}"
            );
        }
    }
    assert_eq!(held.messages[3].body, vec![7u8; 1000]);
    // The scanner does not crash: it ends (its file is gone) or continues past the minimum.
    for m in scanner.by_ref().take(5) {
        assert!(m.is_ok());
    }
    for qid in 0..2 {
        let g = store.get_message("Clean", qid, 0, 4, None, None).unwrap();
        assert!(
            matches!(
                g.status,
                GetStatus::OffsetTooSmall | GetStatus::MessageWasRemoving
            ),
            "{:?}",
            g.status
        );
    }
    assert!(store.look_message_by_offset(0).is_err());
}

#[test]
fn injected_disk_full_refuses_puts_until_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    // Forcible cleaning off: a full disk only refuses writes until someone deletes files.
    let store = Store::open(
        dir.path(),
        config(&[("clean_file_forcibly_enable", ConfigValue::Bool(false))]),
    )
    .unwrap();
    fill(&store, 6);
    // Usage grows with the number of commit log files: 6 files -> 0.95, 1 file -> 0.45.
    let cl = dir.path().join("commitlog");
    store.set_disk_usage_probe(Arc::new(move |_: &Path| {
        let n = std::fs::read_dir(&cl).map(|d| d.count()).unwrap_or(0);
        Some(0.35 + 0.10 * n as f64)
    }));
    let msg = PutMessage {
        topic: "Clean",
        body: b"x",
        ..Default::default()
    };
    assert_eq!(store.put(&msg).unwrap().status, PutStatus::PutOk);
    let r = store.run_service_once(ServiceKind::Cleanup);
    assert!(r.is_ok());
    assert!(store.is_disk_full());
    let err = store.put(&msg).unwrap_err();
    assert!(matches!(err, Error::DiskFull { .. }), "{err}");
    assert!(err.is_retryable());
    assert!(store.put_batch(&[msg.clone(), msg.clone()]).is_err());
    // Reads still work.
    assert_eq!(
        store
            .get_message("Clean", 0, 1, 1, None, None)
            .unwrap()
            .status,
        GetStatus::Found
    );
    // Cleanup frees space; the same pass sees the usage fall and accepts writes again.
    let r = store.delete_expired_files(true).unwrap();
    assert_eq!(r.commitlog_files_deleted.len(), 5);
    assert!(!r.disk_full);
    assert!(!store.is_disk_full());
    assert_eq!(store.put(&msg).unwrap().status, PutStatus::PutOk);
    store.close().unwrap();
}

#[test]
fn disk_ratios_follow_rocketmq() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config(&[])).unwrap();
    fill(&store, 3);
    let usage = Arc::new(AtomicU64::new(0));
    let u = Arc::clone(&usage);
    store.set_disk_usage_probe(Arc::new(move |_: &Path| {
        Some(u.load(Ordering::Relaxed) as f64 / 100.0)
    }));
    let msg = PutMessage {
        topic: "Clean",
        body: b"x",
        ..Default::default()
    };
    let pass = |pct: u64| {
        usage.store(pct, Ordering::Relaxed);
        store.run_service_once(ServiceKind::Cleanup).unwrap();
        (store.is_disk_full(), store.commitlog_files().len())
    };
    // Below diskMaxUsedSpaceRatio (75): nothing happens (files are fresh anyway).
    assert_eq!(pass(50), (false, 3));
    // 80: deletion allowed at any hour, but only of expired files: none.
    assert_eq!(pass(80), (false, 3));
    // Above diskSpaceWarningLevelRatio (90): disk full, and forcible cleaning deletes every
    // deletable file at once (RocketMQ cleanImmediately) — the usage stays high here, so writes
    // stay refused.
    assert_eq!(pass(95), (true, 1));
    assert!(matches!(store.put(&msg), Err(Error::DiskFull { .. })));
    // Between the forcible (85) and warning (90) ratios the flag is kept (RocketMQ hysteresis).
    assert_eq!(pass(88), (true, 1));
    // At or below 85 the disk is OK again.
    assert_eq!(pass(85), (false, 1));
    assert_eq!(store.put(&msg).unwrap().status, PutStatus::PutOk);
    // An unreadable usage allows expired-file deletion (RocketMQ: ratio -1) without refusing
    // writes.
    store.set_disk_usage_probe(Arc::new(|_: &Path| None));
    let r = store.delete_expired_files(false).unwrap();
    assert!(r.space_to_delete && !r.disk_full);
    store.close().unwrap();
}

#[test]
fn the_cleanup_thread_resumes_writes_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        config(&[
            ("background_threads", ConfigValue::Bool(true)),
            ("clean_resource_interval", ConfigValue::Int(20)),
        ]),
    )
    .unwrap();
    let usage = Arc::new(AtomicU64::new(95));
    let u = Arc::clone(&usage);
    store.set_disk_usage_probe(Arc::new(move |_: &Path| {
        Some(u.load(Ordering::Relaxed) as f64 / 100.0)
    }));
    let msg = PutMessage {
        topic: "Clean",
        body: b"x",
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.put(&msg).is_ok() {
        assert!(Instant::now() < deadline, "never refused");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(matches!(store.put(&msg), Err(Error::DiskFull { .. })));
    let refused_at = Instant::now();
    usage.store(40, Ordering::Relaxed);
    while store.put(&msg).is_err() {
        assert!(Instant::now() < deadline, "never resumed");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Reported, not asserted tightly (the VM may be paused): resumes within a few intervals.
    assert!(refused_at.elapsed() < Duration::from_secs(10));
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect();
    assert!(names.iter().any(|n| n == "rs-cleanup"), "{names:?}");
    store.close().unwrap();
}

/// A queue whose every record was deleted keeps its offsets across a reopen: its consume queue
/// units point below the commit log's minimum, which recovery must not take for damage.
#[test]
fn a_queue_emptied_by_cleanup_continues_its_offsets_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let body = vec![1u8; 1000];
    let put = |store: &Store, topic: &str| {
        store
            .put(&PutMessage {
                topic,
                body: &body,
                ..Default::default()
            })
            .unwrap()
    };
    {
        let store = Store::open(dir.path(), config(&[])).unwrap();
        for _ in 0..21 {
            put(&store, "Early");
        }
        while store.commitlog_files().len() < 4 {
            put(&store, "Late");
        }
        store.flush().unwrap();
        store.delete_expired_files(true).unwrap();
        assert_eq!(store.min_offset_in_queue("Early", 0), 21);
        assert_eq!(store.max_offset_in_queue("Early", 0), 21);
        store.close().unwrap();
    }
    for abnormal in [false, true] {
        if abnormal {
            std::fs::write(dir.path().join("abort"), b"").unwrap();
        }
        let store = Store::open(dir.path(), config(&[])).unwrap();
        assert_eq!(store.recovery_report().repaired_queues, 0);
        assert_eq!(store.max_offset_in_queue("Early", 0), 21 + abnormal as i64);
        let r = put(&store, "Early");
        assert_eq!(r.queue_offset, 21 + abnormal as i64, "abnormal={abnormal}");
        store.close().unwrap();
    }
}
