//! Whether recovery may accept the end the commit log walk found (reliability.md §9 item 3): the
//! commit log may only lose data after the durable offset recorded in the checkpoint; anything
//! else is an [`Error::Corruption`] naming the file and offset, unless the `recovery_mode`
//! tolerates it. Offline repair (`rebuild_indexes`) applies the same rule.

use std::path::PathBuf;

use rocketstore_format::Checkpoint;

use crate::commitlog::{CommitLog, ScanEnd};
use crate::config::{RecoveryMode, StoreConfig};
use crate::error::{CorruptionKind, Error, Result};

/// The durable commit log offset recorded in our checkpoint extension, if any.
pub(crate) fn durable_offset(cp: Option<&Checkpoint>) -> Option<u64> {
    cp.and_then(|c| c.ext.as_ref())
        .map(|e| u64::try_from(e.durable_commitlog_offset).unwrap_or(0))
}

/// Decides whether the recovered end `scan` may be accepted: damage (non-zero bytes that do not
/// validate) or an end of data (zeros, missing files) before the durable offset `durable` is a
/// [`Error::Corruption`] naming the file and offset, unless `recovery_mode` tolerates it:
/// `absolute_consistency` refuses any damage, `tolerate_tail_corruption` refuses anything
/// before `durable`, `tolerate_any_corruption` accepts everything.
pub(crate) fn check_scan(
    log: &CommitLog,
    cfg: &StoreConfig,
    durable: Option<u64>,
    scan: &ScanEnd,
) -> Result<()> {
    let file_of = |at: u64| -> PathBuf {
        log.queue()
            .find(at)
            .or_else(|| log.queue().last().filter(|f| f.from() <= at))
            .map(|f| f.path().to_path_buf())
            .unwrap_or_else(|| log.queue().dir().to_path_buf())
    };
    let mode = cfg.recovery_mode;
    if let Some((at, why)) = &scan.damage {
        let below_durable = durable.is_some_and(|d| *at < d);
        let refuse = match mode {
            RecoveryMode::AbsoluteConsistency => true,
            // Quarantine refuses here like the tail mode; recovery then moves the files aside
            // (quarantine.rs) instead of failing the open.
            RecoveryMode::TolerateTailCorruption | RecoveryMode::Quarantine => below_durable,
            RecoveryMode::TolerateAnyCorruption => false,
        };
        if refuse {
            return Err(Error::corruption(
                file_of(*at),
                *at,
                CorruptionKind::Invalid(format!(
                    "{why}{}",
                    if below_durable {
                        " (below the durable offset recorded in the checkpoint)"
                    } else {
                        ""
                    }
                )),
            ));
        }
    }
    if let Some(d) = durable {
        if scan.end < d && mode != RecoveryMode::TolerateAnyCorruption {
            return Err(Error::corruption(
                file_of(scan.end),
                scan.end,
                CorruptionKind::Invalid(format!(
                    "valid commit log data ends at {} (zeros or missing files follow) but the \
                     checkpoint records {d} as durable",
                    scan.end
                )),
            ));
        }
    }
    Ok(())
}
