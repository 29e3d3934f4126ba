//! Fault injection at the syscalls of the write, flush and allocate paths (feature
//! `failpoints`). The failpoint registry is global, so every test holds `SERIAL`.
//!
//! Run: `cargo test -p rocketstore --features failpoints --test failpoints`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rocketstore::failpoints as fp;
use rocketstore::{ConfigValue, Error, PutMessage, PutStatus, Store, StoreConfig};

static SERIAL: Mutex<()> = Mutex::new(());

struct Scenario<'a> {
    _guard: MutexGuard<'a, ()>,
    inner: Option<fail::FailScenario<'a>>,
}

impl Drop for Scenario<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.inner.take() {
            s.teardown();
        }
    }
}

fn scenario() -> Scenario<'static> {
    let guard = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Scenario {
        _guard: guard,
        inner: Some(fail::FailScenario::setup()),
    }
}

fn cfg(pairs: &[(&str, ConfigValue)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.set("mapped_file_size_commit_log", ConfigValue::Int(256 * 1024))
        .unwrap();
    for (k, v) in pairs {
        c.set(k, v.clone()).unwrap();
    }
    c
}

fn sync_cfg() -> StoreConfig {
    cfg(&[("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into()))])
}

fn msg(body: &[u8]) -> PutMessage<'_> {
    PutMessage {
        topic: "FaultTopic",
        body,
        ..Default::default()
    }
}

#[test]
fn failed_msync_fences_the_store_and_no_put_is_acknowledged_after_it() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), sync_cfg()).unwrap());
    let mut acked = Vec::new();
    for i in 0..50u32 {
        let r = store.put(&msg(&i.to_be_bytes())).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        acked.push(r.commitlog_offset);
    }
    let durable_before = store.cursors().flushed;
    fail::cfg(fp::FLUSH_MSYNC, "return(EIO)").unwrap();
    // Several threads put concurrently: every one of them must fail, none may be acked.
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut oks = 0;
                for _ in 0..20 {
                    match store.put(&msg(&[t; 16])) {
                        Ok(r) if r.status == PutStatus::PutOk => oks += 1,
                        Ok(r) => panic!("unexpected status {:?}", r.status),
                        Err(Error::Poisoned { .. }) => {}
                        Err(e) => panic!("unexpected error {e:?}"),
                    }
                }
                oks
            })
        })
        .collect();
    let oks: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(oks, 0, "a put was acknowledged after a failed msync");
    assert!(store.poisoned().is_some());
    assert_eq!(
        store.cursors().flushed,
        durable_before,
        "flushed moved past a failed flush"
    );
    fail::remove(fp::FLUSH_MSYNC);
    // Still fenced after the fault clears: only a reopen (recovery) unfences.
    assert!(matches!(
        store.put(&msg(b"late")),
        Err(Error::Poisoned { .. })
    ));
    let _ = store.close();
    assert!(
        dir.path().join("abort").exists(),
        "a poisoned store keeps its abort marker"
    );
    drop(store);
    let store = Store::open(dir.path(), sync_cfg()).unwrap();
    assert!(store.recovery_report().abnormal);
    for off in &acked {
        store.look_message_by_offset(*off as u64).unwrap();
    }
    assert_eq!(store.put(&msg(b"after")).unwrap().status, PutStatus::PutOk);
    store.close().unwrap();
}

#[test]
fn failed_async_flush_poisons_the_store() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[
            ("flush_interval_commit_log", ConfigValue::Int(5)),
            ("flush_commit_log_least_pages", ConfigValue::Int(0)),
        ]),
    )
    .unwrap();
    fail::cfg(fp::FLUSH_MSYNC, "return(EIO)").unwrap();
    store.put(&msg(b"x")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.poisoned().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the flush service did not poison the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(matches!(store.put(&msg(b"y")), Err(Error::Poisoned { .. })));
    fail::remove(fp::FLUSH_MSYNC);
    let _ = store.close();
}

#[test]
fn slow_flush_returns_flush_disk_timeout_not_ok() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[
            ("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into())),
            ("sync_flush_timeout", ConfigValue::Int(30)),
        ]),
    )
    .unwrap();
    fail::cfg(fp::FLUSH_MSYNC, "sleep(300)").unwrap();
    let r = store.put(&msg(b"slow")).unwrap();
    assert_eq!(r.status, PutStatus::FlushDiskTimeout);
    fail::remove(fp::FLUSH_MSYNC);
    // Written, just not known durable in time: it is readable and becomes durable later.
    assert_eq!(
        store
            .look_message_by_offset(r.commitlog_offset as u64)
            .unwrap()
            .body,
        b"slow"
    );
    assert!(store.flush().unwrap() >= r.commitlog_offset as u64 + r.wrote_bytes as u64);
    store.close().unwrap();
}

#[test]
fn disk_full_while_preallocating_is_a_typed_error_and_writes_resume() {
    let _s = scenario();
    for background in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            cfg(&[
                ("background_threads", ConfigValue::Bool(background)),
                ("allocate_wait_timeout", ConfigValue::Int(2000)),
            ]),
        )
        .unwrap();
        let body = vec![0u8; 10_000];
        // Fill file 0 (and let file 1 be preallocated), then make every new file fail.
        while store.max_commitlog_offset() < 200 * 1024 {
            store.put(&msg(&body)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        fail::cfg(fp::CREATE_FALLOCATE, "return(ENOSPC)").unwrap();
        let mut saw_disk_full = false;
        for _ in 0..200 {
            match store.put(&msg(&body)) {
                Ok(r) => assert_eq!(r.status, PutStatus::PutOk),
                Err(Error::DiskFull { .. }) => {
                    saw_disk_full = true;
                    break;
                }
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
        assert!(saw_disk_full, "background={background}");
        assert!(
            store.poisoned().is_none(),
            "disk full must not poison the store"
        );
        fail::remove(fp::CREATE_FALLOCATE);
        assert_eq!(store.put(&msg(&body)).unwrap().status, PutStatus::PutOk);
        store.close().unwrap();
        let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
        assert!(store.scan(0).unwrap().all(|m| m.is_ok()));
        store.close().unwrap();
    }
}

#[test]
fn failing_file_creation_leaves_no_half_file() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[("background_threads", ConfigValue::Bool(false))]),
    )
    .unwrap();
    fail::cfg(fp::MAP, "return(EIO)").unwrap();
    assert!(matches!(
        store.put(&msg(b"x")),
        Err(Error::Io { op: "mmap", .. })
    ));
    fail::remove(fp::MAP);
    assert_eq!(
        std::fs::read_dir(dir.path().join("commitlog"))
            .unwrap()
            .count(),
        0
    );
    store.put(&msg(b"x")).unwrap();
    store.close().unwrap();
}

#[test]
fn failed_staged_write_fences_the_store_and_publishes_nothing_of_the_batch() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let staged = || {
        cfg(&[
            ("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into())),
            ("pwrite_commit_log", ConfigValue::Bool(true)),
        ])
    };
    let store = Store::open(dir.path(), staged()).unwrap();
    let mut acked = Vec::new();
    for i in 0..20u32 {
        let r = store.put(&msg(&i.to_be_bytes())).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        acked.push(r.commitlog_offset);
    }
    let wrote_before = store.cursors().wrote;
    fail::cfg(fp::STAGE_WRITE, "return(EIO)").unwrap();
    let bodies: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 100]).collect();
    let batch: Vec<PutMessage<'_>> = bodies.iter().map(|b| msg(b)).collect();
    assert!(matches!(
        store.put_batch(&batch),
        Err(Error::Poisoned { .. })
    ));
    assert!(store.poisoned().is_some());
    assert_eq!(
        store.cursors().wrote,
        wrote_before,
        "nothing of the failed batch is published"
    );
    fail::remove(fp::STAGE_WRITE);
    assert!(matches!(
        store.put(&msg(b"late")),
        Err(Error::Poisoned { .. })
    ));
    let _ = store.close();
    let store = Store::open(dir.path(), staged()).unwrap();
    for off in &acked {
        store.look_message_by_offset(*off as u64).unwrap();
    }
    assert_eq!(store.scan(0).unwrap().count(), acked.len());
    assert_eq!(store.put(&msg(b"after")).unwrap().status, PutStatus::PutOk);
    store.close().unwrap();
}

#[test]
fn a_commit_log_file_is_never_flushed_before_its_creation_is_durable() {
    // ASYNC_FLUSH: the allocate service creates files without an fsync; the first flush of a
    // file makes its creation durable (file, then directory) before it msyncs a byte of it. If
    // that fsync fails, nothing of the file is reported durable and the store is fenced.
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let body = vec![7u8; 10_000];
    // A first record, and its consume queue and index files, made durable by a clean close, so
    // that the only creation left to sync below is the next commit log file's.
    let store = Store::open(dir.path(), cfg(&[])).unwrap();
    assert_eq!(store.put(&msg(&body)).unwrap().status, PutStatus::PutOk);
    store.close().unwrap();
    let store = Store::open(dir.path(), cfg(&[])).unwrap();
    let first = store.flush().unwrap();
    assert!(first > 0);
    fail::cfg(fp::CREATE_FSYNC, "return(EIO)").unwrap();
    // On into the second 256 KiB file, which the service created ahead without an fsync. The
    // flush service may get there first: then the store is fenced during the loop.
    let mut fenced = false;
    while store.max_commitlog_offset() < 300 * 1024 {
        match store.put(&msg(&body)) {
            Ok(r) => assert_eq!(r.status, PutStatus::PutOk),
            Err(Error::Poisoned { .. }) => {
                fenced = true;
                break;
            }
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }
    if !fenced {
        assert!(matches!(store.flush(), Err(Error::Poisoned { .. })));
    }
    let cause = store.poisoned().expect("fenced").to_string();
    assert!(
        cause.contains("fsync") && cause.contains("commitlog"),
        "{cause}"
    );
    assert!(store.put(&msg(&body)).is_err(), "no put after the fence");
    fail::remove(fp::CREATE_FSYNC);
    let _ = store.close();
    // Everything in the first file was flushed (the flush moves file by file) and is there.
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    assert!(store.max_commitlog_offset() >= first);
    assert!(store.scan(0).unwrap().all(|m| m.is_ok()));
    store.close().unwrap();
}

#[test]
fn a_full_disk_at_the_checkpoint_skips_the_round_and_an_io_error_fences() {
    let _s = scenario();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        cfg(&[("flush_interval_consume_queue", ConfigValue::Int(5))]),
    )
    .unwrap();
    assert_eq!(store.put(&msg(b"before")).unwrap().status, PutStatus::PutOk);
    // ENOSPC while the new checkpoint is written aside: the old one stays, no fence.
    fail::cfg(fp::CHECKPOINT_WRITE, "return(ENOSPC)").unwrap();
    std::thread::sleep(Duration::from_millis(200)); // many 5 ms rounds meet the full disk
    assert!(store.poisoned().is_none(), "{:?}", store.poisoned());
    assert_eq!(store.put(&msg(b"during")).unwrap().status, PutStatus::PutOk);
    assert!(!dir.path().join("checkpoint.tmp").exists());
    fail::remove(fp::CHECKPOINT_WRITE);
    // Once there is room the rounds write checkpoints again.
    let cp = dir.path().join("checkpoint");
    let _ = std::fs::remove_file(&cp);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cp.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint written"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Any other error writing it fences the store.
    fail::cfg(fp::CHECKPOINT_WRITE, "return(EIO)").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.poisoned().is_none() {
        assert!(std::time::Instant::now() < deadline, "an EIO did not fence");
        std::thread::sleep(Duration::from_millis(5));
    }
    fail::remove(fp::CHECKPOINT_WRITE);
    let _ = store.close();
}
