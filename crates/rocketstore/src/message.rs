//! Public message types: what a put takes and returns, and what a read returns.

use rocketstore_format::{
    offset_msg_id, sysflag, HostAddr, MessageVersion, Properties, RecordHeader, RecordView,
};

/// RocketMQ's `PutMessageStatus`. A status, not an error: `FlushDiskTimeout` means the message
/// was written but is not known to be durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PutStatus {
    /// Written (and, under SYNC_FLUSH, flushed).
    PutOk,
    /// Written, but the sync flush did not finish within `sync_flush_timeout`.
    FlushDiskTimeout,
    /// Replication timed out (not produced by a standalone store).
    FlushSlaveTimeout,
    /// No replica (not produced by a standalone store).
    SlaveNotAvailable,
    /// The store does not accept writes (disk full, shutting down).
    ServiceNotAvailable,
    /// The next commit log file could not be created; the message was not written.
    CreateMappedFileFailed,
    /// The message was refused (too large, invalid).
    MessageIllegal,
    /// The properties are too long.
    PropertiesSizeExceeded,
    /// The put lock was held too long.
    OsPageCacheBusy,
    /// Anything else.
    UnknownError,
}

impl PutStatus {
    /// Every status, in declaration order (RocketMQ's `PutMessageStatus` order).
    pub const ALL: [PutStatus; 10] = [
        PutStatus::PutOk,
        PutStatus::FlushDiskTimeout,
        PutStatus::FlushSlaveTimeout,
        PutStatus::SlaveNotAvailable,
        PutStatus::ServiceNotAvailable,
        PutStatus::CreateMappedFileFailed,
        PutStatus::MessageIllegal,
        PutStatus::PropertiesSizeExceeded,
        PutStatus::OsPageCacheBusy,
        PutStatus::UnknownError,
    ];

    /// RocketMQ's name (`"PUT_OK"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PutStatus::PutOk => "PUT_OK",
            PutStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            PutStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            PutStatus::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            PutStatus::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
            PutStatus::MessageIllegal => "MESSAGE_ILLEGAL",
            PutStatus::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            PutStatus::OsPageCacheBusy => "OS_PAGE_CACHE_BUSY",
            PutStatus::UnknownError => "UNKNOWN_ERROR",
        }
    }

    /// True for `PutOk`.
    pub fn is_ok(self) -> bool {
        self == PutStatus::PutOk
    }
}

/// The result of putting one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutResult {
    /// The outcome.
    pub status: PutStatus,
    /// Absolute commit log offset of the record (-1 if it was not written).
    pub commitlog_offset: i64,
    /// Offset in its consume queue (0 for PREPARED/ROLLBACK transaction records, -1 if not
    /// written).
    pub queue_offset: i64,
    /// Record size in bytes.
    pub wrote_bytes: i32,
    /// STORETIMESTAMP written into the record.
    pub store_timestamp: i64,
    /// STOREHOST written into the record.
    pub store_host: HostAddr,
}

impl PutResult {
    /// The offset message id (store host + commit log offset, uppercase hex).
    pub fn msg_id(&self) -> String {
        if self.commitlog_offset < 0 {
            return String::new();
        }
        offset_msg_id(&self.store_host, self.commitlog_offset)
    }
}

/// Transaction type of a record (SYSFLAG bits 2-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransactionType {
    /// An ordinary message.
    #[default]
    NotType,
    /// A prepared (half) record: queue offset 0, not dispatched to a consume queue.
    Prepared,
    /// A commit record: dispatched like an ordinary message.
    Commit,
    /// A rollback record: queue offset 0, not dispatched, not indexed.
    Rollback,
}

impl TransactionType {
    /// The SYSFLAG bits.
    pub fn sys_flag(self) -> i32 {
        match self {
            TransactionType::NotType => sysflag::TRANSACTION_NOT_TYPE,
            TransactionType::Prepared => sysflag::TRANSACTION_PREPARED_TYPE,
            TransactionType::Commit => sysflag::TRANSACTION_COMMIT_TYPE,
            TransactionType::Rollback => sysflag::TRANSACTION_ROLLBACK_TYPE,
        }
    }
}

/// A message to put. Only `topic` and `body` are required; everything else has RocketMQ's
/// default.
#[derive(Debug, Clone, Default)]
pub struct PutMessage<'a> {
    /// Topic: `[%|a-zA-Z0-9_-]`, 1 to 255 bytes (V2 records above 127).
    pub topic: &'a str,
    /// Body bytes, at most `max_message_size`.
    pub body: &'a [u8],
    /// Queue id, `0 <= queue_id < max_queue_nums_per_topic`.
    pub queue_id: i32,
    /// The `TAGS` property.
    pub tags: Option<&'a str>,
    /// The `KEYS` property as parts, stored joined with one space
    /// ([`rocketstore_format::keys::push_keys_value`]): a list of keys (a key containing a space
    /// is refused), or [`rocketstore_format::keys::key_parts`] of one string (stored as is).
    pub keys: &'a [&'a str],
    /// User properties (reserved names such as TAGS or KEYS are refused here).
    pub properties: &'a [(&'a str, &'a str)],
    /// Producer flag.
    pub flag: i32,
    /// Producer timestamp in epoch ms; now when `None`.
    pub born_timestamp: Option<i64>,
    /// Producer address; the store host when `None`.
    pub born_host: Option<HostAddr>,
    /// Broker address; the configured `store_host` when `None`.
    pub store_host: Option<HostAddr>,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// Transaction type. A `Prepared` (half) message also gets `TRAN_MSG=true`, and
    /// `PGROUP=<producer_group>` when a group is given, as a RocketMQ producer sets them.
    pub transaction: TransactionType,
    /// Producer group: written as `PGROUP` on `Prepared` messages (ignored otherwise).
    pub producer_group: Option<&'a str>,
    /// PREPARED TRANSACTION OFFSET (commit records point at their half message).
    pub prepared_transaction_offset: i64,
    /// An explicit `UNIQ_KEY`; generated when `None` and `auto_uniq_key` is on.
    pub uniq_key: Option<&'a str>,
    /// Delay level (1-based, clamped to the level table): the message is stored in
    /// `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, with `REAL_TOPIC`, `REAL_QID` and `DELAY`, as
    /// RocketMQ's broker hook does. 0 means no delay.
    pub delay_level: i32,
    /// The codec `body` is already compressed with, as a RocketMQ producer compresses it
    /// ([`crate::compression`]): the record gets SYSFLAG bit 0 and the codec's type in bits
    /// 8-10. `None`: the body is stored as a plain body.
    pub compression: Option<crate::compression::Compression>,
}

/// A record read back from the commit log, decoded and owned.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Topic.
    pub topic: String,
    /// TOTALSIZE.
    pub store_size: i32,
    /// Body bytes.
    pub body: Vec<u8>,
    /// BODYCRC as stored.
    pub body_crc: i32,
    /// QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET (the absolute commit log offset), SYSFLAG,
    /// BORNTIMESTAMP (epoch ms), BORNHOST, STORETIMESTAMP (epoch ms), STOREHOST,
    /// RECONSUMETIMES and PREPARED TRANSACTION OFFSET; the message dereferences to it.
    pub header: RecordHeader,
    /// Properties (last value wins for repeated names).
    pub properties: Properties,
    /// Record format version.
    pub version: MessageVersion,
}

impl std::ops::Deref for StoredMessage {
    type Target = RecordHeader;

    fn deref(&self) -> &RecordHeader {
        &self.header
    }
}

impl StoredMessage {
    /// Decodes an owned message from a record view.
    pub fn from_view(v: &RecordView<'_>) -> Self {
        Self {
            topic: v.topic.to_string(),
            store_size: v.total_size,
            body: v.body.to_vec(),
            body_crc: v.body_crc,
            header: v.header,
            properties: v.properties(),
            version: v.version,
        }
    }

    /// The absolute commit log offset (PHYSICALOFFSET).
    pub fn commitlog_offset(&self) -> i64 {
        self.header.physical_offset
    }

    /// The `TAGS` property.
    pub fn tags(&self) -> Option<&str> {
        self.properties.tags()
    }

    /// The `KEYS` property split on spaces.
    pub fn keys(&self) -> Vec<&str> {
        self.properties.keys_list()
    }

    /// The `UNIQ_KEY` property.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.uniq_key()
    }

    /// The offset message id.
    pub fn msg_id(&self) -> String {
        offset_msg_id(&self.store_host, self.physical_offset)
    }

    /// True if the body CRC matches the body.
    pub fn crc_ok(&self) -> bool {
        rocketstore_format::crc32_masked(&self.body) == self.body_crc
    }
}

/// RocketMQ's `GetMessageStatus`: the outcome of a read, never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GetStatus {
    /// Messages were found.
    Found,
    /// Entries were scanned but none matched the subscription.
    NoMatchedMessage,
    /// The first needed commit log record was already deleted.
    MessageWasRemoving,
    /// The consume queue unit at the offset could not be read (its file is gone).
    OffsetFoundNull,
    /// The offset is beyond the queue's end by more than one.
    OffsetOverflowBadly,
    /// The offset is exactly the queue's end (nothing new yet).
    OffsetOverflowOne,
    /// The offset is below the queue's first offset.
    OffsetTooSmall,
    /// The queue does not exist.
    NoMatchedLogicQueue,
    /// The queue exists but has never held a message.
    NoMessageInQueue,
    /// (Broker layer) the consumer must reset its offset.
    OffsetReset,
}

impl GetStatus {
    /// RocketMQ's name (`"FOUND"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GetStatus::Found => "FOUND",
            GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
            GetStatus::OffsetReset => "OFFSET_RESET",
        }
    }
}

/// The result of `get_message` / `pull`.
#[derive(Debug, Clone, PartialEq)]
pub struct GetResult {
    /// What happened.
    pub status: GetStatus,
    /// Where the next read should start (RocketMQ's nextBeginOffset rules).
    pub next_begin_offset: i64,
    /// The queue's first offset.
    pub min_offset: i64,
    /// The queue's end offset (next to be written).
    pub max_offset: i64,
    /// The messages, in queue order.
    pub messages: Vec<StoredMessage>,
}

/// The result of `query_message`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    /// Messages whose KEYS or UNIQ_KEY equal the key, ascending commit log offset.
    pub messages: Vec<StoredMessage>,
    /// endTimestamp of the newest index file.
    pub index_last_update_timestamp: i64,
    /// endPhyOffset of the newest index file.
    pub index_last_update_phy_offset: i64,
}

#[cfg(test)]
mod tests {
    use super::PutStatus;

    #[test]
    fn put_status_all_lists_every_status_once_in_declaration_order() {
        for (i, s) in PutStatus::ALL.iter().enumerate() {
            // Exhaustive: a new status fails to compile here until it is placed in ALL.
            let position = match s {
                PutStatus::PutOk => 0,
                PutStatus::FlushDiskTimeout => 1,
                PutStatus::FlushSlaveTimeout => 2,
                PutStatus::SlaveNotAvailable => 3,
                PutStatus::ServiceNotAvailable => 4,
                PutStatus::CreateMappedFileFailed => 5,
                PutStatus::MessageIllegal => 6,
                PutStatus::PropertiesSizeExceeded => 7,
                PutStatus::OsPageCacheBusy => 8,
                PutStatus::UnknownError => 9,
            };
            assert_eq!(position, i, "{}", s.as_str());
        }
    }
}
