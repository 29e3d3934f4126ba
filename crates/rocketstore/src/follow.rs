//! Readers that follow a writer in another process.
//!
//! A writable store publishes its progress in a small shared file, `<root>/rocketstore.progress`
//! (one 4 KiB page; a RocketMQ broker ignores files it does not know at the store root): after
//! every dispatch pass, the end of what is dispatched (every record below it is complete in the
//! commit log and has its consume queue unit) and the commit log's first offset, then a sequence
//! number is bumped and everyone waiting on it is woken (`FUTEX_WAKE` on the shared mapping).
//!
//! A read-only store maps the same page ([`Follower`]). Before each read it compares the
//! sequence number with the one it last saw; when it moved it *refreshes*: it makes the commit
//! log readable up to the published end (opening the files the writer rolled to and dropping
//! those its cleanup deleted), walks the new records to learn which queues grew, and extends
//! those consume queues unit by unit, each unit checked against its record (its queue id, queue
//! offset, position and size) before it becomes readable. A waiting `pull` sleeps on the
//! sequence word (`FUTEX_WAIT`, shared) with its deadline: no CPU while idle.
//!
//! The word is not trusted blindly: its instance id changes on every writable open (a restart
//! after a kill -9); a new instance whose end lies below what this reader already reads (the
//! log was cut, `Store::open_truncated`) makes the reader refuse reads with
//! [`Error::InvalidArgument`] (`follow`) until it is reopened. Expired files deleted under a
//! reader stay mapped (no SIGBUS) until the refresh drops them; reads below the new first
//! offset then answer with the usual statuses (`OFFSET_TOO_SMALL`, `MESSAGE_WAS_REMOVING`).
//! A store whose writer does not publish progress (a broker, an older rocketstore) is not
//! followed: a reader sees what was there when it opened, and looks for the progress file at
//! most every [`POLL_INTERVAL`] (a writer that starts later is followed from then on).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::commitlog::CommitLog;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::error::{Error, Result};
use crate::mmap::{futex_wait, futex_wake, AppendRegion, MmapRegion};
use crate::util::lock;

/// The progress file at the store root.
pub const PROGRESS_FILE: &str = "rocketstore.progress";
/// Its size: one page.
const PAGE: usize = 4096;
const MAGIC: u32 = 0x5253_5047; // "RSPG"
const VERSION: u32 = 1;
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
/// The futex word: bumped after every publication.
const OFF_SEQ: usize = 8;
/// 1 while a writer has the store open.
const OFF_OPEN: usize = 12;
const OFF_INSTANCE: usize = 16;
const OFF_END: usize = 24;
const OFF_MIN: usize = 32;
/// How often a reader of a store without a progress file looks for one (and for new data).
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

fn map_page(path: &Path, writable: bool) -> Result<(File, AppendRegion)> {
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
fn load32(r: &AppendRegion, off: usize) -> u32 {
    r.atomic_u32(off).map_or(0, |w| w.load(Ordering::Acquire))
}

fn load64(r: &AppendRegion, off: usize) -> u64 {
    r.atomic_u64(off).map_or(0, |w| w.load(Ordering::Acquire))
}

fn store32(r: &AppendRegion, off: usize, v: u32) {
    if let Some(w) = r.atomic_u32(off) {
        w.store(v, Ordering::Release);
    }
}

fn store64(r: &AppendRegion, off: usize, v: u64) {
    if let Some(w) = r.atomic_u64(off) {
        w.store(v, Ordering::Release);
    }
}

/// Bumps the sequence word and wakes its waiters.
fn bump(r: &AppendRegion) {
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
struct Snapshot {
    seq: u32,
    instance: u64,
    end: u64,
    min: u64,
}

#[derive(Debug, Default)]
struct State {
    /// The last sequence number refreshed for (`None`: never).
    seq: Option<u32>,
    instance: u64,
    /// Records below this were walked for the queues they touch.
    walked: u64,
    /// The commit log's first offset last published.
    min: u64,
    /// The writer's log was cut below what this reader reads.
    diverged: Option<String>,
}

#[derive(Debug, Default)]
struct Page {
    map: Option<Arc<(File, AppendRegion)>>,
    /// Last look for the file while it was missing.
    looked: Option<Instant>,
}

/// The reader's side (read-only stores).
#[derive(Debug)]
pub(crate) struct Follower {
    root: PathBuf,
    page: Mutex<Page>,
    state: Mutex<State>,
}

impl Follower {
    /// A follower of the store at `root` whose consume queues are known to be complete for the
    /// records below `walked` (the queues loaded at open are all followed on the first refresh;
    /// queues created later hold only records at or above it).
    pub(crate) fn new(root: &Path, walked: u64) -> Self {
        let f = Self {
            root: root.to_path_buf(),
            page: Mutex::new(Page::default()),
            state: Mutex::new(State {
                walked,
                ..State::default()
            }),
        };
        if let Some(p) = f.page() {
            lock(&f.state).instance = load64(&p.1, OFF_INSTANCE);
        }
        f
    }

    /// The mapped progress page; while it is missing, looked for at most every
    /// [`POLL_INTERVAL`].
    fn page(&self) -> Option<Arc<(File, AppendRegion)>> {
        let mut g = lock(&self.page);
        if g.map.is_none() && g.looked.is_none_or(|t| t.elapsed() >= POLL_INTERVAL) {
            g.looked = Some(Instant::now());
            if let Ok(p) = map_page(&self.root.join(PROGRESS_FILE), false) {
                if load32(&p.1, OFF_MAGIC) == MAGIC {
                    g.map = Some(Arc::new(p));
                }
            }
        }
        g.map.clone()
    }

    /// The current sequence number (to wait on), `None` without a progress file.
    pub(crate) fn seq(&self) -> Option<u32> {
        self.page().map(|p| load32(&p.1, OFF_SEQ))
    }

    /// Brings the read-only view up to the writer's published progress (cheap when nothing
    /// moved: one atomic load).
    pub(crate) fn refresh(
        &self,
        log: &CommitLog,
        cqs: &ConsumeQueueStore,
        dispatcher: &Dispatcher,
    ) -> Result<()> {
        let page = self.page();
        let mut st = lock(&self.state);
        if let Some(reason) = &st.diverged {
            return Err(Error::invalid("follow", reason.clone()));
        }
        let Some(page) = page else {
            return Ok(());
        };
        let s = snapshot(&page.1);
        if st.seq == Some(s.seq) {
            return Ok(());
        }
        if s.instance != st.instance {
            // A new writer (a restart): its recovery may have cut what we read.
            if s.end < log.max_offset() && s.end != 0 {
                let reason = format!(
                    "the writer restarted with its commit log ending at {}, below the {} this \
                     reader already reads (the log was cut): reopen the store",
                    s.end,
                    log.max_offset()
                );
                st.diverged = Some(reason.clone());
                return Err(Error::invalid("follow", reason));
            }
            st.instance = s.instance;
        }
        log.follow_to(s.end, s.min)?;
        let first = st.seq.is_none();
        let end = log.max_offset().min(s.end);
        let from = st.walked.max(log.min_offset());
        let mut touched: BTreeSet<(String, i32)> = BTreeSet::new();
        let reached = if end > from {
            log.for_each_record(from, end, |rec, _| {
                touched.insert((rec.topic.to_string(), rec.queue_id));
                Ok(())
            })?
        } else {
            from
        };
        if first {
            for q in cqs.all() {
                touched.insert((q.topic().to_string(), q.queue_id()));
            }
        }
        let limit = reached.max(end);
        for (topic, qid) in &touched {
            if let Some(q) = cqs.follow_queue(topic, *qid)? {
                q.follow(log, limit)?;
            }
        }
        if let Some(index) = &dispatcher.index {
            index.follow(log.min_offset())?;
        }
        st.walked = st.walked.max(reached);
        if reached > dispatcher.reput_from() {
            dispatcher.set_reput_from(reached);
        }
        if s.min != st.min {
            st.min = s.min;
            for q in cqs.all() {
                q.follow_expired(log.min_offset());
            }
        }
        st.seq = Some(s.seq);
        Ok(())
    }

    /// Sleeps until the sequence number moves past `seen` or `deadline` (at most
    /// [`POLL_INTERVAL`] without a progress file).
    pub(crate) fn wait(&self, seen: Option<u32>, deadline: Instant) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        match (self.page(), seen) {
            (Some(p), Some(seen)) => {
                if let Some(word) = p.1.atomic_u32(OFF_SEQ) {
                    if word.load(Ordering::Acquire) == seen {
                        // At most a second at a time: a close of this store on another
                        // thread is noticed by the caller between waits.
                        futex_wait(word, seen, (deadline - now).min(Duration::from_secs(1)));
                    }
                }
            }
            _ => std::thread::sleep((deadline - now).min(POLL_INTERVAL)),
        }
    }
}

fn snapshot(r: &AppendRegion) -> Snapshot {
    // The sequence number first: the values read after it are at least as new.
    let seq = load32(r, OFF_SEQ);
    Snapshot {
        seq,
        instance: load64(r, OFF_INSTANCE),
        end: load64(r, OFF_END),
        min: load64(r, OFF_MIN),
    }
}
