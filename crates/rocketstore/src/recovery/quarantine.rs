//! `recovery_mode = "quarantine"`: damage below the durable offset moves files aside instead of
//! refusing the open (issue 14 item 5).
//!
//! Recovery keeps the commit log up to the last valid record before the damage, like
//! `tolerate_any_corruption`, but first preserves every byte it is about to drop, under
//! `<root>/quarantine/<end offset>-<epoch ms>/`:
//! - a copy of the commit log file holding the damage (recovery then zero-fills it from the new
//!   end), and
//! - every later commit log file (hard-linked, or copied where links fail; recovery then deletes
//!   them from `commitlog/`),
//! - `report.json`: the reason, the damage offset, the recovered end, the durable offset the
//!   checkpoint recorded and each file with its base offset and size.
//!
//! The store then opens with what is intact; the consume queues and index are cut back to the
//! new end and the checkpoint's durable offset is lowered to it, as after any truncation. Damage
//! above the durable offset (a torn tail) is truncated without quarantine, as in
//! `tolerate_tail_corruption`. Read-only opens never quarantine (they write nothing).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::commitlog::{CommitLog, ScanEnd};
use crate::config::{RecoveryMode, StoreConfig};
use crate::error::{Error, Result};
use crate::json::write_str;
use crate::util::fsync_dir;

/// Name of the quarantine directory under the store root.
pub(crate) const QUARANTINE_DIR: &str = "quarantine";

/// Runs the recovery check of `scan`; in quarantine mode (writable), a refusal for damage below
/// the durable offset instead preserves the files recovery will cut and returns the directory
/// that holds them.
pub(crate) fn check_or_quarantine(
    root: &Path,
    log: &CommitLog,
    cfg: &StoreConfig,
    durable: Option<u64>,
    scan: &ScanEnd,
    read_only: bool,
) -> Result<Option<PathBuf>> {
    match super::accept::check_scan(log, cfg, durable, scan) {
        Ok(()) => Ok(None),
        Err(Error::Corruption { .. })
            if cfg.recovery_mode == RecoveryMode::Quarantine && !read_only =>
        {
            quarantine(root, log, cfg, durable, scan).map(Some)
        }
        Err(e) => Err(e),
    }
}

fn quarantine(
    root: &Path,
    log: &CommitLog,
    cfg: &StoreConfig,
    durable: Option<u64>,
    scan: &ScanEnd,
) -> Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let base = root.join(QUARANTINE_DIR);
    std::fs::create_dir_all(&base).map_err(|e| Error::io("mkdir", &base, e))?;
    let dir = base.join(format!("{:020}-{now}", scan.end));
    std::fs::create_dir(&dir).map_err(|e| Error::io("mkdir", &dir, e))?;
    let mut files = Vec::new();
    for f in log.queue().files() {
        let end = f.from() + f.size() as u64;
        if end <= scan.end {
            continue;
        }
        let Some(name) = f.path().file_name() else {
            continue;
        };
        let dst = dir.join(name);
        if f.from() <= scan.end {
            // Recovery zero-fills this file's tail in place: keep a full copy.
            std::fs::copy(f.path(), &dst).map_err(|e| Error::io("copy", &dst, e))?;
        } else if std::fs::hard_link(f.path(), &dst).is_err() {
            std::fs::copy(f.path(), &dst).map_err(|e| Error::io("copy", &dst, e))?;
        }
        files.push((name.to_string_lossy().into_owned(), f.from(), f.size()));
    }
    let (at, why) = match &scan.damage {
        Some((at, why)) => (*at, why.clone()),
        None => (
            scan.end,
            "valid commit log data ends (zeros or missing files follow) below the durable offset"
                .to_string(),
        ),
    };
    let mut report = String::from("{\n  \"reason\": ");
    write_str(&mut report, &why);
    let _ = write!(
        report,
        ",\n  \"damage_offset\": {at},\n  \"recovered_end\": {},\n  \"durable_offset\": {},\n  \
         \"recovery_mode\": \"{}\",\n  \"files\": [",
        scan.end,
        durable.map_or("null".to_string(), |d| d.to_string()),
        cfg.recovery_mode.as_str(),
    );
    for (i, (name, from, size)) in files.iter().enumerate() {
        report.push_str(if i == 0 {
            "\n    {\"name\": "
        } else {
            ",\n    {\"name\": "
        });
        write_str(&mut report, &format!("commitlog/{name}"));
        let _ = write!(report, ", \"from\": {from}, \"size\": {size}}}");
    }
    report.push_str("\n  ]\n}\n");
    let path = dir.join("report.json");
    std::fs::write(&path, report).map_err(|e| Error::io("write", &path, e))?;
    if cfg.fsync_directory {
        for f in std::fs::read_dir(&dir).map_err(|e| Error::io("read_dir", &dir, e))? {
            let p = f.map_err(|e| Error::io("read_dir", &dir, e))?.path();
            std::fs::File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io("fsync", &p, e))?;
        }
        fsync_dir(&dir)?;
        fsync_dir(&base)?;
        fsync_dir(root)?;
    }
    Ok(dir)
}
