//! Record codecs of `rocketstore-format` (no I/O), per record, for 100 B, 1 KiB and 4 KiB bodies:
//!
//! * `encode/{size}`: body CRC + `encode_record` into a reused buffer + `prop_crc::seal` (what
//!   `CommitLog::append` does per message, minus the queue offset and file bookkeeping).
//! * `decode/{size}`: `decode_record` with the body CRC checked (recovery, `verify_crc` reads).
//! * `decode_no_crc/{size}`: `decode_record` without the CRC (dispatch).
//! * `decode_owned/{size}`: decode + owned copy (`StoredMessage::from_view`: topic, body,
//!   parsed properties), what a read returns per message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rocketstore::StoredMessage;
use rocketstore_benches::{body, body_sizes};
use rocketstore_format::{
    crc32_masked, decode_record, encode_properties, encode_record, prop_crc, record_len,
    DecodeOptions, Decoded, MessageVersion, RecordHeader,
};

fn header() -> RecordHeader {
    RecordHeader {
        queue_id: 3,
        queue_offset: 123_456,
        physical_offset: 987_654_321,
        born_timestamp: 1_700_000_000_000,
        born_host: "10.0.0.2:40000".parse().unwrap(),
        store_timestamp: 1_700_000_000_123,
        store_host: "10.0.0.1:10911".parse().unwrap(),
        ..RecordHeader::default()
    }
}

fn props() -> Vec<u8> {
    let mut p = Vec::new();
    encode_properties(
        [
            ("UNIQ_KEY", "0A0000020001000000000000000000000001"),
            ("TAGS", "TagA"),
            ("KEYS", "order-123456"),
        ],
        &mut p,
    );
    prop_crc::append_placeholder(&mut p);
    p
}

fn codec(c: &mut Criterion) {
    let topic = "BenchTopic";
    let hdr = header();
    let props = props();
    let v = MessageVersion::for_topic(topic.len());
    let mut g = c.benchmark_group("codec");
    for size in body_sizes() {
        let body = body(size);
        let len = record_len(false, false, v, body.len(), topic.len(), props.len());
        let mut buf = vec![0u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("encode", size), &size, |b, _| {
            b.iter(|| {
                let crc = crc32_masked(black_box(&body));
                encode_record(&mut buf, &hdr, v, &body, crc, topic, &props).unwrap();
                prop_crc::seal(&mut buf);
                black_box(&buf);
            });
        });
        let with_crc = DecodeOptions::default();
        let no_crc = DecodeOptions {
            check_crc: false,
            ..DecodeOptions::default()
        };
        for (name, opts) in [("decode", with_crc), ("decode_no_crc", no_crc)] {
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| match decode_record(black_box(&buf), &opts).unwrap() {
                    Decoded::Message(m) => black_box(m.body.len()),
                    Decoded::Blank { .. } => unreachable!(),
                });
            });
        }
        g.bench_with_input(BenchmarkId::new("decode_owned", size), &size, |b, _| {
            b.iter(
                || match decode_record(black_box(&buf), &with_crc).unwrap() {
                    Decoded::Message(m) => black_box(StoredMessage::from_view(&m)),
                    Decoded::Blank { .. } => unreachable!(),
                },
            );
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = codec
}
criterion_main!(benches);
