//! The index built on another thread from key hashes handed over in batches (recovery's
//! re-dispatch, see `Dispatcher::dispatch_until_split`).
//!
//! The dispatching thread decodes each record, writes its consume queue unit and hashes its
//! keys exactly as [`IndexBatch::build`] would ([`KeySender::push`]: the Java hash of
//! `"<topic>#<key>"`, UNIQ_KEY first, then each KEYS token); the builder thread
//! ([`build_all`]) holds the index writer and calls [`IndexBatch::build_hashed`] for each record
//! in commit log order. Every record the dispatcher would have handed to `build` is handed over,
//! keyless ones included (`build` rolls to a writable file for them too), so once the builder
//! has drained the channel the index files hold the same entries, slots and headers as one
//! sequential run. Batches are recycled through a second channel (no fresh memory per batch).

use std::sync::mpsc::{Receiver, Sender, SyncSender};

use super::{index_key_hash_after, IndexRequest, IndexService, PrefixCache};
use crate::error::{Error, Result};

/// Records per batch handed over.
const BATCH_RECORDS: usize = 4096;
/// Batches in flight (the dispatcher blocks when the builder is this far behind).
const IN_FLIGHT: usize = 4;

/// One record as the builder needs it: its identity and how many key hashes follow.
#[derive(Debug, Clone, Copy)]
struct HashedRecord {
    phy_offset: i64,
    store_timestamp: i64,
    sys_flag: i32,
    keys: u32,
}

/// Records in commit log order and their key hashes, concatenated.
#[derive(Debug, Default)]
pub(crate) struct HashedBatch {
    records: Vec<HashedRecord>,
    hashes: Vec<i32>,
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
    /// Hashes `req`'s keys and queues the record for the builder.
    ///
    /// # Errors
    /// The builder stopped (its own error is the one to report, see [`build_all`]).
    pub(crate) fn push(&mut self, req: &IndexRequest<'_>) -> Result<()> {
        let start = self.current.hashes.len();
        if req.uniq_key.is_some() || req.keys.is_some() {
            let prefix = self.prefixes.hash(req.topic);
            if let Some(uniq) = req.uniq_key {
                self.current.hashes.push(index_key_hash_after(prefix, uniq));
            }
            if let Some(keys) = req.keys {
                for key in rocketstore_format::keys::index_tokens(keys) {
                    self.current.hashes.push(index_key_hash_after(prefix, key));
                }
            }
        }
        self.current.records.push(HashedRecord {
            phy_offset: req.phy_offset,
            store_timestamp: req.store_timestamp,
            sys_flag: req.sys_flag,
            keys: u32::try_from(self.current.hashes.len() - start).unwrap_or(u32::MAX),
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
/// The first error of [`IndexBatch::build_hashed`] (the builder stops there; the sender's next
/// hand-over then fails).
pub(crate) fn build_all(index: &IndexService, rx: KeyReceiver) -> Result<()> {
    let mut batch = index.batch()?;
    for mut b in rx.from_sender {
        let mut hashes = b.hashes.as_slice();
        for r in &b.records {
            let (mine, rest) = hashes.split_at(hashes.len().min(r.keys as usize));
            batch.build_hashed(r.phy_offset, r.store_timestamp, r.sys_flag, mine)?;
            hashes = rest;
        }
        b.records.clear();
        b.hashes.clear();
        let _ = rx.spare.send(b);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn req<'a>(
        topic: &'a str,
        phy: i64,
        uniq: Option<&'a str>,
        keys: Option<&'a str>,
    ) -> IndexRequest<'a> {
        IndexRequest {
            topic,
            phy_offset: phy,
            store_timestamp: 1_700_000_000_000 + phy,
            sys_flag: 0,
            uniq_key: uniq,
            keys,
        }
    }

    /// The same requests built directly and through the hand-over give byte-identical files
    /// (several batches, rolls to new files, keyless records, topics changing).
    #[test]
    fn handed_over_hashes_build_the_same_index_files() {
        let uniq: Vec<String> = (0..10_000).map(|i| format!("U{i:08}")).collect();
        let keys: Vec<String> = (0..10_000)
            .map(|i| format!("k{} k{} ", i % 97, i))
            .collect();
        let reqs: Vec<IndexRequest<'_>> = (0..10_000usize)
            .map(|i| {
                let topic = ["TopicA", "TopicB", "TopicC"][i % 3];
                let u = (i % 5 != 0).then(|| uniq[i].as_str());
                let k = (i % 7 != 0).then(|| keys[i].as_str());
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
                    b.build(r).unwrap();
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
            if tx.push(&req("T", i as i64, Some("u"), None)).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}
