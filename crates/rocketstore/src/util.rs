//! Small helpers shared by the engine's modules.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// Locks a mutex, ignoring poisoning: the data behind our mutexes stays consistent when a
/// holder panics (a panicking service poisons the *store* instead, see `service`).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `a == b` for short names that often share a long prefix (topics such as `Orders0`,
/// `Orders1`): the lengths and the last bytes are compared before the whole strings, so most
/// mismatches cost no `memcmp` call.
#[inline]
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// Added to the wall clock by [`now_ms`]: a test seam for clock steps (see
/// [`set_wall_clock_offset_ms`]). Zero unless a test sets it.
static WALL_CLOCK_OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Wall-clock milliseconds since the epoch (plus the test offset, normally zero). Store
/// timestamps, index file names and the schedule service read the clock here.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        .saturating_add(WALL_CLOCK_OFFSET_MS.load(Ordering::Relaxed))
}

/// Test seam: steps the engine's wall clock (store timestamps, index file names, the schedule
/// service) by `offset_ms` for the whole process (negative: the clock went back), as an NTP
/// step or a VM restore does. Not for production use.
#[doc(hidden)]
pub fn set_wall_clock_offset_ms(offset_ms: i64) {
    WALL_CLOCK_OFFSET_MS.store(offset_ms, Ordering::Relaxed);
}

/// This boot's `/proc/sys/kernel/random/boot_id` as 16 bytes, or zeros when unknown (not Linux,
/// or unreadable). Two equal non-zero ids mean the page cache was never lost in between: every
/// byte a crashed process put into a shared mapping is still in the file.
pub(crate) fn boot_id() -> [u8; 16] {
    let mut out = [0u8; 16];
    let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return out;
    };
    let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    if hex.len() != 32 {
        return out;
    }
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).unwrap_or("0");
        if let (Some(slot), Ok(v)) = (out.get_mut(i), u8::from_str_radix(s, 16)) {
            *slot = v;
        }
    }
    out
}

/// `fsync` a directory so entries created, renamed or removed in it are durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    fail::fail_point!(crate::failpoints::DIR_FSYNC, |arg| Err(
        crate::failpoints::injected("fsync", dir, arg)
    ));
    let f = std::fs::File::open(dir).map_err(|e| Error::io("open", dir, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", dir, e))?;
    #[cfg(feature = "powerloss")]
    crate::powerloss::dir_synced(dir);
    Ok(())
}

/// Refuses symlinks: store paths are built only from validated components and never follow a
/// link out of the root.
pub(crate) fn check_not_symlink(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::UnsupportedFormat {
            path: path.to_path_buf(),
            reason: "symbolic links are not followed inside a store".into(),
        }),
        _ => Ok(()),
    }
}
