//! The schedule service (RocketMQ's broker `ScheduleMessageService`): re-delivers delayed
//! messages once their time has come.
//!
//! A put with a delay level is stored under `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, and its
//! consume queue unit's tagsCode is the deliver time (spec §5.2, §12.1). For every level, the
//! service reads that queue from its progress offset; each unit whose deliver time is due is
//! re-put as a **new** record to its `REAL_TOPIC` / `REAL_QID`, the way RocketMQ's
//! `messageTimeUp` builds it:
//!
//! - same body, FLAG, SYSFLAG, BORNTIMESTAMP, BORNHOST, STOREHOST and RECONSUMETIMES; PREPARED
//!   TRANSACTION OFFSET 0; a new STORETIMESTAMP, commit log and queue offset;
//! - the properties string is the decoded property map re-serialized in Java `HashMap(128)`
//!   iteration order **before** `DELAY`, `REAL_TOPIC` and `REAL_QID` are cleared from the map, so
//!   the stored bytes still contain them (spec §12.1 quirk, §16 vector 13); `UNIQ_KEY`, `TAGS`
//!   and `KEYS` are kept, so the tagsCode comes from `TAGS` again and the index has
//!   `<real topic>#<key>` entries;
//! - a stale `__CRC32#` property is dropped (RocketMQ 5.2+ deletes it before appending a fresh
//!   one when `enabledAppendPropCRC` is on; we do it either way so a stale value can never look
//!   like a damaged record).
//!
//! Units that are not due stop the level until the next pass. Records that can no longer be
//! read, that name no valid real topic or queue, or whose real topic is the transaction half
//! topic are skipped, as RocketMQ does. A deliver time more than one delay ahead of the clock is
//! treated as due (RocketMQ `correctDeliverTimestamp`, which guards against clock steps).
//!
//! Progress (the next consume queue offset per level) lives in `config/delayOffset.json` in the
//! broker's shape, `{"dataVersion":{...},"offsetTable":{1:12,2:0}}` (fastjson's unquoted integer
//! keys), saved with a `.bak` copy and an atomic replace every `flush_delay_offset_interval` ms,
//! on `Store::flush` and at close, and loaded at open. Offsets outside a queue's `[min, max]` are
//! clamped into it (RocketMQ `correctDelayOffset`). Delivery is at-least-once: a crash after a
//! re-put and before the progress is saved delivers that message again, as in RocketMQ.
//!
//! The thread (`rs-schedule`, only with `schedule_service_enable`) runs a pass every 100 ms
//! (RocketMQ's `DELAY_FOR_A_WHILE`). Tests and manual drivers call
//! `Store::deliver_delayed_messages(now_ms)` with their own clock instead.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketstore_format::properties::java_hashmap_order;
use rocketstore_format::{
    property, sysflag, validate_topic, CqUnit, HostAddr, MessageVersion, RecordHeader,
    MAX_PROPERTIES_LEN, MAX_TOPIC_LEN_V1, SCHEDULE_TOPIC, TRANS_HALF_TOPIC,
};

use crate::commitlog::{CommitLog, Prepared};
use crate::config::{FlushDiskType, StoreConfig};
use crate::consume_queue::ConsumeQueueStore;
use crate::error::{Error, Result};
use crate::json::{self, Json};
use crate::message::{PutStatus, StoredMessage};
use crate::offsets::{read_with_backup, save};
use crate::service::Service;
use crate::signal::{Signal, Wake};
use crate::util::{lock, now_ms};

/// Pass period (RocketMQ `DELAY_FOR_A_WHILE`).
const PASS_INTERVAL: Duration = Duration::from_millis(100);
/// Units read from a level's queue per round.
const UNITS_PER_ROUND: usize = 64;
/// Java `HashMap` capacity used when the broker decodes a record's properties
/// (`MessageDecoder.string2messageProperties`).
const DECODE_MAP_CAPACITY: usize = 128;

/// `config/delayOffset.json`: the next schedule-topic queue offset per delay level.
#[derive(Debug)]
pub(crate) struct DelayOffsets {
    path: PathBuf,
    table: Mutex<BTreeMap<i32, i64>>,
    /// `dataVersion` (counter, stateVersion, timestamp), kept from the broker's file.
    version: Mutex<(i64, i64, i64)>,
    dirty: AtomicBool,
}

impl DelayOffsets {
    /// Loads `<root>/config/delayOffset.json` (or its `.bak` copy); missing means empty.
    pub(crate) fn load(root: &Path) -> Result<Self> {
        let path = root.join("config").join("delayOffset.json");
        let mut table = BTreeMap::new();
        let mut version = (0, 0, 0);
        if let Some(v) = read_with_backup(&path)? {
            if let Some(t) = v.get("offsetTable").and_then(Json::as_obj) {
                for (level, off) in t {
                    if let (Ok(level), Some(off)) = (level.parse::<i32>(), off.as_i64()) {
                        table.insert(level, off);
                    }
                }
            }
            if let Some(dv) = v.get("dataVersion") {
                let field = |k| dv.get(k).and_then(Json::as_i64).unwrap_or(0);
                version = (field("counter"), field("stateVersion"), field("timestamp"));
            }
        }
        Ok(Self {
            path,
            table: Mutex::new(table),
            version: Mutex::new(version),
            dirty: AtomicBool::new(false),
        })
    }

    pub(crate) fn get(&self, level: i32) -> Option<i64> {
        lock(&self.table).get(&level).copied()
    }

    pub(crate) fn set(&self, level: i32, offset: i64) {
        let prev = lock(&self.table).insert(level, offset);
        if prev != Some(offset) {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Every (level, offset), ascending level.
    #[cfg(test)]
    pub(crate) fn all(&self) -> Vec<(i32, i64)> {
        lock(&self.table).iter().map(|(l, o)| (*l, *o)).collect()
    }

    /// The file's text: fastjson's pretty shape, integer keys unquoted.
    pub(crate) fn render(&self) -> String {
        let (counter, state, ts) = *lock(&self.version);
        let mut s = String::new();
        let _ = write!(
            s,
            "{{\n\t\"dataVersion\":{{\n\t\t\"counter\":{counter},\n\t\t\"stateVersion\":{state},\n\t\t\"timestamp\":{ts}\n\t}},\n\t\"offsetTable\":{{"
        );
        for (i, (level, off)) in lock(&self.table).iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{level}:{off}");
        }
        s.push_str("\n\t}\n}");
        s
    }

    /// Saves if anything changed since the last save (the data version advances).
    pub(crate) fn persist(&self, sync: bool) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let mut v = lock(&self.version);
            v.0 += 1;
            v.2 = now_ms();
        }
        let text = self.render();
        debug_assert!(json::parse(text.as_bytes()).is_ok());
        save(&self.path, &text, sync).inspect_err(|_| self.dirty.store(true, Ordering::Release))
    }
}

/// Progress of one delay level (see `Store::stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LevelProgress {
    pub(crate) level: i32,
    pub(crate) offset: i64,
    pub(crate) max_offset: i64,
}

/// One record to re-deliver, owned until it is appended.
#[derive(Debug)]
struct Redelivery {
    cq_offset: i64,
    topic: String,
    msg: StoredMessage,
    header: RecordHeader,
    props: Range<usize>,
    version: MessageVersion,
    len: usize,
}

/// The shared part of the schedule service: used by its thread and by
/// `Store::deliver_delayed_messages`, one pass at a time.
#[derive(Debug)]
pub(crate) struct ScheduleCore {
    log: Arc<CommitLog>,
    cqs: Arc<ConsumeQueueStore>,
    offsets: DelayOffsets,
    /// Delay per level in ms (level 1 first).
    levels: Vec<i64>,
    prop_crc: bool,
    max_queue_nums: i64,
    max_record: u64,
    v2_allowed: bool,
    sync: bool,
    store_host: HostAddr,
    pass_lock: Mutex<()>,
    delivered: AtomicU64,
}

impl ScheduleCore {
    pub(crate) fn new(
        root: &Path,
        log: Arc<CommitLog>,
        cqs: Arc<ConsumeQueueStore>,
        cfg: &StoreConfig,
    ) -> Result<Self> {
        let max_record = cfg.max_record_size().min(
            log.file_size()
                .saturating_sub(rocketstore_format::END_FILE_MIN_BLANK_LENGTH as u64),
        );
        Ok(Self {
            offsets: DelayOffsets::load(root)?,
            log,
            cqs,
            levels: cfg.delay_levels(),
            prop_crc: cfg.enabled_append_prop_crc,
            max_queue_nums: i64::try_from(cfg.max_queue_nums_per_topic).unwrap_or(i64::MAX),
            max_record,
            v2_allowed: cfg.auto_message_version_on_topic_len,
            sync: cfg.fsync_directory,
            store_host: cfg.store_host,
            pass_lock: Mutex::new(()),
            delivered: AtomicU64::new(0),
        })
    }

    /// Messages re-delivered since open.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Saves `config/delayOffset.json` if the progress changed.
    pub(crate) fn persist(&self) -> Result<()> {
        self.offsets.persist(self.sync)
    }

    /// Per level with a queue or a saved offset: (level, next offset, queue max offset).
    pub(crate) fn progress(&self) -> Vec<LevelProgress> {
        let mut out = Vec::new();
        for level in 1..=self.levels.len() as i32 {
            let cq = self.cqs.get(SCHEDULE_TOPIC, level - 1);
            let saved = self.offsets.get(level);
            if cq.is_none() && saved.is_none() {
                continue;
            }
            out.push(LevelProgress {
                level,
                offset: saved.unwrap_or(0),
                max_offset: cq.map_or(0, |q| q.max_offset()),
            });
        }
        out
    }

    /// One pass over every level with `now` as the clock. Returns the number of messages
    /// re-delivered. A closed or fenced store ends the pass quietly; a full disk leaves the
    /// rest for a later pass.
    ///
    /// # Errors
    /// Unexpected failures of the append (the caller's service then poisons the store).
    pub(crate) fn pass(&self, now: i64) -> Result<u64> {
        let _g = lock(&self.pass_lock);
        let mut total = 0;
        for (i, delay) in self.levels.iter().enumerate() {
            let level = i as i32 + 1;
            match self.pass_level(level, *delay, now) {
                Ok(n) => total += n,
                Err(Error::Closed | Error::Poisoned { .. } | Error::DiskFull { .. }) => break,
                Err(e) => return Err(e),
            }
        }
        self.delivered.fetch_add(total, Ordering::Relaxed);
        Ok(total)
    }

    fn pass_level(&self, level: i32, delay: i64, now: i64) -> Result<u64> {
        let Some(cq) = self.cqs.get(SCHEDULE_TOPIC, level - 1) else {
            return Ok(0);
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let mut offset = self.offsets.get(level).unwrap_or(0).max(min).min(max);
        // Every level with a queue gets an entry, as RocketMQ's `updateOffset` gives it one.
        self.offsets.set(level, offset);
        let mut delivered = 0;
        while offset < max {
            let units = cq.units_from(offset, UNITS_PER_ROUND);
            if units.is_empty() {
                break;
            }
            let mut next = offset;
            let mut not_due = false;
            let mut batch = Vec::new();
            let mut props = Vec::new();
            for (cq_offset, unit) in units {
                if deliver_time(now, unit.tags_code, delay) > now {
                    not_due = true;
                    break;
                }
                next = cq_offset + 1;
                if let Some(r) = self.redelivery(cq_offset, unit, &mut props) {
                    batch.push(r);
                }
            }
            let (written, stop_at) = self.append(&batch, &props)?;
            delivered += written;
            let reached = stop_at.unwrap_or(next);
            self.offsets.set(level, reached);
            if not_due || stop_at.is_some() || reached == offset {
                break;
            }
            offset = reached;
        }
        Ok(delivered)
    }

    /// Appends `batch`; returns how many were written and, if one was not, its queue offset
    /// (where the level resumes).
    fn append(&self, batch: &[Redelivery], props: &[u8]) -> Result<(u64, Option<i64>)> {
        if batch.is_empty() {
            return Ok((0, None));
        }
        let prepared: Vec<Prepared<'_>> = batch
            .iter()
            .map(|r| Prepared {
                topic: &r.topic,
                body: &r.msg.body,
                props: r.props.clone(),
                header: r.header,
                version: r.version,
                len: r.len,
                prop_crc: self.prop_crc,
            })
            .collect();
        let results = self.log.append(&prepared, props, self.store_host)?;
        let mut written = 0;
        for (r, res) in batch.iter().zip(&results) {
            match res.status {
                // FLUSH_DISK_TIMEOUT: written, only not yet known durable; never re-deliver.
                PutStatus::PutOk | PutStatus::FlushDiskTimeout => written += 1,
                _ => return Ok((written, Some(r.cq_offset))),
            }
        }
        Ok((written, None))
    }

    /// Builds the re-delivered record of the unit, or `None` to skip it.
    fn redelivery(&self, cq_offset: i64, unit: CqUnit, props: &mut Vec<u8>) -> Option<Redelivery> {
        let phy = u64::try_from(unit.phy_offset).ok()?;
        let size = usize::try_from(unit.size).ok().filter(|s| *s > 0)?;
        let msg = self.log.record_at_sized(phy, size)?.decode().ok()?;
        let topic = msg.properties.get(property::REAL_TOPIC)?.to_string();
        if topic == TRANS_HALF_TOPIC || validate_topic(&topic).is_err() {
            return None;
        }
        if topic.len() > MAX_TOPIC_LEN_V1 && !self.v2_allowed {
            return None;
        }
        let queue_id: i32 = msg
            .properties
            .get(property::REAL_QID)?
            .trim()
            .parse()
            .ok()?;
        if queue_id < 0 || i64::from(queue_id) >= self.max_queue_nums {
            return None;
        }
        if msg.sys_flag & !sysflag::KNOWN_BITS != 0 {
            return None;
        }
        let start = props.len();
        let pairs: Vec<(&str, &str)> = msg.properties.iter().collect();
        let names: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
        for i in java_hashmap_order(&names, DECODE_MAP_CAPACITY) {
            let Some((k, v)) = pairs.get(i) else { continue };
            if *k == property::CRC32 {
                continue;
            }
            props.extend_from_slice(k.as_bytes());
            props.push(rocketstore_format::NAME_VALUE_SEPARATOR);
            props.extend_from_slice(v.as_bytes());
            props.push(rocketstore_format::PROPERTY_SEPARATOR);
        }
        if self.prop_crc {
            rocketstore_format::prop_crc::append_placeholder(props);
        }
        let props_len = props.len() - start;
        let header = RecordHeader {
            queue_id,
            flag: msg.flag,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: msg.sys_flag,
            born_timestamp: msg.born_timestamp,
            born_host: msg.born_host,
            store_timestamp: 0,
            store_host: msg.store_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: 0,
        };
        let version = MessageVersion::for_topic(topic.len());
        let len = rocketstore_format::record_len(
            header.born_host.is_v6(),
            header.store_host.is_v6(),
            version,
            msg.body.len(),
            topic.len(),
            props_len,
        );
        if props_len > MAX_PROPERTIES_LEN || len as u64 > self.max_record {
            props.truncate(start);
            return None;
        }
        Some(Redelivery {
            cq_offset,
            topic,
            msg,
            header,
            props: start..props.len(),
            version,
            len,
        })
    }
}

/// RocketMQ `correctDeliverTimestamp`: a deliver time more than one delay ahead of `now` (the
/// clock went back, or the table changed) is due now.
fn deliver_time(now: i64, tags_code: i64, delay: i64) -> i64 {
    if tags_code > now.saturating_add(delay) {
        now
    } else {
        tags_code
    }
}

/// The `rs-schedule` thread: a pass every 100 ms, progress saved every
/// `flush_delay_offset_interval` ms and at shutdown.
#[derive(Debug)]
pub(crate) struct ScheduleService {
    core: Arc<ScheduleCore>,
    reput_signal: Arc<Signal>,
    wake_reput: bool,
    persist_interval: Duration,
    last_persist: Instant,
}

impl ScheduleService {
    pub(crate) fn new(
        core: Arc<ScheduleCore>,
        reput_signal: Arc<Signal>,
        cfg: &StoreConfig,
    ) -> Self {
        Self {
            core,
            reput_signal,
            // Under SYNC_FLUSH the flush service wakes dispatch once the bytes are durable.
            wake_reput: cfg.flush_disk_type == FlushDiskType::AsyncFlush,
            persist_interval: Duration::from_millis(cfg.flush_delay_offset_interval),
            last_persist: Instant::now(),
        }
    }
}

impl Service for ScheduleService {
    const NAME: &'static str = "schedule";

    fn interval(&self) -> Duration {
        PASS_INTERVAL
    }

    fn run_once(&mut self, _why: Wake) -> Result<()> {
        let n = self.core.pass(now_ms())?;
        if n > 0 && self.wake_reput {
            self.reput_signal.wakeup();
        }
        if self.last_persist.elapsed() >= self.persist_interval {
            self.last_persist = Instant::now();
            self.core.persist()?;
        }
        Ok(())
    }

    fn on_shutdown(&mut self) -> Result<()> {
        self.core.persist()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn delay_offsets_round_trip_in_fastjson_shape() {
        let dir = tempfile::tempdir().unwrap();
        let o = DelayOffsets::load(dir.path()).unwrap();
        assert_eq!(o.get(1), None);
        o.persist(false).unwrap();
        assert!(!dir.path().join("config/delayOffset.json").exists());
        o.set(1, 12);
        o.set(2, 0);
        o.persist(false).unwrap();
        let text = std::fs::read_to_string(dir.path().join("config/delayOffset.json")).unwrap();
        assert!(text.contains("\"offsetTable\":{1:12,2:0"), "{text}");
        assert!(text.contains("\"counter\":1"), "{text}");
        o.set(1, 13);
        o.persist(false).unwrap();
        assert!(dir.path().join("config/delayOffset.json.bak").exists());
        let again = DelayOffsets::load(dir.path()).unwrap();
        assert_eq!(again.all(), vec![(1, 13), (2, 0)]);
        // A broker's file (compact, 4.x shape without dataVersion) loads too.
        std::fs::write(
            dir.path().join("config/delayOffset.json"),
            b"{\"offsetTable\":{3:7,18:2}}",
        )
        .unwrap();
        assert_eq!(
            DelayOffsets::load(dir.path()).unwrap().all(),
            vec![(3, 7), (18, 2)]
        );
        // A damaged file falls back to the .bak copy.
        std::fs::write(dir.path().join("config/delayOffset.json"), b"{oops").unwrap();
        assert_eq!(
            DelayOffsets::load(dir.path()).unwrap().all(),
            vec![(1, 12), (2, 0)]
        );
    }

    #[test]
    fn deliver_time_is_corrected_when_too_far_ahead() {
        assert_eq!(deliver_time(1000, 1500, 1000), 1500);
        assert_eq!(deliver_time(1000, 2000, 1000), 2000);
        assert_eq!(deliver_time(1000, 2001, 1000), 1000);
        assert_eq!(deliver_time(1000, 10, 1000), 10);
    }
}
