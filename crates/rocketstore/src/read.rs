//! The read path (RocketMQ `DefaultMessageStore.getMessage`, `queryMessage`,
//! `getOffsetInQueueByTime`, ...), as functions over the store's components.

use rocketstore_format::{
    decode_record, index_key_hash_of, property, property_value, property_values, DecodeOptions,
    Decoded, RecordView,
};

use std::sync::Arc;

use crate::commitlog::{CommitLog, LogFiles, RecordRef, PREFETCH_FIXED, PREFETCH_HEAD};
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Subscription;
use crate::index::IndexService;
use crate::message::{GetResult, GetStatus, QueryResult, StoredMessage};
use crate::segment::MappedFile;

/// Read limits taken from the configuration once.
#[derive(Debug, Clone)]
pub(crate) struct ReadLimits {
    mem_bytes: u64,
    mem_count: u64,
    disk_bytes: u64,
    disk_count: u64,
    in_memory_window: u64,
    filter_bytes: u64,
    pub(crate) max_msgs_num_batch: usize,
}

impl ReadLimits {
    pub(crate) fn new(cfg: &StoreConfig) -> Self {
        Self {
            mem_bytes: cfg.max_transfer_bytes_on_message_in_memory,
            mem_count: cfg.max_transfer_count_on_message_in_memory,
            disk_bytes: cfg.max_transfer_bytes_on_message_in_disk,
            disk_count: cfg.max_transfer_count_on_message_in_disk,
            in_memory_window: physical_memory() / 100 * cfg.access_message_in_memory_max_ratio,
            filter_bytes: cfg.max_filter_message_size,
            max_msgs_num_batch: cfg.max_msgs_num_batch as usize,
        }
    }
}

/// Physical memory in bytes (`/proc/meminfo`), or 24 GiB when unknown (RocketMQ's assumption).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|kb| kb.parse::<u64>().ok())
                        .map(|kb| kb * 1024)
                })
        })
        .unwrap_or(24 << 30)
}

/// RocketMQ `isTheBatchFull`.
fn batch_full(
    limits: &ReadLimits,
    size: u64,
    max_msgs: u64,
    max_bytes: u64,
    bytes: u64,
    count: u64,
    in_mem: bool,
) -> bool {
    if bytes == 0 || count == 0 {
        return false;
    }
    if count + 1 > max_msgs || bytes + size > max_bytes {
        return true;
    }
    if in_mem {
        bytes + size > limits.mem_bytes || count > limits.mem_count - 1
    } else {
        bytes + size > limits.disk_bytes || count > limits.disk_count - 1
    }
}

/// What one `getMessage` found: the status and offsets of a [`GetResult`], and one `T` per
/// message taken (see [`get_message_with`]).
#[derive(Debug)]
pub(crate) struct GetOutcome<T> {
    pub(crate) status: GetStatus,
    pub(crate) next_begin_offset: i64,
    pub(crate) min_offset: i64,
    pub(crate) max_offset: i64,
    pub(crate) items: Vec<T>,
    /// Sum of the taken records' sizes.
    pub(crate) bytes: u64,
    /// Units skipped because the record they name is not theirs (see [`unit_owns`]).
    pub(crate) mismatched: u64,
}

/// True if `view`, the record a consume queue unit of `topic`/`queue_id` at queue offset
/// `queue_offset` names, is that unit's record: same topic, queue id and queue offset. A unit
/// that names another valid record (a damaged or foreign consume queue, a commit log rewritten
/// under it) must not serve that record as this queue's message. Compares fields the decode
/// already read.
pub(crate) fn unit_owns(
    view: &RecordView<'_>,
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
) -> bool {
    view.queue_offset == queue_offset && view.queue_id == queue_id && view.topic == topic
}

/// The record view of `r` (checked to be a message starting at its own offset), or `None`.
pub(crate) fn record_view(r: &RecordRef) -> Option<RecordView<'_>> {
    view_at(r.bytes(), r.offset())
}

/// The record view of `bytes`, a record read at absolute offset `offset` (checked to be a
/// message starting there), or `None`.
fn view_at(bytes: &[u8], offset: u64) -> Option<RecordView<'_>> {
    let opts = DecodeOptions {
        check_crc: false,
        expected_physical_offset: Some(offset as i64),
        ..DecodeOptions::default()
    };
    match decode_record(bytes, &opts) {
        Ok(Decoded::Message(v)) => Some(v),
        _ => None,
    }
}

/// Where a record found by a read lies: its file (mapped while the reference lives) and its
/// position in it. [`RecordAt::to_ref`] makes a [`RecordRef`] that keeps the file mapped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordAt<'a> {
    file: &'a Arc<MappedFile>,
    pos: usize,
}

impl RecordAt<'_> {
    /// A reference to the record (of `len` bytes) that keeps its file mapped.
    pub(crate) fn to_ref(self, len: usize) -> RecordRef {
        RecordRef::new(Arc::clone(self.file), self.pos, len)
    }
}

/// What one `getMessage` reads: a queue, from an offset, within the caller's limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueRead<'a> {
    pub(crate) topic: &'a str,
    pub(crate) queue_id: i32,
    /// The first consume queue offset to read.
    pub(crate) offset: i64,
    pub(crate) max_msgs: usize,
    pub(crate) max_total_bytes: Option<u64>,
    pub(crate) sub: &'a Subscription,
}

/// What one `queryMessage` looks for: a key of a topic, stored within `[begin, end]` (ms).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyQuery<'a> {
    pub(crate) topic: &'a str,
    pub(crate) key: &'a str,
    pub(crate) max_num: usize,
    pub(crate) begin: i64,
    pub(crate) end: i64,
}

/// `getMessage` (spec §11.1, 5.x scan rules) returning owned messages, and the number of
/// units skipped because they named another queue's record ([`GetOutcome::mismatched`]).
pub(crate) fn get_message(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    limits: &ReadLimits,
    q: &QueueRead<'_>,
) -> (GetResult, u64) {
    let o = get_message_with(log, cqs, limits, q, |_, v| StoredMessage::from_view(v));
    let r = GetResult {
        status: o.status,
        next_begin_offset: o.next_begin_offset,
        min_offset: o.min_offset,
        max_offset: o.max_offset,
        messages: o.items,
    };
    (r, o.mismatched)
}

/// How many consume queue units ahead of the one being read [`get_message_with`] asks the CPU
/// to load records: a queue's records lie many records apart in the commit log, so each is a
/// cache (and TLB) miss; started this far ahead, the misses of several records overlap.
const PREFETCH_UNITS: usize = 8;

/// `getMessage` (spec §11.1, 5.x scan rules): walks the consume queue from `offset` and hands
/// each record to take, borrowed from the mapping, as its place (file and position) and its
/// view (decoded once; properties are not parsed, the tag filter reads the `TAGS` value in
/// place). `take` returns what the caller keeps per message. A missing queue means the queue
/// never existed.
pub(crate) fn get_message_with<T>(
    log: &CommitLog,
    cqs: &ConsumeQueueStore,
    limits: &ReadLimits,
    q: &QueueRead<'_>,
    mut take: impl FnMut(RecordAt<'_>, &RecordView<'_>) -> T,
) -> GetOutcome<T> {
    let QueueRead {
        topic,
        queue_id,
        offset,
        max_msgs,
        max_total_bytes,
        sub,
    } = *q;
    let empty = |status, next, min, max| GetOutcome {
        status,
        next_begin_offset: next,
        min_offset: min,
        max_offset: max,
        items: Vec::new(),
        bytes: 0,
        mismatched: 0,
    };
    let Some(cq) = cqs.get(topic, queue_id) else {
        return empty(GetStatus::NoMessageInQueue, 0, 0, 0);
    };
    let min = cq.min_offset();
    let max = cq.max_offset();
    if max == 0 {
        return empty(GetStatus::NoMessageInQueue, 0, min, max);
    }
    if offset < min {
        return empty(GetStatus::OffsetTooSmall, min, min, max);
    }
    if offset == max {
        return empty(GetStatus::OffsetOverflowOne, offset, min, max);
    }
    if offset > max {
        return empty(GetStatus::OffsetOverflowBadly, max, min, max);
    }
    let max_msgs = max_msgs.max(1) as u64;
    let max_pull = max_total_bytes.unwrap_or(128 << 20).clamp(100, 128 << 20);
    let window_bytes = limits.filter_bytes.max(max_msgs * 20);
    let window_units = (window_bytes / 20).max(1) as usize;
    let Some(units) = cq.cursor(offset, window_units) else {
        let upf = cq.units_per_file().max(1);
        return empty(
            GetStatus::OffsetFoundNull,
            offset + upf - offset % upf,
            min,
            max,
        );
    };
    // The prefetch cursor runs PREFETCH_UNITS units ahead of `units`, never further than the
    // units this call may take (plus that lead): loading what is never read wastes bandwidth.
    let mut ahead = units.clone();
    let mut ahead_files = LogFiles::default();
    let mut ahead_budget = max_msgs.saturating_add(PREFETCH_UNITS as u64);
    let mut prefetch_next = |ahead_files: &mut LogFiles| {
        if ahead_budget == 0 {
            return;
        }
        if let Some((_, u)) = ahead.next() {
            if u.phy_offset >= 0 && u.size > 0 && sub.matches_code(u.tags_code) {
                ahead_budget -= 1;
                ahead_files.prefetch(log, u.phy_offset as u64, u.size as usize);
            }
        }
    };
    for _ in 0..PREFETCH_UNITS {
        prefetch_next(&mut ahead_files);
    }
    let mut files = LogFiles::default();
    let max_phy = log.max_offset();
    let file_size = log.file_size();
    let mut status = GetStatus::NoMatchedMessage;
    let mut next = offset;
    let mut messages: Vec<T> = Vec::with_capacity(max_msgs.min(1024) as usize);
    let mut bytes = 0u64;
    let mut mismatched = 0u64;
    let mut next_phy_file_start = i64::MIN;
    for (entry_offset, unit) in units {
        if ((entry_offset - offset) as u64) * 20 >= window_bytes {
            break;
        }
        prefetch_next(&mut ahead_files);
        let size = unit.size.max(0) as u64;
        let in_mem =
            max_phy.saturating_sub(unit.phy_offset.max(0) as u64) <= limits.in_memory_window;
        if batch_full(
            limits,
            size,
            max_msgs,
            max_pull,
            bytes,
            messages.len() as u64,
            in_mem,
        ) {
            break;
        }
        if bytes >= max_pull {
            break;
        }
        next = entry_offset + 1;
        if unit.phy_offset < next_phy_file_start {
            continue;
        }
        if !sub.matches_code(unit.tags_code) {
            continue;
        }
        let record = (unit.phy_offset >= 0 && unit.size > 0)
            .then(|| files.bytes(log, unit.phy_offset as u64, unit.size as usize))
            .flatten();
        let Some((file, pos, record)) = record else {
            if messages.is_empty() {
                status = GetStatus::MessageWasRemoving;
            }
            let phy = unit.phy_offset.max(0) as u64;
            next_phy_file_start = (phy + file_size - phy % file_size) as i64;
            continue;
        };
        let Some(view) = view_at(record, unit.phy_offset as u64) else {
            if messages.is_empty() {
                status = GetStatus::MessageWasRemoving;
            }
            continue;
        };
        if !unit_owns(&view, topic, queue_id, entry_offset) {
            // Skipped like a deleted record (and counted), never served as this queue's.
            mismatched += 1;
            if messages.is_empty() {
                status = GetStatus::MessageWasRemoving;
            }
            continue;
        }
        if !sub.is_all() {
            let tags =
                property_value(view.properties_raw, property::TAGS).map(String::from_utf8_lossy);
            if !sub.matches_tags(tags.as_deref()) {
                continue;
            }
        }
        bytes += size;
        messages.push(take(RecordAt { file, pos }, &view));
        status = GetStatus::Found;
    }
    GetOutcome {
        status,
        next_begin_offset: next,
        min_offset: min,
        max_offset: max,
        items: messages,
        bytes,
        mismatched,
    }
}

/// `queryMessage` (spec §6.6) returning owned messages.
pub(crate) fn query_message(
    log: &CommitLog,
    index: &IndexService,
    limits: &ReadLimits,
    q: &KeyQuery<'_>,
) -> QueryResult {
    let (messages, last_update) =
        query_message_with(log, index, limits, q, |_, v| StoredMessage::from_view(v));
    QueryResult {
        messages,
        index_last_update_timestamp: last_update.0,
        index_last_update_phy_offset: last_update.1,
    }
}

/// Bytes at the end of a key lookup's candidate record loaded ahead of its decode: its topic
/// and properties, for typical ones (three cache lines).
const TAIL_PREFETCH: usize = 192;

/// Records up to this size are loaded whole ahead of a key lookup's decode (see
/// [`query_message_with`]); the bodies of larger ones are left to the copy.
const BODY_PREFETCH_MAX: usize = 8192;

/// True if the record's KEYS (split on spaces) or UNIQ_KEY equal `key`, read in place.
fn has_key(v: &RecordView<'_>, key: &str) -> bool {
    let k = key.as_bytes();
    if k.is_empty() {
        return false;
    }
    let [uniq, keys] = property_values(v.properties_raw, [property::UNIQ_KEY, property::KEYS]);
    uniq.is_some_and(|u| u == k)
        || keys.is_some_and(|keys| {
            keys.split(|&b| property::KEY_SEPARATOR.as_bytes() == [b])
                .any(|t| t == k)
        })
}

/// `queryMessage` (spec §6.6): up to three rounds over the index files, newest first, keeping
/// only records whose KEYS or UNIQ_KEY really equal `key` (hash collisions are dropped). Each
/// candidate is checked as a view of the mapping; `take` builds what the caller keeps of a
/// match. Returns the matches in ascending commit log offset and the index's last update
/// (timestamp, physical offset).
pub(crate) fn query_message_with<T>(
    log: &CommitLog,
    index: &IndexService,
    limits: &ReadLimits,
    q: &KeyQuery<'_>,
    take: impl FnMut(RecordAt<'_>, &RecordView<'_>) -> T,
) -> (Vec<T>, (i64, i64)) {
    let hash = index_key_hash_of(q.topic, q.key);
    query_hashed(
        log,
        index,
        limits,
        q,
        hash,
        &mut QueryScratch::default(),
        take,
    )
}

/// What a key lookup reuses from the one before it in a batch: the vector of candidate
/// offsets and the commit log file looked at last.
#[derive(Debug, Default)]
struct QueryScratch {
    offsets: Vec<i64>,
    files: LogFiles,
}

/// [`query_message_with`] of a key whose index hash (`index_key_hash_of(q.topic, q.key)`) is
/// `hash`.
fn query_hashed<T>(
    log: &CommitLog,
    index: &IndexService,
    limits: &ReadLimits,
    q: &KeyQuery<'_>,
    hash: i32,
    scratch: &mut QueryScratch,
    mut take: impl FnMut(RecordAt<'_>, &RecordView<'_>) -> T,
) -> (Vec<T>, (i64, i64)) {
    let KeyQuery {
        topic,
        key,
        max_num,
        begin,
        end,
    } = *q;
    let max_num = max_num.clamp(1, limits.max_msgs_num_batch);
    // Matches come from one round only (a round runs only while nothing matched), whose
    // offsets are sorted and unique: `found` is in ascending commit log offset as it grows.
    let mut found: Vec<T> = Vec::new();
    let mut last_update = (0, 0);
    let mut end = end;
    let QueryScratch { offsets, files } = scratch;
    for _ in 0..3 {
        // Each candidate record's first bytes start loading as soon as the walk finds its
        // entry: the miss overlaps the rest of the chain's (and the other candidates').
        last_update = index.query_hashed_into(hash, max_num, begin, end, offsets, |phy| {
            if let Ok(phy) = u64::try_from(phy) {
                files.prefetch_head(log, phy);
            }
        });
        if offsets.is_empty() {
            break;
        }
        offsets.sort_unstable();
        offsets.dedup();
        let mut first_ts = None;
        for &phy in offsets.iter() {
            let Ok(phy) = u64::try_from(phy) else {
                continue;
            };
            let Some((file, pos, bytes)) = files.record(log, phy) else {
                continue;
            };
            // The topic and properties (the key check) are at the record's end, a body away
            // from the header the decode reads first: start loading them now.
            let tail = bytes.len().saturating_sub(TAIL_PREFETCH);
            crate::mmap::prefetch(bytes.get(tail..).unwrap_or_default());
            // Then the body between them, which the caller copies out right after the lookup
            // (a 1 KiB body is 16 lines a cold copy would otherwise miss one after another).
            if bytes.len() <= BODY_PREFETCH_MAX {
                crate::mmap::prefetch(bytes.get(PREFETCH_HEAD..tail).unwrap_or_default());
            }
            let Some(v) = view_at(bytes, phy) else {
                continue;
            };
            first_ts.get_or_insert(v.store_timestamp);
            if v.topic == topic && found.len() < max_num && has_key(&v, key) {
                found.push(take(RecordAt { file, pos }, &v));
            }
        }
        if !found.is_empty() {
            break;
        }
        match first_ts {
            Some(ts) if ts >= begin && ts < end => end = ts,
            _ => break,
        }
    }
    (found, last_update)
}

/// How many keys ahead of its lookup each loading stage of [`query_messages_with`] runs.
const STAGE_AHEAD: usize = 2;

/// [`query_message_with`] of each of `keys` (of `topic`, with the same `max_num`, `begin` and
/// `end`), in order: one result per key, each that of the single lookup. While key `i` is
/// looked up, the keys after it are at earlier stages of loading what their lookups will read
/// ([`STAGE_AHEAD`] keys apart): key `i + 4s` its hash slot, `i + 3s` its chain head entry,
/// `i + 2s` its head record's fixed fields, `i + s` that record's end (topic and properties).
/// Each stage reads only what the one before started loading, so the misses of several keys
/// overlap instead of a lookup waiting for three or four dependent ones.
pub(crate) fn query_messages_with<T, K: AsRef<str>>(
    log: &CommitLog,
    index: &IndexService,
    limits: &ReadLimits,
    q: &KeyQuery<'_>,
    keys: &[K],
    mut take: impl FnMut(RecordAt<'_>, &RecordView<'_>) -> T,
) -> Vec<Vec<T>> {
    const S: usize = STAGE_AHEAD;
    // Per key: its index hash, its chain head, the head's record offset.
    let mut ahead: Vec<(i32, u32, Option<u64>)> = keys
        .iter()
        .map(|k| (index_key_hash_of(q.topic, k.as_ref()), 0, None))
        .collect();
    let chains = index.chain_prefetch(q.begin, q.end);
    let mut files = LogFiles::default();
    let mut out = Vec::with_capacity(keys.len());
    // Stage `stage` of key `i` (stage 0 is the lookup itself).
    let mut step = |i: usize, stage: usize, ahead: &mut [(i32, u32, Option<u64>)]| {
        let Some(a) = ahead.get_mut(i) else {
            return;
        };
        match stage {
            4 => chains.slot(a.0),
            3 => a.1 = chains.head(a.0),
            2 => {
                a.2 = chains
                    .entry(a.0, a.1)
                    .and_then(|phy| u64::try_from(phy).ok());
                if let Some(phy) = a.2 {
                    files.prefetch_start(log, phy, PREFETCH_FIXED);
                }
            }
            _ => {
                if let Some((_, _, bytes)) = a.2.and_then(|phy| files.record(log, phy)) {
                    let tail = bytes.len().saturating_sub(TAIL_PREFETCH);
                    crate::mmap::prefetch(bytes.get(tail..).unwrap_or_default());
                }
            }
        }
    };
    // The schedule of the loop below run for the lookups before the first (none): key `t`
    // is at stage `s` while key `t - s * S` is looked up.
    for before in 0..4 * S {
        for stage in (1..=4).rev() {
            if let Some(t) = (before + stage * S).checked_sub(4 * S) {
                step(t, stage, &mut ahead);
            }
        }
    }
    let mut scratch = QueryScratch::default();
    for (i, k) in keys.iter().enumerate() {
        for stage in (1..=4).rev() {
            step(i + stage * S, stage, &mut ahead);
        }
        let one = KeyQuery {
            key: k.as_ref(),
            ..*q
        };
        let hash = ahead
            .get(i)
            .map_or_else(|| index_key_hash_of(q.topic, one.key), |a| a.0);
        out.push(query_hashed(log, index, limits, &one, hash, &mut scratch, &mut take).0);
    }
    out
}

/// STORETIMESTAMP of the record at `phy` (RocketMQ `pickupStoreTimestamp`), if readable.
pub(crate) fn store_timestamp_at(log: &CommitLog, phy: i64, size: i32) -> Option<i64> {
    if phy < 0 || size <= 0 {
        return None;
    }
    let rec = log.record_at_sized(phy as u64, size as usize)?;
    rocketstore_format::peek_store_timestamp(rec.bytes())
}
