//! Append throughput of concurrent writers, ASYNC_FLUSH vs SYNC_FLUSH group commit:
//! `cargo run --release --example group_commit -- [dir] [body] [seconds]`.
//! Prints msgs/s, flushes per put and the ack latency p50/p99 for 1, 4 and 16 threads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketstore::{ConfigValue, PutMessage, PutStatus, Store, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "/tmp/rs-group".into());
    let body_len: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let secs: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    for mode in ["ASYNC_FLUSH", "SYNC_FLUSH"] {
        for threads in [1usize, 4, 16] {
            let _ = std::fs::remove_dir_all(&dir);
            let mut cfg = StoreConfig::default();
            cfg.set("flush_disk_type", ConfigValue::Str(mode.into()))
                .unwrap();
            let store = Arc::new(Store::open(&dir, cfg).unwrap());
            store
                .put(&PutMessage {
                    topic: "Warm",
                    body: b"x",
                    ..Default::default()
                })
                .unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let flushes0 = store.flush_count();
            let t0 = Instant::now();
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let store = Arc::clone(&store);
                    let stop = Arc::clone(&stop);
                    std::thread::spawn(move || {
                        let body = vec![b'x'; body_len];
                        let mut lat = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            let s = Instant::now();
                            let r = store
                                .put(&PutMessage {
                                    topic: "GroupTopic",
                                    body: &body,
                                    queue_id: t as i32 % 8,
                                    ..Default::default()
                                })
                                .unwrap();
                            assert_eq!(r.status, PutStatus::PutOk);
                            lat.push(s.elapsed());
                        }
                        lat
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs(secs));
            stop.store(true, Ordering::Relaxed);
            let mut lat: Vec<Duration> = handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect();
            let el = t0.elapsed().as_secs_f64();
            lat.sort();
            let n = lat.len();
            let flushes = store.flush_count() - flushes0;
            println!(
                "{mode:11} {threads:2} threads, {body_len} B: {:8.0} msg/s  {:6.1} MB/s  flushes/put {:.3}  p50 {:?}  p99 {:?}",
                n as f64 / el,
                n as f64 * body_len as f64 / el / 1e6,
                flushes as f64 / n.max(1) as f64,
                lat[n / 2],
                lat[n * 99 / 100]
            );
            store.close().unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
