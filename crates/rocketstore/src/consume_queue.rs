//! Consume queues (spec §5): per `(topic, queueId)` a mapped file queue of 20-byte units
//! (commit-log offset, record TOTALSIZE, tagsCode) under `<root>/consumequeue/<topic>/<queueId>/`,
//! byte-compatible with RocketMQ's `ConsumeQueue`.
//!
//! Invariants kept by this module:
//! - **Append-only, gap-free.** Units are appended at the write position of the last file; the
//!   logical offset `n` lives at byte `n * 20`. A put that would leave a gap is refused with a
//!   typed [`Error::Corruption`] instead of being written (RocketMQ writes it at the wrong place).
//! - **Publish after write.** The 20 bytes of a unit (and any pre-fill units before it) are in the
//!   mapping before the file's `wrote` cursor is published with `Release`; the mapping hands
//!   readers only bytes below the published position, so they never see a torn unit.
//! - **One writer.** Every mutation (put, recover, truncate, delete, correct-min, destroy) runs
//!   under the queue's write lock, which keeps the last file's one append handle
//!   ([`FileWriter`]); readers (`get`, `units_from`, `offset_by_time`) take no lock.
//! - **`min <= max`.** [`ConsumeQueue::min_offset`] never exceeds [`ConsumeQueue::max_offset`] and
//!   never points before the first file.
//! - **Creation is made durable before it is claimed.** The dispatch thread creates files and
//!   directories without `fsync`; it records them in the store's [`CreationSyncs`], and every
//!   flush ([`ConsumeQueue::flush`], [`ConsumeQueue::flush_below`], the store's `flush_all` /
//!   `flush_below`) first fsyncs what was recorded (each file, then each directory that gained
//!   an entry). So a unit that a flush made durable is in a file whose directory entry is
//!   durable, and the checkpoint, written only after a flush, never covers a file a power loss
//!   could drop.
//! - **Paths are built from validated components only**: a topic that passes
//!   [`rocketstore_format::is_safe_topic_dir`] (any UTF-8 text but empty, `.`, `..`, `/`, NUL or
//!   over 255 bytes) and is a single path component, and a non-negative queue id; symbolic links
//!   are never followed. Records whose topic fails that check are never dispatched to a consume
//!   queue (see [`crate::dispatch::DispatchRequest::goes_to_cq`]).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rocketstore_format::{is_safe_topic_dir, offset_to_file_name, CqUnit, CQ_STORE_UNIT_SIZE};

use crate::error::{CorruptionKind, Error, Result};
use crate::segment::{CreateOptions, FileWriter, MappedFile, MappedFileQueue, SizePolicy};
use crate::signal::Signal;
use crate::util::{check_not_symlink, fsync_dir, lock};

/// Name of the consume-queue directory under the store root.
pub(crate) const CONSUME_QUEUE_DIR: &str = "consumequeue";

const UNIT: usize = CQ_STORE_UNIT_SIZE;
const UNIT_I64: i64 = CQ_STORE_UNIT_SIZE as i64;
const UNIT_U64: u64 = CQ_STORE_UNIT_SIZE as u64;
/// Recovery reads the last file of a queue ahead in chunks of this size (see `recover`).
const RECOVERY_READ_AHEAD: usize = 64 * 1024;
/// A cursor over at least this many bytes of units asks for their pages up front.
const CURSOR_READ_AHEAD_MIN: usize = 16 * 1024;

/// Checks a consume-queue file size: a positive multiple of 20 that fits a Java `int`.
fn check_file_size(file_size: u64) -> Result<usize> {
    if file_size == 0 || !file_size.is_multiple_of(UNIT_U64) || file_size > i32::MAX as u64 {
        return Err(Error::Config {
            key: "mapped_file_size_consume_queue".into(),
            reason: format!(
                "consume queue file size {file_size} is not a positive multiple of 20 below 2^31"
            ),
        });
    }
    usize::try_from(file_size).map_err(|_| Error::Config {
        key: "mapped_file_size_consume_queue".into(),
        reason: "file size does not fit in memory".into(),
    })
}

/// `<root>/consumequeue` and `<root>/consumequeue/<topic>/<queue_id>`, refusing anything but a
/// valid, single-component topic and a non-negative queue id (reliability G3).
fn queue_dirs(root: &Path, topic: &str, queue_id: i32) -> Result<(PathBuf, PathBuf)> {
    if !is_safe_topic_dir(topic) {
        return Err(Error::invalid(
            "topic",
            format!("{topic:?} cannot be a consume queue directory name"),
        ));
    }
    let mut comps = Path::new(topic).components();
    match (comps.next(), comps.next()) {
        (Some(Component::Normal(c)), None) if c == OsStr::new(topic) => {}
        _ => {
            return Err(Error::invalid(
                "topic",
                format!("{topic:?} is not a single path component"),
            ))
        }
    }
    if queue_id < 0 {
        return Err(Error::invalid(
            "queue_id",
            format!("{queue_id} is negative"),
        ));
    }
    let cq_root = root.join(CONSUME_QUEUE_DIR);
    let dir = cq_root.join(topic).join(queue_id.to_string());
    if dir.parent().and_then(Path::parent) != Some(cq_root.as_path()) {
        return Err(Error::invalid(
            "topic",
            format!("{topic:?} escapes {}", cq_root.display()),
        ));
    }
    Ok((cq_root, dir))
}

/// Parses a queue directory name: the canonical decimal form of a non-negative `i32` (`"7"`, not
/// `"07"`, `"+7"` or `"-1"`).
fn parse_queue_id(name: &str) -> Option<i32> {
    let id: i32 = name.parse().ok()?;
    (id >= 0 && id.to_string() == name).then_some(id)
}

fn unit_in(bytes: &[u8], pos: usize) -> Option<CqUnit> {
    CqUnit::decode(bytes.get(pos..)?)
}

fn unit_at(file: &MappedFile, pos: usize) -> Option<CqUnit> {
    CqUnit::decode(file.slice(pos, UNIT)?)
}

/// End of the record a unit points to (`phy + size`), saturating.
fn unit_end(u: &CqUnit) -> i64 {
    u.phy_offset.saturating_add(i64::from(u.size))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A file or directory entry created by the dispatch thread whose creation is not durable yet.
#[derive(Debug)]
pub(crate) enum Created {
    /// A new consume queue file (path, size): `fsync` it and its directory.
    File(PathBuf, usize),
    /// A directory that gained an entry (a new topic or queue directory): `fsync` it.
    Dir(PathBuf),
}

/// The creations of a store's consume queues that are not durable yet (see the module doc).
/// The dispatch thread only pushes (one short lock) and wakes the flush service, which drains
/// them at once, while the new files are still nearly empty; the `fsync`s run outside that
/// lock, so file creation never waits on the disk.
#[derive(Debug, Default)]
pub(crate) struct CreationSyncs {
    pending: Mutex<Vec<Created>>,
    /// Serializes drains: a drain returns only once everything pushed before it is durable.
    drain: Mutex<()>,
    /// The flush service's signal, woken on every push (none without service threads).
    wake: OnceLock<Arc<Signal>>,
}

impl CreationSyncs {
    /// Creations pushed and not yet made durable.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        lock(&self.pending).len()
    }

    pub(crate) fn push(&self, c: Created) {
        lock(&self.pending).push(c);
        if let Some(s) = self.wake.get() {
            s.wakeup();
        }
    }

    /// Makes every creation pushed so far durable: every directory named is fsynced
    /// (deduplicated; one removed since is skipped), then each file and its directory (a file
    /// destroyed since is skipped). On error the creations not
    /// yet durable stay pending and the error is returned (the caller fences the store).
    ///
    /// # Errors
    /// The first failed `fsync`, with its path.
    pub(crate) fn sync(&self) -> Result<()> {
        let _drain = lock(&self.drain);
        let taken = std::mem::take(&mut *lock(&self.pending));
        if taken.is_empty() {
            return Ok(());
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut files = Vec::new();
        for c in &taken {
            match c {
                Created::File(f, size) => files.push((f, *size)),
                Created::Dir(d) => dirs.push(d.clone()),
            }
        }
        dirs.sort();
        dirs.dedup();
        // Directories first (parents sort before children), then each file with its own
        // directory: a file counts as created once every directory above it is durable.
        let done = (|| -> Result<()> {
            for d in &dirs {
                match fsync_dir(d) {
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
            for (f, size) in &files {
                MappedFile::sync_created(f, *size)?;
            }
            Ok(())
        })();
        if done.is_err() {
            let mut pending = lock(&self.pending);
            let newer = std::mem::replace(&mut *pending, taken);
            pending.extend(newer);
        }
        done
    }
}

/// One consume queue: the 20-byte units of one `(topic, queueId)`.
#[derive(Debug)]
pub(crate) struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    cq_root: PathBuf,
    dir: PathBuf,
    file_size: usize,
    writable: bool,
    files: MappedFileQueue,
    /// End (`phy + size`) of the last real unit, -1 if none (RocketMQ `maxPhysicOffset`).
    max_physic_offset: AtomicI64,
    /// RocketMQ `minLogicOffset` (bytes). Starts at 0 like RocketMQ; `correct_min_offset` sets it.
    min_logic_offset: AtomicI64,
    /// Files were loaded from disk and `recover` has not run yet: puts are refused.
    needs_recovery: AtomicBool,
    /// `recover` ended on a damaged unit (non-zero but invalid) or dropped later files: units
    /// were lost, so store recovery re-derives this queue's tail from the commit log.
    damaged_tail: AtomicBool,
    /// The one writer's lock; holds the append handle of the file last written.
    write_lock: Mutex<Option<FileWriter>>,
    /// Where this queue records creations whose `fsync` a flush does (the store's, shared).
    syncs: Arc<CreationSyncs>,
}

/// A cursor over one consume queue file: yields `(queue offset, unit)` decoded in place
/// from the mapping (see [`ConsumeQueue::cursor`]); holds the file mapped while it lives.
#[derive(Debug, Clone)]
pub(crate) struct UnitCursor {
    file: Arc<MappedFile>,
    rel: usize,
    next_offset: i64,
    left: usize,
}

impl UnitCursor {
    /// The queue offset one past the cursor's last unit.
    pub(crate) fn end_offset(&self) -> i64 {
        self.next_offset + i64::try_from(self.left).unwrap_or(i64::MAX)
    }
}

impl Iterator for UnitCursor {
    type Item = (i64, CqUnit);

    fn next(&mut self) -> Option<Self::Item> {
        while self.left > 0 {
            self.left -= 1;
            let at = self.rel;
            let offset = self.next_offset;
            self.rel += UNIT;
            self.next_offset += 1;
            let unit = self.file.slice(at, UNIT).and_then(CqUnit::decode);
            if let Some(u) = unit {
                return Some((offset, u));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

#[allow(dead_code)]
impl ConsumeQueue {
    /// Opens the queue `<root>/consumequeue/<topic>/<queue_id>/`, loading its files (spec §2 load
    /// rule). A missing directory is an empty queue; it is created on the first `put` (writable
    /// only). Keeps: the path is a direct child of `<root>/consumequeue/<topic>`, built from a
    /// validated topic; no symlink is followed; nothing is written.
    ///
    /// Loaded files start with all cursors at the file size: call [`ConsumeQueue::recover`]
    /// before reading or writing.
    pub(crate) fn open(
        root: &Path,
        topic: &str,
        queue_id: i32,
        file_size: u64,
        writable: bool,
    ) -> Result<Self> {
        let size = check_file_size(file_size)?;
        let (cq_root, dir) = queue_dirs(root, topic, queue_id)?;
        check_not_symlink(&cq_root)?;
        check_not_symlink(&cq_root.join(topic))?;
        let files = MappedFileQueue::load(&dir, file_size, writable, SizePolicy::Exact)?;
        let loaded = files.len() > 0;
        // The last file is the one still being appended to, mostly empty in a queue with few
        // messages: random advice, so that its first read (recovery) or write does not fault in
        // the whole file (see `create_file`). Recovery reads it ahead explicitly.
        if let Some(last) = files.last() {
            last.advise_random();
        }
        Ok(Self {
            topic: topic.to_string(),
            queue_id,
            cq_root,
            dir,
            file_size: size,
            writable,
            files,
            max_physic_offset: AtomicI64::new(-1),
            min_logic_offset: AtomicI64::new(0),
            needs_recovery: AtomicBool::new(loaded),
            damaged_tail: AtomicBool::new(false),
            write_lock: Mutex::new(None),
            syncs: Arc::default(),
        })
    }

    /// Records this queue's file and directory creations in `syncs` (the store's).
    fn with_syncs(mut self, syncs: &Arc<CreationSyncs>) -> Self {
        self.syncs = Arc::clone(syncs);
        self
    }

    /// The queue's topic (validated at open).
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The queue id (non-negative).
    pub(crate) fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// The queue's directory (it may not exist yet).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// RocketMQ `ConsumeQueue.recover` (§5.5): scans from the third-from-last file; a unit is
    /// valid iff `phy >= 0 && size > 0`; the first invalid unit ends the queue. Cursors are set to
    /// the end, later files are deleted (writable) or dropped from the list (read-only), and a
    /// writable file's stale tail is zero-filled. Keeps: a read-only queue's bytes are never
    /// changed. `max_physic_offset` := end of the last valid unit (pre-fill units excluded, see
    /// [`ConsumeQueue::max_physic_offset`]). Recovery only: it reads and zero-fills bytes above
    /// the recovered end, which fails while a reader still holds the files.
    pub(crate) fn recover(&self) -> Result<()> {
        let _g = self.lock_exclusive();
        let files = self.files.files();
        if files.is_empty() {
            self.max_physic_offset.store(-1, Ordering::Release);
            self.needs_recovery.store(false, Ordering::Release);
            return Ok(());
        }
        let mut index = files.len().saturating_sub(3);
        let mut last_end = -1i64;
        let process_offset = loop {
            let Some(f) = files.get(index) else {
                break files.last().map_or(0, |f| f.from() + f.size() as u64);
            };
            let view = f.recovery_view(0).ok_or_else(|| {
                Error::corruption(
                    f.path(),
                    f.from(),
                    CorruptionKind::Invalid("consume queue file is not mapped".into()),
                )
            })?;
            let mut pos = 0usize;
            // The last file is mapped with random advice (see `open`): read it ahead and map
            // it here, a chunk at a time, so that a full file still comes in with large reads
            // and few faults while a mostly empty one costs one chunk, not the read-ahead window.
            let ahead = index + 1 == files.len();
            while pos + UNIT <= f.size() {
                if ahead && pos.is_multiple_of(RECOVERY_READ_AHEAD) {
                    f.prefetch(pos, RECOVERY_READ_AHEAD);
                }
                match unit_in(&view, pos) {
                    Some(u) if u.is_valid() => {
                        if !u.is_prefill() {
                            last_end = unit_end(&u);
                        }
                        pos += UNIT;
                    }
                    _ => break,
                }
            }
            if pos == f.size() && index + 1 < files.len() {
                index += 1;
                continue;
            }
            break f.from() + pos as u64;
        };
        // A clean end is an all-zero unit (or the end of the last file); anything else means
        // units were lost.
        let damaged = self.files.cut_short()
            || files.iter().any(|f| f.from() > process_offset)
            || files.iter().any(|f| {
                f.from() <= process_offset
                    && usize::try_from(process_offset - f.from())
                        .ok()
                        .and_then(|pos| f.recovery_view(pos))
                        .is_some_and(|rest| rest.iter().take(UNIT).any(|&b| b != 0))
            });
        self.damaged_tail.store(damaged, Ordering::Release);
        drop(files);
        self.files.truncate_dirty(process_offset)?;
        self.max_physic_offset.store(last_end, Ordering::Release);
        self.clamp_min_to_max();
        self.needs_recovery.store(false, Ordering::Release);
        Ok(())
    }

    /// RocketMQ `putMessagePositionInfo` (§5.3, §5.8): appends `unit` at logical offset
    /// `cq_offset`. Returns `Ok(false)` without writing when the unit is already built
    /// (`phy + size <= max_physic_offset`, idempotent re-dispatch) or `cq_offset` is below the
    /// queue's max. The first unit of a queue with no data pre-fills its file with blank units up
    /// to `cq_offset` and sets the min offset there. Creates files on demand (no allocator; their
    /// `fsync`s are left to the next flush, see the module doc).
    ///
    /// Keeps: no gaps (a `cq_offset` above the max of a non-empty queue is a typed
    /// [`Error::Corruption`] naming the expected offset, and nothing is written); the bytes are in
    /// place before `wrote` is published.
    ///
    /// # Errors
    /// `ReadOnly`, `InvalidArgument` (negative offset, a unit RocketMQ would read as the end of the
    /// queue), `Corruption` (gap; `recover` not run on a loaded queue), I/O errors.
    pub(crate) fn put(&self, unit: CqUnit, cq_offset: i64) -> Result<bool> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        if cq_offset < 0 {
            return Err(Error::invalid(
                "cq_offset",
                format!("{cq_offset} is negative"),
            ));
        }
        if !unit.is_valid() || unit.is_prefill() {
            return Err(Error::invalid(
                "cq_unit",
                format!(
                    "phy {} size {} would read as the end of the queue",
                    unit.phy_offset, unit.size
                ),
            ));
        }
        let mut writer = lock(&self.write_lock);
        if self.needs_recovery.load(Ordering::Acquire) {
            return Err(self.corrupt(0, "put before recover on a loaded consume queue".into()));
        }
        if unit_end(&unit) <= self.max_physic_offset.load(Ordering::Acquire) {
            return Ok(false);
        }
        let expect = u64::try_from(cq_offset)
            .ok()
            .and_then(|o| o.checked_mul(UNIT_U64))
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or_else(|| Error::invalid("cq_offset", format!("{cq_offset} is too large")))?;
        // The common case, without the file list's lock: the unit goes right after the last
        // one, in the file the append handle holds. That file is the list's last: every change
        // of the list's tail either clears the handle (`lock_exclusive`) or is a new file that
        // `append` claims at once, and the front is cut only below the last file.
        if let Some(w) = writer.as_mut() {
            let f = w.file();
            let wrote = f.wrote();
            if wrote > 0
                && wrote.is_multiple_of(UNIT)
                && !f.is_full()
                && f.from() + wrote as u64 == expect
            {
                let encoded = unit.encode();
                w.write_with(wrote, UNIT, |dst| dst.copy_from_slice(&encoded))?;
                // Release: the bytes above are in place before readers can see them.
                w.publish(wrote + UNIT);
                self.max_physic_offset
                    .store(unit_end(&unit), Ordering::Release);
                return Ok(true);
            }
        }
        let fs = self.file_size as u64;

        // An empty queue (no file, or a single file with nothing written): the first write.
        let last = self.files.last();
        let first_write = match &last {
            None => true,
            // `wrote` first: the file count takes the list's lock.
            Some(f) => f.wrote() == 0 && self.files.len() == 1,
        };
        if first_write {
            if let Some(f) = &last {
                if expect < f.from() {
                    return Ok(false);
                }
                if expect >= f.from() + fs {
                    // The empty file does not hold `expect`: replace it.
                    if let Some(f) = self.files.pop_first() {
                        f.destroy()?;
                    }
                }
            }
            let file = match self.files.last() {
                Some(f) => f,
                None => self.create_file(expect - expect % fs)?,
            };
            let pos = usize::try_from(expect - file.from())
                .map_err(|_| self.corrupt(expect, "bad position".into()))?;
            // Readers see `min == max` until the units are published (min is clamped to max).
            self.min_logic_offset
                .store(to_i64(expect), Ordering::Release);
            self.append(&mut writer, &file, pos, &unit)?;
        } else {
            let Some(f) = last else {
                return Err(self.corrupt(expect, "consume queue has no file".into()));
            };
            let current = f.from() + f.wrote() as u64;
            if expect < current {
                return Ok(false);
            }
            if expect > current {
                return Err(self.corrupt(
                    expect,
                    format!(
                        "gap in consume queue {}/{}: unit for offset {cq_offset} (phy {}), but the next offset \
                         to write is {}",
                        self.topic,
                        self.queue_id,
                        unit.phy_offset,
                        current / UNIT_U64
                    ),
                ));
            }
            if f.is_full() {
                let next = self.create_file(f.from() + fs)?;
                self.append(&mut writer, &next, 0, &unit)?;
            } else {
                self.append(&mut writer, &f, f.wrote(), &unit)?;
            }
        }
        self.max_physic_offset
            .store(unit_end(&unit), Ordering::Release);
        Ok(true)
    }

    /// The writer lock with no append handle held: recovery and truncation read and rewrite
    /// files regardless of their cursors, which needs them unclaimed.
    fn lock_exclusive(&self) -> std::sync::MutexGuard<'_, Option<FileWriter>> {
        let mut g = lock(&self.write_lock);
        *g = None;
        g
    }

    /// Writes pre-fill units over `[wrote, pos)` and `unit` at `pos`, then publishes `pos + 20`,
    /// through `slot`, the append handle of the file last written (claimed when `file` is
    /// another one).
    fn append(
        &self,
        slot: &mut Option<FileWriter>,
        file: &Arc<MappedFile>,
        pos: usize,
        unit: &CqUnit,
    ) -> Result<()> {
        let writer = match slot {
            Some(w) if Arc::ptr_eq(w.file(), file) => w,
            _ => {
                *slot = None;
                slot.insert(file.writer()?)
            }
        };
        let start = file.wrote();
        if pos < start || !pos.is_multiple_of(UNIT) || !start.is_multiple_of(UNIT) {
            return Err(self.corrupt(
                file.from() + pos as u64,
                format!("misaligned append at {pos}"),
            ));
        }
        let encoded = unit.encode();
        writer.write_with(start, pos - start + UNIT, |dst| {
            let (prefill, last) = dst.split_at_mut(pos - start);
            if !prefill.is_empty() {
                let blank = CqUnit::PREFILL.encode();
                for chunk in prefill.chunks_exact_mut(UNIT) {
                    chunk.copy_from_slice(&blank);
                }
            }
            last.copy_from_slice(&encoded);
        })?;
        // Release: the bytes above are in place before readers can see them.
        writer.publish(pos + UNIT);
        Ok(())
    }

    /// Creates the file starting at logical byte `from`, creating the queue directory first if
    /// needed, and appends it to the file list. The `fsync`s of the file and of the directories
    /// that gained an entry are recorded for the next flush, before the file is listed (so no
    /// flush can msync it before its creation is durable).
    fn create_file(&self, from: u64) -> Result<Arc<MappedFile>> {
        self.ensure_dir()?;
        let path = self.dir.join(offset_to_file_name(from));
        let opts = CreateOptions {
            sync: false,
            defer_sync: false,
            populate: false,
            warm: None,
            prealloc: None,
        };
        let file = Arc::new(MappedFile::create(&path, from, self.file_size, &opts)?);
        // Units are appended 20 bytes at a time: fault in one page per page written, not the
        // read-ahead window (up to the whole file) at the first unit.
        file.advise_random();
        // The file before it is complete: consumers read it in order, with read-around.
        if let Some(previous) = self.files.last() {
            previous.advise_normal();
        }
        #[cfg(feature = "powerloss")]
        crate::powerloss::unsynced(&path);
        self.syncs.push(Created::File(path, self.file_size));
        if let Err(e) = self.files.push(Arc::clone(&file)) {
            let _ = file.destroy();
            return Err(e);
        }
        Ok(file)
    }

    /// Creates `<root>/consumequeue/<topic>/<qid>` (never through a symlink), recording the
    /// parent of every directory it creates for the next flush's `fsync`.
    fn ensure_dir(&self) -> Result<()> {
        let topic_dir = self.cq_root.join(&self.topic);
        for dir in [&self.cq_root, &topic_dir, &self.dir] {
            check_not_symlink(dir)?;
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => {
                    return Err(Error::UnsupportedFormat {
                        path: dir.clone(),
                        reason: "not a directory".into(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("stat", dir.as_path(), e)),
            }
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("mkdir", dir.as_path(), e)),
            }
            if let Some(parent) = dir.parent() {
                self.syncs.push(Created::Dir(parent.to_path_buf()));
            }
        }
        Ok(())
    }

    fn corrupt(&self, offset: u64, msg: String) -> Error {
        Error::corruption(&self.dir, offset, CorruptionKind::Invalid(msg))
    }

    /// The unit at `cq_offset`, or `None` if it is outside `[min_offset, max_offset)` or its file
    /// is gone. Keeps: only published bytes are read.
    pub(crate) fn get(&self, cq_offset: i64) -> Option<CqUnit> {
        if cq_offset < self.min_offset() || cq_offset >= self.max_offset() {
            return None;
        }
        let pos = u64::try_from(cq_offset).ok()?.checked_mul(UNIT_U64)?;
        let f = self.files.find(pos)?;
        unit_at(&f, usize::try_from(pos - f.from()).ok()?)
    }

    /// Up to `max_units` units from `cq_offset`, with their offsets, never past the end of the
    /// file holding `cq_offset` (RocketMQ reads one CQ file per `getMessage`). Empty if
    /// `cq_offset` is outside `[min_offset, max_offset)`.
    pub(crate) fn units_from(&self, cq_offset: i64, max_units: usize) -> Vec<(i64, CqUnit)> {
        self.cursor(cq_offset, max_units)
            .map(|c| c.collect())
            .unwrap_or_default()
    }

    /// The consume queue cursor: up to `max_units` units from `cq_offset`, decoded one at a
    /// time straight from the mapping (nothing is copied or collected), never past the end of
    /// the file holding `cq_offset`. `None` (nothing to read) if `cq_offset` is outside
    /// `[min_offset, max_offset)` or its file is gone.
    pub(crate) fn cursor(&self, cq_offset: i64, max_units: usize) -> Option<UnitCursor> {
        if max_units == 0 || cq_offset < self.min_offset() || cq_offset >= self.max_offset() {
            return None;
        }
        let pos = u64::try_from(cq_offset).ok()?.checked_mul(UNIT_U64)?;
        let file = self.files.find(pos)?;
        let rel = usize::try_from(pos - file.from()).ok()?;
        let left = (file.slice_to_end(rel)?.len() / UNIT).min(max_units);
        // The last file of a queue is mapped with random advice (see `open`, `create_file`):
        // a long read reads and maps its pages up front instead of faulting them one by one.
        if left * UNIT >= CURSOR_READ_AHEAD_MIN {
            file.prefetch(rel, left * UNIT);
        }
        Some(UnitCursor {
            file,
            rel,
            next_offset: cq_offset,
            left,
        })
    }

    /// A read-only queue following a writer in another process (`crate::follow`): makes the
    /// units that writer appended readable, each checked before it is: a valid unit (or a
    /// pre-fill unit) whose record ends at or below `end` (published as dispatched) and whose
    /// record in `log` names this queue, this queue offset and this position. The first unit
    /// that fails (not written yet, being written, or for a record past `end`) stops the scan;
    /// the next call goes on from there. Picks up the files the writer created. Returns whether
    /// the queue grew.
    pub(crate) fn follow(&self, log: &crate::commitlog::CommitLog, end: u64) -> Result<bool> {
        use rocketstore_format::record::{
            PHYSICAL_OFFSET_POSITION, QUEUE_ID_POSITION, QUEUE_OFFSET_POSITION,
        };
        let _g = lock(&self.write_lock);
        let mut grew = false;
        let mut buf = vec![0u8; 64 * UNIT];
        loop {
            let files = self.files.files();
            let current = files.iter().find(|f| f.read_position() < f.size()).cloned();
            let file = match current {
                Some(f) => f,
                None => {
                    let next = match files.last() {
                        Some(last) => self.files.follow_open(last.from() + last.size() as u64)?,
                        None => self.files.follow_open_first()?,
                    };
                    match next {
                        Some(f) => f,
                        None => return Ok(grew),
                    }
                }
            };
            drop(files);
            let start = file.read_position();
            let n = file.read_at(start, &mut buf)?;
            let mut pos = start;
            let mut last_end = -1i64;
            for chunk in buf[..n - n % UNIT].chunks_exact(UNIT) {
                let Some(u) = unit_in(chunk, 0) else { break };
                if !u.is_prefill() {
                    if !u.is_valid() {
                        break;
                    }
                    let rec_end = u.phy_offset.saturating_add(i64::from(u.size));
                    if rec_end > to_i64(end) {
                        break;
                    }
                    let cq_offset = to_i64(file.from() + pos as u64) / UNIT_I64;
                    let Some(rec) = log.record_at_sized(u.phy_offset as u64, u.size as usize)
                    else {
                        break;
                    };
                    let b = rec.bytes();
                    let be32 = |at: usize| {
                        b.get(at..at + 4)
                            .map(|x| i32::from_be_bytes([x[0], x[1], x[2], x[3]]))
                    };
                    let be64 = |at: usize| {
                        b.get(at..at + 8)
                            .and_then(|x| <[u8; 8]>::try_from(x).ok())
                            .map(i64::from_be_bytes)
                    };
                    if be32(0) != Some(u.size)
                        || be32(QUEUE_ID_POSITION) != Some(self.queue_id)
                        || be64(QUEUE_OFFSET_POSITION) != Some(cq_offset)
                        || be64(PHYSICAL_OFFSET_POSITION) != Some(u.phy_offset)
                    {
                        break;
                    }
                    last_end = rec_end;
                }
                pos += UNIT;
            }
            if pos > start {
                file.follow_to(pos);
                grew = true;
                if last_end >= 0 {
                    self.max_physic_offset.fetch_max(last_end, Ordering::AcqRel);
                }
            }
            if pos < file.size() {
                if pos == start + n - n % UNIT && n == buf.len() {
                    continue;
                }
                return Ok(grew);
            }
        }
    }

    /// A follower's freshly opened queue: nothing readable until [`ConsumeQueue::follow`]
    /// checks it.
    pub(crate) fn follow_reset(&self) -> Result<()> {
        self.files.follow_reset()?;
        self.needs_recovery.store(false, Ordering::Release);
        Ok(())
    }

    /// A follower drops the files the writer's cleanup deleted and corrects the min offset to
    /// the commit log's first offset `commitlog_min`.
    pub(crate) fn follow_expired(&self, commitlog_min: u64) {
        let _g = lock(&self.write_lock);
        self.files.follow_drop_missing();
        self.correct_min_offset_locked(commitlog_min);
    }

    /// `minOffsetInQueue` (§5.4): RocketMQ's `minLogicOffset / 20`, clamped to
    /// `[first file start, max_offset]` so that `min <= max` always holds.
    pub(crate) fn min_offset(&self) -> i64 {
        self.min_bytes() / UNIT_I64
    }

    fn min_bytes(&self) -> i64 {
        let max = to_i64(self.files.max_offset());
        let first = self.files.first().map_or(0, |f| to_i64(f.from()));
        self.min_logic_offset
            .load(Ordering::Acquire)
            .max(first)
            .min(max)
    }

    /// `maxOffsetInQueue` (§5.4): the next offset to be written, `(last.from + readPosition) / 20`;
    /// 0 if there is no file.
    pub(crate) fn max_offset(&self) -> i64 {
        to_i64(self.files.max_offset()) / UNIT_I64
    }

    /// Units per file (`file_size / 20`; RocketMQ's default 300,000).
    pub(crate) fn units_per_file(&self) -> i64 {
        (self.file_size / UNIT) as i64
    }

    /// RocketMQ `maxPhysicOffset`: the end (`phy + size`) of the last unit, -1 if none. Pre-fill
    /// units (phy 0, size `i32::MAX`) reference no record and are not counted, so a queue holding
    /// only pre-fill units reports -1 instead of RocketMQ's 2147483647 (which would make every
    /// later record below 2 GiB look "already built").
    pub(crate) fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset.load(Ordering::Acquire)
    }

    /// The last published unit and its offset (`max_offset - 1`), regardless of the min offset;
    /// `None` for an empty queue.
    pub(crate) fn last_unit(&self) -> Option<(i64, CqUnit)> {
        let max = self.max_offset();
        if max <= 0 {
            return None;
        }
        let pos = u64::try_from(max - 1).ok()?.checked_mul(UNIT_U64)?;
        let f = self.files.find(pos)?;
        Some((max - 1, unit_at(&f, usize::try_from(pos - f.from()).ok()?)?))
    }

    /// RocketMQ HEAD `correctMinOffset(commitlogMinOffset)` (§5.4):
    /// - no file: min := 0, `max_physic_offset` := -1;
    /// - the last unit points below `commitlog_min`: min := max (the queue is empty);
    /// - otherwise, if the unit at the previous min (inside the first file) still points at or
    ///   above `commitlog_min`, keep it; else binary-search the first file for the first unit with
    ///   `phy >= commitlog_min`, stopping early on `phy == commitlog_min`.
    ///
    /// Keeps the documented pre-fill quirk (with `commitlog_min == 0` a restarted pre-filled queue
    /// reports a min inside its pre-fill range, e.g. 304 for spec §5.4's example) and `min <= max`
    /// (a min beyond the max is lowered to the max instead of RocketMQ's "deprecated" state).
    pub(crate) fn correct_min_offset(&self, commitlog_min: u64) {
        let _g = lock(&self.write_lock);
        self.correct_min_offset_locked(commitlog_min);
    }

    fn correct_min_offset_locked(&self, commitlog_min: u64) {
        let min_commit = to_i64(commitlog_min);
        let Some(last) = self.files.last() else {
            self.min_logic_offset.store(0, Ordering::Release);
            self.max_physic_offset.store(-1, Ordering::Release);
            return;
        };
        let max_bytes = to_i64(self.files.max_offset());
        let min_logic = self.min_logic_offset.load(Ordering::Acquire);
        if min_logic > max_bytes {
            self.min_logic_offset.store(max_bytes, Ordering::Release);
            return;
        }
        let read = last.read_position();
        if read >= UNIT {
            if let Some(u) = unit_at(&last, read - UNIT) {
                if u.phy_offset < min_commit {
                    self.min_logic_offset
                        .store(to_i64(last.from()) + read as i64, Ordering::Release);
                    return;
                }
            }
        }
        let Some(first) = self.files.first() else {
            return;
        };
        let first_from = to_i64(first.from());
        let mut intact = true;
        let mut start = min_logic - first_from;
        if start < 0 {
            intact = false;
            start = 0;
        }
        let Ok(start_pos) = usize::try_from(start) else {
            return;
        };
        if start_pos > first.read_position() {
            return; // RocketMQ: "[Bug][InconsistentState] ... should have been deleted"
        }
        let Some(buf) = first.slice_to_end(start_pos) else {
            return;
        };
        let size = buf.len() - buf.len() % UNIT;
        if size == 0 {
            return;
        }
        let phy = |pos: usize| unit_in(buf, pos).map_or(i64::MIN, |u| u.phy_offset);
        if intact && phy(0) >= min_commit {
            return;
        }
        let mut low = 0usize;
        let mut high = size - UNIT;
        while high - low > UNIT {
            let mid = (low + high) / 2 / UNIT * UNIT;
            let p = phy(mid);
            if p > min_commit {
                high = mid;
            } else if p == min_commit {
                low = mid;
                high = mid;
                break;
            } else {
                low = mid;
            }
        }
        let mut i = low;
        while i <= high {
            if phy(i) >= min_commit {
                self.min_logic_offset
                    .store(first_from + start + i as i64, Ordering::Release);
                break;
            }
            i += UNIT;
        }
    }

    fn clamp_min_to_max(&self) {
        let max = to_i64(self.files.max_offset());
        self.min_logic_offset.fetch_min(max, Ordering::AcqRel);
    }

    /// RocketMQ `truncateDirtyLogicFiles(phyOffset)` (§5.6): repeatedly on the last file, delete
    /// it if its first unit is invalid or points at or beyond `phy_offset`; otherwise keep the
    /// units below `phy_offset` (stopping at the first invalid one) and stop. Later bytes of a
    /// writable file are zero-filled; a read-only queue only drops files from its list.
    /// `max_physic_offset` := end of the last kept unit (-1 if none). Keeps `min <= max`.
    /// Recovery only (after commit-log recovery, before readers are served): it rewrites bytes
    /// that were published before, which fails while a reader still holds the file.
    pub(crate) fn truncate_dirty(&self, phy_offset: u64) -> Result<()> {
        let _g = self.lock_exclusive();
        let limit = to_i64(phy_offset);
        let mut last_end = -1i64;
        loop {
            let Some(f) = self.files.last() else {
                self.files.set_flushed_where(0);
                self.files.set_committed_where(0);
                break;
            };
            let mut pos = 0usize;
            if let Some(view) = f.recovery_view(0) {
                while pos + UNIT <= f.size() {
                    match unit_in(&view, pos) {
                        Some(u) if u.is_valid() && u.phy_offset < limit => {
                            if !u.is_prefill() {
                                last_end = unit_end(&u);
                            }
                            pos += UNIT;
                        }
                        _ => break,
                    }
                }
            }
            if pos > 0 {
                let end = f.from() + pos as u64;
                // The file queue rewrites the file only if nobody else holds it.
                drop(f);
                self.files.truncate_dirty(end)?;
                break;
            }
            // The first unit is invalid or at/after the limit: the whole file goes.
            if let Some(popped) = self.files.pop_last() {
                if self.writable {
                    popped.destroy()?;
                }
            }
        }
        self.max_physic_offset.store(last_end, Ordering::Release);
        self.clamp_min_to_max();
        self.needs_recovery.store(false, Ordering::Release);
        Ok(())
    }

    /// RocketMQ `deleteExpiredFile(commitlogMin)` (§5.7): oldest first, every file except the
    /// last whose last unit points below `commitlog_min` is destroyed, stopping at the first that
    /// does not; then [`ConsumeQueue::correct_min_offset`]. Returns the number of files deleted.
    /// Keeps: the last file is never deleted; readers holding a file keep its mapping.
    pub(crate) fn delete_expired(&self, commitlog_min: u64) -> Result<usize> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        let _g = lock(&self.write_lock);
        let min = to_i64(commitlog_min);
        let files = self.files.files();
        let mut deleted = 0;
        for f in files.iter().take(files.len().saturating_sub(1)) {
            let expired = unit_at(f, self.file_size - UNIT).is_some_and(|u| u.phy_offset < min);
            if !expired {
                break;
            }
            match self.files.pop_first() {
                Some(popped) if Arc::ptr_eq(&popped, f) => popped.destroy()?,
                Some(other) => {
                    // Not ours to delete (the list changed): put nothing back, stop.
                    return Err(self.corrupt(
                        other.from(),
                        "consume queue file list changed during deletion".into(),
                    ));
                }
                None => break,
            }
            deleted += 1;
        }
        drop(files);
        self.correct_min_offset_locked(commitlog_min);
        Ok(deleted)
    }

    /// Flushes (msync) the file holding the queue's flushed position if at least `least_pages`
    /// pages are dirty (0: anything dirty). Returns true if the flushed position moved. Keeps:
    /// `flushed` advances only after msync succeeded.
    pub(crate) fn flush(&self, least_pages: usize) -> Result<bool> {
        if !self.writable {
            return Ok(false);
        }
        self.syncs.sync()?;
        self.files.flush(least_pages)
    }

    /// Flushes (msync, whole files) while the first unflushed unit names a record below `phy`:
    /// afterwards every unit of a record below `phy` is durable (the checkpoint's recovery
    /// window). Keeps: `flushed` advances only after msync succeeded.
    pub(crate) fn flush_below(&self, phy: u64) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.syncs.sync()?;
        loop {
            let at = self.files.flushed_where() / UNIT_U64;
            let Some(unit) = i64::try_from(at).ok().and_then(|o| self.get(o)) else {
                return Ok(());
            };
            if u64::try_from(unit.phy_offset).unwrap_or(0) >= phy || !self.files.flush(0)? {
                return Ok(());
            }
        }
    }

    /// [5.x] `getOffsetInQueueByTime(timestamp, LOWER | UPPER)` (§11.2). `store_time_of(phy, size)`
    /// is the commit log's `pickupStoreTimestamp` (`None` = unavailable, read as -1).
    ///
    /// File choice: LOWER takes the first non-last file whose last unit's store time is `>= ts`,
    /// else the last file; UPPER the last file whose first unit's store time is `<= ts` (an
    /// unknown time counts as -1). In the file, after the boundary checks (last unit's time < ts:
    /// LOWER gives the offset after it, UPPER that unit; first unit's time > ts: LOWER gives the
    /// file's first offset, UPPER 0), a binary search (units below `commitlog_min` go left) finds
    /// an exact match, extended to the leftmost (LOWER) / rightmost (UPPER) equal timestamp, or
    /// LOWER the first unit with time > ts and UPPER the last with time < ts. The result is
    /// clamped to `[min_offset, max_offset]`.
    pub(crate) fn offset_by_time(
        &self,
        timestamp: i64,
        upper: bool,
        store_time_of: &dyn Fn(i64, i32) -> Option<i64>,
        commitlog_min: u64,
    ) -> i64 {
        let raw = self.offset_by_time_raw(timestamp, upper, store_time_of, commitlog_min);
        raw.max(self.min_offset()).min(self.max_offset())
    }

    fn offset_by_time_raw(
        &self,
        ts: i64,
        upper: bool,
        store_time_of: &dyn Fn(i64, i32) -> Option<i64>,
        commitlog_min: u64,
    ) -> i64 {
        let time_of = |u: Option<CqUnit>| -> i64 {
            u.and_then(|u| store_time_of(u.phy_offset, u.size))
                .unwrap_or(-1)
        };
        let known = |t: i64| if t > 0 { t } else { -1 };
        let files = self.files.files();
        let n = files.len();
        let chosen = if upper {
            files
                .iter()
                .rev()
                .find(|f| known(time_of(unit_at(f, 0))) <= ts)
        } else {
            files.iter().enumerate().find_map(|(i, f)| {
                if i + 1 == n || known(time_of(unit_at(f, self.file_size - UNIT))) >= ts {
                    Some(f)
                } else {
                    None
                }
            })
        };
        let Some(f) = chosen else {
            return 0;
        };
        let from = to_i64(f.from());
        let range = f.read_position() - f.read_position() % UNIT;
        let Some(buf) = f.slice(0, range) else {
            return 0;
        };
        if range == 0 {
            return 0;
        }
        let min_logic = self.min_bytes();
        let low0 = if min_logic > from {
            usize::try_from(min_logic - from).unwrap_or(usize::MAX)
        } else {
            0
        };
        let ceiling = range - UNIT;
        if low0 > ceiling {
            return (from + range as i64) / UNIT_I64;
        }
        let at = |pos: usize| unit_in(buf, pos);
        let time_at = |pos: usize| time_of(at(pos));
        let floor = low0;
        // Case 1: the last unit is older than ts.
        if time_at(ceiling) < ts {
            return if upper {
                (from + ceiling as i64) / UNIT_I64
            } else {
                (from + (ceiling + UNIT) as i64) / UNIT_I64
            };
        }
        // Case 2: the first unit is newer than ts.
        if time_at(floor) > ts {
            return if upper { 0 } else { from / UNIT_I64 };
        }
        let min_phy = to_i64(commitlog_min);
        let (mut low, mut high) = (floor as i64, ceiling as i64);
        let (mut target, mut left, mut right) = (-1i64, -1i64, -1i64);
        while high >= low {
            let mid = (low + high) / (2 * UNIT_I64) * UNIT_I64;
            let Some(u) = usize::try_from(mid).ok().and_then(at) else {
                return 0;
            };
            if u.phy_offset < min_phy {
                low = mid + UNIT_I64;
                left = mid;
                continue;
            }
            let t = time_of(Some(u));
            if t < 0 {
                return 0;
            } else if t == ts {
                target = mid;
                break;
            } else if t > ts {
                high = mid - UNIT_I64;
                right = mid;
            } else {
                low = mid + UNIT_I64;
                left = mid;
            }
        }
        let offset = if target != -1 {
            let mut edge = target;
            loop {
                let attempt = if upper {
                    edge + UNIT_I64
                } else {
                    edge - UNIT_I64
                };
                if (!upper && attempt < floor as i64) || (upper && attempt > ceiling as i64) {
                    break;
                }
                match usize::try_from(attempt) {
                    Ok(p) if time_at(p) == ts => edge = attempt,
                    _ => break,
                }
            }
            edge
        } else if upper {
            left
        } else {
            right
        };
        // Java long arithmetic: -1 (never set) truncates toward zero like Java's division.
        (from + offset) / UNIT_I64
    }

    /// Destroys every file of the queue and tries to remove its (then empty) directory; the
    /// queue is empty afterwards (min 0, max 0, `max_physic_offset` -1). Keeps: readers holding a
    /// file keep its mapping until they drop it.
    pub(crate) fn destroy(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        let _g = self.lock_exclusive();
        while let Some(f) = self.files.pop_first() {
            f.destroy()?;
        }
        self.files.set_flushed_where(0);
        self.files.set_committed_where(0);
        self.min_logic_offset.store(0, Ordering::Release);
        self.max_physic_offset.store(-1, Ordering::Release);
        self.needs_recovery.store(false, Ordering::Release);
        let _ = std::fs::remove_dir(&self.dir);
        Ok(())
    }

    /// Number of files (for tests and diagnostics).
    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// True if the last [`ConsumeQueue::recover`] found a damaged end (units were lost).
    pub(crate) fn damaged_tail(&self) -> bool {
        self.damaged_tail.load(Ordering::Acquire)
    }

    /// Recovery repair: drops every unit at or after `cq_offset` (the rest of its file is
    /// zero-filled, later files deleted; a `cq_offset` before the first file empties the queue)
    /// and recomputes `max_physic_offset` from the units kept. Recovery only, before readers
    /// are served (it fails while a reader still holds the file it cuts).
    pub(crate) fn truncate_to_offset(&self, cq_offset: i64) -> Result<()> {
        let _g = self.lock_exclusive();
        let bytes = u64::try_from(cq_offset.max(0))
            .unwrap_or(0)
            .saturating_mul(UNIT_U64);
        if self.files.first().is_some_and(|f| bytes < f.from()) {
            while let Some(f) = self.files.pop_last() {
                if self.writable {
                    f.destroy()?;
                }
            }
            self.files.set_flushed_where(0);
            self.files.set_committed_where(0);
        } else {
            self.files.truncate_dirty(bytes)?;
        }
        let mut last_end = -1i64;
        let mut off = self.max_offset() - 1;
        let first = self
            .files
            .first()
            .map_or(i64::MAX, |f| to_i64(f.from()) / UNIT_I64);
        while off >= first {
            let pos = u64::try_from(off).unwrap_or(0) * UNIT_U64;
            let unit = self
                .files
                .find(pos)
                .and_then(|f| unit_at(&f, usize::try_from(pos - f.from()).ok()?));
            match unit {
                Some(u) if !u.is_prefill() => {
                    last_end = unit_end(&u);
                    break;
                }
                Some(_) => off -= 1,
                None => break,
            }
        }
        self.max_physic_offset.store(last_end, Ordering::Release);
        self.clamp_min_to_max();
        Ok(())
    }
}

/// Every consume queue of a store root, keyed by topic then queue id.
#[derive(Debug)]
pub(crate) struct ConsumeQueueStore {
    root: PathBuf,
    file_size: u64,
    writable: bool,
    queues: RwLock<BTreeMap<String, BTreeMap<i32, Arc<ConsumeQueue>>>>,
    /// Creations of every queue not durable yet (see the module doc).
    syncs: Arc<CreationSyncs>,
}

#[allow(dead_code)]
impl ConsumeQueueStore {
    /// Loads every queue under `<root>/consumequeue/<topic>/<queueId>/` (spec §7.3 step 2).
    /// Topic directories whose name is not UTF-8 or fails [`is_safe_topic_dir`] and queue directories whose name is
    /// not the canonical decimal of a non-negative `i32` are skipped (nothing is written);
    /// regular files at those levels are skipped. Refuses (`UnsupportedFormat`): a RocksDB
    /// consume-queue layout (`consumequeue/CURRENT`), `consumequeue` itself or any topic or queue
    /// entry being a symbolic link. Each queue's files follow the §2 load rule. Keeps: no symlink
    /// is followed, nothing is created; call [`ConsumeQueueStore::recover_all`] next.
    pub(crate) fn load(root: &Path, file_size: u64, writable: bool) -> Result<Self> {
        check_file_size(file_size)?;
        let store = Self {
            root: root.to_path_buf(),
            file_size,
            writable,
            queues: RwLock::new(BTreeMap::new()),
            syncs: Arc::default(),
        };
        let cq_root = root.join(CONSUME_QUEUE_DIR);
        let meta = match std::fs::symlink_metadata(&cq_root) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(store),
            Err(e) => return Err(Error::io("stat", &cq_root, e)),
        };
        if meta.file_type().is_symlink() {
            return Err(Error::UnsupportedFormat {
                path: cq_root,
                reason: "symbolic link".into(),
            });
        }
        if !meta.is_dir() {
            return Err(Error::UnsupportedFormat {
                path: cq_root,
                reason: "not a directory".into(),
            });
        }
        let current = cq_root.join("CURRENT");
        if std::fs::symlink_metadata(&current).is_ok() {
            return Err(Error::UnsupportedFormat {
                path: current,
                reason: "RocksDB consume queue (storeType=defaultRocksDB) is not file-compatible"
                    .into(),
            });
        }
        let mut map = BTreeMap::new();
        for entry in std::fs::read_dir(&cq_root).map_err(|e| Error::io("read_dir", &cq_root, e))? {
            let entry = entry.map_err(|e| Error::io("read_dir", &cq_root, e))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
            if meta.file_type().is_symlink() {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: "symbolic link to a topic directory".into(),
                });
            }
            if !meta.is_dir() {
                continue;
            }
            let name = entry.file_name();
            let Some(topic) = name.to_str() else {
                continue;
            };
            if !is_safe_topic_dir(topic) {
                continue;
            }
            let mut queues = BTreeMap::new();
            for qentry in std::fs::read_dir(&path).map_err(|e| Error::io("read_dir", &path, e))? {
                let qentry = qentry.map_err(|e| Error::io("read_dir", &path, e))?;
                let qpath = qentry.path();
                let qmeta =
                    std::fs::symlink_metadata(&qpath).map_err(|e| Error::io("stat", &qpath, e))?;
                if qmeta.file_type().is_symlink() {
                    return Err(Error::UnsupportedFormat {
                        path: qpath,
                        reason: "symbolic link to a queue directory".into(),
                    });
                }
                if !qmeta.is_dir() {
                    continue;
                }
                let qname = qentry.file_name();
                let Some(queue_id) = qname.to_str().and_then(parse_queue_id) else {
                    continue;
                };
                let cq = ConsumeQueue::open(root, topic, queue_id, file_size, writable)?
                    .with_syncs(&store.syncs);
                queues.insert(queue_id, Arc::new(cq));
            }
            if !queues.is_empty() {
                map.insert(topic.to_string(), queues);
            }
        }
        *store.write() = map;
        Ok(store)
    }

    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, BTreeMap<i32, Arc<ConsumeQueue>>>> {
        self.queues
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, BTreeMap<i32, Arc<ConsumeQueue>>>> {
        self.queues
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The queue `(topic, queue_id)`, opened (empty, nothing created on disk) if it is not known
    /// yet. The caller validated `topic`; this still refuses a topic that fails
    /// [`is_safe_topic_dir`] or is not a single path component, and a negative queue id, so the
    /// queue directory is always a direct child of `<root>/consumequeue/<topic>`.
    pub(crate) fn find_or_create(&self, topic: &str, queue_id: i32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, queue_id) {
            return Ok(q);
        }
        queue_dirs(&self.root, topic, queue_id)?;
        let mut map = self.write();
        let queues = map.entry(topic.to_string()).or_default();
        if let Some(q) = queues.get(&queue_id) {
            return Ok(Arc::clone(q));
        }
        let q = Arc::new(
            ConsumeQueue::open(&self.root, topic, queue_id, self.file_size, self.writable)?
                .with_syncs(&self.syncs),
        );
        // A queue opened here may have files (e.g. a directory skipped at load); recover it.
        if q.file_count() > 0 {
            q.recover()?;
        }
        queues.insert(queue_id, Arc::clone(&q));
        Ok(q)
    }

    /// The queue `(topic, queue_id)` if it is known.
    pub(crate) fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.read()
            .get(topic)
            .and_then(|q| q.get(&queue_id))
            .cloned()
    }

    /// A follower's queue `topic`/`queue_id`: the loaded one, or one the writer in another
    /// process created since (opened read-only with nothing readable, see
    /// [`ConsumeQueue::follow_reset`]). `None` if it has no directory yet, or for a topic that
    /// cannot be a directory name.
    pub(crate) fn follow_queue(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<Arc<ConsumeQueue>>> {
        if let Some(q) = self.get(topic, queue_id) {
            return Ok(Some(q));
        }
        if self.writable || queue_id < 0 || !is_safe_topic_dir(topic) {
            return Ok(None);
        }
        let (_, dir) = queue_dirs(&self.root, topic, queue_id)?;
        if !dir.is_dir() {
            return Ok(None);
        }
        // The writer's file size (a reader that opened before any queue existed knows none).
        let size = std::fs::read_dir(&dir)
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
            .find(|m| m.is_file() && m.len() > 0)
            .map_or(self.file_size, |m| m.len());
        let cq = match ConsumeQueue::open(&self.root, topic, queue_id, size, false) {
            Ok(cq) => cq.with_syncs(&self.syncs),
            // A file still being created: the next refresh tries again.
            Err(Error::UnsupportedFormat { .. } | Error::Io { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        cq.follow_reset()?;
        let cq = Arc::new(cq);
        let mut map = self.write();
        let q = map
            .entry(topic.to_string())
            .or_default()
            .entry(queue_id)
            .or_insert(cq);
        Ok(Some(Arc::clone(q)))
    }

    /// As [`crate::commitlog::CommitLog::io_fault`], for every consume queue file.
    pub(crate) fn io_fault(&self) -> Option<Error> {
        if crate::mmap::io_faults() == 0 {
            return None;
        }
        self.all().iter().find_map(|cq| {
            let files = cq.files.files();
            let f = files.iter().find(|f| f.io_failed())?;
            Some(f.io_fault_error("read"))
        })
    }

    /// A snapshot of every queue, ordered by topic then queue id.
    pub(crate) fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        self.read()
            .values()
            .flat_map(|q| q.values().cloned())
            .collect()
    }

    /// [`ConsumeQueue::recover`] on every queue (spec §7.3 step 5, before commit-log recovery).
    pub(crate) fn recover_all(&self) -> Result<()> {
        for q in self.all() {
            q.recover()?;
        }
        Ok(())
    }

    /// Recovery after a crash (writable): makes the creation of every consume queue file and
    /// directory found durable (each file and its directory fsynced, as for a file the
    /// dispatcher creates). A crashed process may have created files whose names never reached
    /// the disk; the reopened store would otherwise flush units into them and checkpoint marks
    /// past them that a power cut then loses.
    ///
    /// # Errors
    /// The first failed `fsync`.
    pub(crate) fn sync_existing(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.syncs.push(Created::Dir(self.root.clone()));
        for q in self.all() {
            if let Some(topic_dir) = q.dir.parent() {
                self.syncs.push(Created::Dir(topic_dir.to_path_buf()));
            }
            self.syncs.push(Created::Dir(q.dir.clone()));
            for f in q.files.files() {
                self.syncs
                    .push(Created::File(f.path().to_path_buf(), f.size()));
            }
        }
        self.syncs.sync()
    }

    /// `maxPhyOffsetOfConsumeQueue`: the largest `phy + size` over every queue's last unit, -1 if
    /// there is none (spec §7.5).
    pub(crate) fn max_physic_offset(&self) -> i64 {
        self.all()
            .iter()
            .map(|q| q.max_physic_offset())
            .max()
            .unwrap_or(-1)
            .max(-1)
    }

    /// [`ConsumeQueue::truncate_dirty`] on every queue (after commit-log recovery, §7.5 step 1;
    /// before readers are served).
    pub(crate) fn truncate_all(&self, phy_offset: u64) -> Result<()> {
        for q in self.all() {
            q.truncate_dirty(phy_offset)?;
        }
        Ok(())
    }

    /// Wakes `signal` (the consume queue flush service's) whenever a queue creates a file or
    /// directory, so that [`ConsumeQueueStore::sync_creations`] runs soon, off the dispatch
    /// thread. Set once; later calls are ignored.
    pub(crate) fn wake_on_creation(&self, signal: Arc<Signal>) {
        let _ = self.syncs.wake.set(signal);
    }

    /// Whether creations wake a flush service ([`ConsumeQueueStore::wake_on_creation`]).
    pub(crate) fn wakes_on_creation(&self) -> bool {
        self.syncs.wake.get().is_some()
    }

    /// Makes every file and directory the queues created so far durable (see the module doc);
    /// every flush does this first.
    ///
    /// # Errors
    /// The first failed `fsync` (the caller fences the store).
    pub(crate) fn sync_creations(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.syncs.sync()
    }

    /// [`ConsumeQueue::flush`] on every queue; stops at the first failure (fail-stop).
    pub(crate) fn flush_all(&self, least_pages: usize) -> Result<()> {
        self.sync_creations()?;
        for q in self.all() {
            q.flush(least_pages)?;
        }
        Ok(())
    }

    /// [`ConsumeQueue::flush_below`] on every queue; stops at the first failure (fail-stop).
    pub(crate) fn flush_below(&self, phy: u64) -> Result<()> {
        self.sync_creations()?;
        for q in self.all() {
            q.flush_below(phy)?;
        }
        Ok(())
    }

    /// [`ConsumeQueue::delete_expired`] on every queue (§10.2); returns the files deleted.
    pub(crate) fn delete_expired_all(&self, commitlog_min: u64) -> Result<usize> {
        let mut n = 0;
        for q in self.all() {
            n += q.delete_expired(commitlog_min)?;
        }
        Ok(n)
    }

    /// [`ConsumeQueue::correct_min_offset`] on every queue (`recoverTopicQueueTable`).
    pub(crate) fn correct_min_offsets(&self, commitlog_min: u64) {
        for q in self.all() {
            q.correct_min_offset(commitlog_min);
        }
    }

    /// Gives back the blocks of every queue's unwritten tail (a closing store, after the last
    /// dispatch; [`MappedFileQueue::trim`]). Returns the bytes punched.
    pub(crate) fn trim(&self) -> Result<u64> {
        let mut punched = 0;
        for q in self.all() {
            punched += q.files.trim()?;
        }
        Ok(punched)
    }

    /// Destroys every queue (the commit log is empty, §7.5) and forgets them; empty topic
    /// directories are removed.
    pub(crate) fn destroy_all(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.root.clone(),
            });
        }
        let map = std::mem::take(&mut *self.write());
        for (topic, queues) in map {
            for q in queues.values() {
                q.destroy()?;
            }
            let _ = std::fs::remove_dir(self.root.join(CONSUME_QUEUE_DIR).join(topic));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
