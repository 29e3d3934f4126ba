//! Consumer progress (`config/consumerOffset.json`) and topic configs (`config/topics.json`),
//! in the shape RocketMQ's broker writes them, so a broker that loads the store keeps its
//! consumers' offsets and topics, and a Python consumer resumes where it stopped.
//!
//! Saving copies the previous file to `<name>.bak` first (RocketMQ `MixAll.string2File`), then
//! replaces the file atomically (temporary file, fsync, rename, directory fsync). Loading falls
//! back to the `.bak` copy when the file is missing or unreadable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::json::{self, Json};
use crate::util::{lock, now_ms};

/// Validates a consumer group name: RocketMQ's topic characters, at most 120 characters.
pub(crate) fn validate_group(group: &str) -> Result<()> {
    if group.is_empty() || group.len() > 120 {
        return Err(Error::invalid("group", "must be 1 to 120 characters"));
    }
    if !group
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"%|_-".contains(&b))
    {
        return Err(Error::invalid(
            "group",
            format!("{group:?} has characters outside [%|a-zA-Z0-9_-]"),
        ));
    }
    Ok(())
}

pub(crate) fn read_with_backup(path: &Path) -> Result<Option<Json>> {
    let bak = bak_path(path);
    for p in [path, bak.as_path()] {
        match std::fs::read(p) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(bytes) => match json::parse(&bytes) {
                Ok(v) => return Ok(Some(v)),
                Err(_) => continue,
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("read", p, e)),
        }
    }
    Ok(None)
}

fn bak_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".bak");
    PathBuf::from(s)
}

/// Writes `text` to `path` the RocketMQ way (`.bak` of the old content) but atomically.
pub(crate) fn save(path: &Path, text: &str, sync: bool) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::invalid("path", "no parent directory"))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))?;
    if path.exists() {
        std::fs::copy(path, bak_path(path)).map_err(|e| Error::io("copy", path, e))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io("write", &tmp, e))?;
    if sync {
        f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    }
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    if sync {
        crate::util::fsync_dir(dir)?;
    }
    Ok(())
}

/// `config/consumerOffset.json`: `offsetTable` keyed `"<topic>@<group>"` → `{queueId: offset}`.
#[derive(Debug)]
pub(crate) struct ConsumerOffsets {
    path: PathBuf,
    table: Mutex<BTreeMap<String, BTreeMap<i32, i64>>>,
    dirty: AtomicBool,
}

impl ConsumerOffsets {
    pub(crate) fn load(root: &Path) -> Result<Self> {
        let path = root.join("config").join("consumerOffset.json");
        let mut table = BTreeMap::new();
        if let Some(v) = read_with_backup(&path)? {
            if let Some(t) = v.get("offsetTable").and_then(Json::as_obj) {
                for (key, queues) in t {
                    let mut q = BTreeMap::new();
                    for (qid, off) in queues.as_obj().into_iter().flatten() {
                        if let (Ok(qid), Some(off)) = (qid.parse::<i32>(), off.as_i64()) {
                            q.insert(qid, off);
                        }
                    }
                    table.insert(key.clone(), q);
                }
            }
        }
        Ok(Self {
            path,
            table: Mutex::new(table),
            dirty: AtomicBool::new(false),
        })
    }

    pub(crate) fn commit(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<()> {
        validate_group(group)?;
        rocketstore_format::validate_topic(topic)
            .map_err(|e| Error::invalid("topic", e.to_string()))?;
        if queue_id < 0 {
            return Err(Error::invalid("queue_id", "must not be negative"));
        }
        if offset < 0 {
            return Err(Error::invalid("offset", "must not be negative"));
        }
        lock(&self.table)
            .entry(format!("{topic}@{group}"))
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// The committed offset, or -1 (RocketMQ's "no offset").
    pub(crate) fn query(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        lock(&self.table)
            .get(&format!("{topic}@{group}"))
            .and_then(|q| q.get(&queue_id))
            .copied()
            .unwrap_or(-1)
    }

    /// Every (topic, group, queue id, offset).
    pub(crate) fn all(&self) -> Vec<(String, String, i32, i64)> {
        let t = lock(&self.table);
        let mut out = Vec::new();
        for (key, q) in t.iter() {
            let (topic, group) = key.rsplit_once('@').unwrap_or((key.as_str(), ""));
            for (qid, off) in q {
                out.push((topic.to_string(), group.to_string(), *qid, *off));
            }
        }
        out
    }

    fn render(&self) -> String {
        let t = lock(&self.table);
        let mut s = String::from("{\n\t\"offsetTable\":{");
        for (i, (key, q)) in t.iter().enumerate() {
            s.push_str(if i == 0 { "\n\t\t" } else { ",\n\t\t" });
            json::write_str(&mut s, key);
            s.push_str(":{");
            for (j, (qid, off)) in q.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{qid}:{off}");
            }
            s.push('}');
        }
        s.push_str("\n\t}\n}");
        s
    }

    /// Saves if anything changed since the last save.
    pub(crate) fn persist(&self, sync: bool) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let text = self.render();
        save(&self.path, &text, sync).inspect_err(|_| self.dirty.store(true, Ordering::Release))
    }
}

/// `config/topics.json`: topic configs with their queue counts. Topics the broker wrote are
/// kept as they are; topics we saw get at least as many queues as their largest queue id + 1.
#[derive(Debug)]
pub(crate) struct TopicConfigs {
    path: PathBuf,
    raw: Mutex<BTreeMap<String, Json>>,
    data_version: Mutex<(i64, i64)>,
}

impl TopicConfigs {
    pub(crate) fn load(root: &Path) -> Result<Self> {
        let path = root.join("config").join("topics.json");
        let mut raw = BTreeMap::new();
        let mut version = (0, 0);
        if let Some(v) = read_with_backup(&path)? {
            if let Some(t) = v.get("topicConfigTable").and_then(Json::as_obj) {
                raw = t.clone();
            }
            if let Some(dv) = v.get("dataVersion") {
                version = (
                    dv.get("counter").and_then(Json::as_i64).unwrap_or(0),
                    dv.get("timestamp").and_then(Json::as_i64).unwrap_or(0),
                );
            }
        }
        Ok(Self {
            path,
            raw: Mutex::new(raw),
            data_version: Mutex::new(version),
        })
    }

    /// Queue count of a topic (max of read and write queue numbers), if known.
    pub(crate) fn queue_nums(&self, topic: &str) -> Option<i32> {
        let raw = lock(&self.raw);
        let t = raw.get(topic)?;
        let r = t.get("readQueueNums").and_then(Json::as_i64).unwrap_or(0);
        let w = t.get("writeQueueNums").and_then(Json::as_i64).unwrap_or(0);
        Some(r.max(w) as i32)
    }

    /// Records the queue counts seen in the store; returns true if anything changed.
    pub(crate) fn observe(&self, queues: impl IntoIterator<Item = (String, i32)>) -> bool {
        let mut raw = lock(&self.raw);
        let mut changed = false;
        for (topic, qid) in queues {
            let need = i64::from(qid) + 1;
            let entry = raw.entry(topic.clone()).or_insert_with(|| {
                changed = true;
                let mut m = BTreeMap::new();
                m.insert("order".into(), Json::Bool(false));
                m.insert("perm".into(), Json::Num(6.0, Some(6)));
                m.insert("readQueueNums".into(), Json::Num(0.0, Some(0)));
                m.insert("topicFilterType".into(), Json::Str("SINGLE_TAG".into()));
                m.insert("topicName".into(), Json::Str(topic.clone()));
                m.insert("topicSysFlag".into(), Json::Num(0.0, Some(0)));
                m.insert("writeQueueNums".into(), Json::Num(0.0, Some(0)));
                Json::Obj(m)
            });
            if let Json::Obj(m) = entry {
                for k in ["readQueueNums", "writeQueueNums"] {
                    let cur = m.get(k).and_then(Json::as_i64).unwrap_or(0);
                    if cur < need {
                        m.insert(k.into(), Json::Num(need as f64, Some(need)));
                        changed = true;
                    }
                }
            }
        }
        if changed {
            let mut dv = lock(&self.data_version);
            dv.0 += 1;
            dv.1 = now_ms();
        }
        changed
    }

    fn render(&self) -> String {
        fn value(s: &mut String, v: &Json) {
            match v {
                Json::Null => s.push_str("null"),
                Json::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
                Json::Num(f, Some(i)) if (*i as f64 - f).abs() < 1.0 => {
                    let _ = write!(s, "{i}");
                }
                Json::Num(f, _) => {
                    let _ = write!(s, "{f}");
                }
                Json::Str(x) => json::write_str(s, x),
                Json::Arr(a) => {
                    s.push('[');
                    for (i, x) in a.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        value(s, x);
                    }
                    s.push(']');
                }
                Json::Obj(m) => {
                    s.push('{');
                    for (i, (k, x)) in m.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        json::write_str(s, k);
                        s.push(':');
                        value(s, x);
                    }
                    s.push('}');
                }
            }
        }
        let raw = lock(&self.raw);
        let (counter, ts) = *lock(&self.data_version);
        let mut s = format!("{{\n\t\"dataVersion\":{{\"counter\":{counter},\"timestamp\":{ts}}},\n\t\"topicConfigTable\":{{");
        for (i, (k, v)) in raw.iter().enumerate() {
            s.push_str(if i == 0 { "\n\t\t" } else { ",\n\t\t" });
            json::write_str(&mut s, k);
            s.push(':');
            value(&mut s, v);
        }
        s.push_str("\n\t}\n}");
        s
    }

    pub(crate) fn persist(&self, sync: bool) -> Result<()> {
        save(&self.path, &self.render(), sync)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn consumer_offsets_round_trip_with_backup() {
        let dir = tempfile::tempdir().unwrap();
        let o = ConsumerOffsets::load(dir.path()).unwrap();
        assert_eq!(o.query("g1", "T", 0), -1);
        o.commit("g1", "T", 0, 250).unwrap();
        o.commit("g1", "T", 1, 251).unwrap();
        assert!(o.commit("bad group", "T", 0, 1).is_err());
        assert!(o.commit("g", "../x", 0, 1).is_err());
        o.persist(true).unwrap();
        let text = std::fs::read_to_string(dir.path().join("config/consumerOffset.json")).unwrap();
        assert!(text.contains("\"T@g1\":{0:250,1:251}"), "{text}");
        o.commit("g1", "T", 0, 300).unwrap();
        o.persist(true).unwrap();
        assert!(dir.path().join("config/consumerOffset.json.bak").exists());
        let again = ConsumerOffsets::load(dir.path()).unwrap();
        assert_eq!(again.query("g1", "T", 0), 300);
        // A damaged file falls back to the .bak copy.
        std::fs::write(dir.path().join("config/consumerOffset.json"), b"{garbage").unwrap();
        assert_eq!(
            ConsumerOffsets::load(dir.path())
                .unwrap()
                .query("g1", "T", 0),
            250
        );
    }

    #[test]
    fn topics_keep_broker_fields() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(
            dir.path().join("config/topics.json"),
            br#"{"dataVersion":{"counter":3,"timestamp":1},"topicConfigTable":{"B":{"perm":6,"readQueueNums":8,"writeQueueNums":8,"topicName":"B","attributes":{}}}}"#,
        )
        .unwrap();
        let t = TopicConfigs::load(dir.path()).unwrap();
        assert!(t.observe([("A".to_string(), 3), ("B".to_string(), 2)]));
        t.persist(false).unwrap();
        let t2 = TopicConfigs::load(dir.path()).unwrap();
        assert_eq!(t2.queue_nums("A"), Some(4));
        assert_eq!(t2.queue_nums("B"), Some(8));
        let text = std::fs::read_to_string(dir.path().join("config/topics.json")).unwrap();
        assert!(text.contains("\"attributes\":{}"));
    }
}
