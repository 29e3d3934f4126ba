//! A simulated disk for power-loss tests (cargo feature `powerloss`; reliability rows B1/B2).
//!
//! An mmap'd store cannot be intercepted at `write()`, so the engine reports its durability
//! points instead: after every successful msync/fsync of a file range it calls [`synced`]
//! (the bytes of that range, read back through the file, become the file's durable image), a
//! file created with fsync of itself and its directory is durable as zeros ([`created`]), the
//! checkpoint is durable as a whole once renamed and its directory fsynced ([`replaced`]), and
//! a destroyed file is forgotten ([`removed`]).
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

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::util::lock;

static DURABLE: Mutex<Option<HashMap<PathBuf, Vec<u8>>>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut HashMap<PathBuf, Vec<u8>>) -> R) -> R {
    let mut g = lock(&DURABLE);
    f(g.get_or_insert_with(HashMap::new))
}

/// `[offset, offset + len)` of `path` was made durable: its current bytes become durable.
pub(crate) fn synced(path: &Path, offset: usize, len: usize) {
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

/// `path` was replaced as a whole by `bytes` (fsync, rename, directory fsync).
pub(crate) fn replaced(path: &Path, bytes: &[u8]) {
    with(|m| m.insert(path.to_path_buf(), bytes.to_vec()));
}

/// `path` was deleted.
pub(crate) fn removed(path: &Path) {
    with(|m| m.remove(path));
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
    with(|m| m.retain(|p, _| !p.starts_with(root)));
}
