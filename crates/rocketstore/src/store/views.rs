//! Borrowed bulk reads: records handed to a callback as [`RecordView`]s straight from the
//! mapping (no owned message per record), consume queue units and index entries. Used by
//! columnar readers (the Python binding's Arrow reads); every function is read-only.

use std::path::PathBuf;

use rocketstore_format::{
    crc32_masked, decode_record, peek_magic, peek_total_size, CqUnit, DecodeOptions, Decoded,
    IndexEntry, IndexHeader, MessageVersion, RecordLayout, RecordView, BLANK_MAGIC_CODE,
};

use super::Store;
use crate::commitlog::{record_intact, LogFiles, RecordRef};
use crate::dispatch::{raw_property, Subscription};
use crate::error::{CorruptionKind, Error, Result};
use crate::message::GetStatus;
use crate::segment::MappedFile;

/// Consume queue units read per round by [`Store::visit_queue_records`].
const UNITS_PER_ROUND: usize = 4096;

/// How far ahead of the record being read [`Store::visit_records`] and [`Store::record_sizes`]
/// ask the CPU to load the commit log: a walk from record to record is a chain of dependent
/// loads (each record's size gives the next one's position), which the hardware prefetcher does
/// not follow across pages.
const PREFETCH_BYTES: usize = 4096;

/// How many units ahead of the record being decoded [`Store::visit_queue_records`] asks the CPU
/// to load records (a queue's records lie many records apart in the commit log).
const PREFETCH_UNITS: usize = 4;

/// The published entries of one index file (see [`Store::index_entries`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFileEntries {
    /// Path of the index file.
    pub path: PathBuf,
    /// Its header, as currently published.
    pub header: IndexHeader,
    /// Number of hash slots of the file.
    pub slots: u32,
    /// `(entry number, entry)` for every entry below the header's `indexCount` (entry numbers
    /// start at 1, as in RocketMQ).
    pub entries: Vec<(u32, IndexEntry)>,
}

/// A record of the commit log, held without copying: it keeps its file mapped, and
/// [`RecordHandle::view`] views it in place (the body and properties stay borrowed).
#[derive(Debug, Clone)]
pub struct RecordHandle {
    rec: RecordRef,
    /// The layout of the record's decode on the way to the handle (reads decode each record
    /// they return): [`RecordHandle::view`] slices the bytes where it found the parts instead
    /// of decoding them again.
    layout: Option<RecordLayout>,
}

impl RecordHandle {
    /// A handle on `rec`, whose view is decoded when asked for.
    pub(crate) fn new(rec: RecordRef) -> Self {
        Self { rec, layout: None }
    }

    /// A handle on `rec`, a record already decoded as `layout`.
    pub(crate) fn decoded(rec: RecordRef, layout: RecordLayout) -> Self {
        Self {
            rec,
            layout: Some(layout),
        }
    }

    /// A handle on the record a read found at `at` and decoded as `v`.
    pub(crate) fn found(at: crate::read::RecordAt<'_>, v: &RecordView<'_>) -> Self {
        Self::decoded(at.to_ref(v.bytes().len()), v.layout())
    }

    /// Absolute commit log offset of the record.
    pub fn offset(&self) -> u64 {
        self.rec.offset()
    }

    /// The record's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.rec.bytes()
    }

    /// The record as a view of the mapping; `None` if the bytes are no longer a message
    /// starting at [`RecordHandle::offset`] (they were when the handle was made).
    pub fn view(&self) -> Option<RecordView<'_>> {
        match &self.layout {
            Some(layout) => layout.view(self.rec.bytes()),
            None => crate::read::record_view(&self.rec),
        }
    }
}

/// What [`Store::get_message_records`] found: [`crate::GetResult`] with record handles.
#[derive(Debug, Clone)]
pub struct GetRecords {
    /// What happened.
    pub status: GetStatus,
    /// Where the next read should start (RocketMQ's nextBeginOffset rules).
    pub next_begin_offset: i64,
    /// The queue's first offset.
    pub min_offset: i64,
    /// The queue's end offset (next to be written).
    pub max_offset: i64,
    /// The messages, in queue order.
    pub records: Vec<RecordHandle>,
}

/// True if the body CRC (of a non-empty body, like RocketMQ) and the record checks of recovery
/// pass.
fn crc_ok(v: &RecordView<'_>) -> bool {
    (v.body.is_empty() || crc32_masked(v.body) == v.body_crc) && record_intact(v)
}

/// Asks the CPU to load the bytes [`PREFETCH_BYTES`] ahead of the record at the start of
/// `rest` (`size` bytes long, as stored): one record's worth per record walked, so a walk keeps
/// the lines it reaches soon loading without fetching anything twice.
fn prefetch_ahead(rest: &[u8], size: i32) {
    let len = usize::try_from(size).unwrap_or(0).min(PREFETCH_BYTES);
    if let Some(ahead) = rest
        .get(PREFETCH_BYTES..)
        .map(|a| a.get(..len).unwrap_or(a))
    {
        crate::mmap::prefetch(ahead);
    }
}

/// The absolute offset just past a commit log file.
fn offset_after(f: &MappedFile) -> u64 {
    f.from() + f.size() as u64
}

/// Decodes the record `r` (at absolute `offset`) as a view, checking its CRCs if asked.
fn view_of(
    bytes: &[u8],
    offset: u64,
    path: impl FnOnce() -> PathBuf,
    check_crc: bool,
) -> Result<RecordView<'_>> {
    let opts = DecodeOptions {
        check_crc: false,
        expected_physical_offset: Some(offset as i64),
        ..DecodeOptions::default()
    };
    match decode_record(bytes, &opts) {
        Ok(Decoded::Message(v)) => {
            if !check_crc || crc_ok(&v) {
                Ok(v)
            } else {
                Err(Error::corruption(
                    path(),
                    offset,
                    CorruptionKind::CrcMismatch,
                ))
            }
        }
        Ok(Decoded::Blank { .. }) => Err(Error::corruption(
            path(),
            offset,
            CorruptionKind::Invalid("blank record".into()),
        )),
        Err(e) => Err(Error::corruption(
            path(),
            offset,
            CorruptionKind::Invalid(e.to_string()),
        )),
    }
}

impl Store {
    fn log_file_path(&self, offset: u64) -> PathBuf {
        self.log
            .queue()
            .find(offset)
            .map_or_else(|| self.root.join("commitlog"), |f| f.path().to_path_buf())
    }

    /// Visits, in commit log order, the records whose offsets lie in `[from, end)`, at most
    /// `max` of them, borrowing each from the mapping. `from` must be a record boundary (offsets
    /// below the oldest stored one start at the oldest). `f` returns `false` to stop *before*
    /// the record it was given (that record is not counted).
    ///
    /// Returns the offset to continue from: after the last record taken, the offset of the
    /// record `f` refused, or `from` itself when no record was taken.
    ///
    /// # Errors
    /// [`Error::Closed`]; `InvalidArgument` if no record starts at `from`; a `Corruption` error
    /// (kind `CrcMismatch` for a CRC mismatch when `check_crc`) naming the file and offset.
    pub fn visit_records(
        &self,
        from: u64,
        end: u64,
        max: usize,
        check_crc: bool,
        mut visit: impl FnMut(&RecordView<'_>) -> bool,
    ) -> Result<u64> {
        self.check_readable()?;
        let start = from.max(self.log.min_offset());
        let mut offset = start;
        let mut taken = 0usize;
        let mut file: Option<std::sync::Arc<MappedFile>> = None;
        while taken < max && offset < end {
            let f = match file.take() {
                Some(f) if offset < offset_after(&f) => f,
                _ => match self.log.queue().find(offset) {
                    Some(f) => f,
                    None => break,
                },
            };
            let pos = (offset - f.from()) as usize;
            let Some(rest) = f.slice_to_end(pos) else {
                break;
            };
            if rest.is_empty() {
                if f.is_fully_readable() {
                    offset = offset_after(&f);
                    continue;
                }
                break;
            }
            let opts = DecodeOptions {
                check_crc: false,
                expected_physical_offset: Some(offset as i64),
                ..DecodeOptions::default()
            };
            if let Some(size) = peek_total_size(rest) {
                prefetch_ahead(rest, size);
            }
            match decode_record(rest, &opts) {
                Ok(Decoded::Message(v)) => {
                    if check_crc && !crc_ok(&v) {
                        return Err(Error::corruption(
                            f.path(),
                            offset,
                            CorruptionKind::CrcMismatch,
                        ));
                    }
                    if !visit(&v) {
                        break;
                    }
                    taken += 1;
                    offset += v.total_size as u64;
                }
                Ok(Decoded::Blank { .. }) => offset = offset_after(&f),
                Err(e) if e.is_incomplete() => break,
                Err(e) if taken == 0 && offset == start => {
                    return Err(Error::invalid(
                        "from_offset",
                        format!("no record starts at offset {start}: {e}"),
                    ));
                }
                Err(e) => {
                    return Err(Error::corruption(
                        f.path(),
                        offset,
                        CorruptionKind::Invalid(e.to_string()),
                    ))
                }
            }
            file = Some(f);
        }
        Ok(if taken == 0 { from } else { offset })
    }

    /// Walks the record boundaries of `[from, end)` in commit log order without decoding the
    /// records: `f(offset, total_size)` for each message record (blank records at file ends are
    /// stepped over) until `f` returns `false`, `end`, the end of readable data, or bytes that
    /// do not start like a record (MAGIC V1/V2 and a TOTALSIZE that fits the file).
    ///
    /// A cheap first pass (a few bytes per record) that lets a reader split a range between
    /// threads: nothing here is validated beyond the header peek, so the records must still be
    /// read with [`Store::visit_records`], which checks them.
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn record_sizes(
        &self,
        from: u64,
        end: u64,
        mut f: impl FnMut(u64, u32) -> bool,
    ) -> Result<()> {
        // A record's TOTALSIZE is a non-negative i32, so its length fits a u32.
        self.visit_raw_records(from, end, usize::MAX, |offset, record| {
            f(offset, record.len() as u32)
        })
        .map(|_| ())
    }

    /// Visits the message records of `[from, end)` in commit log order like
    /// [`Store::visit_records`] (the same records, the same offset to continue from), without
    /// decoding or checking them: `f(offset, record)` gets each record's `TOTALSIZE` bytes.
    /// Stops at the first bytes that do not start like a record (MAGIC V1/V2 and a TOTALSIZE
    /// of at least 8 that fits the readable data), where [`Store::visit_records`] would stop
    /// or fail.
    ///
    /// For a second reader of records that [`Store::visit_records`] checks at the same time
    /// (nothing here is validated beyond the header peek).
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub fn visit_raw_records(
        &self,
        from: u64,
        end: u64,
        max: usize,
        mut f: impl FnMut(u64, &[u8]) -> bool,
    ) -> Result<u64> {
        self.check_readable()?;
        let mut offset = from.max(self.log.min_offset());
        let mut taken = 0usize;
        let mut file: Option<std::sync::Arc<MappedFile>> = None;
        while taken < max && offset < end {
            let file_ref = match file.take() {
                Some(fl) if offset < offset_after(&fl) => fl,
                _ => match self.log.queue().find(offset) {
                    Some(fl) => fl,
                    None => break,
                },
            };
            let pos = (offset - file_ref.from()) as usize;
            let Some(rest) = file_ref.slice_to_end(pos) else {
                break;
            };
            if rest.is_empty() {
                if file_ref.is_fully_readable() {
                    offset = offset_after(&file_ref);
                    file = Some(file_ref);
                    continue;
                }
                break;
            }
            let (Some(size), Some(magic)) = (peek_total_size(rest), peek_magic(rest)) else {
                break;
            };
            prefetch_ahead(rest, size);
            if magic == BLANK_MAGIC_CODE {
                offset = offset_after(&file_ref);
                file = Some(file_ref);
                continue;
            }
            let Some(rec) = usize::try_from(size)
                .ok()
                .filter(|&s| s >= 8)
                .and_then(|s| rest.get(..s))
            else {
                break;
            };
            if MessageVersion::from_magic(magic).is_none() || !f(offset, rec) {
                break;
            }
            taken += 1;
            offset += rec.len() as u64;
            file = Some(file_ref);
        }
        Ok(if taken == 0 { from } else { offset })
    }

    /// Up to `max` consume queue units of a queue from queue offset `from`, with their offsets
    /// (RocketMQ reads at most one consume queue file per call, and so does this). Empty for an
    /// unknown queue or an offset outside `[min_offset_in_queue, max_offset_in_queue)`.
    pub fn consume_queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: i64,
        max: usize,
    ) -> Vec<(i64, CqUnit)> {
        let _ = self.follow();
        self.cqs
            .get(topic, queue_id)
            .map(|q| q.units_from(from, max))
            .unwrap_or_default()
    }

    /// Visits the consume queue units of a queue with queue offsets in `[from, end)` (clamped
    /// to the queue's `[min, max)`), in order, decoded straight from the mapping (nothing is
    /// collected); a missing consume queue file is skipped. `f(queue_offset, unit)` returns
    /// `false` to stop. The first pass of a parallel Arrow read walks a whole batch's units
    /// this way before the records are read.
    pub fn visit_queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        from: i64,
        end: i64,
        mut f: impl FnMut(i64, CqUnit) -> bool,
    ) {
        let _ = self.follow();
        let Some(cq) = self.cqs.get(topic, queue_id) else {
            return;
        };
        let end = end.min(cq.max_offset());
        let mut next = from.max(cq.min_offset());
        while next < end {
            let want = usize::try_from(end - next).unwrap_or(usize::MAX);
            let cursor = cq.cursor(next, want.min(UNITS_PER_ROUND));
            let Some(units) = cursor.filter(|c| c.end_offset() > next) else {
                // The consume queue file holding `next` is gone: continue at the next file.
                let upf = cq.units_per_file().max(1);
                next = next + upf - next.rem_euclid(upf);
                continue;
            };
            next = units.end_offset();
            for (at, u) in units {
                if at >= end || !f(at, u) {
                    return;
                }
            }
        }
    }

    /// Visits the records of a queue, in queue order, for queue offsets in `[from, end)` of
    /// `span` (clamped to the queue's `[min, max)`), at most `max` records, borrowing each from
    /// the mapping. The span's `subscription` filters by tags like [`Store::get_message`]; units whose record was
    /// already deleted (or whose consume queue file is gone) are skipped. `f` returns `false` to
    /// stop before the record it was given.
    ///
    /// Returns the queue offset to continue from (one past the last unit looked at, or the
    /// offset of the refused record's unit).
    ///
    /// # Errors
    /// [`Error::Closed`]; a `Corruption` error naming the commit log file and offset when a
    /// unit points at bytes that are not a valid record (or, with `check_crc`, fail their CRC),
    /// or at a record of another topic, queue id or queue offset.
    pub fn visit_queue_records(
        &self,
        span: &QueueSpan<'_>,
        mut f: impl FnMut(&RecordView<'_>) -> bool,
    ) -> Result<i64> {
        let check_crc = span.check_crc;
        self.walk_queue(span, |queue_offset, phy, bytes, sub| {
            let v = view_of(bytes, phy, || self.log_file_path(phy), check_crc)?;
            self.check_unit_owns(&v, span, queue_offset, phy)?;
            if !sub.is_all() {
                let tags = raw_property(v.properties_raw, rocketstore_format::property::TAGS)
                    .and_then(|t| std::str::from_utf8(t).ok());
                if !sub.matches_tags(tags) {
                    return Ok(QueueStep::Skip);
                }
            }
            Ok(if f(&v) {
                QueueStep::Take
            } else {
                QueueStep::Stop
            })
        })
    }

    /// [`Store::visit_queue_records`] without decoding the records: `f(queue_offset,
    /// commitlog_offset, record)` gets each record's stored bytes (for a reader that needs a
    /// few fields, such as the bodies: [`rocketstore_format::body_and_properties`]).
    ///
    /// A record is checked as far as a reader of its body needs: its MAGICCODE, TOTALSIZE
    /// equal to the unit's size, PHYSICALOFFSET equal to the unit's offset and lengths that
    /// fit it. One that fails these (or every record, with the span's `check_crc`) is decoded
    /// in full first, so damage is the same `Corruption` error as [`Store::visit_queue_records`]
    /// gives. The same records are visited, and the same offset is returned.
    ///
    /// # Errors
    /// As [`Store::visit_queue_records`].
    pub fn visit_queue_raw_records(
        &self,
        span: &QueueSpan<'_>,
        mut f: impl FnMut(i64, u64, &[u8]) -> bool,
    ) -> Result<i64> {
        let check_crc = span.check_crc;
        self.walk_queue(span, |queue_offset, phy, bytes, sub| {
            let quick = if check_crc {
                None
            } else {
                raw_properties(bytes, phy)
            };
            let properties = match quick.filter(|p| raw_owner_is(bytes, p, span, queue_offset)) {
                Some(p) => p,
                None => {
                    let v = view_of(bytes, phy, || self.log_file_path(phy), check_crc)?;
                    self.check_unit_owns(&v, span, queue_offset, phy)?;
                    v.properties_raw
                }
            };
            if !sub.is_all() {
                let tags = raw_property(properties, rocketstore_format::property::TAGS)
                    .and_then(|t| std::str::from_utf8(t).ok());
                if !sub.matches_tags(tags) {
                    return Ok(QueueStep::Skip);
                }
            }
            Ok(if f(queue_offset, phy, bytes) {
                QueueStep::Take
            } else {
                QueueStep::Stop
            })
        })
    }

    /// A `Corruption` error unless the record `v` a unit of `span` at `queue_offset` names is
    /// that unit's own (topic, queue id, queue offset): a unit naming another valid record is
    /// never served as this queue's message.
    fn check_unit_owns(
        &self,
        v: &RecordView<'_>,
        span: &QueueSpan<'_>,
        queue_offset: i64,
        phy: u64,
    ) -> Result<()> {
        if crate::read::unit_owns(v, span.topic, span.queue_id, queue_offset) {
            return Ok(());
        }
        Err(Error::corruption(
            self.log_file_path(phy),
            phy,
            CorruptionKind::Invalid(format!(
                "the consume queue unit {}/{} at queue offset {queue_offset} names a record of \
                 {}/{} at queue offset {}",
                span.topic, span.queue_id, v.topic, v.queue_id, v.queue_offset
            )),
        ))
    }

    /// The walk of [`Store::visit_queue_records`]: `visit(queue_offset, commitlog_offset,
    /// record bytes, subscription)` for each unit of the span that passes the tags code filter
    /// and whose record is readable, until `max` were taken.
    fn walk_queue(
        &self,
        span: &QueueSpan<'_>,
        mut visit: impl FnMut(i64, u64, &[u8], &Subscription) -> Result<QueueStep>,
    ) -> Result<i64> {
        let QueueSpan {
            topic,
            queue_id,
            from,
            end,
            max,
            check_crc: _,
            subscription,
        } = *span;
        self.check_readable()?;
        let Some(cq) = self.cqs.get(topic, queue_id) else {
            return Ok(from);
        };
        let sub = Subscription::parse(subscription);
        let end = end.min(cq.max_offset());
        let mut next = from.max(cq.min_offset());
        let mut taken = 0usize;
        // The commit log file is looked up (a lock and a reference count shared with every
        // other thread) when a unit points outside the current one, not once per unit.
        let mut file: Option<std::sync::Arc<MappedFile>> = None;
        while next < end && taken < max {
            let want = usize::try_from(end - next).unwrap_or(usize::MAX);
            let cursor = cq.cursor(next, want.min(UNITS_PER_ROUND));
            let Some(units) = cursor.filter(|c| c.clone().next().is_some()) else {
                // The consume queue file holding `next` is gone: continue at the next file.
                let upf = cq.units_per_file().max(1);
                next = next + upf - next.rem_euclid(upf);
                continue;
            };
            // A second cursor runs PREFETCH_UNITS units ahead, asking the CPU to load the records
            // it will visit, so the cache and TLB misses of several scattered records overlap.
            let mut ahead = units.clone();
            let mut ahead_files = LogFiles::default();
            let mut prefetch_next = |ahead_files: &mut LogFiles| {
                if let Some((_, u)) = ahead.next() {
                    if u.phy_offset >= 0 && u.size > 0 && sub.matches_code(u.tags_code) {
                        ahead_files.prefetch(&self.log, u.phy_offset as u64, u.size as usize);
                    }
                }
            };
            for _ in 0..PREFETCH_UNITS {
                prefetch_next(&mut ahead_files);
            }
            for (queue_offset, unit) in units {
                if queue_offset >= end || taken >= max {
                    return Ok(next);
                }
                prefetch_next(&mut ahead_files);
                if unit.phy_offset < 0 || unit.size <= 0 || unit.is_prefill() {
                    next = queue_offset + 1;
                    continue;
                }
                if !sub.matches_code(unit.tags_code) {
                    next = queue_offset + 1;
                    continue;
                }
                let phy = unit.phy_offset as u64;
                let lf = match file.take() {
                    Some(lf) if phy >= lf.from() && phy < offset_after(&lf) => lf,
                    _ => match self.log.queue().find(phy) {
                        Some(lf) => lf,
                        None => {
                            // Deleted already: skip, like MESSAGE_WAS_REMOVING.
                            next = queue_offset + 1;
                            continue;
                        }
                    },
                };
                let lf = &**file.insert(lf);
                let Some(bytes) = lf.slice((phy - lf.from()) as usize, unit.size as usize) else {
                    // Not readable (yet): skip, like MESSAGE_WAS_REMOVING.
                    next = queue_offset + 1;
                    continue;
                };
                match visit(queue_offset, phy, bytes, &sub)? {
                    QueueStep::Skip => {}
                    QueueStep::Stop => return Ok(queue_offset),
                    QueueStep::Take => taken += 1,
                }
                next = queue_offset + 1;
            }
        }
        Ok(next)
    }

    /// Whether a key query (all time, up to `max` results) returns `phy_offset`: `Some(Ok(()))`
    /// if so, `Some(Err(hits))` with the number of offsets it returns if not, `None` when the
    /// index is disabled. Stops at the offset instead of collecting every hit.
    pub(crate) fn index_finds(
        &self,
        topic: &str,
        key: &str,
        phy_offset: i64,
        max: usize,
    ) -> Option<std::result::Result<(), usize>> {
        self.index
            .as_ref()
            .map(|i| i.finds(topic, key, phy_offset, max))
    }

    /// Every published entry of every index file, oldest file first (diagnostics). Empty when
    /// the index is disabled.
    pub fn index_entries(&self) -> Vec<IndexFileEntries> {
        self.index
            .as_ref()
            .map(|i| {
                i.all_entries()
                    .into_iter()
                    .map(|(path, header, slots, entries)| IndexFileEntries {
                        path,
                        header,
                        slots,
                        entries,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What [`Store::walk_queue`]'s visitor did with a record.
enum QueueStep {
    /// Took it (it counts towards the span's `max`).
    Take,
    /// Filtered it out.
    Skip,
    /// Refused it: the walk ends before it.
    Stop,
}

/// The properties of the record `bytes` at commit log offset `phy` if its header checks out
/// (MAGICCODE, TOTALSIZE equal to its length, PHYSICALOFFSET equal to `phy`, lengths that fit);
/// `None` otherwise (the caller then decodes it in full, which reports what is wrong).
fn raw_properties(bytes: &[u8], phy: u64) -> Option<&[u8]> {
    use rocketstore_format::record::PHYSICAL_OFFSET_POSITION;
    let size = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
    let at = PHYSICAL_OFFSET_POSITION;
    let offset = u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
    if usize::try_from(size).ok()? != bytes.len() || offset != phy {
        return None;
    }
    rocketstore_format::body_and_properties(bytes).map(|(_, properties)| properties)
}

/// Whether the record `bytes` (whose properties `properties` [`raw_properties`] found) has the
/// topic, queue id and queue offset of `span`'s unit at `queue_offset`, read without decoding
/// it: QUEUEID and QUEUEOFFSET at their fixed positions, and the topic right before the
/// properties' 2-byte length. `false` sends the record to the full decode and its check.
fn raw_owner_is(bytes: &[u8], properties: &[u8], span: &QueueSpan<'_>, queue_offset: i64) -> bool {
    use rocketstore_format::record::{QUEUE_ID_POSITION, QUEUE_OFFSET_POSITION};
    let field = |at: usize, n: usize| bytes.get(at..at + n);
    let queue_id = field(QUEUE_ID_POSITION, 4).and_then(|b| b.try_into().ok());
    let offset = field(QUEUE_OFFSET_POSITION, 8).and_then(|b| b.try_into().ok());
    if queue_id.map(i32::from_be_bytes) != Some(span.queue_id)
        || offset.map(i64::from_be_bytes) != Some(queue_offset)
    {
        return false;
    }
    // `properties` is a sub-slice of `bytes`: its start, less the 2-byte length, ends the topic.
    let props_at = (properties.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
    let topic = span.topic.as_bytes();
    let Some(topic_at) = props_at.checked_sub(2 + topic.len()) else {
        return false;
    };
    // The topic's length field: 1 byte (V1) for the topics a V1 record holds, 2 bytes (V2).
    let len_ok = match u8::try_from(topic.len()) {
        Ok(n) if n <= 127 => topic_at >= 1 && bytes.get(topic_at - 1) == Some(&n),
        _ => {
            let n = u16::try_from(topic.len()).unwrap_or(u16::MAX).to_be_bytes();
            topic_at >= 2 && bytes.get(topic_at - 2..topic_at) == Some(&n[..])
        }
    };
    len_ok && bytes.get(topic_at..topic_at + topic.len()) == Some(topic)
}

/// Which records of one queue [`Store::visit_queue_records`] visits.
#[derive(Debug, Clone, Copy)]
pub struct QueueSpan<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The queue id.
    pub queue_id: i32,
    /// The first queue offset (clamped up to the queue's minimum).
    pub from: i64,
    /// One past the last queue offset (clamped down to the queue's maximum).
    pub end: i64,
    /// At most this many records.
    pub max: usize,
    /// Check each record's body CRC (a mismatch is a `Corruption` error).
    pub check_crc: bool,
    /// A tag filter like [`Store::get_message`]'s `subscription` (`None`: every record).
    pub subscription: Option<&'a str>,
}
