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
//! - `arrow`: the columnar put for Arrow batches (raw buffers in and out).
//! - `arrow_read`: the Arrow reads (messages, consume queue units, index entries as columns).
//! - `read`: `GetResult` and the statistics dict of the read path.
//! - `config`: `**config` keywords and the configuration field table.
//! - `spark`: the Spark data source's column kernels and `verify_store`.

mod arrow;
mod arrow_read;
mod config;
mod convert;
mod error;
mod read;
mod spark;
mod store;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    error::register(m)?;
    m.add_class::<store::MessageStore>()?;
    m.add_class::<store::ScanIterator>()?;
    m.add_class::<convert::PutResult>()?;
    m.add_class::<convert::Message>()?;
    m.add_class::<read::GetResult>()?;
    m.add_class::<config::ConfigField>()?;
    m.add_function(wrap_pyfunction!(config::config_fields, m)?)?;
    m.add_function(wrap_pyfunction!(store::rebuild_indexes, m)?)?;
    spark::register(m)?;
    Ok(())
}
