//! `rocketstore._native`: the PyO3 binding of the rocketstore engine.
//!
//! This crate only converts types, releases the interpreter around I/O and maps errors; every
//! rule about messages and files lives in the engine (`rocketstore`). The Python package
//! (`python/rocketstore`) re-exports these classes and adds the Arrow dispatch of
//! `put_batch` in a subclass of the native `MessageStore`.
//!
//! Modules:
//! - `error`: engine `Error` → the Python exception classes of `rocketstore.exceptions`.
//! - `convert`: put arguments in, `PutResult`/`Message` out.
//! - `store`: the `MessageStore` handle and its scan iterator (GIL release, fork guard).
//! - `arrow`: `put_batch` for Arrow input through the Arrow PyCapsule interface (`pyo3-arrow`).
//! - `arrow_read`: the Arrow reads' private helper functions (the reads themselves and their
//!   schemas are `rocketstore_arrow`'s).
//! - `read`: `GetResult` and the statistics dict of the read path.
//! - `compression`: body compression arguments, `compress_body` and `decompress_body`.
//! - `config`: `**config` keywords and the configuration field table.
//! - `spark`: the Spark data source's column kernels and `verify_store`.
//! - `spark_read`: the Spark reader's batches (built by `rocketstore_arrow::spark_read`).

mod arrow;
mod arrow_read;
mod compression;
mod config;
mod convert;
mod error;
mod read;
mod spark;
mod spark_read;
mod store;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The ``pyarrow.Schema`` of an Arrow batch of this module (private; the Python package
/// exposes them as ``MESSAGE_SCHEMA`` and ``rocketstore._arrow.*_SCHEMA``): ``name`` is
/// ``"message"``, ``"consume_queue"``, ``"index"`` or ``"put_result"``.
#[pyfunction(name = "arrow_schema")]
fn schema_of<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let schema = match name {
        "message" => rocketstore_arrow::arrow_read::message_schema(),
        "consume_queue" => rocketstore_arrow::arrow_read::consume_queue_schema(),
        "index" => rocketstore_arrow::arrow_read::index_schema(),
        "put_result" => arrow::result_schema(),
        other => {
            return Err(PyValueError::new_err(format!(
                "no Arrow schema named {other:?}"
            )))
        }
    };
    pyo3_arrow::PySchema::new(schema).into_pyarrow(py)
}

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_MAX_BATCH_BYTES",
        rocketstore_arrow::arrow_read::DEFAULT_MAX_BATCH_BYTES,
    )?;
    m.add(
        "PUT_COLUMNS",
        pyo3::types::PyTuple::new(m.py(), rocketstore_arrow::put::PUT_FIELDS)?,
    )?;
    store::register_fork_hook(m)?;
    error::register(m)?;
    m.add_class::<store::MessageStore>()?;
    m.add_class::<store::ScanIterator>()?;
    m.add_class::<convert::PutResult>()?;
    m.add_class::<convert::Message>()?;
    m.add_class::<read::GetResult>()?;
    m.add_class::<config::ConfigField>()?;
    m.add_function(wrap_pyfunction!(config::config_fields, m)?)?;
    m.add_function(wrap_pyfunction!(store::rebuild_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(store::truncate_store, m)?)?;
    m.add_function(wrap_pyfunction!(schema_of, m)?)?;
    m.add_function(wrap_pyfunction!(compression::decompress_body, m)?)?;
    m.add_function(wrap_pyfunction!(compression::compress_body, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_read::_arrow_split_counts, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_read::_arrow_read_threads, m)?)?;
    spark::register(m)?;
    spark_read::register(m)?;
    Ok(())
}
