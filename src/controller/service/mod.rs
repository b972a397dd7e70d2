//! The service controller: load-balanced virtual addresses in table `inet <prefix>-service`.
//!
//! Plan, then apply:
//! - [`model::build`] turns the validated services into one entry per VIP (pure);
//! - [`diff::Mirror::diff`] compares it with what this process last committed (the mirror)
//!   and yields element deletes/adds for the changed services only (pure, unit-tested);
//! - [`kernel`] writes them in one batch, isolates a service the kernel refuses (joined
//!   errors), and runs the full dump-and-diff against the kernel at startup, after a failed
//!   batch, when the ruleset generation moved under us, and once per period; whatever it
//!   finds changed behind our back is repaired and counted in
//!   `edgenetd_service_drift_repairs_total`.
//!
//! Removing a backend only deletes its slot elements: established connections keep their
//! conntrack NAT binding and drain naturally. UDP has no close, so a UDP backend that lost its
//! slots also loses its conntrack entries ([`crate::dataplane::conntrack`]).
//!
//! Backends with `[service.health]` are probed by [`health`]; a down backend gets no slots,
//! and every up/down transition fires the controller's trigger.
//!
//! See [`layout`] for the table's shape and why it is linear in the number of services.

pub mod cli;
pub mod diff;
pub mod elements;
pub mod health;
pub mod kernel;
pub mod layout;
pub mod model;
pub mod slots;
#[cfg(test)]
mod tests;
pub mod verify;
mod write;

use std::time::Instant;

use crate::config::{DaemonSettings, DesiredState};
use crate::controller::{Controller, Progress, SyncError, SyncReport, Trigger};
use crate::dataplane::nft::{NftError, TableRef, ir::Family, monitor};

/// How often the foreign-commit watch reads the ruleset generation.
pub const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

pub use kernel::Kernel;

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
    metrics::gauge!("edgenetd_services").set(0.0);
    metrics::gauge!("edgenetd_service_backends").set(0.0);
    metrics::counter!("edgenetd_service_drift_repairs_total").absolute(0);
}

/// The service controller (see the module docs).
pub struct ServiceController {
    kernel: Option<Kernel>,
    health: health::HealthChecks,
}

impl ServiceController {
    /// A controller; the kernel socket is opened on the first sync (in the caller's netns).
    /// Call it on the thread (network namespace) the controller programs: it starts a watch
    /// that fires `trigger` within [`WATCH_INTERVAL`] whenever another process commits to
    /// nftables, so a table edited or deleted by hand is repaired at once, not at the period.
    pub fn new(trigger: Trigger) -> ServiceController {
        let fire = trigger.clone();
        if let Err(e) = monitor::spawn_foreign_commit_watch(WATCH_INTERVAL, move || fire.fire()) {
            log::warn!("service: no nftables commit watch ({e}); drift is found at each period");
        }
        ServiceController {
            kernel: None,
            health: health::HealthChecks::new(trigger),
        }
    }

    /// Backends the health checks currently hold down.
    pub fn down_backends(&self) -> Vec<std::net::SocketAddr> {
        self.health.down()
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
        self.health.reconcile(&desired.services.services);
        let health = &self.health;
        let model = model::build_with(&desired.services.services, &|s, b| health.is_up(s, b));
        let desired_counts = counts(&model);
        progress.beat();
        let mut kernel = match self.kernel.take() {
            Some(k) if k.table == table => k,
            other => {
                // First sync, or the table prefix changed: start over (the old table stays
                // for `cleanup`, as after a stop).
                drop(other);
                Kernel::open(table).map_err(|e| SyncError::whole("nftables socket", e))?
            }
        };
        let (kernel, result) = smol::unblock(move || {
            let r = kernel.sync(model, period, Instant::now());
            (kernel, r)
        })
        .await;
        progress.beat();
        // What is programmed: everything desired after a clean sync, else what the mirror
        // knows (unknown after a failure: left as it was).
        let counts = match (&result, &kernel.mirror) {
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

/// `edgenetd plan`: what a sync would change, and the nft text of the layout. Writes nothing.
pub async fn plan(desired: &DesiredState) -> Result<String, ServiceError> {
    let table = table_ref(&desired.daemon);
    let model = model::build(&desired.services.services);
    let mut nft = crate::dataplane::nft::Nft::open()?;
    smol::unblock(move || cli::plan(&mut nft, &table, &model))
        .await
        .map_err(ServiceError::from)
}

/// `edgenetd cleanup`: deletes table `inet <prefix>-service` (and nothing else).
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, ServiceError> {
    let table = table_ref(settings);
    let mut nft = crate::dataplane::nft::Nft::open()?;
    smol::unblock(move || cli::cleanup(&mut nft, &table))
        .await
        .map_err(ServiceError::from)
}
