//! The read path's result types: `GetResult` (with `rocketstore.GetMessageStatus`) and the
//! statistics dict.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};
use rocketstore::{GetStatus, StoredMessage};

use crate::convert::{Message, MessageBuilder};

/// `rocketstore.GetMessageStatus` (a `StrEnum` defined in Python, in `rocketstore._status`).
static STATUS_ENUM: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The `GetMessageStatus` member named `name`.
pub(crate) fn status_member<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let cls = STATUS_ENUM.import(py, "rocketstore._status", "GetMessageStatus")?;
    cls.getattr(name)
}

/// The result of ``get_message`` / ``pull`` (RocketMQ ``GetMessageResult``).
///
/// ``status`` is a :class:`rocketstore.GetMessageStatus` (a ``str`` enum: it compares equal to
/// RocketMQ's name, e.g. ``"FOUND"``); ``next_begin_offset`` is where the next read of the queue
/// should start; ``min_offset``/``max_offset`` are the queue's bounds (``max_offset`` is the
/// offset the next message will get); ``messages`` holds the messages found, in queue order.
///
/// Example:
///
/// ```python
/// r = store.get_message("TopicTest", 0, 0, 32)
/// if r.status is rocketstore.GetMessageStatus.FOUND:
///     for m in r.messages:
///         print(m.queue_offset, m.body)
/// offset = r.next_begin_offset
/// ```
#[pyclass(module = "rocketstore._native", frozen)]
#[derive(Debug)]
pub(crate) struct GetResult {
    status: &'static str,
    /// Where the next read of this queue should start (RocketMQ's nextBeginOffset).
    #[pyo3(get)]
    next_begin_offset: i64,
    /// The queue's first offset.
    #[pyo3(get)]
    min_offset: i64,
    /// The queue's end: the offset the next message will get.
    #[pyo3(get)]
    max_offset: i64,
    messages: Py<PyList>,
}

impl GetResult {
    /// From record handles: each message is built straight from the mapping (one copy of its
    /// body, into its `bytes`).
    pub(crate) fn from_records(py: Python<'_>, r: rocketstore::GetRecords) -> PyResult<Self> {
        let views: Vec<_> = r.records.iter().filter_map(|h| h.view()).collect();
        let messages = PyList::new(py, MessageBuilder::default().of_views(py, &views))?;
        Ok(GetResult {
            status: r.status.as_str(),
            next_begin_offset: r.next_begin_offset,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            messages: messages.unbind(),
        })
    }

    /// This result with every message [`Message::into_decompressed`] if `decompress`.
    pub(crate) fn decompress(self, py: Python<'_>, decompress: bool) -> PyResult<Self> {
        if !decompress {
            return Ok(self);
        }
        let mut out = Vec::with_capacity(self.messages.bind(py).len());
        for m in self.messages.bind(py).iter() {
            out.push(m.cast::<Message>()?.get().decompressed(py)?);
        }
        Ok(GetResult {
            messages: PyList::new(py, out)?.unbind(),
            ..self
        })
    }

    pub(crate) fn from_engine(py: Python<'_>, r: rocketstore::GetResult) -> PyResult<Self> {
        let messages = PyList::new(
            py,
            r.messages
                .into_iter()
                .map(|m: StoredMessage| Message::from_stored(py, m)),
        )?;
        Ok(GetResult {
            status: r.status.as_str(),
            next_begin_offset: r.next_begin_offset,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            messages: messages.unbind(),
        })
    }
}

#[pymethods]
impl GetResult {
    /// What happened: a :class:`rocketstore.GetMessageStatus` (``FOUND``, ``OFFSET_OVERFLOW_ONE``,
    /// ``NO_MATCHED_MESSAGE``, ...).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        status_member(py, self.status)
    }

    /// The messages found (a new list on each access), in queue order.
    #[getter]
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = self.messages.bind(py);
        PyList::new(py, l.iter())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.messages.bind(py).len()
    }

    /// Iterates the messages found (``for m in store.get_message(...)``).
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.messages.bind(py).try_iter().map(Bound::into_any)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "GetResult(status={}, next_begin_offset={}, min_offset={}, max_offset={}, messages=[{} \
             message(s)])",
            self.status,
            self.next_begin_offset,
            self.min_offset,
            self.max_offset,
            self.messages.bind(py).len()
        )
    }
}

/// True for the statuses a long poll keeps waiting on (`Store::pull`'s rule).
pub(crate) fn pull_waits(status: GetStatus, offset: i64) -> bool {
    match status {
        GetStatus::NoMatchedMessage | GetStatus::OffsetOverflowOne | GetStatus::OffsetFoundNull => {
            true
        }
        GetStatus::NoMessageInQueue => offset == 0,
        _ => false,
    }
}

fn per_topic<'py>(py: Python<'py>, rows: &[(String, u64, u64)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (topic, messages, bytes) in rows {
        let t = PyDict::new(py);
        t.set_item("messages", messages)?;
        t.set_item("bytes", bytes)?;
        d.set_item(topic, t)?;
    }
    Ok(d)
}

/// `Store::stats` as a dict (see `MessageStore.stats`).
pub(crate) fn stats_dict<'py>(
    py: Python<'py>,
    s: &rocketstore::StoreStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("put_by_topic", per_topic(py, &s.put_by_topic)?)?;
    d.set_item("get_by_topic", per_topic(py, &s.get_by_topic)?)?;
    let lat = PyDict::new(py);
    for (label, n) in &s.put_latency {
        lat.set_item(label, n)?;
    }
    d.set_item("put_latency", lat)?;
    d.set_item("flush_count", s.flush_count)?;
    d.set_item("flush_behind_bytes", s.flush_behind_bytes)?;
    d.set_item("writeback_started_bytes", s.writeback_started_bytes)?;
    d.set_item("dispatch_behind_bytes", s.dispatch_behind_bytes)?;
    d.set_item("dispatched_messages", s.dispatched_messages)?;
    d.set_item("commitlog_files", s.commitlog_files)?;
    d.set_item("consume_queues", s.consume_queues)?;
    d.set_item("index_files", s.index_files)?;
    d.set_item("waiting_pulls", s.waiting_pulls)?;
    d.set_item("writer_created_files", s.writer_created_files)?;
    Ok(d)
}
