//! Recovery's check of consume-queue units against the records they name (issue 14 item 5).
//!
//! `repair_cq_tails` checks only each queue's last units. A unit in the middle of a file that
//! points at another record (a bit flip, a stray write, a file pieced together from two stores)
//! would survive it and make `get_message` return the wrong message. Here recovery checks, for
//! every queue that has records in the **recovery window** (the commit log the recovery scan
//! read: the last three files after a clean shutdown, or only what lies past its recorded end
//! with `normal_recovery_from_checkpoint`; from the checkpoint's window after a crash),
//! every unit from the queue offset of the first such record to the queue's end: the unit must
//! name a record of that topic and queue with that queue offset and size. The queue is cut at
//! the first unit that does not (pre-fill units are accepted), and recovery refills it from the
//! commit log like any queue that lost units. Units naming records before the window are not
//! read (that is `rocketstore rebuild-indexes`' job); the cost is one header decode (no CRC) per
//! unit of the window.

use std::collections::HashMap;

use rocketstore_format::RecordView;

use crate::commitlog::{CommitLog, LogFiles};
use crate::consume_queue::ConsumeQueueStore;
use crate::error::Result;

use super::by_topic::ByTopic;

/// Units checked per batch (their records' heads are prefetched together).
const CHECK_BATCH: usize = 32;

/// The first queue offset of each queue among the records the recovery scan read.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct Window {
    /// Topic -> queue id -> first queue offset (looked up by the record's `&str` topic: no
    /// allocation per record).
    first: ByTopic<QueueFirsts>,
}

impl Window {
    /// Notes one record that goes to a consume queue (the caller checked:
    /// [`super::split_scan`]'s `Notes::note`).
    pub(crate) fn note(&mut self, rec: &RecordView<'_>) {
        // Scan order is commit log order, so the first record of a queue has its lowest offset.
        self.first
            .entry(rec.topic)
            .note(rec.queue_id, rec.queue_offset);
    }

    /// Adds the notes of another part of the same scan (the minimum per queue, as if one scan
    /// had seen both parts' records).
    pub(crate) fn merge(&mut self, other: Window) {
        for (topic, queues) in other.first {
            let mine = self.first.entry(&topic);
            for (qid, theirs) in queues.iter() {
                mine.note(qid, theirs);
            }
        }
    }
}

/// Queue ids below this are kept in a vector; larger ones (a foreign store's) in a map.
const VEC_QUEUE_IDS: usize = 4096;

/// The lowest queue offset noted per queue id of one topic.
#[derive(Debug, Default, Clone, PartialEq)]
struct QueueFirsts {
    by_id: Vec<Option<i64>>,
    large: HashMap<i32, i64>,
}

impl QueueFirsts {
    fn note(&mut self, queue_id: i32, queue_offset: i64) {
        match usize::try_from(queue_id) {
            Ok(q) if q < VEC_QUEUE_IDS => {
                if self.by_id.len() <= q {
                    self.by_id.resize(q + 1, None);
                }
                if let Some(v) = self.by_id.get_mut(q) {
                    *v = Some(v.map_or(queue_offset, |v| v.min(queue_offset)));
                }
            }
            _ => {
                let v = self.large.entry(queue_id).or_insert(queue_offset);
                *v = (*v).min(queue_offset);
            }
        }
    }

    /// Every queue id noted and its lowest queue offset.
    fn iter(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        let small = self
            .by_id
            .iter()
            .enumerate()
            .filter_map(|(q, v)| Some((i32::try_from(q).ok()?, (*v)?)));
        small.chain(self.large.iter().map(|(&q, &v)| (q, v)))
    }
}

/// Cuts every queue of `window` at its first unit (from the window's first queue offset) that
/// does not name its record. Returns the queues cut (the caller refills them).
pub(crate) fn cut_mismatched_units(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    window: &Window,
) -> Result<Vec<(String, i32)>> {
    let min_phy = i64::try_from(log.min_offset()).unwrap_or(i64::MAX);
    let mut cut = Vec::new();
    let mut files = LogFiles::default();
    let queues = window
        .first
        .iter()
        .flat_map(|(t, qs)| qs.iter().map(move |(qid, first)| (t, qid, first)));
    for (topic, qid, first) in queues {
        let Some(q) = cqs.get(topic, qid) else {
            continue;
        };
        let mut off = first.max(q.min_offset());
        'queue: while off < q.max_offset() {
            // A batch of units, the heads of their records loaded into the cache first: the
            // records of one queue lie pages apart, so each check is a cache (and TLB) miss
            // that the prefetches overlap instead of taking one after the other.
            let units = q.units_from(off, CHECK_BATCH);
            if units.is_empty() {
                break;
            }
            for (_, unit) in &units {
                if unit.phy_offset >= min_phy {
                    files.prefetch_head(log, unit.phy_offset as u64);
                }
            }
            for (o, unit) in units {
                let ok = unit.is_prefill()
                    || (unit.phy_offset >= 0 && unit.phy_offset < min_phy)
                    || super::queues::unit_matches(log, &q, o, &unit);
                if !ok {
                    q.truncate_to_offset(o)?;
                    cut.push((topic.clone(), qid));
                    break 'queue;
                }
                off = o + 1;
            }
        }
    }
    cut.sort();
    Ok(cut)
}
