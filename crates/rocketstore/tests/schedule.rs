//! Delay levels at store level (spec §12.1, §16 vector 13) and the schedule service (RocketMQ's
//! `ScheduleMessageService`): a delayed put lands in `SCHEDULE_TOPIC_XXXX` with the deliver time
//! as its tagsCode, and is re-put to its real topic and queue once due; progress is kept in
//! `config/delayOffset.json` across reopen, so nothing is delivered twice.
//!
//! The clock is injected with `Store::deliver_delayed_messages(now_ms)`; one test runs the
//! `rs-schedule` thread against the wall clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rocketstore::format::properties::java_hashmap_order;
use rocketstore::format::{
    decode_record, property, tags_code, CqUnit, DecodeOptions, Decoded, SCHEDULE_TOPIC,
};
use rocketstore::{GetStatus, PutMessage, Store, StoreConfig, StoredMessage};

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = 1 << 20;
    c.mapped_file_size_consume_queue = 300 * 20;
    c.max_hash_slot_num = 1000;
    c.max_index_num = 4000;
    c.background_threads = false;
    c
}

/// The consume queue unit at `offset`, read from the file (not through the engine).
fn cq_unit(root: &Path, topic: &str, queue_id: i32, offset: u64) -> CqUnit {
    let pos = offset * 20;
    let file_size = 300 * 20;
    let name = format!("{:020}", pos / file_size * file_size);
    let bytes = std::fs::read(
        root.join("consumequeue")
            .join(topic)
            .join(queue_id.to_string())
            .join(name),
    )
    .unwrap();
    let at = (pos % file_size) as usize;
    CqUnit::decode(&bytes[at..at + 20]).unwrap()
}

fn all_of(store: &Store, topic: &str, queue_id: i32) -> Vec<StoredMessage> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = store
            .get_message(topic, queue_id, offset, 32, None, None)
            .unwrap();
        if r.status != GetStatus::Found {
            return out;
        }
        offset = r.next_begin_offset;
        out.extend(r.messages);
    }
}

/// Raw properties bytes of the record at `phy`, decoded independently of the engine.
fn raw_properties(store: &Store, phy: i64) -> Vec<u8> {
    let bytes = store.select_one_message_by_offset(phy as u64).unwrap();
    match decode_record(&bytes, &DecodeOptions::default()).unwrap() {
        Decoded::Message(v) => v.properties_raw.to_vec(),
        Decoded::Blank { .. } => panic!("blank record at {phy}"),
    }
}

/// Spec §16 vector 13 through the store: a put with `DELAY=3` is stored in
/// `SCHEDULE_TOPIC_XXXX`, queue 2, with `REAL_TOPIC`/`REAL_QID`/`DELAY`, and its consume queue
/// tagsCode is STORETIMESTAMP + 10 s; level 20 is clamped to 18 (2 h, queue 17).
#[test]
fn vector_13_delay_tags_code_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let r = store
        .put(&PutMessage {
            topic: "TopicTest",
            body: b"hello",
            queue_id: 5,
            tags: Some("TagA"),
            delay_level: 3,
            ..Default::default()
        })
        .unwrap();
    let m = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    assert_eq!(m.topic, SCHEDULE_TOPIC);
    assert_eq!(m.queue_id, 2);
    assert_eq!(m.properties.get(property::DELAY), Some("3"));
    assert_eq!(m.properties.get(property::REAL_TOPIC), Some("TopicTest"));
    assert_eq!(m.properties.get(property::REAL_QID), Some("5"));
    let u = cq_unit(dir.path(), SCHEDULE_TOPIC, 2, 0);
    assert_eq!(u.phy_offset, r.commitlog_offset);
    assert_eq!(u.size, r.wrote_bytes);
    assert_eq!(u.tags_code, m.store_timestamp + 10_000);

    let r = store
        .put(&PutMessage {
            topic: "TopicTest",
            body: b"later",
            delay_level: 20,
            ..Default::default()
        })
        .unwrap();
    let m = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id), (SCHEDULE_TOPIC, 17));
    assert_eq!(m.properties.get(property::DELAY), Some("18"));
    let u = cq_unit(dir.path(), SCHEDULE_TOPIC, 17, 0);
    assert_eq!(u.tags_code, m.store_timestamp + 2 * 3_600_000);
    // Nothing reached the real topic.
    assert_eq!(store.max_offset_in_queue("TopicTest", 5), 0);
    store.close().unwrap();
}

/// A due message is re-put to REAL_TOPIC/REAL_QID as RocketMQ's `messageTimeUp` does: same
/// body, flag, born time and host, reconsume times, UNIQ_KEY, TAGS and KEYS; the properties
/// string is the decoded map in Java `HashMap(128)` order taken before DELAY/REAL_TOPIC/REAL_QID
/// are cleared (so it keeps them); the tagsCode comes from TAGS again; the index finds it under
/// `<real topic>#<key>`. Not due one millisecond earlier.
#[test]
fn a_due_message_is_redelivered_to_its_real_topic() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let r = store
        .put(&PutMessage {
            topic: "Orders",
            body: b"pay me later",
            queue_id: 3,
            tags: Some("TagA"),
            keys: &["order-1", "customer-9"],
            properties: &[("region", "eu")],
            flag: 7,
            reconsume_times: 2,
            born_timestamp: Some(1_700_000_000_000),
            delay_level: 1,
            ..Default::default()
        })
        .unwrap();
    let original = store
        .look_message_by_offset(r.commitlog_offset as u64)
        .unwrap();
    let due = original.store_timestamp + 1000;

    assert_eq!(store.deliver_delayed_messages(due - 1).unwrap(), 0);
    assert_eq!(
        store
            .get_message("Orders", 3, 0, 32, None, None)
            .unwrap()
            .status,
        GetStatus::NoMessageInQueue
    );
    assert_eq!(store.deliver_delayed_messages(due).unwrap(), 1);
    // Idempotent: the progress moved past it.
    assert_eq!(store.deliver_delayed_messages(due + 60_000).unwrap(), 0);

    let got = all_of(&store, "Orders", 3);
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(
        (m.topic.as_str(), m.queue_id, m.queue_offset),
        ("Orders", 3, 0)
    );
    assert_eq!(m.body, original.body);
    assert_eq!(m.flag, 7);
    assert_eq!(m.reconsume_times, 2);
    assert_eq!(m.born_timestamp, 1_700_000_000_000);
    assert_eq!(m.born_host, original.born_host);
    assert_eq!(m.store_host, original.store_host);
    assert_eq!(m.sys_flag, original.sys_flag);
    assert_eq!(m.prepared_transaction_offset, 0);
    assert!(m.store_timestamp >= original.store_timestamp);
    assert!(m.commitlog_offset() > original.commitlog_offset());
    assert_eq!(m.uniq_key(), original.uniq_key());
    assert_eq!(m.tags(), Some("TagA"));
    assert_eq!(m.keys(), vec!["order-1", "customer-9"]);
    assert_eq!(m.properties.get("region"), Some("eu"));
    // Spec §12.1 quirk / vector 13: the stored bytes still hold DELAY, REAL_TOPIC, REAL_QID.
    assert_eq!(m.properties.get(property::DELAY), Some("1"));
    assert_eq!(m.properties.get(property::REAL_TOPIC), Some("Orders"));
    assert_eq!(m.properties.get(property::REAL_QID), Some("3"));
    assert!(m.crc_ok());

    // Byte layout: HashMap(128) order of the original map without the old __CRC32#, then a
    // fresh (valid) __CRC32# appended by the store.
    let pairs: Vec<(&str, &str)> = original
        .properties
        .iter()
        .filter(|(k, _)| *k != property::CRC32)
        .collect();
    let names: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
    let mut expect = Vec::new();
    for i in java_hashmap_order(&names, 128) {
        expect.extend_from_slice(pairs[i].0.as_bytes());
        expect.push(1);
        expect.extend_from_slice(pairs[i].1.as_bytes());
        expect.push(2);
    }
    let raw = raw_properties(&store, m.commitlog_offset());
    assert_eq!(&raw[..expect.len()], &expect[..]);
    assert_eq!(&raw[expect.len()..expect.len() + 9], b"__CRC32#\x01");
    assert_eq!(raw.len(), expect.len() + 20);

    let u = cq_unit(dir.path(), "Orders", 3, 0);
    assert_eq!(u.tags_code, tags_code(Some("TagA")));
    assert_eq!(u.phy_offset, m.commitlog_offset());

    let q = store
        .query_message("Orders", "customer-9", 32, 0, i64::MAX)
        .unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(q.messages[0].commitlog_offset(), m.commitlog_offset());
    let q = store
        .query_message(SCHEDULE_TOPIC, "order-1", 32, 0, i64::MAX)
        .unwrap();
    assert_eq!(q.messages.len(), 1);
    assert_eq!(
        q.messages[0].commitlog_offset(),
        original.commitlog_offset()
    );

    let s = store.stats();
    assert_eq!(s.schedule_delivered, 1);
    assert_eq!(s.schedule_progress, vec![(1, 1, 1)]);
    store.close().unwrap();
}

/// Only the due prefix of a level is delivered, in queue order; levels are independent.
#[test]
fn levels_advance_independently_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let mut t0 = 0;
    for (i, level) in [1, 2, 1, 2, 1].into_iter().enumerate() {
        let body = format!("m{i}");
        let r = store
            .put(&PutMessage {
                topic: "T",
                body: body.as_bytes(),
                delay_level: level,
                ..Default::default()
            })
            .unwrap();
        if i == 0 {
            t0 = r.store_timestamp;
        }
    }
    // Level 1 = 1 s, level 2 = 5 s (defaults). At t0 + 1 s only level 1 is (surely) due.
    let latest = store.get_message_store_timestamp(SCHEDULE_TOPIC, 0, 2);
    let n = store.deliver_delayed_messages(latest + 1000).unwrap();
    assert_eq!(n, 3);
    let bodies: Vec<Vec<u8>> = all_of(&store, "T", 0).into_iter().map(|m| m.body).collect();
    assert_eq!(bodies, vec![b"m0".to_vec(), b"m2".to_vec(), b"m4".to_vec()]);
    assert_eq!(store.deliver_delayed_messages(t0 + 4000).unwrap(), 0);
    assert_eq!(store.deliver_delayed_messages(i64::MAX / 2).unwrap(), 2);
    assert_eq!(all_of(&store, "T", 0).len(), 5);
    store.close().unwrap();
}

/// Progress is saved to `config/delayOffset.json` at close in RocketMQ's shape (fastjson,
/// unquoted integer keys), loaded at open, and nothing is delivered twice after a reopen.
#[test]
fn progress_survives_reopen_without_double_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("config").join("delayOffset.json");
    let (t_a, t_b);
    {
        let store = Store::open(dir.path(), config()).unwrap();
        t_a = store
            .put(&PutMessage {
                topic: "T",
                body: b"a",
                delay_level: 1,
                ..Default::default()
            })
            .unwrap()
            .store_timestamp;
        t_b = store
            .put(&PutMessage {
                topic: "T",
                body: b"b",
                delay_level: 2,
                ..Default::default()
            })
            .unwrap()
            .store_timestamp;
        assert_eq!(store.deliver_delayed_messages(t_a + 1000).unwrap(), 1);
        assert!(!json.exists(), "saved periodically, on flush and at close");
        store.close().unwrap();
    }
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(text.contains("\"offsetTable\":{1:1,2:0"), "{text}");
    assert!(text.contains("\"dataVersion\":{"), "{text}");
    check_fastjson_shape(&text);
    {
        let store = Store::open(dir.path(), config()).unwrap();
        assert_eq!(store.stats().schedule_progress, vec![(1, 1, 1), (2, 0, 1)]);
        assert_eq!(store.deliver_delayed_messages(t_b + 60_000).unwrap(), 1);
        assert_eq!(store.deliver_delayed_messages(t_b + 120_000).unwrap(), 0);
        let bodies: Vec<Vec<u8>> = all_of(&store, "T", 0).into_iter().map(|m| m.body).collect();
        assert_eq!(bodies, vec![b"a".to_vec(), b"b".to_vec()]);
        // `flush` saves it too (the previous content goes to .bak first).
        store.flush().unwrap();
        let text = std::fs::read_to_string(&json).unwrap();
        assert!(text.contains("\"offsetTable\":{1:1,2:1"), "{text}");
        assert!(dir.path().join("config/delayOffset.json.bak").exists());
        store.close().unwrap();
    }
    {
        let store = Store::open(dir.path(), config()).unwrap();
        assert_eq!(store.deliver_delayed_messages(i64::MAX / 2).unwrap(), 0);
        assert_eq!(all_of(&store, "T", 0).len(), 2);
        store.close().unwrap();
    }
}

/// A `delayOffset.json` written by a broker (4.x shape, compact, no dataVersion) is honoured:
/// the level's first message counts as delivered already. An offset beyond the queue's end is
/// clamped to it (RocketMQ `correctDelayOffset`).
#[test]
fn a_brokers_delay_offset_file_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), config()).unwrap();
        for body in [b"x", b"y"] {
            store
                .put(&PutMessage {
                    topic: "T",
                    body,
                    delay_level: 1,
                    ..Default::default()
                })
                .unwrap();
        }
        store
            .put(&PutMessage {
                topic: "T",
                body: b"z",
                delay_level: 3,
                ..Default::default()
            })
            .unwrap();
        store.close().unwrap();
    }
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/delayOffset.json"),
        b"{\"offsetTable\":{1:1,3:99}}",
    )
    .unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    assert_eq!(store.deliver_delayed_messages(i64::MAX / 2).unwrap(), 1);
    let bodies: Vec<Vec<u8>> = all_of(&store, "T", 0).into_iter().map(|m| m.body).collect();
    assert_eq!(bodies, vec![b"y".to_vec()]);
    assert_eq!(store.stats().schedule_progress, vec![(1, 2, 2), (3, 1, 1)]);
    store.close().unwrap();
}

/// Messages that cannot be re-delivered are skipped, as RocketMQ does: one whose real topic is
/// the transaction half topic.
#[test]
fn half_topic_targets_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    for topic in ["RMQ_SYS_TRANS_HALF_TOPIC", "T"] {
        store
            .put(&PutMessage {
                topic,
                body: b"b",
                delay_level: 1,
                ..Default::default()
            })
            .unwrap();
    }
    assert_eq!(store.deliver_delayed_messages(i64::MAX / 2).unwrap(), 1);
    assert_eq!(store.max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0), 0);
    assert_eq!(store.max_offset_in_queue("T", 0), 1);
    assert_eq!(store.stats().schedule_progress, vec![(1, 2, 2)]);
    store.close().unwrap();
}

/// With `schedule_service_enable` the `rs-schedule` thread delivers on the wall clock (level
/// 1 = 1 s here) and saves its progress at close.
#[test]
fn the_schedule_thread_delivers_on_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.background_threads = true;
    c.schedule_service_enable = true;
    let store = Store::open(dir.path(), c.clone()).unwrap();
    let put_at = Instant::now();
    store
        .put(&PutMessage {
            topic: "T",
            body: b"tick",
            delay_level: 1,
            ..Default::default()
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        let r = store.get_message("T", 0, 0, 32, None, None).unwrap();
        if r.status == GetStatus::Found {
            break r.messages;
        }
        assert!(Instant::now() < deadline, "not delivered in 20 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = put_at.elapsed();
    eprintln!("delay level 1 (1 s) delivered after {waited:?}");
    assert_eq!(got[0].body, b"tick");
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    store.close().unwrap();
    let text = std::fs::read_to_string(dir.path().join("config/delayOffset.json")).unwrap();
    assert!(text.contains("\"offsetTable\":{1:1"), "{text}");
    // Reopened with the thread: nothing is delivered again.
    let store = Store::open(dir.path(), c).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(store.max_offset_in_queue("T", 0), 1);
    store.close().unwrap();
}

/// A minimal check that `text` is what fastjson's pretty printer writes for
/// `DelayOffsetSerializeWrapper`: an object with `dataVersion` and `offsetTable`, integer
/// keys unquoted, integer values, balanced braces.
fn check_fastjson_shape(text: &str) {
    let t = text.trim();
    assert!(t.starts_with('{') && t.ends_with('}'), "{t}");
    assert_eq!(t.matches('{').count(), t.matches('}').count());
    let table = &t[t.find("\"offsetTable\":{").unwrap() + 15..];
    let table = &table[..table.find('}').unwrap()];
    for pair in table.split(',') {
        let (k, v) = pair.trim().split_once(':').unwrap();
        k.parse::<i32>().unwrap();
        v.trim().parse::<i64>().unwrap();
    }
    for field in ["\"counter\":", "\"stateVersion\":", "\"timestamp\":"] {
        assert!(t.contains(field), "{t}");
    }
}
