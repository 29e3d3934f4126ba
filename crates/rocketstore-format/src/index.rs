//! Index files (spec §6): header, hash slots, entries, and pure helpers to put a key and to walk a
//! hash chain over the bytes of an index file.
//!
//! Layout: a 40-byte [`IndexHeader`], then `slots` × 4-byte slot values (the newest entry number of
//! that chain, 0 = empty), then `entries` × 20-byte [`IndexEntry`]s. Entry numbers start at 1;
//! entry #0 is never used.

use crate::bytes::{i32_at, i64_at, put_at};
use crate::consts::{INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE};

/// The 40-byte index-file header (§6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IndexHeader {
    /// STORETIMESTAMP of the first entry (or the previous file's end for a new non-first file).
    pub begin_timestamp: i64,
    /// STORETIMESTAMP of the last entry.
    pub end_timestamp: i64,
    /// PHYSICALOFFSET of the first entry.
    pub begin_phy_offset: i64,
    /// PHYSICALOFFSET of the last entry.
    pub end_phy_offset: i64,
    /// Number of slots ever set from empty.
    pub hash_slot_count: i32,
    /// Next entry number (starts at 1, so the number of entries is `index_count - 1`).
    pub index_count: i32,
}

impl IndexHeader {
    /// The 40 header bytes.
    pub fn encode(&self) -> [u8; INDEX_HEADER_SIZE] {
        let mut out = [0u8; INDEX_HEADER_SIZE];
        let fields = self
            .begin_timestamp
            .to_be_bytes()
            .into_iter()
            .chain(self.end_timestamp.to_be_bytes())
            .chain(self.begin_phy_offset.to_be_bytes())
            .chain(self.end_phy_offset.to_be_bytes())
            .chain(self.hash_slot_count.to_be_bytes())
            .chain(self.index_count.to_be_bytes());
        for (dst, src) in out.iter_mut().zip(fields) {
            *dst = src;
        }
        out
    }

    /// Decodes the first 40 bytes of `b`; `None` if shorter.
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(IndexHeader {
            begin_timestamp: i64_at(b, 0)?,
            end_timestamp: i64_at(b, 8)?,
            begin_phy_offset: i64_at(b, 16)?,
            end_phy_offset: i64_at(b, 24)?,
            hash_slot_count: i32_at(b, 32)?,
            index_count: i32_at(b, 36)?,
        })
    }
}

/// One 20-byte index entry (§6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// [`crate::hash::index_key_hash`] of `"topic#key"`.
    pub key_hash: i32,
    /// PHYSICALOFFSET of the record.
    pub phy_offset: i64,
    /// Seconds since the header's begin timestamp ([`index_time_diff`]).
    pub time_diff: i32,
    /// Previous entry number in the same chain; 0 ends the chain.
    pub prev_index: i32,
}

impl IndexEntry {
    /// The 20 entry bytes.
    pub fn encode(&self) -> [u8; INDEX_ENTRY_SIZE] {
        let mut out = [0u8; INDEX_ENTRY_SIZE];
        out[..4].copy_from_slice(&self.key_hash.to_be_bytes());
        out[4..12].copy_from_slice(&self.phy_offset.to_be_bytes());
        out[12..16].copy_from_slice(&self.time_diff.to_be_bytes());
        out[16..].copy_from_slice(&self.prev_index.to_be_bytes());
        out
    }

    /// Decodes the first 20 bytes of `b`; `None` if shorter.
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(IndexEntry {
            key_hash: i32_at(b, 0)?,
            phy_offset: i64_at(b, 4)?,
            time_diff: i32_at(b, 12)?,
            prev_index: i32_at(b, 16)?,
        })
    }
}

/// Size of an index file: `40 + slots × 4 + entries × 20` (420,000,040 with the defaults).
pub fn index_file_size(slots: u32, entries: u32) -> u64 {
    INDEX_HEADER_SIZE as u64
        + u64::from(slots) * INDEX_SLOT_SIZE as u64
        + u64::from(entries) * INDEX_ENTRY_SIZE as u64
}

/// Byte position of hash slot `slot`: `40 + slot × 4`.
pub fn slot_position(slot: u32) -> u64 {
    INDEX_HEADER_SIZE as u64 + u64::from(slot) * INDEX_SLOT_SIZE as u64
}

/// Byte position of entry `n` in a file with `slots` slots: `40 + slots × 4 + n × 20`
/// (entry #1 of a default file is at 20,000,060).
pub fn entry_position(slots: u32, n: u32) -> u64 {
    slot_position(slots) + u64::from(n) * INDEX_ENTRY_SIZE as u64
}

/// The slot of a key hash: `key_hash % slots` (Java `%` for the non-negative hashes
/// [`crate::hash::index_key_hash`] produces; Euclidean remainder for negative input). Returns 0 if
/// `slots` is 0 (such a file has no slots; callers must not create one).
pub fn index_slot(key_hash: i32, slots: u32) -> u32 {
    if slots == 0 {
        return 0;
    }
    let r = i64::from(key_hash).rem_euclid(i64::from(slots));
    u32::try_from(r).unwrap_or(0)
}

/// Entry `timeDiff` (§6.1): `(store_ts - begin_ts) / 1000` (seconds, truncating), clamped to
/// `[0, i32::MAX]`; 0 if `begin_ts <= 0`. The subtraction wraps like Java `long`.
pub fn index_time_diff(store_ts: i64, begin_ts: i64) -> i32 {
    if begin_ts <= 0 {
        return 0;
    }
    let diff = store_ts.wrapping_sub(begin_ts) / 1000;
    i32::try_from(diff.clamp(0, i64::from(i32::MAX))).unwrap_or(i32::MAX)
}

/// The indexed key of a message key: `"topic#key"` (§6.3).
pub fn index_key(topic: &str, key: &str) -> String {
    let mut s = String::with_capacity(topic.len() + 1 + key.len());
    s.push_str(topic);
    s.push('#');
    s.push_str(key);
    s
}

fn to_usize(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// The value of slot `slot` in the bytes of an index file; `None` if out of bounds.
/// (Does not check `slot` against the file's slot count.)
pub fn read_slot(file: &[u8], slot: u32) -> Option<i32> {
    i32_at(file, to_usize(slot_position(slot))?)
}

/// Entry `n` of an index file with `slots` slots; `None` if out of bounds.
pub fn read_entry(file: &[u8], slots: u32, n: u32) -> Option<IndexEntry> {
    let pos = to_usize(entry_position(slots, n))?;
    IndexEntry::decode(file.get(pos..)?)
}

/// Walks the hash chain starting at slot `slot` of an index file given as bytes, returning the
/// entries newest first. Purely structural: the caller filters by key hash and time.
///
/// The walk is bounded and always terminates. It returns nothing if the file is shorter than the
/// header, `slot >= slots`, the header's `index_count <= 1`, or the slot value is `<= 0` or
/// `> index_count`. Otherwise it reads entries starting at the slot value and follows
/// `prev_index`, stopping (after including the current entry) when:
/// * `prev_index <= 0` (end of chain);
/// * `prev_index >= current` (entry numbers must strictly decrease — this also rules out
///   self-loops and cycles, which RocketMQ only partly guards against);
/// * `prev_index > index_count`;
/// * the next entry number is `>= entries` or its bytes are outside `file`;
/// * `max_steps` entries have been collected.
///
/// An entry whose own number is `>= entries` or outside `file` is never read.
pub fn walk_chain(
    file: &[u8],
    slots: u32,
    entries: u32,
    slot: u32,
    max_steps: usize,
) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let Some(header) = IndexHeader::decode(file) else {
        return out;
    };
    if slot >= slots || header.index_count <= 1 || max_steps == 0 {
        return out;
    }
    let Some(head) = read_slot(file, slot) else {
        return out;
    };
    if head <= 0 || head > header.index_count {
        return out;
    }
    let mut current = head;
    while let Ok(n) = u32::try_from(current) {
        if n >= entries {
            break;
        }
        let Some(entry) = read_entry(file, slots, n) else {
            break;
        };
        out.push(entry);
        let prev = entry.prev_index;
        if out.len() >= max_steps || prev <= 0 || prev >= current || prev > header.index_count {
            break;
        }
        current = prev;
    }
    out
}

/// Why [`put_key`] did not write an entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexPutError {
    /// `index_count >= entries`: the file is full; roll to a new file.
    #[error("index file is full")]
    Full,
    /// The buffer is shorter than [`index_file_size`]`(slots, entries)`.
    #[error("index file buffer is {len} bytes, {needed} needed")]
    FileTooSmall {
        /// Required size.
        needed: u64,
        /// Actual size.
        len: usize,
    },
}

/// RocketMQ `IndexFile.putKey` (§6.4) over the bytes of an index file (header included):
///
/// 1. read the header; an `index_count <= 0` counts as 1 (a fresh file); full if
///    `index_count >= entries`;
/// 2. slot = [`index_slot`]; a slot value `<= 0` or `> index_count` counts as 0;
/// 3. time diff from the header's begin timestamp ([`index_time_diff`], computed *before* the
///    begin timestamp is set for the first entry — the RocketMQ quirk);
/// 4. write entry #index_count = (key_hash, phy_offset, time diff, slot value); slot := index_count;
/// 5. first entry (`index_count <= 1`): begin phy offset / timestamp := this record's;
/// 6. if the slot was empty, `hash_slot_count += 1`; `index_count += 1`; end phy offset /
///    timestamp := this record's; write the header.
///
/// A new non-first file must start with begin = end = the previous file's end values (write that
/// header before the first `put_key`). Returns the entry number written.
///
/// # Errors
/// [`IndexPutError::FileTooSmall`] or [`IndexPutError::Full`]; the file is unchanged then.
pub fn put_key(
    file: &mut [u8],
    slots: u32,
    entries: u32,
    key_hash: i32,
    phy_offset: i64,
    store_timestamp: i64,
) -> Result<u32, IndexPutError> {
    let needed = index_file_size(slots, entries);
    let too_small = IndexPutError::FileTooSmall {
        needed,
        len: file.len(),
    };
    if to_usize(needed).is_none_or(|n| file.len() < n) {
        return Err(too_small);
    }
    let mut header = IndexHeader::decode(file).ok_or(too_small.clone())?;
    if header.index_count <= 0 {
        header.index_count = 1;
    }
    let n = u32::try_from(header.index_count).map_err(|_| IndexPutError::Full)?;
    if n >= entries {
        return Err(IndexPutError::Full);
    }
    let slot = index_slot(key_hash, slots);
    let slot_pos = to_usize(slot_position(slot)).ok_or(too_small.clone())?;
    let mut slot_value = i32_at(file, slot_pos).ok_or(too_small.clone())?;
    if slot_value <= 0 || slot_value > header.index_count {
        slot_value = 0;
    }
    let time_diff = index_time_diff(store_timestamp, header.begin_timestamp);
    let entry = IndexEntry {
        key_hash,
        phy_offset,
        time_diff,
        prev_index: slot_value,
    };
    let entry_pos = to_usize(entry_position(slots, n)).ok_or(too_small.clone())?;
    put_at(file, entry_pos, &entry.encode()).ok_or(too_small.clone())?;
    put_at(file, slot_pos, &header.index_count.to_be_bytes()).ok_or(too_small.clone())?;
    if header.index_count <= 1 {
        header.begin_phy_offset = phy_offset;
        header.begin_timestamp = store_timestamp;
    }
    if slot_value == 0 {
        header.hash_slot_count = header.hash_slot_count.wrapping_add(1);
    }
    header.index_count = header.index_count.wrapping_add(1);
    header.end_phy_offset = phy_offset;
    header.end_timestamp = store_timestamp;
    put_at(file, 0, &header.encode()).ok_or(too_small)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;
    use crate::consts::{DEFAULT_INDEX_ENTRIES, DEFAULT_INDEX_HASH_SLOTS};
    use crate::hash::index_key_hash;

    #[test]
    fn vector_3_sizes() {
        assert_eq!(
            index_file_size(DEFAULT_INDEX_HASH_SLOTS, DEFAULT_INDEX_ENTRIES),
            420_000_040
        );
        assert_eq!(entry_position(DEFAULT_INDEX_HASH_SLOTS, 1), 20_000_060);
        assert_eq!(slot_position(0), 40);
        assert_eq!(
            index_file_size(u32::MAX, u32::MAX),
            40 + 4 * 4_294_967_295 + 20 * 4_294_967_295
        );
    }

    #[test]
    fn vector_14_slots() {
        let slots = DEFAULT_INDEX_HASH_SLOTS;
        let h = index_key_hash("TopicTest#OrderID001");
        assert_eq!(index_slot(h, slots), 1_272_886);
        assert_eq!(slot_position(index_slot(h, slots)), 5_091_584);
        let h0 = index_key_hash("TopicTest#ogaQmc");
        assert_eq!(index_slot(h0, slots), 0);
        assert_eq!(slot_position(index_slot(h0, slots)), 40);
        assert_eq!(
            index_slot(index_key_hash("TopicTest#KEY1"), slots),
            1_969_516
        );
        assert_eq!(index_slot(5, 0), 0);
        assert_eq!(index_slot(-1, 10), 9);
        assert_eq!(index_key("TopicTest", "OrderID001"), "TopicTest#OrderID001");
    }

    #[test]
    fn time_diff() {
        assert_eq!(index_time_diff(1_700_000_000_123, 0), 0);
        assert_eq!(index_time_diff(1_700_000_000_123, -5), 0);
        assert_eq!(index_time_diff(1_700_000_001_999, 1_700_000_000_000), 1);
        assert_eq!(index_time_diff(1_699_999_000_000, 1_700_000_000_000), 0);
        assert_eq!(index_time_diff(i64::MAX, 1), i32::MAX);
        assert_eq!(index_time_diff(i64::MIN, 1), i32::MAX); // wraps like Java
    }

    #[test]
    fn header_and_entry_round_trip() {
        let h = IndexHeader {
            begin_timestamp: 1,
            end_timestamp: -2,
            begin_phy_offset: 3,
            end_phy_offset: i64::MAX,
            hash_slot_count: -5,
            index_count: 6,
        };
        assert_eq!(IndexHeader::decode(&h.encode()), Some(h));
        assert_eq!(IndexHeader::decode(&[0; 39]), None);
        let e = IndexEntry {
            key_hash: 0x4963_BBB6,
            phy_offset: -1,
            time_diff: 7,
            prev_index: 8,
        };
        assert_eq!(IndexEntry::decode(&e.encode()), Some(e));
        assert_eq!(IndexEntry::decode(&[0; 19]), None);
    }

    #[test]
    fn vector_15_index_write() {
        // Default slot count, but only 2 entries so the buffer stays ~20 MB.
        let slots = DEFAULT_INDEX_HASH_SLOTS;
        let entries = 2;
        let mut file = vec![0u8; index_file_size(slots, entries) as usize];
        let h = index_key_hash("TopicTest#OrderID001");
        let ts = 1_700_000_000_123;
        assert_eq!(put_key(&mut file, slots, entries, h, 0, ts), Ok(1));
        let e1 = 20_000_060;
        assert_eq!(
            file[e1..e1 + 20],
            [0x49, 0x63, 0xBB, 0xB6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(i32_at(&file, 5_091_584), Some(1));
        let header = IndexHeader::decode(&file).unwrap();
        assert_eq!(
            header,
            IndexHeader {
                begin_timestamp: ts,
                end_timestamp: ts,
                begin_phy_offset: 0,
                end_phy_offset: 0,
                hash_slot_count: 1,
                index_count: 2,
            }
        );
        // The file is now full.
        assert_eq!(
            put_key(&mut file, slots, entries, h, 1, ts),
            Err(IndexPutError::Full)
        );
        // The chain for that slot has the single entry.
        let chain = walk_chain(&file, slots, entries, index_slot(h, slots), 64);
        assert_eq!(chain.len(), 1);
        assert_eq!(chain[0].key_hash, h);
        // The entry's time is begin + timeDiff*1000 = ts, so a query with begin > ts finds nothing.
        let time_read = header.begin_timestamp + i64::from(chain[0].time_diff) * 1000;
        assert_eq!(time_read, ts);
    }

    #[test]
    fn put_key_chains_and_quirks() {
        let (slots, entries) = (4u32, 8u32);
        let mut file = vec![0u8; index_file_size(slots, entries) as usize];
        // Non-first file: begin = end = previous file's end values.
        let prev_end_ts = 1_000_000;
        let start = IndexHeader {
            begin_timestamp: prev_end_ts,
            end_timestamp: prev_end_ts,
            begin_phy_offset: 500,
            end_phy_offset: 500,
            hash_slot_count: 0,
            index_count: 0,
        };
        file[..40].copy_from_slice(&start.encode());
        // Keys 1, 5, 9 share slot 1; key 2 is in slot 2.
        assert_eq!(put_key(&mut file, slots, entries, 1, 600, 1_005_000), Ok(1));
        assert_eq!(put_key(&mut file, slots, entries, 5, 700, 1_006_000), Ok(2));
        assert_eq!(put_key(&mut file, slots, entries, 2, 800, 1_007_000), Ok(3));
        assert_eq!(put_key(&mut file, slots, entries, 9, 900, 1_009_000), Ok(4));
        let header = IndexHeader::decode(&file).unwrap();
        assert_eq!(header.index_count, 5);
        assert_eq!(header.hash_slot_count, 2);
        assert_eq!(header.begin_timestamp, 1_005_000);
        assert_eq!(header.begin_phy_offset, 600);
        assert_eq!(header.end_phy_offset, 900);
        // Entry #1's time diff is relative to the previous file's end (5 s), later ones to the
        // new begin timestamp.
        assert_eq!(read_entry(&file, slots, 1).unwrap().time_diff, 5);
        assert_eq!(read_entry(&file, slots, 4).unwrap().time_diff, 4);
        let chain = walk_chain(&file, slots, entries, 1, 64);
        let hashes: Vec<i32> = chain.iter().map(|e| e.key_hash).collect();
        assert_eq!(hashes, vec![9, 5, 1]);
        assert_eq!(walk_chain(&file, slots, entries, 1, 2).len(), 2);
        assert_eq!(walk_chain(&file, slots, entries, 2, 64).len(), 1);
        assert!(walk_chain(&file, slots, entries, 3, 64).is_empty());
        assert!(walk_chain(&file, slots, entries, 4, 64).is_empty());
        assert!(walk_chain(&file, slots, entries, 1, 0).is_empty());
        assert!(walk_chain(&file[..39], slots, entries, 1, 64).is_empty());
        // Too-small buffer.
        assert!(matches!(
            put_key(&mut file[..100], slots, entries, 1, 1, 1),
            Err(IndexPutError::FileTooSmall { .. })
        ));
    }

    /// Spec §16 item 17: the chain visits strictly decreasing entry numbers, even over corrupt
    /// prev pointers.
    #[test]
    fn walk_chain_stops_on_bad_links() {
        let (slots, entries) = (2u32, 8u32);
        let build = |index_count: i32, head: i32, links: &[(u32, i32)]| {
            let mut file = vec![0u8; index_file_size(slots, entries) as usize];
            let h = IndexHeader {
                index_count,
                ..IndexHeader::default()
            };
            file[..40].copy_from_slice(&h.encode());
            file[40..44].copy_from_slice(&head.to_be_bytes());
            for &(n, prev) in links {
                let e = IndexEntry {
                    key_hash: n as i32,
                    prev_index: prev,
                    ..IndexEntry::default()
                };
                let pos = entry_position(slots, n) as usize;
                file[pos..pos + 20].copy_from_slice(&e.encode());
            }
            file
        };
        let hashes = |v: Vec<IndexEntry>| v.iter().map(|e| e.key_hash).collect::<Vec<_>>();
        // Self loop: stops after one entry.
        assert_eq!(
            hashes(walk_chain(&build(5, 3, &[(3, 3)]), slots, entries, 0, 100)),
            [3]
        );
        // Increasing link: stops.
        assert_eq!(
            hashes(walk_chain(
                &build(5, 2, &[(2, 4), (4, 2)]),
                slots,
                entries,
                0,
                100
            )),
            [2]
        );
        // Two-cycle via decreasing then increasing: 4 -> 2 -> 4 stops at 2.
        assert_eq!(
            hashes(walk_chain(
                &build(5, 4, &[(4, 2), (2, 4)]),
                slots,
                entries,
                0,
                100
            )),
            [4, 2]
        );
        // Proper chain.
        assert_eq!(
            hashes(walk_chain(
                &build(5, 4, &[(4, 3), (3, 1), (1, 0)]),
                slots,
                entries,
                0,
                100
            )),
            [4, 3, 1]
        );
        // Negative prev ends the chain.
        assert_eq!(
            hashes(walk_chain(&build(5, 4, &[(4, -7)]), slots, entries, 0, 100)),
            [4]
        );
        // Head beyond index_count, head <= 0, index_count <= 1: nothing.
        assert!(walk_chain(&build(3, 4, &[(4, 0)]), slots, entries, 0, 100).is_empty());
        assert!(walk_chain(&build(5, -1, &[]), slots, entries, 0, 100).is_empty());
        assert!(walk_chain(&build(1, 1, &[(1, 0)]), slots, entries, 0, 100).is_empty());
        // Head beyond the entry table (index_count larger than entries): nothing read.
        assert!(walk_chain(&build(100, 9, &[]), slots, entries, 0, 100).is_empty());
        // Truncated file: entry bytes out of bounds.
        let f = build(5, 4, &[(4, 3), (3, 0)]);
        let cut = entry_position(slots, 4) as usize + 10;
        assert!(walk_chain(&f[..cut], slots, entries, 0, 100).is_empty());
    }
}
