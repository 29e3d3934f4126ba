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

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::signal::{Health, Signal, Wake};

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
    use std::time::Instant;

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
}
