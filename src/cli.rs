//! `plan` and `cleanup`: one-shot verbs that ask each controller area what it would change,
//! or remove what it owns. Each area provides its own `plan`/`cleanup`; this module only
//! runs them in order and joins their output and errors.

use std::path::Path;
use std::process::ExitCode;

use crate::config;

/// Runs `plan` or `cleanup` for every built-in controller area.
pub fn run_verb(verb: &str, config_path: &Path) -> ExitCode {
    let desired = match config::load(config_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut failed = false;
    for (area, result) in smol::block_on(run_areas(verb, &desired)) {
        match result {
            Ok(text) => print!("{text}"),
            Err(e) => {
                failed = true;
                eprintln!("{area}: {verb} failed: {e}");
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

async fn run_areas(
    verb: &str,
    desired: &config::DesiredState,
) -> Vec<(&'static str, Result<String, String>)> {
    use crate::controller::{policy, route, service};
    let mut out: Vec<(&'static str, Result<String, String>)> = Vec::new();
    // `plan` asks only enabled controllers; `cleanup` removes what any of them may have left.
    let wanted = |name: &str| verb == "cleanup" || desired.controller(name).enabled;
    if wanted("policy") {
        let r = match verb {
            "plan" => policy::plan(desired).await,
            _ => policy::cleanup(&desired.daemon).await,
        };
        out.push(("policy", r.map_err(|e| e.to_string())));
    }
    if wanted("service") {
        let r = match verb {
            "plan" => service::plan(desired).await,
            _ => service::cleanup(&desired.daemon).await,
        };
        out.push(("service", r.map_err(|e| e.to_string())));
    }
    if wanted("route") {
        let r = match verb {
            "plan" => route::plan(desired).await.map_err(|e| e.to_string()),
            _ => route::cleanup(&desired.daemon)
                .await
                .map_err(|e| e.to_string()),
        };
        out.push(("route", r));
    }
    out
}
