//! Prometheus metrics: every sync's outcome, config reloads, liveness and the process.
//!
//! edgenetd's own series carry the `edgenetd_` prefix; the process series keep the standard
//! unprefixed names (`process_resident_memory_bytes`, `process_start_time_seconds`, …).
//!
//! [`record_sync_result`] is the single entry point for sync outcomes: it updates the
//! counters, the duration histogram, the last-success gauge and the liveness registry's view
//! of the outcome. The daemon's observed sync (beat, sync, beat, then this) is how every sync
//! of every controller runs, the first included.
//!
//! Dependencies point one way: metrics reads the liveness registry (derived gauges) and writes
//! outcomes into it; liveness knows nothing of metrics. Neither runs anything.
//!
//! Every series a dashboard needs exists from startup ([`register_controller`] sets them to 0),
//! so a controller that never succeeded shows `last_success 0`, not an empty vector.
//! Liveness gauges are derived from the liveness registry when /metrics is scraped, so they are
//! never stale and cost nothing between scrapes.

use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::clock::unix_seconds;
use crate::liveness::{Heartbeat, Liveness};
use crate::sync::{SyncError, SyncReport};

/// Histogram buckets for sync durations: 1 ms (a no-op) to 5 min (a cold 100k-route sync on a
/// slow board).
pub const SYNC_DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Histogram buckets for the time from a pod's address appearing in the API to the commit of
/// its rules (`edgenetd_kubernetes_pod_enforce_seconds`): 5 ms to a minute.
pub const POD_ENFORCE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The installed Prometheus recorder and the process collector.
pub struct Exporter {
    handle: PrometheusHandle,
    process: metrics_process::Collector,
}

impl Exporter {
    /// Installs the global recorder (once per process) and describes the core metrics.
    pub fn install() -> Result<Exporter, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("edgenetd_controller_sync_duration_seconds".into()),
                SYNC_DURATION_BUCKETS,
            )
            .map_err(|e| e.to_string())?
            .set_buckets_for_metric(
                // `kubernetes::watch::enforce`'s histogram (named here: metrics sits below it).
                Matcher::Full("edgenetd_kubernetes_pod_enforce_seconds".into()),
                POD_ENFORCE_BUCKETS,
            )
            .map_err(|e| e.to_string())?
            .install_recorder()
            .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
        // Unprefixed on purpose: `process_*` are the names every Prometheus client library
        // exports and every process dashboard and restart alert queries.
        let process = metrics_process::Collector::default();
        process.describe();
        describe_core();
        Ok(Exporter { handle, process })
    }

    /// Renders the Prometheus text exposition, refreshing the derived gauges first.
    pub fn render(&self, liveness: &Liveness) -> String {
        self.process.collect();
        export_liveness(liveness);
        self.handle.render()
    }

    /// Drains histogram buffers; call on a timer so memory stays flat between scrapes.
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }
}

fn describe_core() {
    describe_gauge!(
        "edgenetd_build_info",
        "Build information; the value is always 1."
    );
    gauge!(
        "edgenetd_build_info",
        "version" => env!("CARGO_PKG_VERSION"),
        "arch" => std::env::consts::ARCH,
        "fault_injection" => if cfg!(feature = "fault-injection") { "true" } else { "false" },
    )
    .set(1.0);
    describe_counter!(
        "edgenetd_config_reloads_total",
        "Configuration reloads attempted (SIGHUP or file change)."
    );
    describe_counter!(
        "edgenetd_config_reload_failures_total",
        "Configuration reloads rejected, once per distinct content of the files; the last good configuration stays in force."
    );
    describe_gauge!(
        "edgenetd_config_last_reload_success_timestamp_seconds",
        Unit::Seconds,
        "Unix time of the last configuration load that was accepted."
    );
    describe_gauge!(
        "edgenetd_config_last_reload_successful",
        "1 if the last configuration load was accepted, 0 while the files on disk are rejected."
    );
    describe_counter!(
        "edgenetd_config_rollbacks_total",
        "Configurations applied with `edgenetd apply --confirm` and rolled back because nobody confirmed them in time (or the daemon restarted while the confirm was pending)."
    );
    counter!("edgenetd_config_reloads_total").absolute(0);
    counter!("edgenetd_config_reload_failures_total").absolute(0);
    describe_gauge!(
        "edgenetd_config_degraded",
        "1 while the daemon runs a fallback instead of its config files (they did not validate at start: the last good configuration, or the built-in lockdown), 0 once a valid config is in force."
    );
    counter!("edgenetd_config_rollbacks_total").absolute(0);
    // Until `record_initial_load` says otherwise, the first load was accepted.
    gauge!("edgenetd_config_last_reload_successful").set(1.0);
    gauge!("edgenetd_config_degraded").set(0.0);
    describe_counter!(
        "edgenetd_controller_syncs_total",
        "Syncs run, by controller."
    );
    describe_counter!(
        "edgenetd_controller_sync_failures_total",
        "Syncs that failed, by controller."
    );
    describe_gauge!(
        "edgenetd_controller_sync_last_success",
        Unit::Seconds,
        "Unix time of the controller's last successful sync; 0 until the first success."
    );
    describe_histogram!(
        "edgenetd_controller_sync_duration_seconds",
        Unit::Seconds,
        "Duration of one sync."
    );
    describe_gauge!(
        "edgenetd_controller_last_heartbeat_timestamp_seconds",
        Unit::Seconds,
        "Unix time of the controller loop's last heartbeat."
    );
    describe_gauge!(
        "edgenetd_controller_live",
        "1 while the controller's loop is live (not wedged), else 0."
    );
}

/// Creates every series of one controller with its initial value.
pub fn register_controller(name: &str) {
    let label = name.to_string();
    counter!("edgenetd_controller_syncs_total", "controller" => label.clone()).absolute(0);
    counter!("edgenetd_controller_sync_failures_total", "controller" => label.clone()).absolute(0);
    gauge!("edgenetd_controller_sync_last_success", "controller" => label.clone()).set(0.0);
    gauge!("edgenetd_controller_live", "controller" => label.clone()).set(1.0);
    gauge!("edgenetd_controller_last_heartbeat_timestamp_seconds", "controller" => label).set(0.0);
}

/// The single entry point for sync outcomes: metrics and the liveness registry's view.
pub fn record_sync_result(
    handle: &Heartbeat,
    result: &Result<SyncReport, SyncError>,
    elapsed: Duration,
) {
    let name = handle.name();
    counter!("edgenetd_controller_syncs_total", "controller" => name.clone()).increment(1);
    histogram!("edgenetd_controller_sync_duration_seconds", "controller" => name.clone())
        .record(elapsed.as_secs_f64());
    match result {
        Ok(_) => {
            let now = unix_seconds(handle.liveness().clock().wall());
            gauge!("edgenetd_controller_sync_last_success", "controller" => name).set(now);
            handle.record_outcome(None);
        }
        Err(e) => {
            counter!("edgenetd_controller_sync_failures_total", "controller" => name).increment(1);
            handle.record_outcome(Some(e.to_string()));
        }
    }
}

/// What became of one configuration load attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadRecord {
    /// Valid and published.
    Taken,
    /// Rejected: files whose contents were not rejected just before.
    Rejected,
    /// Rejected again with the very same contents (a SIGHUP and the file watch both loading
    /// one bad edit): an attempt, but not another failure.
    RejectedAgain,
}

/// Records a configuration load attempt.
pub fn record_config_reload(record: ReloadRecord, wall_now: f64) {
    counter!("edgenetd_config_reloads_total").increment(1);
    let taken = record == ReloadRecord::Taken;
    gauge!("edgenetd_config_last_reload_successful").set(if taken { 1.0 } else { 0.0 });
    match record {
        ReloadRecord::Taken => {
            gauge!("edgenetd_config_last_reload_success_timestamp_seconds").set(wall_now);
        }
        ReloadRecord::Rejected => counter!("edgenetd_config_reload_failures_total").increment(1),
        ReloadRecord::RejectedAgain => {}
    }
}

/// Records one rollback of an unconfirmed configuration.
pub fn record_config_rollback() {
    counter!("edgenetd_config_rollbacks_total").increment(1);
}

/// Records the first load (not a reload, but it sets the timestamp when it was accepted).
pub fn record_initial_load(wall_now: f64, accepted: bool) {
    if accepted {
        gauge!("edgenetd_config_last_reload_success_timestamp_seconds").set(wall_now);
    }
    gauge!("edgenetd_config_last_reload_successful").set(if accepted { 1.0 } else { 0.0 });
}

/// Records whether the daemon runs a fallback instead of its config files.
pub fn record_config_degraded(degraded: bool) {
    gauge!("edgenetd_config_degraded").set(if degraded { 1.0 } else { 0.0 });
}

fn export_liveness(liveness: &Liveness) {
    for c in liveness.report().controllers {
        gauge!("edgenetd_controller_live", "controller" => c.name.clone()).set(if c.live {
            1.0
        } else {
            0.0
        });
        gauge!("edgenetd_controller_last_heartbeat_timestamp_seconds", "controller" => c.name)
            .set(unix_seconds(c.last_beat));
    }
}

/// Renders what `f` records into a recorder of its own (tests run in parallel; the global
/// recorder is not theirs to share).
#[cfg(test)]
pub(crate) fn render_with<F: FnOnce()>(f: F) -> String {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("edgenetd_controller_sync_duration_seconds".into()),
            SYNC_DURATION_BUCKETS,
        )
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        describe_core();
        f();
    });
    handle.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_exist_from_startup_with_zero_values() {
        let out = render_with(|| register_controller("route"));
        for line in [
            "edgenetd_controller_syncs_total{controller=\"route\"} 0",
            "edgenetd_controller_sync_failures_total{controller=\"route\"} 0",
            "edgenetd_controller_sync_last_success{controller=\"route\"} 0",
            "edgenetd_config_reloads_total 0",
            "edgenetd_config_rollbacks_total 0",
            "# HELP edgenetd_controller_live ",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        assert!(out.contains("edgenetd_build_info{version=\""), "{out}");
    }
}
