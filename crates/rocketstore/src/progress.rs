//! The progress page a writable store publishes for readers in other processes
//! (`<root>/rocketstore.progress`, one 4 KiB page a RocketMQ broker ignores): the end of what
//! is dispatched, the commit log's first offset, the writer's instance id and a sequence word
//! bumped after every publication, on which readers wait (`FUTEX_WAIT`/`FUTEX_WAKE` on the
//! shared mapping). The writer's side is [`ProgressWriter`]; the reader's is `crate::follow`.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::mmap::{futex_wake, AppendRegion, MmapRegion};

/// The progress file at the store root.
pub const PROGRESS_FILE: &str = "rocketstore.progress";
/// Its size: one page.
pub(crate) const PAGE: usize = 4096;
pub(crate) const MAGIC: u32 = 0x5253_5047; // "RSPG"
pub(crate) const VERSION: u32 = 1;
pub(crate) const OFF_MAGIC: usize = 0;
pub(crate) const OFF_VERSION: usize = 4;
/// The futex word: bumped after every publication.
pub(crate) const OFF_SEQ: usize = 8;
/// 1 while a writer has the store open.
pub(crate) const OFF_OPEN: usize = 12;
pub(crate) const OFF_INSTANCE: usize = 16;
pub(crate) const OFF_END: usize = 24;
pub(crate) const OFF_MIN: usize = 32;
/// How often a reader of a store without a progress file looks for one (and for new data).
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) fn map_page(path: &Path, writable: bool) -> Result<(File, AppendRegion)> {
    let file = OpenOptions::new()
        .read(true)
        .write(writable)
        .open(path)
        .map_err(|e| Error::io("open", path, e))?;
    let region =
        MmapRegion::map_file(&file, PAGE, writable).map_err(|e| Error::io("mmap", path, e))?;
    Ok((file, AppendRegion::new(region, PAGE, PAGE)))
}

/// A word of the page (the offsets are constants inside it: `None` never happens).
pub(crate) fn load32(r: &AppendRegion, off: usize) -> u32 {
    r.atomic_u32(off).map_or(0, |w| w.load(Ordering::Acquire))
}

pub(crate) fn load64(r: &AppendRegion, off: usize) -> u64 {
    r.atomic_u64(off).map_or(0, |w| w.load(Ordering::Acquire))
}

pub(crate) fn store32(r: &AppendRegion, off: usize, v: u32) {
    if let Some(w) = r.atomic_u32(off) {
        w.store(v, Ordering::Release);
    }
}

pub(crate) fn store64(r: &AppendRegion, off: usize, v: u64) {
    if let Some(w) = r.atomic_u64(off) {
        w.store(v, Ordering::Release);
    }
}

/// Bumps the sequence word and wakes its waiters.
pub(crate) fn bump(r: &AppendRegion) {
    if let Some(seq) = r.atomic_u32(OFF_SEQ) {
        seq.fetch_add(1, Ordering::AcqRel);
        futex_wake(seq);
    }
}

/// The writer's side: publishes progress into `<root>/rocketstore.progress`.
#[derive(Debug)]
pub(crate) struct ProgressWriter {
    _file: File,
    region: AppendRegion,
}

impl ProgressWriter {
    /// Opens (creating it whole, then renaming it in place, if missing or of another size) the
    /// progress file of a writable store and stamps a new instance id.
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let path = root.join(PROGRESS_FILE);
        let ok =
            std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == PAGE as u64);
        if !ok {
            let tmp = root.join(format!("{PROGRESS_FILE}.tmp"));
            let mut f = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
            // Written, not extended: the page's block is real before it is mapped.
            f.write_all(&[0u8; PAGE])
                .map_err(|e| Error::io("write", &tmp, e))?;
            drop(f);
            std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
        }
        let (file, region) = map_page(&path, true)?;
        let instance = {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (t ^ (u64::from(std::process::id()) << 32)) | 1
        };
        store32(&region, OFF_MAGIC, MAGIC);
        store32(&region, OFF_VERSION, VERSION);
        store64(&region, OFF_INSTANCE, instance);
        store32(&region, OFF_OPEN, 1);
        Ok(Self {
            _file: file,
            region,
        })
    }

    /// Publishes `end` (every record below it is complete and dispatched) and `min` (the commit
    /// log's first offset), then wakes every waiting reader.
    pub(crate) fn publish(&self, end: u64, min: u64) {
        store64(&self.region, OFF_END, end);
        store64(&self.region, OFF_MIN, min);
        bump(&self.region);
    }

    /// The store closes: readers keep what they read, and are woken once more.
    pub(crate) fn close(&self) {
        store32(&self.region, OFF_OPEN, 0);
        bump(&self.region);
    }
}

/// What a reader read from the progress page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) seq: u32,
    pub(crate) instance: u64,
    pub(crate) end: u64,
    pub(crate) min: u64,
    /// A writer has the store open (its process may since have died).
    pub(crate) open: bool,
}

pub(crate) fn snapshot(r: &AppendRegion) -> Snapshot {
    // The sequence number first: the values read after it are at least as new.
    let seq = load32(r, OFF_SEQ);
    Snapshot {
        seq,
        instance: load64(r, OFF_INSTANCE),
        end: load64(r, OFF_END),
        min: load64(r, OFF_MIN),
        open: load32(r, OFF_OPEN) == 1,
    }
}

/// The progress page of the store at `root` as it is now (`None`: no progress file). A
/// read-only open reads it before its recovery walk, so that its follower knows whether
/// anything was published after the walk began.
pub(crate) fn peek(root: &Path) -> Option<Snapshot> {
    let (_file, region) = map_page(&root.join(PROGRESS_FILE), false).ok()?;
    (load32(&region, OFF_MAGIC) == MAGIC).then(|| snapshot(&region))
}
