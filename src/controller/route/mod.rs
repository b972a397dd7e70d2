//! The route controller: keeps the routes and routing rules of `[[route]]`/`[[route_rule]]`
//! in the kernel, and only those.
//!
//! Files (the same for every controller, in this order; see docs/architecture.md):
//! - [`sync`]: the controller (constructor, one sync in named steps);
//! - [`metrics`]: its metric names and descriptions;
//! - [`model`]: config -> route and rule specs, in the kernel's terms (pure);
//! - [`plan`](mod@plan): specs + installed state (dumped or cached) -> the writes (pure, unit-tested);
//! - [`apply`]: the only part that writes to the kernel;
//! - [`observe`]: dumping the kernel, the kernel-event monitor, the cache's snapshot;
//! - [`verbs`]: the `plan` and `cleanup` CLI verbs.
//!
//! Extra: [`hash`] (the planner's fast hasher), [`tracks`] (WAN failover: the routes a down
//! `[[track]]` withdraws, the private route and rule of each track's probe).
//!
//! Ownership: every route and rule edgenetd installs carries `daemon.route_protocol`; a sync
//! dumps only objects with that protocol (the kernel filters route dumps), plans against the
//! desired state and applies the writes, pipelined. Objects with any other protocol are never
//! written, whatever their prefix: an add uses `NLM_F_EXCL` (a foreign route with the same key
//! makes that one route fail), a delete names the protocol.
//!
//! Errors are joined: every write is tried and every failure is reported with its route.
//! Drift: the monitor invalidates the cache and fires the loop's trigger when somebody else
//! changes or deletes an owned route or rule, and when links come and go (a route on a device
//! that did not exist yet gets installed when it appears); a sync that re-installs a route the
//! previous sync had verified counts it in `edgenetd_route_drift_repairs_total`.

pub mod apply;
pub mod hash;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod plan;
pub mod sync;
pub mod tracks;
pub mod verbs;

pub use self::metrics::describe_metrics;
pub use sync::RouteController;
pub use verbs::{cleanup, plan};
