//! Controllers: one loop per kernel domain (policy, service, route).
//!
//! A controller's sync is *plan* (pure: desired state + observed kernel state -> changes)
//! followed by *apply* (the only part that talks to the kernel, through `crate::dataplane`).
//! The runner (see `runner`) owns the loop; a controller only knows how to sync once.

pub mod cache;
pub mod route;

use std::fmt;

use crate::config::DesiredState;

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

/// Handed to every sync so a long one can show it is moving (see DESIGN.md §2: a slow but
/// progressing sync must not be mistaken for a wedged loop).
pub trait Progress {
    /// Records a heartbeat now.
    fn beat(&self);
}

/// A progress sink that ignores beats (for `plan` and unit tests).
pub struct NoProgress;

impl Progress for NoProgress {
    fn beat(&self) {}
}

/// One kernel domain's reconciler.
///
/// The daemon runs every controller on one single-threaded executor, so futures need not be
/// `Send`; hence `async fn` in the trait.
#[allow(async_fn_in_trait)]
pub trait Controller {
    /// Stable name used in logs, metrics labels and /healthz: "policy", "service", "route".
    fn name(&self) -> &'static str;

    /// Brings the kernel in line with `desired`: tries every object, returns every failure.
    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError>;
}

pub mod policy;
pub mod runner;
pub mod service;

pub use runner::{Snapshots, Trigger, TriggerRx, trigger};
#[cfg(feature = "fault-injection")]
pub mod fault;
