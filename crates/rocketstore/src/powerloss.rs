//! A simulated disk for power-loss tests (cargo feature `powerloss`; reliability rows B1/B2).
//!
//! An mmap'd store cannot be intercepted at `write()`, so the engine reports its durability
//! points instead: after every successful msync/fsync of a file range it calls [`synced`]
//! (the bytes of that range, read back through the file, become the file's durable image), a
//! file created with fsync of itself and its directory is durable as zeros ([`created`]), the
//! checkpoint is durable as a whole once renamed and its directory fsynced ([`replaced`]), and
//! a destroyed file is forgotten ([`removed`]). A file created without those fsyncs (a consume
//! queue file, whose creation the flush service makes durable later) is marked [`unsynced`]:
//! until [`created_now`] no msync of it counts, since its directory entry may still vanish.
//!
//! A test then takes [`durable_image`] of a store root and the live files, and builds the
//! images a power cut could leave: each 4 KiB page where the live file differs from its durable
//! image is kept, lost (the durable bytes) or torn (a prefix of 512-byte sectors of the live
//! page, the rest durable), independently. Bytes read back after an msync may be newer than
//! what the msync wrote; such a durable image is still one a disk could hold (the kernel may
//! write a page back at any time), so this never invents an impossible state.
//!
//! The registry is process-global and keyed by path; it records nothing unless the feature is
//! on, and it is meant for small test stores (it keeps a copy of every synced byte).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Locks a registry mutex, ignoring poisoning (as `util::lock`, which this module does not
/// import: `util::fsync_dir` reports to it).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

static DURABLE: Mutex<Option<HashMap<PathBuf, Vec<u8>>>> = Mutex::new(None);

/// Files created whose creation (file and directory fsync) is not durable yet.
static UNSYNCED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

fn with_unsynced<R>(f: impl FnOnce(&mut HashSet<PathBuf>) -> R) -> R {
    let mut g = lock(&UNSYNCED);
    f(g.get_or_insert_with(HashSet::new))
}

fn with<R>(f: impl FnOnce(&mut HashMap<PathBuf, Vec<u8>>) -> R) -> R {
    let mut g = lock(&DURABLE);
    f(g.get_or_insert_with(HashMap::new))
}

/// A test's hook, called after each durability event (a sync, a creation or a replacement
/// made durable) with the path, outside the registry's locks: it may take images mid-way
/// through an operation such as recovery.
pub type Hook = Box<dyn Fn(&Path) + Send + Sync>;
static HOOK: Mutex<Option<std::sync::Arc<Hook>>> = Mutex::new(None);

/// Sets (or clears) a hook called after each durability event (a sync, a creation or a
/// replacement made durable) with the file's path, outside the registry's locks.
pub fn set_hook(hook: Option<Hook>) {
    *lock(&HOOK) = hook.map(std::sync::Arc::new);
}

fn call_hook(path: &Path) {
    let hook = lock(&HOOK).clone();
    if let Some(h) = hook {
        h(path);
    }
}

/// `[offset, offset + len)` of `path` was made durable: its current bytes become durable.
pub(crate) fn synced(path: &Path, offset: usize, len: usize) {
    synced_quietly(path, offset, len);
    call_hook(path);
}

fn synced_quietly(path: &Path, offset: usize, len: usize) {
    if with_unsynced(|s| s.contains(path)) {
        return;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let mut buf = vec![0u8; len];
    if file.read_exact_at(&mut buf, offset as u64).is_err() {
        return;
    }
    with(|m| {
        let image = m.entry(path.to_path_buf()).or_default();
        if image.len() < offset + len {
            image.resize(offset + len, 0);
        }
        if let Some(dst) = image.get_mut(offset..offset + len) {
            dst.copy_from_slice(&buf);
        }
    });
}

/// `path` was created with `size` zero bytes, fsynced with its directory.
pub(crate) fn created(path: &Path, size: usize) {
    with(|m| m.insert(path.to_path_buf(), vec![0u8; size]));
}

/// `path` was created without fsync: it is not on the simulated disk, and msyncs of it do not
/// count, until [`created_now`].
pub(crate) fn unsynced(path: &Path) {
    with_unsynced(|s| s.insert(path.to_path_buf()));
}

/// `path` (created [`unsynced`], `size` bytes) and its directory were fsynced: every byte it
/// holds now is durable.
pub(crate) fn created_now(path: &Path, size: usize) {
    with_unsynced(|s| s.remove(path));
    created(path, size);
    synced(path, 0, size);
}

/// `path` was replaced as a whole by `bytes` (fsync, rename, directory fsync).
pub(crate) fn replaced(path: &Path, bytes: &[u8]) {
    with(|m| m.insert(path.to_path_buf(), bytes.to_vec()));
    call_hook(path);
}

/// Files deleted whose directory was not fsynced since: after a power cut their names (and
/// durable bytes) may come back. Each with the order of its deletion.
static GHOSTS: Mutex<Option<Ghosts>> = Mutex::new(None);

/// Path -> (order of the deletion, durable bytes).
type Ghosts = HashMap<PathBuf, (u64, Vec<u8>)>;

/// Deletions so far (orders [`GHOSTS`]).
static DELETIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn with_ghosts<R>(f: impl FnOnce(&mut Ghosts) -> R) -> R {
    let mut g = lock(&GHOSTS);
    f(g.get_or_insert_with(HashMap::new))
}

/// `path` was deleted: until its directory is fsynced ([`dir_synced`]) the deletion is not
/// durable, and the file may come back with its durable bytes.
pub(crate) fn removed(path: &Path) {
    with_unsynced(|s| s.remove(path));
    if let Some(bytes) = with(|m| m.remove(path)) {
        let n = DELETIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        with_ghosts(|g| g.insert(path.to_path_buf(), (n, bytes)));
    }
}

/// `path` was unlinked (after [`removed`]): the test's hook may take an image now, between
/// the unlink and the directory fsync that makes it durable.
pub(crate) fn unlinked(path: &Path) {
    call_hook(path);
}

/// `dir` was fsynced: the deletions of its entries are durable.
pub(crate) fn dir_synced(dir: &Path) {
    with_ghosts(|g| g.retain(|p, _| p.parent() != Some(dir)));
}

/// Files under `root` deleted without a directory fsync since, with their durable bytes, in
/// the order they were deleted: a power cut may bring them back (on a journaling file system,
/// directory changes reach the disk in order, so the deletions undone are the latest ones).
pub fn ghosts(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(u64, PathBuf, Vec<u8>)> = with_ghosts(|g| {
        g.iter()
            .filter(|(p, _)| p.starts_with(root))
            .map(|(p, (n, b))| (*n, p.clone(), b.clone()))
            .collect()
    });
    v.sort_by_key(|(n, _, _)| *n);
    v.into_iter().map(|(_, p, b)| (p, b)).collect()
}

/// The durable image of every file under `root` known to the simulated disk (path -> bytes;
/// a file shorter than its live size is zero past its end).
pub fn durable_image(root: &Path) -> HashMap<PathBuf, Vec<u8>> {
    with(|m| {
        m.iter()
            .filter(|(p, _)| p.starts_with(root))
            .map(|(p, b)| (p.clone(), b.clone()))
            .collect()
    })
}

/// Forgets every file under `root`.
pub fn forget(root: &Path) {
    with_ghosts(|g| g.retain(|p, _| !p.starts_with(root)));
    with_unsynced(|s| s.retain(|p| !p.starts_with(root)));
    with(|m| m.retain(|p, _| !p.starts_with(root)));
}

/// A crash without a power cut, as a test builds it: the live files of `from` were copied to
/// `to` (the page cache survives a process crash), and the disk under `to` is what it was under
/// `from`. The durable images of the files under `from` are copied to the same paths under
/// `to`; a file under `to` with no durable image (its creation was never made durable) is
/// marked [`unsynced`], so its msyncs do not count until the engine makes its creation durable.
pub fn adopt(from: &Path, to: &Path) {
    let copied: Vec<(PathBuf, Vec<u8>)> = durable_image(from)
        .into_iter()
        .filter_map(|(p, b)| Some((to.join(p.strip_prefix(from).ok()?), b)))
        .collect();
    let known: HashSet<PathBuf> = copied.iter().map(|(p, _)| p.clone()).collect();
    with(|m| m.extend(copied));
    let mut stack = vec![to.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !known.contains(&p) {
                with_unsynced(|s| s.insert(p));
            }
        }
    }
}

/// Commit log flushes (msync) of files under this root fail with EIO ([`fail_msyncs_under`]).
static FAILING: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Makes every commit log flush (msync) of a file under `root` fail with EIO, as a disk error
/// does (`None`: flushes work again). A failed flush reports no sync: its range keeps its old
/// durable bytes, while the page cache keeps the new ones (the store is fenced).
pub fn fail_msyncs_under(root: Option<&Path>) {
    *lock(&FAILING) = root.map(Path::to_path_buf);
}

/// Whether a flush of `path` fails ([`fail_msyncs_under`]).
pub(crate) fn msync_fails(path: &Path) -> bool {
    lock(&FAILING)
        .as_deref()
        .is_some_and(|r| path.starts_with(r))
}
