//! The Python functions of the Arrow reads (private, for the tests); the reads themselves are
//! `rocketstore_arrow::arrow_read`.

use pyo3::prelude::*;

/// The threads one message batch may use; `threads` (clamped to 1-4) replaces the number for
/// this process (see `rocketstore_arrow::arrow_read::read_threads`). Returns the value
/// before the call.
#[pyfunction]
#[pyo3(signature = (threads=None))]
pub(crate) fn _arrow_read_threads(threads: Option<usize>) -> usize {
    rocketstore_arrow::arrow_read::read_threads(threads)
}

/// `(split builds, split fallbacks)` since the process started (see
/// `rocketstore_arrow::arrow_read::split_counts`).
#[pyfunction]
pub(crate) fn _arrow_split_counts() -> (u64, u64) {
    rocketstore_arrow::arrow_read::split_counts()
}
