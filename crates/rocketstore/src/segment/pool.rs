//! RocketMQ's TransientStorePool: a bounded set of file-sized anonymous buffers that messages
//! are written into before the commit service copies them into the mapped file.

use std::sync::{Arc, Mutex};

use crate::mmap::{AppendRegion, MmapRegion};
use crate::util::lock;

/// A pool of at most `capacity` write buffers of `buffer_size` bytes, created lazily and reused.
/// Reused buffers are not zeroed (as in RocketMQ); the writer zeroes what it must (see
/// `FileWriter::write_blank`).
#[derive(Debug)]
pub(crate) struct TransientStorePool {
    buffer_size: usize,
    capacity: usize,
    state: Mutex<PoolState>,
}

#[derive(Debug)]
struct PoolState {
    /// Given back by their files. A buffer is lent again only once nothing else holds it (a
    /// late commit or writer handle may still), because its watermark is then reset.
    free: Vec<Arc<AppendRegion>>,
    created: usize,
}

impl TransientStorePool {
    pub(crate) fn new(buffer_size: usize, capacity: usize) -> Self {
        Self {
            buffer_size,
            capacity,
            state: Mutex::new(PoolState {
                free: Vec::new(),
                created: 0,
            }),
        }
    }

    /// Borrows a buffer nobody else holds, or `None` when all `capacity` buffers are in use
    /// (the file is then written directly through its mapping, as RocketMQ does when the pool
    /// runs dry).
    pub(crate) fn borrow(&self) -> Option<Arc<AppendRegion>> {
        let mut st = lock(&self.state);
        if let Some(i) = st.free.iter_mut().position(|b| Arc::get_mut(b).is_some()) {
            return Some(st.free.swap_remove(i));
        }
        if st.created >= self.capacity {
            return None;
        }
        let region = MmapRegion::anonymous(self.buffer_size).ok()?;
        st.created += 1;
        Some(Arc::new(AppendRegion::new(region, 0, 0)))
    }

    pub(crate) fn give_back(&self, region: Arc<AppendRegion>) {
        lock(&self.state).free.push(region);
    }
}
