//! The validated `[[test_controller]]` entries: what each test controller's syncs do.

use std::time::Duration;

use crate::config::ControllerSettings;

/// What a test controller's syncs do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Every sync succeeds.
    Succeed,
    /// Every sync fails with this message.
    Fail(String),
    /// Every sync blocks for this long (a wedged loop), then succeeds.
    Hang(Duration),
}

/// A validated test controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestControllerConfig {
    /// Its name in logs, metrics and /healthz.
    pub name: String,
    /// What its syncs do once `succeed_first` syncs have passed.
    pub behaviour: Behaviour,
    /// How many syncs succeed before `behaviour` starts (lets READY=1 come first).
    pub succeed_first: u64,
    /// Period and budget, as for a real controller.
    pub settings: ControllerSettings,
}

/// Every `[[test_controller]]` of one snapshot, in file order (the section's model, carried
/// in `DesiredState::extensions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestControllers(
    /// The entries.
    pub Vec<TestControllerConfig>,
);
