//! How every sync of every controller runs: beat, sync, beat, then record the outcome.
//!
//! Orchestration, so it lives in the daemon: liveness only keeps heartbeats and metrics only
//! counts; this is the one place that puts the two around a sync.

use crate::liveness::{Heartbeat, run_sync};
use crate::metrics::record_sync_result;
use crate::sync::{SyncError, SyncReport};

/// Runs one sync the only way syncs run: beat, sync, beat, then record the outcome.
pub async fn run_observed_sync<F>(handle: &Heartbeat, sync: F) -> Result<SyncReport, SyncError>
where
    F: Future<Output = Result<SyncReport, SyncError>>,
{
    let clock = handle.liveness().clock().clone();
    let start = clock.now();
    let result = run_sync(handle, sync).await;
    record_sync_result(
        handle,
        &result,
        clock.now().saturating_duration_since(start),
    );
    result
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, FakeClock, unix_seconds};
    use crate::liveness::Liveness;
    use crate::metrics::{register_controller, render_with};

    #[test]
    fn a_failed_sync_counts_a_failure_and_keeps_last_success_at_zero() {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone() as Arc<dyn Clock>);
        let h = liveness.register("route", Duration::from_secs(60));
        let out = render_with(|| {
            register_controller("route");
            let r = smol::block_on(run_observed_sync(&h, async {
                Err(SyncError::whole("route 10.0.0.0/8", "boom"))
            }));
            assert!(r.is_err());
        });
        for want in [
            "edgenetd_controller_syncs_total{controller=\"route\"} 1",
            "edgenetd_controller_sync_failures_total{controller=\"route\"} 1",
            "edgenetd_controller_sync_last_success{controller=\"route\"} 0",
            "edgenetd_controller_sync_duration_seconds_bucket{controller=\"route\",le=\"0.001\"} 1",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        let report = liveness.report();
        assert_eq!(
            report.controllers[0].last_error.as_deref(),
            Some("route 10.0.0.0/8: boom")
        );
    }

    #[test]
    fn a_successful_sync_sets_last_success_to_now() {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone() as Arc<dyn Clock>);
        let h = liveness.register("policy", Duration::from_secs(60));
        let out = render_with(|| {
            register_controller("policy");
            smol::block_on(run_observed_sync(&h, async { Ok(SyncReport::default()) })).unwrap();
        });
        let want = format!(
            "edgenetd_controller_sync_last_success{{controller=\"policy\"}} {}",
            unix_seconds(clock.wall())
        );
        assert!(out.contains(&want), "missing {want} in\n{out}");
    }
}
