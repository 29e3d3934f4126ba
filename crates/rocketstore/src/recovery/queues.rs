//! Consume queue repair after the commit log end is known (reliability.md §9 items 7, 10):
//! - [`repair_cq_tails`]: a consume queue's last unit must point at a record of that queue with
//!   that queue offset; units that do not are cut off (they are re-derived from the commit log).
//! - [`backfill_queues`]: a queue whose units were lost (a damaged end, a deleted file, a cut-off
//!   tail) is refilled from the commit log before dispatch resumes, so recovery never fails
//!   with a consume queue gap and never leaves a hole.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rocketstore_format::{decode_record, CqUnit, DecodeOptions, Decoded};

use crate::commitlog::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueue, ConsumeQueueStore};
use crate::dispatch::dispatch_request;
use crate::error::Result;

use super::by_topic::ByTopic;

/// The highest queue id a topic may have (`max_queue_nums_per_topic - 1`).
pub(crate) fn max_queue_id(cfg: &StoreConfig) -> i32 {
    i32::try_from(cfg.max_queue_nums_per_topic).unwrap_or(i32::MAX) - 1
}

/// The highest queue offset of each queue among the records recovery scanned: a queue whose
/// end is at or below it lost units (a deleted or truncated consume queue file) that lie in the
/// scanned range, and is refilled by [`backfill_queues`].
#[derive(Debug, Default)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct QueueTails {
    /// Topic -> the highest queue offset seen per queue id (-1: none).
    seen: ByTopic<Vec<i64>>,
}

impl QueueTails {
    /// Notes one record that goes to a consume queue (the caller checked:
    /// [`super::split_scan`]'s `Notes::note`), with a queue id up to 65,536.
    pub(crate) fn note(&mut self, rec: &rocketstore_format::RecordView<'_>) {
        let Ok(qid) = usize::try_from(rec.queue_id) else {
            return;
        };
        if qid > 65_536 {
            return;
        }
        let slots = self.seen.entry(rec.topic);
        if slots.len() <= qid {
            slots.resize(qid + 1, -1);
        }
        if let Some(s) = slots.get_mut(qid) {
            *s = (*s).max(rec.queue_offset);
        }
    }

    /// Adds the notes of another part of the same scan (the maximum per queue, as if one
    /// scan had seen both parts' records).
    pub(crate) fn merge(&mut self, other: QueueTails) {
        for (topic, theirs) in other.seen {
            let slots = self.seen.entry(&topic);
            if slots.len() < theirs.len() {
                slots.resize(theirs.len(), -1);
            }
            for (s, t) in slots.iter_mut().zip(theirs) {
                *s = (*s).max(t);
            }
        }
    }

    /// Queues (with a valid queue id) whose consume queue ends at or before a scanned record.
    pub(crate) fn lagging(&self, cqs: &ConsumeQueueStore, max_qid: i32) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for (topic, slots) in self.seen.iter() {
            for (qid, &max_seen) in slots.iter().enumerate() {
                let Ok(qid) = i32::try_from(qid) else {
                    continue;
                };
                if max_seen < 0 || qid > max_qid {
                    continue;
                }
                let behind = cqs
                    .get(topic, qid)
                    .is_none_or(|q| max_seen >= q.max_offset());
                if behind {
                    out.push((topic.clone(), qid));
                }
            }
        }
        out
    }
}

/// True if `unit` at `cq_offset` of `q` points at a record of that queue with that queue
/// offset and size.
pub(crate) fn unit_matches(
    log: &CommitLog,
    q: &ConsumeQueue,
    cq_offset: i64,
    unit: &CqUnit,
) -> bool {
    if unit.phy_offset < 0 || unit.size <= 0 {
        return false;
    }
    let Some(r) = log.record_at_sized(unit.phy_offset as u64, unit.size as usize) else {
        return false;
    };
    let opts = DecodeOptions {
        check_crc: false,
        expected_physical_offset: Some(unit.phy_offset),
        ..DecodeOptions::default()
    };
    match decode_record(r.bytes(), &opts) {
        Ok(Decoded::Message(v)) => {
            v.topic == q.topic()
                && v.queue_id == q.queue_id()
                && v.queue_offset == cq_offset
                && v.total_size == unit.size
        }
        _ => false,
    }
}

/// Cuts off every consume queue's trailing units that do not point at their record (after
/// commit log recovery). Returns the queues cut.
pub(crate) fn repair_cq_tails(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
) -> Result<Vec<(String, i32)>> {
    let mut cut = Vec::new();
    // Units below the commit log's minimum point at deleted files (cleanup): they are expected.
    let min = i64::try_from(log.min_offset()).unwrap_or(i64::MAX);
    let good = |q: &ConsumeQueue, off: i64, u: &CqUnit| {
        u.is_prefill() || (u.phy_offset >= 0 && u.phy_offset < min) || unit_matches(log, q, off, u)
    };
    for q in cqs.all() {
        let Some((last, unit)) = q.last_unit() else {
            continue;
        };
        if good(&q, last, &unit) {
            continue;
        }
        let mut keep = last;
        while keep > q.min_offset() {
            let prev = keep - 1;
            match q.get(prev) {
                Some(u) if good(&q, prev, &u) => break,
                Some(_) => keep = prev,
                None => break,
            }
        }
        q.truncate_to_offset(keep)?;
        cut.push((q.topic().to_string(), q.queue_id()));
    }
    Ok(cut)
}

/// Refills queues that lost units, from the commit log, up to `from` (where dispatch resumes):
/// the queues in `suspects`, queues whose consume queue reported a damaged end, and queues for
/// which a record in `[from, checked_to)` carries a queue offset beyond the queue's end (the
/// recovery scan already found those in the range it read, see [`QueueTails`]). A queue that
/// cannot be refilled without a hole is rebuilt from the commit log's start. Returns the number
/// of such queues and the units written.
pub(crate) fn backfill_queues(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    cfg: &StoreConfig,
    suspects: Vec<(String, i32)>,
    from: u64,
    checked_to: u64,
) -> Result<(usize, u64)> {
    let delay_levels = cfg.delay_levels();
    let max_qid = max_queue_id(cfg);
    let mut lagging: HashSet<(String, i32)> = suspects.into_iter().collect();
    for q in cqs.all() {
        if q.damaged_tail() {
            lagging.insert((q.topic().to_string(), q.queue_id()));
        }
    }
    let min = log.min_offset();
    log.for_each_record(from.max(min), checked_to, |rec, _| {
        let req = dispatch_request(rec, &delay_levels);
        if !req.goes_to_cq() || !(0..=max_qid).contains(&req.queue_id) {
            return Ok(());
        }
        let behind = match cqs.get(req.topic, req.queue_id) {
            Some(q) => {
                i64::from(req.msg_size).saturating_add(req.commitlog_offset) > q.max_physic_offset()
                    && req.queue_offset > q.max_offset()
            }
            None => req.queue_offset > 0,
        };
        if behind {
            lagging.insert((req.topic.to_string(), req.queue_id));
        }
        Ok(())
    })?;
    if lagging.is_empty() {
        return Ok((0, 0));
    }
    let start_of = |key: &(String, i32)| -> u64 {
        cqs.get(&key.0, key.1)
            .map(|q| q.max_physic_offset())
            .filter(|m| *m >= 0)
            .map_or(min, |m| (m as u64).max(min))
    };
    let mut written = 0;
    let mut rebuild: HashSet<(String, i32)> = HashSet::new();
    let pass = |keys: &HashSet<(String, i32)>,
                start: u64,
                rebuild: &mut HashSet<(String, i32)>|
     -> Result<u64> {
        let mut n = 0;
        let mut queues: HashMap<(String, i32), Arc<ConsumeQueue>> = HashMap::new();
        log.for_each_record(start, from.max(start), |rec, _| {
            let req = dispatch_request(rec, &delay_levels);
            if !req.goes_to_cq() {
                return Ok(());
            }
            let key = (req.topic.to_string(), req.queue_id);
            if !keys.contains(&key) || rebuild.contains(&key) {
                return Ok(());
            }
            let q = match queues.get(&key) {
                Some(q) => Arc::clone(q),
                None => {
                    let q = cqs.find_or_create(req.topic, req.queue_id)?;
                    queues.insert(key.clone(), Arc::clone(&q));
                    q
                }
            };
            let unit = CqUnit {
                phy_offset: req.commitlog_offset,
                size: req.msg_size,
                tags_code: req.tags_code,
            };
            let rec_end = i64::from(req.msg_size).saturating_add(req.commitlog_offset);
            if rec_end <= q.max_physic_offset() || req.queue_offset < q.max_offset() {
                return Ok(());
            }
            if req.queue_offset > q.max_offset() && q.file_count() > 0 {
                // Units in between are gone from the commit log's scanned range.
                rebuild.insert(key);
                return Ok(());
            }
            if q.put(unit, req.queue_offset)? {
                n += 1;
            }
            Ok(())
        })?;
        Ok(n)
    };
    let start = lagging.iter().map(start_of).min().unwrap_or(min);
    written += pass(&lagging, start, &mut rebuild)?;
    if !rebuild.is_empty() {
        for (topic, qid) in &rebuild {
            if let Some(q) = cqs.get(topic, *qid) {
                q.destroy()?;
            }
        }
        let keys = std::mem::take(&mut rebuild);
        written += pass(&keys, min, &mut rebuild)?;
    }
    Ok((lagging.len(), written))
}
