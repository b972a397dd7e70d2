//! Each watched kind's state for /healthz, the metrics and the router's Lease.

use std::sync::Arc;

use serde::Serialize;

use super::skips::Skips;
use crate::kubernetes::client::{HasMeta, Store, WatchStatus};

/// Reads one kind's watch state and object count.
type Probe = Box<dyn Fn() -> (WatchStatus, usize) + Send + Sync>;

/// One watched API resource.
pub struct Watched {
    /// The API resource (`services`, `endpointslices`, `nodes`, ...): the `kind` label.
    pub kind: &'static str,
    /// Reads its store.
    probe: Probe,
}

impl Watched {
    /// A kind whose state `store` holds.
    pub fn new<T>(kind: &'static str, store: Store<T>) -> Watched
    where
        T: HasMeta + Clone + Send + Sync + 'static,
    {
        let probe: Probe = Box::new(move || (store.status(), store.snapshot().len()));
        Watched { kind, probe }
    }

    /// The watch state and the number of objects now.
    pub fn probe(&self) -> (WatchStatus, usize) {
        (self.probe)()
    }
}

/// Every watched kind; cheap to clone, shared by the watcher thread and the HTTP server.
#[derive(Clone, Default)]
pub struct Statuses(pub Arc<Vec<Watched>>, pub Skips);

impl Statuses {
    /// Why the cluster state is not complete yet, once every kind has made its first
    /// attempt (listed, or failed); `None` while some kind is still trying for the first
    /// time, or when every kind is listed.
    pub fn first_attempt_failed(&self) -> Option<String> {
        let mut missing = Vec::new();
        for w in self.0.iter() {
            let (status, _) = w.probe();
            match (status.synced, status.last_error) {
                (true, _) => {}
                (false, Some(err)) => missing.push(format!("{}: {err}", w.kind)),
                (false, None) => return None,
            }
        }
        (!missing.is_empty()).then(|| format!("not listed yet: {}", missing.join("; ")))
    }
}

impl Statuses {
    /// Every kind listed (or absent from the server) and none failing: the watches follow
    /// the cluster. A watch reopening after the server ended it counts as live.
    pub fn all_live(&self) -> bool {
        self.0.iter().all(|w| {
            let (s, _) = w.probe();
            (s.synced || s.absent) && s.last_error.is_none()
        })
    }
}

/// One kind as /healthz shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindBody {
    /// `listing`, `watching`, `backing off`, `reconnecting`, or `absent` (the server does
    /// not serve the resource, or not to us: taken as none).
    pub state: &'static str,
    /// A complete list was stored once (the store holds the cluster's state from then on).
    pub synced: bool,
    /// The resourceVersion the next watch resumes from.
    pub resource_version: String,
    /// The objects in the store.
    pub objects: usize,
    /// The last failure, while the last attempt failed.
    pub last_error: Option<String>,
}

/// What a kind is doing, in words.
pub fn state(s: &WatchStatus) -> &'static str {
    if s.absent {
        return "absent";
    }
    match (s.connected, s.last_error.is_some(), s.synced) {
        (true, _, _) => "watching",
        (false, true, _) => "backing off",
        (false, false, false) => "listing",
        (false, false, true) => "reconnecting",
    }
}

impl Statuses {
    /// The /healthz `kubernetes` object: one entry per kind.
    pub fn healthz(&self) -> serde_json::Value {
        let kinds: std::collections::BTreeMap<&str, KindBody> = self
            .0
            .iter()
            .map(|w| {
                let (s, objects) = w.probe();
                let body = KindBody {
                    state: state(&s),
                    synced: s.synced,
                    resource_version: s.resource_version.clone(),
                    objects,
                    last_error: s.last_error.clone(),
                };
                (w.kind, body)
            })
            .collect();
        serde_json::json!({ "kinds": kinds, "skipped": self.1.healthz() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_listing_then_watching_then_backing_off() {
        let mut s = WatchStatus::default();
        assert_eq!(state(&s), "listing");
        s.synced = true;
        s.connected = true;
        assert_eq!(state(&s), "watching");
        s.connected = false;
        assert_eq!(state(&s), "reconnecting");
        s.last_error = Some("connection refused".into());
        assert_eq!(state(&s), "backing off");
        s.last_error = None;
        s.absent = true;
        assert_eq!(state(&s), "absent");
    }
}
