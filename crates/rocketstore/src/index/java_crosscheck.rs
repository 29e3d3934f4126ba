//! Cross-check against the independent Java writer (`tests/fixtures/java/BrokerStoreWriter.java`):
//! a broker-like store root is written by Java, then loaded here read-only; every consume queue
//! and every indexed key must reproduce the writer's `manifest.json` exactly, and no byte (nor
//! mtime) of the store may change. Skipped (with a note on stderr) when `javac` / `java` are not
//! on PATH or the fixture is absent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use rocketstore_format::{index_key_hash, parse_file_name, CqUnit, IndexHeader};

use super::*;
use crate::consume_queue::ConsumeQueueStore;

// ---------------------------------------------------------------- a minimal JSON reader

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    fn get(&self, k: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(k).unwrap_or_else(|| panic!("missing key {k}")),
            _ => panic!("not an object looking for {k}"),
        }
    }
    fn i64(&self) -> i64 {
        match self {
            Json::Num(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }
    fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }
    fn obj(&self) -> &BTreeMap<String, Json> {
        match self {
            Json::Obj(m) => m,
            other => panic!("not an object: {other:?}"),
        }
    }
    fn bool(&self) -> bool {
        matches!(self, Json::Bool(true))
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.b[self.i] {
            b'{' => {
                self.i += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.b[self.i] == b'}' {
                    self.i += 1;
                    return Json::Obj(m);
                }
                loop {
                    self.ws();
                    let k = self.string();
                    self.ws();
                    assert_eq!(self.b[self.i], b':');
                    self.i += 1;
                    let v = self.value();
                    m.insert(k, v);
                    self.ws();
                    self.i += 1;
                    if self.b[self.i - 1] == b'}' {
                        return Json::Obj(m);
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.b[self.i] == b']' {
                    self.i += 1;
                    return Json::Arr(v);
                }
                loop {
                    v.push(self.value());
                    self.ws();
                    self.i += 1;
                    if self.b[self.i - 1] == b']' {
                        return Json::Arr(v);
                    }
                }
            }
            b'"' => Json::Str(self.string()),
            b't' => {
                self.i += 4;
                Json::Bool(true)
            }
            b'f' => {
                self.i += 5;
                Json::Bool(false)
            }
            b'n' => {
                self.i += 4;
                Json::Null
            }
            _ => {
                let start = self.i;
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_digit() || *c == b'-')
                {
                    self.i += 1;
                }
                Json::Num(
                    std::str::from_utf8(&self.b[start..self.i])
                        .unwrap()
                        .parse()
                        .unwrap(),
                )
            }
        }
    }
    fn hex4(&mut self) -> u32 {
        let v = u32::from_str_radix(
            std::str::from_utf8(&self.b[self.i..self.i + 4]).unwrap(),
            16,
        )
        .unwrap();
        self.i += 4;
        v
    }
    fn string(&mut self) -> String {
        assert_eq!(self.b[self.i], b'"');
        self.i += 1;
        // Everything is collected as UTF-16 units, so escaped surrogate pairs join up.
        let mut units: Vec<u16> = Vec::new();
        loop {
            let c = self.b[self.i];
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.b[self.i];
                    self.i += 1;
                    let unit = match e {
                        b'u' => u16::try_from(self.hex4()).unwrap(),
                        b'n' => 10,
                        b'r' => 13,
                        b't' => 9,
                        b'b' => 8,
                        b'f' => 12,
                        other => u16::from(other),
                    };
                    units.push(unit);
                }
                _ => {
                    // Raw UTF-8 (the writer escapes everything outside ASCII, but be lenient).
                    let start = self.i - 1;
                    let mut end = self.i;
                    while end < self.b.len() && (self.b[end] & 0xC0) == 0x80 {
                        end += 1;
                    }
                    units.extend(
                        std::str::from_utf8(&self.b[start..end])
                            .unwrap()
                            .encode_utf16(),
                    );
                    self.i = end;
                }
            }
        }
        String::from_utf16(&units).unwrap()
    }
}

fn parse_json(bytes: &[u8]) -> Json {
    let mut r = Reader { b: bytes, i: 0 };
    r.value()
}

#[test]
fn json_reader_handles_escapes() {
    let j = parse_json(
        br#"{"a":[1,-2,true,false,null],"s":"x\u0001\ud83d\ude80y\n\u4e2d\"","e":{},"l":[]}"#,
    );
    assert_eq!(j.get("a").arr().len(), 5);
    assert_eq!(j.get("a").arr()[1].i64(), -2);
    assert_eq!(j.get("s").str(), "x\u{1}\u{1F680}y\n\u{4e2d}\"");
    assert!(j.get("e").obj().is_empty());
    assert!(j.get("l").arr().is_empty());
}

// ---------------------------------------------------------------- running the writer

fn java_classes() -> Option<&'static PathBuf> {
    static CLASSES: OnceLock<Option<PathBuf>> = OnceLock::new();
    CLASSES
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/java/BrokerStoreWriter.java");
            if !src.exists() {
                eprintln!("skipping the Java cross-check: {} is absent", src.display());
                return None;
            }
            // Next to the test binary (inside the cargo target dir), one directory per run.
            let base = std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_else(std::env::temp_dir);
            let out = base.join(format!("rocketstore-javacls-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&out);
            match Command::new("javac").arg("-d").arg(&out).arg(&src).output() {
                Ok(o) if o.status.success() => Some(out),
                Ok(o) => panic!("javac failed: {}", String::from_utf8_lossy(&o.stderr)),
                Err(e) => {
                    eprintln!("skipping the Java cross-check: javac not runnable ({e})");
                    None
                }
            }
        })
        .as_ref()
}

/// Writes a store with the Java writer into a fresh temp dir; `None` if Java is unavailable.
fn java_store(scenario: &str, extra: &[&str]) -> Option<(tempfile::TempDir, Json)> {
    let classes = java_classes()?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let out = Command::new("java")
        .arg("-Duser.timezone=UTC")
        .arg("-cp")
        .arg(classes)
        .arg("BrokerStoreWriter")
        .arg("--root")
        .arg(&root)
        .arg("--scenario")
        .arg(scenario)
        .args(extra)
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "java failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = parse_json(&std::fs::read(root.join("manifest.json")).unwrap());
    Some((dir, manifest))
}

/// Length, CRC and mtime of every file under `dirs`.
fn snapshot(dirs: &[PathBuf]) -> BTreeMap<PathBuf, (u64, u32, Option<SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<PathBuf> = dirs.iter().filter(|d| d.exists()).cloned().collect();
    while let Some(d) = stack.pop() {
        let children: Vec<PathBuf> = if d.is_dir() {
            std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        } else {
            vec![d]
        };
        for p in children {
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                let crc = crc32fast::hash(&std::fs::read(&p).unwrap());
                out.insert(p, (m.len(), crc, m.modified().ok()));
            }
        }
    }
    out
}

// ---------------------------------------------------------------- the checks

fn check_consume_queues(root: &Path, man: &Json) {
    let units_per_file = man.get("cq_units_per_file").i64();
    let file_size = (units_per_file * 20) as u64;
    let commitlog_min = parse_file_name(man.get("commitlog_files").arr()[0].str()).unwrap();
    let store = ConsumeQueueStore::load(root, file_size, false).unwrap();
    store.recover_all().unwrap();

    let queues = man.get("queues").obj();
    let mut expected: BTreeSet<(String, i32)> = BTreeSet::new();
    for (topic, qs) in queues {
        for qid in qs.obj().keys() {
            expected.insert((topic.clone(), qid.parse().unwrap()));
        }
    }
    let loaded: BTreeSet<(String, i32)> = store
        .all()
        .iter()
        .map(|q| (q.topic().to_string(), q.queue_id()))
        .collect();
    assert_eq!(loaded, expected, "the set of queues");

    let mut max_end = -1i64;
    for (topic, qs) in queues {
        for (qid, info) in qs.obj() {
            let q = store.get(topic, qid.parse().unwrap()).unwrap();
            let (min, max, prefill) = (
                info.get("min").i64(),
                info.get("max").i64(),
                info.get("prefill").i64(),
            );
            assert_eq!(q.max_offset(), max, "{topic}/{qid} max");
            let names: Vec<String> = std::fs::read_dir(q.dir())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let want: Vec<String> = info
                .get("files")
                .arr()
                .iter()
                .map(|f| f.str().to_string())
                .collect();
            assert_eq!(names, want, "{topic}/{qid} files");
            let first_from = (parse_file_name(&want[0]).unwrap() / 20) as i64;
            // Before a restart the writer's min is the real start; after one, HEAD's
            // correctMinOffset may land inside the pre-fill range (spec §5.4 quirk).
            q.correct_min_offset(commitlog_min);
            if prefill == 0 {
                assert_eq!(q.min_offset(), min, "{topic}/{qid} min");
            } else {
                assert!(
                    (first_from..=min).contains(&q.min_offset()),
                    "{topic}/{qid} min {}",
                    q.min_offset()
                );
                // The pre-fill units, read from the file bytes.
                let bytes = std::fs::read(q.dir().join(&want[0])).unwrap();
                let pos0 = (min - first_from - prefill) as usize * 20;
                for k in 0..prefill as usize {
                    assert_eq!(
                        CqUnit::decode(&bytes[pos0 + k * 20..]),
                        Some(CqUnit::PREFILL)
                    );
                }
            }
            if let Some((_, u)) = q.last_unit() {
                max_end = max_end.max(u.phy_offset + i64::from(u.size));
                assert_eq!(q.max_physic_offset(), u.phy_offset + i64::from(u.size));
            }
        }
    }
    assert_eq!(store.max_physic_offset(), max_end);

    // Every dispatched record is in its queue at its queue offset, and nothing else is.
    let mut per_queue: HashMap<(String, i32), BTreeMap<i64, CqUnit>> = HashMap::new();
    for r in man.get("records").arr() {
        if !r.get("dispatched").bool() {
            continue;
        }
        let key = (
            r.get("topic").str().to_string(),
            r.get("queue_id").i64() as i32,
        );
        let u = CqUnit {
            phy_offset: r.get("commitlog_offset").i64(),
            size: r.get("store_size").i64() as i32,
            tags_code: r.get("tags_code").i64(),
        };
        assert!(per_queue
            .entry(key)
            .or_default()
            .insert(r.get("queue_offset").i64(), u)
            .is_none());
    }
    for ((topic, qid), units) in &per_queue {
        let q = store.get(topic, *qid).unwrap();
        let info = queues[topic].get(&qid.to_string());
        let (min, max) = (info.get("min").i64(), info.get("max").i64());
        assert_eq!(
            units.keys().copied().collect::<Vec<_>>(),
            (min..max).collect::<Vec<_>>(),
            "{topic}/{qid}"
        );
        for (off, u) in units {
            assert_eq!(q.get(*off), Some(*u), "{topic}/{qid} @{off}");
        }
        // One CQ file per read: units_from never crosses a file end.
        let got = q.units_from(min, usize::MAX);
        let file_end = (min / units_per_file + 1) * units_per_file;
        assert_eq!(got.len() as i64, file_end.min(max) - min);
        for (off, u) in got {
            assert_eq!(units.get(&off), Some(&u));
        }
    }
    assert_eq!(per_queue.len(), expected.len());
}

fn check_index(root: &Path, man: &Json) {
    let slots = man.get("index_slots").i64() as u32;
    let entries = man.get("index_entries").i64() as u32;
    let abort = man.get("abort").bool();
    let cp_index_ts = man.get("checkpoint").get("index_msg_timestamp").i64();
    let idx = IndexService::load(root, slots, entries, false, !abort, cp_index_ts).unwrap();

    let names: Vec<String> = idx
        .files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let all_names: Vec<String> = man
        .get("index_files")
        .arr()
        .iter()
        .map(|f| f.str().to_string())
        .collect();
    let headers: Vec<IndexHeader> = all_names
        .iter()
        .map(|n| IndexHeader::decode(&std::fs::read(root.join("index").join(n)).unwrap()).unwrap())
        .collect();
    // Read-only keeps every file, also after an abort: each hit is checked against its record
    // and the store covers the records past the index with an in-memory key map.
    let kept: Vec<String> = all_names.clone();
    assert_eq!(names, kept, "index files loaded");
    assert_eq!(
        idx.headers(),
        headers
            .iter()
            .zip(&all_names)
            .filter(|(_, n)| kept.contains(n))
            .map(|(h, _)| *h)
            .collect::<Vec<_>>()
    );
    // Files with time names: yyyyMMddHHmmssSSS in the writer's (UTC) zone.
    for n in &all_names {
        assert_eq!(n.len(), 17);
    }
    // Records indexed into the loaded files: with an abort, the loaded files are a prefix.
    let loaded_end_phy = idx.headers().last().map_or(-1, |h| h.end_phy_offset);
    let mut by_hash: HashMap<i32, Vec<i64>> = HashMap::new();
    let mut keys: BTreeSet<String> = BTreeSet::new();
    for r in man.get("records").arr() {
        let phy = r.get("commitlog_offset").i64();
        for k in r.get("indexed_keys").arr() {
            let k = k.str();
            keys.insert(k.to_string());
            if !abort || phy <= loaded_end_phy {
                by_hash.entry(index_key_hash(k)).or_default().push(phy);
            }
        }
    }
    assert!(!keys.is_empty());
    let last = idx.headers().last().copied().unwrap_or_default();
    for k in &keys {
        let (topic, key) = k.split_once('#').unwrap();
        let r = idx.query(topic, key, usize::MAX, 0, i64::MAX);
        assert_eq!(
            (
                r.index_last_update_timestamp,
                r.index_last_update_phy_offset
            ),
            (last.end_timestamp, last.end_phy_offset)
        );
        // Newest first: records are indexed in commit-log order.
        assert!(
            r.phy_offsets.windows(2).all(|w| w[0] >= w[1]),
            "{k}: {:?}",
            r.phy_offsets
        );
        let mut got = r.phy_offsets.clone();
        got.sort_unstable();
        let mut want = by_hash.get(&index_key_hash(k)).cloned().unwrap_or_default();
        want.sort_unstable();
        if abort {
            // A record straddling the last loaded file's end may have some keys in a dropped file.
            assert!(got.iter().all(|p| want.binary_search(p).is_ok()), "{k}");
        } else {
            assert_eq!(got, want, "{k}");
        }
        // max_num and a time window that excludes everything.
        assert!(idx.query(topic, key, 1, 0, i64::MAX).phy_offsets.len() <= 1);
        assert!(idx
            .query(topic, key, 64, last.end_timestamp + 1, i64::MAX)
            .phy_offsets
            .is_empty());
    }
}

fn cross_check(scenario: &str, extra: &[&str]) {
    let Some((dir, man)) = java_store(scenario, extra) else {
        return;
    };
    let root = dir.path().join("store");
    let watched = [
        root.join("consumequeue"),
        root.join("index"),
        root.join("commitlog"),
        root.join("checkpoint"),
    ];
    let before = snapshot(&watched);
    check_consume_queues(&root, &man);
    check_index(&root, &man);
    assert_eq!(
        snapshot(&watched),
        before,
        "a read-only load must not change a byte"
    );
}

#[test]
fn java_full_scenario() {
    cross_check("full", &[]);
}

#[test]
fn java_full_scenario_other_seed_after_abort() {
    cross_check("full", &["--seed", "7", "--abort", "--messages", "600"]);
}

#[test]
fn java_basic_scenario() {
    cross_check("basic", &["--seed", "3"]);
}

/// Spec §16 vector 12 written by Java: `TopicTest/0` starts at offset 3 (three pre-fill units).
#[test]
fn java_vectors_scenario() {
    cross_check("vectors", &[]);
}

/// Spec §16 vector 15 written by Java: one default-size index file with `TopicTest#OrderID001`.
#[test]
fn java_vectors_index_scenario() {
    let Some((dir, man)) = java_store("vectors-index", &[]) else {
        return;
    };
    let root = dir.path().join("store");
    check_index(&root, &man);
    let idx = IndexService::load(&root, 5_000_000, 20_000_000, false, true, 0).unwrap();
    assert_eq!(
        idx.query("TopicTest", "OrderID001", 32, 0, i64::MAX)
            .phy_offsets,
        [0]
    );
    let h = idx.headers()[0];
    assert_eq!(
        (
            h.begin_timestamp,
            h.end_timestamp,
            h.index_count,
            h.hash_slot_count
        ),
        (1_700_000_000_123, 1_700_000_000_123, 2, 1)
    );
    // And our own writer produces the same bytes for that record (header, slot, entry #1).
    let ours = tempfile::tempdir().unwrap();
    let s = IndexService::load(ours.path(), 5_000_000, 20_000_000, true, true, 0).unwrap();
    s.build_index(&IndexRequest {
        topic: "TopicTest",
        phy_offset: 0,
        store_timestamp: 1_700_000_000_123,
        sys_flag: 0,
        uniq_key: None,
        keys: Some("OrderID001"),
    })
    .unwrap();
    let read = |p: &Path, pos: u64, len: usize| {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(p).unwrap();
        f.seek(SeekFrom::Start(pos)).unwrap();
        let mut b = vec![0u8; len];
        f.read_exact(&mut b).unwrap();
        b
    };
    let java_file = idx.files()[0].clone();
    let our_file = s.files()[0].clone();
    for (pos, len) in [(0u64, 40usize), (5_091_584, 4), (20_000_060, 40)] {
        assert_eq!(
            read(&java_file, pos, len),
            read(&our_file, pos, len),
            "bytes at {pos}"
        );
    }
}
