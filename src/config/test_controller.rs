//! `[[test_controller]]` (cargo feature `fault-injection` only): controllers whose behaviour
//! the config sets, so the heartbeat contract can be tested end to end on the real binary.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::daemon::{ControllerSettings, RawController, controller_settings};
use super::diag::Diagnostics;
use super::doc::Doc;
use super::duration::parse_duration;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTestController {
    name: String,
    behaviour: Spanned<String>,
    message: Option<String>,
    hang: Option<Spanned<String>>,
    #[serde(default)]
    succeed_first: u64,
    enabled: Option<bool>,
    period: Option<Spanned<String>>,
    sync_budget: Option<Spanned<String>>,
}

/// Validates every `[[test_controller]]`.
pub fn validate(doc: &Doc<'_>, diags: &mut Diagnostics) -> Vec<TestControllerConfig> {
    let mut out = Vec::new();
    for item in doc.items::<RawTestController>("test_controller", diags) {
        let raw = item.into_inner();
        let behaviour = match raw.behaviour.get_ref().as_str() {
            "succeed" => Behaviour::Succeed,
            "fail" => Behaviour::Fail(
                raw.message
                    .clone()
                    .unwrap_or_else(|| "injected failure".into()),
            ),
            "hang" => {
                let hang = raw
                    .hang
                    .as_ref()
                    .map(|h| (h.span(), parse_duration(h.get_ref())));
                match hang {
                    Some((_, Ok(d))) => Behaviour::Hang(d),
                    Some((span, Err(msg))) => {
                        diags.error(span, msg);
                        continue;
                    }
                    None => Behaviour::Hang(Duration::from_secs(3600)),
                }
            }
            other => {
                diags.error(
                    raw.behaviour.span(),
                    format!("unknown behaviour `{other}`, expected `succeed`, `fail` or `hang`"),
                );
                continue;
            }
        };
        let settings = controller_settings(
            RawController::from_parts(raw.enabled, raw.period, raw.sync_budget),
            diags,
        );
        out.push(TestControllerConfig {
            name: raw.name,
            behaviour,
            succeed_first: raw.succeed_first,
            settings,
        });
    }
    out
}
