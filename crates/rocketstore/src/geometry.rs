//! The store describes itself: the file geometry (commit log file size, consume queue file size,
//! index hash slots and entries) is read from the store's own files, so that a user never
//! repeats the keyword arguments that created a store, and an explicit value that contradicts
//! the files is refused before anything is touched ([`resolve`]). Also: what counts as a store
//! directory ([`check_is_store`]).
//!
//! A geometry field left at its default is "not given": the files' value is taken. A value
//! other than the default must match the files, or the open is refused with
//! [`Error::Config`] naming the keyword and the value found.

use std::path::Path;

use rocketstore_format::index::index_file_size;
use rocketstore_format::{parse_file_name, INDEX_HEADER_SIZE};

use crate::config::StoreConfig;
use crate::error::{Error, Result};

/// Names a store root may hold besides hidden files (RocketMQ's store and rocketstore's own).
/// A non-empty directory with none of [`STORE_MARKERS`] is not a store.
const STORE_MARKERS: &[&str] = &["commitlog", "consumequeue", "checkpoint", "abort", "lock"];

/// The files a broker keeps in `<root>/config/` (consumer offsets, topics, delay offsets,
/// subscription groups, ..., each with its `.bak`): a root holding such a `config/` is a
/// broker's store with no message yet, not a foreign directory.
const BROKER_CONFIG_FILES: &[&str] = &[
    "consumerOffset.json",
    "topics.json",
    "delayOffset.json",
    "subscriptionGroup.json",
    "consumerFilter.json",
    "consumerOrderInfo.json",
    "lmqConsumerOffset.json",
];

/// Whether `dir` holds one of [`BROKER_CONFIG_FILES`] (or its `.bak`).
fn holds_broker_config(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let base = name.strip_suffix(".bak").unwrap_or(&name);
            BROKER_CONFIG_FILES.contains(&base)
        })
    })
}

/// Entries that do not make a directory non-empty: a file system's `lost+found` (a store at a
/// mount point) and hidden files (`.DS_Store`, editors' files).
fn ignorable(name: &str) -> bool {
    name == "lost+found" || name.starts_with('.')
}

/// Refuses a writable open of a non-empty directory that is not a store (a home directory, a
/// project's source tree: the open would create `commitlog/`, `lock`, `abort`... in it). A
/// missing or empty directory, or one with any of `commitlog/`, `consumequeue/`, `checkpoint`,
/// `abort`, `lock` or a `config/` holding a broker's files, is fine.
///
/// # Errors
/// [`Error::UnsupportedFormat`] naming the directory and what it holds.
pub(crate) fn check_is_store(root: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read_dir", root, e)),
    };
    let mut others = Vec::new();
    for e in entries {
        let e = e.map_err(|e| Error::io("read_dir", root, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if STORE_MARKERS.contains(&name.as_str())
            || (name == "config" && holds_broker_config(&e.path()))
        {
            return Ok(());
        }
        if !ignorable(&name) {
            others.push(name);
        }
    }
    if others.is_empty() {
        return Ok(());
    }
    others.sort();
    others.truncate(5);
    Err(Error::UnsupportedFormat {
        path: root.to_path_buf(),
        reason: format!(
            "not a store: a non-empty directory without commitlog/, consumequeue/, checkpoint, \
             abort, lock or a broker's config/ (it holds {}); a store is created only in a new \
             or empty directory",
            others.join(", ")
        ),
    })
}

/// The length of the first non-empty regular file of `dir` whose name passes `name_ok`.
fn first_len(dir: &Path, name_ok: impl Fn(&str) -> bool) -> Option<u64> {
    let mut found: Vec<(String, u64)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(e.path()).ok()?;
            (m.is_file() && m.len() > 0 && name_ok(&name)).then_some((name, m.len()))
        })
        .collect();
    found.sort();
    found.first().map(|f| f.1)
}

fn contradicts(key: &str, given: u64, found: u64, what: &str) -> Error {
    Error::Config {
        key: key.into(),
        reason: format!(
            "{key}={given} contradicts the store's files: {what} {found}; leave {key} out to \
             use the store's own value"
        ),
    }
}

/// Takes the commit log, consume queue and index geometry from the files under `root` where
/// `config` leaves them at their defaults, and checks the values it sets explicitly against
/// them. Reads only; a store without such files keeps `config` as it is.
///
/// # Errors
/// [`Error::Config`] naming the keyword, its value and the value the files hold.
pub(crate) fn resolve(root: &Path, config: &mut StoreConfig) -> Result<()> {
    let defaults = StoreConfig::default();

    // Commit log: every file has the size of the first (the queue's load rule checks the rest).
    if let Some(len) = first_len(&root.join("commitlog"), |n| parse_file_name(n).is_some()) {
        if config.mapped_file_size_commit_log == defaults.mapped_file_size_commit_log {
            config.mapped_file_size_commit_log = len;
        } else if config.mapped_file_size_commit_log != len {
            return Err(contradicts(
                "mapped_file_size_commit_log",
                config.mapped_file_size_commit_log,
                len,
                "its commit log files are",
            ));
        }
    }

    // Consume queues: the size most of their files have (a multiple of the 20-byte unit; a
    // damaged file of another size is recovery's business, not a geometry).
    if let Some(len) = cq_file_len(root, config.consume_queue_file_size()) {
        if config.mapped_file_size_consume_queue == defaults.mapped_file_size_consume_queue {
            config.mapped_file_size_consume_queue = len;
        } else if config.consume_queue_file_size() != len {
            return Err(contradicts(
                "mapped_file_size_consume_queue",
                config.mapped_file_size_consume_queue,
                len,
                "its consume queue files are",
            ));
        }
    }

    // Index: 40 + 4 x slots + 20 x entries bytes. With one of the two given, the other follows;
    // with neither, RocketMQ's 1:4 ratio (its defaults) is assumed.
    let mut index_lens = lens(&root.join(crate::index::INDEX_DIR), |n| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    });
    let fits_config = |len: u64| {
        u32::try_from(config.max_hash_slot_num)
            .ok()
            .zip(u32::try_from(config.max_index_num).ok())
            .is_some_and(|(s, e)| index_file_size(s, e) == len)
    };
    if !index_lens.iter().any(|&l| fits_config(l)) {
        index_lens.retain(|&l| l > INDEX_HEADER_SIZE as u64);
        // After an unclean shutdown (an `abort` file) the newest index files may be creations
        // the crash cut short: the geometry is the longest file's, and lengths that give none
        // are left to the index loader (it drops files cut short, refuses the others).
        let crashed = root.join("abort").exists();
        let len = if crashed {
            index_lens.iter().copied().max()
        } else {
            most_common(&index_lens)
        };
        if let Some(len) = len {
            let saved = (config.max_hash_slot_num, config.max_index_num);
            if let Err(e) = resolve_index(config, &defaults, len) {
                (config.max_hash_slot_num, config.max_index_num) = saved;
                if !crashed {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// The configuration `config` becomes when a store at `root` is opened writable: the commit
/// log, consume queue and index geometry taken from its files where `config` leaves them at
/// their defaults (the rules of a writable open). Reads only; nothing is created, locked or
/// changed. Lets a caller that opens many stores (the Spark data source) check its settings
/// against every store before any of them is opened.
///
/// # Errors
/// [`Error::Config`] naming the keyword, its value and the value the files hold, as a writable
/// open would.
pub fn store_geometry(root: &Path, mut config: StoreConfig) -> Result<StoreConfig> {
    config.validate()?;
    resolve(root, &mut config)?;
    Ok(config)
}

/// The lengths of the non-empty regular files of `dir` whose name passes `name_ok`.
fn lens(dir: &Path, name_ok: impl Fn(&str) -> bool) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(e.path()).ok()?;
            (m.is_file() && m.len() > 0 && name_ok(&name)).then_some(m.len())
        })
        .collect()
}

/// The most frequent value (the largest among equals), if any.
fn most_common(v: &[u64]) -> Option<u64> {
    let mut counts = std::collections::BTreeMap::new();
    for &x in v {
        *counts.entry(x).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(x, n)| (n, x))
        .map(|(x, _)| x)
}

/// The consume queue file size of the store: `configured` if any file has it, else the size
/// most files (multiples of 20 bytes) have; `None` without consume queue files.
fn cq_file_len(root: &Path, configured: u64) -> Option<u64> {
    let mut all = Vec::new();
    let cq = root.join("consumequeue");
    for topic in std::fs::read_dir(cq).ok()?.flatten() {
        for queue in std::fs::read_dir(topic.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            all.extend(lens(&queue.path(), |n| parse_file_name(n).is_some()));
        }
    }
    all.retain(|l| l.is_multiple_of(20));
    if all.contains(&configured) {
        return Some(configured);
    }
    most_common(&all)
}

/// How [`contradicts`] names the index files' length.
const SIZES: &str = "its index files (40 + 4 x max_hash_slot_num + 20 x max_index_num bytes) are";

fn resolve_index(config: &mut StoreConfig, defaults: &StoreConfig, len: u64) -> Result<()> {
    let (slots, entries) = (config.max_hash_slot_num, config.max_index_num);
    let fits = |s: u64, e: u64| {
        u32::try_from(s)
            .ok()
            .zip(u32::try_from(e).ok())
            .is_some_and(|(s, e)| index_file_size(s, e) == len)
    };
    if fits(slots, entries) {
        return Ok(());
    }
    let body = len.saturating_sub(INDEX_HEADER_SIZE as u64);
    let slots_given = slots != defaults.max_hash_slot_num;
    let entries_given = entries != defaults.max_index_num;
    let found = |what: &str| {
        format!("its index files are {len} bytes (40 + 4 x max_hash_slot_num + 20 x max_index_num){what}")
    };
    match (slots_given, entries_given) {
        (false, false) => {
            if body.is_multiple_of(84) && body > 0 {
                config.max_hash_slot_num = body / 84;
                config.max_index_num = body / 84 * 4;
                if fits(config.max_hash_slot_num, config.max_index_num) {
                    return Ok(());
                }
            }
            Err(Error::Config {
                key: "max_hash_slot_num".into(),
                reason: found(
                    ", not at RocketMQ's 1:4 ratio: pass max_hash_slot_num (or max_index_num)",
                ),
            })
        }
        (true, false) => {
            let rest = body
                .checked_sub(4 * slots)
                .filter(|r| r.is_multiple_of(20) && *r >= 40);
            match rest {
                Some(r) if fits(slots, r / 20) => {
                    config.max_index_num = r / 20;
                    Ok(())
                }
                _ => Err(contradicts("max_hash_slot_num", slots, len, SIZES)),
            }
        }
        (false, true) => {
            let rest = body
                .checked_sub(20 * entries)
                .filter(|r| r.is_multiple_of(4) && *r > 0);
            match rest {
                Some(r) if fits(r / 4, entries) => {
                    config.max_hash_slot_num = r / 4;
                    Ok(())
                }
                _ => Err(contradicts("max_index_num", entries, len, SIZES)),
            }
        }
        (true, true) => Err(Error::Config {
            key: "max_hash_slot_num".into(),
            reason: format!(
                "max_hash_slot_num={slots} and max_index_num={entries} contradict the store's \
                 files: {}; leave them out to use the store's own values",
                found("")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::ConfigValue;

    fn touch(path: &Path, len: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::File::create(path).unwrap().set_len(len).unwrap();
    }

    #[test]
    fn geometry_comes_from_the_files_and_a_contradiction_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("commitlog/00000000000000000000"), 65536);
        touch(&root.join("consumequeue/T/0/00000000000000000000"), 2000);
        let idx = index_file_size(100, 400);
        touch(&root.join("index/20240101000000000"), idx);
        let mut c = StoreConfig::default();
        resolve(root, &mut c).unwrap();
        assert_eq!(c.mapped_file_size_commit_log, 65536);
        assert_eq!(c.consume_queue_file_size(), 2000);
        assert_eq!((c.max_hash_slot_num, c.max_index_num), (100, 400));

        let mut c = StoreConfig::default();
        c.set("mapped_file_size_commit_log", ConfigValue::Int(1 << 20))
            .unwrap();
        let e = resolve(root, &mut c).unwrap_err().to_string();
        assert!(
            e.contains("mapped_file_size_commit_log") && e.contains("65536"),
            "{e}"
        );

        let mut c = StoreConfig::default();
        c.set("max_hash_slot_num", ConfigValue::Int(100)).unwrap();
        resolve(root, &mut c).unwrap();
        assert_eq!(c.max_index_num, 400);
        let mut c = StoreConfig::default();
        c.set("max_index_num", ConfigValue::Int(1000)).unwrap();
        let e = resolve(root, &mut c).unwrap_err().to_string();
        assert!(
            e.contains("max_index_num") && e.contains(&idx.to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_directory_is_a_store_when_it_is_empty_or_has_a_store_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_is_store(&dir.path().join("missing")).is_ok());
        assert!(check_is_store(dir.path()).is_ok());
        std::fs::create_dir(dir.path().join("lost+found")).unwrap();
        touch(&dir.path().join(".hidden"), 1);
        assert!(check_is_store(dir.path()).is_ok());
        touch(&dir.path().join("notes.txt"), 1);
        let e = check_is_store(dir.path()).unwrap_err().to_string();
        assert!(e.contains("notes.txt"), "{e}");
        touch(&dir.path().join("lock"), 0);
        assert!(check_is_store(dir.path()).is_ok());
    }
}
