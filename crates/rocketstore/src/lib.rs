//! # rocketstore
//!
//! A message store engine byte-compatible with Apache RocketMQ's on-disk store: a commit log of
//! fixed-size memory-mapped files (20-digit offset names), RocketMQ's record format, its
//! flush/commit/allocate services and its recovery rules. A store written here loads in a
//! RocketMQ broker; a broker's store opens here read-only without a byte changed.
//!
//! The on-disk format is specified in `rocketmq-store-format.md` and implemented, without I/O,
//! by the [`rocketstore_format`] crate (re-exported as [`format`](mod@format)).
//!
//! Design rules the code keeps:
//! - `unsafe` lives only in the private `mmap` module, each block justified by its contract.
//! - Errors are the `#[non_exhaustive]` [`Error`]; RocketMQ's statuses ([`PutStatus`]) are values.
//! - A failed flush fences the store ([`Error::Poisoned`]); nothing is acknowledged after it.
//! - Background services are named threads (`rs-allocate`, `rs-flush`, `rs-commit`,
//!   `rs-reput`, `rs-flush-cq`, `rs-schedule`, ...) around a
//!   testable `run_once`, joined on [`Store::close`].
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bulk;
mod checkpoint;
mod commitlog;
pub mod compression;
pub mod config;
mod consume_queue;
mod dispatch;
mod error;
pub mod failpoints;
mod feed;
mod follow;
mod geometry;
mod index;
mod json;
mod lock;
mod longpoll;
mod message;
mod mmap;
mod offsets;
#[cfg(feature = "powerloss")]
pub mod powerloss;
pub mod probe;
mod progress;
mod read;
mod rebuild;
mod recovery;
mod segment;
mod service;
mod signal;
mod stats;
mod store;
mod tail_index;
mod util;
mod validate;
pub mod verify;

pub use rocketstore_format as format;

pub use checkpoint::{ABORT_FILE, CHECKPOINT_FILE};
pub use config::{ConfigValue, FieldInfo, FieldKind, FlushDiskType, RecoveryMode, StoreConfig};
pub use dispatch::Subscription;
pub use dispatch::UndispatchableTopic;
pub use error::{message_with_sources, CorruptionKind, Error, Result};
pub use geometry::store_geometry;
pub use message::{
    GetResult, GetStatus, PutMessage, PutResult, PutStatus, QueryResult, StoredMessage,
    TransactionType,
};
pub use progress::PROGRESS_FILE;
pub use rebuild::{rebuild_indexes, RebuildReport};
pub use recovery::RecoveryReport;
pub use rocketstore_format::HostAddr;
pub use service::cleanup::{CleanupReport, Clock, DiskUsageProbe};
pub use service::ServiceKind;
pub use signal::Wake;
pub use stats::StoreStats;
pub use store::{Cursors, GetRecords, IndexFileEntries, QueueSpan, RecordHandle, Scanner, Store};
#[doc(hidden)]
pub use util::set_wall_clock_offset_ms;
pub use verify::{verify_store, StoreReport, VerifyOptions};
