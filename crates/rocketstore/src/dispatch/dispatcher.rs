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
use crate::dispatch::{dispatch_request, with_properties, DispatchRequest};
use crate::error::Result;
use crate::feed::FedBatch;
use crate::index::{handoff, IndexBatch, IndexRequest, IndexService};
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
    /// Held by a dispatch run: runs (the reput thread, inline dispatch after puts without
    /// service threads, recovery) never interleave, so fed and decoded records stay in order.
    running: Mutex<()>,
    /// The progress word readers in other processes follow (writable stores, `crate::follow`).
    progress: std::sync::OnceLock<Arc<crate::progress::ProgressWriter>>,
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
            running: Mutex::new(()),
            progress: std::sync::OnceLock::new(),
        }
    }

    /// Publishes every dispatch pass's end to `progress` from now on (writable stores).
    pub(crate) fn set_progress(&self, progress: Arc<crate::progress::ProgressWriter>) {
        let _ = self.progress.set(progress);
    }

    /// Publishes the dispatched end and the commit log's first offset to readers in other
    /// processes (after a dispatch pass, after cleanup deleted files).
    pub(crate) fn publish_progress(&self, log: &CommitLog) {
        if let Some(p) = self.progress.get() {
            p.publish(self.reput_from(), log.min_offset());
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
    /// Records the writer fed ([`crate::feed`]) are dispatched from the feed; everything the
    /// feed does not cover is decoded from the commit log. The consume queue handles and the
    /// index writer are taken once per run of records, not per record. Runs are serialized.
    pub(crate) fn dispatch_until(&self, log: &CommitLog, end: u64) -> Result<u64> {
        let _one_run = crate::util::lock(&self.running);
        if self.reput_from().max(log.min_offset()) >= end {
            return Ok(0);
        }
        let index = match &self.index {
            Some(i) => Some(IndexSink::Here(i.batch()?)),
            None => None,
        };
        self.run_until(log, end, index)
    }

    /// [`Dispatcher::dispatch_until`] for recovery's re-dispatch: with `threads` > 1 and an
    /// index, the index is built on a thread `rs-recover-index` from the records' keys this
    /// thread hands over in batches ([`crate::index::handoff`]; the builder checks and hashes
    /// them) while this thread decodes and writes the consume queues. Returns once both are
    /// done, with the same files as `dispatch_until`; an error of either side is returned (the
    /// builder's first).
    pub(crate) fn dispatch_until_split(
        &self,
        log: &CommitLog,
        end: u64,
        threads: usize,
    ) -> Result<u64> {
        let Some(index) = self.index.as_deref().filter(|_| threads > 1) else {
            return self.dispatch_until(log, end);
        };
        let _one_run = crate::util::lock(&self.running);
        if self.reput_from().max(log.min_offset()) >= end {
            return Ok(0);
        }
        std::thread::scope(|s| {
            let (keys, rx) = handoff::channel();
            let builder = std::thread::Builder::new()
                .name("rs-recover-index".into())
                .spawn_scoped(s, move || handoff::build_all(index, rx));
            let Ok(builder) = builder else {
                // No second thread: build the index here.
                return self.run_until(log, end, Some(IndexSink::Here(index.batch()?)));
            };
            let dispatched = self.run_until(log, end, Some(IndexSink::Handoff(keys)));
            let built = builder.join().unwrap_or_else(|_| {
                Err(crate::error::Error::invalid(
                    "dispatch",
                    "the index builder panicked",
                ))
            });
            built.and(dispatched)
        })
    }

    /// One dispatch run from `reput_from` to `end` (the caller holds `running`), the index
    /// built through `index`.
    fn run_until(&self, log: &CommitLog, end: u64, index: Option<IndexSink<'_>>) -> Result<u64> {
        let from = self.reput_from().max(log.min_offset());
        let mut run = Run {
            queues: QueueHandles::default(),
            index,
            count: 0,
            staged_end: None,
        };
        let mut result = self.dispatch_range(log, &mut run, from, end);
        let Run {
            queues,
            count,
            index,
            staged_end,
        } = run;
        match index {
            Some(IndexSink::Handoff(keys)) => {
                // Hands over the last records and closes the channel (the builder then ends).
                let finished = keys.finish();
                result = result.and_then(|next| finished.map(|()| next));
            }
            Some(IndexSink::Here(mut index)) => {
                // The last record's keys, held back by `stage`; only then is dispatch past it.
                match index.put_staged() {
                    Ok(()) => {
                        if let Some(e) = staged_end {
                            self.reput_from.fetch_max(e, Ordering::AcqRel);
                        }
                    }
                    Err(e) => result = Err(e),
                }
            }
            None => {}
        }
        if let Ok(next) = result {
            // Past the blank record closing a file too, not only past the last record.
            self.reput_from.fetch_max(next, Ordering::AcqRel);
        }
        if queues.last_ts > 0 {
            self.logics_timestamp
                .fetch_max(queues.last_ts, Ordering::AcqRel);
        }
        self.dispatched.fetch_add(count, Ordering::Relaxed);
        self.waiters
            .notify(queues.touched.iter().map(|q| (q.topic(), q.queue_id())));
        if self.reput_from() > from {
            self.publish_progress(log);
        }
        result.map(|_| count)
    }

    /// Dispatches `[from, end)`: fed records where the feed covers the position, decoded
    /// records elsewhere. Returns the position reached.
    fn dispatch_range(
        &self,
        log: &CommitLog,
        run: &mut Run<'_>,
        from: u64,
        end: u64,
    ) -> Result<u64> {
        let feed = log.feed();
        let mut pos = from;
        let mut fed: Option<FedBatch> = None;
        let result = loop {
            if pos >= end {
                break Ok(pos);
            }
            let batch = match fed.as_mut() {
                Some(b) => b,
                None => match feed.take() {
                    Some(b) => fed.insert(b),
                    None => {
                        // Nothing fed: decode the rest from the commit log.
                        break self.decode_range(log, run, pos, end);
                    }
                },
            };
            // Fed records below the position were dispatched another way (recovery, decode).
            let skip = batch.rest().iter().take_while(|r| r.phy < pos).count();
            batch.next += skip;
            let Some(&first) = batch.rest().first() else {
                if let Some(b) = fed.take() {
                    feed.give_back(b);
                }
                continue;
            };
            if first.phy > pos {
                // A gap (the blank record closing a file, or an append not fed): decode it.
                let stop = first.phy.min(end);
                match self.decode_range(log, run, pos, stop) {
                    Ok(next) if next > pos => pos = next,
                    Ok(_) => break Ok(pos),
                    Err(e) => break Err(e),
                }
                continue;
            }
            match self.dispatch_fed(log, batch, run, end) {
                Ok(next) if next > pos => pos = next,
                Ok(_) => break Ok(pos),
                Err(e) => break Err(e),
            }
        };
        if let Some(b) = fed {
            feed.give_back(b);
        }
        result
    }

    /// Dispatches the fed records of `batch` from its next one (which starts where dispatch
    /// stands) while they are contiguous, end by `end` and are readable in their file (a
    /// reader given the consume queue unit must find the record). Returns the position reached.
    fn dispatch_fed(
        &self,
        log: &CommitLog,
        batch: &mut FedBatch,
        run: &mut Run<'_>,
        end: u64,
    ) -> Result<u64> {
        let mut pos = batch.rest().first().map_or(end, |r| r.phy);
        let mut readable = 0u64;
        let mut topic: (u32, &str) = (u32::MAX, "");
        let mut done = 0;
        let result = (|| {
            for r in batch.rest() {
                if r.phy != pos || r.end() > end {
                    break;
                }
                if r.end() > readable {
                    readable = log.readable_until(r.phy);
                    if r.end() > readable {
                        break;
                    }
                }
                if topic.0 != r.topic {
                    let t = batch.topic(r).and_then(|t| std::str::from_utf8(t).ok());
                    let Some(t) = t else { break };
                    topic = (r.topic, t);
                }
                let Some(props) = batch.props(r) else { break };
                let facts = DispatchRequest {
                    topic: topic.1,
                    queue_id: r.queue_id,
                    commitlog_offset: r.phy as i64,
                    msg_size: r.size as i32,
                    tags_code: 0,
                    store_timestamp: batch.store_timestamp,
                    queue_offset: r.queue_offset,
                    sys_flag: r.sys_flag,
                    keys_raw: None,
                    uniq_key_raw: None,
                };
                let req = with_properties(facts, props, &self.delay_levels);
                self.dispatch_one(&req, run)?;
                pos = r.end();
                done += 1;
            }
            Ok(())
        })();
        batch.next += done;
        result.map(|()| pos)
    }

    /// Decodes `[from, end)` from the commit log and dispatches each record. Returns where the
    /// walk stopped.
    fn decode_range(&self, log: &CommitLog, run: &mut Run<'_>, from: u64, end: u64) -> Result<u64> {
        log.for_each_record(from, end, |rec, _offset| {
            let req = dispatch_request(rec, &self.delay_levels);
            self.dispatch_one(&req, run)
        })
    }

    /// Hands one record to the consume queue and the index, then publishes the reput offset
    /// (per record, so readers and the checkpoint see progress).
    fn dispatch_one(&self, req: &DispatchRequest<'_>, run: &mut Run<'_>) -> Result<()> {
        // The topic is checked once for a record that goes to its consume queue.
        let to_cq = req.goes_to_cq();
        if !to_cq && req.undispatchable() {
            self.note_undispatchable(req.topic, req.commitlog_offset);
        }
        if to_cq && (0..=self.max_queue_id).contains(&req.queue_id) {
            let q = run.queues.get(&self.cq, req.topic, req.queue_id)?;
            let unit = CqUnit {
                phy_offset: req.commitlog_offset,
                size: req.msg_size,
                tags_code: req.tags_code,
            };
            if q.put(unit, req.queue_offset)? {
                run.queues.last_ts = req.store_timestamp;
            }
        }
        let end = req.commitlog_offset as u64 + req.msg_size as u64;
        match run.index.as_mut() {
            Some(IndexSink::Here(index)) => {
                // The index holds each record's keys back until the next record (`stage`: its
                // slot reads overlap with that record's work), so dispatch is published past
                // a record only once its keys are put: here for the previous one, at the end
                // of the run (`run_until`) for the last.
                if let Err(e) = index.put_staged() {
                    run.staged_end = None;
                    return Err(e);
                }
                if let Some(prev) = run.staged_end.take() {
                    self.reput_from.store(prev, Ordering::Release);
                }
                index.stage(&index_request(req))?;
                run.staged_end = Some(end);
                run.count += 1;
                return Ok(());
            }
            Some(IndexSink::Handoff(keys)) => keys.push(&handoff::RawKeys {
                topic: req.topic,
                phy_offset: req.commitlog_offset,
                store_timestamp: req.store_timestamp,
                sys_flag: req.sys_flag,
                uniq_key: req.uniq_key_raw,
                keys: req.keys_raw,
            })?,
            None => {}
        }
        run.count += 1;
        self.reput_from.store(end, Ordering::Release);
        Ok(())
    }
}

/// What one dispatch run holds: the queues it wrote to, the index writer, the records done.
struct Run<'a> {
    queues: QueueHandles,
    index: Option<IndexSink<'a>>,
    count: u64,
    /// End of the record whose keys the index writer holds back ([`IndexBatch::stage`]):
    /// `reput_from` moves past it once they are put.
    staged_end: Option<u64>,
}

/// Where a run's records go to be indexed.
enum IndexSink<'a> {
    /// The index writer, held by this thread.
    Here(IndexBatch<'a>),
    /// Key hashes handed over to a builder thread.
    Handoff(handoff::KeySender),
}

fn index_request<'a>(req: &DispatchRequest<'a>) -> IndexRequest<'a> {
    IndexRequest {
        topic: req.topic,
        phy_offset: req.commitlog_offset,
        store_timestamp: req.store_timestamp,
        sys_flag: req.sys_flag,
        uniq_key: req.uniq_key(),
        keys: req.keys(),
    }
}

/// The consume queues one dispatch run has written to, looked up in the shared map only the
/// first time (no lock, hash or `Arc` clone per record); they are also the queues whose long
/// polls are woken afterwards. A record's queue is found by its topic (the last one first, then
/// the run's others) and then by its queue id, so interleaved topics and queues cost one short
/// string compare or a few, not a scan of every queue of the run.
#[derive(Debug, Default)]
struct QueueHandles {
    touched: Vec<Arc<ConsumeQueue>>,
    /// The run's topics, each with the index in `touched` of its queues by queue id.
    topics: Vec<TopicQueues>,
    /// Index in `topics` of the last hit.
    last: usize,
    /// Store time of the last record added to a consume queue.
    last_ts: i64,
}

/// One topic's queues in [`QueueHandles`].
#[derive(Debug)]
struct TopicQueues {
    topic: String,
    /// Index in `touched` by queue id ([`NO_HANDLE`]: not looked up yet).
    by_id: Vec<u32>,
}

const NO_HANDLE: u32 = u32::MAX;

impl QueueHandles {
    fn get(
        &mut self,
        cqs: &ConsumeQueueStore,
        topic: &str,
        queue_id: i32,
    ) -> Result<&ConsumeQueue> {
        let qi = usize::try_from(queue_id).map_err(|_| {
            crate::error::Error::invalid("queue_id", format!("{queue_id} is negative"))
        })?;
        let same = |e: &TopicQueues| crate::util::same_name(&e.topic, topic);
        let t = match self.topics.get(self.last) {
            Some(e) if same(e) => self.last,
            _ => match self.topics.iter().position(same) {
                Some(t) => t,
                None => {
                    self.topics.push(TopicQueues {
                        topic: topic.to_string(),
                        by_id: Vec::new(),
                    });
                    self.topics.len() - 1
                }
            },
        };
        self.last = t;
        let entry = &mut self.topics[t];
        if entry.by_id.len() <= qi {
            entry.by_id.resize(qi + 1, NO_HANDLE);
        }
        let mut h = entry.by_id[qi];
        if h == NO_HANDLE {
            self.touched.push(cqs.find_or_create(topic, queue_id)?);
            h = u32::try_from(self.touched.len() - 1).map_err(|_| {
                crate::error::Error::invalid("dispatch", "too many consume queues in one run")
            })?;
            entry.by_id[qi] = h;
        }
        self.touched.get(h as usize).map(|q| &**q).ok_or_else(|| {
            crate::error::Error::invalid("dispatch", "consume queue handle vanished")
        })
    }
}
