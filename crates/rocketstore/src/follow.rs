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
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::commitlog::CommitLog;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::Dispatcher;
use crate::error::{Error, Result};
use crate::mmap::{futex_wait, AppendRegion};
use crate::progress::{
    load32, load64, map_page, snapshot, Snapshot, MAGIC, OFF_INSTANCE, OFF_MAGIC, OFF_SEQ,
    POLL_INTERVAL, PROGRESS_FILE,
};
use crate::util::lock;

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
    /// The progress page before the open's walk, if no writer had the store open then.
    at_open: Option<Snapshot>,
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
    /// `at_open` is the progress page read before the open's recovery walk: if no writer had
    /// the store open then, what it published is what the walk itself checked (and, with CRC
    /// checks, may have cut short at a damaged record), so only later publications are followed.
    pub(crate) fn new(root: &Path, walked: u64, at_open: Option<Snapshot>) -> Self {
        let f = Self {
            root: root.to_path_buf(),
            page: Mutex::new(Page::default()),
            state: Mutex::new(State {
                walked,
                at_open: at_open.filter(|s| !s.open),
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
        if st.seq.is_none() && st.at_open.is_some_and(|a| a.seq == s.seq) {
            // Nothing published since a writer-less open: its walk is the truth.
            st.seq = Some(s.seq);
            st.instance = s.instance;
            st.min = s.min;
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
