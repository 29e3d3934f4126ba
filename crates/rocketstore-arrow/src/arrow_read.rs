//! The Arrow reads: messages, consume queue units and index entries as Arrow columns.
//!
//! Rows are decoded straight from the store's mapping (`Store::visit_records`,
//! `Store::visit_queue_records`) into column buffers (the Python binding releases the
//! interpreter around these calls); the buffers then move into Arrow arrays without a copy
//! and cross into Python or the JVM through Arrow's interfaces (no object per row).
//!
//! Buffer conventions (native byte order, Arrow's in-memory layout):
//!
//! * a fixed-width column is one `bytes` of `n` values;
//! * a string/binary column is `(validity, offsets, data)`: `validity` is `None` (no nulls) or
//!   an Arrow validity bitmap, `offsets` holds `n + 1` int32 values;
//! * the `properties` map column is `(offsets, key_offsets, key_data, value_offsets,
//!   value_data)`: `n + 1` int32 entry offsets, then the two string children (never null).

use std::mem::take;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, MapArray, RecordBatch, RecordBatchOptions,
    StringArray, StructArray, TimestampMillisecondArray,
};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use rocketstore::format::{parse_properties, HostAddr, OffsetMsgIds, RecordView};
use rocketstore::{IndexFileEntries, QueueSpan, Store};

use crate::buffer_pool::{BYTES, I32S, I64S};
use crate::build_pool::build_threads;
pub use crate::build_pool::read_threads;
use crate::error::{Error, Result};

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
        self.offsets.len().saturating_sub(1)
    }

    /// A column that is not built (see [`Part`]): no buffers at all.
    fn unused() -> Self {
        Utf8Col {
            offsets: Vec::new(),
            data: Vec::new(),
            validity: Vec::new(),
            nulls: 0,
            nullable: false,
        }
    }

    /// Moves the column out, leaving an unused one behind.
    fn take(&mut self) -> Utf8Col {
        std::mem::replace(self, Utf8Col::unused())
    }

    /// Sets the validity bit of value `i` (nullable columns only; the bitmap grows a byte at a
    /// time, so every value has a bit).
    #[inline]
    fn set_valid(&mut self, i: usize, valid: bool) {
        if !self.nullable {
            return;
        }
        let byte = i / 8;
        if self.validity.len() <= byte {
            self.grow_validity(byte);
        }
        if valid {
            if let Some(b) = self.validity.get_mut(byte) {
                *b |= 1 << (i % 8);
            }
        }
    }

    #[cold]
    fn grow_validity(&mut self, byte: usize) {
        if self.validity.capacity() == 0 {
            self.validity = BYTES.take(self.offsets.capacity().div_ceil(8));
        }
        self.validity.resize(byte + 1, 0);
    }

    #[inline]
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
    #[inline]
    fn close_value(&mut self) {
        let i = self.len();
        self.offsets.push(offset_i32(self.data.len()));
        self.set_valid(i, true);
    }

    /// Whether value `i` is valid (nullable columns keep a bit for every value).
    fn is_valid(&self, i: usize) -> bool {
        !self.nullable
            || self
                .validity
                .get(i / 8)
                .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// Appends the values of `next` (its buffers go back to the pool).
    fn append(&mut self, next: Utf8Col) {
        let base = offset_i32(self.data.len());
        let rows = self.len();
        self.data.extend_from_slice(&next.data);
        let ends = next.offsets.get(1..).unwrap_or_default().iter();
        self.offsets.extend(ends.map(|&o| o + base));
        if self.nullable {
            if rows.is_multiple_of(8) && next.nullable {
                // Whole bytes: this column's bits end on a byte boundary.
                self.validity.truncate(rows / 8);
                self.validity.extend_from_slice(&next.validity);
            } else {
                for i in 0..next.len() {
                    self.set_valid(rows + i, next.is_valid(i));
                }
            }
            self.nulls += next.nulls;
        }
        BYTES.give(next.data);
        BYTES.give(next.validity);
        I32S.give(next.offsets);
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
    fn into_string(self) -> Result<ArrayRef> {
        let (offsets, data, nulls) = self.into_parts();
        Ok(Arc::new(
            StringArray::try_new(offsets, data, nulls).map_err(arrow_err)?,
        ))
    }

    /// The column as a binary array (no copy of the data).
    fn into_binary(self) -> Result<ArrayRef> {
        let (offsets, data, nulls) = self.into_parts();
        Ok(Arc::new(
            BinaryArray::try_new(offsets, data, nulls).map_err(arrow_err)?,
        ))
    }
}

fn arrow_err(e: arrow_schema::ArrowError) -> Error {
    Error::Arrow {
        what: "Arrow batch",
        source: e,
    }
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
pub fn message_schema() -> SchemaRef {
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

/// Which columns of [`message_schema`] a read builds (a bit per column, in schema order).
///
/// A read builds, and converts to Arrow, only the columns asked for: a consumer of the bodies
/// pays for one column, not twenty. [`Projection::ALL`] is the whole schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection(u32);

impl Projection {
    /// Every column of [`message_schema`].
    pub const ALL: Projection = Projection((1 << MESSAGE_COLUMNS) - 1);

    /// The bits of the columns split out of the properties (`tags`, `keys`, `properties`,
    /// `uniq_key`): one parse of the properties fills all four.
    const PROPERTIES: u32 = (1 << 9) | (1 << 10) | (1 << 11) | (1 << 19);

    /// The columns named `names` (any order, repeats allowed; the batch keeps the schema's
    /// order). An unknown name is [`Error::Invalid`] naming the columns there are.
    pub fn of_names<S: AsRef<str>>(names: &[S]) -> Result<Projection> {
        let schema = message_schema();
        let mut bits = 0u32;
        for name in names {
            let name = name.as_ref();
            match schema.index_of(name) {
                Ok(i) => bits |= 1 << i,
                Err(_) => {
                    let known: Vec<&str> =
                        schema.fields().iter().map(|f| f.name().as_str()).collect();
                    return Err(Error::Invalid(format!(
                        "columns: {name:?} is not a message column (columns: {})",
                        known.join(", ")
                    )));
                }
            }
        }
        Ok(Projection(bits))
    }

    /// Whether column `i` of [`message_schema`] is built.
    #[inline]
    fn has(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }

    /// The columns a queue read fills from a record's stored bytes and its consume queue unit
    /// without decoding the record ([`MessageColumns::push_stored`]): `queue_id`,
    /// `queue_offset`, `commitlog_offset`, `store_size`, `body`.
    const STORED: u32 = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5);

    /// Whether every built column can be filled without decoding the records.
    fn fills_from_stored_bytes(self) -> bool {
        self.0 & !Self::STORED == 0
    }

    /// Whether any column split out of the properties is built.
    #[inline]
    fn properties(self) -> bool {
        self.0 & Self::PROPERTIES != 0
    }

    /// The indices of the built columns in [`message_schema`], in order.
    fn indices(self) -> impl Iterator<Item = usize> {
        (0..MESSAGE_COLUMNS).filter(move |&i| self.has(i))
    }

    /// The schema of the batches of this projection.
    pub fn schema(self) -> SchemaRef {
        if self == Self::ALL {
            return message_schema();
        }
        let fields: Vec<Field> = self
            .indices()
            .filter_map(|i| message_schema().fields().get(i).map(|f| f.as_ref().clone()))
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// A batch of no rows of this projection.
    pub fn empty_batch(self) -> RecordBatch {
        RecordBatch::new_empty(self.schema())
    }
}

/// The schema of `read_consume_queue` batches: one row per 20-byte consume queue unit.
/// A message batch of no rows (schema [`message_schema`]).
pub fn empty_message_batch() -> RecordBatch {
    RecordBatch::new_empty(message_schema())
}

pub fn consume_queue_schema() -> SchemaRef {
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
pub fn index_schema() -> SchemaRef {
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

/// Bytes of the block [`HostCol`] keeps a host's text in (an IPv4 `a.b.c.d:port` is at most 21).
const HOST_BLOCK: usize = 32;

/// A host column: rows usually repeat one host, so its text is formatted once, and kept in a
/// fixed block that is appended whole and cut to the text's length (no `memcpy` call per row).
#[derive(Debug)]
struct HostCol {
    col: Utf8Col,
    /// The last host, its text's block and length (longer texts are not kept).
    last: Option<(HostAddr, [u8; HOST_BLOCK], usize)>,
}

impl HostCol {
    #[inline]
    fn push(&mut self, h: HostAddr) {
        match &self.last {
            Some((l, block, len)) if *l == h => {
                let at = self.col.data.len();
                self.col.data.extend_from_slice(block);
                self.col.data.truncate(at + len);
                self.col.close_value();
            }
            _ => self.push_new(h),
        }
    }

    #[cold]
    fn push_new(&mut self, h: HostAddr) {
        let s = h.to_string();
        self.col.push(s.as_bytes());
        let mut block = [0u8; HOST_BLOCK];
        self.last = match block.get_mut(..s.len()) {
            Some(b) => {
                b.copy_from_slice(s.as_bytes());
                Some((h, block, s.len()))
            }
            None => None,
        };
    }
}

/// An empty pair list that keeps `v`'s allocation for the next record (the borrowed pairs of
/// one record cannot outlive it; an emptied vector has nothing left to borrow).
fn recycle(mut v: Vec<(&str, &str)>) -> Vec<(&'static str, &'static str)> {
    v.clear();
    v.into_iter().map(|_| ("", "")).collect()
}

/// One property of an ASCII properties blob: the byte ranges of its name and value.
#[derive(Debug, Clone, Copy)]
struct PairAt {
    name: (usize, usize),
    value: (usize, usize),
}

/// `TAGS`, `KEYS` and `UNIQ_KEY` as arrays: comparing a name with them is one integer compare.
const TAGS_NAME: [u8; 4] = *b"TAGS";
const KEYS_NAME: [u8; 4] = *b"KEYS";
const UNIQ_KEY_NAME: [u8; 8] = *b"UNIQ_KEY";

/// Whether the byte ranges `a` and `b` of `raw` hold the same bytes (the lengths and first
/// bytes decide most comparisons without a call).
fn same_bytes(raw: &[u8], a: (usize, usize), b: (usize, usize)) -> bool {
    a.1 - a.0 == b.1 - b.0 && raw.get(a.0) == raw.get(b.0) && raw.get(a.0..a.1) == raw.get(b.0..b.1)
}

/// A bit standing for a name's length and first byte: two names with different bits differ, so
/// a name whose bit no earlier name of the blob set is new without a comparison.
fn name_bit(raw: &[u8], name: (usize, usize)) -> u64 {
    let first = usize::from(raw.get(name.0).copied().unwrap_or(0));
    1 << ((name.1 - name.0).wrapping_mul(8).wrapping_add(first) % 64)
}

/// Adds the pair of `seg..end` (`sep`: its first `\x01`) to `out` by the rules of
/// [`split_ascii_properties`]; `seen` holds the [`name_bit`]s of the names in `out`.
#[inline]
fn add_pair(
    raw: &[u8],
    out: &mut Vec<PairAt>,
    seen: &mut u64,
    seg: usize,
    sep: Option<usize>,
    end: usize,
) {
    let Some(sep) = sep else { return };
    if sep == seg || sep + 1 == end {
        return;
    }
    let at = PairAt {
        name: (seg, sep),
        value: (sep + 1, end),
    };
    let bit = name_bit(raw, at.name);
    if *seen & bit != 0 {
        if let Some(p) = out.iter_mut().find(|p| same_bytes(raw, p.name, at.name)) {
            p.value = at.value;
            return;
        }
    }
    *seen |= bit;
    out.push(at);
}

/// Splits a properties blob like [`rocketstore::format::parse_properties_into`] (pairs
/// separated by `\x02`, name and value by the first `\x01`, pairs with an empty name or value
/// dropped, a repeated name keeping its first position and taking the last value) if it is
/// ASCII (then it is UTF-8, and needs no check per property); returns `false` (`out` then
/// means nothing) if it is not.
///
/// One pass, eight bytes at a time: a word holding no byte below 3 (neither separator) is
/// skipped whole.
fn split_ascii_properties(raw: &[u8], out: &mut Vec<PairAt>) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    out.clear();
    let (mut seg, mut sep) = (0usize, None);
    let mut high = 0u64;
    let mut seen = 0u64;
    let mut special = |i: usize, b: u8, seg: &mut usize, sep: &mut Option<usize>| {
        if b == rocketstore::format::PROPERTY_SEPARATOR {
            add_pair(raw, out, &mut seen, *seg, *sep, i);
            *seg = i + 1;
            *sep = None;
        } else if b == rocketstore::format::NAME_VALUE_SEPARATOR && sep.is_none() {
            *sep = Some(i);
        }
    };
    let mut pos = 0;
    while let Some(word) = raw
        .get(pos..pos + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        let w = u64::from_le_bytes(word);
        high |= w;
        // The lowest flagged byte is one below 3 (a borrow only flags bytes above a true one).
        let below3 = w.wrapping_sub(3 * ONES) & !w & HIGH;
        if below3 == 0 {
            pos += 8;
            continue;
        }
        let i = pos + (below3.trailing_zeros() / 8) as usize;
        special(i, raw.get(i).copied().unwrap_or(0), &mut seg, &mut sep);
        pos = i + 1;
    }
    for (i, &b) in raw.iter().enumerate().skip(pos) {
        high |= u64::from(b);
        if b < 3 {
            special(i, b, &mut seg, &mut sep);
        }
    }
    special(
        raw.len(),
        rocketstore::format::PROPERTY_SEPARATOR,
        &mut seg,
        &mut sep,
    );
    high & HIGH == 0
}

/// Appends `raw[range]`: a short value is moved as one 16- or 32-byte block (then cut to its
/// length) instead of through a `memcpy` call.
#[inline]
fn extend_short(data: &mut Vec<u8>, raw: &[u8], range: (usize, usize)) {
    fn block<const N: usize>(data: &mut Vec<u8>, raw: &[u8], (a, b): (usize, usize)) -> bool {
        match raw.get(a..a + N).and_then(|c| <&[u8; N]>::try_from(c).ok()) {
            Some(block) => {
                let len = data.len();
                data.extend_from_slice(block);
                data.truncate(len + (b - a));
                true
            }
            None => false,
        }
    }
    let (a, b) = range;
    let moved = match b - a {
        0..=16 => block::<16>(data, raw, range),
        17..=32 => block::<32>(data, raw, range),
        _ => false,
    };
    if !moved {
        data.extend_from_slice(raw.get(a..b).unwrap_or_default());
    }
}

/// Pairs a [`Shape`] holds at most.
const SHAPE_PAIRS: usize = 8;

/// Bytes of the names of a [`Shape`] at most (its key column bytes for one record).
const SHAPE_NAME_BYTES: usize = 64;

const NAME_VALUE: u8 = rocketstore::format::NAME_VALUE_SEPARATOR;

/// The property names of one record, in order, as the general split found them (distinct,
/// non-empty, without separators): the records of one producer usually repeat them, so the
/// next record is first matched against them ([`MessageColumns::push_shaped`]).
#[derive(Debug, Clone)]
struct Shape {
    /// The names, concatenated (what the `properties` key column holds for one record).
    names: Vec<u8>,
    /// `names` in a fixed block (appended whole, then cut to the names' length).
    block: [u8; SHAPE_NAME_BYTES],
    /// Where each name ends in `names`.
    ends: Vec<usize>,
    /// Per name of at most 8 bytes: its bytes (and the `\x01` after it if shorter) as a
    /// little-endian word and the mask of those bytes, to compare with a record's next 8 bytes
    /// in one step; `(0, 0)` for a longer name.
    words: Vec<(u64, u64)>,
    /// The pairs holding `TAGS`, `KEYS` and `UNIQ_KEY`.
    tags: Option<usize>,
    keys: Option<usize>,
    uniq: Option<usize>,
}

impl Shape {
    /// The shape of `pairs`, split out of `raw` by [`split_ascii_properties`]; `None` for
    /// none or more than [`SHAPE_PAIRS`] pairs or [`SHAPE_NAME_BYTES`] name bytes.
    fn of(raw: &[u8], pairs: &[PairAt]) -> Option<Shape> {
        if pairs.is_empty() || pairs.len() > SHAPE_PAIRS {
            return None;
        }
        let mut shape = Shape {
            names: Vec::new(),
            block: [0; SHAPE_NAME_BYTES],
            ends: Vec::with_capacity(pairs.len()),
            words: Vec::with_capacity(pairs.len()),
            tags: None,
            keys: None,
            uniq: None,
        };
        for (i, p) in pairs.iter().enumerate() {
            let name = raw.get(p.name.0..p.name.1)?;
            match name {
                n if n == TAGS_NAME => shape.tags = Some(i),
                n if n == KEYS_NAME => shape.keys = Some(i),
                n if n == UNIQ_KEY_NAME => shape.uniq = Some(i),
                _ => {}
            }
            shape.names.extend_from_slice(name);
            shape.ends.push(shape.names.len());
            let mut bytes = [0u8; 8];
            let with_separator = name.iter().chain([&NAME_VALUE]);
            let mut len = 0;
            for (b, &v) in bytes.iter_mut().zip(with_separator) {
                *b = v;
                len += 1;
            }
            shape.words.push(if name.len() <= 8 {
                let mask = u64::MAX.checked_shr(64 - 8 * len).unwrap_or(u64::MAX);
                (u64::from_le_bytes(bytes) & mask, mask)
            } else {
                (0, 0)
            });
        }
        shape
            .block
            .get_mut(..shape.names.len())?
            .copy_from_slice(&shape.names);
        Some(shape)
    }
}

/// Whether `raw` is ASCII, eight bytes at a time (`<[u8]>::is_ascii` checks a slice as short as
/// a record's properties, ~80 bytes, one byte at a time: 2.5% of a 100 B `get_message_arrow`).
#[inline]
fn is_ascii_words(raw: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = raw.chunks_exact(8);
    let mut seen = 0u64;
    for w in &mut words {
        seen |= u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or([0x80; 8]));
    }
    for &b in words.remainder() {
        seen |= u64::from(b);
    }
    seen & HIGH == 0
}

/// The position of the first property separator (`\x02`) in `raw` at or after `from`, or
/// `raw.len()`; eight bytes at a time.
#[inline]
fn find_property_separator(raw: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const SEP: u64 = ONES * rocketstore::format::PROPERTY_SEPARATOR as u64;
    let mut pos = from;
    while let Some(word) = raw
        .get(pos..pos + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        let x = u64::from_le_bytes(word) ^ SEP;
        // The lowest flagged byte is a zero of `x` (a borrow only flags bytes above a true one).
        let zero = x.wrapping_sub(ONES) & !x & HIGH;
        if zero != 0 {
            return pos + (zero.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    raw.iter()
        .skip(pos)
        .position(|&b| b == rocketstore::format::PROPERTY_SEPARATOR)
        .map_or(raw.len(), |i| pos + i)
}

/// How much of a batch is taken: rows, stored bytes and the string-column budget. The same
/// rule admits records when the batch is built and when a first pass plans how to split it
/// between threads ([`build`]), so both agree on where the batch ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Taken {
    rows: usize,
    /// Stored bytes (sum of `store_size`).
    stored: usize,
    /// Record bytes plus the per-row allowance (bounds every string column).
    budget: usize,
}

impl Taken {
    /// Takes a record of `size` stored bytes unless it would push a column past Arrow's 2 GiB
    /// limit for 32-bit offsets or the batch past `max_bytes` (the first record always fits).
    fn admit(&mut self, size: usize, max_bytes: usize) -> bool {
        let need = size.saturating_add(ROW_OVERHEAD);
        if self.rows > 0
            && (self.budget.saturating_add(need) > MAX_COLUMN_BYTES
                || self.stored.saturating_add(size) > max_bytes)
        {
            return false;
        }
        self.rows += 1;
        self.stored = self.stored.saturating_add(size);
        self.budget = self.budget.saturating_add(need);
        true
    }
}

/// Which columns of a batch one [`MessageColumns`] builds (see [`build_by_columns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Every column.
    All,
    /// The columns split out of the properties: `tags`, `keys`, `properties`, `uniq_key`.
    Properties,
    /// Every other column.
    Rest,
}

impl Part {
    fn properties(self) -> bool {
        self != Part::Rest
    }

    fn rest(self) -> bool {
        self != Part::Properties
    }

    /// Whether this part builds column `i` of [`message_schema`] (`body`, column 5, goes
    /// with the properties if `body_with_properties`).
    fn has(self, i: usize, body_with_properties: bool) -> bool {
        if matches!(i, 9 | 10 | 11 | 19) || (i == 5 && body_with_properties) {
            self.properties()
        } else {
            self.rest()
        }
    }
}

/// Columns of [`message_schema`].
const MESSAGE_COLUMNS: usize = 20;

/// The message columns (`rocketstore.MESSAGE_SCHEMA`) being built: a whole batch, one
/// contiguous row range of it, or some of its columns (see [`build`]).
#[derive(Debug)]
pub struct MessageColumns {
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
    /// What the batch holds so far, including the rows of the ranges before this one.
    taken: Taken,
    /// The batch ends before a record that would take `taken.stored` past this (`max_bytes`).
    max_bytes: usize,
    scratch: Vec<(&'static str, &'static str)>,
    pairs: Vec<PairAt>,
    /// The property names of the last record split the general way (see [`Shape`]).
    shape: Option<Shape>,
    /// Rows this value may hold (capacity planning).
    rows: usize,
    /// Stored bytes this value may hold (capacity planning).
    plan_bytes: usize,
    /// Rows taken by this value.
    count: usize,
    /// The columns this value builds.
    part: Part,
    /// Whether `body` is built with the properties (large bodies: see [`build_by_columns`]).
    body_with_properties: bool,
    /// Columns already converted to Arrow (schema index, array), by the threads of a split
    /// build; [`MessageColumns::into_batch`] converts the others.
    arrays: Vec<(usize, ArrayRef)>,
    /// A record given to [`MessageColumns::push_raw`] was not one (the walk then stopped).
    failed: bool,
    /// The columns the read asked for ([`Projection::ALL`] but for a projected read, which
    /// builds on one thread with [`MessageColumns::push_projected`]).
    want: Projection,
}

impl MessageColumns {
    /// Columns for about `rows_hint` rows (reserved for at most [`MAX_ROWS`]) of at most
    /// `max_bytes` stored bytes (at least one row).
    pub fn new(rows_hint: usize, max_bytes: usize) -> Self {
        Self::projected(rows_hint, max_bytes, Projection::ALL)
    }

    /// Like [`MessageColumns::new`], building only the columns of `want` (the others get no
    /// buffers and are left out of the batch).
    pub fn projected(rows_hint: usize, max_bytes: usize, want: Projection) -> Self {
        Self::continuing(
            Taken::default(),
            rows_hint,
            max_bytes,
            max_bytes,
            (Part::All, false),
            want,
        )
    }

    /// The columns these build.
    pub fn projection(&self) -> Projection {
        self.want
    }

    /// Columns for the rows after `prior` of a batch of at most `max_bytes` stored bytes,
    /// reserved for `rows_hint` rows and `plan_bytes` stored bytes.
    /// reserved for `rows_hint` rows and `plan_bytes` stored bytes; only the columns of
    /// `part` get buffers.
    fn continuing(
        prior: Taken,
        rows_hint: usize,
        plan_bytes: usize,
        max_bytes: usize,
        (part, body_with_properties): (Part, bool),
        want: Projection,
    ) -> Self {
        let rows = rows_hint.min(MAX_ROWS);
        // The data of the variable-length columns is reserved on the first record (see
        // `reserve_like`), bounded by `plan_bytes`; every buffer comes from the pool.
        let s = |used: bool| {
            if used {
                Utf8Col::with_capacity(rows, 0)
            } else {
                Utf8Col::unused()
            }
        };
        let (r, p) = (part.rest(), part.properties() && want.properties());
        let b = part.has(5, body_with_properties) && want.has(5);
        let w = |i: usize| r && want.has(i);
        let i32s = |used: bool| if used { I32S.take(rows) } else { Vec::new() };
        let i64s = |used: bool| if used { I64S.take(rows) } else { Vec::new() };
        let mut prop_offsets = Vec::new();
        if p {
            prop_offsets = I32S.take(rows + 1);
            prop_offsets.push(0);
        }
        MessageColumns {
            topic: s(w(0)),
            queue_id: i32s(w(1)),
            queue_offset: i64s(w(2)),
            commitlog_offset: i64s(w(3)),
            store_size: i32s(w(4)),
            body: s(b),
            body_crc: i32s(w(6)),
            flag: i32s(w(7)),
            sys_flag: i32s(w(8)),
            tags: s(p).nullable(),
            keys: s(p).nullable(),
            prop_offsets,
            prop_keys: s(p),
            prop_values: s(p),
            born_timestamp: i64s(w(12)),
            born_host: HostCol {
                col: s(w(13)),
                last: None,
            },
            store_timestamp: i64s(w(14)),
            store_host: HostCol {
                col: s(w(15)),
                last: None,
            },
            reconsume_times: i32s(w(16)),
            prepared_transaction_offset: i64s(w(17)),
            msg_id: s(w(18)),
            uniq_key: s(p).nullable(),
            ids: OffsetMsgIds::default(),
            taken: prior,
            max_bytes,
            scratch: Vec::new(),
            pairs: Vec::new(),
            shape: None,
            rows,
            plan_bytes,
            count: 0,
            part,
            body_with_properties,
            arrays: Vec::new(),
            failed: false,
            want,
        }
    }

    /// Appends one record; returns `false` (appending nothing) if it would push a column past
    /// Arrow's 2 GiB limit for 32-bit offsets or the batch past `max_bytes`, so that the
    /// batch ends before it.
    pub fn push(&mut self, v: &RecordView<'_>) -> bool {
        if self.want != Projection::ALL {
            return self.push_projected(v);
        }
        let size = usize::try_from(v.total_size).unwrap_or(0);
        if !self.taken.admit(size, self.max_bytes) {
            return false;
        }
        if self.count == 0 {
            self.reserve_like(size, v.body.len(), v.topic.len(), v.properties_raw);
        }
        self.count += 1;
        if self.part.has(5, self.body_with_properties) {
            self.body.push(v.body);
        }
        if self.part.properties() {
            self.push_properties(v.properties_raw);
        }
        if !self.part.rest() {
            return true;
        }
        self.queue_id.push(v.queue_id);
        self.queue_offset.push(v.queue_offset);
        self.commitlog_offset.push(v.physical_offset);
        self.store_size.push(v.total_size);
        self.body_crc.push(v.body_crc);
        self.flag.push(v.flag);
        self.sys_flag.push(v.sys_flag);
        self.born_timestamp.push(v.born_timestamp);
        self.store_timestamp.push(v.store_timestamp);
        self.reconsume_times.push(v.reconsume_times);
        self.prepared_transaction_offset
            .push(v.prepared_transaction_offset);
        self.topic.push(v.topic.as_bytes());
        self.born_host.push(v.born_host);
        self.store_host.push(v.store_host);
        self.ids
            .push_id(&mut self.msg_id.data, v.store_host, v.physical_offset);
        self.msg_id.close_value();
        true
    }

    /// Appends the record `rec` (stored bytes) of queue `queue_id` at `queue_offset` and commit
    /// log offset `phy`, for a projection that [`Projection::fills_from_stored_bytes`] allows: the
    /// body is found from the record's length fields alone. Returns `false` like
    /// [`MessageColumns::push`], or if the bytes are not a record (`failed` is then set).
    fn push_stored(&mut self, queue_id: i32, queue_offset: i64, phy: u64, rec: &[u8]) -> bool {
        let Some((body, properties)) = rocketstore::format::body_and_properties(rec) else {
            self.failed = true;
            return false;
        };
        if !self.taken.admit(rec.len(), self.max_bytes) {
            return false;
        }
        if self.count == 0 {
            self.reserve_like(rec.len(), body.len(), 0, properties);
        }
        self.count += 1;
        let w = self.want;
        if w.has(1) {
            self.queue_id.push(queue_id);
        }
        if w.has(2) {
            self.queue_offset.push(queue_offset);
        }
        if w.has(3) {
            self.commitlog_offset
                .push(i64::try_from(phy).unwrap_or(i64::MAX));
        }
        if w.has(4) {
            self.store_size
                .push(i32::try_from(rec.len()).unwrap_or(i32::MAX));
        }
        if w.has(5) {
            self.body.push(body);
        }
        true
    }

    /// [`MessageColumns::push`] for a projected read (one thread, [`Part::All`]): only the
    /// columns of `want` (the properties are parsed only if one of their columns is wanted).
    fn push_projected(&mut self, v: &RecordView<'_>) -> bool {
        let size = usize::try_from(v.total_size).unwrap_or(0);
        if !self.taken.admit(size, self.max_bytes) {
            return false;
        }
        if self.count == 0 {
            self.reserve_like(size, v.body.len(), v.topic.len(), v.properties_raw);
        }
        self.count += 1;
        let w = self.want;
        if w.has(5) {
            self.body.push(v.body);
        }
        if w.properties() {
            self.push_properties(v.properties_raw);
        }
        if w.has(0) {
            self.topic.push(v.topic.as_bytes());
        }
        if w.has(1) {
            self.queue_id.push(v.queue_id);
        }
        if w.has(2) {
            self.queue_offset.push(v.queue_offset);
        }
        if w.has(3) {
            self.commitlog_offset.push(v.physical_offset);
        }
        if w.has(4) {
            self.store_size.push(v.total_size);
        }
        if w.has(6) {
            self.body_crc.push(v.body_crc);
        }
        if w.has(7) {
            self.flag.push(v.flag);
        }
        if w.has(8) {
            self.sys_flag.push(v.sys_flag);
        }
        if w.has(12) {
            self.born_timestamp.push(v.born_timestamp);
        }
        if w.has(13) {
            self.born_host.push(v.born_host);
        }
        if w.has(14) {
            self.store_timestamp.push(v.store_timestamp);
        }
        if w.has(15) {
            self.store_host.push(v.store_host);
        }
        if w.has(16) {
            self.reconsume_times.push(v.reconsume_times);
        }
        if w.has(17) {
            self.prepared_transaction_offset
                .push(v.prepared_transaction_offset);
        }
        if w.has(18) {
            self.ids
                .push_id(&mut self.msg_id.data, v.store_host, v.physical_offset);
            self.msg_id.close_value();
        }
        true
    }

    /// Appends the properties columns (and the bodies, if this part builds them) of one
    /// record given as its stored bytes (see [`LogWalk::walk_properties`]); returns `false`
    /// like [`MessageColumns::push`], or if the bytes are not a record (`failed` is then set).
    fn push_raw(&mut self, rec: &[u8]) -> bool {
        let Some((body, properties)) = rocketstore::format::body_and_properties(rec) else {
            self.failed = true;
            return false;
        };
        if !self.taken.admit(rec.len(), self.max_bytes) {
            return false;
        }
        if self.count == 0 {
            self.reserve_like(rec.len(), body.len(), 0, properties);
        }
        self.count += 1;
        if self.part.has(5, self.body_with_properties) {
            self.body.push(body);
        }
        self.push_properties(properties);
        true
    }

    /// Reserves room for `rows` records like the first (`size` stored bytes, a body of
    /// `body`, a topic of `topic` bytes and properties `props`), each column at most what
    /// `plan_bytes` of records can hold: reserved, untouched memory costs nothing, while
    /// growing a column copies it.
    fn reserve_like(&mut self, size: usize, body: usize, topic: usize, props: &[u8]) {
        let size = size.max(1);
        // Rows of this size that fit the byte bound.
        let rows = self.rows.min(self.plan_bytes / size + 1);
        let bound = self.plan_bytes.min(MAX_COLUMN_BYTES);
        let cap = |per_row: usize| rows.saturating_mul(per_row).min(bound);
        let pairs = props.iter().filter(|&&b| b == 1).count();
        let props = props.len();
        let reserve = |col: &mut Utf8Col, per_row: usize| {
            if col.offsets.capacity() == 0 {
                return; // not built by this part
            }
            let want = cap(per_row);
            if col.data.capacity() < want {
                BYTES.give(std::mem::replace(&mut col.data, BYTES.take(want)));
            }
        };
        reserve(&mut self.body, body);
        reserve(&mut self.topic, topic);
        reserve(&mut self.born_host.col, 24);
        reserve(&mut self.store_host.col, 24);
        reserve(&mut self.msg_id, 32);
        reserve(&mut self.prop_keys, props);
        reserve(&mut self.prop_values, props);
        for col in [&mut self.tags, &mut self.keys, &mut self.uniq_key] {
            reserve(col, 32.min(props));
        }
        for col in [&mut self.prop_keys, &mut self.prop_values] {
            if !self.part.properties() {
                break;
            }
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
        if self.push_shaped(raw) {
            return;
        }
        let mut pairs = std::mem::take(&mut self.pairs);
        if split_ascii_properties(raw, &mut pairs) {
            self.shape = Shape::of(raw, &pairs);
            // The common case: no UTF-8 check per property (the columns' bytes are checked
            // once, when the batch is built).
            let (mut tags, mut keys, mut uniq) = (None, None, None);
            for p in &pairs {
                extend_short(&mut self.prop_keys.data, raw, p.name);
                self.prop_keys.close_value();
                extend_short(&mut self.prop_values.data, raw, p.value);
                self.prop_values.close_value();
                let name = raw.get(p.name.0..p.name.1).unwrap_or_default();
                if let Ok(n) = <[u8; 4]>::try_from(name) {
                    if n == TAGS_NAME {
                        tags = Some(p.value);
                    } else if n == KEYS_NAME {
                        keys = Some(p.value);
                    }
                } else if <[u8; 8]>::try_from(name).ok() == Some(UNIQ_KEY_NAME) {
                    uniq = Some(p.value);
                }
            }
            for (col, value) in [
                (&mut self.tags, tags),
                (&mut self.keys, keys),
                (&mut self.uniq_key, uniq),
            ] {
                match value {
                    Some(range) => {
                        extend_short(&mut col.data, raw, range);
                        col.close_value();
                    }
                    None => col.push_opt(None),
                }
            }
            self.pairs = pairs;
            self.prop_offsets.push(offset_i32(self.prop_keys.len()));
            return;
        }
        self.pairs = pairs;
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

    /// Appends the properties columns of `raw` if it holds exactly the names of [`Shape`]
    /// (the last record's, in the same order, each once, every value non-empty) and is ASCII:
    /// then the general split would find these pairs, in this order, so the names are copied
    /// as one block and only the values are looked for. Returns `false` (appending nothing)
    /// otherwise.
    #[inline]
    fn push_shaped(&mut self, raw: &[u8]) -> bool {
        let Some(shape) = &self.shape else {
            return false;
        };
        let mut values = [(0usize, 0usize); SHAPE_PAIRS];
        let mut pos = 0usize;
        let mut start = 0usize;
        for ((slot, &end), &(word, mask)) in values.iter_mut().zip(&shape.ends).zip(&shape.words) {
            let name = shape.names.get(start..end).unwrap_or_default();
            start = end;
            let at = pos + name.len();
            let head = raw
                .get(pos..pos + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok());
            let same = match head {
                Some(w) if mask != 0 => u64::from_le_bytes(w) & mask == word,
                _ => raw.get(pos..at) == Some(name),
            };
            if !same || raw.get(at) != Some(&NAME_VALUE) {
                return false;
            }
            let value_end = find_property_separator(raw, at + 1);
            if value_end == at + 1 {
                return false; // an empty value: the general split drops the pair
            }
            *slot = (at + 1, value_end);
            pos = value_end + 1;
        }
        // Nothing after the last pair but its separator, and no byte above 127.
        if pos < raw.len() || !is_ascii_words(raw) {
            return false;
        }
        let n = shape.ends.len();
        let base = self.prop_keys.data.len();
        self.prop_keys.data.extend_from_slice(&shape.block);
        self.prop_keys.data.truncate(base + shape.names.len());
        let base = offset_i32(base);
        self.prop_keys
            .offsets
            .extend(shape.ends.iter().map(|&e| base + offset_i32(e)));
        for &range in values.get(..n).unwrap_or_default() {
            extend_short(&mut self.prop_values.data, raw, range);
            self.prop_values.close_value();
        }
        let value = |i: Option<usize>| i.and_then(|i| values.get(i).copied());
        for (col, range) in [
            (&mut self.tags, value(shape.tags)),
            (&mut self.keys, value(shape.keys)),
            (&mut self.uniq_key, value(shape.uniq)),
        ] {
            match range {
                Some(range) => {
                    extend_short(&mut col.data, raw, range);
                    col.close_value();
                }
                None => col.push_opt(None),
            }
        }
        self.prop_offsets.push(offset_i32(self.prop_keys.len()));
        true
    }

    /// Columns with no buffers at all, building `part` (filled by [`MessageColumns::split_properties`]).
    fn hollow(part: Part, body_with_properties: bool) -> Self {
        let host = || HostCol {
            col: Utf8Col::unused(),
            last: None,
        };
        MessageColumns {
            topic: Utf8Col::unused(),
            queue_id: Vec::new(),
            queue_offset: Vec::new(),
            commitlog_offset: Vec::new(),
            store_size: Vec::new(),
            body: Utf8Col::unused(),
            body_crc: Vec::new(),
            flag: Vec::new(),
            sys_flag: Vec::new(),
            tags: Utf8Col::unused(),
            keys: Utf8Col::unused(),
            prop_offsets: Vec::new(),
            prop_keys: Utf8Col::unused(),
            prop_values: Utf8Col::unused(),
            born_timestamp: Vec::new(),
            born_host: host(),
            store_timestamp: Vec::new(),
            store_host: host(),
            reconsume_times: Vec::new(),
            prepared_transaction_offset: Vec::new(),
            msg_id: Utf8Col::unused(),
            uniq_key: Utf8Col::unused(),
            ids: OffsetMsgIds::default(),
            taken: Taken::default(),
            max_bytes: 0,
            scratch: Vec::new(),
            pairs: Vec::new(),
            shape: None,
            rows: 0,
            plan_bytes: 0,
            count: 0,
            part,
            body_with_properties,
            arrays: Vec::new(),
            failed: false,
            want: Projection::ALL,
        }
    }

    /// Moves the columns of [`Part::Properties`] (with the bodies if `body`) out of these
    /// columns of every part, which keep [`Part::Rest`]: two threads can then append the rows
    /// of later ranges and convert to Arrow one half each ([`merge_ranges`]).
    fn split_properties(&mut self, body: bool) -> MessageColumns {
        let mut out = MessageColumns::hollow(Part::Properties, body);
        out.want = self.want;
        out.tags = self.tags.take();
        out.keys = self.keys.take();
        out.prop_offsets = take(&mut self.prop_offsets);
        out.prop_keys = self.prop_keys.take();
        out.prop_values = self.prop_values.take();
        out.uniq_key = self.uniq_key.take();
        if body {
            out.body = self.body.take();
        }
        self.part = Part::Rest;
        self.body_with_properties = body;
        out
    }

    /// Appends the rows of `next`, built for the rows right after these (see [`build`]); its
    /// buffers go back to the pool.
    fn append(&mut self, next: MessageColumns) {
        fn extend<T: ArrowNativeType>(
            pool: &'static crate::buffer_pool::Pool<T>,
            to: &mut Vec<T>,
            from: Vec<T>,
        ) {
            to.extend_from_slice(&from);
            pool.give(from);
        }
        let MessageColumns {
            topic,
            queue_id,
            queue_offset,
            commitlog_offset,
            store_size,
            body,
            body_crc,
            flag,
            sys_flag,
            tags,
            keys,
            prop_offsets,
            prop_keys,
            prop_values,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            msg_id,
            uniq_key,
            taken,
            count,
            ..
        } = next;
        extend(&I32S, &mut self.queue_id, queue_id);
        extend(&I64S, &mut self.queue_offset, queue_offset);
        extend(&I64S, &mut self.commitlog_offset, commitlog_offset);
        extend(&I32S, &mut self.store_size, store_size);
        extend(&I32S, &mut self.body_crc, body_crc);
        extend(&I32S, &mut self.flag, flag);
        extend(&I32S, &mut self.sys_flag, sys_flag);
        extend(&I64S, &mut self.born_timestamp, born_timestamp);
        extend(&I64S, &mut self.store_timestamp, store_timestamp);
        extend(&I32S, &mut self.reconsume_times, reconsume_times);
        extend(
            &I64S,
            &mut self.prepared_transaction_offset,
            prepared_transaction_offset,
        );
        let base = self.prop_keys.len();
        let entries = prop_offsets.get(1..).unwrap_or_default().iter();
        self.prop_offsets
            .extend(entries.map(|&o| o + offset_i32(base)));
        I32S.give(prop_offsets);
        self.topic.append(topic);
        self.body.append(body);
        self.tags.append(tags);
        self.keys.append(keys);
        self.prop_keys.append(prop_keys);
        self.prop_values.append(prop_values);
        self.born_host.col.append(born_host.col);
        self.store_host.col.append(store_host.col);
        self.msg_id.append(msg_id);
        self.uniq_key.append(uniq_key);
        self.taken = taken;
        self.count += count;
    }

    /// The `properties` map column, taken out of `self`.
    fn take_properties(&mut self) -> Result<ArrayRef> {
        let (key_offsets, key_data, _) = self.prop_keys.take().into_parts();
        let (value_offsets, value_data, _) = self.prop_values.take().into_parts();
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
        let offsets = std::mem::take(&mut self.prop_offsets);
        Ok(Arc::new(
            MapArray::try_new(
                map_entries(),
                OffsetBuffer::new(I32S.scalars(offsets)),
                entries,
                None,
                false,
            )
            .map_err(arrow_err)?,
        ))
    }

    /// Column `i` of [`message_schema`] as an Arrow array, taken out of `self` (its buffers
    /// move into Arrow without a copy; string columns are checked as UTF-8 here).
    fn take_array(&mut self, i: usize) -> Result<ArrayRef> {
        Ok(match i {
            0 => self.topic.take().into_string()?,
            1 => i32s(take(&mut self.queue_id)),
            2 => i64s(take(&mut self.queue_offset)),
            3 => i64s(take(&mut self.commitlog_offset)),
            4 => i32s(take(&mut self.store_size)),
            5 => self.body.take().into_binary()?,
            6 => i32s(take(&mut self.body_crc)),
            7 => i32s(take(&mut self.flag)),
            8 => i32s(take(&mut self.sys_flag)),
            9 => self.tags.take().into_string()?,
            10 => self.keys.take().into_string()?,
            11 => self.take_properties()?,
            12 => millis(take(&mut self.born_timestamp)),
            13 => self.born_host.col.take().into_string()?,
            14 => millis(take(&mut self.store_timestamp)),
            15 => self.store_host.col.take().into_string()?,
            16 => i32s(take(&mut self.reconsume_times)),
            17 => i64s(take(&mut self.prepared_transaction_offset)),
            18 => self.msg_id.take().into_string()?,
            _ => self.uniq_key.take().into_string()?,
        })
    }

    /// Converts the columns of this value's part to Arrow arrays (kept in `arrays`).
    fn convert_part(&mut self) -> Result<()> {
        for i in 0..MESSAGE_COLUMNS {
            if self.part.has(i, self.body_with_properties) && self.want.has(i) {
                let array = self.take_array(i)?;
                self.arrays.push((i, array));
            }
        }
        Ok(())
    }

    /// The batch (schema [`message_schema`]); the buffers move into Arrow without a copy.
    pub fn into_batch(mut self) -> Result<RecordBatch> {
        let mut done: Vec<Option<ArrayRef>> = vec![None; MESSAGE_COLUMNS];
        for (i, array) in std::mem::take(&mut self.arrays) {
            if let Some(slot) = done.get_mut(i) {
                *slot = Some(array);
            }
        }
        if self.want != Projection::ALL {
            let want = self.want;
            let columns = want
                .indices()
                .map(|i| match done.get_mut(i).and_then(Option::take) {
                    Some(array) => Ok(array),
                    None => self.take_array(i),
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            let options = RecordBatchOptions::new().with_row_count(Some(self.count));
            return RecordBatch::try_new_with_options(want.schema(), columns, &options)
                .map_err(arrow_err);
        }
        let columns = done
            .into_iter()
            .enumerate()
            .map(|(i, array)| array.map_or_else(|| self.take_array(i), Ok))
            .collect::<Result<Vec<ArrayRef>>>()?;
        RecordBatch::try_new(message_schema(), columns).map_err(arrow_err)
    }
}

/// Rows each build thread takes at least: below this, a thread's start and the copy of its
/// rows into the first range's columns cost more than the rows.
const MIN_ROWS_PER_THREAD: usize = 2048;

/// Batches of a smaller `max_bytes` are built by one thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// How [`build`] reads the records of one batch.
trait Walk: Sync {
    /// A record's position (commit log offset, or queue offset).
    type Pos: Copy + Send + Sync + PartialEq;

    /// For a two-thread build by columns ([`build_by_columns`]): this walk ending where the
    /// readable records end now, so that two walks of it take the same records while the
    /// store grows. `None` (the default) to split by rows instead, or if what is left is too
    /// small to be worth a second thread.
    fn settled(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// The cheap first pass: `f(position, stored size)` for the records from the start of the
    /// batch, in order, until `f` returns `false`. May stop early (the last thread then reads
    /// on); nothing is validated. `None` if this read cannot be split (the rows a walk keeps
    /// are not known in advance).
    fn plan(&self, f: &mut dyn FnMut(Self::Pos, usize) -> bool) -> Option<()>;

    /// Feeds the records from `from` (the batch's start if `None`) up to `end` (the batch's
    /// end if `None`), at most `max` of them, to `cols`; returns where to continue. `crc`:
    /// whether this walk checks the CRCs (if the read asked for it).
    fn walk(
        &self,
        cols: &mut MessageColumns,
        from: Option<Self::Pos>,
        end: Option<Self::Pos>,
        max: usize,
        crc: bool,
    ) -> rocketstore::Result<Self::Pos>;

    /// For the properties part of a column split ([`build_by_columns`]): the whole batch fed
    /// to `cols` ([`MessageColumns::push_raw`]) without decoding the records (the other
    /// part's walk checks them). `None` if this walk cannot (the default), or if it would
    /// have to check CRCs (`crc`, if the read asked for it).
    fn walk_properties(
        &self,
        _cols: &mut MessageColumns,
        _max: usize,
        _crc: bool,
    ) -> Option<rocketstore::Result<Self::Pos>> {
        None
    }
}

/// Builds one batch of at most `max` rows and `max_bytes` stored bytes (but for the first row).
///
/// On one thread unless the batch is large ([`MIN_ROWS_PER_THREAD`] rows per thread,
/// [`PARALLEL_MIN_BYTES`]). Two threads reading the commit log split the columns
/// ([`build_by_columns`]); otherwise a first pass ([`Walk::plan`], a few bytes per record) finds
/// the records the batch takes, the rows are cut into chunks of contiguous rows that the
/// threads ([`build_threads`] at most, the helpers from [`crate::build_pool`]) take from both
/// ends ([`build_split`]), each building every column of its chunks (decoding, CRC checks and
/// all per-record work in parallel) starting from the [`Taken`] state before them, and the
/// chunks are appended in order. A chunk that does not take exactly
/// the records the plan saw (a concurrent append or deletion, a damaged record, a unit whose
/// size is not its record's) or fails makes the whole batch start over on one thread, which
/// gives the sequential result and error.
fn build<W: Walk>(
    walk: &W,
    rows_hint: usize,
    max: usize,
    max_bytes: usize,
    want: Projection,
) -> rocketstore::Result<(MessageColumns, W::Pos)> {
    let threads = build_threads().min(rows_hint / MIN_ROWS_PER_THREAD);
    // Columns filled from the stored bytes alone (the bodies, say) cost a copy per row: a
    // split's plan, helper wake-up and merge copy cost more than they save.
    let light = want != Projection::ALL && want.fills_from_stored_bytes();
    if threads >= 2 && max_bytes >= PARALLEL_MIN_BYTES && !light {
        // A projected read splits by rows: a split by columns would leave one thread idle.
        let built = match walk.settled() {
            Some(settled) if threads == 2 && want == Projection::ALL => {
                build_by_columns(&settled, rows_hint, max, max_bytes)
            }
            _ => build_split(walk, threads, max, max_bytes, want),
        };
        if let Some(built) = built {
            return Ok(built);
        }
    }
    let mut cols = MessageColumns::projected(rows_hint, max_bytes, want);
    let next = walk.walk(&mut cols, None, None, max, true)?;
    Ok((cols, next))
}

/// Batches built by row chunks on several threads, and split builds given up for one thread
/// after their chunks ran (a chunk that did not take exactly its planned records, or failed).
/// Read by the tests through [`split_counts`] (`_native._arrow_split_counts()`): a silent fallback only costs
/// speed, so without them a planning bug would pass every test that compares rows.
static SPLIT_BUILDS: AtomicU64 = AtomicU64::new(0);
static SPLIT_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// `(split builds, split fallbacks)` since the process started (see [`SPLIT_BUILDS`]).
pub fn split_counts() -> (u64, u64) {
    (
        SPLIT_BUILDS.load(Ordering::Relaxed),
        SPLIT_FALLBACKS.load(Ordering::Relaxed),
    )
}

/// Stored record size above which [`build_by_columns`] copies the bodies in the properties
/// part (at 100 B bodies the other part takes them; at 1 KiB the copy outweighs the rest).
const BODY_WITH_PROPERTIES_ABOVE: usize = 512;

/// The parallel path of [`build`] for two threads over the commit log (`walk` settled): each
/// walks every record of the batch
/// (the same admission rule, so both end it at the same record) and builds half of the
/// columns ([`Part`]), then converts them to Arrow arrays (the UTF-8 checks) on its own
/// thread. Nothing is planned, nothing is copied twice, and the calling thread is left with
/// putting the arrays together. `None` to build on one thread instead: the batch is too
/// small, or the two walks failed or disagreed (damage, a deletion while reading), which the
/// one-thread build then reports like a sequential read.
fn build_by_columns<W: Walk>(
    walk: &W,
    rows_hint: usize,
    max: usize,
    max_bytes: usize,
) -> Option<(MessageColumns, W::Pos)> {
    // Bodies of records larger than this are copied by the properties part, smaller ones by
    // the other part, so that both have about as much to do (the first record decides).
    let mut first = 0;
    walk.plan(&mut |_, size| {
        first = size;
        false
    });
    let body_with_properties = first > BODY_WITH_PROPERTIES_ABOVE;
    let run = |part: Part| -> Option<(MessageColumns, W::Pos)> {
        let mut cols = MessageColumns::continuing(
            Taken::default(),
            rows_hint,
            max_bytes,
            max_bytes,
            (part, body_with_properties),
            Projection::ALL,
        );
        // The part that does not copy the bodies checks the CRCs (which read them).
        let crc = !part.has(5, body_with_properties);
        let light = match part {
            Part::Properties => walk.walk_properties(&mut cols, max, crc),
            _ => None,
        };
        let next = match light {
            Some(walked) => walked.ok().filter(|_| !cols.failed)?,
            None => walk.walk(&mut cols, None, None, max, crc).ok()?,
        };
        cols.convert_part().ok()?;
        Some((cols, next))
    };
    let run = &run;
    let (rest, helped) =
        crate::build_pool::beside(|| run(Part::Rest), vec![|| run(Part::Properties)]);
    let properties = helped.into_iter().next().flatten();
    match (properties, rest) {
        (Some((properties, at)), Some((mut cols, next)))
            if at == next && properties.taken == cols.taken =>
        {
            cols.arrays.extend(properties.arrays);
            SPLIT_BUILDS.fetch_add(1, Ordering::Relaxed);
            Some((cols, next))
        }
        _ => {
            SPLIT_FALLBACKS.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// Rows of one chunk of a split build ([`build_split`]) at least.
const MIN_ROWS_PER_CHUNK: usize = 512;

/// Chunks of a split build at most.
const MAX_CHUNKS: usize = 16;

/// The parallel path of [`build`] by row ranges (three or four threads; two for the queue
/// walk, whose scattered records would cost both threads of a column split their cache
/// misses); `None` to build on one thread instead.
///
/// The planned rows are cut into chunks ([`MIN_ROWS_PER_CHUNK`], at most [`MAX_CHUNKS`]). The
/// calling thread builds chunks from the front into the batch's columns, one after another;
/// the helpers take chunks from the back, each into columns of its own, until the two ends
/// meet. A helper that starts late (a pool thread waking on an idle core of a VM takes
/// 0.05-0.5 ms) or runs slower then builds fewer rows instead of keeping the calling thread
/// waiting for a fixed half.
fn build_split<W: Walk>(
    walk: &W,
    threads: usize,
    max: usize,
    max_bytes: usize,
    want: Projection,
) -> Option<(MessageColumns, W::Pos)> {
    // The plan: every record's position, and the batch state before it.
    let mut plan: Vec<(W::Pos, Taken)> = Vec::new();
    let mut taken = Taken::default();
    walk.plan(&mut |pos, size| {
        let before = taken;
        if taken.rows >= max || !taken.admit(size, max_bytes) {
            return false;
        }
        plan.push((pos, before));
        true
    })?;
    let n = plan.len();
    let threads = threads.min(n / MIN_ROWS_PER_THREAD);
    if threads < 2 || taken.stored < PARALLEL_MIN_BYTES / 2 {
        return None;
    }
    // Chunk k holds planned rows [bounds[k], bounds[k + 1]); the last one reads on to the
    // batch's real end (the plan may have stopped early). Inner bounds are multiples of 8, so
    // that appending a chunk's validity bitmaps copies bytes.
    let chunks = (n / MIN_ROWS_PER_CHUNK).clamp(threads, MAX_CHUNKS);
    let bounds: Vec<usize> = (0..=chunks)
        .map(|k| {
            if k == chunks {
                n
            } else {
                (k * n / chunks) & !7
            }
        })
        .collect();
    // Chunk `k` fed to `cols`; `None` if it failed or did not take exactly its planned records.
    let chunk = |cols: &mut MessageColumns, k: usize| -> Option<W::Pos> {
        let (a, b) = (*bounds.get(k)?, *bounds.get(k + 1)?);
        let from = plan.get(a)?.0;
        let (end, limit) = if k + 1 == chunks {
            (None, max - a)
        } else {
            (Some(plan.get(b)?.0), b - a)
        };
        let next = walk.walk(cols, Some(from), end, limit, true).ok()?;
        let exact = k + 1 == chunks || plan.get(b).is_some_and(|&(_, t)| t == cols.taken);
        exact.then_some(next)
    };
    // The chunks not claimed yet: [front, back).
    let left = Mutex::new((0usize, chunks));
    let claim = |from_front: bool| -> Option<usize> {
        let mut g = left.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = &mut *g;
        if *front >= *back {
            return None;
        }
        if from_front {
            *front += 1;
            Some(*front - 1)
        } else {
            *back -= 1;
            Some(*back)
        }
    };
    let (chunk, claim) = (&chunk, &claim);
    // The calling thread: every chunk from the front, into the batch's columns (reserved for
    // every row: it receives the helpers' chunks).
    let front = || -> Option<(MessageColumns, Option<W::Pos>, usize)> {
        let mut cols = MessageColumns::continuing(
            Taken::default(),
            n,
            taken.stored,
            max_bytes,
            (Part::All, false),
            want,
        );
        let mut next = None;
        let mut built = 0;
        while let Some(k) = claim(true) {
            next = Some(chunk(&mut cols, k)?);
            built = k + 1;
        }
        Some((cols, next, built))
    };
    // A helper: chunks from the back, each into columns of its own.
    let back = || -> Option<Vec<(usize, MessageColumns, W::Pos)>> {
        let mut done = Vec::new();
        while let Some(k) = claim(false) {
            let (a, b) = (*bounds.get(k)?, *bounds.get(k + 1)?);
            let prior = plan.get(a)?.1;
            let after = plan.get(b).map_or(taken, |&(_, t)| t);
            let mut cols = MessageColumns::continuing(
                prior,
                b - a,
                after.stored - prior.stored,
                max_bytes,
                (Part::All, false),
                want,
            );
            let next = chunk(&mut cols, k)?;
            done.push((k, cols, next));
        }
        Some(done)
    };
    let back = &back;
    let jobs: Vec<_> = (1..threads).map(|_| back).collect();
    let (first, helped) = crate::build_pool::beside(front, jobs);
    let fail = || {
        SPLIT_FALLBACKS.fetch_add(1, Ordering::Relaxed);
        None
    };
    let Some((cols, next, built)) = first else {
        return fail();
    };
    let mut later: Vec<(usize, MessageColumns, W::Pos)> = Vec::new();
    for done in helped {
        match done {
            Some(done) => later.extend(done),
            None => return fail(),
        }
    }
    later.sort_unstable_by_key(|&(k, _, _)| k);
    // Every chunk exactly once: the front's [0, built), then the helpers' in order.
    if later
        .iter()
        .enumerate()
        .any(|(i, &(k, _, _))| k != built + i)
        || built + later.len() != chunks
    {
        return fail();
    }
    // The front's columns lead unless it built nothing (its thread ran late the whole time):
    // then the helpers' first chunk, chunk 0, does.
    let front_part = next.map(|next| (cols, next));
    let parts = front_part
        .into_iter()
        .chain(later.into_iter().map(|(_, cols, next)| (cols, next)))
        .collect();
    let Some(merged) = merge_ranges(parts) else {
        return fail();
    };
    SPLIT_BUILDS.fetch_add(1, Ordering::Relaxed);
    Some(merged)
}

/// Appends the row chunks of a split build in order and converts the batch's columns to
/// Arrow arrays, on two threads: a helper takes the columns split out of the properties
/// (with the bodies when records are large, as [`build_by_columns`] does), the calling
/// thread every other column. The copy of the later ranges and the UTF-8 and offset checks
/// are then no longer serial work of the calling thread. `None` if a conversion fails (the
/// batch is then built again on one thread, whose conversion reports the error).
fn merge_ranges<P: Send>(ranges: Vec<(MessageColumns, P)>) -> Option<(MessageColumns, P)> {
    let mut ranges = ranges.into_iter();
    let (mut cols, mut next) = ranges.next()?;
    let mut later: Vec<(MessageColumns, P)> = ranges.collect();
    let first = cols
        .store_size
        .first()
        .and_then(|&s| usize::try_from(s).ok())
        .unwrap_or(0);
    let body = first > BODY_WITH_PROPERTIES_ABOVE;
    let mut properties = cols.split_properties(body);
    let later_properties: Vec<MessageColumns> = later
        .iter_mut()
        .map(|(more, _)| more.split_properties(body))
        .collect();
    let helper_part = move || -> Option<MessageColumns> {
        for more in later_properties {
            properties.append(more);
        }
        properties.convert_part().ok()?;
        Some(properties)
    };
    let (rest, helped) = crate::build_pool::beside(
        || {
            for (more, after) in later {
                cols.append(more);
                next = after;
            }
            cols.convert_part().ok()
        },
        vec![helper_part],
    );
    let properties = helped.into_iter().next().flatten();
    rest?;
    cols.arrays.extend(properties?.arrays);
    Some((cols, next))
}

/// Default upper bound of the stored bytes behind one read batch (`read_arrow`'s and
/// `get_message_arrow`'s `max_bytes`, the Spark reader's batches); exported to Python as
/// `rocketstore._native.DEFAULT_MAX_BATCH_BYTES` (the Python default of `max_bytes`). 8 MiB keeps each column buffer in the buffer pool.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 8 << 20;

/// Which records of the commit log a read keeps: those of one topic and of a tag expression
/// (RocketMQ's `"TagA || TagB"`, matched on the record's `TAGS`; `None`, `""` and `"*"` keep
/// every record). The filter is applied to each record before any of its columns is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFilter {
    topic: Option<String>,
    tags: Option<Vec<String>>,
}

impl RecordFilter {
    /// Records of `topic` (every topic if `None`) whose tag is one of `tags`.
    pub fn new(topic: Option<&str>, tags: Option<&str>) -> Self {
        let tags = tags.map(str::trim).filter(|t| !t.is_empty() && *t != "*");
        RecordFilter {
            topic: topic.map(str::to_owned),
            tags: tags.map(|t| {
                t.split("||")
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect()
            }),
        }
    }

    /// Whether the filter keeps every record.
    pub fn is_all(&self) -> bool {
        self.topic.is_none() && self.tags.is_none()
    }

    /// Whether the record `v` is kept.
    #[inline]
    fn keeps(&self, v: &RecordView<'_>) -> bool {
        if self.topic.as_deref().is_some_and(|t| t != v.topic) {
            return false;
        }
        match &self.tags {
            None => true,
            Some(tags) => {
                let tag = rocketstore::format::property_value(
                    v.properties_raw,
                    rocketstore::format::property::TAGS,
                );
                tag.is_some_and(|t| tags.iter().any(|x| x.as_bytes() == t))
            }
        }
    }
}

/// The commit log walk of `read_arrow`.
struct LogWalk<'a> {
    store: &'a Store,
    from: u64,
    end: u64,
    check_crc: bool,
    /// The records kept (`None`: every record).
    filter: Option<&'a RecordFilter>,
}

impl Walk for LogWalk<'_> {
    type Pos = u64;

    fn settled(&self) -> Option<Self> {
        if self.filter.is_some() {
            return None; // the rows are not known in advance
        }
        let end = self.end.min(self.store.max_commitlog_offset());
        let from = self.from.max(self.store.min_commitlog_offset());
        (end.saturating_sub(from) >= (PARALLEL_MIN_BYTES / 2) as u64)
            .then_some(LogWalk { end, ..*self })
    }

    fn plan(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> Option<()> {
        if self.filter.is_some() {
            return None; // the rows are not known in advance
        }
        self.store
            .record_sizes(self.from, self.end, |at, size| f(at, size as usize))
            .ok()
    }

    fn walk(
        &self,
        cols: &mut MessageColumns,
        from: Option<u64>,
        end: Option<u64>,
        max: usize,
        crc: bool,
    ) -> rocketstore::Result<u64> {
        let (from, end) = (from.unwrap_or(self.from), end.unwrap_or(self.end));
        let crc = self.check_crc && crc;
        let Some(filter) = self.filter else {
            return self
                .store
                .visit_records(from, end, max, crc, |v| cols.push(v));
        };
        // Records the filter drops are stepped over and do not count: the walk goes on to
        // the `max`-th kept record (or the byte bound, or the end).
        let mut kept = 0usize;
        self.store.visit_records(from, end, usize::MAX, crc, |v| {
            if !filter.keeps(v) {
                return true;
            }
            if kept >= max || !cols.push(v) {
                return false;
            }
            kept += 1;
            true
        })
    }

    fn walk_properties(
        &self,
        cols: &mut MessageColumns,
        max: usize,
        crc: bool,
    ) -> Option<rocketstore::Result<u64>> {
        if (self.check_crc && crc) || self.filter.is_some() {
            return None;
        }
        Some(
            self.store
                .visit_raw_records(self.from, self.end, max, |_, rec| cols.push_raw(rec)),
        )
    }
}

pub fn read_log(
    store: &Store,
    from: u64,
    end: u64,
    max: usize,
    max_bytes: usize,
    check_crc: bool,
) -> rocketstore::Result<(MessageColumns, u64)> {
    read_log_projected(
        store,
        (from, end),
        max,
        max_bytes,
        check_crc,
        Projection::ALL,
        &RecordFilter::default(),
    )
}

/// `read_arrow` with a projection and a filter: the records of `[from, end)` that `filter`
/// keeps (dropped records do not count towards `max` or `max_bytes`), only the columns of
/// `want`.
pub fn read_log_projected(
    store: &Store,
    (from, end): (u64, u64),
    max: usize,
    max_bytes: usize,
    check_crc: bool,
    want: Projection,
    filter: &RecordFilter,
) -> rocketstore::Result<(MessageColumns, u64)> {
    let walk = LogWalk {
        store,
        from,
        end,
        check_crc,
        filter: (!filter.is_all()).then_some(filter),
    };
    build(&walk, max, max, max_bytes, want)
}

/// The queue walk of `get_message_arrow`.
struct QueueWalk<'a> {
    store: &'a Store,
    span: QueueSpan<'a>,
}

impl Walk for QueueWalk<'_> {
    type Pos = i64;

    fn plan(&self, f: &mut dyn FnMut(i64, usize) -> bool) -> Option<()> {
        let QueueSpan {
            topic,
            queue_id,
            from,
            end,
            subscription,
            ..
        } = self.span;
        if subscription.is_some() {
            // A tag filter decides on the record itself: the rows are not known in advance.
            return None;
        }
        self.store
            .visit_queue_units(topic, queue_id, from, end, |at, u| {
                if u.phy_offset < 0 || u.size <= 0 || u.is_prefill() {
                    return true;
                }
                f(at, usize::try_from(u.size).unwrap_or(0))
            });
        Some(())
    }

    fn walk(
        &self,
        cols: &mut MessageColumns,
        from: Option<i64>,
        end: Option<i64>,
        max: usize,
        crc: bool,
    ) -> rocketstore::Result<i64> {
        let span = QueueSpan {
            from: from.unwrap_or(self.span.from),
            end: end.unwrap_or(self.span.end),
            max,
            check_crc: self.span.check_crc && crc,
            ..self.span
        };
        if cols.want.fills_from_stored_bytes() {
            // No column needs the decoded record (the bodies alone, say): its length fields
            // locate the body. The engine checks the header and decodes what fails it.
            let queue_id = span.queue_id;
            let next = self.store.visit_queue_raw_records(&span, |at, phy, rec| {
                cols.push_stored(queue_id, at, phy, rec)
            })?;
            if cols.failed {
                // Bytes the engine accepted but whose lengths do not hold a body: the decoding
                // walk reports them.
                *cols = MessageColumns::projected(cols.rows, cols.max_bytes, cols.want);
                return self.store.visit_queue_records(&span, |v| cols.push(v));
            }
            return Ok(next);
        }
        self.store.visit_queue_records(&span, |v| cols.push(v))
    }
}

/// `get_message_arrow`: records of one queue for queue offsets in `[from, end)` of `span`, at
/// most `max_bytes` stored bytes (but for the first).
pub fn read_queue(
    store: &Store,
    span: &QueueSpan<'_>,
    max_bytes: usize,
) -> rocketstore::Result<(MessageColumns, i64)> {
    read_queue_projected(store, span, max_bytes, Projection::ALL)
}

/// [`read_queue`] building only the columns of `want` (the span's tag filter drops records
/// before any column is built).
pub fn read_queue_projected(
    store: &Store,
    span: &QueueSpan<'_>,
    max_bytes: usize,
    want: Projection,
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
    let walk = QueueWalk { store, span: *span };
    build(&walk, rows, max, max_bytes, want)
}

/// The consume queue columns: topic, queue_id, queue_offset, commitlog_offset, size, tags_code.
#[derive(Debug, Default)]
pub struct CqColumns {
    queue_offset: Vec<i64>,
    commitlog_offset: Vec<i64>,
    size: Vec<i32>,
    tags_code: Vec<i64>,
}

/// `read_consume_queue`: up to `max` units from `from` (raised to the queue's first offset).
pub fn read_cq(store: &Store, topic: &str, queue_id: i32, from: i64, max: usize) -> CqColumns {
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
    pub fn into_batch(self, topic: &str, queue_id: i32) -> Result<RecordBatch> {
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
pub fn index_batch(files: &[IndexFileEntries]) -> Result<RecordBatch> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed-seed xorshift64 generator: `next(n)` is a number in `0..n`, the same sequence
    /// on every run.
    fn xorshift() -> impl FnMut(u64) -> u64 {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// The pairs `split_ascii_properties` finds, as text.
    fn split(raw: &[u8]) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        assert!(split_ascii_properties(raw, &mut pairs));
        pairs
            .iter()
            .map(|p| {
                let text = |(a, b): (usize, usize)| {
                    String::from_utf8(raw.get(a..b).unwrap_or_default().to_vec())
                        .unwrap_or_default()
                };
                (text(p.name), text(p.value))
            })
            .collect()
    }

    #[test]
    fn ascii_split_matches_the_utf8_parser() {
        let cases: &[&[u8]] = &[
            b"",
            b"TAGS\x01a\x02TAGX\x01b\x02TAGS\x01c\x02TAGX\x01d\x02T\x01e",
            b"\x02",
            b"\x01",
            b"a\x01b",
            b"a\x01b\x02",
            b"\x02\x02a\x01b\x02\x02",
            b"TAGS\x01t\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02",
            b"a\x01\x02b\x01c",
            b"\x01a\x02b\x01c",
            b"a\x01b\x01c\x02d\x01e",
            b"a\x011\x02b\x012\x02a\x013\x02",
            b"a\x01\x01\x02b\x01x",
            b"name-only\x02\x01value-only\x02k\x01v",
            b"\x00\x01\x00\x02k\x00\x01v\x00",
            b"UNIQ_KEY\x017F000001465E54D8180081729EDB62A7\x02TAGS\x01TagA\x02KEYS\x01k-0\x02",
            b"long-name-0123456789\x01long-value-0123456789\x01x\x02\x02\x02\x01\x01\x02z\x01y",
            b"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x02\x02\x02\x02\x02\x02\x02",
        ];
        for raw in cases {
            let mut expected = Vec::new();
            assert!(rocketstore::format::parse_properties_into(
                raw,
                &mut expected
            ));
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(split(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn ascii_split_matches_the_utf8_parser_on_random_blobs() {
        // Names drawn from a few bytes, so that repeated names and names sharing a length
        // and first byte (one `name_bit`) but differing later are common.
        let mut next = xorshift();
        let alphabet = b"ab\x01\x02";
        for _ in 0..20_000 {
            let len = next(40) as usize;
            let raw: Vec<u8> = (0..len)
                .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                .collect();
            let mut expected = Vec::new();
            assert!(rocketstore::format::parse_properties_into(
                &raw,
                &mut expected
            ));
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(split(&raw), expected, "{raw:?}");
        }
    }

    /// The properties columns of `blobs` pushed one after another (the shape path for every
    /// blob after one of the same names), as (pairs, tags, keys, uniq_key) per row.
    #[allow(clippy::type_complexity)]
    fn pushed_properties(
        blobs: &[Vec<u8>],
    ) -> Vec<(
        Vec<(String, String)>,
        Option<String>,
        Option<String>,
        Option<String>,
    )> {
        let mut cols = MessageColumns::new(blobs.len(), 1 << 20);
        for raw in blobs {
            cols.push_properties(raw);
        }
        let text = |c: &Utf8Col, i: usize| {
            let (a, b) = (c.offsets[i] as usize, c.offsets[i + 1] as usize);
            String::from_utf8_lossy(&c.data[a..b]).into_owned()
        };
        let opt = |c: &Utf8Col, i: usize| c.is_valid(i).then(|| text(c, i));
        (0..blobs.len())
            .map(|row| {
                let (a, b) = (
                    cols.prop_offsets[row] as usize,
                    cols.prop_offsets[row + 1] as usize,
                );
                let pairs = (a..b)
                    .map(|e| (text(&cols.prop_keys, e), text(&cols.prop_values, e)))
                    .collect();
                (
                    pairs,
                    opt(&cols.tags, row),
                    opt(&cols.keys, row),
                    opt(&cols.uniq_key, row),
                )
            })
            .collect()
    }

    /// What the general parser makes of `raw`, in the form of [`pushed_properties`].
    #[allow(clippy::type_complexity)]
    fn parsed_properties(
        raw: &[u8],
    ) -> (
        Vec<(String, String)>,
        Option<String>,
        Option<String>,
        Option<String>,
    ) {
        let props = parse_properties(raw);
        let pairs: Vec<(String, String)> = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |n: &str| props.get(n).map(str::to_owned);
        (pairs, get("TAGS"), get("KEYS"), get("UNIQ_KEY"))
    }

    #[test]
    fn shaped_properties_match_the_general_parser() {
        let std = |uniq: &str, tags: &str, keys: &str, crc: &str| {
            format!(
                "UNIQ_KEY\x01{uniq}\x02TAGS\x01{tags}\x02KEYS\x01{keys}\x02__CRC32#\x01{crc}\x02"
            )
            .into_bytes()
        };
        let mut blobs: Vec<Vec<u8>> = vec![
            std(
                "7F0000014468856F92F885DAAB7940AE",
                "TagA",
                "k-0",
                "1538316621",
            ),
            std(
                "7F0000014468856F92F885DAAB7940AF",
                "TagB",
                "k-123456789 k2",
                "1",
            ),
            // The same names without the last separator.
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c".to_vec(),
            // An empty value: the pair is dropped.
            b"UNIQ_KEY\x01u\x02TAGS\x01\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            // A repeated name after the known ones.
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02TAGS\x01z\x02".to_vec(),
            // Values holding the name separator, an empty segment, other orders and names.
            b"UNIQ_KEY\x01u\x01v\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"TAGS\x01t\x02UNIQ_KEY\x01u\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02".to_vec(),
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            "UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k-ü\x02__CRC32#\x01c\x02"
                .as_bytes()
                .to_vec(),
            b"UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"UNIQ_KEY\x01u\x02TAGX\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"\x02UNIQ_KEY\x01u\x02TAGS\x01t\x02KEYS\x01k\x02__CRC32#\x01c\x02".to_vec(),
            b"UNIQ_KEY\x01u".to_vec(),
            b"UNIQ_KEY\x01".to_vec(),
            b"".to_vec(),
            b"UNIQ_KEY\x01u".to_vec(),
            // Long values (past one 8-byte word, past the 32-byte block).
            std(
                &"U".repeat(70),
                &"T".repeat(33),
                &"K".repeat(17),
                &"9".repeat(9),
            ),
            std(
                &"U".repeat(70),
                &"T".repeat(33),
                &"K".repeat(17),
                &"9".repeat(9),
            ),
        ];
        // Random blobs over the four names and separators, each repeated once (the second
        // push of a blob goes through its shape if it has one).
        let mut next = xorshift();
        let parts: [&[u8]; 8] = [
            b"TAGS",
            b"KEYS",
            b"UNIQ_KEY",
            b"a",
            b"\x01",
            b"\x02",
            b"\x01\x01",
            b"v",
        ];
        for _ in 0..5_000 {
            let raw: Vec<u8> = (0..next(16))
                .flat_map(|_| parts[next(parts.len() as u64) as usize].to_vec())
                .collect();
            blobs.push(raw.clone());
            blobs.push(raw);
        }
        let got = pushed_properties(&blobs);
        for (raw, got) in blobs.iter().zip(got) {
            assert_eq!(got, parsed_properties(raw), "{raw:?}");
        }
    }

    #[test]
    fn property_separators_are_found_in_every_position() {
        for len in 0..40 {
            for at in 0..=len {
                let mut raw = vec![b'x'; len];
                if let Some(b) = raw.get_mut(at) {
                    *b = 2;
                }
                for from in 0..=len {
                    let expected = (from..len).find(|&i| raw[i] == 2).unwrap_or(len);
                    assert_eq!(
                        find_property_separator(&raw, from),
                        expected,
                        "{len} {at} {from}"
                    );
                }
            }
        }
    }

    #[test]
    fn host_columns_repeat_short_and_long_hosts() {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let v4 = HostAddr {
            ip: IpAddr::V4(Ipv4Addr::new(255, 255, 255, 255)),
            port: 65535,
        };
        let v6 = HostAddr {
            ip: IpAddr::V6(Ipv6Addr::new(
                0xffff, 0xfffe, 0xfffd, 0xfffc, 0xfffb, 0xfffa, 0xfff9, 0xfff8,
            )),
            port: 10911,
        };
        assert!(v6.to_string().len() > HOST_BLOCK);
        let mut col = HostCol {
            col: Utf8Col::with_capacity(8, 0),
            last: None,
        };
        let hosts = [v4, v4, v6, v6, v4, v6, v4, v4];
        for h in hosts {
            col.push(h);
        }
        let texts: Vec<String> = (0..hosts.len())
            .map(|i| {
                let (a, b) = (col.col.offsets[i] as usize, col.col.offsets[i + 1] as usize);
                String::from_utf8(col.col.data[a..b].to_vec()).unwrap_or_default()
            })
            .collect();
        let expected: Vec<String> = hosts.iter().map(ToString::to_string).collect();
        assert_eq!(texts, expected);
    }

    #[test]
    fn ascii_words_agree_with_is_ascii() {
        let mut next = xorshift();
        for len in 0..70 {
            for _ in 0..50 {
                let mut raw: Vec<u8> = (0..len).map(|_| next(128) as u8).collect();
                assert!(is_ascii_words(&raw));
                if len > 0 {
                    let at = next(len as u64) as usize;
                    raw[at] = 128 + next(128) as u8;
                }
                assert_eq!(is_ascii_words(&raw), raw.is_ascii(), "{raw:?}");
            }
        }
    }

    #[test]
    fn short_values_are_copied_exactly() {
        let raw: Vec<u8> = (0..100u8).collect();
        for a in [0usize, 3, 60, 80, 99] {
            for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 40] {
                let b = (a + len).min(raw.len());
                let mut data = vec![7u8];
                extend_short(&mut data, &raw, (a, b));
                assert_eq!(&data[1..], &raw[a..b], "{a}..{b}");
            }
        }
    }

    #[test]
    fn name_arrays_are_the_property_names() {
        use rocketstore::format::property::{KEYS, TAGS, UNIQ_KEY};
        assert_eq!(&TAGS_NAME, TAGS.as_bytes());
        assert_eq!(&KEYS_NAME, KEYS.as_bytes());
        assert_eq!(&UNIQ_KEY_NAME, UNIQ_KEY.as_bytes());
    }

    #[test]
    fn non_ascii_properties_are_left_to_the_utf8_parser() {
        let mut pairs = Vec::new();
        assert!(!split_ascii_properties(
            "k\x01wert-ü".as_bytes(),
            &mut pairs
        ));
        assert!(!split_ascii_properties(b"k\x01v\x02\xff\x01x", &mut pairs));
        assert!(!split_ascii_properties(
            b"0123456789\x01abcdef\x80",
            &mut pairs
        ));
    }

    #[test]
    fn taken_admits_the_first_record_and_then_what_fits() {
        let mut t = Taken::default();
        assert!(t.admit(1000, 10));
        assert!(!t.admit(1, 10));
        let mut t = Taken::default();
        assert!(t.admit(4, 10));
        assert!(t.admit(6, 10));
        assert!(!t.admit(1, 10));
        assert_eq!(
            t,
            Taken {
                rows: 2,
                stored: 10,
                budget: 10 + 2 * ROW_OVERHEAD
            }
        );
    }
}
