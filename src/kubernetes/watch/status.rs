//! Each watched kind's state for /healthz, the metrics and the router's Lease, and whether
//! the cluster state in force is the cluster's now or a cached one (and since when).

use std::sync::Arc;
use std::time::SystemTime;

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
    /// True while the cluster state in force is the cluster's now: every watched kind has
    /// listed (or is absent: taken as none) and none is failing. The short gap between one
    /// watch and the next (`reconnecting`, no error) does not count as stale.
    pub fn current(&self) -> bool {
        self.0.iter().all(|w| {
            let (s, _) = w.probe();
            s.synced && s.last_error.is_none()
        })
    }
}

/// Where the cluster state in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// Listed and watched: the cluster's state now.
    Current,
    /// The last state known (kept through an outage, or loaded from the cache at start),
    /// which was the cluster's at `since` (the last moment it was seen current, or the
    /// cache file's time).
    Cached {
        /// When the state was last known to be the cluster's.
        since: SystemTime,
    },
    /// No cluster state yet: nothing listed and no cache loaded (the TOML alone is in force).
    None,
}

/// Follows [`Statuses::current`] over time, to say since when a state is cached.
pub struct Freshness {
    /// The watched kinds.
    statuses: Statuses,
    /// The last time the state was seen current (by [`Freshness::observe`]).
    last_current: Option<SystemTime>,
    /// When the cache loaded at start was written, if one was.
    cached_at: Option<SystemTime>,
}

impl Freshness {
    /// Follows `statuses`; `cached_at` is the time of the cache file loaded at start.
    pub fn new(statuses: Statuses, cached_at: Option<SystemTime>) -> Freshness {
        Freshness {
            statuses,
            last_current: None,
            cached_at,
        }
    }

    /// The state at `wall`, now; the `since` of a cached state is only as precise as the
    /// calls are frequent.
    pub fn observe(&mut self, wall: SystemTime) -> ClusterState {
        if self.statuses.current() {
            self.last_current = Some(wall);
            return ClusterState::Current;
        }
        match self.last_current.or(self.cached_at) {
            Some(since) => ClusterState::Cached { since },
            None => ClusterState::None,
        }
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

    #[test]
    fn the_state_is_cached_since_it_was_last_seen_current_or_since_the_cache_was_written() {
        use std::sync::Mutex;
        use std::time::Duration;
        let cell = Arc::new(Mutex::new(WatchStatus::default()));
        let read = cell.clone();
        let probe: Probe = Box::new(move || (read.lock().unwrap().clone(), 0));
        let statuses = Statuses(
            Arc::new(vec![Watched {
                kind: "nodes",
                probe,
            }]),
            Skips::default(),
        );
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut fresh = Freshness::new(statuses.clone(), None);
        assert_eq!(
            fresh.observe(at(0)),
            ClusterState::None,
            "nothing listed, no cache"
        );
        let mut cached = Freshness::new(statuses, Some(t0));
        assert_eq!(cached.observe(at(5)), ClusterState::Cached { since: t0 });
        let update = |f: &dyn Fn(&mut WatchStatus)| f(&mut cell.lock().unwrap());
        update(&|s| {
            s.synced = true;
            s.connected = true;
        });
        assert_eq!(fresh.observe(at(10)), ClusterState::Current);
        update(&|s| s.connected = false);
        assert_eq!(
            fresh.observe(at(11)),
            ClusterState::Current,
            "between two watches"
        );
        update(&|s| s.last_error = Some("connection refused".into()));
        assert_eq!(
            fresh.observe(at(12)),
            ClusterState::Cached { since: at(11) }
        );
        assert_eq!(
            fresh.observe(at(40)),
            ClusterState::Cached { since: at(11) },
            "it stays"
        );
    }
}
