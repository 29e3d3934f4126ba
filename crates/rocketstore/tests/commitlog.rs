//! Commit log behaviour through the public API: put, roll, read back, reopen, torn tails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rocketstore::format::{
    decode_record, parse_file_name, DecodeOptions, Decoded, BLANK_MAGIC_CODE,
};
use rocketstore::{ConfigValue, Error, PutMessage, PutStatus, Store, StoreConfig};

fn small_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.set("mapped_file_size_commit_log", ConfigValue::Int(64 * 1024))
        .unwrap();
    c
}

fn put_n(store: &Store, n: usize, body_len: usize) -> Vec<rocketstore::PutResult> {
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| vec![(i % 251) as u8; body_len + i % 7])
        .collect();
    let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    let msgs: Vec<PutMessage<'_>> = (0..n)
        .map(|i| PutMessage {
            topic: if i % 3 == 0 { "TopicA" } else { "TopicB" },
            body: &bodies[i],
            queue_id: (i % 4) as i32,
            tags: Some("TagA"),
            keys: &key_refs[i],
            ..Default::default()
        })
        .collect();
    store.put_batch(&msgs).unwrap()
}

/// Checks the on-disk invariants of a commit log directory independently of the engine:
/// full-size files named by offset, contiguous, every non-last file ending in a blank record
/// whose size is the rest of the file, every record's PHYSICALOFFSET equal to its position.
fn check_commitlog_dir(dir: &Path, file_size: u64) -> usize {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let mut records = 0;
    for (i, p) in names.iter().enumerate() {
        let from = parse_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap();
        assert_eq!(from, i as u64 * file_size);
        let bytes = std::fs::read(p).unwrap();
        assert_eq!(bytes.len() as u64, file_size);
        let mut pos = 0usize;
        loop {
            let rest = &bytes[pos..];
            let opts = DecodeOptions {
                check_crc: true,
                expected_physical_offset: Some((from + pos as u64) as i64),
                ..Default::default()
            };
            match decode_record(rest, &opts) {
                Ok(Decoded::Message(r)) => {
                    records += 1;
                    pos += r.total_size as usize;
                }
                Ok(Decoded::Blank { total_size }) => {
                    assert_eq!(
                        total_size as usize,
                        rest.len(),
                        "blank must cover the rest of the file"
                    );
                    assert_eq!(&rest[4..8], &BLANK_MAGIC_CODE.to_be_bytes());
                    assert!(
                        rest[8..].iter().all(|&b| b == 0),
                        "bytes after a blank are zero"
                    );
                    assert!(
                        i + 1 < names.len(),
                        "the last file does not end with a blank"
                    );
                    break;
                }
                Err(_) => {
                    assert!(
                        rest.iter().all(|&b| b == 0),
                        "garbage after the end of data in {p:?} at {pos}"
                    );
                    assert_eq!(i + 1, names.len(), "only the last file may end early");
                    break;
                }
            }
        }
    }
    records
}

#[test]
fn put_roll_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_config()).unwrap();
    let results = put_n(&store, 2000, 300);
    assert!(results.iter().all(|r| r.status == PutStatus::PutOk));
    // Queue offsets are per (topic, queue) and gap-free.
    let mut next = std::collections::HashMap::new();
    for (i, r) in results.iter().enumerate() {
        let key = (i % 3 == 0, i % 4);
        let e = next.entry(key).or_insert(0i64);
        assert_eq!(r.queue_offset, *e);
        *e += 1;
    }
    // No record spans two files.
    for r in &results {
        let start = r.commitlog_offset as u64;
        let end = start + r.wrote_bytes as u64;
        assert_eq!(start / 65536, (end - 1) / 65536);
    }
    for (i, r) in results.iter().enumerate().step_by(97) {
        let m = store
            .look_message_by_offset(r.commitlog_offset as u64)
            .unwrap();
        assert_eq!(m.body.len(), 300 + i % 7);
        assert_eq!(m.tags(), Some("TagA"));
        assert_eq!(m.keys(), vec![format!("key-{i}").as_str()]);
        assert!(m.uniq_key().is_some());
        assert_eq!(m.msg_id(), r.msg_id());
        assert!(m.crc_ok());
    }
    let scanned: Vec<_> = store.scan(0).unwrap().map(Result::unwrap).collect();
    assert_eq!(scanned.len(), 2000);
    assert!(store.commitlog_files().len() > 5);
    store.close().unwrap();
    let records = check_commitlog_dir(&dir.path().join("commitlog"), 65536);
    assert_eq!(records, 2000);
    assert!(!dir.path().join("abort").exists());
    assert!(dir.path().join("checkpoint").exists());
}

#[test]
fn reopen_continues_offsets_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let store = Store::open(dir.path(), small_config()).unwrap();
        let r = put_n(&store, 500, 200);
        store.close().unwrap();
        r
    };
    let store = Store::open(dir.path(), small_config()).unwrap();
    assert_eq!(store.recovery_report().records, 500);
    assert!(!store.recovery_report().abnormal);
    let second = put_n(&store, 500, 200);
    // Every (topic, queue) continues where the first run stopped.
    let mut counts = std::collections::HashMap::new();
    for i in 0..500usize {
        *counts.entry((i % 3 == 0, i % 4)).or_insert(0i64) += 1;
    }
    let mut seen = std::collections::HashMap::new();
    for (i, b) in second.iter().enumerate() {
        let key = (i % 3 == 0, i % 4);
        let k = seen.entry(key).or_insert(0i64);
        assert_eq!(b.queue_offset, counts[&key] + *k);
        *k += 1;
    }
    let last_first = first.last().unwrap();
    assert!(
        second[0].commitlog_offset >= last_first.commitlog_offset + last_first.wrote_bytes as i64
    );
    assert_eq!(store.next_queue_offset("TopicA", 0), 2 * counts[&(true, 0)]);
    store.close().unwrap();
    assert_eq!(
        check_commitlog_dir(&dir.path().join("commitlog"), 65536),
        1000
    );
}

#[test]
fn a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_config()).unwrap();
    // flock is per open file description, so a second open in-process conflicts too.
    match Store::open(dir.path(), small_config()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    store.close().unwrap();
    Store::open(dir.path(), small_config())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn read_only_changes_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), small_config()).unwrap();
        put_n(&store, 300, 100);
        store.close().unwrap();
    }
    std::fs::remove_file(dir.path().join("lock")).unwrap();
    let snapshot = snapshot(dir.path());
    let ro = Store::open_read_only(dir.path(), StoreConfig::default()).unwrap();
    assert_eq!(
        ro.commitlog_file_size(),
        65536,
        "file size is inferred from the files"
    );
    assert_eq!(ro.scan(0).unwrap().count(), 300);
    match ro.put(&PutMessage {
        topic: "T",
        body: b"x",
        ..Default::default()
    }) {
        Err(Error::ReadOnly { .. }) => {}
        other => panic!("expected ReadOnly, got {other:?}"),
    }
    ro.close().unwrap();
    assert_eq!(snapshot, self::snapshot(dir.path()));
}

fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn torn_tail_recovers_to_the_previous_record() {
    let dir = tempfile::tempdir().unwrap();
    let (results, end) = {
        let store = Store::open(dir.path(), small_config()).unwrap();
        let r = put_n(&store, 50, 100);
        let end = store.max_commitlog_offset();
        store.close().unwrap();
        (r, end)
    };
    let last = results.last().unwrap();
    let start = last.commitlog_offset as u64;
    let path = dir
        .path()
        .join("commitlog")
        .join(rocketstore::format::offset_to_file_name(
            start - start % 65536,
        ));
    let pristine = std::fs::read(&path).unwrap();
    let pos = (start % 65536) as usize;
    // A torn record was never durable: the checkpoint's durable offset is before it (recovery
    // refuses to truncate below that offset; see tests/damage.rs).
    let cp_path = dir.path().join("checkpoint");
    let mut cp =
        rocketstore::format::Checkpoint::decode(&std::fs::read(&cp_path).unwrap()).unwrap();
    cp.ext.as_mut().unwrap().durable_commitlog_offset = start as i64;
    std::fs::write(&cp_path, cp.encode()).unwrap();
    // Every prefix of the last record: the bytes past the prefix are zero (preallocated file).
    for cut in 0..last.wrote_bytes as usize {
        let mut bytes = pristine.clone();
        for b in &mut bytes[pos + cut..pos + last.wrote_bytes as usize] {
            *b = 0;
        }
        std::fs::write(&path, &bytes).unwrap();
        std::fs::write(dir.path().join("abort"), b"1").unwrap();
        let store = Store::open(dir.path(), small_config()).unwrap();
        assert_eq!(store.max_commitlog_offset(), start, "cut at {cut}");
        assert_eq!(store.scan(0).unwrap().count(), 49);
        store.close().unwrap();
    }
    // Recovery zero-filled the torn bytes: nothing stale remains after the recovered end.
    let after = std::fs::read(&path).unwrap();
    assert!(after[pos..].iter().all(|&b| b == 0));
    // The intact record is found again when its bytes are back.
    std::fs::write(&path, &pristine).unwrap();
    let store = Store::open(dir.path(), small_config()).unwrap();
    assert_eq!(store.max_commitlog_offset(), end);
    store.close().unwrap();
}

#[test]
fn invalid_input_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config();
    cfg.set("max_message_size", ConfigValue::Int(1000)).unwrap();
    let store = Store::open(dir.path(), cfg).unwrap();
    put_n(&store, 10, 10);
    let before = store.cursors();
    let big = vec![0u8; 1001];
    let long_topic = "t".repeat(256);
    let bad: Vec<PutMessage<'_>> = vec![
        PutMessage {
            topic: "",
            body: b"x",
            ..Default::default()
        },
        PutMessage {
            topic: "a/b",
            body: b"x",
            ..Default::default()
        },
        PutMessage {
            topic: "..",
            body: b"x",
            ..Default::default()
        },
        PutMessage {
            topic: &long_topic,
            body: b"x",
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            queue_id: -1,
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            queue_id: 1024,
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: &big,
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            tags: Some("a\u{1}b"),
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            keys: &["has space"],
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            properties: &[("TAGS", "x")],
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            properties: &[("k", "")],
            ..Default::default()
        },
        PutMessage {
            topic: "T",
            body: b"x",
            properties: &[("k\0", "v")],
            ..Default::default()
        },
    ];
    for (i, m) in bad.iter().enumerate() {
        let e = store.put(m).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument { .. } | Error::MessageTooLarge { .. }
            ),
            "case {i}: {e:?}"
        );
        // A batch with one bad message writes nothing either.
        let good = PutMessage {
            topic: "T",
            body: b"ok",
            ..Default::default()
        };
        assert!(store.put_batch(&[good.clone(), m.clone(), good]).is_err());
    }
    let huge_value = "v".repeat(40_000);
    let props = [("k", huge_value.as_str())];
    assert!(matches!(
        store.put(&PutMessage {
            topic: "T",
            body: b"x",
            properties: &props,
            ..Default::default()
        }),
        Err(Error::MessageTooLarge {
            field: "properties",
            ..
        })
    ));
    assert_eq!(store.cursors(), before);
    // Topics of 128..=255 bytes are written as V2 records.
    let t200 = "x".repeat(200);
    let r = store
        .put(&PutMessage {
            topic: &t200,
            body: b"v2",
            ..Default::default()
        })
        .unwrap();
    let m = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    assert_eq!(m.topic, t200);
    assert_eq!(m.version, rocketstore::format::MessageVersion::V2);
    store.close().unwrap();
}

/// Writes the same messages (batches of mixed sizes across file rolls, and single puts) into
/// a store, returning the put results.
fn put_mixed(store: &Store) -> Vec<rocketstore::PutResult> {
    let mut out = Vec::new();
    let sizes = [10usize, 300, 1024, 4096, 30_000, 70];
    let mut seq = 0usize;
    for round in 0..12 {
        let n = 40 + round * 7;
        let bodies: Vec<Vec<u8>> = (0..n)
            .map(|i| vec![((seq + i) % 251) as u8; sizes[(seq + i) % sizes.len()]])
            .collect();
        let keys: Vec<String> = (0..n).map(|i| format!("key-{}", seq + i)).collect();
        let uniq: Vec<String> = (0..n).map(|i| format!("UNIQ{:012}", seq + i)).collect();
        let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
        let msgs: Vec<PutMessage<'_>> = (0..n)
            .map(|i| PutMessage {
                topic: if (seq + i).is_multiple_of(3) {
                    "TopicA"
                } else {
                    "TopicB"
                },
                body: &bodies[i],
                // Every fourth round is one queue: written as a MessageBatch (never split).
                queue_id: if round % 4 == 3 {
                    1
                } else {
                    ((seq + i) % 4) as i32
                },
                tags: Some("TagA"),
                keys: &key_refs[i],
                born_timestamp: Some(1_700_000_000_000 + (seq + i) as i64),
                uniq_key: Some(uniq[i].as_str()),
                ..Default::default()
            })
            .collect();
        out.extend(store.put_batch(&msgs).unwrap());
        let single = format!("single-{round}");
        out.push(
            store
                .put(&PutMessage {
                    topic: "TopicC",
                    body: single.as_bytes(),
                    born_timestamp: Some(1_700_000_000_000),
                    uniq_key: Some(single.as_str()),
                    ..Default::default()
                })
                .unwrap(),
        );
        seq += n;
    }
    out
}

/// Byte offset of STORETIMESTAMP in a record with an IPv4 born host.
const STORE_TIMESTAMP_AT: usize = 56;

#[test]
fn pwrite_commit_log_writes_the_same_bytes_as_the_mapping() {
    let run = |pwrite: bool| {
        let dir = tempfile::tempdir().unwrap();
        let mut c = StoreConfig::default();
        for (k, v) in [
            ("mapped_file_size_commit_log", ConfigValue::Int(1 << 20)),
            ("mapped_file_size_consume_queue", ConfigValue::Int(300 * 20)),
            // The whole-record CRC covers the store timestamp, which differs between stores.
            ("enabled_append_prop_crc", ConfigValue::Bool(false)),
            ("pwrite_commit_log", ConfigValue::Bool(pwrite)),
        ] {
            c.set(k, v).unwrap();
        }
        let store = Store::open(dir.path(), c).unwrap();
        let results = put_mixed(&store);
        assert!(results.iter().all(|r| r.status == PutStatus::PutOk));
        store.flush().unwrap();
        let scanned: Vec<_> = store
            .scan(0)
            .unwrap()
            .with_crc_check(true)
            .map(Result::unwrap)
            .collect();
        assert_eq!(scanned.len(), results.len());
        store.close().unwrap();
        (dir, results)
    };
    let (mapped, r1) = run(false);
    let (staged, r2) = run(true);
    let key = |r: &rocketstore::PutResult| (r.commitlog_offset, r.queue_offset, r.wrote_bytes);
    assert_eq!(
        r1.iter().map(key).collect::<Vec<_>>(),
        r2.iter().map(key).collect::<Vec<_>>()
    );
    let files = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d.join("commitlog"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let (f1, f2) = (files(mapped.path()), files(staged.path()));
    assert!(f1.len() >= 3, "the messages span several files");
    assert_eq!(
        f1.iter().map(|p| p.file_name()).collect::<Vec<_>>(),
        f2.iter().map(|p| p.file_name()).collect::<Vec<_>>()
    );
    for (a, b) in f1.iter().zip(&f2) {
        let base = parse_file_name(a.file_name().unwrap().to_str().unwrap()).unwrap();
        let want = std::fs::read(a).unwrap();
        let mut got = std::fs::read(b).unwrap();
        assert_eq!(want.len(), got.len());
        // Only the store timestamps may differ: take the reference's.
        for r in &r1 {
            let off = r.commitlog_offset as u64;
            if off >= base && off < base + want.len() as u64 {
                let at = (off - base) as usize + STORE_TIMESTAMP_AT;
                got[at..at + 8].copy_from_slice(&want[at..at + 8]);
            }
        }
        assert!(want == got, "{} differs", b.display());
    }
    let cq = |d: &Path| {
        snapshot(&d.join("consumequeue"))
            .into_iter()
            .map(|(p, bytes)| (p.replace(&d.display().to_string(), ""), bytes))
            .collect::<Vec<_>>()
    };
    assert!(
        cq(mapped.path()) == cq(staged.path()),
        "consume queues are byte-identical"
    );
    check_commitlog_dir(&staged.path().join("commitlog"), 1 << 20);
    // Reopened, the staged store reads back the same messages.
    let mut c = StoreConfig::default();
    c.set("mapped_file_size_consume_queue", ConfigValue::Int(300 * 20))
        .unwrap();
    let store = Store::open(staged.path(), c).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), r1.len());
    store.close().unwrap();
}

#[test]
fn pwrite_commit_log_with_the_record_crc_reads_back_intact() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = StoreConfig::default();
    c.set("mapped_file_size_commit_log", ConfigValue::Int(1 << 20))
        .unwrap();
    c.set("pwrite_commit_log", ConfigValue::Bool(true)).unwrap();
    let store = Store::open(dir.path(), c).unwrap();
    let results = put_mixed(&store);
    for r in results.iter().step_by(13) {
        let m = store
            .look_message_by_offset(r.commitlog_offset as u64)
            .unwrap();
        assert!(m.crc_ok());
        assert_eq!(m.msg_id(), r.msg_id());
    }
    store.close().unwrap();
    let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
    let n = store
        .scan(0)
        .unwrap()
        .with_crc_check(true)
        .map(Result::unwrap)
        .count();
    assert_eq!(n, results.len());
    store.close().unwrap();
}
