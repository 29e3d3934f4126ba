//! Key lookups over the records the index files may lack, for read-only opens of a store that
//! was not shut down cleanly (issue 14 item 2).
//!
//! A writer that died leaves index files that may stop short of the commit log's end (the index
//! is built after the append) and that the checkpoint does not vouch for. A writable open
//! rebuilds them; a read-only open may not write, so it keeps every index file it finds (each
//! hit is checked against its record by the query: topic equal and the key among the record's
//! `KEYS` tokens or its `UNIQ_KEY`) and covers the records from where the index may stop with
//! this in-memory map: `topic#key` -> commit log offsets, built on the first key query by one
//! pass over `[from, to)` (no CRC pass), then kept for the life of the store.
//!
//! `from` is the smaller of the last index file's end offset and the start of the commit log file
//! recovery scanned from (the window a writable recovery re-dispatches), so the map covers
//! exactly what a writable open would index again.

use std::collections::HashMap;
use std::sync::OnceLock;

use rocketstore_format::sysflag;

use crate::commitlog::CommitLog;
use crate::dispatch::dispatch_request;
use crate::message::QueryResult;
use rocketstore_format::index::index_key;

/// The in-memory key map of `[from, to)`.
#[derive(Debug)]
pub(crate) struct TailIndex {
    from: u64,
    to: u64,
    map: OnceLock<HashMap<String, Vec<i64>>>,
}

impl TailIndex {
    pub(crate) fn new(from: u64, to: u64) -> Self {
        Self {
            from,
            to,
            map: OnceLock::new(),
        }
    }

    fn build(&self, log: &CommitLog) -> HashMap<String, Vec<i64>> {
        let mut map: HashMap<String, Vec<i64>> = HashMap::new();
        // A read error ends the pass early: what was read is still served, the index files
        // still answer for the rest.
        let _ = log.for_each_record(self.from.max(log.min_offset()), self.to, |rec, _| {
            let req = dispatch_request(rec, &[]);
            // As IndexService.buildIndex: rollback records are not indexed.
            if sysflag::transaction_type(req.sys_flag) == sysflag::TRANSACTION_ROLLBACK_TYPE {
                return Ok(());
            }
            let mut add = |key: &str| {
                let offsets = map.entry(index_key(req.topic, key)).or_default();
                if offsets.last() != Some(&req.commitlog_offset) {
                    offsets.push(req.commitlog_offset);
                }
            };
            if let Some(u) = req.uniq_key() {
                add(u);
            }
            if let Some(keys) = req.keys() {
                for k in rocketstore_format::keys::index_tokens(keys) {
                    add(k);
                }
            }
            Ok(())
        });
        map
    }

    /// Commit log offsets (ascending) of the records in range indexed under `topic#key`. The
    /// caller checks each record, as for index file hits.
    pub(crate) fn lookup(&self, log: &CommitLog, topic: &str, key: &str) -> Vec<i64> {
        self.map
            .get_or_init(|| self.build(log))
            .get(&index_key(topic, key))
            .cloned()
            .unwrap_or_default()
    }
}

/// The tail map for a read-only open after an unclean shutdown: from the smaller of the last
/// index file's end offset and the start of the file recovery scanned from, to the recovered end.
pub(crate) fn for_recovery(
    log: &CommitLog,
    index: &crate::index::IndexService,
    recovery: &crate::recovery::RecoveryReport,
) -> TailIndex {
    let scan_from = log
        .queue()
        .files()
        .get(recovery.scan_start_file)
        .map_or(recovery.end_offset, |f| f.from());
    let indexed_to = u64::try_from(index.last_end_phy_offset()).unwrap_or(0);
    TailIndex::new(indexed_to.min(scan_from), recovery.end_offset)
}

/// Adds to `result` the records of `tail` indexed under `topic#key` that are stored within
/// `[begin, end]` and really carry the key (topic equal, key among the `KEYS` tokens or equal
/// to `UNIQ_KEY`), without duplicates; keeps the newest `max_num`, ascending offset.
pub(crate) fn add_tail_hits(
    log: &CommitLog,
    tail: &TailIndex,
    (topic, key): (&str, &str),
    max_num: usize,
    (begin, end): (i64, i64),
    result: &mut QueryResult,
) {
    for phy in tail.lookup(log, topic, key) {
        if result.messages.iter().any(|m| m.commitlog_offset() == phy) {
            continue;
        }
        let Some(rec) = u64::try_from(phy).ok().and_then(|p| log.record_at(p)) else {
            continue;
        };
        let Ok(m) = rec.decode() else {
            continue;
        };
        let matches = m.topic == topic && (m.uniq_key() == Some(key) || m.keys().contains(&key));
        if matches && m.store_timestamp >= begin && m.store_timestamp <= end {
            result.messages.push(m);
        }
    }
    result.messages.sort_by_key(|m| m.commitlog_offset());
    let max_num = max_num.max(1);
    if result.messages.len() > max_num {
        let extra = result.messages.len() - max_num;
        result.messages.drain(..extra);
    }
}
