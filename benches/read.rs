//! Reads of a store of 262,144 messages with 1 KiB bodies (one topic, 4 queues, a tag and a
//! unique key each), written once and fully dispatched before measuring:
//!
//! * `read_cq/get_message/{32,1024}`: `Store::get_message` through the consume queue, batches of
//!   32 (RocketMQ's in-memory transfer limit, the default) and 1,024 messages (limits raised).
//!   Every message is copied out of the mapping and its body CRC checked (the read path decodes
//!   with `check_crc`). Throughput in messages.
//! * `read_cq/get_message_records/{32,1024}`: the same reads without copying (`RecordHandle`s
//!   viewed in place, each body touched): what the Python binding builds its messages from.
//! * `read_log/visit_records/65536`: the commit log in order, borrowed views (`Store::visit_records`,
//!   what `read_arrow` fills its columns from), each body touched.
//! * `index/query_message`: `Store::query_message` of one key (hash slot, index chain, commit log
//!   record, owned decode), keys in a scrambled order. Throughput in lookups.
//! * `index/query_message_records`: the same lookups returning `RecordHandle`s, each viewed in
//!   place (what the Python binding's `query_message` builds its messages from).
//!
//! * `index/query_messages_records/256`: the same lookups, 256 keys per call
//!   (`Store::query_messages_records`, what the binding's `query_messages` builds from): groups of
//!   keys have their index slots, chain heads and records loaded together. Throughput in lookups.
//!
//! * `index/memory_floor` (a CPU line only): the floor under a key lookup, the same chain of
//!   dependent reads (hash slot, index entries, the record's TOTALSIZE and its last bytes) over
//!   the same index and commit log files mapped read-only, with none of the store's code.
//!   `index/memory_floor_serial`: the same, each lookup's key depending on the previous
//!   lookup's result, so no two lookups' misses overlap (a store lookup's latency floor).
//! * `[rocketstore] smaps ...` lines: how the store's mappings (and the floor's) are mapped,
//!   from `/proc/self/smaps`: resident kB and how much of it is mapped with 2 MiB page table
//!   entries (`FilePmdMapped`), which decides the TLB cost of random reads.
//!
//! Criterion measures wall time. After each group, a `[rocketstore] cpu ...` line reports the
//! same loop run for two seconds with the process CPU time (every thread, from
//! `/proc/self/stat`) per message beside msg/s, because CPU per message is what stays stable on
//! a shared machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rocketstore::{GetStatus, PutMessage, Store};
use rocketstore_benches::{bench_config, bench_root, body, report, wait_dispatched};

const N: usize = 262_144;
const QUEUES: usize = 4;
/// Keys per `query_messages_records` call.
const KEY_BATCH: usize = 256;
const TOPIC: &str = "ReadTopic";

fn read_config() -> rocketstore::StoreConfig {
    let mut cfg = bench_config(128 * 1024 * 1024);
    cfg.max_transfer_count_on_message_in_memory = 1024;
    cfg.max_transfer_bytes_on_message_in_memory = 4 << 20;
    cfg
}

fn setup(dir: &std::path::Path) -> Store {
    let store = Store::open(dir, read_config()).unwrap();
    let body = body(1024);
    let keys: Vec<String> = (0..N).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(4096) {
        let msgs: Vec<PutMessage<'_>> = chunk
            .iter()
            .map(|&i| PutMessage {
                topic: TOPIC,
                body: &body,
                queue_id: (i % QUEUES) as i32,
                tags: Some("TagA"),
                keys: &key_refs[i],
                ..Default::default()
            })
            .collect();
        store.put_batch(&msgs).unwrap();
    }
    wait_dispatched(&store);
    wait_background_idle();
    report(
        "read setup",
        &format!(
            "{N} messages, {} MB of commit log, dispatched",
            store.max_commitlog_offset() / 1_000_000
        ),
        &format!(
            "\"messages\": {N}, \"bytes\": {}",
            store.max_commitlog_offset()
        ),
    );
    store
}

/// Waits (up to a minute) until the store's background threads have used no CPU for 200 ms:
/// after the setup's puts the allocate thread still prepares the next commit log file
/// (faulting in a whole file), which the CPU figures would otherwise count as the reads'.
fn wait_background_idle() {
    let others = || -> Duration {
        let me = cpu_of("/proc/thread-self/stat");
        cpu_of("/proc/self/stat").saturating_sub(me)
    };
    let start = Instant::now();
    let (mut last, mut quiet_since) = (others(), Instant::now());
    while start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
        let now = others();
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        } else if quiet_since.elapsed() >= Duration::from_millis(200) {
            break;
        }
    }
}

/// Process CPU time (user + system, every thread) from `/proc/self/stat`, in 10 ms ticks.
fn process_cpu() -> Duration {
    cpu_of("/proc/self/stat")
}

/// CPU time (user + system) from a `stat` file of `/proc` (a process's or a thread's).
fn cpu_of(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Runs `step` (which reads `per_step` messages) for about two seconds and reports msg/s and
/// process CPU ns per message.
fn cpu_figure(name: &str, per_step: u64, mut step: impl FnMut()) {
    let me = || cpu_of("/proc/thread-self/stat");
    let (c0, m0, t0) = (process_cpu(), me(), Instant::now());
    let mut msgs = 0u64;
    while t0.elapsed() < Duration::from_secs(2) {
        step();
        msgs += per_step;
    }
    let (wall, cpu) = (t0.elapsed(), process_cpu().saturating_sub(c0));
    let mine = me().saturating_sub(m0);
    let rate = msgs as f64 / wall.as_secs_f64();
    let ns = cpu.as_nanos() as f64 / msgs.max(1) as f64;
    let mine_ns = mine.as_nanos() as f64 / msgs.max(1) as f64;
    report(
        &format!("cpu {name}"),
        &format!(
            "{:.2} M msg/s, {ns:.0} ns CPU per message (process, all threads; {mine_ns:.0} ns \
             on the reading thread)",
            rate / 1e6
        ),
        &format!(
            "\"msgs_per_s\": {rate:.0}, \"cpu_ns_per_msg\": {ns:.1}, \"thread_cpu_ns_per_msg\": \
             {mine_ns:.1}"
        ),
    );
}

fn read(c: &mut Criterion) {
    let dir = bench_root("read");
    let store = setup(dir.path());
    let per_queue = (N / QUEUES) as i64;

    let mut g = c.benchmark_group("read_cq");
    for batch in [32usize, 1024] {
        g.throughput(Throughput::Elements(batch as u64));
        let mut q = 0i32;
        let mut off = 0i64;
        g.bench_with_input(
            BenchmarkId::new("get_message", batch),
            &batch,
            |b, &batch| {
                b.iter(|| {
                    if off + batch as i64 > per_queue {
                        off = 0;
                        q = (q + 1) % QUEUES as i32;
                    }
                    let r = store.get_message(TOPIC, q, off, batch, None, None).unwrap();
                    debug_assert_eq!(r.status, GetStatus::Found);
                    debug_assert_eq!(r.messages.len(), batch);
                    off = r.next_begin_offset;
                    black_box(r.messages);
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("get_message_records", batch),
            &batch,
            |b, &batch| {
                b.iter(|| {
                    if off + batch as i64 > per_queue {
                        off = 0;
                        q = (q + 1) % QUEUES as i32;
                    }
                    let r = store
                        .get_message_records(TOPIC, q, off, batch, None, None)
                        .unwrap();
                    debug_assert_eq!(r.records.len(), batch);
                    off = r.next_begin_offset;
                    let mut sum = 0usize;
                    for h in &r.records {
                        sum += h.view().map_or(0, |v| v.body.len());
                    }
                    black_box(sum);
                });
            },
        );
    }
    g.finish();
    for batch in [32usize, 1024] {
        let (mut q, mut off) = (0i32, 0i64);
        let mut next = |owned: bool| {
            if off + batch as i64 > per_queue {
                off = 0;
                q = (q + 1) % QUEUES as i32;
            }
            if owned {
                let r = store.get_message(TOPIC, q, off, batch, None, None).unwrap();
                off = r.next_begin_offset;
                black_box(r.messages);
            } else {
                let r = store
                    .get_message_records(TOPIC, q, off, batch, None, None)
                    .unwrap();
                off = r.next_begin_offset;
                let sum: usize = r
                    .records
                    .iter()
                    .map(|h| h.view().map_or(0, |v| v.body.len()))
                    .sum();
                black_box(sum);
            }
        };
        cpu_figure(
            &format!("read_cq/get_message/{batch}"),
            batch as u64,
            || next(true),
        );
        cpu_figure(
            &format!("read_cq/get_message_records/{batch}"),
            batch as u64,
            || next(false),
        );
    }

    let mut g = c.benchmark_group("read_log");
    const LOG_BATCH: usize = 65_536;
    g.throughput(Throughput::Elements(LOG_BATCH as u64));
    let mut from = 0u64;
    let mut visit = || {
        let mut sum = 0usize;
        let mut n = 0usize;
        let next = store
            .visit_records(from, u64::MAX, LOG_BATCH, false, |v| {
                sum += v.body.len();
                n += 1;
                true
            })
            .unwrap();
        // 262,144 records: four full batches, then from the start again.
        from = if n < LOG_BATCH || next >= store.max_commitlog_offset() {
            0
        } else {
            next
        };
        black_box(sum);
    };
    g.bench_function(BenchmarkId::new("visit_records", LOG_BATCH), |b| {
        b.iter(&mut visit)
    });
    g.finish();
    cpu_figure("read_log/visit_records/65536", LOG_BATCH as u64, &mut visit);

    let mut g = c.benchmark_group("index");
    g.throughput(Throughput::Elements(1));
    let keys: Vec<String> = (0..N).map(|i| format!("key-{}", (i * 7919) % N)).collect();
    let mut i = 0usize;
    g.bench_function("query_message", |b| {
        b.iter(|| {
            let k = &keys[i % N];
            i += 1;
            let r = store.query_message(TOPIC, k, 1, 0, i64::MAX).unwrap();
            debug_assert_eq!(r.messages.len(), 1);
            black_box(r.messages);
        });
    });
    g.bench_function("query_message_records", |b| {
        b.iter(|| {
            let k = &keys[i % N];
            i += 1;
            let r = store
                .query_message_records(TOPIC, k, 1, 0, i64::MAX)
                .unwrap();
            debug_assert_eq!(r.len(), 1);
            black_box(r.first().and_then(|h| h.view()).map(|v| v.body.len()));
        });
    });
    g.finish();
    let mut g = c.benchmark_group("index");
    g.throughput(Throughput::Elements(KEY_BATCH as u64));
    let mut from = 0usize;
    let mut batch = || {
        let ks = &keys[from..from + KEY_BATCH];
        from = (from + KEY_BATCH) % (N - N % KEY_BATCH);
        let r = store
            .query_messages_records(TOPIC, ks, 1, 0, i64::MAX)
            .unwrap();
        debug_assert!(r.iter().all(|h| h.len() == 1));
        black_box(
            r.iter()
                .filter_map(|h| h.first().and_then(|h| h.view()).map(|v| v.body.len()))
                .sum::<usize>(),
        );
    };
    g.bench_function(BenchmarkId::new("query_messages_records", KEY_BATCH), |b| {
        b.iter(&mut batch)
    });
    g.finish();
    cpu_figure(
        "index/query_messages_records/256",
        KEY_BATCH as u64,
        &mut batch,
    );
    cpu_figure("index/query_message", 1, || {
        let k = &keys[i % N];
        i += 1;
        black_box(store.query_message(TOPIC, k, 1, 0, i64::MAX).unwrap());
    });
    cpu_figure("index/query_message_records", 1, || {
        let k = &keys[i % N];
        i += 1;
        let r = store
            .query_message_records(TOPIC, k, 1, 0, i64::MAX)
            .unwrap();
        black_box(r.first().and_then(|h| h.view()).map(|v| v.body.len()));
    });
    smaps_summary("writer", dir.path());
    memory_floor(dir.path(), &keys);
    store.close().unwrap();
}

/// Prints `/proc/self/smaps` summed over the mappings of the store's files, by directory and
/// permissions: maps, size, resident and `FilePmdMapped` kB (resident through 2 MiB entries).
fn smaps_summary(label: &str, dir: &std::path::Path) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let root = dir.to_string_lossy().to_string();
    let mut sums: std::collections::BTreeMap<String, [u64; 4]> = Default::default();
    let mut cur: Option<String> = None;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            let f: Vec<&str> = line.split_whitespace().collect();
            cur = f.get(5).filter(|p| p.starts_with(&root)).map(|p| {
                let sub = p[root.len()..]
                    .trim_start_matches('/')
                    .split('/')
                    .next()
                    .unwrap_or("");
                format!("{sub} {}", f[1])
            });
            if let Some(c) = &cur {
                sums.entry(c.clone()).or_default()[0] += 1;
            }
            continue;
        }
        let Some(c) = &cur else { continue };
        let kb = |l: &str| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let e = sums.entry(c.clone()).or_default();
        if line.starts_with("Size:") {
            e[1] += kb(line)
        }
        if line.starts_with("Rss:") {
            e[2] += kb(line)
        }
        if line.starts_with("FilePmdMapped:") {
            e[3] += kb(line)
        }
    }
    for (k, [n, size, rss, pmd]) in sums {
        println!("[rocketstore] smaps {label}: {k}: {n} maps, {size} kB, rss {rss} kB, FilePmdMapped {pmd} kB");
    }
}

/// The same-run floor under `index/query_message_records`: the dependent reads of one lookup
/// and nothing else, over the files of the same (open) store, mapped again read-only: the hash slot (in the 80 MB index file), the chain's entries until the
/// key's hash (the store walks the same chain), then the record it points at in the commit
/// log: its TOTALSIZE, and its last word (the properties, where the store checks the key).
/// Three to four random reads, each waiting for the one before.
fn memory_floor(dir: &std::path::Path, keys: &[String]) {
    use rocketstore::format::index::{entry_position, index_slot, slot_position};
    use rocketstore::format::index_key_hash_of;
    use rocketstore::probe::MappedWords;

    let files_in = |sub: &str| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let index_files = files_in("index");
    let [index_path] = index_files.as_slice() else {
        panic!("expected one index file, found {index_files:?}");
    };
    let index = MappedWords::open(index_path).unwrap();
    let log: Vec<MappedWords> = files_in("commitlog")
        .iter()
        .map(|p| MappedWords::open(p).unwrap())
        .collect();
    let file_size = log[0].len() as u64;
    // The file's slot count is the store's configuration (the header's hashSlotCount counts
    // the slots in use, RocketMQ's meaning, not the table's size).
    let slots = u32::try_from(read_config().max_hash_slot_num).unwrap();
    let be = |w: Option<u32>| u32::from_be(w.unwrap_or(0));
    // Big-endian 32-bit value at any byte offset (two aligned words of the same line or two).
    let be_at = |m: &MappedWords, pos: usize| -> u32 {
        let (a, b) = (
            m.load_u32(pos).unwrap_or(0),
            m.load_u32(pos + 4).unwrap_or(0),
        );
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&a.to_ne_bytes());
        bytes[4..].copy_from_slice(&b.to_ne_bytes());
        let at = pos % 4;
        u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
    };
    let lookup = |key: &str| -> u32 {
        let hash = index_key_hash_of(TOPIC, key);
        let slot = index_slot(hash, slots);
        let mut entry = be(index.load_u32(slot_position(slot) as usize)); // read 1: the slot
        let mut phy = None;
        for _ in 0..16 {
            if entry == 0 {
                break;
            }
            let e = entry_position(slots, entry) as usize;
            let key_hash = be(index.load_u32(e)); // read 2 (and more on a collision)
            if key_hash as i32 == hash {
                let hi = u64::from(be(index.load_u32(e + 4)));
                phy = Some(hi << 32 | u64::from(be(index.load_u32(e + 8))));
                break;
            }
            entry = be(index.load_u32(e + 16));
        }
        let Some(phy) = phy else { return 0 };
        let Some(file) = log.get((phy / file_size) as usize) else {
            return 0;
        };
        let pos = (phy % file_size) as usize;
        let size = be_at(file, pos); // read 3: the record's TOTALSIZE
        be_at(file, pos + size as usize - 4) // read 4: its properties' end
    };
    // Fault the pages in first (the store's own lookups ran on pages its writer had mapped).
    // Every key must reach its record, or the floor would time a shorter chain.
    let found = keys.iter().filter(|k| lookup(k) != 0).count();
    assert_eq!(found, keys.len(), "the floor's walk misses keys");
    let mut i = 0usize;
    cpu_figure("index/memory_floor", 1, || {
        let k = &keys[i % N];
        i += 1;
        black_box(lookup(k));
    });
    smaps_summary("floor", dir);
    let zero = black_box(0u32);
    let mut prev = 0u32;
    cpu_figure("index/memory_floor_serial", 1, || {
        let k = &keys[(i + (prev & zero) as usize) % N];
        i += 1;
        prev = lookup(k);
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = read
}
criterion_main!(benches);
