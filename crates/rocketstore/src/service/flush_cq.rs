//! The consume queue flush service (RocketMQ `FlushConsumeQueueService`) and the checkpoint.
//!
//! Every `flush_interval_consume_queue` ms the consume queues are flushed (at least
//! `flush_consume_queue_least_pages` pages, or everything every
//! `flush_consume_queue_thorough_interval` ms) and the checkpoint is rewritten (5.x writes it
//! every second): physicMsgTimestamp is the store time covered by the last full commit log
//! flush, logicsMsgTimestamp the store time of the last dispatched record, indexMsgTimestamp the
//! end time of the last full index file; our extension records the durable commit log offset.
//!
//! New consume queue files and directories: the dispatch thread creates them without `fsync`
//! and wakes this service, which makes them durable at once (a round that does only that);
//! every flush, so every full round, makes them durable first, before any unit in them is
//! flushed or covered by the checkpoint (see `consume_queue`'s module doc).
//!
//! Recovery window (issue 17): each run also makes the index durable up to its newest entry
//! (msync of the header, slots and written entries) and fully flushes every consume queue
//! whose first unflushed unit names a record below the dispatch position captured one run
//! earlier. The checkpoint then records, as a [`RecoveryWindow`], a start offset below which
//! every consume queue unit and index entry is durable (the smallest of that captured position,
//! the index mark's end offset and the durable commit log offset), so abnormal recovery walks
//! only a few seconds of writes whatever the store's size. The first 24 bytes follow: the
//! logics timestamp is the one captured with that position, the index timestamp one
//! millisecond before the store time of the index mark's last record (every entry of a record
//! stored at or before it is durable). The index mark may name records past the durable
//! commit log offset (ASYNC_FLUSH dispatches before the flush): after a power loss recovery
//! cuts the index further, to the records the commit log kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketstore_format::{Checkpoint, CheckpointExt, RecoveryWindow};

use crate::commitlog::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::error::{Error, Result};
use crate::index::{IndexMark, IndexService};
use crate::offsets::ConsumerOffsets;
use crate::service::Service;
use crate::signal::Wake;
use crate::util::lock;

/// Builds and writes the checkpoint from the live components.
#[derive(Debug)]
pub(crate) struct CheckpointSource {
    root: PathBuf,
    log: Arc<CommitLog>,
    dispatcher: Arc<Dispatcher>,
    index: Option<Arc<IndexService>>,
    sync: bool,
    last: Mutex<Checkpoint>,
    /// The durable marks the next checkpoint records (see the module doc).
    marks: Mutex<Marks>,
}

/// What the flush service last made durable.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    window: Option<RecoveryWindow>,
    logics_ts: i64,
    index_ts: i64,
}

impl CheckpointSource {
    pub(crate) fn new(
        root: &Path,
        log: Arc<CommitLog>,
        dispatcher: Arc<Dispatcher>,
        index: Option<Arc<IndexService>>,
        sync: bool,
        loaded: Option<Checkpoint>,
    ) -> Self {
        let last = loaded.unwrap_or_default();
        // The loaded window still holds after recovery: nothing below its start or before its
        // index mark was changed. It is re-stamped with this boot's id (our page cache now holds
        // what recovery wrote), and clamped to the durable offset at each write.
        let window = last.ext.and_then(|e| e.window).map(|w| RecoveryWindow {
            boot_id: crate::util::boot_id(),
            ..w
        });
        Self {
            root: root.to_path_buf(),
            log,
            dispatcher,
            index,
            sync,
            last: Mutex::new(last),
            marks: Mutex::new(Marks {
                window,
                ..Marks::default()
            }),
        }
    }

    /// After an abnormal recovery with a recovery window (writable open, before any put): the
    /// window's index mark becomes `mark`, the durable point of the index as recovery left it
    /// ([`IndexService::flush_mark`], taken after re-dispatch), or none without an index file.
    /// The loaded mark names entries of the index before recovery: after a power loss
    /// recovery may have cut them (their records were lost), and the puts after it write
    /// other entries over them, for records at the same offsets. A checkpoint still naming
    /// the loaded mark would make the next recovery keep those stale entries as durable and
    /// skip indexing the records below the last of them. The window's start is lowered to the
    /// new mark's end: every record from there is re-dispatched.
    pub(crate) fn remark_index(&self, mark: Option<IndexMark>) {
        let mut m = lock(&self.marks);
        let Some(w) = m.window.as_mut() else {
            return;
        };
        match mark {
            Some(mark) => {
                w.index_file = mark.file;
                w.index_count = mark.count;
                w.start_offset = w.start_offset.min(mark.end_phy.max(0));
                m.index_ts = m.index_ts.max(mark.end_ts.saturating_sub(1));
            }
            None => {
                w.index_file = 0;
                w.index_count = 0;
            }
        }
    }

    /// Sets the recovery window and the timestamps that go with it (flush service).
    fn set_marks(&self, window: RecoveryWindow, logics_ts: i64, index_ts: i64) {
        let mut m = lock(&self.marks);
        m.window = Some(window);
        m.logics_ts = m.logics_ts.max(logics_ts);
        m.index_ts = m.index_ts.max(index_ts);
    }

    /// Rewrites the checkpoint; timestamps never move backwards.
    pub(crate) fn write(&self, clean: bool) -> Result<()> {
        let mut last = lock(&self.last);
        let physic = if clean {
            self.log
                .queue()
                .last()
                .map_or(0, |f| f.last_store_timestamp())
                .max(self.log.queue().store_timestamp())
        } else {
            self.log.queue().store_timestamp()
        };
        let marks = *lock(&self.marks);
        let durable = self.log.queue().flushed_where() as i64;
        // A clean shutdown flushed every consume queue (on_shutdown) before this write.
        let logics = if clean {
            self.dispatcher.logics_timestamp()
        } else {
            marks.logics_ts
        };
        let cp = Checkpoint {
            physic_msg_timestamp: last.physic_msg_timestamp.max(physic),
            logics_msg_timestamp: last.logics_msg_timestamp.max(logics),
            index_msg_timestamp: last.index_msg_timestamp.max(marks.index_ts).max(
                self.index
                    .as_ref()
                    .map_or(0, |i| i.last_full_end_timestamp()),
            ),
            master_flushed_offset: 0,
            confirm_phy_offset: 0,
            ext: Some(CheckpointExt {
                durable_commitlog_offset: durable,
                clean_shutdown: clean,
                generation: last.ext.as_ref().map_or(0, |e| e.generation) + 1,
                window: marks.window.map(|w| RecoveryWindow {
                    start_offset: w.start_offset.min(durable),
                    ..w
                }),
            }),
        };
        crate::checkpoint::write(&self.root, &cp, self.sync)?;
        *last = cp;
        Ok(())
    }
}

/// The service loop.
#[derive(Debug)]
pub(crate) struct FlushCqService {
    cqs: Arc<ConsumeQueueStore>,
    checkpoint: Arc<CheckpointSource>,
    offsets: Arc<ConsumerOffsets>,
    interval: Duration,
    least_pages: usize,
    thorough_interval: Duration,
    last_thorough: Instant,
    boot_id: [u8; 16],
    /// (logics timestamp, dispatch position) captured at the previous run.
    captured: Option<(i64, u64)>,
    /// The newest index mark that counts.
    index_mark: Option<IndexMark>,
    /// When the last full round (flush, window, checkpoint) ran.
    last_round: Instant,
}

impl FlushCqService {
    pub(crate) fn new(
        cqs: Arc<ConsumeQueueStore>,
        checkpoint: Arc<CheckpointSource>,
        offsets: Arc<ConsumerOffsets>,
        cfg: &StoreConfig,
    ) -> Self {
        Self {
            cqs,
            checkpoint,
            offsets,
            interval: Duration::from_millis(cfg.flush_interval_consume_queue),
            least_pages: cfg.flush_consume_queue_least_pages as usize,
            thorough_interval: Duration::from_millis(cfg.flush_consume_queue_thorough_interval),
            last_thorough: Instant::now(),
            boot_id: crate::util::boot_id(),
            captured: None,
            index_mark: None,
            last_round: Instant::now(),
        }
    }

    /// Makes the index durable to a new mark and moves the recovery window forward (see the
    /// module doc).
    fn advance_window(&mut self) -> Result<()> {
        let now = (
            self.checkpoint.dispatcher.logics_timestamp(),
            self.checkpoint.dispatcher.reput_from(),
        );
        let captured = self.captured.replace(now);
        if let Some((_, pos)) = captured {
            self.cqs.flush_below(pos)?;
        }
        let mark = match &self.checkpoint.index {
            Some(index) => index.flush_mark()?,
            None => None,
        };
        let durable = self.checkpoint.log.queue().flushed_where();
        if mark.is_some() {
            self.index_mark = mark;
        }
        let Some((logics, pos)) = captured else {
            return Ok(());
        };
        let mut start = pos.min(durable);
        let (mut index_file, mut index_count, mut index_ts) = (0, 0, 0);
        if self.checkpoint.index.is_some() {
            let Some(m) = self.index_mark else {
                return Ok(());
            };
            start = start.min(u64::try_from(m.end_phy).unwrap_or(0));
            (index_file, index_count, index_ts) = (m.file, m.count, m.end_ts.saturating_sub(1));
        }
        let window = RecoveryWindow {
            boot_id: self.boot_id,
            start_offset: i64::try_from(start).unwrap_or(i64::MAX),
            index_file,
            index_count,
        };
        self.checkpoint.set_marks(window, logics, index_ts);
        Ok(())
    }
}

/// A full disk stops the write of a new checkpoint or consumer offsets file before it replaces
/// the old one (each is written aside, synced, then renamed over it): the old file stays whole
/// and valid, so the round is skipped and the next one tries again. The store is not fenced for
/// it; a put that needs space meets the full disk itself and gets `DiskFull`. Any other error
/// (an EIO, a failed sync of data) still fences the store.
fn keep_on_full_disk(r: Result<()>) -> Result<()> {
    match r {
        Err(Error::DiskFull { .. }) => Ok(()),
        other => other,
    }
}

impl Service for FlushCqService {
    const NAME: &'static str = "flush-cq";

    fn interval(&self) -> Duration {
        self.interval
    }

    fn run_once(&mut self, why: Wake) -> Result<()> {
        if why == Wake::Notified
            && self.cqs.wakes_on_creation()
            && self.last_round.elapsed() < self.interval
        {
            // Woken by a consume queue creating a file or directory: make the creation durable
            // now, while the file is nearly empty, and leave the full round to its interval.
            return self.cqs.sync_creations();
        }
        self.last_round = Instant::now();
        let thorough = self.last_thorough.elapsed() >= self.thorough_interval;
        if thorough {
            self.last_thorough = Instant::now();
        }
        self.cqs
            .flush_all(if thorough { 0 } else { self.least_pages })?;
        self.advance_window()?;
        keep_on_full_disk(self.offsets.persist(self.checkpoint.sync))?;
        keep_on_full_disk(self.checkpoint.write(false))
    }

    fn on_shutdown(&mut self) -> Result<()> {
        self.cqs.flush_all(0)?;
        if let Some(index) = &self.checkpoint.index {
            index.flush()?;
        }
        Ok(())
    }
}
