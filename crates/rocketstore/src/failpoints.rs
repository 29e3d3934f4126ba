//! Failpoint names and the error an injected failure produces.
//!
//! With the cargo feature `failpoints`, every name below can be configured through the `fail`
//! crate (`fail::cfg("mapped_file::flush::msync", "return(EIO)")`); without it the points
//! compile to nothing. The value passed to `return(...)` picks the errno: `EIO` (default),
//! `ENOSPC`, `EFBIG`, `EROFS`.

use std::io;
use std::path::Path;

use crate::error::Error;

/// `open(O_CREAT|O_EXCL)` of a new mapped file.
pub const CREATE_OPEN: &str = "mapped_file::create::open";
/// `fallocate` of a new mapped file.
pub const CREATE_FALLOCATE: &str = "mapped_file::create::fallocate";
/// `fsync` of a new file and its directory.
pub const CREATE_FSYNC: &str = "mapped_file::create::fsync";
/// `mmap` of a file.
pub const MAP: &str = "mapped_file::map::mmap";
/// `msync` of a flush.
pub const FLUSH_MSYNC: &str = "mapped_file::flush::msync";
/// Write (`pwrite`) of the transient buffer into the file (commit).
pub const COMMIT_COPY: &str = "mapped_file::commit::copy";
/// Write (`pwrite`) of staged records into the file (`pwrite_commit_log`).
pub const STAGE_WRITE: &str = "mapped_file::stage::write";
/// Writing the checkpoint file.
pub const CHECKPOINT_WRITE: &str = "checkpoint::write";
/// Unlinking a file.
pub const UNLINK: &str = "mapped_file::destroy::unlink";
/// `msync` of an index file (its flush, or recovery's cut).
pub const INDEX_MSYNC: &str = "index::flush::msync";
/// `fsync` of a directory (a created or removed file, the checkpoint's rename, the abort file).
pub const DIR_FSYNC: &str = "util::fsync_dir";
/// `fsync` of the new checkpoint (`checkpoint.tmp`) before its rename.
pub const CHECKPOINT_FSYNC: &str = "checkpoint::fsync";
/// `rename` of `checkpoint.tmp` over the checkpoint.
pub const CHECKPOINT_RENAME: &str = "checkpoint::rename";

/// Every failpoint name, for sweeps.
pub const ALL: &[&str] = &[
    CREATE_OPEN,
    CREATE_FALLOCATE,
    CREATE_FSYNC,
    MAP,
    FLUSH_MSYNC,
    COMMIT_COPY,
    STAGE_WRITE,
    CHECKPOINT_WRITE,
    UNLINK,
    INDEX_MSYNC,
    DIR_FSYNC,
    CHECKPOINT_FSYNC,
    CHECKPOINT_RENAME,
];

/// The error an injected failure at `op` on `path` produces; `arg` is the failpoint's value.
#[allow(dead_code)]
pub(crate) fn injected(op: &'static str, path: &Path, arg: Option<String>) -> Error {
    let errno = match arg.as_deref().map(str::trim) {
        Some("ENOSPC") => rustix::io::Errno::NOSPC,
        Some("EFBIG") => rustix::io::Errno::FBIG,
        Some("EROFS") => rustix::io::Errno::ROFS,
        _ => rustix::io::Errno::IO,
    };
    Error::io(op, path, io::Error::from_raw_os_error(errno.raw_os_error()))
}
