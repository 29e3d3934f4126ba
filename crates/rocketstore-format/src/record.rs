//! Commit-log records (spec §3): layout, encoder, patch helpers, the blank end-of-file record and
//! the validating decoder (§7.4, reliability.md §4.1).
//!
//! Layout (offsets for IPv4 born and store hosts; `B`/`S` = 8 or 20, `T` = 1 (V1) or 2 (V2)):
//!
//! | field | offset | width |
//! |---|---|---|
//! | TOTALSIZE | 0 | i32 |
//! | MAGICCODE | 4 | i32 |
//! | BODYCRC | 8 | i32 |
//! | QUEUEID | 12 | i32 |
//! | FLAG | 16 | i32 |
//! | QUEUEOFFSET | 20 | i64 |
//! | PHYSICALOFFSET | 28 | i64 |
//! | SYSFLAG | 36 | i32 |
//! | BORNTIMESTAMP | 40 | i64 |
//! | BORNHOST | 48 | B |
//! | STORETIMESTAMP | 48+B | i64 |
//! | STOREHOST | 56+B | S |
//! | RECONSUMETIMES | 56+B+S | i32 |
//! | PREPARED TRANSACTION OFFSET | 60+B+S | i64 |
//! | BODYLENGTH + BODY | 68+B+S | i32 + bodyLen |
//! | TOPICLENGTH + TOPIC | 72+B+S+bodyLen | T + topicLen |
//! | PROPERTIESLENGTH + PROPERTIES | after the topic | i16 + propLen |

use crate::bytes::{i16_at, i32_at, i64_at, i8_at, put_at, slice_at, Writer};
use crate::consts::{sysflag, BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LEN};
use crate::error::{FieldError, FieldErrorReason};
use crate::hash::crc32_masked;
use crate::host::{HostAddr, HOST_V4_LEN, HOST_V6_LEN};
use crate::msgid::offset_msg_id;
use crate::properties::{parse_properties, Properties};
use crate::topic::{validate_topic, MessageVersion};

/// Position of MAGICCODE.
pub const MAGIC_POSITION: usize = 4;
/// Position of BODYCRC.
pub const BODY_CRC_POSITION: usize = 8;
/// Position of QUEUEID.
pub const QUEUE_ID_POSITION: usize = 12;
/// Position of FLAG.
pub const FLAG_POSITION: usize = 16;
/// Position of QUEUEOFFSET.
pub const QUEUE_OFFSET_POSITION: usize = 20;
/// Position of PHYSICALOFFSET.
pub const PHYSICAL_OFFSET_POSITION: usize = 28;
/// Position of SYSFLAG.
pub const SYSFLAG_POSITION: usize = 36;
/// Position of BORNTIMESTAMP.
pub const BORN_TIMESTAMP_POSITION: usize = 40;
/// Position of BORNHOST.
pub const BORN_HOST_POSITION: usize = 48;

/// The fixed-width fields other than the hosts, TOPICLENGTH and PROPERTIESLENGTH:
/// TOTALSIZE..FLAG (5 × 4) + QUEUEOFFSET, PHYSICALOFFSET (2 × 8) + SYSFLAG (4) + BORNTIMESTAMP,
/// STORETIMESTAMP (2 × 8) + RECONSUMETIMES (4) + PREPARED TX OFFSET (8) + BODYLENGTH (4) = 72.
const FIXED_LEN: usize = 72;

fn host_len(v6: bool) -> usize {
    if v6 {
        HOST_V6_LEN
    } else {
        HOST_V4_LEN
    }
}

/// Position of STORETIMESTAMP for a given SYSFLAG: 56 if the born host is IPv4, 68 if IPv6.
pub fn store_timestamp_position(sys_flag: i32) -> usize {
    BORN_HOST_POSITION + host_len(sys_flag & sysflag::BORNHOST_V6_FLAG != 0)
}

/// TOTALSIZE of a record (§3.4): `72 + B + S + body_len + T + topic_len + 2 + props_len`
/// (saturating; a result above `i32::MAX` cannot be encoded).
///
/// `record_len(false, false, MessageVersion::V1, 14, 9, 10) == 124`.
pub fn record_len(
    born_v6: bool,
    store_v6: bool,
    version: MessageVersion,
    body_len: usize,
    topic_len: usize,
    props_len: usize,
) -> usize {
    FIXED_LEN
        .saturating_add(host_len(born_v6))
        .saturating_add(host_len(store_v6))
        .saturating_add(body_len)
        .saturating_add(version.topic_len_width())
        .saturating_add(topic_len)
        .saturating_add(2)
        .saturating_add(props_len)
}

/// Whether a record of `record_len` bytes may be appended where `remaining` bytes are left in the
/// file (§3.8): it must leave at least [`END_FILE_MIN_BLANK_LENGTH`] bytes. If not, the writer puts
/// a blank record ([`encode_blank`]) with TOTALSIZE = `remaining` and retries in the next file.
pub fn fits_in_file(record_len: usize, remaining: usize) -> bool {
    record_len
        .checked_add(END_FILE_MIN_BLANK_LENGTH)
        .is_some_and(|n| n <= remaining)
}

/// The fixed-width header fields of a record. The encoder derives SYSFLAG bits 4 and 5 from
/// `born_host` / `store_host`; the caller's values of those two bits are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG (user flag from the producer).
    pub flag: i32,
    /// QUEUEOFFSET (0 for PREPARED and ROLLBACK transaction types).
    pub queue_offset: i64,
    /// PHYSICALOFFSET: absolute commit-log offset of this record.
    pub physical_offset: i64,
    /// SYSFLAG (§3.3).
    pub sys_flag: i32,
    /// BORNTIMESTAMP (ms).
    pub born_timestamp: i64,
    /// BORNHOST.
    pub born_host: HostAddr,
    /// STORETIMESTAMP (ms).
    pub store_timestamp: i64,
    /// STOREHOST.
    pub store_host: HostAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED TRANSACTION OFFSET.
    pub prepared_transaction_offset: i64,
}

impl RecordHeader {
    /// `sys_flag` with bits 4/5 set from the hosts, as the encoder writes it.
    pub fn effective_sys_flag(&self) -> i32 {
        let mut f =
            self.sys_flag & !(sysflag::BORNHOST_V6_FLAG | sysflag::STOREHOSTADDRESS_V6_FLAG);
        if self.born_host.is_v6() {
            f |= sysflag::BORNHOST_V6_FLAG;
        }
        if self.store_host.is_v6() {
            f |= sysflag::STOREHOSTADDRESS_V6_FLAG;
        }
        f
    }
}

/// Errors of the encoder and of the patch helpers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// `dst.len()` is not exactly the record length.
    #[error("destination is {actual} bytes but the record needs exactly {expected}")]
    BufferSize {
        /// `record_len(..)`.
        expected: usize,
        /// `dst.len()`.
        actual: usize,
    },
    /// The buffer is too short for the field being patched or written.
    #[error("buffer of {len} bytes is too short, {needed} needed")]
    BufferTooShort {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        len: usize,
    },
    /// The topic is empty or longer than the version's TOPICLENGTH field can express.
    #[error("topic length {len} is outside the range 1 to {max}")]
    TopicLength {
        /// Topic length in bytes.
        len: usize,
        /// Maximum for the chosen version (127 for V1, 32767 for V2).
        max: usize,
    },
    /// The properties are longer than 32767 bytes.
    #[error("properties length {len} exceeds {max}")]
    PropertiesTooLong {
        /// Properties length in bytes.
        len: usize,
        /// [`MAX_PROPERTIES_LEN`].
        max: usize,
    },
    /// The record would be longer than `i32::MAX` bytes.
    #[error("record length {len} does not fit in TOTALSIZE")]
    RecordTooLarge {
        /// The computed record length.
        len: usize,
    },
    /// SYSFLAG has bits outside [`sysflag::KNOWN_BITS`]; the decoder would reject the record.
    #[error("SYSFLAG {sys_flag:#x} has unknown bits")]
    UnknownSysFlag {
        /// The offending SYSFLAG.
        sys_flag: i32,
    },
}

/// Encodes a full record (TOTALSIZE through PROPERTIES) into `dst`, which must be exactly
/// [`record_len`] bytes. `body_crc` is written as given (normally [`crc32_masked`]`(body)`); the
/// topic is written as given (validate it with [`validate_topic`] first). SYSFLAG bits 4/5 are
/// derived from the hosts ([`RecordHeader::effective_sys_flag`]).
///
/// # Errors
/// [`EncodeError::BufferSize`] if `dst` has the wrong length; [`EncodeError::TopicLength`],
/// [`EncodeError::PropertiesTooLong`], [`EncodeError::RecordTooLarge`],
/// [`EncodeError::UnknownSysFlag`] for values the format cannot hold or the decoder would reject.
/// Nothing is guaranteed about the contents of `dst` after an error.
pub fn encode_record(
    dst: &mut [u8],
    hdr: &RecordHeader,
    version: MessageVersion,
    body: &[u8],
    body_crc: i32,
    topic: &str,
    props: &[u8],
) -> Result<(), EncodeError> {
    let sys_flag = hdr.effective_sys_flag();
    if sys_flag & !sysflag::KNOWN_BITS != 0 {
        return Err(EncodeError::UnknownSysFlag { sys_flag });
    }
    let max_topic = version.max_topic_len();
    if topic.is_empty() || topic.len() > max_topic {
        return Err(EncodeError::TopicLength {
            len: topic.len(),
            max: max_topic,
        });
    }
    if props.len() > MAX_PROPERTIES_LEN {
        return Err(EncodeError::PropertiesTooLong {
            len: props.len(),
            max: MAX_PROPERTIES_LEN,
        });
    }
    let len = record_len(
        hdr.born_host.is_v6(),
        hdr.store_host.is_v6(),
        version,
        body.len(),
        topic.len(),
        props.len(),
    );
    let too_large = || EncodeError::RecordTooLarge { len };
    let total_size = i32::try_from(len).map_err(|_| too_large())?;
    let body_len = i32::try_from(body.len()).map_err(|_| too_large())?;
    if dst.len() != len {
        return Err(EncodeError::BufferSize {
            expected: len,
            actual: dst.len(),
        });
    }
    let props_len = i16::try_from(props.len()).map_err(|_| EncodeError::PropertiesTooLong {
        len: props.len(),
        max: MAX_PROPERTIES_LEN,
    })?;
    let topic_err = || EncodeError::TopicLength {
        len: topic.len(),
        max: max_topic,
    };
    let mut w = Writer::new(dst);
    let short = EncodeError::BufferTooShort { needed: len, len };
    (|| {
        w.put_i32(total_size)?;
        w.put_i32(version.magic_code())?;
        w.put_i32(body_crc)?;
        w.put_i32(hdr.queue_id)?;
        w.put_i32(hdr.flag)?;
        w.put_i64(hdr.queue_offset)?;
        w.put_i64(hdr.physical_offset)?;
        w.put_i32(sys_flag)?;
        w.put_i64(hdr.born_timestamp)?;
        hdr.born_host.write(&mut w)?;
        w.put_i64(hdr.store_timestamp)?;
        hdr.store_host.write(&mut w)?;
        w.put_i32(hdr.reconsume_times)?;
        w.put_i64(hdr.prepared_transaction_offset)?;
        w.put_i32(body_len)?;
        w.put(body)
    })()
    .ok_or(short.clone())?;
    match version {
        MessageVersion::V1 => {
            let l = i8::try_from(topic.len()).map_err(|_| topic_err())?;
            w.put(&l.to_be_bytes()).ok_or(short.clone())?;
        }
        MessageVersion::V2 => {
            let l = i16::try_from(topic.len()).map_err(|_| topic_err())?;
            w.put_i16(l).ok_or(short.clone())?;
        }
    }
    (|| {
        w.put(topic.as_bytes())?;
        w.put_i16(props_len)?;
        w.put(props)
    })()
    .ok_or(short)?;
    debug_assert_eq!(w.position(), len);
    Ok(())
}

/// Convenience: allocates and encodes a record, choosing the version with
/// [`MessageVersion::for_topic`] and computing BODYCRC with [`crc32_masked`].
///
/// # Errors
/// As [`encode_record`].
pub fn encode_record_to_vec(
    hdr: &RecordHeader,
    body: &[u8],
    topic: &str,
    props: &[u8],
) -> Result<Vec<u8>, EncodeError> {
    let version = MessageVersion::for_topic(topic.len());
    let len = record_len(
        hdr.born_host.is_v6(),
        hdr.store_host.is_v6(),
        version,
        body.len(),
        topic.len(),
        props.len(),
    );
    if i32::try_from(len).is_err() {
        return Err(EncodeError::RecordTooLarge { len });
    }
    let mut out = vec![0u8; len];
    encode_record(
        &mut out,
        hdr,
        version,
        body,
        crc32_masked(body),
        topic,
        props,
    )?;
    Ok(out)
}

fn patch(rec: &mut [u8], pos: usize, bytes: &[u8]) -> Result<(), EncodeError> {
    put_at(rec, pos, bytes).ok_or(EncodeError::BufferTooShort {
        needed: pos.saturating_add(bytes.len()),
        len: rec.len(),
    })
}

/// Overwrites QUEUEOFFSET (position 20) of an encoded record.
///
/// # Errors
/// [`EncodeError::BufferTooShort`] if `rec` is shorter than 28 bytes.
pub fn patch_queue_offset(rec: &mut [u8], v: i64) -> Result<(), EncodeError> {
    patch(rec, QUEUE_OFFSET_POSITION, &v.to_be_bytes())
}

/// Overwrites PHYSICALOFFSET (position 28) of an encoded record.
///
/// # Errors
/// [`EncodeError::BufferTooShort`] if `rec` is shorter than 36 bytes.
pub fn patch_physical_offset(rec: &mut [u8], v: i64) -> Result<(), EncodeError> {
    patch(rec, PHYSICAL_OFFSET_POSITION, &v.to_be_bytes())
}

/// Overwrites STORETIMESTAMP of an encoded record: position 56, or 68 if SYSFLAG (read from the
/// record) has the born-host-IPv6 bit.
///
/// # Errors
/// [`EncodeError::BufferTooShort`] if `rec` is too short to hold SYSFLAG and the timestamp.
pub fn patch_store_timestamp(rec: &mut [u8], v: i64) -> Result<(), EncodeError> {
    let sys_flag = i32_at(rec, SYSFLAG_POSITION).ok_or(EncodeError::BufferTooShort {
        needed: SYSFLAG_POSITION + 4,
        len: rec.len(),
    })?;
    patch(rec, store_timestamp_position(sys_flag), &v.to_be_bytes())
}

/// Writes the 8-byte end-of-file blank header: TOTALSIZE = `total_size` (all the bytes left in the
/// file), MAGIC = [`BLANK_MAGIC_CODE`].
pub fn encode_blank(dst: &mut [u8; 8], total_size: i32) {
    let [a, b, c, d] = total_size.to_be_bytes();
    let [e, f, g, h] = BLANK_MAGIC_CODE.to_be_bytes();
    *dst = [a, b, c, d, e, f, g, h];
}

/// Options of [`decode_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Verify BODYCRC against the body (only when the body is non-empty, like RocketMQ). Costs a
    /// CRC pass over the body; never computed when `false`. Default `true` (recovery); the reput
    /// path may turn it off.
    pub check_crc: bool,
    /// Reject TOTALSIZE above this (RocketMQ: `maxMessageSize + 64 KiB`); 0 = no limit. Default 0.
    pub max_total_size: u32,
    /// Accept V2 records (RocketMQ 5.1+). Default `true`; `false` behaves like 4.x.
    pub accept_v2: bool,
    /// Apply [`validate_topic`] (the client's character set) to the decoded topic. Default
    /// `false`: the format does not restrict topic text (only RocketMQ's client-side validator
    /// does), so stores written by other implementations may hold any non-empty UTF-8 topic, and
    /// readers and recovery accept it. UTF-8 is always required. Puts validate their topic.
    pub check_topic: bool,
    /// Reject SYSFLAG bits outside [`sysflag::KNOWN_BITS`]. Default `true`.
    pub reject_unknown_sysflag: bool,
    /// If set, PHYSICALOFFSET must equal it (file base offset + position). Default `None`.
    pub expected_physical_offset: Option<i64>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            check_crc: true,
            max_total_size: 0,
            accept_v2: true,
            check_topic: false,
            reject_unknown_sysflag: true,
            expected_physical_offset: None,
        }
    }
}

/// Errors of [`decode_record`]. Only [`DecodeError::Incomplete`] means "the bytes may be fine but
/// the buffer ends early"; every other variant means the bytes are not a valid record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer than 8 bytes, or fewer than TOTALSIZE bytes, are available.
    #[error("incomplete record: {needed} bytes needed, {available} available")]
    Incomplete {
        /// Bytes needed (8, or TOTALSIZE).
        needed: usize,
        /// Bytes available in the buffer.
        available: usize,
    },
    /// TOTALSIZE is <= 0, below the smallest possible record (or blank), or above
    /// `max_total_size`.
    #[error("bad TOTALSIZE {total_size}")]
    BadTotalSize {
        /// The stored TOTALSIZE.
        total_size: i32,
    },
    /// MAGICCODE is not V1, V2 (when accepted) or BLANK.
    #[error("bad magic code {magic:#010x}")]
    BadMagic {
        /// The stored magic code.
        magic: i32,
    },
    /// SYSFLAG has bits outside [`sysflag::KNOWN_BITS`].
    #[error("SYSFLAG {sys_flag:#x} has unknown bits")]
    BadSysFlag {
        /// The stored SYSFLAG.
        sys_flag: i32,
    },
    /// A length field is negative, zero where that is not allowed, or runs past TOTALSIZE.
    #[error("bad {field} length {value}")]
    BadLength {
        /// `"body"`, `"topic"` or `"properties"`.
        field: &'static str,
        /// The stored length.
        value: i32,
    },
    /// The topic is not UTF-8 or fails [`validate_topic`].
    #[error("bad topic: {error}")]
    BadTopic {
        /// Why.
        #[source]
        error: FieldError,
    },
    /// The length computed from the length fields differs from TOTALSIZE.
    #[error("TOTALSIZE {total_size} but the fields add up to {computed}")]
    LengthMismatch {
        /// The stored TOTALSIZE.
        total_size: i32,
        /// The computed length (§3.4).
        computed: usize,
    },
    /// BODYCRC does not match the body.
    #[error("body CRC mismatch: stored {stored}, computed {computed}")]
    CrcMismatch {
        /// The stored BODYCRC.
        stored: i32,
        /// [`crc32_masked`] of the body.
        computed: i32,
    },
    /// PHYSICALOFFSET differs from `expected_physical_offset`.
    #[error("PHYSICALOFFSET {stored} but the record is at {expected}")]
    PhysicalOffsetMismatch {
        /// The stored PHYSICALOFFSET.
        stored: i64,
        /// The expected offset.
        expected: i64,
    },
}

impl DecodeError {
    /// Whether this is [`DecodeError::Incomplete`] (a short buffer, e.g. a torn tail), as opposed
    /// to bytes that are not a valid record.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, DecodeError::Incomplete { .. })
    }
}

/// Result of [`decode_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid message record.
    Message(RecordView<'a>),
    /// An end-of-file blank record; the rest of the file (`total_size` bytes from here) is unused.
    /// The caller checks that `total_size` equals the bytes left in the file.
    Blank {
        /// The stored TOTALSIZE (>= 8).
        total_size: i32,
    },
}

/// A decoded record borrowing from the input buffer.
///
/// Its fixed-width fields are a [`RecordHeader`] (`header`, SYSFLAG as stored); the view
/// dereferences to it, so `view.queue_offset` reads `view.header.queue_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// TOTALSIZE.
    pub total_size: i32,
    /// Version (from the magic code).
    pub version: MessageVersion,
    /// BODYCRC as stored.
    pub body_crc: i32,
    /// QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG (as stored), BORNTIMESTAMP,
    /// BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED TRANSACTION OFFSET.
    pub header: RecordHeader,
    /// BODY (as stored, possibly compressed).
    pub body: &'a [u8],
    /// TOPIC.
    pub topic: &'a str,
    /// PROPERTIES, raw bytes (parse with [`RecordView::properties`]).
    pub properties_raw: &'a [u8],
    raw: &'a [u8],
}

impl std::ops::Deref for RecordView<'_> {
    type Target = RecordHeader;

    fn deref(&self) -> &RecordHeader {
        &self.header
    }
}

impl<'a> RecordView<'a> {
    /// Parsed properties ([`parse_properties`]).
    pub fn properties(&self) -> Properties {
        parse_properties(self.properties_raw)
    }

    /// The whole record (`total_size` bytes).
    pub fn bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// The offset message id (§4.1) of this record: store host + PHYSICALOFFSET.
    pub fn msg_id(&self) -> String {
        offset_msg_id(&self.store_host, self.physical_offset)
    }

    /// Transaction type (`sys_flag & 0xC`).
    pub fn transaction_type(&self) -> i32 {
        sysflag::transaction_type(self.sys_flag)
    }
}

/// TOTALSIZE at the start of `buf`, if at least 4 bytes.
pub fn peek_total_size(buf: &[u8]) -> Option<i32> {
    i32_at(buf, 0)
}

/// MAGICCODE at position 4 of `buf`, if at least 8 bytes.
pub fn peek_magic(buf: &[u8]) -> Option<i32> {
    i32_at(buf, MAGIC_POSITION)
}

/// STORETIMESTAMP of an encoded record (RocketMQ `pickupStoreTimestamp`): reads SYSFLAG at 36, then
/// the i64 at 56 or 68. `None` if the buffer is too short. Does not validate the record.
pub fn peek_store_timestamp(rec: &[u8]) -> Option<i64> {
    let sys_flag = i32_at(rec, SYSFLAG_POSITION)?;
    i64_at(rec, store_timestamp_position(sys_flag))
}

/// Decodes and validates one record at the start of `buf`. `buf` runs from the record to the end
/// of valid file data and may be longer than the record.
///
/// Checks, in this order (spec §7.4, reliability.md §4.1); the first failure is returned:
/// 1. fewer than 8 bytes → [`DecodeError::Incomplete`];
/// 2. MAGIC == BLANK → `Ok(Blank)` if TOTALSIZE >= 8, else [`DecodeError::BadTotalSize`];
/// 3. MAGIC not V1 / V2 (V2 only if `accept_v2`) → [`DecodeError::BadMagic`];
/// 4. TOTALSIZE below the smallest record of that version (92 / 93) or above `max_total_size`
///    → [`DecodeError::BadTotalSize`];
/// 5. fewer than TOTALSIZE bytes → [`DecodeError::Incomplete`];
/// 6. unknown SYSFLAG bits (if `reject_unknown_sysflag`) → [`DecodeError::BadSysFlag`];
///    the host widths are then taken from SYSFLAG bits 4/5; TOTALSIZE below the smallest record
///    with those hosts → [`DecodeError::BadTotalSize`];
/// 7. BODYLENGTH < 0 or larger than fits → `BadLength{"body"}`; TOPICLENGTH <= 0 or running past
///    TOTALSIZE → `BadLength{"topic"}`; PROPERTIESLENGTH < 0 → `BadLength{"properties"}`;
/// 8. topic not UTF-8, or failing [`validate_topic`] (if `check_topic`) → [`DecodeError::BadTopic`];
/// 9. computed length (§3.4) != TOTALSIZE → [`DecodeError::LengthMismatch`];
/// 10. if `check_crc` and the body is non-empty: BODYCRC != crc → [`DecodeError::CrcMismatch`];
/// 11. PHYSICALOFFSET != `expected_physical_offset` → [`DecodeError::PhysicalOffsetMismatch`].
///
/// Properties are not parsed (that never fails); `DELAY` is checked by
/// [`crate::cq::cq_tags_code`]. Queue-id range and timestamp sanity are the caller's policy.
///
/// # Errors
/// See above. Never panics, never reads outside `buf`, never allocates.
pub fn decode_record<'a>(buf: &'a [u8], opts: &DecodeOptions) -> Result<Decoded<'a>, DecodeError> {
    let (Some(total_size), Some(magic)) = (peek_total_size(buf), peek_magic(buf)) else {
        return Err(DecodeError::Incomplete {
            needed: 8,
            available: buf.len(),
        });
    };
    if magic == BLANK_MAGIC_CODE {
        return if usize::try_from(total_size).is_ok_and(|t| t >= END_FILE_MIN_BLANK_LENGTH) {
            Ok(Decoded::Blank { total_size })
        } else {
            Err(DecodeError::BadTotalSize { total_size })
        };
    }
    let version = match MessageVersion::from_magic(magic) {
        Some(MessageVersion::V2) if !opts.accept_v2 => return Err(DecodeError::BadMagic { magic }),
        Some(v) => v,
        None => return Err(DecodeError::BadMagic { magic }),
    };
    let bad_total = DecodeError::BadTotalSize { total_size };
    let total = match usize::try_from(total_size) {
        Ok(t) if t >= record_len(false, false, version, 0, 1, 0) => t,
        _ => return Err(bad_total),
    };
    if opts.max_total_size != 0
        && u64::try_from(total).map_or(true, |t| t > u64::from(opts.max_total_size))
    {
        return Err(bad_total);
    }
    let rec = buf.get(..total).ok_or(DecodeError::Incomplete {
        needed: total,
        available: buf.len(),
    })?;

    // From here on every read is inside `rec`; a failed read means TOTALSIZE is too small.
    let rd32 = |pos: usize| i32_at(rec, pos).ok_or(DecodeError::BadTotalSize { total_size });
    let rd64 = |pos: usize| i64_at(rec, pos).ok_or(DecodeError::BadTotalSize { total_size });

    let sys_flag = rd32(SYSFLAG_POSITION)?;
    if opts.reject_unknown_sysflag && sys_flag & !sysflag::KNOWN_BITS != 0 {
        return Err(DecodeError::BadSysFlag { sys_flag });
    }
    let born_v6 = sys_flag & sysflag::BORNHOST_V6_FLAG != 0;
    let store_v6 = sys_flag & sysflag::STOREHOSTADDRESS_V6_FLAG != 0;
    let min_len = record_len(born_v6, store_v6, version, 0, 1, 0);
    if total < min_len {
        return Err(DecodeError::BadTotalSize { total_size });
    }
    let b = host_len(born_v6);
    let s = host_len(store_v6);

    let body_crc = rd32(BODY_CRC_POSITION)?;
    let queue_id = rd32(QUEUE_ID_POSITION)?;
    let flag = rd32(FLAG_POSITION)?;
    let queue_offset = rd64(QUEUE_OFFSET_POSITION)?;
    let physical_offset = rd64(PHYSICAL_OFFSET_POSITION)?;
    let born_timestamp = rd64(BORN_TIMESTAMP_POSITION)?;
    let born_host = HostAddr::decode_at(rec, BORN_HOST_POSITION, born_v6)
        .ok_or(DecodeError::BadTotalSize { total_size })?;
    let store_ts_pos = BORN_HOST_POSITION + b;
    let store_timestamp = rd64(store_ts_pos)?;
    let store_host = HostAddr::decode_at(rec, store_ts_pos + 8, store_v6)
        .ok_or(DecodeError::BadTotalSize { total_size })?;
    let reconsume_pos = store_ts_pos + 8 + s;
    let reconsume_times = rd32(reconsume_pos)?;
    let prepared_transaction_offset = rd64(reconsume_pos + 4)?;
    let body_len_pos = reconsume_pos + 12;
    let body_len_raw = rd32(body_len_pos)?;
    let body_start = body_len_pos + 4;

    // BODYLENGTH: non-negative and leaving room for the smallest topic and the properties length.
    let body_len = usize::try_from(body_len_raw)
        .ok()
        .filter(|&l| l <= total - min_len)
        .ok_or(DecodeError::BadLength {
            field: "body",
            value: body_len_raw,
        })?;
    let body = slice_at(rec, body_start, body_len).ok_or(DecodeError::BadLength {
        field: "body",
        value: body_len_raw,
    })?;

    let topic_len_pos = body_start + body_len;
    let topic_len_raw: i32 = match version {
        MessageVersion::V1 => i8_at(rec, topic_len_pos).map(i32::from),
        MessageVersion::V2 => i16_at(rec, topic_len_pos).map(i32::from),
    }
    .ok_or(DecodeError::BadTotalSize { total_size })?;
    let topic_start = topic_len_pos + version.topic_len_width();
    let bad_topic_len = DecodeError::BadLength {
        field: "topic",
        value: topic_len_raw,
    };
    let topic_len = usize::try_from(topic_len_raw)
        .ok()
        .filter(|&l| l > 0)
        .ok_or(bad_topic_len.clone())?;
    // The topic plus the 2-byte PROPERTIESLENGTH must fit inside TOTALSIZE.
    let topic_end = topic_start
        .checked_add(topic_len)
        .filter(|&e| e.checked_add(2).is_some_and(|p| p <= total))
        .ok_or(bad_topic_len)?;
    let topic_bytes = rec
        .get(topic_start..topic_end)
        .ok_or(DecodeError::BadLength {
            field: "topic",
            value: topic_len_raw,
        })?;
    let props_len_raw = i16_at(rec, topic_end).ok_or(DecodeError::BadTotalSize { total_size })?;
    let props_len = usize::try_from(props_len_raw).map_err(|_| DecodeError::BadLength {
        field: "properties",
        value: i32::from(props_len_raw),
    })?;

    let topic = std::str::from_utf8(topic_bytes).map_err(|_| DecodeError::BadTopic {
        error: FieldError::new("topic", FieldErrorReason::InvalidUtf8),
    })?;
    if opts.check_topic {
        validate_topic(topic).map_err(|error| DecodeError::BadTopic { error })?;
    }

    let computed = record_len(born_v6, store_v6, version, body_len, topic_len, props_len);
    if computed != total {
        return Err(DecodeError::LengthMismatch {
            total_size,
            computed,
        });
    }
    let properties_raw = rec
        .get(topic_end + 2..)
        .ok_or(DecodeError::LengthMismatch {
            total_size,
            computed,
        })?;

    if opts.check_crc && !body.is_empty() {
        let computed = crc32_masked(body);
        if computed != body_crc {
            return Err(DecodeError::CrcMismatch {
                stored: body_crc,
                computed,
            });
        }
    }
    if let Some(expected) = opts.expected_physical_offset {
        if expected != physical_offset {
            return Err(DecodeError::PhysicalOffsetMismatch {
                stored: physical_offset,
                expected,
            });
        }
    }

    Ok(Decoded::Message(RecordView {
        total_size,
        version,
        body_crc,
        header: RecordHeader {
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
        },
        body,
        topic,
        properties_raw,
        raw: rec,
    }))
}

/// A [`RecordView`] without the borrow: its fixed fields and the lengths of its parts, so that
/// a record [`decode_record`] accepted can be viewed again ([`RecordLayout::view`]) without
/// being decoded again, as long as its bytes have not changed (a reader that decodes records
/// while walking and hands them on keeps the layout beside a reference to the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    total_size: i32,
    version: MessageVersion,
    body_crc: i32,
    header: RecordHeader,
    body_len: u32,
    topic_len: u32,
    props_len: u32,
}

impl RecordView<'_> {
    /// This view's [`RecordLayout`].
    pub fn layout(&self) -> RecordLayout {
        let len = |s: &[u8]| u32::try_from(s.len()).unwrap_or(u32::MAX);
        RecordLayout {
            total_size: self.total_size,
            version: self.version,
            body_crc: self.body_crc,
            header: self.header,
            body_len: len(self.body),
            topic_len: len(self.topic.as_bytes()),
            props_len: len(self.properties_raw),
        }
    }
}

impl RecordLayout {
    /// The view of `rec`, the bytes of the record this layout was taken from (at least
    /// TOTALSIZE of them): its parts sliced where the layout puts them. Checked: TOTALSIZE and
    /// MAGIC are the decoded ones and the topic is UTF-8; nothing else. Never reads outside
    /// `rec`: `None` if it is too short for them.
    pub fn view<'a>(&self, rec: &'a [u8]) -> Option<RecordView<'a>> {
        if peek_total_size(rec)? != self.total_size || peek_magic(rec)? != self.version.magic_code()
        {
            return None;
        }
        let total = usize::try_from(self.total_size).ok()?;
        let raw = rec.get(..total)?;
        let props_len = usize::try_from(self.props_len).ok()?;
        let topic_len = usize::try_from(self.topic_len).ok()?;
        let body_len = usize::try_from(self.body_len).ok()?;
        // The record ends with TOPICLENGTH, TOPIC, PROPERTIESLENGTH (2 bytes), PROPERTIES.
        let props_start = total.checked_sub(props_len)?;
        let topic_end = props_start.checked_sub(2)?;
        let topic_start = topic_end.checked_sub(topic_len)?;
        let body_end = topic_start.checked_sub(self.version.topic_len_width())?;
        let body_start = body_end.checked_sub(body_len)?;
        Some(RecordView {
            total_size: self.total_size,
            version: self.version,
            body_crc: self.body_crc,
            header: self.header,
            body: raw.get(body_start..body_end)?,
            topic: std::str::from_utf8(raw.get(topic_start..topic_end)?).ok()?,
            properties_raw: raw.get(props_start..)?,
            raw,
        })
    }
}

/// BODY and PROPERTIES of the record `rec` (exactly TOTALSIZE bytes), found from the length
/// fields alone: no check of the topic, the hosts, the CRC or the other fields.
///
/// For a record that [`decode_record`] accepts (with `rec` its TOTALSIZE bytes) these are the
/// view's `body` and `properties_raw`; for any other bytes, some slices of `rec` or `None`.
/// For a reader that walks records another reader checks in full (a second thread that only
/// needs these two fields).
///
/// # Errors
/// None: `None` when a length field does not fit `rec`. Never panics, never reads outside `rec`.
pub fn body_and_properties(rec: &[u8]) -> Option<(&[u8], &[u8])> {
    let version = MessageVersion::from_magic(peek_magic(rec)?)?;
    let sys_flag = i32_at(rec, SYSFLAG_POSITION)?;
    let b = host_len(sys_flag & sysflag::BORNHOST_V6_FLAG != 0);
    let s = host_len(sys_flag & sysflag::STOREHOSTADDRESS_V6_FLAG != 0);
    // BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPARED TRANSACTION OFFSET.
    let body_len_pos = BORN_HOST_POSITION + b + 8 + s + 12;
    let body_len = usize::try_from(i32_at(rec, body_len_pos)?).ok()?;
    let body_start = body_len_pos + 4;
    let body = slice_at(rec, body_start, body_len)?;
    let topic_len_pos = body_start + body_len;
    let topic_len = match version {
        MessageVersion::V1 => i8_at(rec, topic_len_pos).map(i32::from),
        MessageVersion::V2 => i16_at(rec, topic_len_pos).map(i32::from),
    }?;
    let topic_end = topic_len_pos
        .checked_add(version.topic_len_width())?
        .checked_add(usize::try_from(topic_len).ok()?)?;
    let props_len = usize::try_from(i16_at(rec, topic_end)?).ok()?;
    let properties = slice_at(rec, topic_end.checked_add(2)?, props_len)?;
    Some((body, properties))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;
    use crate::consts::{MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2};
    use crate::cq::CqUnit;
    use crate::filename::{offset_to_file_name, parse_file_name};
    use crate::msgid::decode_offset_msg_id;

    fn host(s: &str) -> HostAddr {
        s.parse().unwrap()
    }

    #[test]
    fn body_and_properties_match_the_decoder() {
        let long = "t".repeat(200); // a V2 record
        for (born, store) in [("1.2.3.4:5", "6.7.8.9:10"), ("[::1]:1", "[::2]:2")] {
            for (body, topic, props) in [
                (&b""[..], "T", &b""[..]),
                (
                    b"Hello RocketMQ",
                    "TopicTest",
                    b"TAGS\x01TagA\x02KEYS\x01k\x02",
                ),
                (&[7u8; 1000][..], long.as_str(), b"a\x01b"),
            ] {
                let hdr = RecordHeader {
                    born_host: host(born),
                    store_host: host(store),
                    ..vector7_header()
                };
                let rec = encode_record_to_vec(&hdr, body, topic, props).unwrap();
                let v = message(decode_record(&rec, &DecodeOptions::default()));
                assert_eq!(body_and_properties(&rec), Some((v.body, v.properties_raw)));
                // Any prefix or damaged length: some slices or None, never a panic.
                for cut in 0..rec.len() {
                    let _ = body_and_properties(&rec[..cut]);
                }
                for at in 0..rec.len() {
                    let mut bad = rec.clone();
                    bad[at] ^= 0xFF;
                    let _ = body_and_properties(&bad);
                }
            }
        }
    }

    /// An IPv4-mapped born or store host is written as IPv4 (4 address bytes, no IPv6 SYSFLAG
    /// bit): byte for byte the record a Java producer makes for that host, so a broker that
    /// decodes and re-encodes it (schedule re-delivery) keeps its layout.
    #[test]
    fn ipv4_mapped_hosts_are_written_as_ipv4() {
        let mapped = |a: [u8; 4], port| HostAddr {
            ip: std::net::IpAddr::V6(std::net::Ipv4Addr::from(a).to_ipv6_mapped()),
            port,
        };
        let v4 = RecordHeader {
            born_host: host("10.0.0.7:1234"),
            store_host: host("10.0.0.1:10911"),
            ..vector7_header()
        };
        let want = encode_record_to_vec(&v4, b"hi", "T", b"TAGS\x01A\x02").unwrap();
        for (born, store) in [
            (mapped([10, 0, 0, 7], 1234), v4.store_host),
            (v4.born_host, mapped([10, 0, 0, 1], 10911)),
            (
                host("[::ffff:10.0.0.7]:1234"),
                host("[::ffff:10.0.0.1]:10911"),
            ),
        ] {
            let hdr = RecordHeader {
                born_host: born,
                store_host: store,
                sys_flag: sysflag::BORNHOST_V6_FLAG | sysflag::STOREHOSTADDRESS_V6_FLAG,
                ..vector7_header()
            };
            assert_eq!(hdr.effective_sys_flag(), 0);
            let rec = encode_record_to_vec(&hdr, b"hi", "T", b"TAGS\x01A\x02").unwrap();
            assert_eq!(rec, want);
            let v = message(decode_record(&rec, &DecodeOptions::default()));
            assert_eq!(v.sys_flag & 0x30, 0);
            assert_eq!(v.born_host, v4.born_host);
            assert_eq!(v.store_host, v4.store_host);
        }
    }

    fn vector7_header() -> RecordHeader {
        RecordHeader {
            queue_id: 1,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: host("127.0.0.1:40000"),
            store_timestamp: 1_700_000_000_123,
            store_host: host("10.0.0.1:10911"),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    const VECTOR7: [u8; 101] = [
        0x00, 0x00, 0x00, 0x65, 0xDA, 0xA3, 0x20, 0xA7, 0x58, 0x93, 0x2A, 0xAC, 0x00, 0x00, 0x00,
        0x01, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68,
        0x00, //
        0x7F, 0x00, 0x00, 0x01, 0x00, 0x00, 0x9C, 0x40, 0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68,
        0x7B, //
        0x0A, 0x00, 0x00, 0x01, 0x00, 0x00, 0x2A, 0x9F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x68, 0x69, 0x01, 0x54, 0x00, 0x07, 0x54,
        0x41, //
        0x47, 0x53, 0x01, 0x41, 0x02,
    ];

    fn message(d: Result<Decoded<'_>, DecodeError>) -> RecordView<'_> {
        match d {
            Ok(Decoded::Message(v)) => v,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn vector_6_total_size() {
        use MessageVersion::{V1, V2};
        assert_eq!(record_len(false, false, V1, 14, 9, 10), 124);
        assert_eq!(record_len(false, false, V1, 14, 9, 101), 215);
        assert_eq!(record_len(false, false, V1, 0, 1, 0), 92);
        assert_eq!(record_len(true, true, V1, 0, 1, 0), 116);
        assert_eq!(record_len(false, false, V2, 0, 1, 0), 93);
        assert_eq!(record_len(true, true, V2, 0, 1, 0), 117);
        assert_eq!(record_len(true, false, V1, 0, 0, 0), 103);
        assert_eq!(record_len(false, true, V1, 0, 0, 0), 103);
        assert_eq!(record_len(true, true, V1, 0, 0, 0), 115);
        assert_eq!(record_len(false, false, V1, 0, 0, 0), 91);
        // The real encoding has that length.
        let hdr = vector7_header();
        let rec = encode_record_to_vec(&hdr, b"Hello RocketMQ", "TopicTest", b"TAGS\x01TagA\x02")
            .unwrap();
        assert_eq!(rec.len(), 124);
        assert_eq!(peek_total_size(&rec), Some(124));
        let v6 = RecordHeader {
            born_host: host("[::1]:1"),
            store_host: host("[::2]:2"),
            ..hdr
        };
        assert_eq!(encode_record_to_vec(&v6, b"", "T", b"").unwrap().len(), 116);
        assert_eq!(encode_record_to_vec(&hdr, b"", "T", b"").unwrap().len(), 92);
    }

    #[test]
    fn vector_7_full_record_hex() {
        let hdr = vector7_header();
        let body = b"hi";
        let props = b"TAGS\x01A\x02";
        let len = record_len(false, false, MessageVersion::V1, body.len(), 1, props.len());
        assert_eq!(len, 101);
        let mut dst = vec![0u8; len];
        encode_record(
            &mut dst,
            &hdr,
            MessageVersion::V1,
            body,
            crc32_masked(body),
            "T",
            props,
        )
        .unwrap();
        assert_eq!(dst, VECTOR7);
        assert_eq!(
            encode_record_to_vec(&hdr, body, "T", props).unwrap(),
            VECTOR7
        );

        let v = message(decode_record(&VECTOR7, &DecodeOptions::default()));
        assert_eq!(v.total_size, 101);
        assert_eq!(v.version, MessageVersion::V1);
        assert_eq!(v.body_crc, 0x5893_2AAC);
        assert_eq!(v.header, hdr);
        assert_eq!(v.body, b"hi");
        assert_eq!(v.topic, "T");
        assert_eq!(v.properties_raw, props);
        assert_eq!(v.properties().tags(), Some("A"));
        assert_eq!(v.bytes(), &VECTOR7[..]);
        assert_eq!(v.transaction_type(), 0);
        assert_eq!(peek_magic(&VECTOR7), Some(MESSAGE_MAGIC_CODE_V1));
        assert_eq!(peek_store_timestamp(&VECTOR7), Some(1_700_000_000_123));
        // Trailing bytes after the record are ignored.
        let mut longer = VECTOR7.to_vec();
        longer.extend_from_slice(&[0xEE; 50]);
        assert_eq!(
            message(decode_record(&longer, &DecodeOptions::default())),
            v
        );
    }

    #[test]
    fn patches() {
        let mut rec = VECTOR7.to_vec();
        patch_queue_offset(&mut rec, 7).unwrap();
        patch_physical_offset(&mut rec, 1_073_741_824).unwrap();
        patch_store_timestamp(&mut rec, 42).unwrap();
        let opts = DecodeOptions {
            expected_physical_offset: Some(1_073_741_824),
            ..DecodeOptions::default()
        };
        let v = message(decode_record(&rec, &opts));
        assert_eq!(
            (v.queue_offset, v.physical_offset, v.store_timestamp),
            (7, 1_073_741_824, 42)
        );
        assert_eq!(rec[56..64], 42i64.to_be_bytes());
        // IPv6 born host moves STORETIMESTAMP to 68.
        let hdr = RecordHeader {
            born_host: host("[::1]:1"),
            ..vector7_header()
        };
        let mut rec6 = encode_record_to_vec(&hdr, b"x", "T", b"").unwrap();
        assert_eq!(rec6[36..40], 0x10i32.to_be_bytes());
        patch_store_timestamp(&mut rec6, 99).unwrap();
        assert_eq!(rec6[68..76], 99i64.to_be_bytes());
        assert_eq!(peek_store_timestamp(&rec6), Some(99));
        assert_eq!(
            message(decode_record(&rec6, &DecodeOptions::default())).store_timestamp,
            99
        );
        // Too short.
        assert!(patch_queue_offset(&mut [0u8; 27], 1).is_err());
        assert!(patch_physical_offset(&mut [0u8; 35], 1).is_err());
        assert!(patch_store_timestamp(&mut [0u8; 39], 1).is_err());
        assert!(patch_store_timestamp(&mut [0u8; 63], 1).is_err());
        assert!(patch_store_timestamp(&mut [0u8; 64], 1).is_ok());
        assert_eq!(peek_store_timestamp(&[0u8; 63]), None);
    }

    #[test]
    fn vector_11_end_file_rule() {
        let file_size: usize = 1 << 30;
        let wrote = 1_073_741_724usize;
        let remaining = file_size - wrote;
        assert_eq!(remaining, 100);
        assert!(!fits_in_file(93, remaining));
        let mut blank = [0u8; 8];
        encode_blank(&mut blank, i32::try_from(remaining).unwrap());
        assert_eq!(blank, [0x00, 0x00, 0x00, 0x64, 0xCB, 0xD4, 0x31, 0x94]);
        assert_eq!(
            decode_record(&blank, &DecodeOptions::default()),
            Ok(Decoded::Blank { total_size: 100 })
        );
        let next = offset_to_file_name(file_size as u64);
        assert_eq!(next, "00000000001073741824");
        assert_eq!(parse_file_name(&next), Some(1_073_741_824));
        // With 101 bytes left the record fits and exactly 8 remain.
        assert!(fits_in_file(93, 101));
        assert_eq!(101 - 93, END_FILE_MIN_BLANK_LENGTH);
        assert!(!fits_in_file(usize::MAX, usize::MAX));
    }

    #[test]
    fn v6_and_v2_round_trip() {
        let hdr = RecordHeader {
            born_host: host("[2001:db8::1]:40000"),
            store_host: host("[::1]:10911"),
            sys_flag: sysflag::TRANSACTION_COMMIT_TYPE | sysflag::COMPRESSED_FLAG,
            ..vector7_header()
        };
        let topic = "%RETRY%".to_string() + &"g".repeat(150);
        let rec = encode_record_to_vec(&hdr, b"body", &topic, b"A\x01b\x02").unwrap();
        assert_eq!(peek_magic(&rec), Some(MESSAGE_MAGIC_CODE_V2));
        assert_eq!(
            rec.len(),
            record_len(true, true, MessageVersion::V2, 4, topic.len(), 4)
        );
        let v = message(decode_record(&rec, &DecodeOptions::default()));
        assert_eq!(v.version, MessageVersion::V2);
        assert_eq!(v.topic, topic);
        assert_eq!(v.sys_flag, 0x39);
        assert_eq!(
            v.header,
            RecordHeader {
                sys_flag: 0x39,
                ..hdr
            }
        );
        assert_eq!(v.transaction_type(), sysflag::TRANSACTION_COMMIT_TYPE);
        // 4.x mode rejects V2.
        let opts = DecodeOptions {
            accept_v2: false,
            ..DecodeOptions::default()
        };
        assert_eq!(
            decode_record(&rec, &opts),
            Err(DecodeError::BadMagic {
                magic: MESSAGE_MAGIC_CODE_V2
            })
        );
        // V2 with a short topic is legal too.
        let mut dst = vec![0u8; record_len(false, false, MessageVersion::V2, 0, 1, 0)];
        encode_record(
            &mut dst,
            &vector7_header(),
            MessageVersion::V2,
            b"",
            0,
            "T",
            b"",
        )
        .unwrap();
        assert_eq!(
            message(decode_record(&dst, &DecodeOptions::default())).topic,
            "T"
        );
    }

    #[test]
    fn encoder_rejects() {
        let hdr = vector7_header();
        let mut dst = vec![0u8; 100];
        assert_eq!(
            encode_record(
                &mut dst,
                &hdr,
                MessageVersion::V1,
                b"hi",
                0,
                "T",
                b"TAGS\x01A\x02"
            ),
            Err(EncodeError::BufferSize {
                expected: 101,
                actual: 100
            })
        );
        let long = "a".repeat(128);
        // 128 bytes: encode_record_to_vec picks V2; forcing V1 fails.
        assert_eq!(
            peek_magic(&encode_record_to_vec(&hdr, b"", &long, b"").unwrap()),
            Some(MESSAGE_MAGIC_CODE_V2)
        );
        let mut d = vec![0u8; record_len(false, false, MessageVersion::V1, 0, 128, 0)];
        assert_eq!(
            encode_record(&mut d, &hdr, MessageVersion::V1, b"", 0, &long, b""),
            Err(EncodeError::TopicLength { len: 128, max: 127 })
        );
        assert_eq!(
            encode_record_to_vec(&hdr, b"", "", b""),
            Err(EncodeError::TopicLength { len: 0, max: 127 })
        );
        let big_props = vec![b'x'; MAX_PROPERTIES_LEN + 1];
        assert_eq!(
            encode_record_to_vec(&hdr, b"", "T", &big_props),
            Err(EncodeError::PropertiesTooLong {
                len: 32_768,
                max: 32_767
            })
        );
        let bad_flag = RecordHeader {
            sys_flag: 0x800,
            ..hdr
        };
        assert_eq!(
            encode_record_to_vec(&bad_flag, b"", "T", b""),
            Err(EncodeError::UnknownSysFlag { sys_flag: 0x800 })
        );
        // The caller's v6 bits are overwritten from the hosts.
        let wrong_bits = RecordHeader {
            sys_flag: 0x30,
            ..hdr
        };
        let rec = encode_record_to_vec(&wrong_bits, b"", "T", b"").unwrap();
        assert_eq!(
            message(decode_record(&rec, &DecodeOptions::default())).sys_flag,
            0
        );
    }

    #[test]
    fn decoder_rejects() {
        let opts = DecodeOptions::default();
        let base = VECTOR7.to_vec();
        let with = |pos: usize, bytes: &[u8]| {
            let mut r = base.clone();
            r[pos..pos + bytes.len()].copy_from_slice(bytes);
            r
        };
        // Incomplete.
        assert_eq!(
            decode_record(&base[..7], &opts),
            Err(DecodeError::Incomplete {
                needed: 8,
                available: 7
            })
        );
        assert_eq!(
            decode_record(&base[..100], &opts),
            Err(DecodeError::Incomplete {
                needed: 101,
                available: 100
            })
        );
        assert!(decode_record(&[], &opts).unwrap_err().is_incomplete());
        // Blank with too small a size.
        let mut blank = [0u8; 8];
        encode_blank(&mut blank, 7);
        assert_eq!(
            decode_record(&blank, &opts),
            Err(DecodeError::BadTotalSize { total_size: 7 })
        );
        encode_blank(&mut blank, -1);
        assert_eq!(
            decode_record(&blank, &opts),
            Err(DecodeError::BadTotalSize { total_size: -1 })
        );
        // Bad magic, including all zeros.
        assert_eq!(
            decode_record(&[0u8; 200], &opts),
            Err(DecodeError::BadMagic { magic: 0 })
        );
        // Bad total size.
        for ts in [0i32, -1, 91, i32::MIN] {
            assert_eq!(
                decode_record(&with(0, &ts.to_be_bytes()), &opts),
                Err(DecodeError::BadTotalSize { total_size: ts })
            );
        }
        let limited = DecodeOptions {
            max_total_size: 100,
            ..opts
        };
        assert_eq!(
            decode_record(&base, &limited),
            Err(DecodeError::BadTotalSize { total_size: 101 })
        );
        let limited = DecodeOptions {
            max_total_size: 101,
            ..opts
        };
        assert!(decode_record(&base, &limited).is_ok());
        // Unknown sysflag bits.
        let r = with(36, &0x800i32.to_be_bytes());
        assert_eq!(
            decode_record(&r, &opts),
            Err(DecodeError::BadSysFlag { sys_flag: 0x800 })
        );
        let lenient = DecodeOptions {
            reject_unknown_sysflag: false,
            ..opts
        };
        assert_eq!(message(decode_record(&r, &lenient)).sys_flag, 0x800);
        // A v6 bit on a 101-byte v4 record: too small for the v6 layout (103 + 2 + 1 ...).
        let r = with(36, &0x30i32.to_be_bytes());
        assert!(matches!(
            decode_record(&r, &opts),
            Err(DecodeError::BadTotalSize { .. })
        ));
        // Body length negative / too big.
        assert_eq!(
            decode_record(&with(84, &(-1i32).to_be_bytes()), &opts),
            Err(DecodeError::BadLength {
                field: "body",
                value: -1
            })
        );
        assert_eq!(
            decode_record(&with(84, &100i32.to_be_bytes()), &opts),
            Err(DecodeError::BadLength {
                field: "body",
                value: 100
            })
        );
        // Topic length 0, negative, running past the end.
        assert_eq!(
            decode_record(&with(90, &[0]), &opts),
            Err(DecodeError::BadLength {
                field: "topic",
                value: 0
            })
        );
        assert_eq!(
            decode_record(&with(90, &[0xFF]), &opts),
            Err(DecodeError::BadLength {
                field: "topic",
                value: -1
            })
        );
        assert_eq!(
            decode_record(&with(90, &[0x7F]), &opts),
            Err(DecodeError::BadLength {
                field: "topic",
                value: 127
            })
        );
        // Properties length negative / mismatching.
        assert_eq!(
            decode_record(&with(92, &(-1i16).to_be_bytes()), &opts),
            Err(DecodeError::BadLength {
                field: "properties",
                value: -1
            })
        );
        assert_eq!(
            decode_record(&with(92, &8i16.to_be_bytes()), &opts),
            Err(DecodeError::LengthMismatch {
                total_size: 101,
                computed: 102
            })
        );
        assert_eq!(
            decode_record(&with(92, &6i16.to_be_bytes()), &opts),
            Err(DecodeError::LengthMismatch {
                total_size: 101,
                computed: 100
            })
        );
        // Bad topic characters / UTF-8.
        let r = with(91, b"/");
        let topic_check = DecodeOptions {
            check_topic: true,
            ..opts
        };
        assert!(matches!(
            decode_record(&r, &topic_check),
            Err(DecodeError::BadTopic { .. })
        ));
        let no_topic_check = DecodeOptions {
            check_topic: false,
            ..opts
        };
        assert_eq!(message(decode_record(&r, &no_topic_check)).topic, "/");
        let r = with(91, &[0xFF]);
        assert!(matches!(
            decode_record(&r, &no_topic_check),
            Err(DecodeError::BadTopic { .. })
        ));
        // CRC.
        let r = with(88, b"ho");
        assert_eq!(
            decode_record(&r, &opts),
            Err(DecodeError::CrcMismatch {
                stored: 0x5893_2AAC,
                computed: crc32_masked(b"ho")
            })
        );
        let no_crc = DecodeOptions {
            check_crc: false,
            ..opts
        };
        assert_eq!(message(decode_record(&r, &no_crc)).body, b"ho");
        // Physical offset.
        let at = DecodeOptions {
            expected_physical_offset: Some(64),
            ..opts
        };
        assert_eq!(
            decode_record(&base, &at),
            Err(DecodeError::PhysicalOffsetMismatch {
                stored: 0,
                expected: 64
            })
        );
        // An empty body is not CRC-checked (RocketMQ checks only bodyLen > 0).
        let mut rec = encode_record_to_vec(&vector7_header(), b"", "T", b"").unwrap();
        rec[8..12].copy_from_slice(&123i32.to_be_bytes());
        assert_eq!(message(decode_record(&rec, &opts)).body_crc, 123);
    }

    /// Spec §16 item 17 (codec part): a CQ unit built from a record points back at it with the
    /// same size / queue / offset, and the msgId decodes to (store host, PHYSICALOFFSET).
    #[test]
    fn invariants_17() {
        let phy = 1_073_741_824;
        let hdr = RecordHeader {
            queue_id: 3,
            queue_offset: 42,
            physical_offset: phy,
            ..vector7_header()
        };
        let rec = encode_record_to_vec(&hdr, b"Hello RocketMQ", "TopicTest", b"TAGS\x01TagA\x02")
            .unwrap();
        let opts = DecodeOptions {
            expected_physical_offset: Some(phy),
            ..DecodeOptions::default()
        };
        let v = message(decode_record(&rec, &opts));
        let props = v.properties();
        let unit = CqUnit {
            phy_offset: v.physical_offset,
            size: v.total_size,
            tags_code: crate::hash::tags_code(props.tags()),
        };
        assert_eq!(
            unit.encode(),
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0x7C, 0, 0, 0, 0, 0, 0x27, 0xA8, 0x07]
        );
        assert_eq!(unit.size as usize, rec.len());
        assert_eq!((v.queue_id, v.queue_offset, v.topic), (3, 42, "TopicTest"));
        assert_eq!(
            decode_offset_msg_id(&v.msg_id()).unwrap(),
            (v.store_host, phy)
        );
        assert_eq!(v.msg_id(), "0A00000100002A9F0000000040000000");
    }

    #[test]
    fn error_display() {
        assert_eq!(
            DecodeError::BadMagic { magic: 0 }.to_string(),
            "bad magic code 0x00000000"
        );
        assert_eq!(
            DecodeError::BadLength {
                field: "topic",
                value: 0
            }
            .to_string(),
            "bad topic length 0"
        );
        assert!(!DecodeError::BadMagic { magic: 0 }.is_incomplete());
    }
}
