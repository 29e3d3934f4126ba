//! Open/put/close cycles leave no thread, file descriptor or mapping behind (reliability E4).
//! One test per binary so no other test's threads disturb the counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rocketstore::{ConfigValue, PutMessage, Store, StoreConfig};

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

fn mappings_under(root: &std::path::Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let root = root.to_string_lossy();
    maps.lines().filter(|l| l.contains(root.as_ref())).count()
}

#[test]
fn a_thousand_open_put_close_cycles_leak_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::default();
    cfg.set("mapped_file_size_commit_log", ConfigValue::Int(64 * 1024))
        .unwrap();
    cfg.set("fsync_directory", ConfigValue::Bool(false))
        .unwrap();
    // Warm up once so lazily created runtime state (e.g. the allocator's first thread) exists.
    Store::open(dir.path(), cfg.clone())
        .unwrap()
        .close()
        .unwrap();
    let threads = count("/proc/self/task");
    let fds = count("/proc/self/fd");
    let body = [5u8; 200];
    for i in 0..1000 {
        let store = Store::open(dir.path(), cfg.clone()).unwrap();
        store
            .put(&PutMessage {
                topic: "Cycle",
                body: &body,
                queue_id: i % 3,
                ..Default::default()
            })
            .unwrap();
        if i % 2 == 0 {
            store.close().unwrap();
        }
        // Odd iterations rely on Drop to close.
    }
    assert_eq!(count("/proc/self/task"), threads, "threads leaked");
    assert_eq!(count("/proc/self/fd"), fds, "file descriptors leaked");
    assert_eq!(mappings_under(dir.path()), 0, "mappings leaked");
    let store = Store::open(dir.path(), cfg).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), 1000);
    store.close().unwrap();
}
