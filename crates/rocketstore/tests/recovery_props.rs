//! Recovery properties (proptest, a few dozen cases so `cargo test` stays quick): random
//! sequences of puts, flushes, clean reopens, crashes (a copy of the open store), torn tails
//! after the durable offset and forced cleanups, checked against a model after every reopen:
//! - every message the model holds is in the store, bit-exact, at its offset, and nothing else;
//! - consume queues are gap-free and each unit points at its record; every key is indexed;
//! - recovery never truncates below the checkpoint's durable offset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rocketstore::format::{offset_to_file_name, Checkpoint};

use common::copy_tree;
use rocketstore::{ConfigValue, GetStatus, PutMessage, PutStatus, ServiceKind, Store, StoreConfig};

const FILE: u64 = 16 * 1024;
const TOPICS: [&str; 2] = ["PropA", "PropB"];

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", ConfigValue::Int(FILE as i64)),
        ("mapped_file_size_consume_queue", ConfigValue::Int(30 * 20)),
        ("max_hash_slot_num", ConfigValue::Int(32)),
        ("max_index_num", ConfigValue::Int(60)),
        ("background_threads", ConfigValue::Bool(false)),
        ("fsync_directory", ConfigValue::Bool(false)),
        ("delete_commit_log_files_interval", ConfigValue::Int(0)),
        ("delete_consume_queue_files_interval", ConfigValue::Int(0)),
    ] {
        c.set(k, v).unwrap();
    }
    c
}

#[derive(Debug, Clone)]
enum Op {
    /// Put `n` messages of `len`-byte bodies to (topic, queue).
    Put {
        n: usize,
        len: usize,
        topic: usize,
        qid: i32,
    },
    /// Flush and write the checkpoint (the durable offset moves to the end).
    Flush,
    /// Clean close and reopen.
    Reopen,
    /// kill -9: continue on a copy of the open store.
    Crash,
    /// Crash, then tear the copy's commit log at a point between the checkpoint's durable offset
    /// and the end (`frac` of the way), zeroing everything after it.
    Tear { frac: f64 },
    /// Forced cleanup (every deletable commit log file but the last).
    Cleanup,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..12, 10usize..700, 0usize..2, 0i32..3)
            .prop_map(|(n, len, topic, qid)| Op::Put { n, len, topic, qid }),
        2 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        2 => Just(Op::Crash),
        2 => (0.0f64..1.0).prop_map(|frac| Op::Tear { frac }),
        1 => Just(Op::Cleanup),
    ]
}

#[derive(Debug, Clone)]
struct Msg {
    offset: u64,
    size: u64,
    topic: usize,
    qid: i32,
    queue_offset: i64,
    body: Vec<u8>,
    key: String,
}

fn body(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 13 + i) as u8).collect()
}

/// The model check after a reopen.
fn check(store: &Store, model: &[Msg]) {
    let got: Vec<_> = store.scan(0).unwrap().map(|m| m.unwrap()).collect();
    assert_eq!(got.len(), model.len(), "record count");
    for (m, want) in got.iter().zip(model) {
        assert_eq!(m.commitlog_offset() as u64, want.offset);
        assert_eq!(m.body, want.body);
        assert_eq!(
            (m.topic.as_str(), m.queue_id),
            (TOPICS[want.topic], want.qid)
        );
        assert_eq!(m.queue_offset, want.queue_offset);
        assert!(m.crc_ok());
    }
    let mut per_queue: BTreeMap<(usize, i32), Vec<&Msg>> = BTreeMap::new();
    for m in model {
        per_queue.entry((m.topic, m.qid)).or_default().push(m);
    }
    for ((t, q), msgs) in &per_queue {
        let max = store.max_offset_in_queue(TOPICS[*t], *q);
        assert_eq!(max, msgs.last().unwrap().queue_offset + 1, "{t}/{q} max");
        for m in msgs {
            let g = store
                .get_message(TOPICS[*t], *q, m.queue_offset, 1, None, None)
                .unwrap();
            assert_eq!(g.status, GetStatus::Found, "{t}/{q} at {}", m.queue_offset);
            assert_eq!(g.messages[0].commitlog_offset() as u64, m.offset);
        }
    }
    for m in model.iter().rev().take(8) {
        let q = store
            .query_message(TOPICS[m.topic], &m.key, 8, 0, i64::MAX)
            .unwrap();
        assert!(
            q.messages
                .iter()
                .any(|x| x.commitlog_offset() as u64 == m.offset),
            "key {} not indexed",
            m.key
        );
    }
}

fn durable(root: &Path) -> u64 {
    std::fs::read(root.join("checkpoint"))
        .ok()
        .and_then(|b| Checkpoint::decode(&b).ok())
        .and_then(|c| c.ext)
        .map_or(0, |e| e.durable_commitlog_offset.max(0) as u64)
}

struct World {
    dirs: Vec<tempfile::TempDir>,
    store: Option<Store>,
    model: Vec<Msg>,
    next_queue_offset: BTreeMap<(usize, i32), i64>,
    seq: u64,
}

impl World {
    /// An empty store in a fresh directory, and an empty model.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), config()).unwrap();
        World {
            dirs: vec![dir],
            store: Some(store),
            model: Vec::new(),
            next_queue_offset: BTreeMap::new(),
            seq: 0,
        }
    }

    fn root(&self) -> PathBuf {
        self.dirs.last().unwrap().path().to_path_buf()
    }

    fn store(&self) -> &Store {
        self.store.as_ref().unwrap()
    }

    /// Opens the current root and checks it against the model (after `truncate_at`, if given,
    /// the model keeps only the messages wholly before it).
    fn reopen(&mut self, truncate_at: Option<u64>) {
        let root = self.root();
        let store = Store::open(&root, config()).unwrap();
        if let Some(t) = truncate_at {
            // A suffix of the commit log is gone: each queue continues at its first lost offset.
            for m in self.model.iter().filter(|m| m.offset + m.size > t) {
                let next = self.next_queue_offset.entry((m.topic, m.qid)).or_insert(0);
                *next = (*next).min(m.queue_offset);
            }
            self.model.retain(|m| m.offset + m.size <= t);
        }
        check(&store, &self.model);
        self.store = Some(store);
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Put { n, len, topic, qid } => {
                for _ in 0..*n {
                    let b = body(self.seq, *len);
                    let key = format!("p{}", self.seq);
                    let keys = [key.as_str()];
                    let r = self
                        .store()
                        .put(&PutMessage {
                            topic: TOPICS[*topic],
                            body: &b,
                            queue_id: *qid,
                            keys: &keys,
                            ..Default::default()
                        })
                        .unwrap();
                    assert_eq!(r.status, PutStatus::PutOk);
                    let next = self.next_queue_offset.entry((*topic, *qid)).or_insert(0);
                    assert_eq!(r.queue_offset, *next, "queue offset continues");
                    *next += 1;
                    self.model.push(Msg {
                        offset: r.commitlog_offset as u64,
                        size: r.wrote_bytes as u64,
                        topic: *topic,
                        qid: *qid,
                        queue_offset: r.queue_offset,
                        body: b,
                        key,
                    });
                    self.seq += 1;
                }
            }
            Op::Flush => {
                self.store().flush().unwrap();
                self.store().run_service_once(ServiceKind::FlushCq).unwrap();
            }
            Op::Reopen => {
                self.store.take().unwrap().close().unwrap();
                self.reopen(None);
            }
            Op::Crash | Op::Tear { .. } => {
                let copy = tempfile::tempdir().unwrap();
                // Page cache content of the live store (a process crash loses nothing).
                self.store().flush().unwrap();
                copy_tree(&self.root(), copy.path());
                self.store.take().unwrap().close().unwrap();
                self.dirs.push(copy);
                let mut cut = None;
                if let Op::Tear { frac } = op {
                    let root = self.root();
                    // Not below the durable offset, nor below the first file (cleanup may have
                    // deleted files since the checkpoint was written).
                    let first = std::fs::read_dir(root.join("commitlog"))
                        .unwrap()
                        .filter_map(|e| e.unwrap().file_name().to_str()?.parse::<u64>().ok())
                        .min()
                        .unwrap_or(0);
                    let d = durable(&root).max(first);
                    let end = self.model.last().map_or(0, |m| m.offset + m.size);
                    if end > d {
                        let at = d + ((end - d) as f64 * frac) as u64;
                        // Zero from `at` to the end of its file, and drop later files.
                        let dir = root.join("commitlog");
                        let file = dir.join(offset_to_file_name(at - at % FILE));
                        let mut b = std::fs::read(&file).unwrap();
                        b[(at % FILE) as usize..].fill(0);
                        std::fs::write(&file, b).unwrap();
                        let mut o = at - at % FILE + FILE;
                        while dir.join(offset_to_file_name(o)).exists() {
                            std::fs::remove_file(dir.join(offset_to_file_name(o))).unwrap();
                            o += FILE;
                        }
                        cut = Some(at);
                    }
                }
                self.reopen(cut);
                if let Some(at) = cut {
                    // Never below the durable offset.
                    assert!(self.store().max_commitlog_offset() >= at.min(durable(&self.root())));
                }
            }
            Op::Cleanup => {
                self.store().flush().unwrap();
                let r = self.store().delete_expired_files(true).unwrap();
                let min = r.min_commitlog_offset;
                self.model.retain(|m| m.offset >= min);
                assert!(self.store().commitlog_files().len() <= 1);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // 24 by default; PROPTEST_CASES=n for a longer run.
        cases: if std::env::var("PROPTEST_CASES").is_ok() { ProptestConfig::default().cases } else { 24 },
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn recovery_keeps_exactly_the_model(ops in proptest::collection::vec(op(), 1..14)) {
        let mut w = World::new();
        for op in &ops {
            w.apply(op);
        }
        w.apply(&Op::Reopen);
        w.apply(&Op::Crash);
        w.store.take().unwrap().close().unwrap();
    }
}

/// The case proptest shrank to (a key put after a torn tail must be found after reopen and crash).
#[test]
fn key_put_after_a_torn_tail_stays_indexed() {
    let mut w = World::new();
    let put = |n| Op::Put {
        n,
        len: 10,
        topic: 0,
        qid: 0,
    };
    for op in [
        put(1),
        Op::Flush,
        Op::Flush,
        put(2),
        Op::Tear { frac: 0.0 },
        put(1),
        Op::Reopen,
        Op::Crash,
    ] {
        w.apply(&op);
    }
    w.store.take().unwrap().close().unwrap();
}
