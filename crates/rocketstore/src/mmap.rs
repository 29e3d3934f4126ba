//! Memory-mapped regions: the only module of the engine that contains `unsafe`.
//!
//! Three types carry the rules of shared mappings, so that no caller has to promise anything:
//!
//! - [`MmapRegion`] is a fixed-length shared mapping of a store file (or an anonymous mapping
//!   used as a transient write buffer). It offers no byte access of its own, only what cannot
//!   alias bytes: its length, `msync`, `madvise`, `mlock`.
//! - [`AppendRegion`] owns one `MmapRegion` and its **published watermark**. Its bytes are cut
//!   into three ranges: `[0, words)` is a prefix of words rewritten in place (index headers and
//!   hash slots), reachable only as atomics; `[words, published)` is published and immutable,
//!   reachable only as shared slices (`read`); `[published, len)` belongs to the single writer.
//!   Readers load `published` with `Acquire`; any number of threads may read.
//! - [`start_writeback`] is the one system call on a descriptor rather than a mapping
//!   (`sync_file_range`); it is here because it needs `unsafe`, and it touches no memory.
//! - [`AppendWriter`] is the one write handle of an `AppendRegion` (claimed with
//!   [`AppendRegion::writer`]; a second claim is refused until the first is dropped). It writes
//!   only at or above the watermark, and `publish` raises the watermark with `Release` after the
//!   bytes are in place; it never lowers it.
//!
//! Lowering the watermark (recovery cutting a torn tail, a pooled buffer reused for a new file)
//! or writing bytes regardless of it (warm-up) takes `&mut AppendRegion`: the borrow checker
//! then proves that no reader slice, atomic or writer handle is alive. Callers reach it through
//! `Arc::get_mut` and get an error, not a race, when someone still holds the region.
//!
//! The soundness of the `unsafe` blocks below rests on these numbered invariants (each
//! `// SAFETY:` comment names the ones it relies on). Invariants 3 and 4 are kept by the types
//! of this module; 1, 2 and 5 concern the file and the mapping's lifetime:
//!
//! 1. **Exclusive directory.** A writable store root is locked with an exclusive `flock` and
//!    an exclusive `fcntl` record lock (a broker's lock, [`try_lock_record`]) on `<root>/lock`,
//!    so no other process of ours, and no RocketMQ broker, maps its files for writing, and no
//!    other code writes them. Within the process, a mapped file is written only through its mapping or by
//!    [`AppendWriter::write_file`] (`pwrite` of the mapped file, at or above the watermark,
//!    through the region's one write handle), so invariants 3 and 4 cover both: the Linux page
//!    cache is shared between `pwrite` and `MAP_SHARED` mappings of the same file. Read-only opens of a foreign store do not lock; they document that the files
//!    must not be modified or truncated while they are open (a truncated file raises SIGBUS on
//!    access, which is a crash, not memory corruption). No type can express what another
//!    process does; this is the one invariant the engine states rather than checks.
//! 2. **Never shrink a mapped file.** Files are mapped with exactly their length (checked in
//!    [`MmapRegion::map_file`]), and no engine code truncates a mapped file: recovery zero-fills
//!    a dirty tail through [`AppendRegion::zero_dirty`] instead of calling `set_len`.
//! 3. **Published bytes are immutable.** Bytes in `[words, published)` are never written while
//!    the region is shared: the only writers are an [`AppendWriter`] (which writes at or above
//!    the watermark and only raises it) and `&mut AppendRegion` methods (which no shared
//!    borrow can outlive). So shared slices over them are sound.
//! 4. **One writer above the watermark; words only as atomics.** At most one [`AppendWriter`]
//!    exists per region (an atomic claim flag, set once per handle, not per write), so the
//!    bytes it writes are disjoint from every slice handed to readers and from every other
//!    write. The `[0, words)` prefix is never sliced, only accessed through
//!    [`AppendRegion::atomic_u32`] / [`AppendRegion::atomic_u64`].
//! 5. **Unmap after the last user.** A mapping is unmapped only when its `AppendRegion` is
//!    dropped; every slice and atomic borrows it, and writer handles hold an `Arc` of it.
//!    Unlinking the file while it is still mapped is fine on POSIX systems.
//!
//! Every method bounds-checks its range and returns `None` (or an error) instead of touching
//! memory outside the mapping.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use memmap2::{Advice, MmapOptions, MmapRaw};

/// A fixed-length memory mapping of a file, or an anonymous one. Its bytes are reached only
/// through the [`AppendRegion`] that owns it.
#[derive(Debug)]
pub(crate) struct MmapRegion {
    raw: MmapRaw,
    len: usize,
    writable: bool,
    /// This file mapping's slot in the fault registry ([`faults`]), `None` for anonymous
    /// mappings (they cannot fail) or a full registry.
    slot: Option<usize>,
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // Before `raw` unmaps the range (fields drop after this body): a fault can no longer
        // be attributed to this mapping once the range may be reused.
        if let Some(slot) = self.slot.take() {
            faults::unregister(slot);
        }
    }
}

impl MmapRegion {
    /// Maps `len` bytes of `file` shared, for reading and writing (`writable`) or reading only.
    ///
    /// The file must already be exactly `len` bytes long (invariant 2: never map past EOF).
    pub(crate) fn map_file(file: &File, len: usize, writable: bool) -> io::Result<Self> {
        let actual = file.metadata()?.len();
        if actual != len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("file is {actual} bytes, expected {len}"),
            ));
        }
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot map an empty file",
            ));
        }
        let mut opts = MmapOptions::new();
        opts.len(len);
        let raw = if writable {
            opts.map_raw(file)?
        } else {
            opts.map_raw_read_only(file)?
        };
        faults::install();
        let slot = faults::register(raw.as_ptr() as usize, len);
        Ok(Self {
            raw,
            len,
            writable,
            slot,
        })
    }

    /// True once a page of this file mapping could not be read in (EIO from the disk, or the
    /// file shrunk by someone else): the fault was answered with a zero page (see [`faults`]),
    /// so this mapping's bytes are no longer the file's. Sticky for the mapping's life; one
    /// atomic load.
    pub(crate) fn io_failed(&self) -> bool {
        self.slot.is_some_and(faults::failed)
    }

    /// An anonymous, private, zero-filled mapping (a transient write buffer).
    pub(crate) fn anonymous(len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot map zero bytes",
            ));
        }
        let map = MmapOptions::new().len(len).map_anon()?;
        Ok(Self {
            raw: MmapRaw::from(map),
            len,
            writable: true,
            slot: None,
        })
    }

    /// Length of the mapping in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn in_bounds(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// A shared view of `[offset, offset + len)`.
    ///
    /// # Safety
    /// `[offset, offset + len)` must be inside the mapping, and no byte of it may be written
    /// (through any pointer or by another thread) while the returned slice is alive.
    unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        if len == 0 {
            return &[];
        }
        // SAFETY: the bounds and the absence of writers (invariants 3 and 4) are this
        // function's contract; the mapping outlives `&self` (invariant 5).
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr().add(offset), len) }
    }

    /// Runs `f` over a mutable view of `[offset, offset + len)`.
    ///
    /// # Safety
    /// The mapping must be writable, `[offset, offset + len)` must be inside it, and no other
    /// reference to or access of any byte of that range may exist while `f` runs.
    unsafe fn with_bytes_mut<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        if len == 0 {
            return f(&mut []);
        }
        // SAFETY: bounds, writability and exclusivity (invariants 3 and 4) are this function's
        // contract; the `&mut` does not escape `f` because of the closure's signature, and the
        // mapping outlives `&self` (invariant 5).
        let view =
            unsafe { std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().add(offset), len) };
        f(view)
    }

    /// Synchronously writes `[offset, offset + len)` back to the file (`msync(MS_SYNC)`).
    pub(crate) fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if !self.in_bounds(offset, len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "flush range out of bounds",
            ));
        }
        self.raw.flush_range(offset, len)
    }

    /// Pre-faults every page for writing (`MADV_POPULATE_WRITE`), so the writer never takes a
    /// page fault on this mapping. Where the kernel lacks that advice it falls back to
    /// `MADV_WILLNEED` (read-ahead): the mapping may be shared with a writer, so it never
    /// touches a byte.
    ///
    /// Works in 32 MiB steps and stops early when `stop()` returns true (a closing store does
    /// not wait for a whole file to be pre-faulted).
    pub(crate) fn populate_write(&self, stop: &dyn Fn() -> bool) -> io::Result<()> {
        self.populate_write_range(0, self.len, stop)
    }

    /// [`MmapRegion::populate_write`] of `[offset, offset + len)` only (the allocate service
    /// pre-faults the next commit log file in steps that follow the writer).
    pub(crate) fn populate_write_range(
        &self,
        offset: usize,
        len: usize,
        stop: &dyn Fn() -> bool,
    ) -> io::Result<()> {
        const STEP: usize = 32 << 20;
        if !self.in_bounds(offset, len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "populate range out of bounds",
            ));
        }
        let end = offset + len;
        let mut at = offset;
        while at < end {
            if stop() {
                return Ok(());
            }
            let len = STEP.min(end - at);
            match self.raw.advise_range(Advice::PopulateWrite, at, len) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(22) => {
                    self.raw.advise_range(Advice::WillNeed, at, len)?
                }
                Err(e) => return Err(e),
            }
            at += len;
        }
        Ok(())
    }

    /// `madvise(MADV_WILLNEED)` over the whole mapping.
    pub(crate) fn advise_willneed(&self) -> io::Result<()> {
        self.raw.advise(Advice::WillNeed)
    }

    /// `madvise(MADV_RANDOM)` over the whole mapping: a page fault then reads (for a fresh,
    /// fallocated file: zero-fills) the one page it needs, not the device's read-ahead window
    /// around it (`read_ahead_kb`, 8 MiB on some virtual disks: a whole consume queue file
    /// zero-filled at its first write).
    pub(crate) fn advise_random(&self) -> io::Result<()> {
        self.raw.advise(Advice::Random)
    }

    /// `madvise(MADV_NORMAL)` over the whole mapping: the kernel's default read-around again
    /// (for a file that was written with [`MmapRegion::advise_random`] and is now read in order).
    pub(crate) fn advise_normal(&self) -> io::Result<()> {
        self.raw.advise(Advice::Normal)
    }

    /// Reads `[offset, offset + len)` (clamped to the mapping) in and maps it: `MADV_WILLNEED`
    /// starts the reads as one batch whatever the mapping's advice, then `MADV_POPULATE_READ`
    /// (Linux 5.14+; skipped where unknown) maps the pages, as the fault-around a mapping with
    /// [`MmapRegion::advise_random`] does not get. For an in-order read of such a mapping.
    pub(crate) fn prefetch_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        if offset >= end {
            return Ok(());
        }
        self.raw
            .advise_range(Advice::WillNeed, offset, end - offset)?;
        match self
            .raw
            .advise_range(Advice::PopulateRead, offset, end - offset)
        {
            Err(e) if e.raw_os_error() == Some(22) => Ok(()),
            other => other,
        }
    }

    /// `mlock` the whole mapping.
    pub(crate) fn lock(&self) -> io::Result<()> {
        self.raw.lock()
    }

    /// `munlock` the whole mapping.
    pub(crate) fn unlock(&self) -> io::Result<()> {
        self.raw.unlock()
    }
}

/// Pages of file mappings that cannot be read in: a `SIGBUS` answered with a zero page and a
/// typed error, never a dead process.
///
/// A load from (or a store into) a page of a shared file mapping that the kernel cannot read
/// in, because the disk returned EIO or because the file was shrunk under the mapping, raises
/// `SIGBUS` in the faulting thread; its default action kills the process. Reading such pages
/// with `pread` instead is not possible in general (the engine cannot know beforehand which
/// page will fail, and readers borrow records from the mapping without a copy), and
/// `sigsetjmp`/`siglongjmp` out of a handler across Rust frames is undefined behaviour (it
/// skips destructors and the compiler does not know a function that returns twice). So the
/// engine does what the JVM does for RocketMQ's mapped buffers (a fault there becomes an
/// exception in the accessing thread) in the one way that is sound for Rust code: the faulting
/// access completes.
///
/// Every file mapping registers its address range in a lock-free table of slots. A process-wide
/// `SIGBUS` handler (installed once, chaining to the previous one) looks the faulting address
/// up; if it lies in a registered mapping, it replaces that one page with a private zero page
/// (`mmap(MAP_FIXED | MAP_ANONYMOUS)`, a plain system call, safe in a handler), marks the slot
/// failed, counts the fault and returns: the access is restarted and sees zeros (a write goes
/// to the zero page, never to the file). Any other `SIGBUS` goes to the previous handler, or
/// kills the process as before.
///
/// The engine then never trusts the mapping again: [`MmapRegion::io_failed`] is checked by the
/// writer before it publishes (a put fails, the store is fenced, no `PUT_OK`), by every flush
/// (no durable position moves) and by the store's reads (a typed EIO error instead of the
/// zeros). A reopen maps the file afresh and reads the page again.
mod faults {
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    /// Slots per chunk; chunks are allocated on demand and never freed.
    const CHUNK: usize = 1024;
    /// Chunks: up to 256 Ki file mappings at once are covered (more are mapped unprotected).
    const CHUNKS: usize = 256;

    #[derive(Default)]
    struct Slot {
        /// Start address of the mapping, 0 when the slot is free.
        start: AtomicUsize,
        /// Its length, 0 while the slot is being claimed or released.
        len: AtomicUsize,
        /// A page of it could not be read in.
        failed: AtomicBool,
    }

    type Chunk = [Slot; CHUNK];

    static TABLE: [AtomicPtr<Chunk>; CHUNKS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];
    /// Where `register` starts looking for a free slot.
    static HINT: AtomicUsize = AtomicUsize::new(0);
    /// Faults answered so far, in every store of the process.
    static COUNT: AtomicU64 = AtomicU64::new(0);
    /// The handler that was installed before ours, to chain to.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
    /// The system's page size.
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    fn chunk(i: usize) -> Option<&'static Chunk> {
        let p = TABLE.get(i)?.load(Ordering::Acquire);
        // SAFETY: a non-null pointer in `TABLE` comes from `Box::into_raw` in `chunk_or_alloc`
        // and, once published there, is never freed, so it is valid for `'static`; `Slot` is only atomics (shared
        // access is fine). No mapping invariant is involved.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    fn chunk_or_alloc(i: usize) -> Option<&'static Chunk> {
        if let Some(c) = chunk(i) {
            return Some(c);
        }
        let fresh: Box<Chunk> = Box::new(std::array::from_fn(|_| Slot::default()));
        let fresh = Box::into_raw(fresh);
        let cell = TABLE.get(i)?;
        if cell
            .compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` just above and was not published (the
            // exchange failed), so this is its only owner.
            drop(unsafe { Box::from_raw(fresh) });
        }
        chunk(i)
    }

    fn slot(i: usize) -> Option<&'static Slot> {
        chunk(i / CHUNK)?.get(i % CHUNK)
    }

    /// Claims a slot for the mapping `[start, start + len)`; `None` if the table is full.
    pub(super) fn register(start: usize, len: usize) -> Option<usize> {
        if start == 0 || len == 0 {
            return None;
        }
        let hint = HINT.load(Ordering::Relaxed) % (CHUNK * CHUNKS);
        for n in 0..CHUNK * CHUNKS {
            let i = (hint + n) % (CHUNK * CHUNKS);
            let s = chunk_or_alloc(i / CHUNK)?.get(i % CHUNK)?;
            if s.start
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.failed.store(false, Ordering::Relaxed);
                s.len.store(len, Ordering::Release);
                HINT.store(i + 1, Ordering::Relaxed);
                return Some(i);
            }
        }
        None
    }

    /// Frees slot `i` (before its mapping is unmapped).
    pub(super) fn unregister(i: usize) {
        if let Some(s) = slot(i) {
            s.len.store(0, Ordering::Release);
            s.failed.store(false, Ordering::Relaxed);
            s.start.store(0, Ordering::Release);
            HINT.store(i, Ordering::Relaxed);
        }
    }

    /// Whether slot `i`'s mapping had a page that could not be read in.
    pub(super) fn failed(i: usize) -> bool {
        slot(i).is_some_and(|s| s.failed.load(Ordering::Acquire))
    }

    /// Faults answered with a zero page since the process started.
    pub(super) fn count() -> u64 {
        COUNT.load(Ordering::Acquire)
    }

    /// The registered slot whose mapping holds `addr`. Only atomic loads: async-signal-safe.
    fn find(addr: usize) -> Option<&'static Slot> {
        for c in 0..CHUNKS {
            let chunk = chunk(c)?;
            for s in chunk {
                let start = s.start.load(Ordering::Acquire);
                let len = s.len.load(Ordering::Acquire);
                if start != 0 && addr >= start && addr - start < len {
                    return Some(s);
                }
            }
        }
        None
    }

    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO handler; for SIGBUS
        // `si_addr` is the faulting address.
        let addr = unsafe { (*info).si_addr() } as usize;
        if let Some(s) = find(addr) {
            let page = PAGE.load(Ordering::Relaxed);
            let at = addr & !(page - 1);
            // SAFETY: `[at, at + page)` lies inside a live registered file mapping of this
            // process (slots are released before their mapping is unmapped, invariant 5), so
            // MAP_FIXED replaces one of our own pages and nothing else. The page could not be
            // read in, so no byte of it was ever seen by a reader since it was last read in;
            // readers that see its zeros instead of the file's bytes are told by the failed
            // flag that the mapping is no longer the file (invariant 1 states that a file
            // changed behind a mapping is not the engine's memory corruption). `mmap` is a
            // plain system call: async-signal-safe in practice on Linux.
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                s.failed.store(true, Ordering::Release);
                COUNT.fetch_add(1, Ordering::AcqRel);
                return;
            }
        }
        chain(sig, info, ctx);
    }

    /// Hands a `SIGBUS` that is not ours to the handler installed before, or restores the
    /// default action and returns (the access faults again and the process dies as before).
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let Some(prev) = PREVIOUS.get() else {
            return;
        };
        let h = prev.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            // SAFETY: `sigaction` is async-signal-safe; `prev` is a valid, initialized action
            // (read back by `install`), valid for `'static`.
            unsafe { libc::sigaction(sig, prev, std::ptr::null_mut()) };
            return;
        }
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous handler was installed with SA_SIGINFO, so `h` is an
            // `sa_sigaction` of this signature; we pass it the arguments we were given.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(h) };
            f(sig, info, ctx);
        } else {
            // SAFETY: without SA_SIGINFO the previous handler is an `sa_handler(int)`.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
    }

    /// Installs the `SIGBUS` handler once per process (the first file mapping).
    pub(super) fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `sysconf` has no memory effects.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(page) = usize::try_from(page) {
                if page.is_power_of_two() {
                    PAGE.store(page, Ordering::Relaxed);
                }
            }
            // SAFETY: all-zero bytes are a valid `sigaction` (integers, a null handler and an
            // empty mask); the fields used are set below. `sigaction` reads `act` and writes
            // `old`, both on this stack frame for the whole call.
            // The previous action is known before ours can run, so `chain` always has it.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                    return;
                }
                let _ = PREVIOUS.set(old);
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
            }
        });
    }
}

/// Page faults of file mappings answered with a zero page since the process started (any
/// store): 0 on a healthy disk. When it moves, [`MmapRegion::io_failed`] tells which mappings.
pub(crate) fn io_faults() -> u64 {
    faults::count()
}

/// Starts the kernel's writeback of the dirty pages of `[offset, offset + len)` of `file`
/// without waiting for it (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a later `msync` or
/// `fsync` of the range finds them clean or already in flight. It makes nothing durable: only
/// that later call does. Not Linux: does nothing.
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let too_big = |_| io::Error::new(io::ErrorKind::InvalidInput, "writeback range too large");
        let offset = i64::try_from(offset).map_err(too_big)?;
        let len = i64::try_from(len).map_err(too_big)?;
        // SAFETY: `sync_file_range` reads and writes no memory of this process: it takes a
        // descriptor, which `file` keeps open for the whole call (the borrow), two integers
        // and flags. No mapping invariant is involved.
        let rc = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
    Ok(())
}

/// Takes a non-blocking exclusive POSIX record lock on the whole of `file` (as RocketMQ's
/// `FileChannel.tryLock` does on `<root>/lock`), as an open-file-description lock
/// (`F_OFD_SETLK`): it belongs to this open file, so it conflicts with every other open of the
/// file, in this process too, and closing another descriptor of the file does not release it.
/// It conflicts with classic `fcntl`/`lockf` locks (a broker's) both ways. Where the kernel has
/// no OFD locks (`EINVAL`), a classic `F_SETLK` lock is taken instead.
///
/// Returns `Ok(false)` if another holder has a conflicting lock. The lock lives as long as the
/// open file. Like [`start_writeback`] it is here because it needs `unsafe`; it touches no mapping.
pub(crate) fn try_lock_record(file: &File) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: all-zero bytes are a valid `flock` (plain integers); the fields that matter
        // are set below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = 0;
        fl.l_len = 0; // to the end of the file, however long it grows
        fl.l_pid = 0; // required by F_OFD_SETLK
                      // SAFETY: `fcntl(F_OFD_SETLK)` reads the `flock` struct, which lives on this stack frame
                      // for the whole call, and takes a descriptor that `file` keeps open (the borrow). It
                      // writes no memory of this process and involves no mapping invariant.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES) => return Ok(false),
            Some(libc::EINVAL) => {}
            _ => return Err(err),
        }
    }
    match rustix::fs::fcntl_lock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A mapping with a published watermark: `[0, words)` atomic words, `[words, published)`
/// immutable published bytes, `[published, len)` the single writer's (see the module docs).
#[derive(Debug)]
pub(crate) struct AppendRegion {
    map: MmapRegion,
    /// End of the prefix accessed only through atomics (0 for plain append-only files).
    words: usize,
    /// Bytes `[words, published)` are readable and never written again while shared.
    published: AtomicUsize,
    /// An [`AppendWriter`] exists.
    claimed: AtomicBool,
}

impl AppendRegion {
    /// Wraps `map` with `words` atomic prefix bytes and `published` bytes already readable
    /// (both clamped to the mapping; `published` to at least `words`).
    pub(crate) fn new(map: MmapRegion, words: usize, published: usize) -> Self {
        let words = words.min(map.len);
        let published = published.clamp(words, map.len);
        Self {
            map,
            words,
            published: AtomicUsize::new(published),
            claimed: AtomicBool::new(false),
        }
    }

    /// The mapping, for what touches no byte (msync, madvise, mlock).
    pub(crate) fn mapping(&self) -> &MmapRegion {
        &self.map
    }

    /// See [`MmapRegion::io_failed`]: a page of the mapping could not be read in.
    pub(crate) fn io_failed(&self) -> bool {
        self.map.io_failed()
    }

    /// The published watermark (`Acquire`: pairs with [`AppendWriter::publish`]).
    pub(crate) fn published(&self) -> usize {
        self.published.load(Ordering::Acquire)
    }

    /// Published bytes `[offset, offset + len)`, or `None` if any of them is not published
    /// (below `words`, at or above the watermark, or outside the mapping).
    #[inline]
    pub(crate) fn read(&self, offset: usize, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len)?;
        if offset < self.words || end > self.published() {
            return None;
        }
        // SAFETY: `[offset, end)` lies in `[words, published)` and `published <= len`, so it is
        // inside the mapping; published bytes are never written while the region is shared
        // (invariant 3: the only writer writes at or above the watermark, invariant 4) and the
        // slice borrows `self`, which keeps the mapping alive (invariant 5).
        Some(unsafe { self.map.bytes(offset, len) })
    }

    /// Published bytes from `offset` to the watermark, or `None` if `offset` is not in
    /// `[words, published]`.
    #[inline]
    pub(crate) fn read_from(&self, offset: usize) -> Option<&[u8]> {
        let end = self.published();
        if offset < self.words || offset > end {
            return None;
        }
        // SAFETY: as in `read` (invariants 3, 4 and 5): `[offset, end)` is published.
        Some(unsafe { self.map.bytes(offset, end - offset) })
    }

    fn word_ptr(&self, offset: usize, size: usize) -> Option<*mut u8> {
        let end = offset.checked_add(size)?;
        if end > self.words {
            return None;
        }
        let ptr = self.map.raw.as_mut_ptr().wrapping_add(offset);
        (ptr as usize).is_multiple_of(size).then_some(ptr)
    }

    /// Asks the CPU to start loading the cache line of the 4-byte word at `offset` of the
    /// atomic prefix (an index hash slot the writer reads a little later), without waiting for
    /// it: nothing is read into the program. Outside the prefix, or on a target without a
    /// prefetch instruction, nothing happens.
    #[inline]
    pub(crate) fn prefetch_word(&self, offset: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ptr) = self.word_ptr(offset, 4) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: `word_ptr` checked that the word lies inside the live mapping's atomic
            // prefix; PREFETCHT0 only hints the cache: it neither reads into the program nor
            // writes, never faults, and needs only SSE, part of every x86-64 CPU. No reference
            // to the word is made (invariant 4 holds).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.cast_const().cast::<i8>()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = offset;
    }

    /// The 4-byte aligned word at `offset` of the atomic prefix (index headers and hash slots).
    pub(crate) fn atomic_u32(&self, offset: usize) -> Option<&AtomicU32> {
        let ptr = self.word_ptr(offset, 4)?;
        // SAFETY: the word is inside the mapping (`words <= len`) and aligned (checked above);
        // AtomicU32 has the layout of u32; the prefix `[0, words)` is never sliced nor written
        // other than through these atomics (invariant 4), and the reference borrows `self`
        // (invariant 5).
        Some(unsafe { AtomicU32::from_ptr(ptr.cast::<u32>()) })
    }

    /// The 8-byte aligned word at `offset` of the atomic prefix.
    pub(crate) fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        let ptr = self.word_ptr(offset, 8)?;
        // SAFETY: as in `atomic_u32`: in bounds, aligned, same layout as u64, invariants 4, 5.
        Some(unsafe { AtomicU64::from_ptr(ptr.cast::<u64>()) })
    }

    /// Raises the watermark of a **read-only** mapping to `published` (clamped to the mapping),
    /// never lowering it: a reader following a writer in another process
    /// ([`crate::follow`]) makes the bytes that writer published readable. Refused (`false`)
    /// for a writable mapping or while a write handle exists, where only [`AppendWriter::publish`]
    /// may raise it. Touches no byte.
    pub(crate) fn follow_published(&self, published: usize) -> bool {
        if self.map.writable || self.claimed.load(Ordering::Acquire) {
            return false;
        }
        let to = published.clamp(self.words, self.map.len);
        // Release: pairs with readers' Acquire in `published` (the other process's bytes were
        // in place before its progress word, which this thread loaded with Acquire, moved).
        self.published.fetch_max(to, Ordering::AcqRel);
        true
    }

    /// Claims the single write handle, or `None` while another one exists.
    pub(crate) fn writer(self: &Arc<Self>) -> Option<AppendWriter> {
        // Acquire: the previous handle's writes (released on its drop) happen before ours.
        self.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(AppendWriter {
            region: Arc::clone(self),
        })
    }

    /// Sets the watermark to `published` (clamped), lower or higher. Exclusive: recovery
    /// cutting a torn tail, a pooled buffer reused for another file.
    pub(crate) fn reset(&mut self, published: usize) {
        *self.published.get_mut() = published.clamp(self.words, self.map.len);
    }

    /// Re-cuts the region: `[0, words)` becomes the atomic prefix and `[words, published)` the
    /// published bytes (clamped as in [`AppendRegion::new`]). Exclusive.
    pub(crate) fn set_layout(&mut self, words: usize, published: usize) {
        self.words = words.min(self.map.len);
        self.reset(published);
    }

    /// Zero-fills every non-zero 64 KiB chunk of `[from, to)` (clamped to the mapping; recovery
    /// of a dirty tail, above the watermark it recovered). Returns the bytes zeroed, `None` if
    /// the mapping is read-only or `from` is in the atomic prefix.
    pub(crate) fn zero_dirty(&mut self, from: usize, to: usize) -> Option<usize> {
        const CHUNK: usize = 64 * 1024;
        static ZEROS: [u8; CHUNK] = [0; CHUNK];
        if !self.map.writable || from < self.words {
            return None;
        }
        let to = to.min(self.map.len);
        let mut zeroed = 0;
        let mut at = from;
        while at < to {
            let len = CHUNK.min(to - at);
            // SAFETY: `[at, at + len)` is inside the mapping; `&mut self` proves that no slice,
            // atomic or writer handle of this region is alive (invariants 3 and 4), and the view
            // ends before the next write.
            let dirty = unsafe { self.map.bytes(at, len) } != &ZEROS[..len];
            if dirty {
                // SAFETY: in bounds, writable (checked above), exclusive through `&mut self`.
                unsafe { self.map.with_bytes_mut(at, len, |b| b.fill(0)) };
                zeroed += len;
            }
            at += len;
        }
        Some(zeroed)
    }

    /// Writes a zero byte at the start of every 4 KiB page in `[from, to)` (RocketMQ's
    /// `warmMappedFile`, on a new file nobody else holds yet); `every` is called after each page
    /// with the mapping and the page count so far.
    pub(crate) fn touch_pages(
        &mut self,
        from: usize,
        to: usize,
        mut every: impl FnMut(&MmapRegion, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        if !self.map.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "read-only mapping",
            ));
        }
        let to = to.min(self.map.len);
        let mut pos = from.max(self.words);
        let mut pages = 0usize;
        while pos < to {
            // SAFETY: `pos < len`, writable (checked above); `&mut self` proves no other access
            // to the region is alive (invariants 3 and 4).
            unsafe { self.map.with_bytes_mut(pos, 1, |b| b[0] = 0) };
            pages += 1;
            every(&self.map, pages)?;
            pos += 4096;
        }
        Ok(())
    }
}

/// The single write handle of an [`AppendRegion`] (invariant 4): writes at or above the
/// watermark, then publishes them. Dropping it lets another handle be claimed.
#[derive(Debug)]
pub(crate) struct AppendWriter {
    region: Arc<AppendRegion>,
}

impl Drop for AppendWriter {
    fn drop(&mut self) {
        // Release: our writes happen before the next handle's (its claim is Acquire).
        self.region.claimed.store(false, Ordering::Release);
    }
}

impl AppendWriter {
    /// The region this handle writes.
    pub(crate) fn region(&self) -> &Arc<AppendRegion> {
        &self.region
    }

    /// The watermark (only this handle moves it, so no ordering is needed to read it here).
    #[inline]
    pub(crate) fn published(&self) -> usize {
        self.region.published.load(Ordering::Relaxed)
    }

    /// Runs `f` over a mutable view of `[offset, offset + len)`, for encoding in place. Returns
    /// `None` (running nothing) if the range starts below the watermark or the atomic prefix,
    /// leaves the mapping, or the mapping is read-only.
    #[inline]
    pub(crate) fn write_with<R>(
        &mut self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        let r = &self.region;
        let end = offset.checked_add(len)?;
        if !r.map.writable || offset < r.words || offset < self.published() || end > r.map.len {
            return None;
        }
        // SAFETY: inside the writable mapping and at or above the watermark and the atomic
        // prefix (checked above). This is the region's only write handle (invariant 4) and
        // `&mut self` excludes its own views, so no slice, atomic or other write aliases the
        // range (invariant 3: readers only see bytes below the watermark).
        Some(unsafe { r.map.with_bytes_mut(offset, len, f) })
    }

    /// Copies `data` to `offset`; `None` as in [`AppendWriter::write_with`].
    pub(crate) fn write(&mut self, offset: usize, data: &[u8]) -> Option<()> {
        self.write_with(offset, data.len(), |dst| dst.copy_from_slice(data))
    }

    /// Writes `data` at `offset` of `file` with `pwrite` instead of through the mapping (a
    /// full-page write of a buffered file is neither read nor zero-filled first, and takes no
    /// page fault). `file` must be the file this region maps (invariant 1). `None` (writing
    /// nothing) as in [`AppendWriter::write_with`]; the bytes are visible through the mapping
    /// when it returns, and readable once published.
    pub(crate) fn write_file(
        &mut self,
        file: &File,
        offset: usize,
        data: &[u8],
    ) -> Option<io::Result<()>> {
        use std::os::unix::fs::FileExt;
        let r = &self.region;
        let end = offset.checked_add(data.len())?;
        if !r.map.writable || offset < r.words || offset < self.published() || end > r.map.len {
            return None;
        }
        Some(file.write_all_at(data, offset as u64))
    }

    /// Raises the watermark to `end` (clamped to the mapping) with `Release`: every byte below
    /// it must be in place. Never lowers it.
    #[inline]
    pub(crate) fn publish(&mut self, end: usize) {
        let end = end.min(self.region.map.len);
        if end > self.published() {
            self.region.published.store(end, Ordering::Release);
        }
    }

    /// Any bytes from `offset` to the end of the mapping, published or not (recovery reads
    /// what a crash left above the watermark), or `None` if `offset` is in the atomic prefix
    /// or past the end. No write can happen while the view lives: writes need `&mut self`.
    pub(crate) fn view_from(&self, offset: usize) -> Option<&[u8]> {
        let r = &self.region;
        if offset < r.words || offset > r.map.len {
            return None;
        }
        // SAFETY: inside the mapping (checked above) and outside the atomic prefix; bytes
        // below the watermark are never written (invariant 3), bytes above it only by this
        // handle (invariant 4), which the shared borrow of `self` keeps from writing; the
        // handle's `Arc` keeps the mapping alive (invariant 5).
        Some(unsafe { r.map.bytes(offset, r.map.len - offset) })
    }
}

/// Cache line size assumed by [`prefetch`] (x86-64 and most AArch64 cores).
const CACHE_LINE: usize = 64;

/// Asks the CPU to start loading every cache line of `bytes` (a slice of a mapping, typically
/// a record a reader will decode soon) into the cache, without waiting for it. A hint only:
/// nothing is read into the program, and a line whose page is not mapped yet is skipped by
/// the CPU (the later access faults it in as usual). A no-op on targets without a prefetch
/// instruction.
///
/// Readers that walk records scattered over a large mapping (one queue's records lie many
/// records apart in the commit log) call it a few records ahead, so the cache and TLB misses
/// of several records overlap instead of stalling one after another.
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut at = 0usize;
        while at < bytes.len() {
            // SAFETY: `at < bytes.len()`, so the pointer lies inside the live slice `bytes`;
            // PREFETCHT0 only hints the cache: it does not read into the program, never faults
            // (an unmapped address is ignored) and needs only SSE, part of every x86-64 CPU.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(at).cast::<i8>()) };
            at += CACHE_LINE;
        }
        if let Some(last) = bytes.len().checked_sub(1) {
            // The last line, when the slice does not start on a line boundary.
            // SAFETY: as above, `last` is inside `bytes`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(last).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Sleeps while the 4-byte word `word` of a shared file mapping still holds `expected`, up to
/// `timeout` (`FUTEX_WAIT` without `FUTEX_PRIVATE_FLAG`: the kernel keys the wait on the file
/// page, so a `FUTEX_WAKE` from any process mapping the same file wakes it). Returns on a wake,
/// a change, the timeout or a signal; the caller re-checks the word. Not Linux: sleeps for
/// `min(timeout, 10 ms)` (the caller polls).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: std::time::Duration) {
    #[cfg(target_os = "linux")]
    {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(i32::try_from(timeout.subsec_nanos()).unwrap_or(0)),
        };
        // SAFETY: `word` is a live, aligned 4-byte atomic (the borrow keeps its mapping alive,
        // invariant 5); FUTEX_WAIT only reads it, atomically, in the kernel, and compares it
        // with `expected`; `ts` lives on this frame for the whole call. The return value
        // (0, EAGAIN, ETIMEDOUT, EINTR) needs no handling: the caller re-reads the word.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (word, expected);
        std::thread::sleep(timeout.min(std::time::Duration::from_millis(10)));
    }
}

/// Wakes every process and thread sleeping in [`futex_wait`] on `word` (`FUTEX_WAKE`, shared).
/// Not Linux: does nothing (waiters poll).
pub(crate) fn futex_wake(word: &AtomicU32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `word` is a live, aligned 4-byte atomic (invariant 5); FUTEX_WAKE reads no
        // memory of this process beyond using the word's address as the wait key.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = word;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bounds_and_watermark_are_checked() {
        let r = Arc::new(AppendRegion::new(
            MmapRegion::anonymous(8192).unwrap(),
            0,
            0,
        ));
        assert!(r.read(0, 1).is_none(), "nothing published yet");
        assert_eq!(r.read(0, 0), Some(&[][..]));
        let mut w = r.writer().unwrap();
        assert!(r.writer().is_none(), "one writer at a time");
        assert!(w.write(8191, &[1, 2]).is_none());
        assert!(w.write(usize::MAX, &[1, 2]).is_none());
        assert!(w.write(8190, &[1, 2]).is_some());
        assert!(r.read(8190, 2).is_none(), "not published");
        w.publish(usize::MAX);
        assert_eq!(r.published(), 8192);
        assert_eq!(r.read(8190, 2).unwrap(), &[1, 2]);
        assert!(r.read(8190, 3).is_none());
        assert!(
            w.write(8190, &[3]).is_none(),
            "published bytes are immutable"
        );
        w.publish(10);
        assert_eq!(r.published(), 8192, "publish never lowers");
        assert_eq!(r.read_from(8190).unwrap(), &[1, 2]);
        assert!(r.read_from(8193).is_none());
        assert!(r.atomic_u32(0).is_none(), "no atomic prefix");
        drop(w);
        let w2 = r.writer().unwrap();
        assert_eq!(w2.view_from(8190).unwrap(), &[1, 2]);
        drop(w2);
        let mut r = Arc::try_unwrap(r).unwrap();
        r.reset(4096);
        assert_eq!(r.published(), 4096);
        assert_eq!(r.zero_dirty(4096, usize::MAX), Some(4096));
        assert_eq!(r.zero_dirty(4096, usize::MAX), Some(0));
    }

    #[test]
    fn atomic_prefix_is_never_sliced() {
        let r = Arc::new(AppendRegion::new(
            MmapRegion::anonymous(8192).unwrap(),
            64,
            0,
        ));
        assert_eq!(r.published(), 64, "the watermark starts after the words");
        assert!(r.atomic_u32(2).is_none(), "misaligned");
        assert!(r.atomic_u64(60).is_none(), "crosses the prefix end");
        r.atomic_u32(60).unwrap().store(7, Ordering::Release);
        r.atomic_u64(0).unwrap().store(9, Ordering::Release);
        assert!(r.read(60, 4).is_none());
        assert!(r.read_from(0).is_none());
        let mut w = r.writer().unwrap();
        assert!(w.write(60, &[0; 4]).is_none());
        assert!(w.view_from(0).is_none());
        assert!(w.write(64, &[5; 4]).is_some());
        w.publish(68);
        assert_eq!(r.read(64, 4).unwrap(), &[5; 4]);
        assert_eq!(r.atomic_u32(60).unwrap().load(Ordering::Acquire), 7);
    }

    #[test]
    fn refuses_to_map_a_file_of_the_wrong_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        f.set_len(4096).unwrap();
        assert!(MmapRegion::map_file(&f, 8192, true).is_err());
        let r = Arc::new(AppendRegion::new(
            MmapRegion::map_file(&f, 4096, true).unwrap(),
            0,
            0,
        ));
        let mut w = r.writer().unwrap();
        w.write(0, b"lock").unwrap();
        w.publish(4);
        r.mapping().flush_range(0, 4).unwrap();
        let ro = Arc::new(AppendRegion::new(
            MmapRegion::map_file(&f, 4096, false).unwrap(),
            0,
            4,
        ));
        assert!(ro.writer().unwrap().write(4, b"x").is_none(), "read-only");
        assert_eq!(ro.read(0, 4).unwrap(), b"lock");
        let mut ro = Arc::try_unwrap(ro).unwrap();
        assert!(ro.touch_pages(0, 4096, |_, _| Ok(())).is_err());
        assert!(ro.zero_dirty(0, usize::MAX).is_none());

        // pwrite of the mapped file: above the watermark only, seen through the mapping.
        assert!(w.write_file(&f, 2, b"no").is_none(), "below the watermark");
        assert!(w.write_file(&f, 4095, b"no").is_none(), "past the end");
        w.write_file(&f, 4, b"cafe").unwrap().unwrap();
        w.publish(8);
        assert_eq!(r.read(0, 8).unwrap(), b"lockcafe");
        let ro = Arc::new(ro);
        assert!(
            ro.writer().unwrap().write_file(&f, 8, b"x").is_none(),
            "read-only mapping"
        );
    }
}
