//! Long polling (RocketMQ `PullRequestHoldService`, arrival-driven).
//!
//! A waiting pull registers on its queue's [`QueueSignal`] before it looks at the queue, so an
//! arrival between the look and the wait is never missed (the sequence number moved). The
//! dispatcher bumps the signal of every queue it wrote to, once per dispatch pass; idle waiters
//! sleep on a condvar and cost no CPU. Queues nobody waits on cost one relaxed load per pass.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::util::lock;

/// Wake-up signal of one (topic, queue).
#[derive(Debug, Default)]
pub(crate) struct QueueSignal {
    seq: Mutex<u64>,
    cv: Condvar,
}

impl QueueSignal {
    pub(crate) fn seq(&self) -> u64 {
        *lock(&self.seq)
    }

    fn bump(&self) {
        let mut s = lock(&self.seq);
        *s += 1;
        self.cv.notify_all();
    }

    /// Waits until the sequence moves past `seen`, or `deadline`.
    pub(crate) fn wait_change(&self, seen: u64, deadline: Instant, closed: &AtomicBool) {
        let mut s = lock(&self.seq);
        while *s == seen && !closed.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            s = self
                .cv
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

#[derive(Debug, Default)]
struct Entry {
    signal: Arc<QueueSignal>,
    waiters: usize,
}

/// Registry of queues with waiting pulls.
#[derive(Debug, Default)]
pub(crate) struct PullWaiters {
    queues: Mutex<HashMap<(String, i32), Entry>>,
    active: AtomicUsize,
    closed: AtomicBool,
}

/// Unregisters a waiter when dropped.
#[derive(Debug)]
pub(crate) struct Registration<'a> {
    owner: &'a PullWaiters,
    key: (String, i32),
    pub(crate) signal: Arc<QueueSignal>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut q = lock(&self.owner.queues);
        if let Some(e) = q.get_mut(&self.key) {
            e.waiters -= 1;
            if e.waiters == 0 {
                q.remove(&self.key);
            }
        }
        self.owner.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl PullWaiters {
    pub(crate) fn register(&self, topic: &str, queue_id: i32) -> Registration<'_> {
        let key = (topic.to_string(), queue_id);
        let mut q = lock(&self.queues);
        let e = q.entry(key.clone()).or_default();
        e.waiters += 1;
        let signal = Arc::clone(&e.signal);
        self.active.fetch_add(1, Ordering::AcqRel);
        Registration {
            owner: self,
            key,
            signal,
        }
    }

    /// Wakes the waiters of the given queues (called by the dispatcher after a pass).
    pub(crate) fn notify<'a>(&self, queues: impl IntoIterator<Item = (&'a str, i32)>) {
        if self.active.load(Ordering::Acquire) == 0 {
            return;
        }
        let q = lock(&self.queues);
        for (topic, queue_id) in queues {
            if let Some(e) = q.get(&(topic.to_string(), queue_id)) {
                e.signal.bump();
            }
        }
    }

    /// Number of waiting pulls.
    pub(crate) fn waiting(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// Wakes everyone for good (store closing).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let q = lock(&self.queues);
        for e in q.values() {
            e.signal.bump();
        }
    }

    pub(crate) fn closed_flag(&self) -> &AtomicBool {
        &self.closed
    }
}

/// Deadline helper that saturates instead of overflowing on huge timeouts.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or(now + Duration::from_secs(86_400 * 365))
}
