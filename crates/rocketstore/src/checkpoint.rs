//! The `checkpoint` file (spec §7.1) and the `abort` marker (§7.2).
//!
//! The checkpoint is replaced atomically (write a temporary file, fsync, rename, fsync the
//! directory), so it is never torn by a crash; our extension in its unused tail carries a CRC
//! (detects a torn or damaged file written by anything else) and the durable commit log offset.

use std::io::Write;
use std::path::Path;

use rocketstore_format::Checkpoint;

use crate::error::{Error, Result};
#[cfg_attr(not(feature = "failpoints"), allow(unused_imports))]
use crate::failpoints as fp;

/// File name of the checkpoint under the store root.
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// File name of the abort marker under the store root.
pub const ABORT_FILE: &str = "abort";

/// Reads `<root>/checkpoint`. `Ok(None)` when absent; `Err` only for I/O errors. A damaged
/// checkpoint is reported as `Some(Err(..))` inside: recovery then falls back to a full scan.
pub(crate) fn read(root: &Path) -> Result<Option<std::result::Result<Checkpoint, String>>> {
    let path = root.join(CHECKPOINT_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(Checkpoint::decode(&bytes).map_err(|e| e.to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Atomically replaces `<root>/checkpoint`.
pub(crate) fn write(root: &Path, cp: &Checkpoint, sync: bool) -> Result<()> {
    let path = root.join(CHECKPOINT_FILE);
    let tmp = root.join("checkpoint.tmp");
    fail::fail_point!(fp::CHECKPOINT_WRITE, |arg| Err(fp::injected(
        "write", &path, arg
    )));
    let bytes = cp.encode();
    let written = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&bytes)
            .map_err(|e| Error::io("write", &tmp, e))?;
        if sync {
            fail::fail_point!(fp::CHECKPOINT_FSYNC, |arg| Err(fp::injected(
                "fsync", &tmp, arg
            )));
            f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        }
        Ok(())
    })();
    if written.is_err() {
        // The checkpoint is untouched; give back the temporary file's blocks (a full disk).
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    fail::fail_point!(fp::CHECKPOINT_RENAME, |arg| Err(fp::injected(
        "rename", &path, arg
    )));
    std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
    if sync {
        crate::util::fsync_dir(root)?;
        #[cfg(feature = "powerloss")]
        crate::powerloss::replaced(&path, &bytes);
    }
    Ok(())
}

/// Creates the abort marker holding our PID (5.x content), keeping the previous one as
/// `abort.bak` like `MixAll.string2File`.
pub(crate) fn create_abort(root: &Path, sync: bool) -> Result<()> {
    let path = root.join(ABORT_FILE);
    if path.exists() {
        let _ = std::fs::copy(&path, root.join("abort.bak"));
    }
    std::fs::write(&path, std::process::id().to_string())
        .map_err(|e| Error::io("write", &path, e))?;
    if sync {
        crate::util::fsync_dir(root)?;
    }
    Ok(())
}

/// Removes the abort marker (clean shutdown).
pub(crate) fn remove_abort(root: &Path, sync: bool) -> Result<()> {
    let path = root.join(ABORT_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("unlink", path, e)),
    }
    if sync {
        crate::util::fsync_dir(root)?;
    }
    Ok(())
}
