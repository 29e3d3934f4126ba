//! `librocketstore_jni`: the native side of rocketstore's JVM Spark reader
//! (`jvm/src/main/java/rocketstore/spark/`, class `rocketstore.spark.NativeReader`).
//!
//! The JVM reader plans partitions (commit log files of the stores under a root) in Java and
//! reads each one through three calls:
//!
//! * `open(path, keys, values)` opens a store read-only with the configuration fields given
//!   (`StoreConfig::set` by name, the value parsed by the field's kind) and returns a handle;
//! * `readLog(handle, from, end, max, verifyCrc, columns, label, next)` builds the records of
//!   `[from, end)` of the commit log as one Arrow batch of the requested Spark columns only
//!   ([`rocketstore_arrow::spark_read::read_log`], the same batches the Python reader gets) and
//!   returns it as Arrow IPC stream bytes (schema, one batch, end of stream); `next[0]` is
//!   where to continue;
//! * `close(handle)` drops the store.
//!
//! The JVM batch writer (`rocketstore.spark.NativeWriter`, module `writer`) runs each Spark write
//! task through `rocketstore_arrow::spark_write::TaskWriter` (the same preparation and
//! `put_batch` as the Python writer's), fed Arrow IPC stream bytes or, for flat columns, plain
//! Java arrays per column (each checked to be of its declared array type before a JNI region
//! call reads it).
//!
//! Record decoding is the engine's: this crate only converts. The boundary is Arrow's IPC
//! stream format (one copy into a Java `byte[]`; Java reads it with Arrow's
//! `ArrowStreamReader`), so no buffer layout is described by hand on either side.
//!
//! Invariants:
//! - Handles are keys of a process-wide table of `Arc<Store>` (no pointer crosses JNI); an
//!   unknown or closed handle is an error, never undefined behaviour.
//! - Every failure becomes a `rocketstore.spark.RocketStoreException` carrying the engine's
//!   message with its source chain. No panic crosses into the JVM: each export runs its body
//!   under `catch_unwind` and turns a panic into that exception.
//! - `unsafe`: this crate has no `unsafe` block (the `jni` crate's safe API is enough). Its only
//!   exception to the engine's rule that `unsafe` lives in `mmap.rs` is the `#[no_mangle]`
//!   attribute on the JNI exports, which the JVM needs to find them by name.

mod writer;

pub use writer::OpenArgs;

use std::collections::HashMap;
use std::error::Error as StdError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::RecordBatch;
use arrow_ipc::writer::StreamWriter;
use jni::objects::{
    JBooleanArray, JByteArray, JClass, JIntArray, JLongArray, JObject, JObjectArray, JString,
};
use jni::sys::{jboolean, jbyteArray, jint, jlong, jstring, JNI_FALSE};
use jni::JNIEnv;
use rocketstore::{ConfigValue, FieldKind, Store, StoreConfig};

/// The Java exception class every failure is thrown as.
const EXCEPTION: &str = "rocketstore/spark/RocketStoreException";

/// A failure of a call, as the message of the Java exception.
#[derive(Debug)]
pub struct Failure(pub String);

impl Failure {
    fn of(e: &(dyn StdError + 'static)) -> Self {
        Failure(rocketstore::message_with_sources(e))
    }
}

/// The open stores, by handle.
static STORES: Mutex<Option<HashMap<i64, Arc<Store>>>> = Mutex::new(None);
static NEXT_HANDLE: AtomicI64 = AtomicI64::new(1);

fn with_stores<T>(f: impl FnOnce(&mut HashMap<i64, Arc<Store>>) -> T) -> T {
    let mut guard = STORES.lock().unwrap_or_else(PoisonError::into_inner);
    f(guard.get_or_insert_with(HashMap::new))
}

/// The configuration `pairs` name: each value is parsed by its field's kind (an integer, a
/// boolean `true`/`false`, or a string).
pub fn config_of(pairs: &[(String, String)]) -> Result<StoreConfig, Failure> {
    let fields = StoreConfig::fields();
    let mut config = StoreConfig::default();
    for (key, value) in pairs {
        let kind = fields
            .iter()
            .find(|f| f.name == key)
            .map(|f| f.kind)
            .ok_or_else(|| Failure(format!("unknown store configuration field {key:?}")))?;
        let v = match kind {
            FieldKind::Int { .. } => ConfigValue::Int(value.trim().parse().map_err(|_| {
                Failure(format!(
                    "store configuration {key:?} must be an integer, not {value:?}"
                ))
            })?),
            FieldKind::Bool => match value.trim().to_ascii_lowercase().as_str() {
                "true" => ConfigValue::Bool(true),
                "false" => ConfigValue::Bool(false),
                _ => {
                    return Err(Failure(format!(
                        "store configuration {key:?} must be true or false, not {value:?}"
                    )))
                }
            },
            _ => ConfigValue::Str(value.clone()),
        };
        config.set(key, v).map_err(|e| Failure::of(&e))?;
    }
    Ok(config)
}

/// Opens the store at `path` read-only; returns its handle.
pub fn open(path: &str, pairs: &[(String, String)]) -> Result<i64, Failure> {
    let config = config_of(pairs)?;
    let store = Store::open_read_only(path, config).map_err(|e| Failure::of(&e))?;
    let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    with_stores(|m| m.insert(handle, Arc::new(store)));
    Ok(handle)
}

/// Closes the store of `handle` (nothing if it is not open).
pub fn close(handle: i64) {
    // Dropped outside the table's lock: closing unmaps files.
    let store = with_stores(|m| m.remove(&handle));
    drop(store);
}

/// `batch` as Arrow IPC stream bytes: the schema, the batch, the end-of-stream marker.
pub fn ipc_bytes(batch: &RecordBatch) -> Result<Vec<u8>, Failure> {
    let ipc = |e: arrow_schema::ArrowError| Failure(format!("cannot write the Arrow batch: {e}"));
    let mut w = StreamWriter::try_new(Vec::new(), batch.schema_ref()).map_err(ipc)?;
    w.write(batch).map_err(ipc)?;
    w.finish().map_err(ipc)?;
    w.into_inner().map_err(ipc)
}

/// One read of the JVM reader: see the crate docs. Returns `(IPC bytes, next offset)`.
pub fn read_log(
    handle: i64,
    range: (u64, u64),
    max_messages: usize,
    verify_crc: bool,
    columns: &[String],
    label: &str,
) -> Result<(Vec<u8>, u64), Failure> {
    let store = with_stores(|m| m.get(&handle).cloned())
        .ok_or_else(|| Failure(format!("no open store with handle {handle}")))?;
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let schema =
        rocketstore_arrow::spark_read::spark_schema(&names).map_err(|e| Failure::of(&e))?;
    let (batch, next) = rocketstore_arrow::spark_read::read_log(
        &store,
        range,
        max_messages.max(1),
        verify_crc,
        schema,
        label,
    )
    .map_err(|e| Failure::of(&e))?;
    Ok((ipc_bytes(&batch)?, next))
}

// ---- JNI -------------------------------------------------------------------------------

/// Runs `body`; a failure or a panic is thrown as [`EXCEPTION`] and `fallback` returned.
fn guarded<'l, T>(
    env: &mut JNIEnv<'l>,
    fallback: T,
    body: impl FnOnce(&mut JNIEnv<'l>) -> Result<T, Failure>,
) -> T {
    let result = catch_unwind(AssertUnwindSafe(|| body(env)));
    let msg = match result {
        Ok(Ok(v)) => return v,
        Ok(Err(Failure(msg))) => msg,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            format!("rocketstore native library panicked (a bug): {what}")
        }
    };
    // An exception may already be pending (a failed JNI call); keep that one.
    if !env.exception_check().unwrap_or(true) {
        let _ = env.throw_new(EXCEPTION, msg);
    }
    fallback
}

fn jni_err(e: jni::errors::Error) -> Failure {
    Failure(format!("JNI call failed: {e}"))
}

fn string(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<String, Failure> {
    Ok(env.get_string(s).map_err(jni_err)?.into())
}

fn strings(env: &mut JNIEnv<'_>, a: &JObjectArray<'_>) -> Result<Vec<String>, Failure> {
    let n = env.get_array_length(a).map_err(jni_err)?;
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for i in 0..n {
        let obj = env.get_object_array_element(a, i).map_err(jni_err)?;
        let s = JString::from(obj);
        out.push(string(env, &s)?);
        env.delete_local_ref(s).map_err(jni_err)?;
    }
    Ok(out)
}

/// `NativeReader.open(String path, String[] keys, String[] values)`: a store handle.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeReader_open<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
) -> jlong {
    guarded(&mut env, 0, |env| {
        let path = string(env, &path)?;
        let keys = strings(env, &keys)?;
        let values = strings(env, &values)?;
        if keys.len() != values.len() {
            return Err(Failure("keys and values differ in length".into()));
        }
        let pairs: Vec<(String, String)> = keys.into_iter().zip(values).collect();
        open(&path, &pairs)
    })
}

/// `NativeReader.close(long handle)`.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeReader_close<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guarded(&mut env, (), |_| {
        close(handle);
        Ok(())
    });
}

/// `NativeReader.readLog(long handle, long from, long end, int max, boolean verifyCrc,
/// String[] columns, String label, long[] next)`: Arrow IPC stream bytes; `next[0]` is set to
/// the offset to continue from.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_rocketstore_spark_NativeReader_readLog<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    from: jlong,
    end: jlong,
    max: jint,
    verify_crc: jboolean,
    columns: JObjectArray<'l>,
    label: JString<'l>,
    next: JLongArray<'l>,
) -> jbyteArray {
    guarded(&mut env, std::ptr::null_mut(), |env| {
        let columns = strings(env, &columns)?;
        let label = string(env, &label)?;
        let range = (
            u64::try_from(from).unwrap_or(0),
            u64::try_from(end).unwrap_or(0),
        );
        let max = usize::try_from(max).unwrap_or(1);
        let (bytes, at) = read_log(
            handle,
            range,
            max,
            verify_crc != JNI_FALSE,
            &columns,
            &label,
        )?;
        let at = i64::try_from(at).unwrap_or(i64::MAX);
        env.set_long_array_region(&next, 0, &[at])
            .map_err(jni_err)?;
        let array = env.byte_array_from_slice(&bytes).map_err(jni_err)?;
        Ok(array.into_raw())
    })
}

/// `NativeWriter.open(String path, String liveMarker, String jobId, String[] keys, String[]
/// values, String selector, int queueNums, long partition, long taskAttempt)`: a task writer's
/// handle.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_open<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    path: JString<'l>,
    live_marker: JString<'l>,
    job_id: JString<'l>,
    keys: JObjectArray<'l>,
    values: JObjectArray<'l>,
    selector: JString<'l>,
    queue_nums: jint,
    partition: jlong,
    task_attempt: jlong,
) -> jlong {
    guarded(&mut env, 0, |env| {
        let args = OpenArgs {
            path: string(env, &path)?,
            live_marker: string(env, &live_marker)?,
            job_id: string(env, &job_id)?,
            selector: string(env, &selector)?,
            queue_nums,
            partition,
            task_attempt,
        };
        let keys = strings(env, &keys)?;
        let values = strings(env, &values)?;
        if keys.len() != values.len() {
            return Err(Failure("keys and values differ in length".into()));
        }
        let pairs: Vec<(String, String)> = keys.into_iter().zip(values).collect();
        writer::open(args, &pairs)
    })
}

/// `NativeWriter.put(long handle, byte[] ipc, int length)`: puts the batches of the Arrow IPC
/// stream in `ipc[0..length]`.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_put<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    ipc: JByteArray<'l>,
    length: jint,
) {
    guarded(&mut env, (), |env| {
        let n = usize::try_from(length).map_err(|_| Failure(format!("bad length {length}")))?;
        // One copy, into the handle's reused buffer.
        writer::put_with(handle, n, |dst| {
            env.get_byte_array_region(&ipc, 0, dst).map_err(jni_err)
        })
    });
}

/// `NativeWriter.columns(long handle, String[] names, int[] kinds, boolean[] nullable, String
/// timeZone)`: declares the columns of `putColumns`.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_columns<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    names: JObjectArray<'l>,
    kinds: JIntArray<'l>,
    nullable: JBooleanArray<'l>,
    time_zone: JString<'l>,
) {
    guarded(&mut env, (), |env| {
        let names = strings(env, &names)?;
        let n = env.get_array_length(&kinds).map_err(jni_err)?;
        let mut codes = vec![0; usize::try_from(n).unwrap_or(0)];
        env.get_int_array_region(&kinds, 0, &mut codes)
            .map_err(jni_err)?;
        let kinds = codes
            .into_iter()
            .map(writer::Kind::of)
            .collect::<Result<Vec<_>, _>>()?;
        let n = env.get_array_length(&nullable).map_err(jni_err)?;
        let mut flags = vec![JNI_FALSE; usize::try_from(n).unwrap_or(0)];
        env.get_boolean_array_region(&nullable, 0, &mut flags)
            .map_err(jni_err)?;
        let nullable: Vec<bool> = flags.iter().map(|&b| b != JNI_FALSE).collect();
        let time_zone = string(env, &time_zone)?;
        writer::declare(handle, names, kinds, &nullable, &time_zone)
    });
}

/// Element `i` of `array`, checked to be an instance of the array class `class` (a JNI array
/// call on an array of another type would be undefined behaviour); `None` if null.
fn element<'l>(
    env: &mut JNIEnv<'l>,
    array: &JObjectArray<'_>,
    i: usize,
    class: &str,
) -> Result<Option<JObject<'l>>, Failure> {
    let i = jint::try_from(i).map_err(|_| Failure(format!("bad column {i}")))?;
    let e = env.get_object_array_element(array, i).map_err(jni_err)?;
    if e.is_null() {
        return Ok(None);
    }
    if !env.is_instance_of(&e, class).map_err(jni_err)? {
        return Err(Failure(format!("column {i}: not a {class} array")));
    }
    Ok(Some(e))
}

/// `NativeWriter.putColumns(long handle, int rows, Object[] values, int[][] offsets, byte[][]
/// valid)`: puts one batch of the declared columns (one copy of each array).
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_putColumns<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    rows: jint,
    values: JObjectArray<'l>,
    offsets: JObjectArray<'l>,
    valid: JObjectArray<'l>,
) {
    guarded(&mut env, (), |env| {
        let rows = usize::try_from(rows).map_err(|_| Failure(format!("bad row count {rows}")))?;
        writer::put_columns(handle, rows, |c, kind, column| {
            let missing = || Failure(format!("column {c}: no values"));
            let v = element(env, &values, c, kind_class(kind))?.ok_or_else(missing)?;
            match kind {
                writer::Kind::String | writer::Kind::Binary => {
                    let o = element(env, &offsets, c, "[I")?.ok_or_else(missing)?;
                    let o = JIntArray::from(o);
                    let ends = column.offsets(rows + 1);
                    env.get_int_array_region(&o, 0, ends).map_err(jni_err)?;
                    let end = ends.last().copied().unwrap_or(0);
                    let n = usize::try_from(end)
                        .map_err(|_| Failure(format!("column {c}: bad end {end}")))?;
                    env.delete_local_ref(o).map_err(jni_err)?;
                    let v = JByteArray::from(v);
                    env.get_byte_array_region(&v, 0, column.bytes(n))
                        .map_err(jni_err)?;
                    env.delete_local_ref(v).map_err(jni_err)?;
                }
                writer::Kind::Int => {
                    let v = JIntArray::from(v);
                    env.get_int_array_region(&v, 0, column.ints(rows))
                        .map_err(jni_err)?;
                    env.delete_local_ref(v).map_err(jni_err)?;
                }
                _ => {
                    let v = JLongArray::from(v);
                    env.get_long_array_region(&v, 0, column.longs(rows))
                        .map_err(jni_err)?;
                    env.delete_local_ref(v).map_err(jni_err)?;
                }
            }
            if let Some(m) = element(env, &valid, c, "[B")? {
                let m = JByteArray::from(m);
                env.get_byte_array_region(&m, 0, column.valid(rows))
                    .map_err(jni_err)?;
                env.delete_local_ref(m).map_err(jni_err)?;
            }
            Ok(())
        })
    });
}

/// The JNI class name of the value array of a column kind.
fn kind_class(kind: writer::Kind) -> &'static str {
    match kind {
        writer::Kind::String | writer::Kind::Binary => "[B",
        writer::Kind::Int => "[I",
        _ => "[J",
    }
}

/// `NativeWriter.finish(long handle)`: the store's statistics as JSON, or null without rows.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_finish<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jstring {
    guarded(
        &mut env,
        std::ptr::null_mut(),
        |env| match writer::finish(handle)? {
            None => Ok(std::ptr::null_mut()),
            Some(json) => Ok(env.new_string(json).map_err(jni_err)?.into_raw()),
        },
    )
}

/// `NativeWriter.abort(long handle)`: removes the task's store.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_abort<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guarded(&mut env, (), |_| {
        writer::abort(handle);
        Ok(())
    });
}

/// `NativeWriter.close(long handle)`: forgets the handle.
#[no_mangle]
pub extern "system" fn Java_rocketstore_spark_NativeWriter_close<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guarded(&mut env, (), |_| {
        writer::close(handle);
        Ok(())
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use rocketstore::PutMessage;

    #[test]
    fn a_missing_store_fails_with_the_engine_message() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let Failure(msg) = open(&missing.to_string_lossy(), &[]).unwrap_err();
        assert!(msg.contains("nope"), "{msg}");
    }

    #[test]
    fn config_values_are_parsed_by_kind() {
        assert!(config_of(&[("max_message_size".into(), "1024".into())]).is_ok());
        let Failure(bad) = config_of(&[("max_message_size".into(), "lots".into())]).unwrap_err();
        assert!(bad.contains("integer"), "{bad}");
        let Failure(unknown) = config_of(&[("no_such_field".into(), "1".into())]).unwrap_err();
        assert!(unknown.contains("no_such_field"), "{unknown}");
    }

    #[test]
    fn an_unknown_handle_is_an_error() {
        let Failure(msg) = read_log(-5, (0, 1), 1, false, &["body".into()], "x").unwrap_err();
        assert!(msg.contains("handle"), "{msg}");
    }

    #[test]
    fn read_log_returns_the_requested_columns_as_ipc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        {
            let store = Store::open(&path, StoreConfig::default()).unwrap();
            for i in 0..10u8 {
                let body = vec![i; usize::from(i) + 1];
                store
                    .put(&PutMessage {
                        topic: "T",
                        body: &body,
                        tags: Some("TagA"),
                        ..Default::default()
                    })
                    .unwrap();
            }
            store.flush().unwrap();
        }
        let handle = open(&path.to_string_lossy(), &[]).unwrap();
        let columns = ["body".to_string(), "tags".to_string(), "store".to_string()];
        let (bytes, next) = read_log(handle, (0, u64::MAX), 4, true, &columns, "lbl").unwrap();
        assert!(next > 0);
        let mut reader =
            arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
        let batch = reader.next().unwrap().unwrap();
        assert_eq!(batch.num_rows(), 4);
        let names: Vec<&str> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["body", "tags", "store"]);
        let body = batch.column(0).as_binary::<i32>();
        assert_eq!(body.value(3), [3u8; 4]);
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "TagA");
        assert_eq!(batch.column(2).as_string::<i32>().value(0), "lbl");
        assert!(reader.next().is_none());
        let Failure(msg) =
            read_log(handle, (0, u64::MAX), 4, false, &["nope".into()], "x").unwrap_err();
        assert!(msg.contains("nope") && msg.contains("body"), "{msg}");
        close(handle);
        assert!(read_log(handle, (0, 1), 1, false, &[], "x").is_err());
    }
}
