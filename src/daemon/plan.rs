//! What a sync of every enabled built-in controller would change: `edgenetd plan`, and the
//! diff `edgenetd apply` shows before it applies.

use super::registry::BUILTIN;
use crate::config::DesiredState;

/// The plans of every enabled controller.
#[derive(Debug, Default)]
pub struct Plan {
    /// Each controller's plan, in table order.
    pub text: String,
    /// `controller: why` for each plan that failed.
    pub failures: Vec<String>,
}

/// Plans every enabled built-in controller against the kernel, changing nothing.
pub async fn plan_all(desired: &DesiredState) -> Plan {
    let mut plan = Plan::default();
    for controller in &BUILTIN {
        if !desired.controller(controller.name).enabled {
            continue;
        }
        match (controller.plan)(desired).await {
            Ok(text) => plan.text.push_str(&text),
            Err(e) => plan
                .failures
                .push(format!("{}: plan failed: {e}", controller.name)),
        }
    }
    plan
}
