//! The Arrow reads: messages, consume queue units and index entries as Arrow columns.
//!
//! Rows are decoded straight from the store's mapping (`Store::visit_records`,
//! `Store::visit_queue_records`) into column buffers while the interpreter is released; the
//! buffers then cross into Python as `bytes` and `rocketstore._arrow` wraps them with
//! `pa.Array.from_buffers` (no Python object per row).
//!
//! Buffer conventions (native byte order, Arrow's in-memory layout):
//!
//! * a fixed-width column is one `bytes` of `n` values;
//! * a string/binary column is `(validity, offsets, data)`: `validity` is `None` (no nulls) or
//!   an Arrow validity bitmap, `offsets` holds `n + 1` int32 values;
//! * the `properties` map column is `(offsets, key_offsets, key_data, value_offsets,
//!   value_data)`: `n + 1` int32 entry offsets, then the two string children (never null).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use rocketstore::format::{parse_properties, HostAddr, RecordView};
use rocketstore::{IndexFileEntries, Store};

use crate::arrow::MsgIds;

/// Arrow's limit for one string/binary column with 32-bit offsets, with room to spare.
const MAX_COLUMN_BYTES: usize = (i32::MAX as usize) - (1 << 20);

/// Per-row allowance for the columns that do not come from the record itself (msg_id, hosts).
const ROW_OVERHEAD: usize = 64;

fn offset_i32(len: usize) -> i32 {
    // Callers keep every column below MAX_COLUMN_BYTES, so this never saturates.
    i32::try_from(len).unwrap_or(i32::MAX)
}

/// A string or binary column being built.
#[derive(Debug)]
struct Utf8Col {
    offsets: Vec<i32>,
    data: Vec<u8>,
    validity: Vec<u8>,
    nulls: usize,
    /// Only nullable columns keep a validity bitmap.
    nullable: bool,
}

impl Utf8Col {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Utf8Col {
            offsets,
            data: Vec::with_capacity(bytes),
            validity: Vec::new(),
            nulls: 0,
            nullable: false,
        }
    }

    fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn set_valid(&mut self, i: usize, valid: bool) {
        if !self.nullable {
            return;
        }
        let byte = i / 8;
        if self.validity.len() <= byte {
            self.validity.resize(byte + 1, 0);
        }
        if valid {
            if let Some(b) = self.validity.get_mut(byte) {
                *b |= 1 << (i % 8);
            }
        }
    }

    fn push(&mut self, v: &[u8]) {
        let i = self.len();
        self.data.extend_from_slice(v);
        self.offsets.push(offset_i32(self.data.len()));
        self.set_valid(i, true);
    }

    fn push_opt(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => self.push(v),
            None => {
                let i = self.len();
                self.offsets.push(offset_i32(self.data.len()));
                self.set_valid(i, false);
                self.nulls += 1;
            }
        }
    }

    /// Appends bytes already written to `data` as one value.
    fn close_value(&mut self) {
        let i = self.len();
        self.offsets.push(offset_i32(self.data.len()));
        self.set_valid(i, true);
    }

    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let validity = if self.nulls == 0 {
            py.None().into_bound(py)
        } else {
            PyBytes::new(py, &self.validity).into_any()
        };
        PyTuple::new(
            py,
            [
                validity,
                i32s(py, &self.offsets)?.into_any(),
                PyBytes::new(py, &self.data).into_any(),
            ],
        )
    }
}

fn i32s<'py>(py: Python<'py>, v: &[i32]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, v.len() * 4, |buf| {
        for (dst, x) in buf.chunks_exact_mut(4).zip(v) {
            dst.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
}

fn i64s<'py>(py: Python<'py>, v: &[i64]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, v.len() * 8, |buf| {
        for (dst, x) in buf.chunks_exact_mut(8).zip(v) {
            dst.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
}

/// A host column: rows usually repeat one host, so its text is formatted once.
#[derive(Debug)]
struct HostCol {
    col: Utf8Col,
    last: Option<(HostAddr, String)>,
}

impl HostCol {
    fn push(&mut self, h: HostAddr) {
        match &self.last {
            Some((l, s)) if *l == h => self.col.push(s.as_bytes()),
            _ => {
                let s = h.to_string();
                self.col.push(s.as_bytes());
                self.last = Some((h, s));
            }
        }
    }
}

/// Byte ranges of a property name and its value inside the raw properties.
type PropRange = (std::ops::Range<usize>, std::ops::Range<usize>);

/// Properties of one record, parsed like RocketMQ's `string2messageProperties` (see
/// `rocketstore_format::parse_properties`): a repeated name keeps its first position and its
/// last value; pairs with an empty name or value are dropped. `out` receives byte ranges into
/// `raw`. Returns `false` (and leaves `out` empty) if `raw` is not valid UTF-8.
fn parse_ranges(raw: &[u8], out: &mut Vec<PropRange>) -> bool {
    out.clear();
    if std::str::from_utf8(raw).is_err() {
        return false;
    }
    let mut start = 0;
    for segment in raw.split(|&b| b == 2) {
        let seg_start = start;
        start += segment.len() + 1;
        let Some(sep) = segment.iter().position(|&b| b == 1) else {
            continue;
        };
        if sep == 0 || sep + 1 >= segment.len() {
            continue;
        }
        let name = seg_start..seg_start + sep;
        let value = seg_start + sep + 1..seg_start + segment.len();
        let name_bytes = raw.get(name.clone()).unwrap_or_default();
        match out
            .iter_mut()
            .find(|(n, _)| raw.get(n.clone()) == Some(name_bytes))
        {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    true
}

/// The message columns (`rocketstore.MESSAGE_SCHEMA`) being built.
#[derive(Debug)]
pub(crate) struct MessageColumns {
    topic: Utf8Col,
    queue_id: Vec<i32>,
    queue_offset: Vec<i64>,
    commitlog_offset: Vec<i64>,
    store_size: Vec<i32>,
    body: Utf8Col,
    body_crc: Vec<i32>,
    flag: Vec<i32>,
    sys_flag: Vec<i32>,
    tags: Utf8Col,
    keys: Utf8Col,
    prop_offsets: Vec<i32>,
    prop_keys: Utf8Col,
    prop_values: Utf8Col,
    born_timestamp: Vec<i64>,
    born_host: HostCol,
    store_timestamp: Vec<i64>,
    store_host: HostCol,
    reconsume_times: Vec<i32>,
    prepared_transaction_offset: Vec<i64>,
    msg_id: Utf8Col,
    uniq_key: Utf8Col,
    ids: MsgIds,
    /// Record bytes taken so far plus the per-row allowance (bounds every string column).
    budget_used: usize,
    scratch: Vec<PropRange>,
}

impl MessageColumns {
    pub(crate) fn new(rows_hint: usize) -> Self {
        let rows = rows_hint.min(1 << 16);
        let s = |bytes_per_row: usize| Utf8Col::with_capacity(rows, rows * bytes_per_row);
        let mut prop_offsets = Vec::with_capacity(rows + 1);
        prop_offsets.push(0);
        MessageColumns {
            topic: s(16),
            queue_id: Vec::with_capacity(rows),
            queue_offset: Vec::with_capacity(rows),
            commitlog_offset: Vec::with_capacity(rows),
            store_size: Vec::with_capacity(rows),
            body: s(128),
            body_crc: Vec::with_capacity(rows),
            flag: Vec::with_capacity(rows),
            sys_flag: Vec::with_capacity(rows),
            tags: s(8).nullable(),
            keys: s(8).nullable(),
            prop_offsets,
            prop_keys: s(24),
            prop_values: s(32),
            born_timestamp: Vec::with_capacity(rows),
            born_host: HostCol {
                col: s(16),
                last: None,
            },
            store_timestamp: Vec::with_capacity(rows),
            store_host: HostCol {
                col: s(16),
                last: None,
            },
            reconsume_times: Vec::with_capacity(rows),
            prepared_transaction_offset: Vec::with_capacity(rows),
            msg_id: s(32),
            uniq_key: s(32).nullable(),
            ids: MsgIds::default(),
            budget_used: 0,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue_id.len()
    }

    /// Appends one record; returns `false` (appending nothing) if it would push a column past
    /// Arrow's 2 GiB limit for 32-bit offsets, so that the batch ends before it.
    pub(crate) fn push(&mut self, v: &RecordView<'_>) -> bool {
        let need = usize::try_from(v.total_size)
            .unwrap_or(0)
            .saturating_add(ROW_OVERHEAD);
        if self.len() > 0 && self.budget_used.saturating_add(need) > MAX_COLUMN_BYTES {
            return false;
        }
        self.budget_used = self.budget_used.saturating_add(need);
        self.topic.push(v.topic.as_bytes());
        self.queue_id.push(v.queue_id);
        self.queue_offset.push(v.queue_offset);
        self.commitlog_offset.push(v.physical_offset);
        self.store_size.push(v.total_size);
        self.body.push(v.body);
        self.body_crc.push(v.body_crc);
        self.flag.push(v.flag);
        self.sys_flag.push(v.sys_flag);
        self.push_properties(v.properties_raw);
        self.born_timestamp.push(v.born_timestamp);
        self.born_host.push(v.born_host);
        self.store_timestamp.push(v.store_timestamp);
        self.store_host.push(v.store_host);
        self.reconsume_times.push(v.reconsume_times);
        self.prepared_transaction_offset
            .push(v.prepared_transaction_offset);
        self.ids
            .push_id(&mut self.msg_id.data, v.store_host, v.physical_offset);
        self.msg_id.close_value();
        true
    }

    fn push_properties(&mut self, raw: &[u8]) {
        use rocketstore::format::property::{KEYS, TAGS, UNIQ_KEY};
        let mut pairs = std::mem::take(&mut self.scratch);
        if parse_ranges(raw, &mut pairs) {
            let (mut tags, mut keys, mut uniq) = (None, None, None);
            for (k, v) in &pairs {
                let name = raw.get(k.clone()).unwrap_or_default();
                let value = raw.get(v.clone()).unwrap_or_default();
                self.prop_keys.push(name);
                self.prop_values.push(value);
                if name == TAGS.as_bytes() {
                    tags = Some(value);
                } else if name == KEYS.as_bytes() {
                    keys = Some(value);
                } else if name == UNIQ_KEY.as_bytes() {
                    uniq = Some(value);
                }
            }
            self.tags.push_opt(tags);
            self.keys.push_opt(keys);
            self.uniq_key.push_opt(uniq);
        } else {
            // Not valid UTF-8: RocketMQ decodes lossily; so does the owned parser.
            let props = parse_properties(raw);
            for (k, v) in props.iter() {
                self.prop_keys.push(k.as_bytes());
                self.prop_values.push(v.as_bytes());
            }
            self.tags.push_opt(props.get(TAGS).map(str::as_bytes));
            self.keys.push_opt(props.get(KEYS).map(str::as_bytes));
            self.uniq_key
                .push_opt(props.get(UNIQ_KEY).map(str::as_bytes));
        }
        self.prop_offsets.push(offset_i32(self.prop_keys.len()));
        self.scratch = pairs;
    }

    /// The columns in `MESSAGE_SCHEMA` order (see the module docs for each descriptor).
    pub(crate) fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let map = PyTuple::new(
            py,
            [
                i32s(py, &self.prop_offsets)?.into_any(),
                i32s(py, &self.prop_keys.offsets)?.into_any(),
                PyBytes::new(py, &self.prop_keys.data).into_any(),
                i32s(py, &self.prop_values.offsets)?.into_any(),
                PyBytes::new(py, &self.prop_values.data).into_any(),
            ],
        )?;
        PyTuple::new(
            py,
            [
                self.topic.to_py(py)?.into_any(),
                i32s(py, &self.queue_id)?.into_any(),
                i64s(py, &self.queue_offset)?.into_any(),
                i64s(py, &self.commitlog_offset)?.into_any(),
                i32s(py, &self.store_size)?.into_any(),
                self.body.to_py(py)?.into_any(),
                i32s(py, &self.body_crc)?.into_any(),
                i32s(py, &self.flag)?.into_any(),
                i32s(py, &self.sys_flag)?.into_any(),
                self.tags.to_py(py)?.into_any(),
                self.keys.to_py(py)?.into_any(),
                map.into_any(),
                i64s(py, &self.born_timestamp)?.into_any(),
                self.born_host.col.to_py(py)?.into_any(),
                i64s(py, &self.store_timestamp)?.into_any(),
                self.store_host.col.to_py(py)?.into_any(),
                i32s(py, &self.reconsume_times)?.into_any(),
                i64s(py, &self.prepared_transaction_offset)?.into_any(),
                self.msg_id.to_py(py)?.into_any(),
                self.uniq_key.to_py(py)?.into_any(),
            ],
        )
    }
}

/// `read_arrow`: records in `[from, end)` in commit log order.
pub(crate) fn read_log(
    store: &Store,
    from: u64,
    end: u64,
    max: usize,
    check_crc: bool,
) -> rocketstore::Result<(MessageColumns, u64)> {
    let mut cols = MessageColumns::new(max);
    let next = store.visit_records(from, end, max, check_crc, |v| cols.push(v))?;
    Ok((cols, next))
}

/// `get_message_arrow`: records of one queue for queue offsets in `[from, end)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_queue(
    store: &Store,
    topic: &str,
    queue_id: i32,
    from: i64,
    end: i64,
    max: usize,
    check_crc: bool,
    tags: Option<&str>,
) -> rocketstore::Result<(MessageColumns, i64)> {
    let mut cols = MessageColumns::new(max);
    let next =
        store.visit_queue_records(topic, queue_id, from, end, max, check_crc, tags, |v| {
            cols.push(v)
        })?;
    Ok((cols, next))
}

/// The consume queue columns: topic, queue_id, queue_offset, commitlog_offset, size, tags_code.
#[derive(Debug, Default)]
pub(crate) struct CqColumns {
    queue_offset: Vec<i64>,
    commitlog_offset: Vec<i64>,
    size: Vec<i32>,
    tags_code: Vec<i64>,
}

/// `read_consume_queue`: up to `max` units from `from` (raised to the queue's first offset).
pub(crate) fn read_cq(
    store: &Store,
    topic: &str,
    queue_id: i32,
    from: i64,
    max: usize,
) -> CqColumns {
    let mut out = CqColumns::default();
    let mut next = from.max(store.min_offset_in_queue(topic, queue_id));
    while out.queue_offset.len() < max {
        let units = store.consume_queue_units(topic, queue_id, next, max - out.queue_offset.len());
        let Some(&(last, _)) = units.last() else {
            break;
        };
        for (qo, u) in units {
            out.queue_offset.push(qo);
            out.commitlog_offset.push(u.phy_offset);
            out.size.push(u.size);
            out.tags_code.push(u.tags_code);
        }
        next = last + 1;
    }
    out
}

impl CqColumns {
    pub(crate) fn len(&self) -> usize {
        self.queue_offset.len()
    }

    pub(crate) fn to_py<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let n = self.queue_offset.len();
        let mut topics = Utf8Col::with_capacity(n, n * topic.len());
        for _ in 0..n {
            topics.push(topic.as_bytes());
        }
        PyTuple::new(
            py,
            [
                topics.to_py(py)?.into_any(),
                i32s(py, &vec![queue_id; n])?.into_any(),
                i64s(py, &self.queue_offset)?.into_any(),
                i64s(py, &self.commitlog_offset)?.into_any(),
                i32s(py, &self.size)?.into_any(),
                i64s(py, &self.tags_code)?.into_any(),
            ],
        )
    }
}

/// `read_index`: one row per index entry (see `rocketstore._arrow.INDEX_SCHEMA`).
pub(crate) fn index_to_py<'py>(
    py: Python<'py>,
    files: &[IndexFileEntries],
) -> PyResult<(usize, Bound<'py, PyTuple>)> {
    let n: usize = files.iter().map(|f| f.entries.len()).sum();
    let mut file = Utf8Col::with_capacity(n, 0);
    let mut begin = Vec::with_capacity(n);
    let mut slot = Vec::with_capacity(n);
    let mut entry = Vec::with_capacity(n);
    let mut key_hash = Vec::with_capacity(n);
    let mut phy = Vec::with_capacity(n);
    let mut diff = Vec::with_capacity(n);
    let mut prev = Vec::with_capacity(n);
    for f in files {
        let path = f.path.to_string_lossy();
        for (no, e) in &f.entries {
            file.push(path.as_bytes());
            begin.push(f.header.begin_timestamp);
            let s = rocketstore::format::index::index_slot(e.key_hash, f.slots);
            slot.push(i32::try_from(s).unwrap_or(i32::MAX));
            entry.push(i32::try_from(*no).unwrap_or(i32::MAX));
            key_hash.push(e.key_hash);
            phy.push(e.phy_offset);
            diff.push(e.time_diff);
            prev.push(e.prev_index);
        }
    }
    let t = PyTuple::new(
        py,
        [
            file.to_py(py)?.into_any(),
            i64s(py, &begin)?.into_any(),
            i32s(py, &slot)?.into_any(),
            i32s(py, &entry)?.into_any(),
            i32s(py, &key_hash)?.into_any(),
            i64s(py, &phy)?.into_any(),
            i32s(py, &diff)?.into_any(),
            i32s(py, &prev)?.into_any(),
        ],
    )?;
    Ok((n, t))
}
