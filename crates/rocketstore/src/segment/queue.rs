//! A directory of fixed-size files named by their 20-digit start offset (RocketMQ's
//! `MappedFileQueue`): load, lookup by offset, append a new file, flush/commit, truncate.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rocketstore_format::parse_file_name;

use crate::error::{CorruptionKind, Error, Result};
use crate::segment::mapped_file::MappedFile;

/// How a queue treats the size of existing files at load time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizePolicy {
    /// Every file must have exactly the configured size (RocketMQ's rule).
    Exact,
    /// Adopt the size of the existing files when they all agree (a foreign store's commit log).
    Infer,
}

/// An ordered, gap-free list of mapped files.
#[derive(Debug)]
pub(crate) struct MappedFileQueue {
    dir: PathBuf,
    /// [`MappedFileQueue::load`] dropped non-empty files shorter than the size at the end.
    cut_short: bool,
    file_size: u64,
    writable: bool,
    files: RwLock<Vec<Arc<MappedFile>>>,
    flushed_where: AtomicU64,
    /// Bytes whose writeback was started ahead of a flush (statistics).
    writeback_started: AtomicU64,
    committed_where: AtomicU64,
    store_timestamp: AtomicI64,
}

impl MappedFileQueue {
    /// Loads `dir` (spec §2 load rule): files sorted by name; sub-directories skipped; empty
    /// files at the end deleted (writable) or ignored, and with [`SizePolicy::Exact`] (consume
    /// queues) files shorter than the size at the end too ([`MappedFileQueue::cut_short`]);
    /// any other size mismatch, a name that is not a 20-digit offset, a gap or a misaligned
    /// name is an error.
    pub(crate) fn load(
        dir: &Path,
        file_size: u64,
        writable: bool,
        policy: SizePolicy,
    ) -> Result<Self> {
        let mut entries: Vec<(u64, PathBuf, u64)> = Vec::new();
        if dir.exists() {
            crate::util::check_not_symlink(dir)?;
            for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read_dir", dir, e))? {
                let entry = entry.map_err(|e| Error::io("read_dir", dir, e))?;
                let path = entry.path();
                let meta =
                    std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
                if meta.is_dir() {
                    continue;
                }
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let Some(offset) = parse_file_name(&name) else {
                    return Err(Error::UnsupportedFormat {
                        path,
                        reason: "file name is not a 20-digit offset".into(),
                    });
                };
                if meta.file_type().is_symlink() {
                    return Err(Error::UnsupportedFormat {
                        path,
                        reason: "symbolic link".into(),
                    });
                }
                entries.push((offset, path, meta.len()));
            }
        }
        entries.sort_by_key(|e| e.0);
        // Files created ahead of the writer whose size was not durable yet when the machine
        // stopped (a creation made durable by the file's first flush, `defer_sync`: another
        // file's directory `fsync` may have made their names durable first).
        // With the exact size known (consume queues), a file shorter than it at the end is the
        // same: a creation whose size reached the disk in part. Its units are derived data;
        // the owner re-derives them from the commit log ([`MappedFileQueue::cut_short`]).
        let mut cut_short = false;
        while let Some((_, path, len)) = entries.last() {
            let short = policy == SizePolicy::Exact && *len < file_size;
            if *len != 0 && !short {
                break;
            }
            cut_short |= *len != 0;
            if writable {
                std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))?;
            }
            entries.pop();
        }
        let mut file_size = file_size;
        if policy == SizePolicy::Infer {
            if let Some((_, _, len)) = entries.first() {
                file_size = *len;
            }
        }
        // A read-only open next to a live writer may find the file its allocator is creating
        // ahead of it (still growing to its size, nothing in it yet): not loaded (a follower
        // picks it up once it is whole, `follow_open`).
        while !writable && entries.len() > 1 && entries.last().is_some_and(|e| e.2 < file_size) {
            entries.pop();
        }
        let mut files = Vec::with_capacity(entries.len());
        let mut expect: Option<u64> = None;
        for (offset, path, len) in entries {
            if len != file_size {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: format!("file is {len} bytes, expected {file_size}"),
                });
            }
            if offset % file_size != 0 {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: format!(
                        "offset {offset} is not a multiple of the file size {file_size}"
                    ),
                });
            }
            if let Some(e) = expect {
                if offset != e {
                    return Err(Error::UnsupportedFormat {
                        path,
                        reason: format!(
                            "gap in the file sequence: expected offset {e}, found {offset}"
                        ),
                    });
                }
            }
            expect = offset.checked_add(file_size);
            let size = usize::try_from(file_size).map_err(|_| Error::UnsupportedFormat {
                path: path.clone(),
                reason: "file too large".into(),
            })?;
            files.push(Arc::new(MappedFile::open(&path, offset, size, writable)?));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            file_size,
            writable,
            cut_short,
            files: RwLock::new(files),
            flushed_where: AtomicU64::new(0),
            writeback_started: AtomicU64::new(0),
            committed_where: AtomicU64::new(0),
            store_timestamp: AtomicI64::new(0),
        })
    }

    /// Whether [`MappedFileQueue::load`] dropped files at the end that were shorter than the
    /// file size (but not empty): what they held must be re-derived.
    pub(crate) fn cut_short(&self) -> bool {
        self.cut_short
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// A closed store keeps no block it does not use: gives back the blocks of every file's
    /// unwritten tail ([`MappedFile::trim`]; the files keep their length). For a closing
    /// store, once its writer is done. Returns the bytes punched.
    pub(crate) fn trim(&self) -> Result<u64> {
        if !self.writable {
            return Ok(0);
        }
        let mut punched = 0;
        for f in self.files() {
            if f.wrote() < f.size() {
                punched += f.trim(f.wrote())?;
            }
        }
        Ok(punched)
    }

    pub(crate) fn file_size(&self) -> u64 {
        self.file_size
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<MappedFile>>> {
        self.files
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<MappedFile>>> {
        self.files
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A snapshot of the files, oldest first.
    pub(crate) fn files(&self) -> Vec<Arc<MappedFile>> {
        self.read().clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    pub(crate) fn first(&self) -> Option<Arc<MappedFile>> {
        self.read().first().cloned()
    }

    pub(crate) fn last(&self) -> Option<Arc<MappedFile>> {
        self.read().last().cloned()
    }

    /// The file containing absolute `offset`.
    pub(crate) fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.read();
        let first = files.first()?;
        if offset < first.from() {
            return None;
        }
        let idx = usize::try_from((offset - first.from()) / self.file_size).ok()?;
        let f = files.get(idx)?;
        (f.from() <= offset && offset < f.from() + self.file_size).then(|| Arc::clone(f))
    }

    /// Appends a new last file; it must start exactly where the last one ends.
    pub(crate) fn push(&self, file: Arc<MappedFile>) -> Result<()> {
        let mut files = self.write();
        if let Some(last) = files.last() {
            if file.from() != last.from() + self.file_size {
                return Err(Error::corruption(
                    file.path(),
                    file.from(),
                    crate::CorruptionKind::Invalid(format!(
                        "new file does not follow the last one (expected offset {})",
                        last.from() + self.file_size
                    )),
                ));
            }
        }
        files.push(file);
        Ok(())
    }

    /// A follower (read-only, `crate::follow`) picks up the file the writer in another process
    /// created at `from` (the end of the last file, or the first file of an empty list): it is
    /// opened read-only with nothing readable yet and appended. `None` while it does not exist
    /// or does not have its full size yet (being created).
    pub(crate) fn follow_open(&self, from: u64) -> Result<Option<Arc<MappedFile>>> {
        if self.writable {
            return Ok(None);
        }
        let path = self.dir.join(rocketstore_format::offset_to_file_name(from));
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() && m.len() == self.file_size => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("stat", &path, e)),
        }
        let size = usize::try_from(self.file_size).map_err(|_| Error::UnsupportedFormat {
            path: path.clone(),
            reason: "file too large".into(),
        })?;
        let mut f = match MappedFile::open(&path, from, size, false) {
            Ok(f) => f,
            // Deleted (or resized) between the stat and the open: not there.
            Err(Error::Io { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        f.set_positions(0)?;
        let f = Arc::new(f);
        if let Some(last) = self.last() {
            if last.from() + self.file_size != from {
                return Ok(None);
            }
        }
        self.push(Arc::clone(&f))?;
        Ok(Some(f))
    }

    /// A follower drops the files that end at or below `min` (deleted by the writer's cleanup),
    /// keeping at least the last one. Returns how many were dropped.
    pub(crate) fn follow_drop_before(&self, min: u64) -> usize {
        let mut files = self.write();
        let keep_from = files
            .iter()
            .position(|f| f.from() + self.file_size > min)
            .unwrap_or(files.len())
            .min(files.len().saturating_sub(1));
        files.drain(..keep_from).count()
    }

    /// A follower drops the leading files the writer deleted (gone from the directory; the
    /// mapping of an unlinked file stays valid until dropped), keeping at least the last one.
    pub(crate) fn follow_drop_missing(&self) -> usize {
        let mut files = self.write();
        let keep_from = files
            .iter()
            .position(|f| f.path().exists())
            .unwrap_or(files.len())
            .min(files.len().saturating_sub(1));
        files.drain(..keep_from).count()
    }

    /// A reader's first file of a queue its view holds no file of yet (it was loaded while the
    /// writer was creating that file): the lowest-named file of the directory, once it is whole.
    pub(crate) fn follow_open_first(&self) -> Result<Option<Arc<MappedFile>>> {
        if self.writable || self.len() > 0 {
            return Ok(None);
        }
        let first = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(rocketstore_format::parse_file_name)
                })
                .min(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("readdir", &self.dir, e)),
        };
        match first {
            Some(from) => self.follow_open(from),
            None => Ok(None),
        }
    }

    /// A follower's freshly loaded queue: every file's cursors to 0, so that what is readable
    /// is only what [`MappedFile::follow_to`] validates later. Exclusive (nobody else holds the
    /// files yet).
    pub(crate) fn follow_reset(&self) -> Result<()> {
        let mut files = self.write();
        for f in files.iter_mut() {
            let path = f.path().to_path_buf();
            Arc::get_mut(f)
                .ok_or_else(|| Error::invalid("follow", format!("{} is in use", path.display())))?
                .set_positions(0)?;
        }
        Ok(())
    }

    /// Removes the first file from the list (cleanup); the caller destroys it.
    pub(crate) fn pop_first(&self) -> Option<Arc<MappedFile>> {
        let mut files = self.write();
        if files.is_empty() {
            None
        } else {
            Some(files.remove(0))
        }
    }

    /// Removes the last file from the list (consume-queue truncation, which deletes whole trailing
    /// files); the caller destroys it.
    pub(crate) fn pop_last(&self) -> Option<Arc<MappedFile>> {
        self.write().pop()
    }

    /// Smallest offset still stored (the first file's start), or 0.
    pub(crate) fn min_offset(&self) -> u64 {
        self.first().map_or(0, |f| f.from())
    }

    /// One past the last byte readers may see.
    pub(crate) fn max_offset(&self) -> u64 {
        self.last()
            .map_or(0, |f| f.from() + f.read_position() as u64)
    }

    /// One past the last byte written (possibly not yet committed).
    pub(crate) fn max_wrote_offset(&self) -> u64 {
        self.last().map_or(0, |f| f.from() + f.wrote() as u64)
    }

    /// The true commit frontier: the first not fully committed file's committed position
    /// (monotonic; never ahead of what readers of that file can see).
    pub(crate) fn committed_frontier(&self) -> u64 {
        let files = self.read();
        let start = self.committed_where();
        let mut idx = files
            .first()
            .map(|f| start.saturating_sub(f.from()) / self.file_size)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(0);
        while let Some(f) = files.get(idx) {
            let c = f.committed();
            if c < f.size() || idx + 1 == files.len() {
                return f.from() + c as u64;
            }
            idx += 1;
        }
        files.last().map_or(0, |f| f.from() + f.committed() as u64)
    }

    /// Bytes whose writeback [`MappedFileQueue::start_writeback`] started since open.
    pub(crate) fn writeback_started(&self) -> u64 {
        self.writeback_started.load(Ordering::Relaxed)
    }

    pub(crate) fn flushed_where(&self) -> u64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    pub(crate) fn committed_where(&self) -> u64 {
        self.committed_where.load(Ordering::Acquire)
    }

    pub(crate) fn set_flushed_where(&self, v: u64) {
        self.flushed_where.store(v, Ordering::Release);
    }

    pub(crate) fn set_committed_where(&self, v: u64) {
        self.committed_where.store(v, Ordering::Release);
    }

    /// Store timestamp of the last record covered by a thorough flush (for the checkpoint).
    pub(crate) fn store_timestamp(&self) -> i64 {
        self.store_timestamp.load(Ordering::Acquire)
    }

    fn file_at_or_first(&self, offset: u64) -> Option<Arc<MappedFile>> {
        self.find(offset)
            .or_else(|| if offset == 0 { self.first() } else { None })
    }

    /// Flushes the file containing `flushed_where` (RocketMQ: one file per call). Returns true if
    /// something was flushed.
    pub(crate) fn flush(&self, least_pages: usize) -> Result<bool> {
        let where_ = self.flushed_where();
        let Some(file) = self.file_at_or_first(where_) else {
            return Ok(false);
        };
        let ts = file.last_store_timestamp();
        let pos = file.flush(least_pages)?;
        let new_where = file.from() + pos as u64;
        let moved = new_where != where_;
        if moved {
            self.flushed_where.fetch_max(new_where, Ordering::AcqRel);
            if least_pages == 0 && ts > 0 {
                self.store_timestamp.store(ts, Ordering::Release);
            }
        }
        Ok(moved)
    }

    /// Starts the kernel's writeback of the written but unflushed whole pages of each file
    /// from the one containing `flushed_where` ([`MappedFile::start_writeback`]): in the last file
    /// only if at least `least_bytes` are waiting, in the files before it whatever waits. No
    /// wait; `flushed_where` does not move. Returns the bytes started.
    pub(crate) fn start_writeback(&self, least_bytes: usize) -> Result<u64> {
        let flushed = self.flushed_where();
        let files: Vec<Arc<MappedFile>> = self
            .read()
            .iter()
            .filter(|f| f.from() + f.size() as u64 > flushed)
            .cloned()
            .collect();
        let last = files.len().saturating_sub(1);
        let mut started = 0;
        for (i, file) in files.iter().enumerate() {
            // A file the writer has left: whatever it has, however little.
            started += file.start_writeback(if i < last { 0 } else { least_bytes })? as u64;
        }
        self.writeback_started.fetch_add(started, Ordering::Relaxed);
        Ok(started)
    }

    /// Commits the file containing `committed_where`. Returns true if something was committed.
    pub(crate) fn commit(&self, least_pages: usize) -> Result<bool> {
        let where_ = self.committed_where();
        let Some(file) = self.file_at_or_first(where_) else {
            return Ok(false);
        };
        let pos = file.commit(least_pages)?;
        let new_where = file.from() + pos as u64;
        let moved = new_where != where_;
        if moved {
            self.committed_where.fetch_max(new_where, Ordering::AcqRel);
        }
        Ok(moved)
    }

    /// Recovery: makes absolute `[from, to)` durable ([`MappedFile::resync`]) in every file it
    /// overlaps, then the directory (the files' names). The files must be held by this queue
    /// alone, like [`Self::truncate_dirty`].
    pub(crate) fn resync(&self, from: u64, to: u64, rewrite: bool) -> Result<()> {
        let mut files = self.write();
        let mut synced = Vec::new();
        for f in files.iter_mut() {
            let (start, end) = (f.from(), f.from() + f.size() as u64);
            if end <= from || start >= to {
                continue;
            }
            let path = f.path().to_path_buf();
            let mf = Arc::get_mut(f).ok_or_else(|| {
                Error::corruption(
                    &path,
                    start,
                    CorruptionKind::Invalid("cannot sync a file in use".into()),
                )
            })?;
            let lo = usize::try_from(from.saturating_sub(start)).unwrap_or(usize::MAX);
            let hi = usize::try_from(to.min(end) - start).unwrap_or(usize::MAX);
            mf.resync(lo, hi, rewrite)?;
            synced.push((path, mf.size()));
        }
        drop(files);
        if !synced.is_empty() && self.writable {
            crate::util::fsync_dir(&self.dir)?;
            #[cfg(feature = "powerloss")]
            for (path, size) in &synced {
                crate::powerloss::created_now(path, *size);
            }
        }
        Ok(())
    }

    /// Truncates to absolute `offset`: the file containing it gets all cursors at
    /// `offset - from` and its stale tail zero-filled; later files are removed (and deleted when
    /// writable). Returns the number of files removed.
    ///
    /// Recovery only: the files it rewrites must be held by this queue alone (no reader, no
    /// append handle), else it fails instead of rewriting bytes someone may be reading.
    pub(crate) fn truncate_dirty(&self, offset: u64) -> Result<usize> {
        let mut files = self.write();
        let mut removed = Vec::new();
        files.retain(|f| {
            if f.from() > offset {
                removed.push(Arc::clone(f));
                false
            } else {
                true
            }
        });
        let result = (|| {
            let target = files
                .iter()
                .position(|f| f.from() <= offset && offset < f.from() + self.file_size)
                .or_else(|| files.len().checked_sub(1));
            for (i, f) in files.iter_mut().enumerate() {
                let (from, size) = (f.from(), f.size());
                let pos = if Some(i) == target && from <= offset && offset <= from + self.file_size
                {
                    (offset - from) as usize
                } else if from + self.file_size <= offset {
                    // Files wholly below the offset are complete.
                    if f.wrote() == size && f.read_position() == size && f.flushed() == size {
                        continue;
                    }
                    size
                } else {
                    continue;
                };
                let path = f.path().to_path_buf();
                let mf = Arc::get_mut(f).ok_or_else(|| {
                    Error::corruption(
                        &path,
                        from,
                        CorruptionKind::Invalid("cannot truncate a file in use".into()),
                    )
                })?;
                mf.set_positions(pos)?;
                if self.writable && pos < size {
                    mf.zero_dirty_tail(pos)?;
                }
            }
            Ok::<(), Error>(())
        })();
        drop(files);
        for f in &removed {
            if self.writable {
                f.destroy()?;
            }
        }
        result?;
        self.set_flushed_where(offset);
        self.set_committed_where(offset);
        Ok(removed.len())
    }
}
