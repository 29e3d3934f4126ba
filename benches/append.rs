//! Append throughput.
//!
//! * `append_async/put_batch/{100,1024,4096}`: `Store::put_batch` of 4,096 messages (one topic,
//!   8 queues, a tag, auto UNIQ_KEY, `__CRC32#`), ASYNC_FLUSH. Throughput in messages.
//! * `append_async/put/{100,1024,4096}`: one `Store::put` per message, ASYNC_FLUSH.
//! * `append_sync_group_commit/1024/{1,4,16}`: SYNC_FLUSH, 1 KiB bodies, 1/4/16 writer threads
//!   each calling `Store::put` (group commit: one flush acknowledges every put it covers). The
//!   ack latency percentiles are printed as `[rocketstore] ...` lines.
//! * `append_sync_group_commit_batch64/1024/{1,4,16}`: the same with `Store::put_batch` of 64
//!   messages per call (a producer that batches: 64 to 1,024 messages in flight).
//!
//! * `append_async/put_batch/<size> cpu` (printed, and in `$ROCKETSTORE_BENCH_SUMMARY`): after
//!   each `put_batch` bench, ~768 MiB of `put_batch` on a fresh store until dispatched, with
//!   msg/s and whole-process CPU nanoseconds per message (all threads). With
//!   `ROCKETSTORE_BENCH_WARM_MB=n`, n MiB are written first, untimed;
//!   `ROCKETSTORE_BENCH_TRANSIENT=1` enables the transient store pool; `ROCKETSTORE_BENCH_SIZES=4096`
//!   runs only the listed body sizes (these passes run whatever criterion's filter says).
//! * `append_async/put_batch_py_shape/<size> cpu`: the same measure on the messages and store
//!   of `rocketstore bench`'s Python `put_batch` row (`python/rocketstore/_bench.py`: 4 topics x
//!   8 queues, 3 tags, a distinct key `k-<i>` per message, a body starting with the row number,
//!   up to 1,000,000 messages and 256 MB of bodies in 16,384-message calls, 256 MiB files), so
//!   the Python row has a Rust figure of the same work beside it.
//!
//! The store is replaced by a fresh one (untimed) whenever it holds more than 1 GiB, so a run
//! does not fill the disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rocketstore::{FlushDiskType, PutMessage, PutStatus, Store, StoreConfig};
use rocketstore_benches::{
    bench_config, bench_root, body, body_sizes, messages, report, wait_dispatched, CpuMeter,
    Latencies, FILE_SIZE,
};

const BATCH: usize = 4096;
const RESET_AT: u64 = 1 << 30;

/// A store that is replaced by a fresh one when it grows past [`RESET_AT`].
struct Fresh {
    dir: tempfile::TempDir,
    cfg: StoreConfig,
    store: Option<Store>,
    n: u32,
    /// Flushes done by the stores replaced so far.
    old_flushes: u64,
}

impl Fresh {
    fn new(name: &str, cfg: StoreConfig) -> Self {
        let dir = bench_root(name);
        let mut f = Fresh {
            dir,
            cfg,
            store: None,
            n: 0,
            old_flushes: 0,
        };
        f.reset();
        f
    }

    fn reset(&mut self) {
        if let Some(s) = self.store.take() {
            self.old_flushes += s.flush_count();
            s.close().unwrap();
        }
        let _ = std::fs::remove_dir_all(self.dir.path().join(self.n.to_string()));
        self.n += 1;
        let s = Store::open(self.dir.path().join(self.n.to_string()), self.cfg.clone()).unwrap();
        // The first put creates the first file; keep that out of the measurement.
        s.put(&PutMessage {
            topic: "Warm",
            body: b"x",
            ..Default::default()
        })
        .unwrap();
        self.store = Some(s);
    }

    /// The store, replaced first if it is over the size limit.
    fn get(&mut self) -> &Store {
        if self
            .store
            .as_ref()
            .is_none_or(|s| s.max_commitlog_offset() > RESET_AT)
        {
            self.reset();
        }
        self.store.as_ref().unwrap()
    }
}

impl Fresh {
    /// Flushes done by every store of this bench so far.
    fn flush_count(&self) -> u64 {
        self.old_flushes + self.store.as_ref().map_or(0, Store::flush_count)
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if let Some(s) = self.store.take() {
            let _ = s.close();
        }
    }
}

fn append_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_async");
    for size in body_sizes() {
        let body = body(size);
        let msgs = messages("BenchTopic", &body, BATCH);
        let mut fresh = Fresh::new("append", bench_config(FILE_SIZE));
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_with_input(BenchmarkId::new("put_batch", size), &size, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let store = fresh.get();
                    let t = Instant::now();
                    let r = store.put_batch(&msgs).unwrap();
                    total += t.elapsed();
                    debug_assert_eq!(r.len(), BATCH);
                }
                total
            });
        });
        cpu_pass(&mut fresh, &msgs, size);
        py_shape_cpu_pass(size);
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("put", size), &size, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let store = fresh.get();
                    let n = (iters - done).min(BATCH as u64);
                    let t = Instant::now();
                    for m in &msgs[..n as usize] {
                        std::hint::black_box(store.put(m).unwrap());
                    }
                    total += t.elapsed();
                    done += n;
                }
                total
            });
        });
    }
    g.finish();
}

/// Records of `put_batch` per CPU pass (about 768 MiB of commit log, under [`RESET_AT`]).
const CPU_PASS_BYTES: usize = 768 << 20;

/// Whole-process CPU per message of `put_batch` in steady state: on a fresh store with nothing
/// left to dispatch, `put_batch` of ~768 MiB of records, then wait until the consume queues and
/// the index hold them all. Counts every thread (the caller, `rs-reput` dispatch, `rs-allocate`,
/// flush); printed and written to `$ROCKETSTORE_BENCH_SUMMARY` as
/// `append_async/put_batch/<size> cpu`.
fn cpu_pass(fresh: &mut Fresh, msgs: &[PutMessage<'_>], size: usize) {
    fresh.reset();
    let store = fresh.get();
    // ~180 bytes of header, topic and properties per record.
    let per_batch = (size + 180) * msgs.len();
    // `$ROCKETSTORE_BENCH_WARM_MB` MiB of records first (default none), untimed: a store that has
    // run a while (its transient write buffers, if any, already allocated and reused).
    let warm_mb: usize = std::env::var("ROCKETSTORE_BENCH_WARM_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for _ in 0..(warm_mb << 20) / per_batch {
        std::hint::black_box(store.put_batch(msgs).unwrap());
    }
    wait_dispatched(store);
    let batches = (CPU_PASS_BYTES / per_batch).max(1);
    let meter = CpuMeter::start();
    for _ in 0..batches {
        std::hint::black_box(store.put_batch(msgs).unwrap());
    }
    wait_dispatched(store);
    let n = (batches * msgs.len()) as u64;
    report_put_cpu("put_batch", size, n, &meter);
}

/// The Python bench's put_batch row (`_bench.bench_table`, `_bench._open`, `_bench._put_batch`)
/// done from Rust: the same messages, store options and call size, measured like [`cpu_pass`].
fn py_shape_cpu_pass(size: usize) {
    const TOPICS: usize = 4;
    const QUEUES: usize = 8;
    const TAGS: [&str; 3] = ["TagA", "TagB", "TagC"];
    const CALL: usize = 16_384;
    let n = (256_000_000 / size).clamp(1000, 1_000_000);
    let filler: Vec<u8> = b"0123456789abcdefghijklmnopqrstuvwxyz"
        .iter()
        .copied()
        .cycle()
        .take(size)
        .collect();
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut b = format!("{i:010}|").into_bytes();
            b.extend_from_slice(&filler);
            b.truncate(size);
            b
        })
        .collect();
    let key_strings: Vec<String> = (0..n).map(|i| format!("k-{i}")).collect();
    let keys: Vec<[&str; 1]> = key_strings.iter().map(|k| [k.as_str()]).collect();
    let topics: Vec<String> = (0..TOPICS).map(|t| format!("BenchTopic{t}")).collect();
    let msgs: Vec<PutMessage<'_>> = (0..n)
        .map(|i| PutMessage {
            topic: &topics[i % TOPICS],
            body: &bodies[i],
            queue_id: (i / TOPICS % QUEUES) as i32,
            tags: Some(TAGS[i % TAGS.len()]),
            keys: &keys[i],
            ..Default::default()
        })
        .collect();
    let dir = bench_root("append-py-shape");
    let mut cfg = bench_config(256 << 20);
    cfg.populate_mapped_file = StoreConfig::default().populate_mapped_file;
    let store = Store::open(dir.path().join("s"), cfg).unwrap();
    store
        .put(&PutMessage {
            topic: "BenchWarmup",
            body: b"x",
            ..Default::default()
        })
        .unwrap();
    wait_dispatched(&store);
    let meter = CpuMeter::start();
    for chunk in msgs.chunks(CALL) {
        std::hint::black_box(store.put_batch(chunk).unwrap());
    }
    wait_dispatched(&store);
    // Before the store is closed: its threads' CPU is read from /proc, and the close (a flush of
    // every dirty page) is not part of the row.
    report_put_cpu("put_batch_py_shape", size, n as u64, &meter);
    drop(store);
}

/// Reports a put CPU pass of `n` messages of `size` bytes as `append_async/{case}/{size} cpu`:
/// msg/s, whole-process CPU per message and each thread's share.
fn report_put_cpu(case: &str, size: usize, n: u64, meter: &CpuMeter) {
    let (rate, ns, cpu, wall) = meter.per_message(n);
    let threads = meter.per_thread(n);
    let text: Vec<String> = threads
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect();
    let json: Vec<String> = threads
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v:.1}"))
        .collect();
    report(
        &format!("append_async/{case}/{size} cpu"),
        &format!(
            "{n} msgs dispatched in {wall:.3} s: {:.3} M msg/s, {ns:.0} ns CPU per message (whole process, {cpu:.3} s CPU; by thread: {})",
            rate / 1e6,
            text.join(", ")
        ),
        &format!(
            "\"body\": {size}, \"msgs\": {n}, \"msg_per_s\": {rate:.0}, \"cpu_ns_per_msg\": {ns:.1}, \"cpu_s\": {cpu:.4}, \"wall_s\": {wall:.4}, \"thread_cpu_ns_per_msg\": {{{}}}",
            json.join(", ")
        ),
    );
}

fn append_sync_group_commit(c: &mut Criterion) {
    sync_group(c, "append_sync_group_commit", 1);
    sync_group(c, "append_sync_group_commit_batch64", 64);
}

/// SYNC_FLUSH, 1 KiB bodies, 1/4/16 threads; each thread calls `put` (`batch == 1`) or
/// `put_batch` of `batch` messages and waits for its acknowledgement. Throughput in messages;
/// the ack latency is per call.
fn sync_group(c: &mut Criterion, name: &str, batch: usize) {
    let size = 1024;
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    let mut cfg = bench_config(FILE_SIZE);
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    for threads in [1usize, 4, 16] {
        let mut fresh = Fresh::new("sync", cfg.clone());
        let lat = Arc::new(Mutex::new(Latencies::default()));
        let flushes0 = fresh.flush_count();
        let mut puts = 0u64;
        g.bench_with_input(
            BenchmarkId::new(size.to_string(), threads),
            &threads,
            |b, &threads| {
                b.iter_custom(|iters| {
                    let store = fresh.get();
                    let calls = iters.div_ceil((threads * batch) as u64);
                    let done = calls * (threads * batch) as u64;
                    puts += done;
                    let t0 = Instant::now();
                    std::thread::scope(|s| {
                        for t in 0..threads {
                            let lat = Arc::clone(&lat);
                            s.spawn(move || {
                                let body = body(size);
                                let msgs: Vec<PutMessage<'_>> = (0..batch)
                                    .map(|_| PutMessage {
                                        topic: "GroupTopic",
                                        body: &body,
                                        queue_id: (t % 8) as i32,
                                        tags: Some("TagA"),
                                        ..Default::default()
                                    })
                                    .collect();
                                let mut mine = Latencies::default();
                                for _ in 0..calls {
                                    let s = Instant::now();
                                    let r = if batch == 1 {
                                        vec![store.put(&msgs[0]).unwrap()]
                                    } else {
                                        store.put_batch(&msgs).unwrap()
                                    };
                                    mine.push(s.elapsed());
                                    assert!(r.iter().all(|r| r.status == PutStatus::PutOk));
                                }
                                lat.lock().unwrap().append(&mut mine);
                            });
                        }
                    });
                    // Criterion divides by `iters`; the threads put `done >= iters` messages.
                    t0.elapsed().mul_f64(iters as f64 / done as f64)
                });
            },
        );
        let flushes = fresh.flush_count().saturating_sub(flushes0);
        let mut l = lat.lock().unwrap();
        let (text, json) = l.summary();
        report(
            &format!("{name}/{size}/{threads} ack latency"),
            &format!(
                "{text}; ~{:.4} flushes per message",
                flushes as f64 / puts.max(1) as f64
            ),
            &format!("\"threads\": {threads}, \"batch\": {batch}, \"body\": {size}, {json}"),
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = append_async, append_sync_group_commit
}
criterion_main!(benches);
