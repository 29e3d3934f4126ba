//! The hand-off between the commit log writer and the allocate service (RocketMQ
//! `AllocateMappedFileService`'s request table): the writer asks for the next files, the service
//! (`service/allocate.rs`, which runs [`Allocator::serve_pending`] on its thread) makes them.
//!
//! When the writer needs file *n* it calls [`Allocator::take`], which registers requests for *n*
//! and *n+1* (de-duplicated by offset), wakes the service and waits up to
//! `allocate_wait_timeout` for *n*. The service serves requests in RocketMQ's order (larger
//! files first, then smaller offsets): it creates each file with `fallocate`, fsyncs it and its
//! directory (under ASYNC_FLUSH the file's first flush does, [`CreateOptions::defer_sync`]), and
//! warms or pre-faults it. If the wait times out while the request has not been
//! started, the writer cancels it and creates the file itself; a request already being served is
//! waited for. A failed creation (ENOSPC, EIO) is handed to the put that needs the file as a
//! typed error; the store is not poisoned. Files created but never taken are deleted on close.
//!
//! Pre-faulting (`populate`) follows the writer: a file the writer has reached is pre-faulted
//! whole at once, and the file after it only as far as the writer's progress through its own
//! file plus [`PREFAULT_LEAD_DIV`]'s share of a file, in steps of
//! [`prefault_step`]. So the next file is complete when the writer reaches it (as long as the
//! service keeps pace, as with whole-file pre-faulting), and a store that stops writing early in
//! a file leaves most of the next one untouched (zeroing pages never written was the largest
//! CPU cost of a short bulk write). The writer reports its progress with
//! [`Allocator::progress`], which wakes the service only when a step becomes due. Files are
//! still created and fallocated two ahead, as RocketMQ does.
//!
//! With a staging writer (`pwrite_commit_log`), large appends are `pwrite`n and need no
//! pre-fault; only the appends stored into the mapping (calls of a few records) wake the
//! service, and the pre-fault runs [`PREFAULT_LEAD_DIV`]'s share of a file ahead of them in
//! [`STAGED_STEP`]s (across the file boundary, so the put that rolls a file finds its first
//! pages faulted in), never a whole file at once ([`prefault_allowed_staged`]). A staged call
//! stops it until the next append into the mapping, and nothing the writer has passed is
//! pre-faulted ([`Allocator::staging_starts`]).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// The next file is pre-faulted up to the writer's progress through its file plus
/// `1 / PREFAULT_LEAD_DIV` of a file.
pub(crate) const PREFAULT_LEAD_DIV: u64 = 4;

/// Bytes pre-faulted per step (one `madvise` call): 1/16 of a file, 4-32 MiB.
pub(crate) fn prefault_step(file_size: usize) -> usize {
    (file_size / 16).clamp(4 << 20, 32 << 20)
}

/// How much of the file `[from, from + size)` may be pre-faulted when the writer has written up
/// to `writer_at`: all of it once the writer is in it, else its progress through the file before
/// it plus the lead.
pub(crate) fn prefault_allowed(from: u64, size: u64, writer_at: u64) -> u64 {
    writer_at
        .saturating_add(size)
        .saturating_add(size / PREFAULT_LEAD_DIV)
        .saturating_sub(from)
        .min(size)
}

const PAGE: usize = 4096;

/// Bytes per pre-fault step of a staging writer: small, so that a staged call (a large batch,
/// `pwrite`n) stops the pre-fault within a step. Pages pre-faulted ahead of a batch are zeroed
/// for nothing and stay mapped writable in the process, so their writeback has to
/// write-protect them again: one put before a 300 MB batch, with a quarter file pre-faulted in
/// 16 MiB steps and nothing stopping it, cost the batch ~500 ns per 1 KiB message
/// (BENCHMARKS.md, eleventh pass).
pub(crate) const STAGED_STEP: usize = 2 << 20;

/// [`prefault_allowed`] for a staging writer: the file `[from, from + size)` may be pre-faulted
/// up to [`PREFAULT_LEAD_DIV`]'s share of a file past `writer_at` (the end of the last append),
/// across the file boundary. Only while the writer's last call stored into the mapping (see
/// [`Allocator::staging_starts`]).
pub(crate) fn prefault_allowed_staged(from: u64, size: u64, writer_at: u64) -> u64 {
    writer_at
        .saturating_add(size / PREFAULT_LEAD_DIV)
        .saturating_sub(from)
        .min(size)
}

/// A created file still being pre-faulted, and how far.
#[derive(Debug)]
struct Prefault {
    file: Arc<MappedFile>,
    done: usize,
}

#[derive(Debug, Default)]
struct AllocState {
    reqs: BTreeMap<Key, ReqState>,
    /// In file order.
    prefault: Vec<Prefault>,
    closed: bool,
    created: u64,
}

/// The next piece of work of [`Allocator::serve_pending`].
enum Work {
    Create(Key, PathBuf),
    Prefault(Arc<MappedFile>, usize, usize),
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
    /// Commit log offset the writer has written up to (or is about to write at).
    writer_at: AtomicU64,
    /// The writer wakes the service when it reaches this offset (`u64::MAX`: never).
    wake_at: AtomicU64,
    /// The writer stages large appends (`pwrite_commit_log`): see the module doc.
    staged_writer: bool,
    /// A staging writer has stored an append into the mapping (before that, nothing is
    /// pre-faulted).
    mapped_seen: AtomicBool,
    /// A staging writer is in a staged call (or its last call was one): no new pre-fault step
    /// starts until an append stored into the mapping.
    staging: AtomicBool,
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
        staged_writer: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            dir: dir.to_path_buf(),
            opts,
            state: Mutex::new(AllocState::default()),
            done: Condvar::new(),
            signal,
            wait_timeout,
            writer_at: AtomicU64::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            staged_writer,
            mapped_seen: AtomicBool::new(false),
            staging: AtomicBool::new(false),
        })
    }

    /// A staging writer starts a staged call (records `pwrite`n, not stored into the mapping):
    /// the service starts no new pre-fault step until the next append into the mapping, and
    /// skips what the writer has passed.
    pub(crate) fn staging_starts(&self) {
        if self.staged_writer && !self.staging.load(Ordering::Relaxed) {
            self.staging.store(true, Ordering::SeqCst);
        }
    }

    /// The writer has written the commit log up to `end` (`staged`: `pwrite`n, not stored into
    /// the mapping): wakes the service when that makes a pre-fault step due (one atomic load
    /// otherwise). A staging writer's staged appends only move the point below which nothing is
    /// pre-faulted.
    pub(crate) fn progress(&self, end: u64, staged: bool) {
        if self.staged_writer {
            if staged {
                self.writer_at.fetch_max(end, Ordering::SeqCst);
                return;
            }
            self.mapped_seen.store(true, Ordering::SeqCst);
            self.staging.store(false, Ordering::SeqCst);
        }
        // SeqCst: with the service's store of `wake_at` then load of `writer_at` (`due_step`),
        // one of the two sides sees the other's store, so no due step is missed.
        self.writer_at.fetch_max(end, Ordering::SeqCst);
        if end >= self.wake_at.load(Ordering::SeqCst) {
            self.wake_at.store(u64::MAX, Ordering::SeqCst);
            self.signal.wakeup();
        }
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
        if !self.staged_writer {
            self.writer_at.fetch_max(offset, Ordering::AcqRel);
        }
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

    /// Serves every pending request, in priority order, then every pre-fault step that is due
    /// (requests first again between steps). Returns the number of files created.
    pub(crate) fn serve_pending(&self) -> usize {
        let mut served = 0;
        loop {
            let work = {
                let mut st = lock(&self.state);
                if st.closed {
                    st.prefault.clear();
                    return served;
                }
                match st
                    .reqs
                    .iter_mut()
                    .find(|(_, s)| matches!(s, ReqState::Pending))
                {
                    Some((key, state)) => {
                        *state = ReqState::InProgress;
                        let key = *key;
                        Work::Create(key, self.path_for(key.1))
                    }
                    None => match self.due_step(&mut st) {
                        Some(w) => w,
                        None => return served,
                    },
                }
            };
            match work {
                Work::Create(key, path) => {
                    self.create(key, &path);
                    served += 1;
                }
                Work::Prefault(f, at, len) => {
                    f.populate_range(at, len, &|| lock(&self.state).closed);
                }
            }
        }
    }

    /// Creates the file of `key` and hands it to the request.
    fn create(&self, key: Key, path: &Path) {
        let size = key.0 .0 as usize;
        let made = MappedFile::create(path, key.1, size, &self.opts).map(Arc::new);
        let mut st = lock(&self.state);
        st.created += u64::from(made.is_ok());
        match made {
            Ok(f) if st.closed => {
                let _ = f.destroy();
            }
            Ok(f) => {
                st.reqs.insert(key, ReqState::Done(Arc::clone(&f)));
                if self.opts.populate && self.opts.warm.is_none() {
                    let at = st.prefault.partition_point(|p| p.file.from() < f.from());
                    st.prefault.insert(at, Prefault { file: f, done: 0 });
                }
            }
            Err(e) => {
                st.reqs.insert(key, ReqState::Failed(e));
            }
        }
        self.done.notify_all();
    }

    /// The next pre-fault step that the writer's progress allows, marked as done (faulting in
    /// never changes bytes, so it may run while the writer appends); or `None`, after asking the
    /// writer to wake the service when the next step becomes due.
    fn due_step(&self, st: &mut AllocState) -> Option<Work> {
        loop {
            st.prefault.retain(|p| p.done < p.file.size());
            let p = st.prefault.first_mut()?;
            let (from, size) = (p.file.from(), p.file.size());
            let writer_at = self.writer_at.load(Ordering::Acquire);
            // A staging writer's pre-fault waits for an append stored into the mapping.
            let paused = || {
                self.staged_writer
                    && (!self.mapped_seen.load(Ordering::SeqCst)
                        || self.staging.load(Ordering::SeqCst))
            };
            if paused() {
                // Wake on the next append stored into the mapping (then look again: it may
                // have come before the store).
                self.wake_at.store(0, Ordering::SeqCst);
                if paused() {
                    return None;
                }
                continue;
            }
            let step = if self.staged_writer {
                // Never behind the writer: its staged appends wrote those pages.
                let passed = usize::try_from(writer_at.saturating_sub(from)).unwrap_or(usize::MAX);
                p.done = p.done.max(passed.min(size) / PAGE * PAGE);
                if p.done >= size {
                    continue;
                }
                STAGED_STEP.min(prefault_step(size))
            } else {
                prefault_step(size)
            };
            let to = (p.done + step).min(size);
            let allowed = if self.staged_writer {
                prefault_allowed_staged(from, size as u64, writer_at)
            } else {
                prefault_allowed(from, size as u64, writer_at)
            };
            if allowed >= to as u64 {
                let at = std::mem::replace(&mut p.done, to);
                return Some(Work::Prefault(Arc::clone(&p.file), at, to - at));
            }
            // The writer offset at which `to` is allowed (see `prefault_allowed` and
            // `prefault_allowed_staged`).
            let behind = if self.staged_writer {
                size as u64 / PREFAULT_LEAD_DIV
            } else {
                size as u64 + size as u64 / PREFAULT_LEAD_DIV
            };
            let need = (from + to as u64).saturating_sub(behind);
            self.wake_at.store(need, Ordering::SeqCst);
            // The writer may have passed it before the store: check again.
            if self.writer_at.load(Ordering::SeqCst) < need {
                return None;
            }
        }
    }

    /// Bytes of the file at `offset` pre-faulted so far (`None`: not being pre-faulted).
    #[cfg(test)]
    fn prefaulted(&self, offset: u64) -> Option<usize> {
        lock(&self.state)
            .prefault
            .iter()
            .find(|p| p.file.from() == offset)
            .map(|p| p.done)
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
        st.prefault.clear();
        let reqs = std::mem::take(&mut st.reqs);
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
    use crate::signal::Wake;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_next_file_is_allowed_the_writers_progress_plus_the_lead() {
        let s = 256 * MIB;
        // The file the writer is in (or has passed): all of it.
        assert_eq!(prefault_allowed(0, s, 0), s);
        assert_eq!(prefault_allowed(s, s, s + 10), s);
        assert_eq!(prefault_allowed(s, s, 3 * s), s);
        // The next file: the lead, then the writer's progress through its own file plus the lead.
        assert_eq!(prefault_allowed(s, s, 0), s / 4);
        assert_eq!(prefault_allowed(s, s, s / 2), 3 * s / 4);
        assert_eq!(prefault_allowed(s, s, 3 * s / 4), s);
        // Two files ahead: nothing.
        assert_eq!(prefault_allowed(2 * s, s, 0), 0);
        assert_eq!(prefault_step(256 << 20), 16 << 20);
        assert_eq!(prefault_step(1 << 20), 4 << 20);
        assert_eq!(prefault_step(1 << 30), 32 << 20);
    }

    fn allocator(dir: &Path, populate: bool) -> Arc<Allocator> {
        allocator_for(dir, populate, false)
    }

    fn allocator_for(dir: &Path, populate: bool, staged_writer: bool) -> Arc<Allocator> {
        let opts = CreateOptions {
            sync: false,
            defer_sync: false,
            populate,
            warm: None,
            prealloc: None,
        };
        Allocator::new(
            dir,
            opts,
            Signal::new(),
            Duration::from_secs(10),
            staged_writer,
        )
    }

    /// `take` on another thread while this one serves, as the allocate service does.
    fn take_served(alloc: &Arc<Allocator>, offset: u64, size: u64) -> Arc<MappedFile> {
        let a = Arc::clone(alloc);
        let t = std::thread::spawn(move || a.take(offset, size));
        while !t.is_finished() {
            alloc.serve_pending();
            std::thread::sleep(Duration::from_millis(1));
        }
        match t.join().unwrap().unwrap() {
            Taken::File(f) => f,
            Taken::CreateYourself => panic!("the service did not make the file"),
        }
    }

    #[test]
    fn a_staging_writer_prefaults_only_ahead_of_its_mapped_appends() {
        let dir = tempfile::tempdir().unwrap();
        let s = 16 * MIB;
        let alloc = allocator_for(dir.path(), true, true);
        let first = take_served(&alloc, 0, s);
        alloc.serve_pending();
        // Nothing before an append into the mapping, not even the file taken.
        assert_eq!(alloc.prefaulted(0), Some(0));
        assert_eq!(alloc.prefaulted(s), Some(0));
        // Staged (pwrite) appends move nothing and wake no one.
        while alloc.signal().wait(Duration::ZERO) != Wake::Timeout {}
        alloc.progress(12 * MIB, true);
        assert_eq!(alloc.signal().wait(Duration::ZERO), Wake::Timeout);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(0), Some(0));
        // An append into the mapping: a lead of a quarter file past it, in 2 MiB steps, and
        // nothing behind the writer (its staged appends wrote those pages).
        alloc.progress(13 * MIB, false);
        assert_eq!(alloc.signal().wait(Duration::ZERO), Wake::Notified);
        alloc.serve_pending();
        assert_eq!(
            alloc.prefaulted(0),
            None,
            "file 0 complete (17 MiB allowed)"
        );
        assert_eq!(
            alloc.prefaulted(s),
            Some(0),
            "1 MiB allowed: under one step"
        );
        // Across the boundary: the put that rolls the file finds its first pages faulted in.
        alloc.progress(s - MIB, false);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(2 << 20));
        // A staged call stops the pre-fault, whatever the lead allows ...
        alloc.staging_starts();
        alloc.progress(s + 3 * MIB, true);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(2 << 20));
        // ... until the next append into the mapping, from where the writer is.
        while alloc.signal().wait(Duration::ZERO) != Wake::Timeout {}
        alloc.progress(s + 3 * MIB + 100, false);
        assert_eq!(alloc.signal().wait(Duration::ZERO), Wake::Notified);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(7 << 20));
        drop(first);
        alloc.close().unwrap();
    }

    #[test]
    fn the_next_file_is_prefaulted_as_the_writer_advances() {
        let dir = tempfile::tempdir().unwrap();
        let s = 16 * MIB; // steps of 4 MiB, lead 4 MiB
        let alloc = allocator(dir.path(), true);
        let first = take_served(&alloc, 0, s);
        alloc.serve_pending();
        // The taken file whole, the next one its lead only.
        assert_eq!(alloc.prefaulted(0), None);
        assert_eq!(alloc.prefaulted(s), Some(4 << 20));
        // Below the next step's offset the writer does not wake the service.
        while alloc.signal().wait(Duration::ZERO) != Wake::Timeout {}
        alloc.progress(MIB, false);
        assert_eq!(alloc.signal().wait(Duration::ZERO), Wake::Timeout);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(4 << 20));
        // Past it, it does, and one step more is pre-faulted.
        alloc.progress(5 * MIB, false);
        assert_eq!(alloc.signal().wait(Duration::ZERO), Wake::Notified);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(8 << 20));
        // The writer at the end of its file: the next one is complete.
        alloc.progress(s, false);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), None);
        drop(first);
        alloc.close().unwrap();
    }

    #[test]
    fn nothing_is_prefaulted_without_populate_or_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let s = 16 * MIB;
        let alloc = allocator(dir.path(), false);
        let _f = take_served(&alloc, 0, s);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), None);
        alloc.close().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let alloc = allocator(dir.path(), true);
        let _f = take_served(&alloc, 0, s);
        alloc.serve_pending();
        assert_eq!(alloc.prefaulted(s), Some(4 << 20));
        alloc.begin_close();
        alloc.progress(s, false);
        assert_eq!(alloc.serve_pending(), 0);
        assert_eq!(alloc.prefaulted(s), None);
        alloc.close().unwrap();
        // Only the taken file is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
