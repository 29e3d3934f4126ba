//! `put_batch` for Arrow input, through Arrow's PyCapsule interface.
//!
//! Any object with `__arrow_c_stream__` or `__arrow_c_array__` (a pyarrow `Table`,
//! `RecordBatch` or `RecordBatchReader`, a polars `DataFrame`, a DuckDB relation, ...) is
//! imported with `pyo3-arrow` (zero-copy: the Rust arrays borrow the producer's buffers). The
//! conversion into the engine's messages and the write are `rocketstore_arrow::put`'s (shared
//! with the JVM Spark writer); this module imports, releases the interpreter, and maps
//! [`PutError`] to Python's exceptions. The results come back as one Arrow `RecordBatch`
//! (schema [`result_schema`]).
//!
//! Why `pyo3-arrow` and not `arrow`'s own `pyarrow` feature: the `pyarrow` feature converts
//! by calling pyarrow's private `_export_to_c`/`_import_from_c` (pyarrow only, and pyarrow must
//! be importable), while `pyo3-arrow` speaks the public PyCapsule protocol, so any producer
//! works (polars, DuckDB, nanoarrow, arro3, a user's own class), and it builds against the
//! abi3 interpreter API this extension uses.

use arrow_schema::SchemaRef;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::PyRecordBatch;
use rocketstore::compression::CompressOptions;
use rocketstore::Store;
use rocketstore_arrow::put::{self, Columns, PutError, MAX_ROWS};

use crate::error::{invalid_message, invalid_message_field, map_error};

/// The schema of the batch `put_batch` returns for Arrow input (`rocketstore._arrow.RESULT_SCHEMA`).
pub(crate) fn result_schema() -> SchemaRef {
    put::result_schema()
}

/// `e` as the Python exception `put_batch` raises.
pub(crate) fn map_put_error(py: Python<'_>, e: PutError) -> PyErr {
    match e {
        PutError::Invalid {
            field,
            index,
            reason,
        } => invalid_message(field, index, reason),
        PutError::Message { field, message } => invalid_message_field(&field, message),
        PutError::Type(m) => PyTypeError::new_err(m),
        PutError::Engine(e) => map_error(py, &e),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// `MessageStore._put_arrow`: imports `data` (see the module docs), writes it and returns the
/// result batch as a `pyarrow.RecordBatch`.
pub(crate) fn put_arrow<'py>(
    py: Python<'py>,
    store: &Store,
    data: AnyRecordBatch,
    compress: Option<CompressOptions>,
) -> PyResult<Bound<'py, PyAny>> {
    let schema = data.schema()?;
    put::check_schema(&schema).map_err(|e| map_put_error(py, e))?;
    let reader = data.into_reader()?;
    let mut batches = Vec::new();
    let mut rows = 0usize;
    for batch in reader {
        let batch =
            batch.map_err(|e| PyValueError::new_err(format!("reading the Arrow input: {e}")))?;
        let c = Columns::of(&batch, rows).map_err(|e| map_put_error(py, e))?;
        rows = rows.saturating_add(c.len());
        if rows > MAX_ROWS {
            return Err(invalid_message_field(
                "messages",
                format!("invalid messages: more than {MAX_ROWS} rows in one batch; split it"),
            ));
        }
        if !c.is_empty() {
            batches.push(c);
        }
    }
    let results = py.detach(|| put::write(store, &batches, compress));
    drop(batches);
    let results = results.map_err(|e| map_put_error(py, e))?;
    let batch = put::result_batch(&results).map_err(|e| map_put_error(py, e))?;
    PyRecordBatch::new(batch).into_pyarrow(py)
}
