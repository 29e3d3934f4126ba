//! The store root's lock excludes a RocketMQ broker both ways. A broker locks `<root>/lock` with
//! `FileChannel.tryLock`, a classic `fcntl` record lock; rocketstore holds an `flock` and an
//! `fcntl` (open-file-description) lock on the same file. The "broker" here is a child process
//! (this test binary, re-run as a helper) taking a classic `F_SETLK` lock as the JVM does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use rocketstore::{ConfigValue, Error, PutMessage, Store, StoreConfig};

const HELPER_ENV: &str = "ROCKETSTORE_LOCK_HELPER";
/// Starts the helper's answer line (libtest writes its own text on the lines around it).
const MARK: &str = "lock-helper: ";

fn config() -> StoreConfig {
    let mut cfg = StoreConfig::default();
    cfg.set("mapped_file_size_commit_log", ConfigValue::Int(64 * 1024))
        .unwrap();
    cfg.set("fsync_directory", ConfigValue::Bool(false))
        .unwrap();
    cfg
}

/// Run as a child process (`HELPER_ENV=hold:<root>` or `try:<root>`): take a broker-style
/// classic `fcntl` write lock on `<root>/lock`. `hold` prints `held` and keeps the lock until
/// its stdin closes; `try` prints `acquired` or `refused` and exits.
#[test]
fn broker_lock_helper() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (mode, root) = spec.split_once(':').unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(Path::new(root).join("lock"))
        .unwrap();
    let got = rustix::fs::fcntl_lock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive);
    let mut out = std::io::stdout();
    match (mode, got) {
        ("hold", Ok(())) => {
            writeln!(out, "\n{MARK}held").unwrap();
            out.flush().unwrap();
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        }
        ("try", Ok(())) => writeln!(out, "\n{MARK}acquired").unwrap(),
        (_, Err(e)) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => {
            writeln!(out, "\n{MARK}refused").unwrap();
        }
        (m, r) => panic!("helper {m}: {r:?}"),
    }
}

fn helper(mode: &str, root: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "broker_lock_helper",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(HELPER_ENV, format!("{mode}:{}", root.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The first line the helper prints that is one of its answers.
fn answer(child: &mut Child) -> String {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let found = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix(MARK).map(str::to_string))
        .expect("helper answered");
    // Keep the pipe open for a `hold` helper: it stays alive until stdin closes.
    std::mem::forget(lines);
    found.trim().to_string()
}

fn broker_try(root: &Path) -> String {
    let mut child = helper("try", root);
    let a = answer(&mut child);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    a
}

#[test]
fn a_broker_lock_refuses_a_writable_open_and_a_read_only_open_still_works() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), config()).unwrap();
        store
            .put(&PutMessage {
                topic: "T",
                body: b"before the broker",
                ..Default::default()
            })
            .unwrap();
        store.close().unwrap();
    }
    let mut broker = helper("hold", dir.path());
    assert_eq!(answer(&mut broker), "held");
    match Store::open(dir.path(), config()) {
        Err(Error::Locked { path }) => assert_eq!(path, dir.path().join("lock")),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a writable open succeeded while a broker holds the lock"),
    }
    // A refused open changed nothing: no abort file, and a read-only open still serves.
    assert!(!dir.path().join("abort").exists());
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(store.scan(0).unwrap().count(), 1);
    store.close().unwrap();
    // The broker exits: the store opens for writing again.
    drop(broker.stdin.take());
    assert!(broker.wait().unwrap().success());
    Store::open(dir.path(), config()).unwrap().close().unwrap();
}

#[test]
fn a_writable_store_refuses_a_broker_lock_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    assert_eq!(broker_try(dir.path()), "refused");
    // A second handle in this process is refused too, and the refused attempt (which opened and
    // closed its own descriptor of the lock file) does not release the first handle's lock:
    // classic POSIX locks would be dropped by that close.
    assert!(matches!(
        Store::open(dir.path(), config()),
        Err(Error::Locked { .. })
    ));
    drop(std::fs::File::open(dir.path().join("lock")).unwrap());
    assert_eq!(broker_try(dir.path()), "refused");
    store.close().unwrap();
    assert_eq!(broker_try(dir.path()), "acquired");
}
