//! Arrow batches of the rocketstore engine's reads, shared by the bindings.
//!
//! The Python binding (`rocketstore-py`) and the JVM reader (`rocketstore-jni`) build the same
//! batches here, from the engine's record views; they only convert the result and map
//! [`Error`]. No PyO3 and no JNI in this crate.
//!
//! Modules:
//! - [`arrow_read`]: the Arrow reads (messages, consume queue units, index entries) and the
//!   one definition of their schemas.
//! - [`buffer_pool`]: the Arrow reads' column buffers, reused across calls.
//! - [`build_pool`]: the helper threads of the Arrow reads that split their work.
//! - [`spark_read`]: the Spark reader's batches, in the Arrow form of the query's Spark schema.
//! - [`put`]: Arrow batches into the engine's `put_batch` (the Python binding's Arrow
//!   `put_batch` and the JVM Spark writer).
//! - [`spark_write`]: the Spark writer's queue selection, body digest and task writer.
//! - [`error`]: [`Error`], the failure of a read or of a batch Arrow rejects.

// The docs of the public items name the private ones they rely on (for this crate's readers).
#![allow(rustdoc::private_intra_doc_links)]

pub mod arrow_read;
pub mod buffer_pool;
mod build_pool;
pub mod error;
pub mod put;
pub mod spark_read;
pub mod spark_write;

pub use error::{Error, Result};
