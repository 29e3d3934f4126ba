//! Recovery at open (spec §7.3–§7.5): from the files as found to a store whose commit log,
//! consume queues, index and queue offset table agree.
//!
//! [`Recovery::run`] takes these steps, in this order:
//! 1. **Consume queue files**: each queue keeps its files up to the last whole unit.
//! 2. **Walk the commit log** ([`Recovery::walk`]): from the checkpoint's recovery window after a
//!    crash (issue 17), from the end a clean shutdown recorded in the checkpoint
//!    (`normal_recovery_from_checkpoint`), else from the chosen start file (the last three files
//!    after a clean shutdown; the checkpoint's file after a crash), checking each record (CRC if
//!    configured) up to the first that does not validate. The walk runs on two threads
//!    ([`split_scan`]) with the result of one sequential walk.
//! 3. **Accept the end** ([`accept`], [`quarantine`]): damage or a short end below the
//!    checkpoint's durable offset is refused (or quarantined) as `recovery_mode` says.
//! 4. **Cut the commit log** at the accepted end (later files removed, the rest zero-filled).
//! 5. **Cut the consume queues and the index** to the end (after a power loss, to the window's
//!    start and the index's durable mark) ([`Recovery::cut_to_end`]).
//! 6. **Find the queues that lost units** ([`Recovery::lagging_queues`]): wrong last units
//!    ([`queues::repair_cq_tails`]), units of the walked range naming other records
//!    ([`cq_check`]), and queues behind a walked record.
//! 7. **Refill those queues** from the commit log ([`queues::backfill_queues`]) and
//!    **re-dispatch** everything any structure lacks ([`Recovery::redispatch`]; with two cores
//!    the index is built on a second thread from the handed-over keys).
//! 8. **Rebuild the queue offset table** from the consume queues.
//!
//! A read-only open does steps 1–3 and 8 only: it changes nothing on disk. The index files are
//! checked before they are loaded ([`index_check`]), and an abort marker is written before step 1,
//! so a crash during recovery is recovered as abnormal again (recovery is resumable).

pub(crate) mod accept;
mod by_topic;
pub(crate) mod cq_check;
mod cut;
pub(crate) mod index_check;
pub(crate) mod quarantine;
pub(crate) mod queues;
pub(crate) mod split_scan;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rocketstore_format::{decode_record, Checkpoint, DecodeOptions, Decoded, RecoveryWindow};

use crate::commitlog::{CommitLog, ScanEnd};
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::error::Result;
use crate::index::IndexService;
use crate::util::boot_id;

use queues::QueueTails;

/// What recovery found when the store was opened.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// True if the previous run did not shut down cleanly (the abort file was present).
    pub abnormal: bool,
    /// Recovered end of the commit log.
    pub end_offset: u64,
    /// Records scanned.
    pub records: u64,
    /// Where and why the scan stopped before the end, if it found damage (a torn tail).
    pub truncated_at: Option<(u64, String)>,
    /// Commit log files removed because they lay past the end.
    pub files_removed: usize,
    /// Index of the first commit log file recovery scanned.
    pub scan_start_file: usize,
    /// Records dispatched to consume queues and index files during recovery.
    pub redispatched: u64,
    /// The durable commit log offset recorded in the checkpoint (our extension), if any:
    /// recovery never truncates below it unless `recovery_mode` is `tolerate_any_corruption`.
    pub durable_offset: Option<u64>,
    /// Consume queues whose units were lost or wrong and were refilled from the commit log.
    pub repaired_queues: usize,
    /// Consume queue units written by that refill.
    pub backfilled_units: u64,
    /// Index files deleted at open because their size or header was impossible (they are
    /// rebuilt by re-dispatch).
    pub index_files_removed: usize,
    /// `recovery_mode = "quarantine"`: the directory under `<root>/quarantine/` holding the
    /// commit log files recovery cut because of damage below the durable offset, and their
    /// `report.json`.
    pub quarantine_dir: Option<PathBuf>,
    /// Consume queues in which a unit naming a record of the recovery window pointed at another
    /// record: cut there and refilled from the commit log (see `cq_check`).
    pub mismatched_queues: usize,
    /// Commit log offset where the recovery walk started: after a crash, the start of the
    /// checkpoint's recovery window when it has one (issue 17), else the start of
    /// `scan_start_file`.
    pub scan_start_offset: u64,
    /// Bytes of commit log the recovery walk read (from `scan_start_offset` to the recovered
    /// end, plus a fallback walk if the window's start was unusable).
    pub walked_bytes: u64,
    /// Abnormal recovery started from the checkpoint's recovery window (a clean open that
    /// started at the end its shutdown recorded reports `false`, `walked_bytes` 0 unless
    /// records lay past that end).
    pub from_window: bool,
    /// The window was written in an earlier boot (or its boot is unknown): the page cache may
    /// have been lost, so consume queues were cut to the window's start and the index to its
    /// durable mark before re-dispatch.
    pub power_loss: bool,
}

/// The loaded structures recovery works on and what the open found (abort marker, checkpoint).
pub(crate) struct Recovery<'a> {
    pub(crate) log: &'a CommitLog,
    pub(crate) cqs: &'a ConsumeQueueStore,
    pub(crate) index: Option<&'a IndexService>,
    pub(crate) dispatcher: &'a Dispatcher,
    pub(crate) cfg: &'a StoreConfig,
    /// The abort marker was present: the previous run did not shut down cleanly.
    pub(crate) abnormal: bool,
    /// The checkpoint, if it decoded.
    pub(crate) cp: Option<&'a Checkpoint>,
    /// The checkpoint's recovery window (writable opens after a crash only).
    pub(crate) window: Option<RecoveryWindow>,
    pub(crate) read_only: bool,
    /// A record boundary to cut the commit log back to (`Store::open_truncated`, see [`cut`]).
    pub(crate) cut: Option<u64>,
}

/// The result of step 2: where the walk started and ended, and what it noted on the way.
struct Walk {
    scan: ScanEnd,
    /// Offset where the accepted walk started.
    from: u64,
    /// Index of the file it started in.
    start_file: usize,
    from_window: bool,
    /// Bytes walked, a fallback walk included.
    walked: u64,
    /// The checkpoint's durable offset (writable opens only).
    durable: Option<u64>,
    /// The window was written in an earlier boot: the page cache may have been lost.
    power_loss: bool,
    /// Store time of the last record walked, at least that of the checkpoint when the walk
    /// started at a clean shutdown's end.
    last_store_timestamp: i64,
    tails: QueueTails,
    cq_window: cq_check::Window,
}

/// What steps 5–7 did (zero for a read-only open).
#[derive(Default)]
struct Repair {
    redispatched: u64,
    repaired_queues: usize,
    backfilled_units: u64,
    mismatched_queues: usize,
}

impl Recovery<'_> {
    /// Runs the recovery steps listed in the module documentation.
    pub(crate) fn run(&self) -> Result<RecoveryReport> {
        let files = self.log.queue().len();
        self.cqs.recover_all()?; // 1
        let walk = self.apply_cut(self.walk())?; // 2 (and a requested cut)
        let quarantine_dir = quarantine::check_or_quarantine(
            self.log
                .queue()
                .dir()
                .parent()
                .unwrap_or(self.log.queue().dir()),
            self.log,
            self.cfg,
            walk.durable,
            &walk.scan,
            self.read_only,
        )?; // 3
        let files_removed = self.log.truncate_to(walk.scan.end)?; // 4
        if !self.read_only && self.abnormal {
            self.resync(&walk)?; // 4b
        }
        let repair = if self.read_only {
            self.dispatcher.set_reput_from(walk.scan.end);
            Repair::default()
        } else {
            self.cut_to_end(&walk, files)?; // 5
            let (suspects, mismatched_queues) = self.lagging_queues(&walk)?; // 6
            Repair {
                mismatched_queues,
                ..self.redispatch(&walk, suspects)? // 7
            }
        };
        self.rebuild_queue_offsets(walk.last_store_timestamp); // 8
        Ok(RecoveryReport {
            abnormal: self.abnormal,
            end_offset: walk.scan.end,
            records: walk.scan.records,
            truncated_at: walk.scan.damage,
            files_removed,
            scan_start_file: walk.start_file,
            redispatched: repair.redispatched,
            durable_offset: walk.durable,
            repaired_queues: repair.repaired_queues,
            backfilled_units: repair.backfilled_units,
            index_files_removed: 0,
            quarantine_dir,
            mismatched_queues: repair.mismatched_queues,
            scan_start_offset: walk.from,
            walked_bytes: walk.walked,
            from_window: walk.from_window,
            power_loss: walk.power_loss,
        })
    }

    /// Step 2. After a crash with a checkpoint recovery window (issue 17), the walk starts at
    /// the window's start offset, whatever the store's size; after a clean shutdown whose
    /// checkpoint has our extension (and `normal_recovery_from_checkpoint`), at the durable end
    /// that shutdown recorded (everything below it was flushed, dispatched and indexed before
    /// the checkpoint was written). Damage right at a start below the durable offset falls back
    /// to the full rule. Otherwise the walk starts at the first of the last three files after a
    /// clean shutdown, at the checkpoint's file after a crash.
    fn walk(&self) -> Walk {
        let (log, cfg, cp) = (self.log, self.cfg, self.cp);
        let max_record = u32::try_from(cfg.max_record_size()).unwrap_or(u32::MAX);
        let files = log.queue().len();
        let full_start = |abnormal: bool| {
            if abnormal {
                let min_ts = cp.map_or(0, |c| {
                    if cfg.message_index_enable {
                        c.min_timestamp_index()
                    } else {
                        c.min_timestamp()
                    }
                });
                log.abnormal_start_index(min_ts, max_record)
            } else {
                files.saturating_sub(3)
            }
        };
        // The walk's start from the checkpoint as (file index, position in the file), if it
        // lies in a file or at the end of the last one (the next file's creation was not
        // durable yet: it is made durable by the file's first flush, and the window may start
        // at that file; a clean shutdown's end may be a full last file's end).
        let window_start = self.checkpoint_start().and_then(|s| {
            let s = u64::try_from(s).ok()?;
            if s < log.min_offset() {
                return None;
            }
            let all = log.queue().files();
            let i = all.iter().rposition(|f| f.from() <= s)?;
            let pos = usize::try_from(s - all.get(i)?.from()).ok()?;
            let size = all.get(i)?.size();
            (pos < size || (pos == size && i + 1 == all.len())).then_some((i, pos))
        });
        let power_loss = self
            .window
            .is_some_and(|w| w.boot_id == [0; 16] || w.boot_id != boot_id());
        // A read-only open changes nothing on disk and may race a live writer (which keeps
        // flushing and rewriting the checkpoint), so only a writable open holds the scan to the
        // checkpoint's durable offset.
        let durable = accept::durable_offset(cp).filter(|_| !self.read_only);
        let mut walked = 0;
        let mut from_window = false;
        let mut scan = None;
        let mut start = 0;
        if let Some((i, pos)) = window_start {
            let begin = log.queue().files().get(i).map_or(0, |f| f.from()) + pos as u64;
            let (s, notes) = self.scan(i, pos, max_record);
            walked += s.end.saturating_sub(begin);
            // Damage right at a start below the durable offset (a record must be there) falls
            // back to the full rule; at or past the durable offset it is just a torn tail.
            if s.records > 0 || s.damage.is_none() || durable.is_none_or(|d| begin >= d) {
                start = i;
                from_window = self.window.is_some();
                scan = Some((s, begin, notes));
            }
        }
        // A walk from a clean shutdown's end reads no record when nothing was appended after
        // it: the checkpoint's store time of the last flushed record keeps new store times
        // from going backwards.
        let floor_ts = match (&scan, self.window, cp) {
            (Some(_), None, Some(c)) => c.physic_msg_timestamp,
            _ => 0,
        };
        let (scan, from, notes) = match scan {
            Some(s) => s,
            None => {
                start = full_start(self.abnormal);
                let begin = log.queue().files().get(start).map_or(0, |f| f.from());
                let (s, notes) = self.scan(start, 0, max_record);
                walked += s.end.saturating_sub(begin);
                let begin = begin.min(s.end);
                (s, begin, notes)
            }
        };
        let last_store_timestamp = scan.last_store_timestamp.max(floor_ts);
        Walk {
            scan,
            from,
            start_file: start,
            from_window,
            walked,
            durable,
            power_loss,
            last_store_timestamp,
            tails: notes.tails,
            cq_window: notes.cq_window,
        }
    }

    /// Where the checkpoint says the walk may start: the recovery window's start after a crash,
    /// the durable end a clean shutdown recorded (with `normal_recovery_from_checkpoint`).
    fn checkpoint_start(&self) -> Option<i64> {
        if let Some(w) = self.window {
            return Some(w.start_offset);
        }
        let ext = self.cp?.ext?;
        (!self.abnormal && ext.clean_shutdown && self.cfg.normal_recovery_from_checkpoint)
            .then_some(ext.durable_commitlog_offset)
    }

    /// The walk's scan from position `pos` of file `index` ([`split_scan`]: on two threads
    /// when the machine has two cores, with the result of one sequential scan).
    fn scan(&self, index: usize, pos: usize, max_record: u32) -> (ScanEnd, split_scan::Notes) {
        let file_size = usize::try_from(self.cfg.mapped_file_size_commit_log).unwrap_or(usize::MAX);
        split_scan::scan(
            self.log,
            index,
            pos,
            self.cfg.check_crc_on_recover,
            max_record,
            split_scan::chunk_size(file_size),
            threads(),
        )
    }

    /// Step 4b (writable, after a crash): the recovered commit log, which truncation declared
    /// flushed, is made durable before any checkpoint claims it. What the walk found may be
    /// only in the page cache (a kill -9 of an ASYNC writer), or in pages the kernel marked
    /// clean after a failed writeback (a same-boot reopen after a failed msync): from the
    /// checkpoint's durable offset the bytes are written back over themselves and msynced.
    /// Without our checkpoint extension (a broker's store) the walked range is msynced only
    /// (it may be several files). A failure fails the open: nothing is claimed.
    fn resync(&self, walk: &Walk) -> Result<()> {
        let end = walk.scan.end;
        let (from, rewrite) = match walk.durable {
            Some(d) => (d.min(end), true),
            None => (walk.from.min(end), false),
        };
        self.log
            .resync(from.max(self.log.min_offset()), end, rewrite)?;
        // The consume queue and index files the crashed process created may not be durable
        // by name either: made durable before the flush services claim anything in them.
        self.cqs.sync_existing()?;
        if let Some(index) = self.index {
            index.adopt_existing();
        }
        Ok(())
    }

    /// Step 5: consume queues and index cut to the accepted end. With no commit log file left
    /// (`files` is the count before step 4), both are destroyed. After a power loss, units past
    /// the window's start may be torn: the queues are cut there (and anything past the walk's
    /// start), the index to the window's durable mark, and everything after is re-dispatched.
    fn cut_to_end(&self, walk: &Walk, files: usize) -> Result<()> {
        let (log, cqs, end) = (self.log, self.cqs, walk.scan.end);
        if files == 0 || log.queue().len() == 0 {
            cqs.destroy_all()?;
            if let Some(index) = self.index {
                index.destroy_all()?;
            }
        }
        let window_offset = self.window.map_or(walk.from, |w| {
            u64::try_from(w.start_offset).unwrap_or(0).min(walk.from)
        });
        cqs.truncate_all(if walk.power_loss { window_offset } else { end })?;
        if let (true, Some(index), Some(w)) = (walk.power_loss, self.index, self.window) {
            let store_time_of = |phy: i64| {
                let rec = log.record_at(u64::try_from(phy).ok()?)?;
                rocketstore_format::peek_store_timestamp(rec.bytes())
            };
            let cut = w.index_file != 0
                && index.cut_to_mark(w.index_file, w.index_count, end, &store_time_of)?;
            if !cut {
                index.destroy_all()?;
            }
        }
        Ok(())
    }

    /// Step 6: units that do not point at their record are cut off; the queues they belong to
    /// and queues that lost units are returned (refilled in step 7), with the number of queues
    /// whose units named other records. The index loses entries past the end.
    fn lagging_queues(&self, walk: &Walk) -> Result<(Vec<(String, i32)>, usize)> {
        let (log, cqs) = (self.log, self.cqs);
        let mut suspects = queues::repair_cq_tails(log, cqs)?;
        let mismatched = cq_check::cut_mismatched_units(log, cqs, &walk.cq_window)?;
        let mismatched_queues = mismatched.len();
        suspects.extend(mismatched);
        suspects.extend(walk.tails.lagging(cqs, queues::max_queue_id(self.cfg)));
        if let Some(index) = self.index {
            let store_time_of = |phy: i64| {
                let rec = log.record_at(u64::try_from(phy).ok()?)?;
                rocketstore_format::peek_store_timestamp(rec.bytes())
            };
            index.truncate_after(walk.scan.end, &store_time_of)?;
            // Index files from another history of the log (a broker's truncate and rewrite)
            // name old record starts inside the new records: dropped, re-dispatch re-indexes.
            let names_record = |phy: i64, store_ts: i64| {
                let opts = DecodeOptions {
                    check_crc: false,
                    expected_physical_offset: Some(phy),
                    ..DecodeOptions::default()
                };
                u64::try_from(phy)
                    .ok()
                    .and_then(|p| log.record_at(p))
                    .is_some_and(|r| {
                        matches!(decode_record(r.bytes(), &opts),
                            Ok(Decoded::Message(v)) if v.store_timestamp == store_ts)
                    })
            };
            index.drop_stale(log.min_offset(), &names_record)?;
        }
        Ok((suspects, mismatched_queues))
    }

    /// Step 7: dispatch from the smallest offset any structure may lack (duplicates are
    /// skipped), after refilling the `suspects` and every queue found behind on the way.
    fn redispatch(&self, walk: &Walk, suspects: Vec<(String, i32)>) -> Result<Repair> {
        let (log, cqs) = (self.log, self.cqs);
        let mut from = match cqs.max_physic_offset() {
            m if m >= 0 => m as u64,
            _ => log.min_offset(),
        };
        if let Some(index) = self.index {
            from = from.min(index.last_end_phy_offset().max(0) as u64);
        }
        if self.abnormal {
            from = from.min(walk.from);
        }
        let from = from.max(log.min_offset());
        let (repaired_queues, backfilled_units) =
            queues::backfill_queues(log, cqs, self.cfg, suspects, from, walk.from.max(from))?;
        self.dispatcher.set_reput_from(from);
        // With two cores the index is built on a second thread from the handed-over keys.
        let redispatched = self
            .dispatcher
            .dispatch_until_split(log, walk.scan.end, threads())?;
        Ok(Repair {
            redispatched,
            repaired_queues,
            backfilled_units,
            mismatched_queues: 0,
        })
    }

    /// Step 8: the commit log's queue offset table, from the consume queues' ends.
    fn rebuild_queue_offsets(&self, last_store_timestamp: i64) {
        let mut table: HashMap<String, Vec<i64>> = HashMap::new();
        for q in self.cqs.all() {
            let slots = table.entry(q.topic().to_string()).or_default();
            let qid = q.queue_id() as usize;
            if slots.len() <= qid {
                slots.resize(qid + 1, 0);
            }
            slots[qid] = q.max_offset();
        }
        self.cqs.correct_min_offsets(self.log.min_offset());
        self.log.set_queue_offsets(table, last_store_timestamp);
    }
}

/// Threads recovery's walk and re-dispatch use: two when the machine has two cores.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

/// The consume queue file size of an existing store (a foreign broker may use a non-default
/// `mappedFileSizeConsumeQueue`): the size of the first non-empty file found, if it is a
/// multiple of 20.
pub(crate) fn infer_cq_file_size(root: &Path) -> Option<u64> {
    let cq = root.join("consumequeue");
    for topic in std::fs::read_dir(cq).ok()?.flatten() {
        for queue in std::fs::read_dir(topic.path())
            .ok()
            .into_iter()
            .flatten()
            .flatten()
        {
            for f in std::fs::read_dir(queue.path())
                .ok()
                .into_iter()
                .flatten()
                .flatten()
            {
                let Ok(meta) = std::fs::symlink_metadata(f.path()) else {
                    continue;
                };
                if meta.is_file() && meta.len() > 0 && meta.len() % 20 == 0 {
                    return Some(meta.len());
                }
            }
        }
    }
    None
}
