//! The store directory's lock file (RocketMQ's `lock`): one writable open (a `Store` or an
//! offline repair) per root at a time, across processes. The lock is an advisory `flock` held for
//! as long as the returned file is open; the file holds the bytes `lock` as RocketMQ writes them.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Creates (if needed) and locks `root/lock`.
///
/// # Errors
/// [`Error::Locked`] if another open holds it; I/O errors.
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
    // RocketMQ writes "lock" at position 0.
    let _ = f.seek(SeekFrom::Start(0));
    f.write_all(b"lock")
        .map_err(|e| Error::io("write", &path, e))?;
    Ok(f)
}
