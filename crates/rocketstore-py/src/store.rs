//! `MessageStore` and its scan iterator.
//!
//! Rules kept here (architecture §4.5, §4.6):
//! - Every call that does I/O or may wait runs detached from the interpreter (`py.detach`).
//! - The handle's mutex is held only to clone the `Arc<Store>` out (or take it, in `close`);
//!   never while calling Python and never while detached.
//! - A handle records the process that opened it; used from another process (a forked child)
//!   it raises `StoreForkedError`, and it never closes or drops the parent's store there.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use rocketstore::bulk::compress_messages;
use rocketstore::compression::{BodyCodec, CompressOptions};
use rocketstore::{Error, GetStatus, Scanner, Store, StoredMessage};

use crate::arrow;
use crate::arrow_read::{message_batch, projection};
use crate::compression::compress_options;
use crate::config::{config_from_kwargs, config_values};
use crate::convert::{arg, MessageBuilder};
use crate::convert::{
    message_from_mapping, to_i32, At, Message, OwnedMessage, PutArgs, PutResult, Views,
};
use crate::error::{forked, invalid_message, map_arrow_error, map_error};
use crate::read::{pull_waits, stats_dict, GetResult};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::PyRecordBatch;
use rocketstore_arrow::arrow_read;

/// Messages fetched from the engine per round trip when iterating a scan.
const SCAN_BATCH: usize = 1024;

/// How often a `pull` waiting on the main thread wakes up to let Python handle signals.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// True when called on Python's main thread (the only one that handles signals).
fn is_main_thread(py: Python<'_>) -> PyResult<bool> {
    let threading = py.import("threading")?;
    let current = threading.call_method0("get_ident")?;
    let main = threading.call_method0("main_thread")?.getattr("ident")?;
    current.eq(main)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned mutex only means another thread panicked while holding it; the guarded
    // values (an Option<Arc<..>>, a cursor) are consistent at every point, so keep going.
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// A RocketMQ-compatible message store rooted at a directory.
///
/// ``MessageStore(path, *, read_only=False, **config)`` opens the store, creating the directory
/// if needed, and recovers it. ``config`` keywords are the fields of
/// :func:`rocketstore.config_fields` (for example ``mapped_file_size_commit_log=64 * 1024``
/// or ``flush_disk_type="SYNC_FLUSH"``). ``read_only=True`` opens any RocketMQ store without
/// changing a byte (no lock or abort file is created) and refuses writes.
///
/// One process may have a directory open for writing; a second one gets
/// :class:`StoreLockedError`. The handle is a context manager and is thread-safe: calls release
/// the GIL while they do I/O. It belongs to the process that opened it; after ``fork()`` the
/// child gets :class:`StoreForkedError` and must open its own.
///
/// Example:
///
/// ```python
/// import rocketstore
///
/// with rocketstore.MessageStore("/tmp/demo-store") as store:
///     r = store.put("TopicTest", b"hello", tags="TagA", keys=["k1"])
///     print(store.look_message_by_offset(r.commitlog_offset).body)  # b'hello'
///     for msg in store.scan():
///         print(msg.topic, msg.queue_offset, msg.body)
/// ```
#[pyclass(module = "rocketstore._native", subclass, frozen, weakref)]
#[derive(Debug)]
pub(crate) struct MessageStore {
    inner: Mutex<Option<Arc<Store>>>,
    pid: u32,
    path: PathBuf,
    read_only: bool,
}

/// This process's id, kept by the binding so that the fork check of every call does not ask
/// the kernel (`getpid()` is a system call, ~0.3 us on a VM: as much as a key lookup's own
/// work). Set when the module is imported and again in every child forked through Python
/// (`os.register_at_fork`, which `os.fork()` and `multiprocessing` run); 0 (ask the kernel)
/// when that hook could not be registered. A child forked by C code that runs Python code
/// must call `PyOS_AfterFork_Child`, which runs the hook too.
static PID: AtomicU32 = AtomicU32::new(0);

/// The current process id (see [`PID`]).
fn current_pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => std::process::id(),
        pid => pid,
    }
}

/// Run by Python in a forked child (`os.register_at_fork(after_in_child=...)`).
#[pyfunction]
fn _after_fork_in_child() {
    PID.store(std::process::id(), Ordering::Relaxed);
}

/// Registers the fork hook that keeps [`PID`] (at import).
pub(crate) fn register_fork_hook(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let hook = wrap_pyfunction!(_after_fork_in_child, m)?;
    if let Ok(register) = py.import("os")?.getattr("register_at_fork") {
        let kwargs = PyDict::new(py);
        kwargs.set_item("after_in_child", hook)?;
        register.call((), Some(&kwargs))?;
        PID.store(std::process::id(), Ordering::Relaxed);
    }
    Ok(())
}

impl MessageStore {
    fn check_pid(&self) -> PyResult<()> {
        if current_pid() != self.pid {
            return Err(forked("MessageStore", self.pid));
        }
        Ok(())
    }

    /// The open store, or `StoreClosedError`.
    pub(crate) fn store(&self, py: Python<'_>) -> PyResult<Arc<Store>> {
        self.check_pid()?;
        match lock(&self.inner).as_ref() {
            Some(s) => Ok(Arc::clone(s)),
            None => Err(map_error(py, &Error::Closed)),
        }
    }

    /// Runs `f` on the store detached from the interpreter, mapping its error.
    fn enter<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&Store) -> rocketstore::Result<T> + Send,
    {
        let store = self.store(py)?;
        py.detach(move || f(&store)).map_err(|e| map_error(py, &e))
    }

    /// Puts `msgs`, their bodies first compressed by `compress` if given.
    fn put_owned_compressed(
        &self,
        py: Python<'_>,
        msgs: Vec<OwnedMessage>,
        compress: Option<CompressOptions>,
    ) -> PyResult<Vec<rocketstore::PutResult>> {
        self.enter(py, move |store| {
            let views = Views::new(&msgs);
            let mut batch = views.messages(&msgs);
            let mut arena = Vec::new();
            if let Some(c) = &compress {
                // The level was checked when the options were made.
                let _ = compress_messages(c, &mut BodyCodec::default(), &mut batch, &mut arena);
            }
            match batch.as_slice() {
                [one] => store.put(one).map(|r| vec![r]),
                batch => store.put_batch(batch),
            }
        })
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        let inner = match self.inner.get_mut() {
            Ok(g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        let Some(store) = inner else { return };
        if std::process::id() != self.pid {
            // A forked child: the store's threads do not exist here and its files belong to the
            // parent, so closing it (flush, checkpoint, remove the abort file, join threads)
            // would corrupt the parent's state or hang. Leak it instead; the child's memory goes
            // away with the child.
            std::mem::forget(store);
            return;
        }
        // A handle collected without close(): dropping the last reference closes the store
        // (flush, checkpoint, join the threads), which may take a while, so release the GIL
        // for it when the interpreter allows (not during its shutdown).
        let _ = Python::try_attach(move |py| py.detach(move || drop(store)));
    }
}

/// Converts an offset argument; negative values are out of range (never wrapped to huge ones).
fn offset_arg(py: Python<'_>, store: &Store, offset: i64) -> PyResult<u64> {
    u64::try_from(offset).map_err(|_| {
        let e = Error::OffsetOutOfRange {
            requested: offset,
            min: i64::try_from(store.min_commitlog_offset()).unwrap_or(i64::MAX),
            max: i64::try_from(store.max_commitlog_offset()).unwrap_or(i64::MAX),
        };
        map_error(py, &e)
    })
}

#[pymethods]
impl MessageStore {
    #[new]
    #[pyo3(signature = (path, *, read_only = false, **config))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        read_only: bool,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = config_from_kwargs(py, config)?;
        if std::fs::metadata(&path).is_ok_and(|m| !m.is_dir()) {
            // Said before the engine tries to create directories in it ("mkdir ... exists").
            let e = Error::Io {
                op: "open",
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "it is a file, not a directory (a store is a directory holding commitlog/)",
                ),
            };
            let err = map_error(py, &e);
            // ENOTDIR (20 on Linux and macOS): `except NotADirectoryError`-style checks of
            // `errno` see what happened.
            let _ = err.value(py).setattr("errno", 20);
            return Err(err);
        }
        let root = path.clone();
        let store = py
            .detach(move || {
                if read_only {
                    Store::open_read_only(&root, config)
                } else {
                    Store::open(&root, config)
                }
            })
            .map_err(|e| map_error(py, &e))?;
        Ok(MessageStore {
            inner: Mutex::new(Some(Arc::new(store))),
            pid: std::process::id(),
            path,
            read_only,
        })
    }

    /// Puts one message and returns its :class:`PutResult`.
    ///
    /// ``topic`` is 1-255 characters of ``[%|a-zA-Z0-9_-]`` (topics over 127 characters are
    /// written as RocketMQ V2 records); ``body`` is bytes-like (bytes, bytearray, memoryview),
    /// at most ``max_message_size`` bytes. ``queue_id`` must be below
    /// ``max_queue_nums_per_topic``. ``tags`` is a str; ``keys`` a str (stored as is, e.g.
    /// ``"order-1 order-2"``; the index splits it on spaces, like RocketMQ's
    /// ``Message.setKeys(String)``) or a list of str joined with one space (an element containing
    /// a space is refused: it would read back as several keys); ``properties`` a mapping of str to str (reserved names such as ``TAGS``, ``KEYS``
    /// or ``DELAY`` are refused; use the matching argument). ``born_timestamp`` is epoch
    /// milliseconds (default: now); ``born_host``/``store_host`` are ``"ip:port"`` strings
    /// (default: the configured ``store_host``).
    ///
    /// ``delay_level`` (1-based, RocketMQ's ``messageDelayLevel`` table) stores the message in
    /// ``SCHEDULE_TOPIC_XXXX`` queue ``delay_level - 1`` with the ``REAL_TOPIC``, ``REAL_QID``
    /// and ``DELAY`` properties, as a broker does. ``transaction`` is ``None`` (an ordinary
    /// message), ``"prepared"`` (a half message: no consume queue entry, queue offset 0),
    /// ``"commit"`` or ``"rollback"`` (no consume queue entry); a prepared message also gets the
    /// ``TRAN_MSG=true`` property, and ``PGROUP=<producer_group>`` when ``producer_group`` is
    /// given, as a RocketMQ producer sets them on a half message;
    /// ``prepared_transaction_offset`` is the commit log offset of the half message a commit or
    /// rollback record refers to.
    ///
    /// ``compression`` (``"lz4"``, ``"zstd"`` or ``"zlib"``; default ``None``) compresses a
    /// body of at least ``compress_over`` bytes (default 4096) at ``compress_level`` (default
    /// 5) as a RocketMQ producer does, exactly like :meth:`put_batch`'s arguments of the same
    /// names; reads return it as stored unless asked to ``decompress=True``.
    ///
    /// Visibility: the message is readable by offset (:meth:`look_message_by_offset`,
    /// :meth:`scan`, :meth:`read_arrow`) when ``put`` returns; queue and key reads
    /// (:meth:`get_message`, :meth:`query_message`) see it once the background dispatcher
    /// has indexed it, usually within a millisecond; :meth:`flush` waits for that too.
    ///
    /// Raises :class:`InvalidMessageError` (a ``ValueError``) for a bad value and ``TypeError``
    /// for a wrong type; nothing is written then.
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"hello", queue_id=1, tags="TagA",
    ///               keys=["order-42"], properties={"source": "web"})
    /// assert r.ok, r.status
    /// big = store.put("TopicTest", b"x" * 10_000, compression="zstd")
    /// assert store.look_message_by_offset(big.commitlog_offset, decompress=True).body == b"x" * 10_000
    /// ```
    #[pyo3(signature = (topic, body, *, queue_id = 0, tags = None, keys = None, properties = None, flag = 0, born_timestamp = None, born_host = None, store_host = None, delay_level = 0, transaction = None, prepared_transaction_offset = 0, producer_group = None, compression = None, compress_level = 5, compress_over = 4096))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = arg::queue_id_i64)] queue_id: i64,
        tags: Option<&Bound<'_, PyAny>>,
        keys: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::flag)] flag: i64,
        #[pyo3(from_py_with = arg::born_timestamp)] born_timestamp: Option<i64>,
        born_host: Option<&Bound<'_, PyAny>>,
        store_host: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::delay_level)] delay_level: i64,
        transaction: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::prepared_transaction_offset)] prepared_transaction_offset: i64,
        producer_group: Option<&Bound<'_, PyAny>>,
        compression: Option<&str>,
        compress_level: i32,
        compress_over: usize,
    ) -> PyResult<PutResult> {
        self.check_pid()?;
        let compress = compress_options(py, compression, compress_level, compress_over)?;
        let at = At { index: None };
        let args = PutArgs {
            topic: Some(topic),
            body: Some(body),
            tags,
            keys,
            properties,
            born_host,
            store_host,
            transaction,
            producer_group,
            ..PutArgs::default()
        };
        let mut msg = args.convert(at)?;
        msg.queue_id = to_i32(queue_id, "queue_id", at)?;
        msg.flag = to_i32(flag, "flag", at)?;
        msg.born_timestamp = born_timestamp;
        msg.delay_level = to_i32(delay_level, "delay_level", at)?;
        msg.prepared_transaction_offset = prepared_transaction_offset;
        let results = self.put_owned_compressed(py, vec![msg], compress)?;
        results
            .first()
            .map(PutResult::from_engine)
            .ok_or_else(|| map_error(py, &Error::Closed))
    }

    /// Puts many messages at once, under one acquisition of the write lock.
    ///
    /// ``messages`` is a list of dicts whose keys are :meth:`put`'s argument names (``topic``
    /// and ``body`` required). The batch is validated whole first: if one message is invalid,
    /// :class:`InvalidMessageError` names its index and nothing is written. Returns one
    /// :class:`PutResult` per message.
    ///
    /// :class:`rocketstore.MessageStore` also accepts a ``pyarrow.RecordBatch`` or ``Table``
    /// here and then returns a ``pyarrow.RecordBatch`` of results (see its documentation).
    ///
    /// Example:
    ///
    /// ```python
    /// results = store.put_batch([
    ///     {"topic": "TopicTest", "body": b"a", "tags": "TagA"},
    ///     {"topic": "TopicTest", "body": b"b", "queue_id": 1, "keys": ["k2"]},
    /// ])
    /// assert all(r.ok for r in results)
    /// ```
    #[pyo3(signature = (
        messages,
        *,
        compression = None,
        compress_level = 5,
        compress_over = 4096,
    ))]
    fn put_batch(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        compression: Option<&str>,
        compress_level: i32,
        compress_over: usize,
    ) -> PyResult<Vec<PutResult>> {
        self.check_pid()?;
        let compress = compress_options(py, compression, compress_level, compress_over)?;
        let iterable = !(messages.is_instance_of::<PyString>()
            || messages.is_instance_of::<pyo3::types::PyBytes>()
            || messages.is_instance_of::<PyDict>());
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = messages.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = messages.cast::<PyTuple>() {
            t.iter().collect()
        } else if let Some(it) = iterable.then(|| messages.try_iter().ok()).flatten() {
            // A generator or any other iterable of dicts: read whole first (the batch is
            // validated whole before anything is written).
            it.collect::<PyResult<_>>()?
        } else {
            let type_name = messages
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string());
            return Err(PyTypeError::new_err(format!(
                "messages must be an iterable of dicts (a list, a generator, ...; or, with \
                 rocketstore.MessageStore, a pyarrow RecordBatch or Table), not {type_name}"
            )));
        };
        let mut owned = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            owned.push(message_from_mapping(item, i)?);
        }
        if owned.is_empty() {
            // Still checks that the store is open and writable.
            self.enter(py, |store| store.put_batch(&[]))?;
            return Ok(Vec::new());
        }
        let results = self.put_owned_compressed(py, owned, compress)?;
        Ok(results.iter().map(PutResult::from_engine).collect())
    }

    /// Arrow put used by :class:`rocketstore.MessageStore` (private): ``data`` is any object
    /// with ``__arrow_c_stream__`` or ``__arrow_c_array__``; returns the result
    /// ``pyarrow.RecordBatch``.
    #[pyo3(signature = (
        data,
        *,
        compression = None,
        compress_level = 5,
        compress_over = 4096,
    ))]
    fn _put_arrow<'py>(
        &self,
        py: Python<'py>,
        data: AnyRecordBatch,
        compression: Option<&str>,
        compress_level: i32,
        compress_over: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let compress = compress_options(py, compression, compress_level, compress_over)?;
        let store = self.store(py)?;
        arrow::put_arrow(py, &store, data, compress)
    }

    /// The message whose record starts at ``commitlog_offset``.
    ///
    /// Raises :class:`OffsetOutOfRangeError` (an ``IndexError``) outside
    /// ``[min_commitlog_offset(), max_commitlog_offset())`` and :class:`InvalidMessageError` if
    /// no record starts exactly there.
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"hello")
    /// assert store.look_message_by_offset(r.commitlog_offset).body == b"hello"
    /// ```
    #[pyo3(signature = (commitlog_offset, *, decompress = false))]
    fn look_message_by_offset(
        &self,
        py: Python<'_>,
        commitlog_offset: i64,
        decompress: bool,
    ) -> PyResult<Message> {
        let store = self.store(py)?;
        let offset = offset_arg(py, &store, commitlog_offset)?;
        let m = py
            .detach(|| store.look_message_by_offset(offset))
            .map_err(|e| map_error(py, &e))?;
        let m = Message::from_stored(py, m);
        if decompress {
            return m.into_decompressed(py);
        }
        Ok(m)
    }

    /// Iterates the messages of the commit log in order, from ``from_offset`` (a record
    /// boundary; offsets below the oldest stored one start at the oldest).
    ///
    /// The iterator fetches messages in batches with the GIL released; ``next_batch(n)``
    /// returns up to ``n`` at once. With ``verify_crc=True`` every body CRC is checked and a
    /// mismatch raises :class:`CorruptionError`. The iterator sees the data present when each
    /// batch is fetched.
    ///
    /// Example:
    ///
    /// ```python
    /// for msg in store.scan():
    ///     print(msg.commitlog_offset, msg.topic, msg.body)
    /// it = store.scan(verify_crc=True)
    /// first_hundred = it.next_batch(100)
    /// ```
    #[pyo3(signature = (from_offset = 0, *, verify_crc = false, decompress = false))]
    fn scan(
        slf: &Bound<'_, Self>,
        from_offset: i64,
        verify_crc: bool,
        decompress: bool,
    ) -> PyResult<ScanIterator> {
        let py = slf.py();
        let this = slf.get();
        let store = this.store(py)?;
        let offset = offset_arg(py, &store, from_offset)?;
        let scanner = store
            .scan(offset)
            .map_err(|e| map_error(py, &e))?
            .with_crc_check(verify_crc);
        Ok(ScanIterator {
            store: slf.clone().unbind(),
            pid: this.pid,
            decompress,
            verify_crc,
            state: Mutex::new(ScanState {
                scanner: Some(scanner),
                buffer: VecDeque::new(),
                done: false,
                error: None,
            }),
            fetched: Condvar::new(),
        })
    }

    /// The smallest commit log offset still stored (0 until old files are deleted).
    ///
    /// Example:
    ///
    /// ```python
    /// for msg in store.scan(store.min_commitlog_offset()):
    ///     ...
    /// ```
    fn min_commitlog_offset(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.store(py)?.min_commitlog_offset())
    }

    /// One past the last readable commit log byte (where the next message will be written).
    ///
    /// Example:
    ///
    /// ```python
    /// end = store.max_commitlog_offset()
    /// r = store.put("TopicTest", b"x")
    /// assert r.commitlog_offset == end
    /// ```
    fn max_commitlog_offset(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.store(py)?.max_commitlog_offset())
    }

    /// Flushes everything written so far to disk, makes it visible to every read, and returns
    /// the durable offset.
    ///
    /// Visibility: a put is readable by offset when it returns, but queue and key reads
    /// (:meth:`get_message`, :meth:`get_message_arrow`, :meth:`query_message`) see it only once
    /// the dispatch thread has indexed it: usually within a millisecond, with no fixed bound on
    /// a busy machine (several milliseconds were measured). ``flush()`` dispatches what is left
    /// itself before it returns, so a read issued after it sees every put acknowledged before
    /// it. :meth:`pull` waits for new messages instead.
    ///
    /// Example:
    ///
    /// ```python
    /// store.put("TopicTest", b"x")
    /// assert store.flush() == store.max_commitlog_offset()
    /// assert store.get_message("TopicTest", 0, 0).messages  # visible after flush()
    /// ```
    fn flush(&self, py: Python<'_>) -> PyResult<u64> {
        self.enter(py, Store::flush)
    }

    /// The commit log cursors: ``{"wrote": ..., "committed": ..., "flushed": ...}``.
    ///
    /// ``wrote`` is one past the last byte appended, ``committed`` one past the last byte
    /// readers may see and ``flushed`` one past the last byte known to be durable.
    ///
    /// Example:
    ///
    /// ```python
    /// c = store.cursors()
    /// assert c["flushed"] <= c["committed"] <= c["wrote"]
    /// ```
    fn cursors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.store(py)?.cursors();
        let d = PyDict::new(py);
        d.set_item("wrote", c.wrote)?;
        d.set_item("committed", c.committed)?;
        d.set_item("flushed", c.flushed)?;
        Ok(d)
    }

    /// Every ``(topic, queue_id, next_queue_offset)`` with at least one message, sorted.
    ///
    /// ``next_queue_offset`` is the queue offset the next message of that queue will get,
    /// i.e. the number of messages the queue holds.
    ///
    /// Example:
    ///
    /// ```python
    /// store.put("TopicTest", b"x", queue_id=2)
    /// assert ("TopicTest", 2, 1) in store.queue_offsets()
    /// ```
    fn queue_offsets(&self, py: Python<'_>) -> PyResult<Vec<(String, i32, i64)>> {
        Ok(self.store(py)?.queue_offsets())
    }

    /// How many flushes advanced the durable offset since the store was opened (under
    /// SYNC_FLUSH, fewer flushes than puts means group commit is batching).
    ///
    /// Example:
    ///
    /// ```python
    /// before = store.flush_count()
    /// store.put("TopicTest", b"x")
    /// store.flush()
    /// assert store.flush_count() == before + 1
    /// ```
    fn flush_count(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.store(py)?.flush_count())
    }

    /// Paths of the commit log files, oldest first (named by their first offset, 20 digits).
    ///
    /// Example:
    ///
    /// ```python
    /// import os
    /// sizes = {os.path.basename(f): os.path.getsize(f) for f in store.commitlog_files()}
    /// ```
    fn commitlog_files(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .store(py)?
            .commitlog_files()
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect())
    }

    /// Reads up to ``max_messages`` messages of one queue from queue ``offset`` (RocketMQ
    /// ``getMessage``) and returns a :class:`GetResult`.
    ///
    /// ``tags`` is a subscription expression: ``None`` or ``"*"`` for every message, else tags
    /// separated by ``||`` (``"TagA || TagB"``). ``max_total_bytes`` caps the bytes returned.
    /// Nothing to return is a status, never an exception: ``OFFSET_OVERFLOW_ONE`` when
    /// ``offset`` is the queue's end, ``OFFSET_TOO_SMALL`` below its first offset,
    /// ``NO_MESSAGE_IN_QUEUE`` for an empty or unknown queue, ``NO_MATCHED_MESSAGE`` when no
    /// scanned message matched the tags, ... (see :class:`rocketstore.GetMessageStatus`). Read
    /// from ``result.next_begin_offset`` next.
    ///
    /// Example:
    ///
    /// ```python
    /// offset = 0
    /// while True:
    ///     r = store.get_message("TopicTest", 0, offset, 32, tags="TagA || TagB")
    ///     for m in r.messages:
    ///         handle(m)
    ///     if r.status is not rocketstore.GetMessageStatus.FOUND and r.next_begin_offset == offset:
    ///         break
    ///     offset = r.next_begin_offset
    /// ```
    #[pyo3(signature = (topic, queue_id, offset, max_messages = 32, *, max_total_bytes = None, tags = None, decompress = false))]
    #[allow(clippy::too_many_arguments)]
    fn get_message(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::topic)] topic: PyBackedStr,
        #[pyo3(from_py_with = arg::queue_id)] queue_id: i32,
        #[pyo3(from_py_with = arg::offset)] offset: i64,
        max_messages: usize,
        max_total_bytes: Option<u64>,
        tags: Option<&str>,
        decompress: bool,
    ) -> PyResult<GetResult> {
        let topic: &str = &topic;
        let r = self.enter(py, |s| {
            s.get_message_records(topic, queue_id, offset, max_messages, max_total_bytes, tags)
        })?;
        GetResult::from_records(py, r)?.decompress(py, decompress)
    }

    /// Long polling: like :meth:`get_message`, but when there is nothing (matching) to return
    /// yet, waits up to ``timeout_ms`` milliseconds for a message to arrive in the queue, and
    /// returns as soon as one does.
    ///
    /// The GIL is released while waiting; idle waiters cost no CPU (they sleep until a put to
    /// their queue is dispatched). On the main thread the wait is sliced so that Ctrl-C
    /// (``KeyboardInterrupt``) interrupts it within about 0.1 s. Messages that do not match
    /// ``tags`` do not end the wait; ``next_begin_offset`` moves past them. On timeout the
    /// result has the status of the last look (e.g. ``OFFSET_OVERFLOW_ONE``) and no messages.
    ///
    /// Example:
    ///
    /// ```python
    /// offset = store.max_offset_in_queue("TopicTest", 0)
    /// r = store.pull("TopicTest", 0, offset, timeout_ms=5_000)  # another thread puts
    /// if r.status is rocketstore.GetMessageStatus.FOUND:
    ///     print([m.body for m in r.messages])
    /// ```
    #[pyo3(signature = (topic, queue_id, offset, max_messages = 32, *, timeout_ms = 15000, tags = None, max_total_bytes = None, decompress = false))]
    #[allow(clippy::too_many_arguments)]
    fn pull(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::topic)] topic: PyBackedStr,
        #[pyo3(from_py_with = arg::queue_id)] queue_id: i32,
        #[pyo3(from_py_with = arg::offset)] offset: i64,
        max_messages: usize,
        timeout_ms: i64,
        tags: Option<&str>,
        max_total_bytes: Option<u64>,
        decompress: bool,
    ) -> PyResult<GetResult> {
        let topic: &str = &topic;
        let store = self.store(py)?;
        let Ok(timeout) = u64::try_from(timeout_ms) else {
            return Err(invalid_message(
                "timeout_ms",
                None,
                format_args!("{timeout_ms} is negative"),
            ));
        };
        let start = Instant::now();
        let total = Duration::from_millis(timeout);
        // Only the main thread receives signals, so only it needs to wake up to check them.
        let sliced = is_main_thread(py)?;
        let mut offset = offset;
        loop {
            let remaining = total.saturating_sub(start.elapsed());
            let wait = if sliced {
                remaining.min(SIGNAL_CHECK_INTERVAL)
            } else {
                remaining
            };
            let r = py
                .detach(|| {
                    store.pull(
                        topic,
                        queue_id,
                        offset,
                        max_messages,
                        max_total_bytes,
                        tags,
                        wait,
                    )
                })
                .map_err(|e| map_error(py, &e))?;
            let done = r.status == GetStatus::Found
                || !pull_waits(r.status, offset)
                || start.elapsed() >= total;
            if done {
                return GetResult::from_engine(py, r)?.decompress(py, decompress);
            }
            py.check_signals()?;
            if r.status == GetStatus::NoMatchedMessage && r.next_begin_offset > offset {
                offset = r.next_begin_offset;
            }
        }
    }

    /// The progress sequence number of the writer this read-only store follows (another
    /// process), bumped after each batch of messages it makes visible; ``None`` for a writable
    /// store or while no writer publishes progress. Pass it to :meth:`wait_progress`.
    ///
    /// Example:
    ///
    /// ```python
    /// seq = reader.progress_seq()
    /// ```
    fn progress_seq(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        Ok(self.store(py)?.progress_seq())
    }

    /// Waits (GIL released, no CPU) until the writer this read-only store follows publishes
    /// progress past ``seen`` (a :meth:`progress_seq` value), or ``timeout_ms``; then the
    /// store shows the new messages. Returns the new sequence number. One wait for every
    /// queue at once (a consumer of many queues); :meth:`pull` waits for one queue.
    ///
    /// Example:
    ///
    /// ```python
    /// seq = reader.progress_seq()
    /// while reader.max_offset_in_queue("TopicTest", 0) <= offset:
    ///     seq = reader.wait_progress(seq, timeout_ms=1_000)
    /// ```
    #[pyo3(signature = (seen, *, timeout_ms = 1000))]
    fn wait_progress(
        &self,
        py: Python<'_>,
        seen: Option<u32>,
        timeout_ms: i64,
    ) -> PyResult<Option<u32>> {
        let store = self.store(py)?;
        let Ok(timeout) = u64::try_from(timeout_ms) else {
            return Err(invalid_message(
                "timeout_ms",
                None,
                format_args!("{timeout_ms} is negative"),
            ));
        };
        let start = Instant::now();
        let total = Duration::from_millis(timeout);
        let sliced = is_main_thread(py)?;
        loop {
            let remaining = total.saturating_sub(start.elapsed());
            let wait = if sliced {
                remaining.min(SIGNAL_CHECK_INTERVAL)
            } else {
                remaining
            };
            let seq = py
                .detach(|| store.wait_progress(seen, wait))
                .map_err(|e| map_error(py, &e))?;
            if seq != seen || start.elapsed() >= total {
                return Ok(seq);
            }
            py.check_signals()?;
        }
    }

    /// Messages of ``topic`` whose key (a ``KEYS`` entry or the ``UNIQ_KEY``) equals ``key``,
    /// stored between ``begin`` and ``end`` (epoch milliseconds; ``end=None``: no upper bound),
    /// at most ``max_num`` of them, in commit log order (RocketMQ ``queryMessage`` through the
    /// index files; index hash collisions are filtered out).
    ///
    /// Raises :class:`InvalidMessageError` when the index is disabled
    /// (``message_index_enable=False``).
    ///
    /// Example:
    ///
    /// ```python
    /// store.put("TopicTest", b"order", keys=["order-42"])
    /// [m] = store.query_message("TopicTest", "order-42")
    /// assert m.body == b"order"
    /// ```
    #[pyo3(signature = (topic, key, *, max_num = 32, begin = 0, end = None, decompress = false))]
    #[allow(clippy::too_many_arguments)]
    fn query_message(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        #[pyo3(from_py_with = arg::key)] key: PyBackedStr,
        max_num: usize,
        begin: i64,
        end: Option<i64>,
        decompress: bool,
    ) -> PyResult<Vec<Message>> {
        let end = end.unwrap_or(i64::MAX);
        let name = topic.to_str()?;
        let key: &str = &key;
        let r = self.enter(py, |s| {
            s.query_message_records(name, key, max_num, begin, end)
        })?;
        let views: Vec<_> = r.iter().filter_map(|h| h.view()).collect();
        // Every match is of `topic`: the messages share the caller's `str`.
        let found = MessageBuilder::with_topic(topic.clone().unbind()).of_views(py, &views);
        Message::decompress_all(py, found, decompress)
    }

    /// :meth:`query_message` of each of ``keys``, all of ``topic`` with the same ``max_num``,
    /// ``begin`` and ``end``: one list of messages per key, in the order of ``keys`` (``[]``
    /// for a key without a match). Each list is what :meth:`query_message` returns for that
    /// key alone. The lookups of one call run in groups whose index slots, chain heads and
    /// records are loaded together, so that their memory reads overlap: a batch costs less
    /// per key than one call per key.
    ///
    /// Raises :class:`InvalidMessageError` when the index is disabled
    /// (``message_index_enable=False``) and ``TypeError`` when ``keys`` is a ``str`` (pass
    /// ``[key]``).
    ///
    /// Example:
    ///
    /// ```python
    /// store.put("TopicTest", b"a", keys=["order-1"])
    /// store.put("TopicTest", b"b", keys=["order-2"])
    /// found = store.query_messages("TopicTest", ["order-1", "order-2", "order-3"])
    /// assert [[m.body for m in ms] for ms in found] == [[b"a"], [b"b"], []]
    /// ```
    #[pyo3(signature = (topic, keys, *, max_num = 32, begin = 0, end = None, decompress = false))]
    #[allow(clippy::too_many_arguments)]
    fn query_messages(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        keys: Vec<PyBackedStr>,
        max_num: usize,
        begin: i64,
        end: Option<i64>,
        decompress: bool,
    ) -> PyResult<Vec<Vec<Message>>> {
        let end = end.unwrap_or(i64::MAX);
        let name = topic.to_str()?;
        let r = self.enter(py, |s| {
            s.query_messages_records(name, &keys, max_num, begin, end)
        })?;
        // All matches share one properties buffer and the caller's topic `str`; then they are
        // dealt back to their keys.
        let mut views = Vec::new();
        let mut counts = Vec::with_capacity(r.len());
        for hits in &r {
            let before = views.len();
            views.extend(hits.iter().filter_map(|h| h.view()));
            counts.push(views.len() - before);
        }
        let found = MessageBuilder::with_topic(topic.clone().unbind()).of_views(py, &views);
        let mut all = Message::decompress_all(py, found, decompress)?.into_iter();
        Ok(counts
            .into_iter()
            .map(|n| all.by_ref().take(n).collect())
            .collect())
    }

    /// The message with an offset message id (``PutResult.msg_id`` / ``Message.msg_id``: the
    /// store host and the commit log offset in hex).
    ///
    /// Raises :class:`InvalidMessageError` for a malformed id and
    /// :class:`OffsetOutOfRangeError` when its offset is not stored (any more).
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"hello")
    /// assert store.view_message_by_id(r.msg_id).body == b"hello"
    /// ```
    #[pyo3(signature = (msg_id, *, decompress = false))]
    fn view_message_by_id(
        &self,
        py: Python<'_>,
        msg_id: &str,
        decompress: bool,
    ) -> PyResult<Message> {
        let m = self.enter(py, |s| s.view_message_by_id(msg_id))?;
        let m = Message::from_stored(py, m);
        if decompress {
            return m.into_decompressed(py);
        }
        Ok(m)
    }

    /// The queue offset of the first message stored at or after ``timestamp_ms``
    /// (``boundary="lower"``), or of the last one stored at or before it (``"upper"``);
    /// RocketMQ ``getOffsetInQueueByTime``. A time before the first message gives the queue's
    /// first offset; one after the last gives its end (``max_offset_in_queue``); 0 for an
    /// unknown queue.
    ///
    /// Example:
    ///
    /// ```python
    /// import time
    /// since = int(time.time() * 1000) - 60_000
    /// offset = store.get_offset_in_queue_by_time("TopicTest", 0, since)
    /// r = store.get_message("TopicTest", 0, offset)  # the last minute's messages
    /// ```
    #[pyo3(signature = (topic, queue_id, timestamp_ms, boundary = "lower"))]
    fn get_offset_in_queue_by_time(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: &str,
    ) -> PyResult<i64> {
        let upper = match boundary {
            "lower" => false,
            "upper" => true,
            other => {
                return Err(invalid_message(
                    "boundary",
                    None,
                    format_args!("{other:?} is not \"lower\" or \"upper\""),
                ))
            }
        };
        self.enter(py, |s| {
            s.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms, upper)
        })
    }

    /// The first queue offset still stored in a queue (0 for an unknown queue).
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.get_message("TopicTest", 0, store.min_offset_in_queue("TopicTest", 0))
    /// ```
    fn min_offset_in_queue(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        Ok(self.store(py)?.min_offset_in_queue(topic, queue_id))
    }

    /// The end of a queue: the offset its next message will get (0 for an unknown queue).
    ///
    /// Example:
    ///
    /// ```python
    /// backlog = store.max_offset_in_queue("T", 0) - store.query_offset("group", "T", 0)
    /// ```
    fn max_offset_in_queue(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        Ok(self.store(py)?.max_offset_in_queue(topic, queue_id))
    }

    /// STORETIMESTAMP (epoch ms) of the first message still stored in a queue, or -1.
    ///
    /// Example:
    ///
    /// ```python
    /// oldest = store.get_earliest_message_time("TopicTest", 0)
    /// ```
    fn get_earliest_message_time(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
    ) -> PyResult<i64> {
        self.enter(py, |s| Ok(s.get_earliest_message_time(topic, queue_id)))
    }

    /// STORETIMESTAMP (epoch ms) of the message at ``queue_offset`` of a queue, or -1 if that
    /// offset holds no readable message.
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"x")
    /// ts = store.get_message_store_timestamp("TopicTest", 0, r.queue_offset)
    /// assert ts == r.store_timestamp
    /// ```
    fn get_message_store_timestamp(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> PyResult<i64> {
        self.enter(py, |s| {
            Ok(s.get_message_store_timestamp(topic, queue_id, queue_offset))
        })
    }

    /// Every consume queue as ``(topic, queue_id, min_offset, max_offset)``, sorted.
    ///
    /// Example:
    ///
    /// ```python
    /// for topic, queue_id, lo, hi in store.consume_queues():
    ///     print(f"{topic}/{queue_id}: {hi - lo} messages")
    /// ```
    fn consume_queues(&self, py: Python<'_>) -> PyResult<Vec<(String, i32, i64, i64)>> {
        let mut v = self.enter(py, |s| Ok(s.consume_queues()))?;
        v.sort();
        Ok(v)
    }

    /// Records consumer ``group``'s progress in a queue (RocketMQ ``commitOffset``): the next
    /// queue offset it will read. Persisted to ``config/consumerOffset.json`` (RocketMQ's
    /// format, ``offsetTable`` keyed ``topic@group``) within a second, on :meth:`flush` and on
    /// close.
    ///
    /// Raises :class:`InvalidMessageError` for a bad group, topic or queue id or a negative
    /// offset, and :class:`StoreReadOnlyError` on a read-only store.
    ///
    /// Example:
    ///
    /// ```python
    /// store.commit_offset("my-group", "TopicTest", 0, r.next_begin_offset)
    /// assert store.query_offset("my-group", "TopicTest", 0) == r.next_begin_offset
    /// ```
    fn commit_offset(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> PyResult<()> {
        self.enter(py, |s| s.commit_offset(group, topic, queue_id, offset))
    }

    /// The offset ``group`` committed for a queue, or -1 if it has none.
    ///
    /// Example:
    ///
    /// ```python
    /// offset = store.query_offset("my-group", "TopicTest", 0)
    /// if offset < 0:
    ///     offset = store.min_offset_in_queue("TopicTest", 0)
    /// ```
    fn query_offset(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        queue_id: i32,
    ) -> PyResult<i64> {
        Ok(self.store(py)?.query_offset(group, topic, queue_id))
    }

    /// Statistics (RocketMQ ``StoreStatsService``) as a dict: ``put_by_topic`` and
    /// ``get_by_topic`` (``{topic: {"messages": n, "bytes": b}}``, since open),
    /// ``put_latency`` (``{bucket: count}`` with RocketMQ's buckets such as ``"[0~10ms]"``),
    /// ``flush_count``, ``flush_behind_bytes``, ``writeback_started_bytes`` (commit log bytes
    /// whose writeback was started ahead of a flush), ``dispatch_behind_bytes``,
    /// ``dispatched_messages``, ``commitlog_files``, ``consume_queues``, ``index_files``,
    /// ``waiting_pulls`` and ``writer_created_files``.
    ///
    /// Example:
    ///
    /// ```python
    /// s = store.stats()
    /// print(s["put_by_topic"].get("TopicTest"), s["dispatch_behind_bytes"])
    /// ```
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.enter(py, |s| Ok(s.stats()))?;
        stats_dict(py, &s)
    }

    /// Runs one cleanup pass now (RocketMQ ``executeDeleteFilesManually``) and returns what it
    /// did as a dict.
    ///
    /// Deletes commit log files older than ``file_reserved_time`` hours (whatever the hour of
    /// ``delete_when``); with ``force=True`` every deletable file whatever its age. Never the
    /// last file, never data not yet flushed and dispatched; at most ``delete_file_batch_max``
    /// files. Then the consume queue and index files that only cover deleted data. Keys:
    /// ``commitlog_files_deleted`` (list of paths), ``consume_queue_files_deleted``,
    /// ``index_files_deleted``, ``min_commitlog_offset`` (after the pass), ``disk_usage`` (a
    /// ratio, or None), ``disk_full`` (puts are refused), ``time_to_delete``,
    /// ``space_to_delete`` and ``clean_immediately``.
    ///
    /// Raises :class:`StoreReadOnlyError` on a read-only store.
    ///
    /// Example:
    ///
    /// ```python
    /// report = store.delete_expired_files(force=True)
    /// print(len(report["commitlog_files_deleted"]), "files deleted; the oldest offset is now",
    ///       report["min_commitlog_offset"])
    /// ```
    #[pyo3(signature = (force = false))]
    fn delete_expired_files<'py>(
        &self,
        py: Python<'py>,
        force: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = self.enter(py, |s| s.delete_expired_files(force))?;
        let d = PyDict::new(py);
        let files: Vec<String> = r
            .commitlog_files_deleted
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        d.set_item("commitlog_files_deleted", files)?;
        d.set_item("consume_queue_files_deleted", r.consume_queue_files_deleted)?;
        d.set_item("index_files_deleted", r.index_files_deleted)?;
        d.set_item("min_commitlog_offset", r.min_commitlog_offset)?;
        d.set_item("disk_usage", r.disk_usage)?;
        d.set_item("disk_full", r.disk_full)?;
        d.set_item("time_to_delete", r.time_to_delete)?;
        d.set_item("space_to_delete", r.space_to_delete)?;
        d.set_item("clean_immediately", r.clean_immediately)?;
        Ok(d)
    }

    /// True while puts are refused (:class:`DiskFullError`) because the disk usage is above
    /// ``disk_space_warning_level_ratio``; a cleanup pass that finds it at or below
    /// ``disk_space_clean_forcibly_ratio`` accepts puts again.
    ///
    /// Example:
    ///
    /// ```python
    /// if store.is_disk_full():
    ///     store.delete_expired_files(force=True)
    /// ```
    fn is_disk_full(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.store(py)?.is_disk_full())
    }

    /// Test hook (private): fixes the cleanup service's clock at ``now_ms`` (epoch ms), or
    /// restores the wall clock with None.
    #[pyo3(signature = (now_ms))]
    fn _set_clock_ms(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<()> {
        let store = self.store(py)?;
        let clock: rocketstore::Clock = match now_ms {
            Some(ms) => Arc::new(move || ms),
            None => Arc::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
        };
        store.set_clock(clock);
        Ok(())
    }

    /// Test hook (private): makes the cleanup service see a fixed disk usage ``ratio``
    /// (0.0-1.0; None: "unknown").
    #[pyo3(signature = (ratio))]
    fn _set_disk_usage(&self, py: Python<'_>, ratio: Option<f64>) -> PyResult<()> {
        let store = self.store(py)?;
        store.set_disk_usage_probe(Arc::new(move |_: &std::path::Path| ratio));
        Ok(())
    }

    /// Arrow read of the commit log (private; see ``rocketstore.MessageStore.read_arrow``).
    /// Returns ``(pyarrow.RecordBatch, next_offset)``.
    #[pyo3(signature = (from_offset, max_messages, end_offset, verify_crc, max_bytes, columns=None, topic=None, tags=None))]
    #[allow(clippy::too_many_arguments)]
    fn _read_log_columns<'py>(
        &self,
        py: Python<'py>,
        from_offset: i64,
        max_messages: usize,
        end_offset: Option<i64>,
        verify_crc: bool,
        max_bytes: usize,
        columns: Option<Vec<String>>,
        topic: Option<&str>,
        tags: Option<&str>,
    ) -> PyResult<(Bound<'py, PyAny>, u64)> {
        let store = self.store(py)?;
        let from = offset_arg(py, &store, from_offset)?;
        let end = end_offset.map_or(u64::MAX, |e| u64::try_from(e).unwrap_or(0));
        let want = projection(py, columns.as_deref())?;
        let filter = arrow_read::RecordFilter::new(topic, tags);
        let (cols, next) = py
            .detach(|| {
                arrow_read::read_log_projected(
                    &store,
                    (from, end),
                    max_messages,
                    max_bytes,
                    verify_crc,
                    want,
                    &filter,
                )
            })
            .map_err(|e| map_error(py, &e))?;
        Ok((message_batch(py, cols)?, next))
    }

    /// Arrow read through a consume queue (private; see
    /// ``rocketstore.MessageStore.get_message_arrow``). Returns ``(pyarrow.RecordBatch,
    /// next_offset)``.
    #[pyo3(signature = (topic, queue_id, offset, max_messages, end_offset, verify_crc, tags, max_bytes, columns=None))]
    #[allow(clippy::too_many_arguments)]
    fn _read_queue_columns<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_messages: usize,
        end_offset: Option<i64>,
        verify_crc: bool,
        tags: Option<&str>,
        max_bytes: usize,
        columns: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyAny>, i64)> {
        let store = self.store(py)?;
        let end = end_offset.unwrap_or(i64::MAX);
        let want = projection(py, columns.as_deref())?;
        let (cols, next) = py
            .detach(|| {
                let span = rocketstore::QueueSpan {
                    topic,
                    queue_id,
                    from: offset,
                    end,
                    max: max_messages,
                    check_crc: verify_crc,
                    subscription: tags,
                };
                arrow_read::read_queue_projected(&store, &span, max_bytes, want)
            })
            .map_err(|e| map_error(py, &e))?;
        Ok((message_batch(py, cols)?, next))
    }

    /// Consume queue units as Arrow columns (private; see
    /// ``rocketstore.MessageStore.read_consume_queue``). Returns a ``pyarrow.RecordBatch``.
    fn _read_cq_columns<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_units: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store(py)?;
        let cols = py.detach(|| arrow_read::read_cq(&store, topic, queue_id, offset, max_units));
        let batch = cols
            .into_batch(topic, queue_id)
            .map_err(|e| map_arrow_error(py, &e))?;
        PyRecordBatch::new(batch).into_pyarrow(py)
    }

    /// Index entries as Arrow columns (private; see ``rocketstore.MessageStore.read_index``).
    /// Returns a ``pyarrow.RecordBatch``.
    fn _read_index_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store(py)?;
        let files = py.detach(|| store.index_entries());
        let batch = arrow_read::index_batch(&files).map_err(|e| map_arrow_error(py, &e))?;
        PyRecordBatch::new(batch).into_pyarrow(py)
    }

    /// Closes the store: flushes everything, writes the checkpoint, removes the abort marker,
    /// stops the background threads and releases the directory lock.
    ///
    /// Idempotent. Other calls raise :class:`StoreClosedError` afterwards. Prefer a ``with``
    /// block, which calls it on the way out (also when an exception is raised).
    ///
    /// Example:
    ///
    /// ```python
    /// store = rocketstore.MessageStore("/tmp/demo-store")
    /// try:
    ///     store.put("TopicTest", b"x")
    /// finally:
    ///     store.close()
    /// ```
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_pid()?;
        let taken = lock(&self.inner).take();
        match taken {
            None => Ok(()),
            Some(store) => py
                .detach(move || store.close())
                .map_err(|e| map_error(py, &e)),
        }
    }

    /// True once :meth:`close` was called.
    ///
    /// Example:
    ///
    /// ```python
    /// with rocketstore.MessageStore("/tmp/demo-store") as store:
    ///     assert not store.closed
    /// assert store.closed
    /// ```
    #[getter]
    fn closed(&self) -> PyResult<bool> {
        self.check_pid()?;
        Ok(lock(&self.inner).is_none())
    }

    /// The store root directory, as given when it was opened (``str``).
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// True if the store was opened with ``read_only=True``.
    ///
    /// Example:
    ///
    /// ```python
    /// with rocketstore.MessageStore("/tmp/demo-store", read_only=True) as ro:
    ///     assert ro.read_only
    /// ```
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// The effective configuration: every field of :func:`rocketstore.config_fields` with its
    /// value (the commit log file size is the one found on disk).
    ///
    /// Example:
    ///
    /// ```python
    /// with rocketstore.MessageStore(path, flush_disk_type="SYNC_FLUSH") as store:
    ///     assert store.config["flush_disk_type"] == "SYNC_FLUSH"
    /// ```
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store(py)?;
        config_values(py, store.config())
    }

    /// What recovery found when the store was opened: ``abnormal`` (the previous run did not
    /// shut down cleanly), ``end_offset``, ``records`` scanned, ``truncated_at``
    /// (``(offset, reason)`` of a torn tail, or None), ``files_removed``, ``quarantine_dir``
    /// (``recovery_mode="quarantine"``: where the cut commit log files and ``report.json`` were
    /// moved, or None), ``mismatched_queues`` (queues cut at a unit naming the wrong record and
    /// refilled), ``undispatchable_topics`` (``(topic, records, first_offset)`` of records
    /// kept in the commit log but given no consume queue because the topic cannot be a
    /// directory name, e.g. ``..``), where the walk started (``scan_start_file``, the file's index, and ``scan_start_offset``), how many
    /// commit log bytes it read (``walked_bytes``), ``from_window`` (a crash recovery started
    /// at the checkpoint's recovery window), ``power_loss`` (that window was written in an
    /// earlier boot, so consume queues and index were cut back to their durable marks) and
    /// ``redispatched`` records.
    ///
    /// Example:
    ///
    /// ```python
    /// report = store.recovery_report
    /// if report["abnormal"]:
    ///     print("the previous run crashed; recovered up to", report["end_offset"])
    /// ```
    #[getter]
    fn recovery_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store(py)?;
        let r = store.recovery_report();
        let d = PyDict::new(py);
        d.set_item("abnormal", r.abnormal)?;
        d.set_item("end_offset", r.end_offset)?;
        d.set_item("records", r.records)?;
        d.set_item("truncated_at", r.truncated_at.clone())?;
        d.set_item("files_removed", r.files_removed)?;
        d.set_item(
            "quarantine_dir",
            r.quarantine_dir
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        )?;
        d.set_item("mismatched_queues", r.mismatched_queues)?;
        let undispatchable: Vec<(String, u64, i64)> = store
            .undispatchable_topics()
            .into_iter()
            .map(|u| (u.topic, u.records, u.first_offset))
            .collect();
        d.set_item("undispatchable_topics", undispatchable)?;
        d.set_item("scan_start_file", r.scan_start_file)?;
        d.set_item("scan_start_offset", r.scan_start_offset)?;
        d.set_item("walked_bytes", r.walked_bytes)?;
        d.set_item("from_window", r.from_window)?;
        d.set_item("power_loss", r.power_loss)?;
        d.set_item("redispatched", r.redispatched)?;
        Ok(d)
    }

    /// Returns the store itself; ``with MessageStore(...) as store:`` closes it on exit.
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().store(py)?;
        Ok(slf)
    }

    /// Closes the store; returns False (exceptions from the block are never swallowed).
    #[pyo3(signature = (exc_type = None, exc_value = None, traceback = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, exc_value, traceback);
        self.close(py)?;
        Ok(false)
    }

    /// Refuses pickling: a store handle cannot move to another process.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "a MessageStore cannot be pickled or sent to another process; open the store where \
             it is used (e.g. inside the PySpark task, in a `with` block)",
        ))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let this = slf.get();
        let cls = slf.get_type();
        let module = cls
            .module()
            .map_or_else(|_| "rocketstore".to_string(), |m| m.to_string());
        let name = cls
            .name()
            .map_or_else(|_| "MessageStore".to_string(), |n| n.to_string());
        let state = if std::process::id() != this.pid {
            "forked"
        } else if lock(&this.inner).is_some() {
            "open"
        } else {
            "closed"
        };
        let module = if module.starts_with("rocketstore") {
            "rocketstore".to_string()
        } else {
            module
        };
        let path = crate::convert::py_repr(slf.py(), &this.path.to_string_lossy())
            .unwrap_or_else(|_| format!("{:?}", this.path));
        let ro = if this.read_only { " read_only" } else { "" };
        format!("<{module}.{name} path={path} {state}{ro}>")
    }
}

#[derive(Debug)]
struct ScanState {
    /// `None` while a batch is being fetched by some thread (the scanner is taken out so that
    /// the mutex is not held while detached).
    scanner: Option<Scanner>,
    buffer: VecDeque<StoredMessage>,
    /// True once the scan reached the end or failed.
    done: bool,
    /// The failure that ended the scan, raised after the messages before it were returned.
    error: Option<Error>,
}

/// Iterator over the messages of a store (see :meth:`MessageStore.scan`).
///
/// Iterating yields :class:`Message` objects; ``next_batch(n)`` returns a list of up to ``n``
/// (an empty list at the end). Messages are fetched from the store in batches with the GIL
/// released.
///
/// Example:
///
/// ```python
/// it = store.scan(verify_crc=True)
/// while batch := it.next_batch(10_000):
///     process(batch)
/// ```
#[pyclass(module = "rocketstore._native", frozen)]
#[derive(Debug)]
pub(crate) struct ScanIterator {
    store: Py<MessageStore>,
    pid: u32,
    /// Whether the messages are returned decompressed (``scan(decompress=True)``).
    decompress: bool,
    /// Whether every body CRC is checked (``scan(verify_crc=True)``).
    verify_crc: bool,
    state: Mutex<ScanState>,
    /// Signalled whenever a thread puts the scanner back after a fetch.
    fetched: Condvar,
}

impl Drop for ScanIterator {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // See `Drop for MessageStore`: nothing of the parent's store is released in a child.
            let state = match self.state.get_mut() {
                Ok(s) => s.scanner.take(),
                Err(p) => p.into_inner().scanner.take(),
            };
            std::mem::forget(state);
        }
    }
}

impl ScanIterator {
    /// Moves up to `max` messages into `out`, fetching from the engine as needed.
    ///
    /// Threads may share an iterator: the scanner is taken out of the state while one thread
    /// fetches a batch (detached), and the others wait for it, detached too, on `fetched`.
    fn fill(&self, py: Python<'_>, max: usize, out: &mut Vec<StoredMessage>) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(forked("scan iterator", self.pid));
        }
        while out.len() < max {
            {
                let mut st = lock(&self.state);
                while out.len() < max {
                    match st.buffer.pop_front() {
                        Some(m) => out.push(m),
                        None => break,
                    }
                }
                if out.len() >= max || (st.done && out.is_empty() && st.error.is_none()) {
                    return Ok(());
                }
                if st.done {
                    // A failed fetch is reported once the messages before it were returned.
                    return match st.error.take() {
                        Some(e) if out.is_empty() => Err(map_error(py, &e)),
                        Some(e) => {
                            st.error = Some(e);
                            Ok(())
                        }
                        None => Ok(()),
                    };
                }
            }
            // Take the scanner, waiting (detached) while another thread is fetching.
            let Some(mut scanner) = py.detach(|| {
                let mut st = lock(&self.state);
                loop {
                    if !st.buffer.is_empty() || st.done {
                        return None;
                    }
                    if let Some(s) = st.scanner.take() {
                        return Some(s);
                    }
                    st = match self.fetched.wait(st) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                }
            }) else {
                continue;
            };
            // Reading from a closed store raises, like every other read.
            let open = self.store.get().store(py);
            let fetched = match open {
                Ok(_) => {
                    let want = (max - out.len()).max(SCAN_BATCH);
                    py.detach(|| scanner.next_batch(want))
                }
                Err(e) => {
                    let mut st = lock(&self.state);
                    st.scanner = Some(scanner);
                    drop(st);
                    self.fetched.notify_all();
                    return Err(e);
                }
            };
            let mut st = lock(&self.state);
            st.scanner = Some(scanner);
            match fetched {
                Ok(batch) => {
                    if batch.is_empty() {
                        st.done = true;
                    }
                    st.buffer.extend(batch);
                }
                Err(e) => {
                    st.done = true;
                    st.error = Some(e);
                }
            }
            drop(st);
            self.fetched.notify_all();
        }
        Ok(())
    }
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Message>> {
        let mut out = Vec::with_capacity(1);
        self.fill(py, 1, &mut out)?;
        out.pop()
            .map(|m| {
                let m = Message::from_stored(py, m);
                if self.decompress {
                    m.into_decompressed(py)
                } else {
                    Ok(m)
                }
            })
            .transpose()
    }

    /// Up to ``n`` next messages as a list; an empty list once the scan is exhausted.
    ///
    /// Example:
    ///
    /// ```python
    /// it = store.scan()
    /// while batch := it.next_batch(10_000):
    ///     handle(batch)
    /// ```
    fn next_batch(&self, py: Python<'_>, n: usize) -> PyResult<Vec<Message>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(n.min(SCAN_BATCH * 16));
        self.fill(py, n, &mut out)?;
        let messages = out
            .into_iter()
            .map(|m| Message::from_stored(py, m))
            .collect();
        Message::decompress_all(py, messages, self.decompress)
    }

    /// The commit log offset of the next message this iterator will return (the end of the
    /// data once exhausted; None while another thread is fetching).
    ///
    /// Example:
    ///
    /// ```python
    /// it = store.scan()
    /// first = next(it)
    /// resume_from = it.offset  # store.scan(resume_from) continues from here later
    /// ```
    #[getter]
    fn offset(&self) -> PyResult<Option<u64>> {
        let st = lock(&self.state);
        if let Some(m) = st.buffer.front() {
            return Ok(u64::try_from(m.commitlog_offset()).ok());
        }
        Ok(st.scanner.as_ref().map(Scanner::offset))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let offset = match self.offset()? {
            Some(o) => o.to_string(),
            None => "None".into(),
        };
        let (done, buffered) = {
            let st = lock(&self.state);
            (st.done && st.buffer.is_empty(), st.buffer.len())
        };
        let path = self.store.get().path.display().to_string();
        Ok(format!(
            "ScanIterator(store={}, offset={offset}, buffered={buffered}, exhausted={}, \
             verify_crc={}, decompress={})",
            crate::convert::py_repr(py, &path)?,
            if done { "True" } else { "False" },
            if self.verify_crc { "True" } else { "False" },
            if self.decompress { "True" } else { "False" },
        ))
    }
}

/// Cuts a closed store's commit log back to ``end_offset`` (RocketMQ's ``truncateDirtyFiles``)
/// and returns a report dict.
///
/// Every record from ``end_offset`` on leaves the commit log (later files are deleted, the rest
/// of the file is zeroed and synced), the consume queues and the index; the checkpoint is
/// rewritten, so the next open appends at ``end_offset`` with the queue offsets the kept records
/// reach. ``end_offset`` must be the start of a record, or the end of the commit log (nothing to
/// cut), e.g. a ``max_commitlog_offset()`` taken earlier: otherwise
/// :class:`OffsetOutOfRangeError` (outside the commit log) or :class:`InvalidMessageError`
/// (``end_offset`` inside a record) is raised and nothing changes. A store that was not closed
/// cleanly is recovered first. Takes the store's lock (:class:`StoreLockedError` if it is open).
/// ``config`` keywords are those of :class:`MessageStore`. Keys: ``end_offset``,
/// ``commitlog_files_removed``.
///
/// Example:
///
/// ```python
/// with rocketstore.MessageStore("/data/store") as s:
///     mark = s.max_commitlog_offset()
///     s.put("TopicTest", b"undo me")
/// rocketstore.truncate_store("/data/store", mark)
/// ```
#[pyfunction]
#[pyo3(signature = (path, end_offset, **config))]
pub(crate) fn truncate_store<'py>(
    py: Python<'py>,
    path: PathBuf,
    end_offset: i64,
    config: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config_from_kwargs(py, config)?;
    let end = u64::try_from(end_offset).map_err(|_| {
        let e = Error::OffsetOutOfRange {
            requested: end_offset,
            min: 0,
            max: i64::MAX,
        };
        map_error(py, &e)
    })?;
    let (end, removed) = py
        .detach(move || {
            let store = Store::open_truncated(&path, config, end)?;
            let removed = store.recovery_report().files_removed;
            let end = store.max_commitlog_offset();
            store.close()?;
            Ok::<_, Error>((end, removed))
        })
        .map_err(|e| map_error(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("end_offset", end)?;
    d.set_item("commitlog_files_removed", removed)?;
    Ok(d)
}

/// Rebuilds every consume queue and index file of a closed store from its commit log alone
/// (offline repair) and returns a report dict.
///
/// Takes the store's lock (the store must not be open anywhere: :class:`StoreLockedError`
/// otherwise), scans the whole commit log with CRC checks (damage is handled as
/// ``recovery_mode`` says), truncates a torn tail, rewrites ``consumequeue/`` and ``index/``
/// and the checkpoint. ``config`` keywords are those of :class:`MessageStore` (give the same
/// file sizes and index geometry the store uses). Keys: ``min_offset``, ``end_offset``,
/// ``records``, ``dispatched``, ``consume_queues``, ``consume_queue_files``, ``index_files``,
/// ``truncated_at`` (``(offset, reason)`` or None) and ``commitlog_files_removed``.
///
/// Example:
///
/// ```python
/// report = rocketstore.rebuild_indexes("/data/store", mapped_file_size_commit_log=1 << 30)
/// print(report["records"], "records re-dispatched")
/// ```
#[pyfunction]
#[pyo3(signature = (path, **config))]
pub(crate) fn rebuild_indexes<'py>(
    py: Python<'py>,
    path: PathBuf,
    config: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config_from_kwargs(py, config)?;
    let r = py
        .detach(move || rocketstore::rebuild_indexes(&path, config))
        .map_err(|e| map_error(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("min_offset", r.min_offset)?;
    d.set_item("end_offset", r.end_offset)?;
    d.set_item("records", r.records)?;
    d.set_item("dispatched", r.dispatched)?;
    d.set_item("consume_queues", r.consume_queues)?;
    d.set_item("consume_queue_files", r.consume_queue_files)?;
    d.set_item("index_files", r.index_files)?;
    d.set_item("truncated_at", r.truncated_at.clone())?;
    d.set_item("commitlog_files_removed", r.commitlog_files_removed)?;
    Ok(d)
}
