//! One fixed-size file of a mapped file queue, with its wrote / committed / flushed cursors.
//!
//! Cursor protocol (positions are byte offsets within the file):
//! - `wrote`: bytes appended (into the mapping, or into the transient buffer when one is
//!   attached). Published with `Release` by the single writer after the bytes are in place.
//! - `committed`: bytes copied from the transient buffer into the mapping. Without a buffer it
//!   is not used and the read position is `wrote`.
//! - `flushed`: bytes known durable (msync returned OK). Advanced only after a successful flush,
//!   never past bytes a failed flush covered.
//!
//! Invariant: `flushed <= committed-or-wrote <= wrote <= size`. Readers see `[0, read_position)`.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
#[cfg_attr(not(feature = "failpoints"), allow(unused_imports))]
use crate::failpoints as fp;
use crate::mmap::MmapRegion;
use crate::segment::pool::TransientStorePool;
use crate::util::lock;

/// OS page size used by the flush/commit "least pages" rules.
pub(crate) const OS_PAGE_SIZE: usize = 4096;

/// How new files are made.
#[derive(Debug, Clone)]
pub(crate) struct CreateOptions {
    /// `fsync` the new file and its directory before it is used.
    pub(crate) sync: bool,
    /// Pre-fault every page for writing.
    pub(crate) populate: bool,
    /// RocketMQ warm-up: touch every page then mlock; `Some(n)` forces every n pages (SYNC_FLUSH).
    pub(crate) warm: Option<Option<usize>>,
    /// Bytes to allocate with `fallocate` at creation; `None` allocates the whole file. Files
    /// created with less (index files, mostly empty for a long time) must call
    /// [`MappedFile::ensure_allocated`] before writing further.
    pub(crate) prealloc: Option<u64>,
}

/// Granularity of incremental preallocation.
const ALLOC_STEP: u64 = 1 << 20;

/// A transient write buffer borrowed from the pool.
#[derive(Debug)]
struct Borrowed {
    region: Arc<MmapRegion>,
    pool: Arc<TransientStorePool>,
}

/// A fixed-size, memory-mapped file.
#[derive(Debug)]
pub(crate) struct MappedFile {
    path: PathBuf,
    #[allow(
        dead_code,
        reason = "keeps the descriptor for metadata (mtime) queries"
    )]
    file: File,
    from: u64,
    size: usize,
    region: MmapRegion,
    writable: bool,
    buffer: Mutex<Option<Borrowed>>,
    has_buffer: AtomicBool,
    wrote: AtomicUsize,
    committed: AtomicUsize,
    flushed: AtomicUsize,
    last_store_timestamp: AtomicI64,
    locked: AtomicBool,
    removed: AtomicBool,
    /// Bytes known to have real blocks (see `CreateOptions::prealloc`).
    allocated: AtomicU64,
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
            let allocated = match opts.prealloc {
                Some(n) if n < size as u64 => {
                    file.set_len(size as u64)
                        .map_err(|e| Error::io("set_len", path, e))?;
                    allocate_range(&file, path, 0, n)?;
                    n
                }
                _ => {
                    preallocate(&file, path, size as u64)?;
                    size as u64
                }
            };
            if opts.sync {
                fail::fail_point!(fp::CREATE_FSYNC, |arg| Err(fp::injected(
                    "fsync", path, arg
                )));
                file.sync_all().map_err(|e| Error::io("fsync", path, e))?;
                if let Some(dir) = path.parent() {
                    crate::util::fsync_dir(dir)?;
                }
                #[cfg(feature = "powerloss")]
                crate::powerloss::created(path, size);
            }
            let mf = Self::map(
                path,
                file.try_clone().map_err(|e| Error::io("dup", path, e))?,
                from,
                size,
                true,
            )?;
            mf.allocated.store(allocated, Ordering::Release);
            mf.set_positions(0);
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
            region,
            writable,
            buffer: Mutex::new(None),
            has_buffer: AtomicBool::new(false),
            wrote: AtomicUsize::new(size),
            committed: AtomicUsize::new(size),
            flushed: AtomicUsize::new(size),
            last_store_timestamp: AtomicI64::new(0),
            locked: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            allocated: AtomicU64::new(0),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The mapping itself, for structures that rewrite words in place through atomics (index
    /// headers and hash slots, mmap invariant 4).
    pub(crate) fn region(&self) -> &MmapRegion {
        &self.region
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
        // Acquire: pairs with the writer's Release in `publish_wrote`.
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

    /// What readers may see: `committed` with a transient buffer, else `wrote`.
    pub(crate) fn read_position(&self) -> usize {
        self.committed()
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

    /// Sets every cursor to `pos` (creation, recovery, truncation).
    pub(crate) fn set_positions(&self, pos: usize) {
        let pos = pos.min(self.size);
        self.wrote.store(pos, Ordering::Release);
        self.committed.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Attaches a transient write buffer; appends go there until the commit service copies them.
    pub(crate) fn attach_buffer(&self, region: Arc<MmapRegion>, pool: Arc<TransientStorePool>) {
        let committed = self.wrote();
        self.committed.store(committed, Ordering::Release);
        *lock(&self.buffer) = Some(Borrowed { region, pool });
        self.has_buffer.store(true, Ordering::Release);
    }

    fn write_target(&self) -> Option<Arc<MmapRegion>> {
        if self.has_buffer.load(Ordering::Acquire) {
            lock(&self.buffer).as_ref().map(|b| Arc::clone(&b.region))
        } else {
            None
        }
    }

    /// Encodes `len` bytes at `pos` (at or above `wrote`) with `f`, without publishing them.
    /// Only the owner of the write side calls this (the commit log's put lock holder).
    pub(crate) fn write_with<R>(
        &self,
        pos: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        if pos < self.wrote() || pos.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(Error::corruption(
                &self.path,
                self.from + pos as u64,
                crate::CorruptionKind::Invalid(format!(
                    "append of {len} bytes at {pos} outside the writable range"
                )),
            ));
        }
        let out = match self.write_target() {
            Some(buf) => buf.write_with(pos, len, f),
            None => self.region.write_with(pos, len, f),
        };
        out.ok_or_else(|| Error::ReadOnly {
            path: self.path.clone(),
        })
    }

    /// Writes the 8-byte END_OF_FILE blank record at `pos` and fills the file (`wrote = size`).
    /// In a transient buffer the bytes after the header are zeroed, so no stale buffer content is
    /// ever committed to the file.
    pub(crate) fn write_blank(&self, pos: usize) -> Result<()> {
        let remaining = self.size.saturating_sub(pos);
        if remaining < rocketstore_format::END_FILE_MIN_BLANK_LENGTH {
            return Err(Error::corruption(
                &self.path,
                self.from + pos as u64,
                crate::CorruptionKind::BadLength,
            ));
        }
        let mut blank = [0u8; 8];
        rocketstore_format::encode_blank(&mut blank, remaining as i32);
        self.write_with(pos, 8, |dst| dst.copy_from_slice(&blank))?;
        if let Some(buf) = self.write_target() {
            let _ = buf.zero(pos + 8, remaining - 8);
        }
        self.publish_wrote(self.size);
        Ok(())
    }

    /// Publishes `pos` as the new `wrote` (Release: the bytes below are in place).
    pub(crate) fn publish_wrote(&self, pos: usize) {
        self.wrote.store(pos.min(self.size), Ordering::Release);
    }

    /// Bytes `[pos, pos + len)` if they are below the read position.
    pub(crate) fn slice(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.read_position() {
            return None;
        }
        self.region.slice(pos, len)
    }

    /// Bytes `[pos, read_position)`.
    pub(crate) fn slice_to_end(&self, pos: usize) -> Option<&[u8]> {
        let end = self.read_position();
        if pos > end {
            return None;
        }
        self.region.slice(pos, end - pos)
    }

    /// Raw bytes of the whole file regardless of cursors: only for recovery, before any writer or
    /// reader runs (mmap invariant 3).
    pub(crate) fn recovery_view(&self, pos: usize) -> Option<&[u8]> {
        self.region.slice(pos, self.size.checked_sub(pos)?)
    }

    /// Zero-fills every non-zero 64 KiB chunk of `[pos, size)`: recovery makes sure no stale
    /// record can ever be read after a truncation point (reliability A5). Returns bytes zeroed.
    pub(crate) fn zero_dirty_tail(&self, pos: usize) -> Result<usize> {
        if !self.writable {
            return Ok(0);
        }
        const CHUNK: usize = 64 * 1024;
        static ZEROS: [u8; CHUNK] = [0; CHUNK];
        let mut zeroed = 0;
        let mut at = pos;
        while at < self.size {
            let len = CHUNK.min(self.size - at);
            // Slice equality compiles to memcmp: fast even in debug builds.
            let dirty = self
                .region
                .slice(at, len)
                .is_some_and(|b| b != &ZEROS[..len]);
            if dirty {
                self.region.zero(at, len).ok_or_else(|| Error::ReadOnly {
                    path: self.path.clone(),
                })?;
                zeroed += len;
            }
            at += len;
        }
        if zeroed > 0 {
            self.region
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

    /// Flushes `[flushed, read_position)` if at least `least_pages` pages are dirty (or the file
    /// is full). Returns the new flushed position. On error `flushed` does not move.
    pub(crate) fn flush(&self, least_pages: usize) -> Result<usize> {
        if !self.writable || !self.able_to_flush(least_pages) {
            return Ok(self.flushed());
        }
        let read = self.read_position();
        let flushed = self.flushed();
        let start = flushed - flushed % OS_PAGE_SIZE;
        fail::fail_point!(fp::FLUSH_MSYNC, |arg| Err(fp::injected(
            "msync", &self.path, arg
        )));
        self.region
            .flush_range(start, read - start)
            .map_err(|e| Error::io("msync", &self.path, e))?;
        #[cfg(feature = "powerloss")]
        crate::powerloss::synced(&self.path, start, read - start);
        // Release: a reader of `flushed` sees a position whose bytes were made durable.
        self.flushed.fetch_max(read, Ordering::AcqRel);
        Ok(self.flushed())
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

    /// Copies `[committed, wrote)` from the transient buffer into the mapping. Returns the new
    /// committed position. When the file is full and fully committed the buffer goes back to the
    /// pool.
    pub(crate) fn commit(&self, least_pages: usize) -> Result<usize> {
        let Some(buf) = self.write_target() else {
            return Ok(self.wrote());
        };
        if self.able_to_commit(least_pages) {
            let committed = self.committed.load(Ordering::Acquire);
            let wrote = self.wrote();
            fail::fail_point!(fp::COMMIT_COPY, |arg| Err(fp::injected(
                "commit", &self.path, arg
            )));
            let src = buf.slice(committed, wrote - committed).ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    self.from + committed as u64,
                    crate::CorruptionKind::BadLength,
                )
            })?;
            self.region
                .write(committed, src)
                .ok_or_else(|| Error::ReadOnly {
                    path: self.path.clone(),
                })?;
            // Release: readers that see the new committed position see the copied bytes.
            self.committed.store(wrote, Ordering::Release);
        }
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
    pub(crate) fn warm(&self, flush_every: Option<usize>) -> Result<()> {
        let mut last_flush_page = 0usize;
        let region = &self.region;
        region
            .touch_pages(0, self.size, |pages| {
                if let Some(n) = flush_every {
                    if pages - last_flush_page >= n {
                        region.flush_range(0, (pages * OS_PAGE_SIZE).min(region.len()))?;
                        last_flush_page = pages;
                    }
                }
                Ok(())
            })
            .map_err(|e| Error::io("warm", &self.path, e))?;
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

    /// Makes sure `[0, upto)` has real blocks (fallocate in 1 MiB steps ahead), so writing
    /// through the mapping cannot fault on a full disk. Only the single writer calls it.
    pub(crate) fn ensure_allocated(&self, upto: u64) -> Result<()> {
        let have = self.allocated.load(Ordering::Acquire);
        if upto <= have {
            return Ok(());
        }
        let end = (upto.div_ceil(ALLOC_STEP) * ALLOC_STEP).min(self.size as u64);
        allocate_range(&self.file, &self.path, have, end - have)?;
        self.allocated.store(end, Ordering::Release);
        Ok(())
    }

    /// Pre-faults every page for writing (`MADV_POPULATE_WRITE`). Runs in the allocate service
    /// after the file was handed out: faulting pages in never changes their bytes, so it may run
    /// while the writer appends. Best effort: a failure only costs page faults later.
    pub(crate) fn populate(&self, stop: &dyn Fn() -> bool) {
        let _ = self.region.populate_write(stop);
    }

    /// Undoes `warm`'s `mlock` (when the file is full).
    pub(crate) fn munlock(&self) {
        if self.locked.swap(false, Ordering::AcqRel) {
            let _ = self.region.unlock();
        }
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
            Ok(()) => Ok(()),
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

/// Allocates real blocks for `[offset, offset + len)` without changing the file size.
fn allocate_range(file: &File, path: &Path, offset: u64, len: u64) -> Result<()> {
    fail::fail_point!(fp::CREATE_FALLOCATE, |arg| Err(fp::injected(
        "fallocate",
        path,
        arg
    )));
    if len == 0 {
        return Ok(());
    }
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, offset, len) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => Ok(()),
        Err(e) => Err(Error::io("fallocate", path, e.into())),
    }
}

/// Allocates `size` bytes of real blocks for `file`, so a write through the mapping can never
/// fault on a full disk. Falls back to `set_len` where the file system lacks fallocate.
fn preallocate(file: &File, path: &Path, size: u64) -> Result<()> {
    fail::fail_point!(fp::CREATE_FALLOCATE, |arg| Err(fp::injected(
        "fallocate",
        path,
        arg
    )));
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => file
            .set_len(size)
            .map_err(|e| Error::io("set_len", path, e)),
        Err(e) => Err(Error::io("fallocate", path, e.into())),
    }
}
