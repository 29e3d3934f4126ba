//! The hand-off between the commit log writer and the allocate service (RocketMQ
//! `AllocateMappedFileService`'s request table): the writer asks for the next files, the service
//! (`service/allocate.rs`, which runs [`Allocator::serve_pending`] on its thread) makes them.
//!
//! When the writer needs file *n* it calls [`Allocator::take`], which registers requests for *n*
//! and *n+1* (de-duplicated by offset), wakes the service and waits up to
//! `allocate_wait_timeout` for *n*. The service serves requests in RocketMQ's order (larger
//! files first, then smaller offsets): it creates each file with `fallocate`, fsyncs it and its
//! directory, and pre-faults or warms it. If the wait times out while the request has not been
//! started, the writer cancels it and creates the file itself; a request already being served is
//! waited for. A failed creation (ENOSPC, EIO) is handed to the put that needs the file as a
//! typed error; the store is not poisoned. Files created but never taken are deleted on close.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
                    (self.opts.populate && self.opts.warm.is_none()).then_some(f)
                }
                Err(e) => {
                    st.reqs.insert(key, ReqState::Failed(e));
                    None
                }
            };
            served += 1;
            self.done.notify_all();
            drop(st);
            // Hand the file out first, then pre-fault it while the writer may already use it.
            if let Some(f) = populate {
                f.populate(&|| lock(&self.state).closed);
            }
        }
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
