//! The Python functions of the Arrow reads (private, for the tests); the reads themselves are
//! `rocketstore_arrow::arrow_read`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3_arrow::PyRecordBatch;
use rocketstore_arrow::arrow_read::{self, MessageColumns, Projection};

use crate::error::map_arrow_error;

/// The threads one message batch may use; `threads` (clamped to 1-4) replaces the number for
/// this process (see `rocketstore_arrow::arrow_read::read_threads`). Returns the value
/// before the call.
#[pyfunction]
#[pyo3(signature = (threads=None))]
pub(crate) fn _arrow_read_threads(threads: Option<usize>) -> usize {
    arrow_read::read_threads(threads)
}

/// `(split builds, split fallbacks)` since the process started (see
/// `rocketstore_arrow::arrow_read::split_counts`).
#[pyfunction]
pub(crate) fn _arrow_split_counts() -> (u64, u64) {
    arrow_read::split_counts()
}

/// The empty message batch, converted once: a read past the end of its range returns it (the
/// last call of every read loop), instead of converting 20 empty columns each time.
static EMPTY_MESSAGES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `cols` as a `pyarrow.RecordBatch` (the buffers move without a copy).
pub(crate) fn message_batch<'py>(
    py: Python<'py>,
    cols: MessageColumns,
) -> PyResult<Bound<'py, PyAny>> {
    let projected = cols.projection() != Projection::ALL;
    let batch = cols.into_batch().map_err(|e| map_arrow_error(py, &e))?;
    if batch.num_rows() == 0 && !projected {
        // Dropping the batch gives its buffers back to the read buffer pool.
        drop(batch);
        let empty = EMPTY_MESSAGES.get_or_try_init(py, || {
            PyRecordBatch::new(arrow_read::empty_message_batch())
                .into_pyarrow(py)
                .map(Bound::unbind)
        })?;
        return Ok(empty.bind(py).clone());
    }
    PyRecordBatch::new(batch).into_pyarrow(py)
}

/// The columns a read builds: `columns` (names of `MESSAGE_SCHEMA`), every column if `None`.
/// An unknown name raises the binding's invalid-value error naming the columns there are.
pub(crate) fn projection(py: Python<'_>, columns: Option<&[String]>) -> PyResult<Projection> {
    match columns {
        None => Ok(Projection::ALL),
        Some(names) => Projection::of_names(names).map_err(|e| map_arrow_error(py, &e)),
    }
}
