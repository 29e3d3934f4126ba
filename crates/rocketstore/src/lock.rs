//! The store directory's lock file (RocketMQ's `lock`): one writable open (a `Store` or an
//! offline repair) per root at a time, across processes and across implementations. Two locks
//! are held for as long as the returned file is open:
//!
//! - an advisory `flock` (what earlier rocketstore versions take), and
//! - an exclusive `fcntl` record lock on the whole file, what a RocketMQ broker takes with
//!   `FileChannel.tryLock` (on Linux `flock` and `fcntl` locks do not see each other, so a
//!   broker and a rocketstore writer would otherwise both open one store for writing). It is an
//!   open-file-description lock, so a second open in this process is refused too, and closing an
//!   unrelated descriptor of the file does not drop it.
//!
//! The file holds the bytes `lock` as RocketMQ writes them. Read-only opens take no lock.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Creates (if needed) and locks `root/lock`.
///
/// # Errors
/// [`Error::Locked`] if another open (ours, or a broker's) holds it; I/O errors.
pub(crate) fn take_lock(root: &Path) -> Result<File> {
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
    match crate::mmap::try_lock_record(&f) {
        Ok(true) => {}
        Ok(false) => return Err(Error::Locked { path }),
        Err(e) => return Err(Error::io("fcntl lock", &path, e)),
    }
    // RocketMQ writes "lock" at position 0.
    let _ = f.seek(SeekFrom::Start(0));
    f.write_all(b"lock")
        .map_err(|e| Error::io("write", &path, e))?;
    Ok(f)
}
