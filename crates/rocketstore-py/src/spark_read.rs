//! The Python functions of the Spark reader's batches (private; used by `rocketstore.spark`).
//! The batches are built by `rocketstore_arrow::spark_read`; this module converts and releases
//! the interpreter.

use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PySchema};

use crate::error::map_arrow_error;
use crate::store::MessageStore;

/// Records of `range` = `(from_offset, end_offset)` in commit log order as a batch of the
/// Spark schema `schema` (private; used by `rocketstore.spark`). Returns `(batch,
/// next_offset)` like `MessageStore.read_arrow`.
#[pyfunction]
#[pyo3(signature = (store, range, max_messages, verify_crc, schema, label))]
fn spark_read_log<'py>(
    py: Python<'py>,
    store: PyRef<'py, MessageStore>,
    range: (u64, u64),
    max_messages: usize,
    verify_crc: bool,
    schema: PySchema,
    label: &str,
) -> PyResult<(Bound<'py, PyAny>, u64)> {
    let store = store.store(py)?;
    let schema = schema.into_inner();
    let (batch, next) = py
        .detach(|| {
            rocketstore_arrow::spark_read::read_log(
                &store,
                range,
                max_messages,
                verify_crc,
                schema,
                label,
            )
        })
        .map_err(|e| map_arrow_error(py, &e))?;
    Ok((PyRecordBatch::new(batch).into_pyarrow(py)?, next))
}

/// A message batch (`rocketstore.MESSAGE_SCHEMA`) conformed to the Spark schema `schema`, with
/// `label` as its `store` column (private; used by `rocketstore.spark`).
#[pyfunction]
fn spark_conform<'py>(
    py: Python<'py>,
    batch: PyRecordBatch,
    schema: PySchema,
    label: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let out = rocketstore_arrow::spark_read::conform(batch.as_ref(), schema.into_inner(), label)
        .map_err(|e| map_arrow_error(py, &e))?;
    PyRecordBatch::new(out).into_pyarrow(py)
}

pub(crate) fn register(m: &Bound<'_, pyo3::types::PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(spark_read_log, m)?)?;
    m.add_function(wrap_pyfunction!(spark_conform, m)?)?;
    Ok(())
}
