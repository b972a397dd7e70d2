//! Observe: reading the kernel (links, owned routes and rules), the kernel-event monitor that
//! invalidates the cache, and the snapshot the cache keeps between syncs.

use std::collections::HashSet;

use log::{debug, warn};

use crate::config::route::Routes;
use crate::controller::cache::Invalidation;
use crate::dataplane::route::{
    Links, RouteError, RouteKey, RouteMonitor, RouteSocket, RouteSpec, RuleSpec,
};
use crate::sync::SyncError;
use crate::sync::Trigger;

use super::hash::{FastMap, FastSet};
use super::model::route_spec;
use super::plan::KeyPrints;

/// What one dump found.
pub struct Observed {
    /// Every link, by name and index.
    pub links: Links,
    /// Owned routes.
    pub routes: Vec<RouteSpec>,
    /// Owned rules.
    pub rules: Vec<RuleSpec>,
    /// Why the rules could not be read (then `rules` is empty and no rule is written).
    pub rules_error: Option<RouteError>,
}

/// Dumps links, then the routes and rules carrying `protocol`.
pub async fn observe(socket: &RouteSocket, protocol: u8) -> Result<Observed, SyncError> {
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

/// What the previous sync left in the kernel, as far as this controller knows (the route
/// controller's [`KernelCache`](crate::controller::cache::KernelCache) snapshot).
pub struct Snapshot {
    /// The route protocol of that sync.
    pub protocol: u8,
    /// The configured routes of that sync, as configured (all installed unless in
    /// `failed_routes`; shared with that sync's config, not a copy); compared by position
    /// with the next sync's.
    pub routes: Routes,
    /// The hashed kernel key of each of `routes`, once a sync needed them (a change that
    /// moved a key), kept up to date from then on.
    pub key_prints: Option<KeyPrints>,
    /// True when every key of `routes` is unique (needed to plan only what changed).
    pub unique: bool,
    /// The desired rules of that sync (all installed unless in `failed_rules`).
    pub rules: Vec<RuleSpec>,
    /// Routes whose write failed.
    pub failed_routes: FastSet<RouteKey>,
    /// Rules whose write failed.
    pub failed_rules: HashSet<RuleSpec>,
    /// Links as of the last dump (a link change is an event, so they stay right while trusted).
    pub links: Links,
    /// Owned routes in the kernel after that sync.
    pub installed: usize,
}

impl Snapshot {
    /// True when nothing failed: the kernel holds exactly the snapshot.
    pub fn exact(&self) -> bool {
        self.failed_routes.is_empty() && self.failed_rules.is_empty()
    }

    /// What this snapshot had installed for each key (the routes that did not fail).
    pub fn installed_specs(&self) -> FastMap<RouteKey, RouteSpec> {
        self.routes
            .iter()
            .map(|r| route_spec(r, self.protocol))
            .map(|r| (r.key(), r))
            .filter(|(k, _)| !self.failed_routes.contains(k))
            .collect()
    }

    /// Takes `now` as the configured routes (shared with the config, not copied), given the
    /// positions that changed since `routes` (ascending; the kept key prints follow them).
    pub fn update_routes(&mut self, now: &Routes, positions: &[usize]) {
        if let Some(prints) = &mut self.key_prints {
            prints.update(now, positions);
        }
        self.routes = now.clone();
    }
}

/// The kernel-event monitor: a task that invalidates the cache and wakes the loop when
/// somebody else changes an owned route or rule, and when links come and go.
#[derive(Default)]
pub struct Events {
    /// The protocol watched and the task; `None` until started (or when it could not be).
    task: Option<(u8, smol::Task<()>)>,
}

impl Events {
    /// True while the monitor task runs (every event is then seen).
    pub fn running(&self) -> bool {
        self.task.as_ref().is_some_and(|(_, t)| !t.is_finished())
    }

    /// (Re)starts the monitor when there is none or the owned protocol changed; a (re)start
    /// invalidates the cache (events before it were not seen).
    pub fn ensure(
        &mut self,
        protocol: u8,
        own_port: u32,
        trigger: &Trigger,
        invalidation: &Invalidation,
    ) {
        if self.running() && self.task.as_ref().is_some_and(|(p, _)| *p == protocol) {
            return;
        }
        invalidation.invalidate();
        match RouteMonitor::open(protocol, Some(own_port)) {
            Ok(mut monitor) => {
                let trigger = trigger.clone();
                let invalidation = invalidation.clone();
                let task = smol::spawn(async move {
                    while let Some(event) = monitor.next().await {
                        debug!("route: kernel event {event:?}: sync soon");
                        invalidation.invalidate();
                        trigger.fire();
                    }
                    invalidation.invalidate();
                    warn!(
                        "route: kernel event monitor ended; drift is repaired at the next period"
                    );
                });
                // Replacing the task drops (cancels) the old monitor.
                self.task = Some((protocol, task));
            }
            Err(e) => {
                self.task = None;
                warn!(
                    "route: cannot monitor kernel events ({e}); drift is repaired at the next period"
                )
            }
        }
    }
}
