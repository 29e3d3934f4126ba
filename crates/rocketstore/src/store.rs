//! The store facade: open (lock, load, recover), put, read, flush, close.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketstore_format::{decode_record, Checkpoint, CheckpointExt, DecodeOptions, Decoded};

use crate::checkpoint;
use crate::commitlog::{CommitLog, RecordRef};
use crate::config::{RecoveryMode, StoreConfig};
use crate::error::{CorruptionKind, Error, Result};
use crate::message::{PutMessage, PutResult, StoredMessage};
use crate::segment::CreateOptions;
use crate::service::allocate::{AllocateService, Allocator};
use crate::service::flush::{CommitService, FlushService};
use crate::service::{spawn, Health, Service, ServiceHandle, Signal, Wake};
use crate::util::{lock, now_ms};
use crate::validate::{prepare, UniqKeyGen};

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
    health: Arc<Health>,
    allocator: Option<Arc<Allocator>>,
    flush_signal: Arc<Signal>,
    commit_signal: Arc<Signal>,
    services: Mutex<Vec<ServiceHandle>>,
    state: AtomicU8,
    lock_file: Mutex<Option<File>>,
    uniq: UniqKeyGen,
    recovery: RecoveryReport,
    /// Serializes `close` against manual service ticks.
    manual: Mutex<Option<(FlushService, Option<CommitService>)>>,
}

impl Store {
    /// Opens (creating if needed) a writable store at `root`, taking its lock and recovering
    /// the commit log.
    ///
    /// # Errors
    /// [`Error::Locked`] if another process has it open; [`Error::Config`] for a bad config;
    /// [`Error::Corruption`] when recovery finds damage it may not truncate; I/O errors.
    pub fn open(root: impl AsRef<Path>, config: StoreConfig) -> Result<Store> {
        Self::open_impl(root.as_ref(), config, false)
    }

    /// Opens any RocketMQ store root read-only. Nothing is created, locked or modified: no lock
    /// file, no abort file, no byte of any file. The commit log file size is taken from the
    /// files.
    ///
    /// # Errors
    /// As [`Store::open`], except `Locked`.
    pub fn open_read_only(root: impl AsRef<Path>, config: StoreConfig) -> Result<Store> {
        Self::open_impl(root.as_ref(), config, true)
    }

    fn open_impl(root: &Path, config: StoreConfig, read_only: bool) -> Result<Store> {
        config.validate()?;
        crate::util::check_not_symlink(root)?;
        if read_only {
            let meta = std::fs::metadata(root).map_err(|e| Error::io("stat", root, e))?;
            if !meta.is_dir() {
                return Err(Error::UnsupportedFormat { path: root.to_path_buf(), reason: "not a directory".into() });
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
        let lock_file = if read_only { None } else { Some(take_lock(root)?) };
        let abnormal = root.join(checkpoint::ABORT_FILE).exists();
        let commitlog_dir = root.join("commitlog");
        if !read_only {
            std::fs::create_dir_all(&commitlog_dir).map_err(|e| Error::io("mkdir", &commitlog_dir, e))?;
        }
        let health = Health::new();
        let flush_signal = Signal::new();
        let commit_signal = Signal::new();
        let allocator = (!read_only && config.background_threads).then(|| {
            let warm = config.warm_mapped_file_enable.then(|| {
                (config.flush_disk_type == crate::FlushDiskType::SyncFlush)
                    .then_some(config.flush_least_pages_when_warm_mapped_file as usize)
            });
            Allocator::new(
                &commitlog_dir,
                CreateOptions { sync: config.fsync_directory, populate: config.populate_mapped_file, warm },
                Signal::new(),
                Duration::from_millis(config.allocate_wait_timeout),
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
        let cp = checkpoint::read(root)?;
        let durable = match &cp {
            Some(Ok(c)) => c.ext.as_ref().map(|e| e.durable_commitlog_offset.max(0) as u64),
            _ => None,
        };
        let recovery = recover(&log, &config, abnormal, durable, read_only)?;
        let store = Store {
            root: root.to_path_buf(),
            uniq: UniqKeyGen::new(&config.store_host),
            config,
            read_only,
            log,
            health,
            allocator,
            flush_signal,
            commit_signal,
            services: Mutex::new(Vec::new()),
            state: AtomicU8::new(OPEN),
            lock_file: Mutex::new(lock_file),
            recovery,
            manual: Mutex::new(None),
        };
        if !read_only {
            checkpoint::create_abort(&store.root, store.config.fsync_directory)?;
            store.start_services()?;
        }
        Ok(store)
    }

    fn start_services(&self) -> Result<()> {
        let flush = FlushService::new(Arc::clone(&self.log), &self.config);
        let commit = self
            .log
            .has_pool()
            .then(|| CommitService::new(Arc::clone(&self.log), Arc::clone(&self.flush_signal), &self.config));
        if !self.config.background_threads {
            *lock(&self.manual) = Some((flush, commit));
            return Ok(());
        }
        let mut services = lock(&self.services);
        if let Some(alloc) = &self.allocator {
            services.push(spawn(AllocateService::new(Arc::clone(alloc)), alloc.signal(), Arc::clone(&self.health))?);
        }
        if let Some(c) = commit {
            services.push(spawn(c, Arc::clone(&self.commit_signal), Arc::clone(&self.health))?);
        }
        services.push(spawn(flush, Arc::clone(&self.flush_signal), Arc::clone(&self.health))?);
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
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly { path: self.root.clone() });
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
    /// # Errors
    /// As [`Store::put`]; the error message names the index of the first invalid message.
    pub fn put_batch(&self, msgs: &[PutMessage<'_>]) -> Result<Vec<PutResult>> {
        self.check_writable()?;
        if msgs.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut props = Vec::with_capacity(msgs.len() * 64);
        let indexed = msgs.len() > 1;
        let mut prepared = Vec::with_capacity(msgs.len());
        let mut last_topic: Option<&str> = None;
        for (i, m) in msgs.iter().enumerate() {
            let topic_checked = last_topic == Some(m.topic);
            prepared.push(prepare(
                m,
                indexed.then_some(i),
                topic_checked,
                &self.config,
                self.log.file_size(),
                &self.uniq,
                now,
                &mut props,
            )?);
            last_topic = Some(m.topic);
        }
        self.check_writable()?;
        let results = self.log.append(&prepared, &props, self.config.store_host)?;
        if !self.config.background_threads {
            // No services: honour the pool's commit at once so readers see the data.
            if self.log.has_pool() {
                if let Some((_, Some(c))) = lock(&self.manual).as_mut() {
                    c.commit_pass(0)?;
                }
            }
        }
        Ok(results)
    }

    /// The record starting at absolute commit log `offset`.
    ///
    /// # Errors
    /// [`Error::OffsetOutOfRange`] outside `[min, max)`; [`Error::InvalidArgument`] if no record
    /// starts there.
    pub fn look_message_by_offset(&self, offset: u64) -> Result<StoredMessage> {
        self.check_readable()?;
        let min = self.log.min_offset();
        let max = self.log.max_offset();
        if offset < min || offset >= max {
            return Err(Error::OffsetOutOfRange { requested: offset as i64, min: min as i64, max: max as i64 });
        }
        let no_record = || Error::invalid("commitlog_offset", format!("no record starts at offset {offset}"));
        let r = self.log.record_at(offset).ok_or_else(no_record)?;
        decode_owned(&r).map_err(|_| no_record())
    }

    /// Raw bytes of the record at `offset` (RocketMQ `selectOneMessageByOffset`).
    ///
    /// # Errors
    /// As [`Store::look_message_by_offset`].
    pub fn select_one_message_by_offset(&self, offset: u64) -> Result<Vec<u8>> {
        self.check_readable()?;
        let min = self.log.min_offset();
        let max = self.log.max_offset();
        if offset < min || offset >= max {
            return Err(Error::OffsetOutOfRange { requested: offset as i64, min: min as i64, max: max as i64 });
        }
        self.log
            .record_at(offset)
            .map(|r| r.bytes().to_vec())
            .ok_or_else(|| Error::invalid("commitlog_offset", format!("no record starts at offset {offset}")))
    }

    /// Iterates records from `from_offset` (clamped up to the minimum offset) to the end of
    /// readable data.
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn scan(&self, from_offset: u64) -> Result<Scanner> {
        self.check_readable()?;
        let start = from_offset.max(self.log.min_offset());
        Ok(Scanner { log: Arc::clone(&self.log), offset: start, first: true, done: false, check_crc: false })
    }

    /// Smallest commit log offset still stored.
    pub fn min_commitlog_offset(&self) -> u64 {
        self.log.min_offset()
    }

    /// One past the last readable commit log byte.
    pub fn max_commitlog_offset(&self) -> u64 {
        self.log.max_offset()
    }

    /// The commit log cursors.
    pub fn cursors(&self) -> Cursors {
        let (wrote, committed, flushed) = self.log.cursors();
        Cursors { wrote, committed, flushed }
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
                v.into_iter().enumerate().filter(|(_, o)| *o > 0).map(move |(q, o)| (t.clone(), q as i32, o))
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
        self.log.queue().files().iter().map(|f| f.path().to_path_buf()).collect()
    }

    /// Commits and flushes everything written so far, and returns the durable offset.
    ///
    /// # Errors
    /// [`Error::Poisoned`] if a flush fails (the store is then fenced).
    pub fn flush(&self) -> Result<u64> {
        self.check_open()?;
        if self.read_only {
            return Ok(self.log.max_offset());
        }
        self.health.check()?;
        self.log.flush_all()
    }

    /// Runs one pass of a background service by hand (for `background_threads = false`).
    /// `service` is `"flush"` or `"commit"`.
    ///
    /// # Errors
    /// Whatever the pass returns; an unknown service is an `InvalidArgument`.
    pub fn run_service_once(&self, service: &str) -> Result<()> {
        self.check_open()?;
        let mut manual = lock(&self.manual);
        let Some((flush, commit)) = manual.as_mut() else {
            return Err(Error::invalid("service", "services run on their own threads (background_threads = true)"));
        };
        match service {
            "flush" => flush.run_once(Wake::Notified),
            "commit" => commit.as_mut().map_or(Ok(()), |c| c.run_once(Wake::Notified)),
            other => Err(Error::invalid("service", format!("unknown service {other:?}"))),
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
        if self.state.compare_exchange(OPEN, CLOSING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Ok(());
        }
        let mut errors: Vec<Error> = Vec::new();
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                errors.push(e);
            }
        };
        if !self.read_only {
            // Wait for in-flight puts (they hold the put lock) and stop the writer.
            self.log.release_writer();
            let mut services = std::mem::take(&mut *lock(&self.services));
            // Order: commit (final commit), flush (final flush), then allocate.
            for name in ["commit", "flush", "allocate"] {
                for h in services.iter_mut().filter(|h| h.name() == name) {
                    note(h.stop_and_join());
                }
            }
            if !self.config.background_threads && self.health.check().is_ok() {
                note(self.log.flush_all().map(|_| ()));
            }
            if let Some(a) = &self.allocator {
                note(a.close());
            }
            if self.health.check().is_ok() {
                match self.write_checkpoint(true) {
                    Ok(()) => note(checkpoint::remove_abort(&self.root, self.config.fsync_directory)),
                    Err(e) => note(Err(e)),
                }
            }
        }
        drop(lock(&self.lock_file).take());
        self.state.store(CLOSED, Ordering::Release);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn write_checkpoint(&self, clean: bool) -> Result<()> {
        let ts = self.log.queue().last().map_or(0, |f| f.last_store_timestamp());
        let ts = if ts == 0 { self.log.queue().store_timestamp() } else { ts };
        let cp = Checkpoint {
            physic_msg_timestamp: ts,
            logics_msg_timestamp: ts,
            index_msg_timestamp: 0,
            master_flushed_offset: 0,
            confirm_phy_offset: 0,
            ext: Some(CheckpointExt {
                durable_commitlog_offset: self.log.queue().flushed_where() as i64,
                clean_shutdown: clean,
                generation: 0,
            }),
        };
        checkpoint::write(&self.root, &cp, self.config.fsync_directory)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn take_lock(root: &Path) -> Result<File> {
    let path = root.join("lock");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked { path }),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("flock", &path, e)),
    }
    // RocketMQ writes "lock" at position 0.
    use std::io::Seek;
    let _ = f.seek(std::io::SeekFrom::Start(0));
    f.write_all(b"lock").map_err(|e| Error::io("write", &path, e))?;
    Ok(f)
}

/// Finds the end of valid data, truncates the dirty tail (writable) and rebuilds the queue
/// offset table.
fn recover(log: &CommitLog, cfg: &StoreConfig, abnormal: bool, durable: Option<u64>, read_only: bool) -> Result<RecoveryReport> {
    let mut table: HashMap<String, Vec<i64>> = HashMap::new();
    let max_record = u32::try_from(cfg.max_record_size()).unwrap_or(u32::MAX);
    let check_crc = cfg.check_crc_on_recover;
    let scan = log.scan_for_end(0, check_crc, max_record, |rec, _| {
        let t = rocketstore_format::sysflag::transaction_type(rec.sys_flag);
        if (t == rocketstore_format::sysflag::TRANSACTION_NOT_TYPE || t == rocketstore_format::sysflag::TRANSACTION_COMMIT_TYPE)
            && rec.queue_id >= 0
        {
            let slots = match table.get_mut(rec.topic) {
                Some(s) => s,
                None => table.entry(rec.topic.to_string()).or_default(),
            };
            let q = rec.queue_id as usize;
            if q < 65_536 {
                if slots.len() <= q {
                    slots.resize(q + 1, 0);
                }
                slots[q] = slots[q].max(rec.queue_offset + 1);
            }
        }
    });
    if let Some((at, why)) = &scan.damage {
        let below_durable = durable.is_some_and(|d| *at < d);
        let refuse = match cfg.recovery_mode {
            RecoveryMode::AbsoluteConsistency => true,
            RecoveryMode::TolerateTailCorruption => below_durable,
            RecoveryMode::TolerateAnyCorruption => false,
        };
        if refuse {
            let file = log.queue().find(*at).map(|f| f.path().to_path_buf()).unwrap_or_else(|| log.queue().dir().to_path_buf());
            return Err(Error::corruption(
                file,
                *at,
                CorruptionKind::Invalid(format!(
                    "{why}{}",
                    if below_durable { " (below the durable offset recorded in the checkpoint)" } else { "" }
                )),
            ));
        }
    }
    let files_removed = log.truncate_to(scan.end)?;
    let _ = read_only;
    log.set_queue_offsets(table, scan.last_store_timestamp);
    Ok(RecoveryReport {
        abnormal,
        end_offset: scan.end,
        records: scan.records,
        truncated_at: scan.damage,
        files_removed,
    })
}

fn decode_owned(r: &RecordRef) -> Result<StoredMessage> {
    let opts = DecodeOptions { expected_physical_offset: Some(r.offset() as i64), ..DecodeOptions::default() };
    match decode_record(r.bytes(), &opts) {
        Ok(Decoded::Message(v)) => Ok(StoredMessage::from_view(&v)),
        Ok(Decoded::Blank { .. }) => Err(Error::invalid("commitlog_offset", "blank record")),
        Err(e) => Err(Error::corruption(PathBuf::new(), r.offset(), CorruptionKind::Invalid(e.to_string()))),
    }
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
        let opts = DecodeOptions { check_crc: self.check_crc, ..DecodeOptions::default() };
        let mut it = self.log.iter_from(self.offset, opts);
        let item = it.next();
        let next_offset = it.offset();
        match item {
            None => {
                self.done = true;
                None
            }
            Some(Ok(r)) => {
                self.first = false;
                self.offset = next_offset;
                Some(decode_owned(&r))
            }
            Some(Err(e)) => {
                self.done = true;
                if self.first {
                    Some(Err(Error::invalid("from_offset", format!("no record starts at offset {}", self.offset))))
                } else {
                    Some(Err(e))
                }
            }
        }
    }
}
