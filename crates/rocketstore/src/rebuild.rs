//! Offline repair ([`rebuild_indexes`]): consume queues and index files rebuilt from the commit
//! log of a closed store. It applies recovery's acceptance rule for the commit log end
//! (`recovery::accept`); the recovery of `Store::open` itself lives in `recovery/`.

use std::path::Path;
use std::sync::Arc;

use rocketstore_format::{Checkpoint, CheckpointExt};

use crate::commitlog::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueueStore, CONSUME_QUEUE_DIR};
use crate::dispatch::Dispatcher;
use crate::error::{Error, Result};
use crate::index::{IndexService, INDEX_DIR};
use crate::longpoll::PullWaiters;
use crate::recovery::accept::{check_scan, durable_offset};
use crate::recovery::queues::max_queue_id;
use crate::segment::Allocator;
use crate::signal::{Health, Signal};
use crate::util::{check_not_symlink, fsync_dir};

/// What [`rebuild_indexes`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RebuildReport {
    /// Smallest commit log offset.
    pub min_offset: u64,
    /// End of valid commit log data (the store's max offset afterwards).
    pub end_offset: u64,
    /// Valid records found in the commit log.
    pub records: u64,
    /// Records dispatched into consume queues and index files.
    pub dispatched: u64,
    /// Consume queues written.
    pub consume_queues: usize,
    /// Consume queue files written.
    pub consume_queue_files: usize,
    /// Index files written.
    pub index_files: usize,
    /// Where and why the commit log scan stopped before the end of the files, if it found damage
    /// (a torn tail; the bytes after it were zero-filled).
    pub truncated_at: Option<(u64, String)>,
    /// Commit log files removed because they lay past the end of valid data.
    pub commitlog_files_removed: usize,
}

/// Rebuilds every consume queue and index file of a closed store from its commit log alone
/// (issue #4 "offline repair"; RocketMQ has no such tool).
///
/// Takes the store's lock (so the store must not be open), scans the whole commit log with the
/// recovery validator (CRCs included; damage is handled as `recovery_mode` says, see
/// [`StoreConfig::recovery_mode`]), truncates a torn tail, deletes `consumequeue/` and `index/`
/// and writes them again by dispatching every record in order, flushes them, writes a
/// checkpoint (physic and logics timestamps of the last record and the last dispatched record,
/// index timestamp of the last full index file, durable offset = the end) and removes the
/// `abort` marker: the store is then as after a clean shutdown. Consumer offsets and
/// `config/` are untouched.
///
/// The consume queue files are byte-identical to those the store wrote itself. Index files
/// hold the same entries in the same places; only their names (the creation time,
/// `yyyyMMddHHmmssSSS`) differ.
///
/// ```no_run
/// let report = rocketstore::rebuild_indexes("/tmp/demo-store", rocketstore::StoreConfig::default())?;
/// println!("{} records, {} queues", report.records, report.consume_queues);
/// # Ok::<(), rocketstore::Error>(())
/// ```
///
/// # Errors
/// [`Error::Locked`] if the store is open; [`Error::Corruption`] for damage `recovery_mode` does
/// not tolerate (nothing is changed then); [`Error::UnsupportedFormat`] for a RocksDB consume
/// queue or symbolic links; I/O errors.
pub fn rebuild_indexes(root: impl AsRef<Path>, config: StoreConfig) -> Result<RebuildReport> {
    let root = root.as_ref();
    let mut config = config;
    config.validate()?;
    check_not_symlink(root)?;
    // The geometry the store's files have, unless given (then it must match them): the
    // rebuilt files have the sizes the store's next open expects.
    crate::geometry::resolve(root, &mut config)?;
    let meta = std::fs::metadata(root).map_err(|e| Error::io("stat", root, e))?;
    if !meta.is_dir() {
        return Err(Error::UnsupportedFormat {
            path: root.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    let cq_dir = root.join(CONSUME_QUEUE_DIR);
    let index_dir = root.join(INDEX_DIR);
    for d in [&cq_dir, &index_dir] {
        check_not_symlink(d)?;
    }
    if cq_dir.join("CURRENT").exists() {
        return Err(Error::UnsupportedFormat {
            path: cq_dir,
            reason: "consume queues are stored in RocksDB; only file-based stores are supported"
                .into(),
        });
    }
    let _lock = crate::lock::take_lock(root)?;
    let sync = config.fsync_directory;
    let commitlog_dir = root.join("commitlog");
    std::fs::create_dir_all(&commitlog_dir).map_err(|e| Error::io("mkdir", &commitlog_dir, e))?;
    let log = Arc::new(CommitLog::load(
        &commitlog_dir,
        &config,
        true,
        Health::new(),
        None::<Arc<Allocator>>,
        Signal::new(),
        Signal::new(),
    )?);
    let cp = match crate::checkpoint::read(root)? {
        Some(Ok(c)) => Some(c),
        _ => None,
    };
    let durable = durable_offset(cp.as_ref());
    let max_record = u32::try_from(config.max_record_size()).unwrap_or(u32::MAX);
    let scan = log.scan_for_end(0, config.check_crc_on_recover, max_record, |_, _| {});
    check_scan(&log, &config, durable, &scan)?;
    let removed = log.truncate_to(scan.end)?;

    for d in [&cq_dir, &index_dir] {
        match std::fs::remove_dir_all(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove_dir_all", d.as_path(), e)),
        }
    }
    if sync {
        fsync_dir(root)?;
    }
    let cqs = Arc::new(ConsumeQueueStore::load(
        root,
        config.consume_queue_file_size(),
        true,
    )?);
    let index = if config.message_index_enable {
        Some(Arc::new(IndexService::load(
            root,
            u32::try_from(config.max_hash_slot_num).unwrap_or(u32::MAX),
            u32::try_from(config.max_index_num).unwrap_or(u32::MAX),
            true,
            true,
            0,
        )?))
    } else {
        None
    };
    let dispatcher = Dispatcher::new(
        Arc::clone(&cqs),
        index.clone(),
        Arc::new(PullWaiters::default()),
        log.min_offset(),
        config.delay_levels(),
        max_queue_id(&config),
    );
    let dispatched = dispatcher.dispatch_until(&log, scan.end)?;
    cqs.correct_min_offsets(log.min_offset());
    cqs.flush_all(0)?;
    if let Some(i) = &index {
        i.flush()?;
    }
    let queues = cqs.all();
    let old = cp.unwrap_or_default();
    let new_cp = Checkpoint {
        physic_msg_timestamp: scan.last_store_timestamp.max(0),
        logics_msg_timestamp: dispatcher.logics_timestamp(),
        index_msg_timestamp: index.as_ref().map_or(0, |i| i.last_full_end_timestamp()),
        master_flushed_offset: old.master_flushed_offset,
        confirm_phy_offset: old.confirm_phy_offset,
        ext: Some(CheckpointExt {
            durable_commitlog_offset: i64::try_from(scan.end).unwrap_or(i64::MAX),
            clean_shutdown: true,
            generation: old.ext.map_or(0, |e| e.generation) + 1,
            window: None,
        }),
    };
    crate::checkpoint::write(root, &new_cp, sync)?;
    crate::checkpoint::remove_abort(root, sync)?;
    Ok(RebuildReport {
        min_offset: log.min_offset(),
        end_offset: scan.end,
        records: scan.records,
        dispatched,
        consume_queues: queues.len(),
        consume_queue_files: queues.iter().map(|q| q.file_count()).sum(),
        index_files: index.as_ref().map_or(0, |i| i.files().len()),
        truncated_at: scan.damage,
        commitlog_files_removed: removed,
    })
}
