//! The engine's error type.
//!
//! `Err` means an operation did not happen, or the store can no longer be used. Outcomes that
//! RocketMQ reports as statuses (a put whose sync flush timed out, a get that found nothing) are
//! values ([`crate::PutStatus`], [`crate::GetStatus`]), never errors.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// What is wrong with damaged on-disk data.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptionKind {
    /// A record's magic code is not a RocketMQ magic code.
    BadMagic,
    /// A body or whole-record CRC does not match.
    CrcMismatch,
    /// The data ends in the middle of a structure.
    Truncated,
    /// A length field is impossible.
    BadLength,
    /// Anything else the decoders reject, described.
    Invalid(String),
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionKind::BadMagic => f.write_str("bad magic code"),
            CorruptionKind::CrcMismatch => f.write_str("CRC mismatch"),
            CorruptionKind::Truncated => f.write_str("truncated data"),
            CorruptionKind::BadLength => f.write_str("impossible length"),
            CorruptionKind::Invalid(s) => f.write_str(s),
        }
    }
}

/// Every error the engine returns. New variants may be added in minor releases.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed. `op` names it (`"open"`, `"mmap"`, `"msync"`, `"fallocate"`, ...).
    #[error("{op} failed on {path}: {source}")]
    Io {
        /// The operation that failed.
        op: &'static str,
        /// The file or directory it failed on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The disk is full (ENOSPC), or its usage is above `disk_space_warning_level_ratio`.
    #[error("disk full at {path}: {reason}")]
    DiskFull {
        /// The store path whose disk is full.
        path: PathBuf,
        /// What reported it.
        reason: String,
    },
    /// On-disk data is damaged where it must not be.
    #[error("corruption in {file} at offset {offset}: {kind}")]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// The offset of the damage (absolute commit log offset for commit log files).
        offset: u64,
        /// What is wrong.
        kind: CorruptionKind,
    },
    /// An argument is invalid; nothing was written.
    #[error("invalid {field}: {reason}")]
    InvalidArgument {
        /// The argument's name (`topic`, `queue_id`, `properties`, ...).
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A configuration value is invalid.
    #[error("invalid configuration {key}: {reason}")]
    Config {
        /// The configuration key.
        key: String,
        /// Why it was refused.
        reason: String,
    },
    /// A message (body, properties or whole record) is larger than allowed; nothing was written.
    #[error("{field} too large{}: {size} bytes, the maximum is {max}", in_message(.index))]
    MessageTooLarge {
        /// Which part is too large (`body`, `properties`, `record`).
        field: &'static str,
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
        /// The message's index in a batch of several (`None` for a single message).
        index: Option<usize>,
    },
    /// A read asked for an offset outside the data.
    #[error("offset {requested} is out of range [{min}, {max})")]
    OffsetOutOfRange {
        /// The requested offset.
        requested: i64,
        /// The smallest valid offset.
        min: i64,
        /// One past the largest valid offset.
        max: i64,
    },
    /// An earlier failure (a failed flush, a background panic) fenced the store. Reopen it:
    /// recovery then runs from what is really on disk.
    #[error("store is poisoned by an earlier failure: {cause}")]
    Poisoned {
        /// The first failure.
        cause: Arc<Error>,
    },
    /// The store was closed.
    #[error("store is closed")]
    Closed,
    /// Another process holds the store's lock.
    #[error("store {path} is locked by another writer")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The store was opened read-only and the operation would write.
    #[error("store {path} is open read-only")]
    ReadOnly {
        /// The store root.
        path: PathBuf,
    },
    /// The directory holds something this engine does not read (RocksDB consume queues, DLedger
    /// commit logs, files of unexpected names or sizes).
    #[error("unsupported store format at {path}: {reason}")]
    UnsupportedFormat {
        /// The offending path.
        path: PathBuf,
        /// What was found.
        reason: String,
    },
    /// A background service thread panicked.
    #[error("background service rs-{service} panicked")]
    BackgroundPanic {
        /// The service's name.
        service: &'static str,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::StorageFull
            || source.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
        {
            return Error::DiskFull {
                path,
                reason: format!("{op}: {source}"),
            };
        }
        Error::Io { op, path, source }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn corruption(file: impl Into<PathBuf>, offset: u64, kind: CorruptionKind) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            kind,
        }
    }

    /// True if the same call may succeed later without reopening the store (disk full, lock
    /// held by another process).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::DiskFull { .. } | Error::Locked { .. })
    }

    /// True if the store cannot be used any more and must be reopened (or repaired).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Poisoned { .. } | Error::Corruption { .. } | Error::BackgroundPanic { .. }
        )
    }

    /// The errno of an I/O error, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            Error::DiskFull { .. } => Some(rustix::io::Errno::NOSPC.raw_os_error()),
            _ => None,
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `" (message {i})"` for a message of a batch, `""` otherwise.
fn in_message(index: &Option<usize>) -> String {
    index.map_or_else(String::new, |i| format!(" (message {i})"))
}

/// `Display` of an error followed by every `source()` in its chain that the text does not
/// already contain (delta-rs `DisplaySourceChain`): the message the bindings (Python
/// exceptions, Java exceptions) show.
///
/// ```
/// let e = rocketstore::Error::Closed;
/// assert_eq!(rocketstore::message_with_sources(&e), e.to_string());
/// ```
pub fn message_with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}
