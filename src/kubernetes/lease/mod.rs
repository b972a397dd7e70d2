//! Status back to the cluster: one `coordination.k8s.io/v1` Lease per router, named after its
//! node, in `[kubernetes] status_namespace` (no Lease without it: it needs RBAC the read-only
//! role does not grant).
//!
//! - The Lease is **renewed** (`spec.renewTime`) every [`RENEW_EVERY`] while every loop is
//!   live, by the liveness registry's own verdict (the one that feeds the systemd watchdog),
//!   and not otherwise: a fleet sees a dead or wedged router by a Lease whose
//!   `renewTime + leaseDurationSeconds` has passed, as it sees a node by the kubelet's.
//! - Its **annotations** ([`annotations`]) say what the router runs: the content hash and
//!   generation of the TOML in force, whether the cluster state is current or cached (and
//!   since when), each loop's state and the last sync errors. A change is written at once,
//!   but writes are at least [`MIN_GAP`] apart ([`schedule`]).
//! - The writer ([`writer`]) runs on a thread of its own: a slow or refusing API server
//!   delays nothing but the Lease. A 409 (the Lease changed since it was read) reads it again
//!   and writes once more; a 403 or any other failure is warned once, counted in
//!   `edgenetd_kubernetes_status_writes_total{result}` and tried again a period later.
//!   Nothing here touches the dataplane.

pub mod annotations;
#[cfg(test)]
mod docs_tests;
pub mod in_force;
pub mod object;
pub mod schedule;
pub mod writer;

use std::time::Duration;

/// How often a live router renews its Lease (the kubelet's node Lease: a quarter of its
/// duration).
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// `spec.leaseDurationSeconds` is this many renewal periods: three renewals may fail before
/// the Lease expires.
pub const DURATION_PERIODS: u32 = 4;
/// The shortest gap between two writes (a change of the annotations is written at once,
/// unless the last write is younger than this).
pub const MIN_GAP: Duration = Duration::from_secs(2);
/// How often the writer looks at the loops and the annotations.
pub const POLL: Duration = Duration::from_secs(1);
/// The annotations' prefix.
pub const PREFIX: &str = "edgenetd.io/";
