//! Expired-file cleanup (spec §10): RocketMQ's `CleanCommitLogService`,
//! `CleanConsumeQueueService` and `IndexService.deleteExpiredFile`, in one pass.
//!
//! A pass (every `clean_resource_interval` ms on the thread `rs-cleanup`, or on demand through
//! [`crate::Store::delete_expired_files`]):
//! 1. **Disk check** (`isSpaceToDelete`), for the commit log's partition and then the store
//!    root's: usage above `disk_space_warning_level_ratio` marks the disk full (puts are refused
//!    with [`Error::DiskFull`]) and asks for immediate cleaning; above
//!    `disk_space_clean_forcibly_ratio` asks for immediate cleaning; otherwise the disk is marked
//!    OK again (puts resume). Usage above `disk_max_used_space_ratio`, or unreadable, allows
//!    deleting expired files at any hour.
//! 2. **Commit log** (`deleteExpiredFileByTime`), when the local hour is one of `delete_when`, the
//!    disk asks for it, or the pass is on demand: oldest first, a file is deleted when
//!    `now >= mtime + file_reserved_time` hours, or at once when immediate cleaning was asked and
//!    `clean_file_forcibly_enable` is set (or `force`). Never the last file, never from the middle
//!    (the first file that stays ends the pass), at most `delete_file_batch_max` files per pass
//!    with `delete_commit_log_files_interval` ms between two deletions. Ours: a file is only
//!    deleted once it is wholly flushed and dispatched, so cleanup can never remove data that
//!    is not durable or not yet in the consume queues.
//! 3. **Consume queues** (`deleteExpiredFile(minOffset)`, §5.7), when the commit log's minimum
//!    offset grew since the last pass: every queue drops its files whose last unit points below
//!    it and corrects its min offset; `delete_consume_queue_files_interval` ms after each queue
//!    that deleted something. Then **index files** whose end offset is below it (§6.5).
//!
//! Deleting a file unlinks it and drops it from its queue; the mapping lives until the last
//! `Arc` holding the file is dropped (mmap invariant 5), so a reader in the middle of a file
//! keeps working and the disk blocks are released when it lets go. A read below the new
//! minimum gets `OFFSET_TOO_SMALL` (or `MESSAGE_WAS_REMOVING` while a consume queue still points
//! at a deleted file).
//!
//! Time and disk usage are injectable ([`Clock`], [`DiskUsageProbe`]) so tests need not wait
//! for 4 a.m. or fill a disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{TimeZone, Timelike};

use crate::commitlog::CommitLog;
use crate::config::{parse_delete_when, StoreConfig};
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::error::{Error, Result};
use crate::index::IndexService;
use crate::service::Service;
use crate::signal::Wake;
use crate::util::{fsync_dir, lock, now_ms};

/// The cleanup service's clock: milliseconds since the epoch. The local hour (for
/// `delete_when`) is derived from it in the local time zone.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Disk usage of the partition holding a path, as a ratio in `[0, 1]` (RocketMQ
/// `getDiskPartitionSpaceUsedPercent`: `(total - free) / (used + usable)`, rounded up to the next
/// percent); `None` when it cannot be read.
pub type DiskUsageProbe = Arc<dyn Fn(&Path) -> Option<f64> + Send + Sync>;

/// What one cleanup pass did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CleanupReport {
    /// Commit log files deleted, oldest first.
    pub commitlog_files_deleted: Vec<PathBuf>,
    /// Consume queue files deleted.
    pub consume_queue_files_deleted: usize,
    /// Index files deleted.
    pub index_files_deleted: usize,
    /// The commit log's minimum offset after the pass.
    pub min_commitlog_offset: u64,
    /// Highest disk usage seen (commit log and store root partitions), if readable.
    pub disk_usage: Option<f64>,
    /// True if puts are refused after the pass (usage above `disk_space_warning_level_ratio`).
    pub disk_full: bool,
    /// The local hour is one of `delete_when`.
    pub time_to_delete: bool,
    /// The disk usage asked for deletion (above `disk_max_used_space_ratio`, or unreadable).
    pub space_to_delete: bool,
    /// Files were deleted regardless of age (usage above `disk_space_clean_forcibly_ratio` with
    /// `clean_file_forcibly_enable`, or `force`).
    pub clean_immediately: bool,
}

/// How a pass was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// The service's timer: commit log files only at `delete_when` hours or on disk pressure.
    Scheduled,
    /// On demand (RocketMQ `executeDeleteFilesManually`): expired files at any hour.
    Manual,
    /// On demand, deleting every deletable commit log file whatever its age.
    Force,
}

/// The real disk probe (`statvfs`).
pub(crate) fn statvfs_usage(path: &Path) -> Option<f64> {
    let s = rustix::fs::statvfs(path).ok()?;
    let frsize = u128::from(s.f_frsize.max(1));
    let total = u128::from(s.f_blocks) * frsize;
    let free = u128::from(s.f_bfree) * frsize;
    let usable = u128::from(s.f_bavail) * frsize;
    let used = total.saturating_sub(free);
    let entire = used + usable;
    if entire == 0 {
        return None;
    }
    let round = u128::from((used * 100) % entire != 0);
    Some(((used * 100 / entire + round) as f64) / 100.0)
}

#[derive(Debug, Clone)]
struct Settings {
    hours: Vec<u32>,
    reserved_ms: i64,
    delete_interval: Duration,
    cq_delete_interval: Duration,
    batch_max: usize,
    max_used: f64,
    warning: f64,
    forcibly: f64,
    clean_forcibly: bool,
    fsync_dir: bool,
}

impl Settings {
    fn new(cfg: &StoreConfig) -> Self {
        Self {
            hours: parse_delete_when(&cfg.delete_when).unwrap_or_default(),
            reserved_ms: i64::try_from(cfg.file_reserved_time)
                .unwrap_or(i64::MAX)
                .saturating_mul(3_600_000),
            delete_interval: Duration::from_millis(cfg.delete_commit_log_files_interval),
            cq_delete_interval: Duration::from_millis(cfg.delete_consume_queue_files_interval),
            batch_max: usize::try_from(cfg.delete_file_batch_max).unwrap_or(usize::MAX),
            max_used: cfg.disk_max_used_space_ratio as f64 / 100.0,
            warning: cfg.disk_space_warning_level_ratio as f64 / 100.0,
            forcibly: cfg.disk_space_clean_forcibly_ratio as f64 / 100.0,
            clean_forcibly: cfg.clean_file_forcibly_enable,
            fsync_dir: cfg.fsync_directory,
        }
    }
}

/// The cleaner shared by the service thread and the store.
pub(crate) struct Cleaner {
    root: PathBuf,
    log: Arc<CommitLog>,
    cqs: Arc<ConsumeQueueStore>,
    index: Option<Arc<IndexService>>,
    dispatcher: Arc<Dispatcher>,
    settings: Settings,
    writable: bool,
    clock: RwLock<Clock>,
    probe: RwLock<DiskUsageProbe>,
    disk_full: AtomicBool,
    last_usage_bits: AtomicU64,
    /// Commit log min offset the consume queues were last cleaned for.
    cq_cleaned_for: AtomicU64,
    /// Serializes passes (service thread and on-demand calls).
    pass: Mutex<()>,
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Cleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaner")
            .field("root", &self.root)
            .field("disk_full", &self.disk_full)
            .finish_non_exhaustive()
    }
}

impl Cleaner {
    pub(crate) fn new(
        root: &Path,
        log: Arc<CommitLog>,
        cqs: Arc<ConsumeQueueStore>,
        index: Option<Arc<IndexService>>,
        dispatcher: Arc<Dispatcher>,
        cfg: &StoreConfig,
        writable: bool,
    ) -> Self {
        Self {
            root: root.to_path_buf(),
            log,
            cqs,
            index,
            dispatcher,
            settings: Settings::new(cfg),
            writable,
            clock: RwLock::new(Arc::new(now_ms)),
            probe: RwLock::new(Arc::new(statvfs_usage)),
            disk_full: AtomicBool::new(false),
            last_usage_bits: AtomicU64::new(f64::NAN.to_bits()),
            cq_cleaned_for: AtomicU64::new(0),
            pass: Mutex::new(()),
            last_error: Mutex::new(None),
        }
    }

    pub(crate) fn set_clock(&self, clock: Clock) {
        *self
            .clock
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = clock;
    }

    pub(crate) fn set_probe(&self, probe: DiskUsageProbe) {
        *self
            .probe
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = probe;
    }

    fn now(&self) -> i64 {
        let c = Arc::clone(
            &self
                .clock
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        c()
    }

    fn usage(&self, path: &Path) -> Option<f64> {
        let p = Arc::clone(
            &self
                .probe
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        p(path).filter(|u| u.is_finite())
    }

    /// True while puts are refused for lack of disk space.
    pub(crate) fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }

    /// `Err(DiskFull)` while the disk is marked full (checked by every put).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if !self.is_disk_full() {
            return Ok(());
        }
        let usage = f64::from_bits(self.last_usage_bits.load(Ordering::Acquire));
        Err(Error::DiskFull {
            path: self.log.queue().dir().to_path_buf(),
            reason: format!(
                "disk usage {:.2} is above disk_space_warning_level_ratio {:.2}; writes resume \
                 once cleanup brings it below {:.2}",
                usage, self.settings.warning, self.settings.forcibly
            ),
        })
    }

    /// The last error a scheduled pass met (scheduled passes never poison the store).
    pub(crate) fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// RocketMQ `isSpaceToDelete`: (space_to_delete, clean_immediately, max usage). Marks the
    /// disk full or OK as a side effect.
    fn check_space(&self) -> (bool, bool, Option<f64>) {
        let s = &self.settings;
        let paths = [self.log.queue().dir().to_path_buf(), self.root.clone()];
        let usages: Vec<Option<f64>> = paths.iter().map(|p| self.usage(p)).collect();
        let max = usages
            .iter()
            .flatten()
            .copied()
            .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
        if let Some(m) = max {
            self.last_usage_bits.store(m.to_bits(), Ordering::Release);
        }
        for u in usages.iter().flatten() {
            if *u > s.warning {
                self.disk_full.store(true, Ordering::Release);
                return (true, true, max);
            } else if *u > s.forcibly {
                return (true, true, max);
            }
            self.disk_full.store(false, Ordering::Release);
        }
        let space = usages.iter().any(|u| u.is_none_or(|u| u > s.max_used));
        (space, false, max)
    }

    /// One pass. Errors stop the pass; files already deleted stay deleted.
    pub(crate) fn run_pass(&self, trigger: Trigger) -> Result<CleanupReport> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.root.clone(),
            });
        }
        let _g = lock(&self.pass);
        let now = self.now();
        let hour = chrono::Local
            .timestamp_millis_opt(now)
            .single()
            .map(|t| t.hour());
        let time_to_delete = hour.is_some_and(|h| self.settings.hours.contains(&h));
        let (space_to_delete, clean_immediately, usage) = self.check_space();
        let clean_at_once =
            trigger == Trigger::Force || (clean_immediately && self.settings.clean_forcibly);
        let mut report = CleanupReport {
            time_to_delete,
            space_to_delete,
            clean_immediately: clean_at_once,
            disk_usage: usage,
            ..CleanupReport::default()
        };
        if time_to_delete || space_to_delete || trigger != Trigger::Scheduled {
            report.commitlog_files_deleted = self.delete_commit_log(now, clean_at_once)?;
        }
        let (cq, idx) = self.delete_derived()?;
        report.consume_queue_files_deleted = cq;
        report.index_files_deleted = idx;
        report.min_commitlog_offset = self.log.min_offset();
        if !report.commitlog_files_deleted.is_empty() {
            // Readers in other processes drop the files they map below the new first offset.
            self.dispatcher.publish_progress(&self.log);
        }
        if self.is_disk_full() && !report.commitlog_files_deleted.is_empty() {
            // Re-check at once so writes resume without waiting for the next pass.
            let (_, _, usage) = self.check_space();
            report.disk_usage = usage.or(report.disk_usage);
        }
        report.disk_full = self.is_disk_full();
        Ok(report)
    }

    /// `deleteExpiredFileByTime` over the commit log.
    fn delete_commit_log(&self, now: i64, clean_at_once: bool) -> Result<Vec<PathBuf>> {
        let s = &self.settings;
        let queue = self.log.queue();
        let file_size = self.log.file_size();
        let mut deleted = Vec::new();
        loop {
            if deleted.len() >= s.batch_max {
                break;
            }
            let files = queue.files();
            // Never the last file.
            let Some(first) = files.first().filter(|_| files.len() > 1) else {
                break;
            };
            // Only data that is durable and already in the consume queues and index.
            let safe_end = queue
                .flushed_where()
                .min(self.dispatcher.reput_from())
                .min(self.log.max_offset());
            if first.from() + file_size > safe_end {
                break;
            }
            let expired = first
                .modified()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .is_some_and(|mtime| now >= mtime.saturating_add(s.reserved_ms));
            if !(expired || clean_at_once) {
                break;
            }
            if !deleted.is_empty() && !s.delete_interval.is_zero() {
                std::thread::sleep(s.delete_interval);
            }
            let Some(popped) = queue.pop_first() else {
                break;
            };
            if !Arc::ptr_eq(&popped, first) {
                return Err(Error::corruption(
                    popped.path(),
                    popped.from(),
                    crate::CorruptionKind::Invalid(
                        "commit log file list changed during cleanup".into(),
                    ),
                ));
            }
            popped.destroy()?;
            deleted.push(popped.path().to_path_buf());
        }
        if !deleted.is_empty() && s.fsync_dir {
            fsync_dir(queue.dir())?;
        }
        Ok(deleted)
    }

    /// CleanConsumeQueueService: consume queues, then index files, for the commit log's minimum
    /// offset, when it grew since the last time.
    fn delete_derived(&self) -> Result<(usize, usize)> {
        let min = self.log.min_offset();
        if min == 0 || min <= self.cq_cleaned_for.load(Ordering::Acquire) {
            return Ok((0, 0));
        }
        let mut cq_deleted = 0;
        for q in self.cqs.all() {
            let n = q.delete_expired(min)?;
            cq_deleted += n;
            if n > 0 && !self.settings.cq_delete_interval.is_zero() {
                std::thread::sleep(self.settings.cq_delete_interval);
            }
        }
        let idx_deleted = match &self.index {
            Some(i) => i.delete_expired(min)?,
            None => 0,
        };
        self.cq_cleaned_for.store(min, Ordering::Release);
        Ok((cq_deleted, idx_deleted))
    }
}

/// The service loop (`rs-cleanup`).
#[derive(Debug)]
pub(crate) struct CleanupService {
    cleaner: Arc<Cleaner>,
    interval: Duration,
}

impl CleanupService {
    pub(crate) fn new(cleaner: Arc<Cleaner>, cfg: &StoreConfig) -> Self {
        Self {
            cleaner,
            interval: Duration::from_millis(cfg.clean_resource_interval),
        }
    }
}

impl Service for CleanupService {
    const NAME: &'static str = "cleanup";

    fn interval(&self) -> Duration {
        self.interval
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        // A failed deletion is retried next pass; it never fences the store (RocketMQ logs it).
        let r = self.cleaner.run_pass(Trigger::Scheduled);
        *lock(&self.cleaner.last_error) = r.err().map(|e| e.to_string());
        Ok(())
    }
}
