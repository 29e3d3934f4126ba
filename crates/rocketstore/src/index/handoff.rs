//! The index built on another thread from records handed over in batches (recovery's
//! re-dispatch, see `Dispatcher::dispatch_until_split`).
//!
//! The dispatching thread decodes each record and writes its consume queue unit; it hands over
//! the record's identity, the Java hash of `"<topic>#"` and the raw bytes of its `UNIQ_KEY` and
//! `KEYS` values ([`KeySender::push`]: one copy into the batch, no UTF-8 check, no hashing). The
//! builder thread ([`build_all`]) checks the keys' UTF-8, hashes them exactly as
//! [`IndexBatch::build`] would (UNIQ_KEY first, then each KEYS token; a value that is not
//! UTF-8 is left out, as the dispatcher's own conversion leaves it out) and calls
//! [`IndexBatch::build_hashed`] for each record in commit log order. Splitting the work there
//! keeps the two threads about equally busy (the dispatching thread's share was the longer one).
//! Every record the dispatcher would have handed to `build` is handed over, keyless ones
//! included (`build` rolls to a writable file for them too), so once the builder has drained the
//! channel the index files hold the same entries, slots and headers as one sequential run.
//! Batches are recycled through a second channel (no fresh memory per batch).
//!
//! [`IndexBatch::build`]: super::IndexBatch::build
//! [`IndexBatch::build_hashed`]: super::IndexBatch::build_hashed

use std::sync::mpsc::{Receiver, Sender, SyncSender};

use super::{index_key_hash_after, IndexService, PrefixCache};
use crate::error::{Error, Result};

/// Records per batch handed over.
const BATCH_RECORDS: usize = 4096;
/// Batches in flight (the dispatcher blocks when the builder is this far behind).
const IN_FLIGHT: usize = 4;

/// One record as the builder needs it: its identity, its topic's prefix hash and where its
/// key values lie in [`HashedBatch::text`].
#[derive(Debug, Clone, Copy)]
struct HashedRecord {
    phy_offset: i64,
    store_timestamp: i64,
    sys_flag: i32,
    /// Java hash of `"<topic>#"` (0 when the record has no key value).
    prefix: i32,
    /// Length of the UNIQ_KEY value in `text` ([`ABSENT`]: none), then of the KEYS value.
    uniq_len: u32,
    keys_len: u32,
}

/// A key value the record does not have.
const ABSENT: u32 = u32::MAX;

/// Records in commit log order and their key values' bytes, concatenated.
#[derive(Debug, Default)]
pub(crate) struct HashedBatch {
    records: Vec<HashedRecord>,
    text: Vec<u8>,
}

/// One record handed over: what [`super::IndexRequest`] holds, with the key values as the
/// raw bytes of the record's properties.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawKeys<'a> {
    pub(crate) topic: &'a str,
    pub(crate) phy_offset: i64,
    pub(crate) store_timestamp: i64,
    pub(crate) sys_flag: i32,
    pub(crate) uniq_key: Option<&'a [u8]>,
    pub(crate) keys: Option<&'a [u8]>,
}

/// The dispatching side: hashes the keys of each record and hands them over in batches.
#[derive(Debug)]
pub(crate) struct KeySender {
    /// The topics seen lately and the Java hash of `"<topic>#"`.
    prefixes: PrefixCache,
    current: HashedBatch,
    to_builder: SyncSender<HashedBatch>,
    spare: Receiver<HashedBatch>,
}

/// The builder's side of the channel (see [`build_all`]).
#[derive(Debug)]
pub(crate) struct KeyReceiver {
    from_sender: Receiver<HashedBatch>,
    spare: Sender<HashedBatch>,
}

/// A connected sender and receiver.
pub(crate) fn channel() -> (KeySender, KeyReceiver) {
    let (to_builder, from_sender) = std::sync::mpsc::sync_channel(IN_FLIGHT);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel();
    (
        KeySender {
            prefixes: PrefixCache::default(),
            current: HashedBatch::default(),
            to_builder,
            spare: spare_rx,
        },
        KeyReceiver {
            from_sender,
            spare: spare_tx,
        },
    )
}

impl KeySender {
    /// Queues `req` for the builder (its key values copied, checked and hashed there).
    ///
    /// # Errors
    /// The builder stopped (its own error is the one to report, see [`build_all`]).
    pub(crate) fn push(&mut self, req: &RawKeys<'_>) -> Result<()> {
        let text = &mut self.current.text;
        let mut len = |v: Option<&[u8]>| match v {
            Some(v) => {
                text.extend_from_slice(v);
                u32::try_from(v.len()).unwrap_or(ABSENT)
            }
            None => ABSENT,
        };
        let uniq_len = len(req.uniq_key);
        let keys_len = len(req.keys);
        let prefix = if uniq_len == ABSENT && keys_len == ABSENT {
            0
        } else {
            self.prefixes.hash(req.topic)
        };
        self.current.records.push(HashedRecord {
            phy_offset: req.phy_offset,
            store_timestamp: req.store_timestamp,
            sys_flag: req.sys_flag,
            prefix,
            uniq_len,
            keys_len,
        });
        if self.current.records.len() >= BATCH_RECORDS {
            self.send()?;
        }
        Ok(())
    }

    /// Hands over what is queued and closes the channel (the builder ends once it has built
    /// everything).
    ///
    /// # Errors
    /// The builder stopped.
    pub(crate) fn finish(mut self) -> Result<()> {
        if self.current.records.is_empty() {
            return Ok(());
        }
        self.send()
    }

    fn send(&mut self) -> Result<()> {
        let next = self.spare.try_recv().unwrap_or_default();
        let full = std::mem::replace(&mut self.current, next);
        self.to_builder
            .send(full)
            .map_err(|_| Error::invalid("dispatch", "the index builder stopped"))
    }
}

/// The builder: takes `index`'s writer and builds every handed-over record in order until the
/// sender is finished or dropped.
///
/// # Errors
/// The first error of [`IndexBatch::build_hashed`](super::IndexBatch::build_hashed) (the
/// builder stops there; the sender's next hand-over then fails).
pub(crate) fn build_all(index: &IndexService, rx: KeyReceiver) -> Result<()> {
    let mut batch = index.batch()?;
    // The batch's key hashes, and where each record's end in them.
    let mut hashes: Vec<i32> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    for mut b in rx.from_sender {
        hashes.clear();
        ends.clear();
        let mut text = b.text.as_slice();
        for r in &b.records {
            let mut take = |len: u32| {
                if len == ABSENT {
                    return None;
                }
                let (value, rest) = text.split_at(text.len().min(len as usize));
                text = rest;
                std::str::from_utf8(value).ok()
            };
            let uniq = take(r.uniq_len);
            let keys = take(r.keys_len);
            if let Some(uniq) = uniq {
                hashes.push(index_key_hash_after(r.prefix, uniq));
            }
            if let Some(keys) = keys {
                for key in rocketstore_format::keys::index_tokens(keys) {
                    hashes.push(index_key_hash_after(r.prefix, key));
                }
            }
            ends.push(hashes.len());
        }
        // The keys of record `i` are put while the hash slots of record `i + SLOTS_AHEAD` load
        // (on a large index each slot is a cache miss the put would otherwise wait for).
        let keys_of = |i: usize| {
            let start = i
                .checked_sub(1)
                .and_then(|p| ends.get(p))
                .copied()
                .unwrap_or(0);
            let end = ends.get(i).copied().unwrap_or(start);
            hashes.get(start..end).unwrap_or_default()
        };
        for i in 0..SLOTS_AHEAD {
            batch.prefetch_slots(keys_of(i));
        }
        for (i, r) in b.records.iter().enumerate() {
            batch.prefetch_slots(keys_of(i + SLOTS_AHEAD));
            batch.build_hashed(r.phy_offset, r.store_timestamp, r.sys_flag, keys_of(i))?;
        }
        b.records.clear();
        b.text.clear();
        let _ = rx.spare.send(b);
    }
    Ok(())
}

/// How many records ahead of the one put [`build_all`] loads hash slots.
const SLOTS_AHEAD: usize = 4;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::index::IndexRequest;

    fn req<'a>(
        topic: &'a str,
        phy: i64,
        uniq: Option<&'a [u8]>,
        keys: Option<&'a [u8]>,
    ) -> RawKeys<'a> {
        RawKeys {
            topic,
            phy_offset: phy,
            store_timestamp: 1_700_000_000_000 + phy,
            sys_flag: if phy % 1300 == 0 { 0b1100 } else { 0 },
            uniq_key: uniq,
            keys,
        }
    }

    /// What the dispatcher builds directly for `r`: values that are not UTF-8 left out.
    fn direct<'a>(r: &RawKeys<'a>) -> IndexRequest<'a> {
        IndexRequest {
            topic: r.topic,
            phy_offset: r.phy_offset,
            store_timestamp: r.store_timestamp,
            sys_flag: r.sys_flag,
            uniq_key: r.uniq_key.and_then(|v| std::str::from_utf8(v).ok()),
            keys: r.keys.and_then(|v| std::str::from_utf8(v).ok()),
        }
    }

    /// The same requests built directly and through the hand-over give byte-identical files
    /// (several batches, rolls to new files, keyless records, topics changing, rollback
    /// records, empty and non-ASCII values, values that are not UTF-8).
    #[test]
    fn handed_over_keys_build_the_same_index_files() {
        let uniq: Vec<Vec<u8>> = (0..10_000)
            .map(|i| match i % 11 {
                3 => b"U\xff\xfe".to_vec(),
                4 => Vec::new(),
                _ => format!("U{i:08}").into_bytes(),
            })
            .collect();
        let keys: Vec<Vec<u8>> = (0..10_000)
            .map(|i| match i % 13 {
                5 => vec![b'k', 0xc3, b' ', b'x'],
                6 => format!("\u{e9}t\u{e9} k{i}").into_bytes(),
                7 => b"   ".to_vec(),
                _ => format!("k{} k{} ", i % 97, i).into_bytes(),
            })
            .collect();
        let reqs: Vec<RawKeys<'_>> = (0..10_000usize)
            .map(|i| {
                let topic = ["TopicA", "TopicB", "TopicC", "T\u{f6}pic"][i % 4];
                let u = (i % 5 != 0).then(|| uniq[i].as_slice());
                let k = (i % 7 != 0).then(|| keys[i].as_slice());
                req(topic, i as i64 * 100, u, k)
            })
            .collect();
        let build = |handoff: bool| {
            let dir = tempfile::tempdir().unwrap();
            let svc = IndexService::load(dir.path(), 64, 4_096, true, true, 0).unwrap();
            if handoff {
                let (mut tx, rx) = channel();
                std::thread::scope(|s| {
                    let h = s.spawn(|| build_all(&svc, rx));
                    for r in &reqs {
                        tx.push(r).unwrap();
                    }
                    tx.finish().unwrap();
                    h.join().unwrap().unwrap();
                });
            } else {
                let mut b = svc.batch().unwrap();
                for r in &reqs {
                    b.build(&direct(r)).unwrap();
                }
            }
            drop(svc);
            // Names are creation times: compare contents, in header order.
            let mut files: Vec<Vec<u8>> =
                std::fs::read_dir(dir.path().join(super::super::INDEX_DIR))
                    .unwrap()
                    .map(|e| std::fs::read(e.unwrap().path()).unwrap())
                    .collect();
            files.sort_by(|a, b| a.get(16..24).cmp(&b.get(16..24)));
            files
        };
        let direct = build(false);
        let handed = build(true);
        assert!(direct.len() > 2, "the requests fill several files");
        assert_eq!(direct.len(), handed.len());
        for (a, b) in direct.iter().zip(&handed) {
            assert!(a == b, "index files differ");
        }
    }

    /// A builder that fails makes the sender's next hand-over fail instead of blocking.
    #[test]
    fn a_stopped_builder_fails_the_sender() {
        let (mut tx, rx) = channel();
        drop(rx);
        let mut failed = false;
        for i in 0..(BATCH_RECORDS * (IN_FLIGHT + 2)) {
            if tx.push(&req("T", i as i64, Some(b"u"), None)).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}
