//! kill -9 crash harness (reliability.md §3.2, matrix rows A1 and A2), `harness = false`.
//!
//! The parent re-executes this binary as a writer child. The child puts batches of messages and
//! prints one ledger line per acknowledged message (`ACK offset size queue_id queue_offset seq`)
//! only after the put returned PUT_OK. The parent kills the child with SIGKILL after a random
//! delay, reopens the store (abnormal recovery: the abort file is present), and checks:
//! - every acknowledged message is readable, bit-exact, with a valid CRC (0 acked lost);
//! - every acknowledged message is reachable through its consume queue at its queue offset;
//! - each queue is gap-free and the store accepts new writes.
//!
//! A process crash leaves the page cache intact, so both SYNC_FLUSH and ASYNC_FLUSH (mmap, no
//! transient pool) must lose nothing. Environment: `ROCKETSTORE_CRASH_RUNS` (default 60, split
//! over the modes), `ROCKETSTORE_CRASH_SEED`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocketstore::{ConfigValue, GetStatus, PutMessage, PutStatus, Store, StoreConfig};

const TOPICS: [&str; 3] = ["CrashA", "CrashB", "CrashC"];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn config(mode: &str) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.set("mapped_file_size_commit_log", ConfigValue::Int(256 * 1024))
        .unwrap();
    c.set("mapped_file_size_consume_queue", ConfigValue::Int(300 * 20))
        .unwrap();
    c.set("max_hash_slot_num", ConfigValue::Int(1000)).unwrap();
    c.set("max_index_num", ConfigValue::Int(4000)).unwrap();
    let flush = if mode == "sync" {
        "SYNC_FLUSH"
    } else {
        "ASYNC_FLUSH"
    };
    c.set("flush_disk_type", ConfigValue::Str(flush.into()))
        .unwrap();
    c
}

fn body_for(seq: u64) -> Vec<u8> {
    let len = 16 + (seq * 7919 % 900) as usize;
    let mut b = Vec::with_capacity(len);
    while b.len() < len {
        b.extend_from_slice(&seq.to_be_bytes());
    }
    b.truncate(len);
    b
}

fn child(dir: &str, mode: &str, seed: u64) {
    let store = Store::open(dir, config(mode)).unwrap();
    let mut rng = Rng(seed | 1);
    let mut seq = seed << 32;
    let out = std::io::stdout();
    loop {
        let n = 1 + rng.below(8) as usize;
        let bodies: Vec<Vec<u8>> = (0..n as u64).map(|i| body_for(seq + i)).collect();
        let keys: Vec<String> = (0..n as u64).map(|i| format!("k{}", seq + i)).collect();
        let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
        let msgs: Vec<PutMessage<'_>> = (0..n)
            .map(|i| PutMessage {
                topic: TOPICS[((seq + i as u64) % 3) as usize],
                body: &bodies[i],
                queue_id: ((seq + i as u64) % 4) as i32,
                keys: &key_refs[i],
                ..Default::default()
            })
            .collect();
        let results = store.put_batch(&msgs).unwrap();
        let mut lock = out.lock();
        for (i, r) in results.iter().enumerate() {
            if r.status == PutStatus::PutOk {
                writeln!(
                    lock,
                    "ACK {} {} {} {} {}",
                    r.commitlog_offset,
                    r.wrote_bytes,
                    msgs[i].queue_id,
                    r.queue_offset,
                    seq + i as u64
                )
                .unwrap();
            }
        }
        lock.flush().unwrap();
        seq += n as u64;
    }
}

#[derive(Debug, Clone, Copy)]
struct Ack {
    offset: u64,
    size: i32,
    queue_id: i32,
    queue_offset: i64,
    seq: u64,
}

fn run_once(dir: &std::path::Path, mode: &str, rng: &mut Rng, run: u64) -> (usize, Duration) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .env("ROCKETSTORE_CRASH_CHILD", "1")
        .env("ROCKETSTORE_CRASH_DIR", dir)
        .env("ROCKETSTORE_CRASH_MODE", mode)
        .env("ROCKETSTORE_CRASH_CHILD_SEED", (run + 1).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 6 && f[0] == "ACK" {
                acks.push(Ack {
                    offset: f[1].parse().unwrap(),
                    size: f[2].parse().unwrap(),
                    queue_id: f[3].parse().unwrap(),
                    queue_offset: f[4].parse().unwrap(),
                    seq: f[5].parse().unwrap(),
                });
            }
        }
        acks
    });
    std::thread::sleep(Duration::from_millis(30 + rng.below(400)));
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let acks = reader.join().unwrap();

    let t = Instant::now();
    let store = Store::open(dir, config(mode)).unwrap();
    let recovery = t.elapsed();
    for a in &acks {
        let m = store.look_message_by_offset(a.offset).unwrap_or_else(|e| {
            panic!("{mode} run {run}: acked message at {} lost: {e}", a.offset)
        });
        assert_eq!(m.store_size, a.size);
        assert_eq!(
            m.body,
            body_for(a.seq),
            "{mode} run {run}: body differs at {}",
            a.offset
        );
        assert!(m.crc_ok());
        assert_eq!((m.queue_id, m.queue_offset), (a.queue_id, a.queue_offset));
        let g = store
            .get_message(&m.topic, a.queue_id, a.queue_offset, 1, None, None)
            .unwrap();
        assert_eq!(
            g.status,
            GetStatus::Found,
            "{mode} run {run}: not in its consume queue"
        );
        assert_eq!(g.messages[0].commitlog_offset as u64, a.offset);
    }
    // Queues are gap-free from min to max, and CQ entries agree with the commit log.
    for (topic, qid, min, max) in store.consume_queues() {
        let mut off = min;
        while off < max {
            let g = store.get_message(&topic, qid, off, 32, None, None).unwrap();
            assert_eq!(g.status, GetStatus::Found, "{topic}/{qid} at {off}");
            for (i, m) in g.messages.iter().enumerate() {
                assert_eq!(m.queue_offset, off + i as i64);
                assert_eq!((m.topic.as_str(), m.queue_id), (topic.as_str(), qid));
            }
            off = g.next_begin_offset;
        }
    }
    let r = store
        .put(&PutMessage {
            topic: "CrashA",
            body: b"after",
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    store.close().unwrap();
    (acks.len(), recovery)
}

fn main() {
    if std::env::var("ROCKETSTORE_CRASH_CHILD").is_ok() {
        let dir = std::env::var("ROCKETSTORE_CRASH_DIR").unwrap();
        let mode = std::env::var("ROCKETSTORE_CRASH_MODE").unwrap();
        let seed = std::env::var("ROCKETSTORE_CRASH_CHILD_SEED")
            .unwrap()
            .parse()
            .unwrap();
        child(&dir, &mode, seed);
        return;
    }
    let runs: u64 = std::env::var("ROCKETSTORE_CRASH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("ROCKETSTORE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("crash harness: {runs} runs, seed {seed}");
    let mut rng = Rng(seed | 1);
    let mut passed = 0;
    for mode in ["sync", "async"] {
        let dir = tempfile::tempdir().unwrap();
        let mut acked = 0;
        let mut worst = Duration::ZERO;
        for run in 0..runs / 2 {
            let (n, rec) = run_once(dir.path(), mode, &mut rng, run);
            acked += n;
            worst = worst.max(rec);
            passed += 1;
        }
        println!(
            "test crash_{mode} ... ok ({} kill -9 runs, {acked} acknowledged messages, 0 lost, slowest recovery {worst:?})",
            runs / 2
        );
    }
    println!("{passed} passed, 0 failed");
}
