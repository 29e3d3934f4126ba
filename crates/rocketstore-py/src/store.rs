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
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use rocketstore::{Error, Scanner, Store, StoredMessage};

use crate::arrow;
use crate::config::{config_from_kwargs, config_values};
use crate::convert::{
    message_from_mapping, to_i32, At, Message, OwnedMessage, PutArgs, PutResult, Views,
};
use crate::error::{forked, map_error};

/// Messages fetched from the engine per round trip when iterating a scan.
const SCAN_BATCH: usize = 1024;

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

impl MessageStore {
    fn check_pid(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
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

    fn put_owned(
        &self,
        py: Python<'_>,
        msgs: Vec<OwnedMessage>,
    ) -> PyResult<Vec<rocketstore::PutResult>> {
        self.enter(py, move |store| {
            let views = Views::new(&msgs);
            match views.messages(&msgs).as_slice() {
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
    /// ``max_queue_nums_per_topic``. ``tags`` is a str; ``keys`` a str or a list of str without
    /// spaces; ``properties`` a mapping of str to str (reserved names such as ``TAGS``, ``KEYS``
    /// or ``DELAY`` are refused; use the matching argument). ``born_timestamp`` is epoch
    /// milliseconds (default: now); ``born_host``/``store_host`` are ``"ip:port"`` strings
    /// (default: the configured ``store_host``).
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
    /// ```
    #[pyo3(signature = (topic, body, *, queue_id = 0, tags = None, keys = None, properties = None, flag = 0, born_timestamp = None, born_host = None, store_host = None))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
        queue_id: i64,
        tags: Option<&Bound<'_, PyAny>>,
        keys: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        flag: i64,
        born_timestamp: Option<i64>,
        born_host: Option<&Bound<'_, PyAny>>,
        store_host: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PutResult> {
        self.check_pid()?;
        let at = At { index: None };
        let args = PutArgs {
            topic: Some(topic),
            body: Some(body),
            tags,
            keys,
            properties,
            born_host,
            store_host,
            ..PutArgs::default()
        };
        let mut msg = args.convert(at)?;
        msg.queue_id = to_i32(queue_id, "queue_id", at)?;
        msg.flag = to_i32(flag, "flag", at)?;
        msg.born_timestamp = born_timestamp;
        let results = self.put_owned(py, vec![msg])?;
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
    fn put_batch(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<PutResult>> {
        self.check_pid()?;
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = messages.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = messages.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            let type_name = messages
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string());
            return Err(PyTypeError::new_err(format!(
                "messages must be a list of dicts (or, with rocketstore.MessageStore, a pyarrow \
                 RecordBatch or Table), not {type_name}"
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
        let results = self.put_owned(py, owned)?;
        Ok(results.iter().map(PutResult::from_engine).collect())
    }

    /// Columnar put used by :class:`rocketstore.MessageStore` for Arrow input (private).
    ///
    /// ``columns`` maps put() argument names to buffer descriptors built by
    /// ``rocketstore._arrow``; the result is a tuple of raw little-endian result buffers.
    fn _put_columns<'py>(
        &self,
        py: Python<'py>,
        num_rows: usize,
        columns: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let store = self.store(py)?;
        arrow::put_columns(py, &store, num_rows, columns)
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
    fn look_message_by_offset(&self, py: Python<'_>, commitlog_offset: i64) -> PyResult<Message> {
        let store = self.store(py)?;
        let offset = offset_arg(py, &store, commitlog_offset)?;
        let m = py
            .detach(|| store.look_message_by_offset(offset))
            .map_err(|e| map_error(py, &e))?;
        Ok(Message::from_stored(py, m))
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
    #[pyo3(signature = (from_offset = 0, *, verify_crc = false))]
    fn scan(slf: &Bound<'_, Self>, from_offset: i64, verify_crc: bool) -> PyResult<ScanIterator> {
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

    /// Flushes everything written so far to disk and returns the durable offset.
    ///
    /// Example:
    ///
    /// ```python
    /// store.put("TopicTest", b"x")
    /// assert store.flush() == store.max_commitlog_offset()
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
    /// (``(offset, reason)`` of a torn tail, or None) and ``files_removed``.
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
        Ok(out.pop().map(|m| Message::from_stored(py, m)))
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
        Ok(out
            .into_iter()
            .map(|m| Message::from_stored(py, m))
            .collect())
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
            return Ok(u64::try_from(m.commitlog_offset).ok());
        }
        Ok(st.scanner.as_ref().map(Scanner::offset))
    }
}
