//! Controllers: one loop per kernel domain (policy, service, route).
//!
//! A controller's sync is *plan* (pure: desired state + observed kernel state -> changes)
//! followed by *apply* (the only part that talks to the kernel, through `crate::dataplane`).
//! The daemon's runner owns the loop; a controller only knows how to sync once. The shared
//! sync vocabulary (reports, errors, progress, triggers) lives in [`crate::sync`].
//!
//! Every controller is a directory with the same files in the same roles (`sync.rs` the
//! controller and its sync, `metrics.rs`, `model.rs`, `plan.rs`, `apply.rs`, `observe.rs`,
//! `verbs.rs`; docs/architecture.md, "The controller shape"). What they share: [`cache`] (the
//! belief about the kernel and when to trust it) and, for the two nftables controllers,
//! [`nft_core`] (the owned tables, the socket, the foreign-commit check and watch) and [`marks`]
//! (the conntrack mark bits both give a meaning to).

pub mod cache;
pub mod marks;
pub mod nft_core;
pub mod route;

use crate::config::DesiredState;
use crate::sync::{Progress, SyncError, SyncReport};

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
pub mod service;
