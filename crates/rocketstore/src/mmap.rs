//! Memory-mapped regions: the only module of the engine that contains `unsafe`.
//!
//! A [`MmapRegion`] is a fixed-length shared mapping of a store file (or an anonymous mapping used
//! as a transient write buffer). It hands out byte slices and performs raw writes; it knows
//! nothing about records, cursors or files. The callers in `segment` publish watermarks
//! (`wrote`, `committed`, `flushed`) that decide which bytes may be read and which may still be
//! written. The soundness of the `unsafe` blocks below rests on these module invariants, which
//! every caller in the crate upholds (each `// SAFETY:` comment names the one it relies on):
//!
//! 1. **Exclusive directory.** A writable store root is locked with an exclusive `flock` on
//!    `<root>/lock`, so no other process of ours maps its files for writing, and no other code
//!    writes them. Read-only opens of a foreign store do not lock; they document that the files
//!    must not be modified or truncated while they are open (a truncated file raises SIGBUS on
//!    access, which is a crash, not memory corruption).
//! 2. **Never shrink a mapped file.** Files are created at full size (`fallocate`) before they
//!    are mapped, mapped with exactly their length (checked at map time), and never truncated
//!    while mapped: recovery zero-fills a dirty tail instead of calling `set_len`.
//! 3. **Append-only ranges.** Bytes below a published watermark (loaded with `Acquire`) are never
//!    written again while the region is alive, so shared slices over them are sound. Recovery
//!    rewrites bytes above the watermark it recovers, before the store serves any read.
//! 4. **One writer above the watermark.** Bytes at or above a watermark are written only by the
//!    single owner of that region's write side (the commit log's put lock, the dispatcher for a
//!    consume queue or index file, the commit service for a transient buffer), and only through
//!    the raw-pointer methods here, over ranges disjoint from every slice handed to readers.
//!    Words that are rewritten in place while readers may look at them (index headers and hash
//!    slots) are accessed only through atomics ([`MmapRegion::atomic_u32`] /
//!    [`MmapRegion::atomic_u64`]).
//! 5. **Deletion waits for readers.** A region is unmapped only when its owner (an
//!    `Arc<MappedFile>`) is dropped, i.e. after the last reader let go; unlinking the file while
//!    it is still mapped is fine on POSIX systems.
//!
//! Every method bounds-checks its range and returns `None` (or an error) instead of touching
//! memory outside the mapping.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64};

use memmap2::{Advice, MmapOptions, MmapRaw};

/// A fixed-length memory mapping of a file, or an anonymous one.
#[derive(Debug)]
pub(crate) struct MmapRegion {
    raw: MmapRaw,
    len: usize,
    writable: bool,
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
        Ok(Self { raw, len, writable })
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
        })
    }

    /// Length of the mapping in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn check(&self, offset: usize, len: usize) -> Option<()> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(())
    }

    /// A shared view of `[offset, offset + len)`, or `None` if the range leaves the mapping.
    ///
    /// Callers only ask for ranges below a published watermark (invariant 3).
    pub(crate) fn slice(&self, offset: usize, len: usize) -> Option<&[u8]> {
        self.check(offset, len)?;
        if len == 0 {
            return Some(&[]);
        }
        // SAFETY: the range is inside the mapping (checked above), the mapping lives as long as
        // `&self`, and by invariant 3 no byte of a range below a published watermark is written
        // while the region is alive, so no `&mut` or raw write aliases this shared slice.
        Some(unsafe { std::slice::from_raw_parts(self.raw.as_ptr().add(offset), len) })
    }

    /// Copies `data` to `offset`. Returns `None` (and writes nothing) if the range leaves the
    /// mapping or the region is read-only.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Option<()> {
        self.check(offset, data.len())?;
        if !self.writable {
            return None;
        }
        // SAFETY: the destination range is inside the writable mapping (checked above); by
        // invariant 4 the caller is the single writer of this range and no reader holds a slice
        // over it; `data` cannot overlap the destination because readers' slices never cover
        // bytes above the watermark.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.raw.as_mut_ptr().add(offset),
                data.len(),
            );
        }
        Some(())
    }

    /// Runs `f` over a mutable view of `[offset, offset + len)`, for encoding in place.
    /// Returns `None` if the range leaves the mapping or the region is read-only.
    pub(crate) fn write_with<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        self.check(offset, len)?;
        if !self.writable {
            return None;
        }
        if len == 0 {
            return Some(f(&mut []));
        }
        // SAFETY: inside the writable mapping (checked above). By invariant 4 the caller is the
        // only writer of this range and it lies above every published watermark, so no shared
        // slice aliases it; the `&mut` does not escape `f` because of the closure's signature.
        let view =
            unsafe { std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().add(offset), len) };
        Some(f(view))
    }

    /// Fills `[offset, offset + len)` with zeros (recovery of a dirty tail).
    pub(crate) fn zero(&self, offset: usize, len: usize) -> Option<()> {
        self.check(offset, len)?;
        if !self.writable {
            return None;
        }
        // SAFETY: inside the writable mapping (checked above); recovery zero-fills only bytes
        // above the watermark it recovered, before any reader is served (invariant 3 and 4).
        unsafe { std::ptr::write_bytes(self.raw.as_mut_ptr().add(offset), 0, len) };
        Some(())
    }

    /// The 4-byte aligned word at `offset`, viewed as an atomic (index headers and hash slots).
    pub(crate) fn atomic_u32(&self, offset: usize) -> Option<&AtomicU32> {
        self.check(offset, 4)?;
        let ptr = self.raw.as_ptr().wrapping_add(offset);
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<AtomicU32>()) {
            return None;
        }
        // SAFETY: the word is inside the mapping and suitably aligned (checked above); AtomicU32
        // has the layout of u32; shared memory may be accessed atomically from many threads, and
        // by invariant 4 in-place rewritten words are only ever accessed through these atomics.
        Some(unsafe { AtomicU32::from_ptr(ptr.cast_mut().cast::<u32>()) })
    }

    /// The 8-byte aligned word at `offset`, viewed as an atomic.
    pub(crate) fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        self.check(offset, 8)?;
        let ptr = self.raw.as_ptr().wrapping_add(offset);
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<AtomicU64>()) {
            return None;
        }
        // SAFETY: as in `atomic_u32`: in bounds, aligned, same layout as u64, invariant 4.
        Some(unsafe { AtomicU64::from_ptr(ptr.cast_mut().cast::<u64>()) })
    }

    /// Synchronously writes `[offset, offset + len)` back to the file (`msync(MS_SYNC)`).
    pub(crate) fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        if self.check(offset, len).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "flush range out of bounds",
            ));
        }
        self.raw.flush_range(offset, len)
    }

    /// Pre-faults every page for writing (`MADV_POPULATE_WRITE`), so the writer never takes a
    /// page fault on this mapping. Falls back to touching one byte per page when the kernel does
    /// not support the advice.
    ///
    /// Works in 32 MiB steps and stops early when `stop()` returns true (a closing store does
    /// not wait for a whole file to be pre-faulted).
    pub(crate) fn populate_write(&self, stop: &dyn Fn() -> bool) -> io::Result<()> {
        const STEP: usize = 32 << 20;
        let mut at = 0;
        while at < self.len {
            if stop() {
                return Ok(());
            }
            let len = STEP.min(self.len - at);
            match self.raw.advise_range(Advice::PopulateWrite, at, len) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(22) => {
                    self.touch_pages(at, at + len, |_| Ok(()))?
                }
                Err(e) => return Err(e),
            }
            at += len;
        }
        Ok(())
    }

    /// Writes a zero byte at the start of every 4 KiB page in `[from, to)` (RocketMQ's
    /// `warmMappedFile`); `every` is called after each page with the page count so far.
    pub(crate) fn touch_pages(
        &self,
        from: usize,
        to: usize,
        mut every: impl FnMut(usize) -> io::Result<()>,
    ) -> io::Result<()> {
        let to = to.min(self.len);
        let mut pos = from;
        let mut pages = 0usize;
        while pos < to {
            if self.write(pos, &[0]).is_none() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "read-only mapping",
                ));
            }
            pages += 1;
            every(pages)?;
            pos += 4096;
        }
        Ok(())
    }

    /// `madvise(MADV_WILLNEED)` over the whole mapping.
    pub(crate) fn advise_willneed(&self) -> io::Result<()> {
        self.raw.advise(Advice::WillNeed)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn bounds_are_checked() {
        let r = MmapRegion::anonymous(8192).unwrap();
        assert!(r.slice(8190, 3).is_none());
        assert!(r.slice(usize::MAX, 2).is_none());
        assert!(r.write(8191, &[1, 2]).is_none());
        assert!(r.write(8190, &[1, 2]).is_some());
        assert_eq!(r.slice(8190, 2).unwrap(), &[1, 2]);
        assert!(r.atomic_u32(2).is_none());
        assert!(r.atomic_u64(8188).is_none());
        r.atomic_u32(4).unwrap().store(7, Ordering::Release);
        assert_eq!(r.slice(4, 4).unwrap(), &7u32.to_ne_bytes());
        r.zero(0, 8192).unwrap();
        assert_eq!(r.write_with(10, 4, |b| b.len()), Some(4));
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
        let r = MmapRegion::map_file(&f, 4096, true).unwrap();
        r.write(0, b"lock").unwrap();
        r.flush_range(0, 4).unwrap();
        let ro = MmapRegion::map_file(&f, 4096, false).unwrap();
        assert!(ro.write(0, b"x").is_none());
        assert_eq!(ro.slice(0, 4).unwrap(), b"lock");
    }
}
