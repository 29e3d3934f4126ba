//! Offline repair ([`rebuild_indexes`]) and the recovery checks `Store::open` shares with it.
//!
//! Recovery checks (reliability.md §9 items 3, 7, 10):
//! - [`check_scan`]: the commit log may only lose data after the durable offset recorded in the
//!   checkpoint; anything else is a [`Error::Corruption`] naming the file and offset, unless the
//!   `recovery_mode` tolerates it.
//! - [`repair_cq_tails`]: a consume queue's last unit must point at a record of that queue with
//!   that queue offset; units that do not are cut off (they are re-derived from the commit log).
//! - [`backfill_queues`]: a queue whose units were lost (a damaged end, a deleted file, a cut-off
//!   tail) is refilled from the commit log before dispatch resumes, so recovery never fails
//!   with a consume queue gap and never leaves a hole.
//! - [`precheck_index_dir`]: an index file with an impossible header or size is deleted with
//!   every newer one; re-dispatch rebuilds them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocketstore_format::index::index_file_size;
use rocketstore_format::{
    decode_record, Checkpoint, CheckpointExt, CqUnit, DecodeOptions, Decoded, IndexHeader,
    INDEX_HEADER_SIZE,
};

use crate::commitlog::{CommitLog, ScanEnd};
use crate::config::{RecoveryMode, StoreConfig};
use crate::consume_queue::{ConsumeQueue, ConsumeQueueStore, CONSUME_QUEUE_DIR};
use crate::dispatch::dispatch_request;
use crate::dispatch::Dispatcher;
use crate::error::{CorruptionKind, Error, Result};
use crate::index::{IndexService, INDEX_DIR};
use crate::longpoll::PullWaiters;
use crate::service::allocate::Allocator;
use crate::service::{Health, Signal};
use crate::util::{check_not_symlink, fsync_dir};

/// What [`rebuild_indexes`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RebuildReport {
    /// Smallest commit log offset.
    pub min_offset: u64,
    /// End of valid commit log data (the store's max offset afterwards).
    pub end_offset: u64,
    /// Valid records found in the commit log.
    pub records: u64,
    /// Records dispatched into consume queues and index files.
    pub dispatched: u64,
    /// Consume queues written.
    pub consume_queues: usize,
    /// Consume queue files written.
    pub consume_queue_files: usize,
    /// Index files written.
    pub index_files: usize,
    /// Where and why the commit log scan stopped before the end of the files, if it found damage
    /// (a torn tail; the bytes after it were zero-filled).
    pub truncated_at: Option<(u64, String)>,
    /// Commit log files removed because they lay past the end of valid data.
    pub commitlog_files_removed: usize,
}

/// Rebuilds every consume queue and index file of a closed store from its commit log alone
/// (issue #4 "offline repair"; RocketMQ has no such tool).
///
/// Takes the store's lock (so the store must not be open), scans the whole commit log with the
/// recovery validator (CRCs included; damage is handled as `recovery_mode` says, see
/// [`StoreConfig::recovery_mode`]), truncates a torn tail, deletes `consumequeue/` and `index/`
/// and writes them again by dispatching every record in order, flushes them, writes a
/// checkpoint (physic and logics timestamps of the last record and the last dispatched record,
/// index timestamp of the last full index file, durable offset = the end) and removes the
/// `abort` marker: the store is then as after a clean shutdown. Consumer offsets and
/// `config/` are untouched.
///
/// The consume queue files are byte-identical to those the store wrote itself. Index files
/// hold the same entries in the same places; only their names (the creation time,
/// `yyyyMMddHHmmssSSS`) differ.
///
/// ```no_run
/// let report = rocketstore::rebuild_indexes("/tmp/demo-store", rocketstore::StoreConfig::default())?;
/// println!("{} records, {} queues", report.records, report.consume_queues);
/// # Ok::<(), rocketstore::Error>(())
/// ```
///
/// # Errors
/// [`Error::Locked`] if the store is open; [`Error::Corruption`] for damage `recovery_mode` does
/// not tolerate (nothing is changed then); [`Error::UnsupportedFormat`] for a RocksDB consume
/// queue or symbolic links; I/O errors.
pub fn rebuild_indexes(root: impl AsRef<Path>, config: StoreConfig) -> Result<RebuildReport> {
    let root = root.as_ref();
    config.validate()?;
    check_not_symlink(root)?;
    let meta = std::fs::metadata(root).map_err(|e| Error::io("stat", root, e))?;
    if !meta.is_dir() {
        return Err(Error::UnsupportedFormat {
            path: root.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    let cq_dir = root.join(CONSUME_QUEUE_DIR);
    let index_dir = root.join(INDEX_DIR);
    for d in [&cq_dir, &index_dir] {
        check_not_symlink(d)?;
    }
    if cq_dir.join("CURRENT").exists() {
        return Err(Error::UnsupportedFormat {
            path: cq_dir,
            reason: "consume queues are stored in RocksDB; only file-based stores are supported"
                .into(),
        });
    }
    let _lock = crate::store::take_lock(root)?;
    let sync = config.fsync_directory;
    let commitlog_dir = root.join("commitlog");
    std::fs::create_dir_all(&commitlog_dir).map_err(|e| Error::io("mkdir", &commitlog_dir, e))?;
    let log = Arc::new(CommitLog::load(
        &commitlog_dir,
        &config,
        true,
        Health::new(),
        None::<Arc<Allocator>>,
        Signal::new(),
        Signal::new(),
    )?);
    let cp = match crate::checkpoint::read(root)? {
        Some(Ok(c)) => Some(c),
        _ => None,
    };
    let durable = durable_offset(cp.as_ref());
    let max_record = u32::try_from(config.max_record_size()).unwrap_or(u32::MAX);
    let scan = log.scan_for_end(0, config.check_crc_on_recover, max_record, |_, _| {});
    check_scan(&log, &config, durable, &scan)?;
    let removed = log.truncate_to(scan.end)?;

    for d in [&cq_dir, &index_dir] {
        match std::fs::remove_dir_all(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove_dir_all", d.as_path(), e)),
        }
    }
    if sync {
        fsync_dir(root)?;
    }
    let cqs = Arc::new(ConsumeQueueStore::load(
        root,
        config.consume_queue_file_size(),
        true,
    )?);
    let index = if config.message_index_enable {
        Some(Arc::new(IndexService::load(
            root,
            u32::try_from(config.max_hash_slot_num).unwrap_or(u32::MAX),
            u32::try_from(config.max_index_num).unwrap_or(u32::MAX),
            true,
            true,
            0,
        )?))
    } else {
        None
    };
    let dispatcher = Dispatcher::new(
        Arc::clone(&cqs),
        index.clone(),
        Arc::new(PullWaiters::default()),
        log.min_offset(),
        config.delay_levels(),
        max_queue_id(&config),
    );
    let dispatched = dispatcher.dispatch_until(&log, scan.end)?;
    cqs.correct_min_offsets(log.min_offset());
    cqs.flush_all(0)?;
    if let Some(i) = &index {
        i.flush()?;
    }
    let queues = cqs.all();
    let old = cp.unwrap_or_default();
    let new_cp = Checkpoint {
        physic_msg_timestamp: scan.last_store_timestamp.max(0),
        logics_msg_timestamp: dispatcher.logics_timestamp(),
        index_msg_timestamp: index.as_ref().map_or(0, |i| i.last_full_end_timestamp()),
        master_flushed_offset: old.master_flushed_offset,
        confirm_phy_offset: old.confirm_phy_offset,
        ext: Some(CheckpointExt {
            durable_commitlog_offset: i64::try_from(scan.end).unwrap_or(i64::MAX),
            clean_shutdown: true,
            generation: old.ext.map_or(0, |e| e.generation) + 1,
            window: None,
        }),
    };
    crate::checkpoint::write(root, &new_cp, sync)?;
    crate::checkpoint::remove_abort(root, sync)?;
    Ok(RebuildReport {
        min_offset: log.min_offset(),
        end_offset: scan.end,
        records: scan.records,
        dispatched,
        consume_queues: queues.len(),
        consume_queue_files: queues.iter().map(|q| q.file_count()).sum(),
        index_files: index.as_ref().map_or(0, |i| i.files().len()),
        truncated_at: scan.damage,
        commitlog_files_removed: removed,
    })
}

/// The durable commit log offset recorded in our checkpoint extension, if any.
pub(crate) fn durable_offset(cp: Option<&Checkpoint>) -> Option<u64> {
    cp.and_then(|c| c.ext.as_ref())
        .map(|e| u64::try_from(e.durable_commitlog_offset).unwrap_or(0))
}

pub(crate) fn max_queue_id(cfg: &StoreConfig) -> i32 {
    i32::try_from(cfg.max_queue_nums_per_topic).unwrap_or(i32::MAX) - 1
}

/// Decides whether the recovered end `scan` may be accepted: damage (non-zero bytes that do not
/// validate) or an end of data (zeros, missing files) before the durable offset `durable` is a
/// [`Error::Corruption`] naming the file and offset, unless `recovery_mode` tolerates it:
/// `absolute_consistency` refuses any damage, `tolerate_tail_corruption` refuses anything
/// before `durable`, `tolerate_any_corruption` accepts everything.
pub(crate) fn check_scan(
    log: &CommitLog,
    cfg: &StoreConfig,
    durable: Option<u64>,
    scan: &ScanEnd,
) -> Result<()> {
    let file_of = |at: u64| -> PathBuf {
        log.queue()
            .find(at)
            .or_else(|| log.queue().last().filter(|f| f.from() <= at))
            .map(|f| f.path().to_path_buf())
            .unwrap_or_else(|| log.queue().dir().to_path_buf())
    };
    let mode = cfg.recovery_mode;
    if let Some((at, why)) = &scan.damage {
        let below_durable = durable.is_some_and(|d| *at < d);
        let refuse = match mode {
            RecoveryMode::AbsoluteConsistency => true,
            // Quarantine refuses here like the tail mode; recovery then moves the files aside
            // (quarantine.rs) instead of failing the open.
            RecoveryMode::TolerateTailCorruption | RecoveryMode::Quarantine => below_durable,
            RecoveryMode::TolerateAnyCorruption => false,
        };
        if refuse {
            return Err(Error::corruption(
                file_of(*at),
                *at,
                CorruptionKind::Invalid(format!(
                    "{why}{}",
                    if below_durable {
                        " (below the durable offset recorded in the checkpoint)"
                    } else {
                        ""
                    }
                )),
            ));
        }
    }
    if let Some(d) = durable {
        if scan.end < d && mode != RecoveryMode::TolerateAnyCorruption {
            return Err(Error::corruption(
                file_of(scan.end),
                scan.end,
                CorruptionKind::Invalid(format!(
                    "valid commit log data ends at {} (zeros or missing files follow) but the \
                     checkpoint records {d} as durable",
                    scan.end
                )),
            ));
        }
    }
    Ok(())
}

/// The highest queue offset of each queue among the records recovery scanned: a queue whose
/// end is at or below it lost units (a deleted or truncated consume queue file) that lie in the
/// scanned range, and is refilled by [`backfill_queues`].
#[derive(Debug, Default)]
pub(crate) struct QueueTails {
    seen: HashMap<String, Vec<i64>>,
}

impl QueueTails {
    /// Notes one valid record (NOT and COMMIT records only, like dispatch).
    pub(crate) fn note(&mut self, rec: &rocketstore_format::RecordView<'_>) {
        use rocketstore_format::sysflag;
        let t = sysflag::transaction_type(rec.sys_flag);
        if t != sysflag::TRANSACTION_NOT_TYPE && t != sysflag::TRANSACTION_COMMIT_TYPE {
            return;
        }
        if !rocketstore_format::is_safe_topic_dir(rec.topic) {
            return; // never dispatched to a consume queue
        }
        let Ok(qid) = usize::try_from(rec.queue_id) else {
            return;
        };
        if qid > 65_536 {
            return;
        }
        let slots = match self.seen.get_mut(rec.topic) {
            Some(v) => v,
            None => self.seen.entry(rec.topic.to_string()).or_default(),
        };
        if slots.len() <= qid {
            slots.resize(qid + 1, -1);
        }
        if let Some(s) = slots.get_mut(qid) {
            *s = (*s).max(rec.queue_offset);
        }
    }

    /// Queues (with a valid queue id) whose consume queue ends at or before a scanned record.
    pub(crate) fn lagging(&self, cqs: &ConsumeQueueStore, max_qid: i32) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for (topic, slots) in &self.seen {
            for (qid, &max_seen) in slots.iter().enumerate() {
                let Ok(qid) = i32::try_from(qid) else {
                    continue;
                };
                if max_seen < 0 || qid > max_qid {
                    continue;
                }
                let behind = cqs
                    .get(topic, qid)
                    .is_none_or(|q| max_seen >= q.max_offset());
                if behind {
                    out.push((topic.clone(), qid));
                }
            }
        }
        out
    }
}

/// True if `unit` at `cq_offset` of `q` points at a record of that queue with that queue
/// offset and size.
pub(crate) fn unit_matches(
    log: &CommitLog,
    q: &ConsumeQueue,
    cq_offset: i64,
    unit: &CqUnit,
) -> bool {
    if unit.phy_offset < 0 || unit.size <= 0 {
        return false;
    }
    let Some(r) = log.record_at_sized(unit.phy_offset as u64, unit.size as usize) else {
        return false;
    };
    let opts = DecodeOptions {
        check_crc: false,
        expected_physical_offset: Some(unit.phy_offset),
        ..DecodeOptions::default()
    };
    match decode_record(r.bytes(), &opts) {
        Ok(Decoded::Message(v)) => {
            v.topic == q.topic()
                && v.queue_id == q.queue_id()
                && v.queue_offset == cq_offset
                && v.total_size == unit.size
        }
        _ => false,
    }
}

/// Cuts off every consume queue's trailing units that do not point at their record (after
/// commit log recovery). Returns the queues cut.
pub(crate) fn repair_cq_tails(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
) -> Result<Vec<(String, i32)>> {
    let mut cut = Vec::new();
    // Units below the commit log's minimum point at deleted files (cleanup): they are expected.
    let min = i64::try_from(log.min_offset()).unwrap_or(i64::MAX);
    let good = |q: &ConsumeQueue, off: i64, u: &CqUnit| {
        u.is_prefill() || (u.phy_offset >= 0 && u.phy_offset < min) || unit_matches(log, q, off, u)
    };
    for q in cqs.all() {
        let Some((last, unit)) = q.last_unit() else {
            continue;
        };
        if good(&q, last, &unit) {
            continue;
        }
        let mut keep = last;
        while keep > q.min_offset() {
            let prev = keep - 1;
            match q.get(prev) {
                Some(u) if good(&q, prev, &u) => break,
                Some(_) => keep = prev,
                None => break,
            }
        }
        q.truncate_to_offset(keep)?;
        cut.push((q.topic().to_string(), q.queue_id()));
    }
    Ok(cut)
}

/// Refills queues that lost units, from the commit log, up to `from` (where dispatch resumes):
/// the queues in `suspects`, queues whose consume queue reported a damaged end, and queues for
/// which a record in `[from, checked_to)` carries a queue offset beyond the queue's end (the
/// recovery scan already found those in the range it read, see [`QueueTails`]). A queue that
/// cannot be refilled without a hole is rebuilt from the commit log's start. Returns the number
/// of such queues and the units written.
pub(crate) fn backfill_queues(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    cfg: &StoreConfig,
    suspects: Vec<(String, i32)>,
    from: u64,
    checked_to: u64,
) -> Result<(usize, u64)> {
    let delay_levels = cfg.delay_levels();
    let max_qid = max_queue_id(cfg);
    let mut lagging: HashSet<(String, i32)> = suspects.into_iter().collect();
    for q in cqs.all() {
        if q.damaged_tail() {
            lagging.insert((q.topic().to_string(), q.queue_id()));
        }
    }
    let min = log.min_offset();
    log.for_each_record(from.max(min), checked_to, |rec, _| {
        let req = dispatch_request(rec, &delay_levels);
        if !req.goes_to_cq() || !(0..=max_qid).contains(&req.queue_id) {
            return Ok(());
        }
        let behind = match cqs.get(req.topic, req.queue_id) {
            Some(q) => {
                i64::from(req.msg_size).saturating_add(req.commitlog_offset) > q.max_physic_offset()
                    && req.queue_offset > q.max_offset()
            }
            None => req.queue_offset > 0,
        };
        if behind {
            lagging.insert((req.topic.to_string(), req.queue_id));
        }
        Ok(())
    })?;
    if lagging.is_empty() {
        return Ok((0, 0));
    }
    let start_of = |key: &(String, i32)| -> u64 {
        cqs.get(&key.0, key.1)
            .map(|q| q.max_physic_offset())
            .filter(|m| *m >= 0)
            .map_or(min, |m| (m as u64).max(min))
    };
    let mut written = 0;
    let mut rebuild: HashSet<(String, i32)> = HashSet::new();
    let pass = |keys: &HashSet<(String, i32)>,
                start: u64,
                rebuild: &mut HashSet<(String, i32)>|
     -> Result<u64> {
        let mut n = 0;
        let mut queues: HashMap<(String, i32), Arc<ConsumeQueue>> = HashMap::new();
        log.for_each_record(start, from.max(start), |rec, _| {
            let req = dispatch_request(rec, &delay_levels);
            if !req.goes_to_cq() {
                return Ok(());
            }
            let key = (req.topic.to_string(), req.queue_id);
            if !keys.contains(&key) || rebuild.contains(&key) {
                return Ok(());
            }
            let q = match queues.get(&key) {
                Some(q) => Arc::clone(q),
                None => {
                    let q = cqs.find_or_create(req.topic, req.queue_id)?;
                    queues.insert(key.clone(), Arc::clone(&q));
                    q
                }
            };
            let unit = CqUnit {
                phy_offset: req.commitlog_offset,
                size: req.msg_size,
                tags_code: req.tags_code,
            };
            let rec_end = i64::from(req.msg_size).saturating_add(req.commitlog_offset);
            if rec_end <= q.max_physic_offset() || req.queue_offset < q.max_offset() {
                return Ok(());
            }
            if req.queue_offset > q.max_offset() && q.file_count() > 0 {
                // Units in between are gone from the commit log's scanned range.
                rebuild.insert(key);
                return Ok(());
            }
            if q.put(unit, req.queue_offset)? {
                n += 1;
            }
            Ok(())
        })?;
        Ok(n)
    };
    let start = lagging.iter().map(start_of).min().unwrap_or(min);
    written += pass(&lagging, start, &mut rebuild)?;
    if !rebuild.is_empty() {
        for (topic, qid) in &rebuild {
            if let Some(q) = cqs.get(topic, *qid) {
                q.destroy()?;
            }
        }
        let keys = std::mem::take(&mut rebuild);
        written += pass(&keys, min, &mut rebuild)?;
    }
    Ok((lagging.len(), written))
}

/// Checks the index files before they are loaded (writable stores): the first file whose size
/// is wrong, or whose header is impossible (offsets outside `[0, log_end]` or decreasing,
/// timestamps decreasing, counts above the configured slots and entries), is deleted together
/// with every newer file; re-dispatch rebuilds them. If no file has the configured size the
/// directory is left alone (a configuration mismatch, which loading reports). Returns the files
/// deleted.
pub(crate) fn precheck_index_dir(
    root: &Path,
    slots: u32,
    entries: u32,
    log_end: u64,
    sync: bool,
) -> Result<usize> {
    let dir = root.join(INDEX_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {}
        _ => return Ok(0),
    }
    let size = index_file_size(slots, entries);
    let mut files: Vec<(String, PathBuf, u64)> = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io("read_dir", &dir, e))? {
        let e = e.map_err(|e| Error::io("read_dir", &dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        files.push((name, path, meta.len()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if !files.iter().any(|f| f.2 == size) {
        return Ok(0);
    }
    let log_end = i64::try_from(log_end).unwrap_or(i64::MAX);
    let mut prev: Option<IndexHeader> = None;
    let mut bad = None;
    for (i, (_, path, len)) in files.iter().enumerate() {
        let header = if *len == size {
            read_header(path)?
        } else {
            None
        };
        let ok = header.is_some_and(|h| {
            (0..=log_end).contains(&h.begin_phy_offset)
                && (h.begin_phy_offset..=log_end).contains(&h.end_phy_offset)
                && h.begin_timestamp >= 0
                && h.end_timestamp >= h.begin_timestamp
                && (0..=slots as i64).contains(&i64::from(h.hash_slot_count))
                && (0..=entries as i64).contains(&i64::from(h.index_count))
                && prev.is_none_or(|p| {
                    h.begin_phy_offset >= p.begin_phy_offset
                        && h.begin_timestamp >= p.begin_timestamp
                })
        });
        if !ok {
            bad = Some(i);
            break;
        }
        prev = header;
    }
    let Some(first_bad) = bad else {
        return Ok(0);
    };
    let doomed = &files[first_bad..];
    for (_, path, _) in doomed {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("unlink", path.as_path(), e)),
        }
    }
    if sync {
        fsync_dir(&dir)?;
    }
    Ok(doomed.len())
}

fn read_header(path: &Path) -> Result<Option<IndexHeader>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut buf = [0u8; INDEX_HEADER_SIZE];
    match f.read_exact(&mut buf) {
        Ok(()) => Ok(IndexHeader::decode(&buf)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}
