//! The built-in controllers, in one table: daemon start-up, `plan` and `cleanup` iterate it
//! instead of matching names.
//!
//! Construction goes through [`ControllerDeps`], so a dependency every controller may need
//! (another shared watcher, say) is one more field, not a new signature at every call site.

use std::pin::Pin;

use log::info;

use super::spawner::Spawner;
use crate::config::{ControllerSettings, DaemonSettings, DesiredState};
use crate::controller::{policy, route, service};
use crate::dataplane::nft::GenerationWatch;
use crate::sync::{Trigger, TriggerRx, trigger};

/// The future of a one-shot verb (`plan`, `cleanup`): the text to print, or why it failed.
pub type VerbFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + 'a>>;

/// What a controller is built from.
pub struct ControllerDeps {
    /// Wakes the controller's loop early (kernel events, drift monitors).
    pub kernel_events: Trigger,
    /// The one nftables generation watch, shared by the controllers that own nftables tables
    /// (it tells them another process committed something).
    pub nft_watch: GenerationWatch,
    /// Told of the policy controller's commits (the Kubernetes source times new pods).
    pub pod_commits: Option<policy::sync::PodCommits>,
}

/// One built-in controller.
pub struct BuiltinController {
    /// Its name in the config (`[controller.NAME]`), logs, metrics and /healthz.
    pub name: &'static str,
    /// Describes the metrics it records (once, before its loop starts).
    pub describe_metrics: fn(),
    /// `edgenetd plan`: what a sync would change, changing nothing.
    pub plan: for<'a> fn(&'a DesiredState) -> VerbFuture<'a>,
    /// `edgenetd cleanup`: removes what it owns.
    pub cleanup: for<'a> fn(&'a DaemonSettings) -> VerbFuture<'a>,
    /// Builds it and starts its loop.
    pub start: fn(&mut Spawner<'_, '_>, ControllerDeps, TriggerRx),
}

/// Every built-in controller, in the order they start and report.
pub const BUILTIN: [BuiltinController; 3] = [
    BuiltinController {
        name: "policy",
        describe_metrics: policy::describe_metrics,
        plan: |d| Box::pin(async move { policy::plan(d).await.map_err(|e| e.to_string()) }),
        cleanup: |s| Box::pin(async move { policy::cleanup(s).await.map_err(|e| e.to_string()) }),
        start: |spawner, deps, kernel_rx| {
            let controller = policy::PolicyController::new(deps.kernel_events, deps.nft_watch)
                .with_pod_commits(deps.pod_commits);
            spawner.spawn(controller, kernel_rx, builtin_settings);
        },
    },
    BuiltinController {
        name: "service",
        describe_metrics: service::describe_metrics,
        plan: |d| Box::pin(async move { service::plan(d).await.map_err(|e| e.to_string()) }),
        cleanup: |s| Box::pin(async move { service::cleanup(s).await.map_err(|e| e.to_string()) }),
        start: |spawner, deps, kernel_rx| {
            // The probes are work too: their own heartbeat (`daemon::healthz`).
            let probes = spawner.healthz().backend_checks();
            let controller = service::ServiceController::new(deps.kernel_events, deps.nft_watch)
                .with_probe_heartbeat(std::sync::Arc::new(probes));
            spawner.spawn(controller, kernel_rx, builtin_settings);
        },
    },
    BuiltinController {
        name: "route",
        describe_metrics: route::describe_metrics,
        plan: |d| Box::pin(async move { route::plan(d).await.map_err(|e| e.to_string()) }),
        cleanup: |s| Box::pin(async move { route::cleanup(s).await.map_err(|e| e.to_string()) }),
        start: |spawner, deps, kernel_rx| {
            super::tracks::start_route(spawner, deps.kernel_events, kernel_rx);
        },
    },
];

/// Settings of a built-in controller from a snapshot.
fn builtin_settings(desired: &DesiredState, name: &str) -> ControllerSettings {
    desired.controller(name)
}

/// Starts one loop per enabled controller: the built-ins, then (fault-injection builds) the
/// test controllers.
/// `pod_commits` goes to the policy controller.
pub fn start_all(
    spawner: &mut Spawner<'_, '_>,
    desired: &DesiredState,
    pod_commits: Option<policy::sync::PodCommits>,
) {
    let nft_watch = GenerationWatch::new();
    for entry in &BUILTIN {
        if !desired.controller(entry.name).enabled {
            info!(
                "controller {} is disabled: not started, owns nothing",
                entry.name
            );
            continue;
        }
        let (kernel_events, kernel_rx) = trigger();
        (entry.describe_metrics)();
        let deps = ControllerDeps {
            kernel_events,
            nft_watch: nft_watch.clone(),
            pod_commits: pod_commits.clone(),
        };
        (entry.start)(spawner, deps, kernel_rx);
    }
    // Fault-injection builds: the test controllers, owned by `fault::test_controller`.
    crate::fault_hook!(
        for controller in crate::fault::test_controller::enabled(desired) {
            // A test controller has no kernel events: nobody keeps its trigger.
            let (_kernel_events, kernel_rx) = trigger();
            spawner.spawn(
                controller,
                kernel_rx,
                crate::fault::test_controller::settings,
            );
        },
        ()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_exactly_the_controllers_the_config_knows_in_order() {
        let names: Vec<&str> = BUILTIN.iter().map(|c| c.name).collect();
        assert_eq!(names, crate::config::CONTROLLERS);
    }
}
