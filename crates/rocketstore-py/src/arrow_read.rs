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

use std::sync::{Arc, OnceLock};

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, MapArray, RecordBatch, StringArray, StructArray,
    TimestampMillisecondArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rocketstore::format::{parse_properties, HostAddr, OffsetMsgIds, RecordView};
use rocketstore::{IndexFileEntries, QueueSpan, Store};

use crate::buffer_pool::{BYTES, I32S, I64S};

/// Arrow's limit for one string/binary column with 32-bit offsets, with room to spare.
const MAX_COLUMN_BYTES: usize = (i32::MAX as usize) - (1 << 20);

/// Per-row allowance for the columns that do not come from the record itself (msg_id, hosts).
const ROW_OVERHEAD: usize = 64;

/// Rows reserved for at most (a batch asked for more rows grows its columns).
const MAX_ROWS: usize = 1 << 16;

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
        let mut offsets = I32S.take(rows + 1);
        offsets.push(0);
        Utf8Col {
            offsets,
            data: BYTES.take(bytes),
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
            if self.validity.capacity() == 0 {
                self.validity = BYTES.take(self.offsets.capacity().div_ceil(8));
            }
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

    fn nulls(&mut self) -> Option<NullBuffer> {
        if self.nulls == 0 {
            return None;
        }
        let len = self.len();
        self.validity.resize(len.div_ceil(8), 0);
        let bits = BYTES.buffer(std::mem::take(&mut self.validity));
        Some(NullBuffer::new(BooleanBuffer::new(bits, 0, len)))
    }

    fn into_parts(mut self) -> (OffsetBuffer<i32>, Buffer, Option<NullBuffer>) {
        let nulls = self.nulls();
        (
            OffsetBuffer::new(I32S.scalars(self.offsets)),
            BYTES.buffer(self.data),
            nulls,
        )
    }

    /// The column as a UTF-8 string array (its bytes are checked as UTF-8 once, here).
    fn into_string(self) -> PyResult<ArrayRef> {
        let (offsets, data, nulls) = self.into_parts();
        Ok(Arc::new(
            StringArray::try_new(offsets, data, nulls).map_err(arrow_err)?,
        ))
    }

    /// The column as a binary array (no copy of the data).
    fn into_binary(self) -> PyResult<ArrayRef> {
        let (offsets, data, nulls) = self.into_parts();
        Ok(Arc::new(
            BinaryArray::try_new(offsets, data, nulls).map_err(arrow_err)?,
        ))
    }
}

fn arrow_err(e: arrow_schema::ArrowError) -> PyErr {
    PyValueError::new_err(format!("cannot build the Arrow batch: {e}"))
}

fn i32s(v: Vec<i32>) -> ArrayRef {
    Arc::new(Int32Array::new(I32S.scalars(v), None))
}

fn i64s(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::new(I64S.scalars(v), None))
}

fn millis(v: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::new(I64S.scalars(v), None).with_timezone("UTC"))
}

fn timestamp_ms() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The entries field of the `properties` map (as `pa.map_(pa.string(), pa.string())`).
fn map_entries() -> Arc<Field> {
    Arc::new(Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ])),
        false,
    ))
}

/// The schema of the message batches (`rocketstore.MESSAGE_SCHEMA`): the one definition.
///
/// `tags`, `keys` (the raw `KEYS` property: keys separated by spaces) and `uniq_key` are null
/// when the message has none; `properties` holds every stored property (including `TAGS`,
/// `KEYS` and `UNIQ_KEY`); `msg_id` is the offset message id.
pub(crate) fn message_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        let f = |name: &str, t: DataType| Field::new(name, t, false);
        Arc::new(Schema::new(vec![
            f("topic", DataType::Utf8),
            f("queue_id", DataType::Int32),
            f("queue_offset", DataType::Int64),
            f("commitlog_offset", DataType::Int64),
            f("store_size", DataType::Int32),
            f("body", DataType::Binary),
            f("body_crc", DataType::Int32),
            f("flag", DataType::Int32),
            f("sys_flag", DataType::Int32),
            Field::new("tags", DataType::Utf8, true),
            Field::new("keys", DataType::Utf8, true),
            f("properties", DataType::Map(map_entries(), false)),
            f("born_timestamp", timestamp_ms()),
            f("born_host", DataType::Utf8),
            f("store_timestamp", timestamp_ms()),
            f("store_host", DataType::Utf8),
            f("reconsume_times", DataType::Int32),
            f("prepared_transaction_offset", DataType::Int64),
            f("msg_id", DataType::Utf8),
            Field::new("uniq_key", DataType::Utf8, true),
        ]))
    }))
}

/// The schema of `read_consume_queue` batches: one row per 20-byte consume queue unit.
pub(crate) fn consume_queue_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        let f = |name: &str, t: DataType| Field::new(name, t, false);
        Arc::new(Schema::new(vec![
            f("topic", DataType::Utf8),
            f("queue_id", DataType::Int32),
            f("queue_offset", DataType::Int64),
            f("commitlog_offset", DataType::Int64),
            f("size", DataType::Int32),
            f("tags_code", DataType::Int64),
        ]))
    }))
}

/// The schema of `read_index` batches: one row per index entry of every index file.
pub(crate) fn index_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        let f = |name: &str, t: DataType| Field::new(name, t, false);
        Arc::new(Schema::new(vec![
            f("file", DataType::Utf8),
            f("file_begin_timestamp", timestamp_ms()),
            f("slot", DataType::Int32),
            f("entry", DataType::Int32),
            f("key_hash", DataType::Int32),
            f("commitlog_offset", DataType::Int64),
            f("time_diff_s", DataType::Int32),
            f("prev_index", DataType::Int32),
        ]))
    }))
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

/// An empty pair list that keeps `v`'s allocation for the next record (the borrowed pairs of
/// one record cannot outlive it; an emptied vector has nothing left to borrow).
fn recycle(mut v: Vec<(&str, &str)>) -> Vec<(&'static str, &'static str)> {
    v.clear();
    v.into_iter().map(|_| ("", "")).collect()
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
    ids: OffsetMsgIds,
    /// Record bytes taken so far plus the per-row allowance (bounds every string column).
    budget_used: usize,
    /// Stored bytes (sum of `store_size`) taken so far.
    stored: usize,
    /// The batch ends before a record that would take `stored` past this (`max_bytes`).
    max_bytes: usize,
    scratch: Vec<(&'static str, &'static str)>,
    /// Rows this batch may hold (capacity planning).
    rows: usize,
    /// Rows taken.
    count: usize,
    /// Which columns this value builds.
    part: Part,
}

/// The columns a [`MessageColumns`] builds: two threads can build the two halves of one batch
/// from the same records, each walking them (see [`read_log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Every column.
    All,
    /// The body and the fixed-width columns.
    Core,
    /// The text columns: topic, properties, tags, keys, uniq_key, hosts, msg_id.
    Text,
}

impl Part {
    fn core(self) -> bool {
        self != Part::Text
    }

    fn text(self) -> bool {
        self != Part::Core
    }
}

impl MessageColumns {
    /// Columns for about `rows_hint` rows (reserved for at most [`MAX_ROWS`]) of at most
    /// `max_bytes` stored bytes (at least one row).
    pub(crate) fn new(rows_hint: usize, max_bytes: usize) -> Self {
        Self::new_part(rows_hint, max_bytes, Part::All)
    }

    fn new_part(rows_hint: usize, max_bytes: usize, part: Part) -> Self {
        let rows = rows_hint.min(MAX_ROWS);
        // The data of the variable-length columns is reserved on the first record (see
        // `reserve_like`), bounded by `max_bytes`; every buffer comes from the pool.
        let (c, t) = (
            if part.core() { rows } else { 0 },
            if part.text() { rows } else { 0 },
        );
        let s = |rows: usize| Utf8Col::with_capacity(rows, 0);
        let mut prop_offsets = I32S.take(t + 1);
        prop_offsets.push(0);
        MessageColumns {
            topic: s(t),
            queue_id: I32S.take(c),
            queue_offset: I64S.take(c),
            commitlog_offset: I64S.take(c),
            store_size: I32S.take(c),
            body: s(c),
            body_crc: I32S.take(c),
            flag: I32S.take(c),
            sys_flag: I32S.take(c),
            tags: s(t).nullable(),
            keys: s(t).nullable(),
            prop_offsets,
            prop_keys: s(t),
            prop_values: s(t),
            born_timestamp: I64S.take(c),
            born_host: HostCol {
                col: s(t),
                last: None,
            },
            store_timestamp: I64S.take(c),
            store_host: HostCol {
                col: s(t),
                last: None,
            },
            reconsume_times: I32S.take(c),
            prepared_transaction_offset: I64S.take(c),
            msg_id: s(t),
            uniq_key: s(t).nullable(),
            ids: OffsetMsgIds::default(),
            budget_used: 0,
            stored: 0,
            max_bytes,
            scratch: Vec::new(),
            rows,
            count: 0,
            part,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The batch of `self` (built as [`Part::Core`]) and `text` (as [`Part::Text`], from the
    /// same records).
    fn merge(mut self, text: MessageColumns) -> MessageColumns {
        self.topic = text.topic;
        self.tags = text.tags;
        self.keys = text.keys;
        self.prop_offsets = text.prop_offsets;
        self.prop_keys = text.prop_keys;
        self.prop_values = text.prop_values;
        self.born_host = text.born_host;
        self.store_host = text.store_host;
        self.msg_id = text.msg_id;
        self.uniq_key = text.uniq_key;
        self.part = Part::All;
        self
    }

    /// Appends one record; returns `false` (appending nothing) if it would push a column past
    /// Arrow's 2 GiB limit for 32-bit offsets, so that the batch ends before it.
    pub(crate) fn push(&mut self, v: &RecordView<'_>) -> bool {
        let need = usize::try_from(v.total_size)
            .unwrap_or(0)
            .saturating_add(ROW_OVERHEAD);
        let size = usize::try_from(v.total_size).unwrap_or(0);
        if self.len() > 0
            && (self.budget_used.saturating_add(need) > MAX_COLUMN_BYTES
                || self.stored.saturating_add(size) > self.max_bytes)
        {
            return false;
        }
        self.budget_used = self.budget_used.saturating_add(need);
        self.stored = self.stored.saturating_add(size);
        if self.len() == 0 {
            self.reserve_like(v);
        }
        self.count += 1;
        if self.part.core() {
            self.queue_id.push(v.queue_id);
            self.queue_offset.push(v.queue_offset);
            self.commitlog_offset.push(v.physical_offset);
            self.store_size.push(v.total_size);
            self.body.push(v.body);
            self.body_crc.push(v.body_crc);
            self.flag.push(v.flag);
            self.sys_flag.push(v.sys_flag);
            self.born_timestamp.push(v.born_timestamp);
            self.store_timestamp.push(v.store_timestamp);
            self.reconsume_times.push(v.reconsume_times);
            self.prepared_transaction_offset
                .push(v.prepared_transaction_offset);
        }
        if self.part.text() {
            self.topic.push(v.topic.as_bytes());
            self.push_properties(v.properties_raw);
            self.born_host.push(v.born_host);
            self.store_host.push(v.store_host);
            self.ids
                .push_id(&mut self.msg_id.data, v.store_host, v.physical_offset);
            self.msg_id.close_value();
        }
        true
    }

    /// Reserves room for `rows` records like `v` (the first), each column at most what
    /// `max_bytes` of records can hold: reserved, untouched memory costs nothing, while
    /// growing a column copies it.
    fn reserve_like(&mut self, v: &RecordView<'_>) {
        let size = usize::try_from(v.total_size).unwrap_or(1).max(1);
        // Rows of this size that fit the byte bound.
        let rows = self.rows.min(self.max_bytes / size + 1);
        let bound = self.max_bytes.min(MAX_COLUMN_BYTES);
        let cap = |per_row: usize| rows.saturating_mul(per_row).min(bound);
        let props = v.properties_raw.len();
        let pairs = v.properties_raw.iter().filter(|&&b| b == 1).count();
        let (core, text) = (self.part.core(), self.part.text());
        let reserve = |col: &mut Utf8Col, per_row: usize| {
            let want = cap(per_row);
            if col.data.capacity() < want {
                BYTES.give(std::mem::replace(&mut col.data, BYTES.take(want)));
            }
        };
        if core {
            reserve(&mut self.body, v.body.len());
        }
        if !text {
            return;
        }
        reserve(&mut self.topic, v.topic.len());
        reserve(&mut self.born_host.col, 24);
        reserve(&mut self.store_host.col, 24);
        reserve(&mut self.msg_id, 32);
        reserve(&mut self.prop_keys, props);
        reserve(&mut self.prop_values, props);
        for col in [&mut self.tags, &mut self.keys, &mut self.uniq_key] {
            reserve(col, 32.min(props));
        }
        for col in [&mut self.prop_keys, &mut self.prop_values] {
            let want = rows.saturating_mul(pairs) + 1;
            if col.offsets.capacity() < want {
                let mut o = I32S.take(want);
                o.push(0);
                I32S.give(std::mem::replace(&mut col.offsets, o));
            }
        }
    }

    fn push_properties(&mut self, raw: &[u8]) {
        use rocketstore::format::property::{KEYS, TAGS, UNIQ_KEY};
        let mut pairs: Vec<(&str, &str)> = std::mem::take(&mut self.scratch);
        if rocketstore::format::parse_properties_into(raw, &mut pairs) {
            let (mut tags, mut keys, mut uniq) = (None, None, None);
            for &(name, value) in &pairs {
                self.prop_keys.push(name.as_bytes());
                self.prop_values.push(value.as_bytes());
                match name {
                    TAGS => tags = Some(value.as_bytes()),
                    KEYS => keys = Some(value.as_bytes()),
                    UNIQ_KEY => uniq = Some(value.as_bytes()),
                    _ => {}
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
        self.scratch = recycle(pairs);
    }

    /// The batch (schema [`message_schema`]); the buffers move into Arrow without a copy.
    pub(crate) fn into_batch(self) -> PyResult<RecordBatch> {
        let (key_offsets, key_data, _) = self.prop_keys.into_parts();
        let (value_offsets, value_data, _) = self.prop_values.into_parts();
        let entries = StructArray::try_new(
            match map_entries().data_type() {
                DataType::Struct(f) => f.clone(),
                _ => Fields::empty(),
            },
            vec![
                Arc::new(StringArray::try_new(key_offsets, key_data, None).map_err(arrow_err)?),
                Arc::new(StringArray::try_new(value_offsets, value_data, None).map_err(arrow_err)?),
            ],
            None,
        )
        .map_err(arrow_err)?;
        let properties = MapArray::try_new(
            map_entries(),
            OffsetBuffer::new(I32S.scalars(self.prop_offsets)),
            entries,
            None,
            false,
        )
        .map_err(arrow_err)?;
        let columns: Vec<ArrayRef> = vec![
            self.topic.into_string()?,
            i32s(self.queue_id),
            i64s(self.queue_offset),
            i64s(self.commitlog_offset),
            i32s(self.store_size),
            self.body.into_binary()?,
            i32s(self.body_crc),
            i32s(self.flag),
            i32s(self.sys_flag),
            self.tags.into_string()?,
            self.keys.into_string()?,
            Arc::new(properties),
            millis(self.born_timestamp),
            self.born_host.col.into_string()?,
            millis(self.store_timestamp),
            self.store_host.col.into_string()?,
            i32s(self.reconsume_times),
            i64s(self.prepared_transaction_offset),
            self.msg_id.into_string()?,
            self.uniq_key.into_string()?,
        ];
        RecordBatch::try_new(message_schema(), columns).map_err(arrow_err)
    }
}

/// Batches expected to hold fewer rows than this are built by one thread.
const PARALLEL_MIN_ROWS: usize = 2048;

/// Batches of a smaller `max_bytes` are built by one thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Threads that build one message batch: 2 on a machine with two or more cores, unless the
/// environment variable `ROCKETSTORE_ARROW_READ_THREADS` is `1` (read once per process; for
/// processes that already keep every core busy, like one Spark task per core).
fn build_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let wanted = std::env::var("ROCKETSTORE_ARROW_READ_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(2);
        wanted.clamp(1, 2).min(cores)
    })
}

/// Builds one batch with `walk` (which visits the records, feeding each to the columns, and
/// returns where to continue; its flag says whether it is the walk that checks CRCs): on two
/// threads ([`build_threads`]) when the batch is large enough, one building
/// [`Part::Core`] and the other [`Part::Text`] from its own walk over the same records; on one
/// thread otherwise, or again on one thread if the two walks did not see the same records (a
/// concurrent append or deletion), which gives the same result.
fn build<N: PartialEq + Send>(
    rows_hint: usize,
    max_bytes: usize,
    walk: impl Fn(&mut MessageColumns, bool) -> rocketstore::Result<N> + Sync,
) -> rocketstore::Result<(MessageColumns, N)> {
    if build_threads() >= 2 && rows_hint >= PARALLEL_MIN_ROWS && max_bytes >= PARALLEL_MIN_BYTES {
        let (core, text) = std::thread::scope(|s| {
            let helper = std::thread::Builder::new()
                .name("rs-arrow-read".into())
                .spawn_scoped(s, || {
                    let mut t = MessageColumns::new_part(rows_hint, max_bytes, Part::Text);
                    walk(&mut t, false).map(|n| (t, n))
                });
            let mut c = MessageColumns::new_part(rows_hint, max_bytes, Part::Core);
            let core = walk(&mut c, true).map(|n| (c, n));
            let text = helper.ok().and_then(|h| h.join().ok());
            (core, text)
        });
        let (core, next) = core?;
        if let Some(Ok((text, text_next))) = text {
            if text_next == next && text.len() == core.len() {
                return Ok((core.merge(text), next));
            }
        }
    }
    let mut cols = MessageColumns::new(rows_hint, max_bytes);
    let next = walk(&mut cols, true)?;
    Ok((cols, next))
}

/// `read_arrow`: records in `[from, end)` in commit log order, at most `max` of them and (but
/// for the first) at most `max_bytes` stored bytes.
/// Default upper bound of the stored bytes behind one read batch (`read_arrow`'s and
/// `get_message_arrow`'s `max_bytes`, the Spark reader's batches); exported to Python as
/// `rocketstore._native.DEFAULT_MAX_BATCH_BYTES` (the Python default of `max_bytes`). 8 MiB keeps each column buffer in the buffer pool.
pub(crate) const DEFAULT_MAX_BATCH_BYTES: usize = 8 << 20;

pub(crate) fn read_log(
    store: &Store,
    from: u64,
    end: u64,
    max: usize,
    max_bytes: usize,
    check_crc: bool,
) -> rocketstore::Result<(MessageColumns, u64)> {
    build(max, max_bytes, |cols, checks| {
        // Only one of two walks checks CRCs (once per record).
        store.visit_records(from, end, max, check_crc && checks, |v| cols.push(v))
    })
}

/// `get_message_arrow`: records of one queue for queue offsets in `[from, end)` of `span`, at
/// most `max_bytes` stored bytes (but for the first).
pub(crate) fn read_queue(
    store: &Store,
    span: &QueueSpan<'_>,
    max_bytes: usize,
) -> rocketstore::Result<(MessageColumns, i64)> {
    let QueueSpan {
        topic,
        queue_id,
        from,
        end,
        max,
        ..
    } = *span;
    // Reserve for the rows the queue can hold from `from`, not for `max`: a queue's last call
    // is often short (or empty).
    let left = end
        .min(store.max_offset_in_queue(topic, queue_id))
        .saturating_sub(from.max(store.min_offset_in_queue(topic, queue_id)));
    let rows = max.min(usize::try_from(left).unwrap_or(0));
    build(rows, max_bytes, |cols, checks| {
        let span = QueueSpan {
            check_crc: span.check_crc && checks,
            ..*span
        };
        store.visit_queue_records(&span, |v| cols.push(v))
    })
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
    /// The batch (schema [`consume_queue_schema`]).
    pub(crate) fn into_batch(self, topic: &str, queue_id: i32) -> PyResult<RecordBatch> {
        let n = self.queue_offset.len();
        let mut topics = Utf8Col::with_capacity(n, n * topic.len());
        for _ in 0..n {
            topics.push(topic.as_bytes());
        }
        let columns: Vec<ArrayRef> = vec![
            topics.into_string()?,
            i32s(vec![queue_id; n]),
            i64s(self.queue_offset),
            i64s(self.commitlog_offset),
            i32s(self.size),
            i64s(self.tags_code),
        ];
        RecordBatch::try_new(consume_queue_schema(), columns).map_err(arrow_err)
    }
}

/// `read_index`: one row per index entry (schema [`index_schema`]).
pub(crate) fn index_batch(files: &[IndexFileEntries]) -> PyResult<RecordBatch> {
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
    let columns: Vec<ArrayRef> = vec![
        file.into_string()?,
        millis(begin),
        i32s(slot),
        i32s(entry),
        i32s(key_hash),
        i64s(phy),
        i32s(diff),
        i32s(prev),
    ];
    RecordBatch::try_new(index_schema(), columns).map_err(arrow_err)
}
