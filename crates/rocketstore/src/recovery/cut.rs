//! A requested cut of the commit log's tail ([`crate::Store::open_truncated`]): recovery treats
//! a record boundary at or below the recovered end as the end of the commit log, so steps 4–8
//! (cut the commit log, the consume queues and the index; re-dispatch; rebuild the queue offset
//! table) remove every record from there on, exactly as they remove a torn tail.

use crate::commitlog::scan_files_from;
use crate::error::{Error, Result};

use super::{Recovery, Walk};

impl Recovery<'_> {
    /// Moves the walk's end back to the requested cut, after checking that it is a record
    /// boundary in `[min offset, recovered end]`. The cut is intentional, so the checkpoint's
    /// durable offset does not hold it back (the open rewrites the checkpoint afterwards).
    /// Only a writable open of a cleanly closed store cuts (the caller recovers a crashed store
    /// first): its walk notes nothing a later step needs past the cut.
    pub(super) fn apply_cut(&self, mut walk: Walk) -> Result<Walk> {
        let Some(cut) = self.cut else {
            return Ok(walk);
        };
        if self.read_only || self.abnormal {
            return Err(Error::invalid(
                "end_offset",
                "a tail is cut only by a writable open of a cleanly closed store",
            ));
        }
        let (min, end) = (self.log.min_offset(), walk.scan.end);
        if cut < min || cut > end {
            return Err(Error::OffsetOutOfRange {
                requested: i64::try_from(cut).unwrap_or(i64::MAX),
                min: i64::try_from(min).unwrap_or(i64::MAX),
                max: i64::try_from(end).unwrap_or(i64::MAX),
            });
        }
        if cut == end {
            return Ok(walk);
        }
        if !self.is_record_boundary(cut) {
            return Err(Error::invalid(
                "end_offset",
                format!(
                    "commit log offset {cut} is not the start of a record (nor the end of one)"
                ),
            ));
        }
        walk.scan.end = cut;
        walk.scan.damage = None;
        walk.durable = None;
        walk.from = walk.from.min(cut);
        walk.tails = Default::default();
        walk.cq_window = Default::default();
        Ok(walk)
    }

    /// True if a record (or the blank record closing a file) starts at `offset`: the records of
    /// the file holding it, read from the file's start, reach `offset` exactly.
    fn is_record_boundary(&self, offset: u64) -> bool {
        let files = self.log.queue().files();
        let Some(index) = files.iter().rposition(|f| f.from() <= offset) else {
            return false;
        };
        let max_record = u32::try_from(self.cfg.max_record_size()).unwrap_or(u32::MAX);
        self.log
            .with_scan_files(index, |scan| {
                let from = scan.first().map_or(0, |f| f.from);
                let (seen, stop) =
                    scan_files_from(scan, (0, 0), offset, false, max_record, |_, _| {});
                match stop {
                    Some((i, pos)) => scan.get(i).map_or(from, |f| f.from) + pos as u64 == offset,
                    None => seen.end == offset,
                }
            })
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Error, PutMessage, Store, StoreConfig};

    fn config() -> StoreConfig {
        StoreConfig {
            mapped_file_size_commit_log: 64 * 1024,
            ..StoreConfig::default()
        }
    }

    fn put(store: &Store, topic: &str, key: &str, body: &[u8]) -> u64 {
        let r = store
            .put(&PutMessage {
                topic,
                body,
                keys: &[key],
                ..Default::default()
            })
            .unwrap();
        r.commitlog_offset as u64 + r.wrote_bytes as u64
    }

    #[test]
    fn cut_removes_the_tail_from_log_queues_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let store = Store::open(&root, config()).unwrap();
        let mut mark = 0;
        for i in 0..10 {
            mark = put(&store, "A", &format!("k{i}"), format!("a{i}").as_bytes());
        }
        // Enough after the mark to fill several 64 KiB files: the cut removes whole files too.
        for i in 0..400 {
            put(
                &store,
                if i % 2 == 0 { "A" } else { "B" },
                "late",
                &[7u8; 500],
            );
        }
        assert!(store.commitlog_files().len() > 2);
        store.close().unwrap();

        let store = Store::open_truncated(&root, config(), mark).unwrap();
        assert_eq!(store.max_commitlog_offset(), mark);
        assert_eq!(store.max_offset_in_queue("A", 0), 10);
        assert_eq!(store.max_offset_in_queue("B", 0), 0);
        assert_eq!(store.commitlog_files().len(), 1);
        assert!(store
            .query_message("A", "late", 32, 0, i64::MAX)
            .unwrap()
            .messages
            .is_empty());
        assert_eq!(
            store
                .query_message("A", "k3", 32, 0, i64::MAX)
                .unwrap()
                .messages
                .len(),
            1
        );
        // Appends go on from the cut, with the queue offsets the cut left.
        let r = store
            .put(&PutMessage {
                topic: "A",
                body: b"next",
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.commitlog_offset as u64, mark);
        assert_eq!(r.queue_offset, 10);
        store.close().unwrap();

        // The cut is what the next open finds (the checkpoint does not claim the old end).
        let store = Store::open(&root, config()).unwrap();
        assert_eq!(store.max_offset_in_queue("A", 0), 11);
        assert_eq!(store.max_offset_in_queue("B", 0), 0);
        let m = store.look_message_by_offset(mark).unwrap();
        assert_eq!(m.body, b"next");
        store.close().unwrap();
    }

    #[test]
    fn cut_after_a_crash_recovers_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let store = Store::open(&root, config()).unwrap();
        let mark = put(&store, "A", "k", b"kept");
        put(&store, "A", "k", b"cut");
        store.close().unwrap();
        // As if the writer had been killed: the abort marker makes the next open abnormal.
        std::fs::write(root.join("abort"), b"").unwrap();
        let store = Store::open_truncated(&root, config(), mark).unwrap();
        assert_eq!(store.max_commitlog_offset(), mark);
        assert_eq!(store.max_offset_in_queue("A", 0), 1);
        store.close().unwrap();
    }

    #[test]
    fn bad_cuts_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let store = Store::open(&root, config()).unwrap();
        let first = put(&store, "A", "k", b"one");
        let end = put(&store, "A", "k", b"two");
        store.close().unwrap();
        for bad in [first + 1, end - 4] {
            let e = Store::open_truncated(&root, config(), bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        field: "end_offset",
                        ..
                    }
                ),
                "{e}"
            );
        }
        let e = Store::open_truncated(&root, config(), end + 1).unwrap_err();
        assert!(matches!(e, Error::OffsetOutOfRange { .. }), "{e}");
        assert!(
            !root.join("abort").exists(),
            "a refused cut leaves no abort marker"
        );
        // The refused cuts changed nothing; a cut at the end is a plain open.
        let store = Store::open_truncated(&root, config(), end).unwrap();
        assert_eq!(store.max_commitlog_offset(), end);
        assert_eq!(store.max_offset_in_queue("A", 0), 2);
        store.close().unwrap();
        let store = Store::open_truncated(&root, config(), 0).unwrap();
        assert_eq!(store.max_commitlog_offset(), 0);
        assert_eq!(store.max_offset_in_queue("A", 0), 0);
        store.close().unwrap();
    }
}
