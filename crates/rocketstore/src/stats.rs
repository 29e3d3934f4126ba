//! Store statistics (RocketMQ's `StoreStatsService`): counters updated by puts and reads, and
//! the [`StoreStats`] snapshot returned by `Store::stats`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::message::GetResult;
use crate::util::lock;

/// RocketMQ's put latency buckets (`StoreStatsService.putMessageDistributeTime`): bucket `i`
/// counts puts with `limit[i-1] <= ms < limit[i]`, bucket 0 puts that took `<= 0` ms.
pub(crate) const LATENCY_BUCKETS: [(u64, &str); 13] = [
    (0, "[<=0ms]"),
    (10, "[0~10ms]"),
    (50, "[10~50ms]"),
    (100, "[50~100ms]"),
    (200, "[100~200ms]"),
    (500, "[200~500ms]"),
    (1000, "[500ms~1s]"),
    (2000, "[1~2s]"),
    (3000, "[2~3s]"),
    (4000, "[3~4s]"),
    (5000, "[4~5s]"),
    (10_000, "[5~10s]"),
    (u64::MAX, "[10s~]"),
];

/// The bucket of a put that took `ms` milliseconds.
pub(crate) fn latency_bucket(ms: u64) -> usize {
    if ms == 0 {
        return 0;
    }
    LATENCY_BUCKETS
        .iter()
        .skip(1)
        .position(|(limit, _)| ms < *limit)
        .map_or(LATENCY_BUCKETS.len() - 1, |i| i + 1)
}

/// Counters kept since open.
#[derive(Debug, Default)]
pub(crate) struct StatsCounters {
    put_latency: [AtomicU64; 13],
    put_latency_max_ms: AtomicU64,
    get_found: AtomicU64,
    get_miss: AtomicU64,
    unit_mismatches: AtomicU64,
    get: Mutex<HashMap<String, (u64, u64)>>,
}

impl StatsCounters {
    /// One put (batch) that spent `elapsed` in the commit log append.
    pub(crate) fn record_put(&self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if let Some(c) = self.put_latency.get(latency_bucket(ms)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.put_latency_max_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// One read of a queue (`get_message`, or one round of `pull`).
    pub(crate) fn record_get(&self, topic: &str, r: &GetResult) {
        let bytes: u64 = r.messages.iter().map(|m| m.store_size.max(0) as u64).sum();
        self.record_get_counts(topic, r.messages.len(), bytes);
    }

    /// Counts one get of `n` messages of `bytes` record bytes in all (`n == 0`: a miss).
    pub(crate) fn record_get_counts(&self, topic: &str, n: usize, bytes: u64) {
        if n == 0 {
            self.get_miss.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.get_found.fetch_add(1, Ordering::Relaxed);
        let mut g = lock(&self.get);
        let e = match g.get_mut(topic) {
            Some(e) => e,
            None => g.entry(topic.to_string()).or_default(),
        };
        e.0 += n as u64;
        e.1 += bytes;
    }

    /// `n` consume queue units skipped by a read because their record was not theirs.
    pub(crate) fn record_unit_mismatches(&self, n: u64) {
        if n > 0 {
            self.unit_mismatches.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Fills the counter fields of `s`.
    pub(crate) fn fill(&self, s: &mut StoreStats) {
        let mut get: Vec<(String, u64, u64)> = lock(&self.get)
            .iter()
            .map(|(t, (n, b))| (t.clone(), *n, *b))
            .collect();
        get.sort();
        s.get_by_topic = get;
        s.put_latency = LATENCY_BUCKETS
            .iter()
            .zip(&self.put_latency)
            .map(|((_, label), n)| ((*label).to_string(), n.load(Ordering::Relaxed)))
            .collect();
        s.put_latency_max_ms = self.put_latency_max_ms.load(Ordering::Relaxed);
        s.get_found = self.get_found.load(Ordering::Relaxed);
        s.get_miss = self.get_miss.load(Ordering::Relaxed);
        s.cq_unit_mismatches = self.unit_mismatches.load(Ordering::Relaxed);
    }
}

/// Store statistics (RocketMQ `StoreStatsService`), a snapshot taken by `Store::stats`.
/// Counters start at zero when the store is opened.
///
/// Plain fields only (integers, strings, vectors of tuples), so bindings can turn it into a
/// dictionary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StoreStats {
    /// `(topic, messages, bytes)` put since open, by topic, sorted (RocketMQ
    /// `putMessageTopicTimesTotal` / `putMessageTopicSizeTotal`). Bytes are whole records.
    pub put_by_topic: Vec<(String, u64, u64)>,
    /// `(topic, messages, bytes)` returned by `get_message` / `pull` since open, sorted
    /// (RocketMQ `getMessageTransferedMsgCount` per topic).
    pub get_by_topic: Vec<(String, u64, u64)>,
    /// Reads that returned messages (RocketMQ `getMessageTimesTotalFound`).
    pub get_found: u64,
    /// Reads that returned none, whatever the status (RocketMQ `getMessageTimesTotalMiss`).
    pub get_miss: u64,
    /// Consume queue units that `get_message` / `pull` skipped because the record they name
    /// has another topic, queue id or queue offset (a damaged or foreign consume queue); the
    /// record is never served as that queue's message. Arrow reads raise a `Corruption` error
    /// instead.
    pub cq_unit_mismatches: u64,
    /// Put latency distribution: `(bucket label, puts)` in RocketMQ's 13 buckets, from
    /// `"[<=0ms]"`, `"[0~10ms]"`, `"[10~50ms]"` ... to `"[10s~]"`. One entry per `put` /
    /// `put_batch` call, timed around the commit log append (including a SYNC_FLUSH wait).
    pub put_latency: Vec<(String, u64)>,
    /// The slowest put in ms (RocketMQ `putMessageEntireTimeMax`).
    pub put_latency_max_ms: u64,
    /// Flushes that advanced the durable offset.
    pub flush_count: u64,
    /// Commit log bytes written but not yet known durable (`wrote - flushed`).
    pub flush_behind_bytes: u64,
    /// Commit log bytes whose writeback to disk was started ahead of a flush since open
    /// (`flush_commit_log_writeback_bytes`); they are durable only once flushed.
    pub writeback_started_bytes: u64,
    /// Commit log bytes not yet dispatched to consume queues and index files (RocketMQ
    /// `dispatchBehindBytes`).
    pub dispatch_behind_bytes: u64,
    /// Records dispatched since open.
    pub dispatched_messages: u64,
    /// Commit log files.
    pub commitlog_files: usize,
    /// Consume queues (topic, queue id pairs).
    pub consume_queues: usize,
    /// Consume queue files, over all queues.
    pub consume_queue_files: usize,
    /// Index files.
    pub index_files: usize,
    /// Pulls waiting for messages.
    pub waiting_pulls: usize,
    /// Commit log files the writer created itself (the allocator was not ahead).
    pub writer_created_files: u64,
    /// Delayed messages re-delivered to their real topic since open (schedule service).
    pub schedule_delivered: u64,
    /// Schedule progress per delay level: `(level, next offset, queue max offset)`; the
    /// difference is the backlog (RocketMQ's `scheduleMessageOffset_<level>` running stat).
    pub schedule_progress: Vec<(i32, i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_rocketmq() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(1), 1);
        assert_eq!(latency_bucket(9), 1);
        assert_eq!(latency_bucket(10), 2);
        assert_eq!(latency_bucket(49), 2);
        assert_eq!(latency_bucket(50), 3);
        assert_eq!(latency_bucket(999), 6);
        assert_eq!(latency_bucket(1000), 7);
        assert_eq!(latency_bucket(9_999), 11);
        assert_eq!(latency_bucket(10_000), 12);
        assert_eq!(latency_bucket(u64::MAX), 12);
    }
}
