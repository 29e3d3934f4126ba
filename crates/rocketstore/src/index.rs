//! Index files (spec §6): hash indexes from `"<topic>#<key>"` (UNIQ_KEY and each KEYS token) to
//! commit-log offsets, in `<root>/index/<yyyyMMddHHmmssSSS>` files byte-compatible with
//! RocketMQ's `IndexFile` / `IndexService`.
//!
//! An index file is one fixed-size mapping: a 40-byte header, `slots` 4-byte hash slots, then
//! `entries` 20-byte entries (layout and helpers from [`rocketstore_format::index`]). The
//! dispatcher is the only writer; queries run concurrently from other threads. The mmap rules
//! (module `mmap`) are kept like this:
//! - **Header fields and hash slots are rewritten in place**: the mapping's
//!   [`crate::mmap::AppendRegion`] declares them its atomic prefix, so they can only be reached
//!   through `atomic_u32` / `atomic_u64` (holding big-endian values, `to_be` / `from_be`), never
//!   through a byte slice. (This is why the byte-slice helpers `put_key` / `walk_chain` /
//!   `read_slot` of the format crate are not used on live files.)
//! - **Entries are append-only.** The region's watermark is the end of entry `indexCount - 1`.
//!   Entry `n` is written through the batch's [`crate::mmap::AppendWriter`] (the only one of the
//!   file) and published before the header's `indexCount` is raised past it and before the slot
//!   pointing at it is stored, all with `Release`. A reader loads the slot, then `indexCount`
//!   (both `Acquire`) and only reads entries numbered below that count; a slice of any entry
//!   above the watermark is refused by the region itself.
//! - **Chain walks are bounded**: entry numbers must strictly decrease along a chain and stay
//!   below the published count and the entry capacity, so a corrupt file (cycles, garbage
//!   pointers) ends the walk after at most `indexCount` steps.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rocketstore_format::index::{
    entry_position, index_file_size, index_slot, index_time_diff, slot_position,
};
use rocketstore_format::{
    index_key_hash_of, java_string_hash_continue, sysflag, IndexEntry, IndexHeader,
    INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE,
};

use crate::consume_queue::{Created, CreationSyncs};
use crate::error::{CorruptionKind, Error, Result};
#[cfg_attr(not(feature = "failpoints"), allow(unused_imports))]
use crate::failpoints as fp;
use crate::mmap::AppendWriter;
use crate::segment::{CreateOptions, MappedFile};
use crate::util::{check_not_symlink, fsync_dir, lock};

/// Name of the index directory under the store root.
pub(crate) const INDEX_DIR: &str = "index";

/// The unit in which the header and hash slot table are made real.
const PAGE: usize = 4096;

// Byte offsets of the header fields (spec §6.1; checked against `IndexHeader::encode` in tests).
const H_BEGIN_TIMESTAMP: usize = 0;
const H_END_TIMESTAMP: usize = 8;
const H_BEGIN_PHY_OFFSET: usize = 16;
const H_END_PHY_OFFSET: usize = 24;
const H_HASH_SLOT_COUNT: usize = 32;
const H_INDEX_COUNT: usize = 36;

/// Name format of index files: `UtilAll.timeMillisToHumanString` (local time, 17 digits).
const NAME_FORMAT: &str = "%Y%m%d%H%M%S%3f";

/// What the dispatcher hands to the index: a record's identity and its keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexRequest<'a> {
    /// The topic stored in the record (e.g. `SCHEDULE_TOPIC_XXXX` for delayed messages).
    pub topic: &'a str,
    /// The record's PHYSICALOFFSET.
    pub phy_offset: i64,
    /// The record's STORETIMESTAMP.
    pub store_timestamp: i64,
    /// The record's SYSFLAG (ROLLBACK records are not indexed).
    pub sys_flag: i32,
    /// The UNIQ_KEY property, if present.
    pub uniq_key: Option<&'a str>,
    /// The raw KEYS property (space separated), if present.
    pub keys: Option<&'a str>,
}

/// The index writer held for a run of records (see [`IndexService::batch`]).
#[derive(Debug)]
pub(crate) struct IndexBatch<'a> {
    service: &'a IndexService,
    _writer: std::sync::MutexGuard<'a, ()>,
    /// The newest file of the service (the list cannot change while the writer lock is held).
    newest: Option<Arc<IndexFile>>,
    /// The entry write handle of `newest`, claimed on first use.
    entries: Option<AppendWriter>,
    /// The topics indexed lately with the Java hash of `"<topic>#"`, the prefix of all their
    /// keys (interleaved topics hash each topic once per run, not once per record).
    prefixes: PrefixCache,
    /// The record [`IndexBatch::stage`] holds back (see there).
    staged: Staged,
}

/// Up to [`PrefixCache::CAP`] topics with the Java hash of `"<topic>#"`, the last hit first.
#[derive(Debug, Default)]
pub(crate) struct PrefixCache {
    entries: Vec<(String, i32)>,
    last: usize,
    /// The entry replaced next once the cache is full.
    evict: usize,
}

impl PrefixCache {
    const CAP: usize = 16;

    /// The prefix hash of `topic` (computed only for a topic not among the cached ones).
    pub(crate) fn hash(&mut self, topic: &str) -> i32 {
        if let Some((t, h)) = self.entries.get(self.last) {
            if crate::util::same_name(t, topic) {
                return *h;
            }
        }
        let same = |(t, _): &(String, i32)| crate::util::same_name(t, topic);
        if let Some(i) = self.entries.iter().position(same) {
            self.last = i;
            return self.entries[i].1;
        }
        let h = index_prefix_hash(topic);
        if self.entries.len() < Self::CAP {
            self.entries.push((topic.to_string(), h));
            self.last = self.entries.len() - 1;
        } else {
            let i = self.evict % Self::CAP;
            self.evict = i + 1;
            self.entries[i] = (topic.to_string(), h);
            self.last = i;
        }
        h
    }
}

/// A record whose keys [`IndexBatch::stage`] hashed and whose slots it prefetched; its keys
/// are put by the next `stage` or by [`IndexBatch::put_staged`].
#[derive(Debug, Default)]
struct Staged {
    /// Whether a record is staged.
    live: bool,
    phy_offset: i64,
    store_timestamp: i64,
    redo: Option<Arc<IndexFile>>,
    /// Its key hashes in the order `build` puts them (UNIQ_KEY first).
    hashes: Vec<i32>,
}

impl IndexBatch<'_> {
    /// RocketMQ `IndexService.buildIndex` (§6.3, §6.4): gets the last file (rolling to a new one
    /// when it is full); skips the record if `phy_offset < endPhyOffset` of that file (already
    /// indexed; the strict comparison re-indexes the last record) or its transaction type is
    /// ROLLBACK; then puts `topic#UNIQ_KEY` and `topic#token` for each non-empty space-separated
    /// KEYS token, rolling whenever a file fills up. The key hash is computed over the topic,
    /// `#` and the key in place (no joined string).
    ///
    /// # Errors
    /// I/O errors creating a file (nothing of the failed key is published).
    pub(crate) fn build(&mut self, req: &IndexRequest<'_>) -> Result<()> {
        // The staged path's admission and hashing, with the keys put at once.
        self.stage(req)?;
        self.put_staged()
    }

    /// [`IndexBatch::build`] one record later, for a dispatcher handing over records in a row:
    /// puts the keys of the record staged by the previous call, then admits `req` exactly as
    /// `build` would (on the index as it stands after that record), hashes its keys and starts
    /// loading their hash slots into the cache, and holds it back. The slot reads, which miss
    /// the cache on a large index, then overlap with the next record's decode and consume queue
    /// work instead of stalling this thread. Every entry, header field and slot written is the
    /// one `build` writes, in the same order. The caller must end the run with
    /// [`IndexBatch::put_staged`]: until then the last record's keys are not in the index.
    ///
    /// # Errors
    /// As `build`, for the record staged before (nothing of `req` is staged then).
    pub(crate) fn stage(&mut self, req: &IndexRequest<'_>) -> Result<()> {
        self.put_staged()?;
        let Admit::Put(redo) = self.admit(req.phy_offset, req.sys_flag)? else {
            return Ok(());
        };
        if req.uniq_key.is_none() && req.keys.is_none() {
            return Ok(());
        }
        let prefix = self.prefixes.hash(req.topic);
        let s = &mut self.staged;
        s.hashes.clear();
        if let Some(uniq) = req.uniq_key {
            s.hashes.push(index_key_hash_after(prefix, uniq));
        }
        if let Some(keys) = req.keys {
            for key in rocketstore_format::keys::index_tokens(keys) {
                s.hashes.push(index_key_hash_after(prefix, key));
            }
        }
        if s.hashes.is_empty() {
            return Ok(());
        }
        if let Some(f) = &self.newest {
            for &h in &s.hashes {
                f.prefetch_slot(h);
            }
        }
        s.live = true;
        s.phy_offset = req.phy_offset;
        s.store_timestamp = req.store_timestamp;
        s.redo = redo;
        Ok(())
    }

    /// Puts the keys of the record [`IndexBatch::stage`] holds back, if any.
    ///
    /// # Errors
    /// As `build` (the record is dropped from the stage either way; nothing of a failed key
    /// is published).
    pub(crate) fn put_staged(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.staged.live) {
            return Ok(());
        }
        let hashes = std::mem::take(&mut self.staged.hashes);
        let redo = self.staged.redo.take();
        let (phy, ts) = (self.staged.phy_offset, self.staged.store_timestamp);
        let mut result = Ok(());
        for &h in &hashes {
            result = self.put_key(h, phy, ts, redo.as_deref());
            if result.is_err() {
                break;
            }
        }
        self.staged.hashes = hashes;
        result
    }

    /// [`IndexBatch::build`] for a record whose key hashes were computed elsewhere
    /// ([`handoff::build_all`]: `hashes` in the order `build` puts them, UNIQ_KEY first).
    pub(crate) fn build_hashed(
        &mut self,
        phy_offset: i64,
        store_timestamp: i64,
        sys_flag: i32,
        hashes: &[i32],
    ) -> Result<()> {
        self.put_staged()?;
        let Admit::Put(redo) = self.admit(phy_offset, sys_flag)? else {
            return Ok(());
        };
        for &hash in hashes {
            self.put_key(hash, phy_offset, store_timestamp, redo.as_deref())?;
        }
        Ok(())
    }

    /// Starts loading the hash slots of `hashes` in the newest file (a hint: nothing is read
    /// or written).
    pub(crate) fn prefetch_slots(&self, hashes: &[i32]) {
        if let Some(f) = &self.newest {
            for &h in hashes {
                f.prefetch_slot(h);
            }
        }
    }

    /// The checks `build` makes before any key (rolling the newest file first if it is full).
    fn admit(&mut self, phy_offset: i64, sys_flag: i32) -> Result<Admit> {
        let newest = self
            .newest
            .as_ref()
            .map(|f| (f.end_phy_offset(), f.index_count()));
        if newest.is_some_and(|(end, _)| phy_offset < end) {
            return Ok(Admit::Skip);
        }
        if sysflag::transaction_type(sys_flag) == sysflag::TRANSACTION_ROLLBACK_TYPE {
            return Ok(Admit::Skip);
        }
        // Recovery re-dispatches from the newest file's endPhyOffset, which is the *start* of
        // the newest indexed record: the keys of that record already in the file are not put
        // twice (a clean reopen changes no index byte; a crash between two keys of one record
        // still gets the missing keys).
        let redo = newest
            .is_some_and(|(end, count)| count > 1 && phy_offset == end)
            .then(|| self.newest.clone())
            .flatten();
        self.writable()?;
        Ok(Admit::Put(redo))
    }

    /// The newest file and its entry write handle, rolled to a new file first if it is full
    /// (or there is none).
    fn writable(&mut self) -> Result<(&IndexFile, &mut AppendWriter)> {
        if self.newest.as_ref().is_none_or(|f| f.is_full()) {
            self.entries = None;
            self.newest = Some(self.service.last_writable_file()?);
        }
        let file = self.newest.as_deref().ok_or_else(|| {
            Error::corruption(
                &self.service.dir,
                0,
                CorruptionKind::Invalid("no writable index file".into()),
            )
        })?;
        let writer = match &mut self.entries {
            Some(w) => w,
            slot => slot.insert(file.file.region().writer().ok_or_else(|| {
                Error::corruption(
                    file.file.path(),
                    0,
                    CorruptionKind::Invalid("index file held by another writer".into()),
                )
            })?),
        };
        Ok((file, writer))
    }

    fn put_key(
        &mut self,
        hash: i32,
        phy_offset: i64,
        store_timestamp: i64,
        redo: Option<&IndexFile>,
    ) -> Result<()> {
        if redo.is_some_and(|f| f.has_entry(hash, phy_offset)) {
            return Ok(());
        }
        // A fresh file always has room (entries >= 2), so this rolls at most once.
        for _ in 0..2 {
            let (file, writer) = self.writable()?;
            if file.put_key(writer, hash, phy_offset, store_timestamp)? {
                return Ok(());
            }
        }
        Err(Error::corruption(
            &self.service.dir,
            0,
            CorruptionKind::Invalid("a new index file has no room".into()),
        ))
    }
}

/// What [`IndexBatch::admit`] decided for a record.
enum Admit {
    /// Already indexed (below the newest file's endPhyOffset) or a ROLLBACK: no key is put.
    Skip,
    /// Put the keys; entries of this record already in the given file are not put twice.
    Put(Option<Arc<IndexFile>>),
}

/// The Java hash of `"<topic>#"`, which [`index_key_hash_after`] continues over a key.
fn index_prefix_hash(topic: &str) -> i32 {
    java_string_hash_continue(java_string_hash_continue(0, topic), "#")
}

/// [`rocketstore_format::index_key_hash_of`]`(topic, key)` from the topic's [`index_prefix_hash`].
fn index_key_hash_after(prefix: i32, key: &str) -> i32 {
    let h = java_string_hash_continue(prefix, key).wrapping_abs();
    if h < 0 {
        0
    } else {
        h
    }
}

/// Loads ahead what a key query reads first in the newest index file, in stages a caller runs
/// some keys apart so that each stage reads only what an earlier one started loading:
/// [`ChainPrefetch::slot`], then [`ChainPrefetch::head`], then [`ChainPrefetch::entry`]. Hints
/// only: the query afterwards reads everything itself (and sees entries published since).
#[derive(Debug)]
pub(crate) struct ChainPrefetch {
    file: Option<Arc<IndexFile>>,
    count: i32,
}

impl ChainPrefetch {
    /// Starts loading the hash slot of `key_hash`.
    pub(crate) fn slot(&self, key_hash: i32) {
        if let Some(f) = &self.file {
            f.prefetch_slot(key_hash);
        }
    }

    /// Reads the slot of `key_hash` and starts loading its chain's head entry; the head's
    /// number (0: none).
    pub(crate) fn head(&self, key_hash: i32) -> u32 {
        let Some(f) = &self.file else {
            return 0;
        };
        let Some(head) = f.head(key_hash, self.count) else {
            return 0;
        };
        f.prefetch_entry(head);
        head
    }

    /// Reads entry `head` of the chain of `key_hash` and starts loading the chain's next
    /// entry; the entry's commit log offset if its hash is the key's.
    pub(crate) fn entry(&self, key_hash: i32, head: u32) -> Option<i64> {
        let f = self.file.as_ref()?;
        let e = f.entry(head).filter(|_| head > 0)?;
        if let Ok(prev) = u32::try_from(e.prev_index) {
            if prev > 0 && prev < head {
                f.prefetch_entry(prev);
            }
        }
        (e.key_hash == key_hash).then_some(e.phy_offset)
    }
}

/// Result of [`IndexService::query`] (RocketMQ `QueryOffsetResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QueryOffsetResult {
    /// Commit-log offsets of matching entries, newest file first, newest entry first within a
    /// file. Only key hashes are compared: different keys with the same hash are returned too.
    pub phy_offsets: Vec<i64>,
    /// endTimestamp of the newest index file (0 if none).
    pub index_last_update_timestamp: i64,
    /// endPhyOffset of the newest index file (0 if none).
    pub index_last_update_phy_offset: i64,
}

/// A durable point of the index, taken by [`IndexService::flush_mark`]: the file named `file`
/// (its name as a number) holds `count` durable entries (entry 0 unused), every older file is
/// durable entirely, and every record below `end_phy` has all its entries among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexMark {
    /// Name of the newest index file, as a number.
    pub file: i64,
    /// Its `indexCount` when the mark was taken.
    pub count: u32,
    /// Its endPhyOffset then: the start of the last record indexed.
    pub end_phy: i64,
    /// Its endTimestamp then: the store time of that record.
    pub end_ts: i64,
}

/// One index file. Its `MappedFile`'s cursors are not used; the header's `indexCount` is the
/// published watermark of its entries.
#[derive(Debug)]
struct IndexFile {
    file: MappedFile,
    name: String,
    slots: u32,
    entries: u32,
    /// One bit per 4 KiB page of the header and hash slots: made real in this process, 64
    /// pages (one word) at a time (a slot is written through the mapping only once its page
    /// has blocks; a closed store keeps blocks only for the slot pages it used, the rest stay
    /// or become holes).
    real_pages: Box<[AtomicU64]>,
    /// The whole header and slot table was made real (recovery's `cut_to` rewrites every
    /// slot): `trim` then gives back the blocks of the slot pages that hold only zeros.
    whole_prefix_real: AtomicBool,
}

impl IndexFile {
    fn new(file: MappedFile, name: String, slots: u32, entries: u32) -> Result<Self> {
        let prefix_pages = usize::try_from(entry_position(slots, 0))
            .unwrap_or(0)
            .div_ceil(PAGE);
        let mut f = Self {
            file,
            name,
            slots,
            entries,
            real_pages: (0..prefix_pages.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            whole_prefix_real: AtomicBool::new(false),
        };
        // Header and slots are the mapping's atomic prefix; entries are published up to the
        // header's `indexCount` (set once the header can be read).
        let words = usize::try_from(entry_position(slots, 0))
            .ok()
            .filter(|&w| w <= f.file.size());
        if let Some(words) = words {
            f.file.set_layout(words, words)?;
        }
        // Every word accessed atomically must be in bounds and aligned (the mapping is
        // page-aligned, so this only fails for an impossible layout).
        let ok = words.is_some()
            && [
                H_BEGIN_TIMESTAMP,
                H_END_TIMESTAMP,
                H_BEGIN_PHY_OFFSET,
                H_END_PHY_OFFSET,
            ]
            .iter()
            .all(|&o| f.file.region().atomic_u64(o).is_some())
            && f.file.region().atomic_u32(H_HASH_SLOT_COUNT).is_some()
            && f.file.region().atomic_u32(H_INDEX_COUNT).is_some()
            && slots > 0
            && usize::try_from(slot_position(slots - 1))
                .ok()
                .and_then(|p| f.file.region().atomic_u32(p))
                .is_some();
        if !ok {
            return Err(Error::UnsupportedFormat {
                path: f.file.path().to_path_buf(),
                reason: "index file layout cannot be mapped".into(),
            });
        }
        let count = u32::try_from(f.index_count()).unwrap_or(1);
        f.publish_entries_below(count)?;
        Ok(f)
    }

    /// A file still written (not full) of a writable store: its header and hash slots, rewritten
    /// in place through the mapping, are made real before anything writes them (a closed
    /// store gave back the blocks of the slots it never used, [`IndexFile::trim`]).
    fn make_prefix_real(&self) -> Result<()> {
        if self.file.is_writable() && !self.is_full() {
            self.ensure_page_real(0)?;
        }
        Ok(())
    }

    /// Makes the page of the header or slot table holding byte `pos` real before a word of it
    /// is written through the mapping (one atomic load once it is). Only the index writer
    /// calls it.
    fn ensure_page_real(&self, pos: usize) -> Result<()> {
        let page = pos / PAGE;
        let Some(word) = self.real_pages.get(page / 64) else {
            return Ok(());
        };
        let bit = 1u64 << (page % 64);
        if word.load(Ordering::Acquire) & bit != 0 {
            return Ok(());
        }
        // The 64 pages of the word at once (256 KiB, one contiguous extent): a page at a time,
        // the slots written all over leave thousands of scattered extents (a 5M-slot file:
        // ~4,700), which make every msync and the file's unlink slow. `trim` gives back the
        // pages of a chunk that stay zero.
        let first = page / 64 * 64;
        let prefix_pages = usize::try_from(entry_position(self.slots, 0))
            .unwrap_or(0)
            .div_ceil(PAGE);
        let end = (first + 64).min(prefix_pages).max(page + 1);
        self.file
            .make_range_real((first * PAGE) as u64, (end * PAGE) as u64)?;
        word.store(u64::MAX, Ordering::Release);
        Ok(())
    }

    /// Makes the whole header and slot table real (before a rewrite of every slot).
    fn make_whole_prefix_real(&self) -> Result<()> {
        self.file
            .make_range_real(0, entry_position(self.slots, 0))?;
        for w in self.real_pages.iter() {
            w.store(u64::MAX, Ordering::Release);
        }
        self.whole_prefix_real.store(true, Ordering::Release);
        Ok(())
    }

    /// A closed store keeps no block it does not use: the blocks of the hash slots never used
    /// and of the entries past `indexCount` of a file not full are given back (the length
    /// stays; they read as zeros as before). Returns the bytes punched.
    fn trim(&self) -> Result<u64> {
        if !self.file.is_writable() || self.is_full() {
            return Ok(0);
        }
        let count = u32::try_from(self.index_count())
            .unwrap_or(0)
            .min(self.entries);
        let (Ok(slots_end), Ok(used)) = (
            usize::try_from(entry_position(self.slots, 0)),
            usize::try_from(entry_position(self.slots, count)),
        ) else {
            return Ok(0);
        };
        // Slot pages are made real 64 at a time: the zero pages among them are given back.
        let slots = if self.whole_prefix_real.load(Ordering::Acquire)
            || self
                .real_pages
                .iter()
                .any(|w| w.load(Ordering::Acquire) != 0)
        {
            self.file.trim_zero_blocks(0, slots_end)?
        } else {
            0
        };
        Ok(slots + self.file.trim(used)?)
    }

    /// Sets the entry watermark to the end of entry `count - 1` (exclusive: it may lower it).
    fn publish_entries_below(&mut self, count: u32) -> Result<()> {
        let words = usize::try_from(entry_position(self.slots, 0)).unwrap_or(usize::MAX);
        let end = usize::try_from(entry_position(self.slots, count.min(self.entries)))
            .unwrap_or(usize::MAX);
        self.file.set_layout(words, end)
    }

    fn load_i64(&self, off: usize) -> i64 {
        self.file
            .region()
            .atomic_u64(off)
            .map_or(0, |a| u64::from_be(a.load(Ordering::Acquire)) as i64)
    }

    fn store_i64(&self, off: usize, v: i64) {
        if let Some(a) = self.file.region().atomic_u64(off) {
            a.store((v as u64).to_be(), Ordering::Release);
        }
    }

    fn load_i32(&self, off: usize) -> i32 {
        self.file
            .region()
            .atomic_u32(off)
            .map_or(0, |a| u32::from_be(a.load(Ordering::Acquire)) as i32)
    }

    fn store_i32(&self, off: usize, v: i32) {
        if let Some(a) = self.file.region().atomic_u32(off) {
            a.store((v as u32).to_be(), Ordering::Release);
        }
    }

    fn begin_timestamp(&self) -> i64 {
        self.load_i64(H_BEGIN_TIMESTAMP)
    }

    fn end_timestamp(&self) -> i64 {
        self.load_i64(H_END_TIMESTAMP)
    }

    fn begin_phy_offset(&self) -> i64 {
        self.load_i64(H_BEGIN_PHY_OFFSET)
    }

    fn end_phy_offset(&self) -> i64 {
        self.load_i64(H_END_PHY_OFFSET)
    }

    /// `indexCount` as RocketMQ's `IndexHeader.load` sees it: values `<= 0` count as 1.
    fn index_count(&self) -> i32 {
        self.load_i32(H_INDEX_COUNT).max(1)
    }

    fn slot_value(&self, slot: u32) -> i32 {
        usize::try_from(slot_position(slot)).map_or(0, |p| self.load_i32(p))
    }

    /// Starts loading the cache line of the slot of `key_hash` (a hint: nothing is read).
    fn prefetch_slot(&self, key_hash: i32) {
        if let Ok(p) = usize::try_from(slot_position(index_slot(key_hash, self.slots))) {
            self.file.region().prefetch_word(p);
        }
    }

    fn header(&self) -> IndexHeader {
        IndexHeader {
            begin_timestamp: self.begin_timestamp(),
            end_timestamp: self.end_timestamp(),
            begin_phy_offset: self.begin_phy_offset(),
            end_phy_offset: self.end_phy_offset(),
            hash_slot_count: self.load_i32(H_HASH_SLOT_COUNT),
            index_count: self.load_i32(H_INDEX_COUNT),
        }
    }

    /// RocketMQ `isWriteFull`: `indexCount >= maxIndexNum`.
    fn is_full(&self) -> bool {
        i64::from(self.index_count()) >= i64::from(self.entries)
    }

    /// Entry `n`, or `None` if it is not published (at or above `indexCount`) or not in the
    /// file.
    /// The number of the first of entries `1..count` that names a record at or past `end` (`count`
    /// if none does); entries run in commit log order, so a binary search finds it.
    fn first_entry_from(&self, count: u32, end: i64) -> u32 {
        let (mut lo, mut hi) = (1u32, count.max(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).is_some_and(|e| e.phy_offset < end) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Starts loading entry `n` (a hint: nothing is read); nothing if it is not published.
    fn prefetch_entry(&self, n: u32) {
        if n >= self.entries {
            return;
        }
        if let Some(bytes) = usize::try_from(entry_position(self.slots, n))
            .ok()
            .and_then(|pos| self.file.region().read(pos, INDEX_ENTRY_SIZE))
        {
            crate::mmap::prefetch(bytes);
        }
    }

    /// The chain head of `key_hash` (the slot's entry number), if it names a published entry.
    fn head(&self, key_hash: i32, count: i32) -> Option<u32> {
        let head = self.slot_value(index_slot(key_hash, self.slots));
        if head <= 0 || head >= count {
            return None;
        }
        u32::try_from(head).ok()
    }

    fn entry(&self, n: u32) -> Option<IndexEntry> {
        if n >= self.entries {
            return None;
        }
        let pos = usize::try_from(entry_position(self.slots, n)).ok()?;
        IndexEntry::decode(self.file.region().read(pos, INDEX_ENTRY_SIZE)?)
    }

    /// RocketMQ `IndexFile.putKey` (§6.4) through the file's entry write handle `writer`.
    /// Returns `Ok(false)` if the file is full.
    fn put_key(
        &self,
        writer: &mut AppendWriter,
        key_hash: i32,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> Result<bool> {
        let count = self.index_count();
        let Ok(n) = u32::try_from(count) else {
            return Ok(false);
        };
        if n >= self.entries {
            return Ok(false);
        }
        let slot = index_slot(key_hash, self.slots);
        let mut prev = self.slot_value(slot);
        // RocketMQ accepts a slot value equal to indexCount; a consistent file never has one, and
        // taking it would make entry n point at itself, so it is treated as empty too.
        if prev <= 0 || prev >= count {
            prev = 0;
        }
        let entry = IndexEntry {
            key_hash,
            phy_offset,
            time_diff: index_time_diff(store_timestamp, self.begin_timestamp()),
            prev_index: prev,
        };
        let pos = usize::try_from(entry_position(self.slots, n))
            .map_err(|_| Error::corruption(self.file.path(), 0, CorruptionKind::BadLength))?;
        self.file
            .ensure_allocated(pos as u64, pos as u64 + INDEX_ENTRY_SIZE as u64)?;
        // The header and the slot's page are written below: real first.
        self.ensure_page_real(0)?;
        if let Ok(p) = usize::try_from(slot_position(slot)) {
            self.ensure_page_real(p)?;
        }
        // Entry n is above the watermark: no reader can slice it yet.
        writer
            .write(pos, &entry.encode())
            .ok_or_else(|| Error::ReadOnly {
                path: self.file.path().to_path_buf(),
            })?;
        writer.publish(pos + INDEX_ENTRY_SIZE);
        if count <= 1 {
            self.store_i64(H_BEGIN_PHY_OFFSET, phy_offset);
            self.store_i64(H_BEGIN_TIMESTAMP, store_timestamp);
        }
        if prev == 0 {
            self.store_i32(
                H_HASH_SLOT_COUNT,
                self.load_i32(H_HASH_SLOT_COUNT).wrapping_add(1),
            );
        }
        self.store_i64(H_END_PHY_OFFSET, phy_offset);
        self.store_i64(H_END_TIMESTAMP, store_timestamp);
        // Publish: count first (entry n now below the watermark), then the slot.
        self.store_i32(H_INDEX_COUNT, count + 1);
        if let Ok(p) = usize::try_from(slot_position(slot)) {
            self.store_i32(p, count);
        }
        Ok(true)
    }

    /// RocketMQ `isTimeMatched(begin, end)`.
    fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (fb, fe) = (self.begin_timestamp(), self.end_timestamp());
        (begin < fb && end > fe) || (begin >= fb && begin <= fe) || (end >= fb && end <= fe)
    }

    /// RocketMQ `selectPhyOffset` (§6.6) with a bounded walk: adds to `out` (up to `max_num`
    /// offsets in total) the entries of the key's chain whose hash equals `key_hash` and whose
    /// time `begin + timeDiff * 1000` is in `[begin, end]`.
    /// `on_hit` is called with each offset as it is added.
    fn select(
        &self,
        out: &mut Vec<i64>,
        key_hash: i32,
        max_num: usize,
        (begin, end): (i64, i64),
        on_hit: &mut impl FnMut(i64),
    ) {
        if out.len() >= max_num {
            return;
        }
        self.walk(key_hash, begin, end, |phy| {
            on_hit(phy);
            out.push(phy);
            out.len() < max_num
        });
    }

    /// The walk of [`IndexFile::select`]: calls `hit` with each matching offset, newest first,
    /// until it returns false or the chain ends.
    fn walk(&self, key_hash: i32, begin: i64, end: i64, mut hit: impl FnMut(i64) -> bool) {
        let slot = index_slot(key_hash, self.slots);
        // Slot first, then count: a slot value stored by the writer is below the count it
        // published before storing the slot.
        let head = self.slot_value(slot);
        let count = self.index_count();
        if head <= 0 || head >= count || count <= 1 {
            return;
        }
        let file_begin = self.begin_timestamp();
        let mut current = head;
        while let Some(e) = u32::try_from(current).ok().and_then(|n| self.entry(n)) {
            if e.time_diff < 0 {
                break;
            }
            let time_read = file_begin.wrapping_add(i64::from(e.time_diff) * 1000);
            if e.key_hash == key_hash
                && time_read >= begin
                && time_read <= end
                && !hit(e.phy_offset)
            {
                break;
            }
            let prev = e.prev_index;
            if prev <= 0 || prev >= current || prev >= count || time_read < begin {
                break;
            }
            current = prev;
        }
    }

    /// True if the chain of `key_hash` holds an entry for `phy_offset`. Chains run newest
    /// first with falling offsets, so the walk stops below `phy_offset`; bounded like `select`.
    fn has_entry(&self, key_hash: i32, phy_offset: i64) -> bool {
        let head = self.slot_value(index_slot(key_hash, self.slots));
        let count = self.index_count();
        if head <= 0 || head >= count {
            return false;
        }
        let mut current = head;
        while let Some(e) = u32::try_from(current).ok().and_then(|n| self.entry(n)) {
            if e.phy_offset < phy_offset {
                return false;
            }
            if e.key_hash == key_hash && e.phy_offset == phy_offset {
                return true;
            }
            let prev = e.prev_index;
            if prev <= 0 || prev >= current {
                return false;
            }
            current = prev;
        }
        false
    }

    /// msync of the header, the slots and the first `count` entries.
    fn flush_prefix(&self, count: u32) -> Result<()> {
        if !self.file.is_writable() {
            return Ok(());
        }
        let end = usize::try_from(entry_position(self.slots, count.min(self.entries)))
            .unwrap_or(usize::MAX)
            .min(self.file.size());
        fail::fail_point!(fp::INDEX_MSYNC, |arg| Err(fp::injected(
            "msync",
            self.file.path(),
            arg
        )));
        self.file
            .region()
            .mapping()
            .flush_range(0, end)
            .map_err(|e| Error::io("msync", self.file.path(), e))?;
        #[cfg(feature = "powerloss")]
        crate::powerloss::synced(self.file.path(), 0, end);
        Ok(())
    }

    /// Cuts the file back to its first `count` entries (durable and complete; later entries,
    /// header words and slots may hold anything a power loss left): header end values from
    /// entry `count - 1` (`store_time_of` gives its record's store time), `indexCount = count`,
    /// and every hash slot rebuilt from the kept entries. Entries past `count` are left as they
    /// are: the watermark is lowered with the count, so nothing reads them and the next puts
    /// overwrite them. Exclusive (recovery), since it re-opens published entries for writing.
    fn cut_to(&mut self, count: u32, store_time_of: &dyn Fn(i64) -> Option<i64>) -> Result<()> {
        let Some(last) = self.entry(count.saturating_sub(1)) else {
            return Err(Error::corruption(
                self.file.path(),
                0,
                CorruptionKind::Invalid(format!("no durable index entry {}", count - 1)),
            ));
        };
        self.make_whole_prefix_real()?;
        for slot in 0..self.slots {
            if let Ok(p) = usize::try_from(slot_position(slot)) {
                self.store_i32(p, 0);
            }
        }
        let mut used = 0i32;
        for n in 1..count {
            let Some(e) = self.entry(n) else { break };
            let p = usize::try_from(slot_position(index_slot(e.key_hash, self.slots)))
                .unwrap_or(usize::MAX);
            if self.load_i32(p) == 0 {
                used = used.wrapping_add(1);
            }
            self.store_i32(p, n as i32);
        }
        let end_ts = store_time_of(last.phy_offset).unwrap_or_else(|| {
            self.begin_timestamp()
                .wrapping_add(i64::from(last.time_diff.max(0)) * 1000)
        });
        self.store_i64(H_END_PHY_OFFSET, last.phy_offset);
        self.store_i64(H_END_TIMESTAMP, end_ts);
        self.store_i32(H_HASH_SLOT_COUNT, used);
        self.store_i32(H_INDEX_COUNT, count as i32);
        self.publish_entries_below(count)?;
        self.flush_prefix(count)
    }

    /// msync of the whole mapping (the header words are always current in the mapping, so this
    /// is RocketMQ's "rewrite header + force").
    fn flush(&self) -> Result<()> {
        if !self.file.is_writable() {
            return Ok(());
        }
        let len = self.file.size();
        fail::fail_point!(fp::INDEX_MSYNC, |arg| Err(fp::injected(
            "msync",
            self.file.path(),
            arg
        )));
        self.file
            .region()
            .mapping()
            .flush_range(0, len)
            .map_err(|e| Error::io("msync", self.file.path(), e))?;
        #[cfg(feature = "powerloss")]
        crate::powerloss::synced(self.file.path(), 0, len);
        Ok(())
    }
}

/// The index files of a store, oldest first.
#[derive(Debug)]
pub(crate) struct IndexService {
    dir: PathBuf,
    slots: u32,
    entries: u32,
    file_size: usize,
    writable: bool,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// Serializes writers (build, roll, delete, truncate, destroy).
    writer: Mutex<()>,
    /// Full files rolled over but not flushed yet.
    unflushed_full: Mutex<Vec<Arc<IndexFile>>>,
    /// Directories and files created by the dispatcher whose creation is not durable yet: the
    /// next [`IndexService::flush_mark`] `fsync`s them before it msyncs anything, so the
    /// dispatcher never waits for the disk (a new file's `fsync` would queue behind the commit
    /// log's writeback).
    unsynced: CreationSyncs,
    /// endTimestamp of the newest full file known flushed (checkpoint `indexMsgTimestamp`).
    last_full_end_timestamp: AtomicI64,
}

/// The (slots, entries) geometry that the size of the first index file under `root` implies
/// when entries = 4 x slots (RocketMQ's default 5,000,000 : 20,000,000 ratio), or `None`.
pub(crate) fn infer_geometry(root: &Path) -> Option<(u32, u32)> {
    let mut sizes: Vec<(std::ffi::OsString, u64)> = std::fs::read_dir(root.join(INDEX_DIR))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let m = std::fs::symlink_metadata(e.path()).ok()?;
            (m.is_file() && m.len() > 0).then(|| (e.file_name(), m.len()))
        })
        .collect();
    sizes.sort();
    let len = sizes.first()?.1;
    let body = len.checked_sub(INDEX_HEADER_SIZE as u64)?;
    // slots * 4 + (4 * slots) * 20 = 84 * slots.
    if body == 0 || body % 84 != 0 {
        return None;
    }
    let slots = u32::try_from(body / 84).ok()?;
    let entries = slots.checked_mul(4)?;
    (index_file_size(slots, entries) == len).then_some((slots, entries))
}

#[allow(dead_code)]
impl IndexService {
    /// Loads `<root>/index` (§6.5): regular files sorted by name; sub-directories are skipped; a
    /// symbolic link, a name that is not all ASCII digits, or a file whose size is not
    /// `index_file_size(slots, entries)` is refused with `UnsupportedFormat` (recovery decides);
    /// an empty last file (a crash during creation) is deleted (writable) or ignored. After an
    /// abnormal exit (`!last_exit_ok`) every file with `endTimestamp > checkpoint_index_ts` is
    /// deleted (writable) or kept (read-only: hits are checked against their records). Keeps: nothing is written when read-only, no
    /// symlink is followed.
    pub(crate) fn load(
        root: &Path,
        slots: u32,
        entries: u32,
        writable: bool,
        last_exit_ok: bool,
        checkpoint_index_ts: i64,
    ) -> Result<Self> {
        let size = index_file_size(slots, entries);
        let file_size = usize::try_from(size)
            .ok()
            .filter(|_| slots > 0 && entries >= 2)
            .ok_or_else(|| Error::Config {
                key: "max_hash_slot_num/max_index_num".into(),
                reason: format!("index file of {slots} slots and {entries} entries is impossible"),
            })?;
        let dir = root.join(INDEX_DIR);
        let service = Self {
            dir: dir.clone(),
            slots,
            entries,
            file_size,
            writable,
            files: RwLock::new(Vec::new()),
            writer: Mutex::new(()),
            unflushed_full: Mutex::new(Vec::new()),
            unsynced: CreationSyncs::default(),
            last_full_end_timestamp: AtomicI64::new(0),
        };
        let meta = match std::fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(service),
            Err(e) => return Err(Error::io("stat", &dir, e)),
        };
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(Error::UnsupportedFormat {
                path: dir,
                reason: "not a directory (or a symbolic link)".into(),
            });
        }
        let mut found: Vec<(String, PathBuf, u64)> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("read_dir", &dir, e))? {
            let entry = entry.map_err(|e| Error::io("read_dir", &dir, e))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
            if meta.file_type().is_symlink() {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: "symbolic link".into(),
                });
            }
            if meta.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: "index file name is not a timestamp".into(),
                });
            }
            found.push((name, path, meta.len()));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some((_, path, 0)) = found.last() {
            if writable {
                std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))?;
            }
            found.pop();
        }
        let mut files = Vec::with_capacity(found.len());
        let mut removed = false;
        // After an unclean shutdown, an index file shorter than the geometry is a creation the
        // crash cut short (its name reached the disk, its size did not: files are created one
        // after another, so it and every later file were made after the last synced one). It
        // and the files after it are dropped (writable) or ignored (read-only); recovery
        // re-indexes from the end of the last file kept.
        let cut_short = (!last_exit_ok)
            .then(|| found.iter().position(|(_, _, len)| *len < size))
            .flatten();
        if let Some(at) = cut_short {
            for (_, path, _) in found.drain(at..) {
                if writable {
                    match std::fs::remove_file(&path) {
                        Ok(()) => removed = true,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io("unlink", &path, e)),
                    }
                }
            }
        }
        for (name, path, len) in found {
            if len != size {
                return Err(Error::UnsupportedFormat {
                    path,
                    reason: format!("index file is {len} bytes, expected {size} ({slots} slots, {entries} entries)"),
                });
            }
            let f = IndexFile::new(
                MappedFile::open(&path, 0, file_size, writable)?,
                name,
                slots,
                entries,
            )?;
            f.make_prefix_real()?;
            if !last_exit_ok && f.end_timestamp() > checkpoint_index_ts && writable {
                f.file.destroy()?;
                removed = true;
                continue;
            }
            // Read-only keeps such a file: every hit is checked against its record, and the
            // records it may lack are covered by the store's tail key map (tail_index.rs).
            files.push(Arc::new(f));
        }
        if removed {
            fsync_dir(&dir)?;
        }
        let full_end = files
            .iter()
            .filter(|f| f.is_full())
            .map(|f| f.end_timestamp())
            .max()
            .unwrap_or(0);
        service
            .last_full_end_timestamp
            .store(full_end, Ordering::Release);
        *service.write() = files;
        Ok(service)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<IndexFile>>> {
        self.files
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<IndexFile>>> {
        self.files
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn snapshot(&self) -> Vec<Arc<IndexFile>> {
        self.read().clone()
    }

    /// RocketMQ `IndexService.buildIndex` (§6.3, §6.4): gets the last file (rolling to a new one
    /// when it is full); skips the record if `phy_offset < endPhyOffset` of that file (already
    /// indexed; the strict comparison re-indexes the last record) or its transaction type is
    /// ROLLBACK; then puts `topic#UNIQ_KEY` and `topic#token` for each non-empty space-separated
    /// KEYS token, rolling whenever a file fills up. Keeps: single writer; each entry is complete
    /// before the count and slot that publish it.
    ///
    /// # Errors
    /// `ReadOnly`; I/O errors creating a file (nothing of the failed key is published).
    pub(crate) fn build_index(&self, req: &IndexRequest<'_>) -> Result<()> {
        self.batch()?.build(req)
    }

    /// The index writer for many records in a row (the dispatcher's batch): the writer lock is
    /// taken once and the newest file kept at hand until the batch is dropped, instead of once
    /// per record. Every change to the file list holds the writer lock, so the cached file
    /// stays the newest while the batch lives.
    ///
    /// # Errors
    /// `ReadOnly`.
    pub(crate) fn batch(&self) -> Result<IndexBatch<'_>> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        let guard = lock(&self.writer);
        let newest = self.read().last().cloned();
        Ok(IndexBatch {
            service: self,
            _writer: guard,
            newest,
            entries: None,
            prefixes: PrefixCache::default(),
            staged: Staged::default(),
        })
    }

    /// RocketMQ `getAndCreateLastIndexFile`: the last file if it is not full, else a new file
    /// whose header starts at the previous file's end values (when > 0). The full file is queued
    /// for [`IndexService::flush`].
    fn last_writable_file(&self) -> Result<Arc<IndexFile>> {
        let last = self.read().last().cloned();
        let (prev_end_phy, prev_end_ts) = match &last {
            Some(f) if !f.is_full() => return Ok(Arc::clone(f)),
            Some(f) => (f.end_phy_offset(), f.end_timestamp()),
            None => (0, 0),
        };
        let file = Arc::new(self.create_file(
            last.as_ref().map(|f| f.name.as_str()),
            prev_end_phy,
            prev_end_ts,
        )?);
        self.write().push(Arc::clone(&file));
        if let Some(full) = last {
            lock(&self.unflushed_full).push(full);
        }
        Ok(file)
    }

    /// Creates a new index file named by the current local time (`yyyyMMddHHmmssSSS`), bumped by
    /// 1 ms while the name is not after `after` or already exists, so names stay unique and
    /// sorted in creation order.
    fn create_file(
        &self,
        after: Option<&str>,
        prev_end_phy: i64,
        prev_end_ts: i64,
    ) -> Result<IndexFile> {
        check_not_symlink(&self.dir)?;
        if !self.dir.is_dir() {
            std::fs::create_dir_all(&self.dir).map_err(|e| Error::io("mkdir", &self.dir, e))?;
            if let Some(parent) = self.dir.parent() {
                self.unsynced.push(Created::Dir(parent.to_path_buf()));
            }
        }
        // The engine's clock (`now_ms`), in local time as RocketMQ names index files.
        let mut now = chrono::DateTime::from_timestamp_millis(crate::util::now_ms())
            .map_or_else(chrono::Local::now, |t| t.with_timezone(&chrono::Local))
            .naive_local();
        let mut name = now.format(NAME_FORMAT).to_string();
        if let Some(after) = after {
            if name.len() == after.len() && name.as_str() <= after {
                match chrono::NaiveDateTime::parse_from_str(after, NAME_FORMAT) {
                    Ok(t) => {
                        now = t + chrono::Duration::milliseconds(1);
                        name = now.format(NAME_FORMAT).to_string();
                    }
                    Err(_) => name = bump_digits(after),
                }
            }
        }
        let opts = CreateOptions {
            // Made durable by the next flush (`unsynced`), before any msync of the file.
            sync: false,
            defer_sync: false,
            populate: false,
            warm: None,
            // The header page now; each slot page before its first write
            // (`IndexFile::ensure_page_real`), so the slots never used stay holes; entries are
            // appended, so their blocks are allocated 1 MiB ahead of the writer (RocketMQ leaves
            // the whole file sparse, which risks SIGBUS on a full disk).
            prealloc: Some(PAGE as u64),
        };
        for _ in 0..1000 {
            let path = self.dir.join(&name);
            match MappedFile::create(&path, 0, self.file_size, &opts) {
                Ok(mf) => {
                    // Slots are written all over and entries appended: one page per fault.
                    mf.advise_random();
                    #[cfg(feature = "powerloss")]
                    crate::powerloss::unsynced(&path);
                    self.unsynced
                        .push(Created::File(path.clone(), self.file_size));
                    let f = IndexFile::new(mf, name, self.slots, self.entries)?;
                    if prev_end_phy > 0 {
                        f.store_i64(H_BEGIN_PHY_OFFSET, prev_end_phy);
                        f.store_i64(H_END_PHY_OFFSET, prev_end_phy);
                    }
                    if prev_end_ts > 0 {
                        f.store_i64(H_BEGIN_TIMESTAMP, prev_end_ts);
                        f.store_i64(H_END_TIMESTAMP, prev_end_ts);
                    }
                    // RocketMQ's in-memory indexCount of a new file is 1 (entry #0 is unused).
                    f.store_i32(H_INDEX_COUNT, 1);
                    return Ok(f);
                }
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    now += chrono::Duration::milliseconds(1);
                    name = now.format(NAME_FORMAT).to_string();
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Io {
            op: "create",
            path: self.dir.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "no free index file name",
            ),
        })
    }

    /// RocketMQ `IndexService.queryOffset` (§6.6): walks the files newest to oldest, recording the
    /// newest file's end timestamp / phy offset; collects from each file whose time range
    /// matches `[begin, end]`, and stops after a file that begins before `begin` or once
    /// `max_num` offsets are collected. The caller applies `maxMsgsNumBatch` to `max_num`.
    /// Keeps: never loops on a corrupt file (bounded walk, entries in bounds only).
    pub(crate) fn query(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryOffsetResult {
        self.query_with(topic, key, max_num, begin, end, |_| {})
    }

    /// [`IndexService::query`], calling `on_hit` with each offset as soon as the walk finds
    /// it, while the walk goes on (a reader starts loading the record there, so that its
    /// cache miss overlaps the rest of the chain's).
    pub(crate) fn query_with(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
        on_hit: impl FnMut(i64),
    ) -> QueryOffsetResult {
        let mut phy_offsets = Vec::with_capacity(max_num.min(64));
        let hash = index_key_hash_of(topic, key);
        let (ts, phy) = self.query_hashed_into(hash, max_num, begin, end, &mut phy_offsets, on_hit);
        QueryOffsetResult {
            phy_offsets,
            index_last_update_timestamp: ts,
            index_last_update_phy_offset: phy,
        }
    }

    /// [`IndexService::query_with`] of a key whose index hash is `hash`
    /// ([`rocketstore_format::index_key_hash_of`]), its offsets put in `out` (cleared first: a
    /// caller looking up many keys keeps one vector). Returns the newest file's endTimestamp
    /// and endPhyOffset (0, 0 without a file).
    pub(crate) fn query_hashed_into(
        &self,
        hash: i32,
        max_num: usize,
        begin: i64,
        end: i64,
        out: &mut Vec<i64>,
        mut on_hit: impl FnMut(i64),
    ) -> (i64, i64) {
        out.clear();
        let mut last_update = (0, 0);
        // The file list's read lock is held for the walk (a few reads of mapped memory)
        // instead of cloning the list: the writer takes it only to add or remove a file.
        let files = self.read();
        for (i, f) in files.iter().enumerate().rev() {
            if i + 1 == files.len() {
                last_update = (f.end_timestamp(), f.end_phy_offset());
            }
            if f.is_time_matched(begin, end) {
                f.select(out, hash, max_num, (begin, end), &mut on_hit);
            }
            if f.begin_timestamp() < begin || out.len() >= max_num {
                break;
            }
        }
        last_update
    }

    /// A [`ChainPrefetch`] over the newest index file, if queries over `[begin, end]` read
    /// it (they read it first).
    pub(crate) fn chain_prefetch(&self, begin: i64, end: i64) -> ChainPrefetch {
        let file = self
            .read()
            .last()
            .filter(|f| f.is_time_matched(begin, end))
            .cloned();
        let count = file.as_ref().map_or(0, |f| f.index_count());
        ChainPrefetch { file, count }
    }

    /// Whether [`IndexService::query`] of `key` over all time with `max_num` results would
    /// return `phy_offset`: `Ok(())` if so, else `Err(hits)` with the number of offsets it
    /// would return. Stops walking as soon as the offset is found (the verifier's check of
    /// every key).
    pub(crate) fn finds(
        &self,
        topic: &str,
        key: &str,
        phy_offset: i64,
        max_num: usize,
    ) -> std::result::Result<(), usize> {
        let (begin, end) = (0, i64::MAX);
        let files = self.snapshot();
        let hash = index_key_hash_of(topic, key);
        let (mut hits, mut found) = (0usize, false);
        for f in files.iter().rev() {
            if f.is_time_matched(begin, end) && hits < max_num {
                f.walk(hash, begin, end, |phy| {
                    hits += 1;
                    found = phy == phy_offset;
                    !found && hits < max_num
                });
            }
            if found {
                return Ok(());
            }
            if f.begin_timestamp() < begin || hits >= max_num {
                break;
            }
        }
        Err(hits)
    }

    /// Flushes (msync) every full file rolled over since the last flush, then the active file.
    /// For each flushed full file its endTimestamp is recorded in
    /// [`IndexService::last_full_end_timestamp`] (the caller then writes the checkpoint's
    /// `indexMsgTimestamp`, §6.5). Keeps: a file whose msync failed stays queued and its
    /// timestamp is not recorded.
    pub(crate) fn flush(&self) -> Result<()> {
        self.flush_mark().map(|_| ())
    }

    /// [`IndexService::flush`], returning the durable point it made: the newest file's name,
    /// `indexCount`, endPhyOffset and endTimestamp, read between two records (under the writer
    /// lock, with the list of full files to flush) before the msync of its header, slots and
    /// those entries. `None` when there is no index file (or its name is not a number).
    pub(crate) fn flush_mark(&self) -> Result<Option<IndexMark>> {
        if !self.writable {
            return Ok(None);
        }
        self.unsynced.sync()?;
        let (pending, snap) = {
            let _w = lock(&self.writer);
            let pending = std::mem::take(&mut *lock(&self.unflushed_full));
            let snap = self.read().last().cloned().map(|f| {
                let mark = IndexMark {
                    file: f.name.parse::<i64>().unwrap_or(0),
                    count: u32::try_from(f.index_count()).unwrap_or(1),
                    end_phy: f.end_phy_offset(),
                    end_ts: f.end_timestamp(),
                };
                (f, mark)
            });
            (pending, snap)
        };
        for (i, f) in pending.iter().enumerate() {
            if let Err(e) = f.flush() {
                lock(&self.unflushed_full).extend(pending.iter().skip(i).cloned());
                return Err(e);
            }
            self.last_full_end_timestamp
                .fetch_max(f.end_timestamp(), Ordering::AcqRel);
        }
        let Some((f, mark)) = snap else {
            return Ok(None);
        };
        f.flush_prefix(mark.count)?;
        if i64::from(mark.count) >= i64::from(f.entries) {
            self.last_full_end_timestamp
                .fetch_max(mark.end_ts, Ordering::AcqRel);
        }
        Ok((mark.file > 0).then_some(mark))
    }

    /// Abnormal recovery after a power loss: cuts the index back to a durable mark of the
    /// checkpoint (files newer than `file` are deleted, `file` keeps its first `count` entries
    /// with its hash slots rebuilt from them, see `IndexFile::cut_to`). Returns false, changing
    /// nothing, if no loaded file has that name or `count` is impossible: the caller then
    /// rebuilds the index from the commit log.
    pub(crate) fn cut_to_mark(
        &self,
        file: i64,
        count: u32,
        commitlog_end: u64,
        store_time_of: &dyn Fn(i64) -> Option<i64>,
    ) -> Result<bool> {
        let _w = lock(&self.writer);
        let pos = {
            let mut list = self.write();
            let Some(pos) = list
                .iter()
                .position(|f| f.name.parse::<i64>().ok() == Some(file))
            else {
                return Ok(false);
            };
            if list.get(pos).is_none_or(|t| count > t.entries) {
                return Ok(false);
            }
            // The mark's `count` entries are durable whatever the header's count says; the file
            // is cut to at most them or removed below, so publish exactly them.
            in_use(&self.dir, list.get_mut(pos).and_then(Arc::get_mut))?
                .publish_entries_below(count)?;
            pos
        };
        let files = self.snapshot();
        let end = i64::try_from(commitlog_end).unwrap_or(i64::MAX);
        // From the mark's file back: keep the durable entries that name records the commit log
        // kept (entries run in commit log order, so a binary search finds the first to drop).
        let mut first_doomed = pos + 1;
        let mut cut = None;
        for (i, f) in files.iter().enumerate().take(pos + 1).rev() {
            let durable = if i == pos {
                count
            } else {
                u32::try_from(f.index_count()).unwrap_or(1).min(f.entries)
            };
            let keep = f.first_entry_from(durable, end);
            if keep > 1 {
                if i == pos || keep < durable {
                    cut = Some((i, keep));
                }
                break;
            }
            first_doomed = i;
        }
        let doomed = files.get(first_doomed..).unwrap_or(&[]).to_vec();
        drop(files);
        if let Some((i, keep)) = cut {
            // Exclusive: nobody else may hold the file whose published entries are cut.
            let mut list = self.write();
            in_use(&self.dir, list.get_mut(i).and_then(Arc::get_mut))?
                .cut_to(keep, store_time_of)?;
        }
        self.remove_and_refresh(&doomed)?;
        Ok(true)
    }

    /// True if a full file awaits [`IndexService::flush`] (RocketMQ flushes it right after the
    /// roll, then the checkpoint).
    pub(crate) fn has_unflushed_full(&self) -> bool {
        !lock(&self.unflushed_full).is_empty()
    }

    /// endTimestamp of the newest full index file known flushed (loaded full files count as
    /// flushed), 0 if none: the checkpoint's `indexMsgTimestamp` (§6.5, §15 writer checklist 6).
    pub(crate) fn last_full_end_timestamp(&self) -> i64 {
        self.last_full_end_timestamp.load(Ordering::Acquire)
    }

    /// RocketMQ `deleteExpiredFile(commitlogMin)` (§6.5): if the first file's endPhyOffset is
    /// below `commitlog_min`, destroys files in order while their endPhyOffset is below it,
    /// never the last file. Returns the number deleted. Keeps: queries holding a file keep its
    /// mapping.
    pub(crate) fn delete_expired(&self, commitlog_min: u64) -> Result<usize> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        let _w = lock(&self.writer);
        let min = i64::try_from(commitlog_min).unwrap_or(i64::MAX);
        let files = self.snapshot();
        let Some(first) = files.first() else {
            return Ok(0);
        };
        if first.end_phy_offset() >= min {
            return Ok(0);
        }
        let doomed: Vec<Arc<IndexFile>> = files
            .iter()
            .take(files.len().saturating_sub(1))
            .take_while(|f| f.end_phy_offset() < min)
            .cloned()
            .collect();
        self.remove(&doomed)?;
        Ok(doomed.len())
    }

    /// A read-only index following a writer in another process (`crate::follow`): each file's
    /// entries become readable up to its header's `indexCount` (the writer counts an entry
    /// once it is written; every hit is still checked against its record), the files the
    /// writer created since are opened read-only, and those wholly below `commitlog_min` (its
    /// cleanup deletes them) are dropped.
    pub(crate) fn follow(&self, commitlog_min: u64) -> Result<()> {
        if self.writable {
            return Ok(());
        }
        let min = i64::try_from(commitlog_min).unwrap_or(i64::MAX);
        {
            let mut files = self.write();
            let n = files.len();
            let mut i = 0;
            files.retain(|f| {
                i += 1;
                i == n || f.end_phy_offset() >= min
            });
        }
        let last = self.read().last().map(|f| f.name.clone());
        let mut found: Vec<(String, PathBuf)> = Vec::new();
        if let Ok(dir) = std::fs::read_dir(&self.dir) {
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.is_empty()
                    || !name.bytes().all(|b| b.is_ascii_digit())
                    || last
                        .as_ref()
                        .is_some_and(|l| (l.len(), l.as_str()) >= (name.len(), name.as_str()))
                {
                    continue;
                }
                let full = std::fs::symlink_metadata(entry.path())
                    .is_ok_and(|m| m.is_file() && m.len() == self.file_size as u64);
                if full {
                    found.push((name, entry.path()));
                }
            }
        }
        found.sort_by(|a, b| (a.0.len(), &a.0).cmp(&(b.0.len(), &b.0)));
        for (name, path) in found {
            let Ok(file) = MappedFile::open(&path, 0, self.file_size, false) else {
                break;
            };
            let f = IndexFile::new(file, name, self.slots, self.entries)?;
            self.write().push(Arc::new(f));
        }
        for f in self.read().iter() {
            let count = u32::try_from(f.index_count()).unwrap_or(1).min(f.entries);
            if let Ok(end) = usize::try_from(entry_position(self.slots, count)) {
                f.file.follow_to(end);
            }
        }
        Ok(())
    }

    fn remove(&self, doomed: &[Arc<IndexFile>]) -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        let is_doomed = |f: &Arc<IndexFile>| doomed.iter().any(|d| Arc::ptr_eq(d, f));
        self.write().retain(|f| !is_doomed(f));
        lock(&self.unflushed_full).retain(|f| !is_doomed(f));
        if self.writable {
            for f in doomed {
                f.file.destroy()?;
            }
            fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Recovery helper: drops the newest files whose beginPhyOffset is `>= phy_offset` (they only
    /// index records past the recovered end; re-dispatch rebuilds them), destroying them when
    /// writable. A writable file straddling `phy_offset` is cut to its entries below it (or
    /// removed if none is): its endPhyOffset must fall below the end again, or the dispatch of
    /// the records written after recovery at those offsets would be skipped as already indexed
    /// (RocketMQ's `phyOffset < endPhyOffset` rule). `store_time_of` gives a record's store time
    /// for the cut file's endTimestamp. `last_full_end_timestamp` is recomputed from the
    /// remaining full files.
    pub(crate) fn truncate_after(
        &self,
        phy_offset: u64,
        store_time_of: &dyn Fn(i64) -> Option<i64>,
    ) -> Result<()> {
        let _w = lock(&self.writer);
        let limit = i64::try_from(phy_offset).unwrap_or(i64::MAX);
        let files = self.snapshot();
        let mut doomed: Vec<Arc<IndexFile>> = files
            .iter()
            .rev()
            .take_while(|f| f.begin_phy_offset() >= limit)
            .cloned()
            .collect();
        // Entries run in commit log order, so only the newest kept file can name records past
        // the end; a binary search finds its first such entry.
        let straddling = files.len() - doomed.len();
        let mut cut = None;
        if let Some(f) = straddling
            .checked_sub(1)
            .and_then(|i| files.get(i).map(|f| (i, f)))
        {
            let (i, f) = f;
            if self.writable && f.end_phy_offset() >= limit {
                let count = u32::try_from(f.index_count()).unwrap_or(1).min(f.entries);
                let keep = f.first_entry_from(count, limit);
                if keep > 1 {
                    cut = Some((i, keep));
                } else {
                    doomed.push(Arc::clone(f));
                }
            }
        }
        drop(files);
        if let Some((i, keep)) = cut {
            // Exclusive: recovery runs before any reader or the dispatcher holds the file.
            let mut list = self.write();
            in_use(&self.dir, list.get_mut(i).and_then(Arc::get_mut))?
                .cut_to(keep, store_time_of)?;
        }
        self.remove_and_refresh(&doomed)?;
        Ok(())
    }

    /// Removes `doomed` and recomputes the store time up to which full files index every
    /// record (the newest end of the full files that remain).
    fn remove_and_refresh(&self, doomed: &[Arc<IndexFile>]) -> Result<()> {
        self.remove(doomed)?;
        let full_end = self
            .snapshot()
            .iter()
            .filter(|f| f.is_full())
            .map(|f| f.end_timestamp())
            .max()
            .unwrap_or(0);
        self.last_full_end_timestamp
            .store(full_end, Ordering::Release);
        Ok(())
    }

    /// Gives back the blocks a closed store does not use ([`IndexFile::trim`]), once the
    /// dispatcher is done. Returns the bytes punched.
    pub(crate) fn trim(&self) -> Result<u64> {
        let _writer = lock(&self.writer);
        let mut punched = 0;
        for f in self.snapshot() {
            punched += f.trim()?;
        }
        Ok(punched)
    }

    /// Recovery after a crash (writable): the index files found (and their directory) are
    /// queued as creations not yet durable, so the next flush fsyncs them before it msyncs
    /// anything or a checkpoint marks entries in them (a crashed process may have created a
    /// file whose name never reached the disk).
    pub(crate) fn adopt_existing(&self) {
        if !self.writable {
            return;
        }
        let files = self.snapshot();
        if files.is_empty() {
            return;
        }
        self.unsynced.push(Created::Dir(self.dir.clone()));
        for f in files {
            self.unsynced
                .push(Created::File(f.file.path().to_path_buf(), f.file.size()));
        }
    }

    /// Recovery helper: drops index files left from another history of the commit log (a broker
    /// truncated the log and wrote other records over the cut, leaving its index files). A
    /// file's header names its last entry's record (endPhyOffset, endTimestamp); if that
    /// offset is in the log but `names_record(offset, timestamp)` says no record with that
    /// store time starts there, the file indexes records that are gone, and so do all newer
    /// files (entries run in commit log order): the first such file and every newer one are
    /// removed (destroyed when writable), and re-dispatch from the remaining files' end
    /// rebuilds their entries, as `rebuild_indexes` does. Files whose end lies below
    /// `log_min` (deleted commit log files) or that hold no entry are not judged. Returns the
    /// number of files removed.
    pub(crate) fn drop_stale(
        &self,
        log_min: u64,
        names_record: &dyn Fn(i64, i64) -> bool,
    ) -> Result<usize> {
        let _w = lock(&self.writer);
        let files = self.snapshot();
        let log_min = i64::try_from(log_min).unwrap_or(i64::MAX);
        let first_stale = files.iter().position(|f| {
            f.index_count() > 1
                && f.end_phy_offset() >= log_min
                && !names_record(f.end_phy_offset(), f.end_timestamp())
        });
        let Some(first) = first_stale else {
            return Ok(0);
        };
        let doomed = files.get(first..).unwrap_or_default().to_vec();
        drop(files);
        self.remove_and_refresh(&doomed)?;
        Ok(doomed.len())
    }

    /// Destroys every index file (RocketMQ `IndexService.destroy`).
    pub(crate) fn destroy_all(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        let _w = lock(&self.writer);
        let files = self.snapshot();
        self.remove(&files)?;
        self.last_full_end_timestamp.store(0, Ordering::Release);
        Ok(())
    }

    /// Paths of the index files, oldest first.
    /// endPhyOffset of the newest index file (-1 when there is none): records before it are
    /// indexed already, so re-dispatch for the index may start there.
    pub(crate) fn last_end_phy_offset(&self) -> i64 {
        self.headers().last().map_or(-1, |h| h.end_phy_offset)
    }

    /// As [`crate::commitlog::CommitLog::io_fault`], for every index file.
    pub(crate) fn io_fault(&self) -> Option<Error> {
        if crate::mmap::io_faults() == 0 {
            return None;
        }
        let files = self.read();
        let f = files.iter().find(|f| f.file.io_failed())?;
        Some(f.file.io_fault_error("read"))
    }

    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.read()
            .iter()
            .map(|f| f.file.path().to_path_buf())
            .collect()
    }

    /// Header of every index file, oldest first (diagnostics, checks).
    pub(crate) fn headers(&self) -> Vec<IndexHeader> {
        self.read().iter().map(|f| f.header()).collect()
    }

    /// Every published entry of every index file, oldest file first: (path, header, slots,
    /// `(entry number, entry)` for entries `1..indexCount`). Diagnostics; read-only.
    #[allow(clippy::type_complexity)]
    pub(crate) fn all_entries(&self) -> Vec<(PathBuf, IndexHeader, u32, Vec<(u32, IndexEntry)>)> {
        self.read()
            .iter()
            .map(|f| {
                // Count first: every entry below it is complete and never written again.
                let count = u32::try_from(f.index_count()).unwrap_or(0).min(f.entries);
                let entries = (1..count)
                    .filter_map(|n| f.entry(n).map(|e| (n, e)))
                    .collect();
                (f.file.path().to_path_buf(), f.header(), f.slots, entries)
            })
            .collect()
    }
}

/// `file`, or the error of a recovery step that needs an index file to itself while someone
/// else still holds it.
fn in_use<'a>(dir: &Path, file: Option<&'a mut IndexFile>) -> Result<&'a mut IndexFile> {
    file.ok_or_else(|| {
        Error::corruption(
            dir,
            0,
            CorruptionKind::Invalid("index file in use during recovery".into()),
        )
    })
}

/// Adds 1 to a string of decimal digits, keeping its width (a fallback for index file names that
/// do not parse as a date).
fn bump_digits(s: &str) -> String {
    let mut digits: Vec<u8> = s.bytes().collect();
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return String::from_utf8_lossy(&digits).into_owned();
        }
    }
    let mut out = String::from("1");
    out.push_str(&String::from_utf8_lossy(&digits));
    out
}

const _: () = assert!(INDEX_HEADER_SIZE == H_INDEX_COUNT + 4);

pub(crate) mod handoff;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod java_crosscheck;
