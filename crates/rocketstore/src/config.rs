//! Store configuration, named after RocketMQ's `MessageStoreConfig` in snake_case, with
//! RocketMQ's defaults.
//!
//! Every field is listed in [`StoreConfig::fields`] with its default, its accepted range and the
//! RocketMQ name it mirrors; the Python binding and the docs are generated from that table. Set
//! fields by name with [`StoreConfig::set`], which validates the value against the range.

use std::fmt;
use std::str::FromStr;

use rocketstore_format::HostAddr;

use crate::error::{Error, Result};

/// How the commit log is made durable (RocketMQ `FlushDiskType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushDiskType {
    /// A background service flushes every `flush_interval_commit_log` ms; puts return at once.
    #[default]
    AsyncFlush,
    /// Group commit: a put returns only after its bytes are flushed (or with
    /// `FLUSH_DISK_TIMEOUT` after `sync_flush_timeout` ms).
    SyncFlush,
}

impl FlushDiskType {
    /// RocketMQ's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
    }
}

impl FromStr for FlushDiskType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
            other => Err(format!(
                "expected \"ASYNC_FLUSH\" or \"SYNC_FLUSH\", got {other:?}"
            )),
        }
    }
}

/// What recovery may do with damaged commit log data (names from tikv/raft-engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Any damage, even in the unflushed tail, fails the open with a corruption error.
    AbsoluteConsistency,
    /// Damage after the durable (flushed) offset recorded in the checkpoint is a torn tail and is
    /// truncated; damage below it fails the open with a corruption error.
    #[default]
    TolerateTailCorruption,
    /// Truncate at the first damaged record wherever it is (data after it is dropped).
    TolerateAnyCorruption,
    /// Like `TolerateTailCorruption`, but damage below the durable offset does not fail the
    /// open: the damaged commit log file and every later one are preserved under
    /// `<root>/quarantine/<end>-<epoch ms>/` with a `report.json`, and the store opens with the
    /// intact data before the damage ([`crate::RecoveryReport::quarantine_dir`]).
    Quarantine,
}

impl RecoveryMode {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryMode::AbsoluteConsistency => "absolute_consistency",
            RecoveryMode::TolerateTailCorruption => "tolerate_tail_corruption",
            RecoveryMode::TolerateAnyCorruption => "tolerate_any_corruption",
            RecoveryMode::Quarantine => "quarantine",
        }
    }
}

impl FromStr for RecoveryMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "absolute_consistency" => Ok(RecoveryMode::AbsoluteConsistency),
            "tolerate_tail_corruption" => Ok(RecoveryMode::TolerateTailCorruption),
            "tolerate_any_corruption" => Ok(RecoveryMode::TolerateAnyCorruption),
            "quarantine" => Ok(RecoveryMode::Quarantine),
            other => Err(format!(
                "expected \"absolute_consistency\", \"tolerate_tail_corruption\", \
                 \"tolerate_any_corruption\" or \"quarantine\", got {other:?}"
            )),
        }
    }
}

/// A configuration value given by name (from Python keyword arguments, a properties file, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigValue {
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
}

impl fmt::Display for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Int(v) => write!(f, "{v}"),
            ConfigValue::Bool(v) => write!(f, "{v}"),
            ConfigValue::Str(v) => write!(f, "{v:?}"),
        }
    }
}

/// The kind of a configuration field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer within `[min, max]`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A boolean.
    Bool,
    /// A string; the doc lists the accepted values.
    Str,
}

/// Description of one configuration field.
#[derive(Debug, Clone)]
pub struct FieldInfo {
    /// snake_case name.
    pub name: &'static str,
    /// The RocketMQ `MessageStoreConfig` name it mirrors, or `None` for our own fields.
    pub rocketmq_name: Option<&'static str>,
    /// Kind and range.
    pub kind: FieldKind,
    /// The default, rendered.
    pub default: String,
    /// What it does.
    pub doc: &'static str,
}

macro_rules! store_config {
    (
        ints { $( $(#[doc = $idoc:literal])+ $iname:ident : $ity:ty = $idef:expr, [$imin:expr, $imax:expr], $irmq:expr; )* }
        bools { $( $(#[doc = $bdoc:literal])+ $bname:ident = $bdef:expr, $brmq:expr; )* }
    ) => {
        /// Store configuration. Construct with [`StoreConfig::default`] and adjust with
        /// [`StoreConfig::set`] (validated) or by assigning fields and calling
        /// [`StoreConfig::validate`].
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub struct StoreConfig {
            $( $(#[doc = $idoc])+ #[doc = ""] #[doc = concat!("Default: `", stringify!($idef), "`. Range: `", stringify!($imin), "..=", stringify!($imax), "`.")] pub $iname: $ity, )*
            $( $(#[doc = $bdoc])+ #[doc = ""] #[doc = concat!("Default: `", stringify!($bdef), "`.")] pub $bname: bool, )*
            /// `ASYNC_FLUSH` or `SYNC_FLUSH` (RocketMQ `flushDiskType`). Default: `ASYNC_FLUSH`.
            pub flush_disk_type: FlushDiskType,
            /// What recovery may truncate (ours). Default: `tolerate_tail_corruption`.
            pub recovery_mode: RecoveryMode,
            /// Hours of the day (`;`-separated, local time) at which expired commit log files are
            /// deleted (RocketMQ `deleteWhen`). Default: `"04"`.
            pub delete_when: String,
            /// Delay level table (RocketMQ `messageDelayLevel`). Default:
            /// `"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"`.
            pub message_delay_level: String,
            /// The broker address written into STOREHOST and offset message ids (RocketMQ
            /// `brokerIP1` + `listenPort`). Default: `127.0.0.1:10911`.
            pub store_host: HostAddr,
        }

        impl Default for StoreConfig {
            fn default() -> Self {
                Self {
                    $( $iname: $idef, )*
                    $( $bname: $bdef, )*
                    flush_disk_type: FlushDiskType::AsyncFlush,
                    recovery_mode: RecoveryMode::TolerateTailCorruption,
                    delete_when: "04".to_string(),
                    message_delay_level: rocketstore_format::DEFAULT_MESSAGE_DELAY_LEVEL.to_string(),
                    store_host: default_store_host(),
                }
            }
        }

        impl StoreConfig {
            /// Every field: name, RocketMQ name, kind/range, default and doc.
            pub fn fields() -> Vec<FieldInfo> {
                let mut v = vec![
                    $( FieldInfo {
                        name: stringify!($iname),
                        rocketmq_name: $irmq,
                        kind: FieldKind::Int { min: ($imin) as i64, max: ($imax) as i64 },
                        default: ($idef).to_string(),
                        doc: concat!($($idoc, "\n"),+),
                    }, )*
                    $( FieldInfo {
                        name: stringify!($bname),
                        rocketmq_name: $brmq,
                        kind: FieldKind::Bool,
                        default: ($bdef).to_string(),
                        doc: concat!($($bdoc, "\n"),+),
                    }, )*
                ];
                v.extend(Self::str_fields());
                v
            }

            /// Sets a field by name, checking its type and range.
            ///
            /// # Errors
            /// [`Error::Config`] for an unknown name, a wrong type or an out-of-range value.
            pub fn set(&mut self, key: &str, value: ConfigValue) -> Result<()> {
                match key {
                    $( stringify!($iname) => {
                        let v = int_value(key, &value, ($imin) as i64, ($imax) as i64)?;
                        self.$iname = <$ity>::try_from(v).map_err(|_| config_err(key, "out of range"))?;
                        Ok(())
                    } )*
                    $( stringify!($bname) => {
                        self.$bname = bool_value(key, &value)?;
                        Ok(())
                    } )*
                    _ => self.set_str_field(key, value),
                }
            }

            /// Reads a field by name.
            pub fn get(&self, key: &str) -> Option<ConfigValue> {
                match key {
                    $( stringify!($iname) => Some(ConfigValue::Int(self.$iname as i64)), )*
                    $( stringify!($bname) => Some(ConfigValue::Bool(self.$bname)), )*
                    _ => self.get_str_field(key),
                }
            }

            fn check_ranges(&self) -> Result<()> {
                $( {
                    let v = self.$iname as i128;
                    if v < ($imin) as i128 || v > ($imax) as i128 {
                        return Err(config_err(stringify!($iname), &format!(
                            "{} is outside the range {} to {}", v, $imin, $imax)));
                    }
                } )*
                Ok(())
            }
        }
    };
}

store_config! {
    ints {
        /// Size of each commit log file in bytes (RocketMQ `mappedFileSizeCommitLog`). When a
        /// store already has files, their size wins.
        mapped_file_size_commit_log: u64 = 1024 * 1024 * 1024, [4096, i32::MAX], Some("mappedFileSizeCommitLog");
        /// Size of each consume queue file in bytes, rounded up to a multiple of 20 (RocketMQ
        /// `mappedFileSizeConsumeQueue`; 300,000 units).
        mapped_file_size_consume_queue: u64 = 300_000 * 20, [20, i32::MAX], Some("mappedFileSizeConsumeQueue");
        /// Largest accepted body in bytes (RocketMQ `maxMessageSize`). Whole records may be up to
        /// this plus 64 KiB.
        max_message_size: u64 = 4 * 1024 * 1024, [1, 1 << 30], Some("maxMessageSize");
        /// Queue ids must be below this (ours; RocketMQ bounds them by a topic's queue count).
        max_queue_nums_per_topic: u64 = 1024, [1, 65536], None;
        /// Async flush period in ms (RocketMQ `flushIntervalCommitLog`).
        flush_interval_commit_log: u64 = 500, [1, 3_600_000], Some("flushIntervalCommitLog");
        /// Pages (4 KiB) that must be dirty before an async flush runs (RocketMQ
        /// `flushCommitLogLeastPages`).
        flush_commit_log_least_pages: u64 = 4, [0, 1 << 20], Some("flushCommitLogLeastPages");
        /// At least this often (ms), flush whatever is dirty (RocketMQ
        /// `flushCommitLogThoroughInterval`).
        flush_commit_log_thorough_interval: u64 = 10_000, [0, 3_600_000], Some("flushCommitLogThoroughInterval");
        /// Under ASYNC_FLUSH, start the kernel's writeback of the commit log every time this many
        /// bytes have been written since the last start, without waiting for it (ours, like
        /// RocksDB's `bytes_per_sync`; Linux `sync_file_range`). The disk then writes while the
        /// writer goes on, and a flush or close finds little left to wait for. Only a call that
        /// appends at least 8 KiB of records starts it (single puts, which store into the mapping,
        /// would have pages written back under the writer; their bytes go with the timed flush or
        /// the next such call). Bytes are durable only once a flush covers them, as without it. 0
        /// turns it off.
        flush_commit_log_writeback_bytes: u64 = 4 * 1024 * 1024, [0, 1 << 30], None;
        /// Commit service period in ms, transient pool only (RocketMQ `commitIntervalCommitLog`).
        commit_interval_commit_log: u64 = 200, [1, 3_600_000], Some("commitIntervalCommitLog");
        /// Pages that must be written before a commit runs (RocketMQ `commitCommitLogLeastPages`).
        commit_commit_log_least_pages: u64 = 4, [0, 1 << 20], Some("commitCommitLogLeastPages");
        /// At least this often (ms), commit whatever is written (RocketMQ
        /// `commitCommitLogThoroughInterval`).
        commit_commit_log_thorough_interval: u64 = 200, [0, 3_600_000], Some("commitCommitLogThoroughInterval");
        /// How long a SYNC_FLUSH put waits for its flush before returning `FLUSH_DISK_TIMEOUT`, in
        /// ms (RocketMQ `syncFlushTimeout`).
        sync_flush_timeout: u64 = 5000, [1, 3_600_000], Some("syncFlushTimeout");
        /// Number of transient write buffers, each one commit log file in size (RocketMQ
        /// `transientStorePoolSize`).
        transient_store_pool_size: u64 = 5, [1, 64], Some("transientStorePoolSize");
        /// Under SYNC_FLUSH, force the file every this many pages while warming it (RocketMQ
        /// `flushLeastPagesWhenWarmMapedFile`).
        flush_least_pages_when_warm_mapped_file: u64 = 4096, [1, 1 << 20], Some("flushLeastPagesWhenWarmMapedFile");
        /// How long a writer waits for the allocate service before creating the next commit log
        /// file itself, in ms (RocketMQ `AllocateMappedFileService.waitTimeOut`).
        allocate_wait_timeout: u64 = 5000, [1, 3_600_000], None;
        /// Consume queue flush period in ms (RocketMQ `flushIntervalConsumeQueue`).
        flush_interval_consume_queue: u64 = 1000, [1, 3_600_000], Some("flushIntervalConsumeQueue");
        /// Pages a consume queue must have dirty before a flush (RocketMQ
        /// `flushConsumeQueueLeastPages`).
        flush_consume_queue_least_pages: u64 = 2, [0, 1 << 20], Some("flushConsumeQueueLeastPages");
        /// Thorough consume queue flush period in ms; also writes the checkpoint (RocketMQ
        /// `flushConsumeQueueThoroughInterval`).
        flush_consume_queue_thorough_interval: u64 = 60_000, [0, 3_600_000], Some("flushConsumeQueueThoroughInterval");
        /// How often, in ms, the schedule service saves its progress to
        /// `config/delayOffset.json` (RocketMQ `flushDelayOffsetInterval`); also saved on
        /// `flush` and at close.
        flush_delay_offset_interval: u64 = 10_000, [1, 3_600_000], Some("flushDelayOffsetInterval");
        /// Hash slots per index file (RocketMQ `maxHashSlotNum`). A key lookup walks every
        /// entry chained to its slot, about `1 + keys in the file / slots` of them: with more
        /// keys per file than slots, lookups slow down. A broker opening the store must use the
        /// same value.
        max_hash_slot_num: u64 = 5_000_000, [1, 100_000_000], Some("maxHashSlotNum");
        /// Entries per index file (RocketMQ `maxIndexNum`).
        max_index_num: u64 = 20_000_000, [2, 100_000_000], Some("maxIndexNum");
        /// Hours a commit log file is kept after its last write (RocketMQ `fileReservedTime`).
        file_reserved_time: u64 = 72, [0, 1_000_000], Some("fileReservedTime");
        /// Pause between two commit log file deletions in ms (RocketMQ
        /// `deleteCommitLogFilesInterval`).
        delete_commit_log_files_interval: u64 = 100, [0, 60_000], Some("deleteCommitLogFilesInterval");
        /// Pause after a consume queue deleted files, in ms (RocketMQ
        /// `deleteConsumeQueueFilesInterval`).
        delete_consume_queue_files_interval: u64 = 100, [0, 60_000], Some("deleteConsumeQueueFilesInterval");
        /// Most commit log files deleted per cleanup pass (RocketMQ `deleteFileBatchMax`).
        delete_file_batch_max: u64 = 10, [1, 10_000], Some("deleteFileBatchMax");
        /// A file still in use is deleted anyway after this many ms (RocketMQ
        /// `destroyMapedFileIntervalForcibly`).
        destroy_mapped_file_interval_forcibly: u64 = 120_000, [0, 3_600_000], Some("destroyMapedFileIntervalForcibly");
        /// Cleanup service period in ms (RocketMQ `cleanResourceInterval`).
        clean_resource_interval: u64 = 10_000, [1, 3_600_000], Some("cleanResourceInterval");
        /// Disk usage percentage above which expired files are deleted regardless of the hour
        /// (RocketMQ `diskMaxUsedSpaceRatio`).
        disk_max_used_space_ratio: u64 = 75, [10, 95], Some("diskMaxUsedSpaceRatio");
        /// Disk usage percentage above which puts are refused (RocketMQ
        /// `diskSpaceWarningLevelRatio`).
        disk_space_warning_level_ratio: u64 = 90, [35, 90], Some("diskSpaceWarningLevelRatio");
        /// Disk usage percentage above which files are deleted immediately (RocketMQ
        /// `diskSpaceCleanForciblyRatio`).
        disk_space_clean_forcibly_ratio: u64 = 85, [30, 85], Some("diskSpaceCleanForciblyRatio");
        /// Bytes one read may return when its messages are in memory (RocketMQ
        /// `maxTransferBytesOnMessageInMemory`).
        max_transfer_bytes_on_message_in_memory: u64 = 256 * 1024, [1, 1 << 30], Some("maxTransferBytesOnMessageInMemory");
        /// Messages one read may return when they are in memory (RocketMQ
        /// `maxTransferCountOnMessageInMemory`).
        max_transfer_count_on_message_in_memory: u64 = 32, [1, 1 << 20], Some("maxTransferCountOnMessageInMemory");
        /// Bytes one read may return when its messages are on disk (RocketMQ
        /// `maxTransferBytesOnMessageInDisk`).
        max_transfer_bytes_on_message_in_disk: u64 = 64 * 1024, [1, 1 << 30], Some("maxTransferBytesOnMessageInDisk");
        /// Messages one read may return when they are on disk (RocketMQ
        /// `maxTransferCountOnMessageInDisk`).
        max_transfer_count_on_message_in_disk: u64 = 8, [1, 1 << 20], Some("maxTransferCountOnMessageInDisk");
        /// Percentage of physical memory behind the commit log end within which messages count
        /// as "in memory" (RocketMQ `accessMessageInMemoryMaxRatio`).
        access_message_in_memory_max_ratio: u64 = 40, [0, 100], Some("accessMessageInMemoryMaxRatio");
        /// Bytes of consume queue scanned per read when filtering (RocketMQ
        /// `maxFilterMessageSize`).
        max_filter_message_size: u64 = 16_000, [20, 1 << 30], Some("maxFilterMessageSize");
        /// Most results of one key query (RocketMQ `maxMsgsNumBatch`).
        max_msgs_num_batch: u64 = 64, [1, 1 << 20], Some("maxMsgsNumBatch");
        /// Put-lock hold time in ms above which puts report `OS_PAGE_CACHE_BUSY` (RocketMQ
        /// `osPageCacheBusyTimeOutMills`).
        os_page_cache_busy_timeout_mills: u64 = 1000, [1, 3_600_000], Some("osPageCacheBusyTimeOutMills");
    }
    bools {
        /// Write messages into pooled buffers that a commit service writes into the file with
        /// `pwrite` (RocketMQ `transientStorePoolEnable`). Readers see only committed bytes.
        transient_store_pool_enable = false, Some("transientStorePoolEnable");
        /// Touch every page of a new commit log file, then `mlock` it (RocketMQ
        /// `warmMapedFileEnable`).
        warm_mapped_file_enable = false, Some("warmMapedFileEnable");
        /// Pre-fault the pages of new commit log files for writing (`MADV_POPULATE_WRITE`) in
        /// the allocate service, so the writer takes no page faults (ours): the file the writer
        /// is in whole, the next one as far as the writer's progress through its own file plus
        /// a quarter file, so it is complete when the writer reaches it and a write that stops
        /// early in a file does not zero the whole next one. With `pwrite_commit_log`, whose
        /// large appends need no fault, only a quarter file ahead of the appends stored into the
        /// mapping (calls under 8 KiB), stopped by a large call until the next such append. Not
        /// done with `transient_store_pool_enable`.
        populate_mapped_file = true, None;
        /// Append commit log records through a small reused staging buffer that is written
        /// into the file with `pwrite`, instead of storing them into the file's mapping (ours;
        /// the bytes are the same): no page fault, read-ahead or zero-fill of the file's pages,
        /// and no pre-fault. A call that appends under 8 KiB of records (a single `put`) still
        /// stores them into the mapping, where a system call would cost more than the faults,
        /// and `populate_mapped_file` pre-faults a quarter file ahead of such calls.
        /// Readers still read through the mapping. No effect with
        /// `transient_store_pool_enable` (its commit already `pwrite`s).
        pwrite_commit_log = true, None;
        /// Async flush sleeps its interval (true) or waits and can be woken by puts (false)
        /// (RocketMQ `flushCommitLogTimed`).
        flush_commit_log_timed = true, Some("flushCommitLogTimed");
        /// Verify body CRCs during recovery (RocketMQ `checkCRCOnRecover`).
        check_crc_on_recover = true, Some("checkCRCOnRecover");
        /// After a clean shutdown, start the open's commit log walk at the end that shutdown
        /// recorded in rocketstore's checkpoint extension (ours): a clean open then reads only what
        /// lies past that end (nothing, unless another writer appended), whatever the store's size.
        /// The price: damage at rest below that end (a flipped bit in a record, a deleted consume
        /// queue file) is not found by the open, only by `verify_store` or by reads; with the
        /// default (false) a clean open walks and checks the last three commit log files as
        /// RocketMQ does, and refuses or repairs what it finds. A store whose checkpoint has no
        /// extension (a broker's) always takes the three-file walk.
        normal_recovery_from_checkpoint = false, None;
        /// Append RocketMQ's whole-record CRC property `__CRC32#` to every record (RocketMQ
        /// `enabledAppendPropCRC`, 5.2+). RocketMQ's default is false; ours is true because the
        /// body CRC alone cannot detect damage to the header, topic or properties. Brokers read
        /// the property as an ordinary one.
        enabled_append_prop_crc = true, Some("enabledAppendPropCRC");
        /// Build index files (RocketMQ `messageIndexEnable`).
        message_index_enable = true, Some("messageIndexEnable");
        /// Delete expired files even when still in use once the disk is nearly full (RocketMQ
        /// `cleanFileForciblyEnable`).
        clean_file_forcibly_enable = true, Some("cleanFileForciblyEnable");
        /// Write V2 records (2-byte topic length) for topics longer than 127 bytes (RocketMQ
        /// `autoMessageVersionOnTopicLen`); when false such topics are refused.
        auto_message_version_on_topic_len = true, Some("autoMessageVersionOnTopicLen");
        /// Add a `UNIQ_KEY` property to messages that have none, as a 5.x broker does (ours).
        auto_uniq_key = true, None;
        /// Run the schedule service that re-delivers delayed messages (ours; the broker's
        /// `ScheduleMessageService`).
        schedule_service_enable = false, None;
        /// `fsync` a new file and its directory after creating it, and the directory after
        /// renaming or deleting files (ours). Under ASYNC_FLUSH a new commit log file's first
        /// flush does it, before any of its bytes count as flushed.
        fsync_directory = true, None;
        /// Run the background services on their own threads (ours). When false, tests drive each
        /// service's `run_once` by hand and the writer creates files itself.
        background_threads = true, None;
    }
}

fn default_store_host() -> HostAddr {
    HostAddr {
        ip: std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)),
        port: 10911,
    }
}

fn config_err(key: &str, reason: &str) -> Error {
    Error::Config {
        key: key.to_string(),
        reason: reason.to_string(),
    }
}

fn int_value(key: &str, value: &ConfigValue, min: i64, max: i64) -> Result<i64> {
    match value {
        ConfigValue::Int(v) if (min..=max).contains(v) => Ok(*v),
        ConfigValue::Int(v) => Err(config_err(
            key,
            &format!("{v} is outside the range {min} to {max}"),
        )),
        other => Err(config_err(
            key,
            &format!("expected an integer, got {other}"),
        )),
    }
}

fn bool_value(key: &str, value: &ConfigValue) -> Result<bool> {
    match value {
        ConfigValue::Bool(v) => Ok(*v),
        other => Err(config_err(key, &format!("expected a boolean, got {other}"))),
    }
}

fn str_value<'a>(key: &str, value: &'a ConfigValue) -> Result<&'a str> {
    match value {
        ConfigValue::Str(v) => Ok(v),
        other => Err(config_err(key, &format!("expected a string, got {other}"))),
    }
}

impl StoreConfig {
    /// `flush_commit_log_writeback_bytes` where it applies: ASYNC_FLUSH with background
    /// services (SYNC_FLUSH flushes after every put anyway); 0 elsewhere.
    pub(crate) fn writeback_bytes(&self) -> u64 {
        if self.flush_disk_type == FlushDiskType::AsyncFlush && self.background_threads {
            self.flush_commit_log_writeback_bytes
        } else {
            0
        }
    }

    /// New commit log files are pre-faulted: `populate_mapped_file`, unless messages go through
    /// the transient store pool (`pwrite`, which needs no fault). With `pwrite_commit_log` only
    /// ahead of the appends stored into the mapping (see `segment::allocator`).
    pub(crate) fn prefault_commit_log(&self) -> bool {
        self.populate_mapped_file && !self.transient_store_pool_enable
    }

    fn str_fields() -> Vec<FieldInfo> {
        let d = StoreConfig::default();
        vec![
            FieldInfo {
                name: "flush_disk_type",
                rocketmq_name: Some("flushDiskType"),
                kind: FieldKind::Str,
                default: d.flush_disk_type.as_str().to_string(),
                doc: "\"ASYNC_FLUSH\" (a service flushes periodically) or \"SYNC_FLUSH\" (group commit: a put returns after its bytes are flushed).\n",
            },
            FieldInfo {
                name: "recovery_mode",
                rocketmq_name: None,
                kind: FieldKind::Str,
                default: d.recovery_mode.as_str().to_string(),
                doc: "\"absolute_consistency\", \"tolerate_tail_corruption\", \"tolerate_any_corruption\" or \"quarantine\": what recovery may truncate (\"quarantine\": damage below the durable offset moves the damaged commit log file and every later one into the store's quarantine/ directory with a report.json, and the store opens with the data before the damage).\n",
            },
            FieldInfo {
                name: "delete_when",
                rocketmq_name: Some("deleteWhen"),
                kind: FieldKind::Str,
                default: d.delete_when.clone(),
                doc: "Hours of the day (\";\"-separated, 00-23, local time) at which expired commit log files are deleted.\n",
            },
            FieldInfo {
                name: "message_delay_level",
                rocketmq_name: Some("messageDelayLevel"),
                kind: FieldKind::Str,
                default: d.message_delay_level.clone(),
                doc: "Delay level table: space-separated durations with unit s, m, h or d; level n is the n-th.\n",
            },
            FieldInfo {
                name: "store_host",
                rocketmq_name: Some("brokerIP1:listenPort"),
                kind: FieldKind::Str,
                default: d.store_host.to_string(),
                doc: "The broker address (\"ip:port\" or \"[ipv6]:port\") written into STOREHOST and offset message ids.\n",
            },
        ]
    }

    fn set_str_field(&mut self, key: &str, value: ConfigValue) -> Result<()> {
        match key {
            "flush_disk_type" => {
                self.flush_disk_type = str_value(key, &value)?
                    .parse()
                    .map_err(|e: String| config_err(key, &e))?;
            }
            "recovery_mode" => {
                self.recovery_mode = str_value(key, &value)?
                    .parse()
                    .map_err(|e: String| config_err(key, &e))?;
            }
            "delete_when" => {
                let s = str_value(key, &value)?;
                parse_delete_when(s).map_err(|e| config_err(key, &e))?;
                self.delete_when = s.to_string();
            }
            "message_delay_level" => {
                let s = str_value(key, &value)?;
                rocketstore_format::delay_levels(s).map_err(|e| config_err(key, &e.to_string()))?;
                self.message_delay_level = s.to_string();
            }
            "store_host" => {
                let s = str_value(key, &value)?;
                self.store_host = s
                    .parse()
                    .map_err(|e: rocketstore_format::FieldError| config_err(key, &e.to_string()))?;
            }
            _ => {
                return Err(config_err(
                    key,
                    "unknown configuration key (see StoreConfig::fields())",
                ))
            }
        }
        Ok(())
    }

    fn get_str_field(&self, key: &str) -> Option<ConfigValue> {
        let s = match key {
            "flush_disk_type" => self.flush_disk_type.as_str().to_string(),
            "recovery_mode" => self.recovery_mode.as_str().to_string(),
            "delete_when" => self.delete_when.clone(),
            "message_delay_level" => self.message_delay_level.clone(),
            "store_host" => self.store_host.to_string(),
            _ => return None,
        };
        Some(ConfigValue::Str(s))
    }

    /// Checks every range and cross-field rule.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first offending field.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        parse_delete_when(&self.delete_when).map_err(|e| config_err("delete_when", &e))?;
        rocketstore_format::delay_levels(&self.message_delay_level)
            .map_err(|e| config_err("message_delay_level", &e.to_string()))?;
        if self.disk_space_clean_forcibly_ratio > self.disk_space_warning_level_ratio {
            return Err(config_err(
                "disk_space_clean_forcibly_ratio",
                "must not exceed disk_space_warning_level_ratio",
            ));
        }
        Ok(())
    }

    /// The consume queue file size actually used: rounded up to a multiple of 20 bytes.
    pub fn consume_queue_file_size(&self) -> u64 {
        self.mapped_file_size_consume_queue.div_ceil(20) * 20
    }

    /// The delay level table in milliseconds (level 1 first).
    pub fn delay_levels(&self) -> Vec<i64> {
        rocketstore_format::delay_levels(&self.message_delay_level).unwrap_or_default()
    }

    /// The largest accepted whole record: `max_message_size` + 64 KiB (RocketMQ 4.9/5.x rule).
    pub fn max_record_size(&self) -> u64 {
        self.max_message_size + 65_536
    }
}

/// Parses `delete_when` ("04", "01;13") into hours.
pub(crate) fn parse_delete_when(s: &str) -> std::result::Result<Vec<u32>, String> {
    let mut hours = Vec::new();
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let h: u32 = part
            .parse()
            .map_err(|_| format!("{part:?} is not an hour"))?;
        if h > 23 {
            return Err(format!("{h} is not an hour (00-23)"));
        }
        hours.push(h);
    }
    Ok(hours)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_are_rocketmqs() {
        let c = StoreConfig::default();
        assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
        assert_eq!(c.max_message_size, 4 << 20);
        assert_eq!(c.consume_queue_file_size(), 6_000_000);
        assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.sync_flush_timeout, 5000);
        c.validate().unwrap();
    }

    #[test]
    fn set_checks_names_types_and_ranges() {
        let mut c = StoreConfig::default();
        c.set("mapped_file_size_commit_log", ConfigValue::Int(65536))
            .unwrap();
        assert_eq!(c.mapped_file_size_commit_log, 65536);
        assert!(c
            .set("mapped_file_size_commit_log", ConfigValue::Int(10))
            .is_err());
        assert!(c
            .set("mapped_file_size_commit_log", ConfigValue::Bool(true))
            .is_err());
        assert!(c.set("no_such_key", ConfigValue::Int(1)).is_err());
        c.set("flush_disk_type", ConfigValue::Str("SYNC_FLUSH".into()))
            .unwrap();
        assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
        assert!(c
            .set("flush_disk_type", ConfigValue::Str("sometimes".into()))
            .is_err());
        assert!(c.set("delete_when", ConfigValue::Str("25".into())).is_err());
        c.set("store_host", ConfigValue::Str("10.0.0.1:10911".into()))
            .unwrap();
        assert_eq!(
            c.get("store_host"),
            Some(ConfigValue::Str("10.0.0.1:10911".into()))
        );
        let names: Vec<_> = StoreConfig::fields().iter().map(|f| f.name).collect();
        assert!(names.contains(&"transient_store_pool_enable"));
        assert!(names.contains(&"flush_disk_type"));
        for f in StoreConfig::fields() {
            assert!(c.get(f.name).is_some(), "{}", f.name);
        }
    }
}
