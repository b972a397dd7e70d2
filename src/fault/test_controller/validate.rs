//! `[[test_controller]]` raw (serde, unknown keys refused) and validated into
//! [`TestControllers`], every problem at its place like any built-in section.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::model::{Behaviour, TestControllerConfig, TestControllers};
use crate::config::extension::Model;
use crate::config::{ControllerSettings, Diagnostics, Doc, parse_duration};

/// The section's key.
pub const SECTION: &str = "test_controller";

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

/// Validates every `[[test_controller]]` (the extension's validator).
pub fn validate_section(doc: &Doc<'_>, diags: &mut Diagnostics) -> Arc<dyn Model> {
    Arc::new(validate(doc, diags))
}

/// Validates every `[[test_controller]]`.
pub fn validate(doc: &Doc<'_>, diags: &mut Diagnostics) -> TestControllers {
    let mut out = Vec::new();
    for item in doc.items::<RawTestController>(SECTION, diags) {
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
        let settings =
            ControllerSettings::from_keys(raw.enabled, raw.period, raw.sync_budget, diags);
        out.push(TestControllerConfig {
            name: raw.name,
            behaviour,
            succeed_first: raw.succeed_first,
            settings,
        });
    }
    TestControllers(out)
}
