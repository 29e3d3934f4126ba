//! The commit log: every message of every topic, appended under one put lock into a mapped
//! file queue, in RocketMQ's record format.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketstore_format::{
    decode_record, encode_record, sysflag, DecodeOptions, Decoded, HostAddr, MessageVersion,
    RecordHeader, RecordView,
};

use crate::config::{FlushDiskType, StoreConfig};
use crate::error::{CorruptionKind, Error, Result};
use crate::feed::{FedRecord, Feed};
use crate::message::{PutResult, PutStatus};
use crate::segment::{Allocator, Taken};
use crate::segment::{
    CreateOptions, FileWriter, MappedFile, MappedFileQueue, SizePolicy, TransientStorePool,
};
use crate::signal::{FlushWait, Health, Signal};
use crate::util::{lock, now_ms};

/// A message validated and measured, ready to be encoded under the put lock.
#[derive(Debug, Clone)]
pub(crate) struct Prepared<'a> {
    pub(crate) topic: &'a str,
    /// The body. Its CRC-32 is taken under the put lock, right before the body is copied into
    /// the file: the copy then reads it from the cache the CRC brought it into, one pass over
    /// memory instead of two (a batch's bodies outgrow the caches between a CRC taken while
    /// preparing and the copy; BENCHMARKS.md, eleventh pass).
    pub(crate) body: &'a [u8],
    /// Range of this message's encoded properties in the batch's shared buffer.
    pub(crate) props: Range<usize>,
    pub(crate) header: RecordHeader,
    pub(crate) version: MessageVersion,
    pub(crate) len: usize,
    /// The properties end with a `__CRC32#` placeholder to seal after encoding.
    pub(crate) prop_crc: bool,
}

impl Prepared<'_> {
    fn dispatched(&self) -> bool {
        let t = sysflag::transaction_type(self.header.sys_flag);
        t == sysflag::TRANSACTION_NOT_TYPE || t == sysflag::TRANSACTION_COMMIT_TYPE
    }
}

/// Appends whose records average fewer bytes are not fed to dispatch ([`crate::feed`]): the
/// dispatcher decodes them back from the mapping. Measured (BENCHMARKS.md, "Write path (issue
/// 12, second pass)"): at 100 B bodies (~280 B records) reading the record back costs dispatch
/// no more than reading its fed facts, while feeding costs the writer ~25 ns per record; at
/// 1 KiB and 4 KiB the feed halves dispatch's CPU.
const FEED_MIN_RECORD_BYTES: usize = 512;

/// Appends of fewer records are not fed to dispatch either: a fed batch per call (a buffer
/// taken, filled, queued and freed on the dispatch thread) cost a stream of single 1 KiB puts
/// more than the dispatcher's decode of the record saves (`malloc` and its page faults were ~20%
/// of the writer; BENCHMARKS.md, eleventh pass).
const FEED_MIN_RECORDS: usize = 8;

/// With `pwrite_commit_log`, a call that appends fewer record bytes than this stores them into
/// the file's mapping instead of staging and `pwrite`-ing them: one system call per call costs
/// more than the page faults of a few records (`put` of one 100 B message: 119-138 k/s staged
/// against 251-543 k/s through the mapping, BENCHMARKS.md "pwrite by default").
const STAGE_MIN_CALL_BYTES: usize = 8 * 1024;

/// A call that appends fewer record bytes than this never wakes the flush service to start
/// writeback ahead of the flush (`flush_commit_log_writeback_bytes`): a stream of single puts
/// stores into the mapping, and writeback of pages the writer has just written through its
/// mapping write-protects them under it (TLB shootdowns, the writer's next store faults), which
/// tripled the single-put stream's p99.99 latency (`roll` bench: 1.36-1.59 ms against 0.42-0.46
/// ms without it; BENCHMARKS.md, twelfth pass). Its bytes are written back by the timed flush,
/// or by the next large call's writeback, which covers everything written before it.
const WRITEBACK_MIN_CALL_BYTES: usize = STAGE_MIN_CALL_BYTES;

/// State guarded by the put lock.
#[derive(Debug, Default)]
struct PutState {
    /// Set by `release_writer` (close): no append is accepted afterwards.
    closed: bool,
    /// Next queue offset per topic, indexed by queue id.
    queue_offsets: HashMap<String, Vec<i64>>,
    last_store_timestamp: i64,
    /// The append handle of the file being written (the only one of that file).
    current: Option<FileWriter>,
}

/// Topics of one append whose queue offsets are taken out of the table for the batch.
const BATCH_TOPICS: usize = 16;

/// The queue offset slots of the topics one append writes, taken out of the put state's table
/// for the batch and put back at its end: the table is hashed once per topic and batch, not
/// once per message, and a topic is found by its `&str` first (rows of one topic usually share
/// it), then by its text.
#[derive(Debug, Default)]
struct BatchOffsets<'m> {
    taken: Vec<(&'m str, String, Vec<i64>)>,
}

impl<'m> BatchOffsets<'m> {
    fn slots<'s>(
        &'s mut self,
        table: &'s mut HashMap<String, Vec<i64>>,
        topic: &'m str,
    ) -> &'s mut Vec<i64> {
        let found = match self.taken.iter().position(|t| std::ptr::eq(t.0, topic)) {
            Some(i) => Some(i),
            None => self.taken.iter().position(|t| t.0 == topic),
        };
        let i = match found {
            Some(i) => i,
            None if self.taken.len() < BATCH_TOPICS => {
                let (k, v) = table
                    .remove_entry(topic)
                    .unwrap_or_else(|| (topic.to_string(), Vec::new()));
                self.taken.push((topic, k, v));
                self.taken.len() - 1
            }
            None => usize::MAX,
        };
        match self.taken.get_mut(i) {
            Some(t) => &mut t.2,
            None => table.entry(topic.to_string()).or_default(),
        }
    }

    fn put_back(self, table: &mut HashMap<String, Vec<i64>>) {
        for (_, k, v) in self.taken {
            table.insert(k, v);
        }
    }
}

/// Where a record lives, with the file pinned so the bytes stay mapped.
#[derive(Debug, Clone)]
pub(crate) struct RecordRef {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl RecordRef {
    pub(crate) fn bytes(&self) -> &[u8] {
        self.file.slice(self.pos, self.len).unwrap_or(&[])
    }

    pub(crate) fn offset(&self) -> u64 {
        self.file.from() + self.pos as u64
    }

    /// Decodes the record into an owned message. A blank record or bytes that are not a valid
    /// record at this offset are a `Corruption` error naming the file.
    pub(crate) fn decode(&self) -> Result<crate::message::StoredMessage> {
        let opts = DecodeOptions {
            expected_physical_offset: Some(self.offset() as i64),
            ..DecodeOptions::default()
        };
        match decode_record(self.bytes(), &opts) {
            Ok(Decoded::Message(v)) => Ok(crate::message::StoredMessage::from_view(&v)),
            Ok(Decoded::Blank { .. }) => Err(Error::corruption(
                self.file.path(),
                self.offset(),
                CorruptionKind::Invalid("blank record".into()),
            )),
            Err(e) => Err(Error::corruption(
                self.file.path(),
                self.offset(),
                CorruptionKind::Invalid(e.to_string()),
            )),
        }
    }
}

impl RecordRef {
    /// The record of `len` bytes at `pos` of `file`.
    pub(crate) fn new(file: Arc<MappedFile>, pos: usize, len: usize) -> Self {
        RecordRef { file, pos, len }
    }
}

/// Bytes [`LogFiles::prefetch_head`] loads: four cache lines, the fixed header of a record
/// (about 100 bytes) and, for bodies up to about 100 bytes, the whole record.
pub(crate) const PREFETCH_HEAD: usize = 256;

/// Bytes of a record's start a batch key lookup loads ahead ([`LogFiles::prefetch_start`]): a record's fixed fields up to its body (96 bytes
/// with IPv4 hosts), two cache lines.
pub(crate) const PREFETCH_FIXED: usize = 128;

/// The commit log file a reader looked at last, kept across the records of one walk: a walk
/// over scattered records (a consume queue's, an index chain's) looks each file up (the file
/// list's lock and a reference count shared with every other thread) once per file instead of
/// once per record.
#[derive(Debug, Default)]
pub(crate) struct LogFiles {
    file: Option<Arc<MappedFile>>,
}

impl LogFiles {
    /// The file holding absolute offset `offset`.
    pub(crate) fn file(&mut self, log: &CommitLog, offset: u64) -> Option<&Arc<MappedFile>> {
        let hit = self
            .file
            .as_ref()
            .is_some_and(|f| offset >= f.from() && offset - f.from() < f.size() as u64);
        if !hit {
            self.file = log.queue.find(offset);
        }
        self.file.as_ref()
    }

    /// The bytes `[offset, offset + size)` and their position in their file, if they lie in
    /// the readable part of one file.
    pub(crate) fn bytes(
        &mut self,
        log: &CommitLog,
        offset: u64,
        size: usize,
    ) -> Option<(&Arc<MappedFile>, usize, &[u8])> {
        let f = self.file(log, offset)?;
        let pos = usize::try_from(offset - f.from()).ok()?;
        let bytes = f.slice(pos, size)?;
        Some((f, pos, bytes))
    }

    /// The record at `offset` (its size read from its TOTALSIZE), as
    /// [`LogFiles::bytes`]; `None` if no readable record of a positive size starts there.
    pub(crate) fn record(
        &mut self,
        log: &CommitLog,
        offset: u64,
    ) -> Option<(&Arc<MappedFile>, usize, &[u8])> {
        let f = self.file(log, offset)?;
        let pos = usize::try_from(offset - f.from()).ok()?;
        let head = f.slice(pos, 4)?;
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let len = usize::try_from(size).ok().filter(|&l| l > 0)?;
        let bytes = f.slice(pos, len)?;
        Some((f, pos, bytes))
    }

    /// Starts loading the record `[offset, offset + size)` into the cache (a hint, see
    /// [`crate::mmap::prefetch`]); nothing if it is not readable.
    pub(crate) fn prefetch(&mut self, log: &CommitLog, offset: u64, size: usize) {
        if let Some((_, _, bytes)) = self.bytes(log, offset, size) {
            crate::mmap::prefetch(bytes);
        }
    }

    /// Starts loading the first `len` bytes at `offset`, or as many of them as are readable
    /// (a hint, as [`LogFiles::prefetch`]): [`PREFETCH_HEAD`] for a record's fixed header and
    /// all of a small record, [`PREFETCH_FIXED`] for its fixed fields alone.
    pub(crate) fn prefetch_start(&mut self, log: &CommitLog, offset: u64, len: usize) {
        let Some(f) = self.file(log, offset) else {
            return;
        };
        let Ok(pos) = usize::try_from(offset - f.from()) else {
            return;
        };
        if let Some(bytes) = f.slice_to_end(pos) {
            crate::mmap::prefetch(&bytes[..bytes.len().min(len)]);
        }
    }

    /// [`LogFiles::prefetch_start`] of [`PREFETCH_HEAD`] bytes.
    pub(crate) fn prefetch_head(&mut self, log: &CommitLog, offset: u64) {
        self.prefetch_start(log, offset, PREFETCH_HEAD);
    }
}

/// Adds `n` messages and `bytes` to `topic`'s entry of the per-topic put statistics.
fn add_put_stats(stats: &mut HashMap<String, (u64, u64)>, topic: &str, n: u64, bytes: u64) {
    match stats.get_mut(topic) {
        Some(e) => {
            e.0 += n;
            e.1 += bytes;
        }
        None => {
            stats.insert(topic.to_string(), (n, bytes));
        }
    }
}

/// Outcome of scanning the commit log for its end of valid data.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScanEnd {
    /// Absolute offset one past the last valid record (or blank).
    pub(crate) end: u64,
    /// Store timestamp of the last valid record.
    pub(crate) last_store_timestamp: i64,
    /// Why the scan stopped, if not at a clean end (zeros or the end of the last file).
    pub(crate) damage: Option<(u64, String)>,
    /// Records seen.
    pub(crate) records: u64,
}

/// The commit log.
#[derive(Debug)]
pub(crate) struct CommitLog {
    queue: MappedFileQueue,
    put: Mutex<PutState>,
    file_size: u64,
    flush_disk_type: FlushDiskType,
    sync_flush_timeout: Duration,
    create_opts: CreateOptions,
    allocator: Option<Arc<Allocator>>,
    pool: Option<Arc<TransientStorePool>>,
    health: Arc<Health>,
    flush_signal: Arc<Signal>,
    commit_signal: Arc<Signal>,
    wake_flush_on_put: bool,
    /// `flush_commit_log_writeback_bytes` under ASYNC_FLUSH with background services, else 0.
    writeback_bytes: u64,
    /// The end offset of a put at or past which the flush service is woken to start writeback.
    next_writeback: AtomicU64,
    /// Set with that wakeup: the flush service's wake asks for writeback only.
    writeback_due: AtomicBool,
    /// True when services run on threads; false when tests drive them (the writer then creates
    /// files and flushes by itself).
    background: bool,
    /// `pwrite_commit_log`: the writer stages records and `pwrite`s them (see
    /// [`FileWriter::stage_writes`]).
    stage_writes: bool,
    /// Files the writer had to create itself (the allocator was not ahead).
    sync_creations: std::sync::atomic::AtomicU64,
    /// Messages and bytes put per topic (RocketMQ StoreStatsService), updated outside the put
    /// lock once per run of equal topics.
    put_stats: Mutex<HashMap<String, (u64, u64)>>,
    /// What each append hands the dispatcher (see [`crate::feed`]).
    feed: Feed,
}

impl CommitLog {
    /// The typed EIO error of the first commit log file whose mapping had a page that could
    /// not be read in ([`MappedFile::io_failed`]); one atomic load while no mapping of the
    /// process ever failed.
    pub(crate) fn io_fault(&self) -> Option<Error> {
        if crate::mmap::io_faults() == 0 {
            return None;
        }
        let files = self.queue.files();
        let f = files.iter().find(|f| f.io_failed())?;
        Some(f.io_fault_error("read"))
    }

    /// Loads `dir`. A writable store keeps the configured size for new stores and adopts the
    /// size of existing files; a read-only store always adopts it.
    pub(crate) fn load(
        dir: &Path,
        cfg: &StoreConfig,
        writable: bool,
        health: Arc<Health>,
        allocator: Option<Arc<Allocator>>,
        flush_signal: Arc<Signal>,
        commit_signal: Arc<Signal>,
    ) -> Result<Self> {
        let queue = MappedFileQueue::load(
            dir,
            cfg.mapped_file_size_commit_log,
            writable,
            SizePolicy::Infer,
        )?;
        let file_size = queue.file_size();
        let pool = (writable && cfg.transient_store_pool_enable).then(|| {
            Arc::new(TransientStorePool::new(
                file_size as usize,
                cfg.transient_store_pool_size as usize,
            ))
        });
        let warm = cfg.warm_mapped_file_enable.then(|| {
            (cfg.flush_disk_type == FlushDiskType::SyncFlush)
                .then_some(cfg.flush_least_pages_when_warm_mapped_file as usize)
        });
        Ok(Self {
            queue,
            put: Mutex::new(PutState::default()),
            file_size,
            flush_disk_type: cfg.flush_disk_type,
            sync_flush_timeout: Duration::from_millis(cfg.sync_flush_timeout),
            create_opts: CreateOptions {
                sync: cfg.fsync_directory,
                defer_sync: cfg.flush_disk_type == FlushDiskType::AsyncFlush,
                populate: cfg.prefault_commit_log(),
                warm,
                prealloc: None,
            },
            allocator,
            pool,
            health,
            flush_signal,
            commit_signal,
            wake_flush_on_put: !cfg.flush_commit_log_timed,
            writeback_bytes: cfg.writeback_bytes(),
            next_writeback: AtomicU64::new(0),
            writeback_due: AtomicBool::new(false),
            background: cfg.background_threads,
            stage_writes: cfg.pwrite_commit_log,
            sync_creations: std::sync::atomic::AtomicU64::new(0),
            put_stats: Mutex::new(HashMap::new()),
            feed: Feed::default(),
        })
    }

    /// `flush_commit_log_writeback_bytes` as this log applies it (0: off).
    pub(crate) fn writeback_bytes(&self) -> u64 {
        self.writeback_bytes
    }

    /// True once after a put asked the flush service to start writeback (and cleared).
    pub(crate) fn take_writeback_due(&self) -> bool {
        self.writeback_due.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn queue(&self) -> &MappedFileQueue {
        &self.queue
    }

    pub(crate) fn file_size(&self) -> u64 {
        self.file_size
    }

    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    pub(crate) fn has_pool(&self) -> bool {
        self.pool.is_some()
    }

    pub(crate) fn min_offset(&self) -> u64 {
        self.queue.min_offset()
    }

    pub(crate) fn max_offset(&self) -> u64 {
        self.queue.max_offset()
    }

    /// Seeds the queue offset table (recovery) and the last store timestamp.
    pub(crate) fn set_queue_offsets(
        &self,
        table: HashMap<String, Vec<i64>>,
        last_store_timestamp: i64,
    ) {
        let mut st = lock(&self.put);
        st.queue_offsets = table;
        st.last_store_timestamp = st.last_store_timestamp.max(last_store_timestamp);
    }

    /// The next queue offset of (topic, queue id).
    pub(crate) fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let st = lock(&self.put);
        st.queue_offsets
            .get(topic)
            .and_then(|v| v.get(queue_id as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Snapshot of the queue offset table.
    pub(crate) fn queue_offsets(&self) -> HashMap<String, Vec<i64>> {
        lock(&self.put).queue_offsets.clone()
    }

    /// Files the writer created itself instead of taking them from the allocate service.
    pub(crate) fn sync_creations(&self) -> u64 {
        self.sync_creations
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn create_file_sync(&self, offset: u64) -> Result<Arc<MappedFile>> {
        self.sync_creations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self
            .queue
            .dir()
            .join(rocketstore_format::offset_to_file_name(offset));
        Ok(Arc::new(MappedFile::create(
            &path,
            offset,
            self.file_size as usize,
            &self.create_opts,
        )?))
    }

    /// Makes `current` the handle of the file the writer appends to, rolling to a new file when
    /// the current one is full.
    fn writable_file(&self, current: &mut Option<FileWriter>) -> Result<()> {
        if current.as_ref().is_some_and(|w| !w.file().is_full()) {
            return Ok(());
        }
        if current.is_none() {
            if let Some(last) = self.queue.last() {
                if !last.is_full() {
                    let mut w = last.writer()?;
                    if self.stage_writes {
                        w.stage_writes();
                    }
                    *current = Some(w);
                    return Ok(());
                }
            }
        }
        let next = match self.queue.last() {
            Some(last) => last.from() + self.file_size,
            None => 0,
        };
        let file = match (&self.allocator, self.background) {
            (Some(alloc), true) => match alloc.take(next, self.file_size)? {
                Taken::File(f) => f,
                Taken::CreateYourself => self.create_file_sync(next)?,
            },
            _ => self.create_file_sync(next)?,
        };
        if let Some(pool) = &self.pool {
            if let Some(buf) = pool.borrow() {
                file.attach_buffer(buf, Arc::clone(pool));
            }
        }
        let mut writer = file.writer()?;
        if self.stage_writes {
            writer.stage_writes();
        }
        self.queue.push(file)?;
        if let Some(prev) = current.replace(writer) {
            prev.file().munlock();
        }
        Ok(())
    }

    /// Appends `msgs` under one acquisition of the put lock; `props` holds their encoded
    /// properties. Returns one result per message. Messages after a failed file roll get
    /// `CREATE_MAPPED_FILE_FAILED`; if the very first one fails, the error is returned.
    ///
    /// Two or more messages into one topic and queue are written as a broker writes a
    /// `MessageBatch` (spec §13): when their records fit in one file, they are never split
    /// across two; if the rest of the current file cannot hold them all plus 8 bytes, it is
    /// closed with a blank record and the whole batch goes to the next file.
    pub(crate) fn append(
        &self,
        msgs: &[Prepared<'_>],
        props: &[u8],
        store_host: HostAddr,
    ) -> Result<Vec<PutResult>> {
        self.health.check()?;
        let mut results = Vec::with_capacity(msgs.len());
        let mut st = lock(&self.put);
        if st.closed {
            return Err(Error::Closed);
        }
        let store_ts = now_ms().max(st.last_store_timestamp);
        st.last_store_timestamp = store_ts;
        // The handle is taken out of the put state for the batch and put back at its end.
        let mut current = st.current.take();
        let mut started = false;
        let mut pos = 0usize;
        let mut failed: Option<Error> = None;
        let whole_batch = one_queue_batch_len(msgs, self.file_size);
        // Small records are fed only when they are large enough that decoding them back costs
        // more than copying their facts (see `FEED_MIN_RECORD_BYTES`).
        let record_bytes: usize = msgs.iter().map(|m| m.len).sum();
        let staged = record_bytes >= STAGE_MIN_CALL_BYTES;
        if staged && self.stage_writes {
            if let Some(alloc) = &self.allocator {
                alloc.staging_starts();
            }
        }
        let mut fed = if msgs.len() >= FEED_MIN_RECORDS
            && record_bytes >= FEED_MIN_RECORD_BYTES * msgs.len()
        {
            self.feed.start(store_ts, msgs.len(), props)
        } else {
            None
        };
        let mut shift = rocketstore_format::prop_crc::BodyShift::default();
        let mut offsets = BatchOffsets::default();
        for (i, m) in msgs.iter().enumerate() {
            // The first record of a one-queue batch reserves room for the whole batch.
            let need = if i == 0 && whole_batch > 0 {
                whole_batch
            } else {
                m.len
            };
            let written = loop {
                if !started || current.as_ref().is_none_or(|w| w.file().is_full()) {
                    if let Err(e) = self.writable_file(&mut current) {
                        break Err(e);
                    }
                    started = true;
                    pos = current.as_ref().map_or(0, |w| w.file().wrote());
                }
                let Some(w) = current.as_mut() else {
                    break Err(Error::Closed);
                };
                let f = w.file();
                let (from, remaining) = (f.from(), f.size() - pos);
                if need + rocketstore_format::END_FILE_MIN_BLANK_LENGTH > remaining {
                    w.publish(pos);
                    if let Err(e) = w.write_blank(pos) {
                        break Err(e);
                    }
                    w.file().set_last_store_timestamp(store_ts);
                    continue;
                }
                let phy = from + pos as u64;
                let dispatched = m.dispatched();
                let qid = m.header.queue_id as usize;
                let queue_offset = if dispatched {
                    let slots = offsets.slots(&mut st.queue_offsets, m.topic);
                    if slots.len() <= qid {
                        slots.resize(qid + 1, 0);
                    }
                    let off = slots[qid];
                    slots[qid] = off + 1;
                    off
                } else {
                    0
                };
                let mut hdr = m.header;
                hdr.queue_offset = queue_offset;
                hdr.physical_offset = phy as i64;
                hdr.store_timestamp = store_ts;
                let body = m.body;
                let p = props.get(m.props.clone()).unwrap_or(&[]);
                let seal = m.prop_crc;
                w.stage_next(staged);
                let enc = w.write_with(pos, m.len, |dst| {
                    // Unmasked: BODYCRC is its low 31 bits; the `__CRC32#` seal combines it with
                    // the CRC of the rest of the record instead of reading the body again.
                    let crc = body_crc(body);
                    encode_record(dst, &hdr, m.version, body, masked_crc(crc), m.topic, p)?;
                    if seal {
                        // The body is followed by the topic length, the topic, the properties
                        // length (2 bytes) and the properties.
                        let after_body = m.version.topic_len_width() + m.topic.len() + 2 + p.len();
                        let body_pos = m.len.saturating_sub(after_body + body.len());
                        rocketstore_format::prop_crc::seal_with_body_crc(
                            dst,
                            body_pos,
                            body.len(),
                            crc,
                            &mut shift,
                        );
                    }
                    Ok::<(), rocketstore_format::EncodeError>(())
                });
                let failed = match enc {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(Error::invalid("message", e.to_string())),
                    Err(e) => Some(e),
                };
                if let Some(e) = failed {
                    // Nothing was published: give the queue offset back.
                    if dispatched {
                        if let Some(slot) = st
                            .queue_offsets
                            .get_mut(m.topic)
                            .and_then(|v| v.get_mut(qid))
                        {
                            *slot -= 1;
                        }
                    }
                    break Err(e);
                }
                pos += m.len;
                if let Some(b) = fed.as_mut() {
                    b.push(
                        m.topic,
                        FedRecord {
                            phy,
                            size: m.len as u32,
                            queue_id: m.header.queue_id,
                            sys_flag: m.header.sys_flag,
                            queue_offset,
                            topic: 0,
                            props: (m.props.start as u32, m.props.end as u32),
                        },
                    );
                }
                break Ok(PutResult {
                    status: PutStatus::PutOk,
                    commitlog_offset: phy as i64,
                    queue_offset,
                    wrote_bytes: m.len as i32,
                    store_timestamp: store_ts,
                    store_host: hdr.store_host,
                });
            };
            match written {
                Ok(r) => results.push(r),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        offsets.put_back(&mut st.queue_offsets);
        // Staged records reach the file before they are published; a failed write loses the
        // whole call (nothing of it is published) and fences the store.
        let mut unwritten = None;
        let mut wrote_to = None;
        if let Some(w) = current.as_mut().filter(|_| started) {
            w.file().set_last_store_timestamp(store_ts);
            match w.write_out() {
                // A page written through the mapping could not be read in first: those bytes
                // are not in the file. Nothing of the call is published; the store is fenced.
                Ok(()) if w.file().io_failed() => {
                    unwritten = Some(w.file().io_fault_error("write"))
                }
                Ok(()) => {
                    w.publish(pos);
                    wrote_to = Some(w.file().from() + pos as u64);
                }
                Err(e) => unwritten = Some(e),
            }
        }
        st.current = current;
        if let Some(e) = unwritten {
            drop(st);
            let cause = self.health.poison(e);
            return Err(Error::Poisoned { cause });
        }
        if let Some(b) = fed {
            self.feed.push(b);
        }
        drop(st);
        if let (Some(alloc), Some(end)) = (&self.allocator, wrote_to) {
            alloc.progress(end, staged && self.stage_writes);
        }
        self.count_puts(msgs, &results);
        if let Some(e) = failed {
            if results.is_empty() {
                return Err(e);
            }
            let template = PutResult {
                status: PutStatus::CreateMappedFileFailed,
                commitlog_offset: -1,
                queue_offset: -1,
                wrote_bytes: 0,
                store_timestamp: store_ts,
                store_host,
            };
            results.resize(msgs.len(), template);
        }
        self.after_append(&mut results, record_bytes >= WRITEBACK_MIN_CALL_BYTES)?;
        Ok(results)
    }

    fn count_puts(&self, msgs: &[Prepared<'_>], results: &[PutResult]) {
        // Sum per topic locally first: a batch has few topics, often interleaved, so the shared
        // table is hashed once per topic and batch, and a topic's String is allocated only the
        // first time the topic is seen (this ran once per message for interleaved topics).
        const LOCAL_TOPICS: usize = 16;
        let mut local = [("", 0u64, 0u64); LOCAL_TOPICS];
        let mut used = 0;
        let mut stats = lock(&self.put_stats);
        for (m, r) in msgs.iter().zip(results) {
            let bytes = r.wrote_bytes as u64;
            // By the `&str` first: rows of one topic usually share it.
            let at = match local[..used]
                .iter()
                .position(|e| std::ptr::eq(e.0, m.topic))
            {
                Some(i) => Some(i),
                None => local[..used].iter().position(|e| e.0 == m.topic),
            };
            if let Some(e) = at.and_then(|i| local.get_mut(i)) {
                e.1 += 1;
                e.2 += bytes;
            } else if let Some(e) = local.get_mut(used) {
                *e = (m.topic, 1, bytes);
                used += 1;
            } else {
                add_put_stats(&mut stats, m.topic, 1, bytes);
            }
        }
        for &(t, n, b) in &local[..used] {
            add_put_stats(&mut stats, t, n, b);
        }
    }

    /// Messages and bytes put per topic since open.
    pub(crate) fn put_stats(&self) -> Vec<(String, u64, u64)> {
        let mut v: Vec<_> = lock(&self.put_stats)
            .iter()
            .map(|(t, (n, b))| (t.clone(), *n, *b))
            .collect();
        v.sort();
        v
    }

    /// Flush handling after an append, outside the put lock. `large`: the call may start
    /// writeback ahead of the flush ([`WRITEBACK_MIN_CALL_BYTES`]).
    fn after_append(&self, results: &mut [PutResult], large: bool) -> Result<()> {
        let Some(end) = results
            .iter()
            .filter(|r| r.status == PutStatus::PutOk)
            .map(|r| r.commitlog_offset as u64 + r.wrote_bytes as u64)
            .max()
        else {
            return Ok(());
        };
        if self.pool.is_some() && self.background {
            self.commit_signal.wakeup();
        }
        match self.flush_disk_type {
            FlushDiskType::AsyncFlush => {
                if self.wake_flush_on_put && self.background {
                    self.flush_signal.wakeup();
                } else if self.writeback_bytes > 0
                    && large
                    && end >= self.next_writeback.load(Ordering::Relaxed)
                {
                    self.next_writeback
                        .store(end + self.writeback_bytes, Ordering::Relaxed);
                    self.writeback_due.store(true, Ordering::Release);
                    self.flush_signal.wakeup();
                }
                Ok(())
            }
            FlushDiskType::SyncFlush => {
                let outcome = if self.background {
                    self.flush_signal.wakeup();
                    self.health.wait_flushed(end, self.sync_flush_timeout)
                } else {
                    self.flush_until(end)?;
                    FlushWait::Flushed
                };
                match outcome {
                    FlushWait::Flushed => Ok(()),
                    FlushWait::Poisoned(cause) => Err(Error::Poisoned { cause }),
                    FlushWait::TimedOut => {
                        for r in results.iter_mut().filter(|r| r.status == PutStatus::PutOk) {
                            r.status = PutStatus::FlushDiskTimeout;
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Commits (transient pool) and flushes until `target` is durable. Poisons the store on a
    /// failed flush.
    pub(crate) fn flush_until(&self, target: u64) -> Result<u64> {
        let r = (|| loop {
            if self.pool.is_some() {
                while self.queue.commit(0)? {}
            }
            let moved = self.queue.flush(0)?;
            let flushed = self.queue.flushed_where();
            if flushed >= target || !moved {
                return Ok(flushed);
            }
        })();
        match r {
            Ok(flushed) => {
                self.health.publish_flushed(flushed);
                Ok(flushed)
            }
            Err(e) => {
                let cause = self.health.poison(e);
                Err(Error::Poisoned { cause })
            }
        }
    }

    /// Flushes everything readers can see.
    pub(crate) fn flush_all(&self) -> Result<u64> {
        let target = self.queue.max_wrote_offset();
        self.flush_until(target)
    }

    /// A read-only log following a writer in another process (`crate::follow`): picks up the
    /// files it rolled to, makes `[.., end)` readable (the writer published that its records are
    /// complete and dispatched) and drops the files that end at or below `min` (deleted by its
    /// cleanup). Never lowers what is readable.
    pub(crate) fn follow_to(&self, end: u64, min: u64) -> Result<()> {
        let q = &self.queue;
        let size = q.file_size();
        loop {
            let next = match q.last() {
                Some(f) => f.from() + f.size() as u64,
                None => min / size * size,
            };
            if end <= next && q.len() > 0 {
                break;
            }
            if q.follow_open(next)?.is_none() {
                break;
            }
        }
        for f in q.files() {
            if f.from() < end {
                f.follow_to(usize::try_from(end - f.from()).unwrap_or(usize::MAX));
            }
        }
        q.follow_drop_before(min);
        Ok(())
    }

    /// Bytes of the record at `offset` (its length read from its first 4 bytes).
    pub(crate) fn record_at(&self, offset: u64) -> Option<RecordRef> {
        let file = self.queue.find(offset)?;
        let pos = (offset - file.from()) as usize;
        let head = file.slice(pos, 4)?;
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if size <= 0 {
            return None;
        }
        let len = size as usize;
        file.slice(pos, len)?;
        Some(RecordRef { file, pos, len })
    }

    /// Record bytes at `offset` with an explicit size (from a consume queue unit).
    pub(crate) fn record_at_sized(&self, offset: u64, size: usize) -> Option<RecordRef> {
        let file = self.queue.find(offset)?;
        let pos = (offset - file.from()) as usize;
        file.slice(pos, size)?;
        Some(RecordRef {
            file,
            pos,
            len: size,
        })
    }

    /// Iterates records from `offset` (which must be a record boundary), stopping at the end of
    /// readable data. Blank records move to the next file.
    pub(crate) fn iter_from(&self, offset: u64, opts: DecodeOptions) -> RecordIter<'_> {
        RecordIter {
            log: self,
            offset,
            opts,
            done: false,
        }
    }

    /// Decodes records from `from` (a record boundary) while they end at or before `end`,
    /// calling `f` with each record and its offset; blank records move to the next file.
    /// Returns the offset after the last record handed to `f`. A record that fails to decode
    /// inside the readable range is a `Corruption` error.
    pub(crate) fn for_each_record(
        &self,
        from: u64,
        end: u64,
        mut f: impl FnMut(&RecordView<'_>, u64) -> Result<()>,
    ) -> Result<u64> {
        let mut offset = from;
        // The file is looked up (a lock and a reference count shared with every other thread)
        // once per file, not once per record.
        let mut current: Option<Arc<MappedFile>> = None;
        while offset < end {
            let file = match current {
                Some(ref f) if f.from() <= offset && offset - f.from() < f.size() as u64 => f,
                _ => match self.queue.find(offset) {
                    Some(f) => current.insert(f),
                    None => break,
                },
            };
            let pos = (offset - file.from()) as usize;
            let Some(rest) = file.slice_to_end(pos) else {
                break;
            };
            if rest.is_empty() {
                if file.is_fully_readable() {
                    offset = file.from() + file.size() as u64;
                    continue;
                }
                break;
            }
            // Dispatch does not re-check CRCs (RocketMQ's reput does not); recovery did.
            let opts = DecodeOptions {
                check_crc: false,
                expected_physical_offset: Some(offset as i64),
                ..DecodeOptions::default()
            };
            match decode_record(rest, &opts) {
                Ok(Decoded::Message(rec)) => {
                    let next = offset + rec.total_size as u64;
                    if next > end {
                        break;
                    }
                    f(&rec, offset)?;
                    offset = next;
                }
                Ok(Decoded::Blank { .. }) => offset = file.from() + file.size() as u64,
                Err(e) if e.is_incomplete() => break,
                Err(e) => {
                    return Err(Error::corruption(
                        file.path(),
                        offset,
                        CorruptionKind::Invalid(e.to_string()),
                    ));
                }
            }
        }
        Ok(offset)
    }

    /// Scans files `from_index..` to find the end of valid data (spec §7.5). `on_record` sees
    /// every valid record with its absolute offset.
    pub(crate) fn scan_for_end(
        &self,
        from_index: usize,
        check_crc: bool,
        max_record: u32,
        on_record: impl FnMut(&RecordView<'_>, u64),
    ) -> ScanEnd {
        self.scan_for_end_at(from_index, 0, check_crc, max_record, on_record)
    }

    /// [`CommitLog::scan_for_end`] starting at position `from_pos` (a record boundary) of file
    /// `from_index` (the checkpoint's recovery window).
    pub(crate) fn scan_for_end_at(
        &self,
        from_index: usize,
        from_pos: usize,
        check_crc: bool,
        max_record: u32,
        on_record: impl FnMut(&RecordView<'_>, u64),
    ) -> ScanEnd {
        self.with_scan_files(from_index, |files| {
            let start = (0, from_pos);
            scan_files_from(files, start, u64::MAX, check_crc, max_record, on_record).0
        })
        .unwrap_or_else(|| ScanEnd {
            end: self.queue.first().map_or(0, |f| f.from()),
            ..ScanEnd::default()
        })
    }

    /// Runs `f` over files `from_index..` as a recovery scan reads them (their recovery views,
    /// held until `f` returns). `None` if there is no file `from_index`.
    pub(crate) fn with_scan_files<R>(
        &self,
        from_index: usize,
        f: impl FnOnce(&[ScanFile<'_>]) -> R,
    ) -> Option<R> {
        let files = self.queue.files();
        let tail = files.get(from_index..).filter(|t| !t.is_empty())?;
        let views: Vec<_> = tail.iter().map(|f| f.recovery_view(0)).collect();
        let scan: Vec<ScanFile<'_>> = tail
            .iter()
            .zip(&views)
            .map(|(f, v)| ScanFile {
                from: f.from(),
                size: f.size(),
                bytes: v.as_deref(),
            })
            .collect();
        Some(f(&scan))
    }

    /// Abnormal recovery's start file (spec §7.5, HEAD rule): walking back from the last file,
    /// the first whose first record passes the validator and was stored at or before
    /// `min_timestamp`; file 0 if none.
    pub(crate) fn abnormal_start_index(&self, min_timestamp: i64, max_record: u32) -> usize {
        let files = self.queue.files();
        for (i, f) in files.iter().enumerate().rev() {
            let Some(view) = f.recovery_view(0) else {
                continue;
            };
            let opts = DecodeOptions {
                check_crc: true,
                max_total_size: max_record,
                expected_physical_offset: Some(f.from() as i64),
                ..DecodeOptions::default()
            };
            if let Ok(Decoded::Message(rec)) = decode_record(&view, &opts) {
                if rec.store_timestamp != 0 && rec.store_timestamp <= min_timestamp {
                    return i;
                }
            }
        }
        0
    }

    /// End of the readable bytes of the file holding `offset` (its committed position: with a
    /// transient write buffer a file's tail may wait to be committed while the writer is in
    /// the next file); `offset` itself when no file holds it.
    pub(crate) fn readable_until(&self, offset: u64) -> u64 {
        self.queue
            .find(offset)
            .map_or(offset, |f| f.from() + f.read_position() as u64)
    }

    /// What appends hand the dispatcher.
    pub(crate) fn feed(&self) -> &Feed {
        &self.feed
    }

    /// Sets the recovered end: cursors, dirty tail, files past the end.
    pub(crate) fn truncate_to(&self, end: u64) -> Result<usize> {
        self.feed.clear();
        // The append handle goes first: truncation needs the files to itself.
        lock(&self.put).current = None;
        let removed = self.queue.truncate_dirty(end)?;
        self.health.publish_flushed(end);
        Ok(removed)
    }

    /// Recovery: makes the recovered `[from, to)` durable before the flushed cursor (and so a
    /// checkpoint) claims it; see [`crate::segment::MappedFile::resync`].
    pub(crate) fn resync(&self, from: u64, to: u64, rewrite: bool) -> Result<()> {
        self.queue.resync(from, to, rewrite)
    }

    /// The "flushed" and "committed" cursors in absolute offsets.
    ///
    /// Each cursor only grows, so reading them in the order flushed, committed, wrote yields a
    /// snapshot with `flushed <= committed <= wrote` even while the services move them.
    pub(crate) fn cursors(&self) -> (u64, u64, u64) {
        let flushed = self.queue.flushed_where();
        let committed = if self.pool.is_some() {
            self.queue.committed_frontier()
        } else {
            self.queue.max_wrote_offset()
        };
        let wrote = self.queue.max_wrote_offset();
        (wrote, committed, flushed)
    }

    /// Ends the writer's hold on the current file (close).
    pub(crate) fn release_writer(&self) {
        let mut st = lock(&self.put);
        st.closed = true;
        if let Some(w) = st.current.take() {
            w.file().munlock();
        }
    }
}

/// Iterator over decoded records; see [`CommitLog::iter_from`].
#[derive(Debug)]
pub(crate) struct RecordIter<'a> {
    log: &'a CommitLog,
    offset: u64,
    opts: DecodeOptions,
    done: bool,
}

impl RecordIter<'_> {
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<RecordRef>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(file) = self.log.queue.find(self.offset) else {
                self.done = true;
                return None;
            };
            let pos = (self.offset - file.from()) as usize;
            let Some(rest) = file.slice_to_end(pos) else {
                self.done = true;
                return None;
            };
            if rest.is_empty() {
                if file.is_fully_readable() {
                    self.offset = file.from() + file.size() as u64;
                    continue;
                }
                self.done = true;
                return None;
            }
            let opts = DecodeOptions {
                expected_physical_offset: Some(self.offset as i64),
                ..self.opts
            };
            match decode_record(rest, &opts) {
                Ok(Decoded::Message(rec)) if opts.check_crc && !record_intact(&rec) => {
                    self.done = true;
                    return Some(Err(Error::corruption(
                        file.path(),
                        self.offset,
                        CorruptionKind::CrcMismatch,
                    )));
                }
                Ok(Decoded::Message(rec)) => {
                    let len = rec.total_size as usize;
                    let r = RecordRef {
                        file: Arc::clone(&file),
                        pos,
                        len,
                    };
                    self.offset += len as u64;
                    return Some(Ok(r));
                }
                Ok(Decoded::Blank { .. }) => {
                    self.offset = file.from() + file.size() as u64;
                }
                Err(e) if e.is_incomplete() => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::corruption(
                        file.path(),
                        self.offset,
                        CorruptionKind::Invalid(e.to_string()),
                    )));
                }
            }
        }
        None
    }
}

/// Length of `msgs` if they form a one-queue batch (two or more records, one topic and queue
/// id) that fits in one file with the 8-byte END_FILE margin; 0 otherwise.
fn one_queue_batch_len(msgs: &[Prepared<'_>], file_size: u64) -> usize {
    let Some(first) = msgs.first() else {
        return 0;
    };
    if msgs.len() < 2 {
        return 0;
    }
    let mut total = 0usize;
    for m in msgs {
        if m.header.queue_id != first.header.queue_id || m.topic != first.topic {
            return 0;
        }
        total = total.saturating_add(m.len);
    }
    let margin = rocketstore_format::END_FILE_MIN_BLANK_LENGTH;
    if (total.saturating_add(margin) as u64) <= file_size {
        total
    } else {
        0
    }
}

/// One commit log file as a recovery scan reads it: its first offset and its bytes (`None` if
/// its recovery view could not be taken: the scan stops there).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanFile<'v> {
    pub(crate) from: u64,
    pub(crate) size: usize,
    pub(crate) bytes: Option<&'v [u8]>,
}

/// The recovery scan (spec §7.5) over `files` (consecutive commit log files) from position
/// `start.1` (a record boundary) of `files[start.0]`: checks each record (CRC and whole-record
/// CRC if `check_crc`) up to the first that does not validate, a file that ends without a blank
/// record, or the end of the last file. `on_record` sees every valid record with its absolute
/// offset.
///
/// With `stop` below the end, the scan also stops at the first record boundary at or past
/// `stop` that still has bytes in its file (a boundary the scan from `start` would go on from):
/// the second value is then that boundary as (file index, position), and the `ScanEnd` holds
/// what was seen before it. A scan cut at `stop` and continued from that boundary sees exactly
/// the records, and ends exactly where, one scan without `stop` does: the scan's only state is
/// its position.
pub(crate) fn scan_files_from(
    files: &[ScanFile<'_>],
    start: (usize, usize),
    stop: u64,
    check_crc: bool,
    max_record: u32,
    mut on_record: impl FnMut(&RecordView<'_>, u64),
) -> (ScanEnd, Option<(usize, usize)>) {
    let mut out = ScanEnd::default();
    let Some(first) = files.get(start.0) else {
        out.end = files.first().map_or(0, |f| f.from);
        return (out, None);
    };
    out.end = first.from + start.1 as u64;
    for (i, f) in files.iter().enumerate().skip(start.0) {
        let mut pos = if i == start.0 { start.1 } else { 0 };
        let Some(view) = f.bytes else {
            break;
        };
        loop {
            out.end = f.from + pos as u64;
            let rest = view.get(pos..).unwrap_or(&[]);
            if rest.is_empty() {
                // Exactly full without a blank: only legal at the very end of the last file.
                if i + 1 < files.len() {
                    out.damage = Some((out.end, "file ends without a blank record".into()));
                }
                return (out, None);
            }
            if out.end >= stop {
                return (out, Some((i, pos)));
            }
            let opts = DecodeOptions {
                check_crc,
                max_total_size: max_record,
                expected_physical_offset: Some(out.end as i64),
                ..DecodeOptions::default()
            };
            match decode_record(rest, &opts) {
                Ok(Decoded::Message(rec)) if check_crc && !record_intact(&rec) => {
                    out.damage = Some((
                        out.end,
                        "whole-record CRC (__CRC32#) mismatch or torn properties".into(),
                    ));
                    return (out, None);
                }
                Ok(Decoded::Message(rec)) => {
                    on_record(&rec, out.end);
                    out.last_store_timestamp = rec.store_timestamp;
                    out.records += 1;
                    pos += rec.total_size as usize;
                }
                Ok(Decoded::Blank { total_size }) => {
                    if total_size as usize != rest.len() {
                        out.damage = Some((
                            out.end,
                            format!(
                                "blank record of {total_size} bytes with {} left in the file",
                                rest.len()
                            ),
                        ));
                        return (out, None);
                    }
                    if i + 1 >= files.len() {
                        // The last file is full: the end is the next file's start.
                        out.end = f.from + f.size as u64;
                        return (out, None);
                    }
                    break;
                }
                Err(e) => {
                    let clean = rest.iter().take(8).all(|&b| b == 0);
                    if !clean {
                        out.damage = Some((out.end, e.to_string()));
                    }
                    return (out, None);
                }
            }
        }
    }
    (out, None)
}

/// Checks beyond the body CRC that `decode_record` does: the whole-record `__CRC32#` property
/// when present, and that a non-empty properties string ends with its 0x02 separator (every
/// encoder writes one after each pair, so a missing one means the record's tail was torn).
pub(crate) fn record_intact(rec: &RecordView<'_>) -> bool {
    match rocketstore_format::prop_crc::verify(rec.bytes()) {
        Some(false) => return false,
        Some(true) => {}
        // A `__CRC32#` property whose name or separator took a bit flip would otherwise turn
        // the whole-record check off for that record.
        None if damaged_prop_crc(rec.bytes()) => return false,
        None => {}
    }
    rec.properties_raw
        .last()
        .is_none_or(|&b| b == rocketstore_format::PROPERTY_SEPARATOR)
}

/// True if the record's last 20 bytes are a `__CRC32#` property (`__CRC32#` 0x01, ten digits,
/// 0x02) with one or two bits of its name or separators flipped.
fn damaged_prop_crc(record: &[u8]) -> bool {
    const TEMPLATE: &[u8; 9] = b"__CRC32#\x01";
    let n = record.len();
    let Some(tail) = n
        .checked_sub(rocketstore_format::prop_crc::PROP_CRC_LEN)
        .and_then(|from| record.get(from..))
    else {
        return false;
    };
    let mut bits: u32 = tail
        .iter()
        .zip(TEMPLATE.iter())
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    bits +=
        (tail.last().copied().unwrap_or(0) ^ rocketstore_format::PROPERTY_SEPARATOR).count_ones();
    (1..=2).contains(&bits)
}

/// The unmasked CRC-32 of a body (RocketMQ's BODYCRC is its low 31 bits: [`masked_crc`]).
pub(crate) fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body)
}

/// RocketMQ's BODYCRC of a body whose CRC-32 is `crc` (`UtilAll.crc32`: the low 31 bits).
fn masked_crc(crc: u32) -> i32 {
    i32::try_from(crc & 0x7FFF_FFFF).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::{PutMessage, Store, StoreConfig};

    #[test]
    fn put_stats_count_interleaved_and_many_topics() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            mapped_file_size_commit_log: 1 << 20,
            mapped_file_size_consume_queue: 300 * 20,
            max_hash_slot_num: 100,
            max_index_num: 400,
            ..StoreConfig::default()
        };
        let store = Store::open(dir.path(), cfg).unwrap();
        // 20 topics (more than the local table holds), interleaved row by row.
        let topics: Vec<String> = (0..20).map(|t| format!("T{t}")).collect();
        let msgs: Vec<PutMessage<'_>> = (0..200)
            .map(|i| PutMessage {
                topic: &topics[i % 20],
                body: b"body",
                ..Default::default()
            })
            .collect();
        let mut expect = std::collections::HashMap::<String, (u64, u64)>::new();
        for _ in 0..2 {
            for (m, r) in msgs.iter().zip(store.put_batch(&msgs).unwrap()) {
                let e = expect.entry(m.topic.to_string()).or_default();
                e.0 += 1;
                e.1 += r.wrote_bytes as u64;
                // Queue offsets count per topic across batches, for the topics a batch takes
                // out of the table (the first 16) and the ones it looks up there.
                assert_eq!(r.queue_offset, e.0 as i64 - 1, "{}", m.topic);
            }
        }
        let mut expect: Vec<(String, u64, u64)> =
            expect.into_iter().map(|(t, (n, b))| (t, n, b)).collect();
        expect.sort();
        assert_eq!(store.stats().put_by_topic, expect);
        store.close().unwrap();
    }
}

#[cfg(test)]
mod scan_tests {
    #![allow(clippy::unwrap_used)]
    use crate::{PutMessage, Store, StoreConfig, ABORT_FILE, CHECKPOINT_FILE};
    use std::io::{Read, Seek, SeekFrom, Write};

    /// Abnormal recovery stops at the first damaged record (body CRC or `__CRC32#`), wherever
    /// it falls among thousands of records (early, mid-file, a later file, none), and says why.
    #[test]
    fn crc_check_stops_at_the_first_damaged_record() {
        let file_size = 1u64 << 20;
        let cfg = StoreConfig {
            mapped_file_size_commit_log: file_size,
            mapped_file_size_consume_queue: 4096 * 20,
            max_hash_slot_num: 1000,
            max_index_num: 8000,
            ..StoreConfig::default()
        };
        let body = vec![7u8; 100];
        // (record, byte within the record: 100 is in the body, -25 in the properties)
        let cases: [Option<(usize, i64)>; 5] = [
            None,
            Some((3, 100)),
            Some((1500, 100)),
            Some((2999, -25)),
            Some((9000, -25)),
        ];
        for damage in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), cfg.clone()).unwrap();
            let msgs: Vec<PutMessage<'_>> = (0..1000)
                .map(|i| PutMessage {
                    topic: "ScanTopic",
                    body: &body,
                    queue_id: i % 4,
                    tags: Some("T"),
                    ..Default::default()
                })
                .collect();
            let mut results = Vec::new();
            for _ in 0..10 {
                results.extend(store.put_batch(&msgs).unwrap());
            }
            let end = store.max_commitlog_offset();
            store.close().unwrap();
            let mut expect_end = end;
            if let Some((k, at)) = damage {
                let r = &results[k];
                let rec_off = r.commitlog_offset as u64;
                let at = if at < 0 {
                    rec_off + r.wrote_bytes as u64 - at.unsigned_abs()
                } else {
                    rec_off + at as u64
                };
                let path = dir
                    .path()
                    .join("commitlog")
                    .join(format!("{:020}", at / file_size * file_size));
                let mut f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .unwrap();
                let mut b = [0u8; 1];
                f.seek(SeekFrom::Start(at % file_size)).unwrap();
                f.read_exact(&mut b).unwrap();
                b[0] ^= 0x10;
                f.seek(SeekFrom::Start(at % file_size)).unwrap();
                f.write_all(&b).unwrap();
                expect_end = rec_off;
            }
            std::fs::write(dir.path().join(ABORT_FILE), b"").unwrap();
            std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap();
            let store = Store::open(dir.path(), cfg.clone()).unwrap();
            let rep = store.recovery_report().clone();
            assert_eq!(rep.end_offset, expect_end, "damage {damage:?}");
            assert_eq!(
                rep.truncated_at.as_ref().map(|t| t.0),
                damage.map(|_| expect_end),
                "damage {damage:?}: {:?}",
                rep.truncated_at
            );
            if let Some((_, at)) = damage {
                let why = &rep.truncated_at.as_ref().unwrap().1;
                let crc = if at < 0 { "__CRC32#" } else { "CRC" };
                assert!(why.contains(crc), "{why}");
            }
            store.close().unwrap();
        }
    }
}
