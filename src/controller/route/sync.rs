//! The route controller's sync: the controller, its constructor, and one sync in named steps:
//! planned against the cache's snapshot when it is trusted (no dump), else against a dump of
//! the kernel, which also counts the drift repaired; then the failed uplinks' flows flushed.

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use log::{info, warn};

use crate::config::DesiredState;
use crate::config::route::{RouteRule, Routes, RoutingConfig};
use crate::controller::Controller;
use crate::controller::cache::{Decision, KernelCache};
use crate::dataplane::route::{RouteKey, RouteSocket, RuleSpec};
use crate::sync::{Progress, SyncError, SyncReport, Trigger};
use crate::track::Board;

use super::apply::{Applied, apply};
use super::hash::FastSet;
use super::metrics::{DRIFT_REPAIRS, ROUTES_DESIRED, ROUTES_INSTALLED};
use super::observe::{Events, Observed, Snapshot, observe};
use super::plan::{self, Plan, RuleChange};
use super::{model, tracks};

/// The route controller.
pub struct RouteController {
    /// Wakes the loop early (kernel events).
    trigger: Trigger,
    /// The netlink socket, opened at the first sync (reopened after a failed dump).
    socket: Option<RouteSocket>,
    /// The kernel-event monitor (the cache's event source).
    events: Events,
    /// What the last sync left installed, and whether to trust it.
    cache: KernelCache<Snapshot>,
    /// The tracks' up/down state (the probers write it).
    board: Board,
    /// Down tracks whose masqueraded flows were flushed (once per failure).
    flushed: BTreeSet<String>,
}

impl RouteController {
    /// A controller whose kernel-event monitor wakes its loop through `trigger`. Sockets are
    /// opened on the first sync (on the executor's thread, in its network namespace).
    pub fn new(trigger: Trigger) -> RouteController {
        RouteController::with_board(trigger, Board::default())
    }

    /// [`RouteController::new`] reading the tracks' state from `board` (routes of a down
    /// track are withdrawn).
    pub fn with_board(trigger: Trigger, board: Board) -> RouteController {
        RouteController {
            trigger,
            socket: None,
            events: Events::default(),
            cache: KernelCache::new(),
            board,
            flushed: BTreeSet::new(),
        }
    }

    /// Flushes the masqueraded conntrack entries of each newly down track's uplink, so its
    /// clients reconnect through the route in force now (established flows through the
    /// failed uplink would only time out). Runs after the withdrawal was applied.
    fn flush_failed_uplinks(&mut self, routing: &RoutingConfig, down: &BTreeSet<String>) {
        self.flushed.retain(|t| down.contains(t));
        for track in routing.tracks.iter().filter(|t| down.contains(&t.name)) {
            if !self.flushed.insert(track.name.clone()) {
                continue;
            }
            let addrs = crate::probe::addresses_of(&track.dev).unwrap_or_default();
            for addr in addrs {
                match crate::dataplane::conntrack::delete_masqueraded_flows(addr) {
                    Ok(0) => {}
                    Ok(n) => info!(
                        "track {}: flushed {n} masqueraded flow(s) of {addr} ({})",
                        track.name, track.dev
                    ),
                    Err(e) => warn!(
                        "track {}: cannot flush the masqueraded flows of {addr}: {e}",
                        track.name
                    ),
                }
            }
        }
    }

    fn socket(&mut self) -> Result<RouteSocket, SyncError> {
        if self.socket.is_none() {
            self.socket =
                Some(RouteSocket::open().map_err(|e| SyncError::whole("route netlink", e))?);
        }
        Ok(self.socket.clone().expect("opened"))
    }

    /// Forgets the snapshot of a sync under another route protocol (its objects are no
    /// longer edgenetd's).
    fn forget_other_protocol(&mut self, protocol: u8) {
        let Some(old) = self.cache.snapshot().map(|s| s.protocol) else {
            return;
        };
        if old != protocol {
            warn!(
                "route: route_protocol changed from {old} to {protocol}: routes and rules with protocol {old} are no longer edgenetd's and stay; remove them with `edgenetd cleanup` under the old setting"
            );
            self.cache.forget();
        }
    }

    /// A sync with a trusted cache: plans what changed since the previous sync against the
    /// snapshot (no dump), so its cost grows with the change, not with the routes installed.
    async fn sync_trusted(
        &mut self,
        configured: &Routes,
        configured_rules: &[RouteRule],
        socket: &RouteSocket,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let snap = self
            .cache
            .snapshot_mut()
            .expect("trusted implies a snapshot");
        let rules = model::rule_specs_of(configured_rules, snap.protocol);
        let changed = plan::changed_routes(
            &snap.routes,
            &mut snap.key_prints,
            configured,
            snap.protocol,
        );
        let (after, before, positions) = match changed {
            Some(c) => (c.after, c.before, Some(c.positions)),
            None => (
                model::route_specs(configured, snap.protocol),
                model::route_specs(&snap.routes, snap.protocol),
                None,
            ),
        };
        let plan = Plan::new(&after, &before, &rules, &snap.rules);
        let applied = apply(socket, &plan, &snap.links, progress).await;
        let outcome = Outcome::of(applied, snap.installed);
        let unique = plan.duplicate_routes == 0;
        let report = outcome.report(configured.len(), rules.len(), 0, true);
        match positions {
            Some(p) => snap.update_routes(configured, &p),
            None => {
                snap.routes = configured.clone();
                snap.key_prints = None;
            }
        }
        snap.unique = unique;
        snap.rules = rules;
        snap.failed_routes = outcome.failed_routes;
        snap.failed_rules = outcome.failed_rules;
        snap.installed = outcome.installed;
        let complete = snap.exact() && snap.unique;
        self.cache.set_complete(complete);
        metrics::gauge!(ROUTES_INSTALLED).set(outcome.installed as f64);
        outcome.errors.into_result(report)
    }

    /// A sync that dumps the kernel and compares everything (and counts drift repaired).
    async fn sync_verified(
        &mut self,
        desired: &DesiredState,
        configured: (&Routes, &[RouteRule]),
        socket: &RouteSocket,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let protocol = desired.daemon.route_protocol;
        let dumped_at = Instant::now();
        let observed = match observe(socket, protocol).await {
            Ok(observed) => observed,
            Err(e) => {
                // Reopen the socket next time, in case the connection itself broke.
                self.socket = None;
                self.cache.invalidate();
                return Err(e);
            }
        };
        progress.beat();
        let routes = model::route_specs(configured.0, protocol);
        let rules = model::rule_specs_of(configured.1, protocol);
        // Rules that cannot be read cannot be planned: leave them alone this time.
        let planned_rules: &[RuleSpec] = match observed.rules_error {
            Some(_) => &[],
            None => &rules,
        };
        let plan = Plan::new(&routes, &observed.routes, planned_rules, &observed.rules);
        let applied = apply(socket, &plan, &observed.links, progress).await;
        let mut outcome = Outcome::of(applied, observed.routes.len());
        outcome.unreadable_rules(&rules, &observed);
        let drift = match self.cache.snapshot() {
            Some(previous) => drift_repairs(&plan, previous, &outcome),
            None => 0,
        };
        if drift > 0 {
            metrics::counter!(DRIFT_REPAIRS).increment(drift as u64);
            info!("route: repaired {drift} route(s)/rule(s) changed or removed by someone else");
        }
        let report = outcome.report(routes.len(), rules.len(), drift, false);
        let unique = plan.duplicate_routes == 0;
        metrics::gauge!(ROUTES_INSTALLED).set(outcome.installed as f64);
        // The specs and the dump go as soon as they are used: at 100k routes each is ~12 MB,
        // and the daemon's peak RSS is what a router must have. The snapshot shares the
        // config's routes (no copy).
        drop(plan);
        drop(routes);
        let Observed {
            links,
            routes: dumped,
            ..
        } = observed;
        drop(dumped);
        let snapshot = Snapshot {
            protocol,
            routes: configured.0.clone(),
            key_prints: None,
            unique,
            rules,
            failed_routes: outcome.failed_routes,
            failed_rules: outcome.failed_rules,
            links,
            installed: outcome.installed,
        };
        let complete = snapshot.exact() && snapshot.unique;
        self.cache.store_verified(snapshot, complete, dumped_at);
        outcome.errors.into_result(report)
    }
}

impl Controller for RouteController {
    fn name(&self) -> &'static str {
        "route"
    }

    /// One sync. The kernel is dumped unless the cache is trusted (see
    /// [`crate::controller::cache`]): the previous sync succeeded completely, the monitor is
    /// running and reported no event (every change by someone else, every link change and
    /// every lost notification is an event), and the last dump is younger than the resync
    /// period. Then the previous desired state *is* the kernel's state, and a config change
    /// costs only its own writes. Every period (and after any event or failure) the kernel is
    /// dumped and compared in full.
    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let protocol = desired.daemon.route_protocol;
        let period = desired.controller("route").period;
        let socket = self.socket()?;
        let invalidation = self.cache.invalidation();
        self.events
            .ensure(protocol, socket.port(), &self.trigger, &invalidation);
        self.forget_other_protocol(protocol);
        metrics::gauge!(ROUTES_DESIRED).set(desired.routing.routes.len() as f64);
        let down = self.board.down();
        let effective = tracks::effective(&desired.routing, &down);
        let configured = (&*effective.routes, &effective.rules[..]);
        let result = match self
            .cache
            .decide(Instant::now(), period, self.events.running())
        {
            Decision::Trusted => {
                self.sync_trusted(configured.0, configured.1, &socket, progress)
                    .await
            }
            Decision::Verify => {
                self.sync_verified(desired, configured, &socket, progress)
                    .await
            }
        };
        if !down.is_empty() || !self.flushed.is_empty() {
            self.flush_failed_uplinks(&desired.routing, &down);
        }
        result
    }
}

/// What applying a plan left, owned (so the snapshot can be updated after the plan is gone).
struct Outcome {
    /// Keys of the routes whose write failed.
    failed_routes: FastSet<RouteKey>,
    /// Rules whose write failed (or that could not be read).
    failed_rules: HashSet<RuleSpec>,
    /// Owned routes in the kernel now.
    installed: usize,
    /// Kernel writes that succeeded.
    written: usize,
    /// The counts for the log line, e.g. "3 added".
    counts: String,
    /// The failures, joined.
    errors: SyncError,
}

impl Outcome {
    fn of(applied: Applied<'_>, installed_before: usize) -> Outcome {
        Outcome {
            failed_routes: applied.failed_routes(),
            failed_rules: applied.failed_rules().cloned().collect(),
            installed: (installed_before + applied.added).saturating_sub(applied.deleted),
            written: applied.written,
            counts: applied.counts(),
            errors: applied.errors,
        }
    }

    /// Rules the dump could not read: each desired rule is a failure of this sync.
    fn unreadable_rules(&mut self, rules: &[RuleSpec], observed: &Observed) {
        let Some(e) = &observed.rules_error else {
            return;
        };
        if rules.is_empty() {
            warn!(
                "route: cannot read the kernel's routing rules ({e}); no rule is configured, so routes are synced without them"
            );
        }
        for rule in rules {
            self.errors.push(
                format!("rule {rule}"),
                format!("cannot read the kernel's routing rules: {e}"),
            );
            self.failed_rules.insert(rule.clone());
        }
    }

    fn report(&self, routes: usize, rules: usize, drift: usize, cached: bool) -> SyncReport {
        SyncReport {
            changes: self.written as u64,
            drift_repairs: drift as u64,
            summary: format!(
                "{routes} routes and {rules} rules desired{}; {}",
                if cached {
                    " (no kernel change seen since the last sync: not dumped)"
                } else {
                    ""
                },
                self.counts
            ),
        }
    }
}

/// Successful route and rule writes that restored what the previous sync had installed:
/// drift repaired.
fn drift_repairs(plan: &Plan<'_>, previous: &Snapshot, now: &Outcome) -> usize {
    if plan.route_upserts.is_empty() && plan.rule_adds.is_empty() {
        return 0;
    }
    let installed_before = previous.installed_specs();
    let known_rules: HashSet<&RuleSpec> = previous
        .rules
        .iter()
        .filter(|r| !previous.failed_rules.contains(*r) && !now.failed_rules.contains(*r))
        .collect();
    plan.drift_repairs(|k| {
        installed_before
            .get(k)
            .filter(|_| !now.failed_routes.contains(k))
    }) + plan
        .rule_adds
        .iter()
        .filter(|c| matches!(c, RuleChange::Add(r) if known_rules.contains(*r)))
        .count()
}
