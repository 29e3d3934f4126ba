//! Shared set-up for the rocketstore criterion benches (`cargo bench -p rocketstore-benches`).
//!
//! * [`bench_root`]: a temporary directory on the disk chosen by `ROCKETSTORE_BENCH_DIR`
//!   (default: the system temp dir), removed when dropped.
//! * [`bench_config`]: the store configuration the benches use: RocketMQ defaults except small
//!   commit log files (so a run does not fill the disk), preallocation on, a small index.
//! * [`Latencies`] and [`report`]: figures criterion does not print itself (percentiles of
//!   per-put latency, GB/s of recovery), printed as `[rocketstore] name: ...` lines and appended
//!   as JSON lines to `$ROCKETSTORE_BENCH_SUMMARY` when it is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use rocketstore::{PutMessage, Store, StoreConfig};

/// Environment variable naming the directory the benches create their stores in.
pub const BENCH_DIR_ENV: &str = "ROCKETSTORE_BENCH_DIR";
/// Environment variable naming a file the benches append their extra figures to (JSON lines).
pub const SUMMARY_ENV: &str = "ROCKETSTORE_BENCH_SUMMARY";
/// Environment variable that, set to `1`, makes [`bench_config`] enable the transient store pool
/// (messages written into pooled buffers, committed into the files with `pwrite`).
pub const TRANSIENT_ENV: &str = "ROCKETSTORE_BENCH_TRANSIENT";
/// Environment variable that, set to `0`, makes [`bench_config`] turn `pwrite_commit_log` off
/// (records stored into the pre-faulted mapping, as before it was the default).
pub const PWRITE_ENV: &str = "ROCKETSTORE_BENCH_PWRITE";
/// Environment variable that, set to a number of bytes, makes [`bench_config`] use it as
/// `flush_commit_log_writeback_bytes` (`0`: no writeback started ahead of the flush).
pub const WRITEBACK_ENV: &str = "ROCKETSTORE_BENCH_WRITEBACK";

/// Commit log file size used by the append benches (128 MiB).
pub const FILE_SIZE: u64 = 128 * 1024 * 1024;

/// Body sizes of the append and codec benches.
pub const BODY_SIZES: [usize; 3] = [100, 1024, 4096];

/// Environment variable restricting the append and codec benches to some of [`BODY_SIZES`]
/// (comma-separated, e.g. `4096`): their CPU passes run outside criterion's name filter.
pub const SIZES_ENV: &str = "ROCKETSTORE_BENCH_SIZES";

/// [`BODY_SIZES`], or those listed in `$ROCKETSTORE_BENCH_SIZES`.
pub fn body_sizes() -> Vec<usize> {
    let only: Vec<usize> = std::env::var(SIZES_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    BODY_SIZES
        .into_iter()
        .filter(|s| only.is_empty() || only.contains(s))
        .collect()
}

/// A fresh temporary directory under `$ROCKETSTORE_BENCH_DIR` (or the system temp dir).
pub fn bench_root(name: &str) -> tempfile::TempDir {
    let prefix = format!("rocketstore-bench-{name}-");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix);
    match std::env::var_os(BENCH_DIR_ENV) {
        Some(dir) if !dir.is_empty() => {
            std::fs::create_dir_all(&dir).expect("create ROCKETSTORE_BENCH_DIR");
            b.tempdir_in(dir)
        }
        _ => b.tempdir(),
    }
    .expect("create the bench directory")
}

/// RocketMQ's defaults, except: `file_size`-byte commit log files, an index of 1 M slots and
/// 4 M entries per file (84 MB instead of 420 MB), and at most 64 K consume queue units per file.
/// `transient_store_pool_enable` follows `$ROCKETSTORE_BENCH_TRANSIENT`.
pub fn bench_config(file_size: u64) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = file_size;
    c.mapped_file_size_consume_queue = 65_536 * 20;
    c.max_hash_slot_num = 1_000_000;
    c.max_index_num = 4_000_000;
    c.populate_mapped_file = true;
    c.transient_store_pool_enable = std::env::var(TRANSIENT_ENV).is_ok_and(|v| v == "1");
    c.pwrite_commit_log = std::env::var(PWRITE_ENV).map_or(true, |v| v != "0");
    if let Some(b) = std::env::var(WRITEBACK_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        c.flush_commit_log_writeback_bytes = b;
    }
    c
}

/// A body of `len` bytes (not all one value, so nothing downstream can shortcut it).
pub fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| b"0123456789abcdef"[i % 16]).collect()
}

/// `n` messages of one topic over 8 queues, with a tag and no keys.
pub fn messages<'a>(topic: &'a str, body: &'a [u8], n: usize) -> Vec<PutMessage<'a>> {
    (0..n)
        .map(|i| PutMessage {
            topic,
            body,
            queue_id: (i % 8) as i32,
            tags: Some("TagA"),
            ..Default::default()
        })
        .collect()
}

/// Waits until every record is dispatched to the consume queues and the index (at most 60 s).
pub fn wait_dispatched(store: &Store) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.dispatch_behind_bytes() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// CPU time used so far by the whole process (every thread: the caller, dispatch, allocate,
/// flush), from `CLOCK_PROCESS_CPUTIME_ID`.
pub fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// CPU time (user + system, in clock ticks of `/proc`, usually 10 ms) of every live thread of
/// this process, summed by thread name (`rs-reput`, `rs-allocate`, ...; the calling thread is
/// named after the binary).
pub fn thread_cpu_ticks() -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ppid ...": utime and stime are fields 14 and 15.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        *out.entry(comm).or_insert(0) += ticks;
    }
    out
}

/// Wall and whole-process CPU time over a stretch of work of `n` messages.
#[derive(Debug, Clone)]
pub struct CpuMeter {
    wall: Instant,
    cpu: Duration,
    threads: std::collections::BTreeMap<String, u64>,
}

impl CpuMeter {
    /// Starts measuring now.
    pub fn start() -> Self {
        CpuMeter {
            wall: Instant::now(),
            cpu: process_cpu(),
            threads: thread_cpu_ticks(),
        }
    }

    /// CPU nanoseconds per message of each thread (by name) alive at the start and now, for `n`
    /// messages (resolution: one clock tick, 10 ms, over the whole stretch).
    pub fn per_thread(&self, n: u64) -> Vec<(String, f64)> {
        let tick_ns = 1e9 / 100.0;
        thread_cpu_ticks()
            .into_iter()
            .filter_map(|(name, t)| {
                let t0 = self.threads.get(&name)?;
                Some((
                    name,
                    t.saturating_sub(*t0) as f64 * tick_ns / n.max(1) as f64,
                ))
            })
            .collect()
    }

    /// `(msg/s, CPU ns per message, CPU seconds, wall seconds)` for `n` messages since
    /// [`CpuMeter::start`].
    pub fn per_message(&self, n: u64) -> (f64, f64, f64, f64) {
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = process_cpu().saturating_sub(self.cpu).as_secs_f64();
        let n = n.max(1) as f64;
        (n / wall, cpu * 1e9 / n, cpu, wall)
    }
}

/// Total size of the regular files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Per-operation latencies in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    ns: Vec<u64>,
}

impl Latencies {
    /// Records one latency.
    pub fn push(&mut self, d: Duration) {
        self.ns.push(d.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Moves every latency of `other` into `self`.
    pub fn append(&mut self, other: &mut Latencies) {
        self.ns.append(&mut other.ns);
    }

    /// Number of latencies recorded.
    pub fn len(&self) -> usize {
        self.ns.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.ns.is_empty()
    }

    /// The `q` quantile (0.0..=1.0), in microseconds (sorts in place).
    pub fn quantile_us(&mut self, q: f64) -> f64 {
        if self.ns.is_empty() {
            return 0.0;
        }
        self.ns.sort_unstable();
        let i = ((self.ns.len() - 1) as f64 * q).round() as usize;
        self.ns[i.min(self.ns.len() - 1)] as f64 / 1e3
    }

    /// The largest latency in microseconds.
    pub fn max_us(&self) -> f64 {
        self.ns.iter().copied().max().unwrap_or(0) as f64 / 1e3
    }

    /// `"p50 .. µs, p99 .. µs, p99.99 .. µs, max .. µs"` and the same as JSON fields.
    pub fn summary(&mut self) -> (String, String) {
        let (p50, p99, p9999, max) = (
            self.quantile_us(0.5),
            self.quantile_us(0.99),
            self.quantile_us(0.9999),
            self.max_us(),
        );
        (
            format!("p50 {p50:.1} µs, p99 {p99:.1} µs, p99.99 {p9999:.1} µs, max {max:.1} µs ({} ops)", self.ns.len()),
            format!(
                "\"p50_us\": {p50:.3}, \"p99_us\": {p99:.3}, \"p9999_us\": {p9999:.3}, \"max_us\": {max:.3}, \"ops\": {}",
                self.ns.len()
            ),
        )
    }
}

/// Prints `[rocketstore] name: text` and appends `{"name": name, <json_fields>}` to the file in
/// `$ROCKETSTORE_BENCH_SUMMARY` (if set).
pub fn report(name: &str, text: &str, json_fields: &str) {
    println!("[rocketstore] {name}: {text}");
    if let Some(path) = std::env::var_os(SUMMARY_ENV).filter(|p| !p.is_empty()) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{{\"name\": \"{name}\", {json_fields}}}");
        }
    }
}
