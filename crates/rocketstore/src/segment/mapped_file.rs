//! One fixed-size file of a mapped file queue, with its wrote / committed / flushed cursors.
//!
//! Cursor protocol (positions are byte offsets within the file):
//! - `wrote`: bytes appended (into the mapping, or into the transient buffer when one is
//!   attached). Published with `Release` by the single writer after the bytes are in place.
//! - `committed`: bytes written from the transient buffer into the file (`pwrite`). Without a
//!   buffer it is not used and the read position is `wrote`.
//! - `flushed`: bytes known durable (msync returned OK). Advanced only after a successful flush,
//!   never past bytes a failed flush covered.
//!
//! Invariant: `flushed <= committed-or-wrote <= wrote <= size`. Readers see `[0, read_position)`.
//!
//! How the types keep the mmap rules (module `mmap`): the file's mapping is an
//! [`AppendRegion`] whose watermark *is* the read position, so [`MappedFile::slice`] cannot hand
//! out a byte the writer may still write. Appends go through the one [`FileWriter`] of a file
//! (claimed with [`MappedFile::writer`]; it writes the transient buffer when one is attached,
//! else the mapping), the commit service claims the mapping's write handle for each `pwrite`, and
//! what rewrites published bytes (`set_positions`, `zero_dirty_tail`, `warm`) takes
//! `&mut MappedFile`, which the file queue gets with `Arc::get_mut` only while nobody else holds
//! the file.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
#[cfg_attr(not(feature = "failpoints"), allow(unused_imports))]
use crate::failpoints as fp;
use crate::mmap::{AppendRegion, AppendWriter, MmapRegion};
use crate::segment::pool::TransientStorePool;
use crate::util::lock;

/// OS page size used by the flush/commit "least pages" rules.
pub(crate) const OS_PAGE_SIZE: usize = 4096;

/// How new files are made.
#[derive(Debug, Clone)]
pub(crate) struct CreateOptions {
    /// `fsync` the new file and its directory before it is used.
    pub(crate) sync: bool,
    /// With `sync`: no `fsync` at creation; the file's first flush makes its creation durable
    /// (file, then directory) before it `msync`s a byte of it ([`MappedFile::flush`]). For the
    /// commit log under ASYNC_FLUSH, where a put never waits for durability: its files are
    /// created ahead of the writer while the device is busy with the flush's writeback, and a
    /// creation `fsync` queued behind that writeback held the allocate service (and the writer
    /// waiting for its next file) for tens of milliseconds per file (BENCHMARKS.md, eleventh
    /// pass).
    pub(crate) defer_sync: bool,
    /// Pre-fault every page for writing.
    pub(crate) populate: bool,
    /// RocketMQ warm-up: touch every page then mlock; `Some(n)` forces every n pages (SYNC_FLUSH).
    pub(crate) warm: Option<Option<usize>>,
    /// Bytes to allocate with `fallocate` at creation; `None` allocates the whole file. Files
    /// created with less (index files, mostly empty for a long time) are then allocated in
    /// [`ALLOC_STEP`]s ahead of the writer ([`MappedFile::ensure_allocated`]).
    pub(crate) prealloc: Option<u64>,
}

/// `fsync` of a new file and of its directory (`CREATE_FSYNC` failpoint).
fn sync_new_file(file: &File, path: &Path) -> Result<()> {
    fail::fail_point!(fp::CREATE_FSYNC, |arg| Err(fp::injected(
        "fsync", path, arg
    )));
    file.sync_all().map_err(|e| Error::io("fsync", path, e))?;
    if let Some(dir) = path.parent() {
        crate::util::fsync_dir(dir)?;
    }
    Ok(())
}

/// [`sync_new_file`] of a file (`size` bytes) created earlier without it: from here on its
/// creation is durable (reported to the power-loss simulation).
fn sync_creation(file: &File, path: &Path, size: usize) -> Result<()> {
    sync_new_file(file, path)?;
    #[cfg(feature = "powerloss")]
    crate::powerloss::created_now(path, size);
    #[cfg(not(feature = "powerloss"))]
    let _ = size;
    Ok(())
}

/// The byte ranges of `[from, to)` that the file system reports as data (`lseek` with
/// `SEEK_DATA` and `SEEK_HOLE`); everything else reads as zeros. Where the file system cannot
/// tell (the call fails with anything but "no data after this offset"), the whole range.
fn data_ranges(file: &File, from: usize, to: usize) -> Vec<(usize, usize)> {
    use rustix::fs::{seek, SeekFrom};
    let whole = vec![(from, to)];
    let mut ranges = Vec::new();
    let mut at = from;
    while at < to {
        let start = match seek(file, SeekFrom::Data(at as u64)) {
            Ok(start) => start,
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return whole,
        };
        let Ok(start) = usize::try_from(start) else {
            return whole;
        };
        if start >= to {
            break;
        }
        let end = match seek(file, SeekFrom::Hole(start as u64)) {
            Ok(end) => usize::try_from(end).map_or(to, |e| e.min(to)),
            Err(_) => return whole,
        };
        if end <= start {
            return whole;
        }
        ranges.push((start, end));
        at = end;
    }
    ranges
}

/// Granularity of incremental preallocation.
const ALLOC_STEP: u64 = 1 << 20;

/// A transient write buffer borrowed from the pool.
#[derive(Debug)]
struct Borrowed {
    region: Arc<AppendRegion>,
    pool: Arc<TransientStorePool>,
}

/// A fixed-size, memory-mapped file.
#[derive(Debug)]
pub(crate) struct MappedFile {
    path: PathBuf,
    /// The descriptor: metadata (mtime) queries, and `pwrite` of a transient buffer's commit.
    file: File,
    from: u64,
    size: usize,
    /// The mapping; its watermark is the read position (`committed` with a transient buffer,
    /// else `wrote`).
    map: Arc<AppendRegion>,
    writable: bool,
    buffer: Mutex<Option<Borrowed>>,
    has_buffer: AtomicBool,
    wrote: AtomicUsize,
    committed: AtomicUsize,
    flushed: AtomicUsize,
    /// Bytes whose writeback was started ([`MappedFile::start_writeback`]); not durable.
    writeback: AtomicUsize,
    /// Serializes commits (the commit service and a flush-until-durable caller).
    commit_lock: Mutex<()>,
    last_store_timestamp: AtomicI64,
    locked: AtomicBool,
    removed: AtomicBool,
    /// Bytes `[0, allocated)` known to have real blocks, or to be data the writer wrote: an
    /// append through the mapping at or above it first makes its space real
    /// ([`MappedFile::ensure_allocated`]). 0 for an opened file (its tail may be a hole: a
    /// closed store keeps no block it does not use, [`MappedFile::trim`]).
    allocated: AtomicU64,
    /// Bytes [`MappedFile::ensure_allocated`] makes real at a time: 0 for the rest of the file
    /// at once (one `fallocate`), else a step (index entries: [`ALLOC_STEP`]).
    alloc_step: AtomicU64,
    /// `fallocate` is not supported here (ext2, NFSv3, some FUSE): space is made real by
    /// writing the range with `pwrite` instead ([`make_real`]).
    no_fallocate: AtomicBool,
    /// Created with [`CreateOptions::defer_sync`] and not yet made durable.
    creation_pending: AtomicBool,
    /// Serializes making the creation durable.
    creation_sync: Mutex<()>,
}

impl MappedFile {
    /// Creates `path` (which must not exist) at full size with `fallocate`, and maps it.
    pub(crate) fn create(
        path: &Path,
        from: u64,
        size: usize,
        opts: &CreateOptions,
    ) -> Result<Self> {
        fail::fail_point!(fp::CREATE_OPEN, |arg| Err(fp::injected("open", path, arg)));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let made = (|| -> Result<Self> {
            let (allocated, step, no_fallocate) = match opts.prealloc {
                Some(n) if n < size as u64 => {
                    fail::fail_point!(fp::CREATE_FALLOCATE, |arg| Err(fp::injected(
                        "fallocate",
                        path,
                        arg
                    )));
                    file.set_len(size as u64)
                        .map_err(|e| Error::io("set_len", path, e))?;
                    let no_fallocate = AtomicBool::new(false);
                    make_real(&file, path, &no_fallocate, 0, n)?;
                    (n, ALLOC_STEP, no_fallocate.into_inner())
                }
                _ => {
                    let whole = preallocate(&file, path, size as u64)?;
                    if whole || opts.warm.is_some() {
                        if !whole {
                            // Warm-up touches every page: make them all real first.
                            make_real(&file, path, &AtomicBool::new(true), 0, size as u64)?;
                        }
                        (size as u64, 0, !whole)
                    } else {
                        // No `fallocate` here: written ahead of the writer, step by step.
                        (0, 0, true)
                    }
                }
            };
            let defer = opts.sync && opts.defer_sync;
            if opts.sync && !defer {
                sync_new_file(&file, path)?;
                #[cfg(feature = "powerloss")]
                crate::powerloss::created(path, size);
            }
            #[cfg(feature = "powerloss")]
            if defer {
                crate::powerloss::unsynced(path);
            }
            let mut mf = Self::map(
                path,
                file.try_clone().map_err(|e| Error::io("dup", path, e))?,
                from,
                size,
                true,
            )?;
            mf.allocated.store(allocated, Ordering::Release);
            mf.alloc_step.store(step, Ordering::Release);
            mf.no_fallocate.store(no_fallocate, Ordering::Release);
            mf.creation_pending.store(defer, Ordering::Release);
            mf.set_positions(0)?;
            if let Some(warm) = opts.warm {
                mf.warm(warm)?;
            }
            Ok(mf)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(path);
        }
        made
    }

    /// Opens an existing file of exactly `size` bytes. Its cursors start at `size` (RocketMQ's
    /// load rule); recovery lowers them.
    pub(crate) fn open(path: &Path, from: u64, size: usize, writable: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        Self::map(path, file, from, size, writable)
    }

    fn map(path: &Path, file: File, from: u64, size: usize, writable: bool) -> Result<Self> {
        fail::fail_point!(fp::MAP, |arg| Err(fp::injected("mmap", path, arg)));
        let region =
            MmapRegion::map_file(&file, size, writable).map_err(|e| Error::io("mmap", path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            from,
            size,
            map: Arc::new(AppendRegion::new(region, 0, size)),
            writable,
            buffer: Mutex::new(None),
            has_buffer: AtomicBool::new(false),
            wrote: AtomicUsize::new(size),
            committed: AtomicUsize::new(size),
            flushed: AtomicUsize::new(size),
            writeback: AtomicUsize::new(size),
            commit_lock: Mutex::new(()),
            last_store_timestamp: AtomicI64::new(0),
            locked: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            allocated: AtomicU64::new(0),
            alloc_step: AtomicU64::new(0),
            no_fallocate: AtomicBool::new(false),
            creation_pending: AtomicBool::new(false),
            creation_sync: Mutex::new(()),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A page of this file's mapping could not be read in (EIO, or the file shrunk behind
    /// it): the mapping holds a zero page there instead of the file's bytes
    /// ([`crate::mmap::MmapRegion::io_failed`]). Sticky until the file is mapped again.
    pub(crate) fn io_failed(&self) -> bool {
        self.map.io_failed()
    }

    /// The typed error for [`MappedFile::io_failed`]: `op` failed with EIO on this file
    /// ([`Error::Io`], `raw_os_error() == Some(EIO)`).
    pub(crate) fn io_fault_error(&self, op: &'static str) -> Error {
        Error::io(op, &self.path, std::io::Error::from_raw_os_error(libc::EIO))
    }

    /// Tells the kernel that this file's pages are touched in no useful order
    /// ([`crate::mmap::MmapRegion::advise_random`]): for files written piece by piece through
    /// the mapping (consume queues, index files), whose first write to a page would otherwise
    /// fault in the whole read-ahead window around it. A hint: failure is ignored.
    pub(crate) fn advise_random(&self) {
        let _ = self.map.mapping().advise_random();
    }

    /// Back to the default advice (read-around on a fault), for a file written with
    /// [`MappedFile::advise_random`] that is now complete and read in order. A hint.
    pub(crate) fn advise_normal(&self) {
        let _ = self.map.mapping().advise_normal();
    }

    /// Reads `[pos, pos + len)` of the file in and maps it
    /// ([`crate::mmap::MmapRegion::prefetch_range`]), for an in-order read of a file mapped
    /// with [`MappedFile::advise_random`]. A hint: failure is ignored.
    pub(crate) fn prefetch(&self, pos: usize, len: usize) {
        let _ = self.map.mapping().prefetch_range(pos, len);
    }

    /// The mapping, for structures that rewrite words in place through atomics (index headers
    /// and hash slots) and publish their own entries (mmap invariant 4).
    pub(crate) fn region(&self) -> &Arc<AppendRegion> {
        &self.map
    }

    /// The mapping, exclusively; `Err` while a writer handle or a commit holds it.
    fn map_mut(&mut self) -> Result<&mut AppendRegion> {
        Arc::get_mut(&mut self.map).ok_or_else(|| busy(&self.path))
    }

    /// Declares `[0, words)` the atomic prefix and `[words, published)` published (index
    /// files: header and hash slots, then entries below `indexCount`).
    pub(crate) fn set_layout(&mut self, words: usize, published: usize) -> Result<()> {
        self.map_mut()?.set_layout(words, published);
        Ok(())
    }

    /// Absolute offset of the file's first byte (its name).
    pub(crate) fn from(&self) -> u64 {
        self.from
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn is_writable(&self) -> bool {
        self.writable
    }

    pub(crate) fn wrote(&self) -> usize {
        // Acquire: pairs with the writer's Release in `FileWriter::publish`.
        self.wrote.load(Ordering::Acquire)
    }

    pub(crate) fn committed(&self) -> usize {
        if self.has_buffer.load(Ordering::Acquire) {
            self.committed.load(Ordering::Acquire)
        } else {
            self.wrote()
        }
    }

    pub(crate) fn flushed(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }

    /// What readers may see: `committed` with a transient buffer, else `wrote` (the mapping's
    /// watermark).
    #[inline]
    pub(crate) fn read_position(&self) -> usize {
        self.map.published()
    }

    /// The writer has reached the end of the file (its last record or the blank end-of-file
    /// record is written). With a transient write buffer, those bytes may not be readable yet:
    /// readers use [`MappedFile::is_fully_readable`].
    pub(crate) fn is_full(&self) -> bool {
        self.wrote() == self.size
    }

    /// Every byte of the file, up to its end, is readable (committed): a reader at the read
    /// position may move on to the next file. With a transient write buffer the writer can be
    /// in the next file while this one's tail still waits to be committed; a reader that moved
    /// on then would skip the records of that tail.
    pub(crate) fn is_fully_readable(&self) -> bool {
        self.read_position() == self.size
    }

    pub(crate) fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp.load(Ordering::Acquire)
    }

    pub(crate) fn set_last_store_timestamp(&self, ts: i64) {
        self.last_store_timestamp.store(ts, Ordering::Release);
    }

    /// A read-only file following a writer in another process (`crate::follow`): raises every
    /// cursor to `pos` (clamped to the file), never lowering them. The caller has checked that
    /// the other process published the bytes below `pos`. `false` for a writable file.
    pub(crate) fn follow_to(&self, pos: usize) -> bool {
        let pos = pos.min(self.size);
        if self.writable || !self.map.follow_published(pos) {
            return false;
        }
        self.wrote.fetch_max(pos, Ordering::AcqRel);
        self.committed.fetch_max(pos, Ordering::AcqRel);
        self.flushed.fetch_max(pos, Ordering::AcqRel);
        self.writeback.fetch_max(pos, Ordering::AcqRel);
        true
    }

    /// Reads bytes of the file at `pos` with `pread`, regardless of cursors: bytes another
    /// process may be writing (a follower validates what it reads before publishing it).
    pub(crate) fn read_at(&self, pos: usize, buf: &mut [u8]) -> Result<usize> {
        use std::os::unix::fs::FileExt;
        let end = self.size.saturating_sub(pos).min(buf.len());
        let buf = &mut buf[..end];
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], (pos + done) as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("pread", &self.path, e)),
            }
        }
        Ok(done)
    }

    /// Sets every cursor to `pos` (creation, recovery, truncation). Exclusive: lowering the
    /// watermark re-opens published bytes for writing, so no reader or writer may hold the file.
    pub(crate) fn set_positions(&mut self, pos: usize) -> Result<()> {
        let pos = pos.min(self.size);
        if let Some(b) = self
            .buffer
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            *self.has_buffer.get_mut() = false;
            b.pool.give_back(b.region);
        }
        self.map_mut()?.reset(pos);
        self.wrote.store(pos, Ordering::Release);
        self.committed.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
        self.writeback.store(pos, Ordering::Release);
        Ok(())
    }

    /// Attaches a transient write buffer (taken from `pool`, which must hold it alone); appends
    /// go there until the commit service copies them. Call before the file's writer is claimed.
    /// Returns false (and gives the buffer back) if the buffer is still shared.
    pub(crate) fn attach_buffer(
        &self,
        mut region: Arc<AppendRegion>,
        pool: Arc<TransientStorePool>,
    ) -> bool {
        let committed = self.wrote();
        let Some(buf) = Arc::get_mut(&mut region) else {
            pool.give_back(region);
            return false;
        };
        // The buffer's watermark is this file's `wrote`: the commit service copies below it.
        buf.reset(committed);
        self.committed.store(committed, Ordering::Release);
        *lock(&self.buffer) = Some(Borrowed { region, pool });
        self.has_buffer.store(true, Ordering::Release);
        true
    }

    fn write_target(&self) -> Option<Arc<AppendRegion>> {
        if self.has_buffer.load(Ordering::Acquire) {
            lock(&self.buffer).as_ref().map(|b| Arc::clone(&b.region))
        } else {
            None
        }
    }

    /// Claims the file's one append handle: it writes the transient buffer when one is
    /// attached, else the mapping. `Err` while another handle exists.
    pub(crate) fn writer(self: &Arc<Self>) -> Result<FileWriter> {
        let target = self.write_target().unwrap_or_else(|| Arc::clone(&self.map));
        let target = target.writer().ok_or_else(|| busy(&self.path))?;
        Ok(FileWriter {
            file: Arc::clone(self),
            target,
            stage: None,
            direct: false,
        })
    }

    /// Bytes `[pos, pos + len)` if they are below the read position.
    #[inline]
    pub(crate) fn slice(&self, pos: usize, len: usize) -> Option<&[u8]> {
        self.map.read(pos, len)
    }

    /// Bytes `[pos, read_position)`.
    #[inline]
    pub(crate) fn slice_to_end(&self, pos: usize) -> Option<&[u8]> {
        self.map.read_from(pos)
    }

    /// Bytes of the file from `pos` to its end regardless of cursors (recovery reads what a
    /// crash left above them). Holds the mapping's write handle while it lives, so `None` also
    /// while a writer or a commit holds the mapping.
    pub(crate) fn recovery_view(&self, pos: usize) -> Option<RecoveryView<'_>> {
        let writer = self.map.writer()?;
        writer.view_from(pos)?;
        Some(RecoveryView {
            writer,
            pos,
            _file: std::marker::PhantomData,
        })
    }

    /// Zero-fills every non-zero 64 KiB chunk of `[pos, size)`: recovery makes sure no stale
    /// record can ever be read after a truncation point (reliability A5). Returns bytes zeroed.
    /// Exclusive (see `set_positions`).
    ///
    /// Only the ranges the file system reports as data are read (`SEEK_DATA`/`SEEK_HOLE`): a
    /// hole, or a preallocated extent never written, reads as zeros, and reading it through
    /// the mapping would fault in (zero-fill) every page of a mostly empty file at each reopen.
    pub(crate) fn zero_dirty_tail(&mut self, pos: usize) -> Result<usize> {
        if !self.writable {
            return Ok(0);
        }
        let path = self.path.clone();
        let ranges = data_ranges(&self.file, pos, self.size);
        let map = self.map_mut()?;
        let mut zeroed = 0;
        for (from, to) in ranges {
            zeroed += map
                .zero_dirty(from.max(pos), to)
                .ok_or_else(|| Error::ReadOnly { path: path.clone() })?;
        }
        if zeroed > 0 {
            self.map
                .mapping()
                .flush_range(
                    pos - pos % OS_PAGE_SIZE,
                    self.size - (pos - pos % OS_PAGE_SIZE),
                )
                .map_err(|e| Error::io("msync", &self.path, e))?;
            #[cfg(feature = "powerloss")]
            crate::powerloss::synced(
                &self.path,
                pos - pos % OS_PAGE_SIZE,
                self.size - (pos - pos % OS_PAGE_SIZE),
            );
        }
        Ok(zeroed)
    }

    fn able_to_flush(&self, least_pages: usize) -> bool {
        let flushed = self.flushed();
        let read = self.read_position();
        if self.is_full() && read > flushed {
            return true;
        }
        if least_pages > 0 {
            read / OS_PAGE_SIZE >= flushed / OS_PAGE_SIZE + least_pages
        } else {
            read > flushed
        }
    }

    /// Recovery: makes the file's recovered bytes (below `to`) durable before a checkpoint may
    /// claim them. With `rewrite`, `[from, to)` is first written back over itself (`pwrite` of
    /// what the mapping holds), so that pages the kernel marked clean without writing them (a
    /// writeback that failed before a same-boot reopen: the fsyncgate problem) are dirty
    /// again. Then the file is fsynced (its dirty pages, mapped or not, and its size); the
    /// caller fsyncs the directory, since a crashed process may have created the file without
    /// making its name durable. An error leaves the range not durable (the open fails).
    ///
    /// `&mut self`: no reader, writer or append handle holds the file (recovery runs before any).
    pub(crate) fn resync(&mut self, from: usize, to: usize, rewrite: bool) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let to = to.min(self.read_position());
        if !self.writable {
            return Ok(());
        }
        if rewrite {
            const CHUNK: usize = 1 << 20;
            let mut at = from;
            let mut buf = Vec::new();
            while at < to {
                let n = (to - at).min(CHUNK);
                let bytes = self.slice(at, n).ok_or_else(|| Error::ReadOnly {
                    path: self.path.clone(),
                })?;
                buf.clear();
                buf.extend_from_slice(bytes);
                self.file
                    .write_all_at(&buf, at as u64)
                    .map_err(|e| Error::io("write", &self.path, e))?;
                at += n;
            }
        }
        fail::fail_point!(fp::FLUSH_MSYNC, |arg| Err(fp::injected(
            "fsync", &self.path, arg
        )));
        self.file
            .sync_all()
            .map_err(|e| Error::io("fsync", &self.path, e))
    }

    /// Flushes `[flushed, read_position)` if at least `least_pages` pages are dirty (or the file
    /// is full). Returns the new flushed position. On error `flushed` does not move.
    pub(crate) fn flush(&self, least_pages: usize) -> Result<usize> {
        if !self.writable || !self.able_to_flush(least_pages) {
            return Ok(self.flushed());
        }
        self.make_creation_durable()?;
        if self.map.io_failed() {
            // Some bytes below the read position may sit in a zero page, not in the file: no
            // durable position moves (the caller fences the store).
            return Err(self.io_fault_error("msync"));
        }
        let read = self.read_position();
        let flushed = self.flushed();
        let start = flushed - flushed % OS_PAGE_SIZE;
        fail::fail_point!(fp::FLUSH_MSYNC, |arg| Err(fp::injected(
            "msync", &self.path, arg
        )));
        #[cfg(feature = "powerloss")]
        if crate::powerloss::msync_fails(&self.path) {
            return Err(fp::injected("msync", &self.path, None));
        }
        self.map
            .mapping()
            .flush_range(start, read - start)
            .map_err(|e| Error::io("msync", &self.path, e))?;
        #[cfg(feature = "powerloss")]
        crate::powerloss::synced(&self.path, start, read - start);
        // Release: a reader of `flushed` sees a position whose bytes were made durable.
        self.flushed.fetch_max(read, Ordering::AcqRel);
        Ok(self.flushed())
    }

    /// Starts the kernel's writeback of the whole pages of `[max(flushed, writeback started),
    /// read position)` if there are at least `least_bytes` of them (at least one page), without
    /// waiting for it ([`crate::mmap::start_writeback`]). Returns the bytes it started. A
    /// later [`MappedFile::flush`] of those bytes then has less (or nothing) left to write;
    /// only that flush makes them durable, and `flushed` does not move here. A file system
    /// that does not support it is skipped; any other error is an I/O error.
    pub(crate) fn start_writeback(&self, least_bytes: usize) -> Result<usize> {
        if !self.writable {
            return Ok(0);
        }
        let read = self.read_position();
        let end = read - read % OS_PAGE_SIZE;
        let from = self.flushed().max(self.writeback.load(Ordering::Acquire));
        let start = from - from % OS_PAGE_SIZE;
        if end <= start || end - start < least_bytes.max(OS_PAGE_SIZE) {
            return Ok(0);
        }
        match crate::mmap::start_writeback(&self.file, start as u64, (end - start) as u64) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(c) if c == rustix::io::Errno::INVAL.raw_os_error()
                        || c == rustix::io::Errno::SPIPE.raw_os_error()
                        || c == rustix::io::Errno::NOSYS.raw_os_error()
                        || c == rustix::io::Errno::OPNOTSUPP.raw_os_error()
                ) =>
            {
                return Ok(0)
            }
            Err(e) => return Err(Error::io("sync_file_range", &self.path, e)),
        }
        self.writeback.fetch_max(end, Ordering::AcqRel);
        Ok(end - start)
    }

    fn able_to_commit(&self, least_pages: usize) -> bool {
        let committed = self.committed.load(Ordering::Acquire);
        let wrote = self.wrote();
        if self.is_full() && wrote > committed {
            return true;
        }
        if least_pages > 0 {
            wrote / OS_PAGE_SIZE >= committed / OS_PAGE_SIZE + least_pages
        } else {
            wrote > committed
        }
    }

    /// Writes `[committed, wrote)` of the transient buffer into the file (`pwrite`; readers
    /// see it through the mapping once committed). Returns the new
    /// committed position. When the file is full and fully committed the buffer goes back to the
    /// pool.
    pub(crate) fn commit(&self, least_pages: usize) -> Result<usize> {
        let Some(buf) = self.write_target() else {
            return Ok(self.wrote());
        };
        let guard = lock(&self.commit_lock);
        if self.able_to_commit(least_pages) {
            let committed = self.committed.load(Ordering::Acquire);
            let wrote = self.wrote();
            fail::fail_point!(fp::COMMIT_COPY, |arg| Err(fp::injected(
                "commit", &self.path, arg
            )));
            // The buffer's watermark is at least `wrote` (the appender raises it first).
            let src = buf.read(committed, wrote - committed).ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    self.from + committed as u64,
                    crate::CorruptionKind::BadLength,
                )
            })?;
            // `pwrite`, not a copy through the mapping: whole pages of a buffered file are
            // written into the page cache without being read or zero-filled first and without
            // a page fault each (RocketMQ's `FileChannel.write`). The mapping's write handle is
            // held so nothing else writes above the watermark meanwhile; readers keep reading
            // through the mapping (the page cache is shared).
            let mut w = self.map.writer().ok_or_else(|| busy(&self.path))?;
            w.write_file(&self.file, committed, src)
                .ok_or_else(|| Error::ReadOnly {
                    path: self.path.clone(),
                })?
                .map_err(|e| Error::io("pwrite", &self.path, e))?;
            // Release: readers that see the new watermark see the copied bytes.
            w.publish(wrote);
            self.committed.store(wrote, Ordering::Release);
        }
        drop(guard);
        let committed = self.committed.load(Ordering::Acquire);
        if committed == self.size {
            self.release_buffer();
        }
        Ok(committed)
    }

    fn release_buffer(&self) {
        let taken = lock(&self.buffer).take();
        if let Some(b) = taken {
            // Order: readers switch to `wrote` (== committed == size) before the buffer is reused.
            self.committed.store(self.size, Ordering::Release);
            self.has_buffer.store(false, Ordering::Release);
            b.pool.give_back(b.region);
        }
    }

    /// RocketMQ `warmMappedFile`: touch every page (forcing every `flush_every` pages), then
    /// `mlock` + `madvise(WILLNEED)`.
    /// Exclusive: it writes bytes regardless of the cursors (a new file nobody else holds).
    pub(crate) fn warm(&mut self, flush_every: Option<usize>) -> Result<()> {
        let mut last_flush_page = 0usize;
        let (path, size) = (self.path.clone(), self.size);
        self.map_mut()?
            .touch_pages(0, size, |region, pages| {
                if let Some(n) = flush_every {
                    if pages - last_flush_page >= n {
                        region.flush_range(0, (pages * OS_PAGE_SIZE).min(region.len()))?;
                        last_flush_page = pages;
                    }
                }
                Ok(())
            })
            .map_err(|e| Error::io("warm", &path, e))?;
        let region = self.map.mapping();
        if flush_every.is_some() {
            region
                .flush_range(0, self.size)
                .map_err(|e| Error::io("msync", &self.path, e))?;
            #[cfg(feature = "powerloss")]
            crate::powerloss::synced(&self.path, 0, self.size);
        }
        if region.lock().is_ok() {
            self.locked.store(true, Ordering::Release);
        }
        let _ = region.advise_willneed();
        Ok(())
    }

    /// Makes the space of `[from, upto)` real before the writer writes it through the mapping
    /// (a write fault on a hole of a full disk is a SIGBUS, or data lost at writeback): one
    /// `fallocate` of the rest of the file (or of an [`ALLOC_STEP`] ahead for files created
    /// with [`CreateOptions::prealloc`]); where `fallocate` is unsupported, the range is
    /// written with `pwrite` (its own bytes: nothing changes but the blocks) in steps ahead.
    /// `from` is where the writer writes next: everything below it is written already, so
    /// nothing below it is touched. Only the single writer calls it.
    ///
    /// # Errors
    /// `DiskFull` (ENOSPC) or the I/O error of the `fallocate` or `pwrite`; nothing was
    /// written through the mapping.
    pub(crate) fn ensure_allocated(&self, from: u64, upto: u64) -> Result<()> {
        let have = self.allocated.load(Ordering::Acquire);
        if upto <= have {
            return Ok(());
        }
        let size = self.size as u64;
        let start = have.max(from).min(size);
        let step = match self.alloc_step.load(Ordering::Acquire) {
            0 if self.no_fallocate.load(Ordering::Acquire) => WRITE_STEP,
            0 => size,
            s => s,
        };
        let end = upto
            .div_ceil(step)
            .saturating_mul(step)
            .min(size)
            .max(upto.min(size));
        if end > start {
            make_real(
                &self.file,
                &self.path,
                &self.no_fallocate,
                start,
                end - start,
            )?;
        }
        self.allocated.store(end, Ordering::Release);
        Ok(())
    }

    /// Makes `[from, to)` real whatever the cursors (an index file's header and hash slots,
    /// rewritten in place, at a writable load). Exclusive use: nobody may write the range
    /// meanwhile.
    pub(crate) fn make_range_real(&self, from: u64, to: u64) -> Result<()> {
        let to = to.min(self.size as u64);
        if to > from {
            make_real(&self.file, &self.path, &self.no_fallocate, from, to - from)?;
        }
        if from == 0 {
            self.allocated.fetch_max(to, Ordering::AcqRel);
        }
        Ok(())
    }

    /// A closed store keeps no block it does not use: gives back the blocks of
    /// `[keep rounded up to the file system block, size)` (`fallocate(PUNCH_HOLE | KEEP_SIZE)`;
    /// the file keeps its length, the range reads as zeros as before). Only for bytes that
    /// hold nothing (above the written end); the writer must be done with the file. Returns
    /// the bytes punched; 0 where the file system cannot punch holes.
    pub(crate) fn trim(&self, keep: usize) -> Result<u64> {
        if !self.writable {
            return Ok(0);
        }
        let block = self.block_size();
        let from = (keep as u64).div_ceil(block).saturating_mul(block);
        let size = self.size as u64;
        if from >= size {
            return Ok(0);
        }
        let punched = punch(&self.file, &self.path, from, size - from)?;
        if punched > 0 {
            self.allocated.fetch_min(from, Ordering::AcqRel);
        }
        Ok(punched)
    }

    /// [`MappedFile::trim`] of every file system block of `[from, to)` that holds only zeros
    /// (an index file's hash slots never used): read with `pread` where the file system reports
    /// data, punched where zero. The writer must be done with the file. Returns bytes punched.
    pub(crate) fn trim_zero_blocks(&self, from: usize, to: usize) -> Result<u64> {
        use std::os::unix::fs::FileExt;
        if !self.writable {
            return Ok(0);
        }
        let block = usize::try_from(self.block_size()).unwrap_or(OS_PAGE_SIZE);
        let from = from.div_ceil(block) * block;
        let to = to.min(self.size) / block * block;
        if to <= from {
            return Ok(0);
        }
        let mut punched = 0u64;
        let mut buf = vec![0u8; (1 << 20) / block * block];
        let mut run: Option<usize> = None;
        let mut flush_run = |run: &mut Option<usize>, end: usize| -> Result<()> {
            if let Some(start) = run.take() {
                punched += punch(&self.file, &self.path, start as u64, (end - start) as u64)?;
            }
            Ok(())
        };
        // What the file system reports as a hole reads as zeros (it may still hold blocks: an
        // extent allocated and never written), so it joins the zero run; data is read.
        let mut cursor = from;
        for (a, b) in data_ranges(&self.file, from, to) {
            let a = (a / block * block).max(cursor);
            let b = b.div_ceil(block).saturating_mul(block).min(to);
            if a > cursor {
                run.get_or_insert(cursor);
            }
            let mut at = a;
            cursor = b.max(cursor);
            while at < b {
                let len = buf.len().min(b - at);
                self.file
                    .read_exact_at(&mut buf[..len], at as u64)
                    .map_err(|e| Error::io("pread", &self.path, e))?;
                for (i, chunk) in buf[..len].chunks(block).enumerate() {
                    let pos = at + i * block;
                    if is_zero(chunk) {
                        run.get_or_insert(pos);
                    } else {
                        flush_run(&mut run, pos)?;
                    }
                }
                at += len;
            }
        }
        if to > cursor {
            run.get_or_insert(cursor);
        }
        flush_run(&mut run, to)?;
        if punched > 0 {
            self.allocated.fetch_min(from as u64, Ordering::AcqRel);
        }
        Ok(punched)
    }

    /// The file system's block size (`st_blksize`, at least 512), the unit of a punched hole.
    fn block_size(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.file
            .metadata()
            .map_or(OS_PAGE_SIZE as u64, |m| m.blksize())
            .max(512)
    }

    /// Pre-faults the pages of `[offset, offset + len)` (clamped to the file) for writing
    /// (`MADV_POPULATE_WRITE`). Runs in the allocate service, possibly after the file was
    /// handed out: faulting pages in never changes their bytes, so it may run while the writer
    /// appends. Best effort: a failure only costs page faults later.
    pub(crate) fn populate_range(&self, offset: usize, len: usize, stop: &dyn Fn() -> bool) {
        // Only space known to be real: a write fault on a hole of a full disk is a SIGBUS.
        let real = usize::try_from(self.allocated.load(Ordering::Acquire)).unwrap_or(self.size);
        let end = offset.saturating_add(len).min(real);
        let offset = offset.min(end);
        let _ = self
            .map
            .mapping()
            .populate_write_range(offset, end - offset, stop);
    }

    /// Undoes `warm`'s `mlock` (when the file is full).
    pub(crate) fn munlock(&self) {
        if self.locked.swap(false, Ordering::AcqRel) {
            let _ = self.map.mapping().unlock();
        }
    }

    /// Makes a creation deferred by [`CreateOptions::defer_sync`] durable (`fsync` of the file,
    /// then of its directory), once; a no-op for any other file. Until it succeeds nothing of
    /// the file is flushed, so no flushed position ever covers bytes of a file whose directory
    /// entry or size could still be lost.
    ///
    /// # Errors
    /// The failed `fsync`, with the path; the creation stays pending.
    pub(crate) fn make_creation_durable(&self) -> Result<()> {
        if !self.creation_pending.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one = lock(&self.creation_sync);
        if !self.creation_pending.load(Ordering::Acquire) || self.removed.load(Ordering::Acquire) {
            return Ok(());
        }
        sync_creation(&self.file, &self.path, self.size)?;
        self.creation_pending.store(false, Ordering::Release);
        Ok(())
    }

    /// Makes the creation of the file at `path` (`size` bytes, created without
    /// [`CreateOptions::sync`]) durable: `fsync` of the file and of its directory (the directory
    /// entry). A file that no longer exists (destroyed since) needs nothing: `Ok`. Takes a path,
    /// not the `MappedFile`, so that a pending `fsync` never keeps a file shared (truncation and
    /// recovery need it exclusively).
    ///
    /// # Errors
    /// The failed `open` or `fsync`, with the path.
    pub(crate) fn sync_created(path: &Path, size: usize) -> Result<()> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        sync_creation(&file, path, size)
    }

    /// Unlinks the file. The mapping stays valid until the last `Arc` is dropped (mmap
    /// invariant 5), so readers holding it keep working.
    pub(crate) fn destroy(&self) -> Result<()> {
        if self.removed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.munlock();
        self.release_buffer();
        fail::fail_point!(fp::UNLINK, |arg| Err(fp::injected(
            "unlink", &self.path, arg
        )));
        #[cfg(feature = "powerloss")]
        crate::powerloss::removed(&self.path);
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                #[cfg(feature = "powerloss")]
                crate::powerloss::unlinked(&self.path);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("unlink", &self.path, e)),
        }
    }

    #[allow(dead_code, reason = "used by expired-file cleanup")]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// The file's last modification time (drives time-based deletion).
    #[allow(dead_code, reason = "used by expired-file cleanup")]
    pub(crate) fn modified(&self) -> Option<std::time::SystemTime> {
        self.file.metadata().ok()?.modified().ok()
    }
}

/// The error of a claim that finds the file held by someone else: a bug of the caller, reported
/// instead of racing.
fn busy(path: &Path) -> Error {
    Error::corruption(
        path,
        0,
        crate::CorruptionKind::Invalid("mapped file is held by another writer or reader".into()),
    )
}

/// The one append handle of a [`MappedFile`] (see [`MappedFile::writer`]): writes at or above
/// `wrote`, then publishes. The writer keeps it for as long as it appends to the file.
#[derive(Debug)]
pub(crate) struct FileWriter {
    file: Arc<MappedFile>,
    /// The transient buffer's handle when one was attached at claim time, else the mapping's.
    target: AppendWriter,
    /// With [`FileWriter::stage_writes`]: appends are encoded here and written into the file
    /// with `pwrite` (at the latest before they are published), not stored into the mapping.
    stage: Option<Stage>,
    /// With a stage: the next appends are stored into the mapping instead (see
    /// [`FileWriter::stage_next`]).
    direct: bool,
}

/// Bytes `[from, from + used)` of the file, encoded in `buf[..used]` but not yet written into
/// it. `buf` keeps its length (zero-filled once, then reused) so staging a record costs no
/// `memset`: the record encoder writes every byte of the range it is given.
#[derive(Debug, Default)]
struct Stage {
    from: usize,
    used: usize,
    buf: Vec<u8>,
    /// A `pwrite` failed: nothing staged is written or published any more.
    broken: bool,
}

impl Stage {
    fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// `len` more bytes at the end of the staged range, growing `buf` if it is too short (a
    /// record larger than [`STAGE_BYTES`]).
    fn take(&mut self, len: usize) -> &mut [u8] {
        let start = self.used;
        let end = start + len;
        if self.buf.len() < end {
            self.buf.resize(end.max(STAGE_BYTES), 0);
        }
        self.used = end;
        &mut self.buf[start..end]
    }
}

/// Staged bytes are written out once they reach this size (and before every publish): small
/// enough to stay in the L2 cache between the encoder and `pwrite`'s copy, large enough that
/// the system call is a few ns per record.
const STAGE_BYTES: usize = 256 * 1024;

impl FileWriter {
    /// The file written.
    pub(crate) fn file(&self) -> &Arc<MappedFile> {
        &self.file
    }

    /// Encodes `len` bytes at `pos` (at or above `wrote`) with `f`, without publishing them.
    /// `f` must write all `len` bytes: staged, it is handed a reused buffer that still holds
    /// earlier records' bytes.
    #[inline]
    pub(crate) fn write_with<R>(
        &mut self,
        pos: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        let file = &self.file;
        if pos < self.target.published() || pos.checked_add(len).is_none_or(|end| end > file.size) {
            return Err(Error::corruption(
                &file.path,
                file.from + pos as u64,
                crate::CorruptionKind::Invalid(format!(
                    "append of {len} bytes at {pos} outside the writable range"
                )),
            ));
        }
        if Arc::ptr_eq(self.target.region(), &file.map) {
            // Space real before a page is written through the mapping, and before a byte is
            // staged (a staged `pwrite` that fails on a full disk fences the store; this fails
            // the put alone, with nothing written). One atomic load when it is.
            file.ensure_allocated(pos as u64, (pos + len) as u64)?;
        }
        if self.stage.is_some() && self.direct {
            // Whatever is staged goes first, so the file is written in order.
            self.write_out()?;
        } else if let Some(stage) = self.stage.as_ref() {
            let end = stage.from + stage.used;
            if !stage.is_empty() && (pos != end || stage.used + len > STAGE_BYTES) {
                self.write_out()?;
            }
            if let Some(stage) = self.stage.as_mut() {
                if stage.is_empty() {
                    stage.from = pos;
                }
                return Ok(f(stage.take(len)));
            }
        }
        let r = self
            .target
            .write_with(pos, len, f)
            .ok_or_else(|| Error::ReadOnly {
                path: self.file.path.clone(),
            })?;
        if self.target.region().io_failed() {
            // A page written could not be read in first: the bytes went to a zero page, not
            // to the file. Never published.
            return Err(self.file.io_fault_error("write"));
        }
        Ok(r)
    }

    /// From now on appends to this file are encoded into a small staging buffer that
    /// [`FileWriter::write_out`] writes into the file with `pwrite` (no page fault, read-ahead
    /// or zero-fill of the file's pages; the bytes are the same). Only for a file written
    /// through its mapping (no transient buffer); a no-op otherwise.
    pub(crate) fn stage_writes(&mut self) {
        if self.stage.is_none() && Arc::ptr_eq(self.target.region(), &self.file.map) {
            self.stage = Some(Stage::default());
        }
    }

    /// With [`FileWriter::stage_writes`]: whether the next appends are staged (`true`, the
    /// default) or stored into the mapping (`false`: for a few hundred bytes one `pwrite`
    /// system call costs more than the page faults it spares). Either way the file holds the
    /// same bytes; anything staged is written out before the first direct append.
    pub(crate) fn stage_next(&mut self, staged: bool) {
        self.direct = !staged;
    }

    /// Writes the staged bytes into the file (`pwrite`). A failure is final for this handle:
    /// what was staged is never published, and later calls fail too (the caller poisons the
    /// store).
    pub(crate) fn write_out(&mut self) -> Result<()> {
        let Some(stage) = self.stage.as_mut() else {
            return Ok(());
        };
        let path = &self.file.path;
        if stage.broken {
            return Err(Error::io(
                "pwrite",
                path,
                std::io::Error::other("an earlier write of staged records failed"),
            ));
        }
        if stage.is_empty() {
            return Ok(());
        }
        match write_staged(&mut self.target, &self.file, stage) {
            Ok(()) => {
                stage.used = 0;
                Ok(())
            }
            Err(e) => {
                stage.broken = true;
                Err(e)
            }
        }
    }

    /// Writes the 8-byte END_OF_FILE blank record at `pos` and fills the file (`wrote = size`).
    /// In a transient buffer the bytes after the header are zeroed, so no stale buffer content is
    /// ever committed to the file.
    pub(crate) fn write_blank(&mut self, pos: usize) -> Result<()> {
        let size = self.file.size;
        let remaining = size.saturating_sub(pos);
        if remaining < rocketstore_format::END_FILE_MIN_BLANK_LENGTH {
            return Err(Error::corruption(
                &self.file.path,
                self.file.from + pos as u64,
                crate::CorruptionKind::BadLength,
            ));
        }
        let mut blank = [0u8; 8];
        rocketstore_format::encode_blank(&mut blank, remaining as i32);
        if self.stage.is_some() {
            // Only the header is written: the rest of the file is left as it is, as the
            // mapping's blank leaves it.
            self.write_with(pos, blank.len(), |dst| dst.copy_from_slice(&blank))?;
            self.write_out()?;
            self.publish(size);
            return Ok(());
        }
        let buffered = !Arc::ptr_eq(self.target.region(), &self.file.map);
        self.write_with(pos, remaining, |dst| {
            dst[..8].copy_from_slice(&blank);
            if buffered {
                dst[8..].fill(0);
            }
        })?;
        self.publish(size);
        Ok(())
    }

    /// Publishes `pos` as the new `wrote` (Release: the bytes below are in place). Never
    /// lowers it.
    #[inline]
    pub(crate) fn publish(&mut self, pos: usize) {
        // Staged bytes are not in the file yet: never published (see `write_out`).
        let pos = match &self.stage {
            Some(stage) if !stage.is_empty() || stage.broken => pos.min(stage.from),
            _ => pos,
        };
        // The target's watermark first: a reader that sees `wrote` can read below it.
        self.target.publish(pos);
        self.file
            .wrote
            .store(self.target.published(), Ordering::Release);
    }
}

/// `pwrite`s `stage` into `file` through its mapping's write handle `target`.
fn write_staged(target: &mut AppendWriter, file: &MappedFile, stage: &Stage) -> Result<()> {
    fail::fail_point!(fp::STAGE_WRITE, |arg| Err(fp::injected(
        "pwrite", &file.path, arg
    )));
    target
        .write_file(&file.file, stage.from, &stage.buf[..stage.used])
        .ok_or_else(|| Error::ReadOnly {
            path: file.path.clone(),
        })?
        .map_err(|e| Error::io("pwrite", &file.path, e))
}

/// Bytes of a file regardless of its cursors (see [`MappedFile::recovery_view`]).
#[derive(Debug)]
pub(crate) struct RecoveryView<'a> {
    writer: AppendWriter,
    pos: usize,
    _file: std::marker::PhantomData<&'a MappedFile>,
}

impl std::ops::Deref for RecoveryView<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.writer.view_from(self.pos).unwrap_or(&[])
    }
}

/// Whether every byte of `b` is zero (compared with a zero block: `memcmp`, fast whatever the
/// build profile).
fn is_zero(b: &[u8]) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    b.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}

/// Bytes made real per `pwrite` step where `fallocate` is unsupported.
const WRITE_STEP: u64 = 4 << 20;

/// Makes `[offset, offset + len)` of `file` real without changing its size or its bytes:
/// `fallocate(KEEP_SIZE)`, or where that is unsupported (`EOPNOTSUPP`, remembered in
/// `no_fallocate`) reads the range and writes it back with `pwrite` (a hole reads as zeros; a
/// buffered write allocates its blocks, or fails with ENOSPC). Nobody may write the range
/// meanwhile.
fn make_real(
    file: &File,
    path: &Path,
    no_fallocate: &AtomicBool,
    offset: u64,
    len: u64,
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    if len == 0 {
        return Ok(());
    }
    if !no_fallocate.load(Ordering::Acquire) {
        match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, offset, len) {
            Ok(()) => return Ok(()),
            Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
                no_fallocate.store(true, Ordering::Release);
            }
            Err(e) => return Err(Error::io("fallocate", path, e.into())),
        }
    }
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; usize::try_from(CHUNK.min(len)).unwrap_or(1 << 20)];
    let mut at = offset;
    let end = offset.saturating_add(len);
    while at < end {
        let n = usize::try_from(CHUNK.min(end - at)).unwrap_or(buf.len());
        let chunk = &mut buf[..n];
        file.read_exact_at(chunk, at)
            .map_err(|e| Error::io("pread", path, e))?;
        file.write_all_at(chunk, at)
            .map_err(|e| Error::io("pwrite", path, e))?;
        at += n as u64;
    }
    Ok(())
}

/// Gives back the blocks of `[offset, offset + len)` (`fallocate(PUNCH_HOLE | KEEP_SIZE)`):
/// the bytes read as zeros, the length stays. Returns `len`, or 0 where the file system cannot
/// punch holes.
fn punch(file: &File, path: &Path, offset: u64, len: u64) -> Result<u64> {
    if len == 0 {
        return Ok(0);
    }
    let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
    match rustix::fs::fallocate(file, flags, offset, len) {
        Ok(()) => Ok(len),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => Ok(0),
        Err(e) => Err(Error::io("fallocate", path, e.into())),
    }
}

/// Allocates `size` bytes of real blocks for `file`, so a write through the mapping can never
/// fault on a full disk. Returns false where the file system lacks `fallocate`: the file is
/// then only sized (`set_len`, a hole), and its space is made real ahead of the writer
/// ([`MappedFile::ensure_allocated`]).
fn preallocate(file: &File, path: &Path, size: u64) -> Result<bool> {
    fail::fail_point!(fp::CREATE_FALLOCATE, |arg| Err(fp::injected(
        "fallocate",
        path,
        arg
    )));
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
            file.set_len(size)
                .map_err(|e| Error::io("set_len", path, e))?;
            Ok(false)
        }
        Err(e) => Err(Error::io("fallocate", path, e.into())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn opts() -> CreateOptions {
        CreateOptions {
            sync: false,
            defer_sync: false,
            populate: false,
            warm: None,
            prealloc: None,
        }
    }

    #[test]
    fn start_writeback_covers_whole_written_pages_once_and_flushes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = Arc::new(MappedFile::create(&dir.path().join("0"), 0, 65536, &opts()).unwrap());
        let mut w = f.writer().unwrap();
        assert_eq!(f.start_writeback(0).unwrap(), 0, "nothing written");
        w.write_with(0, 10_000, |b| b.fill(1)).unwrap();
        w.publish(10_000);
        assert_eq!(
            f.start_writeback(3 * 4096).unwrap(),
            0,
            "two whole pages < least"
        );
        assert_eq!(f.start_writeback(0).unwrap(), 8192, "the two whole pages");
        assert_eq!(f.start_writeback(0).unwrap(), 0, "not started twice");
        assert_eq!(f.flushed(), 0, "not a flush");
        w.write_with(10_000, 10_000, |b| b.fill(2)).unwrap();
        w.publish(20_000);
        assert_eq!(
            f.start_writeback(0).unwrap(),
            8192,
            "pages 2 and 3, from the last end"
        );
        assert_eq!(f.flush(0).unwrap(), 20_000);
        w.write_with(20_000, 20_000, |b| b.fill(3)).unwrap();
        w.publish(40_000);
        // From the flushed position's page (16384), to the last whole page (36864).
        assert_eq!(f.start_writeback(0).unwrap(), 36_864 - 16_384);
        let read = MappedFile::open(&dir.path().join("0"), 0, 65536, false).unwrap();
        assert_eq!(read.slice(39_999, 1).unwrap(), [3]);
    }

    #[test]
    fn one_append_handle_and_reads_only_below_the_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let f = Arc::new(MappedFile::create(&dir.path().join("0"), 0, 8192, &opts()).unwrap());
        let mut w = f.writer().unwrap();
        assert!(f.writer().is_err(), "a second append handle is refused");
        assert!(
            f.recovery_view(0).is_none(),
            "no raw view while a writer runs"
        );
        w.write_with(0, 4, |b| b.copy_from_slice(b"abcd")).unwrap();
        assert!(f.slice(0, 4).is_none(), "not published yet");
        w.publish(4);
        assert_eq!(f.slice(0, 4).unwrap(), b"abcd");
        assert_eq!((f.wrote(), f.read_position()), (4, 4));
        assert!(
            w.write_with(2, 4, |_| ()).is_err(),
            "published bytes are not rewritten"
        );
        assert!(w.write_with(8190, 4, |_| ()).is_err(), "past the end");
        w.write_blank(4).unwrap();
        assert!(f.is_full() && f.is_fully_readable());
        drop(w);
        assert_eq!(&f.recovery_view(0).unwrap()[..4], b"abcd");

        // Lowering the watermark needs the file alone.
        let mut held = Arc::clone(&f);
        assert!(Arc::get_mut(&mut held).is_none());
        drop(f);
        let mf = Arc::get_mut(&mut held).unwrap();
        mf.set_positions(2).unwrap();
        assert!(mf.slice(0, 4).is_none());
        assert_eq!(mf.slice(0, 2).unwrap(), b"ab");
        assert_eq!(mf.zero_dirty_tail(2).unwrap(), 8190);
        let mut w = held.writer().unwrap();
        w.write_with(2, 2, |b| b.copy_from_slice(b"xy")).unwrap();
        w.publish(4);
        assert_eq!(held.slice(0, 4).unwrap(), b"abxy");
    }

    #[test]
    fn zero_dirty_tail_finds_stale_bytes_past_a_hole() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0");
        let size = 1 << 20;
        drop(MappedFile::create(&path, 0, size, &opts()).unwrap());
        let raw = OpenOptions::new().write(true).open(&path).unwrap();
        raw.write_all_at(b"abcd", 0).unwrap();
        // A stale record far above the end, past never-written (preallocated) extents.
        raw.write_all_at(&[7u8; 10], 600_000).unwrap();
        raw.write_all_at(&[9u8; 3], size as u64 - 3).unwrap();
        drop(raw);
        let ranges = data_ranges(&File::open(&path).unwrap(), 4, size);
        assert!(
            ranges.iter().any(|&(a, b)| a <= 600_000 && 600_010 <= b),
            "{ranges:?}"
        );
        let mut mf = MappedFile::open(&path, 0, size, true).unwrap();
        mf.set_positions(4).unwrap();
        assert!(mf.zero_dirty_tail(4).unwrap() > 0);
        drop(mf);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"abcd");
        assert!(
            bytes[4..].iter().all(|&b| b == 0),
            "every stale byte zeroed"
        );
        let read = File::open(&path).unwrap();
        assert!(data_ranges(&read, 0, 0).is_empty());
    }

    #[test]
    fn transient_buffer_is_read_after_commit_and_reused_only_when_free() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Arc::new(TransientStorePool::new(8192, 1));
        let f = Arc::new(MappedFile::create(&dir.path().join("0"), 0, 8192, &opts()).unwrap());
        assert!(f.attach_buffer(pool.borrow().unwrap(), Arc::clone(&pool)));
        assert!(pool.borrow().is_none(), "capacity 1");
        let mut w = f.writer().unwrap();
        w.write_with(0, 3, |b| b.copy_from_slice(b"abc")).unwrap();
        w.publish(3);
        assert_eq!(f.wrote(), 3);
        assert!(f.slice(0, 3).is_none(), "not committed to the mapping yet");
        assert_eq!(f.commit(0).unwrap(), 3);
        assert_eq!(f.slice(0, 3).unwrap(), b"abc");
        w.write_blank(3).unwrap();
        assert_eq!(f.commit(0).unwrap(), 8192);
        assert!(f.is_fully_readable());
        // The buffer went back to the pool, but the append handle still holds it.
        assert!(pool.borrow().is_none());
        drop(w);
        let again = pool.borrow().unwrap();
        let g = Arc::new(MappedFile::create(&dir.path().join("1"), 8192, 8192, &opts()).unwrap());
        assert!(g.attach_buffer(again, Arc::clone(&pool)));
        let mut w = g.writer().unwrap();
        w.write_with(0, 1, |b| b[0] = 1).unwrap();
    }
}
