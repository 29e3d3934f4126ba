//! Arrow batches into `put_batch`: the columns of an Arrow batch viewed as the engine's
//! [`PutMessage`]s, shared by the Python binding (`MessageStore.put_batch` with Arrow input)
//! and the JVM Spark writer. No PyO3 and no JNI here: failures are [`PutError`] values, which
//! each binding maps to its own exceptions.
//!
//! Every column is checked in full (`ArrayData::validate_full`: no offset, length or bitmap is
//! trusted) before anything is written; each row is then viewed as a [`PutMessage`] borrowing
//! the Arrow buffers (no copy of a body) and the whole input is written with one
//! `Store::put_batch`. The results come back as one Arrow `RecordBatch` ([`result_schema`]).
//!
//! Column types (each column named like a `put()` argument; `topic` and `body` required):
//! text columns (`topic`, `tags`, `born_host`, `store_host`, `transaction`) are string,
//! large_string, string_view or a dictionary of those; `body` is any binary or string type;
//! integer columns are any integer type (checked into range per row); `born_timestamp` is an
//! integer (epoch ms) or a timestamp of any unit; `keys` is text (space-separated) or a list
//! of text; `properties` is a map of text to text.

use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int8Type};
use arrow_array::OffsetSizeTrait;
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, DictionaryArray, Int32Array, Int64Array,
    Int8Array, LargeBinaryArray, RecordBatch, StringArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rocketstore::bulk::compress_messages;
use rocketstore::compression::{BodyCodec, CompressOptions};
use rocketstore::format::OffsetMsgIds;
use rocketstore::{HostAddr, PutMessage, PutStatus, Store, TransactionType};

use crate::buffer_pool::{BYTES, I32S, I64S};

/// The `put()` arguments an Arrow column may be named after, in `put()`'s order.
pub const PUT_FIELDS: [&str; 13] = [
    "topic",
    "body",
    "queue_id",
    "tags",
    "keys",
    "properties",
    "flag",
    "born_timestamp",
    "born_host",
    "store_host",
    "delay_level",
    "transaction",
    "prepared_transaction_offset",
];

/// The `transaction` values and their types (null: an ordinary message).
pub const TRANSACTION_NAMES: [(&str, TransactionType); 3] = [
    ("prepared", TransactionType::Prepared),
    ("commit", TransactionType::Commit),
    ("rollback", TransactionType::Rollback),
];

/// Why Arrow input could not be put. The bindings map [`PutError::Engine`] as every engine
/// error, [`PutError::Invalid`] and [`PutError::Message`] to their "invalid message" error
/// (naming `field`), [`PutError::Type`] to a type error and [`PutError::Value`] to a value
/// error, each with this message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// A value of one message (`index`, counted over the whole input) or of the input.
    #[error("invalid {field}: {}{reason}", index.map(|i| format!("message {i}: ")).unwrap_or_default())]
    Invalid {
        /// The column (the `put()` argument).
        field: &'static str,
        /// The message, if one is at fault.
        index: Option<usize>,
        /// What is wrong with it.
        reason: String,
    },
    /// Invalid input named by a column, with a message of its own.
    #[error("{message}")]
    Message {
        /// The column.
        field: String,
        /// The whole message.
        message: String,
    },
    /// A column of a type that cannot be read as its `put()` argument.
    #[error("{0}")]
    Type(String),
    /// Malformed Arrow data, or a result Arrow cannot hold.
    #[error("{0}")]
    Value(String),
    /// The engine failed the write.
    #[error(transparent)]
    Engine(#[from] rocketstore::Error),
}

/// The result of converting or writing Arrow input.
pub type PutResult<T> = std::result::Result<T, PutError>;

fn type_err(m: String) -> PutError {
    PutError::Type(m)
}

fn invalid_message_field(field: &str, message: String) -> PutError {
    PutError::Message {
        field: field.to_owned(),
        message,
    }
}

/// A conversion failure of row data, raised as `InvalidMessageError` naming the row.
#[derive(Debug)]
struct RowError {
    field: &'static str,
    index: usize,
    reason: String,
}

fn row_err(field: &'static str, index: usize, reason: impl Into<String>) -> RowError {
    RowError {
        field,
        index,
        reason: reason.into(),
    }
}

impl From<RowError> for PutError {
    fn from(e: RowError) -> Self {
        PutError::Invalid {
            field: e.field,
            index: Some(e.index),
            reason: e.reason,
        }
    }
}

/// The text columns (`put()` string arguments).
const TEXT_COLUMNS: [&str; 5] = ["topic", "tags", "born_host", "store_host", "transaction"];

fn is_text(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, v) => is_text(v),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        _ => false,
    }
}

fn is_binary(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, v) => is_binary(v),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => true,
        other => is_text(other),
    }
}

/// A variable-length column viewed as bytes (text columns are checked as UTF-8 per row).
#[derive(Debug)]
enum Bytes {
    Small(BinaryArray),
    Large(LargeBinaryArray),
    View(BinaryViewArray),
    /// A dictionary column: row `i` is value `keys[i]` of the values, which are not
    /// materialized per row (topics and tags are usually a handful of distinct strings, and
    /// rows of one value share one `&str`).
    Dict(Int32Array, Box<Bytes>),
}

/// Dictionary key types read as int32 (every value fits; wider keys are materialized).
fn small_dict_key(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16
    )
}

impl Bytes {
    /// Any string or binary array as bytes: zero-copy for (large) string/binary and the view
    /// types; a dictionary or fixed-size binary is materialized once.
    fn of(name: &str, a: &ArrayRef) -> PutResult<Self> {
        let cast_err = |e: arrow_schema::ArrowError| {
            type_err(format!(
                "column {name:?} of type {} cannot be read as bytes: {e}",
                a.data_type()
            ))
        };
        Ok(match a.data_type() {
            DataType::Utf8 => Bytes::Small(BinaryArray::from(a.as_string::<i32>().clone())),
            DataType::LargeUtf8 => {
                Bytes::Large(LargeBinaryArray::from(a.as_string::<i64>().clone()))
            }
            DataType::Utf8View => Bytes::View(a.as_string_view().clone().to_binary_view()),
            DataType::Binary => Bytes::Small(a.as_binary::<i32>().clone()),
            DataType::LargeBinary => Bytes::Large(a.as_binary::<i64>().clone()),
            DataType::BinaryView => Bytes::View(a.as_binary_view().clone()),
            DataType::Dictionary(k, v)
                if small_dict_key(k)
                    && is_binary(v)
                    && !matches!(**v, DataType::Dictionary(..)) =>
            {
                let d = a.as_any_dictionary();
                let keys = arrow_cast::cast(d.keys(), &DataType::Int32).map_err(cast_err)?;
                Bytes::Dict(
                    keys.as_primitive::<Int32Type>().clone(),
                    Box::new(Bytes::of(name, d.values())?),
                )
            }
            _ => {
                let b = arrow_cast::cast(a, &DataType::LargeBinary).map_err(cast_err)?;
                Bytes::Large(b.as_binary::<i64>().clone())
            }
        })
    }

    /// Row `i`, `None` if null. Callers index rows below the batch length, which
    /// `validate_full` checked against every offset.
    fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            Bytes::Small(a) => (i < a.len() && a.is_valid(i)).then(|| a.value(i)),
            Bytes::Large(a) => (i < a.len() && a.is_valid(i)).then(|| a.value(i)),
            Bytes::View(a) => (i < a.len() && a.is_valid(i)).then(|| a.value(i)),
            Bytes::Dict(keys, values) => values.get(dict_key(keys, i)?),
        }
    }

    /// Row `i` as text; `row` (the message index) and `field` name it in errors.
    fn get_str(&self, i: usize, row: usize, field: &'static str) -> Result<Option<&str>, RowError> {
        match self.get(i) {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b)
                .map(Some)
                .map_err(|e| row_err(field, row, format!("is not valid UTF-8: {e}"))),
        }
    }
}

/// The value index of dictionary row `i` (`None` if the row is null or past the end; a key
/// out of the values' range is rejected by `validate_full` and is then a missing value).
fn dict_key(keys: &Int32Array, i: usize) -> Option<usize> {
    (i < keys.len() && keys.is_valid(i))
        .then(|| usize::try_from(keys.value(i)).ok())
        .flatten()
}

/// The bytes rows `0..len` of an offsets array span, as text, and where they start; `None`
/// if that span is not valid UTF-8 as a whole.
fn text_span<'a, O: OffsetSizeTrait>(offsets: &[O], data: &'a [u8]) -> Option<(&'a str, usize)> {
    let lo = offsets.first()?.as_usize();
    let hi = offsets.last()?.as_usize();
    std::str::from_utf8(data.get(lo..hi)?).ok().map(|s| (s, lo))
}

/// A text column of one batch, checked as UTF-8 once: the bytes its rows span are validated
/// in one pass and each row is then a sub-slice of them (`str::get` checks the two char
/// boundaries). A column whose span is not valid as a whole (the bytes between rows need not
/// be text) or of a view type is checked row by row, with the same errors.
#[derive(Debug)]
struct Text<'a> {
    /// The column, or a dictionary column's values.
    col: &'a Bytes,
    /// A dictionary column's keys.
    keys: Option<&'a Int32Array>,
    span: Option<(&'a str, usize)>,
}

impl<'a> Text<'a> {
    /// A dictionary's values are checked (once), not its rows.
    fn new(col: &'a Bytes) -> Self {
        let span = match col {
            Bytes::Dict(keys, values) => {
                return Text {
                    keys: Some(keys),
                    ..Text::new(values)
                }
            }
            Bytes::Small(a) => text_span(a.value_offsets(), a.value_data()),
            Bytes::Large(a) => text_span(a.value_offsets(), a.value_data()),
            Bytes::View(_) => None,
        };
        Text {
            col,
            keys: None,
            span,
        }
    }

    /// Row `i` as text (`None` if null); `row` (the message index) and `field` name it in errors.
    fn get(&self, i: usize, row: usize, field: &'static str) -> Result<Option<&'a str>, RowError> {
        let i = match self.keys {
            None => i,
            Some(keys) => match dict_key(keys, i) {
                Some(j) => j,
                None => return Ok(None),
            },
        };
        if let Some((text, base)) = self.span {
            let range = match self.col {
                Bytes::Small(a) if i < a.len() => {
                    a.is_valid(i).then(|| offsets_at(a.value_offsets(), i))
                }
                Bytes::Large(a) if i < a.len() => {
                    a.is_valid(i).then(|| offsets_at(a.value_offsets(), i))
                }
                Bytes::Small(_) | Bytes::Large(_) => Some(None),
                Bytes::View(_) | Bytes::Dict(..) => None,
            };
            match range {
                None => return Ok(None),
                Some(Some((lo, hi))) => {
                    if let Some(t) = text.get(lo.wrapping_sub(base)..hi.wrapping_sub(base)) {
                        return Ok(Some(t));
                    }
                }
                Some(None) => {}
            }
        }
        self.col.get_str(i, row, field)
    }
}

/// Row `i`'s value range in an offsets array.
fn offsets_at<O: OffsetSizeTrait>(offsets: &[O], i: usize) -> Option<(usize, usize)> {
    Some((offsets.get(i)?.as_usize(), offsets.get(i + 1)?.as_usize()))
}

/// How an integer column's values become the engine's.
#[derive(Debug, Clone, Copy)]
enum Scale {
    One,
    Mul(i64),
    Div(i64),
}

/// An integer column's values: int32 as given (the usual `queue_id`), any other integer type
/// cast to int64 once per batch.
#[derive(Debug)]
enum IntValues {
    I32(Int32Array),
    I64(Int64Array),
}

/// An integer column, as int64 (timestamps as epoch milliseconds).
#[derive(Debug)]
struct Ints {
    values: IntValues,
    scale: Scale,
}

impl Ints {
    fn of(name: &'static str, a: &ArrayRef) -> PutResult<Self> {
        let t = a.data_type();
        let (source, scale) = match t {
            DataType::Timestamp(unit, _) if name == "born_timestamp" => {
                let scale = match unit {
                    TimeUnit::Second => Scale::Mul(1000),
                    TimeUnit::Millisecond => Scale::One,
                    TimeUnit::Microsecond => Scale::Div(1000),
                    TimeUnit::Nanosecond => Scale::Div(1_000_000),
                };
                (DataType::Timestamp(*unit, None), scale)
            }
            DataType::Int32 => {
                return Ok(Ints {
                    values: IntValues::I32(a.as_primitive().clone()),
                    scale: Scale::One,
                })
            }
            t if t.is_integer() => (t.clone(), Scale::One),
            t => {
                let kind = if name == "born_timestamp" {
                    "an integer or timestamp"
                } else {
                    "an integer"
                };
                return Err(type_err(format!(
                    "column {name:?} must be {kind} column, not {t}"
                )));
            }
        };
        let opts = arrow_cast::CastOptions {
            safe: false,
            ..Default::default()
        };
        let plain = if matches!(source, DataType::Timestamp(..)) {
            // A timestamp's storage is int64: reinterpret, never convert.
            let data = a
                .to_data()
                .into_builder()
                .data_type(DataType::Int64)
                .build();
            arrow_array::make_array(data.map_err(|e| PutError::Value(e.to_string()))?)
        } else {
            Arc::clone(a)
        };
        let values = arrow_cast::cast_with_options(&plain, &DataType::Int64, &opts)
            .map_err(|e| invalid_message_field(name, format!("invalid {name}: {e}")))?;
        Ok(Ints {
            values: IntValues::I64(values.as_primitive().clone()),
            scale,
        })
    }

    fn get(&self, i: usize, field: &'static str) -> Result<Option<i64>, RowError> {
        let v = match &self.values {
            IntValues::I32(a) if i < a.len() && a.is_valid(i) => i64::from(a.value(i)),
            IntValues::I64(a) if i < a.len() && a.is_valid(i) => a.value(i),
            _ => return Ok(None),
        };
        match self.scale {
            Scale::One => Ok(Some(v)),
            Scale::Div(d) => Ok(Some(v.div_euclid(d))),
            Scale::Mul(m) => v
                .checked_mul(m)
                .map(Some)
                .ok_or_else(|| row_err(field, i, format!("{v} s overflows epoch milliseconds"))),
        }
    }

    fn get_i32(&self, i: usize, field: &'static str) -> Result<Option<i32>, RowError> {
        match self.get(i, field)? {
            None => Ok(None),
            Some(v) => i32::try_from(v)
                .map(Some)
                .map_err(|_| row_err(field, i, format!("{v} is outside the 32-bit range"))),
        }
    }
}

/// A list (keys) or map (properties) column: per-row child ranges over one or two children.
#[derive(Debug)]
struct Nested {
    /// `n + 1` child indexes (absolute in the children).
    offsets: Vec<usize>,
    nulls: Option<NullBuffer>,
    first: Bytes,
    second: Option<Bytes>,
}

impl Nested {
    fn range(&self, i: usize) -> Option<std::ops::Range<usize>> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            return None;
        }
        let lo = *self.offsets.get(i)?;
        let hi = *self.offsets.get(i + 1)?;
        Some(lo..hi.max(lo))
    }
}

fn usize_offsets<O: Copy + TryInto<usize>>(offsets: &[O]) -> Vec<usize> {
    offsets.iter().map(|&o| o.try_into().unwrap_or(0)).collect()
}

/// How the `keys` column is given.
#[derive(Debug)]
enum Keys {
    /// One string per row, keys separated by spaces.
    Joined(Bytes),
    /// A list of strings per row.
    List(Nested),
}

fn keys_of(a: &ArrayRef) -> PutResult<Keys> {
    let t = a.data_type();
    if is_text(t) {
        return Ok(Keys::Joined(Bytes::of("keys", a)?));
    }
    let bad = || {
        type_err(format!(
            "column 'keys' must be string (space-separated keys) or list<string>, not {t}"
        ))
    };
    let list = match t {
        DataType::List(f) | DataType::LargeList(f) if is_text(f.data_type()) => {
            if let DataType::List(_) = t {
                let l = a.as_list::<i32>();
                (usize_offsets(l.value_offsets()), l.nulls(), l.values())
            } else {
                let l = a.as_list::<i64>();
                (usize_offsets(l.value_offsets()), l.nulls(), l.values())
            }
        }
        _ => return Err(bad()),
    };
    let (offsets, nulls, values) = list;
    Ok(Keys::List(Nested {
        offsets,
        nulls: nulls.cloned(),
        first: Bytes::of("keys", values)?,
        second: None,
    }))
}

fn properties_of(a: &ArrayRef) -> PutResult<Nested> {
    let t = a.data_type();
    let ok = match t {
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(f) => f.len() == 2 && f.iter().all(|field| is_text(field.data_type())),
            _ => false,
        },
        _ => false,
    };
    if !ok {
        return Err(type_err(format!(
            "column 'properties' must be map<string, string>, not {t}"
        )));
    }
    let m = a.as_map();
    Ok(Nested {
        offsets: usize_offsets(m.value_offsets()),
        nulls: m.nulls().cloned(),
        first: Bytes::of("properties", m.keys())?,
        second: Some(Bytes::of("properties", m.values())?),
    })
}

/// Every column of one imported batch (see [`Columns::of`]).
#[derive(Debug)]
pub struct Columns {
    /// Index of the batch's first row in the whole input (error messages name that row).
    first_row: usize,
    len: usize,
    topic: Bytes,
    body: Bytes,
    queue_id: Option<Ints>,
    tags: Option<Bytes>,
    keys: Option<Keys>,
    properties: Option<Nested>,
    flag: Option<Ints>,
    born_timestamp: Option<Ints>,
    born_host: Option<Bytes>,
    store_host: Option<Bytes>,
    delay_level: Option<Ints>,
    transaction: Option<Bytes>,
    prepared_transaction_offset: Option<Ints>,
}

/// Checks the column names of the input: only `put()` argument names, each once, with
/// `topic` and `body`.
pub fn check_schema(schema: &Schema) -> PutResult<()> {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    for (i, name) in names.iter().enumerate() {
        if !PUT_FIELDS.contains(name) {
            return Err(invalid_message_field(
                name,
                format!(
                    "invalid message: unknown column '{name}' (expected put() argument names: {})",
                    PUT_FIELDS.join(", ")
                ),
            ));
        }
        if names.get(..i).is_some_and(|before| before.contains(name)) {
            return Err(invalid_message_field(
                name,
                format!("invalid {name}: the batch has two '{name}' columns"),
            ));
        }
    }
    for required in ["topic", "body"] {
        if !names.contains(&required) {
            return Err(PutError::Invalid {
                field: required,
                index: None,
                reason: format!("the batch has no {required:?} column"),
            });
        }
    }
    for f in schema.fields() {
        let name = f.name().as_str();
        let t = f.data_type();
        if TEXT_COLUMNS.contains(&name) && !is_text(t) {
            return Err(type_err(format!(
                "column {name:?} must be a string column, not {t}"
            )));
        }
        if name == "body" && !is_binary(t) {
            return Err(type_err(format!(
                "column 'body' must be a binary (or string) column, not {t}"
            )));
        }
    }
    Ok(())
}

/// `d` with every string type replaced by its binary twin, checked in full (buffer sizes,
/// offsets, bitmaps, dictionary keys, children): an error for anything a producer got wrong.
/// UTF-8 is left to the per-row checks, so that invalid text names its row.
fn checked(d: &ArrayData) -> Result<ArrayData, arrow_schema::ArrowError> {
    let children = d
        .child_data()
        .iter()
        .map(checked)
        .collect::<Result<Vec<_>, _>>()?;
    let child_type = |i: usize| children.get(i).map(|c| c.data_type().clone());
    let retyped = |f: &Arc<Field>, i: usize| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(child_type(i).unwrap_or(DataType::Null)),
        )
    };
    let t = match d.data_type() {
        DataType::Utf8 => DataType::Binary,
        DataType::LargeUtf8 => DataType::LargeBinary,
        DataType::Utf8View => DataType::BinaryView,
        DataType::List(f) => DataType::List(retyped(f, 0)),
        DataType::LargeList(f) => DataType::LargeList(retyped(f, 0)),
        DataType::ListView(f) => DataType::ListView(retyped(f, 0)),
        DataType::LargeListView(f) => DataType::LargeListView(retyped(f, 0)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(retyped(f, 0), *n),
        DataType::Map(f, sorted) => DataType::Map(retyped(f, 0), *sorted),
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| retyped(f, i))
                .collect(),
        ),
        DataType::Dictionary(k, _) => {
            DataType::Dictionary(k.clone(), Box::new(child_type(0).unwrap_or(DataType::Null)))
        }
        other => other.clone(),
    };
    d.clone()
        .into_builder()
        .data_type(t)
        .child_data(children)
        .build()
}

impl Columns {
    /// The rows of this batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Imports the columns of `batch`, each checked in full; `first_row` is the index of its
    /// first row in the whole input (errors name rows by it).
    pub fn of(batch: &RecordBatch, first_row: usize) -> PutResult<Self> {
        for c in batch.columns() {
            checked(&c.to_data())
                .map_err(|e| PutError::Value(format!("malformed Arrow data: {e}")))?;
        }
        let get = |name: &str| batch.column_by_name(name);
        let bytes = |name: &'static str| get(name).map(|a| Bytes::of(name, a)).transpose();
        let ints = |name: &'static str| get(name).map(|a| Ints::of(name, a)).transpose();
        let required = |name: &'static str| {
            get(name).ok_or_else(|| PutError::Invalid {
                field: name,
                index: None,
                reason: format!("the batch has no {name:?} column"),
            })
        };
        Ok(Columns {
            first_row,
            len: batch.num_rows(),
            topic: Bytes::of("topic", required("topic")?)?,
            body: Bytes::of("body", required("body")?)?,
            queue_id: ints("queue_id")?,
            tags: bytes("tags")?,
            keys: get("keys").map(keys_of).transpose()?,
            properties: get("properties").map(properties_of).transpose()?,
            flag: ints("flag")?,
            born_timestamp: ints("born_timestamp")?,
            born_host: bytes("born_host")?,
            store_host: bytes("store_host")?,
            delay_level: ints("delay_level")?,
            transaction: bytes("transaction")?,
            prepared_transaction_offset: ints("prepared_transaction_offset")?,
        })
    }
}

/// Every row's keys and properties, flattened over all batches: row `i` owns
/// `keys[key_ends[i - 1]..key_ends[i]]` (from 0 for the first row), and likewise for
/// properties. Two allocations for the whole input instead of two per row.
#[derive(Debug, Default)]
struct Flat<'a> {
    keys: Vec<&'a str>,
    key_ends: Vec<usize>,
    props: Vec<(&'a str, &'a str)>,
    prop_ends: Vec<usize>,
}

impl<'a> Flat<'a> {
    fn add(&mut self, c: &'a Columns) -> Result<(), RowError> {
        let joined = match &c.keys {
            Some(Keys::Joined(col)) => Some(Text::new(col)),
            _ => None,
        };
        for i in 0..c.len {
            let row = c.first_row + i;
            match &c.keys {
                None => {}
                Some(Keys::Joined(_)) => {
                    let text = joined.as_ref().map(|t| t.get(i, row, "keys")).transpose()?;
                    if let Some(s) = text.flatten() {
                        // One string is stored as is (the keys rule of rocketstore_format::keys).
                        self.keys.extend(rocketstore::format::keys::key_parts(s));
                    }
                }
                Some(Keys::List(col)) => {
                    for j in col.range(i).unwrap_or_default() {
                        match col.first.get_str(j, row, "keys")? {
                            Some(k) => self.keys.push(k),
                            None => return Err(row_err("keys", row, "contains a null key")),
                        }
                    }
                }
            }
            self.key_ends.push(self.keys.len());
            if let Some(col) = &c.properties {
                for j in col.range(i).unwrap_or_default() {
                    let k = col.first.get_str(j, row, "properties")?;
                    let v = match &col.second {
                        Some(values) => values.get_str(j, row, "properties")?,
                        None => None,
                    };
                    match (k, v) {
                        (Some(k), Some(v)) => self.props.push((k, v)),
                        _ => {
                            return Err(row_err("properties", row, "contains a null name or value"))
                        }
                    }
                }
            }
            self.prop_ends.push(self.props.len());
        }
        Ok(())
    }
}

/// Parses the hosts of one column, caching the last distinct value (rows usually repeat one).
#[derive(Debug, Default)]
struct HostCache<'a> {
    last: Option<(&'a [u8], HostAddr)>,
}

impl<'a> HostCache<'a> {
    fn get(
        &mut self,
        col: Option<&'a Bytes>,
        i: usize,
        row: usize,
        field: &'static str,
    ) -> Result<Option<HostAddr>, RowError> {
        let Some(col) = col else { return Ok(None) };
        let Some(raw) = col.get(i) else {
            return Ok(None);
        };
        if let Some((b, h)) = self.last {
            if b == raw {
                return Ok(Some(h));
            }
        }
        let s = col.get_str(i, row, field)?.unwrap_or_default();
        let h = s.parse::<HostAddr>().map_err(|e| {
            row_err(
                field,
                row,
                format!("{s:?} is not \"ip:port\" or \"[ipv6]:port\": {e}"),
            )
        })?;
        self.last = Some((raw, h));
        Ok(Some(h))
    }
}

/// Step 2: the messages of every batch, borrowing the columns and the flat lists, into `out`
/// (empty).
fn messages<'a>(
    batches: &'a [Columns],
    flat: &'a Flat<'a>,
    out: &mut Vec<PutMessage<'a>>,
) -> Result<(), RowError> {
    let total: usize = batches.iter().map(|c| c.len).sum();
    out.reserve(total);
    let (mut key_start, mut prop_start) = (0, 0);
    for c in batches {
        let topics = Text::new(&c.topic);
        let tag_text = c.tags.as_ref().map(Text::new);
        let mut born_hosts = HostCache::default();
        let mut store_hosts = HostCache::default();
        for i in 0..c.len {
            let row = c.first_row + i;
            let key_end = flat.key_ends.get(row).copied().unwrap_or(key_start);
            let prop_end = flat.prop_ends.get(row).copied().unwrap_or(prop_start);
            let keys = flat.keys.get(key_start..key_end).unwrap_or_default();
            let properties = flat.props.get(prop_start..prop_end).unwrap_or_default();
            (key_start, prop_start) = (key_end, prop_end);
            let topic = topics
                .get(i, row, "topic")?
                .ok_or_else(|| row_err("topic", row, "is null"))?;
            let body = c
                .body
                .get(i)
                .ok_or_else(|| row_err("body", row, "is null"))?;
            let int32 = |col: &Option<Ints>, field| -> Result<i32, RowError> {
                match col {
                    None => Ok(0),
                    Some(col) => col
                        .get_i32(i, field)
                        .map(Option::unwrap_or_default)
                        .map_err(|e| row_err(field, row, e.reason)),
                }
            };
            let int64 = |col: &Option<Ints>, field| -> Result<Option<i64>, RowError> {
                match col {
                    None => Ok(None),
                    Some(col) => col.get(i, field).map_err(|e| row_err(field, row, e.reason)),
                }
            };
            let transaction = match &c.transaction {
                None => TransactionType::NotType,
                Some(col) => match col.get_str(i, row, "transaction")? {
                    None => TransactionType::NotType,
                    Some(t) => TRANSACTION_NAMES
                        .iter()
                        .find(|(n, _)| *n == t)
                        .map(|(_, ty)| *ty)
                        .ok_or_else(|| {
                            row_err(
                                "transaction",
                                row,
                                format!(
                                    "{t:?} is not one of \"prepared\", \"commit\", \"rollback\" \
                                     (or null)"
                                ),
                            )
                        })?,
                },
            };
            let tags = match &tag_text {
                Some(col) => col.get(i, row, "tags")?,
                None => None,
            };
            out.push(PutMessage {
                topic,
                body,
                queue_id: int32(&c.queue_id, "queue_id")?,
                tags,
                keys,
                properties,
                flag: int32(&c.flag, "flag")?,
                born_timestamp: int64(&c.born_timestamp, "born_timestamp")?,
                born_host: born_hosts.get(c.born_host.as_ref(), i, row, "born_host")?,
                store_host: store_hosts.get(c.store_host.as_ref(), i, row, "store_host")?,
                delay_level: int32(&c.delay_level, "delay_level")?,
                transaction,
                prepared_transaction_offset: int64(
                    &c.prepared_transaction_offset,
                    "prepared_transaction_offset",
                )?
                .unwrap_or(0),
                ..PutMessage::default()
            });
        }
    }
    Ok(())
}

/// The schema of the batch `put_batch` returns for Arrow input (`rocketstore._arrow.RESULT_SCHEMA`).
pub fn result_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    Arc::clone(SCHEMA.get_or_init(|| {
        Arc::new(Schema::new(vec![
            Field::new(
                "status",
                DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
                false,
            ),
            Field::new("msg_id", DataType::Utf8, false),
            Field::new("commitlog_offset", DataType::Int64, false),
            Field::new("queue_offset", DataType::Int64, false),
            Field::new("wrote_bytes", DataType::Int32, false),
            Field::new("store_timestamp", DataType::Int64, false),
        ]))
    }))
}

fn arrow_err(e: arrow_schema::ArrowError) -> PutError {
    PutError::Value(format!("cannot build the result batch: {e}"))
}

/// The result batch of `results` (one row per message, in input order).
pub fn result_batch(results: &[rocketstore::PutResult]) -> PutResult<RecordBatch> {
    let n = results.len();
    let mut status = Vec::with_capacity(n);
    // RocketMQ's PutMessageStatus names, in declaration order: the `status` dictionary.
    let mut names: Vec<&str> = PutStatus::ALL.iter().map(|s| s.as_str()).collect();
    // The columns' buffers come from the pools of the Arrow reads and go back to them when
    // Python drops the batch (no fresh pages per call).
    let mut id_offsets = I32S.take(n + 1);
    id_offsets.push(0);
    let mut id_data = BYTES.take(n * 32);
    let mut ids = OffsetMsgIds::default();
    let mut last: Option<(PutStatus, i8)> = None;
    for r in results {
        let code = match last {
            Some((s, c)) if s == r.status => c,
            _ => {
                let name = r.status.as_str();
                let pos = names.iter().position(|x| *x == name).unwrap_or_else(|| {
                    names.push(name);
                    names.len() - 1
                });
                let c = i8::try_from(pos).map_err(|_| arrow_err_msg("too many status values"))?;
                last = Some((r.status, c));
                c
            }
        };
        status.push(code);
        if r.commitlog_offset >= 0 {
            ids.push_id(&mut id_data, r.store_host, r.commitlog_offset);
        }
        id_offsets.push(i32::try_from(id_data.len()).map_err(|_| {
            arrow_err_msg("batch too large: the msg_id column exceeds 2 GiB; split the batch")
        })?);
    }
    let keys = Int8Array::from(status);
    let status = DictionaryArray::<Int8Type>::try_new(keys, Arc::new(StringArray::from(names)))
        .map_err(arrow_err)?;
    let msg_id = StringArray::try_new(
        OffsetBuffer::new(I32S.scalars(id_offsets)),
        BYTES.buffer(id_data),
        None,
    )
    .map_err(arrow_err)?;
    let i64s = |f: fn(&rocketstore::PutResult) -> i64| {
        let mut v = I64S.take(n);
        v.extend(results.iter().map(f));
        Arc::new(Int64Array::new(I64S.scalars(v), None)) as ArrayRef
    };
    let mut wrote = I32S.take(n);
    wrote.extend(results.iter().map(|r| r.wrote_bytes));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(status),
        Arc::new(msg_id),
        i64s(|r| r.commitlog_offset),
        i64s(|r| r.queue_offset),
        Arc::new(Int32Array::new(I32S.scalars(wrote), None)),
        i64s(|r| r.store_timestamp),
    ];
    RecordBatch::try_new(result_schema(), columns).map_err(arrow_err)
}

fn arrow_err_msg(m: &str) -> PutError {
    PutError::Value(m.to_owned())
}

/// Largest input whose `msg_id` column (at most 56 characters per row, IPv6) fits Arrow's
/// 32-bit string offsets; checked before anything is written.
pub const MAX_ROWS: usize = (i32::MAX as usize) / 56;

/// The per-row vectors of [`write`], kept empty between calls so that their pages stay
/// mapped: a fresh vector of a large batch's messages (~200 bytes each) is new heap memory
/// that the kernel faults in and zeroes page by page on every call.
#[derive(Debug, Default)]
struct Scratch {
    keys: Vec<&'static str>,
    key_ends: Vec<usize>,
    props: Vec<(&'static str, &'static str)>,
    prop_ends: Vec<usize>,
    msgs: Vec<PutMessage<'static>>,
    /// The compressed bodies of a batch, one after another.
    arena: Vec<u8>,
    codec: BodyCodec,
}

/// Rows above which [`Scratch`] vectors are freed instead of kept (~200 MB of messages).
const SCRATCH_MAX_ROWS: usize = 1 << 20;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// An empty vector that keeps `v`'s allocation, for another lifetime of the same element type
/// (the in-place `collect` of an emptied vector reuses its buffer; no element is converted).
// `filter_map` (not `filter`): the item type changes lifetime, which is the point.
#[allow(clippy::unnecessary_filter_map)]
fn emptied<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

fn keep<T, U>(v: Vec<T>) -> Vec<U> {
    if v.capacity() > SCRATCH_MAX_ROWS {
        Vec::new()
    } else {
        emptied(v)
    }
}

/// Puts every row of `batches` with one `put_batch`; with `compress`, bodies of at least
/// `compress.over` bytes are first compressed as a RocketMQ producer does
/// ([`rocketstore::compression`]) and stored with the codec's SYSFLAG bits.
///
/// # Errors
/// A row that is not a valid message (named by its row), an invalid compression level, or
/// the engine's error.
pub fn write(
    store: &Store,
    batches: &[Columns],
    compress: Option<CompressOptions>,
) -> PutResult<Vec<rocketstore::PutResult>> {
    let mut scratch = SCRATCH.with(|s| s.take());
    let mut flat = Flat {
        keys: emptied(std::mem::take(&mut scratch.keys)),
        key_ends: std::mem::take(&mut scratch.key_ends),
        props: emptied(std::mem::take(&mut scratch.props)),
        prop_ends: std::mem::take(&mut scratch.prop_ends),
    };
    flat.key_ends.clear();
    flat.prop_ends.clear();
    for c in batches {
        flat.add(c)?;
    }
    let mut arena = std::mem::take(&mut scratch.arena);
    let mut msgs = emptied(std::mem::take(&mut scratch.msgs));
    messages(batches, &flat, &mut msgs)?;
    if let Some(c) = &compress {
        compress_messages(c, &mut scratch.codec, &mut msgs, &mut arena)
            .map_err(|e| PutError::Value(format!("invalid compression: {e}")))?;
    }
    let results = store.put_batch(&msgs);
    scratch.msgs = keep(msgs);
    scratch.keys = keep(flat.keys);
    scratch.key_ends = keep(flat.key_ends);
    scratch.props = keep(flat.props);
    scratch.prop_ends = keep(flat.prop_ends);
    if arena.capacity() <= SCRATCH_MAX_ARENA {
        scratch.arena = arena;
    }
    SCRATCH.with(|s| *s.borrow_mut() = scratch);
    results.map_err(PutError::Engine)
}

/// Bytes of compressed bodies above which [`Scratch::arena`] is freed instead of kept.
const SCRATCH_MAX_ARENA: usize = 256 << 20;
