//! The column kernels of the Spark data source and whole-store verification, over Arrow's
//! PyCapsule interface (`pyo3-arrow`): `prepare_batch` and `body_digest` read a batch's columns
//! where they lie (no copy, interpreter released) through `rocketstore_arrow::spark_write`
//! (shared with the JVM writer); `verify_store`
//! runs `rocketstore::verify_store` and converts its report.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, Int32Array};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::{PyArray, PyRecordBatch};
use rocketstore::bulk::{self, QueueSelector};
use rocketstore::verify::{Check, ManifestEntry, StoreReport};
use rocketstore::VerifyOptions;

use rocketstore_arrow::spark_write::{self, ValueBytes};

use rocketstore::compression::{BodyCodec, DEFAULT_MAX_DECOMPRESSED};

use crate::arrow::map_put_error;
use crate::config::config_from_kwargs;

/// The body digest of the `_SUCCESS` manifest over a binary or string column (see the Spark
/// writer): the sum over the values of the first 60 bits of their SHA-256.
///
/// Example:
///
/// ```python
/// import pyarrow as pa
/// from rocketstore._native import body_digest
/// body_digest(pa.array([b"a"]))  # == int(hashlib.sha256(b"a").hexdigest()[:15], 16)
/// ```
#[pyfunction]
pub(crate) fn body_digest(py: Python<'_>, bodies: PyArray) -> PyResult<u128> {
    let (array, _) = bodies.into_inner();
    py.detach(|| spark_write::body_digest(array.as_ref()))
        .map_err(|e| map_put_error(py, e))
}

/// The SHA-256 of each value of a binary or string column as 64 lowercase hex digits (Spark
/// SQL's `sha2(body, 256)`), as a pyarrow string array; null stays null. With `sys_flags`
/// (an int32 column of the same length), a body its SYSFLAG marks compressed is hashed as a
/// consumer sees it, decompressed (one that does not decompress is hashed as stored: the
/// verify job's `crc` check reports it).
#[pyfunction]
#[pyo3(signature = (bodies, sys_flags = None))]
pub(crate) fn body_sha256<'py>(
    py: Python<'py>,
    bodies: PyArray,
    sys_flags: Option<PyArray>,
) -> PyResult<Bound<'py, PyAny>> {
    let (array, _) = bodies.into_inner();
    let values = ValueBytes::of(array.as_ref(), "body").map_err(|e| map_put_error(py, e))?;
    let n = array.len();
    let flags = sys_flags.map(|f| sys_flag_values(f, n)).transpose()?;
    let hex = py.detach(|| {
        let mut codec = BodyCodec::default();
        let mut plain = Vec::new();
        let mut b = arrow_array::builder::StringBuilder::with_capacity(n, n * 64);
        for i in 0..n {
            match values.get(i) {
                Some(v) => {
                    let flag = flags.as_ref().and_then(|f| f.get(i)).copied().unwrap_or(0);
                    let v = match codec.decompress(flag, v, DEFAULT_MAX_DECOMPRESSED, &mut plain) {
                        Ok(true) => &plain[..],
                        _ => v,
                    };
                    b.append_value(std::str::from_utf8(&bulk::sha256_hex(v)).unwrap_or_default())
                }
                None => b.append_null(),
            }
        }
        b.finish()
    });
    let array = PyArray::from_array_ref(Arc::new(hex));
    py.import("pyarrow")?
        .getattr("array")?
        .call1((array.into_pyobject(py)?,))
}

/// The values of an int32 SYSFLAG column of `n` rows (a null counts as 0: not compressed).
fn sys_flag_values(sys_flags: PyArray, n: usize) -> PyResult<Vec<i32>> {
    let (f, _) = sys_flags.into_inner();
    let ints = f
        .as_primitive_opt::<arrow_array::types::Int32Type>()
        .filter(|a| a.len() == n)
        .ok_or_else(|| {
            PyTypeError::new_err("sys_flags must be an int32 column as long as bodies")
        })?;
    Ok(ints.iter().map(|v| v.unwrap_or(0)).collect())
}

/// The bodies of a binary column as RocketMQ consumers see them: each value whose `sys_flags`
/// entry marks it compressed is decompressed (at most `max_size` bytes), the others are kept;
/// a binary array (nulls stay null). A value that does not decompress raises
/// `CorruptionError` naming its row.
#[pyfunction]
#[pyo3(signature = (bodies, sys_flags, max_size = 67_108_864))]
pub(crate) fn decompress_bodies<'py>(
    py: Python<'py>,
    bodies: PyArray,
    sys_flags: PyArray,
    max_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (array, _) = bodies.into_inner();
    let values = ValueBytes::of(array.as_ref(), "body").map_err(|e| map_put_error(py, e))?;
    let n = array.len();
    let flags = sys_flag_values(sys_flags, n)?;
    let built = py.detach(|| {
        let mut codec = BodyCodec::default();
        let mut plain = Vec::new();
        let total: usize = (0..n).filter_map(|i| values.get(i)).map(<[u8]>::len).sum();
        let mut b = arrow_array::builder::BinaryBuilder::with_capacity(n, total);
        for i in 0..n {
            let Some(v) = values.get(i) else {
                b.append_null();
                continue;
            };
            let flag = flags.get(i).copied().unwrap_or(0);
            match codec.decompress(flag, v, max_size, &mut plain) {
                Ok(true) => b.append_value(&plain),
                Ok(false) => b.append_value(v),
                Err(e) => return Err((i, e)),
            }
        }
        Ok(b.finish())
    });
    let array = built
        .map_err(|(i, e)| crate::compression::codec_error(py, &e, None, &format!("row {i}: ")))?;
    let array = PyArray::from_array_ref(Arc::new(array));
    py.import("pyarrow")?
        .getattr("array")?
        .call1((array.into_pyobject(py)?,))
}

/// Prepares one Arrow batch of the Spark writer: the queue of each row without one (by
/// `queue_selector`, `"hash"` of the keys or `"round_robin"`, over `queue_nums` queues, the
/// round robin from `counter`) and the body digest of the batch.
///
/// Returns `(queue_ids, digest, counter)`: `queue_ids` is a pyarrow int32 array for the
/// `queue_id` column (`None` when the batch has one without nulls), `counter` the round robin
/// counter for the next batch.
#[pyfunction]
#[pyo3(signature = (batch, queue_selector, queue_nums, counter))]
pub(crate) fn prepare_batch<'py>(
    py: Python<'py>,
    batch: PyRecordBatch,
    queue_selector: &str,
    queue_nums: u32,
    counter: u64,
) -> PyResult<(Option<Bound<'py, PyAny>>, u128, u64)> {
    let selector = match queue_selector {
        "hash" => QueueSelector::Hash,
        "round_robin" => QueueSelector::RoundRobin,
        other => {
            return Err(crate::error::invalid_config(
                py,
                "queueSelector",
                format!("must be 'hash' or 'round_robin', not {other:?}"),
                vec!["hash".into(), "round_robin".into()],
            ))
        }
    };
    let batch = batch.into_inner();
    let prepared = py
        .detach(|| spark_write::prepare_batch(&batch, selector, queue_nums, counter))
        .map_err(|e| map_put_error(py, e))?;
    let (queues, digest, counter) = (prepared.queues, prepared.digest, prepared.counter);
    let queues = queues
        .map(|q| -> PyResult<Bound<'py, PyAny>> {
            let array = PyArray::from_array_ref(Arc::new(Int32Array::from(q)));
            py.import("pyarrow")?
                .getattr("array")?
                .call1((array.into_pyobject(py)?,))
        })
        .transpose()?;
    Ok((queues, digest, counter))
}

/// The outcome of one check of [`verify_store`] on one store.
#[pyclass(module = "rocketstore._native", name = "StoreCheck", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct PyCheck {
    name: String,
    ran: bool,
    checked: u64,
    failed: u64,
    skipped: u64,
    examples: Vec<String>,
    notes: Vec<String>,
}

#[pymethods]
impl PyCheck {
    /// True if nothing failed.
    #[getter]
    fn passed(&self) -> bool {
        self.failed == 0
    }

    fn __repr__(&self) -> String {
        format!(
            "StoreCheck(name={:?}, ran={}, checked={}, failed={}, skipped={})",
            self.name,
            if self.ran { "True" } else { "False" },
            self.checked,
            self.failed,
            self.skipped
        )
    }
}

impl From<&Check> for PyCheck {
    fn from(c: &Check) -> Self {
        Self {
            name: c.name.to_owned(),
            ran: c.ran,
            checked: c.checked,
            failed: c.failed,
            skipped: c.skipped,
            examples: c.examples.clone(),
            notes: c.notes.clone(),
        }
    }
}

/// The report of [`verify_store`] on one store.
#[pyclass(module = "rocketstore._native", name = "StoreReport", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct PyStoreReport {
    checks: Vec<PyCheck>,
    messages: u64,
    bytes: u64,
    files: u64,
    min_offset: u64,
    max_offset: u64,
    body_digest: u128,
    queues: Vec<(String, i32, u64, i64, i64)>,
    message_digests: Vec<(String, i32, u64, u128)>,
}

#[pymethods]
impl PyStoreReport {
    /// True if every check passed.
    #[getter]
    fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.failed == 0)
    }

    fn __repr__(&self) -> String {
        let failed: Vec<&str> = self
            .checks
            .iter()
            .filter(|c| c.failed > 0)
            .map(|c| c.name.as_str())
            .collect();
        format!(
            "StoreReport(ok={}, messages={}, bytes={}, failed={failed:?})",
            if failed.is_empty() { "True" } else { "False" },
            self.messages,
            self.bytes
        )
    }
}

impl From<StoreReport> for PyStoreReport {
    fn from(r: StoreReport) -> Self {
        Self {
            checks: r.checks.iter().map(PyCheck::from).collect(),
            messages: r.messages,
            bytes: r.bytes,
            files: r.files,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            body_digest: r.body_digest,
            message_digests: r
                .queues
                .iter()
                .map(|q| (q.topic.clone(), q.queue_id, q.messages, q.message_digest))
                .collect(),
            queues: r
                .queues
                .into_iter()
                .map(|q| (q.topic, q.queue_id, q.messages, q.min_offset, q.max_offset))
                .collect(),
        }
    }
}

/// A manifest entry (the JSON object of one store in `_SUCCESS`); a field that is missing or
/// of the wrong type is `None`, which the check reports.
fn manifest_entry(d: &Bound<'_, PyDict>) -> ManifestEntry {
    fn get<T: for<'a, 'py> FromPyObject<'a, 'py>>(d: &Bound<'_, PyDict>, k: &str) -> Option<T> {
        d.get_item(k).ok().flatten()?.extract::<T>().ok()
    }
    let body_digest = d.get_item("body_digest").ok().flatten().and_then(|v| {
        v.extract::<u128>()
            .ok()
            .or_else(|| v.extract::<String>().ok()?.parse().ok())
    });
    let queues = get::<BTreeMap<String, BTreeMap<String, u64>>>(d, "queues").and_then(|m| {
        m.into_iter()
            .map(|(t, qs)| {
                let qs: Option<BTreeMap<i32, u64>> = qs
                    .into_iter()
                    .map(|(q, n)| Some((q.parse().ok()?, n)))
                    .collect();
                Some((t, qs?))
            })
            .collect()
    });
    ManifestEntry {
        messages: get(d, "messages"),
        bytes: get(d, "bytes"),
        min_offset: get(d, "min_offset"),
        max_offset: get(d, "max_offset"),
        queues,
        body_digest,
    }
}

/// Verifies one store, opened read-only: every record's CRC and framing, every consume queue
/// unit against its record, gap-free queues, every key through the index (or `sample_keys`
/// keyed records) and, given its `_SUCCESS` entry, the manifest's counts and body digest. With
/// `message_digest` (True: queue ids included, False: not), `message_digests` also sums each
/// record's `bulk::message_hash` (Spark SQL's `xxhash64(topic, [queue_id,] keys, tags, body)`)
/// per queue for the comparison with a source. With `committed_end` (a stream sink's store:
/// the end of its last committed micro-batch) the records from there on are checked but not
/// counted in messages, bytes, queues and digests. One native call
/// with the interpreter released; it never raises for damage (that is in the report), only for
/// bad arguments.
///
/// Example:
///
/// ```python
/// report = rocketstore.verify_store("/data/stores/store-00000")
/// assert report.ok, [c.examples for c in report.checks if not c.passed]
/// ```
#[pyfunction]
#[pyo3(signature = (path, *, name=None, manifest_entry=None, sample_keys=None, message_digest=None, committed_end=None, **config))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_store(
    py: Python<'_>,
    path: PathBuf,
    name: Option<String>,
    manifest_entry: Option<&Bound<'_, PyDict>>,
    sample_keys: Option<usize>,
    message_digest: Option<bool>,
    committed_end: Option<u64>,
    config: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyStoreReport> {
    let config = config_from_kwargs(py, config)?;
    let opts = VerifyOptions {
        name,
        manifest: manifest_entry.map(self::manifest_entry),
        sample_keys,
        message_digest,
        committed_end,
    };
    let report = py.detach(move || rocketstore::verify_store(&path, config, &opts));
    Ok(report.into())
}

/// The file geometry a writable open of the store at `path` would use, given store
/// configuration keywords `config` (see `rocketstore::store_geometry`): a dict of
/// ``mapped_file_size_commit_log``, ``mapped_file_size_consume_queue``, ``max_hash_slot_num``
/// and ``max_index_num``, taken from the store's files where `config` leaves them at their
/// defaults. Reads only. Raises `InvalidConfigError` (``key`` = the keyword) when a value of
/// `config` contradicts the files. The Spark data source checks its options with it on the
/// driver, before any task runs.
#[pyfunction]
#[pyo3(signature = (path, **config))]
pub(crate) fn spark_store_geometry<'py>(
    py: Python<'py>,
    path: PathBuf,
    config: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config_from_kwargs(py, config)?;
    let c = py
        .detach(move || rocketstore::store_geometry(&path, config))
        .map_err(|e| crate::error::map_error(py, &e))?;
    let d = PyDict::new(py);
    d.set_item("mapped_file_size_commit_log", c.mapped_file_size_commit_log)?;
    d.set_item(
        "mapped_file_size_consume_queue",
        c.consume_queue_file_size(),
    )?;
    d.set_item("max_hash_slot_num", c.max_hash_slot_num)?;
    d.set_item("max_index_num", c.max_index_num)?;
    Ok(d)
}

/// Adds this module's functions and classes to the extension module.
pub(crate) fn register(m: &Bound<'_, pyo3::types::PyModule>) -> PyResult<()> {
    m.add_class::<PyCheck>()?;
    m.add_class::<PyStoreReport>()?;
    m.add_function(wrap_pyfunction!(body_digest, m)?)?;
    m.add_function(wrap_pyfunction!(body_sha256, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_bodies, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_batch, m)?)?;
    m.add_function(wrap_pyfunction!(verify_store, m)?)?;
    m.add_function(wrap_pyfunction!(spark_store_geometry, m)?)?;
    Ok(())
}
