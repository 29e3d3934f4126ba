//! Step 2's walk on two threads: the recovery scan cut into chunks at record boundaries, the
//! chunks checked by the opening thread and one helper (`rs-recover-scan`), the results joined
//! in commit log order.
//!
//! **Same result as one sequential scan, by construction.** The scan's only state is its
//! position, so a scan cut where it reaches an offset and continued from there sees the same
//! records and ends in the same place ([`scan_files_from`]). A chunk starts at a *sync point*: a
//! position where a record decodes and names its own physical offset (or a file's start). A
//! chunk's result is used only if the chunk before it stopped exactly at that sync point;
//! otherwise (a false sync point, damage, the end of the data) the join takes the earlier
//! chunk's end as the scan's end, or, when the earlier chunk overshot the sync point, continues
//! one sequential scan from where it stopped. So sync points only decide how the work is split,
//! never what is found. Per-record notes ([`QueueTails`], [`cq_check::Window`]) are kept per
//! chunk and merged (a maximum and a minimum per queue: the order of records does not matter).
//!
//! Cost: one decode per sync point and one map per chunk; no record is read twice unless a
//! sync point is false.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rocketstore_format::{decode_record, sysflag, DecodeOptions, Decoded, RecordView};

use crate::commitlog::{scan_files_from, CommitLog, ScanEnd, ScanFile};

use super::cq_check;
use super::queues::QueueTails;

/// Notes the walk keeps per record.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub(crate) tails: QueueTails,
    pub(crate) cq_window: cq_check::Window,
}

impl Notes {
    /// Notes `rec` if it goes to a consume queue (NOT and COMMIT records whose topic can be a
    /// directory name and whose queue id is not negative; dispatch sends no other record).
    fn note(&mut self, rec: &RecordView<'_>) {
        let t = sysflag::transaction_type(rec.sys_flag);
        if (t != sysflag::TRANSACTION_NOT_TYPE && t != sysflag::TRANSACTION_COMMIT_TYPE)
            || rec.queue_id < 0
            || !rocketstore_format::is_safe_topic_dir(rec.topic)
        {
            return;
        }
        self.tails.note(rec);
        self.cq_window.note(rec);
    }

    fn merge(&mut self, later: Notes) {
        self.tails.merge(later.tails);
        self.cq_window.merge(later.cq_window);
    }
}

/// Bytes searched for a sync point after a chunk's nominal start.
const SYNC_SEARCH: usize = 64 * 1024;

/// The chunk size for files of `file_size` bytes: a sixteenth of a file, 64 KiB to 8 MiB.
pub(crate) fn chunk_size(file_size: usize) -> usize {
    (file_size / 16).clamp(64 * 1024, 8 * 1024 * 1024)
}

/// One chunk's outcome: what it saw and where it stopped.
struct ChunkOut {
    scan: ScanEnd,
    /// The boundary at or past the next chunk's start where it stopped, if it got there.
    stopped: Option<(usize, usize)>,
    notes: Notes,
}

/// [`CommitLog::scan_for_end_at`] with the same result, on up to two threads (`threads` > 1),
/// chunks of about `chunk` bytes; also returns the per-record notes.
pub(crate) fn scan(
    log: &CommitLog,
    from_index: usize,
    from_pos: usize,
    check_crc: bool,
    max_record: u32,
    chunk: usize,
    threads: usize,
) -> (ScanEnd, Notes) {
    let run = log.with_scan_files(from_index, |files| {
        let starts = sync_points(files, from_pos, chunk, max_record);
        split(files, &starts, check_crc, max_record, threads)
    });
    run.unwrap_or_else(|| {
        // No such file: the sequential scan's answer for that case.
        let mut notes = Notes::default();
        let s = log.scan_for_end_at(from_index, from_pos, check_crc, max_record, |r, _| {
            notes.note(r);
        });
        (s, notes)
    })
}

/// The scan from `starts[0]` cut at `starts` (increasing positions; any positions give the
/// sequential result, record boundaries give the split).
fn split(
    files: &[ScanFile<'_>],
    starts: &[(usize, usize)],
    check_crc: bool,
    max_record: u32,
    threads: usize,
) -> (ScanEnd, Notes) {
    let outs = run_chunks(files, starts, check_crc, max_record, threads);
    join(files, starts, outs, check_crc, max_record)
}

/// Chunk starts: the scan's start, each later file's start, and inside each file the first
/// sync point at or after every multiple of `chunk`.
fn sync_points(
    files: &[ScanFile<'_>],
    from_pos: usize,
    chunk: usize,
    max_record: u32,
) -> Vec<(usize, usize)> {
    let chunk = chunk.max(1);
    let mut out = vec![(0, from_pos)];
    for (i, f) in files.iter().enumerate() {
        let Some(bytes) = f.bytes else { break };
        let first = if i == 0 { from_pos } else { 0 };
        if i > 0 {
            out.push((i, 0));
        }
        let mut target = first + chunk;
        while target < bytes.len() {
            match find_sync(f, bytes, target, max_record) {
                Some(p) => out.push((i, p)),
                // Zeros (the end of the data) or no record start nearby: no chunk here.
                None if bytes.get(target..target + 8).is_none_or(|b| b == [0; 8]) => break,
                None => {}
            }
            target += chunk;
        }
    }
    out
}

/// The first position in `[target, target + SYNC_SEARCH)` where a record decodes (magic code,
/// sizes, no CRC) and names its own physical offset.
fn find_sync(f: &ScanFile<'_>, bytes: &[u8], target: usize, max_record: u32) -> Option<usize> {
    let end = (target + SYNC_SEARCH).min(bytes.len());
    (target..end).find(|&p| {
        let Some(rest) = bytes.get(p..) else {
            return false;
        };
        let magic = rocketstore_format::peek_magic(rest);
        if magic != Some(rocketstore_format::MESSAGE_MAGIC_CODE_V1)
            && magic != Some(rocketstore_format::MESSAGE_MAGIC_CODE_V2)
        {
            return false;
        }
        let opts = DecodeOptions {
            check_crc: false,
            max_total_size: max_record,
            expected_physical_offset: Some((f.from + p as u64) as i64),
            ..DecodeOptions::default()
        };
        matches!(decode_record(rest, &opts), Ok(Decoded::Message(_)))
    })
}

/// Scans every chunk (`starts[k]` up to `starts[k + 1]`) on `threads` threads, skipping the
/// chunks after one whose result ends the scan.
fn run_chunks(
    files: &[ScanFile<'_>],
    starts: &[(usize, usize)],
    check_crc: bool,
    max_record: u32,
    threads: usize,
) -> Vec<Option<ChunkOut>> {
    let results: Vec<Mutex<Option<ChunkOut>>> = starts.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The first chunk whose result ends the scan: later chunks are not needed.
    let last_needed = AtomicUsize::new(usize::MAX);
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= starts.len() || k > last_needed.load(Ordering::Relaxed) {
            break;
        }
        let Some(out) = scan_chunk(files, starts, k, check_crc, max_record) else {
            break;
        };
        if out.stopped.is_none() || out.stopped != starts.get(k + 1).copied() {
            last_needed.fetch_min(k, Ordering::Relaxed);
        }
        if let Some(slot) = results.get(k) {
            *crate::util::lock(slot) = Some(out);
        }
    };
    if threads > 1 && starts.len() > 1 {
        std::thread::scope(|s| {
            let helper = std::thread::Builder::new()
                .name("rs-recover-scan".into())
                .spawn_scoped(s, work);
            work();
            // A helper that could not start leaves its chunks to this thread (done above).
            if let Ok(h) = helper {
                let _ = h.join();
            }
        });
        // A panicking helper (never expected) leaves chunks unscanned: scan them here.
        work_missing(&results, files, starts, check_crc, max_record);
    } else {
        work();
    }
    results
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// Scans chunk `k` (from `starts[k]` up to `starts[k + 1]`, or to the end for the last one);
/// `None` if there is no chunk `k`.
fn scan_chunk(
    files: &[ScanFile<'_>],
    starts: &[(usize, usize)],
    k: usize,
    check_crc: bool,
    max_record: u32,
) -> Option<ChunkOut> {
    let start = *starts.get(k)?;
    let stop_at = starts
        .get(k + 1)
        .and_then(|&(i, p)| Some(files.get(i)?.from + p as u64));
    let mut notes = Notes::default();
    let (scan, stopped) = scan_files_from(
        files,
        start,
        stop_at.unwrap_or(u64::MAX),
        check_crc,
        max_record,
        |r, _| notes.note(r),
    );
    Some(ChunkOut {
        scan,
        stopped,
        notes,
    })
}

/// Fills the result slots a helper left empty, in order, up to the first that ends the scan.
fn work_missing(
    results: &[Mutex<Option<ChunkOut>>],
    files: &[ScanFile<'_>],
    starts: &[(usize, usize)],
    check_crc: bool,
    max_record: u32,
) {
    for (k, slot) in results.iter().enumerate() {
        let mut slot = crate::util::lock(slot);
        let stop = starts.get(k + 1).copied();
        if slot.is_none() {
            let Some(out) = scan_chunk(files, starts, k, check_crc, max_record) else {
                break;
            };
            *slot = Some(out);
        }
        if slot
            .as_ref()
            .is_none_or(|o| o.stopped.is_none() || o.stopped != stop)
        {
            break;
        }
    }
}

/// Joins the chunks in order into one scan's result (see the module documentation).
fn join(
    files: &[ScanFile<'_>],
    starts: &[(usize, usize)],
    outs: Vec<Option<ChunkOut>>,
    check_crc: bool,
    max_record: u32,
) -> (ScanEnd, Notes) {
    let mut total = ScanEnd::default();
    let mut notes = Notes::default();
    let add = |total: &mut ScanEnd, notes: &mut Notes, part: ScanEnd, n: Notes| {
        total.records += part.records;
        if part.records > 0 {
            total.last_store_timestamp = part.last_store_timestamp;
        }
        total.end = part.end;
        total.damage = part.damage;
        notes.merge(n);
    };
    for (k, out) in outs.into_iter().enumerate() {
        let Some(out) = out else {
            // Not scanned (cannot happen after `work_missing`): finish sequentially.
            if let Some(&start) = starts.get(k) {
                let mut n = Notes::default();
                let (s, _) =
                    scan_files_from(files, start, u64::MAX, check_crc, max_record, |r, _| {
                        n.note(r);
                    });
                add(&mut total, &mut notes, s, n);
            }
            break;
        };
        let next = starts.get(k + 1).copied();
        let stopped = out.stopped;
        add(&mut total, &mut notes, out.scan, out.notes);
        match stopped {
            // Landed exactly on the next chunk's start: that chunk continues the scan.
            Some(at) if Some(at) == next => {}
            // Overshot a false sync point: one sequential scan from where this chunk stopped.
            Some(at) => {
                let mut n = Notes::default();
                let (s, _) = scan_files_from(files, at, u64::MAX, check_crc, max_record, |r, _| {
                    n.note(r);
                });
                add(&mut total, &mut notes, s, n);
                break;
            }
            // The scan's end (damage, zeros, the end of the last file).
            None => break,
        }
    }
    (total, notes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::signal::{Health, Signal};
    use crate::{PutMessage, Store, StoreConfig};

    const FILE: u64 = 64 * 1024;

    fn cfg() -> StoreConfig {
        StoreConfig {
            mapped_file_size_commit_log: FILE,
            mapped_file_size_consume_queue: 4096 * 20,
            max_hash_slot_num: 1000,
            max_index_num: 8000,
            ..StoreConfig::default()
        }
    }

    /// A closed store of ~10 files: three topics, four queues, bodies of 1 to 3,000 bytes.
    fn write(dir: &std::path::Path) {
        let store = Store::open(dir, cfg()).unwrap();
        let topics = ["TopicA", "TopicB", "TopicC"];
        let keys: Vec<String> = (0..2000).map(|i| format!("k{i}")).collect();
        for i in 0..1200usize {
            let body = vec![(i % 251) as u8; 1 + (i * 7919) % 3000 / (1 + i % 5)];
            let k = [keys[i % 2000].as_str()];
            store
                .put_batch(&[PutMessage {
                    topic: topics[i % 3],
                    body: &body,
                    queue_id: (i % 4) as i32,
                    tags: Some("T"),
                    keys: &k,
                    ..Default::default()
                }])
                .unwrap();
        }
        store.close().unwrap();
    }

    fn load(dir: &std::path::Path) -> CommitLog {
        CommitLog::load(
            &dir.join("commitlog"),
            &cfg(),
            true,
            Health::new(),
            None,
            Signal::new(),
            Signal::new(),
        )
        .unwrap()
    }

    fn sequential(log: &CommitLog, i: usize, pos: usize) -> (ScanEnd, Notes) {
        let mut notes = Notes::default();
        let s = log.scan_for_end_at(i, pos, true, 1 << 22, |r, _| notes.note(r));
        (s, notes)
    }

    fn same(a: &(ScanEnd, Notes), b: &(ScanEnd, Notes), what: &str) {
        assert_eq!(a.0.end, b.0.end, "end: {what}");
        assert_eq!(a.0.damage, b.0.damage, "damage: {what}");
        assert_eq!(a.0.records, b.0.records, "records: {what}");
        assert_eq!(
            a.0.last_store_timestamp, b.0.last_store_timestamp,
            "timestamp: {what}"
        );
        assert_eq!(a.1.tails, b.1.tails, "tails: {what}");
        assert_eq!(a.1.cq_window, b.1.cq_window, "window: {what}");
    }

    /// Flips, zeroes or overwrites bytes of commit log file `file` at `pos`.
    fn damage(dir: &std::path::Path, file: u64, pos: u64, bytes: &[u8]) {
        use std::io::{Seek, SeekFrom, Write};
        let name = rocketstore_format::offset_to_file_name(file * FILE);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("commitlog").join(name))
            .unwrap();
        f.seek(SeekFrom::Start(pos)).unwrap();
        f.write_all(bytes).unwrap();
    }

    /// Whatever the damage and wherever the chunks fall, the split scan finds what one
    /// sequential scan finds: end, damage, records, last timestamp and per-queue notes.
    #[test]
    fn split_scan_matches_the_sequential_scan() {
        type Case = Option<(u64, u64, Vec<u8>)>;
        let cases: Vec<Case> = vec![
            None,
            Some((3, 30_000, vec![0x55])), // a body or header byte of file 3
            Some((2, FILE - 3, vec![0xff])), // in file 2's closing blank record
            Some((5, 1000, vec![0; 4096])), // zeros in the middle of file 5
            Some((0, 200, vec![0x7f; 2])), // early in the first file
            Some((1, 0, vec![1, 2, 3, 4, 5])), // a file's first record
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path());
            let files = std::fs::read_dir(dir.path().join("commitlog"))
                .unwrap()
                .count();
            assert!(files >= 8, "{files} files");
            if let Some((file, pos, bytes)) = &case {
                damage(dir.path(), *file, *pos, bytes);
            }
            let log = load(dir.path());
            for (i, pos) in [(0usize, 0usize), (1, 0)] {
                let want = sequential(&log, i, pos);
                for chunk in [257, 4096, 20_000, 1 << 20] {
                    for threads in [1, 2] {
                        let got = scan(&log, i, pos, true, 1 << 22, chunk, threads);
                        same(
                            &got,
                            &want,
                            &format!("{case:?} from {i}/{pos} chunk {chunk} x{threads}"),
                        );
                    }
                }
                // Starts that are not record boundaries (false sync points) change nothing.
                let got = log
                    .with_scan_files(i, |files| {
                        let mut starts = vec![(0, pos)];
                        for f in 0..files.len() {
                            for p in [5usize, 333, 4099, 30_001, 65_000] {
                                if f > 0 || p > pos {
                                    starts.push((f, p));
                                }
                            }
                        }
                        split(files, &starts, true, 1 << 22, 2)
                    })
                    .unwrap();
                same(&got, &want, &format!("{case:?} false starts from {i}"));
            }
        }
    }
}
