//! Read throughput through the consume queue, and key lookups through the index:
//! `cargo run --release -p rocketstore --example read_throughput -- [dir] [n] [body] [lookups]`
//! (defaults `/tmp/rs-read`, 200,000 messages, 1,024-byte bodies, 50,000 lookups).
//!
//! Writes `n` messages into one queue (each with one key and a UNIQ_KEY), waits for dispatch,
//! then:
//! - `get_message` from offset 0 to the end, 32 messages per call: every message is copied out
//!   of the mapping (owned `StoredMessage`) and its body CRC checked;
//! - `query_message` for random keys (each must return exactly its message).
//!
//! Files are kept small enough for a test VM (128 MiB commit log files, index 500,000 slots /
//! 2,000,000 entries) and deleted at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rocketstore::{GetStatus, PutMessage, Store, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "/tmp/rs-read".into());
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let body_len: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let lookups: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(50_000);
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = StoreConfig::default();
    cfg.mapped_file_size_commit_log = 128 << 20;
    cfg.max_hash_slot_num = 500_000;
    cfg.max_index_num = 2_000_000;
    let store = Store::open(&dir, cfg).unwrap();

    let body = vec![b'r'; body_len];
    let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1024) {
        let msgs: Vec<PutMessage<'_>> = chunk
            .iter()
            .map(|&i| PutMessage {
                topic: "ReadBench",
                body: &body,
                tags: Some("TagA"),
                keys: &key_refs[i],
                ..Default::default()
            })
            .collect();
        store.put_batch(&msgs).unwrap();
    }
    while store.dispatch_behind_bytes() > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let write = t.elapsed().as_secs_f64();
    println!(
        "write + dispatch: {n} msgs of {body_len} B in {write:.2} s ({:.0} k msg/s)",
        n as f64 / write / 1e3
    );

    // Pass 1 warms the page cache; pass 2 is measured.
    let mut best = f64::MAX;
    let mut bytes = 0u64;
    for _ in 0..2 {
        let t = Instant::now();
        let (mut offset, mut count) = (0i64, 0usize);
        bytes = 0;
        loop {
            let r = store
                .get_message("ReadBench", 0, offset, 32, None, None)
                .unwrap();
            if r.status != GetStatus::Found {
                break;
            }
            for m in &r.messages {
                assert!(m.crc_ok());
                bytes += m.store_size as u64;
            }
            count += r.messages.len();
            offset = r.next_begin_offset;
        }
        assert_eq!(count, n);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "get_message (32/call, copy out + body CRC): {:.0} k msg/s, {:.0} MB/s of records",
        n as f64 / best / 1e3,
        bytes as f64 / best / 1e6
    );

    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let t = Instant::now();
    for _ in 0..lookups {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % n as u64) as usize;
        let q = store
            .query_message("ReadBench", &keys[i], 32, 0, i64::MAX)
            .unwrap();
        assert_eq!(q.messages.len(), 1);
        assert_eq!(q.messages[0].keys(), vec![keys[i].as_str()]);
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "query_message by key: {lookups} lookups in {el:.2} s ({:.0} k lookups/s)",
        lookups as f64 / el / 1e3
    );
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
