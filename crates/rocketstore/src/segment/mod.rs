//! Fixed-size mapped files and the queues of them.

pub(crate) mod allocator;
pub(crate) mod mapped_file;
pub(crate) mod pool;
pub(crate) mod queue;

pub(crate) use allocator::{Allocator, Taken};
pub(crate) use mapped_file::{CreateOptions, FileWriter, MappedFile};
pub(crate) use pool::TransientStorePool;
pub(crate) use queue::{MappedFileQueue, SizePolicy};
