//! Reads of a store of 262,144 messages with 1 KiB bodies (one topic, 4 queues, a tag and a
//! unique key each), written once and fully dispatched before measuring:
//!
//! * `read_cq/get_message/{32,1024}`: `Store::get_message` through the consume queue, batches of
//!   32 (RocketMQ's in-memory transfer limit, the default) and 1,024 messages (limits raised).
//!   Every message is copied out of the mapping and its body CRC checked (the read path decodes
//!   with `check_crc`). Throughput in messages.
//! * `index/query_message`: `Store::query_message` of one key (hash slot, index chain, commit log
//!   record, owned decode), keys in a scrambled order. Throughput in lookups.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rocketstore::{GetStatus, PutMessage, Store};
use rocketstore_benches::{bench_config, bench_root, body, report, wait_dispatched};

const N: usize = 262_144;
const QUEUES: usize = 4;
const TOPIC: &str = "ReadTopic";

fn setup(dir: &std::path::Path) -> Store {
    let mut cfg = bench_config(128 * 1024 * 1024);
    cfg.max_transfer_count_on_message_in_memory = 1024;
    cfg.max_transfer_bytes_on_message_in_memory = 4 << 20;
    let store = Store::open(dir, cfg).unwrap();
    let body = body(1024);
    let keys: Vec<String> = (0..N).map(|i| format!("key-{i}")).collect();
    let key_refs: Vec<[&str; 1]> = keys.iter().map(|k| [k.as_str()]).collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(4096) {
        let msgs: Vec<PutMessage<'_>> = chunk
            .iter()
            .map(|&i| PutMessage {
                topic: TOPIC,
                body: &body,
                queue_id: (i % QUEUES) as i32,
                tags: Some("TagA"),
                keys: &key_refs[i],
                ..Default::default()
            })
            .collect();
        store.put_batch(&msgs).unwrap();
    }
    wait_dispatched(&store);
    report(
        "read setup",
        &format!(
            "{N} messages, {} MB of commit log, dispatched",
            store.max_commitlog_offset() / 1_000_000
        ),
        &format!(
            "\"messages\": {N}, \"bytes\": {}",
            store.max_commitlog_offset()
        ),
    );
    store
}

fn read(c: &mut Criterion) {
    let dir = bench_root("read");
    let store = setup(dir.path());
    let per_queue = (N / QUEUES) as i64;

    let mut g = c.benchmark_group("read_cq");
    for batch in [32usize, 1024] {
        g.throughput(Throughput::Elements(batch as u64));
        let mut q = 0i32;
        let mut off = 0i64;
        g.bench_with_input(
            BenchmarkId::new("get_message", batch),
            &batch,
            |b, &batch| {
                b.iter(|| {
                    if off + batch as i64 > per_queue {
                        off = 0;
                        q = (q + 1) % QUEUES as i32;
                    }
                    let r = store.get_message(TOPIC, q, off, batch, None, None).unwrap();
                    debug_assert_eq!(r.status, GetStatus::Found);
                    debug_assert_eq!(r.messages.len(), batch);
                    off = r.next_begin_offset;
                    black_box(r.messages);
                });
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("index");
    g.throughput(Throughput::Elements(1));
    let keys: Vec<String> = (0..N).map(|i| format!("key-{}", (i * 7919) % N)).collect();
    let mut i = 0usize;
    g.bench_function("query_message", |b| {
        b.iter(|| {
            let k = &keys[i % N];
            i += 1;
            let r = store.query_message(TOPIC, k, 1, 0, i64::MAX).unwrap();
            debug_assert_eq!(r.messages.len(), 1);
            black_box(r.messages);
        });
    });
    g.finish();
    store.close().unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = read
}
criterion_main!(benches);
