//! Flush and commit services (RocketMQ `FlushRealTimeService`, `GroupCommitService`,
//! `CommitRealTimeService`).
//!
//! - ASYNC_FLUSH: every `flush_interval_commit_log` ms flush at least
//!   `flush_commit_log_least_pages` pages, or whatever is dirty once
//!   `flush_commit_log_thorough_interval` ms have passed since the last thorough flush. In
//!   between, a call of at least 8 KiB of records that passes the next
//!   `flush_commit_log_writeback_bytes` boundary wakes the service to start the kernel's
//!   writeback of what is written (no wait, nothing published as durable), so the disk writes
//!   while the writer goes on and the next flush or the close has little left to wait for. Such
//!   a wake does not move the next flush.
//! - SYNC_FLUSH (group commit): woken by each put, flush everything written so far and publish
//!   the new durable offset; every waiting put whose end is covered returns at once, so many
//!   puts share one flush.
//! - Commit (transient pool only): copy written bytes from the pool buffer into the file every
//!   `commit_interval_commit_log` ms, then wake the flush service.
//!
//! A failed flush or commit poisons the store (fail-stop): `flushed` does not move past the
//! bytes it covered, every waiter gets `Poisoned`, and later puts are refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::commitlog::CommitLog;
use crate::config::{FlushDiskType, StoreConfig};
use crate::error::{Error, Result};
use crate::service::Service;
use crate::signal::{Signal, Wake};

/// The commit log flush service.
#[derive(Debug)]
pub(crate) struct FlushService {
    log: Arc<CommitLog>,
    mode: FlushDiskType,
    interval: Duration,
    least_pages: usize,
    thorough_interval: Duration,
    last_thorough: Instant,
    /// When the last flush pass (ASYNC_FLUSH) started.
    last_pass: Instant,
    /// Flush only when the interval has passed, not on every wake (`flush_commit_log_timed`).
    timed: bool,
    reput_signal: Option<Arc<Signal>>,
}

impl FlushService {
    /// Wakes the dispatcher after each flush (under SYNC_FLUSH it may only dispatch flushed
    /// bytes).
    pub(crate) fn with_reput_signal(mut self, signal: Arc<Signal>) -> Self {
        self.reput_signal = Some(signal);
        self
    }

    pub(crate) fn new(log: Arc<CommitLog>, cfg: &StoreConfig) -> Self {
        Self {
            log,
            mode: cfg.flush_disk_type,
            interval: Duration::from_millis(cfg.flush_interval_commit_log),
            least_pages: cfg.flush_commit_log_least_pages as usize,
            thorough_interval: Duration::from_millis(cfg.flush_commit_log_thorough_interval),
            last_thorough: Instant::now(),
            last_pass: Instant::now(),
            timed: cfg.flush_commit_log_timed,
            reput_signal: None,
        }
    }

    fn fail(&self, e: Error) -> Error {
        let cause = self.log.health().poison(e);
        Error::Poisoned { cause }
    }
}

impl Service for FlushService {
    const NAME: &'static str = "flush";

    fn interval(&self) -> Duration {
        match self.mode {
            // GroupCommitService waits 10 ms between swaps; puts wake it earlier.
            FlushDiskType::SyncFlush => Duration::from_millis(10),
            // What is left of the interval: a writeback wake does not postpone the flush.
            FlushDiskType::AsyncFlush => self
                .interval
                .saturating_sub(self.last_pass.elapsed())
                .max(Duration::from_millis(1)),
        }
    }

    fn run_once(&mut self, why: Wake) -> Result<()> {
        self.log.health().check()?;
        match self.mode {
            FlushDiskType::SyncFlush => {
                let target = self.log.queue().max_offset();
                let before = self.log.queue().flushed_where();
                let flushed = self.log.flush_until(target)?;
                if flushed > before {
                    if let Some(s) = &self.reput_signal {
                        s.wakeup();
                    }
                }
            }
            FlushDiskType::AsyncFlush => {
                let writeback_only = self.log.take_writeback_due()
                    && why == Wake::Notified
                    && self.timed
                    && self.last_pass.elapsed() < self.interval;
                if writeback_only {
                    let least = usize::try_from(self.log.writeback_bytes()).unwrap_or(usize::MAX);
                    return match self.log.queue().start_writeback(least) {
                        Ok(_) => Ok(()),
                        Err(e) => Err(self.fail(e)),
                    };
                }
                self.last_pass = Instant::now();
                let thorough = self.last_thorough.elapsed() >= self.thorough_interval;
                let least = if thorough { 0 } else { self.least_pages };
                if thorough {
                    self.last_thorough = Instant::now();
                }
                // One msync per file (RocketMQ flushes one file per call), moving on to the next
                // file only when this one is flushed to its end. Flushing the same file again
                // while the writer keeps adding `least` pages would never stop under a steady
                // stream: a busy loop of small msyncs instead of one per interval.
                let queue = self.log.queue();
                loop {
                    match queue.flush(least) {
                        Ok(true)
                            if queue.flushed_where().checked_rem(queue.file_size()) == Some(0) =>
                        {
                            continue
                        }
                        Ok(_) => break,
                        Err(e) => return Err(self.fail(e)),
                    }
                }
                self.log
                    .health()
                    .publish_flushed(self.log.queue().flushed_where());
            }
        }
        Ok(())
    }

    fn on_shutdown(&mut self) -> Result<()> {
        if self.log.health().check().is_err() {
            return Ok(());
        }
        let mut last = Ok(0);
        for _ in 0..10 {
            last = self.log.flush_all();
            if last.is_ok() {
                break;
            }
        }
        last.map(|_| ())
    }
}

/// The commit service (transient store pool only).
#[derive(Debug)]
pub(crate) struct CommitService {
    log: Arc<CommitLog>,
    flush_signal: Arc<Signal>,
    interval: Duration,
    least_pages: usize,
    thorough_interval: Duration,
    last_commit: Instant,
}

impl CommitService {
    pub(crate) fn new(log: Arc<CommitLog>, flush_signal: Arc<Signal>, cfg: &StoreConfig) -> Self {
        Self {
            log,
            flush_signal,
            interval: Duration::from_millis(cfg.commit_interval_commit_log),
            least_pages: cfg.commit_commit_log_least_pages as usize,
            thorough_interval: Duration::from_millis(cfg.commit_commit_log_thorough_interval),
            last_commit: Instant::now(),
        }
    }

    /// One commit pass; returns true if bytes were copied.
    pub(crate) fn commit_pass(&mut self, least: usize) -> Result<bool> {
        let mut moved_any = false;
        loop {
            match self.log.queue().commit(least) {
                Ok(true) => moved_any = true,
                Ok(false) => break,
                Err(e) => {
                    let cause = self.log.health().poison(e);
                    return Err(Error::Poisoned { cause });
                }
            }
        }
        Ok(moved_any)
    }
}

impl Service for CommitService {
    const NAME: &'static str = "commit";

    fn interval(&self) -> Duration {
        self.interval
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        self.log.health().check()?;
        let thorough = self.last_commit.elapsed() >= self.thorough_interval;
        let least = if thorough { 0 } else { self.least_pages };
        if self.commit_pass(least)? {
            self.last_commit = Instant::now();
            self.flush_signal.wakeup();
        }
        Ok(())
    }

    fn on_shutdown(&mut self) -> Result<()> {
        if self.log.health().check().is_err() {
            return Ok(());
        }
        self.commit_pass(0).map(|_| ())
    }
}
