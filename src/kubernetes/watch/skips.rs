//! Cluster objects (or parts of them) the translation left out, made visible: logged once
//! at info when they first appear, counted by kind and reason, the last ones in /healthz.
//!
//! The translation runs at every compose and reports every skip again each time; logging or
//! counting there would repeat the same line for as long as the object stays broken. So
//! a skip is news only while it was absent from the kind's previous report: it is logged
//! and counted once, and again only after it was gone (fixed or deleted) and came back.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use log::{debug, info};
use serde::Serialize;

/// How many of the last new skips /healthz lists.
pub const RECENT: usize = 16;

/// One skip as the translation reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skip {
    /// `<namespace>/<name>` (or the name) of the object, or the entry left out.
    pub object: String,
    /// The `reason` label: one of a small fixed set of words (`bad_address`, ...).
    pub reason: &'static str,
    /// The reason in words, with the offending value.
    pub detail: String,
    /// Intentional (headless, ExternalName, another proxy's): counted, but logged at debug
    /// and not listed, since nothing is wrong.
    pub expected: bool,
}

/// One new skip as /healthz lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Listed {
    /// The API resource (`services`, `nodes`, `networkpolicies`, `servicecidrs`).
    pub kind: &'static str,
    /// The object.
    pub object: String,
    /// The reason label.
    pub reason: &'static str,
    /// The reason in words.
    pub detail: String,
}

/// What was reported so far.
#[derive(Default)]
struct Log {
    /// Each kind's skips at its last report.
    active: BTreeMap<&'static str, BTreeSet<Skip>>,
    /// New skips counted, by kind and reason label.
    counts: BTreeMap<(&'static str, &'static str), u64>,
    /// The last new unexpected skips, newest last.
    recent: VecDeque<Listed>,
}

/// The skip log; cheap to clone, shared by the watcher thread and the HTTP server.
#[derive(Clone, Default)]
pub struct Skips(Arc<Mutex<Log>>);

impl Skips {
    /// The skips of `kind` now (every one, at each compose): logs and counts those that
    /// were not in its previous report.
    pub fn report(&self, kind: &'static str, now: impl IntoIterator<Item = Skip>) {
        let now: BTreeSet<Skip> = now.into_iter().collect();
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let before = log.active.remove(kind).unwrap_or_default();
        for s in now.difference(&before) {
            *log.counts.entry((kind, s.reason)).or_default() += 1;
            if s.expected {
                debug!("kubernetes {kind} {}: skipped: {}", s.object, s.detail);
                continue;
            }
            info!("kubernetes {kind} {}: skipped: {}", s.object, s.detail);
            if log.recent.len() == RECENT {
                log.recent.pop_front();
            }
            log.recent.push_back(Listed {
                kind,
                object: s.object.clone(),
                reason: s.reason,
                detail: s.detail.clone(),
            });
        }
        log.active.insert(kind, now);
    }

    /// New skips counted so far, by kind and reason label.
    pub fn counts(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .counts
            .clone()
    }

    /// The /healthz `kubernetes.skipped` object: how many unexpected skips last now, and the
    /// last new ones.
    pub fn healthz(&self) -> serde_json::Value {
        let log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let active = log
            .active
            .values()
            .flat_map(|v| v.iter())
            .filter(|s| !s.expected)
            .count();
        serde_json::json!({ "active": active, "recent": log.recent })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(object: &str, reason: &'static str) -> Skip {
        Skip {
            object: object.into(),
            reason,
            detail: format!("{reason} detail"),
            expected: reason == "headless",
        }
    }

    /// The bug: a Service with `clusterIP: "not-an-ip"` was skipped at every compose with
    /// nothing but a debug line; now it is counted once while it lasts, and again when it
    /// comes back after being fixed.
    #[test]
    fn skips_nobody_could_see_are_counted_once_per_object_and_reason_while_they_last() {
        let skips = Skips::default();
        for _ in 0..5 {
            skips.report(
                "services",
                [
                    skip("default/bad", "bad_address"),
                    skip("default/dns", "headless"),
                ],
            );
        }
        let c = skips.counts();
        assert_eq!(c[&("services", "bad_address")], 1, "{c:?}");
        assert_eq!(c[&("services", "headless")], 1);
        let h = skips.healthz();
        assert_eq!(h["active"], 1, "headless is not a problem: {h}");
        assert_eq!(h["recent"].as_array().unwrap().len(), 1, "{h}");
        assert_eq!(h["recent"][0]["object"], "default/bad");
        assert_eq!(h["recent"][0]["reason"], "bad_address");

        skips.report("services", [skip("default/dns", "headless")]);
        assert_eq!(skips.healthz()["active"], 0);
        skips.report("services", [skip("default/bad", "bad_address")]);
        assert_eq!(
            skips.counts()[&("services", "bad_address")],
            2,
            "it came back"
        );
        skips.report("nodes", [skip("n1", "bad_cidr")]);
        assert_eq!(
            skips.counts()[&("services", "bad_address")],
            2,
            "kinds apart"
        );
        assert_eq!(skips.healthz()["active"], 2);
    }

    #[test]
    fn healthz_lists_only_the_last_new_skips() {
        let skips = Skips::default();
        let all: Vec<Skip> = (0..RECENT + 4)
            .map(|i| skip(&format!("default/s{i}"), "bad_port"))
            .collect();
        skips.report("services", all);
        let h = skips.healthz();
        let recent = h["recent"].as_array().unwrap();
        assert_eq!(recent.len(), RECENT);
        assert_eq!(h["active"], RECENT + 4);
    }
}
