//! The service controller: load-balanced virtual addresses in table `inet <prefix>-service`.
//!
//! Files (the same for every controller, in this order; see docs/architecture.md):
//! - [`sync`]: the controller (constructor, one sync): incremental, or the full compare when
//!   the cache is not trusted (at startup, after a failed batch, when another process
//!   committed to nftables, once per period); whatever it finds changed behind our back is
//!   repaired and counted in `edgenetd_service_drift_repairs_total`; the periodic compare
//!   gives way to a waiting change, within a bound ([`defer`]);
//! - [`metrics`]: its metric names, descriptions and recording;
//! - [`model`]: the validated services -> one entry per VIP (pure); [`rebuild`] builds it
//!   again only where services changed, and tells the plan which keys to compare;
//! - [`plan`](mod@plan): the mirror (what this process last committed, the cache's snapshot) against
//!   the model -> element deletes/adds for the changed services only (pure, unit-tested);
//! - [`apply`]: the only part that writes to the kernel: one batch, a service the kernel
//!   refuses isolated (joined errors);
//! - [`observe`]: reading the table back (structure check, streaming element compare);
//! - [`verbs`]: the `plan` and `cleanup` CLI verbs.
//!
//! Extras: [`backend_check`] (backend checks), [`slots`] (backend slots), [`layout`] (the table's
//! shape) and [`elements`] (model -> kernel elements).
//!
//! Removing a backend only deletes its slot elements: established connections keep their
//! conntrack NAT binding and drain naturally. UDP has no close, so a UDP backend that lost its
//! slots also loses its conntrack entries ([`crate::dataplane::conntrack`]).
//!
//! Backends with `[service.health]` are probed by [`backend_check`]; a down backend gets no slots,
//! and every up/down transition fires the controller's trigger.
//!
//! See [`layout`] for the table's shape and why it is linear in the number of services.

pub mod apply;
pub mod backend_check;
pub mod defer;
pub mod elements;
pub mod layout;
pub mod local;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod plan;
pub mod rebuild;
pub mod slots;
pub mod sync;
#[cfg(test)]
mod tests;
pub mod verbs;

pub use self::metrics::describe_metrics;
pub use sync::{Kernel, ServiceController};
pub use verbs::{ServiceError, cleanup, plan};
