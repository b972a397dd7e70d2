//! The route controller: keeps the routes and routing rules of `[[route]]`/`[[route_rule]]`
//! in the kernel, and only those.
//!
//! Ownership: every route and rule edgenetd installs carries `daemon.route_protocol`; a sync
//! dumps only objects with that protocol (the kernel filters route dumps), plans against the
//! desired state ([`plan`]) and applies the writes, pipelined. Objects with any other protocol
//! are never written, whatever their prefix: an add uses `NLM_F_EXCL` (a foreign route with
//! the same key makes that one route fail), a delete names the protocol.
//!
//! Errors are joined: every write is tried and every failure is reported with its route.
//! Drift: a monitor task fires the loop's trigger when somebody else changes or deletes an
//! owned route or rule, and when links come and go (a route on a device that did not exist
//! yet gets installed when it appears); a sync that re-installs a route the previous sync had
//! verified counts it in `edgenetd_route_drift_repairs_total`.

pub mod desired;
pub mod hash;
pub mod plan;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use log::{debug, info, warn};
use metrics::{counter, describe_counter, describe_gauge, gauge};

use crate::config::{DaemonSettings, DesiredState};
use crate::controller::{Controller, Progress, SyncError, SyncReport, Trigger};
use crate::dataplane::route::{
    Links, RouteError, RouteKey, RouteMonitor, RouteSocket, RouteSpec, RouteWrite, RuleSpec,
    RuleWrite, WriteOutcome,
};
use hash::{FastMap, FastSet};
use plan::{Plan, RouteChange, RuleChange};

/// Drift repairs counter.
pub const DRIFT_REPAIRS: &str = "edgenetd_route_drift_repairs_total";
/// Desired routes gauge.
pub const ROUTES_DESIRED: &str = "edgenetd_routes_desired";
/// Installed (owned) routes gauge.
pub const ROUTES_INSTALLED: &str = "edgenetd_routes_installed";

/// Describes the route controller's metrics and creates them at 0 (call once at startup).
pub fn describe_metrics() {
    describe_counter!(
        DRIFT_REPAIRS,
        "Owned routes and rules found missing or changed (by someone else) and restored."
    );
    describe_gauge!(ROUTES_DESIRED, "Routes the configuration asks for.");
    describe_gauge!(
        ROUTES_INSTALLED,
        "Routes carrying edgenetd's route protocol in the kernel after the last sync."
    );
    counter!(DRIFT_REPAIRS).absolute(0);
    gauge!(ROUTES_DESIRED).set(0.0);
    gauge!(ROUTES_INSTALLED).set(0.0);
}

/// The route controller.
pub struct RouteController {
    trigger: Trigger,
    socket: Option<RouteSocket>,
    monitor: Option<(u8, smol::Task<()>)>,
    /// Set by the monitor on any event that may have changed owned state behind our back.
    dirty: Arc<AtomicBool>,
    last: Option<LastSync>,
}

/// What the previous sync left in the kernel, as far as this controller knows.
struct LastSync {
    protocol: u8,
    /// The desired routes of that sync (all installed unless in `failed_routes`).
    routes: Vec<RouteSpec>,
    /// The desired rules of that sync (all installed unless in `failed_rules`).
    rules: Vec<RuleSpec>,
    failed_routes: FastSet<RouteKey>,
    failed_rules: HashSet<RuleSpec>,
    links: Links,
    /// When the kernel was last dumped.
    dumped_at: Instant,
}

impl LastSync {
    /// True when the kernel is known to hold exactly `routes` and `rules`: nothing failed.
    fn exact(&self) -> bool {
        self.failed_routes.is_empty() && self.failed_rules.is_empty()
    }
}

impl RouteController {
    /// A controller whose kernel-event monitor wakes its loop through `trigger`. Sockets are
    /// opened on the first sync (on the executor's thread, in its network namespace).
    pub fn new(trigger: Trigger) -> RouteController {
        RouteController {
            trigger,
            socket: None,
            monitor: None,
            dirty: Arc::new(AtomicBool::new(true)),
            last: None,
        }
    }

    fn socket(&mut self) -> Result<RouteSocket, SyncError> {
        if self.socket.is_none() {
            self.socket =
                Some(RouteSocket::open().map_err(|e| SyncError::whole("route netlink", e))?);
        }
        Ok(self.socket.clone().expect("opened"))
    }

    /// (Re)starts the monitor when there is none or the owned protocol changed.
    fn ensure_monitor(&mut self, protocol: u8, own_port: u32) {
        if self
            .monitor
            .as_ref()
            .is_some_and(|(p, task)| *p == protocol && !task.is_finished())
        {
            return;
        }
        self.dirty.store(true, Ordering::SeqCst);
        match RouteMonitor::open(protocol, Some(own_port)) {
            Ok(mut monitor) => {
                let trigger = self.trigger.clone();
                let dirty = self.dirty.clone();
                let task = smol::spawn(async move {
                    while let Some(event) = monitor.next().await {
                        debug!("route: kernel event {event:?}: sync soon");
                        dirty.store(true, Ordering::SeqCst);
                        trigger.fire();
                    }
                    dirty.store(true, Ordering::SeqCst);
                    warn!(
                        "route: kernel event monitor ended; drift is repaired at the next period"
                    );
                });
                // Replacing the task drops (cancels) the old monitor.
                self.monitor = Some((protocol, task));
            }
            Err(e) => {
                self.monitor = None;
                warn!(
                    "route: cannot monitor kernel events ({e}); drift is repaired at the next period"
                )
            }
        }
    }
}

impl Controller for RouteController {
    fn name(&self) -> &'static str {
        "route"
    }

    /// One sync. The kernel is dumped unless nothing can have changed it since the previous
    /// sync: that sync succeeded completely, the monitor is running and reported no event
    /// (every change by someone else, every link change and every lost notification is an
    /// event), and the last dump is younger than the resync period. Then the previous desired
    /// state *is* the kernel's state, and a config change costs only its own writes. Every
    /// period (and after any event or failure) the kernel is dumped and compared in full.
    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let protocol = desired.daemon.route_protocol;
        let period = desired.controller("route").period;
        let socket = self.socket()?;
        self.ensure_monitor(protocol, socket.port());
        let (routes, rules) =
            desired::desired_specs(&desired.routing.routes, &desired.routing.rules, protocol);
        gauge!(ROUTES_DESIRED).set(routes.len() as f64);

        let dirty = self.dirty.swap(false, Ordering::SeqCst);
        let last = self.last.take().filter(|l| {
            if l.protocol != protocol {
                warn!(
                    "route: route_protocol changed from {} to {protocol}: routes and rules with protocol {} are no longer edgenetd's and stay; remove them with `edgenetd cleanup` under the old setting",
                    l.protocol, l.protocol
                );
            }
            l.protocol == protocol
        });
        let cached = last.as_ref().is_some_and(|l| {
            // A tenth of the period as margin, so the periodic wake-up always dumps.
            !dirty
                && self.monitor.is_some()
                && l.exact()
                && l.dumped_at.elapsed() + period / 10 < period
        });
        let observed = if cached {
            None
        } else {
            let dumped_at = Instant::now();
            match observe(&socket, protocol).await {
                Ok(state) => Some((state, dumped_at)),
                Err(e) => {
                    // Reopen the socket next time, in case the connection itself broke.
                    self.socket = None;
                    self.dirty.store(true, Ordering::SeqCst);
                    self.last = last;
                    return Err(e);
                }
            }
        };
        progress.beat();
        let (installed, installed_rules, links, dumped_at) = match (&observed, &last) {
            (Some((state, at)), _) => (&state.routes, &state.rules, &state.links, *at),
            (None, Some(l)) => (&l.routes, &l.rules, &l.links, l.dumped_at),
            (None, None) => unreachable!("cached implies a previous sync"),
        };
        let rules_error = observed.as_ref().and_then(|(s, _)| s.rules_error.clone());
        // Rules that cannot be read cannot be planned: leave them alone this time.
        let planned_rules: &[RuleSpec] = if rules_error.is_some() { &[] } else { &rules };
        let plan = Plan::new(&routes, installed, planned_rules, installed_rules);
        let mut applied = apply(&socket, &plan, links, progress).await;
        let failed_routes = applied.failed_routes();
        let mut failed_rules: HashSet<RuleSpec> = applied.failed_rules().cloned().collect();
        if let Some(e) = &rules_error {
            if rules.is_empty() {
                warn!(
                    "route: cannot read the kernel's routing rules ({e}); no rule is configured, so routes are synced without them"
                );
            }
            for rule in &rules {
                applied.errors.push(
                    format!("rule {rule}"),
                    format!("cannot read the kernel's routing rules: {e}"),
                );
                failed_rules.insert(rule.clone());
            }
        }
        let drift = match (&last, cached) {
            (Some(l), false) => drift_repairs(&plan, l, &failed_routes, &failed_rules),
            _ => 0,
        };

        let installed_now = installed.len() + applied.added - applied.deleted;
        gauge!(ROUTES_INSTALLED).set(installed_now as f64);
        if drift > 0 {
            counter!(DRIFT_REPAIRS).increment(drift as u64);
            info!("route: repaired {drift} route(s)/rule(s) changed or removed by someone else");
        }
        let report = SyncReport {
            changes: applied.written as u64,
            drift_repairs: drift as u64,
            summary: applied.summary(routes.len(), rules.len(), cached),
        };
        let errors = applied.errors;
        drop(plan);
        let links = match observed {
            Some((state, _)) => state.links,
            None => last.map(|l| l.links).unwrap_or_default(),
        };
        self.last = Some(LastSync {
            protocol,
            routes,
            rules,
            failed_routes,
            failed_rules,
            links,
            dumped_at,
        });
        errors.into_result(report)
    }
}

/// Successful route and rule writes that restored what the previous sync had installed:
/// drift repaired.
fn drift_repairs(
    plan: &Plan<'_>,
    last: &LastSync,
    failed_now: &FastSet<RouteKey>,
    failed_rules_now: &HashSet<RuleSpec>,
) -> usize {
    if plan.route_upserts.is_empty() && plan.rule_adds.is_empty() {
        return 0;
    }
    let installed_before: FastMap<RouteKey, &RouteSpec> = last
        .routes
        .iter()
        .map(|r| (r.key(), r))
        .filter(|(k, _)| !last.failed_routes.contains(k) && !failed_now.contains(k))
        .collect();
    let known_rules: HashSet<&RuleSpec> = last
        .rules
        .iter()
        .filter(|r| !last.failed_rules.contains(*r) && !failed_rules_now.contains(*r))
        .collect();
    plan.drift_repairs(|k| installed_before.get(k).copied())
        + plan
            .rule_adds
            .iter()
            .filter(|c| matches!(c, RuleChange::Add(r) if known_rules.contains(*r)))
            .count()
}

/// What one dump found.
struct Observed {
    links: crate::dataplane::route::Links,
    routes: Vec<RouteSpec>,
    rules: Vec<RuleSpec>,
    /// Why the rules could not be read (then `rules` is empty and no rule is written).
    rules_error: Option<RouteError>,
}

async fn observe(socket: &RouteSocket, protocol: u8) -> Result<Observed, SyncError> {
    let links = socket
        .links()
        .await
        .map_err(|e| SyncError::whole("route: link dump", e))?;
    let routes = socket
        .dump_routes(protocol, &links)
        .await
        .map_err(|e| SyncError::whole("route: route dump", e))?;
    let (rules, rules_error) = match socket.dump_rules(protocol).await {
        Ok(rules) => (rules, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    Ok(Observed {
        links,
        routes,
        rules,
        rules_error,
    })
}

/// What applying a plan did.
#[derive(Default)]
struct Applied<'a> {
    written: usize,
    added: usize,
    replaced: usize,
    deleted: usize,
    rules_added: usize,
    rules_deleted: usize,
    failed: Vec<Failed<'a>>,
    errors: SyncError,
}

enum Failed<'a> {
    Route(&'a RouteSpec),
    Rule(&'a RuleSpec),
}

impl<'a> Applied<'a> {
    fn failed_routes(&self) -> FastSet<RouteKey> {
        self.failed
            .iter()
            .filter_map(|f| match f {
                Failed::Route(r) => Some(r.key()),
                Failed::Rule(_) => None,
            })
            .collect()
    }

    fn failed_rules(&self) -> impl Iterator<Item = &'a RuleSpec> + '_ {
        self.failed.iter().filter_map(|f| match f {
            Failed::Rule(r) => Some(*r),
            Failed::Route(_) => None,
        })
    }

    fn summary(&self, desired_routes: usize, desired_rules: usize, cached: bool) -> String {
        let mut s = format!(
            "{desired_routes} routes and {desired_rules} rules desired{}; {} added, {} replaced, {} deleted; {} rules added, {} deleted",
            if cached {
                " (no kernel change seen since the last sync: not dumped)"
            } else {
                ""
            },
            self.added,
            self.replaced,
            self.deleted,
            self.rules_added,
            self.rules_deleted
        );
        if !self.failed.is_empty() {
            let _ = write!(s, "; {} failed", self.failed.len());
        }
        s
    }

    fn record_routes(&mut self, changes: &[RouteChange<'a>], outcome: WriteOutcome) {
        let mut failed = outcome.failures.iter().map(|f| f.index).peekable();
        for (i, change) in changes.iter().enumerate() {
            if failed.peek() == Some(&i) {
                failed.next();
                continue;
            }
            self.written += 1;
            match change {
                RouteChange::Add(_) => self.added += 1,
                RouteChange::Replace { .. } => self.replaced += 1,
                RouteChange::Delete(_) => self.deleted += 1,
            }
        }
        for f in outcome.failures {
            let change = &changes[f.index];
            let verb = match change {
                RouteChange::Add(_) => "add",
                RouteChange::Replace { .. } => "replace",
                RouteChange::Delete(_) => "delete",
            };
            self.errors
                .push(format!("{verb} route {}", change.route()), f.error);
            self.failed.push(Failed::Route(change.route()));
        }
    }

    fn record_rules(&mut self, changes: &[RuleChange<'a>], outcome: WriteOutcome) {
        let ok = changes.len() - outcome.failures.len();
        self.written += ok;
        match changes.first() {
            Some(RuleChange::Add(_)) => self.rules_added += ok,
            Some(RuleChange::Delete(_)) => self.rules_deleted += ok,
            None => {}
        }
        for f in outcome.failures {
            let (verb, rule) = match changes[f.index] {
                RuleChange::Add(r) => ("add", r),
                RuleChange::Delete(r) => ("delete", r),
            };
            self.errors.push(format!("{verb} rule {rule}"), f.error);
            self.failed.push(Failed::Rule(rule));
        }
    }
}

/// Applies a plan in its order: route adds/replaces, rule adds, rule deletes, route deletes.
async fn apply<'a>(
    socket: &RouteSocket,
    plan: &Plan<'a>,
    links: &crate::dataplane::route::Links,
    progress: &dyn Progress,
) -> Applied<'a> {
    let mut applied = Applied::default();
    let mut last_beat = 0;
    let mut beat = |answered: usize| {
        if answered >= last_beat + 1000 {
            last_beat = answered;
            progress.beat();
        }
    };
    if !plan.route_upserts.is_empty() {
        let writes: Vec<RouteWrite<'_>> = plan.route_upserts.iter().map(|c| c.write()).collect();
        let outcome = socket.write_routes(&writes, links, &mut beat).await;
        applied.record_routes(&plan.route_upserts, outcome);
    }
    for changes in [&plan.rule_adds, &plan.rule_deletes] {
        if !changes.is_empty() {
            let writes: Vec<RuleWrite<'_>> = changes.iter().map(|c| c.write()).collect();
            let outcome = socket.write_rules(&writes).await;
            applied.record_rules(changes, outcome);
        }
    }
    if !plan.route_deletes.is_empty() {
        let writes: Vec<RouteWrite<'_>> = plan.route_deletes.iter().map(|c| c.write()).collect();
        let outcome = socket.write_routes(&writes, links, &mut |_| {}).await;
        applied.record_routes(&plan.route_deletes, outcome);
    }
    applied
}

/// `edgenetd plan`: the route and rule writes a sync would make now, one per line in apply
/// order, without making them.
pub async fn plan(desired: &DesiredState) -> Result<String, RouteError> {
    let protocol = desired.daemon.route_protocol;
    if !desired.controller("route").enabled {
        return Ok("route: controller disabled (it owns nothing and changes nothing)\n".into());
    }
    let socket = RouteSocket::open()?;
    let links = socket.links().await?;
    let installed = socket.dump_routes(protocol, &links).await?;
    let (routes, rules) =
        desired::desired_specs(&desired.routing.routes, &desired.routing.rules, protocol);
    let mut out = String::new();
    let installed_rules = match socket.dump_rules(protocol).await {
        Ok(r) => r,
        // Without rules to configure, a kernel that cannot list rules has none of ours.
        Err(e) if rules.is_empty() => {
            let _ = writeln!(
                out,
                "route: cannot read routing rules ({e}); none configured"
            );
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let plan = Plan::new(&routes, &installed, &rules, &installed_rules);
    for line in plan.lines() {
        out.push_str(&line);
        out.push('\n');
    }
    if plan.is_empty() {
        let _ = writeln!(
            out,
            "route: in sync ({} routes, {} rules with protocol {protocol})",
            routes.len(),
            rules.len()
        );
    }
    Ok(out)
}

/// `edgenetd cleanup`: deletes every route and rule carrying the route protocol, and nothing
/// else; one line per deletion. Every deletion is tried; failures are joined into the error.
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, SyncError> {
    let protocol = settings.route_protocol;
    let socket = RouteSocket::open().map_err(|e| SyncError::whole("route netlink", e))?;
    let state = observe(&socket, protocol).await?;
    let mut plan = Plan::new(&[], &state.routes, &[], &state.rules);
    // Cleanup removes rules first, so no rule is left pointing at an emptied table.
    plan.route_upserts.clear();
    let mut applied = apply(&socket, &plan, &state.links, &crate::controller::NoProgress).await;
    if let Some(e) = &state.rules_error {
        applied.errors.push(
            "route: routing rules",
            format!("cannot read the kernel's rules, none removed: {e}"),
        );
    }
    let failed: HashSet<String> = applied
        .errors
        .failures
        .iter()
        .map(|f| f.object.clone())
        .collect();
    let mut out = String::new();
    for line in plan.lines() {
        let object = line.clone();
        if !failed.contains(&object) {
            let _ = writeln!(out, "{}", line.replacen("delete", "deleted", 1));
        }
    }
    let _ = writeln!(
        out,
        "route: removed {} routes and {} rules with protocol {protocol}",
        applied.deleted, applied.rules_deleted
    );
    let summary = out.clone();
    applied.errors.into_result(SyncReport {
        summary,
        ..Default::default()
    })?;
    Ok(out)
}
