//! An independent validator of the consume queue and index files the engine writes (issue #6
//! "must show"), and the batch layout of spec §13.
//!
//! The store is written with small files (commit log 1 MiB, consume queues 300 units per file,
//! index 1,000 slots / 4,000 entries) and holds messages with tags (one with a negative hash),
//! several keys, every delay level (and one above the table, clamped), every transaction type,
//! half messages, batches, and delayed messages re-delivered by the schedule service. Then,
//! with nothing of the engine but `rocketstore_format::decode_record` (the record decoder),
//! the validator reads the commit log from scratch, recomputes every consume queue file and
//! every index file (header, slots, entries) with RocketMQ's rules written out here (Java
//! `String.hashCode`, tagsCode and the delay rule of §5.2, `IndexFile.putKey` of §6.4 with its
//! first-entry quirk, roll when full), and compares them byte for byte with the files on disk.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rocketstore::format::{decode_record, DecodeOptions, Decoded};
use rocketstore::{PutMessage, Store, StoreConfig, TransactionType};

const COMMITLOG_FILE: u64 = 1 << 20;
const CQ_FILE: usize = 300 * 20;
const SLOTS: usize = 1000;
const ENTRIES: usize = 4000;
const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
const DELAY_TABLE_MS: [i64; 18] = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
];

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = COMMITLOG_FILE;
    c.mapped_file_size_consume_queue = CQ_FILE as u64;
    c.max_hash_slot_num = SLOTS as u64;
    c.max_index_num = ENTRIES as u64;
    c
}

// ------------------------------------------------------------------ the independent side

/// Java `String.hashCode` (UTF-16 code units).
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Java `split` on `sep` with RocketMQ's "non-empty" filter, and last-wins property parsing.
fn parse_props(raw: &[u8]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for seg in raw.split(|b| *b == 2) {
        if let Some(i) = seg.iter().position(|b| *b == 1) {
            let (k, v) = (&seg[..i], &seg[i + 1..]);
            if !k.is_empty() && !v.is_empty() {
                m.insert(
                    String::from_utf8(k.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                );
            }
        }
    }
    m
}

#[derive(Debug, Clone)]
struct Rec {
    phy: i64,
    size: i32,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    sys_flag: i32,
    store_ts: i64,
    props: BTreeMap<String, String>,
}

/// Every record of the commit log, in order, checking the file layout on the way: files named
/// by offset, contiguous, each non-last file closed by a blank record covering its rest.
fn read_commitlog(root: &Path) -> Vec<Rec> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for (i, path) in files.iter().enumerate() {
        let from: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        assert_eq!(from, i as u64 * COMMITLOG_FILE, "{path:?}");
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes.len() as u64, COMMITLOG_FILE);
        let mut pos = 0usize;
        let last = i + 1 == files.len();
        loop {
            if pos + 4 > bytes.len() || bytes[pos..pos + 4] == [0, 0, 0, 0] {
                assert!(last, "{path:?} ends without a blank record at {pos}");
                break;
            }
            let opts = DecodeOptions {
                expected_physical_offset: Some((from + pos as u64) as i64),
                ..DecodeOptions::default()
            };
            match decode_record(&bytes[pos..], &opts).unwrap() {
                Decoded::Blank { total_size } => {
                    assert_eq!(total_size as usize, bytes.len() - pos);
                    assert!(!last);
                    break;
                }
                Decoded::Message(v) => {
                    out.push(Rec {
                        phy: v.physical_offset,
                        size: v.total_size,
                        topic: v.topic.to_string(),
                        queue_id: v.queue_id,
                        queue_offset: v.queue_offset,
                        sys_flag: v.sys_flag,
                        store_ts: v.store_timestamp,
                        props: parse_props(v.properties_raw),
                    });
                    pos += v.total_size as usize;
                }
            }
        }
    }
    out
}

fn tx_type(sys_flag: i32) -> i32 {
    sys_flag & 0xC
}

/// tagsCode (§5.2): TAGS hash sign-extended; on the schedule topic with DELAY, the deliver time.
fn tags_code(r: &Rec) -> i64 {
    let mut code = r.props.get("TAGS").map_or(0, |t| i64::from(java_hash(t)));
    if r.topic == SCHEDULE_TOPIC {
        if let Some(d) = r.props.get("DELAY") {
            let level = d.parse::<i64>().unwrap().min(DELAY_TABLE_MS.len() as i64);
            if level > 0 {
                code = r.store_ts + DELAY_TABLE_MS[(level - 1) as usize];
            }
        }
    }
    code
}

/// The expected consume queue files: `(topic, queue id)` -> file name -> bytes.
fn expected_consume_queues(recs: &[Rec]) -> BTreeMap<(String, i32), BTreeMap<String, Vec<u8>>> {
    let mut units: BTreeMap<(String, i32), Vec<[u8; 20]>> = BTreeMap::new();
    for r in recs {
        let t = tx_type(r.sys_flag);
        if t != 0 && t != 0x8 {
            assert_eq!(r.queue_offset, 0, "PREPARED/ROLLBACK get queue offset 0");
            continue;
        }
        let q = units.entry((r.topic.clone(), r.queue_id)).or_default();
        assert_eq!(
            q.len() as i64,
            r.queue_offset,
            "queue offsets are dense from 0"
        );
        let mut u = [0u8; 20];
        u[..8].copy_from_slice(&r.phy.to_be_bytes());
        u[8..12].copy_from_slice(&r.size.to_be_bytes());
        u[12..].copy_from_slice(&tags_code(r).to_be_bytes());
        q.push(u);
    }
    units
        .into_iter()
        .map(|(k, us)| {
            let mut files = BTreeMap::new();
            for (n, u) in us.iter().enumerate() {
                let pos = n * 20;
                let from = pos / CQ_FILE * CQ_FILE;
                let f = files
                    .entry(format!("{from:020}"))
                    .or_insert_with(|| vec![0u8; CQ_FILE]);
                f[pos - from..pos - from + 20].copy_from_slice(u);
            }
            (k, files)
        })
        .collect()
}

/// One index file being built, RocketMQ `IndexFile`.
struct IndexFile {
    bytes: Vec<u8>,
    begin_ts: i64,
    end_ts: i64,
    begin_phy: i64,
    end_phy: i64,
    slot_count: i32,
    index_count: i32,
}

impl IndexFile {
    /// A new file starts where the previous one ended (`IndexFile(..., endPhyOffset,
    /// endTimestamp)`).
    fn new(prev_end_phy: i64, prev_end_ts: i64) -> Self {
        Self {
            bytes: vec![0u8; 40 + SLOTS * 4 + ENTRIES * 20],
            begin_ts: prev_end_ts,
            end_ts: prev_end_ts,
            begin_phy: prev_end_phy,
            end_phy: prev_end_phy,
            slot_count: 0,
            index_count: 1,
        }
    }

    fn i32_at(&self, pos: usize) -> i32 {
        i32::from_be_bytes(self.bytes[pos..pos + 4].try_into().unwrap())
    }

    /// `IndexFile.putKey`; false when full.
    fn put_key(&mut self, key: &str, phy: i64, store_ts: i64) -> bool {
        if self.index_count as usize >= ENTRIES {
            return false;
        }
        let h = java_hash(key).wrapping_abs();
        let h = if h < 0 { 0 } else { h };
        let slot_pos = 40 + (h as usize % SLOTS) * 4;
        let mut slot_value = self.i32_at(slot_pos);
        if slot_value <= 0 || slot_value > self.index_count {
            slot_value = 0;
        }
        let mut diff = (store_ts - self.begin_ts) / 1000;
        if self.begin_ts <= 0 {
            diff = 0;
        } else {
            diff = diff.clamp(0, i64::from(i32::MAX));
        }
        let at = 40 + SLOTS * 4 + self.index_count as usize * 20;
        self.bytes[at..at + 4].copy_from_slice(&h.to_be_bytes());
        self.bytes[at + 4..at + 12].copy_from_slice(&phy.to_be_bytes());
        self.bytes[at + 12..at + 16].copy_from_slice(&(diff as i32).to_be_bytes());
        self.bytes[at + 16..at + 20].copy_from_slice(&slot_value.to_be_bytes());
        self.bytes[slot_pos..slot_pos + 4].copy_from_slice(&self.index_count.to_be_bytes());
        if self.index_count <= 1 {
            self.begin_phy = phy;
            self.begin_ts = store_ts;
        }
        if slot_value == 0 {
            self.slot_count += 1;
        }
        self.index_count += 1;
        self.end_phy = phy;
        self.end_ts = store_ts;
        true
    }

    fn finish(mut self) -> Vec<u8> {
        let mut h = Vec::with_capacity(40);
        h.extend_from_slice(&self.begin_ts.to_be_bytes());
        h.extend_from_slice(&self.end_ts.to_be_bytes());
        h.extend_from_slice(&self.begin_phy.to_be_bytes());
        h.extend_from_slice(&self.end_phy.to_be_bytes());
        h.extend_from_slice(&self.slot_count.to_be_bytes());
        h.extend_from_slice(&self.index_count.to_be_bytes());
        self.bytes[..40].copy_from_slice(&h);
        self.bytes
    }
}

/// The expected index files, oldest first (`IndexService.buildIndex`).
fn expected_index_files(recs: &[Rec]) -> Vec<Vec<u8>> {
    let mut done = Vec::new();
    let mut cur = IndexFile::new(0, 0);
    let mut used = false;
    for r in recs {
        if tx_type(r.sys_flag) == 0xC {
            continue;
        }
        if cur.index_count as usize >= ENTRIES {
            let next = IndexFile::new(cur.end_phy, cur.end_ts);
            done.push(std::mem::replace(&mut cur, next).finish());
        }
        if r.phy < cur.end_phy {
            continue;
        }
        let mut keys = Vec::new();
        if let Some(u) = r.props.get("UNIQ_KEY") {
            keys.push(format!("{}#{u}", r.topic));
        }
        if let Some(k) = r.props.get("KEYS") {
            for token in k.split(' ').filter(|t| !t.is_empty()) {
                keys.push(format!("{}#{token}", r.topic));
            }
        }
        for key in keys {
            used = true;
            if !cur.put_key(&key, r.phy, r.store_ts) {
                let next = IndexFile::new(cur.end_phy, cur.end_ts);
                done.push(std::mem::replace(&mut cur, next).finish());
                assert!(cur.put_key(&key, r.phy, r.store_ts));
            }
        }
    }
    if used {
        done.push(cur.finish());
    }
    done
}

/// Compares every consume queue and index file under `root` with the recomputed ones.
/// Returns (records, consume queue files, index files) checked.
fn validate(root: &Path) -> (usize, usize, usize) {
    let recs = read_commitlog(root);
    let want_cq = expected_consume_queues(&recs);
    let mut got_queues = Vec::new();
    for t in std::fs::read_dir(root.join("consumequeue")).unwrap() {
        let t = t.unwrap();
        for q in std::fs::read_dir(t.path()).unwrap() {
            let q = q.unwrap();
            got_queues.push((
                t.file_name().into_string().unwrap(),
                q.file_name().into_string().unwrap().parse::<i32>().unwrap(),
            ));
        }
    }
    got_queues.sort();
    let want_queues: Vec<_> = want_cq.keys().cloned().collect();
    assert_eq!(got_queues, want_queues);
    let mut cq_files = 0;
    for ((topic, qid), files) in &want_cq {
        let dir = root.join("consumequeue").join(topic).join(qid.to_string());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, files.keys().cloned().collect::<Vec<_>>(), "{dir:?}");
        for (name, want) in files {
            let got = std::fs::read(dir.join(name)).unwrap();
            if got != *want {
                let at = got.iter().zip(want).position(|(a, b)| a != b);
                panic!("{topic}/{qid}/{name} differs at byte {at:?}");
            }
            cq_files += 1;
        }
    }
    let want_index = expected_index_files(&recs);
    let mut index_files: Vec<PathBuf> = std::fs::read_dir(root.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    index_files.sort();
    assert_eq!(index_files.len(), want_index.len());
    for (path, want) in index_files.iter().zip(&want_index) {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit()),
            "{name}"
        );
        let got = std::fs::read(path).unwrap();
        assert_eq!(got.len(), want.len(), "{path:?}");
        if got[..40] != want[..40] {
            panic!("{path:?} header {:?} != {:?}", &got[..40], &want[..40]);
        }
        if got != *want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            let region = if at < 40 + SLOTS * 4 { "slot" } else { "entry" };
            panic!("{path:?} differs at byte {at} ({region})");
        }
    }
    (recs.len(), cq_files, index_files.len())
}

// ------------------------------------------------------------------ the store under test

fn write_mixed_store(root: &Path) {
    let store = Store::open(root, config()).unwrap();
    let body = |i: usize| vec![(i % 251) as u8; 100 + (i * 37) % 800];
    let tags = ["TagA", "TagB", "OrderPaid", "TAG-中文"];
    let key_sets: [&[&str]; 4] = [&[], &["order-1"], &["k1", "k2", "k3"], &["Aa", "BB"]];
    let mut n = 0usize;
    let mut next = || {
        n += 1;
        n
    };
    // Plain messages over three topics and several queues, one queue with > 600 messages.
    for round in 0..1400 {
        let i = next();
        let b = body(i);
        let key_own = format!("key-{i}");
        let mut keys: Vec<&str> = key_sets[round % 4].to_vec();
        keys.push(&key_own);
        let (topic, qid) = match round % 5 {
            0..=2 => ("Big", 0),
            3 => ("TopicTest", (round % 4) as i32),
            _ => ("Other", 1),
        };
        store
            .put(&PutMessage {
                topic,
                body: &b,
                queue_id: qid,
                tags: (round % 7 != 0).then_some(tags[round % 4]),
                keys: &keys,
                ..Default::default()
            })
            .unwrap();
    }
    // Every delay level, and one above the table (clamped to 18).
    for level in 1..=20 {
        let i = next();
        let b = body(i);
        store
            .put(&PutMessage {
                topic: "Delayed",
                body: &b,
                queue_id: 2,
                tags: Some("TagA"),
                keys: &["delayed-key"],
                delay_level: level,
                ..Default::default()
            })
            .unwrap();
    }
    // Transactions: half messages (NOT type in the half topic), then PREPARED, COMMIT and
    // ROLLBACK records in a real topic; a delayed COMMIT goes to the schedule topic.
    for t in 0..40 {
        let i = next();
        let b = body(i);
        let k = format!("tx-{t}");
        let half = store
            .put(&PutMessage {
                topic: "RMQ_SYS_TRANS_HALF_TOPIC",
                body: &b,
                keys: &[&k],
                properties: &[("txState", "half")],
                ..Default::default()
            })
            .unwrap();
        let tx = [
            TransactionType::Prepared,
            TransactionType::Commit,
            TransactionType::Rollback,
            TransactionType::NotType,
        ][t % 4];
        store
            .put(&PutMessage {
                topic: "TxTopic",
                body: &b,
                queue_id: (t % 2) as i32,
                tags: Some("TagB"),
                keys: &[&k, "tx-all"],
                transaction: tx,
                prepared_transaction_offset: half.commitlog_offset,
                delay_level: if t == 5 { 2 } else { 0 },
                ..Default::default()
            })
            .unwrap();
    }
    // Batches into one queue (never split across files) and a mixed batch.
    for b in 0..30 {
        let bodies: Vec<Vec<u8>> = (0..25).map(|j| body(b * 25 + j)).collect();
        let keys: Vec<String> = (0..25).map(|j| format!("batch-{b}-{j}")).collect();
        let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
        let msgs: Vec<PutMessage<'_>> = (0..25)
            .map(|j| PutMessage {
                topic: if b % 3 == 2 && j % 2 == 1 {
                    "Other"
                } else {
                    "Batch"
                },
                body: &bodies[j],
                queue_id: 3,
                tags: Some("TagA"),
                keys: &key_refs[j],
                ..Default::default()
            })
            .collect();
        store.put_batch(&msgs).unwrap();
    }
    // The schedule service re-delivers the due ones (every level up to 5 s here), once the
    // reput thread has dispatched everything.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.dispatch_behind_bytes() > 0 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let delivered = store
        .deliver_delayed_messages(rocketstore_now() + 5_000)
        .unwrap();
    assert!(delivered >= 2, "{delivered}");
    assert!(store.commitlog_files().len() >= 2);
    assert!(store.index_files().len() >= 2);
    store.close().unwrap();
}

fn rocketstore_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The configuration (commit log 1 MiB, 300 units per consume queue file, index 1,000
/// slots / 4,000 entries) with tags, keys, delays and all transaction types: every consume
/// queue and index file equals, byte for byte, what the independent validator recomputes
/// from the commit log.
#[test]
fn consume_queue_and_index_files_match_an_independent_validator() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_store(dir.path());
    let (records, cq_files, index_files) = validate(dir.path());
    eprintln!(
        "validated {records} records, {cq_files} consume queue files, {index_files} index files"
    );
    assert!(records > 2000);
    assert!(cq_files > 10);
    assert!(index_files >= 2);
}

/// After a clean close, a reopen must not change any consume queue or index byte (RocketMQ
/// dispatches nothing on a normal recovery: index re-dispatch resumes after the record at the
/// newest index file's endPhyOffset, whose keys are already in the file).
#[test]
fn a_clean_reopen_changes_no_consume_queue_or_index_byte() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_store(dir.path());
    let before = validate(dir.path());
    let store = Store::open(dir.path(), config()).unwrap();
    store.close().unwrap();
    assert_eq!(validate(dir.path()), before);
}

/// Total size of a V1 IPv4/IPv4 record (§3.4).
fn record_len(body: usize, topic: usize, props: usize) -> usize {
    91 + body + topic + props
}

/// Spec §13: a one-queue `put_batch` that does not fit in the rest of the current commit log
/// file is moved whole into the next file (the rest is closed with a blank record, END_FILE);
/// its records are what a broker writes for a MessageBatch: consecutive, queue offsets base+i,
/// one STORETIMESTAMP, the same born time and host, sysflag and queue id, BODYCRC per body,
/// each with its own properties and exactly one UNIQ_KEY (no envelope properties appended,
/// i.e. without the <= 5.3.3 duplicated-UNIQ_KEY bug).
#[test]
fn a_batch_near_a_file_end_moves_whole_to_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.mapped_file_size_commit_log = 64 * 1024;
    c.background_threads = false;
    let store = Store::open(dir.path(), c).unwrap();
    let filler = vec![1u8; 100];
    while 64 * 1024 - store.cursors().wrote > 1300 {
        store
            .put(&PutMessage {
                topic: "Fill",
                body: &filler,
                ..Default::default()
            })
            .unwrap();
    }
    let blank_at = store.cursors().wrote;
    let remaining = 64 * 1024 - blank_at;
    let bodies: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i as u8; 200 + i]).collect();
    let keys = ["b0", "b1", "b2", "b3", "b4"];
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [*k]).collect();
    let msgs: Vec<PutMessage<'_>> = (0..5)
        .map(|i| PutMessage {
            topic: "BatchTopic",
            body: &bodies[i],
            queue_id: 2,
            flag: i as i32,
            tags: Some("TagA"),
            keys: &key_refs[i],
            ..Default::default()
        })
        .collect();
    let res = store.put_batch(&msgs).unwrap();
    let total: u64 = res.iter().map(|r| r.wrote_bytes as u64).sum();
    assert!(
        res[0].wrote_bytes as u64 + 8 <= remaining,
        "one record would fit"
    );
    assert!(total + 8 > remaining, "the batch does not");
    store.close().unwrap();

    let files: Vec<Vec<u8>> = ["00000000000000000000", "00000000000000065536"]
        .iter()
        .map(|n| std::fs::read(dir.path().join("commitlog").join(n)).unwrap())
        .collect();
    match decode_record(&files[0][blank_at as usize..], &DecodeOptions::default()).unwrap() {
        Decoded::Blank { total_size } => assert_eq!(total_size as u64, remaining),
        Decoded::Message(_) => panic!("expected the END_FILE blank record"),
    }
    let mut pos = 0usize;
    let mut first: Option<(i64, i64, rocketstore::HostAddr, i32)> = None;
    for (i, r) in res.iter().enumerate() {
        assert_eq!(r.commitlog_offset as usize, 65536 + pos);
        let opts = DecodeOptions {
            expected_physical_offset: Some(r.commitlog_offset),
            ..DecodeOptions::default()
        };
        let Decoded::Message(v) = decode_record(&files[1][pos..], &opts).unwrap() else {
            panic!("blank");
        };
        assert_eq!(v.topic, "BatchTopic");
        assert_eq!(v.queue_id, 2);
        assert_eq!(v.queue_offset, i as i64);
        assert_eq!(v.flag, i as i32);
        assert_eq!(v.body, &bodies[i][..]);
        assert_eq!(v.body_crc, rocketstore::format::crc32_masked(&bodies[i]));
        assert_eq!(
            v.total_size as usize,
            record_len(v.body.len(), v.topic.len(), v.properties_raw.len())
        );
        let uniq_entries = v
            .properties_raw
            .windows(9)
            .filter(|w| w == b"UNIQ_KEY\x01")
            .count();
        assert_eq!(uniq_entries, 1);
        let props = parse_props(v.properties_raw);
        assert_eq!(props.get("KEYS").map(String::as_str), Some(keys[i]));
        assert!(!props.contains_key("CLUSTER") && !props.contains_key("WAIT"));
        let shared = (v.store_timestamp, v.born_timestamp, v.born_host, v.sys_flag);
        match first {
            None => first = Some(shared),
            Some(f) => assert_eq!(f, shared),
        }
        pos += v.total_size as usize;
    }
    // Every UNIQ_KEY differs.
    let reopened = Store::open_read_only(dir.path(), config()).unwrap();
    let uniq: std::collections::BTreeSet<String> = res
        .iter()
        .map(|r| {
            reopened
                .look_message_by_offset(r.commitlog_offset as u64)
                .unwrap()
                .uniq_key()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(uniq.len(), 5);
    reopened.close().unwrap();
}

/// A one-queue batch larger than a file is still written, record by record (a broker would
/// refuse it as too large; here it is simply not kept in one file), and a batch over two
/// queues is written record by record.
#[test]
fn batches_that_cannot_stay_in_one_file_are_written_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.mapped_file_size_commit_log = 64 * 1024;
    c.background_threads = false;
    let store = Store::open(dir.path(), c).unwrap();
    let body = vec![9u8; 1000];
    let msgs: Vec<PutMessage<'_>> = (0..100)
        .map(|_| PutMessage {
            topic: "Huge",
            body: &body,
            ..Default::default()
        })
        .collect();
    let res = store.put_batch(&msgs).unwrap();
    assert!(res.iter().all(|r| r.status.is_ok()));
    assert!(store.commitlog_files().len() >= 2);
    let got = store.get_message("Huge", 0, 0, 32, None, None).unwrap();
    assert_eq!(got.messages.len(), 32);
    store.close().unwrap();
}
