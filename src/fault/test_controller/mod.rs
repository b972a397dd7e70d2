//! `[[test_controller]]`: controllers whose behaviour the config sets (succeed, fail with a
//! message, or hang), so the heartbeat contract can be tested end to end on the real binary.
//!
//! The whole feature lives here: the section ([`validate`], [`model`]), the controller
//! ([`controller::TestController`]) and what the daemon's registry starts ([`enabled`],
//! [`settings`]). It sits above config and the controllers and uses them; they never name it.
//! The section reaches the config through config's extension interface
//! ([`crate::config::extension`]): [`install`] registers it, once, before the first load (the
//! binary does so first thing), and the validated entries travel in each snapshot
//! (`DesiredState::extensions`), so a reload can turn a healthy test controller into a
//! failing or hanging one.

pub mod controller;
pub mod model;
pub mod validate;

use crate::config::extension::{self, Extension};
use crate::config::{ControllerSettings, DesiredState};
use model::{TestControllerConfig, TestControllers};

/// The section, as config's extension interface takes it.
static EXTENSION: Extension = Extension {
    section: validate::SECTION,
    validate: validate::validate_section,
};

/// Makes every later config load accept and validate `[[test_controller]]`.
pub fn install() {
    extension::register(&EXTENSION);
}

/// The test controllers of `desired` (none when the section was never installed).
fn entries(desired: &DesiredState) -> impl Iterator<Item = &TestControllerConfig> {
    desired
        .extensions
        .get::<TestControllers>(validate::SECTION)
        .into_iter()
        .flat_map(|t| t.0.iter())
}

/// A controller for every enabled test controller of `desired`, to start after the
/// built-in ones.
pub fn enabled(desired: &DesiredState) -> Vec<controller::TestController> {
    entries(desired)
        .filter(|t| t.settings.enabled)
        .map(|t| controller::TestController::new(&t.name))
        .collect()
}

/// Settings of test controller `name` in a snapshot (defaults once it is gone).
pub fn settings(desired: &DesiredState, name: &str) -> ControllerSettings {
    entries(desired)
        .find(|t| t.name == name)
        .map(|t| t.settings)
        .unwrap_or_default()
}
