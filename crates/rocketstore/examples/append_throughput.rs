//! Quick append throughput check: `cargo run --release --example append_throughput -- [dir] [body] [n]`.
//! The criterion benches in `benches/` are the reference figures; this is a smoke tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use rocketstore::{PutMessage, Store, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "/tmp/rs-append".into());
    let body_len: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let n: usize = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = StoreConfig::default();
    if let Ok(v) = std::env::var("ROCKETSTORE_POPULATE") {
        cfg.populate_mapped_file = v != "0";
    }
    if let Ok(v) = std::env::var("ROCKETSTORE_PROP_CRC") {
        cfg.enabled_append_prop_crc = v != "0";
    }
    let store = Store::open(&dir, cfg).unwrap();
    let body = vec![b'x'; body_len];
    let batch = 4096;
    let msgs: Vec<PutMessage<'_>> = (0..batch)
        .map(|i| PutMessage {
            topic: "BenchTopic",
            body: &body,
            queue_id: (i % 8) as i32,
            ..Default::default()
        })
        .collect();
    let t = Instant::now();
    let mut done = 0;
    let mut bytes = 0u64;
    while done < n {
        let r = store.put_batch(&msgs).unwrap();
        bytes += r.iter().map(|r| r.wrote_bytes as u64).sum::<u64>();
        done += batch;
    }
    let el = t.elapsed().as_secs_f64();
    println!(
        "{} msgs of {} B in {:.3} s: {:.2} M msg/s, {:.0} MB/s (records)",
        done,
        body_len,
        el,
        done as f64 / el / 1e6,
        bytes as f64 / el / 1e6
    );
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
