//! Conversions between Python values and the engine's message types.
//!
//! Input: Python arguments → [`OwnedMessage`] (owned, usable while detached from the
//! interpreter) → borrowed [`PutMessage`]s for the engine. Output: [`PutResult`] and
//! [`Message`] pyclasses.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyUnicodeError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyList, PyMapping, PyString, PyTuple};
use std::borrow::Cow;

use rocketstore::format::{
    offset_msg_id, parse_properties, parse_properties_into, property, property_value,
    MessageVersion, RecordHeader, RecordView,
};
use rocketstore::{HostAddr, PutMessage, StoredMessage, TransactionType};

use crate::error::{invalid_message, type_error};

/// Where an argument came from, for error messages: a `put` argument (no index) or the key of
/// message `index` of a `put_batch` list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    pub(crate) index: Option<usize>,
}

/// A message body: borrowed from an immutable `bytes` object, or copied (a `bytearray` or
/// `memoryview` may change while the interpreter is released, so it is copied first).
#[derive(Debug)]
pub(crate) enum Body {
    Py(PyBackedBytes),
    Owned(Vec<u8>),
}

impl Body {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Body::Py(b) => b,
            Body::Owned(v) => v,
        }
    }
}

/// One message's arguments, converted and owned.
#[derive(Debug)]
pub(crate) struct OwnedMessage {
    pub(crate) topic: PyBackedStr,
    pub(crate) body: Body,
    pub(crate) queue_id: i32,
    pub(crate) tags: Option<PyBackedStr>,
    /// The keys as given: one string (`keys_is_str`, stored as is) or a list's elements.
    pub(crate) keys: Vec<PyBackedStr>,
    pub(crate) keys_is_str: bool,
    pub(crate) properties: Vec<(PyBackedStr, PyBackedStr)>,
    pub(crate) producer_group: Option<PyBackedStr>,
    pub(crate) flag: i32,
    pub(crate) born_timestamp: Option<i64>,
    pub(crate) born_host: Option<HostAddr>,
    pub(crate) store_host: Option<HostAddr>,
    pub(crate) delay_level: i32,
    pub(crate) transaction: TransactionType,
    pub(crate) prepared_transaction_offset: i64,
}

/// The accepted `transaction` values and their engine types.
pub(crate) use rocketstore_arrow::put::TRANSACTION_NAMES;

/// A `transaction` value: `"prepared"`, `"commit"` or `"rollback"` (`None`: an ordinary
/// message).
pub(crate) fn parse_transaction(
    s: Option<&str>,
    index: Option<usize>,
) -> PyResult<TransactionType> {
    let Some(s) = s else {
        return Ok(TransactionType::NotType);
    };
    TRANSACTION_NAMES
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            invalid_message(
                "transaction",
                index,
                format_args!(
                    "{s:?} is not one of \"prepared\", \"commit\", \"rollback\" (or None)"
                ),
            )
        })
}

/// Python's `repr()` of a string (quotes and escapes as Python prints them).
pub(crate) fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(PyString::new(py, s).repr()?.to_cow()?.into_owned())
}

/// The names `put` accepts as keywords, which are also the keys of a `put_batch` dict.
pub(crate) use rocketstore_arrow::put::PUT_FIELDS;

/// Arguments `put` and `put_batch` dicts accept beyond [`PUT_FIELDS`] (not Arrow columns yet).
pub(crate) const PUT_EXTRA_FIELDS: [&str; 1] = ["producer_group"];

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// A `str` argument (never `None`).
pub(crate) fn extract_str(
    obj: &Bound<'_, PyAny>,
    field: &'static str,
    at: At,
) -> PyResult<PyBackedStr> {
    let Ok(s) = obj.cast::<PyString>() else {
        return Err(type_error(
            field,
            at.index,
            format_args!("must be str, not {}", type_name(obj)),
        ));
    };
    match PyBackedStr::try_from(s.clone()) {
        Ok(b) => Ok(b),
        Err(e) if e.is_instance_of::<PyUnicodeError>(obj.py()) => Err(invalid_message(
            field,
            at.index,
            "is not valid Unicode (it contains a lone surrogate and cannot be encoded as UTF-8)",
        )),
        Err(e) => Err(e),
    }
}

/// An optional `str` argument: `None` means absent.
fn extract_opt_str(
    obj: Option<&Bound<'_, PyAny>>,
    field: &'static str,
    at: At,
) -> PyResult<Option<PyBackedStr>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => extract_str(o, field, at).map(Some),
    }
}

/// A body: bytes (borrowed), bytearray or any 1-byte-item buffer such as memoryview (copied).
pub(crate) fn extract_body(obj: &Bound<'_, PyAny>, at: At) -> PyResult<Body> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Body::Py(PyBackedBytes::from(b.clone())));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Body::Py(PyBackedBytes::from(b.clone())));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(type_error(
            "body",
            at.index,
            "must be bytes-like (bytes, bytearray or memoryview), not str; encode it first, e.g. \
             body.encode()",
        ));
    }
    if obj.is_none() {
        return Err(type_error(
            "body",
            at.index,
            "must be bytes-like (bytes, bytearray or memoryview), not None",
        ));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => {
            let v = buf.to_vec(obj.py())?;
            drop(buf);
            Ok(Body::Owned(v))
        }
        Err(_) => Err(type_error(
            "body",
            at.index,
            format_args!(
                "must be bytes-like (bytes, bytearray, or a memoryview of bytes), not {}",
                type_name(obj)
            ),
        )),
    }
}

/// A Python int (or an object with `__index__`, like numpy integers) as i64, exactly as `put`'s
/// keyword arguments convert them; values outside the 64-bit range are `InvalidMessageError`s.
fn extract_i64(obj: &Bound<'_, PyAny>, field: &'static str, at: At) -> PyResult<i64> {
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) => Err(
            invalid_message(field, at.index, "is outside the 64-bit integer range"),
        ),
        Err(_) => Err(type_error(
            field,
            at.index,
            format_args!("must be int, not {}", type_name(obj)),
        )),
    }
}

/// Extractors of named arguments (`#[pyo3(from_py_with = ...)]`): a wrong type raises a
/// `TypeError` that names the argument in its message (`queue_id must be int, not str`),
/// where the default extraction only says `'str' object cannot be interpreted as an integer`.
pub(crate) mod arg {
    use super::{extract_i32, extract_i64, type_error, type_name, At};
    use pyo3::prelude::*;
    use pyo3::pybacked::PyBackedStr;

    const AT: At = At { index: None };

    macro_rules! ints {
        ($($f:ident: $t:ty = $extract:ident($name:literal);)*) => {$(
            pub(crate) fn $f(obj: &Bound<'_, PyAny>) -> PyResult<$t> {
                $extract(obj, $name, AT)
            }
        )*};
    }

    ints! {
        queue_id: i32 = extract_i32("queue_id");
        queue_id_i64: i64 = extract_i64("queue_id");
        offset: i64 = extract_i64("offset");
        flag: i64 = extract_i64("flag");
        delay_level: i64 = extract_i64("delay_level");
        prepared_transaction_offset: i64 = extract_i64("prepared_transaction_offset");
    }

    /// `born_timestamp`: an int or None.
    pub(crate) fn born_timestamp(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
        if obj.is_none() {
            return Ok(None);
        }
        extract_i64(obj, "born_timestamp", AT).map(Some)
    }

    fn text(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<PyBackedStr> {
        obj.extract::<PyBackedStr>().map_err(|_| {
            type_error(
                name,
                None,
                format_args!("must be str, not {}", type_name(obj)),
            )
        })
    }

    /// `topic` of the reads.
    pub(crate) fn topic(obj: &Bound<'_, PyAny>) -> PyResult<PyBackedStr> {
        text(obj, "topic")
    }

    /// `key` of `query_message`.
    pub(crate) fn key(obj: &Bound<'_, PyAny>) -> PyResult<PyBackedStr> {
        text(obj, "key")
    }
}

/// An int argument that must fit in an i32 (queue_id, flag).
pub(crate) fn to_i32(v: i64, field: &'static str, at: At) -> PyResult<i32> {
    i32::try_from(v).map_err(|_| {
        invalid_message(
            field,
            at.index,
            format_args!("{v} is outside the 32-bit integer range"),
        )
    })
}

fn extract_i32(obj: &Bound<'_, PyAny>, field: &'static str, at: At) -> PyResult<i32> {
    to_i32(extract_i64(obj, field, at)?, field, at)
}

/// `"ip:port"` or `"[v6]:port"`.
pub(crate) fn parse_host(s: &str, field: &'static str, at: At) -> PyResult<HostAddr> {
    s.parse::<HostAddr>().map_err(|e| {
        invalid_message(
            field,
            at.index,
            format_args!("{s:?} is not \"ip:port\" or \"[ipv6]:port\": {e}"),
        )
    })
}

fn extract_host(
    obj: Option<&Bound<'_, PyAny>>,
    field: &'static str,
    at: At,
) -> PyResult<Option<HostAddr>> {
    match extract_opt_str(obj, field, at)? {
        None => Ok(None),
        Some(s) => parse_host(&s, field, at).map(Some),
    }
}

/// `keys`: `None`, one `str`, or a list/tuple of `str`.
fn extract_keys(obj: Option<&Bound<'_, PyAny>>, at: At) -> PyResult<Vec<PyBackedStr>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_none() {
        return Ok(Vec::new());
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(vec![extract_str(obj, "keys", at)?]);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(type_error(
            "keys",
            at.index,
            format_args!(
                "must be a str or a list/tuple of str, not {}",
                type_name(obj)
            ),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        if !item.is_instance_of::<PyString>() {
            return Err(type_error(
                "keys",
                at.index,
                format_args!(
                    "must be a str or a list/tuple of str; found an item of type {}",
                    type_name(item)
                ),
            ));
        }
        out.push(extract_str(item, "keys", at)?);
    }
    Ok(out)
}

/// `properties`: `None` or a `Mapping[str, str]`, in iteration order.
fn extract_properties(
    obj: Option<&Bound<'_, PyAny>>,
    at: At,
) -> PyResult<Vec<(PyBackedStr, PyBackedStr)>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_none() {
        return Ok(Vec::new());
    }
    let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = if let Ok(d) = obj.cast::<PyDict>() {
        d.iter().collect()
    } else if let Ok(m) = obj.cast::<PyMapping>() {
        let mut v = Vec::new();
        for item in m.items()?.iter() {
            let (k, val): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            v.push((k, val));
        }
        v
    } else {
        return Err(type_error(
            "properties",
            at.index,
            format_args!(
                "must be a mapping of str to str (e.g. a dict), not {}",
                type_name(obj)
            ),
        ));
    };
    let mut out = Vec::with_capacity(pairs.len());
    for (k, v) in &pairs {
        if !k.is_instance_of::<PyString>() || !v.is_instance_of::<PyString>() {
            return Err(type_error(
                "properties",
                at.index,
                format_args!(
                    "must map str to str; found a {} key with a {} value",
                    type_name(k),
                    type_name(v)
                ),
            ));
        }
        out.push((
            extract_str(k, "properties", at)?,
            extract_str(v, "properties", at)?,
        ));
    }
    Ok(out)
}

/// The arguments of `put` (or one dict of `put_batch`), as Python objects.
#[derive(Debug, Default)]
pub(crate) struct PutArgs<'a, 'py> {
    pub(crate) topic: Option<&'a Bound<'py, PyAny>>,
    pub(crate) body: Option<&'a Bound<'py, PyAny>>,
    pub(crate) queue_id: Option<&'a Bound<'py, PyAny>>,
    pub(crate) tags: Option<&'a Bound<'py, PyAny>>,
    pub(crate) keys: Option<&'a Bound<'py, PyAny>>,
    pub(crate) properties: Option<&'a Bound<'py, PyAny>>,
    pub(crate) flag: Option<&'a Bound<'py, PyAny>>,
    pub(crate) born_timestamp: Option<&'a Bound<'py, PyAny>>,
    pub(crate) born_host: Option<&'a Bound<'py, PyAny>>,
    pub(crate) store_host: Option<&'a Bound<'py, PyAny>>,
    pub(crate) delay_level: Option<&'a Bound<'py, PyAny>>,
    pub(crate) transaction: Option<&'a Bound<'py, PyAny>>,
    pub(crate) prepared_transaction_offset: Option<&'a Bound<'py, PyAny>>,
    pub(crate) producer_group: Option<&'a Bound<'py, PyAny>>,
}

impl PutArgs<'_, '_> {
    /// Converts and checks the Python types; the values are checked by the engine.
    pub(crate) fn convert(&self, at: At) -> PyResult<OwnedMessage> {
        let topic = match self.topic {
            Some(t) => extract_str(t, "topic", at)?,
            None => {
                return Err(invalid_message(
                    "topic",
                    at.index,
                    "is required (missing key 'topic')",
                ))
            }
        };
        let body = match self.body {
            Some(b) => extract_body(b, at)?,
            None => {
                return Err(invalid_message(
                    "body",
                    at.index,
                    "is required (missing key 'body')",
                ))
            }
        };
        // `None` is not a default here: only leaving the argument out is.
        let queue_id = self
            .queue_id
            .map_or(Ok(0), |q| extract_i32(q, "queue_id", at))?;
        let flag = self.flag.map_or(Ok(0), |f| extract_i32(f, "flag", at))?;
        let born_timestamp = match self.born_timestamp {
            Some(t) if !t.is_none() => Some(extract_i64(t, "born_timestamp", at)?),
            _ => None,
        };
        let delay_level = self
            .delay_level
            .map_or(Ok(0), |d| extract_i32(d, "delay_level", at))?;
        let prepared_transaction_offset = match self.prepared_transaction_offset {
            Some(p) => extract_i64(p, "prepared_transaction_offset", at)?,
            None => 0,
        };
        let transaction = extract_opt_str(self.transaction, "transaction", at)?;
        let transaction = parse_transaction(transaction.as_deref(), at.index)?;
        Ok(OwnedMessage {
            topic,
            body,
            queue_id,
            delay_level,
            transaction,
            prepared_transaction_offset,
            tags: extract_opt_str(self.tags, "tags", at)?,
            keys_is_str: self.keys.is_some_and(|k| k.is_instance_of::<PyString>()),
            keys: extract_keys(self.keys, at)?,
            properties: extract_properties(self.properties, at)?,
            producer_group: extract_opt_str(self.producer_group, "producer_group", at)?,
            flag,
            born_timestamp,
            born_host: extract_host(self.born_host, "born_host", at)?,
            store_host: extract_host(self.store_host, "store_host", at)?,
        })
    }
}

/// Converts one dict of `put_batch` (message `index`).
pub(crate) fn message_from_mapping(obj: &Bound<'_, PyAny>, index: usize) -> PyResult<OwnedMessage> {
    let at = At { index: Some(index) };
    let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = if let Ok(d) = obj.cast::<PyDict>() {
        d.iter().collect()
    } else if let Ok(m) = obj.cast::<PyMapping>() {
        let mut v = Vec::new();
        for item in m.items()?.iter() {
            v.push(item.extract()?);
        }
        v
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "message {index} must be a dict of put() arguments (topic, body, queue_id, ...), not {}",
            type_name(obj)
        )));
    };
    let mut args = PutArgs::default();
    for (k, v) in &pairs {
        let Ok(key) = k.cast::<PyString>() else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "message {index}: keys must be str (put() argument names), not {}",
                type_name(k)
            )));
        };
        let key = key.to_cow()?;
        let slot = match key.as_ref() {
            "topic" => &mut args.topic,
            "body" => &mut args.body,
            "queue_id" => &mut args.queue_id,
            "tags" => &mut args.tags,
            "keys" => &mut args.keys,
            "properties" => &mut args.properties,
            "flag" => &mut args.flag,
            "born_timestamp" => &mut args.born_timestamp,
            "born_host" => &mut args.born_host,
            "store_host" => &mut args.store_host,
            "delay_level" => &mut args.delay_level,
            "transaction" => &mut args.transaction,
            "prepared_transaction_offset" => &mut args.prepared_transaction_offset,
            "producer_group" => &mut args.producer_group,
            other => {
                return Err(crate::error::invalid_message_field(
                    other,
                    format!(
                    "invalid message: message {index}: unknown key {other:?} (expected one of: {})",
                    PUT_FIELDS
                        .iter()
                        .chain(&PUT_EXTRA_FIELDS)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                ))
            }
        };
        *slot = Some(v);
    }
    // Required keys must not be None.
    for (name, v) in [("topic", args.topic), ("body", args.body)] {
        if let Some(v) = v {
            if v.is_none() {
                return Err(type_error(name, at.index, "must not be None"));
            }
        }
    }
    args.convert(at)
}

/// The borrowed views of a batch of owned messages, as the engine takes them.
///
/// Built in two steps because `PutMessage` borrows its key and property slices: first the flat
/// `keys`/`props` vectors, then the messages slicing them.
#[derive(Debug, Default)]
pub(crate) struct Views<'a> {
    keys: Vec<&'a str>,
    props: Vec<(&'a str, &'a str)>,
    ranges: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl<'a> Views<'a> {
    pub(crate) fn new(msgs: &'a [OwnedMessage]) -> Self {
        let mut v = Views {
            keys: Vec::with_capacity(msgs.iter().map(|m| m.keys.len()).sum()),
            props: Vec::with_capacity(msgs.iter().map(|m| m.properties.len()).sum()),
            ranges: Vec::with_capacity(msgs.len()),
        };
        for m in msgs {
            let k0 = v.keys.len();
            if m.keys_is_str {
                // One string is stored as is (rocketstore_format::keys).
                for k in &m.keys {
                    v.keys.extend(rocketstore_format::keys::key_parts(k));
                }
            } else {
                v.keys.extend(m.keys.iter().map(|k| &**k));
            }
            let p0 = v.props.len();
            v.props
                .extend(m.properties.iter().map(|(k, val)| (&**k, &**val)));
            v.ranges.push((k0..v.keys.len(), p0..v.props.len()));
        }
        v
    }

    pub(crate) fn messages<'b>(&'b self, msgs: &'a [OwnedMessage]) -> Vec<PutMessage<'b>>
    where
        'a: 'b,
    {
        msgs.iter()
            .zip(&self.ranges)
            .map(|(m, (kr, pr))| PutMessage {
                topic: &m.topic,
                body: m.body.as_slice(),
                queue_id: m.queue_id,
                tags: m.tags.as_deref(),
                keys: self.keys.get(kr.clone()).unwrap_or_default(),
                properties: self.props.get(pr.clone()).unwrap_or_default(),
                flag: m.flag,
                born_timestamp: m.born_timestamp,
                born_host: m.born_host,
                store_host: m.store_host,
                delay_level: m.delay_level,
                transaction: m.transaction,
                prepared_transaction_offset: m.prepared_transaction_offset,
                producer_group: m.producer_group.as_deref(),
                ..PutMessage::default()
            })
            .collect()
    }
}

/// The result of putting one message (RocketMQ `PutMessageResult` + `AppendMessageResult`).
///
/// ``status`` is a :class:`rocketstore.PutMessageStatus` (a ``str`` enum: it compares equal to
/// RocketMQ's ``PutMessageStatus`` name): ``PUT_OK``, or for example ``FLUSH_DISK_TIMEOUT``
/// (written, but the synchronous flush did not finish in time).
///
/// Example:
///
/// ```python
/// r = store.put("TopicTest", b"hello")
/// assert r.status == "PUT_OK" and r.ok
/// msg = store.look_message_by_offset(r.commitlog_offset)
/// ```
#[pyclass(module = "rocketstore._native", frozen, eq, hash)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PutResult {
    /// RocketMQ's PutMessageStatus name, e.g. "PUT_OK" or "FLUSH_DISK_TIMEOUT".
    pub(crate) status: &'static str,
    /// The offset message id: store host + commit log offset, 32 (IPv4) or 56 (IPv6) hex digits.
    #[pyo3(get)]
    pub(crate) msg_id: String,
    /// Absolute commit log offset of the record (-1 if it was not written).
    #[pyo3(get)]
    pub(crate) commitlog_offset: i64,
    /// Offset of the message in its (topic, queue_id) consume queue (-1 if not written).
    #[pyo3(get)]
    pub(crate) queue_offset: i64,
    /// Size of the record in bytes.
    #[pyo3(get)]
    pub(crate) wrote_bytes: i32,
    /// STORETIMESTAMP written into the record (epoch milliseconds).
    #[pyo3(get)]
    pub(crate) store_timestamp: i64,
}

impl PutResult {
    pub(crate) fn from_engine(r: &rocketstore::PutResult) -> Self {
        PutResult {
            status: r.status.as_str(),
            msg_id: r.msg_id(),
            commitlog_offset: r.commitlog_offset,
            queue_offset: r.queue_offset,
            wrote_bytes: r.wrote_bytes,
            store_timestamp: r.store_timestamp,
        }
    }
}

#[pymethods]
impl PutResult {
    /// True if ``status == "PUT_OK"`` (written and, under SYNC_FLUSH, flushed).
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"x")
    /// if not r.ok:
    ///     log.warning("put returned %s", r.status)
    /// ```
    #[getter]
    fn ok(&self) -> bool {
        self.status == "PUT_OK"
    }

    /// What happened: a :class:`rocketstore.PutMessageStatus` (``PUT_OK``,
    /// ``FLUSH_DISK_TIMEOUT``, ...), a ``str`` enum like ``GetResult.status``.
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PUT_STATUS_ENUM
            .import(py, "rocketstore._status", "PutMessageStatus")?
            .getattr(self.status)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "PutResult(status={}, msg_id={}, commitlog_offset={}, queue_offset={}, wrote_bytes={}, \
             store_timestamp={})",
            py_repr(py, self.status)?,
            py_repr(py, &self.msg_id)?,
            self.commitlog_offset,
            self.queue_offset,
            self.wrote_bytes,
            self.store_timestamp
        ))
    }
}

/// `rocketstore.PutMessageStatus` (a `StrEnum` defined in Python, in `rocketstore._status`).
static PUT_STATUS_ENUM: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> =
    pyo3::sync::PyOnceLock::new();

/// A message read back from the commit log (RocketMQ ``MessageExt``).
///
/// Timestamps are epoch milliseconds, hosts are ``"ip:port"`` strings, ``properties`` holds
/// every stored property (including ``TAGS``, ``KEYS`` and ``UNIQ_KEY``), and ``tags``,
/// ``keys`` and ``uniq_key`` are those properties decoded. Messages compare equal when every
/// stored field is equal.
///
/// Example:
///
/// ```python
/// r = store.put("TopicTest", b"hello", tags="TagA", keys=["order-1"])
/// m = store.look_message_by_offset(r.commitlog_offset)
/// assert (m.topic, m.body, m.tags, m.keys) == ("TopicTest", b"hello", "TagA", ["order-1"])
/// assert m.msg_id == r.msg_id
/// ```
#[pyclass(module = "rocketstore._native", frozen)]
#[derive(Debug)]
pub(crate) struct Message {
    /// Topic name.
    #[pyo3(get)]
    topic: Py<PyString>,
    /// The body (bytes).
    #[pyo3(get)]
    body: Py<PyBytes>,
    /// Holds the stored properties string (`name\x01value\x02...`) at `props`, parsed by the
    /// format crate when a property getter asks (most readers only look at the body). The
    /// messages of one read share one buffer (one object per read, not per message).
    props_buf: Py<PyBytes>,
    props: (usize, usize),
    /// The fixed-width fields of the record.
    h: RecordHeader,
    store_size: i32,
    body_crc: i32,
    version: MessageVersion,
}

/// Builds the [`Message`]s of one read: consecutive messages of one topic share its `str`.
#[derive(Debug, Default)]
pub(crate) struct MessageBuilder {
    topic: Option<Py<PyString>>,
}

impl MessageBuilder {
    /// A builder whose messages of `topic` share that `str` object (the caller's argument).
    pub(crate) fn with_topic(topic: Py<PyString>) -> Self {
        Self { topic: Some(topic) }
    }

    fn topic(&mut self, py: Python<'_>, topic: &str) -> Py<PyString> {
        if let Some(t) = &self.topic {
            if t.bind(py).to_str().is_ok_and(|name| name == topic) {
                return t.clone_ref(py);
            }
        }
        let t = PyString::new(py, topic).unbind();
        self.topic = Some(t.clone_ref(py));
        t
    }

    fn message(
        &mut self,
        py: Python<'_>,
        v: &RecordView<'_>,
        props_buf: &Py<PyBytes>,
        props: (usize, usize),
    ) -> Message {
        Message {
            topic: self.topic(py, v.topic),
            body: PyBytes::new(py, v.body).unbind(),
            props_buf: props_buf.clone_ref(py),
            props,
            h: v.header,
            store_size: v.total_size,
            body_crc: v.body_crc,
            version: v.version,
        }
    }

    /// The messages of records viewed in the store's mapping, in order: each body is copied
    /// once, from the mapping into its `bytes` object; the properties of all of them are
    /// copied into one shared buffer.
    pub(crate) fn of_views(&mut self, py: Python<'_>, views: &[RecordView<'_>]) -> Vec<Message> {
        let total: usize = views.iter().map(|v| v.properties_raw.len()).sum();
        let buf = PyBytes::new_with(py, total, |out| {
            let mut at = 0;
            for v in views {
                let n = v.properties_raw.len();
                if let Some(dst) = out.get_mut(at..at + n) {
                    dst.copy_from_slice(v.properties_raw);
                }
                at += n;
            }
            Ok(())
        });
        // `new_with` fails only when Python cannot allocate; then each message gets its own.
        let buf = match buf {
            Ok(b) => b.unbind(),
            Err(_) => return views.iter().map(|v| self.of_view(py, v)).collect(),
        };
        let mut at = 0;
        views
            .iter()
            .map(|v| {
                let range = (at, at + v.properties_raw.len());
                at = range.1;
                self.message(py, v, &buf, range)
            })
            .collect()
    }

    /// A message from a record viewed in the store's mapping (see [`MessageBuilder::of_views`]).
    pub(crate) fn of_view(&mut self, py: Python<'_>, v: &RecordView<'_>) -> Message {
        let buf = PyBytes::new(py, v.properties_raw).unbind();
        self.message(py, v, &buf, (0, v.properties_raw.len()))
    }

    /// A message from an owned decoded record.
    pub(crate) fn of_stored(&mut self, py: Python<'_>, m: &StoredMessage) -> Message {
        let props = m.properties.to_bytes();
        Message {
            topic: self.topic(py, &m.topic),
            body: PyBytes::new(py, &m.body).unbind(),
            props_buf: PyBytes::new(py, &props).unbind(),
            props: (0, props.len()),
            h: m.header,
            store_size: m.store_size,
            body_crc: m.body_crc,
            version: m.version,
        }
    }
}

impl Message {
    pub(crate) fn from_stored(py: Python<'_>, m: StoredMessage) -> Message {
        MessageBuilder::default().of_stored(py, &m)
    }

    /// This message as a RocketMQ consumer sees it (see `decompressed`): `self` if its body
    /// is not compressed, else a copy with the body decompressed (the GIL released) and the
    /// compression bits of `sys_flag` cleared.
    pub(crate) fn into_decompressed(self, py: Python<'_>) -> PyResult<Message> {
        use rocketstore::format::sysflag::{COMPRESSED_FLAG, COMPRESSION_TYPE_MASK};
        if self.h.sys_flag & COMPRESSED_FLAG == 0 {
            return Ok(self);
        }
        let body = self.body.bind(py).as_bytes();
        let mut out = Vec::new();
        let sys_flag = self.h.sys_flag;
        let max = rocketstore::compression::DEFAULT_MAX_DECOMPRESSED;
        let offset = u64::try_from(self.h.physical_offset).ok();
        py.detach(|| {
            rocketstore::compression::BodyCodec::default().decompress(sys_flag, body, max, &mut out)
        })
        .map_err(|e| {
            crate::compression::codec_error(py, &e, offset, "cannot decompress the body: ")
        })?;
        let mut h = self.h;
        h.sys_flag &= !(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK);
        Ok(Message {
            body: PyBytes::new(py, &out).unbind(),
            h,
            ..self
        })
    }

    /// `messages`, each [`Message::into_decompressed`] if `decompress`.
    pub(crate) fn decompress_all(
        py: Python<'_>,
        messages: Vec<Message>,
        decompress: bool,
    ) -> PyResult<Vec<Message>> {
        if !decompress {
            return Ok(messages);
        }
        messages
            .into_iter()
            .map(|m| m.into_decompressed(py))
            .collect()
    }

    /// The stored properties string.
    fn props<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        let (from, to) = self.props;
        self.props_buf
            .as_bytes(py)
            .get(from..to)
            .unwrap_or_default()
    }

    /// The value of property `name` (decoded like RocketMQ: invalid UTF-8 becomes U+FFFD).
    fn property<'a>(&'a self, py: Python<'_>, name: &str) -> Option<Cow<'a, str>> {
        property_value(self.props(py), name).map(String::from_utf8_lossy)
    }

    fn keys_list(&self, py: Python<'_>) -> Vec<String> {
        self.property(py, property::KEYS)
            .map(|k| {
                rocketstore::format::keys::index_tokens(&k)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn msg_id_string(&self) -> String {
        offset_msg_id(&self.h.store_host, self.h.physical_offset)
    }
}

#[pymethods]
impl Message {
    /// Queue id.
    #[getter]
    fn queue_id(&self) -> i32 {
        self.h.queue_id
    }

    /// Offset of the message in its (topic, queue_id) consume queue.
    #[getter]
    fn queue_offset(&self) -> i64 {
        self.h.queue_offset
    }

    /// Absolute commit log offset of the record (PHYSICALOFFSET).
    #[getter]
    fn commitlog_offset(&self) -> i64 {
        self.h.physical_offset
    }

    /// Record size in bytes (TOTALSIZE).
    #[getter]
    fn store_size(&self) -> i32 {
        self.store_size
    }

    /// BODYCRC as stored (RocketMQ's CRC-32 of the body, masked with 0x7FFFFFFF).
    #[getter]
    fn body_crc(&self) -> i32 {
        self.body_crc
    }

    /// Producer flag.
    #[getter]
    fn flag(&self) -> i32 {
        self.h.flag
    }

    /// SYSFLAG bits (transaction type, host address widths, ...).
    #[getter]
    fn sys_flag(&self) -> i32 {
        self.h.sys_flag
    }

    /// The TAGS property, or None.
    #[getter]
    fn tags<'a>(&'a self, py: Python<'_>) -> Option<Cow<'a, str>> {
        self.property(py, property::TAGS)
    }

    /// The KEYS property split on spaces (an empty list if there is none).
    #[getter]
    fn keys(&self, py: Python<'_>) -> Vec<String> {
        self.keys_list(py)
    }

    /// Every stored property, in stored order (a new dict on each access).
    #[getter]
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let mut pairs = Vec::new();
        let props = self.props(py);
        if parse_properties_into(props, &mut pairs) {
            for (k, v) in pairs {
                d.set_item(k, v)?;
            }
        } else {
            for (k, v) in parse_properties(props).iter() {
                d.set_item(k, v)?;
            }
        }
        Ok(d)
    }

    /// BORNTIMESTAMP: when the producer created the message, epoch milliseconds.
    #[getter]
    fn born_timestamp(&self) -> i64 {
        self.h.born_timestamp
    }

    /// BORNHOST as "ip:port" (or `"[ipv6]:port"`).
    #[getter]
    fn born_host(&self) -> String {
        self.h.born_host.to_string()
    }

    /// STORETIMESTAMP: when the store wrote the message, epoch milliseconds.
    #[getter]
    fn store_timestamp(&self) -> i64 {
        self.h.store_timestamp
    }

    /// STOREHOST as "ip:port" (or `"[ipv6]:port"`).
    #[getter]
    fn store_host(&self) -> String {
        self.h.store_host.to_string()
    }

    /// RECONSUMETIMES.
    #[getter]
    fn reconsume_times(&self) -> i32 {
        self.h.reconsume_times
    }

    /// PREPARED TRANSACTION OFFSET.
    #[getter]
    fn prepared_transaction_offset(&self) -> i64 {
        self.h.prepared_transaction_offset
    }

    /// The offset message id: store host + commit log offset as uppercase hex.
    #[getter]
    fn msg_id(&self) -> String {
        self.msg_id_string()
    }

    /// The UNIQ_KEY property (the producer's message id), or None.
    #[getter]
    fn uniq_key<'a>(&'a self, py: Python<'_>) -> Option<Cow<'a, str>> {
        self.property(py, property::UNIQ_KEY)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        match other.cast::<Message>() {
            Ok(o) => {
                let o = o.get();
                let same = self.h == o.h
                    && self.store_size == o.store_size
                    && self.body_crc == o.body_crc
                    && self.version == o.version
                    && (self.props(py) == o.props(py)
                        || parse_properties(self.props(py)) == parse_properties(o.props(py)))
                    && self.topic.bind(py).to_str().ok() == o.topic.bind(py).to_str().ok()
                    && self.body.bind(py).as_bytes() == o.body.bind(py).as_bytes();
                PyBool::new(py, same).to_owned().into_any().unbind()
            }
            Err(_) => py.NotImplemented(),
        }
    }

    fn __hash__(&self, py: Python<'_>) -> isize {
        // Consistent with __eq__: equal messages have equal topics and commit log offsets.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let topic = self.topic.bind(py).to_str().unwrap_or_default().to_owned();
        for b in topic.bytes().chain(self.h.physical_offset.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        (h >> 1) as isize
    }

    /// This message as a RocketMQ consumer sees it: if its body is compressed (``sys_flag``
    /// bit 0, the codec in bits 8-10, as ``put(..., compression=...)`` and RocketMQ producers
    /// write it), a copy whose ``body`` is decompressed and whose ``sys_flag`` has those bits
    /// cleared; else this message. A body that does not decompress raises
    /// :class:`CorruptionError` naming its commit log offset. The reads' ``decompress=True``
    /// does this for every message they return.
    ///
    /// Example:
    ///
    /// ```python
    /// r = store.put("TopicTest", b"x" * 10_000, compression="zstd")
    /// m = store.look_message_by_offset(r.commitlog_offset)
    /// assert m.sys_flag & 1 and m.decompressed().body == b"x" * 10_000
    /// ```
    pub(crate) fn decompressed(&self, py: Python<'_>) -> PyResult<Message> {
        let copy = Message {
            topic: self.topic.clone_ref(py),
            body: self.body.clone_ref(py),
            props_buf: self.props_buf.clone_ref(py),
            props: self.props,
            h: self.h,
            store_size: self.store_size,
            body_crc: self.body_crc,
            version: self.version,
        };
        copy.into_decompressed(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let body = self.body.bind(py).as_bytes();
        let shown = PyBytes::new(py, body.get(..32).unwrap_or(body)).repr()?;
        let more = if body.len() > 32 {
            format!("...({} bytes)", body.len())
        } else {
            String::new()
        };
        Ok(format!(
            "Message(topic={}, queue_id={}, queue_offset={}, commitlog_offset={}, body={shown}{more}, \
             tags={}, keys={}, msg_id={})",
            self.topic.bind(py).repr()?,
            self.h.queue_id,
            self.h.queue_offset,
            self.h.physical_offset,
            match self.property(py, property::TAGS) {
                Some(t) => py_repr(py, &t)?,
                None => "None".to_string(),
            },
            PyList::new(py, self.keys_list(py))?.repr()?,
            py_repr(py, &self.msg_id_string())?,
        ))
    }
}
