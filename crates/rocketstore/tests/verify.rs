//! `verify_store`: a pristine store of several files passes every check with the manifest entry the
//! writer would record; a flipped body byte fails `crc` (and the digest) at that record only; a
//! wrong manifest entry fails `manifest`; an index entry that points elsewhere fails `index`, naming
//! the key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use rocketstore::bulk::body_digest;
use rocketstore::verify::ManifestEntry;
use rocketstore::{verify_store, ConfigValue, PutMessage, Store, StoreConfig, VerifyOptions};

const FILE: u64 = 64 * 1024;
/// Messages written: about 7 commit log files, so that recovery (which scans the last 3 files
/// of a cleanly closed store) does not look at the first one.
const N: u32 = 1000;

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", ConfigValue::Int(FILE as i64)),
        ("mapped_file_size_consume_queue", ConfigValue::Int(50 * 20)),
        ("max_hash_slot_num", ConfigValue::Int(64)),
        ("max_index_num", ConfigValue::Int(1000)),
        ("fsync_directory", ConfigValue::Bool(false)),
    ] {
        c.set(k, v).unwrap();
    }
    c
}

/// Writes N messages over 2 topics x 3 queues with keys and tags; returns the bodies.
fn write(root: &Path) -> Vec<Vec<u8>> {
    let store = Store::open(root, config()).unwrap();
    let mut bodies = Vec::new();
    for i in 0..N {
        let body = format!("body-{i}-{}", "x".repeat((i % 7) as usize * 100)).into_bytes();
        let k1 = format!("k{i}");
        let k2 = format!("shared{}", i % 50);
        let keys = [k1.as_str(), k2.as_str()];
        let tags = format!("t{}", i % 3);
        let msg = PutMessage {
            topic: if i % 2 == 0 { "VerifyA" } else { "VerifyB" },
            queue_id: (i % 3) as i32,
            body: &body,
            keys: &keys,
            tags: Some(&tags),
            ..PutMessage::default()
        };
        store.put(&msg).unwrap();
        bodies.push(body);
    }
    store.close().unwrap();
    bodies
}

fn entry(report: &rocketstore::StoreReport) -> ManifestEntry {
    let mut queues: BTreeMap<String, BTreeMap<i32, u64>> = BTreeMap::new();
    for q in &report.queues {
        queues
            .entry(q.topic.clone())
            .or_default()
            .insert(q.queue_id, q.messages);
    }
    ManifestEntry {
        messages: Some(report.messages),
        bytes: Some(report.bytes),
        min_offset: Some(report.min_offset),
        max_offset: Some(report.max_offset),
        queues: Some(queues),
        body_digest: Some(report.body_digest),
    }
}

#[test]
fn pristine_store_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = write(dir.path());
    let first = verify_store(dir.path(), config(), &VerifyOptions::default());
    assert!(first.ok(), "{first:?}");
    assert_eq!(first.messages, u64::from(N));
    assert!(first.files >= 2, "the store spans several files");
    assert_eq!(
        first.body_digest,
        body_digest(bodies.iter().map(|b| Some(&b[..])))
    );
    assert_eq!(first.check("crc").unwrap().checked, u64::from(N));
    // N records x (2 keys + UNIQ_KEY)
    assert_eq!(first.check("index").unwrap().checked, 3 * u64::from(N));
    assert_eq!(first.check("manifest").unwrap().skipped, 1);

    let opts = VerifyOptions {
        manifest: Some(entry(&first)),
        ..VerifyOptions::default()
    };
    let again = verify_store(dir.path(), config(), &opts);
    assert!(again.ok(), "{again:?}");
    assert_eq!(again.check("manifest").unwrap().checked, 6);

    let mut wrong = entry(&first);
    wrong.messages = Some(u64::from(N) - 1);
    wrong.body_digest = Some(1);
    let opts = VerifyOptions {
        manifest: Some(wrong),
        name: Some("s0".into()),
        ..VerifyOptions::default()
    };
    let bad = verify_store(dir.path(), config(), &opts);
    let m = bad.check("manifest").unwrap();
    assert_eq!(m.failed, 2, "{m:?}");
    assert!(m.examples[0].starts_with("s0: manifest says messages=999"));
}

#[test]
fn flipped_body_byte_fails_crc_at_that_record() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = write(dir.path());
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    let target = bodies[40].clone();
    let file = store.commitlog_files()[0].clone();
    drop(store);
    let mut data = std::fs::read(&file).unwrap();
    let at = data
        .windows(target.len())
        .position(|w| w == target.as_slice())
        .unwrap();
    data[at + 3] ^= 0x20;
    std::fs::write(&file, &data).unwrap();

    let report = verify_store(dir.path(), config(), &VerifyOptions::default());
    let crc = report.check("crc").unwrap();
    assert_eq!(crc.failed, 1, "{report:?}");
    assert!(crc.examples[0].contains("body CRC mismatch at commit log offset"));
    assert_eq!(
        report.messages,
        u64::from(N),
        "the bad record is still read and counted"
    );
    for name in ["framing", "consume_queue", "gap_free", "index"] {
        assert!(report.check(name).unwrap().passed(), "{name}: {report:?}");
    }
    assert_eq!(report.check("index").unwrap().skipped, 3);
}

#[test]
fn missing_store_fails_framing_only() {
    let dir = tempfile::tempdir().unwrap();
    let report = verify_store(
        &dir.path().join("nope/deeper"),
        config(),
        &VerifyOptions::default(),
    );
    assert!(!report.ok());
    assert!(!report.check("crc").unwrap().ran);
    assert!(report.check("framing").unwrap().examples[0].contains("cannot open"));
}

#[test]
fn index_entry_pointing_elsewhere_fails_index_naming_the_key() {
    use rocketstore::format::{IndexEntry, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    // Record 7 (topic VerifyB): its entry for key "k7" now points one byte past the record.
    let hash = rocketstore::format::index_key_hash_of("VerifyB", "k7");
    let slots = 64usize;
    let mut damaged = 0;
    for file in std::fs::read_dir(dir.path().join("index")).unwrap() {
        let path = file.unwrap().path();
        let mut data = std::fs::read(&path).unwrap();
        let entries = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
        let mut at = entries + INDEX_ENTRY_SIZE; // entry 0 is never used
        while let Some(mut e) = data
            .get(at..at + INDEX_ENTRY_SIZE)
            .and_then(IndexEntry::decode)
        {
            if e.key_hash == hash && e.phy_offset > 0 {
                e.phy_offset += 1;
                data[at..at + INDEX_ENTRY_SIZE].copy_from_slice(&e.encode());
                damaged += 1;
            }
            at += INDEX_ENTRY_SIZE;
        }
        std::fs::write(&path, &data).unwrap();
    }
    assert_eq!(damaged, 1, "one entry of k7");

    let opts = VerifyOptions {
        name: Some("s0".into()),
        ..VerifyOptions::default()
    };
    let report = verify_store(dir.path(), config(), &opts);
    let index = report.check("index").unwrap();
    assert_eq!(index.failed, 1, "{index:?}");
    assert_eq!(index.checked, 3 * u64::from(N));
    assert!(
        index.examples[0]
            .starts_with("s0: the index does not find key \"k7\" of topic \"VerifyB\""),
        "{index:?}"
    );
    for name in ["crc", "framing", "consume_queue", "gap_free"] {
        assert!(report.check(name).unwrap().passed(), "{name}: {report:?}");
    }
}

/// `committed_end` (a stream sink's last committed micro-batch): records from there on are still
/// checked but not counted in messages, bytes, queues and digests.
#[test]
fn records_past_the_committed_end_are_checked_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let cut = {
        let store = Store::open_read_only(dir.path(), config()).unwrap();
        let m = store.scan(0).unwrap().nth(600).unwrap().unwrap();
        m.header.physical_offset as u64
    };
    let all = verify_store(dir.path(), config(), &VerifyOptions::default());
    let opts = VerifyOptions {
        committed_end: Some(cut),
        message_digest: Some(true),
        ..VerifyOptions::default()
    };
    let part = verify_store(dir.path(), config(), &opts);
    assert!(part.ok(), "{part:?}");
    assert_eq!(all.messages, u64::from(N));
    assert_eq!(part.messages, 600);
    assert_eq!(part.queues.iter().map(|q| q.messages).sum::<u64>(), 600);
    assert_eq!(
        part.check("crc").unwrap().checked,
        all.check("crc").unwrap().checked,
        "every record is still checked"
    );
}
