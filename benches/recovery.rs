//! Abnormal recovery: a store holding 512 MiB of commit log (1 KiB or 100 B bodies, 128 MiB files, 8
//! queues, a tag and a key per message) is reopened as after a crash: the abort file present, the
//! checkpoint removed (so recovery scans from the first file) and the consume queues and index
//! files removed (so everything is rebuilt). `recovery/abnormal_rebuild/{1024,100}` times `Store::open` (and reports its whole-process CPU):
//! scan + body CRC of every record + rebuild of every consume queue and index entry. Throughput
//! in bytes of commit log (criterion prints GiB/s). Besides the whole process's CPU, the line
//! `[rocketstore] ...` gives the opening thread's own CPU: recovery's scan runs on that thread and
//! a helper, everything else on that thread alone, so on an idle machine the open cannot take
//! less wall time than that (the critical path), whatever the load when it was measured. The page cache is warm (the files were just
//! written); a cold-cache figure adds the disk's read time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rocketstore::{PutMessage, Store, StoreConfig, ABORT_FILE, CHECKPOINT_FILE};
use rocketstore_benches::{bench_config, bench_root, body, process_cpu, report, Latencies};

const TARGET_BYTES: u64 = 512 * 1024 * 1024;

fn write(dir: &Path, cfg: &StoreConfig, size: usize) -> u64 {
    let store = Store::open(dir, cfg.clone()).unwrap();
    let body = body(size);
    let keys: Vec<String> = (0..4096).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    while store.max_commitlog_offset() < TARGET_BYTES - 8 * 1024 * 1024 {
        let msgs: Vec<PutMessage<'_>> = (0..4096)
            .map(|i| PutMessage {
                topic: "RecoverTopic",
                body: &body,
                queue_id: (i % 8) as i32,
                tags: Some("TagA"),
                keys: &key_refs[i],
                ..Default::default()
            })
            .collect();
        store.put_batch(&msgs).unwrap();
    }
    let end = store.max_commitlog_offset();
    store.close().unwrap();
    end
}

/// Makes the store look crashed with nothing but the commit log left.
fn crash(dir: &Path) {
    std::fs::write(dir.join(ABORT_FILE), b"").unwrap();
    let _ = std::fs::remove_file(dir.join(CHECKPOINT_FILE));
    let _ = std::fs::remove_dir_all(dir.join("consumequeue"));
    let _ = std::fs::remove_dir_all(dir.join("index"));
}

fn recovery(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery");
    for size in [1024usize, 100] {
        let root = bench_root("recovery");
        let dir = root.path().join("store");
        let cfg = bench_config(128 * 1024 * 1024);
        let bytes = write(&dir, &cfg, size);
        let mut times = Latencies::default();
        let mut cpu = Duration::ZERO;
        let mut opener_cpu = Duration::ZERO;
        g.throughput(Throughput::Bytes(bytes));
        g.bench_with_input(BenchmarkId::new("abnormal_rebuild", size), &size, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    crash(&dir);
                    let c0 = process_cpu();
                    let o0 = thread_cpu();
                    let t = Instant::now();
                    let store = Store::open(&dir, cfg.clone()).unwrap();
                    let el = t.elapsed();
                    opener_cpu += thread_cpu().saturating_sub(o0);
                    cpu += process_cpu().saturating_sub(c0);
                    total += el;
                    times.push(el);
                    let rep = store.recovery_report().clone();
                    assert!(rep.abnormal);
                    assert_eq!(rep.end_offset, bytes);
                    store.close().unwrap();
                }
                total
            });
        });
        let best = times.quantile_us(0.0) / 1e6;
        let median = times.quantile_us(0.5) / 1e6;
        let cpu_per_open = cpu.as_secs_f64() / times.len().max(1) as f64;
        let opener_per_open = opener_cpu.as_secs_f64() / times.len().max(1) as f64;
        let gb = bytes as f64 / 1e9;
        report(
            &format!("recovery/abnormal_rebuild/{size}"),
            &format!(
                "{:.0} MB of commit log: median {:.3} s ({:.2} GB/s, {:.2} s per GB), best {:.3} s; CPU {:.3} s per open ({:.2} CPU s per GB; opening thread {:.2} CPU s per GB)",
                bytes as f64 / 1e6,
                median,
                bytes as f64 / median / 1e9,
                median / (bytes as f64 / 1e9),
                best,
                cpu_per_open,
                cpu_per_open / gb,
                opener_per_open / gb,
            ),
            &format!(
                "\"body\": {size}, \"bytes\": {bytes}, \"median_s\": {median:.4}, \"best_s\": {best:.4}, \"gb_per_s\": {:.3}, \"cpu_s_per_open\": {cpu_per_open:.4}, \"opener_cpu_s_per_open\": {opener_per_open:.4}",
                bytes as f64 / median / 1e9
            ),
        );
    }
    g.finish();
}

/// CPU time used so far by the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(5));
    targets = recovery
}
criterion_main!(benches);
