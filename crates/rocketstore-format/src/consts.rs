//! Constants of the RocketMQ store format (spec §3, §5, §6, §7.1) and of `MessageConst` /
//! `MessageSysFlag`. Everything here is re-exported at the crate root.

/// Magic code of a V1 commit-log record (`DA A3 20 A7`), spec §3.1.
pub const MESSAGE_MAGIC_CODE_V1: i32 = -626_843_481;
/// Magic code of a V2 commit-log record (`DA A3 20 AB`, 2-byte topic length, RocketMQ 5.1+), spec §3.1.
pub const MESSAGE_MAGIC_CODE_V2: i32 = -626_843_477;
/// Magic code of the end-of-file blank record (`CB D4 31 94`), spec §3.8.
pub const BLANK_MAGIC_CODE: i32 = -875_286_124;

/// Every commit-log append leaves at least this many bytes free so a blank header fits (§3.8).
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;
/// Size of one consume-queue unit (§5.1).
pub const CQ_STORE_UNIT_SIZE: usize = 20;
/// Size of one BatchConsumeQueue unit (RocketMQ 5.x, §13); informative only.
pub const BATCH_CQ_STORE_UNIT_SIZE: usize = 46;
/// Size of the `checkpoint` file (§7.1).
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Size of the index-file header (§6.1).
pub const INDEX_HEADER_SIZE: usize = 40;
/// Size of one index hash slot (§6.1).
pub const INDEX_SLOT_SIZE: usize = 4;
/// Size of one index entry (§6.1).
pub const INDEX_ENTRY_SIZE: usize = 20;

/// Maximum encoded properties length (`Short.MAX_VALUE`, §3.5).
pub const MAX_PROPERTIES_LEN: usize = 32_767;
/// Longest topic (bytes) that a V1 record can hold (signed 1-byte length, §3.1).
pub const MAX_TOPIC_LEN_V1: usize = 127;
/// Longest topic (bytes) accepted at all (§3.7).
pub const MAX_TOPIC_LEN: usize = 255;

/// Separator between a property name and its value (`char 1`).
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// Terminator after every property pair (`char 2`).
pub const PROPERTY_SEPARATOR: u8 = 2;

/// Default commit-log file size, 1 GiB (`mappedFileSizeCommitLog`, §2).
pub const DEFAULT_COMMITLOG_FILE_SIZE: u64 = 1_073_741_824;
/// Default consume-queue file size: 300,000 units × 20 bytes (§2).
pub const DEFAULT_CQ_FILE_SIZE: u64 = 6_000_000;
/// Default number of index hash slots (`maxHashSlotNum`, §6.1).
pub const DEFAULT_INDEX_HASH_SLOTS: u32 = 5_000_000;
/// Default number of index entries (`maxIndexNum`, §6.1).
pub const DEFAULT_INDEX_ENTRIES: u32 = 20_000_000;
/// Default `maxMessageSize`, 4 MiB (§3.7).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// Delay-level topic (§12.1).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Transactional half-message topic (§12.2).
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Transactional op-message topic (§12.2).
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Default `messageDelayLevel` table, levels 1..=18 (§5.2).
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// `MessageSysFlag` bits (§3.3). All values are `i32` like the on-disk SYSFLAG field.
pub mod sysflag {
    /// Bit 0: the body is compressed.
    pub const COMPRESSED_FLAG: i32 = 0x1;
    /// Bit 1: set by the broker for MULTI_TAG topics.
    pub const MULTI_TAGS_FLAG: i32 = 0x2;
    /// Transaction type "not a transaction" (`sysflag & 0xC == 0`).
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    /// Transaction type PREPARED (half message as sent by the producer).
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    /// Transaction type COMMIT.
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    /// Transaction type ROLLBACK.
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// Mask of the transaction-type bits 2-3.
    pub const TRANSACTION_MASK: i32 = 0xC;
    /// Bit 4: the born host is IPv6 (20-byte BORNHOST field).
    pub const BORNHOST_V6_FLAG: i32 = 0x10;
    /// Bit 5: the store host is IPv6 (20-byte STOREHOST field).
    pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
    /// Bit 6: inner-batch record that needs unwrapping (5.x).
    pub const NEED_UNWRAP_FLAG: i32 = 0x40;
    /// Bit 7: inner-batch / BatchCQ record (5.x).
    pub const INNER_BATCH_FLAG: i32 = 0x80;
    /// Bits 8-10: compression type (1 LZ4, 2 ZSTD, 3 ZLIB, 0 legacy ZLIB).
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
    /// Every bit RocketMQ defines; any other bit set is "unknown" for the decoder.
    pub const KNOWN_BITS: i32 = 0x7FF;

    /// The transaction type of a SYSFLAG value: `sys_flag & TRANSACTION_MASK`.
    pub fn transaction_type(sys_flag: i32) -> i32 {
        sys_flag & TRANSACTION_MASK
    }

    /// The compression type `(sys_flag & 0x700) >> 8` (0 means legacy zlib when bit 0 is set).
    pub fn compression_type(sys_flag: i32) -> i32 {
        (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    }
}

/// `MessageConst` property names (§3.5), exact strings as stored on disk.
pub mod property {
    macro_rules! names {
        ($($(#[$doc:meta])* $name:ident = $value:literal;)*) => {
            $( $(#[$doc])* pub const $name: &str = $value; )*
        };
    }

    names! {
        /// `KEYS`: business keys separated by a single space ([`KEY_SEPARATOR`]).
        KEYS = "KEYS";
        /// `TAGS`: the message tag; its Java hash is the CQ tagsCode.
        TAGS = "TAGS";
        /// `WAIT`: wait-store-msg-ok, `"true"`/`"false"` (absent means true).
        WAIT = "WAIT";
        /// `DELAY`: delay level as a decimal int.
        DELAY = "DELAY";
        /// `RETRY_TOPIC`.
        RETRY_TOPIC = "RETRY_TOPIC";
        /// `REAL_TOPIC`: original topic of a delayed / half message.
        REAL_TOPIC = "REAL_TOPIC";
        /// `REAL_QID`: original queue id of a delayed / half message.
        REAL_QID = "REAL_QID";
        /// `TRAN_MSG`: `"true"` on transactional half messages.
        TRAN_MSG = "TRAN_MSG";
        /// `PGROUP`: producer group.
        PGROUP = "PGROUP";
        /// `MIN_OFFSET`.
        MIN_OFFSET = "MIN_OFFSET";
        /// `MAX_OFFSET`.
        MAX_OFFSET = "MAX_OFFSET";
        /// `BUYER_ID`.
        BUYER_ID = "BUYER_ID";
        /// `ORIGIN_MESSAGE_ID`.
        ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID";
        /// `TRANSFER_FLAG`.
        TRANSFER_FLAG = "TRANSFER_FLAG";
        /// `CORRECTION_FLAG`.
        CORRECTION_FLAG = "CORRECTION_FLAG";
        /// `MQ2_FLAG`.
        MQ2_FLAG = "MQ2_FLAG";
        /// `RECONSUME_TIME`.
        RECONSUME_TIME = "RECONSUME_TIME";
        /// `MSG_REGION`.
        MSG_REGION = "MSG_REGION";
        /// `TRACE_ON` (Java `PROPERTY_TRACE_SWITCH`).
        TRACE_ON = "TRACE_ON";
        /// `UNIQ_KEY`: client message id (Java `PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`).
        UNIQ_KEY = "UNIQ_KEY";
        /// `EXTEND_UNIQ_INFO`.
        EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO";
        /// `MAX_RECONSUME_TIMES`.
        MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES";
        /// `CONSUME_START_TIME`.
        CONSUME_START_TIME = "CONSUME_START_TIME";
        /// `INNER_NUM`: number of messages in an inner batch.
        INNER_NUM = "INNER_NUM";
        /// `INNER_BASE`: base queue offset of an inner batch.
        INNER_BASE = "INNER_BASE";
        /// `DUP_INFO`.
        DUP_INFO = "DUP_INFO";
        /// `CHECK_IMMUNITY_TIME_IN_SECONDS`.
        CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS";
        /// `TRAN_PREPARED_QUEUE_OFFSET`.
        TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET";
        /// `__transactionId__`.
        TRANSACTION_ID = "__transactionId__";
        /// `TRANSACTION_CHECK_TIMES`.
        TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES";
        /// `INSTANCE_ID`.
        INSTANCE_ID = "INSTANCE_ID";
        /// `CORRELATION_ID`.
        CORRELATION_ID = "CORRELATION_ID";
        /// `REPLY_TO_CLIENT`.
        REPLY_TO_CLIENT = "REPLY_TO_CLIENT";
        /// `TTL`.
        TTL = "TTL";
        /// `ARRIVE_TIME`.
        ARRIVE_TIME = "ARRIVE_TIME";
        /// `PUSH_REPLY_TIME`.
        PUSH_REPLY_TIME = "PUSH_REPLY_TIME";
        /// `CLUSTER`: broker cluster name, added by the broker on every send.
        CLUSTER = "CLUSTER";
        /// `MSG_TYPE`.
        MSG_TYPE = "MSG_TYPE";
        /// `POP_CK`.
        POP_CK = "POP_CK";
        /// `POP_CK_OFFSET`.
        POP_CK_OFFSET = "POP_CK_OFFSET";
        /// `1ST_POP_TIME` (Java `PROPERTY_FIRST_POP_TIME`).
        FIRST_POP_TIME = "1ST_POP_TIME";
        /// `__SHARDINGKEY` (Java `PROPERTY_SHARDING_KEY`).
        SHARDING_KEY = "__SHARDINGKEY";
        /// `PROPERTY_FORWARD_QUEUE_ID`.
        FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID";
        /// `REDIRECT`.
        REDIRECT = "REDIRECT";
        /// `INNER_MULTI_DISPATCH` (LMQ).
        INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH";
        /// `INNER_MULTI_QUEUE_OFFSET` (LMQ).
        INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET";
        /// `TRACE_CONTEXT`.
        TRACE_CONTEXT = "TRACE_CONTEXT";
        /// `TIMER_DELAY_SEC`.
        TIMER_DELAY_SEC = "TIMER_DELAY_SEC";
        /// `TIMER_DELIVER_MS`.
        TIMER_DELIVER_MS = "TIMER_DELIVER_MS";
        /// `TIMER_ENQUEUE_MS`.
        TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS";
        /// `TIMER_DEQUEUE_MS`.
        TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS";
        /// `TIMER_ROLL_TIMES`.
        TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES";
        /// `TIMER_OUT_MS`.
        TIMER_OUT_MS = "TIMER_OUT_MS";
        /// `TIMER_DEL_UNIQKEY`.
        TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY";
        /// `TIMER_DELAY_LEVEL`.
        TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL";
        /// `TIMER_DELAY_MS`.
        TIMER_DELAY_MS = "TIMER_DELAY_MS";
        /// `__BORNHOST` (Java `PROPERTY_BORN_HOST`).
        BORN_HOST = "__BORNHOST";
        /// `BORN_TIMESTAMP`.
        BORN_TIMESTAMP = "BORN_TIMESTAMP";
        /// `__CRC32#`: whole-record CRC property (5.2+, §3.6).
        CRC32 = "__CRC32#";
        /// `DLQ_ORIGIN_TOPIC`.
        DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC";
        /// `DLQ_ORIGIN_MESSAGE_ID`.
        DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID";
        /// Names starting with this prefix are transient and never stored.
        TRANSIENT_PREFIX = "__RMQ.TRANSIENT.";
        /// Separator between the keys inside `KEYS`.
        KEY_SEPARATOR = " ";
    }

    /// Length of the `__CRC32#` property including separators: 8 + 1 + 10 + 1 (§3.6).
    pub const CRC32_RESERVED_LEN: usize = 20;

    /// RocketMQ's `MessageConst.STRING_HASH_SET` (HEAD): system property names a user may not set
    /// through `Message.putUserProperty`.
    pub const RESERVED: &[&str] = &[
        TRACE_ON,
        MSG_REGION,
        KEYS,
        TAGS,
        WAIT,
        DELAY,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QID,
        TRAN_MSG,
        PGROUP,
        MIN_OFFSET,
        MAX_OFFSET,
        BUYER_ID,
        ORIGIN_MESSAGE_ID,
        TRANSFER_FLAG,
        CORRECTION_FLAG,
        MQ2_FLAG,
        RECONSUME_TIME,
        UNIQ_KEY,
        MAX_RECONSUME_TIMES,
        CONSUME_START_TIME,
        POP_CK,
        POP_CK_OFFSET,
        FIRST_POP_TIME,
        TRAN_PREPARED_QUEUE_OFFSET,
        DUP_INFO,
        EXTEND_UNIQ_INFO,
        INSTANCE_ID,
        CORRELATION_ID,
        REPLY_TO_CLIENT,
        TTL,
        ARRIVE_TIME,
        PUSH_REPLY_TIME,
        CLUSTER,
        MSG_TYPE,
        INNER_MULTI_QUEUE_OFFSET,
        TIMER_DELAY_MS,
        TIMER_DELAY_SEC,
        TIMER_DELIVER_MS,
        TIMER_ENQUEUE_MS,
        TIMER_DEQUEUE_MS,
        TIMER_ROLL_TIMES,
        TIMER_OUT_MS,
        TIMER_DEL_UNIQKEY,
        TIMER_DELAY_LEVEL,
        BORN_HOST,
        BORN_TIMESTAMP,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
        CRC32,
    ];

    /// Whether `name` is in [`RESERVED`] (exact, case-sensitive match).
    pub fn is_reserved(name: &str) -> bool {
        RESERVED.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_1_magic_bytes() {
        assert_eq!(
            MESSAGE_MAGIC_CODE_V1.to_be_bytes(),
            [0xDA, 0xA3, 0x20, 0xA7]
        );
        assert_eq!(
            MESSAGE_MAGIC_CODE_V2.to_be_bytes(),
            [0xDA, 0xA3, 0x20, 0xAB]
        );
        assert_eq!(BLANK_MAGIC_CODE.to_be_bytes(), [0xCB, 0xD4, 0x31, 0x94]);
        assert_eq!(BLANK_MAGIC_CODE as u32, 0xCBD4_3194);
    }

    #[test]
    fn sysflag_helpers() {
        assert_eq!(sysflag::transaction_type(0x7FF), 0xC);
        assert_eq!(
            sysflag::transaction_type(0x14),
            sysflag::TRANSACTION_PREPARED_TYPE
        );
        assert_eq!(sysflag::compression_type(0x201), 2);
        assert_eq!(sysflag::KNOWN_BITS, 0x7FF);
    }

    #[test]
    fn reserved_set() {
        assert_eq!(property::RESERVED.len(), 51);
        assert!(property::is_reserved("KEYS"));
        assert!(property::is_reserved("__CRC32#"));
        assert!(!property::is_reserved("__transactionId__"));
        assert!(!property::is_reserved("INNER_NUM"));
        assert!(!property::is_reserved("keys"));
    }

    #[test]
    fn vector_3_sizes() {
        assert_eq!(DEFAULT_CQ_FILE_SIZE, 300_000 * CQ_STORE_UNIT_SIZE as u64);
        assert_eq!(300_000 * BATCH_CQ_STORE_UNIT_SIZE, 13_800_000);
        assert_eq!(CHECKPOINT_FILE_SIZE, 4096);
    }
}
