//! Starting controller loops: their heartbeat, metric series, snapshot subscription.

use std::sync::Arc;

use super::healthz::Healthz;
use super::runner::{LoopInputs, run_loop};
use super::snapshots::Snapshots;
use crate::config::{ControllerSettings, DesiredState};
use crate::controller::Controller;
use crate::http::HttpState;
use crate::liveness::Liveness;
use crate::metrics;
use crate::shutdown::Shutdown;
use crate::sync::{Trigger, TriggerRx};

/// Reads one controller's settings from a snapshot.
pub type SettingsOf = fn(&DesiredState, &str) -> ControllerSettings;

/// Spawns controller loops on the executor with their heartbeat in the liveness registry.
pub struct Spawner<'a, 'ex> {
    /// The daemon's single-threaded executor.
    pub ex: &'a smol::LocalExecutor<'ex>,
    /// Where each loop registers its heartbeat.
    pub liveness: &'a Arc<Liveness>,
    /// Where each loop reads, and subscribes to, the desired state.
    pub snapshots: &'a Arc<Snapshots>,
    /// Closed when the daemon stops.
    pub shutdown: &'a Shutdown,
    /// Fired after every sync of every loop (wakes the systemd supervisor).
    pub sync_done: &'a Trigger,
    /// What the HTTP server serves (components add their /healthz objects through
    /// [`Spawner::healthz`]).
    pub http: &'a HttpState,
    /// The started loops, awaited at shutdown.
    pub loops: Vec<smol::Task<()>>,
}

impl<'ex> Spawner<'_, 'ex> {
    /// Where components join /healthz.
    pub fn healthz(&self) -> Healthz<'_> {
        Healthz {
            liveness: self.liveness,
            http: self.http,
        }
    }

    /// Starts `controller`'s loop; `kernel_rx` wakes it early, `settings` reads its period.
    pub fn spawn<C: Controller + 'ex>(
        &mut self,
        controller: C,
        kernel_rx: TriggerRx,
        settings: SettingsOf,
    ) {
        let name = controller.name();
        let window = settings(&self.snapshots.current(), name).liveness_window();
        let handle = self.healthz().controller(name, window);
        metrics::register_controller(name);
        let inputs = LoopInputs {
            snapshot_rx: self.snapshots.subscribe(handle.clone()),
            heartbeat: handle,
            snapshots: self.snapshots.clone(),
            kernel_rx,
            shutdown: self.shutdown.clone(),
            settings,
            sync_done: Some(self.sync_done.clone()),
        };
        self.loops.push(self.ex.spawn(run_loop(controller, inputs)));
    }
}
