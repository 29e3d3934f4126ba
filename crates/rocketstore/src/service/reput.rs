//! The reput (dispatch) service (RocketMQ `ReputMessageService`): reads the commit log from the
//! reput offset up to what may be dispatched (the flushed offset under SYNC_FLUSH, everything
//! readable under ASYNC_FLUSH) and hands it to the [`Dispatcher`], which feeds the consume
//! queues and the index in order and wakes the long polls of the queues it touched.

use std::sync::Arc;
use std::time::Duration;

use crate::commitlog::CommitLog;
use crate::config::FlushDiskType;
use crate::dispatch::Dispatcher;
use crate::error::Result;
use crate::service::Service;
use crate::signal::Wake;

/// Where dispatch may go: the flushed offset under SYNC_FLUSH (5.x `getReputEndOffset`), else
/// everything readers may see.
pub(crate) fn reput_end(log: &CommitLog, mode: FlushDiskType) -> u64 {
    match mode {
        FlushDiskType::SyncFlush => log.queue().flushed_where().min(log.max_offset()),
        FlushDiskType::AsyncFlush => log.max_offset(),
    }
}

/// The service loop.
#[derive(Debug)]
pub(crate) struct ReputService {
    log: Arc<CommitLog>,
    dispatcher: Arc<Dispatcher>,
    mode: FlushDiskType,
}

impl ReputService {
    pub(crate) fn new(
        log: Arc<CommitLog>,
        dispatcher: Arc<Dispatcher>,
        mode: FlushDiskType,
    ) -> Self {
        Self {
            log,
            dispatcher,
            mode,
        }
    }
}

impl Service for ReputService {
    const NAME: &'static str = "reput";

    fn interval(&self) -> Duration {
        // Puts (and, under SYNC_FLUSH, flushes) wake the service; this is only a safety net.
        Duration::from_millis(100)
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        let end = reput_end(&self.log, self.mode);
        self.dispatcher.dispatch_until(&self.log, end)?;
        Ok(())
    }

    fn on_shutdown(&mut self) -> Result<()> {
        // Drain: everything written before close is dispatched (so the abort file may go).
        let end = reput_end(&self.log, self.mode);
        self.dispatcher.dispatch_until(&self.log, end)?;
        Ok(())
    }
}
