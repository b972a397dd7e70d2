//! The service controller: load-balanced virtual addresses in table `inet <prefix>-service`.
//!
//! Files (the same for every controller, in this order):
//! - `mod.rs`: the controller (constructor, one sync) and its metrics;
//! - [`model`]: the validated services -> one entry per VIP (pure);
//! - [`plan`]: the mirror (what this process last committed, the cache's snapshot) against
//!   the model -> element deletes/adds for the changed services only (pure, unit-tested);
//! - [`apply`]: the only part that writes to the kernel: one batch, a service the kernel
//!   refuses isolated (joined errors), and the full compare when the cache is not trusted (at
//!   startup, after a failed batch, when another process committed to nftables, once per
//!   period); whatever it finds changed behind our back is repaired and counted in
//!   `edgenetd_service_drift_repairs_total`;
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
pub mod elements;
pub mod layout;
pub mod local;
pub mod model;
pub mod observe;
pub mod plan;
pub mod slots;
#[cfg(test)]
mod tests;
pub mod verbs;

use std::time::Instant;

use crate::config::{DaemonSettings, DesiredState};
use crate::controller::Controller;
use crate::controller::cache::Invalidation;
use crate::dataplane::nft::{GenerationWatch, NftError, TableRef, ir::Family};
use crate::sync::{Progress, SyncError, SyncReport, Trigger};

/// How often the foreign-commit watch reads the ruleset generation.
pub const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

pub use apply::Kernel;
pub use verbs::{cleanup, plan};

/// Errors of the one-shot verbs (`plan`, `cleanup`).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Talking to nf_tables failed.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// A blocking task could not run.
    #[error("{0}")]
    Other(String),
}

/// The table of this controller for `settings`.
pub fn table_ref(settings: &DaemonSettings) -> TableRef {
    TableRef::new(Family::Inet, settings.service_table())
}

/// Describes the service metrics and sets every series to 0 (called once at startup).
pub fn describe_metrics() {
    metrics::describe_gauge!(
        "edgenetd_services",
        "Services (VIP:port/protocol) programmed"
    );
    metrics::describe_gauge!(
        "edgenetd_service_backends",
        "Backends receiving new connections, summed over services"
    );
    metrics::describe_counter!(
        "edgenetd_service_drift_repairs_total",
        "Service table elements or structure found changed behind edgenetd's back and repaired"
    );
    backend_check::describe_metrics();
    metrics::gauge!("edgenetd_services").set(0.0);
    metrics::gauge!("edgenetd_service_backends").set(0.0);
    metrics::counter!("edgenetd_service_drift_repairs_total").absolute(0);
}

/// The service controller (see the module docs).
pub struct ServiceController {
    /// The socket, the mirror and its cache; opened at the first sync.
    kernel: Option<Kernel>,
    /// Checks of the backends that have them.
    backend_checks: backend_check::BackendChecks,
    /// This process's nftables commits, shared with the policy controller.
    watch: GenerationWatch,
    /// Invalidated by the watch on a foreign commit (handed to each kernel opened).
    invalidation: Invalidation,
}

impl ServiceController {
    /// A controller; the kernel socket is opened on the first sync (in the caller's netns).
    /// Call it on the thread (network namespace) the controller programs: it starts a watch
    /// that fires `trigger` within [`WATCH_INTERVAL`] whenever another process commits to
    /// nftables, so a table edited or deleted by hand is repaired at once, not at the period.
    pub fn new(trigger: Trigger, watch: GenerationWatch) -> ServiceController {
        let invalidation = Invalidation::default();
        invalidation.follow_foreign_commits("service", &watch, WATCH_INTERVAL, trigger.clone());
        ServiceController {
            kernel: None,
            backend_checks: backend_check::BackendChecks::new(trigger),
            watch,
            invalidation,
        }
    }

    /// Attaches the heartbeat of the backend check probes (`service-health`): beaten every
    /// second while every probe finishes its checks on time.
    pub fn with_probe_heartbeat(
        mut self,
        heartbeat: std::sync::Arc<dyn crate::sync::Progress + Send + Sync>,
    ) -> ServiceController {
        self.backend_checks.watch(heartbeat);
        self
    }

    /// Backends their checks currently hold down.
    pub fn down_backends(&self) -> Vec<std::net::SocketAddr> {
        self.backend_checks.down()
    }

    /// Kernel writes (element and table messages) of the last sync; 0 for a no-op.
    pub fn last_writes(&self) -> u64 {
        self.kernel.as_ref().map(|k| k.last_writes).unwrap_or(0)
    }
}

impl Controller for ServiceController {
    fn name(&self) -> &'static str {
        "service"
    }

    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let table = table_ref(&desired.daemon);
        let period = desired.controller("service").period;
        self.backend_checks.reconcile(&desired.services.services);
        let checks = &self.backend_checks;
        let model = model::build_with(&desired.services, &|s, b| checks.is_up(s, b));
        checks.publish(&desired.services.services);
        let desired_counts = counts(&model);
        let exempt = local::of(desired.daemon.listen, &model);
        progress.beat();
        let mut kernel = match self.kernel.take() {
            Some(k) if k.table == table && k.local == exempt => k,
            other => {
                // First sync, the table prefix changed, or the loopback exemption of the
                // daemon's listener came or went: start over (the full compare replaces a
                // table of another shape; an old table's prefix stays for `cleanup`).
                drop(other);
                Kernel::open(table, self.watch.clone(), self.invalidation.clone())
                    .map_err(|e| SyncError::whole("nftables socket", e))?
                    .with_local(exempt)
            }
        };
        let (kernel, result) = crate::sync::unblock(move || {
            let r = kernel.sync(model, period, Instant::now());
            (kernel, r)
        })
        .await;
        progress.beat();
        // What is programmed: everything desired after a clean sync, else what the mirror
        // knows (unknown after a failure: left as it was).
        let counts = match (&result, kernel.mirror()) {
            (Ok(_), _) => Some(desired_counts),
            (Err(_), Some(m)) => Some(counts(&m.model)),
            (Err(_), None) => None,
        };
        if let Some((services, backends)) = counts {
            metrics::gauge!("edgenetd_services").set(services as f64);
            metrics::gauge!("edgenetd_service_backends").set(backends as f64);
        }
        self.kernel = Some(kernel);
        result
    }
}

/// Services, and backends with slots summed over services.
fn counts(model: &model::Model) -> (usize, usize) {
    (
        model.len(),
        model.values().map(|e| e.backends().len()).sum(),
    )
}
