//! Wake/stop signals and the store's health, shared by the engine structures and the
//! background services (which sit above them, in `service/`).
//!
//! [`Signal`] is a Mutex + Condvar that never loses a wakeup: `wakeup()` is remembered until the
//! next `wait`, `stop()` ends every wait. [`Health`] holds the store's poison (the first fatal
//! error) and the durable commit log offset, and wakes group-commit waiters ([`FlushWait`]) on
//! either change.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::util::lock;

/// Why `run_once` was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The interval elapsed.
    Timeout,
    /// Someone called `wakeup()`.
    Notified,
    /// The service is stopping (only seen by `wait`, never passed to `run_once`).
    Stop,
}

#[derive(Debug, Default)]
struct SignalState {
    notified: bool,
    stop: bool,
}

/// A wake/stop signal (Mutex + Condvar) that never loses a wakeup.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

impl Signal {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Wakes the service now, or makes its next wait return at once.
    pub(crate) fn wakeup(&self) {
        let mut st = lock(&self.state);
        if !st.notified {
            st.notified = true;
            self.cv.notify_one();
        }
    }

    pub(crate) fn stop(&self) {
        let mut st = lock(&self.state);
        st.stop = true;
        self.cv.notify_all();
    }

    /// Waits up to `timeout` for a wakeup or a stop; consumes the wakeup.
    pub(crate) fn wait(&self, timeout: Duration) -> Wake {
        let st = lock(&self.state);
        let (mut st, _) = self
            .cv
            .wait_timeout_while(st, timeout, |s| !s.notified && !s.stop)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.stop {
            Wake::Stop
        } else if st.notified {
            st.notified = false;
            Wake::Notified
        } else {
            Wake::Timeout
        }
    }
}

/// The store's health: the first fatal error (poison) and the durable (flushed) commit log
/// offset, with a condvar that wakes group-commit waiters on either change.
#[derive(Debug, Default)]
pub(crate) struct Health {
    poisoned: OnceLock<Arc<Error>>,
    is_poisoned: AtomicBool,
    flushed: AtomicU64,
    m: Mutex<()>,
    cv: Condvar,
    flushes: AtomicU64,
}

/// Outcome of waiting for a flush.
#[derive(Debug)]
pub(crate) enum FlushWait {
    Flushed,
    TimedOut,
    Poisoned(Arc<Error>),
}

impl Health {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records `e` as the store's poison (the first one wins) and wakes every waiter.
    pub(crate) fn poison(&self, e: Error) -> Arc<Error> {
        let cause = Arc::clone(self.poisoned.get_or_init(|| Arc::new(e)));
        self.is_poisoned.store(true, Ordering::Release);
        let _g = lock(&self.m);
        self.cv.notify_all();
        cause
    }

    pub(crate) fn poison_cause(&self) -> Option<Arc<Error>> {
        if self.is_poisoned.load(Ordering::Acquire) {
            self.poisoned.get().cloned()
        } else {
            None
        }
    }

    /// `Err(Poisoned)` if the store is fenced.
    pub(crate) fn check(&self) -> Result<()> {
        match self.poison_cause() {
            Some(cause) => Err(Error::Poisoned { cause }),
            None => Ok(()),
        }
    }

    /// Publishes a new durable offset and wakes the waiters it satisfies.
    pub(crate) fn publish_flushed(&self, offset: u64) {
        let prev = self.flushed.fetch_max(offset, Ordering::AcqRel);
        if offset > prev {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            let _g = lock(&self.m);
            self.cv.notify_all();
        }
    }

    pub(crate) fn flushed(&self) -> u64 {
        self.flushed.load(Ordering::Acquire)
    }

    /// Number of flushes that advanced the durable offset.
    pub(crate) fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Waits until `flushed >= target`, the store is poisoned, or `timeout` passes.
    pub(crate) fn wait_flushed(&self, target: u64, timeout: Duration) -> FlushWait {
        let deadline = Instant::now() + timeout;
        let mut g = lock(&self.m);
        loop {
            if let Some(cause) = self.poison_cause() {
                return FlushWait::Poisoned(cause);
            }
            if self.flushed() >= target {
                return FlushWait::Flushed;
            }
            let now = Instant::now();
            if now >= deadline {
                return FlushWait::TimedOut;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_wakeup_before_the_wait_is_not_lost() {
        let s = Signal::new();
        s.wakeup();
        assert_eq!(s.wait(Duration::from_secs(10)), Wake::Notified);
        assert_eq!(s.wait(Duration::from_millis(1)), Wake::Timeout);
        s.stop();
        assert_eq!(s.wait(Duration::from_secs(10)), Wake::Stop);
    }

    #[test]
    fn waiters_wake_on_flush_and_on_poison() {
        let health = Health::new();
        let h2 = Arc::clone(&health);
        let t = std::thread::spawn(move || h2.wait_flushed(100, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        health.publish_flushed(100);
        assert!(matches!(t.join().unwrap(), FlushWait::Flushed));
        assert!(matches!(
            health.wait_flushed(200, Duration::from_millis(5)),
            FlushWait::TimedOut
        ));
        let h3 = Arc::clone(&health);
        let t = std::thread::spawn(move || h3.wait_flushed(300, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        health.poison(Error::Closed);
        assert!(matches!(t.join().unwrap(), FlushWait::Poisoned(_)));
    }
}
