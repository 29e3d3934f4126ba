//! Pure codecs for Apache RocketMQ's on-disk store format: commit-log records, consume-queue
//! units, index files and the checkpoint, plus the hashes, names and ids derived from them.
//! Byte-compatible with RocketMQ 4.9.x and 5.x (spec: `shared/spec/rocketmq-store-format.md`).
//!
//! This crate does no I/O: it turns bytes into values and values into bytes. The engine
//! (`rocketstore`) owns files, mappings and policy.
//!
//! # Byte order
//!
//! Every multi-byte integer on disk is **big-endian** (Java `ByteBuffer` order), signed two's
//! complement unless stated otherwise. The crate denies the clippy lints for little-endian and
//! host-endian conversions, so no other byte order can slip in.
//!
//! # Invariants
//!
//! * **Decoders never panic** on any input, of any length or content: [`decode_record`],
//!   [`CqUnit::decode`], [`IndexHeader::decode`], [`IndexEntry::decode`], [`index::walk_chain`],
//!   [`Checkpoint::decode`], [`parse_properties`], [`parse_file_name`], the message-id parsers.
//!   They return a typed error (or `None`) instead. This is fuzzed (`fuzz/`) and property-tested.
//! * **Decoders never read out of bounds**: all reads go through checked `get`-based helpers, and
//!   library code denies `clippy::indexing_slicing`.
//! * **Every length is checked before it is used**: TOTALSIZE against the buffer and the
//!   smallest possible record, BODYLENGTH / TOPICLENGTH / PROPERTIESLENGTH against TOTALSIZE, and
//!   the recomputed length against TOTALSIZE ([`decode_record`] documents the exact order).
//!   No allocation is sized from an untrusted length.
//! * Encoders write exactly the documented layout and refuse values the layout cannot hold
//!   ([`EncodeError`]); `decode(encode(x)) == x` for every accepted `x`.
//! * Java semantics are reproduced where they affect bytes: `String.hashCode` over UTF-16,
//!   CRC-32 masked with `0x7FFFFFFF`, last-wins property parsing, `HashMap` iteration order.
//!
//! # Example
//!
//! ```
//! use rocketstore_format::{
//!     decode_record, encode_properties, record::encode_record_to_vec, DecodeOptions, Decoded,
//!     RecordHeader,
//! };
//!
//! let hdr = RecordHeader {
//!     queue_id: 1,
//!     born_timestamp: 1_700_000_000_000,
//!     born_host: "127.0.0.1:40000".parse()?,
//!     store_timestamp: 1_700_000_000_123,
//!     store_host: "10.0.0.1:10911".parse()?,
//!     ..RecordHeader::default()
//! };
//! let mut props = Vec::new();
//! encode_properties([("TAGS", "A")], &mut props);
//! let rec = encode_record_to_vec(&hdr, b"hi", "T", &props)?;
//! assert_eq!(rec.len(), 101); // spec §16 vector 7
//!
//! let opts = DecodeOptions { expected_physical_offset: Some(0), ..DecodeOptions::default() };
//! match decode_record(&rec, &opts)? {
//!     Decoded::Message(v) => {
//!         assert_eq!(v.topic, "T");
//!         assert_eq!(v.properties().tags(), Some("A"));
//!         assert_eq!(v.msg_id(), "0A00000100002A9F0000000000000000");
//!     }
//!     Decoded::Blank { .. } => unreachable!(),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Modules
//!
//! * [`consts`] (re-exported here): magic codes, sizes, [`sysflag`] bits, [`property`] names.
//! * [`hash`]: Java string hash, masked CRC-32, tagsCode, index key hash.
//! * [`filename`]: 20-digit segment file names.
//! * [`host`]: [`HostAddr`] (BORNHOST / STOREHOST).
//! * [`properties`]: the `name\x01value\x02` properties string.
//! * [`topic`]: topic validation and [`MessageVersion`].
//! * [`record`]: commit-log records: [`encode_record`], [`decode_record`], patch helpers, blank.
//! * [`msgid`]: offset message ids and `UNIQ_KEY`.
//! * [`prop_crc`]: the optional whole-record `__CRC32#` property (RocketMQ 5.2+).
//! * [`cq`]: consume-queue units and tagsCode rules.
//! * [`index`]: index-file header, entries, slots, chain walk.
//! * [`checkpoint`]: the checkpoint file and rocketstore's CRC-protected extension.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::host_endian_bytes, clippy::little_endian_bytes)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

mod bytes;
pub mod checkpoint;
pub mod consts;
pub mod cq;
mod error;
pub mod filename;
pub mod hash;
pub mod host;
pub mod index;
pub mod keys;
pub mod msgid;
pub mod prop_crc;
pub mod properties;
pub mod record;
pub mod topic;

pub use checkpoint::{Checkpoint, CheckpointError, CheckpointExt, RecoveryWindow};
pub use consts::*;
pub use cq::{cq_tags_code, delay_levels, CqUnit};
pub use error::{FieldError, FieldErrorReason};
pub use filename::{offset_to_file_name, parse_file_name};
pub use hash::{
    crc32_masked, index_key_hash, index_key_hash_of, java_string_hash, java_string_hash_continue,
    tags_code,
};
pub use host::HostAddr;
pub use index::{IndexEntry, IndexHeader};
pub use msgid::{decode_offset_msg_id, offset_msg_id, uniq_key, OffsetMsgIds, UniqKeyPrefix};
pub use properties::{
    encode_properties, encoded_properties_len, parse_properties, parse_properties_into,
    property_value, property_values, validate_property, Properties,
};
pub use record::{
    body_and_properties, decode_record, encode_blank, encode_record, encode_record_to_vec,
    fits_in_file, patch_physical_offset, patch_queue_offset, patch_store_timestamp, peek_magic,
    peek_store_timestamp, peek_total_size, record_len, DecodeError, DecodeOptions, Decoded,
    EncodeError, RecordHeader, RecordLayout, RecordView,
};
pub use topic::{is_safe_topic_dir, validate_topic, MessageVersion};
