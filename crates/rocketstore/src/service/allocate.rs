//! The allocate service (RocketMQ `AllocateMappedFileService`): the thread that creates the next
//! commit log files ahead of the writer, serving the requests of the
//! [`crate::segment::Allocator`] (see `segment/allocator.rs` for the protocol).

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::segment::Allocator;
use crate::service::Service;
use crate::signal::Wake;

/// The service loop around [`Allocator::serve_pending`].
#[derive(Debug)]
pub(crate) struct AllocateService {
    allocator: Arc<Allocator>,
}

impl AllocateService {
    pub(crate) fn new(allocator: Arc<Allocator>) -> Self {
        Self { allocator }
    }
}

impl Service for AllocateService {
    const NAME: &'static str = "allocate";

    fn interval(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        self.allocator.serve_pending();
        Ok(())
    }

    fn on_shutdown(&mut self) -> Result<()> {
        self.allocator.close()
    }
}
