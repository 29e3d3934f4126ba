//! The read path through the public API (spec §6.6, §11): every `GetMessageStatus` with the
//! situation that yields it and its nextBeginOffset rule, key queries with hash collisions
//! filtered out, offset by time (5.x LOWER/UPPER), offset message ids, read-only opens serving
//! the same answers, and long polling (wake latency, idle waiters).
//!
//! Statuses not produced here, and why:
//! - `OFFSET_FOUND_NULL`: RocketMQ returns it when the consume queue file holding the offset is
//!   gone although the offset is not below the queue's min. Here `min_offset_in_queue` is
//!   clamped to the first consume queue file, so deleting a file moves the min at once and the
//!   read answers `OFFSET_TOO_SMALL`; `OFFSET_FOUND_NULL` can only come from a race (a file
//!   deleted between the min check and the read), as in RocketMQ between `deleteExpiredFile`
//!   and `correctMinOffset`. `read.rs` computes its nextBeginOffset (`rollNextFile`).
//! - `NO_MATCHED_LOGIC_QUEUE`: 5.x creates a missing queue on lookup, so an unknown queue is
//!   `NO_MESSAGE_IN_QUEUE` (and so it is here).
//! - `OFFSET_RESET`: broker layer only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketstore::format::{index_key_hash, offset_to_file_name, tags_code};
use rocketstore::{Error, GetResult, GetStatus, PutMessage, Store, StoreConfig};

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = 64 * 1024;
    c.mapped_file_size_consume_queue = 300 * 20;
    c.max_hash_slot_num = 1000;
    c.max_index_num = 4000;
    // Dispatch inline so a read right after a put sees it (long polling tests turn the
    // service threads on).
    c.background_threads = false;
    c
}

fn threaded() -> StoreConfig {
    let mut c = config();
    c.background_threads = true;
    c
}

fn get(store: &Store, topic: &str, offset: i64, max: usize, tags: Option<&str>) -> GetResult {
    store
        .get_message(topic, 0, offset, max, None, tags)
        .unwrap()
}

fn put_tagged(store: &Store, topic: &str, tags: &str, body: &[u8]) -> rocketstore::PutResult {
    store
        .put(&PutMessage {
            topic,
            body,
            tags: Some(tags),
            ..Default::default()
        })
        .unwrap()
}

/// FOUND: messages at the offset; nextBeginOffset is one past the last entry looked at.
/// NO_MESSAGE_IN_QUEUE: the queue never held a message (an unknown queue is created on lookup
/// in 5.x), nextBeginOffset 0. OFFSET_OVERFLOW_ONE: the offset is the queue's end (nothing new
/// yet, the case long polling waits on), nextBeginOffset = offset. OFFSET_OVERFLOW_BADLY: the
/// offset is past the end, nextBeginOffset = max. NO_MATCHED_MESSAGE: entries were scanned but
/// the subscription filtered all of them out; nextBeginOffset still moves past them.
#[test]
fn statuses_of_a_live_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();

    let r = get(&store, "Q", 0, 32, None);
    assert_eq!(r.status, GetStatus::NoMessageInQueue);
    assert_eq!((r.next_begin_offset, r.min_offset, r.max_offset), (0, 0, 0));

    for i in 0..3 {
        put_tagged(&store, "Q", "TagA", format!("m{i}").as_bytes());
    }
    let r = get(&store, "Q", 0, 32, None);
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(r.messages.len(), 3);
    assert_eq!((r.next_begin_offset, r.min_offset, r.max_offset), (3, 0, 3));
    let r = get(&store, "Q", 1, 1, None);
    assert_eq!((r.status, r.next_begin_offset), (GetStatus::Found, 2));
    assert_eq!(r.messages[0].body, b"m1");

    let r = get(&store, "Q", 3, 32, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetStatus::OffsetOverflowOne, 3)
    );
    let r = get(&store, "Q", 10, 32, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetStatus::OffsetOverflowBadly, 3)
    );

    let r = get(&store, "Q", 0, 32, Some("TagB"));
    assert_eq!(r.status, GetStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, 3);
    assert!(r.messages.is_empty());
    // "TagA || TagB" matches; "*" matches everything.
    assert_eq!(
        get(&store, "Q", 0, 32, Some("TagB || TagA")).messages.len(),
        3
    );
    assert_eq!(get(&store, "Q", 0, 32, Some("*")).messages.len(), 3);
    store.close().unwrap();
}

/// NO_MATCHED_MESSAGE with a tagsCode collision: "Aa" and "BB" have the same Java hash, so
/// the consume queue's first-level filter passes the "Aa" message for a "BB" subscription; the
/// second-level filter on the real tag string drops it (clients do the same). A matching
/// message after the filtered ones is FOUND and nextBeginOffset covers both.
#[test]
fn tag_hash_collisions_are_filtered_by_the_real_tag() {
    assert_eq!(tags_code(Some("Aa")), tags_code(Some("BB")));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    put_tagged(&store, "C", "Aa", b"aa");
    let r = get(&store, "C", 0, 32, Some("BB"));
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetStatus::NoMatchedMessage, 1)
    );
    put_tagged(&store, "C", "BB", b"bb");
    let r = get(&store, "C", 0, 32, Some("BB"));
    assert_eq!((r.status, r.next_begin_offset), (GetStatus::Found, 2));
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.messages[0].body, b"bb");
    store.close().unwrap();
}

/// The batch-full rules (`isTheBatchFull`): at most `max_messages`, at most 32 messages per
/// read while the data is "in memory", and `max_total_bytes` (at least one message is always
/// returned). nextBeginOffset stops at the first message not returned.
#[test]
fn batch_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let body = vec![7u8; 200];
    let msgs: Vec<PutMessage<'_>> = (0..50)
        .map(|_| PutMessage {
            topic: "B",
            body: &body,
            ..Default::default()
        })
        .collect();
    let res = store.put_batch(&msgs).unwrap();
    let size = res[0].wrote_bytes as u64;
    let r = get(&store, "B", 0, 5, None);
    assert_eq!((r.messages.len(), r.next_begin_offset), (5, 5));
    let r = get(&store, "B", 0, 1000, None);
    assert_eq!((r.messages.len(), r.next_begin_offset), (32, 32));
    let r = store
        .get_message("B", 0, 10, 32, Some(size * 3 + 1), None)
        .unwrap();
    assert_eq!((r.messages.len(), r.next_begin_offset), (3, 13));
    let r = store.get_message("B", 0, 10, 32, Some(1), None).unwrap();
    assert_eq!((r.messages.len(), r.next_begin_offset), (1, 11));
    store.close().unwrap();
}

/// Writes 400 messages of about 1 KiB into queue ("T", 0): 64 KiB commit log files hold about
/// 58 each, so 7 files; the consume queue has 2 files (300 units each).
fn write_400(root: &Path) -> Vec<rocketstore::PutResult> {
    let store = Store::open(root, config()).unwrap();
    let body = vec![b'x'; 1000];
    let keys: Vec<String> = (0..400).map(|i| format!("k{i}")).collect();
    let mut out = Vec::new();
    for k in &keys {
        out.push(
            store
                .put(&PutMessage {
                    topic: "T",
                    body: &body,
                    tags: Some("TagA"),
                    keys: &[k.as_str()],
                    ..Default::default()
                })
                .unwrap(),
        );
    }
    assert!(store.commitlog_files().len() >= 7);
    store.close().unwrap();
    out
}

fn remove_commitlog_files(root: &Path, count: u64) {
    for i in 0..count {
        let p = root
            .join("commitlog")
            .join(offset_to_file_name(i * 64 * 1024));
        std::fs::remove_file(&p).unwrap();
    }
}

/// OFFSET_TOO_SMALL: the commit log's first file was deleted (as cleanup does), so at open the
/// queue's min moves to the first unit whose record still exists; an offset below it answers
/// OFFSET_TOO_SMALL with nextBeginOffset = min. Served read-only from the files on disk.
#[test]
fn offset_too_small_after_the_first_commitlog_file_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let puts = write_400(dir.path());
    remove_commitlog_files(dir.path(), 1);
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    let first_kept = puts
        .iter()
        .position(|p| p.commitlog_offset >= 64 * 1024)
        .unwrap() as i64;
    assert_eq!(store.min_offset_in_queue("T", 0), first_kept);
    let r = get(&store, "T", 0, 32, None);
    assert_eq!(r.status, GetStatus::OffsetTooSmall);
    assert_eq!(
        (r.next_begin_offset, r.min_offset),
        (first_kept, first_kept)
    );
    let r = get(&store, "T", first_kept, 32, None);
    assert_eq!(r.status, GetStatus::Found);
    assert_eq!(r.messages[0].queue_offset, first_kept);
    store.close().unwrap();
}

/// MESSAGE_WAS_REMOVING: the consume queue still has units whose records are deleted. With
/// the first 6 commit log files gone, every unit of the first consume queue file (offsets
/// 0..300) points below the commit log's min; the min correction only searches that first
/// file (RocketMQ HEAD `correctMinOffset`), finds nothing, and leaves the min at 0 until the
/// consume queue cleanup deletes the file. A read at 0 skips the whole file: nextBeginOffset
/// is 300, where the next read finds messages again (past the remaining dead units).
#[test]
fn message_was_removing_when_units_outlive_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let puts = write_400(dir.path());
    remove_commitlog_files(dir.path(), 6);
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    let min_phy = store.min_commitlog_offset() as i64;
    assert!(puts[299].commitlog_offset < min_phy);
    assert_eq!(store.min_offset_in_queue("T", 0), 0);
    let r = get(&store, "T", 0, 32, None);
    assert_eq!(r.status, GetStatus::MessageWasRemoving);
    assert!(r.messages.is_empty());
    assert_eq!(r.next_begin_offset, 300);
    let r = get(&store, "T", 300, 32, None);
    assert_eq!(r.status, GetStatus::Found);
    let first_alive = puts
        .iter()
        .position(|p| p.commitlog_offset >= min_phy)
        .unwrap() as i64;
    assert_eq!(r.messages[0].queue_offset, first_alive);
    store.close().unwrap();
}

/// `query_message` returns only records whose KEYS or UNIQ_KEY really equal the key: "T#Aa"
/// and "T#BB" share an index hash (and slot), so the index chain yields both offsets and the
/// engine drops the collision. Also UNIQ_KEY lookups, offset message ids, the time window,
/// `max_num`, and newest-first collection across rolled index files.
/// A key lookup reads the first bytes of each hit ahead of its decode; for the last record
/// of the log fewer of them are published than it would read: still found, byte-identical.
#[test]
fn key_query_of_the_record_at_the_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    for (i, body) in [&b"a"[..], b"bb", b""].iter().enumerate() {
        let key = format!("k{i}");
        let r = store
            .put(&PutMessage {
                topic: "T",
                body,
                keys: &[key.as_str()],
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            store.max_commitlog_offset() as i64,
            r.commitlog_offset + i64::from(r.wrote_bytes),
            "the record ends at the watermark"
        );
        let q = store.query_message("T", &key, 1, 0, i64::MAX).unwrap();
        assert_eq!(q.messages.len(), 1);
        assert_eq!(q.messages[0].body, *body);
        let h = store
            .query_message_records("T", &key, 4, 0, i64::MAX)
            .unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].offset() as i64, r.commitlog_offset);
        assert_eq!(h[0].bytes().len(), r.wrote_bytes as usize);
    }
}

#[test]
fn key_queries() {
    assert_eq!(index_key_hash("T#Aa"), index_key_hash("T#BB"));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let a = store
        .put(&PutMessage {
            topic: "T",
            body: b"aa",
            keys: &["Aa", "shared"],
            ..Default::default()
        })
        .unwrap();
    let b = store
        .put(&PutMessage {
            topic: "T",
            body: b"bb",
            keys: &["BB", "shared"],
            ..Default::default()
        })
        .unwrap();
    let q = store.query_message("T", "Aa", 32, 0, i64::MAX).unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(q.messages[0].commitlog_offset(), a.commitlog_offset);
    let q = store.query_message("T", "BB", 32, 0, i64::MAX).unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(q.messages[0].commitlog_offset(), b.commitlog_offset);
    let q = store.query_message("T", "shared", 32, 0, i64::MAX).unwrap();
    let offs: Vec<i64> = q.messages.iter().map(|m| m.commitlog_offset()).collect();
    assert_eq!(offs, vec![a.commitlog_offset, b.commitlog_offset]);
    assert_eq!(q.index_last_update_phy_offset, b.commitlog_offset);
    // Another topic's key never matches.
    assert!(store
        .query_message("U", "Aa", 32, 0, i64::MAX)
        .unwrap()
        .messages
        .is_empty());
    // UNIQ_KEY.
    let m = store.view_message_by_id(&a.msg_id()).unwrap();
    assert_eq!(m.body, b"aa");
    let uniq = m.uniq_key().unwrap().to_string();
    let q = store.query_message("T", &uniq, 32, 0, i64::MAX).unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(q.messages[0].commitlog_offset(), a.commitlog_offset);
    // A window after every store time finds nothing (spec §16 vector 15's last line).
    assert!(store
        .query_message("T", "Aa", 32, a.store_timestamp + 1, i64::MAX)
        .unwrap()
        .messages
        .is_empty());
    // Malformed offset message ids are argument errors, not panics.
    for bad in ["", "XYZ", "0A00000100002A9F00000000400000", &"F".repeat(32)] {
        assert!(store.view_message_by_id(bad).is_err(), "{bad:?}");
    }

    // 2,500 messages with one key: 5,000 index entries, so 4,000-entry files roll once.
    let msgs: Vec<PutMessage<'_>> = (0..2500)
        .map(|_| PutMessage {
            topic: "D",
            body: b"d",
            keys: &["dup"],
            ..Default::default()
        })
        .collect();
    let res = store.put_batch(&msgs).unwrap();
    assert!(store.index_files().len() >= 2);
    let q = store.query_message("D", "dup", 32, 0, i64::MAX).unwrap();
    let offs: Vec<i64> = q.messages.iter().map(|m| m.commitlog_offset()).collect();
    let newest: Vec<i64> = res[2500 - 32..]
        .iter()
        .map(|r| r.commitlog_offset)
        .collect();
    assert_eq!(offs, newest);
    // max_num is capped by max_msgs_num_batch (64).
    assert_eq!(
        store
            .query_message("D", "dup", 1000, 0, i64::MAX)
            .unwrap()
            .messages
            .len(),
        64
    );
    store.close().unwrap();
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `get_offset_in_queue_by_time` (5.x): LOWER gives the first offset whose store time is at
/// least ts (the max if none), UPPER the last one at most ts (the min if none); exact matches extend
/// over equal timestamps (leftmost for LOWER, rightmost for UPPER). Also the earliest message
/// time and per-offset store timestamps. Same answers read-only.
#[test]
fn offset_by_time_lower_and_upper() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let mut times = Vec::new();
    for g in 0..3 {
        let before = now_ms();
        while now_ms() <= before {
            std::thread::sleep(Duration::from_millis(2));
        }
        let bodies = [format!("g{g}a"), format!("g{g}b"), format!("g{g}c")];
        let msgs: Vec<PutMessage<'_>> = bodies
            .iter()
            .map(|b| PutMessage {
                topic: "Time",
                body: b.as_bytes(),
                ..Default::default()
            })
            .collect();
        let res = store.put_batch(&msgs).unwrap();
        assert!(res
            .iter()
            .all(|r| r.store_timestamp == res[0].store_timestamp));
        times.push(res[0].store_timestamp);
    }
    assert!(times[0] < times[1] && times[1] < times[2], "{times:?}");
    let check = |s: &Store| {
        let by =
            |ts: i64, upper: bool| s.get_offset_in_queue_by_time("Time", 0, ts, upper).unwrap();
        assert_eq!(by(times[1], false), 3);
        assert_eq!(by(times[1], true), 5);
        assert_eq!(by(times[0], false), 0);
        assert_eq!(by(times[2], true), 8);
        assert_eq!(by(times[0] - 1, false), 0);
        assert_eq!(by(times[0] - 1, true), 0);
        assert_eq!(by(times[2] + 1, false), 9);
        assert_eq!(by(times[2] + 1, true), 8);
        if times[1] + 1 < times[2] {
            assert_eq!(by(times[1] + 1, false), 6);
            assert_eq!(by(times[1] + 1, true), 5);
        }
        assert_eq!(s.get_earliest_message_time("Time", 0), times[0]);
        assert_eq!(s.get_message_store_timestamp("Time", 0, 4), times[1]);
        assert_eq!(s.get_message_store_timestamp("Time", 0, 9), -1);
        assert_eq!(s.get_earliest_message_time("Nope", 0), -1);
        assert_eq!(
            s.get_offset_in_queue_by_time("Nope", 0, times[0], false)
                .unwrap(),
            0
        );
        assert_eq!(
            (
                s.min_offset_in_queue("Time", 0),
                s.max_offset_in_queue("Time", 0)
            ),
            (0, 9)
        );
    };
    check(&store);
    store.close().unwrap();
    let ro = Store::open_read_only(dir.path(), config()).unwrap();
    check(&ro);
    ro.close().unwrap();
}

/// A read-only open serves the same answers from the consume queue and index files on disk
/// and changes no byte of the store.
#[test]
fn read_only_serves_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let puts = write_400(dir.path());
    let digest = |root: &Path| {
        let mut v = Vec::new();
        for sub in ["commitlog", "consumequeue/T/0", "index", "config"] {
            let d = root.join(sub);
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            let mut names: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
            names.sort();
            for p in names {
                v.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
        v
    };
    let before = digest(dir.path());
    let rw = Store::open(dir.path(), config()).unwrap();
    let want: Vec<_> = [0i64, 100, 299, 300, 399]
        .iter()
        .map(|o| get(&rw, "T", *o, 32, None))
        .collect();
    let want_q = rw.query_message("T", "k123", 32, 0, i64::MAX).unwrap();
    rw.close().unwrap();
    let before_ro = digest(dir.path());
    let ro = Store::open_read_only(dir.path(), config()).unwrap();
    assert!(ro.is_read_only());
    let got: Vec<_> = [0i64, 100, 299, 300, 399]
        .iter()
        .map(|o| get(&ro, "T", *o, 32, None))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        ro.query_message("T", "k123", 32, 0, i64::MAX).unwrap(),
        want_q
    );
    assert_eq!(
        want_q.messages[0].commitlog_offset(),
        puts[123].commitlog_offset
    );
    let m = ro.view_message_by_id(&puts[7].msg_id()).unwrap();
    assert_eq!(m.queue_offset, 7);
    assert!(matches!(
        ro.put(&PutMessage {
            topic: "T",
            body: b"x",
            ..Default::default()
        }),
        Err(Error::ReadOnly { .. })
    ));
    ro.close().unwrap();
    assert_eq!(digest(dir.path()), before_ro);
    assert_eq!(before.len(), before_ro.len());
}

/// A read-only open whose configured index geometry does not match the files (a foreign store
/// opened with defaults) infers it from the file size at RocketMQ's 1:4 slot:entry ratio, so
/// key queries still answer; nothing is written.
#[test]
fn read_only_infers_the_index_geometry() {
    let dir = tempfile::tempdir().unwrap();
    let puts = write_400(dir.path());
    let mut defaults = config();
    defaults.max_hash_slot_num = 5_000_000;
    defaults.max_index_num = 20_000_000;
    let ro = Store::open_read_only(dir.path(), defaults).unwrap();
    let q = ro.query_message("T", "k321", 32, 0, i64::MAX).unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(q.messages[0].commitlog_offset(), puts[321].commitlog_offset);
    ro.close().unwrap();
}

/// Long polling: a waiting `pull` returns as soon as dispatch of a matching message wakes
/// it (woken by arrival, not by a periodic scan). Reports the median wake latency (put start
/// to pull return) over 20 rounds; asserts only loosely (the VM may be paused).
#[test]
fn pull_wakes_on_arrival() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), threaded()).unwrap();
    let mut lat = Vec::new();
    std::thread::scope(|s| {
        for round in 0..20i64 {
            let store = &store;
            let waiter = s.spawn(move || {
                let r = store
                    .pull("P", 0, round, 32, None, None, Duration::from_secs(10))
                    .unwrap();
                (Instant::now(), r)
            });
            while store.waiting_pulls() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(5));
            let t0 = Instant::now();
            put_tagged(store, "P", "TagA", b"p");
            let (t1, r) = waiter.join().unwrap();
            assert_eq!(r.status, GetStatus::Found);
            assert_eq!(r.next_begin_offset, round + 1);
            lat.push(t1.duration_since(t0));
        }
    });
    lat.sort();
    eprintln!(
        "pull wake latency over 20 rounds: median {:?}, max {:?}",
        lat[10], lat[19]
    );
    assert!(lat[10] < Duration::from_secs(1));

    // A non-matching arrival does not end the wait; the matching one does, and the result
    // skips the filtered message.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            store
                .pull("F", 0, 0, 32, None, Some("TagB"), Duration::from_secs(10))
                .unwrap()
        });
        while store.waiting_pulls() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        put_tagged(&store, "F", "TagA", b"no");
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        put_tagged(&store, "F", "TagB", b"yes");
        let r = waiter.join().unwrap();
        assert_eq!(r.status, GetStatus::Found);
        assert_eq!(r.messages.len(), 1);
        assert_eq!(r.messages[0].body, b"yes");
        assert_eq!(r.next_begin_offset, 2);
    });

    // Timeout: an empty queue answers after the timeout with its status.
    let t0 = Instant::now();
    let r = store
        .pull("E", 0, 0, 32, None, None, Duration::from_millis(100))
        .unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(100));
    assert_eq!(r.status, GetStatus::NoMessageInQueue);
    store.close().unwrap();
}

/// User + system CPU time of a task (`/proc/self/task/<tid>/stat`, or the whole process for
/// `None`), in clock ticks (1/100 s).
fn cpu_ticks(tid: Option<&str>) -> u64 {
    let path = match tid {
        Some(t) => format!("/proc/self/task/{t}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0;
    };
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the ") " split.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// 1,000 idle waiters on 8 queues cost no measurable CPU: the CPU time of the 1,000 waiting
/// threads over one second is reported and must be (close to) zero; the whole process's is
/// reported too (it includes the store's services and any test running in parallel). Closing
/// the store wakes every waiter with `Closed`.
#[test]
fn a_thousand_idle_waiters_use_no_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), threaded()).unwrap();
    let tids = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..1000 {
            let (store, tids) = (&store, &tids);
            let h = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(s, move || {
                    let me = std::fs::read_link("/proc/thread-self").unwrap();
                    let tid = me.file_name().unwrap().to_string_lossy().into_owned();
                    tids.lock().unwrap().push(tid);
                    store.pull("Idle", i % 8, 0, 32, None, None, Duration::from_secs(60))
                })
                .unwrap();
            handles.push(h);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while store.waiting_pulls() < 1000 {
            assert!(
                Instant::now() < deadline,
                "{} waiting",
                store.waiting_pulls()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let tids = tids.lock().unwrap().clone();
        let waiters = || tids.iter().map(|t| cpu_ticks(Some(t))).sum::<u64>();
        let (w0, p0) = (waiters(), cpu_ticks(None));
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        let (w1, p1) = (waiters(), cpu_ticks(None));
        let elapsed = t0.elapsed();
        eprintln!(
            "1,000 idle waiters over {elapsed:?}: waiters {} ms CPU, whole process {} ms CPU",
            (w1 - w0) * 10,
            (p1 - p0) * 10
        );
        assert!((w1 - w0) * 10 <= 20, "waiters burned {} ms", (w1 - w0) * 10);
        assert_eq!(store.stats().waiting_pulls, 1000);
        store.close().unwrap();
        for h in handles {
            assert!(matches!(h.join().unwrap(), Err(Error::Closed)));
        }
    });
}

/// `record_sizes` (the header-only first pass that split reads plan with) walks exactly the
/// records `visit_records` decodes: same offsets, same sizes, blank file ends stepped over
/// across seven file rolls, `end` and a refusing callback respected, a start inside the range.
#[test]
fn record_sizes_walks_the_records_visit_records_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let puts = write_400(dir.path());
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    let end = store.max_commitlog_offset();

    let mut visited = Vec::new();
    store
        .visit_records(0, end, usize::MAX, true, |v| {
            visited.push((v.header.physical_offset as u64, v.total_size as u32));
            true
        })
        .unwrap();
    let expected: Vec<(u64, u32)> = puts
        .iter()
        .map(|p| (p.commitlog_offset as u64, p.wrote_bytes as u32))
        .collect();
    assert_eq!(visited, expected);

    let sizes = |from: u64, end: u64, stop_after: usize| {
        let mut out = Vec::new();
        store
            .record_sizes(from, end, |off, size| {
                if out.len() == stop_after {
                    return false;
                }
                out.push((off, size));
                true
            })
            .unwrap();
        out
    };
    assert_eq!(sizes(0, end, usize::MAX), expected);
    // From a record in the middle (in a later file), up to an end inside a record: the walk
    // stops before the record that starts at or after `end`.
    let (from, _) = expected[123];
    let (last, last_size) = expected[301];
    assert_eq!(
        sizes(from, last + u64::from(last_size) - 1, usize::MAX),
        expected[123..=301]
    );
    // A callback that refuses stops the walk there.
    assert_eq!(sizes(0, end, 10), expected[..10]);
    // Nothing past the end of the log.
    assert!(sizes(end, end + 1_000_000, usize::MAX).is_empty());
}

/// `visit_raw_records` (the undecoded walk of a second Arrow build thread) hands over exactly
/// the records `visit_records` decodes, as their stored bytes, and returns the same offset to
/// continue from: across file rolls, with `max`, `end` inside a record and a refusing callback.
#[test]
fn visit_raw_records_walks_the_records_visit_records_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let _puts = write_400(dir.path());
    let store = Store::open_read_only(dir.path(), config()).unwrap();
    let end = store.max_commitlog_offset();
    type Walked = (Vec<(u64, Vec<u8>)>, u64);
    let decoded = |from: u64, end: u64, max: usize, stop_after: usize| -> Walked {
        let mut out = Vec::new();
        let next = store
            .visit_records(from, end, max, false, |v| {
                if out.len() == stop_after {
                    return false;
                }
                out.push((v.header.physical_offset as u64, v.bytes().to_vec()));
                true
            })
            .unwrap();
        (out, next)
    };
    let raw = |from: u64, end: u64, max: usize, stop_after: usize| -> Walked {
        let mut out = Vec::new();
        let next = store
            .visit_raw_records(from, end, max, |at, rec| {
                if out.len() == stop_after {
                    return false;
                }
                out.push((at, rec.to_vec()));
                true
            })
            .unwrap();
        (out, next)
    };
    let (all, next) = raw(0, end, usize::MAX, usize::MAX);
    assert_eq!(all.len(), 400);
    assert_eq!(next, end);
    assert_eq!((all.clone(), next), decoded(0, end, usize::MAX, usize::MAX));
    for (at, rec) in &all {
        let opts = rocketstore::format::DecodeOptions::default();
        let Ok(rocketstore::format::Decoded::Message(v)) =
            rocketstore::format::decode_record(rec, &opts)
        else {
            panic!("not a record at {at}");
        };
        assert_eq!(
            rocketstore::format::body_and_properties(rec),
            Some((v.body, v.properties_raw))
        );
    }
    let (from, _) = all[123];
    let inside = all[301].0 + 1;
    for (from, end, max, stop_after) in [
        (from, inside, usize::MAX, usize::MAX),
        (0, end, 57, usize::MAX),
        (0, end, usize::MAX, 10),
        (from, end, 0, usize::MAX),
        (end, end + 1_000_000, usize::MAX, usize::MAX),
    ] {
        assert_eq!(
            raw(from, end, max, stop_after),
            decoded(from, end, max, stop_after),
            "from {from} end {end} max {max} stop after {stop_after}"
        );
    }
}

/// `query_messages_records` answers every key of a batch as `query_message_records` answers it
/// alone: unique keys, keys shared by several messages (`max_num` cutting them), the colliding
/// pair "Aa"/"BB", UNIQ_KEYs, missing and empty keys and another topic's keys, across rolled
/// index files, whole batches and batches shorter or longer than one prefetch group, and a time
/// window that holds nothing. With the index disabled it fails as the single lookup does.
#[test]
fn batched_key_queries_answer_as_single_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let mut uniq = Vec::new();
    for i in 0..3000 {
        let key = match i {
            7 => "Aa".to_string(),
            8 => "BB".to_string(),
            _ => format!("k{i}"),
        };
        let shared = format!("shared{}", i % 7);
        let topic = if i % 5 == 0 { "U" } else { "T" };
        let r = store
            .put(&PutMessage {
                topic,
                body: format!("body {i}").as_bytes(),
                keys: &[key.as_str(), shared.as_str()],
                ..Default::default()
            })
            .unwrap();
        if i % 97 == 0 {
            let m = store.view_message_by_id(&r.msg_id()).unwrap();
            uniq.push(m.uniq_key().unwrap().to_string());
        }
    }
    let index_files = std::fs::read_dir(dir.path().join("index")).unwrap().count();
    assert!(index_files > 1, "the index rolled ({index_files} files)");
    let mut keys: Vec<String> = (0..3000).step_by(3).map(|i| format!("k{i}")).collect();
    keys.extend((0..7).map(|i| format!("shared{i}")));
    keys.extend(["Aa", "BB", "missing", "", "k5"].map(String::from));
    keys.extend(uniq);
    let offsets = |hits: &[rocketstore::RecordHandle]| -> Vec<u64> {
        hits.iter().map(|h| h.offset()).collect()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for topic in ["T", "U"] {
        for (max_num, begin, end) in [
            (1, 0, i64::MAX),
            (4, 0, i64::MAX),
            (32, 0, i64::MAX),
            (32, now + 3_600_000, i64::MAX),
        ] {
            for take in [keys.len(), 16, 5, 33, 0] {
                let batch = &keys[..take];
                let got = store
                    .query_messages_records(topic, batch, max_num, begin, end)
                    .unwrap();
                assert_eq!(got.len(), batch.len());
                for (k, hits) in batch.iter().zip(&got) {
                    let alone = store
                        .query_message_records(topic, k, max_num, begin, end)
                        .unwrap();
                    assert_eq!(
                        offsets(hits),
                        offsets(&alone),
                        "{topic} {k:?} max_num {max_num} begin {begin}"
                    );
                }
            }
        }
    }
    let found = store
        .query_messages_records("T", &["k1", "Aa", "BB", "shared1"], 32, 0, i64::MAX)
        .unwrap();
    assert_eq!(
        found.iter().map(Vec::len).collect::<Vec<_>>(),
        [1, 1, 1, 32],
        "the collision pair is told apart; shared1 (343 messages in T) is cut at max_num"
    );
    store.close().unwrap();

    let off = tempfile::tempdir().unwrap();
    let mut c = config();
    c.message_index_enable = false;
    let store = Store::open(off.path(), c).unwrap();
    assert!(matches!(
        store.query_messages_records("T", &["k1"], 4, 0, i64::MAX),
        Err(Error::InvalidArgument { .. })
    ));
    store.close().unwrap();
}
