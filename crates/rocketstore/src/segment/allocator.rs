//! The hand-off between the commit log writer and the allocate service (RocketMQ
//! `AllocateMappedFileService`'s request table): the writer asks for the next files, the service
//! (`service/allocate.rs`, which runs [`Allocator::serve_pending`] on its thread) makes them.
//!
//! When the writer needs file *n* it calls [`Allocator::take`], which registers requests for *n*
//! and *n+1* (de-duplicated by offset), wakes the service and waits up to
//! `allocate_wait_timeout` for *n*. The service serves requests in RocketMQ's order (larger
//! files first, then smaller offsets): it creates each file with `fallocate`, fsyncs it and its
//! directory, and warms it if asked. If the wait times out while the request has not been
//! started, the writer cancels it and creates the file itself; a request already being served is
//! waited for. A failed creation (ENOSPC, EIO) is handed to the put that needs the file as a
//! typed error; the store is not poisoned. Files created but never taken are deleted on close.
//!
//! Pre-faulting (`populate`): the service does not fault a whole new file in when it creates
//! it. The writer reports how far it has written ([`Allocator::wrote_to`]) and the service
//! keeps the pages of the next [`prefault_window`] bytes of the commit log pre-faulted
//! (`MADV_POPULATE_WRITE`), [`PREFAULT_STEP`] at a time, into the next file when the writer
//! nears the end of its own. So the writer finds its pages ready, file rolls included, while a
//! store that stops writing has paid for at most one window beyond its last record, not for
//! a whole next file (the kernel zeroes every fresh page-cache page it faults in: that is most
//! of this service's CPU).

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::segment::{CreateOptions, MappedFile};
use crate::signal::Signal;
use crate::util::lock;

#[derive(Debug)]
enum ReqState {
    Pending,
    InProgress,
    Done(Arc<MappedFile>),
    Failed(Error),
}

type Key = (Reverse<u64>, u64);

#[derive(Debug, Default)]
struct AllocState {
    reqs: BTreeMap<Key, ReqState>,
    closed: bool,
    created: u64,
    /// Files created with `populate`, in offset order, each with the bytes from its start
    /// already pre-faulted (or claimed by the step in progress).
    prefault: VecDeque<(Arc<MappedFile>, usize)>,
}

/// Bytes the allocate service pre-faults per `madvise` call: small enough that a request for a
/// new file waits little behind it and that a store which stops writing wastes little.
pub(crate) const PREFAULT_STEP: usize = 4 << 20;

/// How far ahead of the write position the commit log's pages are kept pre-faulted: half a
/// file, at least 4 MiB and at most 256 MiB. The kernel populates fresh pages at 0.7-5 GB/s
/// on the reference VM while the writer fills them at up to ~3.5 GB/s (4 KiB records), so the
/// service needs a lead of tens of milliseconds of writing to stay ahead of a long run.
pub(crate) fn prefault_window(file_size: u64) -> u64 {
    (file_size / 2).clamp(4 << 20, 256 << 20)
}

/// Shared between the writer (which takes files) and the allocate service (which makes them).
#[derive(Debug)]
pub(crate) struct Allocator {
    dir: PathBuf,
    opts: CreateOptions,
    state: Mutex<AllocState>,
    done: Condvar,
    signal: Arc<Signal>,
    wait_timeout: Duration,
    /// Commit log offset up to which the writer has written (the last [`Allocator::wrote_to`]).
    wrote: AtomicU64,
    /// Commit log offset up to which pages should be pre-faulted (`wrote` + the window, raised
    /// a [`PREFAULT_STEP`] at a time).
    want: AtomicU64,
}

/// What `take` produced.
#[derive(Debug)]
pub(crate) enum Taken {
    /// The preallocated file.
    File(Arc<MappedFile>),
    /// The service did not start the request in time; the caller creates the file itself.
    CreateYourself,
}

impl Allocator {
    pub(crate) fn new(
        dir: &Path,
        opts: CreateOptions,
        signal: Arc<Signal>,
        wait_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            dir: dir.to_path_buf(),
            opts,
            state: Mutex::new(AllocState::default()),
            done: Condvar::new(),
            signal,
            wait_timeout,
            wrote: AtomicU64::new(0),
            want: AtomicU64::new(0),
        })
    }

    pub(crate) fn signal(&self) -> Arc<Signal> {
        Arc::clone(&self.signal)
    }

    /// Path of the file starting at `offset`.
    pub(crate) fn path_for(&self, offset: u64) -> PathBuf {
        self.dir
            .join(rocketstore_format::offset_to_file_name(offset))
    }

    /// Registers requests for the files at `offset` and `offset + size` and waits for the first.
    pub(crate) fn take(&self, offset: u64, size: u64) -> Result<Taken> {
        let key = (Reverse(size), offset);
        let mut st = lock(&self.state);
        if st.closed {
            return Err(Error::Closed);
        }
        st.reqs.entry(key).or_insert(ReqState::Pending);
        if let Some(next) = offset.checked_add(size) {
            st.reqs
                .entry((Reverse(size), next))
                .or_insert(ReqState::Pending);
        }
        self.signal.wakeup();
        let deadline = Instant::now() + self.wait_timeout;
        loop {
            match st.reqs.get(&key) {
                Some(ReqState::Done(_)) | Some(ReqState::Failed(_)) => {
                    return match st.reqs.remove(&key) {
                        Some(ReqState::Done(f)) => Ok(Taken::File(f)),
                        Some(ReqState::Failed(e)) => Err(e),
                        _ => Ok(Taken::CreateYourself),
                    };
                }
                Some(ReqState::Pending) if Instant::now() >= deadline => {
                    st.reqs.remove(&key);
                    return Ok(Taken::CreateYourself);
                }
                None => return Ok(Taken::CreateYourself),
                _ => {}
            }
            if st.closed {
                return Err(Error::Closed);
            }
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            st = self
                .done
                .wait_timeout(st, wait)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Serves every pending request, in priority order. Returns the number of files created.
    pub(crate) fn serve_pending(&self) -> usize {
        let mut served = 0;
        loop {
            let (key, path) = {
                let mut st = lock(&self.state);
                if st.closed {
                    return served;
                }
                let Some((key, state)) = st
                    .reqs
                    .iter_mut()
                    .find(|(_, s)| matches!(s, ReqState::Pending))
                else {
                    return served;
                };
                *state = ReqState::InProgress;
                let key = *key;
                (key, self.path_for(key.1))
            };
            let size = key.0 .0 as usize;
            let made = MappedFile::create(&path, key.1, size, &self.opts).map(Arc::new);
            let mut st = lock(&self.state);
            st.created += u64::from(made.is_ok());
            let closed = st.closed;
            let populate = match made {
                Ok(f) if closed => {
                    let _ = f.destroy();
                    None
                }
                Ok(f) => {
                    st.reqs.insert(key, ReqState::Done(Arc::clone(&f)));
                    self.prefaults().then_some(f)
                }
                Err(e) => {
                    st.reqs.insert(key, ReqState::Failed(e));
                    None
                }
            };
            // Pre-faulted by `prefault_step` as the writer nears it.
            if let Some(f) = populate {
                st.prefault.push_back((f, 0));
            }
            served += 1;
            self.done.notify_all();
        }
    }

    /// Whether new files are pre-faulted ahead of the writer (`populate`, and not `warm`, which
    /// touches every page itself).
    fn prefaults(&self) -> bool {
        self.opts.populate && self.opts.warm.is_none()
    }

    /// The writer has written the commit log up to `end` (files of `file_size` bytes): the
    /// service is woken to pre-fault up to `end` + [`prefault_window`] once that target has
    /// moved by a [`PREFAULT_STEP`] (an atomic load per call otherwise).
    pub(crate) fn wrote_to(&self, end: u64, file_size: u64) {
        if !self.prefaults() {
            return;
        }
        self.wrote.fetch_max(end, Ordering::Release);
        self.raise_want(end, file_size);
    }

    /// Raises the pre-fault target to `end` + the window and wakes the service, once the
    /// target has moved by a step.
    fn raise_want(&self, end: u64, file_size: u64) {
        if !self.prefaults() {
            return;
        }
        let want = end.saturating_add(prefault_window(file_size));
        let asked = self.want.load(Ordering::Acquire);
        if want >= asked.saturating_add(PREFAULT_STEP as u64) {
            self.want.fetch_max(want, Ordering::AcqRel);
            self.signal.wakeup();
        }
    }

    /// The writer is about to append about `bytes` more (one `put_batch`): the target moves
    /// past them at once, so the service starts on the batch's pages while it is being
    /// written rather than after.
    pub(crate) fn will_write(&self, bytes: u64, file_size: u64) {
        let end = self.wrote.load(Ordering::Acquire).saturating_add(bytes);
        self.raise_want(end, file_size);
    }

    /// Pre-faults the next [`PREFAULT_STEP`] below the writer's target (see
    /// [`Allocator::wrote_to`]), skipping what the writer has already written. Returns false
    /// when there is nothing to do (or the store is closing).
    pub(crate) fn prefault_step(&self) -> bool {
        let want = self.want.load(Ordering::Acquire);
        let wrote = self.wrote.load(Ordering::Acquire);
        let (file, at, len) = {
            let mut st = lock(&self.state);
            if st.closed {
                return false;
            }
            loop {
                let Some((f, done)) = st.prefault.front_mut() else {
                    return false;
                };
                let (from, size) = (f.from(), f.size());
                // Pages the writer has passed were faulted in by its writes.
                let written = usize::try_from(wrote.saturating_sub(from)).unwrap_or(usize::MAX);
                *done = (*done).max(written.min(size));
                if *done >= size {
                    st.prefault.pop_front();
                    continue;
                }
                if from + *done as u64 >= want {
                    return false;
                }
                let at = *done;
                let len = PREFAULT_STEP.min(size - at);
                *done += len;
                break (Arc::clone(f), at, len);
            }
        };
        file.populate_range(at, len);
        true
    }

    /// Files created by the service so far.
    pub(crate) fn created(&self) -> u64 {
        lock(&self.state).created
    }

    /// Refuses new requests and stops a pre-fault in progress (the store is closing).
    pub(crate) fn begin_close(&self) {
        lock(&self.state).closed = true;
        self.done.notify_all();
    }

    /// Refuses new requests and deletes files that were created but never taken.
    pub(crate) fn close(&self) -> Result<()> {
        let mut st = lock(&self.state);
        st.closed = true;
        let reqs = std::mem::take(&mut st.reqs);
        st.prefault.clear();
        self.done.notify_all();
        drop(st);
        let mut first_err = None;
        for (_, r) in reqs {
            if let ReqState::Done(f) = r {
                if let Err(e) = f.destroy() {
                    first_err.get_or_insert(e);
                }
            }
        }
        if self.opts.sync {
            if let Err(e) = crate::util::fsync_dir(&self.dir) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const FILE: u64 = 32 << 20;

    fn allocator(dir: &Path, populate: bool) -> Arc<Allocator> {
        let opts = CreateOptions {
            sync: false,
            populate,
            warm: None,
            prealloc: None,
        };
        Allocator::new(dir, opts, Signal::new(), Duration::from_secs(5))
    }

    /// Bytes claimed for pre-faulting so far, per file in the window.
    fn claimed(a: &Allocator) -> Vec<(u64, usize)> {
        lock(&a.state)
            .prefault
            .iter()
            .map(|(f, done)| (f.from(), *done))
            .collect()
    }

    /// Runs pre-fault steps until there is nothing to do; returns how many ran.
    fn drain(a: &Allocator) -> usize {
        let mut n = 0;
        while a.prefault_step() {
            n += 1;
        }
        n
    }

    #[test]
    fn prefaults_a_window_ahead_of_the_writer_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let a = allocator(dir.path(), true);
        assert_eq!(prefault_window(FILE), 16 << 20);
        // The writer asks for file 0; the service makes it and file 1, faulting in nothing yet.
        std::thread::scope(|s| {
            let t = s.spawn(|| a.take(0, FILE).unwrap());
            let mut made = 0;
            while made < 2 {
                made += a.serve_pending();
                std::thread::yield_now();
            }
            assert!(matches!(t.join().unwrap(), Taken::File(_)));
        });
        assert_eq!(claimed(&a), vec![(0, 0), (FILE, 0)]);
        assert_eq!(drain(&a), 0);

        // 1 MiB written: the pages after it up to the window (17 MiB), 4 MiB at a time.
        a.wrote_to(1 << 20, FILE);
        assert_eq!(drain(&a), 4);
        assert_eq!(claimed(&a), vec![(0, 17 << 20), (FILE, 0)]);
        // Less than a step further: nothing new is asked for.
        a.wrote_to(2 << 20, FILE);
        assert_eq!(drain(&a), 0);
        // A batch about to be written moves the target past it at once.
        a.will_write(6 << 20, FILE);
        assert_eq!(drain(&a), 2);
        assert_eq!(claimed(&a), vec![(0, 25 << 20), (FILE, 0)]);

        // Near the end of file 0 the window reaches into file 1 (up to 46 MiB); what the
        // writer has passed is skipped, not faulted in again, and a finished file leaves.
        a.wrote_to(FILE - (2 << 20), FILE);
        assert_eq!(drain(&a), 1 + 4);
        assert_eq!(claimed(&a), vec![(FILE, 16 << 20)]);
        a.wrote_to(FILE + (20 << 20), FILE);
        assert_eq!(drain(&a), 3);
        assert_eq!(claimed(&a), vec![]);
        a.close().unwrap();
    }

    #[test]
    fn nothing_is_prefaulted_without_populate_or_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let off = allocator(dir.path(), false);
        std::thread::scope(|s| {
            let t = s.spawn(|| off.take(0, FILE).unwrap());
            while off.serve_pending() == 0 {
                std::thread::yield_now();
            }
            t.join().unwrap();
        });
        off.wrote_to(1 << 20, FILE);
        assert_eq!(claimed(&off), vec![]);
        assert!(!off.prefault_step());
        off.close().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let on = allocator(dir.path(), true);
        std::thread::scope(|s| {
            let t = s.spawn(|| on.take(0, FILE).unwrap());
            while on.serve_pending() == 0 {
                std::thread::yield_now();
            }
            t.join().unwrap();
        });
        on.wrote_to(1 << 20, FILE);
        on.begin_close();
        assert!(!on.prefault_step());
        on.close().unwrap();
        assert_eq!(claimed(&on), vec![]);
    }
}
