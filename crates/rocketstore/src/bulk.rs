//! Column kernels for bulk writers and verifiers (the Spark data source): the body digest the
//! `_SUCCESS` manifest records, the queue each message of a batch goes to, the producer's
//! body compression of a batch ([`compress_messages`]), and the hash of a message the verify
//! job compares with its source ([`message_hash`], Spark SQL's `xxhash64`).
//!
//! They take values as borrowed slices (a binding passes the rows of an Arrow column without
//! copying them) and run without the interpreter.
//!
//! # Body digest
//!
//! The digest of a set of bodies is order-independent so a verifier can recompute it with a
//! plain aggregation: the sum over the bodies of the first 60 bits of `SHA-256(body)` read as an
//! unsigned big-endian integer (the first 15 hex digits of Spark SQL's `sha2(body, 256)`):
//! `sum(cast(conv(substr(sha2(body, 256), 1, 15), 16, 10) as decimal(38, 0)))`. Unlike an XOR,
//! a sum tells a duplicated message from a missing one. A `u128` holds the sum of 2^68 bodies.
//!
//! ```
//! use rocketstore::bulk::{body_digest, digest_of};
//! let d = body_digest([Some(&b"a"[..]), Some(&b"b"[..])]);
//! assert_eq!(d, u128::from(digest_of(b"a")) + u128::from(digest_of(b"b")));
//! // sha256("a") = ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb
//! assert_eq!(digest_of(b"a"), 0x0ca9_7811_2ca1_bbdc);
//! ```
//!
//! # Queue selection
//!
//! [`QueueChooser`] fills the queue of a message that has none: with [`QueueSelector::Hash`], a
//! message with keys goes to `crc32(keys joined by a space) % queue_nums` (zlib's CRC-32), so
//! equal keys share a queue; every other message (and every message with
//! [`QueueSelector::RoundRobin`]) takes the next queue in turn.

use sha2::{Digest, Sha256};

use crate::compression::{BodyCodec, CodecError, CompressOptions};
use crate::message::PutMessage;

/// The digest of one body: the first 60 bits of its SHA-256, as an unsigned integer.
pub fn digest_of(body: &[u8]) -> u64 {
    first_60_bits(&Sha256::digest(body))
}

/// The first 60 bits of a SHA-256 as an unsigned integer (the first 15 hex digits).
fn first_60_bits(hash: &[u8]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(first) >> 4
}

/// A SHA-256 as 64 lowercase hex digits.
fn hex_of(hash: &[u8]) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in hash.iter().take(32).enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    out
}

/// The SHA-256 of `body` as 64 lowercase hex digits (Spark SQL's `sha2(body, 256)`).
pub fn sha256_hex(body: &[u8]) -> [u8; 64] {
    hex_of(&Sha256::digest(body))
}

/// The digest of a set of bodies (see the module docs); `None` (a null body) adds nothing.
pub fn body_digest<'a>(bodies: impl IntoIterator<Item = Option<&'a [u8]>>) -> u128 {
    bodies
        .into_iter()
        .flatten()
        .map(|b| u128::from(digest_of(b)))
        .sum()
}

/// Spark SQL's seed of `xxhash64`.
const SPARK_XXHASH64_SEED: u64 = 42;

/// The hash of one message as the verifier's comparison with a source sees it: Spark SQL's
/// `xxhash64(topic, queue_id, keys, tags, body)` of the message as an unsigned integer.
/// `queue_id` is hashed only when given (as Spark hashes an `int`: its four little-endian
/// bytes); an absent or empty key list or tag is skipped, as Spark skips a null. Each value
/// is XXH64 of its bytes seeded with the hash so far, starting from Spark's seed 42.
///
/// Summing it per queue on both sides (the stores' records here, the source rows by one Spark
/// aggregation: `sum(shiftrightunsigned(h, 32)) * 2^32 + sum(h & 0xFFFFFFFF)`, in two `long`
/// sums) compares the stored messages with the source, with multiplicity, without a join.
///
/// ```
/// use rocketstore::bulk::message_hash;
/// // Spark 4: SELECT xxhash64('T', 3, 'k1 k2', 'TagA', X'68656c6c6f')
/// assert_eq!(message_hash(b"T", Some(3), b"k1 k2", b"TagA", b"hello"), 7_436_775_890_466_507_890);
/// ```
pub fn message_hash(
    topic: &[u8],
    queue_id: Option<i32>,
    keys: &[u8],
    tags: &[u8],
    body: &[u8],
) -> u64 {
    use twox_hash::XxHash64;
    let mut h = XxHash64::oneshot(SPARK_XXHASH64_SEED, topic);
    if let Some(q) = queue_id {
        h = XxHash64::oneshot(h, &q.to_le_bytes());
    }
    for value in [keys, tags] {
        if !value.is_empty() {
            h = XxHash64::oneshot(h, value);
        }
    }
    XxHash64::oneshot(h, body)
}

/// How [`QueueChooser`] picks the queue of a message without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueSelector {
    /// By the CRC-32 of the message's keys (round robin for a message without keys).
    Hash,
    /// The next queue in turn.
    RoundRobin,
}

/// Picks queues for the messages of one writer (see the module docs).
///
/// ```
/// use rocketstore::bulk::{QueueChooser, QueueSelector};
/// let mut q = QueueChooser::new(QueueSelector::Hash, 4, 1);
/// assert_eq!(q.choose(Some(3), None), 3); // a given queue is kept
/// assert_eq!(q.choose(None, None), 2); // round robin: counter 1 was used above
/// let k = q.choose(None, Some(&mut [&b"k1"[..], &b"k2"[..]].into_iter()));
/// assert_eq!(k as u32, crc32fast::hash(b"k1 k2") % 4);
/// ```
#[derive(Debug, Clone)]
pub struct QueueChooser {
    selector: QueueSelector,
    queue_nums: u32,
    counter: u64,
}

impl QueueChooser {
    /// A chooser over `queue_nums` queues (at least 1) whose round robin starts at `counter`.
    pub fn new(selector: QueueSelector, queue_nums: u32, counter: u64) -> Self {
        Self {
            selector,
            queue_nums: queue_nums.max(1),
            counter,
        }
    }

    /// The round robin counter (the next message without keys takes `counter % queue_nums`).
    pub fn counter(&self) -> u64 {
        self.counter
    }

    /// The queue of one message: `given` if set, else by its keys (the parts of its key list,
    /// joined by a space; `None` for no keys) or round robin. Every call advances the round
    /// robin counter.
    pub fn choose(
        &mut self,
        given: Option<i32>,
        keys: Option<&mut dyn Iterator<Item = &[u8]>>,
    ) -> i32 {
        let robin = (self.counter % u64::from(self.queue_nums)) as i32;
        self.counter = self.counter.wrapping_add(1);
        if let Some(q) = given {
            return q;
        }
        if self.selector == QueueSelector::Hash {
            if let Some(parts) = keys {
                let mut h = crc32fast::Hasher::new();
                let mut len = 0usize;
                for (i, part) in parts.enumerate() {
                    if i > 0 {
                        h.update(b" ");
                        len += 1;
                    }
                    h.update(part);
                    len += part.len();
                }
                if len > 0 {
                    return (h.finalize() % self.queue_nums) as i32;
                }
            }
        }
        robin
    }
}

/// Compresses, as a RocketMQ producer does, the body of every message of at least `opts.over`
/// bytes that has no codec yet: the compressed bodies are written to `arena` (cleared first)
/// and each such message is pointed at its compressed body, with `compression` set. A body
/// whose compressed form is not smaller is left as it is.
///
/// ```
/// use rocketstore::bulk::compress_messages;
/// use rocketstore::compression::{BodyCodec, Compression, CompressOptions};
/// use rocketstore::PutMessage;
///
/// let body = b"abcabcabc".repeat(1000);
/// let mut msgs = vec![PutMessage { topic: "T", body: &body, ..PutMessage::default() }];
/// let (mut codec, mut arena) = (BodyCodec::default(), Vec::new());
/// let opts = CompressOptions { over: 0, ..CompressOptions::new(Compression::Lz4) };
/// compress_messages(&opts, &mut codec, &mut msgs, &mut arena).unwrap();
/// assert_eq!(msgs[0].compression, Some(Compression::Lz4));
/// assert!(msgs[0].body.len() < body.len());
/// ```
///
/// # Errors
/// [`CodecError::Level`] for a level outside the codec's range (nothing is changed).
pub fn compress_messages<'a>(
    opts: &CompressOptions,
    codec: &mut BodyCodec,
    msgs: &mut [PutMessage<'a>],
    arena: &'a mut Vec<u8>,
) -> Result<(), CodecError> {
    opts.check()?;
    arena.clear();
    let mut one = Vec::new();
    let mut ranges = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        if m.compression.is_some() || m.body.len() < opts.over {
            continue;
        }
        codec.compress(opts.codec, opts.level, m.body, &mut one)?;
        if one.len() < m.body.len() {
            let start = arena.len();
            arena.extend_from_slice(&one);
            ranges.push((i, start..arena.len()));
        }
    }
    let arena: &'a [u8] = arena;
    for (i, range) in ranges {
        if let (Some(m), Some(body)) = (msgs.get_mut(i), arena.get(range)) {
            m.body = body;
            m.compression = Some(opts.codec);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_hash_is_spark_xxhash64() {
        // Spark 4.0 `xxhash64(topic, queue_id, keys, tags, body)` and, with a null queue id
        // (skipped like a missing one), `xxhash64(topic, keys, tags, body)`, as unsigned values.
        let body_768: Vec<u8> = (0..=255u8).cycle().take(768).collect();
        let unicode_body = "正文 body of 33 bytes..........".as_bytes();
        /// topic, queue id, keys, tags, body; Spark's hash with the queue id and without.
        type Case<'a> = (
            &'a [u8],
            Option<i32>,
            &'a [u8],
            &'a [u8],
            &'a [u8],
            u64,
            u64,
        );
        let cases: [Case<'_>; 4] = [
            (
                b"T",
                Some(3),
                b"k1 k2",
                b"TagA",
                b"hello",
                7_436_775_890_466_507_890,
                2_544_797_247_850_988_349,
            ),
            (
                b"TopicTest",
                Some(0),
                b"",
                b"",
                b"",
                7_556_694_928_511_022_632,
                6_112_275_802_719_892_689,
            ),
            (
                b"orders",
                Some(-1),
                b"ORD-1",
                b"",
                &body_768,
                15_415_228_783_424_265_131,
                15_874_643_421_065_121_943,
            ),
            (
                "主题".as_bytes(),
                Some(7),
                "键 k".as_bytes(),
                "标签".as_bytes(),
                unicode_body,
                4_289_134_510_387_062_003,
                9_806_538_660_723_048_065,
            ),
        ];
        for (topic, queue, keys, tags, body, with_queue, without) in cases {
            assert_eq!(message_hash(topic, queue, keys, tags, body), with_queue);
            assert_eq!(message_hash(topic, None, keys, tags, body), without);
        }
        assert_eq!(
            message_hash(b"T", None, b"k", b"TagA", b"hello"),
            9_932_338_809_724_820_283
        );
    }

    #[test]
    fn digest_matches_sha256_prefix() {
        // sha256("") = e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
        assert_eq!(digest_of(b""), 0x0e3b_0c44_298f_c1c1);
        assert_eq!(body_digest([None, Some(&b""[..])]), 0x0e3b_0c44_298f_c1c1);
        assert_eq!(body_digest(std::iter::empty()), 0);
        assert_eq!(
            &sha256_hex(b"")[..],
            b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn round_robin_advances_per_message() {
        let mut q = QueueChooser::new(QueueSelector::RoundRobin, 3, 0);
        let got: Vec<i32> = (0..5)
            .map(|_| q.choose(None, Some(&mut [&b"k"[..]].into_iter())))
            .collect();
        assert_eq!(got, [0, 1, 2, 0, 1]);
        assert_eq!(q.counter(), 5);
    }

    #[test]
    fn empty_keys_go_round_robin() {
        let mut q = QueueChooser::new(QueueSelector::Hash, 8, 5);
        assert_eq!(q.choose(None, Some(&mut [&b""[..]].into_iter())), 5);
        assert_eq!(q.choose(None, Some(&mut std::iter::empty())), 6);
        let k = q.choose(None, Some(&mut [&b"order-1"[..]].into_iter()));
        assert_eq!(k as u32, crc32fast::hash(b"order-1") % 8);
    }
}
