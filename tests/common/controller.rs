//! Controllers driven sync by sync from the test thread (in the test's own namespace), with the
//! desired state given as TOML text.

use edgenetd::config::{self, DesiredState};
use edgenetd::controller::Controller;
use edgenetd::controller::policy::PolicyController;
use edgenetd::controller::service::ServiceController;
use edgenetd::dataplane::nft::GenerationWatch;
use edgenetd::sync::{NoProgress, SyncError, SyncReport, TriggerRx, trigger};

/// Loads a config from text, panicking with the rendered errors.
pub fn load(toml: &str) -> DesiredState {
    config::load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"))
}

/// One controller and the receiving end of its kernel-event trigger (kept open, unread).
pub struct Driver<C> {
    /// The controller under test.
    pub controller: C,
    /// Held so the controller's trigger stays connected.
    _kernel_events: Option<TriggerRx>,
}

impl Driver<PolicyController> {
    /// A fresh policy controller with a generation watch of its own (its kernel socket opens
    /// at the first sync, here).
    pub fn policy() -> Self {
        Driver::policy_sharing(&GenerationWatch::new())
    }

    /// A fresh policy controller sharing `watch` with other nftables controllers, as in the
    /// daemon: none of them mistakes another's commit for drift.
    pub fn policy_sharing(watch: &GenerationWatch) -> Self {
        let (t, rx) = trigger();
        Driver::with(PolicyController::new(t, watch.clone()), Some(rx))
    }
}

impl Driver<ServiceController> {
    /// A fresh service controller with a generation watch of its own.
    pub fn service() -> Self {
        Driver::service_sharing(&GenerationWatch::new())
    }

    /// A fresh service controller sharing `watch` (see [`Driver::policy_sharing`]).
    pub fn service_sharing(watch: &GenerationWatch) -> Self {
        let (t, rx) = trigger();
        Driver::with(ServiceController::new(t, watch.clone()), Some(rx))
    }
}

impl<C: Controller> Driver<C> {
    /// Drives `controller`; `kernel_events` is its trigger's receiver when the test does not
    /// read it itself.
    pub fn with(controller: C, kernel_events: Option<TriggerRx>) -> Self {
        Driver {
            controller,
            _kernel_events: kernel_events,
        }
    }

    /// One sync against `toml`.
    pub fn sync(&mut self, toml: &str) -> Result<SyncReport, SyncError> {
        self.sync_state(&load(toml))
    }

    /// One sync against a loaded desired state.
    pub fn sync_state(&mut self, desired: &DesiredState) -> Result<SyncReport, SyncError> {
        smol::block_on(self.controller.sync(desired, &NoProgress))
    }
}
