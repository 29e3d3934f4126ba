//! Disk use that follows the data: a closed store keeps no block it does not use (its files
//! keep the lengths RocketMQ requires; their unwritten tails are holes), and a writable reopen
//! makes the space real again before it writes there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rocketstore::{PutMessage, Store, StoreConfig};

/// (blocks in bytes, apparent size) of every regular file under `root`, by path.
fn files(root: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                dirs.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, (m.blocks() * 512, m.len()));
            }
        }
    }
    out
}

fn blocks(root: &Path) -> u64 {
    files(root).values().map(|v| v.0).sum()
}

fn lengths(root: &Path) -> BTreeMap<String, u64> {
    files(root).into_iter().map(|(k, v)| (k, v.1)).collect()
}

/// Puts `n` messages of 100 bytes with one key each, in batches; returns the bytes the data
/// occupies: records, consume queue units and index entries (two per message: the unique key
/// and the key).
fn fill(store: &Store, n: usize, first: usize) -> u64 {
    let body = [7u8; 100];
    let keys: Vec<String> = (first..first + n).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    let mut bytes = 0u64;
    for chunk in key_refs.chunks(10_000) {
        let msgs: Vec<PutMessage<'_>> = chunk
            .iter()
            .map(|k| PutMessage {
                topic: "Space",
                body: &body,
                keys: k,
                ..Default::default()
            })
            .collect();
        for r in store.put_batch(&msgs).unwrap() {
            assert_eq!(r.status, rocketstore::PutStatus::PutOk, "{r:?}");
            bytes += r.wrote_bytes as u64 + 20 + 2 * 20;
        }
    }
    bytes
}

const MIB: u64 = 1 << 20;

fn check_closed_store(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = Store::open(&root, StoreConfig::default()).unwrap();
    let data = fill(&store, n, 0);
    store.close().unwrap();
    drop(store);
    let lens = lengths(&root);
    let used = blocks(&root);
    let goal = data + data / 10 + MIB;
    assert!(
        used <= goal,
        "{n} messages: {used} bytes of blocks for {data} bytes of data (goal {goal}): {:#?}",
        files(&root)
    );
    if n == 1 {
        assert!(used < 5_000_000, "one message: {used} bytes of blocks");
    }
    // RocketMQ's lengths: the default commit log file is 1 GiB, a consume queue file 6,000,000
    // bytes, an index file 420,000,040 bytes.
    assert_eq!(lens["commitlog/00000000000000000000"], 1 << 30);
    assert_eq!(lens["consumequeue/Space/0/00000000000000000000"], 6_000_000);
    assert!(lens
        .iter()
        .any(|(k, &v)| k.starts_with("index/") && v == 420_000_040));

    // A writable reopen appends and reads everything back; closed again, it is trimmed again
    // and every length is as before.
    let store = Store::open(&root, StoreConfig::default()).unwrap();
    let more = fill(&store, 1000, n);
    assert_eq!(store.scan(0).unwrap().count(), n + 1000);
    store.close().unwrap();
    drop(store);
    assert_eq!(lengths(&root), lens, "file lengths changed");
    let used = blocks(&root);
    let data = data + more;
    assert!(
        used <= data + data / 10 + MIB,
        "after a reopen: {used} for {data}"
    );
    let store = Store::open_read_only(&root, StoreConfig::default()).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), n + 1000);
    for key in ["key-0".to_string(), format!("key-{}", n + 999)] {
        let found = store.query_message("Space", &key, 10, 0, i64::MAX).unwrap();
        assert_eq!(found.messages.len(), 1, "{key}");
    }
    drop(store);
}

#[test]
fn a_closed_store_of_one_message_keeps_a_few_blocks() {
    check_closed_store(1);
}

#[test]
fn a_closed_store_of_a_thousand_messages_keeps_the_blocks_of_its_data() {
    check_closed_store(1000);
}

/// 1,000,000 messages of 100 bytes with a key each (about 5 s in a release build).
#[test]
#[ignore = "slow: run with --ignored (make test-all)"]
fn a_closed_store_of_a_million_messages_keeps_the_blocks_of_its_data() {
    check_closed_store(1_000_000);
}
