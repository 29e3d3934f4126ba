//! The background service runtime (RocketMQ's `ServiceThread`).
//!
//! Each service is a plain struct implementing [`Service`]; its `run_once` is callable directly
//! from tests. [`spawn`] runs it on a named thread (`rs-<name>`) that waits on a [`Signal`]
//! between runs: `wakeup()` is never lost (it is remembered until the next wait), `stop()` ends
//! the loop, after which `on_shutdown` runs and the thread's result is returned by `join`.
//!
//! Failure policy: an `Err` from `run_once` or a panic poisons the store ([`Health`]) and ends the
//! thread; the store then refuses writes until it is reopened. Services own `Arc`s of the shared
//! components they need, never the `Store` facade, so there are no reference cycles.

pub(crate) mod allocate;
pub(crate) mod cleanup;
pub(crate) mod flush;
pub(crate) mod flush_cq;
pub(crate) mod reput;
pub(crate) mod schedule;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
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

/// A background service that [`Store::run_service_once`](crate::Store::run_service_once) can
/// run by hand (with `background_threads = false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServiceKind {
    /// Flush the commit log (RocketMQ `FlushRealTimeService` / `GroupCommitService`).
    Flush,
    /// Commit the transient write buffer into the file (`CommitRealTimeService`).
    Commit,
    /// Dispatch new records to the consume queues and index (`ReputMessageService`).
    Reput,
    /// Flush the consume queues and index and write the checkpoint (`FlushConsumeQueueService`).
    FlushCq,
    /// Delete expired files (`CleanCommitLogService`, `CleanConsumeQueueService`).
    Cleanup,
    /// Deliver due delayed messages (`ScheduleMessageService`), with the wall clock.
    Schedule,
}

impl ServiceKind {
    /// The service's name, as its thread is named (`"flush-cq"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Flush => "flush",
            ServiceKind::Commit => "commit",
            ServiceKind::Reput => "reput",
            ServiceKind::FlushCq => "flush-cq",
            ServiceKind::Cleanup => "cleanup",
            ServiceKind::Schedule => "schedule",
        }
    }
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

/// A background service.
pub(crate) trait Service: Send + 'static {
    /// Thread name suffix: the thread is `rs-<NAME>`.
    const NAME: &'static str;
    /// How long to wait between runs when nobody wakes the service.
    fn interval(&self) -> Duration;
    /// One unit of work. `Err` is fatal: it poisons the store.
    fn run_once(&mut self, why: Wake) -> Result<()>;
    /// Final work after `stop()` (final flush, release of preallocated files, ...).
    fn on_shutdown(&mut self) -> Result<()> {
        Ok(())
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

/// Poisons the store if the owning thread unwinds (fjall's `PoisonDart`).
struct PoisonDart {
    health: Arc<Health>,
    service: &'static str,
}

impl Drop for PoisonDart {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health.poison(Error::BackgroundPanic {
                service: self.service,
            });
        }
    }
}

/// A running service: its signal and its thread.
#[derive(Debug)]
pub(crate) struct ServiceHandle {
    name: &'static str,
    signal: Arc<Signal>,
    join: Option<JoinHandle<Result<()>>>,
}

impl ServiceHandle {
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Stops the service and joins its thread. A panic becomes `BackgroundPanic`.
    pub(crate) fn stop_and_join(&mut self) -> Result<()> {
        self.signal.stop();
        match self.join.take() {
            None => Ok(()),
            Some(h) => match h.join() {
                Ok(r) => r,
                Err(_) => Err(Error::BackgroundPanic { service: self.name }),
            },
        }
    }
}

/// Runs `svc` on a thread named `rs-<NAME>`, waking on `signal`.
pub(crate) fn spawn<S: Service>(
    mut svc: S,
    signal: Arc<Signal>,
    health: Arc<Health>,
) -> Result<ServiceHandle> {
    let sig = Arc::clone(&signal);
    let join = std::thread::Builder::new()
        .name(format!("rs-{}", S::NAME))
        .spawn(move || {
            let _dart = PoisonDart {
                health: Arc::clone(&health),
                service: S::NAME,
            };
            let mut result = Ok(());
            loop {
                let why = sig.wait(svc.interval());
                if why == Wake::Stop {
                    break;
                }
                if let Err(e) = svc.run_once(why) {
                    let cause = health.poison(e);
                    result = Err(Error::Poisoned { cause });
                    break;
                }
            }
            let shut = svc.on_shutdown();
            if let Err(e) = shut {
                if result.is_ok() {
                    let cause = health.poison(e);
                    result = Err(Error::Poisoned { cause });
                }
            }
            result
        })
        .map_err(|e| Error::io("spawn", format!("rs-{}", S::NAME), e))?;
    Ok(ServiceHandle {
        name: S::NAME,
        signal,
        join: Some(join),
    })
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

    struct Panicker;
    impl Service for Panicker {
        const NAME: &'static str = "panicker";
        fn interval(&self) -> Duration {
            Duration::from_millis(1)
        }
        fn run_once(&mut self, _why: Wake) -> Result<()> {
            panic!("boom");
        }
    }

    #[test]
    fn a_panicking_service_poisons_the_store() {
        let health = Health::new();
        let mut h = spawn(Panicker, Signal::new(), Arc::clone(&health)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while health.check().is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let r = h.stop_and_join();
        assert!(matches!(r, Err(Error::BackgroundPanic { .. })));
        assert!(matches!(health.check(), Err(Error::Poisoned { .. })));
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
