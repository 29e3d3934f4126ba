//! The reput (dispatch) service (RocketMQ `ReputMessageService`): reads the commit log from the
//! reput offset up to what may be dispatched (the flushed offset under SYNC_FLUSH, everything
//! readable under ASYNC_FLUSH) and hands each record, in order, to the consume queue and index
//! builders; then wakes the long polls of the queues it touched.
//!
//! Re-dispatching a record is harmless: the consume queue skips units it already has (§5.8)
//! and the index skips records below its last end offset (§6.3).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketstore_format::CqUnit;

use crate::commitlog::CommitLog;
use crate::config::FlushDiskType;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::dispatch_request;
use crate::error::Result;
use crate::index::{IndexRequest, IndexService};
use crate::longpoll::PullWaiters;
use crate::service::{Service, Wake};

/// Shared dispatch state: where dispatch stands and what it feeds.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    pub(crate) cq: Arc<ConsumeQueueStore>,
    pub(crate) index: Option<Arc<IndexService>>,
    pub(crate) waiters: Arc<PullWaiters>,
    reput_from: AtomicU64,
    logics_timestamp: AtomicI64,
    delay_levels: Vec<i64>,
    max_queue_id: i32,
    dispatched: AtomicU64,
    /// Topics of records that got no consume queue because the topic cannot be a directory
    /// name: topic -> (records, first commit log offset). See `DispatchRequest::undispatchable`.
    undispatchable: Mutex<BTreeMap<String, (u64, i64)>>,
}

/// A topic whose records were kept in the commit log but not dispatched to a consume queue,
/// because the topic cannot safely be a directory name (see [`crate::Store::undispatchable_topics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndispatchableTopic {
    /// The topic as stored in the records.
    pub topic: String,
    /// Records of this topic dispatched (index only) since the store was opened.
    pub records: u64,
    /// Commit log offset of the first such record seen.
    pub first_offset: i64,
}

impl Dispatcher {
    pub(crate) fn new(
        cq: Arc<ConsumeQueueStore>,
        index: Option<Arc<IndexService>>,
        waiters: Arc<PullWaiters>,
        reput_from: u64,
        delay_levels: Vec<i64>,
        max_queue_id: i32,
    ) -> Self {
        Self {
            cq,
            index,
            waiters,
            reput_from: AtomicU64::new(reput_from),
            logics_timestamp: AtomicI64::new(0),
            delay_levels,
            max_queue_id,
            dispatched: AtomicU64::new(0),
            undispatchable: Mutex::new(BTreeMap::new()),
        }
    }

    /// Notes a record that is kept but gets no consume queue (see [`UndispatchableTopic`]).
    pub(crate) fn note_undispatchable(&self, topic: &str, offset: i64) {
        let mut map = crate::util::lock(&self.undispatchable);
        let e = map.entry(topic.to_string()).or_insert((0, offset));
        e.0 += 1;
        e.1 = e.1.min(offset);
    }

    /// Every topic noted by [`Dispatcher::note_undispatchable`], by topic.
    pub(crate) fn undispatchable_topics(&self) -> Vec<UndispatchableTopic> {
        crate::util::lock(&self.undispatchable)
            .iter()
            .map(|(t, &(records, first_offset))| UndispatchableTopic {
                topic: t.clone(),
                records,
                first_offset,
            })
            .collect()
    }

    pub(crate) fn reput_from(&self) -> u64 {
        self.reput_from.load(Ordering::Acquire)
    }

    pub(crate) fn set_reput_from(&self, v: u64) {
        self.reput_from.store(v, Ordering::Release);
    }

    /// Store time of the last record written to a consume queue (checkpoint logicsMsgTimestamp).
    pub(crate) fn logics_timestamp(&self) -> i64 {
        self.logics_timestamp.load(Ordering::Acquire)
    }

    /// Records dispatched since open.
    pub(crate) fn dispatched(&self) -> u64 {
        self.dispatched.load(Ordering::Relaxed)
    }

    /// Dispatches every record in `[reput_from, end)`. Returns the number of records.
    pub(crate) fn dispatch_until(&self, log: &CommitLog, end: u64) -> Result<u64> {
        let from = self.reput_from().max(log.min_offset());
        if from >= end {
            return Ok(0);
        }
        let mut touched: Vec<(String, i32)> = Vec::new();
        let mut count = 0u64;
        let mut last_ts = 0i64;
        let next = log.for_each_record(from, end, |rec, _offset| {
            let req = dispatch_request(rec, &self.delay_levels);
            if req.undispatchable() {
                self.note_undispatchable(req.topic, req.commitlog_offset);
            }
            if req.goes_to_cq() && (0..=self.max_queue_id).contains(&req.queue_id) {
                let q = self.cq.find_or_create(req.topic, req.queue_id)?;
                let unit = CqUnit {
                    phy_offset: req.commitlog_offset,
                    size: req.msg_size,
                    tags_code: req.tags_code,
                };
                if q.put(unit, req.queue_offset)? {
                    last_ts = req.store_timestamp;
                }
                if !touched
                    .iter()
                    .any(|(t, q)| t == req.topic && *q == req.queue_id)
                {
                    touched.push((req.topic.to_string(), req.queue_id));
                }
            }
            if let Some(index) = &self.index {
                index.build_index(&IndexRequest {
                    topic: req.topic,
                    phy_offset: req.commitlog_offset,
                    store_timestamp: req.store_timestamp,
                    sys_flag: req.sys_flag,
                    uniq_key: req.uniq_key,
                    keys: req.keys,
                })?;
            }
            count += 1;
            // Published per record so readers and the checkpoint see progress.
            self.reput_from.store(
                rec.physical_offset as u64 + rec.total_size as u64,
                Ordering::Release,
            );
            Ok(())
        })?;
        self.reput_from.fetch_max(next, Ordering::AcqRel);
        if last_ts > 0 {
            self.logics_timestamp.fetch_max(last_ts, Ordering::AcqRel);
        }
        self.dispatched.fetch_add(count, Ordering::Relaxed);
        self.waiters
            .notify(touched.iter().map(|(t, q)| (t.as_str(), *q)));
        Ok(count)
    }
}

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
