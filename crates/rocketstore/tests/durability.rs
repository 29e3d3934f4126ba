//! Durability services: preallocation ahead of the writer, sync group commit, async flush and
//! commit with and without the transient store pool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketstore::format::offset_to_file_name;
use rocketstore::{ConfigValue, PutMessage, PutStatus, ServiceKind, Store, StoreConfig};

const MIB: u64 = 1024 * 1024;

fn cfg(pairs: &[(&str, ConfigValue)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in pairs {
        c.set(k, v.clone()).unwrap();
    }
    c
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn allocated_full(path: &Path, size: u64) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => m.len() == size && m.blocks() * 512 >= size,
        Err(_) => false,
    }
}

#[test]
fn files_are_preallocated_ahead_of_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64))]),
    )
    .unwrap();
    let cl = dir.path().join("commitlog");
    store
        .put(&PutMessage {
            topic: "T",
            body: b"first",
            ..Default::default()
        })
        .unwrap();
    // After the first message: file 0 (taken) and file 1 (RocketMQ's next-next request).
    assert!(allocated_full(&cl.join(offset_to_file_name(0)), MIB));
    wait_for("file 1", Duration::from_secs(10), || {
        allocated_full(&cl.join(offset_to_file_name(MIB)), MIB)
    });
    // Roll into file n: file n+1 is prepared.
    let body = vec![7u8; 1000];
    for n in 1..=5u64 {
        while store.max_commitlog_offset() < n * MIB {
            store
                .put(&PutMessage {
                    topic: "T",
                    body: &body,
                    ..Default::default()
                })
                .unwrap();
        }
        wait_for("file n+1", Duration::from_secs(10), || {
            allocated_full(&cl.join(offset_to_file_name((n + 1) * MIB)), MIB)
        });
    }
    assert_eq!(
        store.writer_created_files(),
        0,
        "every file came from the allocate service"
    );
    store.close().unwrap();
    // The preallocated, never written file is removed on a clean close.
    assert!(!cl.join(offset_to_file_name(7 * MIB)).exists());
    let names: Vec<_> = std::fs::read_dir(&cl)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
}

#[test]
fn no_put_waits_for_file_creation_across_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64))]),
    )
    .unwrap();
    let body = vec![1u8; 1024];
    let msg = PutMessage {
        topic: "RollTopic",
        body: &body,
        ..Default::default()
    };
    store.put(&msg).unwrap();
    let mut worst = Duration::ZERO;
    while store.max_commitlog_offset() < 51 * MIB {
        let t = Instant::now();
        store.put(&msg).unwrap();
        worst = worst.max(t.elapsed());
    }
    // Reported, not asserted: tests never assert on wall-clock time.
    eprintln!("largest put latency across 50 rolls of 1 MiB files: {worst:?}");
    assert_eq!(store.writer_created_files(), 0);
    store.close().unwrap();
}

#[test]
fn sync_flush_acknowledges_only_durable_bytes_and_shares_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::open(
            dir.path(),
            cfg(&[
                ("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into())),
                (
                    "mapped_file_size_commit_log",
                    ConfigValue::Int(4 * MIB as i64),
                ),
            ]),
        )
        .unwrap(),
    );
    let threads = 8;
    let per_thread = 200;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let body = vec![t as u8; 1024];
                for _ in 0..per_thread {
                    let r = store
                        .put(&PutMessage {
                            topic: "SyncTopic",
                            body: &body,
                            queue_id: t,
                            ..Default::default()
                        })
                        .unwrap();
                    assert_eq!(r.status, PutStatus::PutOk);
                    let end = r.commitlog_offset as u64 + r.wrote_bytes as u64;
                    assert!(store.cursors().flushed >= end, "acked before durable");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let puts = (threads * per_thread) as f64;
    let flushes = store.flush_count() as f64;
    eprintln!(
        "SYNC_FLUSH with {threads} threads: {flushes} flushes for {puts} puts = {:.3} flushes/put",
        flushes / puts
    );
    assert!(flushes <= puts);
    store.close().unwrap();
}

fn assert_cursors_while_writing(store: &Arc<Store>) {
    let stop = Arc::new(AtomicBool::new(false));
    let checker = {
        let store = Arc::clone(store);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Acquire) {
                let c = store.cursors();
                assert!(c.flushed <= c.committed && c.committed <= c.wrote, "{c:?}");
                checks += 1;
            }
            checks
        })
    };
    let body = vec![3u8; 700];
    for i in 0..3000 {
        store
            .put(&PutMessage {
                topic: "AsyncTopic",
                body: &body,
                queue_id: i % 4,
                ..Default::default()
            })
            .unwrap();
    }
    stop.store(true, Ordering::Release);
    assert!(checker.join().unwrap() > 0);
    // Data reaches disk within the configured intervals (bounded generously).
    let wrote = store.cursors().wrote;
    wait_for("flush to catch up", Duration::from_secs(20), || {
        store.cursors().flushed >= wrote
    });
}

#[test]
fn async_flush_cursors_without_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::open(
            dir.path(),
            cfg(&[
                ("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64)),
                ("flush_interval_commit_log", ConfigValue::Int(20)),
                ("flush_commit_log_thorough_interval", ConfigValue::Int(100)),
            ]),
        )
        .unwrap(),
    );
    assert_cursors_while_writing(&store);
    store.close().unwrap();
}

#[test]
fn async_flush_cursors_with_transient_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::open(
            dir.path(),
            cfg(&[
                ("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64)),
                ("transient_store_pool_enable", ConfigValue::Bool(true)),
                ("transient_store_pool_size", ConfigValue::Int(2)),
                ("commit_interval_commit_log", ConfigValue::Int(10)),
                ("flush_interval_commit_log", ConfigValue::Int(20)),
                ("flush_commit_log_thorough_interval", ConfigValue::Int(100)),
            ]),
        )
        .unwrap(),
    );
    assert_cursors_while_writing(&store);
    let c = store.cursors();
    assert_eq!(c.committed, c.wrote);
    // Everything committed is readable and intact.
    assert_eq!(
        store
            .scan(0)
            .unwrap()
            .with_crc_check(true)
            .filter(|m| m.is_ok())
            .count(),
        3000
    );
    store.close().unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), 3000);
    store.close().unwrap();
}

#[test]
fn readers_see_only_committed_bytes_with_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[
            ("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64)),
            ("transient_store_pool_enable", ConfigValue::Bool(true)),
            ("background_threads", ConfigValue::Bool(false)),
            ("flush_commit_log_thorough_interval", ConfigValue::Int(0)),
        ]),
    )
    .unwrap();
    // Without service threads the store commits inline after each put; drive a flush by hand.
    let r = store
        .put(&PutMessage {
            topic: "T",
            body: b"pooled",
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        store
            .look_message_by_offset(r.commitlog_offset as u64)
            .unwrap()
            .body,
        b"pooled"
    );
    store.run_service_once(ServiceKind::Flush).unwrap();
    let c = store.cursors();
    assert_eq!(
        (c.wrote, c.committed, c.flushed),
        (c.wrote, c.wrote, c.wrote)
    );
    store.close().unwrap();
}

#[test]
fn sync_flush_without_background_threads_flushes_inline() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[
            ("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into())),
            ("background_threads", ConfigValue::Bool(false)),
            ("mapped_file_size_commit_log", ConfigValue::Int(64 * 1024)),
        ]),
    )
    .unwrap();
    for _ in 0..500 {
        let r = store
            .put(&PutMessage {
                topic: "T",
                body: &[9u8; 300],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        assert!(store.cursors().flushed >= r.commitlog_offset as u64 + r.wrote_bytes as u64);
    }
    assert!(store.writer_created_files() > 1);
    store.close().unwrap();
}

#[test]
fn writeback_wakes_start_writeback_without_flushing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        cfg(&[
            ("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64)),
            // No timed flush during the test: only writeback wakes reach the flush service.
            ("flush_interval_commit_log", ConfigValue::Int(3_600_000)),
            (
                "flush_commit_log_writeback_bytes",
                ConfigValue::Int(16 * 1024),
            ),
        ])
    };
    let store = Store::open(dir.path(), config()).unwrap();
    let body = vec![7u8; 700];
    let msg = |i: i32| PutMessage {
        topic: "WritebackTopic",
        body: &body,
        queue_id: i % 4,
        ..Default::default()
    };
    // Single puts store into the mapping: they start no writeback ahead of the flush.
    for i in 0..1000 {
        assert_eq!(store.put(&msg(i)).unwrap().status, PutStatus::PutOk);
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(store.stats().writeback_started_bytes, 0);
    // Calls of 8 KiB of records or more do, over everything written before them too.
    let batch: Vec<_> = (0..16).map(msg).collect();
    for _ in 0..125 {
        let r = store.put_batch(&batch).unwrap();
        assert!(r.iter().all(|r| r.status == PutStatus::PutOk));
    }
    let wrote = store.cursors().wrote;
    assert!(wrote > 2 * MIB, "the puts span three files");
    // Writeback of every file the writer left, and of the current one in 16 KiB steps.
    wait_for("writeback to start", Duration::from_secs(20), || {
        store.stats().writeback_started_bytes >= 2 * MIB
    });
    let s = store.stats();
    assert!(s.writeback_started_bytes <= wrote, "{s:?}");
    // Starting writeback is not a flush: nothing is published as durable.
    assert_eq!(store.cursors().flushed, 0);
    assert_eq!(s.flush_count, 0);
    store.close().unwrap();

    let store = Store::open(dir.path(), config()).unwrap();
    assert_eq!(store.cursors().wrote, wrote, "close flushed every byte");
    assert_eq!(store.stats().writeback_started_bytes, 0);
    store.close().unwrap();
}

#[test]
fn writeback_bytes_zero_starts_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[
            ("mapped_file_size_commit_log", ConfigValue::Int(MIB as i64)),
            ("flush_interval_commit_log", ConfigValue::Int(3_600_000)),
            ("flush_commit_log_writeback_bytes", ConfigValue::Int(0)),
        ]),
    )
    .unwrap();
    let body = vec![7u8; 700];
    for _ in 0..2000 {
        store
            .put(&PutMessage {
                topic: "WritebackTopic",
                body: &body,
                ..Default::default()
            })
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(store.stats().writeback_started_bytes, 0);
    store.close().unwrap();
}
