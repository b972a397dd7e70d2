//! The policy controller: the router's firewall (`[policy]`) as one nftables table,
//! `inet <prefix>-policy`, which only this controller writes.
//!
//! A sync is plan ([`program::build`], pure) then apply ([`apply::sync`], the kernel):
//! a full write replaces the table atomically (so a reload never leaves a moment without
//! rules and established connections survive it), a change of named-set elements only is
//! written as an element delta, a sync with nothing to do writes nothing, and drift (someone
//! edited or deleted the table) is repaired and counted in
//! `edgenetd_policy_drift_repairs_total`. Rule groups the kernel refuses are left out, fail
//! closed, and reported as the sync's failures while every other group stays programmed.
//!
//! Without a `[policy]` section there is no table at all (an existing one is deleted).

pub mod apply;
pub mod diff;
mod matches;
pub mod program;

use std::sync::Arc;

use crate::config::policy::PolicyConfig;
use crate::config::{DaemonSettings, DesiredState};
use crate::controller::{Controller, Progress, SyncError, SyncReport, Trigger};
use crate::dataplane::nft::ir::Family;
use crate::dataplane::nft::{Nft, NftError, TableRef, monitor, render};

/// How often the foreign-commit watch reads the ruleset generation.
pub const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Counter of drift repairs.
pub const DRIFT_METRIC: &str = "edgenetd_policy_drift_repairs_total";
/// Gauge of kernel rules in the policy table.
pub const RULES_METRIC: &str = "edgenetd_policy_rules";

/// Describes the policy metrics and sets them to their initial values.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DRIFT_METRIC,
        "Times the policy table was found changed or missing and was restored."
    );
    metrics::describe_gauge!(
        RULES_METRIC,
        "Kernel rules in the policy table after the last successful write."
    );
    metrics::counter!(DRIFT_METRIC).absolute(0);
    metrics::gauge!(RULES_METRIC).set(0.0);
}

struct State {
    nft: Nft,
    applied: Option<apply::Applied>,
}

/// The last config planned and its program: an unchanged config is not planned again.
type Planned = (Option<PolicyConfig>, String, Option<Arc<program::Program>>);

/// The policy controller.
pub struct PolicyController {
    state: Option<State>,
    planned: Option<Planned>,
    _trigger: Trigger,
}

impl PolicyController {
    /// A controller; `trigger` wakes its loop early. Call it on the thread (network
    /// namespace) the controller programs: it starts a watch that fires `trigger` within
    /// [`WATCH_INTERVAL`] whenever another process commits to nftables, so drift is repaired
    /// at once rather than at the next period.
    pub fn new(trigger: Trigger) -> PolicyController {
        let fire = trigger.clone();
        if let Err(e) = monitor::spawn_foreign_commit_watch(WATCH_INTERVAL, move || fire.fire()) {
            log::warn!("policy: no nftables commit events ({e}); drift is found at each period");
        }
        PolicyController {
            state: None,
            planned: None,
            _trigger: trigger,
        }
    }
}

fn table_ref(settings: &DaemonSettings) -> TableRef {
    TableRef::new(Family::Inet, settings.policy_table())
}

impl Controller for PolicyController {
    fn name(&self) -> &'static str {
        "policy"
    }

    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let table = table_ref(&desired.daemon);
        let program = match &self.planned {
            Some((cfg, name, p)) if *cfg == desired.policy && *name == table.name => p.clone(),
            // Only set elements changed: patch those sets instead of planning everything.
            Some((Some(cfg), name, Some(p)))
                if *name == table.name
                    && desired
                        .policy
                        .as_ref()
                        .is_some_and(|new| program::only_set_elements_differ(cfg, new)) =>
            {
                let new = desired.policy.as_ref().expect("checked");
                let p = Arc::new(program::with_set_elements(p, cfg, new));
                self.planned = Some((desired.policy.clone(), table.name.clone(), Some(p.clone())));
                Some(p)
            }
            _ => {
                let p = desired
                    .policy
                    .as_ref()
                    .map(|cfg| Arc::new(program::build(cfg, &table.name)));
                self.planned = Some((desired.policy.clone(), table.name.clone(), p.clone()));
                p
            }
        };
        progress.beat();
        let mut state = match self.state.take() {
            Some(s) => s,
            // Opened here, on the daemon's thread, so it lives in the daemon's namespace.
            None => State {
                nft: Nft::open().map_err(|e| SyncError::whole("nftables", e))?,
                applied: None,
            },
        };
        let rules = program.as_ref().map_or(0, |p| p.rule_count());
        let (state, result) = smol::unblock(move || {
            let r = apply::sync(&mut state.nft, &mut state.applied, &table, program);
            (state, r)
        })
        .await;
        self.state = Some(state);
        let report = match &result {
            Ok(r) => r,
            Err(e) => &e.report,
        };
        if report.drift_repairs > 0 {
            metrics::counter!(DRIFT_METRIC).increment(report.drift_repairs);
        }
        if result.is_ok() {
            metrics::gauge!(RULES_METRIC).set(rules as f64);
        }
        result
    }
}

/// Errors of `plan` and `cleanup`.
#[derive(Debug, thiserror::Error)]
pub enum PolicyCliError {
    /// Talking to nftables failed.
    #[error(transparent)]
    Nft(#[from] NftError),
}

/// `edgenetd plan`: the ruleset the policy would load, in nft syntax (loadable with
/// `nft -c -f`), followed by what differs from the running kernel as `#` comment lines.
/// Empty when there is no `[policy]` and no table. Writes nothing.
pub async fn plan(desired: &DesiredState) -> Result<String, PolicyCliError> {
    let table = table_ref(&desired.daemon);
    let program = desired
        .policy
        .as_ref()
        .map(|cfg| program::build(cfg, &table.name));
    let mut nft = Nft::open()?;
    if program.is_none() {
        // No [policy] and no table: nothing to say (other areas' plans stay uncluttered).
        let t = table.clone();
        if !smol::unblock(move || nft.table_exists(&t)).await? {
            return Ok(String::new());
        }
        nft = Nft::open()?;
    }
    let (text, diff) = smol::unblock(move || -> Result<(String, String), NftError> {
        let diff = diff::diff(&mut nft, &table, program.as_ref())?;
        let text = match &program {
            Some(p) => render::render_replace(&p.table),
            None => format!(
                "# no [policy] section: no firewall table (inet {} is removed if present)\n",
                table.name
            ),
        };
        Ok((text, diff))
    })
    .await?;
    Ok(format!("# policy\n{text}{diff}"))
}

/// `edgenetd cleanup`: deletes the policy table (and nothing else).
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, PolicyCliError> {
    let table = table_ref(settings);
    let mut nft = Nft::open()?;
    let n = smol::unblock(move || apply::delete_table(&mut nft, &table)).await?;
    Ok(if n > 0 {
        format!("policy: deleted table inet {}\n", settings.policy_table())
    } else {
        format!("policy: no table inet {}\n", settings.policy_table())
    })
}
