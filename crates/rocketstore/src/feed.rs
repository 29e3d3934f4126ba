//! The dispatch feed: for each appended batch the writer hands the dispatcher, in memory, what
//! dispatch needs of each record it just wrote (offset, size, queue, queue offset, store time,
//! sys flag, topic and raw properties), so dispatch does not decode the records back from the
//! mapping (at 1-4 KiB that re-read was cache misses on every record).
//!
//! The feed is a hint, never the source of truth: the dispatcher uses a fed record only when it
//! starts exactly where dispatch stands, skips fed records below that, and decodes from the
//! commit log whatever the feed does not cover (recovery, rebuild, a batch dropped because the
//! feed was full, the blank record that closes a file). The consume queue and index bytes are
//! the same either way: both paths build the same `DispatchRequest` with the same code.
//!
//! Invariants: batches are pushed under the commit log's put lock, so they are in commit log
//! order; the feed is cleared whenever the commit log is truncated; it holds at most
//! [`MAX_RECORDS`] records and [`MAX_BYTES`] bytes of properties (beyond that a batch is simply
//! not fed).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;

use crate::util::lock;

/// Records held by the feed at most (about 40 bytes each).
pub(crate) const MAX_RECORDS: usize = 256 * 1024;
/// Bytes of properties and topics held by the feed at most.
pub(crate) const MAX_BYTES: usize = 32 << 20;
/// Emptied batches kept for reuse (their buffers stay allocated and faulted in).
const SPARE_BATCHES: usize = 8;
/// Topic entries of a batch searched for a record's topic before a new entry is added.
const TOPIC_LOOKBACK: usize = 16;
/// Bytes reserved for topic names beside a batch's properties.
const TOPIC_ROOM: usize = 4096;

/// One record as the writer wrote it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FedRecord {
    pub(crate) phy: u64,
    pub(crate) size: u32,
    pub(crate) queue_id: i32,
    pub(crate) sys_flag: i32,
    pub(crate) queue_offset: i64,
    /// Index in [`FedBatch::topics`].
    pub(crate) topic: u32,
    /// Range of the raw properties in [`FedBatch::bytes`].
    pub(crate) props: (u32, u32),
}

impl FedRecord {
    /// Commit log offset just past this record.
    pub(crate) fn end(&self) -> u64 {
        self.phy + u64::from(self.size)
    }
}

/// The records of one append, in commit log order.
#[derive(Debug, Default)]
pub(crate) struct FedBatch {
    pub(crate) store_timestamp: i64,
    /// The batch's properties buffer, then its topics.
    pub(crate) bytes: Vec<u8>,
    /// Ranges of the topics in `bytes`.
    pub(crate) topics: Vec<Range<u32>>,
    pub(crate) records: Vec<FedRecord>,
    /// Records before this one were dispatched.
    pub(crate) next: usize,
    /// Base of the properties ranges the writer passes (its own buffer) in `bytes`.
    props_base: u32,
}

impl FedBatch {
    /// Notes a record the writer wrote. `r.props` is its range in the properties buffer given
    /// to [`Feed::start`] and `r.topic` is ignored: records of one topic share one entry of
    /// [`FedBatch::topics`] while it is among the last [`TOPIC_LOOKBACK`] entries.
    pub(crate) fn push(&mut self, topic: &str, mut r: FedRecord) {
        // Interleaved topics (round-robin producers) reuse their entry: the topic is looked up
        // among the last few entries before it is added again, so `bytes` does not grow (and
        // reallocate) per record.
        let known = self.topics.iter().rev().take(TOPIC_LOOKBACK).position(|t| {
            self.bytes.get(t.start as usize..t.end as usize) == Some(topic.as_bytes())
        });
        r.topic = match known {
            Some(back) => (self.topics.len() - 1 - back) as u32,
            None => {
                let start = self.bytes.len() as u32;
                self.bytes.extend_from_slice(topic.as_bytes());
                self.topics.push(start..self.bytes.len() as u32);
                (self.topics.len() - 1) as u32
            }
        };
        r.props = (self.props_base + r.props.0, self.props_base + r.props.1);
        self.records.push(r);
    }

    /// The topic of a record (`None` only for a record not pushed through [`FedBatch::push`]).
    pub(crate) fn topic(&self, r: &FedRecord) -> Option<&[u8]> {
        let t = self.topics.get(r.topic as usize)?;
        self.bytes.get(t.start as usize..t.end as usize)
    }

    /// The raw properties of a record.
    pub(crate) fn props(&self, r: &FedRecord) -> Option<&[u8]> {
        self.bytes.get(r.props.0 as usize..r.props.1 as usize)
    }

    /// Records not yet dispatched.
    pub(crate) fn rest(&self) -> &[FedRecord] {
        self.records.get(self.next..).unwrap_or(&[])
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.topics.clear();
        self.records.clear();
        self.next = 0;
        self.props_base = 0;
    }
}

#[derive(Debug, Default)]
struct FeedState {
    batches: VecDeque<FedBatch>,
    records: usize,
    bytes: usize,
    spare: Vec<FedBatch>,
}

/// The queue of fed batches between the writer and the dispatcher.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    state: Mutex<FeedState>,
}

impl Feed {
    /// A batch to fill for an append of `records` records whose properties are `props`, or
    /// `None` when the feed is full (dispatch then decodes that append from the commit log).
    pub(crate) fn start(
        &self,
        store_timestamp: i64,
        records: usize,
        props: &[u8],
    ) -> Option<FedBatch> {
        let mut st = lock(&self.state);
        if st.records + records > MAX_RECORDS || st.bytes + props.len() > MAX_BYTES {
            return None;
        }
        let mut b = st.spare.pop().unwrap_or_default();
        drop(st);
        b.store_timestamp = store_timestamp;
        b.props_base = b.bytes.len() as u32;
        // Room for the topics too: growing the buffer for the first topic would copy all the
        // properties into fresh pages.
        b.bytes.reserve(props.len() + TOPIC_ROOM);
        b.bytes.extend_from_slice(props);
        b.records.reserve(records);
        Some(b)
    }

    /// Queues a filled batch (called under the put lock, so batches stay in log order).
    pub(crate) fn push(&self, b: FedBatch) {
        let mut st = lock(&self.state);
        if b.records.is_empty() {
            Self::recycle_locked(&mut st, b);
            return;
        }
        st.records += b.records.len();
        st.bytes += b.bytes.len();
        st.batches.push_back(b);
    }

    /// The oldest batch, taken out of the feed (give it back with [`Feed::give_back`]).
    pub(crate) fn take(&self) -> Option<FedBatch> {
        let mut st = lock(&self.state);
        let b = st.batches.pop_front()?;
        st.records -= b.records.len();
        st.bytes -= b.bytes.len();
        Some(b)
    }

    /// Returns a batch taken with [`Feed::take`]: to the front of the feed if records are left
    /// to dispatch, else to the spare list.
    pub(crate) fn give_back(&self, b: FedBatch) {
        let mut st = lock(&self.state);
        if b.rest().is_empty() {
            Self::recycle_locked(&mut st, b);
        } else {
            st.records += b.records.len();
            st.bytes += b.bytes.len();
            st.batches.push_front(b);
        }
    }

    /// Drops every queued batch (the commit log was truncated: fed offsets may be rewritten).
    pub(crate) fn clear(&self) {
        let mut st = lock(&self.state);
        while let Some(b) = st.batches.pop_front() {
            Self::recycle_locked(&mut st, b);
        }
        st.records = 0;
        st.bytes = 0;
    }

    fn recycle_locked(st: &mut FeedState, mut b: FedBatch) {
        if st.spare.len() < SPARE_BATCHES && b.bytes.capacity() <= MAX_BYTES / 4 {
            b.clear();
            st.spare.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        phy: u64,
        size: u32,
        queue_id: i32,
        queue_offset: i64,
        p0: usize,
        p1: usize,
    ) -> FedRecord {
        FedRecord {
            phy,
            size,
            queue_id,
            sys_flag: 0,
            queue_offset,
            topic: 0,
            props: (p0 as u32, p1 as u32),
        }
    }

    #[test]
    fn batches_keep_order_topics_and_props() {
        let feed = Feed::default();
        let props = b"TAGS\x01a\x02KEYS\x01k\x02";
        let mut b = feed.start(7, 2, props).unwrap();
        b.push("T1", rec(100, 50, 1, 3, 0, 7));
        b.push("T1", rec(150, 60, 2, 4, 7, props.len()));
        feed.push(b);
        let mut b = feed.start(8, 1, b"").unwrap();
        b.push("T2", rec(210, 40, 0, 0, 0, 0));
        feed.push(b);

        let mut first = feed.take().unwrap();
        assert_eq!(first.store_timestamp, 7);
        assert_eq!(first.topics.len(), 1);
        let r = first.rest()[1];
        assert_eq!((r.phy, r.end()), (150, 210));
        assert_eq!(first.topic(&r), Some(&b"T1"[..]));
        assert_eq!(first.props(&r), Some(&b"KEYS\x01k\x02"[..]));
        first.next = 1;
        feed.give_back(first);
        let again = feed.take().unwrap();
        assert_eq!(again.rest().len(), 1);
        feed.give_back(FedBatch { next: 2, ..again });
        let mut second = feed.take().unwrap();
        assert_eq!(second.topic(&second.rest()[0]), Some(&b"T2"[..]));
        second.next = 1;
        feed.give_back(second);
        assert!(feed.take().is_none());
    }

    #[test]
    fn interleaved_topics_share_their_entries() {
        let feed = Feed::default();
        let mut b = feed.start(1, 8, b"").unwrap();
        let names = ["T0", "T1", "T2", "T3"];
        for i in 0..8u64 {
            b.push(names[i as usize % 4], rec(i * 10, 10, 0, 0, 0, 0));
        }
        assert_eq!(b.topics.len(), 4);
        for (i, r) in b.rest().iter().enumerate() {
            assert_eq!(b.topic(r), Some(names[i % 4].as_bytes()));
        }
        // More distinct topics than the lookback: every record still names its own topic.
        let many: Vec<String> = (0..2 * TOPIC_LOOKBACK).map(|t| format!("M{t}")).collect();
        let mut b = feed.start(2, 2 * many.len(), b"").unwrap();
        for round in 0..2 {
            for (t, name) in many.iter().enumerate() {
                b.push(name, rec((round * many.len() + t) as u64, 1, 0, 0, 0, 0));
            }
        }
        for (i, r) in b.rest().iter().enumerate() {
            assert_eq!(b.topic(r), Some(many[i % many.len()].as_bytes()));
        }
    }

    #[test]
    fn a_full_feed_feeds_nothing_and_clear_empties_it() {
        let feed = Feed::default();
        let b = feed.start(1, MAX_RECORDS, b"").unwrap();
        let mut b2 = b;
        for i in 0..MAX_RECORDS as u64 {
            b2.push("T", rec(i * 10, 10, 0, 0, 0, 0));
        }
        feed.push(b2);
        assert!(feed.start(1, 1, b"").is_none());
        feed.clear();
        assert!(feed.take().is_none());
        assert!(feed.start(1, 1, b"").is_some());
    }
}
