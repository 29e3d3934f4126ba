//! On-disk damage (reliability.md §7 matrix rows A4–A5, C1–C4, C7–C9, G3) and the offline
//! repair `rebuild_indexes`.
//!
//! Every scenario damages a closed store, reopens it and runs the consistency check of the
//! matrix ("Check"): a full commit log scan with CRCs; every consume queue unit points at its
//! record (topic, queue, queue offset) and queues are gap-free; every record is in its queue;
//! every key resolves through the index; the store accepts a write afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocketstore::format::{offset_to_file_name, Checkpoint};

use common::{copy_tree, files_under, Rng};
use rocketstore::{
    ConfigValue, Error, GetStatus, PutMessage, PutResult, PutStatus, ServiceKind, Store,
    StoreConfig,
};

const FILE: u64 = 64 * 1024;
const TOPICS: [&str; 2] = ["DamageA", "DamageB"];

fn config(pairs: &[(&str, ConfigValue)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", ConfigValue::Int(FILE as i64)),
        ("mapped_file_size_consume_queue", ConfigValue::Int(50 * 20)),
        ("max_hash_slot_num", ConfigValue::Int(64)),
        ("max_index_num", ConfigValue::Int(100)),
        ("background_threads", ConfigValue::Bool(false)),
        ("fsync_directory", ConfigValue::Bool(false)),
    ] {
        c.set(k, v).unwrap();
    }
    for (k, v) in pairs {
        c.set(k, v.clone()).unwrap();
    }
    c
}

fn tolerant(mode: &str) -> StoreConfig {
    config(&[("recovery_mode", ConfigValue::Str(mode.into()))])
}

fn body_for(i: u64) -> Vec<u8> {
    let len = 40 + (i * 37 % 120) as usize;
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

/// Puts messages `from..to` (two topics, two queues each, one key each).
fn put_range(store: &Store, from: u64, to: u64) -> Vec<PutResult> {
    let mut out = Vec::new();
    for i in from..to {
        let body = body_for(i);
        let key = format!("k{i}");
        let keys = [key.as_str()];
        let r = store
            .put(&PutMessage {
                topic: TOPICS[(i % 2) as usize],
                body: &body,
                queue_id: ((i / 2) % 2) as i32,
                tags: Some("TagA"),
                keys: &keys,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        out.push(r);
    }
    out
}

/// A closed store with `n` messages.
fn populate(dir: &Path, n: u64) -> Vec<PutResult> {
    let store = Store::open(dir, config(&[])).unwrap();
    let r = put_range(&store, 0, n);
    store.close().unwrap();
    r
}

fn cl_file(root: &Path, offset: u64) -> PathBuf {
    root.join("commitlog")
        .join(offset_to_file_name(offset - offset % FILE))
}

/// Sets the checkpoint's durable offset (our extension).
fn set_durable(root: &Path, durable: u64) {
    let p = root.join("checkpoint");
    let mut cp = Checkpoint::decode(&std::fs::read(&p).unwrap()).unwrap();
    cp.ext.as_mut().unwrap().durable_commitlog_offset = durable as i64;
    std::fs::write(&p, cp.encode()).unwrap();
}

/// The matrix's consistency check. `expect` are messages that must be present (bit-exact).
fn check(store: &Store, expect: &[(u64, &PutResult)]) {
    // 1. full scan with CRC.
    let mut records = Vec::new();
    let mut scanner = store.scan(0).unwrap().with_crc_check(true);
    for m in scanner.by_ref() {
        let m = m.unwrap();
        assert!(m.crc_ok());
        records.push(m);
    }
    assert_eq!(
        records
            .last()
            .map_or(store.min_commitlog_offset(), |m| m.commitlog_offset()
                as u64
                + m.store_size as u64),
        store.max_commitlog_offset()
    );
    for (i, r) in expect {
        let m = store
            .look_message_by_offset(r.commitlog_offset as u64)
            .unwrap_or_else(|e| panic!("message {i} at {} lost: {e}", r.commitlog_offset));
        assert_eq!(m.body, body_for(*i), "message {i}");
        assert_eq!(m.queue_offset, r.queue_offset);
    }
    // 2. every record is in its queue at its queue offset; queues are gap-free.
    let mut per_queue: BTreeMap<(String, i32), Vec<(i64, i64)>> = BTreeMap::new();
    for m in &records {
        if !rocketstore::format::is_safe_topic_dir(&m.topic) {
            continue; // kept in the commit log, never given a consume queue
        }
        per_queue
            .entry((m.topic.clone(), m.queue_id))
            .or_default()
            .push((m.queue_offset, m.commitlog_offset()));
    }
    for ((topic, qid), offs) in &per_queue {
        let min = store.min_offset_in_queue(topic, *qid);
        let max = store.max_offset_in_queue(topic, *qid);
        assert_eq!(max, offs.last().unwrap().0 + 1, "{topic}/{qid} max");
        for (i, (qo, phy)) in offs.iter().enumerate() {
            assert_eq!(
                *qo,
                offs[0].0 + i as i64,
                "{topic}/{qid}: queue offsets not contiguous"
            );
            if *qo < min {
                continue;
            }
            let g = store.get_message(topic, *qid, *qo, 1, None, None).unwrap();
            assert_eq!(g.status, GetStatus::Found, "{topic}/{qid} at {qo}");
            assert_eq!(
                g.messages[0].commitlog_offset(),
                *phy,
                "{topic}/{qid} at {qo}"
            );
        }
    }
    let queues = store.consume_queues();
    for (topic, qid, min, max) in &queues {
        if min < max {
            assert!(
                per_queue.contains_key(&(topic.clone(), *qid)),
                "queue {topic}/{qid} has units but no records"
            );
        }
    }
    // 3. every key resolves through the index to its record.
    for m in &records {
        let Some(key) = m.keys().into_iter().next() else {
            continue;
        };
        let q = store.query_message(&m.topic, key, 64, 0, i64::MAX).unwrap();
        assert!(
            q.messages
                .iter()
                .any(|x| x.commitlog_offset() == m.commitlog_offset()),
            "key {key} not found through the index"
        );
    }
}

/// Opens, checks, writes one message, closes.
fn open_check(root: &Path, cfg: StoreConfig, expect: &[(u64, &PutResult)]) -> Store {
    let store = Store::open(root, cfg).unwrap_or_else(|e| panic!("open failed: {e}"));
    check(&store, expect);
    store
}

fn finish(store: Store) {
    let r = store
        .put(&PutMessage {
            topic: TOPICS[0],
            body: b"after",
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    store.close().unwrap();
}

fn indexed(results: &[PutResult]) -> Vec<(u64, &PutResult)> {
    results
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u64, r))
        .collect()
}

fn flip(path: &Path, pos: usize, bit: u8) {
    let mut b = std::fs::read(path).unwrap();
    b[pos] ^= 1 << bit;
    std::fs::write(path, b).unwrap();
}

fn cq_dir(root: &Path, topic: &str, qid: i32) -> PathBuf {
    root.join("consumequeue").join(topic).join(qid.to_string())
}

fn cq_files(root: &Path, topic: &str, qid: i32) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cq_dir(root, topic, qid))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn index_files(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("index"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Copies a store that is open (after a flush): the copy looks like the disk after a kill -9
/// (abort file present, page cache content).
fn crash_copy(store: &Store, dst: &Path) {
    store.flush().unwrap();
    copy_tree(store.root(), dst);
}

// ---- C1: torn last record ------------------------------------------------------------------

#[test]
fn c1_every_prefix_of_a_torn_last_record_recovers_to_the_previous_record() {
    let dir = tempfile::tempdir().unwrap();
    let results = populate(dir.path(), 40);
    let last = results.last().unwrap();
    let start = last.commitlog_offset as u64;
    let len = last.wrote_bytes as usize;
    // A torn record was never durable.
    set_durable(dir.path(), start);
    let path = cl_file(dir.path(), start);
    let pristine = std::fs::read(&path).unwrap();
    let pos = (start % FILE) as usize;
    let expect = indexed(&results[..results.len() - 1]);
    let mut runs = 0;
    for abnormal in [true, false] {
        // Every prefix after a crash (abort present); every 5th after a clean exit.
        let step = if abnormal { 1 } else { 5 };
        for cut in (0..len).step_by(step) {
            let mut bytes = pristine.clone();
            bytes[pos + cut..pos + len].fill(0);
            std::fs::write(&path, &bytes).unwrap();
            if abnormal {
                std::fs::write(dir.path().join("abort"), b"1").unwrap();
            }
            let store = Store::open(dir.path(), config(&[]))
                .unwrap_or_else(|e| panic!("cut {cut} abnormal={abnormal}: {e}"));
            assert_eq!(store.max_commitlog_offset(), start, "cut {cut}");
            assert_eq!(store.recovery_report().abnormal, abnormal);
            check(&store, &expect);
            store.close().unwrap();
            // Nothing of the torn record is left after the recovered end.
            assert!(std::fs::read(&path).unwrap()[pos..].iter().all(|&b| b == 0));
            runs += 1;
        }
    }
    eprintln!("C1: {runs} torn prefixes of a {len}-byte record, all recovered to {start}");
    let store = open_check(dir.path(), config(&[]), &expect);
    finish(store);
}

// ---- C2: zero-filled tails, all-zero files -------------------------------------------------

#[test]
fn c2_zero_tails_and_all_zero_files() {
    let dir = tempfile::tempdir().unwrap();
    let results = populate(dir.path(), 300);
    let end = {
        let last = results.last().unwrap();
        last.commitlog_offset as u64 + last.wrote_bytes as u64
    };
    let files = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count() as u64;
    // A preallocated, never written next file after the last one (crash right after the roll).
    let extra = dir
        .path()
        .join("commitlog")
        .join(offset_to_file_name(files * FILE));
    std::fs::write(&extra, vec![0u8; FILE as usize]).unwrap();
    for abnormal in [false, true] {
        if abnormal {
            std::fs::write(extra.as_path(), vec![0u8; FILE as usize]).unwrap();
            std::fs::write(dir.path().join("abort"), b"").unwrap();
        }
        let store = open_check(dir.path(), config(&[]), &indexed(&results));
        assert_eq!(store.max_commitlog_offset(), end);
        assert_eq!(store.recovery_report().files_removed, 1);
        assert!(!extra.exists());
        store.close().unwrap();
    }
    let store = Store::open(dir.path(), config(&[])).unwrap();
    let r = store
        .put(&PutMessage {
            topic: TOPICS[0],
            body: b"next",
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        r.commitlog_offset as u64, end,
        "the next append lands at the end"
    );
    store.close().unwrap();

    // Files created ahead of the writer whose names became durable before their sizes (a
    // creation made durable by the file's first flush; another file's directory fsync got
    // there first): empty files at the end, after a zero-filled one or not.
    for shape in [[0, 0], [FILE, 0]] {
        let dir = tempfile::tempdir().unwrap();
        let results = populate(dir.path(), 300);
        let cl = dir.path().join("commitlog");
        let files = std::fs::read_dir(&cl).unwrap().count() as u64;
        let extra: Vec<PathBuf> = (0..2)
            .map(|i| cl.join(offset_to_file_name((files + i) * FILE)))
            .collect();
        for (path, len) in extra.iter().zip(shape) {
            std::fs::write(path, vec![0u8; len as usize]).unwrap();
        }
        std::fs::write(dir.path().join("abort"), b"").unwrap();
        let store = open_check(dir.path(), config(&[]), &indexed(&results));
        assert_eq!(store.max_commitlog_offset(), end, "{shape:?}");
        assert!(extra.iter().all(|p| !p.exists()), "{shape:?}");
        finish(store);
    }

    // A store whose only file is all zeros.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("commitlog")).unwrap();
    std::fs::write(
        dir.path().join("commitlog").join(offset_to_file_name(0)),
        vec![0u8; FILE as usize],
    )
    .unwrap();
    let store = Store::open(dir.path(), config(&[])).unwrap();
    assert_eq!(store.max_commitlog_offset(), 0);
    finish(store);
}

// ---- C3: random trailing bytes -------------------------------------------------------------

#[test]
fn c3_random_trailing_bytes_after_the_end_are_ignored() {
    let pristine = tempfile::tempdir().unwrap();
    let results = populate(pristine.path(), 120);
    let last = results.last().unwrap();
    let end = last.commitlog_offset as u64 + last.wrote_bytes as u64;
    let expect = indexed(&results);
    let max_a0 = {
        let s = Store::open_read_only(pristine.path(), config(&[])).unwrap();
        s.max_offset_in_queue(TOPICS[0], 0)
    };
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let dir = tempfile::tempdir().unwrap();
        copy_tree(pristine.path(), dir.path());
        std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
        // Commit log: 1..1024 random bytes right after the last record.
        let path = cl_file(dir.path(), end);
        let mut b = std::fs::read(&path).unwrap();
        let pos = (end % FILE) as usize;
        let n = (1 + rng.below(1024) as usize).min(b.len() - pos);
        b[pos..pos + n].copy_from_slice(&rng.bytes(n));
        std::fs::write(&path, &b).unwrap();
        // Consume queue: random units after the last one.
        let cq = cq_files(dir.path(), TOPICS[0], 0).pop().unwrap();
        let mut c = std::fs::read(&cq).unwrap();
        let used = (max_a0 as usize * 20) % c.len();
        if used > 0 {
            let n = (20 * (1 + rng.below(4) as usize)).min(c.len() - used);
            c[used..used + n].copy_from_slice(&rng.bytes(n));
            std::fs::write(&cq, &c).unwrap();
        }
        // Index: random bytes in the entry area after the last entry of the newest file.
        if let Some(ix) = index_files(dir.path()).pop() {
            let mut x = std::fs::read(&ix).unwrap();
            let count = i32::from_be_bytes(x[36..40].try_into().unwrap()).max(1) as usize;
            let at = 40 + 64 * 4 + count * 20;
            if at + 40 <= x.len() {
                x[at..at + 40].copy_from_slice(&rng.bytes(40));
                std::fs::write(&ix, &x).unwrap();
            }
        }
        if seed % 2 == 0 {
            std::fs::write(dir.path().join("abort"), b"").unwrap();
        }
        let store = open_check(dir.path(), config(&[]), &expect);
        assert_eq!(store.max_commitlog_offset(), end, "seed {seed}");
        assert_eq!(
            store.max_offset_in_queue(TOPICS[0], 0),
            max_a0,
            "seed {seed}"
        );
        assert!(std::fs::read(&path).unwrap()[pos..].iter().all(|&x| x == 0));
        finish(store);
    }
}

// ---- C4: single-bit flips ------------------------------------------------------------------

/// Flips bits of one record of the last file: in the durable region every flip must fail the
/// open with a corruption error at that record (never a silent truncation); in the unflushed
/// tail (and with `tolerate_any_corruption`) recovery truncates at that record. `bits(byte)`
/// picks the bits flipped in the durable sweep; `stride` the bytes of the tail sweep.
fn bit_flip_sweep(bits: impl Fn(usize) -> Vec<u8>, stride: usize) {
    let pristine = tempfile::tempdir().unwrap();
    let results = populate(pristine.path(), 24);
    let k = 20;
    let rec = &results[k];
    let start = rec.commitlog_offset as u64;
    let len = rec.wrote_bytes as usize;
    let pos = (start % FILE) as usize;
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    let path = cl_file(dir.path(), start);
    let original = std::fs::read(&path).unwrap();
    // (i) durable region: every bit of the record.
    let mut flips = 0;
    for byte in 0..len {
        for bit in bits(byte) {
            flip(&path, pos + byte, bit);
            match Store::open(dir.path(), config(&[])) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(offset, start, "byte {byte} bit {bit}");
                    assert_eq!(file, path);
                }
                Err(e) => panic!("byte {byte} bit {bit}: unexpected error {e}"),
                Ok(s) => panic!(
                    "byte {byte} bit {bit}: flip not detected (start {start}, end {}, report {:?}, record tail {:?})",
                    s.max_commitlog_offset(),
                    s.recovery_report(),
                    String::from_utf8_lossy(&original[pos + len - 40..pos + len])
                ),
            }
            std::fs::write(&path, &original).unwrap();
            flips += 1;
        }
    }
    // The store is untouched by the refused opens.
    let store = open_check(dir.path(), config(&[]), &indexed(&results));
    store.close().unwrap();
    eprintln!("C4 durable: {flips} flips of a {len}-byte record, 100% detected, 0 truncations");

    // (ii) unflushed tail (durable offset before the record) and tolerate_any_corruption:
    // truncate at the record. Sampled: one bit of every `stride`-th byte.
    let expect = indexed(&results[..k]);
    let mut sampled = 0;
    for byte in (0..len).step_by(stride) {
        let bit = (byte * 5 % 8) as u8;
        for mode in ["tail", "any"] {
            let dir = tempfile::tempdir().unwrap();
            copy_tree(pristine.path(), dir.path());
            let cfg = if mode == "tail" {
                set_durable(dir.path(), start);
                config(&[])
            } else {
                tolerant("tolerate_any_corruption")
            };
            flip(&cl_file(dir.path(), start), pos + byte, bit);
            let store = Store::open(dir.path(), cfg)
                .unwrap_or_else(|e| panic!("{mode}: byte {byte} bit {bit}: {e}"));
            assert_eq!(store.max_commitlog_offset(), start, "{mode} byte {byte}");
            assert!(store.recovery_report().truncated_at.is_some());
            check(&store, &expect);
            store.close().unwrap();
            sampled += 1;
        }
    }
    eprintln!("C4 tail/tolerant: {sampled} flips, all truncated at the record");

    // absolute_consistency refuses even a torn tail.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    set_durable(dir.path(), start);
    flip(&cl_file(dir.path(), start), pos + len - 1, 0);
    assert!(matches!(
        Store::open(dir.path(), tolerant("absolute_consistency")),
        Err(Error::Corruption { .. })
    ));
}

/// Two bits of every byte of the record (every field, both halves of every byte).
#[test]
fn c4_single_bit_flips_are_detected() {
    bit_flip_sweep(|byte| vec![(byte % 8) as u8, ((byte + 4) % 8) as u8], 3);
}

/// Every bit of the record (about 2 000 reopens; `make test-all`).
#[test]
#[ignore = "slow: every bit of a record, about 2000 reopens"]
fn c4_every_bit_flip_is_detected() {
    bit_flip_sweep(|_| (0..8).collect(), 1);
}

// ---- C7: consume queue damage --------------------------------------------------------------

#[test]
fn c7_consume_queue_damage_is_repaired_from_the_commit_log() {
    let pristine = tempfile::tempdir().unwrap();
    let results = populate(pristine.path(), 400);
    let expect = indexed(&results);
    let last = results.last().unwrap();
    let end = last.commitlog_offset as u64 + last.wrote_bytes as u64;
    let unit = |phy: i64, size: i32| {
        let mut u = [0u8; 20];
        u[..8].copy_from_slice(&phy.to_be_bytes());
        u[8..12].copy_from_slice(&size.to_be_bytes());
        u
    };
    let write_unit = |path: &Path, at: usize, u: [u8; 20]| {
        let mut b = std::fs::read(path).unwrap();
        b[at * 20..at * 20 + 20].copy_from_slice(&u);
        std::fs::write(path, b).unwrap();
    };
    type Damage = Box<dyn Fn(&Path)>;
    let scenarios: Vec<(&str, Damage)> = vec![
        (
            "last file of a queue deleted (#7355)",
            Box::new(|r: &Path| {
                std::fs::remove_file(cq_files(r, TOPICS[0], 0).pop().unwrap()).unwrap()
            }),
        ),
        (
            "queue directory deleted",
            Box::new(|r: &Path| std::fs::remove_dir_all(cq_dir(r, TOPICS[1], 1)).unwrap()),
        ),
        (
            "consumequeue/ deleted",
            Box::new(|r: &Path| std::fs::remove_dir_all(r.join("consumequeue")).unwrap()),
        ),
        (
            "units past the commit log end",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[0], 1).pop().unwrap();
                write_unit(&f, 0, unit(end as i64 + 100, 200));
                write_unit(&f, 1, unit(end as i64 + 300, 200));
            }),
        ),
        (
            "size 0 in the middle",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[1], 0).remove(0);
                write_unit(&f, 10, unit(12345, 0));
            }),
        ),
        (
            "negative offset in the last unit",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[0], 0).pop().unwrap();
                write_unit(&f, 49, unit(-5, 100));
            }),
        ),
        (
            "huge size in the last unit",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[0], 0).pop().unwrap();
                let b = std::fs::read(&f).unwrap();
                let phy = i64::from_be_bytes(b[49 * 20..49 * 20 + 8].try_into().unwrap());
                write_unit(&f, 49, unit(phy, i32::MAX - 1));
            }),
        ),
        (
            "last unit points at another record",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[1], 1).pop().unwrap();
                write_unit(&f, 49, unit(0, 200));
            }),
        ),
        (
            "last units zeroed (queue behind)",
            Box::new(move |r: &Path| {
                let f = cq_files(r, TOPICS[1], 1).pop().unwrap();
                for u in 45..50 {
                    write_unit(&f, u, [0u8; 20]);
                }
            }),
        ),
        (
            "empty extra last file (#9728)",
            Box::new(|r: &Path| {
                std::fs::write(
                    cq_dir(r, TOPICS[0], 0).join(offset_to_file_name(100 * 20)),
                    b"",
                )
                .unwrap()
            }),
        ),
        (
            "all-zero extra last file",
            Box::new(|r: &Path| {
                std::fs::write(
                    cq_dir(r, TOPICS[0], 0).join(offset_to_file_name(100 * 20)),
                    vec![0u8; 1000],
                )
                .unwrap()
            }),
        ),
    ];
    for (name, damage) in &scenarios {
        for abnormal in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            copy_tree(pristine.path(), dir.path());
            damage(dir.path());
            if abnormal {
                std::fs::write(dir.path().join("abort"), b"").unwrap();
            }
            let store = Store::open(dir.path(), config(&[]))
                .unwrap_or_else(|e| panic!("{name} (abnormal={abnormal}): {e}"));
            check(&store, &expect);
            for t in TOPICS {
                for q in 0..2 {
                    assert_eq!(store.max_offset_in_queue(t, q), 100, "{name}: {t}/{q}");
                    assert_eq!(store.min_offset_in_queue(t, q), 0, "{name}: {t}/{q}");
                }
            }
            finish(store);
        }
    }

    // The consume queue ahead of a torn commit log is cut back to it.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    let cut = results[397].commitlog_offset as u64;
    set_durable(dir.path(), cut);
    let path = cl_file(dir.path(), cut);
    let mut b = std::fs::read(&path).unwrap();
    b[(cut % FILE) as usize + 10..].fill(0);
    std::fs::write(&path, b).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    let store = open_check(dir.path(), config(&[]), &indexed(&results[..397]));
    assert_eq!(store.max_commitlog_offset(), cut);
    finish(store);
}

// ---- C8: index damage ----------------------------------------------------------------------

#[test]
fn c8_index_damage_is_detected_and_rebuilt() {
    let pristine = tempfile::tempdir().unwrap();
    let results = populate(pristine.path(), 300);
    let expect = indexed(&results);
    let n_index = index_files(pristine.path()).len();
    assert!(n_index >= 4, "{n_index} index files");
    type Damage = Box<dyn Fn(&Path)>;
    let scenarios: Vec<(&str, Damage, bool)> = vec![
        (
            "first file overwritten with spaces",
            Box::new(|r: &Path| {
                let f = index_files(r).remove(0);
                let len = std::fs::metadata(&f).unwrap().len() as usize;
                std::fs::write(&f, vec![b' '; len]).unwrap();
            }),
            true,
        ),
        (
            "garbage header in a middle file",
            Box::new(|r: &Path| {
                let f = index_files(r).remove(1);
                let mut b = std::fs::read(&f).unwrap();
                b[..40].copy_from_slice(&Rng(7).bytes(40));
                std::fs::write(&f, b).unwrap();
            }),
            true,
        ),
        (
            "last file truncated to half",
            Box::new(|r: &Path| {
                let f = index_files(r).pop().unwrap();
                let b = std::fs::read(&f).unwrap();
                std::fs::write(&f, &b[..b.len() / 2]).unwrap();
            }),
            true,
        ),
        (
            "index count above the capacity",
            Box::new(|r: &Path| {
                let f = index_files(r).remove(2);
                let mut b = std::fs::read(&f).unwrap();
                b[36..40].copy_from_slice(&10_000i32.to_be_bytes());
                std::fs::write(&f, b).unwrap();
            }),
            true,
        ),
        (
            "slots and prev links garbage (cycles, slot > count)",
            Box::new(|r: &Path| {
                for f in index_files(r) {
                    let mut b = std::fs::read(&f).unwrap();
                    let mut rng = Rng(11);
                    for s in 0..64 {
                        let v = rng.below(300) as i32;
                        b[40 + s * 4..44 + s * 4].copy_from_slice(&v.to_be_bytes());
                    }
                    for e in 1..100 {
                        let at = 40 + 64 * 4 + e * 20 + 16;
                        let v = rng.below(200) as i32;
                        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
                    }
                    std::fs::write(&f, b).unwrap();
                }
            }),
            false,
        ),
    ];
    for (name, damage, rebuilt_at_open) in &scenarios {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(pristine.path(), dir.path());
        damage(dir.path());
        let store = Store::open(dir.path(), config(&[])).unwrap_or_else(|e| panic!("{name}: {e}"));
        if *rebuilt_at_open {
            assert!(store.recovery_report().index_files_removed > 0, "{name}");
            check(&store, &expect);
        } else {
            // Not detectable from the header: lookups terminate and only return real matches.
            for (i, r) in &expect {
                let q = store
                    .query_message(TOPICS[(*i % 2) as usize], &format!("k{i}"), 64, 0, i64::MAX)
                    .unwrap();
                for m in &q.messages {
                    assert!(m.keys().contains(&format!("k{i}").as_str()));
                    assert_eq!(m.commitlog_offset(), r.commitlog_offset);
                }
            }
        }
        store.close().unwrap();
        // The offline repair restores every lookup.
        rocketstore::rebuild_indexes(dir.path(), config(&[])).unwrap();
        let store = open_check(dir.path(), config(&[]), &expect);
        finish(store);
    }

    // Every file of another geometry: a configuration mismatch, refused (not deleted), naming
    // the keyword.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    let err = Store::open(
        dir.path(),
        config(&[("max_index_num", ConfigValue::Int(200))]),
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::Config { .. }) && err.to_string().contains("max_index_num"),
        "{err}"
    );
    assert!(
        !dir.path().join("abort").exists(),
        "a refused open leaves no abort marker"
    );
    assert_eq!(index_files(dir.path()).len(), n_index);
}

// ---- C9: checkpoint and abort file damage --------------------------------------------------

#[test]
fn c9_checkpoint_and_abort_damage() {
    let pristine = tempfile::tempdir().unwrap();
    let results = populate(pristine.path(), 200);
    let expect = indexed(&results);
    let end = {
        let l = results.last().unwrap();
        l.commitlog_offset as u64 + l.wrote_bytes as u64
    };
    type Damage = Box<dyn Fn(&Path)>;
    let cp = |r: &Path| r.join("checkpoint");
    let scenarios: Vec<(&str, Damage)> = vec![
        (
            "checkpoint missing",
            Box::new(move |r: &Path| std::fs::remove_file(cp(r)).unwrap()),
        ),
        (
            "checkpoint zeros",
            Box::new(move |r: &Path| std::fs::write(cp(r), [0u8; 4096]).unwrap()),
        ),
        (
            "checkpoint garbage",
            Box::new(move |r: &Path| std::fs::write(cp(r), Rng(3).bytes(4096)).unwrap()),
        ),
        (
            "checkpoint torn (one byte)",
            Box::new(move |r: &Path| flip(&cp(r), 9, 3)),
        ),
        (
            "checkpoint torn (extension)",
            Box::new(move |r: &Path| flip(&cp(r), 3980, 0)),
        ),
        (
            "checkpoint short",
            Box::new(move |r: &Path| std::fs::write(cp(r), [1u8; 100]).unwrap()),
        ),
        (
            "abort garbage",
            Box::new(|r: &Path| std::fs::write(r.join("abort"), Rng(5).bytes(64)).unwrap()),
        ),
        (
            "abort present after a clean exit",
            Box::new(|r: &Path| std::fs::write(r.join("abort"), b"12345").unwrap()),
        ),
        (
            "checkpoint timestamps far in the future",
            Box::new(move |r: &Path| {
                let mut c = Checkpoint::decode(&std::fs::read(cp(r)).unwrap()).unwrap();
                c.physic_msg_timestamp = i64::MAX / 2;
                c.logics_msg_timestamp = i64::MAX / 2;
                c.index_msg_timestamp = i64::MAX / 2;
                std::fs::write(cp(r), c.encode()).unwrap();
                std::fs::write(r.join("abort"), b"").unwrap();
            }),
        ),
    ];
    for (name, damage) in &scenarios {
        for abnormal in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            copy_tree(pristine.path(), dir.path());
            damage(dir.path());
            if abnormal {
                std::fs::write(dir.path().join("abort"), b"").unwrap();
            }
            let store = Store::open(dir.path(), config(&[]))
                .unwrap_or_else(|e| panic!("{name} (abnormal={abnormal}): {e}"));
            check(&store, &expect);
            assert_eq!(store.max_commitlog_offset(), end, "{name}");
            finish(store);
        }
    }

    // A crash (abort present) whose abort file then went missing: normal recovery still finds
    // everything that was written.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    let crashed = tempfile::tempdir().unwrap();
    let more = {
        let store = Store::open(dir.path(), config(&[])).unwrap();
        let more = put_range(&store, 200, 260);
        crash_copy(&store, crashed.path());
        store.close().unwrap();
        more
    };
    assert!(crashed.path().join("abort").exists());
    std::fs::remove_file(crashed.path().join("abort")).unwrap();
    let mut all: Vec<PutResult> = results.clone();
    all.extend(more);
    let store = open_check(crashed.path(), config(&[]), &indexed(&all));
    finish(store);

    // A valid checkpoint claiming more durable data than there is: files are missing, which is
    // corruption, unless the recovery mode tolerates it; the checkpoint is then corrected.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(pristine.path(), dir.path());
    set_durable(dir.path(), end + 4096);
    let err = Store::open(dir.path(), config(&[])).unwrap_err();
    assert!(
        matches!(err, Error::Corruption { offset, .. } if offset == end),
        "{err}"
    );
    let store = Store::open(dir.path(), tolerant("tolerate_any_corruption")).unwrap();
    assert_eq!(store.recovery_report().durable_offset, Some(end + 4096));
    drop(store);
    let store = open_check(dir.path(), config(&[]), &expect);
    finish(store);
}

// ---- A5: stale tail resurrection -----------------------------------------------------------

#[test]
fn a5_no_record_beyond_a_truncation_point_reappears() {
    let dir = tempfile::tempdir().unwrap();
    let results = populate(dir.path(), 30);
    // Record 27 is torn while 28 and 29 reached the disk (out-of-order writeback); none of them
    // was durable.
    let torn = &results[27];
    let start = torn.commitlog_offset as u64;
    set_durable(dir.path(), start);
    let path = cl_file(dir.path(), start);
    let mut b = std::fs::read(&path).unwrap();
    let pos = (start % FILE) as usize;
    b[pos + 20..pos + torn.wrote_bytes as usize].fill(0);
    std::fs::write(&path, b).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    let crashed = tempfile::tempdir().unwrap();
    {
        let store = open_check(dir.path(), config(&[]), &indexed(&results[..27]));
        assert_eq!(store.max_commitlog_offset(), start);
        // A shorter rewrite over the truncated region, then a crash.
        let r = store
            .put(&PutMessage {
                topic: TOPICS[0],
                body: b"short",
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.commitlog_offset as u64, start);
        crash_copy(&store, crashed.path());
        store.close().unwrap();
    }
    for root in [dir.path(), crashed.path()] {
        let store = open_check(root, config(&[]), &indexed(&results[..27]));
        let bodies: Vec<Vec<u8>> = store.scan(0).unwrap().map(|m| m.unwrap().body).collect();
        assert_eq!(bodies.len(), 28);
        for i in 27..30 {
            assert!(!bodies.contains(&body_for(i)), "record {i} resurrected");
        }
        let mut offsets: Vec<i64> = store
            .scan(0)
            .unwrap()
            .map(|m| m.unwrap().commitlog_offset())
            .collect();
        offsets.dedup();
        assert_eq!(offsets.len(), 28);
        store.close().unwrap();
    }
}

// ---- G3: hostile topic in a record ---------------------------------------------------------

#[test]
fn g3_a_hostile_topic_in_a_record_never_becomes_a_path() {
    let outer = tempfile::tempdir().unwrap();
    let pristine = outer.path().join("store");
    let results = populate(&pristine, 20);
    // Rewrite the last record's topic ("DamageB", 7 bytes) and reseal its CRCs: the record is
    // valid (the format does not restrict topic text), but the topic cannot be a directory.
    let last = results.last().unwrap();
    let start = last.commitlog_offset as u64;
    let len = last.wrote_bytes as usize;
    let rewrite = |root: &Path, topic: &[u8; 7]| {
        let path = cl_file(root, start);
        let mut b = std::fs::read(&path).unwrap();
        let pos = (start % FILE) as usize;
        let rec = &mut b[pos..pos + len];
        let at = rec
            .windows(7)
            .position(|w| w == TOPICS[1].as_bytes())
            .unwrap();
        rec[at..at + 7].copy_from_slice(topic);
        assert!(rocketstore::format::prop_crc::seal(rec));
        std::fs::write(&path, b).unwrap();
    };
    for (n, hostile) in [b"../../x", b"a/../..", b"x\0/y/zz"]
        .into_iter()
        .enumerate()
    {
        let hostile: &[u8; 7] = hostile[..7].try_into().unwrap();
        let topic = std::str::from_utf8(hostile).unwrap();
        for rebuild in [true, false] {
            let dir = outer.path().join(format!("copy-{n}-{rebuild}"));
            copy_tree(&pristine, &dir);
            if rebuild {
                std::fs::remove_dir_all(dir.join("consumequeue")).unwrap();
                std::fs::remove_dir_all(dir.join("index")).unwrap();
            }
            rewrite(&dir, hostile);
            std::fs::write(dir.join("abort"), b"").unwrap();
            // The record is kept (even below the durable offset), never dispatched to a consume
            // queue, listed, and still found by offset, id and key.
            let store = open_check(&dir, config(&[]), &indexed(&results[..19]));
            assert_eq!(store.max_commitlog_offset(), start + len as u64);
            let m = store.look_message_by_offset(start).unwrap();
            assert_eq!(m.topic, topic);
            assert_eq!(m.body, body_for(19));
            assert_eq!(store.view_message_by_id(&m.msg_id()).unwrap().topic, topic);
            let q = store.query_message(topic, "k19", 8, 0, i64::MAX).unwrap();
            assert_eq!(q.messages.len(), 1, "{topic:?} by key");
            if rebuild {
                let u = store.undispatchable_topics();
                assert_eq!(u.len(), 1, "{u:?}");
                assert_eq!(u[0].topic, topic);
                assert_eq!(u[0].records, 1);
                assert_eq!(u[0].first_offset, start as i64);
            }
            assert_eq!(
                store
                    .get_message(topic, 1, 0, 8, None, None)
                    .unwrap()
                    .messages
                    .len(),
                0
            );
            finish(store);
            let again = Store::open(&dir, config(&[])).unwrap();
            assert_eq!(again.look_message_by_offset(start).unwrap().topic, topic);
            again.close().unwrap();
            assert!(!outer.path().join("x").exists());
            assert!(!dir.join("x").exists());
            for e in std::fs::read_dir(dir.join("consumequeue"))
                .into_iter()
                .flatten()
            {
                let name = e.unwrap().file_name();
                assert!(TOPICS.contains(&name.to_str().unwrap()), "{name:?}");
            }
        }
    }
}

// ---- offline repair ------------------------------------------------------------------------

#[test]
fn rebuild_indexes_restores_identical_consume_queues_and_index_entries() {
    let dir = tempfile::tempdir().unwrap();
    let results = populate(dir.path(), 400);
    let before = files_under(dir.path(), "");
    let cq_before: BTreeMap<_, _> = before
        .iter()
        .filter(|(k, _)| k.starts_with("consumequeue"))
        .collect();
    let index_before: Vec<&Vec<u8>> = before
        .iter()
        .filter(|(k, _)| k.starts_with("index"))
        .map(|(_, v)| v)
        .collect();
    assert!(cq_before.len() >= 8 && index_before.len() >= 4);
    // Damage: a queue gone, another truncated, an index file garbage, one missing.
    std::fs::remove_dir_all(cq_dir(dir.path(), TOPICS[0], 1)).unwrap();
    std::fs::remove_file(cq_files(dir.path(), TOPICS[1], 0).pop().unwrap()).unwrap();
    let ix = index_files(dir.path());
    std::fs::write(&ix[0], b"garbage").unwrap();
    std::fs::remove_file(&ix[2]).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();

    // Refused while the store is open.
    {
        let store = Store::open_read_only(dir.path(), config(&[])).unwrap();
        drop(store);
        let open = Store::open(dir.path(), config(&[])).unwrap();
        assert!(matches!(
            rocketstore::rebuild_indexes(dir.path(), config(&[])),
            Err(Error::Locked { .. })
        ));
        open.close().unwrap();
        // Put the damage back (the open repaired some of it).
        std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
        std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    }
    let report = rocketstore::rebuild_indexes(dir.path(), config(&[])).unwrap();
    assert_eq!(report.records, 400);
    assert_eq!(report.dispatched, 400);
    assert_eq!(report.consume_queues, 4);
    assert!(!dir.path().join("abort").exists());
    let after = files_under(dir.path(), "");
    let cq_after: BTreeMap<_, _> = after
        .iter()
        .filter(|(k, _)| k.starts_with("consumequeue"))
        .collect();
    assert_eq!(cq_after, cq_before, "consume queues are byte-identical");
    let index_after: Vec<&Vec<u8>> = after
        .iter()
        .filter(|(k, _)| k.starts_with("index"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(index_after.len(), index_before.len());
    assert!(
        index_after == index_before,
        "index files are byte-identical (only their names differ)"
    );
    let store = open_check(dir.path(), config(&[]), &indexed(&results));
    assert!(!store.recovery_report().abnormal);
    finish(store);
}

// ---- C10: a consume queue unit naming another queue's valid record ---------------------------

/// Rewrites unit `at` of `topic`/`qid` (one consume queue file) to name `(phy, size)`.
fn point_unit(root: &Path, topic: &str, qid: i32, at: usize, phy: i64, size: i32) {
    let path = cq_files(root, topic, qid).remove(0);
    let mut b = std::fs::read(&path).unwrap();
    b[at * 20..at * 20 + 8].copy_from_slice(&phy.to_be_bytes());
    b[at * 20 + 8..at * 20 + 12].copy_from_slice(&size.to_be_bytes());
    std::fs::write(&path, b).unwrap();
}

#[test]
fn c10_a_unit_naming_another_topics_record_is_never_served_as_its_queues_message() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // i even: DamageA, i odd: DamageB; queue (i / 2) % 2. DamageA/0 holds i = 0, 4, 8, ...
    let r = populate(root, 16);
    // DamageA/0 unit 1 (i = 4) names DamageB/0's record at the same queue offset 1 (i = 5):
    // a valid record, same queue id and queue offset, another topic. Unit 2 (i = 8) names
    // DamageA/1's record at queue offset 2 (i = 10): same topic and offset, another queue.
    // Unit 3 (i = 12) names DamageA/0's own record at offset 0 (i = 0): another offset.
    assert_eq!((r[5].queue_offset, r[10].queue_offset), (1, 2));
    point_unit(
        root,
        TOPICS[0],
        0,
        1,
        r[5].commitlog_offset,
        r[5].wrote_bytes,
    );
    point_unit(
        root,
        TOPICS[0],
        0,
        2,
        r[10].commitlog_offset,
        r[10].wrote_bytes,
    );
    point_unit(
        root,
        TOPICS[0],
        0,
        3,
        r[0].commitlog_offset,
        r[0].wrote_bytes,
    );
    let foreign: Vec<Vec<u8>> = [5u64, 10].iter().map(|&i| body_for(i)).collect();
    for read_only in [true, false] {
        let store = if read_only {
            Store::open_read_only(root, config(&[])).unwrap()
        } else {
            Store::open(root, config(&[])).unwrap()
        };
        // get_message skips the three units (counted) and serves only the queue's own records.
        let got = store.get_message(TOPICS[0], 0, 0, 32, None, None).unwrap();
        assert_eq!(got.status, GetStatus::Found);
        for m in &got.messages {
            assert_eq!((m.topic.as_str(), m.queue_id), (TOPICS[0], 0));
            assert!(!foreign.contains(&m.body), "another queue's record served");
        }
        let offsets: Vec<i64> = got.messages.iter().map(|m| m.queue_offset).collect();
        if read_only {
            assert_eq!(offsets, [0]);
            assert_eq!(store.stats().cq_unit_mismatches, 3);
            // Reading from each damaged unit: nothing served, a status, the read moves past
            // the damaged units (to the queue's end).
            for off in 1..=3 {
                let g = store.get_message(TOPICS[0], 0, off, 1, None, None).unwrap();
                assert!(g.messages.is_empty(), "unit {off} served a record");
                assert_eq!(g.status, GetStatus::MessageWasRemoving);
                assert_eq!(g.next_begin_offset, 4);
            }
            // The columnar reader refuses the unit with a typed error naming the record.
            let span = rocketstore::QueueSpan {
                topic: TOPICS[0],
                queue_id: 0,
                from: 0,
                end: i64::MAX,
                max: 100,
                check_crc: true,
                subscription: None,
            };
            match store.visit_queue_records(&span, |_| true) {
                Err(Error::Corruption { offset, .. }) => {
                    assert_eq!(offset, r[5].commitlog_offset as u64);
                }
                other => panic!("expected a Corruption error, got {other:?}"),
            }
        } else {
            // A writable open may repair the units from the commit log (recovery's check);
            // whatever it serves is the queue's own records, in order, each once.
            assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
        }
        store.close().unwrap();
    }
}

// ---- C11: a commit log rewritten under stale index files -------------------------------------

/// What a broker leaves when it truncates the commit log and writes on (a slave's truncation, a
/// recovery that cut a tail): new records from the cut, old bytes after the new end, and its
/// old index files, whose entries (and endPhyOffset) name old record starts inside the new
/// records. A writable open drops the stale entries (the index files from the first whose end
/// is not the record it names) and re-indexes from there, without a tolerant recovery mode;
/// every key then resolves to its record.
#[test]
fn c11_stale_index_entries_past_a_rewritten_commit_log_are_dropped_on_a_writable_open() {
    let a = tempfile::tempdir().unwrap();
    let before = tempfile::tempdir().unwrap();
    let mut results = populate(a.path(), 30);
    copy_tree(a.path(), before.path());
    // The old history goes on: k30..k59 are indexed at offsets the rewrite reuses.
    let store = Store::open(a.path(), config(&[])).unwrap();
    let old = put_range(&store, 30, 60);
    let old_end = store.max_commitlog_offset();
    store.close().unwrap();
    // The rewrite: from the cut, other records (k100..k109, other sizes), a shorter log.
    let store = Store::open(before.path(), config(&[])).unwrap();
    let new = put_range(&store, 100, 110);
    let new_end = store.max_commitlog_offset();
    store.close().unwrap();
    assert!(new_end < old_end);
    assert!(
        old.iter().any(|r| (r.commitlog_offset as u64) < new_end
            && !new.iter().any(|n| n.commitlog_offset == r.commitlog_offset)),
        "some stale entry names a non-record offset inside the new records"
    );
    let root = before.path();
    // Old bytes after the new end.
    let file = cl_file(root, 0);
    let mut bytes = std::fs::read(&file).unwrap();
    let old_bytes = std::fs::read(cl_file(a.path(), 0)).unwrap();
    bytes[new_end as usize..old_end as usize]
        .copy_from_slice(&old_bytes[new_end as usize..old_end as usize]);
    std::fs::write(&file, bytes).unwrap();
    // The old index files, as the broker left them.
    std::fs::remove_dir_all(root.join("index")).unwrap();
    copy_tree(&a.path().join("index"), &root.join("index"));
    // Read-only: opens (and changes nothing).
    Store::open_read_only(root, config(&[]))
        .unwrap()
        .close()
        .unwrap();
    results.extend(new);
    let expect: Vec<(u64, &PutResult)> = (0..30u64).chain(100..110).zip(results.iter()).collect();
    let store = open_check(root, config(&[]), &expect);
    // No stale key resolves to a record that is not its own.
    for i in 30..60 {
        let q = store
            .query_message(TOPICS[(i % 2) as usize], &format!("k{i}"), 64, 0, i64::MAX)
            .unwrap();
        assert!(q.messages.is_empty(), "stale key k{i} served");
    }
    finish(store);
    // And the repaired store reopens unchanged.
    let store = open_check(root, config(&[]), &expect);
    finish(store);
}

// ---- C12: a power cut after a power-loss recovery that cut the index -----------------------

/// Puts message `i` named `<name><i:04>`: every such record has the same size (one topic and
/// queue, a fixed-width key, a 100-byte body), so records put after a cut land exactly at the
/// offsets of the records the cut dropped.
fn put_same_size(store: &Store, name: &str, i: u64) -> PutResult {
    let key = format!("{name}{i:04}");
    let keys = [key.as_str()];
    let r = store
        .put(&PutMessage {
            topic: TOPICS[0],
            body: &[i as u8; 100],
            keys: &keys,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    r
}

/// Zeroes the boot id of the checkpoint's recovery window: the page cache was lost.
fn forget_boot(root: &Path) {
    let p = root.join("checkpoint");
    let mut cp = Checkpoint::decode(&std::fs::read(&p).unwrap()).unwrap();
    cp.ext.as_mut().unwrap().window.as_mut().unwrap().boot_id = [0; 16];
    std::fs::write(&p, cp.encode()).unwrap();
}

/// ASYNC_FLUSH indexes records before the commit log flush makes them durable, so the
/// checkpoint's index mark may name entries of records a power cut then loses; recovery cuts
/// the index file back to the records kept (the cut is durable, the entries past it stay in
/// the file's bytes) and puts after it write records at the same offsets. A second power cut
/// before the index is flushed again leaves the first cut's file with the stale entries past
/// it. The checkpoint must not still name the loaded mark: recovery would take the stale
/// entries as durable, with the index's end at the last of them, and never index the records
/// written over the entries' offsets below it.
#[test]
fn c12_a_power_cut_after_a_recovery_that_cut_the_index_loses_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let (live, img1, img2) = (
        dir.path().join("live"),
        dir.path().join("img1"),
        dir.path().join("img2"),
    );
    let cfg = || config(&[("flush_disk_type", ConfigValue::Str("ASYNC_FLUSH".into()))]);
    let store = Store::open(&live, cfg()).unwrap();
    let old: Vec<PutResult> = (0..40).map(|i| put_same_size(&store, "k", i)).collect();
    // Dispatched, flushed, and two rounds of the flush service: the checkpoint's window names an
    // index mark holding the 80 entries (UNIQ_KEY and key) of the 40 records.
    store.run_service_once(ServiceKind::Reput).unwrap();
    store.flush().unwrap();
    store.run_service_once(ServiceKind::FlushCq).unwrap();
    store.run_service_once(ServiceKind::FlushCq).unwrap();
    copy_tree(&live, &img1);
    store.close().unwrap();
    let window = |root: &Path| {
        let cp = Checkpoint::decode(&std::fs::read(root.join("checkpoint")).unwrap()).unwrap();
        cp.ext.unwrap().window.unwrap()
    };
    assert_eq!(window(&img1).index_count, 81);
    // Power cut 1: the commit log was durable up to record 30 only (ASYNC_FLUSH).
    let cut = old[30].commitlog_offset as u64;
    let file = cl_file(&img1, 0);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[cut as usize..].fill(0);
    std::fs::write(&file, bytes).unwrap();
    let p = img1.join("checkpoint");
    let mut cp = Checkpoint::decode(&std::fs::read(&p).unwrap()).unwrap();
    let ext = cp.ext.as_mut().unwrap();
    ext.durable_commitlog_offset = cut as i64;
    let w = ext.window.as_mut().unwrap();
    w.start_offset = w.start_offset.min(cut as i64);
    std::fs::write(&p, cp.encode()).unwrap();
    forget_boot(&img1);
    // Recovery cuts the index to the 30 records kept; what it leaves in the index files is
    // durable (the cut is msynced) and nothing writes them until the next put.
    let store = Store::open(&img1, cfg()).unwrap();
    let r = store.recovery_report().clone();
    assert!(r.power_loss && r.from_window, "{r:?}");
    assert_eq!(r.end_offset, cut);
    let durable_index = files_under(&img1, "index");
    // Ten records over the lost ones, at their offsets, made durable by the commit log flush;
    // dispatched (their index entries only in the page cache).
    let new: Vec<PutResult> = (0..10).map(|i| put_same_size(&store, "n", i)).collect();
    let offsets = |v: &[PutResult]| v.iter().map(|r| r.commitlog_offset).collect::<Vec<_>>();
    assert_eq!(offsets(&new), offsets(&old[30..]));
    store.run_service_once(ServiceKind::Reput).unwrap();
    store.flush().unwrap();
    // Power cut 2, before the flush service ran: the index files as recovery left them.
    copy_tree(&img1, &img2);
    store.close().unwrap();
    for (rel, bytes) in &durable_index {
        std::fs::write(img2.join(rel), bytes).unwrap();
    }
    forget_boot(&img2);
    let store = open_check(&img2, cfg(), &[]);
    let r = store.recovery_report().clone();
    assert!(r.power_loss && r.from_window, "{r:?}");
    for (i, n) in new.iter().enumerate() {
        let q = store
            .query_message(TOPICS[0], &format!("n{i:04}"), 64, 0, i64::MAX)
            .unwrap();
        assert!(
            q.messages
                .iter()
                .any(|m| m.commitlog_offset() == n.commitlog_offset),
            "key n{i:04} lost"
        );
    }
    finish(store);
}
