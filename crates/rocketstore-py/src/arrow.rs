//! The columnar half of `put_batch` for Arrow input.
//!
//! `rocketstore._arrow` (Python) normalizes each column with pyarrow and hands over its raw
//! buffers as `bytes`; this module views them as `PutMessage`s without creating a Python
//! object per row, writes the batch with the interpreter released, and returns the result
//! columns as raw buffers that Python wraps with `pa.Array.from_buffers`.
//!
//! Buffer conventions (native byte order, as Arrow keeps them in memory):
//!
//! * `("binary", offsets, data, validity, bit_offset)`: `offsets` holds `n + 1` int64 values
//!   relative to `offsets[0]`, and `data` holds exactly bytes `offsets[0]..offsets[n]`.
//! * `("int32" | "int64", values, validity, bit_offset)`: `n` values.
//! * `("list", offsets, validity, bit_offset, child)`: `child` is a binary descriptor holding
//!   exactly elements `offsets[0]..offsets[n]`.
//! * `("map", offsets, validity, bit_offset, keys, values)`: likewise, with two children.
//!
//! `validity` is `None` (no nulls) or an Arrow validity bitmap whose bit `bit_offset + i`
//! says whether row `i` is valid. Every length, offset and bit is checked: malformed buffers
//! raise `ValueError`, never read out of bounds.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rocketstore::{HostAddr, PutMessage, PutStatus, Store, TransactionType};

use crate::convert::{PUT_FIELDS, TRANSACTION_NAMES};
use crate::error::{invalid_message, invalid_message_field, map_error};

/// A conversion failure of row data, raised as `InvalidMessageError` after re-attaching.
#[derive(Debug)]
struct RowError {
    field: &'static str,
    index: usize,
    reason: String,
}

impl RowError {
    fn new(field: &'static str, index: usize, reason: impl Into<String>) -> Self {
        RowError {
            field,
            index,
            reason: reason.into(),
        }
    }
}

/// Why `put_columns` failed.
#[derive(Debug)]
enum Failure {
    Row(RowError),
    Engine(rocketstore::Error),
    Malformed(String),
}

fn malformed(msg: impl Into<String>) -> Failure {
    Failure::Malformed(msg.into())
}

fn read_i64(buf: &[u8], i: usize) -> Option<i64> {
    let start = i.checked_mul(8)?;
    let b: [u8; 8] = buf.get(start..start.checked_add(8)?)?.try_into().ok()?;
    Some(i64::from_ne_bytes(b))
}

fn read_i32(buf: &[u8], i: usize) -> Option<i32> {
    let start = i.checked_mul(4)?;
    let b: [u8; 4] = buf.get(start..start.checked_add(4)?)?.try_into().ok()?;
    Some(i32::from_ne_bytes(b))
}

/// An Arrow validity bitmap (absent: every row valid).
#[derive(Debug)]
struct Validity {
    bits: Option<PyBackedBytes>,
    offset: usize,
}

impl Validity {
    fn extract(
        bits: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        len: usize,
        name: &str,
    ) -> PyResult<Self> {
        let bits = if bits.is_none() {
            None
        } else {
            Some(bytes_arg(bits, name)?)
        };
        let offset: usize = offset.extract()?;
        if let Some(b) = &bits {
            let needed = offset.checked_add(len).map(|n| n.div_ceil(8));
            if needed.is_none_or(|n| b.len() < n) {
                return Err(PyValueError::new_err(format!(
                    "{name}: validity bitmap is too short for {len} rows"
                )));
            }
        }
        Ok(Validity { bits, offset })
    }

    fn is_valid(&self, i: usize) -> bool {
        match &self.bits {
            None => true,
            Some(b) => {
                let bit = self.offset.saturating_add(i);
                b.get(bit / 8)
                    .is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
            }
        }
    }
}

fn bytes_arg(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<PyBackedBytes> {
    match obj.cast::<PyBytes>() {
        Ok(b) => Ok(PyBackedBytes::from(b.clone())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name}: expected bytes buffers"
        ))),
    }
}

/// A variable-length binary column (see the module docs).
#[derive(Debug)]
struct BinaryCol {
    offsets: PyBackedBytes,
    data: PyBackedBytes,
    validity: Validity,
    len: usize,
    base: i64,
}

impl BinaryCol {
    fn extract(desc: &Bound<'_, PyAny>, len: usize, name: &str) -> PyResult<Self> {
        let t = descriptor(desc, "binary", 5, name)?;
        let offsets = bytes_arg(&t.get_item(1)?, name)?;
        let data = bytes_arg(&t.get_item(2)?, name)?;
        let validity = Validity::extract(&t.get_item(3)?, &t.get_item(4)?, len, name)?;
        if Some(offsets.len()) != len.checked_add(1).and_then(|n| n.checked_mul(8)) {
            return Err(PyValueError::new_err(format!(
                "{name}: offsets must hold {} int64 values",
                len + 1
            )));
        }
        let base = read_i64(&offsets, 0).unwrap_or(0);
        Ok(BinaryCol {
            offsets,
            data,
            validity,
            len,
            base,
        })
    }

    /// Row `i`: `Ok(None)` if null.
    fn get(&self, i: usize) -> Result<Option<&[u8]>, Failure> {
        if i >= self.len {
            return Err(malformed("row index past the end of a column"));
        }
        if !self.validity.is_valid(i) {
            return Ok(None);
        }
        let bad = || malformed("binary column offsets are out of bounds or decreasing");
        let (lo, hi) = offset_pair(&self.offsets, self.base, i).ok_or_else(bad)?;
        self.data.get(lo..hi).map(Some).ok_or_else(bad)
    }

    /// Row `i` as UTF-8 text.
    fn get_str(&self, i: usize, row: usize, field: &'static str) -> Result<Option<&str>, Failure> {
        match self.get(i)? {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b).map(Some).map_err(|e| {
                Failure::Row(RowError::new(
                    field,
                    row,
                    format!("is not valid UTF-8: {e}"),
                ))
            }),
        }
    }
}

/// A fixed-width integer column.
#[derive(Debug)]
struct IntCol {
    values: PyBackedBytes,
    validity: Validity,
    wide: bool,
}

impl IntCol {
    fn extract(desc: &Bound<'_, PyAny>, len: usize, name: &str) -> PyResult<Self> {
        let t = desc
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err(format!("{name}: bad column descriptor")))?;
        let kind: String = t.get_item(0)?.extract()?;
        let wide = match kind.as_str() {
            "int32" => false,
            "int64" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "{name}: expected an int32/int64 column, got {other:?}"
                )))
            }
        };
        if t.len() != 4 {
            return Err(PyValueError::new_err(format!(
                "{name}: bad column descriptor"
            )));
        }
        let values = bytes_arg(&t.get_item(1)?, name)?;
        let validity = Validity::extract(&t.get_item(2)?, &t.get_item(3)?, len, name)?;
        let width = if wide { 8 } else { 4 };
        if Some(values.len()) != len.checked_mul(width) {
            return Err(PyValueError::new_err(format!(
                "{name}: values must hold {len} {kind} values"
            )));
        }
        Ok(IntCol {
            values,
            validity,
            wide,
        })
    }

    fn get(&self, i: usize) -> Option<i64> {
        if !self.validity.is_valid(i) {
            return None;
        }
        if self.wide {
            read_i64(&self.values, i)
        } else {
            read_i32(&self.values, i).map(i64::from)
        }
    }
}

/// A list (keys) or map (properties) column: offsets into one or two children.
#[derive(Debug)]
struct NestedCol {
    offsets: PyBackedBytes,
    validity: Validity,
    base: i64,
    first: BinaryCol,
    second: Option<BinaryCol>,
}

impl NestedCol {
    fn extract(desc: &Bound<'_, PyAny>, len: usize, name: &str, kind: &str) -> PyResult<Self> {
        let fields = if kind == "map" { 6 } else { 5 };
        let t = descriptor(desc, kind, fields, name)?;
        let offsets = bytes_arg(&t.get_item(1)?, name)?;
        let validity = Validity::extract(&t.get_item(2)?, &t.get_item(3)?, len, name)?;
        if Some(offsets.len()) != len.checked_add(1).and_then(|n| n.checked_mul(8)) {
            return Err(PyValueError::new_err(format!(
                "{name}: offsets must hold {} int64 values",
                len + 1
            )));
        }
        let base = read_i64(&offsets, 0).unwrap_or(0);
        let last = read_i64(&offsets, len).unwrap_or(0);
        let children = usize::try_from(last.saturating_sub(base))
            .map_err(|_| PyValueError::new_err(format!("{name}: offsets are decreasing")))?;
        let first = BinaryCol::extract(&t.get_item(4)?, children, name)?;
        let second = if kind == "map" {
            Some(BinaryCol::extract(&t.get_item(5)?, children, name)?)
        } else {
            None
        };
        Ok(NestedCol {
            offsets,
            validity,
            base,
            first,
            second,
        })
    }

    /// The child index range of row `i`, or `None` if the row is null.
    fn range(&self, i: usize) -> Result<Option<std::ops::Range<usize>>, Failure> {
        if !self.validity.is_valid(i) {
            return Ok(None);
        }
        let bad = || malformed("list/map column offsets are out of bounds or decreasing");
        let (lo, hi) = offset_pair(&self.offsets, self.base, i).ok_or_else(bad)?;
        if lo > hi || hi > self.first.len {
            return Err(bad());
        }
        Ok(Some(lo..hi))
    }
}

fn descriptor<'py>(
    desc: &Bound<'py, PyAny>,
    kind: &str,
    fields: usize,
    name: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let t = desc
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err(format!("{name}: bad column descriptor")))?;
    let k: String = t.get_item(0)?.extract()?;
    if k != kind || t.len() != fields {
        return Err(PyValueError::new_err(format!(
            "{name}: expected a {kind} column descriptor, got {k:?}"
        )));
    }
    Ok(t.clone())
}

/// How the `keys` column is given.
#[derive(Debug)]
enum KeysCol {
    /// One string per row, keys separated by spaces.
    Joined(BinaryCol),
    /// A list of strings per row.
    List(NestedCol),
}

/// Every column of the batch, owned (usable detached).
#[derive(Debug)]
struct Columns {
    len: usize,
    topic: BinaryCol,
    body: BinaryCol,
    queue_id: Option<IntCol>,
    tags: Option<BinaryCol>,
    keys: Option<KeysCol>,
    properties: Option<NestedCol>,
    flag: Option<IntCol>,
    born_timestamp: Option<IntCol>,
    born_host: Option<BinaryCol>,
    store_host: Option<BinaryCol>,
    delay_level: Option<IntCol>,
    transaction: Option<BinaryCol>,
    prepared_transaction_offset: Option<IntCol>,
}

impl Columns {
    fn extract(len: usize, columns: &Bound<'_, PyDict>) -> PyResult<Self> {
        for (k, _) in columns.iter() {
            let name: String = k.extract()?;
            if !PUT_FIELDS.contains(&name.as_str()) {
                return Err(invalid_message_field(
                    &name,
                    format!("invalid message: unknown column {name:?} (expected put() argument names: {})", PUT_FIELDS.join(", ")),
                ));
            }
        }
        let get = |name: &str| columns.get_item(name);
        let required = |name: &'static str| -> PyResult<Bound<'_, PyAny>> {
            get(name)?.ok_or_else(|| {
                invalid_message(name, None, format_args!("the batch has no {name:?} column"))
            })
        };
        let binary = |name: &'static str| -> PyResult<Option<BinaryCol>> {
            get(name)?
                .map(|d| BinaryCol::extract(&d, len, name))
                .transpose()
        };
        let int = |name: &'static str| -> PyResult<Option<IntCol>> {
            get(name)?
                .map(|d| IntCol::extract(&d, len, name))
                .transpose()
        };
        let keys = match get("keys")? {
            None => None,
            Some(d) => {
                let kind: String = d
                    .cast::<PyTuple>()
                    .map_err(PyErr::from)?
                    .get_item(0)?
                    .extract()?;
                Some(if kind == "list" {
                    KeysCol::List(NestedCol::extract(&d, len, "keys", "list")?)
                } else {
                    KeysCol::Joined(BinaryCol::extract(&d, len, "keys")?)
                })
            }
        };
        Ok(Columns {
            len,
            topic: BinaryCol::extract(&required("topic")?, len, "topic")?,
            body: BinaryCol::extract(&required("body")?, len, "body")?,
            queue_id: int("queue_id")?,
            tags: binary("tags")?,
            keys,
            properties: get("properties")?
                .map(|d| NestedCol::extract(&d, len, "properties", "map"))
                .transpose()?,
            flag: int("flag")?,
            born_timestamp: int("born_timestamp")?,
            born_host: binary("born_host")?,
            store_host: binary("store_host")?,
            delay_level: int("delay_level")?,
            transaction: binary("transaction")?,
            prepared_transaction_offset: int("prepared_transaction_offset")?,
        })
    }

    /// Views every row as a `PutMessage` (step 1: the flat key and property lists, and where
    /// each row's part of them ends; the end lists stay empty when the column is absent).
    fn flat(&self) -> Result<Flat<'_>, Failure> {
        let mut f = Flat::default();
        match &self.keys {
            None => {}
            Some(KeysCol::Joined(col)) => {
                f.keys.reserve(self.len);
                f.key_ends.reserve(self.len);
                for i in 0..self.len {
                    if let Some(s) = col.get_str(i, i, "keys")? {
                        f.keys.extend(s.split(' ').filter(|k| !k.is_empty()));
                    }
                    f.key_ends.push(f.keys.len());
                }
            }
            Some(KeysCol::List(col)) => {
                f.keys.reserve(col.first.len);
                f.key_ends.reserve(self.len);
                for i in 0..self.len {
                    for j in col.range(i)?.unwrap_or_default() {
                        match col.first.get_str(j, i, "keys")? {
                            Some(k) => f.keys.push(k),
                            None => {
                                return Err(Failure::Row(RowError::new(
                                    "keys",
                                    i,
                                    "contains a null key",
                                )))
                            }
                        }
                    }
                    f.key_ends.push(f.keys.len());
                }
            }
        }
        if let Some(col) = &self.properties {
            f.props.reserve(col.first.len);
            f.prop_ends.reserve(self.len);
            for i in 0..self.len {
                for j in col.range(i)?.unwrap_or_default() {
                    let k = col.first.get_str(j, i, "properties")?;
                    let v = match &col.second {
                        Some(values) => values.get_str(j, i, "properties")?,
                        None => None,
                    };
                    match (k, v) {
                        (Some(k), Some(v)) => f.props.push((k, v)),
                        _ => {
                            return Err(Failure::Row(RowError::new(
                                "properties",
                                i,
                                "contains a null name or value",
                            )))
                        }
                    }
                }
                f.prop_ends.push(f.props.len());
            }
        }
        Ok(f)
    }

    /// Step 2: the messages, borrowing the columns and the flat lists.
    fn messages<'a>(&'a self, flat: &'a Flat<'a>) -> Result<Vec<PutMessage<'a>>, Failure> {
        let mut out = Vec::with_capacity(self.len);
        let mut last_host: [Option<(&[u8], HostAddr)>; 2] = [None, None];
        let (mut key_start, mut prop_start) = (0, 0);
        for i in 0..self.len {
            let key_end = flat.key_ends.get(i).copied().unwrap_or(key_start);
            let prop_end = flat.prop_ends.get(i).copied().unwrap_or(prop_start);
            let keys = flat.keys.get(key_start..key_end).unwrap_or_default();
            let properties = flat.props.get(prop_start..prop_end).unwrap_or_default();
            (key_start, prop_start) = (key_end, prop_end);
            let topic = self
                .topic
                .get_str(i, i, "topic")?
                .ok_or_else(|| Failure::Row(RowError::new("topic", i, "is null")))?;
            let body = self
                .body
                .get(i)?
                .ok_or_else(|| Failure::Row(RowError::new("body", i, "is null")))?;
            let queue_id = match self.queue_id.as_ref().and_then(|c| c.get(i)) {
                None => 0,
                Some(q) => i32::try_from(q).map_err(|_| {
                    Failure::Row(RowError::new(
                        "queue_id",
                        i,
                        format!("{q} is outside the 32-bit range"),
                    ))
                })?,
            };
            let flag = match self.flag.as_ref().and_then(|c| c.get(i)) {
                None => 0,
                Some(f) => i32::try_from(f).map_err(|_| {
                    Failure::Row(RowError::new(
                        "flag",
                        i,
                        format!("{f} is outside the 32-bit range"),
                    ))
                })?,
            };
            let delay_level = match self.delay_level.as_ref().and_then(|c| c.get(i)) {
                None => 0,
                Some(d) => i32::try_from(d).map_err(|_| {
                    Failure::Row(RowError::new(
                        "delay_level",
                        i,
                        format!("{d} is outside the 32-bit range"),
                    ))
                })?,
            };
            let transaction = match &self.transaction {
                None => TransactionType::NotType,
                Some(c) => match c.get_str(i, i, "transaction")? {
                    None => TransactionType::NotType,
                    Some(t) => TRANSACTION_NAMES
                        .iter()
                        .find(|(n, _)| *n == t)
                        .map(|(_, ty)| *ty)
                        .ok_or_else(|| {
                            Failure::Row(RowError::new(
                                "transaction",
                                i,
                                format!(
                                    "{t:?} is not one of \"prepared\", \"commit\", \"rollback\" \
                                     (or null)"
                                ),
                            ))
                        })?,
                },
            };
            let tags = match &self.tags {
                Some(c) => c.get_str(i, i, "tags")?,
                None => None,
            };
            let mut hosts: [Option<HostAddr>; 2] = [None, None];
            for (slot, (col, field)) in [
                (&self.born_host, "born_host"),
                (&self.store_host, "store_host"),
            ]
            .into_iter()
            .enumerate()
            {
                let Some(col) = col else { continue };
                let Some(raw) = col.get(i)? else { continue };
                // Rows usually repeat one host: parse each distinct value once.
                let cached = last_host
                    .get(slot)
                    .and_then(|c| c.as_ref())
                    .filter(|(b, _)| *b == raw)
                    .map(|(_, h)| *h);
                let host = match cached {
                    Some(h) => h,
                    None => {
                        let s = col.get_str(i, i, field)?.unwrap_or_default();
                        let h = s.parse::<HostAddr>().map_err(|e| {
                            Failure::Row(RowError::new(
                                field,
                                i,
                                format!("{s:?} is not \"ip:port\" or \"[ipv6]:port\": {e}"),
                            ))
                        })?;
                        if let Some(c) = last_host.get_mut(slot) {
                            *c = Some((raw, h));
                        }
                        h
                    }
                };
                if let Some(h) = hosts.get_mut(slot) {
                    *h = Some(host);
                }
            }
            let [born_host, store_host] = hosts;
            out.push(PutMessage {
                topic,
                body,
                queue_id,
                tags,
                keys,
                properties,
                flag,
                born_timestamp: self.born_timestamp.as_ref().and_then(|c| c.get(i)),
                born_host,
                store_host,
                delay_level,
                transaction,
                prepared_transaction_offset: self
                    .prepared_transaction_offset
                    .as_ref()
                    .and_then(|c| c.get(i))
                    .unwrap_or(0),
                ..PutMessage::default()
            });
        }
        Ok(out)
    }
}

/// Every row's keys and properties, flattened: row `i` owns `keys[key_ends[i - 1]..key_ends[i]]`
/// (from 0 for the first row), and likewise for properties.
#[derive(Debug, Default)]
struct Flat<'a> {
    keys: Vec<&'a str>,
    key_ends: Vec<usize>,
    props: Vec<(&'a str, &'a str)>,
    prop_ends: Vec<usize>,
}

/// RocketMQ's PutMessageStatus names, in dictionary order of the `status` result column.
const STATUS_NAMES: [&str; 10] = [
    "PUT_OK",
    "FLUSH_DISK_TIMEOUT",
    "FLUSH_SLAVE_TIMEOUT",
    "SLAVE_NOT_AVAILABLE",
    "SERVICE_NOT_AVAILABLE",
    "CREATE_MAPPED_FILE_FAILED",
    "MESSAGE_ILLEGAL",
    "PROPERTIES_SIZE_EXCEEDED",
    "OS_PAGE_CACHE_BUSY",
    "UNKNOWN_ERROR",
];

/// The result columns as raw native-endian buffers.
#[derive(Debug, Default)]
struct Output {
    status: Vec<u8>,
    names: Vec<&'static str>,
    msg_id_offsets: Vec<u8>,
    msg_id_data: Vec<u8>,
    commitlog_offset: Vec<u8>,
    queue_offset: Vec<u8>,
    wrote_bytes: Vec<u8>,
    store_timestamp: Vec<u8>,
}

/// Writes offset message ids without a `String` per row.
///
/// An offset message id is the store host's hex followed by the 16 hex digits of the commit log
/// offset (`rocketstore_format::offset_msg_id`). For each new store host, the full id of the
/// row is computed by the format crate and, if its last 16 characters are the offset's digits,
/// the rest is kept as the host's prefix for the following rows; otherwise every id of that
/// host is computed by the format crate.
#[derive(Debug, Default)]
pub(crate) struct MsgIds {
    host: Option<HostAddr>,
    prefix: Vec<u8>,
    fast: bool,
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex16(out: &mut Vec<u8>, v: i64) {
    let v = v as u64;
    for shift in (0..16).rev() {
        let digit = ((v >> (shift * 4)) & 0xF) as usize;
        out.push(HEX_UPPER.get(digit).copied().unwrap_or(b'0'));
    }
}

impl MsgIds {
    fn push(&mut self, out: &mut Vec<u8>, r: &rocketstore::PutResult) {
        if r.commitlog_offset < 0 {
            return; // not written: empty id, like PutResult::msg_id
        }
        self.push_id(out, r.store_host, r.commitlog_offset);
    }

    /// Appends the offset message id of (`host`, `offset`) to `out`.
    pub(crate) fn push_id(&mut self, out: &mut Vec<u8>, host: HostAddr, offset: i64) {
        if self.host == Some(host) {
            if self.fast {
                out.extend_from_slice(&self.prefix);
                push_hex16(out, offset);
            } else {
                out.extend_from_slice(rocketstore_format::offset_msg_id(&host, offset).as_bytes());
            }
            return;
        }
        let full = rocketstore_format::offset_msg_id(&host, offset);
        let mut digits = Vec::with_capacity(16);
        push_hex16(&mut digits, offset);
        let split = full.len().saturating_sub(16);
        self.fast = full.as_bytes().get(split..) == Some(&digits[..]);
        self.prefix = full.as_bytes().get(..split).unwrap_or_default().to_vec();
        self.host = Some(host);
        out.extend_from_slice(full.as_bytes());
    }
}

fn build_output(results: &[rocketstore::PutResult]) -> Result<Output, Failure> {
    let n = results.len();
    let mut o = Output {
        status: Vec::with_capacity(n),
        names: STATUS_NAMES.to_vec(),
        msg_id_offsets: Vec::with_capacity((n + 1) * 4),
        msg_id_data: Vec::with_capacity(n * 32),
        commitlog_offset: Vec::with_capacity(n * 8),
        queue_offset: Vec::with_capacity(n * 8),
        wrote_bytes: Vec::with_capacity(n * 4),
        store_timestamp: Vec::with_capacity(n * 8),
    };
    o.msg_id_offsets.extend_from_slice(&0i32.to_ne_bytes());
    let mut last: Option<(PutStatus, u8)> = None;
    let mut ids = MsgIds::default();
    for r in results {
        let code = match last {
            Some((s, c)) if s == r.status => c,
            _ => {
                let name = r.status.as_str();
                let pos = match o.names.iter().position(|n| *n == name) {
                    Some(p) => p,
                    None => {
                        o.names.push(name);
                        o.names.len() - 1
                    }
                };
                let c = u8::try_from(pos).map_err(|_| malformed("too many status values"))?;
                last = Some((r.status, c));
                c
            }
        };
        o.status.push(code);
        ids.push(&mut o.msg_id_data, r);
        let end = i32::try_from(o.msg_id_data.len()).map_err(|_| {
            malformed("batch too large: the msg_id column exceeds 2 GiB; split the batch")
        })?;
        o.msg_id_offsets.extend_from_slice(&end.to_ne_bytes());
        o.commitlog_offset
            .extend_from_slice(&r.commitlog_offset.to_ne_bytes());
        o.queue_offset
            .extend_from_slice(&r.queue_offset.to_ne_bytes());
        o.wrote_bytes
            .extend_from_slice(&r.wrote_bytes.to_ne_bytes());
        o.store_timestamp
            .extend_from_slice(&r.store_timestamp.to_ne_bytes());
    }
    Ok(o)
}

/// Largest batch whose `msg_id` column (at most 56 characters per row, IPv6) fits Arrow's
/// 32-bit string offsets; checked before anything is written.
const MAX_ROWS: usize = (i32::MAX as usize) / 56;

fn write(store: &Store, cols: &Columns) -> Result<Output, Failure> {
    let flat = cols.flat()?;
    let msgs = cols.messages(&flat)?;
    let results = store.put_batch(&msgs).map_err(Failure::Engine)?;
    build_output(&results)
}

/// `MessageStore._put_columns`: see the module docs.
pub(crate) fn put_columns<'py>(
    py: Python<'py>,
    store: &Store,
    num_rows: usize,
    columns: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyTuple>> {
    if num_rows > MAX_ROWS {
        return Err(invalid_message_field(
            "messages",
            format!(
                "invalid messages: {num_rows} rows is more than {MAX_ROWS} in one batch; split it"
            ),
        ));
    }
    let cols = Columns::extract(num_rows, columns)?;
    let out = py.detach(|| write(store, &cols));
    drop(cols);
    let o = match out {
        Ok(o) => o,
        Err(Failure::Row(r)) => {
            return Err(invalid_message(r.field, Some(r.index), r.reason));
        }
        Err(Failure::Engine(e)) => return Err(map_error(py, &e)),
        Err(Failure::Malformed(m)) => {
            return Err(PyValueError::new_err(format!(
                "malformed column buffers: {m}"
            )))
        }
    };
    let names = PyList::new(py, o.names.iter().map(|n| PyString::new(py, n)))?;
    PyTuple::new(
        py,
        [
            PyBytes::new(py, &o.status).into_any(),
            names.into_any(),
            PyBytes::new(py, &o.msg_id_offsets).into_any(),
            PyBytes::new(py, &o.msg_id_data).into_any(),
            PyBytes::new(py, &o.commitlog_offset).into_any(),
            PyBytes::new(py, &o.queue_offset).into_any(),
            PyBytes::new(py, &o.wrote_bytes).into_any(),
            PyBytes::new(py, &o.store_timestamp).into_any(),
        ],
    )
}

/// Row `i`'s `[lo, hi)` from an int64 offsets buffer rebased by `base` (the array offset's
/// first value); `None` if either offset is missing, below `base` or not addressable.
fn offset_pair(offsets: &[u8], base: i64, i: usize) -> Option<(usize, usize)> {
    let lo = usize::try_from(read_i64(offsets, i)?.checked_sub(base)?).ok()?;
    let hi = usize::try_from(read_i64(offsets, i + 1)?.checked_sub(base)?).ok()?;
    Some((lo, hi))
}
