//! Router config from the cluster (`[kubernetes] config_map`, feature `kubernetes`): which
//! version of the ConfigMap's fragments is in force, which waits for its confirm, which was
//! refused or rolled back and why; and the two tasks that follow the ConfigMap and confirm a
//! change once the router reached the API server again.
//!
//! A new version is loaded by the reloader like any reload (the local files and the
//! fragments, every problem listed, nothing half-applied). Taken, it is a pending confirm of
//! the `edgenetd apply --confirm` machinery with `config_confirm` as its deadline
//! ([`super::confirm`]); the router confirms it itself when, after every controller has
//! synced it, a request opened from then on was answered by the API server ([`Reached`](crate::kubernetes::reached::Reached): the
//! ConfigMap's own watch is opened again for it, and whatever else talks to the API server
//! counts too). Unconfirmed at the deadline, the confirmed fragments come back and the
//! version is remembered as rejected: it is not tried again until the ConfigMap changes.
//! A refused version (problems) is remembered the same way, and the last good config stays.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use log::{error, info, warn};
use serde_json::json;

use super::cluster_kept::Keeper;
use crate::clock::rfc3339;
use crate::config::ConfigError;
use crate::config::fragments::Fragment;
use crate::config::kubernetes::ConfigMapRef;
use crate::kubernetes::client::Store;
use crate::kubernetes::config_map::{self, Offer};
use crate::kubernetes::lease::annotations::ConfigMapStatus;
use crate::kubernetes::objects::ConfigMap;
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::{Trigger, TriggerRx};

/// Problems of the ConfigMap version last refused (0 once a version is in force again).
pub const PROBLEMS_METRIC: &str = "edgenetd_kubernetes_config_map_problems";
/// Versions of the ConfigMap rolled back for not confirming in time.
pub const ROLLBACKS_METRIC: &str = "edgenetd_kubernetes_config_map_rollbacks_total";

/// Describes the metrics.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        PROBLEMS_METRIC,
        "Problems of the [kubernetes] config_map version last refused (0 while the version offered is in force)."
    );
    metrics::describe_counter!(
        ROLLBACKS_METRIC,
        "Versions of the [kubernetes] config_map rolled back because the router did not reach the API server again within config_confirm."
    );
    metrics::gauge!(PROBLEMS_METRIC).set(0.0);
    metrics::counter!(ROLLBACKS_METRIC).absolute(0);
    metrics::counter!(crate::kubernetes::compose::CONFLICTS_METRIC, "kind" => "config").absolute(0);
}

/// A version that is not in force, and why.
#[derive(Debug, Clone)]
struct Rejection {
    /// Its resourceVersion.
    version: String,
    /// `refused` (problems) or `rolled back`.
    what: &'static str,
    /// Why.
    reason: String,
    /// Every problem, one line each (file:line:col: message), when refused.
    problems: Vec<String>,
    /// When.
    at: SystemTime,
}

/// The state behind the lock.
#[derive(Default)]
struct State {
    /// The ConfigMap as last listed or watched, as this node takes it (`None` until listed).
    offered: Option<Offer>,
    /// The fragments of the config in force.
    in_force: Offer,
    /// The fragments last confirmed: what a rollback returns to.
    confirmed: Offer,
    /// The version last refused or rolled back.
    rejected: Option<Rejection>,
    /// The version waiting for its confirm.
    pending: Option<String>,
    /// The keys the fragments in force set where a local file set them (the local value
    /// stays).
    shadowed: Vec<String>,
    /// The fragments in force were kept from before the start (until the ConfigMap is
    /// listed, the Lease says so rather than "listing" alone).
    restored: bool,
}

/// The fragments of one load: which, and whether they are a new version.
#[derive(Debug, Clone)]
pub struct Choice {
    /// The fragments to load after the local files.
    pub fragments: Vec<Fragment>,
    /// The new version they are, when they are not the ones in force.
    pub new: Option<Offer>,
}

/// Router config from the cluster: shared by the reloader, the confirmer, the tasks below
/// and /healthz.
pub struct ClusterConfig {
    /// The ConfigMap.
    pub source: ConfigMapRef,
    /// `config_confirm`.
    pub confirm_within: Duration,
    /// This node's name (which keys it takes).
    pub node: String,
    state: Mutex<State>,
    /// Keeps each confirmed version in the state directory (`None`: nowhere, in tests).
    keeper: Option<Arc<Keeper>>,
}

impl ClusterConfig {
    /// Nothing listed yet, nothing in force.
    pub fn new(source: ConfigMapRef, confirm_within: Duration, node: String) -> ClusterConfig {
        ClusterConfig {
            source,
            confirm_within,
            node,
            state: Mutex::default(),
            keeper: None,
        }
    }

    /// Keeps each version confirmed from now on with `keeper`; `restored`, a version it
    /// kept that the start loaded, is in force and confirmed (a rollback returns to it)
    /// until the ConfigMap is listed; `shadowed` are the keys the local files kept of it.
    pub fn keeping(
        mut self,
        keeper: Arc<Keeper>,
        restored: Option<Offer>,
        shadowed: Vec<String>,
    ) -> ClusterConfig {
        self.keeper = Some(keeper);
        if let Some(offer) = restored {
            let s = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
            s.in_force = offer.clone();
            s.confirmed = offer;
            s.shadowed = shadowed;
            s.restored = true;
        }
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ConfigMap as listed or watched now; true when a load should try it.
    pub fn offer(&self, offer: Offer) -> bool {
        let mut s = self.lock();
        s.offered = Some(offer);
        new_offer(&s).is_some()
    }

    /// What the next load takes: a new version when there is one not yet tried, else the
    /// fragments in force.
    pub fn choose(&self) -> Choice {
        let s = self.lock();
        match new_offer(&s) {
            Some(offer) => Choice {
                fragments: offer.fragments.clone(),
                new: Some(offer.clone()),
            },
            None => Choice {
                fragments: s.in_force.fragments.clone(),
                new: None,
            },
        }
    }

    /// A load with `choice` came into force; `shadowed` are the keys the local files kept.
    /// Returns the version that now waits for its confirm, if the fragments changed.
    pub fn took(&self, choice: Choice, shadowed: Vec<String>) -> Option<String> {
        let mut s = self.lock();
        for line in shadowed.iter().filter(|l| !s.shadowed.contains(l)) {
            warn!("kubernetes config_map: {line}");
            metrics::counter!(crate::kubernetes::compose::CONFLICTS_METRIC, "kind" => "config")
                .increment(1);
        }
        s.shadowed = shadowed;
        let offer = choice.new?;
        let version = offer.version.clone();
        info!(
            "kubernetes config_map {} at resourceVersion {}: {} fragment(s) in force ({}), waiting for the router to reach the API server again",
            self.source,
            shown(&version),
            offer.fragments.len(),
            offer.keys().join(", ")
        );
        s.in_force = offer;
        s.pending = Some(version.clone());
        metrics::gauge!(PROBLEMS_METRIC).set(0.0);
        Some(version)
    }

    /// The new version `offer` does not load: every problem is logged and shown, and the
    /// version is not tried again until the ConfigMap changes.
    pub fn refused(&self, offer: &Offer, e: &ConfigError, in_fragments: usize) {
        error!(
            "kubernetes config_map {} at resourceVersion {} refused ({in_fragments} problem(s) in its fragments); the configuration in force stays:",
            self.source,
            shown(&offer.version)
        );
        for line in e.rendered.lines() {
            error!("  {line}");
        }
        metrics::gauge!(PROBLEMS_METRIC).set(e.count as f64);
        let problems = e
            .rendered
            .lines()
            .filter(|l| l.contains(": error: "))
            .map(str::to_string)
            .collect();
        self.lock().rejected = Some(Rejection {
            version: offer.version.clone(),
            what: "refused",
            reason: format!("{in_fragments} problem(s): {}", e.first),
            problems,
            at: SystemTime::now(),
        });
    }

    /// The version in force is confirmed: it is what a rollback returns to from now on.
    pub fn confirmed(&self) -> Option<String> {
        let mut s = self.lock();
        let version = s.pending.take()?;
        s.confirmed = s.in_force.clone();
        if let Some(keeper) = &self.keeper {
            keeper.keep(&s.confirmed, SystemTime::now());
        }
        info!(
            "kubernetes config_map {} at resourceVersion {} confirmed: the router reached the API server with it in force",
            self.source,
            shown(&version)
        );
        Some(version)
    }

    /// The version in force was not confirmed in time: it is rejected with `reason`, and
    /// the confirmed fragments are in force again (returned, to load).
    pub fn rolled_back(&self, reason: &str) -> Vec<Fragment> {
        let mut s = self.lock();
        let version = s
            .pending
            .take()
            .unwrap_or_else(|| s.in_force.version.clone());
        metrics::counter!(ROLLBACKS_METRIC).increment(1);
        s.rejected = Some(Rejection {
            version,
            what: "rolled back",
            reason: reason.to_string(),
            problems: Vec::new(),
            at: SystemTime::now(),
        });
        s.in_force = s.confirmed.clone();
        s.in_force.fragments.clone()
    }

    /// The fragments in force.
    pub fn in_force(&self) -> Vec<Fragment> {
        self.lock().in_force.fragments.clone()
    }

    /// The version waiting for its confirm, if any.
    pub fn pending(&self) -> Option<String> {
        self.lock().pending.clone()
    }

    /// The status the node's Lease shows (`edgenetd.io/config-map`).
    pub fn lease_status(&self) -> ConfigMapStatus {
        let s = self.lock();
        match (state(&s), &s.rejected) {
            ("pending", _) => ConfigMapStatus::Pending {
                in_force: s.in_force.version.clone(),
                confirmed: s.confirmed.version.clone(),
            },
            ("listing", _) => ConfigMapStatus::Listing {
                kept: s.restored.then(|| s.in_force.version.clone()),
            },
            ("rejected", Some(r)) => ConfigMapStatus::Rejected {
                version: r.version.clone(),
                what: r.what.to_string(),
                reason: r.reason.clone(),
                in_force: s.in_force.version.clone(),
            },
            _ => ConfigMapStatus::Confirmed {
                in_force: s.in_force.version.clone(),
            },
        }
    }

    /// `kubernetes.configMap` in /healthz.
    pub fn healthz(&self, now: SystemTime) -> serde_json::Value {
        let s = self.lock();
        let state = state(&s);
        let rejected = s.rejected.as_ref().map(|r| {
            json!({
                "resourceVersion": r.version,
                "what": r.what,
                "reason": r.reason,
                "problems": r.problems,
                "at": rfc3339(r.at),
                "ageSeconds": now.duration_since(r.at).unwrap_or_default().as_secs(),
            })
        });
        let skipped: Vec<String> = s
            .offered
            .iter()
            .flat_map(|o| o.skipped.iter().map(|(k, why)| format!("{k}: {why}")))
            .collect();
        json!({
            "name": self.source.to_string(),
            "state": state,
            "offered": s.offered.as_ref().map(|o| o.version.clone()),
            "inForce": s.in_force.version,
            "keys": s.in_force.keys(),
            "confirmed": s.confirmed.version,
            "pending": s.pending,
            "rejected": rejected,
            "skippedKeys": skipped,
            "clashes": s.shadowed,
        })
    }
}

/// `pending`, `listing`, `rejected` (the version offered is the one last refused or rolled
/// back) or `confirmed`.
fn state(s: &State) -> &'static str {
    if s.pending.is_some() {
        "pending"
    } else if s.offered.is_none() {
        "listing"
    } else if new_offer(s).is_none()
        && s.rejected
            .as_ref()
            .is_some_and(|r| s.offered.as_ref().is_some_and(|o| o.version == r.version))
    {
        "rejected"
    } else {
        "confirmed"
    }
}

/// The version offered when it is neither in force nor the one last rejected.
fn new_offer(s: &State) -> Option<&Offer> {
    let offer = s.offered.as_ref()?;
    let same = offer.version == s.in_force.version && offer.fragments == s.in_force.fragments;
    let rejected = s
        .rejected
        .as_ref()
        .is_some_and(|r| r.version == offer.version);
    (!same && !rejected).then_some(offer)
}

/// A resourceVersion as shown: `(none)` for a ConfigMap that does not exist.
fn shown(version: &str) -> &str {
    if version.is_empty() {
        "(none: no such ConfigMap)"
    } else {
        version
    }
}

/// Follows the ConfigMap: each change is offered, and a new version asks for a reload.
pub async fn follow(
    cluster: Arc<ClusterConfig>,
    store: Store<ConfigMap>,
    changed: TriggerRx,
    reload: Trigger,
    shutdown: Shutdown,
) {
    while let Some(Some(())) = unless_shutdown(&shutdown, changed.recv()).await {
        if !store.is_synced() {
            continue;
        }
        let object = store.get(&cluster.source.namespace, &cluster.source.name);
        let offer = config_map::offer(&cluster.source, object.as_ref(), &cluster.node);
        if cluster.offer(offer) {
            reload.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(version: &str, text: &str) -> Offer {
        Offer {
            version: version.into(),
            fragments: vec![Fragment {
                name: "configmap:ns/cm:a_b.toml".into(),
                text: text.into(),
            }],
            skipped: Vec::new(),
        }
    }

    fn cluster() -> ClusterConfig {
        ClusterConfig::new(
            ConfigMapRef {
                namespace: "ns".into(),
                name: "cm".into(),
            },
            Duration::from_secs(120),
            "edge-1".into(),
        )
    }

    #[test]
    fn a_restored_version_is_in_force_and_confirmed_and_its_listing_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("edgenetd-restored-{}", std::process::id()));
        let keeper = Arc::new(Keeper::new(&dir, cluster().source, "edge-1".into()));
        let c = cluster().keeping(keeper, Some(offer("7", "# seven\n")), Vec::new());
        assert_eq!(c.in_force()[0].text, "# seven\n");
        assert!(c.choose().new.is_none(), "nothing new before the listing");
        assert_eq!(c.healthz(SystemTime::now())["state"], "listing");
        assert_eq!(c.lease_status().text(), "listing, in force 7 (kept)");
        assert!(
            !c.offer(offer("7", "# seven\n")),
            "the same version listed: no reload"
        );
        assert_eq!(c.healthz(SystemTime::now())["state"], "confirmed");
        assert_eq!(c.lease_status().text(), "confirmed 7");
        assert!(c.offer(offer("8", "# eight\n")), "a newer one is tried");
        c.took(c.choose(), Vec::new());
        assert_eq!(
            c.rolled_back("not confirmed")[0].text,
            "# seven\n",
            "and rolls back to it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_new_version_is_tried_once_and_a_rollback_returns_to_the_confirmed_one() {
        let c = cluster();
        assert!(c.choose().new.is_none(), "nothing listed yet");
        assert_eq!(c.lease_status(), ConfigMapStatus::Listing { kept: None });
        assert!(c.offer(offer("1", "# one\n")));
        let choice = c.choose();
        assert_eq!(choice.new.as_ref().unwrap().version, "1");
        assert_eq!(c.took(choice, Vec::new()).as_deref(), Some("1"));
        assert_eq!(c.lease_status().text(), "pending 1, confirmed none");
        assert!(!c.offer(offer("1", "# one\n")), "in force already");
        assert_eq!(c.confirmed().as_deref(), Some("1"));
        assert_eq!(c.lease_status().text(), "confirmed 1");
        assert!(c.offer(offer("2", "# two\n")));
        let choice = c.choose();
        c.took(choice, Vec::new());
        assert_eq!(c.pending().as_deref(), Some("2"));
        let back = c.rolled_back("not confirmed");
        assert_eq!(back[0].text, "# one\n", "the confirmed version is back");
        assert!(c.choose().new.is_none(), "version 2 is not tried again");
        assert_eq!(c.choose().fragments[0].text, "# one\n");
        let doc = c.healthz(SystemTime::now());
        assert_eq!(doc["state"], "rejected", "{doc}");
        assert_eq!(doc["rejected"]["resourceVersion"], "2");
        assert_eq!(doc["rejected"]["what"], "rolled back");
        assert_eq!(
            c.lease_status().text(),
            "rejected 2, in force 1: rolled back: not confirmed"
        );
        assert!(c.offer(offer("3", "# three\n")), "a new version is tried");
        let e =
            crate::config::load_str(&[("a.toml", "[daemon]\nroute_protocol = 300\n")]).unwrap_err();
        c.refused(&c.choose().new.unwrap(), &e, 1);
        let text = c.lease_status().text();
        assert!(
            text.starts_with("rejected 3, in force 1: refused: 1 problem(s): a.toml:2:"),
            "{text}"
        );
    }
}
