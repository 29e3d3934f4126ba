//! Whole-store verification: every check the Spark verify job runs on one store, in one pass
//! over a read-only open (see [`verify_store`]).
//!
//! The checks, each a [`Check`] in [`StoreReport::checks`] (in this order):
//!
//! - `crc`: every record's body CRC (and the whole-record CRC property when present), and that
//!   every body SYSFLAG marks compressed decompresses ([`crate::compression`]);
//! - `framing`: records are contiguous from the first offset to the end (a record that did not
//!   fit continues in the next file after a blank), recovery found no torn tail;
//! - `consume_queue`: every consume queue unit matches its record on the commit log offset
//!   (size, topic, queue, queue offset, tags code) and every dispatched record has its unit;
//! - `gap_free`: every queue's offsets are contiguous from its min to its max, in the units and
//!   in the records;
//! - `index`: the index finds every key (each `KEYS` entry and the `UNIQ_KEY`) of every record
//!   at that record's offset (or a sample of the keyed records);
//! - `manifest`: the counts, bytes, offsets, per-queue counts and body digest of the store's
//!   `_SUCCESS` manifest entry match the store (skipped without an entry).
//!
//! Digests are over the body a consumer sees: a body a producer compressed is decompressed
//! first, so a store ingested with compression verifies against its uncompressed source.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rocketstore_format::{property, sysflag, tags_code, RecordView, SCHEDULE_TOPIC};

use crate::bulk::{digest_of, message_hash};
use crate::compression::{BodyCodec, CodecError, DEFAULT_MAX_DECOMPRESSED};
use crate::config::StoreConfig;
use crate::dispatch::raw_property;
use crate::error::{CorruptionKind, Error};
use crate::store::Store;

/// Examples kept per check (the rest are only counted).
pub const MAX_EXAMPLES: usize = 10;
/// Index hits looked at per key (RocketMQ's `maxMsgsNumBatch`): a key shared by more records
/// than this is counted as skipped when its record is not among them.
const QUERY_MAX: usize = 64;
/// Consume queue units read per call.
const UNITS_PER_READ: usize = 65_536;
/// The names of the checks, in report order.
pub const CHECK_NAMES: [&str; 6] = [
    "crc",
    "framing",
    "consume_queue",
    "gap_free",
    "index",
    "manifest",
];

/// The outcome of one kind of check on one store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// One of [`CHECK_NAMES`].
    pub name: &'static str,
    /// False when the check could not run at all (the store did not open).
    pub ran: bool,
    /// Items looked at (records, units, queues, keys or manifest fields).
    pub checked: u64,
    /// Items that failed.
    pub failed: u64,
    /// Items that could not be decided (a key shared by too many records, a record whose CRC
    /// fails for the index lookup, no manifest entry).
    pub skipped: u64,
    /// Where the first failures are (at most [`MAX_EXAMPLES`]).
    pub examples: Vec<String>,
    /// What qualifies the result (a sample, a relaxed open, no index).
    pub notes: Vec<String>,
}

impl Check {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            ran: true,
            ..Self::default()
        }
    }

    fn fail(&mut self, example: String) {
        self.failed += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(example);
        }
    }

    fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// True if nothing failed.
    pub fn passed(&self) -> bool {
        self.failed == 0
    }
}

/// What the `_SUCCESS` manifest lists for a store; `None` fields are reported as missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Messages written.
    pub messages: Option<u64>,
    /// Sum of the records' sizes.
    pub bytes: Option<u64>,
    /// Commit log offset of the first record.
    pub min_offset: Option<u64>,
    /// Commit log offset after the last record.
    pub max_offset: Option<u64>,
    /// Messages per topic and queue.
    pub queues: Option<BTreeMap<String, BTreeMap<i32, u64>>>,
    /// The body digest (see [`crate::bulk`]).
    pub body_digest: Option<u128>,
}

/// Options of [`verify_store`].
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The store's name in examples (default: its path).
    pub name: Option<String>,
    /// The store's manifest entry; the `manifest` check is skipped without one.
    pub manifest: Option<ManifestEntry>,
    /// Look up the keys of at most this many keyed records (evenly spread); all without.
    pub sample_keys: Option<usize>,
    /// Also sum [`crate::bulk::message_hash`] per queue into
    /// [`QueueSummary::message_digest`], with (`Some(true)`) or without (`Some(false)`) the
    /// queue id in each message's digest, for a comparison with the source of the messages.
    pub message_digest: Option<bool>,
    /// The end of what readers of the store may see (a stream sink's last committed
    /// micro-batch ends there): records at or past it are still checked, but not counted in
    /// the messages, bytes, queues and digests of the report. None: every record counts.
    pub committed_end: Option<u64>,
}

/// One queue of a verified store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Records of this queue found in the commit log.
    pub messages: u64,
    /// The consume queue's min offset (0 for a queue without one).
    pub min_offset: i64,
    /// The consume queue's max offset (next offset to write).
    pub max_offset: i64,
    /// The sum of [`crate::bulk::message_hash`] over the queue's records (0 unless
    /// [`VerifyOptions::message_digest`] asked for it).
    pub message_digest: u128,
}

/// The result of [`verify_store`].
#[derive(Debug, Clone, Default)]
pub struct StoreReport {
    /// One entry per name of [`CHECK_NAMES`], in that order.
    pub checks: Vec<Check>,
    /// Records read.
    pub messages: u64,
    /// Sum of their sizes.
    pub bytes: u64,
    /// Commit log files.
    pub files: u64,
    /// Commit log min offset.
    pub min_offset: u64,
    /// Commit log max offset.
    pub max_offset: u64,
    /// The body digest of every record read (see [`crate::bulk`]).
    pub body_digest: u128,
    /// Every queue seen in the consume queues or the records, by topic and queue id.
    pub queues: Vec<QueueSummary>,
}

impl StoreReport {
    /// True if every check passed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(Check::passed)
    }

    /// The check called `name`.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// What the checks keep of a record.
#[derive(Debug, Clone, Copy)]
struct Rec {
    offset: u64,
    size: u32,
    topic: u32,
    queue_id: i32,
    queue_offset: i64,
    sys_flag: i32,
    tags_code: i64,
}

impl Rec {
    fn dispatched(&self) -> bool {
        let tx = self.sys_flag & sysflag::TRANSACTION_MASK;
        tx == sysflag::TRANSACTION_NOT_TYPE || tx == sysflag::TRANSACTION_COMMIT_TYPE
    }
}

/// A record with keys to look up.
#[derive(Debug)]
struct Keyed {
    topic: u32,
    offset: u64,
    keys: Box<str>,
}

/// The scan of a store: records in commit log order, their keys and digest.
#[derive(Debug, Default)]
struct Scan {
    records: Vec<Rec>,
    keyed: Vec<Keyed>,
    topics: Vec<String>,
    topic_ids: HashMap<String, u32>,
    digest: u128,
    bad_crc: std::collections::HashSet<u64>,
    end: u64,
    /// `Some(with queue id)`: sum message hashes per (topic, queue) into `sums`.
    message_digest: Option<bool>,
    sums: HashMap<(u32, i32), u128>,
    /// Decompresses the bodies a producer compressed: digests are over the body a consumer
    /// sees.
    codec: BodyCodec,
    plain: Vec<u8>,
    /// Records whose compressed body does not decompress: (offset, why).
    bad_bodies: Vec<(u64, CodecError)>,
    /// [`VerifyOptions::committed_end`].
    committed_end: Option<u64>,
}

impl Scan {
    /// Whether the record at `offset` counts in the report (see [`VerifyOptions::committed_end`]).
    fn counts(&self, offset: u64) -> bool {
        self.committed_end.is_none_or(|end| offset < end)
    }

    fn topic_id(&mut self, topic: &str) -> u32 {
        if let Some(&id) = self.topic_ids.get(topic) {
            return id;
        }
        let id = self.topics.len() as u32;
        self.topics.push(topic.to_owned());
        self.topic_ids.insert(topic.to_owned(), id);
        id
    }

    fn add(&mut self, v: &RecordView<'_>) {
        let topic = self.topic_id(v.topic);
        let props = v.properties_raw;
        let tags = raw_property(props, property::TAGS).and_then(|t| std::str::from_utf8(t).ok());
        let offset = v.physical_offset as u64;
        self.records.push(Rec {
            offset,
            size: v.total_size as u32,
            topic,
            queue_id: v.queue_id,
            queue_offset: v.queue_offset,
            sys_flag: v.sys_flag,
            tags_code: tags_code(tags),
        });
        let body = match self.codec.decompress(
            v.sys_flag,
            v.body,
            DEFAULT_MAX_DECOMPRESSED,
            &mut self.plain,
        ) {
            Ok(true) => &self.plain[..],
            Ok(false) => v.body,
            Err(e) => {
                self.bad_bodies.push((offset, e));
                v.body
            }
        };
        let counted = self.counts(offset);
        if let (Some(with_queue), true) = (self.message_digest, counted) {
            let keys = raw_property(props, property::KEYS).unwrap_or_default();
            let tags = raw_property(props, property::TAGS).unwrap_or_default();
            let queue = with_queue.then_some(v.queue_id);
            let d = message_hash(v.topic.as_bytes(), queue, keys, tags, body);
            *self.sums.entry((topic, v.queue_id)).or_default() += u128::from(d);
        }
        if counted {
            self.digest += u128::from(digest_of(body));
        }
        let rollback = v.sys_flag & sysflag::TRANSACTION_MASK == sysflag::TRANSACTION_ROLLBACK_TYPE;
        if rollback {
            return; // never indexed (spec 6.3)
        }
        let keys = raw_property(props, property::KEYS).and_then(|k| std::str::from_utf8(k).ok());
        let uniq =
            raw_property(props, property::UNIQ_KEY).and_then(|k| std::str::from_utf8(k).ok());
        if keys.is_none() && uniq.is_none() {
            return;
        }
        let mut all = String::new();
        for k in keys.into_iter().chain(uniq) {
            if !all.is_empty() {
                all.push(' ');
            }
            all.push_str(k);
        }
        self.keyed.push(Keyed {
            topic,
            offset,
            keys: all.into_boxed_str(),
        });
    }
}

/// An integer shown with thousands separators (`1,234,567`), like the rest of the report.
struct G<T>(T);

impl<T: Copy + Into<i128>> std::fmt::Display for G<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: i128 = self.0.into();
        let digits = v.unsigned_abs().to_string();
        if v < 0 {
            f.write_str("-")?;
        }
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                f.write_str(",")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

fn file_of(offset: u64, file_size: u64) -> String {
    if file_size == 0 {
        return "?".into();
    }
    format!("{:020}", offset / file_size * file_size)
}

/// The commit log file size of a store, from its file names (a read-only open may not know it).
fn file_size_of(store: &Store) -> u64 {
    let files = store.commitlog_files();
    let mut starts: Vec<u64> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str()?.parse().ok())
        .collect();
    starts.sort_unstable();
    if starts.len() >= 2 {
        return starts[1] - starts[0];
    }
    if let Some(f) = files.first() {
        if let Ok(m) = std::fs::metadata(f) {
            return m.len().max(1);
        }
    }
    store.commitlog_file_size()
}

fn is_crc_error(e: &Error) -> bool {
    matches!(e, Error::Corruption { kind, .. }
        if *kind == CorruptionKind::CrcMismatch || kind.to_string().to_lowercase().contains("crc"))
}

/// Opens `path` read-only and runs every check on it (see the module docs); never fails: a store
/// that does not open fails `framing` (and the other checks are marked as not run).
///
/// Recovery refuses a body CRC mismatch below the durable offset; then the store is opened again
/// with `check_crc_on_recover = false` so that the checks find and report every bad record.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use rocketstore::{verify_store, PutMessage, Store, StoreConfig, VerifyOptions};
/// let store = Store::open(dir.path(), StoreConfig::default()).unwrap();
/// let msg = PutMessage { topic: "T", body: b"hello", ..PutMessage::default() };
/// store.put(&msg).unwrap();
/// store.close().unwrap();
/// let report = verify_store(dir.path(), StoreConfig::default(), &VerifyOptions::default());
/// assert!(report.ok(), "{report:?}");
/// assert_eq!(report.messages, 1);
/// ```
pub fn verify_store(path: &Path, config: StoreConfig, opts: &VerifyOptions) -> StoreReport {
    let label = opts
        .name
        .clone()
        .unwrap_or_else(|| path.display().to_string());
    let mut checks: [Check; 6] = CHECK_NAMES.map(Check::new);
    let mut report = StoreReport::default();
    let relaxed_config = {
        let mut c = config.clone();
        c.check_crc_on_recover = false;
        c
    };
    let opened = match Store::open_read_only(path, config.clone()) {
        Err(e) if is_crc_error(&e) && config.check_crc_on_recover => {
            checks[0].note("opened with check_crc_on_recover=false (recovery met a bad CRC)");
            Store::open_read_only(path, relaxed_config)
        }
        other => other,
    };
    let store = match opened {
        Ok(s) => s,
        Err(e) => {
            for c in &mut checks {
                c.ran = c.name == "framing";
            }
            checks[1].fail(format!("{label}: cannot open the store read-only: {e}"));
            report.checks = checks.into();
            return report;
        }
    };
    let [crc, framing, cq, gap, index, manifest] = &mut checks;
    let file_size = file_size_of(&store);
    let (lo, hi) = (store.min_commitlog_offset(), store.max_commitlog_offset());
    report.files = store.commitlog_files().len() as u64;
    report.min_offset = lo;
    report.max_offset = hi;

    let span = LogSpan { lo, hi, file_size };
    let counting = (opts.message_digest, opts.committed_end);
    let scan = scan(&store, &label, span, crc, framing, counting);
    check_framing(&store, &label, &scan, span, framing);
    let queues = store.consume_queues();
    let units = read_units(&store, &scan, &queues, &label, gap);
    check_consume_queue(&label, &scan, &units, &queues, cq);
    check_gap_free(&label, &scan, &units, &queues, gap);
    check_index(&store, &label, &scan, opts.sample_keys, index);

    let counted: Vec<&Rec> = scan
        .records
        .iter()
        .filter(|r| scan.counts(r.offset))
        .collect();
    let bytes: u64 = counted.iter().map(|r| u64::from(r.size)).sum();
    let mut per_queue: BTreeMap<(String, i32), u64> = BTreeMap::new();
    for r in &counted {
        *per_queue
            .entry((scan.topics[r.topic as usize].clone(), r.queue_id))
            .or_default() += 1;
    }
    let found = ManifestEntry {
        messages: Some(counted.len() as u64),
        bytes: Some(bytes),
        min_offset: Some(counted.first().map_or(0, |r| r.offset)),
        max_offset: Some(hi),
        queues: Some(
            per_queue
                .iter()
                .fold(BTreeMap::new(), |mut m, ((t, q), n)| {
                    m.entry(t.clone())
                        .or_insert_with(BTreeMap::new)
                        .insert(*q, *n);
                    m
                }),
        ),
        body_digest: Some(scan.digest),
    };
    match &opts.manifest {
        Some(entry) => check_manifest(&label, entry, &found, manifest),
        None => manifest.skipped += 1,
    }

    report.messages = counted.len() as u64;
    report.bytes = bytes;
    report.body_digest = scan.digest;
    let limits: BTreeMap<(String, i32), (i64, i64)> = queues
        .iter()
        .map(|(t, q, lo, hi)| ((t.clone(), *q), (*lo, *hi)))
        .collect();
    let sums: BTreeMap<(String, i32), u128> = scan
        .sums
        .iter()
        .map(|(&(t, q), &d)| ((scan.topics[t as usize].clone(), q), d))
        .collect();
    let mut keys: Vec<&(String, i32)> = per_queue.keys().chain(limits.keys()).collect();
    keys.sort();
    keys.dedup();
    report.queues = keys
        .into_iter()
        .map(|k| {
            let (min_offset, max_offset) = limits.get(k).copied().unwrap_or((0, 0));
            QueueSummary {
                topic: k.0.clone(),
                queue_id: k.1,
                messages: per_queue.get(k).copied().unwrap_or(0),
                min_offset,
                max_offset,
                message_digest: sums.get(k).copied().unwrap_or(0),
            }
        })
        .collect();
    let _ = store.close();
    report.checks = checks.into();
    report
}

/// The commit log range a verification reads: `[lo, hi)` in files of `file_size` bytes.
#[derive(Debug, Clone, Copy)]
struct LogSpan {
    lo: u64,
    hi: u64,
    file_size: u64,
}

/// Reads every record from `lo` to `hi` with CRC checks; a bad record is counted and kept.
fn scan(
    store: &Store,
    label: &str,
    span: LogSpan,
    crc: &mut Check,
    framing: &mut Check,
    (message_digest, committed_end): (Option<bool>, Option<u64>),
) -> Scan {
    let LogSpan { lo, hi, file_size } = span;
    let mut s = Scan {
        message_digest,
        committed_end,
        ..Scan::default()
    };
    let next_file = |o: u64| o.checked_div(file_size).map_or(hi, |n| (n + 1) * file_size);
    let mut off = lo;
    while off < hi {
        match store.visit_records(off, hi, usize::MAX, true, |v| {
            s.add(v);
            true
        }) {
            Ok(next) => {
                if next <= off {
                    break;
                }
                off = next;
            }
            Err(Error::Corruption {
                offset: bad,
                kind: CorruptionKind::CrcMismatch,
                ..
            }) if (off..hi).contains(&bad) => {
                let before = s.records.len();
                let got = store.visit_records(bad, hi, 1, false, |v| {
                    s.add(v);
                    true
                });
                match got {
                    Ok(next) if next > bad && s.records.len() > before => {
                        let r = s.records[before];
                        crc.fail(format!(
                            "{label}: body CRC mismatch at commit log offset {bad} (file \
                             commitlog/{}), {} queue {} offset {}",
                            file_of(bad, file_size),
                            s.topics[r.topic as usize],
                            r.queue_id,
                            r.queue_offset,
                            bad = G(bad),
                        ));
                        s.bad_crc.insert(bad);
                        off = next;
                    }
                    Ok(_) => {
                        framing.fail(format!(
                            "{label}: record at commit log offset {} is unreadable",
                            G(bad)
                        ));
                        off = next_file(bad);
                    }
                    Err(e) => {
                        framing.fail(format!(
                            "{label}: record at commit log offset {} is unreadable: {e}",
                            G(bad)
                        ));
                        off = next_file(bad);
                    }
                }
            }
            Err(e) => {
                let at = match &e {
                    Error::Corruption { offset, .. } if (off..hi).contains(offset) => *offset,
                    _ => off,
                };
                framing.fail(format!(
                    "{label}: reading from commit log offset {} failed: {e}",
                    G(off)
                ));
                off = next_file(at);
            }
        }
    }
    s.end = off;
    crc.checked += s.records.len() as u64;
    for (at, e) in std::mem::take(&mut s.bad_bodies) {
        crc.fail(format!(
            "{label}: the compressed body at commit log offset {} (file commitlog/{}) does not \
             decompress: {e}",
            G(at),
            file_of(at, file_size),
        ));
    }
    s
}

fn check_framing(store: &Store, label: &str, s: &Scan, span: LogSpan, check: &mut Check) {
    let LogSpan { lo, hi, file_size } = span;
    check.checked += s.records.len() as u64;
    if let Some((at, reason)) = &store.recovery_report().truncated_at {
        check.fail(format!(
            "{label}: recovery found invalid data at commit log offset {at} (file \
             commitlog/{}): {reason}; records after it are not reachable",
            file_of(*at, file_size),
            at = G(*at),
        ));
    }
    if s.end < hi {
        check.fail(format!(
            "{label}: the scan stopped at offset {}, before the end {}",
            G(s.end),
            G(hi)
        ));
    }
    let (Some(first), Some(last)) = (s.records.first(), s.records.last()) else {
        return;
    };
    if first.offset != lo {
        check.fail(format!(
            "{label}: the first record is at offset {}, not at {}",
            G(first.offset),
            G(lo)
        ));
    }
    for w in s.records.windows(2) {
        let end = w[0].offset + u64::from(w[0].size);
        let next = w[1].offset;
        // A record that did not fit went to the next file; a blank fills the gap.
        let ok = next == end
            || (file_size > 0 && next % file_size == 0 && next > end && next - end <= file_size);
        if !ok {
            check.fail(format!(
                "{label}: record at offset {} (size {}) ends at {end} but the next record is at \
                 {next}",
                G(w[0].offset),
                w[0].size,
                end = G(end),
                next = G(next),
            ));
        }
    }
    let last_end = last.offset + u64::from(last.size);
    if last_end != hi && s.end >= hi {
        check.fail(format!(
            "{label}: the last record ends at {}, the store ends at {}",
            G(last_end),
            G(hi)
        ));
    }
}

/// A consume queue unit, with its queue.
#[derive(Debug, Clone, Copy)]
struct Unit {
    /// Topic id in the scan's table (`u32::MAX` for a topic without records).
    topic: u32,
    queue: usize,
    queue_id: i32,
    queue_offset: i64,
    phy: i64,
    size: i32,
    tags_code: i64,
}

fn read_units(
    store: &Store,
    s: &Scan,
    queues: &[(String, i32, i64, i64)],
    label: &str,
    gap: &mut Check,
) -> Vec<Unit> {
    let mut out = Vec::new();
    for (qi, (topic, qid, qmin, qmax)) in queues.iter().enumerate() {
        let tid = s.topic_ids.get(topic).copied().unwrap_or(u32::MAX);
        let mut q = *qmin;
        while q < *qmax {
            let units = store.consume_queue_units(topic, *qid, q, UNITS_PER_READ);
            let Some(&(last, _)) = units.last() else {
                gap.fail(format!(
                    "{label}: {topic} queue {qid}: no consume queue unit at offset {q} (the \
                     queue claims {qmin}..{})",
                    qmax - 1
                ));
                break;
            };
            out.extend(units.into_iter().map(|(queue_offset, u)| Unit {
                topic: tid,
                queue: qi,
                queue_id: *qid,
                queue_offset,
                phy: u.phy_offset,
                size: u.size,
                tags_code: u.tags_code,
            }));
            if last < q {
                break;
            }
            q = last + 1;
        }
    }
    out
}

fn check_consume_queue(
    label: &str,
    s: &Scan,
    units: &[Unit],
    queues: &[(String, i32, i64, i64)],
    check: &mut Check,
) {
    let dispatched: Vec<&Rec> = s.records.iter().filter(|r| r.dispatched()).collect();
    check.checked += dispatched.len().max(units.len()) as u64;
    let by_phy: HashMap<i64, usize> = units.iter().enumerate().map(|(i, u)| (u.phy, i)).collect();
    let mut matched = vec![false; units.len()];
    let topic = |id: u32| s.topics.get(id as usize).map_or("?", String::as_str);
    for r in dispatched {
        let Some(&i) = by_phy.get(&(r.offset as i64)) else {
            check.fail(format!(
                "{label}: {} queue {} offset {}: the record at commit log offset {} has no \
                 consume queue unit",
                topic(r.topic),
                r.queue_id,
                r.queue_offset,
                G(r.offset)
            ));
            continue;
        };
        matched[i] = true;
        let u = &units[i];
        let delay = topic(r.topic) == SCHEDULE_TOPIC;
        let mut diffs = Vec::new();
        if i64::from(u.size) != i64::from(r.size) {
            diffs.push(format!("size {} != record's {}", u.size, r.size));
        }
        if u.topic != r.topic {
            diffs.push(format!("topic differs from record's {}", topic(r.topic)));
        }
        if u.queue_id != r.queue_id {
            diffs.push(format!("queue {} != record's {}", u.queue_id, r.queue_id));
        }
        if u.queue_offset != r.queue_offset {
            diffs.push(format!(
                "queue offset {} != record's {}",
                u.queue_offset, r.queue_offset
            ));
        }
        if !delay && u.tags_code != r.tags_code {
            diffs.push(format!(
                "tags code {} != record's {}",
                u.tags_code, r.tags_code
            ));
        }
        if !diffs.is_empty() {
            check.fail(format!(
                "{label}: unit at queue offset {} -> commit log offset {}: {}",
                u.queue_offset,
                G(r.offset),
                diffs.join(", ")
            ));
        }
    }
    for (u, _) in units.iter().zip(&matched).filter(|(_, m)| !**m) {
        let topic = queues.get(u.queue).map_or("?", |q| q.0.as_str());
        check.fail(format!(
            "{label}: {topic} queue {} offset {}: the unit points at commit log offset {} (size \
             {}), where no record starts",
            u.queue_id,
            u.queue_offset,
            G(u.phy),
            u.size
        ));
    }
}

/// `(min, max, count, distinct, first gap)` of a list of queue offsets (sorted in place).
fn ranges(offs: &mut [i64]) -> (i64, i64, usize, usize, Option<i64>) {
    offs.sort_unstable();
    let (Some(&lo), Some(&hi)) = (offs.first(), offs.last()) else {
        return (0, -1, 0, 0, None);
    };
    let distinct = 1 + offs.windows(2).filter(|w| w[0] != w[1]).count();
    let gap = offs.windows(2).find(|w| w[1] != w[0] + 1).map(|w| w[0] + 1);
    (lo, hi, offs.len(), distinct, gap)
}

fn check_gap_free(
    label: &str,
    s: &Scan,
    units: &[Unit],
    queues: &[(String, i32, i64, i64)],
    check: &mut Check,
) {
    let mut by_queue: Vec<Vec<i64>> = vec![Vec::new(); queues.len()];
    for u in units {
        by_queue[u.queue].push(u.queue_offset);
    }
    for ((topic, qid, qmin, qmax), offs) in queues.iter().zip(by_queue.iter_mut()) {
        check.checked += 1;
        let (lo, hi, count, distinct, gap) = ranges(offs);
        let expect = usize::try_from(qmax - qmin).unwrap_or(0);
        if count != expect || distinct != count || (count > 0 && (lo != *qmin || hi != qmax - 1)) {
            check.fail(format!(
                "{label}: {topic} queue {qid}: offsets {}..{} should have {} units, found {} \
                 ({} distinct{})",
                G(*qmin),
                G(qmax - 1),
                G(expect as u64),
                G(count as u64),
                G(distinct as u64),
                gap.map(|g| format!(", first gap at {}", G(g)))
                    .unwrap_or_default()
            ));
        }
    }
    let mut by_record: BTreeMap<(&str, i32), Vec<i64>> = BTreeMap::new();
    for r in s.records.iter().filter(|r| r.dispatched()) {
        by_record
            .entry((s.topics[r.topic as usize].as_str(), r.queue_id))
            .or_default()
            .push(r.queue_offset);
    }
    for ((topic, qid), mut offs) in by_record {
        if !queues.iter().any(|(t, q, _, _)| t == topic && *q == qid) {
            check.checked += 1;
        }
        let (lo, hi, count, distinct, gap) = ranges(&mut offs);
        if distinct != count || usize::try_from(hi - lo + 1).ok() != Some(count) {
            check.fail(format!(
                "{label}: {topic} queue {qid}: records carry queue offsets {}..{} but there \
                 are {} records ({} distinct{})",
                G(lo),
                G(hi),
                G(count as u64),
                G(distinct as u64),
                gap.map(|g| format!(", first gap at {}", G(g)))
                    .unwrap_or_default()
            ));
        }
    }
}

fn check_index(store: &Store, label: &str, s: &Scan, sample: Option<usize>, check: &mut Check) {
    let n = s.keyed.len();
    let picked: Vec<usize> = match sample {
        Some(k) if n > k => {
            check.note(format!("a sample of up to {k} keyed records per store"));
            let k = k.max(1);
            let mut idx: Vec<usize> = (0..k)
                .map(|i| if k == 1 { 0 } else { i * (n - 1) / (k - 1) })
                .collect();
            idx.dedup();
            idx
        }
        _ => (0..n).collect(),
    };
    for i in picked {
        let rec = &s.keyed[i];
        let topic = &s.topics[rec.topic as usize];
        let tokens = rocketstore_format::keys::index_tokens(&rec.keys);
        if s.bad_crc.contains(&rec.offset) {
            check.skipped += tokens.count() as u64; // lookups skip records whose CRC fails
            continue;
        }
        for key in tokens {
            let Some(found) = store.index_finds(topic, key, rec.offset as i64, QUERY_MAX) else {
                index_unusable(store, label, check);
                return;
            };
            check.checked += 1;
            let Err(hits) = found else {
                continue;
            };
            if hits >= QUERY_MAX {
                check.skipped += 1; // more records share the key's hash than one query returns
                continue;
            }
            check.fail(format!(
                "{label}: the index does not find key {key:?} of topic {topic:?} at commit log \
                 offset {} ({} other hit(s))",
                G(rec.offset),
                hits
            ));
        }
    }
}

fn index_unusable(store: &Store, label: &str, check: &mut Check) {
    let dir = store.root().join("index");
    let has_files = std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some());
    if has_files {
        check.fail(format!(
            "{label}: index files exist but the index is disabled in this open"
        ));
    } else {
        check.note("a store has no index files (written with message_index_enable=false?)");
    }
}

fn check_manifest(label: &str, listed: &ManifestEntry, found: &ManifestEntry, check: &mut Check) {
    fn cmp<T: PartialEq + std::fmt::Debug>(
        label: &str,
        what: &str,
        listed: &Option<T>,
        found: &Option<T>,
        check: &mut Check,
    ) {
        check.checked += 1;
        match (listed, found) {
            (Some(l), Some(f)) if l == f => {}
            (Some(l), Some(f)) => check.fail(format!(
                "{label}: manifest says {what}={l:?}, the store has {f:?}"
            )),
            (None, _) => check.fail(format!("{label}: the manifest entry has no {what}")),
            (Some(_), None) => {}
        }
    }
    cmp(label, "messages", &listed.messages, &found.messages, check);
    cmp(label, "bytes", &listed.bytes, &found.bytes, check);
    cmp(
        label,
        "min_offset",
        &listed.min_offset,
        &found.min_offset,
        check,
    );
    cmp(
        label,
        "max_offset",
        &listed.max_offset,
        &found.max_offset,
        check,
    );
    cmp(
        label,
        "body_digest",
        &listed.body_digest,
        &found.body_digest,
        check,
    );
    check.checked += 1;
    match (&listed.queues, &found.queues) {
        (Some(l), Some(f)) if l != f => {
            let mut diffs = Vec::new();
            let topics: std::collections::BTreeSet<&String> = l.keys().chain(f.keys()).collect();
            for t in topics {
                let (lq, fq) = (l.get(t), f.get(t));
                let ids: std::collections::BTreeSet<&i32> = lq
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .chain(fq.into_iter().flat_map(|m| m.keys()))
                    .collect();
                for q in ids {
                    let a = lq.and_then(|m| m.get(q)).copied().unwrap_or(0);
                    let b = fq.and_then(|m| m.get(q)).copied().unwrap_or(0);
                    if a != b {
                        diffs.push(format!("{t} queue {q}: manifest {a}, found {b}"));
                    }
                }
            }
            diffs.truncate(5);
            check.fail(format!(
                "{label}: per-queue counts differ: {}",
                diffs.join("; ")
            ));
        }
        (None, _) => check.fail(format!("{label}: the manifest entry has no queues")),
        _ => {}
    }
}
