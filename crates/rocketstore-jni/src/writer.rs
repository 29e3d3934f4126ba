//! The native side of the JVM batch writer (`rocketstore.spark.NativeWriter`): one
//! [`TaskWriter`] per Spark write task, fed Arrow IPC stream bytes.
//!
//! * `open(path, liveMarker, jobId, keys, values, selector, queueNums, partition, taskAttempt)`
//!   makes a task writer (the store is created at the first row) and returns its handle;
//! * `put(handle, bytes, length)` decodes the IPC stream (schema, batches, end of stream; the
//!   buffers are sliced from one copy of the Java bytes, not copied again, into a buffer the
//!   handle keeps from call to call) and puts each batch ([`TaskWriter::put`]: queue selection,
//!   body digest, `put_batch`, status check);
//! * `columns(handle, names, kinds, nullable, timeZone)` declares the flat columns (string,
//!   binary, int, long, timestamp) of `putColumns(handle, rows, values, offsets, valid)`,
//!   which copies each column's Java arrays once into vectors the handle keeps from call to
//!   call ([`put_columns`]), builds the Arrow batch the IPC stream of the same rows decodes to
//!   (names, types, nullability, values) and puts it as `put` does;
//! * `finish(handle)` flushes and closes the store and returns the statistics as JSON
//!   ([`rocketstore_arrow::spark_write::TaskStats::to_json`]), or null if the task had no rows;
//! * `abort(handle)` closes the store and removes the task's directory;
//! * `close(handle)` forgets the handle (aborting a writer that neither finished nor aborted).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_ipc::reader::StreamDecoder;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rocketstore::bulk::QueueSelector;
use rocketstore_arrow::spark_write::{self, TaskSpec, TaskWriter};

use crate::{config_of, Failure};

/// A task writer and whether it is done (finished or aborted).
#[derive(Debug)]
struct Entry {
    writer: TaskWriter,
    done: bool,
    /// The bytes of the last `put`, kept for the next one: a batch is copied from the Java
    /// array into memory already in use (a fresh multi-MiB buffer per batch would be zeroed,
    /// then first-touched page by page).
    scratch: Vec<i8>,
    /// The columns of `putColumns`, once declared.
    declared: Option<Declared>,
    /// The vectors of the last `putColumns`' columns, kept for the next one.
    spare: Vec<Column>,
}

type Shared = Arc<Mutex<Entry>>;

static WRITERS: Mutex<Option<HashMap<i64, Shared>>> = Mutex::new(None);
static NEXT_HANDLE: AtomicI64 = AtomicI64::new(1);

fn with_writers<T>(f: impl FnOnce(&mut HashMap<i64, Shared>) -> T) -> T {
    let mut guard = WRITERS.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

fn get(handle: i64) -> Result<Shared, Failure> {
    with_writers(|m| m.get(&handle).cloned())
        .ok_or_else(|| Failure(format!("no open task writer with handle {handle}")))
}

/// What `open` is given besides the configuration pairs.
#[derive(Debug, Clone)]
pub struct OpenArgs {
    /// The task's store directory.
    pub path: String,
    /// The job's live marker (empty: none).
    pub live_marker: String,
    /// The job id.
    pub job_id: String,
    /// `hash` or `round_robin`.
    pub selector: String,
    /// Queues per topic.
    pub queue_nums: i32,
    /// The Spark partition.
    pub partition: i64,
    /// The task attempt id.
    pub task_attempt: i64,
}

/// Makes a task writer; returns its handle.
pub fn open(args: OpenArgs, pairs: &[(String, String)]) -> Result<i64, Failure> {
    // The compression options travel with the configuration pairs; the rest configures the store.
    let (compress, pairs): (Vec<_>, Vec<_>) = pairs.iter().cloned().partition(|(k, _)| {
        spark_write::COMPRESS_OPTIONS
            .iter()
            .any(|o| o.eq_ignore_ascii_case(k))
    });
    let compress = spark_write::compress_options(&compress).map_err(Failure)?;
    let pairs = pairs.as_slice();
    let config = config_of(pairs)?;
    let selector = match args.selector.as_str() {
        "hash" => QueueSelector::Hash,
        "round_robin" => QueueSelector::RoundRobin,
        other => {
            return Err(Failure(format!(
                "queueSelector must be 'hash' or 'round_robin', not {other:?}"
            )))
        }
    };
    let queue_nums = u32::try_from(args.queue_nums)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            Failure(format!(
                "queueNums must be at least 1, not {}",
                args.queue_nums
            ))
        })?;
    let spec = TaskSpec {
        job_id: args.job_id,
        path: PathBuf::from(args.path),
        live_marker: (!args.live_marker.is_empty()).then(|| PathBuf::from(args.live_marker)),
        config,
        config_keys: pairs.iter().map(|(k, _)| k.clone()).collect(),
        selector,
        queue_nums,
        partition: args.partition,
        task_attempt: args.task_attempt,
        compress,
    };
    let entry = Entry {
        writer: TaskWriter::new(spec),
        done: false,
        scratch: Vec::new(),
        declared: None,
        spare: Vec::new(),
    };
    let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    with_writers(|m| m.insert(handle, Arc::new(Mutex::new(entry))));
    Ok(handle)
}

/// Puts every batch of an Arrow IPC stream of `len` bytes, which `fill` copies into the
/// handle's buffer (JNI's `GetByteArrayRegion`; the buffer's bytes before the call are
/// unspecified).
pub fn put_with(
    handle: i64,
    len: usize,
    fill: impl FnOnce(&mut [i8]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let shared = get(handle)?;
    let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
    if entry.done {
        return Err(Failure(format!("task writer {handle} has already ended")));
    }
    let mut scratch = std::mem::take(&mut entry.scratch);
    // Only a buffer that grows is zeroed (its new part).
    scratch.resize(len, 0);
    fill(&mut scratch)?;
    let whole = Buffer::from_vec(scratch);
    let result = put_stream(&mut entry.writer, whole.clone());
    // Every slice of the stream is gone with the decoder and its batches: the buffer is the
    // handle's again (else the next call allocates one).
    if let Ok(v) = whole.into_vec::<i8>() {
        entry.scratch = v;
    }
    result
}

/// The kind of a column `putColumns` hands over (`JvmColumns.KIND_*` on the Java side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string: UTF-8 values and their ends (Arrow `Utf8`).
    String,
    /// A binary: values and their ends (Arrow `Binary`).
    Binary,
    /// An `int` (Arrow `Int32`).
    Int,
    /// A `long` (Arrow `Int64`).
    Long,
    /// Spark's `TimestampType`: microseconds (Arrow `Timestamp(µs, session time zone)`).
    Timestamp,
    /// Spark's `TimestampNTZType`: microseconds (Arrow `Timestamp(µs)`).
    TimestampNtz,
}

impl Kind {
    /// The kind of Java's code.
    pub fn of(code: i32) -> Result<Self, Failure> {
        Ok(match code {
            0 => Kind::String,
            1 => Kind::Binary,
            2 => Kind::Int,
            3 => Kind::Long,
            4 => Kind::Timestamp,
            5 => Kind::TimestampNtz,
            other => return Err(Failure(format!("unknown column kind {other}"))),
        })
    }
}

/// The columns `putColumns` hands over: the Arrow schema of the batches built from them and
/// each column's kind.
#[derive(Debug)]
struct Declared {
    schema: SchemaRef,
    kinds: Vec<Kind>,
}

/// Declares the columns of the batches [`put_columns`] puts: `names`, `kinds` and
/// `nullable` per column, as the Arrow fields Spark's `ArrowUtils.toArrowSchema` makes of them
/// (`time_zone` is a [`Kind::Timestamp`]'s), so each batch is the one the IPC path decodes.
pub fn declare(
    handle: i64,
    names: Vec<String>,
    kinds: Vec<Kind>,
    nullable: &[bool],
    time_zone: &str,
) -> Result<(), Failure> {
    if names.len() != kinds.len() || names.len() != nullable.len() {
        return Err(Failure(
            "column names, kinds and nullability differ in length".into(),
        ));
    }
    let fields: Vec<Field> = names
        .into_iter()
        .zip(&kinds)
        .zip(nullable)
        .map(|((name, kind), &nullable)| {
            let t = match kind {
                Kind::String => DataType::Utf8,
                Kind::Binary => DataType::Binary,
                Kind::Int => DataType::Int32,
                Kind::Long => DataType::Int64,
                Kind::Timestamp => {
                    DataType::Timestamp(TimeUnit::Microsecond, Some(time_zone.into()))
                }
                Kind::TimestampNtz => DataType::Timestamp(TimeUnit::Microsecond, None),
            };
            Field::new(name, t, nullable)
        })
        .collect();
    let shared = get(handle)?;
    let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
    entry.declared = Some(Declared {
        schema: Arc::new(Schema::new(fields)),
        kinds,
    });
    Ok(())
}

/// The vectors of one column of a batch, as [`put_columns`] hands them to its reader: kept
/// from batch to batch (a fresh multi-MiB vector per batch would be zeroed, then
/// first-touched page by page).
#[derive(Debug, Default)]
pub struct Column {
    /// String and binary values, concatenated.
    bytes: Vec<i8>,
    /// The ends of string and binary values in `bytes`, after a leading 0 (`rows + 1`).
    offsets: Vec<i32>,
    /// `int` values.
    ints: Vec<i32>,
    /// `long` values.
    longs: Vec<i64>,
    /// 1 per valid row, 0 per null.
    valid: Vec<i8>,
    /// Whether `valid` holds this batch's validity (else the column has no nulls).
    has_nulls: bool,
}

/// `v` with at least `n` elements (only what it grows by is zeroed), its first `n`.
fn sized<T: Default + Clone>(v: &mut Vec<T>, n: usize) -> &mut [T] {
    if v.len() < n {
        v.resize(n, T::default());
    }
    &mut v[..n]
}

impl Column {
    /// Room for `n` bytes of values.
    pub fn bytes(&mut self, n: usize) -> &mut [i8] {
        sized(&mut self.bytes, n)
    }

    /// Room for `n` offsets.
    pub fn offsets(&mut self, n: usize) -> &mut [i32] {
        sized(&mut self.offsets, n)
    }

    /// Room for `n` ints.
    pub fn ints(&mut self, n: usize) -> &mut [i32] {
        sized(&mut self.ints, n)
    }

    /// Room for `n` longs.
    pub fn longs(&mut self, n: usize) -> &mut [i64] {
        sized(&mut self.longs, n)
    }

    /// Room for the validity of `n` rows (the column has nulls in this batch).
    pub fn valid(&mut self, n: usize) -> &mut [i8] {
        self.has_nulls = true;
        sized(&mut self.valid, n)
    }
}

/// What [`array_of`] lent a batch's array, to take back once the batch is gone.
#[derive(Debug)]
enum Lent {
    Bytes(Buffer),
    Offsets(Buffer),
    Ints(Buffer),
    Longs(Buffer),
}

/// Column `c` (`column`, of `kind`) of `rows` rows as an Arrow array of the field's type; the vectors it uses are
/// lent to the array and listed in `lent`.
fn array_of(
    kind: Kind,
    rows: usize,
    column: &mut Column,
    field: &Field,
    lent: &mut Vec<(usize, Lent)>,
    c: usize,
) -> Result<ArrayRef, Failure> {
    let bad = |e: arrow_schema::ArrowError| {
        Failure(format!("column {:?}: bad values: {e}", field.name()))
    };
    let nulls = column.has_nulls.then(|| {
        let valid = &column.valid;
        NullBuffer::new(BooleanBuffer::collect_bool(rows, |i| {
            valid.get(i).is_some_and(|v| *v != 0)
        }))
    });
    column.has_nulls = false;
    Ok(match kind {
        Kind::String | Kind::Binary => {
            let mut offsets = std::mem::take(&mut column.offsets);
            offsets.truncate(rows + 1);
            let ok = offsets.len() == rows + 1
                && offsets.first() == Some(&0)
                && offsets.windows(2).all(|w| w[0] <= w[1]);
            let end = offsets.last().copied().unwrap_or(0);
            let mut bytes = std::mem::take(&mut column.bytes);
            bytes.truncate(usize::try_from(end).unwrap_or(0));
            let offsets = Buffer::from_vec(offsets);
            let values = Buffer::from_vec(bytes);
            lent.push((c, Lent::Offsets(offsets.clone())));
            lent.push((c, Lent::Bytes(values.clone())));
            if !ok {
                return Err(Failure(format!(
                    "column {:?}: bad value offsets",
                    field.name()
                )));
            }
            let offsets = OffsetBuffer::new(ScalarBuffer::new(offsets, 0, rows + 1));
            if kind == Kind::String {
                Arc::new(StringArray::try_new(offsets, values, nulls).map_err(bad)?)
            } else {
                Arc::new(BinaryArray::try_new(offsets, values, nulls).map_err(bad)?)
            }
        }
        Kind::Int => {
            let mut ints = std::mem::take(&mut column.ints);
            ints.truncate(rows);
            if ints.len() != rows {
                column.ints = ints;
                return Err(Failure(format!(
                    "column {:?}: too few values",
                    field.name()
                )));
            }
            let buffer = Buffer::from_vec(ints);
            lent.push((c, Lent::Ints(buffer.clone())));
            let values = ScalarBuffer::new(buffer, 0, rows);
            Arc::new(Int32Array::try_new(values, nulls).map_err(bad)?)
        }
        Kind::Long | Kind::Timestamp | Kind::TimestampNtz => {
            let mut longs = std::mem::take(&mut column.longs);
            longs.truncate(rows);
            if longs.len() != rows {
                column.longs = longs;
                return Err(Failure(format!(
                    "column {:?}: too few values",
                    field.name()
                )));
            }
            let buffer = Buffer::from_vec(longs);
            lent.push((c, Lent::Longs(buffer.clone())));
            let values = ScalarBuffer::new(buffer, 0, rows);
            match field.data_type() {
                DataType::Timestamp(_, tz) => Arc::new(
                    TimestampMicrosecondArray::try_new(values, nulls)
                        .map_err(bad)?
                        .with_timezone_opt(tz.clone()),
                ),
                _ => Arc::new(Int64Array::try_new(values, nulls).map_err(bad)?),
            }
        }
    })
}

/// Puts one batch of `rows` rows of the [`declare`]d columns: `read(c, kind, column)` fills
/// column `c`'s vectors ([`Column::bytes`] and [`Column::offsets`], [`Column::ints`] or
/// [`Column::longs`], and [`Column::valid`] if it has nulls).
pub fn put_columns(
    handle: i64,
    rows: usize,
    mut read: impl FnMut(usize, Kind, &mut Column) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let shared = get(handle)?;
    let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
    if entry.done {
        return Err(Failure(format!("task writer {handle} has already ended")));
    }
    let Some(declared) = entry.declared.as_ref() else {
        return Err(Failure(format!(
            "task writer {handle}: no columns were declared"
        )));
    };
    let (schema, kinds) = (declared.schema.clone(), declared.kinds.clone());
    let mut spare = std::mem::take(&mut entry.spare);
    spare.resize_with(kinds.len(), Column::default);
    let mut lent = Vec::with_capacity(2 * kinds.len());
    let result = (|| {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(kinds.len());
        for (c, (&kind, column)) in kinds.iter().zip(spare.iter_mut()).enumerate() {
            read(c, kind, column)?;
            arrays.push(array_of(kind, rows, column, schema.field(c), &mut lent, c)?);
        }
        let batch = RecordBatch::try_new(schema, arrays)
            .map_err(|e| Failure(format!("cannot build the batch: {e}")))?;
        entry.writer.put(&batch).map_err(|e| Failure::of(&e))
    })();
    // The batch and its arrays are gone: the vectors are the handle's again.
    for (c, lent) in lent {
        let Some(column) = spare.get_mut(c) else {
            continue;
        };
        match lent {
            Lent::Bytes(b) => column.bytes = b.into_vec().unwrap_or_default(),
            Lent::Offsets(b) => column.offsets = b.into_vec().unwrap_or_default(),
            Lent::Ints(b) => column.ints = b.into_vec().unwrap_or_default(),
            Lent::Longs(b) => column.longs = b.into_vec().unwrap_or_default(),
        }
    }
    entry.spare = spare;
    result
}

/// [`put_with`] of `bytes`.
#[cfg(test)]
pub fn put(handle: i64, bytes: &[u8]) -> Result<(), Failure> {
    put_with(handle, bytes.len(), |dst| {
        for (d, &b) in dst.iter_mut().zip(bytes) {
            *d = i8::from_ne_bytes([b]);
        }
        Ok(())
    })
}

/// Decodes `buffer` (an Arrow IPC stream: schema, batches, end) and puts every batch.
fn put_stream(writer: &mut TaskWriter, mut buffer: Buffer) -> Result<(), Failure> {
    let ipc = |e: arrow_schema::ArrowError| Failure(format!("cannot read the Arrow batch: {e}"));
    let mut decoder = StreamDecoder::new();
    while !buffer.is_empty() {
        if let Some(batch) = decoder.decode(&mut buffer).map_err(ipc)? {
            writer.put(&batch).map_err(|e| Failure::of(&e))?;
        }
    }
    decoder.finish().map_err(ipc)
}

/// Flushes and closes the task's store; the statistics as JSON, `None` without rows.
pub fn finish(handle: i64) -> Result<Option<String>, Failure> {
    let shared = get(handle)?;
    let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
    if entry.done {
        return Err(Failure(format!("task writer {handle} has already ended")));
    }
    entry.done = true;
    match entry.writer.finish() {
        Ok(stats) => Ok(stats.map(|s| s.to_json())),
        Err(e) => {
            entry.writer.abort();
            Err(Failure::of(&e))
        }
    }
}

/// Removes the task's store (nothing if the handle is unknown).
pub fn abort(handle: i64) {
    if let Ok(shared) = get(handle) {
        let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
        entry.done = true;
        entry.writer.abort();
    }
}

/// Forgets the handle; a writer neither finished nor aborted is aborted.
pub fn close(handle: i64) {
    let shared = with_writers(|m| m.remove(&handle));
    if let Some(shared) = shared {
        let mut entry = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if !entry.done {
            entry.done = true;
            entry.writer.abort();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, BinaryArray, Int32Array, RecordBatch, StringArray};
    use std::sync::Arc as StdArc;

    fn ipc(topics: &[&str], bodies: &[Option<&[u8]>]) -> Vec<u8> {
        let batch = RecordBatch::try_from_iter([
            (
                "topic",
                StdArc::new(StringArray::from(topics.to_vec())) as ArrayRef,
            ),
            (
                "body",
                StdArc::new(BinaryArray::from(bodies.to_vec())) as ArrayRef,
            ),
        ])
        .unwrap();
        crate::ipc_bytes(&batch).unwrap()
    }

    fn args(path: &std::path::Path) -> OpenArgs {
        OpenArgs {
            path: path.to_string_lossy().into_owned(),
            live_marker: String::new(),
            job_id: "j".into(),
            selector: "round_robin".into(),
            queue_nums: 4,
            partition: 1,
            task_attempt: 7,
        }
    }

    #[test]
    fn a_task_writes_a_store_and_reports_its_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_temporary/j/part-00001-7");
        let h = open(args(&path), &[]).unwrap();
        put(
            h,
            &ipc(&["T", "T", "U"], &[Some(b"a"), Some(b"b"), Some(b"c")]),
        )
        .unwrap();
        // The first put's buffer is kept and reused by the next (no allocation per batch).
        let kept = |h| {
            let e = get(h).unwrap();
            let e = e.lock().unwrap();
            (e.scratch.as_ptr(), e.scratch.capacity())
        };
        let (at, capacity) = kept(h);
        assert!(capacity > 0);
        put(h, &ipc(&["T"], &[Some(b"d")])).unwrap();
        assert_eq!(kept(h).0, at, "a smaller batch reuses the buffer");
        let json = finish(h).unwrap().unwrap();
        close(h);
        assert!(json.starts_with("{\"messages\": 4, \"bytes\": "), "{json}");
        // Round robin from partition 1 over 4 queues: T gets queues 1, 2 and 0; U gets 3.
        assert!(
            json.contains("\"queues\": {\"T\": {\"0\": 1, \"1\": 1, \"2\": 1}, \"U\": {\"3\": 1}}"),
            "{json}"
        );
        let digest =
            rocketstore::bulk::body_digest([b"a", b"b", b"c", b"d"].iter().map(|b| Some(&b[..])));
        assert!(
            json.ends_with(&format!("\"body_digest\": \"{digest}\"}}")),
            "{json}"
        );
        assert!(path.join("commitlog").is_dir());
    }

    /// `put_columns` of flat columns as Java would fill them.
    fn put_flat(h: i64, topics: &[&str], bodies: &[Option<&[u8]>], queues: &[i32]) {
        put_columns(h, topics.len(), |c, kind, column| {
            let values: Vec<Option<&[u8]>> = match c {
                0 => topics.iter().map(|t| Some(t.as_bytes())).collect(),
                1 => bodies.to_vec(),
                _ => {
                    assert_eq!(kind, Kind::Int);
                    column.ints(queues.len()).copy_from_slice(queues);
                    return Ok(());
                }
            };
            let mut bytes = Vec::new();
            let mut ends = vec![0];
            for v in &values {
                bytes.extend(
                    v.unwrap_or_default()
                        .iter()
                        .map(|&b| i8::from_ne_bytes([b])),
                );
                ends.push(i32::try_from(bytes.len()).unwrap());
            }
            column.offsets(ends.len()).copy_from_slice(&ends);
            column.bytes(bytes.len()).copy_from_slice(&bytes);
            if values.iter().any(Option::is_none) {
                let valid: Vec<i8> = values.iter().map(|v| i8::from(v.is_some())).collect();
                column.valid(valid.len()).copy_from_slice(&valid);
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn column_arrays_write_what_the_ipc_stream_of_the_same_rows_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let topics = ["T", "U", "T"];
        let bodies: [Option<&[u8]>; 3] = [Some(b"one"), Some(b""), Some(b"three")];
        let ha = open(args(&a), &[]).unwrap();
        declare(
            ha,
            vec!["topic".into(), "body".into(), "queue_id".into()],
            vec![Kind::String, Kind::Binary, Kind::Int],
            &[false, true, true],
            "UTC",
        )
        .unwrap();
        put_flat(ha, &topics, &bodies, &[3, 1, 2]);
        // The vectors are the handle's again, for the next batch.
        let kept = |h| {
            let e = get(h).unwrap();
            let e = e.lock().unwrap();
            e.spare.get(1).map(|c| c.bytes.capacity())
        };
        assert!(kept(ha).unwrap() >= 8);
        put_flat(ha, &topics[..1], &bodies[..1], &[3]);
        let hb = open(args(&b), &[]).unwrap();
        let batch = RecordBatch::try_from_iter([
            (
                "topic",
                StdArc::new(StringArray::from(topics.to_vec())) as ArrayRef,
            ),
            (
                "body",
                StdArc::new(BinaryArray::from(bodies.to_vec())) as ArrayRef,
            ),
            (
                "queue_id",
                StdArc::new(Int32Array::from(vec![3, 1, 2])) as ArrayRef,
            ),
        ])
        .unwrap();
        put(hb, &crate::ipc_bytes(&batch).unwrap()).unwrap();
        put(hb, &crate::ipc_bytes(&batch.slice(0, 1)).unwrap()).unwrap();
        let (ja, jb) = (finish(ha).unwrap().unwrap(), finish(hb).unwrap().unwrap());
        close(ha);
        close(hb);
        assert_eq!(ja, jb);
        assert!(ja.starts_with("{\"messages\": 4, "), "{ja}");
    }

    #[test]
    fn a_null_body_in_column_arrays_fails_naming_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_temporary/j/part-00001-7");
        let h = open(args(&path), &[]).unwrap();
        assert!(
            put_columns(h, 1, |_, _, _| Ok(())).is_err(),
            "nothing declared"
        );
        declare(
            h,
            vec!["topic".into(), "body".into(), "queue_id".into()],
            vec![Kind::String, Kind::Binary, Kind::Int],
            &[false, true, true],
            "UTC",
        )
        .unwrap();
        put_flat(h, &["T", "T"], &[Some(b"a"), Some(b"b")], &[0, 1]);
        let Failure(msg) = put_columns(h, 2, |c, _, column| {
            if c == 1 {
                column.offsets(3).copy_from_slice(&[0, 1, 1]);
                column.bytes(1)[0] = 7;
                column.valid(2).copy_from_slice(&[1, 0]);
            } else if c == 0 {
                column.offsets(3).copy_from_slice(&[0, 1, 2]);
                column.bytes(2).copy_from_slice(&[84, 84]);
            } else {
                column.ints(2).copy_from_slice(&[0, 1]);
            }
            Ok(())
        })
        .unwrap_err();
        assert!(msg.contains("invalid body: message 1: is null"), "{msg}");
        assert!(
            msg.contains("Spark partition 1 (task attempt 7), rows 2..3"),
            "{msg}"
        );
        // Offsets that go backwards are an error, not a panic.
        let Failure(msg) = put_columns(h, 1, |_, _, column| {
            column.offsets(2).copy_from_slice(&[0, -1]);
            column.ints(1)[0] = 0;
            Ok(())
        })
        .unwrap_err();
        assert!(msg.contains("bad value offsets"), "{msg}");
        abort(h);
        close(h);
        assert!(!path.exists());
    }

    #[test]
    fn a_bad_row_fails_naming_it_and_abort_removes_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_temporary/j/part-00001-7");
        let h = open(args(&path), &[]).unwrap();
        put(h, &ipc(&["T", "T"], &[Some(b"a"), Some(b"b")])).unwrap();
        let Failure(msg) = put(h, &ipc(&["T", "T"], &[Some(b"c"), None])).unwrap_err();
        assert!(msg.contains("invalid body: message 1: is null"), "{msg}");
        assert!(
            msg.contains("Spark partition 1 (task attempt 7), rows 2..3"),
            "{msg}"
        );
        abort(h);
        close(h);
        assert!(!path.exists());
        assert!(!dir.path().join("_temporary").exists());
    }

    #[test]
    fn a_task_without_rows_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_temporary/j/part-00000-1");
        let h = open(args(&path), &[]).unwrap();
        assert_eq!(finish(h).unwrap(), None);
        close(h);
        assert!(!path.exists());
        assert!(put(h, &[]).is_err());
    }

    #[test]
    fn an_ended_job_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_temporary/j/part-00000-1");
        let mut a = args(&path);
        a.live_marker = dir
            .path()
            .join("_temporary/j/_job_live")
            .to_string_lossy()
            .into();
        let h = open(a, &[]).unwrap();
        let Failure(msg) = put(h, &ipc(&["T"], &[Some(b"a")])).unwrap_err();
        assert!(msg.contains("has already ended"), "{msg}");
        close(h);
        assert!(!path.exists());
    }
}
