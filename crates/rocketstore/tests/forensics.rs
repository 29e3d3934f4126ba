//! Forensics on damaged and crashed stores (issue 14 items 2, 3 and 5): a consume-queue unit in
//! the middle of a file naming another record, quarantine recovery, read-only key lookups
//! after a crash with the index behind, the one KEYS rule at the engine, and what a clean open
//! walks with `normal_recovery_from_checkpoint`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::copy_tree;
use rocketstore::format::{offset_to_file_name, Checkpoint};
use rocketstore::{
    ConfigValue, Error, PutMessage, PutResult, PutStatus, ServiceKind, Store, StoreConfig,
};

const FILE: u64 = 64 * 1024;
const CQ_UNITS: usize = 50;

fn config(pairs: &[(&str, ConfigValue)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", ConfigValue::Int(FILE as i64)),
        (
            "mapped_file_size_consume_queue",
            ConfigValue::Int((CQ_UNITS * 20) as i64),
        ),
        ("max_hash_slot_num", ConfigValue::Int(64)),
        ("max_index_num", ConfigValue::Int(100)),
        ("background_threads", ConfigValue::Bool(false)),
        ("fsync_directory", ConfigValue::Bool(false)),
    ] {
        c.set(k, v).unwrap();
    }
    for (k, v) in pairs {
        c.set(k, v.clone()).unwrap();
    }
    c
}

fn body_for(i: u64) -> Vec<u8> {
    let len = 40 + (i * 37 % 120) as usize;
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

/// Puts `from..to` into topic "F", queue 0, key `k<i>`.
fn put_range(store: &Store, from: u64, to: u64) -> Vec<PutResult> {
    (from..to)
        .map(|i| {
            let body = body_for(i);
            let key = format!("k{i}");
            let r = store
                .put(&PutMessage {
                    topic: "F",
                    body: &body,
                    keys: &[key.as_str()],
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(r.status, PutStatus::PutOk);
            r
        })
        .collect()
}

fn cq_file(root: &Path, n: usize) -> PathBuf {
    root.join("consumequeue")
        .join("F")
        .join("0")
        .join(offset_to_file_name((n * CQ_UNITS * 20) as u64))
}

/// Every queue offset of "F"/0 reads back its own record.
fn check_queue(store: &Store, results: &[PutResult]) {
    assert_eq!(store.max_offset_in_queue("F", 0), results.len() as i64);
    for (i, r) in results.iter().enumerate() {
        let got = store
            .get_message("F", 0, i as i64, 1, None, None)
            .unwrap()
            .messages;
        assert_eq!(got.len(), 1, "queue offset {i}");
        assert_eq!(
            got[0].commitlog_offset(),
            r.commitlog_offset,
            "queue offset {i}"
        );
        assert_eq!(got[0].body, body_for(i as u64));
    }
}

#[test]
fn a_unit_in_the_middle_of_a_cq_file_naming_another_record_is_repaired_at_recovery() {
    let outer = tempfile::tempdir().unwrap();
    let pristine = outer.path().join("pristine");
    let results = {
        let store = Store::open(&pristine, config(&[])).unwrap();
        let r = put_range(&store, 0, 120);
        store.close().unwrap();
        r
    };
    // Unit 60 (second CQ file, position 10) is rewritten to name record 3 (valid, but another
    // queue offset), and unit 61 to name record 75's offset with record 61's size.
    for (clean, what) in [(true, "clean shutdown"), (false, "after a crash")] {
        let root = outer.path().join(format!("copy-{clean}"));
        copy_tree(&pristine, &root);
        let path = cq_file(&root, 1);
        let mut b = std::fs::read(&path).unwrap();
        let mut unit = |pos: usize, phy: i64, size: i32| {
            b[pos * 20..pos * 20 + 8].copy_from_slice(&phy.to_be_bytes());
            b[pos * 20 + 8..pos * 20 + 12].copy_from_slice(&size.to_be_bytes());
        };
        unit(
            10,
            results[3].commitlog_offset,
            results[3].wrote_bytes as i32,
        );
        unit(
            11,
            results[75].commitlog_offset,
            results[61].wrote_bytes as i32,
        );
        std::fs::write(&path, b).unwrap();
        if !clean {
            std::fs::write(root.join("abort"), b"").unwrap();
        }
        let store = Store::open(&root, config(&[])).unwrap();
        assert_eq!(store.recovery_report().mismatched_queues, 1, "{what}");
        check_queue(&store, &results);
        store.close().unwrap();
        // The repaired queue files equal the pristine ones.
        assert_eq!(
            std::fs::read(cq_file(&root, 1)).unwrap(),
            std::fs::read(cq_file(&pristine, 1)).unwrap(),
            "{what}"
        );
        let again = Store::open(&root, config(&[])).unwrap();
        assert_eq!(again.recovery_report().mismatched_queues, 0);
        again.close().unwrap();
    }
}

/// Sets the checkpoint's durable offset (our extension).
fn set_durable(root: &Path, durable: u64) {
    let p = root.join("checkpoint");
    let mut cp = Checkpoint::decode(&std::fs::read(&p).unwrap()).unwrap();
    cp.ext.as_mut().unwrap().durable_commitlog_offset = durable as i64;
    std::fs::write(&p, cp.encode()).unwrap();
}

#[test]
fn quarantine_moves_a_damaged_file_below_the_durable_mark_aside_and_opens() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("s");
    let results = {
        let store = Store::open(&root, config(&[])).unwrap();
        let r = put_range(&store, 0, 1200);
        store.close().unwrap();
        r
    };
    let end = results
        .last()
        .map(|r| r.commitlog_offset as u64 + r.wrote_bytes as u64)
        .unwrap();
    set_durable(&root, end);
    // Flip a body byte of a record in the middle of the file before the last one (a clean
    // shutdown's recovery scans the last three files).
    let last_file = (end - 1) / FILE;
    assert!(last_file >= 3);
    let victim = results
        .iter()
        .position(|r| r.commitlog_offset as u64 > (last_file - 1) * FILE + FILE / 2)
        .unwrap();
    let at = results[victim].commitlog_offset as u64;
    let file = root
        .join("commitlog")
        .join(offset_to_file_name(at - at % FILE));
    let mut b = std::fs::read(&file).unwrap();
    let pos = (at % FILE) as usize + results[victim].wrote_bytes as usize - 30;
    b[pos] ^= 0x40;
    std::fs::write(&file, &b).unwrap();
    let later: Vec<(String, Vec<u8>)> = {
        let mut v: Vec<_> = std::fs::read_dir(root.join("commitlog"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name() >= file.file_name())
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert!(later.len() >= 2, "damage must not be in the last file");

    // The default mode refuses; the quarantine mode opens with what is intact.
    match Store::open(&root, config(&[])) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, at),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a damaged record below the durable offset was accepted"),
    }
    let q = config(&[("recovery_mode", ConfigValue::Str("quarantine".into()))]);
    let store = Store::open(&root, q.clone()).unwrap();
    let report = store.recovery_report().clone();
    assert_eq!(report.end_offset, at);
    let qdir = report
        .quarantine_dir
        .clone()
        .expect("a quarantine directory");
    assert!(qdir.starts_with(root.join("quarantine")));
    check_queue(&store, &results[..victim]);
    for (i, r) in results[..victim].iter().enumerate().step_by(97) {
        let hits = store
            .query_message("F", &format!("k{i}"), 4, 0, i64::MAX)
            .unwrap();
        assert_eq!(hits.messages.len(), 1);
        assert_eq!(hits.messages[0].commitlog_offset(), r.commitlog_offset);
    }
    assert_eq!(
        store
            .query_message("F", &format!("k{victim}"), 4, 0, i64::MAX)
            .unwrap()
            .messages
            .len(),
        0
    );
    put_range(&store, 5000, 5010);
    store.close().unwrap();
    // Every byte recovery cut is in the quarantine directory, with a report.
    for (name, bytes) in &later {
        assert_eq!(&std::fs::read(qdir.join(name)).unwrap(), bytes, "{name}");
    }
    let text = std::fs::read_to_string(qdir.join("report.json")).unwrap();
    assert!(text.contains(&format!("\"damage_offset\": {at}")), "{text}");
    assert!(
        text.contains(&format!("\"durable_offset\": {end}")),
        "{text}"
    );
    assert!(text.contains("\"recovery_mode\": \"quarantine\""), "{text}");
    // Next opens are clean, in either mode.
    for cfg in [q, config(&[])] {
        let s = Store::open(&root, cfg).unwrap();
        assert!(s.recovery_report().quarantine_dir.is_none());
        assert_eq!(s.max_offset_in_queue("F", 0), victim as i64 + 10);
        s.close().unwrap();
    }
}

#[test]
fn read_only_after_a_crash_answers_every_key_with_the_index_behind() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("live");
    let early = outer.path().join("early");
    let store = Store::open(&root, config(&[])).unwrap();
    let mut results = put_range(&store, 0, 150);
    store.flush().unwrap();
    store.run_service_once(ServiceKind::Reput).unwrap();
    store.run_service_once(ServiceKind::FlushCq).unwrap();
    copy_tree(&root, &early);
    results.extend(put_range(&store, 150, 400));
    store.flush().unwrap();
    store.run_service_once(ServiceKind::Reput).unwrap();
    // The crash image: everything of the live store, but the index as it was 250 records ago,
    // and the abort file (the writer never closed).
    let crashed = outer.path().join("crashed");
    copy_tree(&root, &crashed);
    std::fs::remove_dir_all(crashed.join("index")).unwrap();
    copy_tree(&early.join("index"), &crashed.join("index"));
    assert!(crashed.join("abort").exists());
    drop(store);
    // A variant with no index at all.
    let no_index = outer.path().join("no-index");
    copy_tree(&crashed, &no_index);
    std::fs::remove_dir_all(no_index.join("index")).unwrap();

    for dir in [&crashed, &no_index] {
        let ro = Store::open_read_only(dir, config(&[])).unwrap();
        assert!(ro.recovery_report().abnormal);
        for (i, r) in results.iter().enumerate() {
            let hits = ro
                .query_message("F", &format!("k{i}"), 8, 0, i64::MAX)
                .unwrap();
            assert_eq!(
                hits.messages
                    .iter()
                    .map(|m| m.commitlog_offset())
                    .collect::<Vec<_>>(),
                [r.commitlog_offset],
                "k{i} in {}",
                dir.display()
            );
            let by_uniq = ro
                .query_message("F", hits.messages[0].uniq_key().unwrap(), 8, 0, i64::MAX)
                .unwrap();
            assert_eq!(by_uniq.messages.len(), 1);
            assert_eq!(
                ro.view_message_by_id(&r.msg_id())
                    .unwrap()
                    .commitlog_offset(),
                r.commitlog_offset
            );
        }
        // Time bounds still apply to the tail.
        let last = ro
            .look_message_by_offset(results[399].commitlog_offset as u64)
            .unwrap();
        let q = ro
            .query_message("F", "k399", 8, 0, last.store_timestamp - 1)
            .unwrap();
        assert!(q.messages.is_empty());
        assert!(ro
            .query_message("F", "nope", 8, 0, i64::MAX)
            .unwrap()
            .messages
            .is_empty());
        drop(ro);
    }
}

#[test]
fn keys_one_rule_at_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config(&[])).unwrap();
    let parts: Vec<&str> = rocketstore::format::keys::key_parts("a  b c").collect();
    let r = store
        .put(&PutMessage {
            topic: "K",
            body: b"x",
            keys: &parts,
            ..Default::default()
        })
        .unwrap();
    let m = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    assert_eq!(m.properties.get("KEYS"), Some("a  b c"));
    assert_eq!(m.keys(), ["a", "b", "c"]);
    let err = store
        .put(&PutMessage {
            topic: "K",
            body: b"x",
            keys: &["ok", "not ok"],
            ..Default::default()
        })
        .unwrap_err();
    assert!(err.to_string().contains("space"), "{err}");
    // No keys at all: no KEYS property.
    let r = store
        .put(&PutMessage {
            topic: "K",
            body: b"y",
            keys: &[""],
            ..Default::default()
        })
        .unwrap();
    let m = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    assert_eq!(m.properties.get("KEYS"), None);
    store.close().unwrap();
}

/// `normal_recovery_from_checkpoint`: a clean open walks from the end its shutdown recorded
/// (nothing), still walks and keeps records another writer appended past that end, and keeps
/// store times going up; the default walks the last three files as RocketMQ does.
#[test]
fn a_clean_open_from_the_checkpoint_walks_only_past_the_recorded_end() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("s");
    let fast = || config(&[("normal_recovery_from_checkpoint", ConfigValue::Bool(true))]);
    let end_of = |r: &[PutResult]| {
        let l = r.last().unwrap();
        l.commitlog_offset as u64 + l.wrote_bytes as u64
    };
    let first = {
        let store = Store::open(&root, fast()).unwrap();
        let r = put_range(&store, 0, 1200);
        store.close().unwrap();
        r
    };
    let end1 = end_of(&first);
    assert!(end1 / FILE >= 3, "the store spans more than three files");
    let checkpoint_at_end1 = std::fs::read(root.join("checkpoint")).unwrap();

    let store = Store::open(&root, fast()).unwrap();
    let r = store.recovery_report().clone();
    assert!(!r.abnormal && !r.from_window, "{r:?}");
    assert_eq!(
        (r.scan_start_offset, r.walked_bytes, r.end_offset),
        (end1, 0, end1)
    );
    check_queue(&store, &first);
    let more = put_range(&store, 1200, 1300);
    assert!(more[0].store_timestamp >= first.last().unwrap().store_timestamp);
    store.close().unwrap();
    let all = [first, more].concat();
    let end2 = end_of(&all);

    // Records past the recorded end (a writer that left the checkpoint as it was) are walked
    // with their CRCs checked and kept.
    std::fs::write(root.join("checkpoint"), &checkpoint_at_end1).unwrap();
    let store = Store::open(&root, fast()).unwrap();
    let r = store.recovery_report().clone();
    assert_eq!(
        (r.scan_start_offset, r.walked_bytes, r.end_offset),
        (end1, end2 - end1, end2),
        "{r:?}"
    );
    check_queue(&store, &all);
    for i in [0, 700, 1299] {
        let hits = store
            .query_message("F", &format!("k{i}"), 4, 0, i64::MAX)
            .unwrap();
        assert_eq!(hits.messages.len(), 1, "k{i}");
    }
    store.close().unwrap();

    // The default: RocketMQ's walk of the last three files.
    let store = Store::open(&root, config(&[])).unwrap();
    let r = store.recovery_report().clone();
    let files = store.commitlog_files().len();
    assert_eq!(r.scan_start_file, files - 3, "{r:?}");
    assert_eq!(r.scan_start_offset, (files as u64 - 3) * FILE, "{r:?}");
    assert_eq!(r.walked_bytes, end2 - r.scan_start_offset, "{r:?}");
    check_queue(&store, &all);
    store.close().unwrap();
}
