//! The vocabulary every sync loop shares: what a sync reports, how it fails, how it shows
//! progress, and how a loop is woken early.
//!
//! A leaf: this module imports nothing from the crate, so controllers (which produce these
//! values), the daemon (which runs the loops), liveness (which turns progress into heartbeats),
//! metrics (which counts outcomes) and systemd (which waits on triggers) can all use it
//! without depending on one another.

use std::fmt;

/// What one successful (or partly successful) sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Kernel objects written (added, replaced or deleted); 0 for a no-op sync.
    pub changes: u64,
    /// Drift repaired: owned objects found changed or missing that had been installed before.
    pub drift_repairs: u64,
    /// One line for logs, e.g. "3 added, 1 deleted".
    pub summary: String,
}

/// One object that a sync could not program, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFailure {
    /// The object as an operator names it, e.g. `route 10.20.0.0/16 table 100`.
    pub object: String,
    /// Why it failed, e.g. the kernel's error.
    pub error: String,
}

/// Every failure of a best-effort sync, joined: one broken object never hides another, and
/// never keeps the others from being programmed.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
pub struct SyncError {
    /// Each object that failed.
    pub failures: Vec<ObjectFailure>,
    /// What the sync did manage to do besides the failures.
    pub report: SyncReport,
}

impl SyncError {
    /// A failure that is not about one object (e.g. the netlink socket could not be opened).
    pub fn whole(object: impl Into<String>, error: impl fmt::Display) -> SyncError {
        SyncError {
            failures: vec![ObjectFailure {
                object: object.into(),
                error: error.to_string(),
            }],
            report: SyncReport::default(),
        }
    }

    /// Adds one object's failure.
    pub fn push(&mut self, object: impl Into<String>, error: impl fmt::Display) {
        self.failures.push(ObjectFailure {
            object: object.into(),
            error: error.to_string(),
        });
    }

    /// `Ok(report)` when nothing failed, else `Err(self)` carrying the report.
    pub fn into_result(mut self, report: SyncReport) -> Result<SyncReport, SyncError> {
        if self.failures.is_empty() {
            Ok(report)
        } else {
            self.report = report;
            Err(self)
        }
    }
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.failures.as_slice() {
            [] => write!(f, "sync failed"),
            [one] => write!(f, "{}: {}", one.object, one.error),
            many => {
                write!(f, "{} objects failed: ", many.len())?;
                for (i, failure) in many.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{}: {}", failure.object, failure.error)?;
                }
                Ok(())
            }
        }
    }
}

/// Handed to every sync so a long one can show it is moving: a slow but progressing sync must
/// not be mistaken for a wedged loop.
pub trait Progress {
    /// Records a heartbeat now.
    fn beat(&self);

    /// The work has nothing to do until something wakes it: its silence from now on is not a
    /// stall, until its next [`beat`](Progress::beat). (Lets idle work sleep instead of
    /// ticking to stay live.)
    fn rest(&self) {}

    /// Whether newer work (a new desired state, a kernel event) waits for the loop running
    /// this sync: a long sync that can stop early and be done again may give way to it.
    /// Nothing ever waits by default (a sync driven by hand, a tool).
    fn waiting(&self) -> Waiting {
        Waiting::never()
    }
}

/// A progress sink that ignores beats (for `plan` and unit tests).
pub struct NoProgress;

impl Progress for NoProgress {
    fn beat(&self) {}
}

/// Wakes a loop early (kernel events, drift monitors, new snapshots, reload requests). Cheap
/// to clone; firing is non-blocking and coalesces with any wake-up already pending.
#[derive(Clone, Debug)]
pub struct Trigger(async_channel::Sender<()>);

/// The receiving end of a [`Trigger`].
#[derive(Debug)]
pub struct TriggerRx(async_channel::Receiver<()>);

/// A connected trigger pair. Capacity one: any number of firings while nobody listens leave
/// exactly one wake-up pending.
pub fn trigger() -> (Trigger, TriggerRx) {
    let (tx, rx) = async_channel::bounded(1);
    (Trigger(tx), TriggerRx(rx))
}

impl Trigger {
    /// Asks for a wake-up soon; a no-op when one is already pending.
    pub fn fire(&self) {
        let _ = self.0.try_send(());
    }
}

impl TriggerRx {
    /// Waits for the next firing; `None` once every [`Trigger`] is gone.
    pub async fn recv(&self) -> Option<()> {
        self.0.recv().await.ok()
    }

    /// Consumes a pending wake-up, if any, without waiting; true if there was one.
    pub fn take_pending(&self) -> bool {
        self.0.try_recv().is_ok()
    }
}

/// Whether a wake-up waits on some triggers, read without taking it: the runner hands its
/// loop's receivers to a sync (through [`Progress::waiting`]) so that a long one can see newer
/// work came since it started. Cheap to clone and `Send`: a blocking sync polls it from its
/// own thread.
#[derive(Clone, Debug, Default)]
pub struct Waiting(Vec<async_channel::Receiver<()>>);

impl Waiting {
    /// Watches nothing: never waiting.
    pub fn never() -> Waiting {
        Waiting::default()
    }

    /// Watches `rx` too.
    pub fn and(mut self, rx: &TriggerRx) -> Waiting {
        self.0.push(rx.0.clone());
        self
    }

    /// True while a wake-up of a watched trigger is pending (fired, not yet taken).
    pub fn now(&self) -> bool {
        self.0.iter().any(|rx| !rx.is_empty())
    }
}

/// Runs blocking work (a netlink round trip, an nftables commit) off the executor: on a
/// thread of its own that ends with the work, so an idle daemon keeps no pool thread.
/// (smol's blocking pool keeps every thread it ever started, each waking every 500 ms.)
/// A panic in `work` resumes on the awaiting task; if no thread can be started, the work
/// runs on the caller's thread.
pub async fn unblock<T, F>(work: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
    use std::sync::{Arc, Mutex};
    // The work is handed over through a slot so that a failed spawn gives it back.
    let slot = Arc::new(Mutex::new(Some(work)));
    let (tx, rx) = async_channel::bounded(1);
    let theirs = Arc::clone(&slot);
    let spawned = std::thread::Builder::new()
        .name("unblock".into())
        .spawn(move || {
            let work = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(work) = work {
                let _ = tx.send_blocking(catch_unwind(AssertUnwindSafe(work)));
            }
        });
    if spawned.is_err() {
        let work = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(work) = work {
            return work();
        }
    }
    match rx.recv().await {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => resume_unwind(panic),
        Err(_) => unreachable!("the unblock thread ends only after sending"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firings_coalesce_into_one_pending_wake_up() {
        let (tx, rx) = trigger();
        for _ in 0..5 {
            tx.fire();
        }
        assert!(rx.take_pending());
        assert!(!rx.take_pending());
        drop(tx);
        assert_eq!(smol::block_on(rx.recv()), None);
    }

    #[test]
    fn waiting_sees_a_pending_wake_up_without_taking_it() {
        let (tx, rx) = trigger();
        let (_other_tx, other) = trigger();
        let waiting = Waiting::never().and(&other).and(&rx);
        assert!(!waiting.now());
        assert!(!Waiting::never().now());
        tx.fire();
        assert!(waiting.now());
        assert!(waiting.now(), "looking takes nothing");
        assert!(rx.take_pending());
        assert!(!waiting.now());
    }

    #[test]
    fn errors_join_every_failure() {
        let mut e = SyncError::whole("a", "x");
        e.push("b", "y");
        assert_eq!(e.to_string(), "2 objects failed: a: x; b: y");
        let ok = SyncError::default().into_result(SyncReport::default());
        assert_eq!(ok, Ok(SyncReport::default()));
    }

    #[test]
    fn unblock_returns_the_work_s_value_from_another_thread() {
        let caller = std::thread::current().id();
        let (value, worker) = smol::block_on(unblock(|| (6 * 7, std::thread::current().id())));
        assert_eq!(value, 42);
        assert_ne!(worker, caller);
    }

    #[test]
    fn unblock_resumes_a_panic_on_the_awaiting_task() {
        let r = std::panic::catch_unwind(|| smol::block_on(unblock(|| panic!("boom"))));
        let panic = r.expect_err("the panic reaches the caller");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"boom"));
    }
}
