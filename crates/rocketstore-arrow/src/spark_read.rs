//! The Spark reader's batches, built in the Arrow form of the Spark schema the query asked for.
//!
//! `rocketstore.spark` (through the Python binding) and the JVM reader (`rocketstore-jni`) hand
//! these batches to Spark unchanged: their schema is exactly `to_arrow_schema(spark_schema)`
//! (every field nullable, timestamps in microseconds, a `store` column; [`spark_schema`]), so no
//! cast runs per batch.
//!
//! * [`read_log`] reads `[from, end)` of the commit log. When every requested column comes
//!   from the record header, the topic or the body (the schema a pruning `.schema(...)` gives),
//!   only those columns are built; otherwise the full message batch of `arrow_read` is built
//!   and conformed.
//! * [`conform`] conforms any message batch (`rocketstore.MESSAGE_SCHEMA`) to the Spark
//!   schema: the requested columns by name, timestamps from milliseconds to microseconds, the
//!   `store` column added. The other arrays move over without a copy.
//!
//! The Python side calls these only when every requested field has its default Spark type
//! (other types still go through pyarrow's cast); the JVM reader asks only for default types.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMillisecondType;
use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, SchemaRef, TimeUnit};
use rocketstore::format::RecordView;
use rocketstore::Store;

use crate::error::{Error, Result};

/// Arrow's limit for one string/binary column with 32-bit offsets, with room to spare.
const MAX_COLUMN_BYTES: usize = (i32::MAX as usize) - (1 << 20);

fn arrow_err(e: arrow_schema::ArrowError) -> Error {
    Error::Arrow {
        what: "Spark batch",
        source: e,
    }
}

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Milliseconds to microseconds; an overflow is an error (as pyarrow's safe cast).
fn to_micros(ms: &[i64], column: &str) -> Result<ArrayRef> {
    let us = ms
        .iter()
        .map(|&v| v.checked_mul(1000))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            Error::Invalid(format!(
                "column {column:?}: a millisecond timestamp does not fit in microseconds"
            ))
        })?;
    Ok(Arc::new(
        TimestampMicrosecondArray::new(ScalarBuffer::from(us), None).with_timezone("UTC"),
    ))
}

/// `n` copies of `s` as a string column.
fn repeated(s: &str, n: usize) -> Result<ArrayRef> {
    let len = s.len();
    if len.saturating_mul(n) > MAX_COLUMN_BYTES {
        return Err(Error::Invalid("the store column would exceed 2 GiB".into()));
    }
    let offsets: Vec<i32> = (0..=n)
        .map(|i| i32::try_from(i * len).unwrap_or(i32::MAX))
        .collect();
    let data = s.as_bytes().repeat(n);
    Ok(Arc::new(
        StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(data),
            None,
        )
        .map_err(arrow_err)?,
    ))
}

/// Where a lean column's values come from.
#[derive(Debug, Clone, Copy)]
enum Field {
    Topic,
    QueueId,
    QueueOffset,
    CommitlogOffset,
    StoreSize,
    Body,
    BodyCrc,
    Flag,
    SysFlag,
    BornTimestamp,
    StoreTimestamp,
    ReconsumeTimes,
    PreparedTransactionOffset,
    Store,
}

impl Field {
    /// The column `name` if the lean builder can fill it with its default Spark type.
    fn of(name: &str, t: &DataType) -> Option<Field> {
        let f = match name {
            "topic" => Field::Topic,
            "queue_id" => Field::QueueId,
            "queue_offset" => Field::QueueOffset,
            "commitlog_offset" => Field::CommitlogOffset,
            "store_size" => Field::StoreSize,
            "body" => Field::Body,
            "body_crc" => Field::BodyCrc,
            "flag" => Field::Flag,
            "sys_flag" => Field::SysFlag,
            "born_timestamp" => Field::BornTimestamp,
            "store_timestamp" => Field::StoreTimestamp,
            "reconsume_times" => Field::ReconsumeTimes,
            "prepared_transaction_offset" => Field::PreparedTransactionOffset,
            "store" => Field::Store,
            _ => return None,
        };
        (f.data_type() == *t).then_some(f)
    }

    fn data_type(self) -> DataType {
        match self {
            Field::Topic | Field::Store => DataType::Utf8,
            Field::Body => DataType::Binary,
            Field::QueueId
            | Field::StoreSize
            | Field::BodyCrc
            | Field::Flag
            | Field::SysFlag
            | Field::ReconsumeTimes => DataType::Int32,
            Field::QueueOffset | Field::CommitlogOffset | Field::PreparedTransactionOffset => {
                DataType::Int64
            }
            Field::BornTimestamp | Field::StoreTimestamp => utc_micros(),
        }
    }
}

/// One lean column being built.
#[derive(Debug)]
enum Values {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bytes(Vec<i32>, Vec<u8>),
    Store,
}

/// The requested columns, each filled straight from the record view (no properties parsed).
#[derive(Debug)]
struct LeanColumns {
    cols: Vec<(Field, Values)>,
    rows: usize,
    /// Bytes taken by the variable-length columns so far.
    bytes: usize,
}

impl LeanColumns {
    fn new(fields: &[Field], rows_hint: usize) -> Self {
        let rows = rows_hint.min(1 << 16);
        let cols = fields
            .iter()
            .map(|&f| {
                let v = match f.data_type() {
                    DataType::Int32 => Values::I32(Vec::with_capacity(rows)),
                    DataType::Utf8 | DataType::Binary if !matches!(f, Field::Store) => {
                        let mut offsets = Vec::with_capacity(rows + 1);
                        offsets.push(0);
                        Values::Bytes(offsets, Vec::new())
                    }
                    DataType::Utf8 => Values::Store,
                    _ => Values::I64(Vec::with_capacity(rows)),
                };
                (f, v)
            })
            .collect();
        LeanColumns {
            cols,
            rows: 0,
            bytes: 0,
        }
    }

    /// Appends one record; `false` (nothing appended) if a column would pass Arrow's 2 GiB.
    fn push(&mut self, v: &RecordView<'_>) -> bool {
        let need = v.body.len() + v.topic.len();
        if self.rows > 0 && self.bytes.saturating_add(need) > MAX_COLUMN_BYTES {
            return false;
        }
        self.bytes = self.bytes.saturating_add(need);
        let first = self.rows == 0;
        for (f, vals) in &mut self.cols {
            match vals {
                Values::I32(out) => out.push(match f {
                    Field::QueueId => v.queue_id,
                    Field::StoreSize => v.total_size,
                    Field::BodyCrc => v.body_crc,
                    Field::Flag => v.flag,
                    Field::SysFlag => v.sys_flag,
                    _ => v.reconsume_times,
                }),
                Values::I64(out) => out.push(match f {
                    Field::QueueOffset => v.queue_offset,
                    Field::CommitlogOffset => v.physical_offset,
                    Field::PreparedTransactionOffset => v.prepared_transaction_offset,
                    Field::BornTimestamp => v.born_timestamp,
                    _ => v.store_timestamp,
                }),
                Values::Bytes(offsets, data) => {
                    let b = match f {
                        Field::Body => v.body,
                        _ => v.topic.as_bytes(),
                    };
                    if first {
                        // Reserved once at the size of a full batch of records like this one:
                        // untouched reserved memory costs nothing, a regrowth copies.
                        data.reserve(
                            offsets
                                .capacity()
                                .saturating_mul(b.len())
                                .min(MAX_COLUMN_BYTES),
                        );
                    }
                    data.extend_from_slice(b);
                    offsets.push(i32::try_from(data.len()).unwrap_or(i32::MAX));
                }
                Values::Store => {}
            }
        }
        self.rows += 1;
        true
    }

    fn into_batch(self, schema: SchemaRef, store: &str) -> Result<RecordBatch> {
        let n = self.rows;
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.cols.len());
        for (f, vals) in self.cols {
            arrays.push(match vals {
                Values::I32(v) => Arc::new(Int32Array::new(ScalarBuffer::from(v), None)),
                Values::I64(v) if matches!(f, Field::BornTimestamp | Field::StoreTimestamp) => {
                    to_micros(
                        &v,
                        if matches!(f, Field::BornTimestamp) {
                            "born_timestamp"
                        } else {
                            "store_timestamp"
                        },
                    )?
                }
                Values::I64(v) => Arc::new(Int64Array::new(ScalarBuffer::from(v), None)),
                Values::Bytes(offsets, data) => {
                    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                    let data = Buffer::from_vec(data);
                    if matches!(f, Field::Body) {
                        Arc::new(BinaryArray::try_new(offsets, data, None).map_err(arrow_err)?)
                    } else {
                        Arc::new(StringArray::try_new(offsets, data, None).map_err(arrow_err)?)
                    }
                }
                Values::Store => repeated(store, n)?,
            });
        }
        RecordBatch::try_new_with_options(
            schema,
            arrays,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(arrow_err)
    }
}

/// The lean fields for `schema`, or `None` if a column needs the full message batch.
fn lean_fields(schema: &SchemaRef) -> Option<Vec<Field>> {
    schema
        .fields()
        .iter()
        .map(|f| Field::of(f.name(), f.data_type()))
        .collect()
}

/// Conforms a message batch (`rocketstore.MESSAGE_SCHEMA`) to `schema` (see the module docs).
pub fn conform(batch: &RecordBatch, schema: SchemaRef, store: &str) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let name = f.name();
        if name == "store" {
            arrays.push(repeated(store, n)?);
            continue;
        }
        let col = batch
            .column_by_name(name)
            .ok_or_else(|| Error::Invalid(format!("the message batch has no column {name:?}")))?;
        let col = match (col.data_type(), f.data_type()) {
            (
                DataType::Timestamp(TimeUnit::Millisecond, _),
                DataType::Timestamp(TimeUnit::Microsecond, _),
            ) => {
                let ms = col.as_primitive::<TimestampMillisecondType>();
                let us = to_micros(ms.values(), name)?;
                if *us.data_type() != *f.data_type() {
                    return Err(Error::Invalid(format!(
                        "column {name:?}: cannot conform {} to {}",
                        col.data_type(),
                        f.data_type()
                    )));
                }
                us
            }
            _ => Arc::clone(col),
        };
        arrays.push(col);
    }
    RecordBatch::try_new_with_options(
        schema,
        arrays,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(arrow_err)
}

/// Records of `range` = `(from_offset, end_offset)` in commit log order as a batch of the
/// Spark schema `schema`, with `label` as its `store` column. Returns `(batch, next_offset)`
/// like `MessageStore.read_arrow`.
pub fn read_log(
    store: &Store,
    range: (u64, u64),
    max_messages: usize,
    verify_crc: bool,
    schema: SchemaRef,
    label: &str,
) -> Result<(RecordBatch, u64)> {
    let (from_offset, end_offset) = range;
    if let Some(fields) = lean_fields(&schema) {
        let mut cols = LeanColumns::new(&fields, max_messages);
        let next = store.visit_records(from_offset, end_offset, max_messages, verify_crc, |v| {
            cols.push(v)
        })?;
        Ok((cols.into_batch(schema, label)?, next))
    } else {
        let (cols, next) = crate::arrow_read::read_log(
            store,
            from_offset,
            end_offset,
            max_messages,
            crate::arrow_read::DEFAULT_MAX_BATCH_BYTES,
            verify_crc,
        )?;
        Ok((conform(&cols.into_batch()?, schema, label)?, next))
    }
}

/// The Arrow form of the Spark schema of `table=messages` for the columns `names`, in that
/// order (the full schema is `rocketstore.spark`'s `MESSAGE_SCHEMA`: the message columns with
/// timestamps in microseconds (UTC), then `store`). An unknown name is an error naming the
/// columns there are.
pub fn spark_schema(names: &[&str]) -> Result<SchemaRef> {
    let message = crate::arrow_read::message_schema();
    let mut fields = Vec::with_capacity(names.len());
    for &name in names {
        let field = match message.field_with_name(name) {
            Ok(f) => match f.data_type() {
                DataType::Timestamp(_, _) => arrow_schema::Field::new(name, utc_micros(), true),
                t => arrow_schema::Field::new(name, t.clone(), true),
            },
            Err(_) if name == "store" => arrow_schema::Field::new(name, DataType::Utf8, true),
            Err(_) => {
                let known: Vec<&str> = message
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .chain(["store"])
                    .collect();
                return Err(Error::Invalid(format!(
                    "column {name:?} is not in the rocketstore messages table (columns: {})",
                    known.join(", ")
                )));
            }
        };
        fields.push(field);
    }
    Ok(Arc::new(arrow_schema::Schema::new(fields)))
}
