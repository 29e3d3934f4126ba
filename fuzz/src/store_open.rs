//! The `store_open` fuzz target's check, shared by `fuzz_targets/store_open.rs` and the engine's
//! regression replay test (`crates/rocketstore/tests/fuzz_regressions.rs`, which includes this
//! file with `#[path]`): arbitrary bytes become the files of a small store, which is opened
//! read-only and then writable. Opening, reading and writing such a store may fail with any
//! typed error; it must never panic (nor crash the process: files are mapped with their real
//! length). Depends only on `rocketstore` and `std`.
//!
//! Input layout (a missing part is empty): byte 0 holds flags, then each present file as a
//! little-endian `u16` length and that many bytes, in the order commit log file 0, commit log
//! file 1, consume queue file `Fz/0/0`, index file, checkpoint.
//! - flag bits 0..=4: the five files above are present;
//! - bit 5: an `abort` file is present (a crash: abnormal recovery);
//! - bit 6: files are zero-padded to their configured size (deeper paths); else as given;
//! - bit 7: also open writable (and put, read, close).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rocketstore::{ConfigValue, PutMessage, Store, StoreConfig};

/// Commit log file size of the fuzzed store.
pub const COMMIT_LOG_FILE: usize = 8192;
/// Consume queue file size (64 units).
pub const CQ_FILE: usize = 64 * 20;
/// Index slots and entries.
pub const INDEX_SLOTS: usize = 8;
/// Index entries per file.
pub const INDEX_ENTRIES: usize = 16;
/// Index file size.
pub const INDEX_FILE: usize = 40 + INDEX_SLOTS * 4 + INDEX_ENTRIES * 20;
/// Checkpoint file size (RocketMQ's 4 KiB).
pub const CHECKPOINT: usize = 4096;

/// The store's configuration.
pub fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", COMMIT_LOG_FILE as i64),
        ("mapped_file_size_consume_queue", CQ_FILE as i64),
        ("max_hash_slot_num", INDEX_SLOTS as i64),
        ("max_index_num", INDEX_ENTRIES as i64),
        ("max_message_size", 2048),
    ] {
        c.set(k, ConfigValue::Int(v)).unwrap();
    }
    for k in ["background_threads", "fsync_directory"] {
        c.set(k, ConfigValue::Bool(false)).unwrap();
    }
    c
}

/// The files of the layout: relative path and configured size.
pub fn files() -> [(&'static str, usize); 5] {
    [
        ("commitlog/00000000000000000000", COMMIT_LOG_FILE),
        ("commitlog/00000000000000008192", COMMIT_LOG_FILE),
        ("consumequeue/Fz/0/00000000000000000000", CQ_FILE),
        ("index/20240101000000000", INDEX_FILE),
        ("checkpoint", CHECKPOINT),
    ]
}

/// Encodes a store's files (as [`files`] names them, `None` for absent) and flags into an input.
pub fn encode(flags: u8, contents: &[Option<Vec<u8>>; 5]) -> Vec<u8> {
    let mut flags = flags & 0xE0;
    let mut out = vec![0];
    for (i, c) in contents.iter().enumerate() {
        if let Some(c) = c {
            flags |= 1 << i;
            let c = &c[..c.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(c.len() as u16).to_le_bytes());
            out.extend_from_slice(c);
        }
    }
    out[0] = flags;
    out
}

fn scratch_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("rocketstore-fuzz-open-{}-{n}", std::process::id()))
}

/// Writes the store of `data` under `root`; returns (padded, writable).
fn build(root: &Path, data: &[u8]) -> (bool, bool) {
    let flags = data.first().copied().unwrap_or(0);
    let mut rest = data.get(1..).unwrap_or_default();
    let padded = flags & 0x40 != 0;
    for (i, (rel, size)) in files().into_iter().enumerate() {
        if flags & (1 << i) == 0 {
            continue;
        }
        let len = match rest {
            [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])),
            _ => 0,
        };
        rest = rest.get(2..).unwrap_or_default();
        let take = len.min(rest.len());
        let mut bytes = rest[..take].to_vec();
        rest = &rest[take..];
        if padded {
            bytes.resize(size.max(bytes.len()), 0);
        }
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
    }
    if flags & 0x20 != 0 {
        std::fs::write(root.join("abort"), b"1").unwrap();
    }
    (padded, flags & 0x80 != 0)
}

/// Exercises an open store a little: a scan, a queue read, a key lookup.
fn read_some(store: &Store) {
    if let Ok(scan) = store.scan(store.min_commitlog_offset()) {
        for m in scan.with_crc_check(true).take(64) {
            if m.is_err() {
                break;
            }
        }
    }
    for (topic, queue, lo, _) in store.consume_queues().into_iter().take(4) {
        let _ = store.get_message(&topic, queue, lo, 16, None, None);
    }
    let _ = store.query_message("Fz", "k", 8, 0, i64::MAX);
}

/// Builds the store of `data`, opens it read-only, then (flag bit 7) writable: errors are fine,
/// panics are not. The store is deleted afterwards.
pub fn check(data: &[u8]) {
    let root = scratch_dir();
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let (_, writable) = build(&root, data);
    if let Ok(store) = Store::open_read_only(&root, config()) {
        read_some(&store);
        let _ = store.close();
    }
    if writable {
        if let Ok(store) = Store::open(&root, config()) {
            read_some(&store);
            let keys = ["k"];
            let _ = store.put(&PutMessage {
                topic: "Fz",
                body: b"after a fuzzed open",
                keys: &keys,
                ..Default::default()
            });
            read_some(&store);
            let _ = store.close();
            // A writable open repaired the store: a second open must succeed.
            if let Err(e) = Store::open(&root, config()).and_then(|s| s.close()) {
                panic!("reopen after a successful writable open failed: {e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
