//! The consume queue flush service (RocketMQ `FlushConsumeQueueService`) and the checkpoint.
//!
//! Every `flush_interval_consume_queue` ms the consume queues are flushed (at least
//! `flush_consume_queue_least_pages` pages, or everything every
//! `flush_consume_queue_thorough_interval` ms) and the checkpoint is rewritten (5.x writes it
//! every second): physicMsgTimestamp is the store time covered by the last full commit log
//! flush, logicsMsgTimestamp the store time of the last dispatched record, indexMsgTimestamp the
//! end time of the last full index file; our extension records the durable commit log offset.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketstore_format::{Checkpoint, CheckpointExt};

use crate::commitlog::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::error::Result;
use crate::index::IndexService;
use crate::offsets::ConsumerOffsets;
use crate::service::reput::Dispatcher;
use crate::service::{Service, Wake};
use crate::util::lock;

/// Builds and writes the checkpoint from the live components.
#[derive(Debug)]
pub(crate) struct CheckpointSource {
    root: PathBuf,
    log: Arc<CommitLog>,
    dispatcher: Arc<Dispatcher>,
    index: Option<Arc<IndexService>>,
    sync: bool,
    last: Mutex<Checkpoint>,
}

impl CheckpointSource {
    pub(crate) fn new(
        root: &Path,
        log: Arc<CommitLog>,
        dispatcher: Arc<Dispatcher>,
        index: Option<Arc<IndexService>>,
        sync: bool,
        loaded: Option<Checkpoint>,
    ) -> Self {
        let last = loaded.unwrap_or_default();
        Self {
            root: root.to_path_buf(),
            log,
            dispatcher,
            index,
            sync,
            last: Mutex::new(last),
        }
    }

    /// Rewrites the checkpoint; timestamps never move backwards.
    pub(crate) fn write(&self, clean: bool) -> Result<()> {
        let mut last = lock(&self.last);
        let physic = if clean {
            self.log
                .queue()
                .last()
                .map_or(0, |f| f.last_store_timestamp())
                .max(self.log.queue().store_timestamp())
        } else {
            self.log.queue().store_timestamp()
        };
        let cp = Checkpoint {
            physic_msg_timestamp: last.physic_msg_timestamp.max(physic),
            logics_msg_timestamp: last
                .logics_msg_timestamp
                .max(self.dispatcher.logics_timestamp()),
            index_msg_timestamp: last.index_msg_timestamp.max(
                self.index
                    .as_ref()
                    .map_or(0, |i| i.last_full_end_timestamp()),
            ),
            master_flushed_offset: 0,
            confirm_phy_offset: 0,
            ext: Some(CheckpointExt {
                durable_commitlog_offset: self.log.queue().flushed_where() as i64,
                clean_shutdown: clean,
                generation: last.ext.as_ref().map_or(0, |e| e.generation) + 1,
            }),
        };
        crate::checkpoint::write(&self.root, &cp, self.sync)?;
        *last = cp;
        Ok(())
    }
}

/// The service loop.
#[derive(Debug)]
pub(crate) struct FlushCqService {
    cqs: Arc<ConsumeQueueStore>,
    checkpoint: Arc<CheckpointSource>,
    offsets: Arc<ConsumerOffsets>,
    interval: Duration,
    least_pages: usize,
    thorough_interval: Duration,
    last_thorough: Instant,
}

impl FlushCqService {
    pub(crate) fn new(
        cqs: Arc<ConsumeQueueStore>,
        checkpoint: Arc<CheckpointSource>,
        offsets: Arc<ConsumerOffsets>,
        cfg: &StoreConfig,
    ) -> Self {
        Self {
            cqs,
            checkpoint,
            offsets,
            interval: Duration::from_millis(cfg.flush_interval_consume_queue),
            least_pages: cfg.flush_consume_queue_least_pages as usize,
            thorough_interval: Duration::from_millis(cfg.flush_consume_queue_thorough_interval),
            last_thorough: Instant::now(),
        }
    }
}

impl Service for FlushCqService {
    const NAME: &'static str = "flush-cq";

    fn interval(&self) -> Duration {
        self.interval
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        let thorough = self.last_thorough.elapsed() >= self.thorough_interval;
        if thorough {
            self.last_thorough = Instant::now();
        }
        self.cqs
            .flush_all(if thorough { 0 } else { self.least_pages })?;
        if let Some(index) = &self.checkpoint.index {
            // A full index file is flushed once, after it rolled (RocketMQ flushes it on a new
            // thread); its end time then becomes the checkpoint's indexMsgTimestamp.
            if index.has_unflushed_full() {
                index.flush()?;
            }
        }
        self.offsets.persist(self.checkpoint.sync)?;
        self.checkpoint.write(false)
    }

    fn on_shutdown(&mut self) -> Result<()> {
        self.cqs.flush_all(0)?;
        if let Some(index) = &self.checkpoint.index {
            index.flush()?;
        }
        Ok(())
    }
}
