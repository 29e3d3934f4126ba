//! The dispatcher (RocketMQ `CommitLogDispatcher`s run by `ReputMessageService` and recovery):
//! hands each commit log record in `[reput_from, end)`, in order, to the consume queue and index
//! builders, and keeps where dispatch stands. Used by the reput service, recovery, offline
//! rebuild, cleanup and the consume-queue flush.
//!
//! Re-dispatching a record is harmless: the consume queue skips units it already has (§5.8)
//! and the index skips records below its last end offset (§6.3).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rocketstore_format::CqUnit;

use crate::commitlog::CommitLog;
use crate::consume_queue::{ConsumeQueue, ConsumeQueueStore};
use crate::dispatch::{dispatch_request, DispatchRequest};
use crate::error::Result;
use crate::index::{IndexRequest, IndexService};
use crate::longpoll::PullWaiters;

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
    ///
    /// The consume queue handles and the index writer are taken once per run of records, not
    /// per record.
    pub(crate) fn dispatch_until(&self, log: &CommitLog, end: u64) -> Result<u64> {
        let from = self.reput_from().max(log.min_offset());
        if from >= end {
            return Ok(0);
        }
        let mut queues = QueueHandles::default();
        let (next, count) = self.cq_range(log, &mut queues, from, end)?;
        self.reput_from.fetch_max(next, Ordering::AcqRel);
        if queues.last_ts > 0 {
            self.logics_timestamp
                .fetch_max(queues.last_ts, Ordering::AcqRel);
        }
        self.dispatched.fetch_add(count, Ordering::Relaxed);
        self.waiters
            .notify(queues.touched.iter().map(|q| (q.topic(), q.queue_id())));
        Ok(count)
    }

    /// Walks `[from, end)` into the consume queues and the index, publishing the reput offset
    /// per record. Returns `(next, records)`.
    fn cq_range(
        &self,
        log: &CommitLog,
        queues: &mut QueueHandles,
        from: u64,
        end: u64,
    ) -> Result<(u64, u64)> {
        let mut count = 0u64;
        let mut index = match &self.index {
            Some(i) => Some(i.batch()?),
            None => None,
        };
        let next = log.for_each_record(from, end, |rec, _offset| {
            let req = dispatch_request(rec, &self.delay_levels);
            if req.undispatchable() {
                self.note_undispatchable(req.topic, req.commitlog_offset);
            }
            if req.goes_to_cq() && (0..=self.max_queue_id).contains(&req.queue_id) {
                let q = queues.get(&self.cq, req.topic, req.queue_id)?;
                let unit = CqUnit {
                    phy_offset: req.commitlog_offset,
                    size: req.msg_size,
                    tags_code: req.tags_code,
                };
                if q.put(unit, req.queue_offset)? {
                    queues.last_ts = req.store_timestamp;
                }
            }
            if let Some(index) = index.as_mut() {
                index.build(&index_request(&req))?;
            }
            count += 1;
            // Published per record so readers and the checkpoint see progress.
            self.reput_from.store(
                rec.physical_offset as u64 + rec.total_size as u64,
                Ordering::Release,
            );
            Ok(())
        })?;
        Ok((next, count))
    }
}

fn index_request<'a>(req: &DispatchRequest<'a>) -> IndexRequest<'a> {
    IndexRequest {
        topic: req.topic,
        phy_offset: req.commitlog_offset,
        store_timestamp: req.store_timestamp,
        sys_flag: req.sys_flag,
        uniq_key: req.uniq_key,
        keys: req.keys,
    }
}

/// The consume queues one dispatch run has written to, looked up in the shared map only the
/// first time (no lock, hash or `Arc` clone per record); they are also the queues whose long
/// polls are woken afterwards.
#[derive(Debug, Default)]
struct QueueHandles {
    touched: Vec<Arc<ConsumeQueue>>,
    /// Index in `touched` of the last hit (consecutive records often share a queue).
    last: usize,
    /// Store time of the last record added to a consume queue.
    last_ts: i64,
}

impl QueueHandles {
    fn get(
        &mut self,
        cqs: &ConsumeQueueStore,
        topic: &str,
        queue_id: i32,
    ) -> Result<&ConsumeQueue> {
        let hit = |q: &Arc<ConsumeQueue>| q.queue_id() == queue_id && q.topic() == topic;
        let i = match self.touched.get(self.last) {
            Some(q) if hit(q) => self.last,
            _ => match self.touched.iter().position(hit) {
                Some(i) => i,
                None => {
                    self.touched.push(cqs.find_or_create(topic, queue_id)?);
                    self.touched.len() - 1
                }
            },
        };
        self.last = i;
        self.touched.get(i).map(|q| &**q).ok_or_else(|| {
            crate::error::Error::invalid("dispatch", "consume queue handle vanished")
        })
    }
}
