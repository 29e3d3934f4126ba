//! The index files' check before they are loaded (reliability.md §9): an index file with an
//! impossible header or size is deleted with every newer one; re-dispatch rebuilds them.

use std::path::{Path, PathBuf};

use rocketstore_format::index::index_file_size;
use rocketstore_format::{IndexHeader, INDEX_HEADER_SIZE};

use crate::error::{Error, Result};
use crate::index::INDEX_DIR;
use crate::util::fsync_dir;

/// Checks the index files before they are loaded (writable stores): the first file whose size
/// is wrong, or whose header is impossible (offsets outside `[0, log_end]` or decreasing,
/// timestamps decreasing, counts above the configured slots and entries), is deleted together
/// with every newer file; re-dispatch rebuilds them. If no file has the configured size the
/// directory is left alone (a configuration mismatch, which loading reports). Returns the files
/// deleted.
pub(crate) fn precheck_index_dir(
    root: &Path,
    slots: u32,
    entries: u32,
    log_end: u64,
    sync: bool,
) -> Result<usize> {
    let dir = root.join(INDEX_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {}
        _ => return Ok(0),
    }
    let size = index_file_size(slots, entries);
    let mut files: Vec<(String, PathBuf, u64)> = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io("read_dir", &dir, e))? {
        let e = e.map_err(|e| Error::io("read_dir", &dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        files.push((name, path, meta.len()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if !files.iter().any(|f| f.2 == size) {
        return Ok(0);
    }
    let log_end = i64::try_from(log_end).unwrap_or(i64::MAX);
    let mut prev: Option<IndexHeader> = None;
    let mut bad = None;
    for (i, (_, path, len)) in files.iter().enumerate() {
        let header = if *len == size {
            read_header(path)?
        } else {
            None
        };
        let ok = header.is_some_and(|h| {
            (0..=log_end).contains(&h.begin_phy_offset)
                && (h.begin_phy_offset..=log_end).contains(&h.end_phy_offset)
                && h.begin_timestamp >= 0
                && h.end_timestamp >= h.begin_timestamp
                && (0..=slots as i64).contains(&i64::from(h.hash_slot_count))
                && (0..=entries as i64).contains(&i64::from(h.index_count))
                && prev.is_none_or(|p| {
                    h.begin_phy_offset >= p.begin_phy_offset
                        && h.begin_timestamp >= p.begin_timestamp
                })
        });
        if !ok {
            bad = Some(i);
            break;
        }
        prev = header;
    }
    let Some(first_bad) = bad else {
        return Ok(0);
    };
    let doomed = &files[first_bad..];
    for (_, path, _) in doomed {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("unlink", path.as_path(), e)),
        }
    }
    if sync {
        fsync_dir(&dir)?;
    }
    Ok(doomed.len())
}

fn read_header(path: &Path) -> Result<Option<IndexHeader>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut buf = [0u8; INDEX_HEADER_SIZE];
    match f.read_exact(&mut buf) {
        Ok(()) => Ok(IndexHeader::decode(&buf)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}
