//! The helper threads of a parallel Arrow read: one rayon pool per process, started on the
//! first read that splits its work and kept for the next ones.
//!
//! A split build used to start its helper threads per batch (`std::thread::scope`). On a VM a
//! new thread starts on the idle core 0.1-0.7 ms after the call: at 100 B messages that is a
//! fifth of a 32-queue read's batch (a queue of ~9,400 rows takes ~2-3 ms to build), during
//! which the calling thread works alone and then waits for the helper's late range. A pool
//! thread that just finished a job is still awake for the next one (rayon's workers spin a
//! short while before they sleep) and is woken by a futex in ~50 us once asleep.
//!
//! Fork: a child process has the pool's memory but none of its threads. The pool records the
//! process it was started in, and a read in another process (a `multiprocessing` child forked
//! after a read) starts its own instead of queueing jobs nothing will run.
//!
//! How many threads a build may use ([`build_threads`], [`read_threads`]) is decided here too,
//! below the readers that split their work (`arrow_read`), which import this module and are
//! imported by nothing in it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Threads that may build one message batch: the machine's cores (at most 4), unless the
/// environment variable `ROCKETSTORE_ARROW_READ_THREADS` sets a smaller number (read once per
/// process; `1` for processes that already keep every core busy, like one Spark task per core).
pub(crate) fn build_threads() -> usize {
    match BUILD_THREADS.load(Ordering::Relaxed) {
        0 => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let wanted = std::env::var("ROCKETSTORE_ARROW_READ_THREADS")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(4);
            let threads = wanted.clamp(1, 4).min(cores);
            BUILD_THREADS.store(threads, Ordering::Relaxed);
            threads
        }
        threads => threads,
    }
}

/// [`build_threads`] once known (0 before).
static BUILD_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The threads one message batch may use ([`build_threads`]); `threads` (clamped to 1-4)
/// replaces it for this process whatever the cores, so that the tests run both the
/// two-thread column split and the row ranges of three or four threads on any machine.
/// Returns the value before the call. Re-exported as `arrow_read::read_threads`.
pub fn read_threads(threads: Option<usize>) -> usize {
    let before = build_threads();
    if let Some(n) = threads {
        BUILD_THREADS.store(n.clamp(1, 4), Ordering::Relaxed);
    }
    before
}

/// The pool of this process, and the id of the process that started it.
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// This process's pool, started if needed with one thread fewer than a build may use (the
/// calling thread is the other; at least one: the tests split builds on any machine); `None`
/// if its threads could not be started.
fn pool() -> Option<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    match &*slot {
        Some((owner, pool)) if *owner == pid => Some(Arc::clone(pool)),
        _ => {
            // A pool inherited through fork has no threads: it is left alone, never dropped
            // (dropping it would signal threads that do not exist here).
            if let Some(stale) = slot.take() {
                std::mem::forget(stale);
            }
            let helpers = read_threads(None).max(2) - 1;
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(helpers)
                .thread_name(|i| format!("rs-arrow-read-{i}"))
                .build()
                .ok()
                .map(Arc::new)?;
            *slot = Some((pid, Arc::clone(&pool)));
            Some(pool)
        }
    }
}

/// Runs `here` on the calling thread while the pool runs each of `there`; returns `here`'s
/// result and each job's, `None` for a job that panicked (the caller then does the work again
/// on one thread, which reports what went wrong). Without a pool the jobs run here, in order,
/// after `here`.
pub(crate) fn beside<A, B, F>(here: impl FnOnce() -> A, there: Vec<F>) -> (A, Vec<Option<B>>)
where
    B: Send,
    F: FnOnce() -> Option<B> + Send,
{
    let mut slots: Vec<Option<B>> = there.iter().map(|_| None).collect();
    let Some(pool) = pool() else {
        let a = here();
        for (job, slot) in there.into_iter().zip(slots.iter_mut()) {
            *slot = catch_unwind(AssertUnwindSafe(job)).ok().flatten();
        }
        return (a, slots);
    };
    let a = pool.in_place_scope(|s| {
        for (job, slot) in there.into_iter().zip(slots.iter_mut()) {
            s.spawn(move |_| *slot = catch_unwind(AssertUnwindSafe(job)).ok().flatten());
        }
        here()
    });
    (a, slots)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn jobs_run_beside_the_caller_and_keep_their_order() {
        let jobs: Vec<_> = (0..5).map(|i| move || Some(i * 10)).collect();
        let (a, got) = beside(|| "here", jobs);
        assert_eq!(a, "here");
        assert_eq!(got, vec![Some(0), Some(10), Some(20), Some(30), Some(40)]);
    }

    #[test]
    fn a_panicking_job_gives_none_and_the_others_their_results() {
        let jobs: Vec<Box<dyn FnOnce() -> Option<u32> + Send>> = vec![
            Box::new(|| Some(1)),
            Box::new(|| panic!("a job that fails")),
            Box::new(|| Some(3)),
        ];
        let (_, got) = beside(|| (), jobs);
        assert_eq!(got, vec![Some(1), None, Some(3)]);
    }

    #[test]
    fn the_pool_is_kept_across_calls() {
        let a = pool().unwrap();
        let b = pool().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
