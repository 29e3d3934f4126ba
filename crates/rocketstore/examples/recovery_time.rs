//! Recovery time per GB: `cargo run --release -p rocketstore --example recovery_time -- [dir] [MiB]`
//! (defaults `/tmp/rs-recovery-time`, 1536 MiB of commit log).
//!
//! Writes ~1 KiB messages (8 topics x 4 queues, one key each, plus the UNIQ_KEY) until the
//! commit log holds the given size, closes cleanly, then times `Store::open` in each recovery
//! case and reports seconds and seconds per GiB of commit log scanned:
//! 1. normal recovery (clean shutdown): RocketMQ scans the last three files (CRCs checked);
//! 2. abnormal recovery (abort file present) with a valid checkpoint: from the file the
//!    checkpoint selects, everything re-dispatched (duplicates skipped);
//! 3. abnormal recovery without a checkpoint: from file 0;
//! 4. abnormal recovery with `consumequeue/` and `index/` deleted: every record re-dispatched
//!    into new consume queues and index files;
//! 5. the offline `rebuild_indexes`.
//!
//! 256 MiB commit log files; the directory is deleted at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rocketstore::{PutMessage, Store, StoreConfig};

const GIB: f64 = (1u64 << 30) as f64;

fn config() -> StoreConfig {
    let mut cfg = StoreConfig::default();
    cfg.mapped_file_size_commit_log = 256 << 20;
    cfg
}

fn timed_open(dir: &Path, label: &str) {
    let t = Instant::now();
    let store = Store::open(dir, config()).unwrap();
    let took = t.elapsed();
    let r = store.recovery_report().clone();
    let file_size = store.commitlog_file_size();
    let scanned = r
        .end_offset
        .saturating_sub(store.min_commitlog_offset() + r.scan_start_file as u64 * file_size);
    report(
        label,
        took,
        scanned,
        &format!("{} records re-dispatched", r.redispatched),
    );
    store.close().unwrap();
}

fn report(label: &str, took: Duration, scanned: u64, extra: &str) {
    let gib = scanned as f64 / GIB;
    let per_gib = if gib > 0.0 {
        took.as_secs_f64() / gib
    } else {
        0.0
    };
    println!(
        "{label:<46} {:>8.3} s  scanned {:>6.2} GiB  {:>6.3} s/GiB  ({extra})",
        took.as_secs_f64(),
        gib,
        per_gib
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "/tmp/rs-recovery-time".into());
    let mib: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1536);
    let dir = Path::new(&dir);
    let _ = std::fs::remove_dir_all(dir);

    let store = Store::open(dir, config()).unwrap();
    let body = vec![b'x'; 1000];
    let topics: Vec<String> = (0..8).map(|i| format!("RecoveryTopic{i}")).collect();
    let t = Instant::now();
    let mut seq = 0u64;
    while store.max_commitlog_offset() < mib << 20 {
        let keys: Vec<String> = (0..256).map(|i| format!("key-{}", seq + i)).collect();
        let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
        let msgs: Vec<PutMessage<'_>> = (0..256)
            .map(|i| {
                let n = seq + i as u64;
                PutMessage {
                    topic: &topics[(n % 8) as usize],
                    queue_id: ((n / 8) % 4) as i32,
                    body: &body,
                    tags: Some("TagA"),
                    keys: &key_refs[i],
                    ..Default::default()
                }
            })
            .collect();
        store.put_batch(&msgs).unwrap();
        seq += 256;
    }
    let end = store.max_commitlog_offset();
    store.close().unwrap();
    println!(
        "wrote {seq} messages, {:.2} GiB of commit log in {:.1} s ({} files of 256 MiB)",
        end as f64 / GIB,
        t.elapsed().as_secs_f64(),
        end.div_ceil(256 << 20)
    );

    timed_open(dir, "1 normal recovery (last 3 files)");
    std::fs::write(dir.join("abort"), b"").unwrap();
    timed_open(dir, "2 abnormal, checkpoint valid");
    std::fs::remove_file(dir.join("checkpoint")).unwrap();
    std::fs::write(dir.join("abort"), b"").unwrap();
    timed_open(dir, "3 abnormal, no checkpoint (from file 0)");
    std::fs::remove_dir_all(dir.join("consumequeue")).unwrap();
    std::fs::remove_dir_all(dir.join("index")).unwrap();
    std::fs::write(dir.join("abort"), b"").unwrap();
    timed_open(dir, "4 abnormal, consume queues and index deleted");
    let t = Instant::now();
    let r = rocketstore::rebuild_indexes(dir, config()).unwrap();
    report(
        "5 rebuild_indexes (offline)",
        t.elapsed(),
        r.end_offset - r.min_offset,
        &format!("{} records, {} queues", r.records, r.consume_queues),
    );
    std::fs::remove_dir_all(dir).unwrap();
}
