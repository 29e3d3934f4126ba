//! A memory-read probe for benchmarks: the floor under the store's random reads.
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

use crate::mmap::{AppendRegion, MmapRegion};

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
}
