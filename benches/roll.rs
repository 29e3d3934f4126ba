//! Put latency across commit log file rolls: single `Store::put` calls with 1 KiB bodies into
//! 64 MiB files (a roll every ~56,000 puts), ASYNC_FLUSH, the allocate service preallocating and
//! populating the next file. `roll/put_1k` is the mean; the largest latency, the percentiles
//! and the number of rolls are printed as a `[rocketstore] ...` line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rocketstore::{PutMessage, Store};
use rocketstore_benches::{bench_config, bench_root, body, report, Latencies};

const FILE_SIZE: u64 = 64 * 1024 * 1024;
/// A fresh store (untimed) after this many files, to bound the disk used.
const MAX_FILES: u64 = 12;

fn roll(c: &mut Criterion) {
    let root = bench_root("roll");
    let cfg = bench_config(FILE_SIZE);
    let body = body(1024);
    let mut n = 0u32;
    let open = |n: u32| {
        let s = Store::open(root.path().join(n.to_string()), cfg.clone()).unwrap();
        s.put(&PutMessage {
            topic: "Warm",
            body: b"x",
            ..Default::default()
        })
        .unwrap();
        s
    };
    let mut store = open(n);
    let mut lat = Latencies::default();
    let mut rolls = 0u64;
    let mut roll_lat = Latencies::default();
    let mut writer_created = 0u64;
    let mut g = c.benchmark_group("roll");
    g.throughput(Throughput::Elements(1));
    g.bench_function("put_1k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                if store.max_commitlog_offset() > MAX_FILES * FILE_SIZE {
                    writer_created += store.writer_created_files();
                    store.close().unwrap();
                    let _ = std::fs::remove_dir_all(root.path().join(n.to_string()));
                    n += 1;
                    store = open(n);
                }
                let m = PutMessage {
                    topic: "RollTopic",
                    body: &body,
                    queue_id: (i % 8) as i32,
                    tags: Some("TagA"),
                    ..Default::default()
                };
                let before = store.max_commitlog_offset() / FILE_SIZE;
                let t = Instant::now();
                let r = store.put(&m).unwrap();
                let el = t.elapsed();
                total += el;
                lat.push(el);
                if r.commitlog_offset as u64 / FILE_SIZE != before {
                    rolls += 1;
                    roll_lat.push(el);
                }
                black_box(r);
            }
            total
        });
    });
    g.finish();
    writer_created += store.writer_created_files();
    store.close().unwrap();
    let (text, json) = lat.summary();
    report(
        "roll/put_1k latency",
        &format!(
            "{text}; {rolls} file rolls (64 MiB files): the rolling puts took max {:.1} µs, \
             median {:.1} µs; {writer_created} file(s) created by the writer (allocator behind)",
            roll_lat.max_us(),
            roll_lat.quantile_us(0.5)
        ),
        &format!(
            "\"rolls\": {rolls}, \"roll_max_us\": {:.3}, \"writer_created_files\": {writer_created}, {json}",
            roll_lat.max_us()
        ),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = roll
}
criterion_main!(benches);
