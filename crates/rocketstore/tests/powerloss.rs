//! Power-loss images (issue 14 item 4, reliability.md rows B1/B2; feature `powerloss`).
//!
//! The engine, built with `--features powerloss`, tells a simulated disk
//! (`rocketstore::powerloss`) which bytes each successful msync/fsync made durable. A workload
//! runs in SYNC_FLUSH or ASYNC_FLUSH mode (the latter also through the transient store pool,
//! mode `pool`) with its background services; at random points the
//! test takes the durable image of every file and the live files, and builds images a power cut
//! could leave: every 4 KiB page written since its last sync is independently kept, lost (its
//! durable bytes) or torn (a prefix of 512-byte sectors of the new page, the rest durable), for
//! the commit log, consume queues and index files together; the checkpoint (replaced by fsync +
//! rename) is kept or lost as a whole. The image's checkpoint gets an unknown boot id, as after
//! a reboot. Each image is opened (abnormal recovery) and checked:
//! - no message acknowledged as durable is lost (SYNC: PUT_OK; ASYNC and pool: below the
//!   flushed offset read when the image was taken), bit-exact, in its consume queue, found by
//!   its key;
//! - every record has its consume queue unit and index entry, and queues hold nothing else;
//! - recovery walked only from the checkpoint's recovery window when it has one (issue 17);
//! - no panic, and a later put works.
//!
//! The model also covers (issue 42): images taken **during recovery** (at a random durability
//! event of a same-boot reopen, through `powerloss::set_hook`) and **after a same-boot
//! reopen** (a crash copy of the live files with the disk as it was, `powerloss::adopt`: every
//! record the reopen's recovery declared durable must survive, `reopen-*` workloads and
//! [`power_cut_after_a_same_boot_reopen_loses_no_acknowledged_message`]); a **failed msync**
//! (`powerloss::fail_msyncs_under`: the flush fails with EIO and reports no sync, so its range
//! keeps its old durable bytes while the page cache keeps the new ones; the store is fenced,
//! then crashes and is reopened in the same boot: `failed-msync` workloads); **deleted files that come back** (a deletion is durable only once its
//! directory is fsynced, `powerloss::ghosts`; the `cleanup` workloads take images right after
//! an unlink of a forced cleanup pass, and the latest deletions are undone, in order) and
//! **created files that vanish, or are left empty or (consume queue and index files) short**
//! (name durable before size); **torn pages as any subset of sectors**; and **SYNC
//! images while three threads write** (`sync-mt`). Every durable ack is checked field by field
//! (topic, keys, body, `KEYS`/`UNIQ_KEY` properties, queue id and offset) and the scan runs with
//! CRC checks; the run prints lost and torn pages, images per kind, files vanished, left empty
//! and left short per directory, deleted files back and acks checked, and asserts each is
//! non-zero.
//!
//! `make test` runs [`power_loss_images`] (>= 500 images); the `#[ignore]`d
//! [`power_loss_images_slow`] (`make test-all`) runs >= 10,000. `ROCKETSTORE_POWERLOSS_SEED`
//! reproduces a run's workloads (thread timing still varies); each workload prints its
//! `<kind>:<seed>:<puts>`, and `ROCKETSTORE_POWERLOSS_WORKLOAD=<kind>:<seed>:<puts>` replays
//! one (`ROCKETSTORE_POWERLOSS_IMAGES` times); `ROCKETSTORE_POWERLOSS_IMAGES` sets the count.
#![cfg(feature = "powerloss")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::Rng;
use rocketstore::format::Checkpoint;
use rocketstore::powerloss::durable_image;
use rocketstore::{ConfigValue, GetStatus, PutMessage, PutStatus, Store, StoreConfig};
use std::sync::{Arc, Mutex};

const TOPICS: [&str; 2] = ["PowerA", "PowerB"];
const PAGE: usize = 4096;
const SECTOR: usize = 512;

fn config(mode: &str) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (k, v) in [
        ("mapped_file_size_commit_log", 64 * 1024),
        ("mapped_file_size_consume_queue", 100 * 20),
        ("max_hash_slot_num", 64),
        ("max_index_num", 300),
        ("flush_interval_commit_log", 5),
        ("flush_interval_consume_queue", 7),
    ] {
        c.set(k, ConfigValue::Int(v)).unwrap();
    }
    let flush = if mode == "sync" {
        "SYNC_FLUSH"
    } else {
        "ASYNC_FLUSH"
    };
    c.set("flush_disk_type", ConfigValue::Str(flush.into()))
        .unwrap();
    if mode == "pool" {
        // ASYNC_FLUSH through the transient store pool: the commit service `pwrite`s.
        c.set("transient_store_pool_enable", ConfigValue::Bool(true))
            .unwrap();
    }
    c
}

fn body_for(seq: u64) -> Vec<u8> {
    let len = 8 + (seq * 7919 % 700) as usize;
    let mut b = Vec::with_capacity(len);
    while b.len() < len {
        b.extend_from_slice(&seq.to_be_bytes());
    }
    b.truncate(len);
    b
}

#[derive(Debug, Clone, Copy)]
struct Ack {
    offset: u64,
    size: i32,
    queue_id: i32,
    queue_offset: i64,
    seq: u64,
    durable: bool,
}

/// What the simulated disk holds under a root.
struct Disk {
    /// Every file's durable image.
    files: HashMap<PathBuf, Vec<u8>>,
    /// The files deleted without a directory fsync since, in the order of their deletion
    /// (a power cut may undo the latest deletions).
    ghosts: Vec<(PathBuf, Vec<u8>)>,
}

fn disk(root: &Path) -> Disk {
    Disk {
        files: durable_image(root),
        ghosts: rocketstore::powerloss::ghosts(root),
    }
}

/// What a power cut at this instant could leave of `root`: the live checkpoint, the simulated
/// disk and the live files, read in this order. A checkpoint is replaced only after the syncs
/// it claims (an index mark's msync, the commit log flush), so one read before the disk claims
/// nothing the disk lacks; read after it, it may claim syncs made since (an index mark whose
/// entries the image then loses): an image no power cut can leave.
fn capture(root: &Path) -> Capture {
    let checkpoint = std::fs::read(root.join("checkpoint")).ok();
    let durable = disk(root);
    (durable, live_files(root), checkpoint)
}

/// Every regular file under `root` (recursively) with its bytes.
fn live_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if !matches!(name.as_str(), "lock" | "checkpoint.tmp" | "abort.bak") {
                if let Ok(b) = std::fs::read(&p) {
                    out.push((p, b));
                }
            }
        }
    }
    out
}

/// A page of `live` per the random choice: kept, lost (durable) or torn.
fn mix(live: &[u8], durable: &[u8], rng: &mut Rng, stats: &mut Stats) -> Vec<u8> {
    let mut out = live.to_vec();
    let mut padded = Vec::new();
    let durable = if durable.len() >= live.len() {
        durable
    } else {
        padded.extend_from_slice(durable);
        padded.resize(live.len(), 0);
        &padded
    };
    for (i, page) in out.chunks_mut(PAGE).enumerate() {
        let at = i * PAGE;
        let old = &durable[at..at + page.len()];
        if page == old {
            continue;
        }
        stats.dirty_pages += 1;
        match rng.below(3) {
            0 => {}
            1 => {
                page.copy_from_slice(old);
                stats.lost_pages += 1;
            }
            _ => {
                // Torn: any subset of the page's 512-byte sectors reached the disk (a device
                // may write a page's sectors in any order), the others hold durable bytes.
                for (i, sector) in page.chunks_mut(SECTOR).enumerate() {
                    if rng.below(2) == 0 {
                        let at = i * SECTOR;
                        sector.copy_from_slice(&old[at..at + sector.len()]);
                    }
                }
                stats.torn_pages += 1;
            }
        }
    }
    out
}

#[derive(Debug, Default)]
struct Stats {
    images: usize,
    /// Images per kind of workload (`sync`, `async`, `pool`, `sync-mt`, `reopen`, `recovery`).
    per_kind: std::collections::BTreeMap<&'static str, usize>,
    /// The kind of the images being checked.
    kind: &'static str,
    dirty_pages: usize,
    lost_pages: usize,
    torn_pages: usize,
    /// Files whose creation was not durable that vanished.
    vanished_files: usize,
    /// Files whose creation was not durable written empty (name durable, size not), per
    /// directory (`commitlog`, `consumequeue`, `index`).
    empty_files: std::collections::BTreeMap<String, usize>,
    /// Consume queue and index files whose creation was not durable written short.
    short_files: std::collections::BTreeMap<String, usize>,
    /// Files deleted without a directory fsync since that came back.
    ghosts: usize,
    /// Workloads whose commit log flush failed before a crash and a same-boot reopen.
    failed_msyncs: usize,
    checked_acks: usize,
    from_window: usize,
    reopens: usize,
    recovery: Vec<Duration>,
    check: Duration,
    build: Duration,
}

/// One image of `root` at this instant (durable image + live files, mixed per page) written
/// to `image`, with the checkpoint kept or lost whole (`checkpoint`: the live one, read before
/// the durable image) and its boot id unknown.
fn build_image(
    root: &Path,
    image: &Path,
    disk: &Disk,
    live: &[(PathBuf, Vec<u8>)],
    checkpoint: Option<&[u8]>,
    rng: &mut Rng,
    stats: &mut Stats,
) {
    let durable = &disk.files;
    let _ = std::fs::remove_dir_all(image);
    std::fs::create_dir_all(image).unwrap();
    for (path, bytes) in live {
        let rel = path.strip_prefix(root).unwrap();
        let dst = image.join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let out = match (top.as_ref(), durable.get(path)) {
            ("checkpoint", Some(old)) => {
                let cp = match checkpoint {
                    Some(live) if rng.below(2) == 0 => live,
                    _ => old,
                };
                let mut c = Checkpoint::decode(cp).unwrap();
                if let Some(w) = c.ext.as_mut().and_then(|e| e.window.as_mut()) {
                    w.boot_id = [0; 16];
                }
                c.encode().to_vec()
            }
            // Never made durable: the file's creation was not synced yet.
            ("checkpoint", None) => continue,
            ("commitlog" | "consumequeue" | "index", Some(old)) => mix(bytes, old, rng, stats),
            // Never made durable: the creation was not synced yet. The file vanishes, or its
            // name reached the disk before its size (another fsync of the directory got there
            // first) and it is empty, or (a consume queue or index file) short: a prefix of
            // whole sectors, each page of it holding what the kernel wrote back (the live
            // bytes) or zeros.
            // (A file whose creation was synced cannot come back short: data made durable by
            // msync carries the file size with it.)
            (top @ ("commitlog" | "consumequeue" | "index"), None) => {
                let sectors = bytes.len().div_ceil(SECTOR);
                match rng.below(4) {
                    0 | 1 => {
                        stats.vanished_files += 1;
                        continue;
                    }
                    3 if top != "commitlog" && sectors > 1 => {
                        let len = SECTOR * (1 + rng.below(sectors as u64 - 1) as usize);
                        let zeros = vec![0u8; len];
                        *stats.short_files.entry(top.to_string()).or_default() += 1;
                        mix(&bytes[..len], &zeros, rng, stats)
                    }
                    _ => {
                        *stats.empty_files.entry(top.to_string()).or_default() += 1;
                        Vec::new()
                    }
                }
            }
            _ => bytes.clone(),
        };
        std::fs::write(&dst, out).unwrap();
    }
    // Files deleted without a directory fsync since: the latest deletions may be undone
    // (directory changes reach a journaling file system's disk in order), and those files come
    // back with their durable bytes.
    let cut = rng.below(disk.ghosts.len() as u64 + 1) as usize;
    for (path, bytes) in disk.ghosts.iter().skip(cut) {
        let dst = image.join(path.strip_prefix(root).unwrap());
        if !live.iter().any(|(p, _)| p == path) && !dst.exists() {
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::write(&dst, bytes).unwrap();
            stats.ghosts += 1;
        }
    }
    std::fs::write(image.join("abort"), b"1").unwrap();
}

/// Opens an image, recovers it and checks it (see the module doc). An ack is durable when
/// `durable(ack)` says so.
fn check_image(
    image: &Path,
    mode: &str,
    acks: &[Ack],
    durable: &dyn Fn(&Ack) -> bool,
    full: bool,
    stats: &mut Stats,
    label: &str,
) {
    let window = std::fs::read(image.join("checkpoint"))
        .ok()
        .and_then(|b| Checkpoint::decode(&b).ok())
        .and_then(|c| {
            let e = c.ext?;
            Some(e.window?.start_offset.min(e.durable_commitlog_offset))
        });
    // A commit log file is created durable by its first flush (ASYNC_FLUSH): an image taken
    // before that has none, and its recovery walks nothing, from no window.
    // (An empty commit log file, whose name reached the disk before its size, is deleted.)
    let has_log = std::fs::read_dir(image.join("commitlog"))
        .is_ok_and(|mut d| d.any(|e| e.is_ok_and(|e| e.metadata().is_ok_and(|m| m.len() > 0))));
    let t = Instant::now();
    let store = Store::open(image, config(mode)).unwrap_or_else(|e| panic!("{label}: open: {e}"));
    stats.recovery.push(t.elapsed());
    let t_check = Instant::now();
    let r = store.recovery_report().clone();
    assert!(r.abnormal, "{label}");
    let min = store.min_commitlog_offset();
    if let Some(start) = window
        .and_then(|w| u64::try_from(w).ok())
        .filter(|&s| s >= min && has_log)
    {
        assert!(r.from_window, "{label}: window {start} not used: {r:?}");
        assert!(r.power_loss, "{label}: {r:?}");
        assert_eq!(r.scan_start_offset, start, "{label}: {r:?}");
        assert_eq!(r.walked_bytes, r.end_offset - start, "{label}: {r:?}");
        stats.from_window += 1;
    }
    // Acknowledged as durable: found, bit-exact, in its queue and by its key.
    for a in acks {
        if !durable(a) {
            continue;
        }
        stats.checked_acks += 1;
        let m = store
            .look_message_by_offset(a.offset)
            .unwrap_or_else(|e| panic!("{label}: acked message at {} lost: {e}", a.offset));
        // Field by field against the ledger: topic, keys, body, properties, queue and offset.
        let key = format!("k{}", a.seq);
        assert_eq!(
            m.topic,
            TOPICS[(a.seq % 2) as usize],
            "{label}: topic at {}",
            a.offset
        );
        assert_eq!(m.keys(), [key.as_str()], "{label}: keys at {}", a.offset);
        assert_eq!(m.body, body_for(a.seq), "{label}: body at {}", a.offset);
        assert_eq!(m.properties.get("KEYS"), Some(key.as_str()), "{label}");
        assert!(m.properties.get("UNIQ_KEY").is_some(), "{label}");
        assert!(m.crc_ok(), "{label}");
        assert_eq!((m.queue_id, m.queue_offset), (a.queue_id, a.queue_offset));
    }
    // Consume queues and index agree with the commit log, both ways.
    let mut per_queue: HashMap<(String, i32), i64> = HashMap::new();
    for m in store.scan(min).unwrap().with_crc_check(true) {
        let m = m.unwrap_or_else(|e| panic!("{label}: scan: {e}"));
        let g = store
            .get_message(&m.topic, m.queue_id, m.queue_offset, 1, None, None)
            .unwrap();
        assert_eq!(
            g.status,
            GetStatus::Found,
            "{label}: no unit for {}",
            m.commitlog_offset()
        );
        assert_eq!(
            g.messages[0].commitlog_offset(),
            m.commitlog_offset(),
            "{label}"
        );
        *per_queue.entry((m.topic.clone(), m.queue_id)).or_default() += 1;
        // Every key in full checks; else those recovery re-dispatched and a sample below.
        let sampled =
            full || m.commitlog_offset() as u64 >= r.scan_start_offset || m.queue_offset % 8 == 0;
        if let Some(key) = m.keys().first().filter(|_| sampled).map(|k| k.to_string()) {
            let q = store
                .query_message(&m.topic, &key, 32, 0, i64::MAX)
                .unwrap();
            assert!(
                q.messages
                    .iter()
                    .any(|x| x.commitlog_offset() == m.commitlog_offset()),
                "{label}: key {key} of {} not found by query_message",
                m.commitlog_offset()
            );
        }
    }
    for (topic, queue, lo, hi) in store.consume_queues() {
        let n = per_queue.get(&(topic.clone(), queue)).copied().unwrap_or(0);
        // After a cleanup, a deleted consume queue file a power cut brought back may lead the
        // queue with units whose records are gone (RocketMQ's min correction searches the first
        // file only; the next cleanup deletes it): never served, every other unit a record.
        let dead = hi - lo - n;
        if stats.kind == "cleanup" && dead > 0 {
            let r = store
                .get_message(&topic, queue, lo, dead as usize, None, None)
                .unwrap();
            assert!(
                r.messages.iter().all(|m| m.queue_offset >= lo + dead),
                "{label}: queue {topic}/{queue} served a unit of a deleted record"
            );
            continue;
        }
        assert_eq!(
            hi - lo,
            n,
            "{label}: queue {topic}/{queue} holds {lo}..{hi}, {n} records"
        );
    }
    let p = store
        .put(&PutMessage {
            topic: TOPICS[0],
            body: b"after power loss",
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{label}: put after recovery: {e}"));
    assert_eq!(p.status, PutStatus::PutOk, "{label}");
    // With the transient store pool a record in a new file is readable once committed.
    store
        .flush()
        .unwrap_or_else(|e| panic!("{label}: flush after recovery: {e}"));
    let back = store
        .look_message_by_offset(p.commitlog_offset as u64)
        .unwrap();
    assert_eq!(back.body, b"after power loss");
    store.close().unwrap();
    stats.check += t_check.elapsed();
    stats.images += 1;
    *stats.per_kind.entry(stats.kind).or_default() += 1;
}

/// A workload of `puts` messages in `mode`, taking `variants` images at each of the random
/// capture points.
fn workload(mode: &'static str, seed: u64, puts: u64, variants: usize, stats: &mut Stats) {
    stats.kind = mode;
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let mut rng = Rng(seed | 1);
    let store = Store::open(&root, config(mode)).unwrap();
    let mut acks: Vec<Ack> = Vec::new();
    let mut next_capture = 5 + rng.below(30);
    let mut captures = 0;
    for seq in 0..puts {
        let key = format!("k{seq}");
        let body = body_for(seq);
        let keys = [key.as_str()];
        let msg = PutMessage {
            topic: TOPICS[(seq % 2) as usize],
            body: &body,
            queue_id: (seq % 3) as i32,
            keys: &keys,
            ..Default::default()
        };
        let r = store.put(&msg).unwrap();
        acks.push(Ack {
            offset: r.commitlog_offset as u64,
            size: r.wrote_bytes,
            queue_id: msg.queue_id,
            queue_offset: r.queue_offset,
            seq,
            durable: r.status == PutStatus::PutOk,
        });
        if seq + 1 == next_capture {
            next_capture += 3 + rng.below(20);
            if rng.below(3) == 0 {
                std::thread::sleep(Duration::from_millis(rng.below(25)));
            }
            // The durable bound first: everything below it is in the durable image taken next.
            let flushed = store.cursors().flushed;
            let (durable, live, checkpoint) = capture(&root);
            for v in 0..variants {
                let image = work.path().join("image");
                let t = Instant::now();
                let cp = checkpoint.as_deref();
                build_image(&root, &image, &durable, &live, cp, &mut rng, stats);
                stats.build += t.elapsed();
                let label =
                    format!("{mode} seed {seed} capture {captures} variant {v} (seq {seq})");
                let durable = |a: &Ack| {
                    if mode == "sync" {
                        a.durable
                    } else {
                        a.offset + a.size as u64 <= flushed
                    }
                };
                check_image(&image, mode, &acks, &durable, v < 2, stats, &label);
            }
            captures += 1;
        }
    }
    store.close().unwrap();
    rocketstore::powerloss::forget(&root);
}

/// Copies the live files of `root` (what the page cache holds) to `to`, as a process crash
/// leaves them, with the simulated disk under `to` as it was under `root`.
fn crash_copy(root: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for (path, bytes) in live_files(root) {
        let dst = to.join(path.strip_prefix(root).unwrap());
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::write(&dst, bytes).unwrap();
    }
    rocketstore::powerloss::adopt(root, to);
}

/// A capture: the simulated disk, the live files and the live checkpoint.
type Capture = (Disk, Vec<(PathBuf, Vec<u8>)>, Option<Vec<u8>>);

/// Puts message `seq` and returns its ack.
fn put_seq(store: &Store, seq: u64) -> Ack {
    let key = format!("k{seq}");
    let body = body_for(seq);
    let keys = [key.as_str()];
    let msg = PutMessage {
        topic: TOPICS[(seq % 2) as usize],
        body: &body,
        queue_id: (seq % 3) as i32,
        keys: &keys,
        ..Default::default()
    };
    let r = store.put(&msg).unwrap();
    Ack {
        offset: r.commitlog_offset as u64,
        size: r.wrote_bytes,
        queue_id: msg.queue_id,
        queue_offset: r.queue_offset,
        seq,
        durable: r.status == PutStatus::PutOk,
    }
}

/// Every commit log byte below `offset` is on the simulated disk as it is in the live files:
/// the flushed cursor never claims bytes no successful msync wrote.
fn assert_durable_below(root: &Path, offset: u64) {
    let file_size = 64 * 1024_u64; // config()'s mapped_file_size_commit_log
    let durable = durable_image(root);
    let mut start = 0_u64;
    while start < offset {
        let path = root.join("commitlog").join(format!("{start:020}"));
        let end = usize::try_from((offset - start).min(file_size)).unwrap();
        let live = std::fs::read(&path).unwrap();
        let disk = durable.get(&path).map_or(&[][..], Vec::as_slice);
        let on_disk = disk.get(..end).unwrap_or(disk);
        assert!(
            on_disk.len() == end && on_disk == &live[..end],
            "flushed {offset} claims bytes of {} the disk does not hold",
            path.display()
        );
        start += file_size;
    }
}

/// A crash (kill -9: the page cache survives), a reopen in the same boot, then power cuts: right
/// after the reopen's recovery, and after more puts. Recovery declares what it found durable
/// (the flushed cursor, and the checkpoints written from it): every record below that must
/// survive the power cut, as must the reopened store's own acks.
fn reopen_workload(mode: &'static str, seed: u64, puts: u64, variants: usize, stats: &mut Stats) {
    reopen_after(mode, seed, puts, variants, false, stats);
}

/// [`reopen_workload`]; with `failed_msync` the commit log's flush fails (EIO) before the crash:
/// the unflushed range keeps its old durable bytes on the simulated disk (the store is fenced),
/// and the same-boot reopen must make what it recovers durable before declaring it so.
fn reopen_after(
    mode: &'static str,
    seed: u64,
    puts: u64,
    variants: usize,
    failed_msync: bool,
    stats: &mut Stats,
) {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let crashed = dir.path().join("crashed");
    let mut rng = Rng(seed | 1);
    let store = Store::open(&root, config(mode)).unwrap();
    let mut acks: Vec<Ack> = (0..puts).map(|seq| put_seq(&store, seq)).collect();
    if rng.below(2) == 0 {
        std::thread::sleep(Duration::from_millis(rng.below(15)));
    }
    if failed_msync {
        // The flush fails: the store is fenced and the durable offset stays where it was.
        rocketstore::powerloss::fail_msyncs_under(Some(&root));
        let before = store.cursors().flushed;
        // Unflushed writes for the flush to fail on (the flush service may fail first: then
        // the store is fenced and the puts are refused).
        for seq in puts..puts + 8 {
            let key = format!("k{seq}");
            let (body, keys) = (body_for(seq), [key.as_str()]);
            let msg = PutMessage {
                topic: TOPICS[(seq % 2) as usize],
                body: &body,
                queue_id: (seq % 3) as i32,
                keys: &keys,
                ..Default::default()
            };
            if let Ok(r) = store.put(&msg) {
                acks.push(Ack {
                    offset: r.commitlog_offset as u64,
                    size: r.wrote_bytes,
                    queue_id: msg.queue_id,
                    queue_offset: r.queue_offset,
                    seq,
                    durable: r.status == PutStatus::PutOk,
                });
            }
        }
        assert!(store.flush().is_err(), "a failed msync must fail the flush");
        assert!(store.poisoned().is_some());
        // A flush whose msync was issued before the failures began may still complete and move
        // the cursor; whatever it says is flushed must be on the simulated disk.
        let flushed = store.cursors().flushed;
        assert!(flushed >= before);
        assert_durable_below(&root, flushed);
        rocketstore::powerloss::fail_msyncs_under(None);
        stats.failed_msyncs += 1;
    }
    // Durable before the crash: SYNC PUT_OK; ASYNC below the flushed offset, read before the
    // disk is copied (everything below it was synced before).
    let flushed0 = store.cursors().flushed;
    crash_copy(&root, &crashed);
    drop(store);
    rocketstore::powerloss::forget(&root);
    let durable_before: std::collections::HashSet<u64> = acks
        .iter()
        .filter(|a| {
            if mode == "sync" {
                a.durable
            } else {
                a.offset + a.size as u64 <= flushed0
            }
        })
        .map(|a| a.offset)
        .collect();
    // Images during recovery: the disk and the files at the `at`-th durability event of the
    // reopen (a sync, a creation or a replacement made durable).
    // Early events (commit log and consume queue syncs): every recovery has a few.
    let at = 1 + rng.below(4) as usize;
    let events = Arc::new(Mutex::new(0usize));
    let during: Arc<Mutex<Option<Capture>>> = Arc::new(Mutex::new(None));
    {
        let (events, during, dir) = (Arc::clone(&events), Arc::clone(&during), crashed.clone());
        rocketstore::powerloss::set_hook(Some(Box::new(move |path: &Path| {
            if !path.starts_with(&dir) {
                return;
            }
            let mut n = events.lock().unwrap();
            *n += 1;
            if *n == at {
                *during.lock().unwrap() = Some(capture(&dir));
            }
        })));
    }
    let reopened = Store::open(&crashed, config(mode)).unwrap();
    rocketstore::powerloss::set_hook(None);
    if let Some((durable, live, cp)) = during.lock().unwrap().take() {
        stats.kind = "recovery";
        for v in 0..variants {
            let image = work.path().join("image");
            build_image(
                &crashed,
                &image,
                &durable,
                &live,
                cp.as_deref(),
                &mut rng,
                stats,
            );
            let label = format!("during recovery {mode} seed {seed} event {at} variant {v}");
            let ok = |a: &Ack| durable_before.contains(&a.offset);
            check_image(&image, mode, &acks, &ok, v < 2, stats, &label);
        }
    }
    stats.kind = if failed_msync {
        "failed-msync"
    } else {
        "reopen"
    };
    assert!(reopened.recovery_report().abnormal);
    let claimed = reopened.cursors().flushed;
    let end = acks.last().map_or(0, |a| a.offset + a.size as u64);
    assert!(
        claimed >= end,
        "{mode}:{seed}: recovery lost page-cache records"
    );
    stats.reopens += 1;
    for round in 0..2 {
        if round == 1 {
            acks.extend((puts + 100..puts + 120).map(|seq| put_seq(&reopened, seq)));
        }
        let flushed = reopened.cursors().flushed.max(claimed);
        let (durable, live, checkpoint) = capture(&crashed);
        for v in 0..variants {
            let image = work.path().join("image");
            let t = Instant::now();
            build_image(
                &crashed,
                &image,
                &durable,
                &live,
                checkpoint.as_deref(),
                &mut rng,
                stats,
            );
            stats.build += t.elapsed();
            let label = format!("reopen {mode} seed {seed} round {round} variant {v}");
            // Below the recovered end: declared durable by recovery. Past it: the reopened
            // store's acks (SYNC: PUT_OK; ASYNC: below its flushed cursor).
            let ok = |a: &Ack| {
                let to = a.offset + a.size as u64;
                to <= claimed
                    || if mode == "sync" {
                        a.durable
                    } else {
                        to <= flushed
                    }
            };
            check_image(&image, mode, &acks, &ok, v < 2, stats, &label);
        }
    }
    reopened.close().unwrap();
    rocketstore::powerloss::forget(&crashed);
}

/// SYNC_FLUSH with several writer threads; images are taken while they write. Every PUT_OK
/// recorded before a capture must survive each image of it.
fn threaded_workload(seed: u64, puts: u64, variants: usize, stats: &mut Stats) {
    const THREADS: u64 = 3;
    stats.kind = "sync-mt";
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let mut rng = Rng(seed | 1);
    let store = Arc::new(Store::open(&root, config("sync")).unwrap());
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The writers go on (at most `puts` each) until the captures are done.
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, acks, stop) = (Arc::clone(&store), Arc::clone(&acks), Arc::clone(&stop));
            std::thread::spawn(move || {
                for i in 0..puts {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let a = put_seq(&store, i * THREADS + t);
                    acks.lock().unwrap().push(a);
                    std::thread::sleep(Duration::from_micros(500));
                }
            })
        })
        .collect();
    let mut captures = 0;
    while captures < 4 && writers.iter().any(|w| !w.is_finished()) {
        std::thread::sleep(Duration::from_millis(1 + rng.below(10)));
        // Acks first: each was synced before it was recorded, so before the disk is read.
        let acked: Vec<Ack> = acks.lock().unwrap().clone();
        let (durable, live, checkpoint) = capture(&root);
        for v in 0..variants {
            let image = work.path().join("image");
            let t = Instant::now();
            build_image(
                &root,
                &image,
                &durable,
                &live,
                checkpoint.as_deref(),
                &mut rng,
                stats,
            );
            stats.build += t.elapsed();
            let label = format!("sync-mt seed {seed} capture {captures} variant {v}");
            check_image(
                &image,
                "sync",
                &acked,
                &|a: &Ack| a.durable,
                v < 2,
                stats,
                &label,
            );
        }
        captures += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    Arc::try_unwrap(store).unwrap().close().unwrap();
    rocketstore::powerloss::forget(&root);
}

/// SYNC_FLUSH puts over several commit log files, then a forced cleanup pass deletes the
/// oldest files (commit log, consume queue and index files): images right after a random
/// unlink of the pass (before the directory fsync that makes it durable, so the latest
/// deletions may be undone and their files come back) and after the pass. Every PUT_OK at or past the commit log's first
/// offset after the pass must survive each image.
fn cleanup_workload(seed: u64, puts: u64, variants: usize, stats: &mut Stats) {
    stats.kind = "cleanup";
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let mut rng = Rng(seed | 1);
    let store = Store::open(&root, config("sync")).unwrap();
    let acks: Vec<Ack> = (0..puts).map(|seq| put_seq(&store, seq)).collect();
    // Only flushed and dispatched data is deleted: let the services catch up.
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.dispatch_behind_bytes() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(20));
    // The capture: right after the `at`-th unlink of the pass (or its last, if it has fewer),
    // before the directory fsync that makes the deletions durable.
    let at = 1 + rng.below(4) as usize;
    let events = Arc::new(Mutex::new(0usize));
    let during: Arc<Mutex<Option<Capture>>> = Arc::new(Mutex::new(None));
    {
        let (events, during, dir) = (Arc::clone(&events), Arc::clone(&during), root.clone());
        rocketstore::powerloss::set_hook(Some(Box::new(move |path: &Path| {
            // An unlink event: the file is gone (a sync or creation event's file exists).
            if !path.starts_with(&dir) || path.exists() {
                return;
            }
            let mut n = events.lock().unwrap();
            *n += 1;
            if *n <= at {
                *during.lock().unwrap() = Some(capture(&dir));
            }
        })));
    }
    let report = store.delete_expired_files(true);
    rocketstore::powerloss::set_hook(None);
    let report = report.unwrap();
    let min = store.min_commitlog_offset();
    let after = capture(&root);
    let captured = during.lock().unwrap().take();
    for (n, (durable, live, cp)) in [captured, Some(after)].into_iter().flatten().enumerate() {
        for v in 0..variants {
            let image = work.path().join("image");
            let t = Instant::now();
            build_image(
                &root,
                &image,
                &durable,
                &live,
                cp.as_deref(),
                &mut rng,
                stats,
            );
            stats.build += t.elapsed();
            let label = format!(
                "cleanup seed {seed} capture {n} (event {at}) variant {v}, {} commit log files \
                 deleted",
                report.commitlog_files_deleted.len()
            );
            let ok = |a: &Ack| a.durable && a.offset >= min;
            check_image(&image, "sync", &acks, &ok, v < 2, stats, &label);
        }
    }
    store.close().unwrap();
    rocketstore::powerloss::forget(&root);
}

/// One workload of a kind: `sync`, `async`, `pool` (kill points during writes), `sync-mt`
/// (several writer threads), `reopen-sync`, `reopen-async` (power cuts during and after a
/// same-boot reopen).
fn run_workload(kind: &str, seed: u64, puts: u64, stats: &mut Stats) {
    match kind {
        "sync" => workload("sync", seed, puts, 6, stats),
        "async" => workload("async", seed, puts, 6, stats),
        "pool" => workload("pool", seed, puts, 6, stats),
        "sync-mt" => threaded_workload(seed, puts * 4, 3, stats),
        "reopen-sync" => reopen_workload("sync", seed, puts / 2, 4, stats),
        "reopen-async" => reopen_workload("async", seed, puts / 2, 4, stats),
        "failed-msync" => reopen_after("async", seed, puts / 2, 4, true, stats),
        "cleanup" => cleanup_workload(seed, puts * 3, 4, stats),
        other => panic!("unknown workload kind {other}"),
    }
}

const KINDS: [&str; 8] = [
    "sync",
    "async",
    "pool",
    "sync-mt",
    "reopen-sync",
    "reopen-async",
    "failed-msync",
    "cleanup",
];

fn run(images: usize) {
    let images = std::env::var("ROCKETSTORE_POWERLOSS_IMAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(images);
    let seed = std::env::var("ROCKETSTORE_POWERLOSS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let mut stats = Stats::default();
    // Replays one workload: ROCKETSTORE_POWERLOSS_WORKLOAD=<kind>:<seed>:<puts>.
    if let Ok(w) = std::env::var("ROCKETSTORE_POWERLOSS_WORKLOAD") {
        let f: Vec<&str> = w.split(':').collect();
        for _ in 0..images.max(1) {
            run_workload(
                f[0],
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                &mut stats,
            );
        }
        return;
    }
    let mut rng = Rng(seed | 1);
    let mut round = 0;
    while stats.images < images || round < KINDS.len() {
        let kind = KINDS[round % KINDS.len()];
        let (wseed, puts) = (rng.next(), 80 + rng.below(160));
        println!("workload {kind}:{wseed}:{puts}");
        run_workload(kind, wseed, puts, &mut stats);
        round += 1;
    }
    stats.recovery.sort();
    println!(
        "power loss: time building images {:?}, checking them {:?}, recovering {:?}",
        stats.build,
        stats.check,
        stats.recovery.iter().sum::<Duration>()
    );
    let p = |q: usize| stats.recovery[(stats.recovery.len() - 1) * q / 100];
    println!(
        "power loss: {} images from {round} workloads (seed {seed}; ROCKETSTORE_POWERLOSS_SEED \
         reproduces), images per kind {:?}; {} dirty pages ({} lost, {} torn, the rest kept); \
         files whose creation was not durable: {} vanished, left empty {:?}, left short {:?}; \
         {} deleted files back; {} failed msyncs before a same-boot reopen; {} durable \
         acks checked field by field, {} recovered from the checkpoint window, 0 violations; \
         recovery per image p50 {:?}, p99 {:?}, max {:?}",
        stats.images,
        stats.per_kind,
        stats.dirty_pages,
        stats.lost_pages,
        stats.torn_pages,
        stats.vanished_files,
        stats.empty_files,
        stats.short_files,
        stats.ghosts,
        stats.failed_msyncs,
        stats.checked_acks,
        stats.from_window,
        p(50),
        p(99),
        p(100)
    );
    // A run that lost, tore or checked nothing proves nothing.
    assert!(
        stats.lost_pages > 0 && stats.torn_pages > 0,
        "{:?}",
        (
            &stats.per_kind,
            stats.lost_pages,
            stats.torn_pages,
            stats.vanished_files,
            &stats.empty_files,
            &stats.short_files,
            stats.ghosts,
            stats.failed_msyncs,
            stats.checked_acks
        )
    );
    assert!(
        stats.checked_acks > 0,
        "{:?}",
        (
            &stats.per_kind,
            stats.lost_pages,
            stats.torn_pages,
            stats.vanished_files,
            &stats.empty_files,
            &stats.short_files,
            stats.ghosts,
            stats.failed_msyncs,
            stats.checked_acks
        )
    );
    assert!(
        stats.failed_msyncs > 0,
        "{:?}",
        (
            &stats.per_kind,
            stats.lost_pages,
            stats.torn_pages,
            stats.vanished_files,
            &stats.empty_files,
            &stats.short_files,
            stats.ghosts,
            stats.failed_msyncs,
            stats.checked_acks
        )
    );
    // Every kind of file-level damage happened at least once.
    assert!(
        stats.vanished_files > 0 && stats.ghosts > 0,
        "{:?}",
        (
            &stats.per_kind,
            stats.lost_pages,
            stats.torn_pages,
            stats.vanished_files,
            &stats.empty_files,
            &stats.short_files,
            stats.ghosts,
            stats.failed_msyncs,
            stats.checked_acks
        )
    );
    for top in ["consumequeue", "index"] {
        let n = |m: &std::collections::BTreeMap<String, usize>| m.get(top).copied().unwrap_or(0);
        assert!(
            n(&stats.empty_files) > 0,
            "no empty {top} file: {:?}",
            stats.empty_files
        );
        assert!(
            n(&stats.short_files) > 0,
            "no short {top} file: {:?}",
            stats.short_files
        );
    }
    for kind in [
        "sync",
        "async",
        "pool",
        "sync-mt",
        "reopen",
        "recovery",
        "failed-msync",
        "cleanup",
    ] {
        assert!(
            stats.per_kind.get(kind).is_some_and(|&n| n > 0),
            "no {kind} image: {:?}",
            stats.per_kind
        );
    }
}

#[test]
fn power_cut_after_a_same_boot_reopen_loses_no_acknowledged_message() {
    let seed = std::env::var("ROCKETSTORE_POWERLOSS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0f42);
    let mut rng = Rng(seed | 1);
    let mut stats = Stats::default();
    for round in 0..8 {
        let mode = ["async", "sync"][round % 2];
        let (wseed, puts) = (rng.next(), 40 + rng.below(120));
        println!("reopen workload {mode}:{wseed}:{puts}");
        reopen_workload(mode, wseed, puts, 4, &mut stats);
    }
    println!(
        "power cut after a same-boot reopen: {} reopens, {} images, {} dirty pages, {} durable \
         acks checked, 0 violations",
        stats.reopens, stats.images, stats.dirty_pages, stats.checked_acks
    );
    assert!(stats.reopens > 0 && stats.dirty_pages > 0 && stats.checked_acks > 0);
}

#[test]
fn power_loss_images() {
    run(510);
}

#[test]
#[ignore = "slow: 10,000 images (make test-all)"]
fn power_loss_images_slow() {
    run(10_000);
}
