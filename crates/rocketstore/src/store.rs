//! The store facade: open (lock, load, recover), put, read, flush, close.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketstore_format::DecodeOptions;

use crate::checkpoint;
use crate::commitlog::{CommitLog, Prepared, RecordRef};
use crate::config::{FlushDiskType, StoreConfig};
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::dispatch::Subscription;
use crate::error::{Error, Result};
use crate::index::IndexService;
use crate::longpoll::{deadline_after, PullWaiters};
use crate::message::{GetResult, GetStatus, PutMessage, PutResult, QueryResult, StoredMessage};
use crate::offsets::{ConsumerOffsets, TopicConfigs};
use crate::read::{self, ReadLimits};
use crate::recovery::{Recovery, RecoveryReport};
use crate::segment::Allocator;
use crate::segment::CreateOptions;
use crate::service::allocate::AllocateService;
use crate::service::cleanup::{
    Cleaner, CleanupReport, CleanupService, Clock, DiskUsageProbe, Trigger,
};
use crate::service::flush::{CommitService, FlushService};
use crate::service::flush_cq::{CheckpointSource, FlushCqService};
use crate::service::reput::{reput_end, ReputService};
use crate::service::schedule::{ScheduleCore, ScheduleService};
use crate::service::{spawn, Service, ServiceHandle, ServiceKind};
use crate::signal::{Health, Signal, Wake};
use crate::stats::{StatsCounters, StoreStats};
use crate::util::{lock, now_ms};
use crate::validate::{prepare, props_capacity, PrepareCtx, UniqKeyGen};

mod views;
pub use views::{GetRecords, IndexFileEntries, QueueSpan, RecordHandle};

const OPEN: u8 = 0;
const CLOSING: u8 = 1;
const CLOSED: u8 = 2;

/// The commit log cursors, as absolute offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursors {
    /// One past the last byte appended.
    pub wrote: u64,
    /// One past the last byte readers may see (copied from the transient buffer when one is
    /// used; equal to `wrote` otherwise).
    pub committed: u64,
    /// One past the last byte known durable.
    pub flushed: u64,
}

/// A RocketMQ-compatible message store rooted at a directory.
///
/// ```no_run
/// use rocketstore::{PutMessage, Store, StoreConfig};
/// let store = Store::open("/tmp/demo-store", StoreConfig::default())?;
/// let r = store.put(&PutMessage { topic: "TopicTest", body: b"hello", tags: Some("TagA"), ..Default::default() })?;
/// let msg = store.look_message_by_offset(r.commitlog_offset as u64)?;
/// assert_eq!(msg.body, b"hello");
/// store.close()?;
/// # Ok::<(), rocketstore::Error>(())
/// ```
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    config: StoreConfig,
    read_only: bool,
    log: Arc<CommitLog>,
    cqs: Arc<ConsumeQueueStore>,
    index: Option<Arc<IndexService>>,
    dispatcher: Arc<Dispatcher>,
    waiters: Arc<PullWaiters>,
    limits: ReadLimits,
    health: Arc<Health>,
    allocator: Option<Arc<Allocator>>,
    flush_signal: Arc<Signal>,
    commit_signal: Arc<Signal>,
    reput_signal: Arc<Signal>,
    checkpoint_source: Arc<CheckpointSource>,
    consumer_offsets: Arc<ConsumerOffsets>,
    topics: TopicConfigs,
    stats: StatsCounters,
    /// Delayed-message re-delivery (writable stores; its thread runs only with
    /// `schedule_service_enable`).
    schedule: Option<Arc<ScheduleCore>>,
    /// Expired-file cleanup and the disk-full state (spec §10).
    cleaner: Arc<Cleaner>,
    services: Mutex<Vec<ServiceHandle>>,
    state: AtomicU8,
    lock_file: Mutex<Option<File>>,
    uniq: UniqKeyGen,
    recovery: RecoveryReport,
    /// Read-only open after an unclean shutdown: the key map of the records the index files may
    /// lack (see `tail_index`).
    tail_index: Option<crate::tail_index::TailIndex>,
    /// The services when they do not run on threads (`background_threads = false`).
    manual: Mutex<Option<ManualServices>>,
    put_buffers: Mutex<PutBuffers>,
    /// Read-only stores: follows the writer of another process (`crate::follow`).
    follower: Option<crate::follow::Follower>,
    /// Writable stores: the progress readers in other processes follow.
    progress: Option<Arc<crate::progress::ProgressWriter>>,
}

/// `put_batch`'s working memory, kept between calls: large batches otherwise allocate fresh
/// heap pages (which glibc gives back to the kernel after each call) and fault them in on every
/// batch. A call that finds it taken by a concurrent call uses new vectors.
#[derive(Debug, Default)]
struct PutBuffers {
    props: Vec<u8>,
    prepared: Vec<Prepared<'static>>,
}

/// Buffers larger than this are not kept (bytes of properties, messages).
const PUT_BUFFER_MAX_BYTES: usize = 64 << 20;
const PUT_BUFFER_MAX_MESSAGES: usize = 1 << 20;

/// An empty vector that keeps `v`'s allocation, for another lifetime of the same type: the
/// in-place `collect` of the emptied vector's iterator reuses its buffer (no element exists to
/// convert).
// `filter_map` (not `filter`): the item type changes lifetime, which is the point.
#[allow(clippy::unnecessary_filter_map)]
fn reuse_prepared<'b>(mut v: Vec<Prepared<'_>>) -> Vec<Prepared<'b>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

#[derive(Debug)]
struct ManualServices {
    flush: FlushService,
    commit: Option<CommitService>,
    reput: ReputService,
    flush_cq: FlushCqService,
}

impl Store {
    /// Opens (creating if needed) a writable store at `root`, taking its lock and recovering
    /// the commit log.
    ///
    /// # Errors
    /// [`Error::Locked`] if another process has it open; [`Error::Config`] for a bad config;
    /// [`Error::Corruption`] when recovery finds damage it may not truncate; I/O errors.
    pub fn open(root: impl AsRef<Path>, config: StoreConfig) -> Result<Store> {
        Self::open_impl(root.as_ref(), config, false, None)
    }

    /// Opens a writable store like [`Store::open`], cutting its commit log back to `end_offset`
    /// first: every record from there on is removed from the commit log (later files deleted,
    /// the rest of the file zeroed and synced), the consume queues and the index, as recovery
    /// removes a torn tail (RocketMQ's `truncateDirtyFiles`), and the checkpoint is rewritten so
    /// that no later open expects the old end. Appends continue at `end_offset` with the queue
    /// offsets the kept records reach. `end_offset` must be the start of a record (or of the
    /// blank closing a file) or the end of the commit log, in `[min offset, end]`; the end is a
    /// plain open. A store that was not closed cleanly is recovered (opened and closed) first.
    ///
    /// ```no_run
    /// use rocketstore::{PutMessage, Store, StoreConfig};
    /// let store = Store::open("/tmp/demo-cut", StoreConfig::default())?;
    /// let end = store.max_commitlog_offset();
    /// store.put(&PutMessage { topic: "T", body: b"undo me", ..Default::default() })?;
    /// store.close()?;
    /// let store = Store::open_truncated("/tmp/demo-cut", StoreConfig::default(), end)?;
    /// assert_eq!(store.max_commitlog_offset(), end);
    /// # Ok::<(), rocketstore::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Store::open`]; [`Error::OffsetOutOfRange`] for an offset outside the commit log,
    /// [`Error::InvalidArgument`] (`end_offset`) for one inside a record. A refused cut changes
    /// no record.
    pub fn open_truncated(
        root: impl AsRef<Path>,
        config: StoreConfig,
        end_offset: u64,
    ) -> Result<Store> {
        let root = root.as_ref();
        if root.join(checkpoint::ABORT_FILE).exists() {
            Self::open_impl(root, config.clone(), false, None)?.close()?;
        }
        let fsync = config.fsync_directory;
        match Self::open_impl(root, config, false, Some(end_offset)) {
            // Refused before recovery changed anything: no abort marker is left behind.
            Err(e @ (Error::InvalidArgument { .. } | Error::OffsetOutOfRange { .. })) => {
                let _ = checkpoint::remove_abort(root, fsync);
                Err(e)
            }
            other => other,
        }
    }

    /// Opens any RocketMQ store root read-only. Nothing is created, locked or modified: no lock
    /// file, no abort file, no byte of any file. The commit log file size is taken from the
    /// files.
    ///
    /// # Errors
    /// As [`Store::open`], except `Locked`.
    pub fn open_read_only(root: impl AsRef<Path>, config: StoreConfig) -> Result<Store> {
        Self::open_impl(root.as_ref(), config, true, None)
    }

    fn open_impl(
        root: &Path,
        mut config: StoreConfig,
        read_only: bool,
        cut: Option<u64>,
    ) -> Result<Store> {
        config.validate()?;
        crate::util::check_not_symlink(root)?;
        if !read_only {
            // Refusals first, before anything is created: a refused open changes nothing.
            crate::geometry::check_is_store(root)?;
            crate::geometry::resolve(root, &mut config)?;
        }
        // What a writer had published when this reader began its walk (see `crate::follow`).
        let published_at_open = if read_only {
            crate::progress::peek(root)
        } else {
            None
        };
        if read_only {
            let meta = std::fs::metadata(root).map_err(|e| Error::io("stat", root, e))?;
            if !meta.is_dir() {
                return Err(Error::UnsupportedFormat {
                    path: root.to_path_buf(),
                    reason: "not a directory".into(),
                });
            }
        } else {
            std::fs::create_dir_all(root).map_err(|e| Error::io("mkdir", root, e))?;
        }
        let cq_dir = root.join("consumequeue");
        if cq_dir.join("CURRENT").exists() {
            return Err(Error::UnsupportedFormat {
                path: cq_dir,
                reason: "consume queues are stored in RocksDB (storeType=defaultRocksDB); only file-based stores are supported".into(),
            });
        }
        let lock_file = if read_only {
            None
        } else {
            Some(crate::lock::take_lock(root)?)
        };
        let abnormal = root.join(checkpoint::ABORT_FILE).exists();
        let commitlog_dir = root.join("commitlog");
        if !read_only {
            std::fs::create_dir_all(&commitlog_dir)
                .map_err(|e| Error::io("mkdir", &commitlog_dir, e))?;
        }
        let health = Health::new();
        let flush_signal = Signal::new();
        let commit_signal = Signal::new();
        let reput_signal = Signal::new();
        let allocator = (!read_only && config.background_threads).then(|| {
            let warm = config.warm_mapped_file_enable.then(|| {
                (config.flush_disk_type == crate::FlushDiskType::SyncFlush)
                    .then_some(config.flush_least_pages_when_warm_mapped_file as usize)
            });
            Allocator::new(
                &commitlog_dir,
                CreateOptions {
                    sync: config.fsync_directory,
                    defer_sync: config.flush_disk_type == crate::FlushDiskType::AsyncFlush,
                    populate: config.prefault_commit_log(),
                    warm,
                    prealloc: None,
                },
                Signal::new(),
                Duration::from_millis(config.allocate_wait_timeout),
                config.pwrite_commit_log && !config.transient_store_pool_enable,
            )
        });
        let log = Arc::new(CommitLog::load(
            &commitlog_dir,
            &config,
            !read_only,
            Arc::clone(&health),
            allocator.clone(),
            Arc::clone(&flush_signal),
            Arc::clone(&commit_signal),
        )?);
        // Load order (spec §7.3): commit log, consume queues, checkpoint, index.
        let cq_file_size = if read_only {
            crate::recovery::infer_cq_file_size(root)
                .unwrap_or_else(|| config.consume_queue_file_size())
        } else {
            config.consume_queue_file_size()
        };
        let cqs = Arc::new(ConsumeQueueStore::load(root, cq_file_size, !read_only)?);
        let cp = checkpoint::read(root)?;
        if !read_only {
            // Once the files loaded (a store refused for their format is left as it was, with
            // no abort marker) and before recovery changes anything: a crash during recovery
            // is then recovered as abnormal again (recovery is resumable).
            checkpoint::create_abort(root, config.fsync_directory)?;
        }
        let valid_cp = match &cp {
            Some(Ok(c)) => Some(*c),
            _ => None,
        };
        let index_files_removed = if config.message_index_enable && !read_only {
            crate::recovery::index_check::precheck_index_dir(
                root,
                u32::try_from(config.max_hash_slot_num).unwrap_or(u32::MAX),
                u32::try_from(config.max_index_num).unwrap_or(u32::MAX),
                log.queue().last().map_or(0, |f| f.from() + f.size() as u64),
                config.fsync_directory,
            )?
        } else {
            0
        };
        // After a crash, a writable open with a recovery window keeps every index file: recovery
        // cuts them back to the window's durable mark itself (spec §6.5 deletes the files newer
        // than indexMsgTimestamp instead, and then re-dispatches from far back).
        let window = valid_cp
            .and_then(|c| c.ext)
            .and_then(|e| e.window)
            .filter(|_| abnormal && !read_only);
        let index = if config.message_index_enable {
            let slots = u32::try_from(config.max_hash_slot_num).unwrap_or(u32::MAX);
            let entries = u32::try_from(config.max_index_num).unwrap_or(u32::MAX);
            let index_ts = valid_cp.as_ref().map_or(0, |c| c.index_msg_timestamp);
            let keep_all = !abnormal || window.is_some();
            match IndexService::load(root, slots, entries, !read_only, keep_all, index_ts) {
                Ok(i) => Some(Arc::new(i)),
                // A foreign store whose index geometry differs from the configuration still
                // opens read-only: with the geometry its file size implies at RocketMQ's 1:4
                // slot:entry ratio, else without key queries (pass max_hash_slot_num and
                // max_index_num to use them).
                Err(Error::UnsupportedFormat { .. }) if read_only => {
                    crate::index::infer_geometry(root).and_then(|(slots, entries)| {
                        IndexService::load(root, slots, entries, false, !abnormal, index_ts)
                            .ok()
                            .map(Arc::new)
                    })
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let waiters = Arc::new(PullWaiters::default());
        let dispatcher = Arc::new(Dispatcher::new(
            Arc::clone(&cqs),
            index.clone(),
            Arc::clone(&waiters),
            0,
            config.delay_levels(),
            i32::try_from(config.max_queue_nums_per_topic).unwrap_or(i32::MAX) - 1,
        ));
        let mut recovery = Recovery {
            log: &log,
            cqs: &cqs,
            index: index.as_deref(),
            dispatcher: &dispatcher,
            cfg: &config,
            abnormal,
            cp: valid_cp.as_ref(),
            window,
            read_only,
            cut,
        }
        .run()?;
        let consumer_offsets = Arc::new(ConsumerOffsets::load(root)?);
        let topics = TopicConfigs::load(root)?;
        let schedule = if read_only {
            None
        } else {
            Some(Arc::new(ScheduleCore::new(
                root,
                Arc::clone(&log),
                Arc::clone(&cqs),
                &config,
            )?))
        };
        recovery.index_files_removed = index_files_removed;
        let checkpoint_source = Arc::new(CheckpointSource::new(
            root,
            Arc::clone(&log),
            Arc::clone(&dispatcher),
            index.clone(),
            config.fsync_directory,
            valid_cp,
        ));
        // After a crash, the checkpoint's index mark is replaced by the durable point of the
        // index as recovery left it, and the checkpoint rewritten before any put: the loaded
        // mark may name entries recovery cut, which later puts overwrite (see
        // `CheckpointSource::remark_index`).
        let remarked = match (&index, window) {
            (Some(index), Some(_)) => {
                checkpoint_source.remark_index(index.flush_mark()?);
                true
            }
            _ => false,
        };
        if !read_only
            && (remarked
                || cut.is_some()
                || recovery.truncated_at.is_some()
                || recovery
                    .durable_offset
                    .is_some_and(|d| d > recovery.end_offset))
        {
            // The checkpoint must not keep a durable offset beyond what recovery kept.
            checkpoint_source.write(false)?;
        }
        let cleaner = Arc::new(Cleaner::new(
            root,
            Arc::clone(&log),
            Arc::clone(&cqs),
            index.clone(),
            Arc::clone(&dispatcher),
            &config,
            !read_only,
        ));
        let tail_index = index
            .as_ref()
            .filter(|_| read_only && abnormal)
            .map(|i| crate::tail_index::for_recovery(&log, i, &recovery));
        let (follower, progress) = if read_only {
            let walked = u64::try_from(cqs.max_physic_offset())
                .unwrap_or(0)
                .max(log.min_offset())
                .min(log.max_offset());
            (
                Some(crate::follow::Follower::new(
                    root,
                    walked,
                    published_at_open,
                )),
                None,
            )
        } else {
            // Without it (a root we may not create files in) readers just do not follow.
            let p = crate::progress::ProgressWriter::open(root)
                .ok()
                .map(Arc::new);
            if let Some(p) = &p {
                dispatcher.set_progress(Arc::clone(p));
                dispatcher.publish_progress(&log);
            }
            (None, p)
        };
        let store = Store {
            follower,
            progress,
            tail_index,
            root: root.to_path_buf(),
            uniq: UniqKeyGen::new(&config.store_host),
            limits: ReadLimits::new(&config),
            config,
            read_only,
            log,
            cqs,
            index,
            dispatcher,
            waiters,
            health,
            allocator,
            flush_signal,
            commit_signal,
            reput_signal,
            checkpoint_source,
            consumer_offsets,
            topics,
            stats: StatsCounters::default(),
            schedule,
            cleaner,
            services: Mutex::new(Vec::new()),
            state: AtomicU8::new(OPEN),
            lock_file: Mutex::new(lock_file),
            recovery,
            manual: Mutex::new(None),
            put_buffers: Mutex::new(PutBuffers::default()),
        };
        if !read_only {
            store.start_services()?;
        }
        Ok(store)
    }

    fn start_services(&self) -> Result<()> {
        let flush = FlushService::new(Arc::clone(&self.log), &self.config)
            .with_reput_signal(Arc::clone(&self.reput_signal));
        let commit = self.log.has_pool().then(|| {
            CommitService::new(
                Arc::clone(&self.log),
                Arc::clone(&self.flush_signal),
                &self.config,
            )
        });
        let reput = ReputService::new(
            Arc::clone(&self.log),
            Arc::clone(&self.dispatcher),
            self.config.flush_disk_type,
        );
        let flush_cq = FlushCqService::new(
            Arc::clone(&self.cqs),
            Arc::clone(&self.checkpoint_source),
            Arc::clone(&self.consumer_offsets),
            &self.config,
        );
        if !self.config.background_threads {
            *lock(&self.manual) = Some(ManualServices {
                flush,
                commit,
                reput,
                flush_cq,
            });
            return Ok(());
        }
        let mut services = lock(&self.services);
        if let Some(alloc) = &self.allocator {
            services.push(spawn(
                AllocateService::new(Arc::clone(alloc)),
                alloc.signal(),
                Arc::clone(&self.health),
            )?);
        }
        if let Some(c) = commit {
            services.push(spawn(
                c,
                Arc::clone(&self.commit_signal),
                Arc::clone(&self.health),
            )?);
        }
        services.push(spawn(
            flush,
            Arc::clone(&self.flush_signal),
            Arc::clone(&self.health),
        )?);
        services.push(spawn(
            reput,
            Arc::clone(&self.reput_signal),
            Arc::clone(&self.health),
        )?);
        let flush_cq_signal = Signal::new();
        self.cqs.wake_on_creation(Arc::clone(&flush_cq_signal));
        services.push(spawn(flush_cq, flush_cq_signal, Arc::clone(&self.health))?);
        if let Some(core) = self
            .schedule
            .as_ref()
            .filter(|_| self.config.schedule_service_enable)
        {
            let svc = ScheduleService::new(
                Arc::clone(core),
                Arc::clone(&self.reput_signal),
                &self.config,
            );
            services.push(spawn(svc, Signal::new(), Arc::clone(&self.health))?);
        }
        services.push(spawn(
            CleanupService::new(Arc::clone(&self.cleaner), &self.config),
            Signal::new(),
            Arc::clone(&self.health),
        )?);
        Ok(())
    }

    /// The store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration in effect (the commit log file size is the one on disk).
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// True if opened with [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// What recovery did at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Size of each commit log file.
    pub fn commitlog_file_size(&self) -> u64 {
        self.log.file_size()
    }

    /// The first failure that fenced the store, if any.
    pub fn poisoned(&self) -> Option<Arc<Error>> {
        self.health.poison_cause()
    }

    fn check_open(&self) -> Result<()> {
        if self.state.load(Ordering::Acquire) != OPEN {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn check_readable(&self) -> Result<()> {
        if self.state.load(Ordering::Acquire) == CLOSED {
            return Err(Error::Closed);
        }
        self.check_mapped()?;
        self.follow()
    }

    /// A read-only store catches up with the writer of another process (`crate::follow`).
    fn follow(&self) -> Result<()> {
        match &self.follower {
            Some(f) => f.refresh(&self.log, &self.cqs, &self.dispatcher),
            None => Ok(()),
        }
    }

    /// `Err` (EIO, [`Error::Io`]) once a page of one of this store's file mappings could not be
    /// read in (a failing disk, a file shrunk behind a read-only open): the mapping holds zeros
    /// there (see `mmap.rs`, "Pages of file mappings that cannot be read in"), so no read of
    /// this store is trusted and a writable store is fenced; a reopen maps the files again.
    /// One atomic load while no mapping of the process ever failed. Checked before every read
    /// and after the reads that walk records.
    fn check_mapped(&self) -> Result<()> {
        let fault = || {
            self.log
                .io_fault()
                .or_else(|| self.cqs.io_fault())
                .or_else(|| self.index.as_ref().and_then(|i| i.io_fault()))
        };
        match fault() {
            None => Ok(()),
            Some(e) => {
                if !self.read_only {
                    if let Some(again) = fault() {
                        self.health.poison(again);
                    }
                }
                Err(e)
            }
        }
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly {
                path: self.root.clone(),
            });
        }
        self.health.check()
    }

    /// Puts one message.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`]/[`Error::MessageTooLarge`] for bad input (nothing is written);
    /// [`Error::Poisoned`], [`Error::Closed`], [`Error::ReadOnly`], [`Error::DiskFull`].
    pub fn put(&self, msg: &PutMessage<'_>) -> Result<PutResult> {
        let mut results = self.put_batch(std::slice::from_ref(msg))?;
        results.pop().ok_or(Error::Closed)
    }

    /// Puts many messages under one acquisition of the put lock. The batch is validated whole
    /// first: one invalid message and nothing is written.
    ///
    /// Messages that all go to one topic and queue are written as a broker writes a
    /// `MessageBatch` (spec §13): consecutive records with consecutive queue offsets and one
    /// store timestamp, each with its own properties (no envelope properties appended), and
    /// never split across two commit log files when they fit in one (if the current file cannot
    /// hold them all, it is closed with a blank record and they go to the next file).
    ///
    /// # Errors
    /// As [`Store::put`]; the error message names the index of the first invalid message.
    pub fn put_batch(&self, msgs: &[PutMessage<'_>]) -> Result<Vec<PutResult>> {
        self.check_writable()?;
        if msgs.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut bufs = std::mem::take(&mut *lock(&self.put_buffers));
        let mut props = std::mem::take(&mut bufs.props);
        props.clear();
        props.reserve(msgs.iter().map(props_capacity).sum());
        let indexed = msgs.len() > 1;
        let mut prepared = reuse_prepared(std::mem::take(&mut bufs.prepared));
        prepared.reserve(msgs.len());
        let mut last_topic: Option<&str> = None;
        let ctx = PrepareCtx {
            cfg: &self.config,
            file_size: self.log.file_size(),
            uniq: &self.uniq,
            now,
        };
        for (i, m) in msgs.iter().enumerate() {
            let topic_checked = last_topic == Some(m.topic);
            prepared.push(prepare(
                m,
                indexed.then_some(i),
                topic_checked,
                &ctx,
                &mut props,
            )?);
            last_topic = Some(m.topic);
        }
        self.check_writable()?;
        self.cleaner.check_writable()?;
        let started = std::time::Instant::now();
        let results = self.log.append(&prepared, &props, self.config.store_host);
        self.stats.record_put(started.elapsed());
        if props.capacity() <= PUT_BUFFER_MAX_BYTES
            && prepared.capacity() <= PUT_BUFFER_MAX_MESSAGES
        {
            bufs.props = props;
            bufs.prepared = reuse_prepared(prepared);
            *lock(&self.put_buffers) = bufs;
        }
        let results = results?;
        self.after_append()?;
        Ok(results)
    }

    /// After an append: wake dispatch, or (no service threads) commit and dispatch inline so
    /// reads see the data.
    fn after_append(&self) -> Result<()> {
        if self.config.background_threads {
            if self.config.flush_disk_type == FlushDiskType::AsyncFlush {
                self.reput_signal.wakeup();
            }
        } else if let Some(m) = lock(&self.manual).as_mut() {
            if let Some(c) = m.commit.as_mut() {
                c.commit_pass(0)?;
            }
            self.dispatcher
                .dispatch_until(&self.log, reput_end(&self.log, self.config.flush_disk_type))?;
        }
        Ok(())
    }

    /// One pass of the schedule service with `now_ms` as its clock: every delayed message whose
    /// deliver time is `<= now_ms` is re-put to its real topic and queue (RocketMQ
    /// `ScheduleMessageService`; see `schedule_service_enable` for the background thread, which
    /// uses the wall clock). Returns the number of messages re-delivered. Progress is kept in
    /// `config/delayOffset.json`.
    ///
    /// ```no_run
    /// use rocketstore::{PutMessage, Store, StoreConfig};
    /// let store = Store::open("/tmp/demo-delay", StoreConfig::default())?;
    /// let r = store.put(&PutMessage { topic: "T", body: b"later", delay_level: 1, ..Default::default() })?;
    /// // Level 1 is 1 s: one second after the store time the message is due.
    /// assert_eq!(store.deliver_delayed_messages(r.store_timestamp + 1000)?, 1);
    /// # Ok::<(), rocketstore::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ReadOnly`], [`Error::Closed`], [`Error::Poisoned`]; I/O errors of the re-put.
    pub fn deliver_delayed_messages(&self, now_ms: i64) -> Result<u64> {
        self.check_writable()?;
        let Some(core) = &self.schedule else {
            return Ok(0);
        };
        let n = core.pass(now_ms)?;
        if n > 0 {
            self.after_append()?;
        }
        Ok(n)
    }

    /// The record starting at absolute commit log `offset`.
    ///
    /// # Errors
    /// [`Error::OffsetOutOfRange`] outside `[min, max)`; [`Error::InvalidArgument`] if no record
    /// starts there.
    pub fn look_message_by_offset(&self, offset: u64) -> Result<StoredMessage> {
        let r = self.record_in_range(offset)?;
        let m = r.decode();
        self.check_mapped()?;
        m.map_err(|_| no_record_at(offset))
    }

    /// The record starting at `offset`, which must lie in `[min, max)` of the commit log.
    fn record_in_range(&self, offset: u64) -> Result<RecordRef> {
        self.check_readable()?;
        let min = self.log.min_offset();
        let max = self.log.max_offset();
        if offset < min || offset >= max {
            return Err(Error::OffsetOutOfRange {
                requested: offset as i64,
                min: min as i64,
                max: max as i64,
            });
        }
        self.log
            .record_at(offset)
            .ok_or_else(|| no_record_at(offset))
    }

    /// Raw bytes of the record at `offset` (RocketMQ `selectOneMessageByOffset`).
    ///
    /// # Errors
    /// As [`Store::look_message_by_offset`].
    pub fn select_one_message_by_offset(&self, offset: u64) -> Result<Vec<u8>> {
        let bytes = self.record_in_range(offset)?.bytes().to_vec();
        self.check_mapped()?;
        Ok(bytes)
    }

    /// Iterates records from `from_offset` (clamped up to the minimum offset) to the end of
    /// readable data.
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn scan(&self, from_offset: u64) -> Result<Scanner> {
        self.check_readable()?;
        let start = from_offset.max(self.log.min_offset());
        Ok(Scanner {
            log: Arc::clone(&self.log),
            offset: start,
            first: true,
            done: false,
            check_crc: false,
        })
    }

    /// Smallest commit log offset still stored.
    pub fn min_commitlog_offset(&self) -> u64 {
        let _ = self.follow();
        self.log.min_offset()
    }

    /// One past the last readable commit log byte.
    pub fn max_commitlog_offset(&self) -> u64 {
        let _ = self.follow();
        self.log.max_offset()
    }

    /// The commit log cursors.
    pub fn cursors(&self) -> Cursors {
        let (wrote, committed, flushed) = self.log.cursors();
        Cursors {
            wrote,
            committed,
            flushed,
        }
    }

    /// Next queue offset of a topic's queue (0 for an unknown queue).
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.log.next_queue_offset(topic, queue_id)
    }

    /// Every (topic, queue id, next queue offset) known to the store.
    pub fn queue_offsets(&self) -> Vec<(String, i32, i64)> {
        let mut out: Vec<_> = self
            .log
            .queue_offsets()
            .into_iter()
            .flat_map(|(t, v)| {
                v.into_iter()
                    .enumerate()
                    .filter(|(_, o)| *o > 0)
                    .map(move |(q, o)| (t.clone(), q as i32, o))
            })
            .collect();
        out.sort();
        out
    }

    /// Number of flushes that advanced the durable offset (to measure group commit).
    pub fn flush_count(&self) -> u64 {
        self.health.flush_count()
    }

    /// Commit log files created by the allocate service.
    pub fn preallocated_files(&self) -> u64 {
        self.allocator.as_ref().map_or(0, |a| a.created())
    }

    /// Commit log files the writer had to create itself because the allocate service was not
    /// ahead of it (0 in a healthy store with background threads).
    pub fn writer_created_files(&self) -> u64 {
        self.log.sync_creations()
    }

    /// Paths of the commit log files, oldest first.
    pub fn commitlog_files(&self) -> Vec<PathBuf> {
        self.log
            .queue()
            .files()
            .iter()
            .map(|f| f.path().to_path_buf())
            .collect()
    }

    /// Commits and flushes everything written so far, dispatches it to the consume queues and
    /// the index, and returns the durable offset. A queue or key read issued after `flush`
    /// returns sees every put acknowledged before it was called (without it, a read races the
    /// dispatch thread, which usually indexes a put within a millisecond but has no bound).
    ///
    /// # Errors
    /// [`Error::Poisoned`] if a flush fails (the store is then fenced).
    pub fn flush(&self) -> Result<u64> {
        self.check_open()?;
        if self.read_only {
            return Ok(self.log.max_offset());
        }
        self.health.check()?;
        let durable = self.log.flush_all()?;
        // Runs are serialized with the dispatch thread's (which then finds nothing left).
        self.dispatcher
            .dispatch_until(&self.log, reput_end(&self.log, self.config.flush_disk_type))?;
        self.consumer_offsets.persist(self.config.fsync_directory)?;
        if let Some(core) = &self.schedule {
            core.persist()?;
        }
        Ok(durable)
    }

    /// Runs one cleanup pass now (RocketMQ `executeDeleteFilesManually`, spec §10): commit log
    /// files older than `file_reserved_time` hours are deleted whatever the hour (`force`: every
    /// deletable file whatever its age), oldest first, never the last one and at most
    /// `delete_file_batch_max`; then consume queue and index files that only reference deleted
    /// data. Only data that is flushed and dispatched is ever deleted. The disk usage is checked
    /// too: puts are refused with [`Error::DiskFull`] above `disk_space_warning_level_ratio`
    /// and accepted again once a pass finds it at or below `disk_space_clean_forcibly_ratio`.
    ///
    /// ```no_run
    /// # use rocketstore::{Store, StoreConfig};
    /// let store = Store::open("/tmp/demo-clean", StoreConfig::default())?;
    /// let report = store.delete_expired_files(false)?;
    /// println!("deleted {} commit log files", report.commitlog_files_deleted.len());
    /// # Ok::<(), rocketstore::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ReadOnly`], [`Error::Closed`]; I/O errors unlinking files.
    pub fn delete_expired_files(&self, force: bool) -> Result<CleanupReport> {
        self.check_open()?;
        self.cleaner.run_pass(if force {
            Trigger::Force
        } else {
            Trigger::Manual
        })
    }

    /// Replaces the cleanup service's clock (epoch milliseconds; the `delete_when` hour is taken
    /// in the local time zone). For tests and simulations.
    pub fn set_clock(&self, clock: Clock) {
        self.cleaner.set_clock(clock);
    }

    /// Replaces the disk usage probe (a ratio in `[0, 1]` of the partition holding a path, `None`
    /// if unknown; the default uses `statvfs`). For tests and simulations.
    pub fn set_disk_usage_probe(&self, probe: DiskUsageProbe) {
        self.cleaner.set_probe(probe);
    }

    /// True while puts are refused because the disk usage is above
    /// `disk_space_warning_level_ratio`.
    pub fn is_disk_full(&self) -> bool {
        self.cleaner.is_disk_full()
    }

    /// The error of the last scheduled cleanup pass, if it failed (it is retried next pass).
    pub fn last_cleanup_error(&self) -> Option<String> {
        self.cleaner.last_error()
    }

    /// Runs one pass of a background service by hand (for `background_threads = false`).
    /// [`ServiceKind::Cleanup`] also runs with background threads; [`ServiceKind::Schedule`]
    /// is one pass with the wall clock (see [`Store::deliver_delayed_messages`]).
    ///
    /// # Errors
    /// Whatever the pass returns; `InvalidArgument` if the services run on their own threads.
    pub fn run_service_once(&self, service: ServiceKind) -> Result<()> {
        self.check_open()?;
        if service == ServiceKind::Cleanup {
            return self.cleaner.run_pass(Trigger::Scheduled).map(|_| ());
        }
        if service == ServiceKind::Schedule && lock(&self.manual).is_some() {
            return self.deliver_delayed_messages(now_ms()).map(|_| ());
        }
        let mut manual = lock(&self.manual);
        let Some(m) = manual.as_mut() else {
            return Err(Error::invalid(
                "service",
                "services run on their own threads (background_threads = true)",
            ));
        };
        match service {
            ServiceKind::Flush => m.flush.run_once(Wake::Notified),
            ServiceKind::Commit => m
                .commit
                .as_mut()
                .map_or(Ok(()), |c| c.run_once(Wake::Notified)),
            ServiceKind::Reput => m.reput.run_once(Wake::Notified),
            ServiceKind::FlushCq => m.flush_cq.run_once(Wake::Notified),
            // Handled above (schedule without background threads has no manual set).
            ServiceKind::Cleanup | ServiceKind::Schedule => Err(Error::invalid(
                "service",
                format!(
                    "{} runs only with background_threads = false",
                    service.name()
                ),
            )),
        }
    }

    /// Closes the store: stops new puts, lets in-flight ones finish, commits and flushes
    /// everything, writes the checkpoint, removes the abort marker (unless the store is
    /// poisoned), stops and joins every service, deletes preallocated files that were never
    /// used, and releases the lock. Idempotent; reads fail with `Closed` afterwards.
    ///
    /// # Errors
    /// The first error met; the store is closed regardless.
    pub fn close(&self) -> Result<()> {
        if self
            .state
            .compare_exchange(OPEN, CLOSING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Ok(());
        }
        self.waiters.close();
        if let Some(p) = &self.progress {
            p.close();
        }
        let mut errors: Vec<Error> = Vec::new();
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                errors.push(e);
            }
        };
        if !self.read_only {
            // The schedule service puts messages: stop it (it saves its progress) before the
            // writer is released.
            for h in lock(&self.services)
                .iter_mut()
                .filter(|h| h.name() == "schedule")
            {
                note(h.stop_and_join());
            }
            // Wait for in-flight puts (they hold the put lock) and stop the writer; the allocator
            // stops pre-faulting files nobody will use.
            self.log.release_writer();
            if let Some(a) = &self.allocator {
                a.begin_close();
            }
            let mut services = std::mem::take(&mut *lock(&self.services));
            // Order: final commit, final flush, dispatch drained, consume queues and checkpoint
            // flushed; the allocator last (it deletes files that were never used).
            for name in [
                "cleanup", "commit", "flush", "reput", "flush-cq", "allocate",
            ] {
                for h in services.iter_mut().filter(|h| h.name() == name) {
                    note(h.stop_and_join());
                }
            }
            if let Some(mut m) = lock(&self.manual).take() {
                if self.health.check().is_ok() {
                    if let Some(c) = m.commit.as_mut() {
                        note(c.on_shutdown());
                    }
                    note(m.flush.on_shutdown());
                    note(m.reput.on_shutdown());
                    note(m.flush_cq.on_shutdown());
                }
            }
            if let Some(a) = &self.allocator {
                note(a.close());
            }
            if self.health.check().is_ok() {
                note(self.consumer_offsets.persist(self.config.fsync_directory));
                if let Some(core) = &self.schedule {
                    note(core.persist());
                }
                if self.topics.observe(
                    self.cqs
                        .all()
                        .iter()
                        .map(|q| (q.topic().to_string(), q.queue_id())),
                ) {
                    note(self.topics.persist(self.config.fsync_directory));
                }
                let caught_up = self.dispatcher.reput_from() >= self.log.max_offset();
                let written = self.checkpoint_source.write(true);
                let clean = written.is_ok();
                note(written);
                // RocketMQ keeps the abort file when dispatch lags, forcing a full re-dispatch.
                if clean && caught_up {
                    note(checkpoint::remove_abort(
                        &self.root,
                        self.config.fsync_directory,
                    ));
                }
                // A closed store keeps no block it does not use: the unwritten tails of the
                // commit log, consume queue and index files become holes (same bytes, same
                // lengths); a writable open makes them real again before writing there.
                note(self.trim_files().map(drop));
            }
        }
        drop(lock(&self.lock_file).take());
        self.state.store(CLOSED, Ordering::Release);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Punches the unwritten tails of every file (see `close`). Returns the bytes given back.
    fn trim_files(&self) -> Result<u64> {
        let mut punched = self.log.queue().trim()?;
        punched += self.cqs.trim()?;
        if let Some(index) = &self.index {
            punched += index.trim()?;
        }
        Ok(punched)
    }

    /// Reads up to `max_messages` messages of a queue from `offset` (RocketMQ `getMessage`).
    /// `subscription` is a tag expression (`"*"`, `"TagA || TagB"`). Statuses, not errors,
    /// report every "nothing to return" case.
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_messages: usize,
        max_total_bytes: Option<u64>,
        subscription: Option<&str>,
    ) -> Result<GetResult> {
        self.check_readable()?;
        let sub = Subscription::parse(subscription);
        let r = self.read_queue(topic, queue_id, offset, max_messages, max_total_bytes, &sub);
        self.check_mapped()?;
        Ok(r)
    }

    /// [`Store::get_message`] without copying anything: each message found is a
    /// [`RecordHandle`] that keeps its commit log file mapped and views the record in place
    /// ([`RecordHandle::view`]), so a caller copies each body once, straight from the mapping,
    /// into its own buffer (the Python binding: into a `bytes` object).
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn get_message_records(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_messages: usize,
        max_total_bytes: Option<u64>,
        subscription: Option<&str>,
    ) -> Result<GetRecords> {
        self.check_readable()?;
        let sub = Subscription::parse(subscription);
        let q = read::QueueRead {
            topic,
            queue_id,
            offset,
            max_msgs: max_messages,
            max_total_bytes,
            sub: &sub,
        };
        let o = read::get_message_with(&self.log, &self.cqs, &self.limits, &q, RecordHandle::found);
        self.check_mapped()?;
        self.stats.record_get_counts(topic, o.items.len(), o.bytes);
        self.stats.record_unit_mismatches(o.mismatched);
        Ok(GetRecords {
            status: o.status,
            next_begin_offset: o.next_begin_offset,
            min_offset: o.min_offset,
            max_offset: o.max_offset,
            records: o.items,
        })
    }

    /// One `getMessage` over the queue, counted in the statistics.
    fn read_queue(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_messages: usize,
        max_total_bytes: Option<u64>,
        sub: &Subscription,
    ) -> GetResult {
        let q = read::QueueRead {
            topic,
            queue_id,
            offset,
            max_msgs: max_messages,
            max_total_bytes,
            sub,
        };
        let (r, mismatched) = read::get_message(&self.log, &self.cqs, &self.limits, &q);
        self.stats.record_get(topic, &r);
        self.stats.record_unit_mismatches(mismatched);
        r
    }

    /// Long polling: like [`Store::get_message`], but when nothing matching is there yet it
    /// waits (up to `timeout`) until dispatch of a message to this queue wakes it. Messages
    /// that do not match the subscription are skipped; the result's `next_begin_offset` moves
    /// past them.
    ///
    /// # Errors
    /// [`Error::Closed`] if the store closes while waiting.
    #[allow(clippy::too_many_arguments)]
    pub fn pull(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_messages: usize,
        max_total_bytes: Option<u64>,
        subscription: Option<&str>,
        timeout: Duration,
    ) -> Result<GetResult> {
        self.check_readable()?;
        let sub = Subscription::parse(subscription);
        let deadline = deadline_after(timeout);
        let reg = self.waiters.register(topic, queue_id);
        let mut offset = offset;
        loop {
            let seen = reg.signal.seq();
            let follow_seen = self.follower.as_ref().and_then(|f| f.seq());
            self.follow()?;
            let r = self.read_queue(topic, queue_id, offset, max_messages, max_total_bytes, &sub);
            let wait = match r.status {
                GetStatus::Found => return Ok(r),
                GetStatus::NoMatchedMessage if r.next_begin_offset > offset => {
                    offset = r.next_begin_offset;
                    continue;
                }
                GetStatus::NoMatchedMessage
                | GetStatus::OffsetOverflowOne
                | GetStatus::OffsetFoundNull => true,
                GetStatus::NoMessageInQueue => offset == 0,
                _ => false,
            };
            if !wait || std::time::Instant::now() >= deadline {
                // `r` was read at the (possibly advanced) `offset`, so its nextBeginOffset
                // already follows get_message's rules (OFFSET_OVERFLOW_BADLY corrects down).
                return Ok(r);
            }
            match &self.follower {
                // Woken by the writer's progress word (another process), or the deadline.
                Some(f) => f.wait(follow_seen, deadline),
                None => reg
                    .signal
                    .wait_change(seen, deadline, self.waiters.closed_flag()),
            }
            if self.state.load(Ordering::Acquire) != OPEN {
                return Err(Error::Closed);
            }
        }
    }

    /// A read-only store following a writer in another process: the writer's progress
    /// sequence number, bumped after each dispatch pass (`None`: a writable store, or no writer
    /// has published progress; see [`Store::wait_progress`]).
    pub fn progress_seq(&self) -> Option<u32> {
        self.follower.as_ref().and_then(|f| f.seq())
    }

    /// Waits until the writer of a followed store publishes progress past `seen` (a value of
    /// [`Store::progress_seq`]), up to `timeout`, then catches up with it: a consumer of many
    /// queues waits here once instead of in one [`Store::pull`] per queue. Sleeps in the kernel
    /// (no CPU). A writable store (nothing to follow) just sleeps out `timeout`, at most 50 ms.
    ///
    /// # Errors
    /// [`Error::Closed`]; the errors of catching up.
    pub fn wait_progress(&self, seen: Option<u32>, timeout: Duration) -> Result<Option<u32>> {
        self.check_readable()?;
        match &self.follower {
            Some(f) => {
                if f.seq() == seen {
                    f.wait(seen, deadline_after(timeout));
                }
            }
            None => std::thread::sleep(timeout.min(Duration::from_millis(50))),
        }
        self.check_readable()?;
        Ok(self.progress_seq())
    }

    /// Messages whose KEYS or UNIQ_KEY equal `key`, stored between `begin` and `end` (epoch ms),
    /// newest index file first (RocketMQ `queryMessage`). Every hit is checked against its
    /// record. A read-only store opened after an unclean shutdown also answers from an
    /// in-memory key map of the records its index files may lack (built on the first query).
    ///
    /// # Errors
    /// [`Error::Closed`]; `InvalidArgument` when the index is disabled.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> Result<QueryResult> {
        self.check_readable()?;
        let index = self.key_index()?;
        let q = read::KeyQuery {
            topic,
            key,
            max_num,
            begin,
            end,
        };
        let mut result = read::query_message(&self.log, index, &self.limits, &q);
        self.check_mapped()?;
        if let Some(tail) = &self.tail_index {
            let max_num = max_num.clamp(1, self.limits.max_msgs_num_batch);
            crate::tail_index::add_tail_hits(
                &self.log,
                tail,
                (topic, key),
                max_num,
                (begin, end),
                &mut result,
            );
        }
        Ok(result)
    }

    /// The index, for key lookups; `InvalidArgument` when it is disabled.
    fn key_index(&self) -> Result<&IndexService> {
        self.index.as_deref().ok_or_else(|| {
            Error::invalid(
                "key",
                "the index is disabled (message_index_enable = false)",
            )
        })
    }

    /// [`Store::query_message`] without copying: the matching records as [`RecordHandle`]s,
    /// ascending commit log offset.
    ///
    /// # Errors
    /// As [`Store::query_message`].
    pub fn query_message_records(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> Result<Vec<RecordHandle>> {
        self.check_readable()?;
        if self.tail_index.is_some() {
            // Read-only after a crash: the in-memory tail map adds hits past the index files.
            let r = self.query_message(topic, key, max_num, begin, end)?;
            return Ok(r
                .messages
                .iter()
                .filter_map(|m| u64::try_from(m.commitlog_offset()).ok())
                .filter_map(|o| self.log.record_at(o).map(RecordHandle::new))
                .collect());
        }
        let index = self.key_index()?;
        let q = read::KeyQuery {
            topic,
            key,
            max_num,
            begin,
            end,
        };
        Ok(read::query_message_with(&self.log, index, &self.limits, &q, RecordHandle::found).0)
    }

    /// [`Store::query_message_records`] of each of `keys` (of `topic`, with the same `max_num`,
    /// `begin` and `end`): one result per key, in the order of `keys`, each equal to the
    /// single lookup's. Lookups of a batch run in groups whose index slots, chain heads and
    /// records are loaded together, so their cache misses overlap: a batch costs less per key
    /// than single lookups do.
    ///
    /// # Errors
    /// As [`Store::query_message`].
    pub fn query_messages_records<K: AsRef<str>>(
        &self,
        topic: &str,
        keys: &[K],
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> Result<Vec<Vec<RecordHandle>>> {
        self.check_readable()?;
        if self.tail_index.is_some() {
            return keys
                .iter()
                .map(|k| self.query_message_records(topic, k.as_ref(), max_num, begin, end))
                .collect();
        }
        let index = self.key_index()?;
        let q = read::KeyQuery {
            topic,
            key: "",
            max_num,
            begin,
            end,
        };
        Ok(read::query_messages_with(
            &self.log,
            index,
            &self.limits,
            &q,
            keys,
            RecordHandle::found,
        ))
    }

    /// [`Store::look_message_by_offset`] without copying: the record as a [`RecordHandle`]
    /// (checked to be a message starting at `offset`).
    ///
    /// # Errors
    /// As [`Store::look_message_by_offset`].
    pub fn look_message_record(&self, offset: u64) -> Result<RecordHandle> {
        let r = self.record_in_range(offset)?;
        let Some(layout) = read::record_view(&r).map(|v| v.layout()) else {
            return Err(no_record_at(offset));
        };
        Ok(RecordHandle::decoded(r, layout))
    }

    /// The message with an offset message id (store host + commit log offset).
    ///
    /// # Errors
    /// `InvalidArgument` for a malformed id; as [`Store::look_message_by_offset`].
    pub fn view_message_by_id(&self, msg_id: &str) -> Result<StoredMessage> {
        let (_, offset) = rocketstore_format::decode_offset_msg_id(msg_id)
            .map_err(|e| Error::invalid("msg_id", e.to_string()))?;
        if offset < 0 {
            return Err(Error::invalid("msg_id", "negative commit log offset"));
        }
        self.look_message_by_offset(offset as u64)
    }

    /// The queue offset for a store time (5.x `getOffsetInQueueByTime`; `upper` selects the
    /// UPPER boundary, else LOWER).
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn get_offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        upper: bool,
    ) -> Result<i64> {
        self.check_readable()?;
        let Some(cq) = self.cqs.get(topic, queue_id) else {
            return Ok(0);
        };
        let log = &self.log;
        let store_time_of = |phy: i64, size: i32| read::store_timestamp_at(log, phy, size);
        Ok(cq.offset_by_time(timestamp, upper, &store_time_of, log.min_offset()))
    }

    /// The queue's first offset (0 for an unknown queue).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        let _ = self.follow();
        self.cqs.get(topic, queue_id).map_or(0, |q| q.min_offset())
    }

    /// The queue's end offset: the next offset to be written (0 for an unknown queue).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        let _ = self.follow();
        self.cqs.get(topic, queue_id).map_or(0, |q| q.max_offset())
    }

    /// STORETIMESTAMP of the message at the queue's first offset, or -1.
    pub fn get_earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        let min = self.min_offset_in_queue(topic, queue_id);
        self.get_message_store_timestamp(topic, queue_id, min)
    }

    /// STORETIMESTAMP of the message at `queue_offset`, or -1.
    pub fn get_message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> i64 {
        self.cqs
            .get(topic, queue_id)
            .and_then(|q| q.get(queue_offset))
            .and_then(|u| read::store_timestamp_at(&self.log, u.phy_offset, u.size))
            .unwrap_or(-1)
    }

    /// Every consume queue: (topic, queue id, min offset, max offset).
    pub fn consume_queues(&self) -> Vec<(String, i32, i64, i64)> {
        let _ = self.follow();
        self.cqs
            .all()
            .iter()
            .map(|q| {
                (
                    q.topic().to_string(),
                    q.queue_id(),
                    q.min_offset(),
                    q.max_offset(),
                )
            })
            .collect()
    }

    /// Bytes of commit log not yet dispatched to consume queues and index files.
    pub fn dispatch_behind_bytes(&self) -> u64 {
        self.log
            .max_offset()
            .saturating_sub(self.dispatcher.reput_from())
    }

    /// Number of pulls currently waiting.
    pub fn waiting_pulls(&self) -> usize {
        self.waiters.waiting()
    }

    /// Records a consumer group's progress in a queue (RocketMQ `commitOffset`); persisted to
    /// `config/consumerOffset.json` within a second, on [`Store::flush`] and at close.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad group, topic, queue id or negative offset; `ReadOnly`.
    pub fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<()> {
        self.check_writable()?;
        self.consumer_offsets.commit(group, topic, queue_id, offset)
    }

    /// A consumer group's committed offset in a queue, or -1 if it has none.
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.consumer_offsets.query(group, topic, queue_id)
    }

    /// Every committed consumer offset: (topic, group, queue id, offset).
    pub fn consumer_offsets(&self) -> Vec<(String, String, i32, i64)> {
        self.consumer_offsets.all()
    }

    /// Queue count recorded for a topic in `config/topics.json`, if any.
    pub fn topic_queue_nums(&self, topic: &str) -> Option<i32> {
        self.topics.queue_nums(topic)
    }

    /// Statistics (RocketMQ StoreStatsService): messages and bytes put and got per topic, the put
    /// latency distribution, flush and dispatch lag, file counts, schedule progress. See
    /// [`StoreStats`] for each field.
    pub fn stats(&self) -> StoreStats {
        let c = self.cursors();
        let cqs = self.cqs.all();
        let mut s = StoreStats {
            put_by_topic: self.log.put_stats(),
            flush_count: self.health.flush_count(),
            flush_behind_bytes: c.wrote.saturating_sub(c.flushed),
            writeback_started_bytes: self.log.queue().writeback_started(),
            dispatch_behind_bytes: self.dispatch_behind_bytes(),
            dispatched_messages: self.dispatcher.dispatched(),
            commitlog_files: self.log.queue().len(),
            consume_queues: cqs.len(),
            consume_queue_files: cqs.iter().map(|q| q.file_count()).sum(),
            index_files: self.index.as_ref().map_or(0, |i| i.files().len()),
            waiting_pulls: self.waiters.waiting(),
            writer_created_files: self.log.sync_creations(),
            ..StoreStats::default()
        };
        self.stats.fill(&mut s);
        if let Some(core) = &self.schedule {
            s.schedule_delivered = core.delivered();
            s.schedule_progress = core
                .progress()
                .into_iter()
                .map(|p| (p.level, p.offset, p.max_offset))
                .collect();
        }
        s
    }

    /// Topics of records that were kept in the commit log but given no consume queue since the
    /// store was opened, because the topic cannot safely be a directory name (empty, `.`, `..`,
    /// `/`, NUL or over 255 bytes: only a store written by another implementation, or forged,
    /// holds such a record; `put` refuses them). Their records stay readable by `scan`, offset,
    /// message id and key (the index has them); `get_message` by queue cannot serve them.
    /// Empty for a read-only store (it dispatches nothing).
    pub fn undispatchable_topics(&self) -> Vec<crate::UndispatchableTopic> {
        self.dispatcher.undispatchable_topics()
    }

    /// Paths of the index files, oldest first.
    pub fn index_files(&self) -> Vec<PathBuf> {
        self.index.as_ref().map(|i| i.files()).unwrap_or_default()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn no_record_at(offset: u64) -> Error {
    Error::invalid(
        "commitlog_offset",
        format!("no record starts at offset {offset}"),
    )
}

/// An owned iterator over the commit log's records (see [`Store::scan`]).
#[derive(Debug)]
pub struct Scanner {
    log: Arc<CommitLog>,
    offset: u64,
    first: bool,
    done: bool,
    check_crc: bool,
}

impl Scanner {
    /// Also verify every body CRC (a mismatch is a `Corruption` error).
    pub fn with_crc_check(mut self, on: bool) -> Self {
        self.check_crc = on;
        self
    }

    /// The offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Up to `max` records.
    ///
    /// # Errors
    /// A `Corruption` error at a damaged record inside the readable range.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<StoredMessage>> {
        let mut out = Vec::with_capacity(max.min(4096));
        while out.len() < max {
            match self.next() {
                Some(Ok(m)) => out.push(m),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(out)
    }
}

impl Iterator for Scanner {
    type Item = Result<StoredMessage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let opts = DecodeOptions {
            check_crc: self.check_crc,
            ..DecodeOptions::default()
        };
        let mut it = self.log.iter_from(self.offset, opts);
        let item = it.next();
        let next_offset = it.offset();
        if let Some(e) = self.log.io_fault() {
            // The record may have been read from a zero page (see `Store::check_mapped`).
            self.done = true;
            return Some(Err(e));
        }
        match item {
            None => {
                self.done = true;
                None
            }
            Some(Ok(r)) => {
                self.first = false;
                self.offset = next_offset;
                Some(r.decode())
            }
            Some(Err(e)) => {
                self.done = true;
                if self.first {
                    Some(Err(Error::invalid(
                        "from_offset",
                        format!("no record starts at offset {}", self.offset),
                    )))
                } else {
                    Some(Err(e))
                }
            }
        }
    }
}

#[cfg(test)]
mod transient_pool_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// With a transient write buffer, the writer can roll into the next file while the tail of
    /// the previous one is still uncommitted. Dispatch must wait for that tail, not skip to the
    /// next file (it used to, leaving a gap in the consume queue; seen in CI as
    /// `durability::async_flush_cursors_with_transient_pool`).
    #[test]
    fn dispatch_waits_for_the_uncommitted_tail_of_a_rolled_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            mapped_file_size_commit_log: 64 * 1024,
            transient_store_pool_enable: true,
            background_threads: false,
            ..StoreConfig::default()
        };
        let store = Store::open(dir.path(), cfg).unwrap();
        // Hold the commit service back: puts land in the write buffer only, and the inline
        // dispatch after each put sees nothing past the committed position.
        let commit = lock(&store.manual).as_mut().unwrap().commit.take();
        assert!(commit.is_some());
        let body = vec![7u8; 700];
        let mut n = 0i64;
        while store.cursors().wrote < 64 * 1024 + 4096 && n < 1000 {
            store
                .put(&PutMessage {
                    topic: "PoolTopic",
                    body: &body,
                    ..Default::default()
                })
                .unwrap();
            n += 1;
        }
        // The writer is in the second file; commit everything, then dispatch.
        assert!(store.cursors().wrote > 64 * 1024, "{:?}", store.cursors());
        {
            let mut manual = lock(&store.manual);
            let m = manual.as_mut().unwrap();
            m.commit = commit;
            m.commit.as_mut().unwrap().commit_pass(0).unwrap();
        }
        store.run_service_once(ServiceKind::Reput).unwrap();
        assert_eq!(store.max_offset_in_queue("PoolTopic", 0), n);
        // Every message is read back, in order, from the consume queue.
        let mut offset = 0i64;
        while offset < n {
            let got = store
                .get_message("PoolTopic", 0, offset, 32, None, None)
                .unwrap();
            assert_eq!(got.status, GetStatus::Found, "at queue offset {offset}");
            for m in &got.messages {
                assert_eq!(m.queue_offset, offset);
                offset += 1;
            }
        }
        store.close().unwrap();
    }
}

#[cfg(test)]
mod put_buffer_tests {
    use super::*;

    #[test]
    fn reused_prepared_vectors_keep_their_allocation() {
        let v: Vec<Prepared<'static>> = Vec::with_capacity(4096);
        let w: Vec<Prepared<'_>> = reuse_prepared(v);
        assert!(w.is_empty());
        assert!(w.capacity() >= 4096);
    }
}
