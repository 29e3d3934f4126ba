//! Memory probes for benchmarks: the floors under the store's random reads and its writes.
//!
//! A key lookup reads a hash slot of an index file, then the index entry it names, then the
//! record that entry points at in the commit log: dependent reads at random places of large
//! mapped files, each a likely cache and TLB miss. [`MappedWords`] maps a file read-only and
//! reads aligned 32-bit words from it with nothing else around them, so a benchmark can time
//! the same chain of reads over the same files and show how much of a lookup is the memory
//! and how much is the store's own code.
//!
//! Every read is an atomic load (`Relaxed`), so the file may be written while it is mapped
//! (by a store, in place: index slots are rewritten) without undefined behaviour; a read then
//! sees whatever the file held. The file must not be truncated while mapped (a read past the
//! new end of file raises SIGBUS, as for any mapping).
//!
//! ```no_run
//! use rocketstore::probe::MappedWords;
//! # fn main() -> std::io::Result<()> {
//! let index = MappedWords::open("store/index/20261126000000000".as_ref())?;
//! let index_count = index.load_u32(36).map(u32::from_be); // the header's indexCount
//! # Ok(()) }
//! ```

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::mmap::{AppendRegion, AppendWriter, MmapRegion};

/// A whole file mapped read-only, read one aligned 32-bit word at a time (see the module docs).
#[derive(Debug)]
pub struct MappedWords {
    /// The whole file is the region's word prefix: read only through atomic loads.
    region: AppendRegion,
}

impl MappedWords {
    /// Maps the whole file at `path` read-only.
    ///
    /// # Errors
    /// Opening or mapping the file failed, or it is empty.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
        Ok(Self {
            region: AppendRegion::new(MmapRegion::map_file(&file, len, false)?, len, len),
        })
    }

    /// Length of the file (and the mapping) in bytes.
    pub fn len(&self) -> usize {
        self.region.mapping().len()
    }

    /// True for an empty mapping (never: empty files are not mapped).
    pub fn is_empty(&self) -> bool {
        self.region.mapping().len() == 0
    }

    /// The 4 bytes of the aligned word holding byte `offset` (`offset` rounded down to a
    /// multiple of 4), as stored (big-endian numbers need `u32::from_be`); `None` past the end.
    pub fn load_u32(&self, offset: usize) -> Option<u32> {
        self.region
            .atomic_u32(offset - offset % 4)
            .map(|w| w.load(Ordering::Relaxed))
    }
}

/// A whole file mapped shared and writable, appended to front to back as the commit log is
/// (through the same `mmap` module types), so a benchmark can time what writing a fresh file
/// through a mapping costs (write faults, or pre-faulting with `MADV_POPULATE_WRITE` from
/// another thread, then `msync`) beside `pwrite` of the same bytes, with no store code around.
///
/// The file must not be truncated while it is mapped (a write past the new end of file raises
/// SIGBUS, as for any mapping).
///
/// ```no_run
/// use rocketstore::probe::MappedAppend;
/// # fn main() -> std::io::Result<()> {
/// let file = std::fs::OpenOptions::new().read(true).write(true).create(true).open("f")?;
/// file.set_len(1 << 20)?;
/// let mut map = MappedAppend::open(&file)?;
/// let pre = map.prefaulter();
/// std::thread::spawn(move || pre.populate_write()).join().ok();
/// assert!(map.append(&[7u8; 4096]));
/// map.sync(0, 4096)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MappedAppend {
    writer: AppendWriter,
}

/// Pre-faults a [`MappedAppend`]'s mapping from any thread (see [`MappedAppend::prefaulter`]).
#[derive(Debug, Clone)]
pub struct Prefaulter {
    region: Arc<AppendRegion>,
}

impl Prefaulter {
    /// Pre-faults every page of the mapping for writing (`MADV_POPULATE_WRITE`, the allocate
    /// service's pre-fault); never changes a byte.
    ///
    /// # Errors
    /// The `madvise` failed.
    pub fn populate_write(&self) -> io::Result<()> {
        self.region.mapping().populate_write(&|| false)
    }
}

impl MappedAppend {
    /// Maps the whole of `file` (opened for reading and writing, not empty) shared.
    ///
    /// # Errors
    /// Reading the length or mapping the file failed, or it is empty.
    pub fn open(file: &File) -> io::Result<Self> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
        let region = Arc::new(AppendRegion::new(
            MmapRegion::map_file(file, len, true)?,
            0,
            0,
        ));
        let writer = region
            .writer()
            .ok_or_else(|| io::Error::other("mapping already claimed"))?;
        Ok(Self { writer })
    }

    /// An anonymous private zero-filled mapping of `len` bytes (fresh memory, as a transient
    /// write buffer is), for the same measurements without a file.
    ///
    /// # Errors
    /// `len` is 0 or the mapping failed.
    pub fn anonymous(len: usize) -> io::Result<Self> {
        let region = Arc::new(AppendRegion::new(MmapRegion::anonymous(len)?, 0, 0));
        let writer = region
            .writer()
            .ok_or_else(|| io::Error::other("mapping already claimed"))?;
        Ok(Self { writer })
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.writer.region().mapping().len()
    }

    /// True for an empty mapping (never: empty files are not mapped).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes appended so far.
    pub fn position(&self) -> usize {
        self.writer.published()
    }

    /// A handle that pre-faults this mapping from another thread.
    pub fn prefaulter(&self) -> Prefaulter {
        Prefaulter {
            region: Arc::clone(self.writer.region()),
        }
    }

    /// Copies `data` into the mapping at [`MappedAppend::position`] and moves past it; false
    /// (writing nothing) if it does not fit.
    pub fn append(&mut self, data: &[u8]) -> bool {
        let at = self.position();
        if self.writer.write(at, data).is_none() {
            return false;
        }
        self.writer.publish(at + data.len());
        true
    }

    /// `msync(MS_SYNC)` of `[offset, offset + len)`, as the flush service does.
    ///
    /// # Errors
    /// The range leaves the mapping, or the `msync` failed.
    pub fn sync(&self, offset: usize, len: usize) -> io::Result<()> {
        self.writer.region().mapping().flush_range(offset, len)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_aligned_words_and_stops_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8, 0, 0, 7, 1, 2, 3, 4]).unwrap();
        let m = MappedWords::open(&path).unwrap();
        assert_eq!(m.len(), 8);
        assert!(!m.is_empty());
        assert_eq!(m.load_u32(0).map(u32::from_be), Some(7));
        assert_eq!(m.load_u32(6), Some(u32::from_ne_bytes([1, 2, 3, 4])));
        assert_eq!(m.load_u32(8), None);
        assert_eq!(m.load_u32(usize::MAX), None);
        std::fs::write(dir.path().join("empty"), []).unwrap();
        assert!(MappedWords::open(&dir.path().join("empty")).is_err());
    }

    #[test]
    fn appends_through_the_mapping_up_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(8192).unwrap();
        let mut m = MappedAppend::open(&file).unwrap();
        assert_eq!((m.len(), m.is_empty(), m.position()), (8192, false, 0));
        let pre = m.prefaulter();
        std::thread::spawn(move || pre.populate_write())
            .join()
            .unwrap()
            .unwrap();
        assert!(m.append(&[1; 4096]));
        assert!(m.append(&[2; 4000]));
        assert!(!m.append(&[3; 200]), "past the end");
        assert_eq!(m.position(), 8096);
        m.sync(0, 8192).unwrap();
        assert!(m.sync(1, 8192).is_err());
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(&on_disk[..4096], &[1; 4096][..]);
        assert_eq!(&on_disk[4096..8096], &[2; 4000][..]);
        let mut anon = MappedAppend::anonymous(8192).unwrap();
        anon.prefaulter().populate_write().unwrap();
        assert!(anon.append(&[4; 8192]));
        assert!(MappedAppend::anonymous(0).is_err());
    }
}
