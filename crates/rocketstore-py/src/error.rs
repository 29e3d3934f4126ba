//! Engine errors → Python exceptions.
//!
//! The exception classes are defined in Python (`python/rocketstore/exceptions.py`) so that
//! they can inherit from two bases (`StoreIOError(MessageStoreError, OSError)`, ...); this
//! module imports them with `import_exception!` and sets their documented attributes.
//!
//! [`map_error`] is the only place that decides which exception an engine error becomes.

use std::fmt::Display;
use std::path::Path;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use rocketstore::Error;

pub(crate) mod exc {
    //! The Python-defined exception classes, as Rust types.
    pyo3::import_exception!(rocketstore.exceptions, MessageStoreError);
    pyo3::import_exception!(rocketstore.exceptions, StoreIOError);
    pyo3::import_exception!(rocketstore.exceptions, DiskFullError);
    pyo3::import_exception!(rocketstore.exceptions, CorruptionError);
    pyo3::import_exception!(rocketstore.exceptions, StorePoisonedError);
    pyo3::import_exception!(rocketstore.exceptions, StoreClosedError);
    pyo3::import_exception!(rocketstore.exceptions, StoreLockedError);
    pyo3::import_exception!(rocketstore.exceptions, StoreReadOnlyError);
    pyo3::import_exception!(rocketstore.exceptions, OffsetOutOfRangeError);
    pyo3::import_exception!(rocketstore.exceptions, UnsupportedFormatError);
    pyo3::import_exception!(rocketstore.exceptions, StoreForkedError);
    pyo3::import_exception!(rocketstore.exceptions, InvalidConfigError);
    pyo3::import_exception!(rocketstore.exceptions, InvalidMessageError);
    pyo3::import_exception!(rocketstore.exceptions, MessageTooLargeError);
}

/// Every exception class the native module raises, by name.
const EXCEPTION_NAMES: [&str; 14] = [
    "MessageStoreError",
    "StoreIOError",
    "DiskFullError",
    "CorruptionError",
    "StorePoisonedError",
    "StoreClosedError",
    "StoreLockedError",
    "StoreReadOnlyError",
    "OffsetOutOfRangeError",
    "UnsupportedFormatError",
    "StoreForkedError",
    "InvalidConfigError",
    "InvalidMessageError",
    "MessageTooLargeError",
];

/// Imports `rocketstore.exceptions` and checks that every class exists, so that raising one
/// later can never fail (`import_exception!` panics if its import fails, and a panic must not
/// reach Python). Also re-exports the classes from the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let module = py.import("rocketstore.exceptions")?;
    for name in EXCEPTION_NAMES {
        let cls = module.getattr(name)?;
        m.add(name, cls)?;
    }
    // Resolve (and cache) each type object now that the import is known to work.
    let _ = (
        py.get_type::<exc::MessageStoreError>(),
        py.get_type::<exc::StoreIOError>(),
        py.get_type::<exc::DiskFullError>(),
        py.get_type::<exc::CorruptionError>(),
        py.get_type::<exc::StorePoisonedError>(),
        py.get_type::<exc::StoreClosedError>(),
        py.get_type::<exc::StoreLockedError>(),
        py.get_type::<exc::StoreReadOnlyError>(),
        py.get_type::<exc::OffsetOutOfRangeError>(),
        py.get_type::<exc::UnsupportedFormatError>(),
        py.get_type::<exc::StoreForkedError>(),
        py.get_type::<exc::InvalidConfigError>(),
        py.get_type::<exc::InvalidMessageError>(),
        py.get_type::<exc::MessageTooLargeError>(),
    );
    Ok(())
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Sets attributes on the exception instance of `err`. Failing to set one (it cannot, for
/// these plain Python classes) must not replace the error being raised, so failures are
/// ignored.
fn with_attrs<'py, V>(
    py: Python<'py>,
    err: PyErr,
    attrs: impl IntoIterator<Item = (&'static str, V)>,
) -> PyErr
where
    V: IntoPyObject<'py>,
{
    {
        let value = err.value(py);
        for (name, v) in attrs {
            let _ = value.setattr(name, v);
        }
    }
    err
}

/// A Python-side optional value for exception attributes.
#[derive(Debug, Clone, IntoPyObject)]
enum Attr {
    Int(i64),
    UInt(u64),
    Str(String),
    None(Option<i64>),
}

/// `os.strerror(errno)`, for `OSError.strerror`.
fn strerror(py: Python<'_>, errno: Option<i32>) -> Attr {
    errno
        .and_then(|n| {
            let os = py.import("os").ok()?;
            os.call_method1("strerror", (n,))
                .ok()?
                .extract::<String>()
                .ok()
        })
        .map_or(Attr::None(None), Attr::Str)
}

/// What a Python user changes to get past `e`, naming the keyword (appended to the message).
fn keyword_hint(e: &Error) -> Option<String> {
    match e {
        Error::MessageTooLarge { field, .. } if *field != "properties" => Some(
            " (the limit is the store's max_message_size keyword: \
             MessageStore(path, max_message_size=...))"
                .into(),
        ),
        Error::MessageTooLarge { .. } => {
            Some(" (RocketMQ's fixed limit for the encoded properties)".into())
        }
        Error::Locked { .. } => Some(
            " (another process, or another open handle in this process: one writer per \
             store); close that handle, or open this one with read_only=True to read \
             without the lock"
                .into(),
        ),
        Error::UnsupportedFormat { path, reason } if reason.contains("bytes, expected") => {
            let under = |dir: &str| path.components().any(|c| c.as_os_str() == dir);
            let keyword = if under("consumequeue") {
                "mapped_file_size_consume_queue"
            } else if under("index") {
                "max_hash_slot_num and max_index_num"
            } else if under("commitlog") {
                "mapped_file_size_commit_log"
            } else {
                return None;
            };
            Some(format!(
                " (the store was written with another geometry: open it with the {keyword} \
                 keyword it was written with)"
            ))
        }
        _ => None,
    }
}

/// An Arrow read's error ([`rocketstore_arrow::Error`]): the engine's as [`map_error`] maps
/// it, a batch Arrow rejects as `ValueError` with the reason.
pub(crate) fn map_arrow_error(py: Python<'_>, e: &rocketstore_arrow::Error) -> PyErr {
    match e {
        rocketstore_arrow::Error::Store(e) => map_error(py, e),
        other => pyo3::exceptions::PyValueError::new_err(other.to_string()),
    }
}

/// Converts an engine error into the matching Python exception (see `exceptions.py`).
///
/// The message is the error's `Display` plus its source chain.
pub(crate) fn map_error(py: Python<'_>, e: &Error) -> PyErr {
    let mut msg = rocketstore::message_with_sources(e);
    if let Some(hint) = keyword_hint(e) {
        msg.push_str(&hint);
    }
    match e {
        Error::Io { op, path, source } => {
            let errno = source
                .raw_os_error()
                .map_or(Attr::None(None), |n| Attr::Int(i64::from(n)));
            with_attrs(
                py,
                exc::StoreIOError::new_err(msg),
                [
                    ("errno", errno),
                    ("strerror", strerror(py, source.raw_os_error())),
                    ("filename", Attr::Str(path_str(path))),
                    ("op", Attr::Str((*op).to_string())),
                ],
            )
        }
        Error::DiskFull { path, reason: _ } => {
            let errno = e
                .raw_os_error()
                .map_or(Attr::None(None), |n| Attr::Int(i64::from(n)));
            with_attrs(
                py,
                exc::DiskFullError::new_err(msg),
                [
                    ("errno", errno),
                    ("strerror", strerror(py, e.raw_os_error())),
                    ("filename", Attr::Str(path_str(path))),
                ],
            )
        }
        Error::Corruption { file, offset, kind } => with_attrs(
            py,
            exc::CorruptionError::new_err(msg),
            [
                ("file", Attr::Str(path_str(file))),
                ("offset", Attr::UInt(*offset)),
                ("kind", Attr::Str(kind.to_string())),
            ],
        ),
        Error::InvalidArgument { field, reason: _ } => with_attrs(
            py,
            exc::InvalidMessageError::new_err(msg),
            [("field", Attr::Str((*field).to_string()))],
        ),
        Error::Config { key, reason: _ } => with_attrs(
            py,
            exc::InvalidConfigError::new_err(msg),
            [("key", Attr::Str(key.clone()))],
        ),
        Error::MessageTooLarge {
            field,
            size,
            max,
            index,
        } => with_attrs(
            py,
            exc::MessageTooLargeError::new_err(msg),
            [
                ("field", Attr::Str((*field).to_string())),
                ("size", Attr::UInt(*size as u64)),
                ("max", Attr::UInt(*max as u64)),
                (
                    "index",
                    index.map_or(Attr::None(None), |i| Attr::UInt(i as u64)),
                ),
            ],
        ),
        Error::OffsetOutOfRange {
            requested,
            min,
            max,
        } => with_attrs(
            py,
            exc::OffsetOutOfRangeError::new_err(msg),
            [
                ("requested", Attr::Int(*requested)),
                ("min", Attr::Int(*min)),
                ("max", Attr::Int(*max)),
            ],
        ),
        Error::Poisoned { cause } => {
            let err = exc::StorePoisonedError::new_err(msg);
            // The cause cannot be another `Poisoned` in practice; if it were, recursion would
            // still end because each level is a strictly smaller value.
            err.set_cause(py, Some(map_error(py, cause)));
            err
        }
        Error::BackgroundPanic { service: _ } => exc::StorePoisonedError::new_err(msg),
        Error::Closed => exc::StoreClosedError::new_err(msg),
        Error::Locked { path } => with_attrs(
            py,
            exc::StoreLockedError::new_err(msg),
            [("path", path_str(path))],
        ),
        Error::ReadOnly { path } => with_attrs(
            py,
            exc::StoreReadOnlyError::new_err(msg),
            [("path", path_str(path))],
        ),
        Error::UnsupportedFormat { path, reason: _ } => with_attrs(
            py,
            exc::UnsupportedFormatError::new_err(msg),
            [("path", path_str(path))],
        ),
        // `rocketstore::Error` is `#[non_exhaustive]`: the engine may add variants in a minor
        // release, and this crate must still compile then. Until a variant gets its own
        // class above, it is raised as the root class, which every caller already catches.
        _ => exc::MessageStoreError::new_err(msg),
    }
}

/// `InvalidMessageError` for an argument the binding rejects while converting it.
pub(crate) fn invalid_message(
    field: &'static str,
    index: Option<usize>,
    reason: impl Display,
) -> PyErr {
    let msg = match index {
        Some(i) => format!("invalid {field}: message {i}: {reason}"),
        None => format!("invalid {field}: {reason}"),
    };
    Python::attach(|py| {
        with_attrs(
            py,
            exc::InvalidMessageError::new_err(msg),
            [("field", field)],
        )
    })
}

/// `TypeError` for an argument of the wrong Python type.
pub(crate) fn type_error(field: &str, index: Option<usize>, reason: impl Display) -> PyErr {
    match index {
        Some(i) => PyTypeError::new_err(format!("message {i}: {field} {reason}")),
        None => PyTypeError::new_err(format!("{field} {reason}")),
    }
}

/// `StoreForkedError` for a handle used in a process other than the one that opened it.
pub(crate) fn forked(what: &str, opened_in: u32) -> PyErr {
    exc::StoreForkedError::new_err(format!(
        "this {what} was opened in process {opened_in} and cannot be used in process {} (it was \
         inherited through fork); open the store in the process that uses it, e.g. inside the \
         PySpark task",
        std::process::id()
    ))
}

/// `CorruptionError` of data outside any file (a body given to `decompress_body`), or at a
/// commit log offset.
pub(crate) fn corruption(py: Python<'_>, msg: String, offset: Option<u64>, kind: &str) -> PyErr {
    with_attrs(
        py,
        exc::CorruptionError::new_err(msg),
        [
            ("offset", offset.map_or(Attr::None(None), Attr::UInt)),
            ("kind", Attr::Str(kind.to_string())),
        ],
    )
}

/// `InvalidConfigError` with `.key` and `.suggestions`.
pub(crate) fn invalid_config(
    py: Python<'_>,
    key: &str,
    msg: String,
    suggestions: Vec<String>,
) -> PyErr {
    let err = exc::InvalidConfigError::new_err(msg);
    {
        let value = err.value(py);
        let _ = value.setattr("key", key);
        if let Ok(t) = PyTuple::new(py, suggestions) {
            let _ = value.setattr("suggestions", t);
        }
    }
    err
}

/// `InvalidMessageError` whose `.field` is not a static name (an unknown dict key or column).
pub(crate) fn invalid_message_field(field: &str, msg: String) -> PyErr {
    Python::attach(|py| {
        with_attrs(
            py,
            exc::InvalidMessageError::new_err(msg),
            [("field", field)],
        )
    })
}
