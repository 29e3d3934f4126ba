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
    eprintln!(
        "{n} messages: {used} bytes of blocks for {data} bytes of data ({:.3}x, goal {goal})",
        used as f64 / data as f64
    );
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

fn small() -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", 1 << 20),
        ("mapped_file_size_consume_queue", 20 * 1000),
        ("max_hash_slot_num", 100),
        ("max_index_num", 400),
    ] {
        c.set(k, rocketstore::ConfigValue::Int(v)).unwrap();
    }
    c
}

/// The files under `root` with their lengths and bytes (what a refused open must not change).
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    files(root)
        .into_keys()
        .map(|k| {
            let bytes = std::fs::read(root.join(&k)).unwrap();
            (k, bytes)
        })
        .collect()
}

#[test]
fn the_store_describes_its_geometry_and_a_contradiction_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = Store::open(&root, small()).unwrap();
    fill(&store, 500, 0);
    store.close().unwrap();
    drop(store);

    // A writable open without the keywords takes them from the files.
    let store = Store::open(&root, StoreConfig::default()).unwrap();
    fill(&store, 500, 500);
    store.close().unwrap();
    drop(store);
    assert_eq!(lengths(&root)["commitlog/00000000000000000000"], 1 << 20);

    // The offline repair too: the rebuilt files have the store's sizes, and it opens again.
    rocketstore::rebuild_indexes(&root, StoreConfig::default()).unwrap();
    let lens = lengths(&root);
    assert!(lens
        .iter()
        .filter(|(k, _)| k.starts_with("consumequeue/"))
        .all(|(_, &v)| v == 20_000));
    let store = Store::open(&root, small()).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), 1000);
    store.close().unwrap();
    drop(store);

    // A value that contradicts the files is refused, naming it and the value found, and the
    // store is left exactly as it was (no abort marker, no byte changed).
    let before = snapshot(&root);
    for (key, value, found) in [
        ("mapped_file_size_commit_log", 2 << 20, "1048576"),
        ("mapped_file_size_consume_queue", 20 * 2000, "20000"),
        ("max_index_num", 800, "max_index_num"),
    ] {
        let mut c = StoreConfig::default();
        c.set(key, rocketstore::ConfigValue::Int(value)).unwrap();
        let err = Store::open(&root, c.clone()).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(found), "{err}");
        let err = rocketstore::rebuild_indexes(&root, c)
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
        assert_eq!(
            snapshot(&root),
            before,
            "{key}: a refused open changed the store"
        );
    }
}

#[test]
fn a_directory_that_is_not_a_store_is_not_turned_into_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let err = Store::open(dir.path(), StoreConfig::default()).unwrap_err();
    assert!(err.to_string().contains("not a store"), "{err}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // An empty directory (or one with only hidden files) becomes a store.
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join(".keep"), b"").unwrap();
    Store::open(empty.path(), small()).unwrap().close().unwrap();
}

// ---- full disks ------------------------------------------------------------------------------

/// The writer of [`a_full_disk_is_a_typed_error_never_a_signal`], run in a child process (this
/// test binary again, with `ROCKETSTORE_SPACE_CHILD=<root> <mode> <ledger>`): puts 1 KiB
/// messages until an error, writing the commit log offset of every `PUT_OK` to the ledger.
/// Exits 0 on a disk-full error of a put, 3 on any other error (a fenced store among them); a
/// signal kills it.
#[test]
fn full_disk_writer_child() {
    use std::io::Write;
    let Ok(args) = std::env::var("ROCKETSTORE_SPACE_CHILD") else {
        return;
    };
    let args: Vec<&str> = args.split(' ').collect();
    let (root, mode, ledger) = (args[0], args[1], args[2]);
    let mut ledger = std::fs::File::create(ledger).unwrap();
    let body = vec![b'b'; 1024];
    let keys: Vec<String> = (0..1_000_000).map(|i| format!("k{i}")).collect();
    let outcome = (|| -> rocketstore::Result<()> {
        let store = Store::open(root, full_disk_config())?;
        let mut n = 0;
        while n < 1_000_000 {
            let batch = if mode == "put" { 1 } else { 50 };
            let key_refs: Vec<[&str; 1]> =
                keys[n..n + batch].iter().map(|k| [k.as_str()]).collect();
            let msgs: Vec<PutMessage<'_>> = key_refs
                .iter()
                .map(|k| PutMessage {
                    topic: "Full",
                    body: &body,
                    keys: k,
                    ..Default::default()
                })
                .collect();
            let results = if mode == "put" {
                vec![store.put(&msgs[0])?]
            } else {
                store.put_batch(&msgs)?
            };
            for r in results {
                if r.status != rocketstore::PutStatus::PutOk {
                    return Err(rocketstore::Error::Closed);
                }
                writeln!(ledger, "{}", r.commitlog_offset).unwrap();
            }
            n += batch;
        }
        store.close()
    })();
    ledger.flush().unwrap();
    // The put that meets the full disk fails with `DiskFull` itself; the store is not fenced.
    let full = |e: &rocketstore::Error| matches!(e, rocketstore::Error::DiskFull { .. });
    match outcome {
        Err(e) if full(&e) => {
            eprintln!("writer: {e}");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("unexpected error: {e:?}");
            std::process::exit(3)
        }
        Ok(()) => std::process::exit(4),
    }
}

fn full_disk_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", 8 << 20),
        ("mapped_file_size_consume_queue", 20 * 20_000),
        ("max_hash_slot_num", 10_000),
        ("max_index_num", 40_000),
    ] {
        c.set(k, rocketstore::ConfigValue::Int(v)).unwrap();
    }
    c
}

fn sh(args: &[&str]) -> std::process::Output {
    std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap()
}

/// Mounts a ~40 MB file system at `mnt` (`tmpfs` or `ext2` on a loop image under `scratch`);
/// returns the loop device to detach, or `None` (with the reason printed) where mounting is
/// impossible.
fn mount_small(kind: &str, mnt: &Path, scratch: &Path) -> Option<Option<String>> {
    std::fs::create_dir_all(mnt).unwrap();
    let out = if kind == "tmpfs" {
        sh(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=40m",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
    } else {
        let image = scratch.join("ext2.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(48 << 20)
            .unwrap();
        if !sh(&["mkfs.ext2", "-q", "-F", image.to_str().unwrap()])
            .status
            .success()
        {
            eprintln!("skipped: mkfs.ext2 failed");
            return None;
        }
        let lo = sh(&["losetup", "--find", "--show", image.to_str().unwrap()]);
        if !lo.status.success() {
            eprintln!("skipped: no loop device");
            return None;
        }
        let dev = String::from_utf8_lossy(&lo.stdout).trim().to_string();
        let out = sh(&["mount", "-t", "ext2", &dev, mnt.to_str().unwrap()]);
        if !out.status.success() {
            sh(&["losetup", "-d", &dev]);
        }
        return out.status.success().then_some(Some(dev)).or_else(|| {
            eprintln!("skipped: cannot mount ext2");
            None
        });
    };
    if out.status.success() {
        Some(None)
    } else {
        eprintln!(
            "skipped: cannot mount tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        None
    }
}

/// Fills a small ext2 (no `fallocate`: space is made real with `pwrite`) and a small tmpfs
/// through `put` and `put_batch`: a typed error, never a signal, and every `PUT_OK` message
/// reads back after the store is copied to a disk with room and reopened for writing.
#[test]
fn a_full_disk_is_a_typed_error_never_a_signal() {
    if std::env::var("ROCKETSTORE_SPACE_CHILD").is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for kind in ["ext2", "tmpfs"] {
        for mode in ["put", "batch"] {
            let scratch = tempfile::tempdir().unwrap();
            let mnt = scratch.path().join("mnt");
            let Some(dev) = mount_small(kind, &mnt, scratch.path()) else {
                if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                    panic!("CI must mount the file systems");
                }
                return;
            };
            let root = mnt.join("store");
            let ledger = scratch.path().join("ledger");
            let status = std::process::Command::new(&exe)
                .args(["--exact", "full_disk_writer_child", "--nocapture"])
                .env(
                    "ROCKETSTORE_SPACE_CHILD",
                    format!("{} {mode} {}", root.display(), ledger.display()),
                )
                .status()
                .unwrap();
            let copy = scratch.path().join("copy");
            if status.code() == Some(0) {
                super_copy(&root, &copy);
            }
            sh(&["umount", "-l", mnt.to_str().unwrap()]);
            if let Some(dev) = dev {
                sh(&["losetup", "-d", &dev]);
            }
            assert_eq!(
                status.code(),
                Some(0),
                "{kind}/{mode}: the writer ended with {status:?} (a signal has no code)"
            );
            let acked: Vec<u64> = std::fs::read_to_string(&ledger)
                .unwrap()
                .lines()
                .map(|l| l.parse().unwrap())
                .collect();
            assert!(acked.len() > 1000, "{kind}/{mode}: {} acks", acked.len());
            let store = Store::open(&copy, full_disk_config()).unwrap();
            // The forced cleanup of a nearly full disk (`clean_file_forcibly_enable`, on by
            // default) may have deleted the oldest files whole; everything after them is there.
            let first = store.min_commitlog_offset();
            let kept: Vec<u64> = acked.into_iter().filter(|&o| o >= first).collect();
            assert!(kept.len() > 1000, "{kind}/{mode}: {} kept", kept.len());
            for &offset in &kept {
                let m = store.look_message_by_offset(offset).unwrap();
                assert_eq!(m.body.len(), 1024, "{kind}/{mode} at {offset}");
            }
            store.close().unwrap();
        }
    }
}

fn super_copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            super_copy(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}
