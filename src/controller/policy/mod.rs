//! The policy controller: the router's firewall (`[policy]`) as one nftables table,
//! `inet <prefix>-policy`, which only this controller writes.
//!
//! Files (the same for every controller, in this order; see docs/architecture.md):
//! - [`sync`]: the controller (constructor, one sync in named steps);
//! - [`metrics`]: its metric names, descriptions and recording;
//! - [`model`]: `[policy]` and the pod isolation -> the program the planner reads (pure;
//!   memoized; built by [`program`]);
//! - [`plan`](mod@plan): installed snapshot + desired program -> the write to make (pure, unit-tested);
//! - [`apply`]: the only part that writes to the kernel;
//! - [`observe`]: the cache's snapshot and the drift check against the kernel's listing;
//! - [`adopt`]: at the first sync, trusting a table a full write left with the desired
//!   program (found by the tag it stores in the table), so a restart writes nothing;
//! - [`verbs`]: the `plan` and `cleanup` CLI verbs.
//!
//! Extras: [`program`] (the table that enforces a policy, with rule groups) and `matches`.
//!
//! A full write replaces the table atomically (so a reload never leaves a moment without
//! rules and established connections survive it; elements other programs added to dynamic
//! sets are put back in the same batch, see `kept.rs`), a change of named-set elements only is
//! written as an element delta, a sync with nothing to do writes nothing, and drift (someone
//! edited or deleted the table) is repaired and counted in
//! `edgenetd_policy_drift_repairs_total`. Rule groups the kernel refuses are left out, fail
//! closed, and reported as the sync's failures while every other group stays programmed.
//!
//! The table is compared with the kernel (see [`crate::controller::cache`]) when another
//! process committed to nftables (the shared generation watch tells foreign commits from this
//! process's own, see [`crate::controller::nft_core`]), and once per period.
//!
//! Without a `[policy]` section and without pod isolation (`DesiredState::pod_policies`,
//! from a cluster's NetworkPolicies) there is no table at all (an existing one is deleted).
//! Pod isolation alone makes a table with only its chains (see `program::pods`).

pub mod addresses;
pub mod adopt;
pub mod apply;
pub mod denied;
pub mod includes;
mod kept;
mod matches;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod plan;
pub mod program;
mod rule_match;
pub mod sync;
mod time_match;
pub mod verbs;

pub use self::metrics::describe_metrics;
pub use sync::PolicyController;
pub use verbs::{PolicyCliError, cleanup, plan};
