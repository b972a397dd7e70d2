//! Every component that joins /healthz, in one place. A component joins in one or both of two
//! ways: with a heartbeat in the liveness registry (an entry of `controllers`, held to the
//! liveness window: /healthz 503, /livez and the systemd watchdog follow it) and with an object
//! of its own beside `controllers` (shown only, never part of the verdict).
//!
//! | component | `controllers` entry | its object |
//! |---|---|---|
//! | each controller loop | its name; window `period + sync_budget` | |
//! | the backend check probes | [`BACKEND_CHECKS`], [`WATCH_WINDOW`], ready at once | `services` |
//! | the track probers | [`TRACK_PROBERS`], once a track is configured | `tracks` |
//! | the Kubernetes watcher | [`KUBERNETES`], its watch window | `kubernetes` |
//! | the confirm state of `edgenetd apply --confirm`, degraded mode | | `config` |
//!
//! The `services` and `config` objects are there whatever runs; `tracks` whenever the route
//! controller runs; `kubernetes` with `[kubernetes]`.

use std::sync::Arc;
use std::time::Duration;

use super::confirm_state::ConfirmState;
use super::degraded::Degraded;
use crate::controller::service::backend_check::{self, WATCH_WINDOW};
use crate::http::HttpState;
use crate::liveness::{Heartbeat, Liveness};
use crate::track::Board;
use crate::track::supervisor;

/// The `controllers` entry of the backend check probes.
pub const BACKEND_CHECKS: &str = "service-health";
/// The `controllers` entry of the track probers.
pub const TRACK_PROBERS: &str = "track";
/// The `controllers` entry of the Kubernetes watcher.
pub const KUBERNETES: &str = "kubernetes";
/// The first window of the track probers' entry (the supervisor sets it to its longest
/// prober window plus 2 s at once).
const TRACK_PROBERS_WINDOW: Duration = Duration::from_secs(10);

/// Where components join /healthz: the liveness registry and the objects HTTP serves.
#[derive(Clone, Copy)]
pub struct Healthz<'a> {
    /// The liveness registry (`controllers`).
    pub liveness: &'a Arc<Liveness>,
    /// What the HTTP server serves (the objects beside `controllers`).
    pub http: &'a HttpState,
}

impl Healthz<'_> {
    /// A controller loop: its heartbeat, registered now.
    pub fn controller(&self, name: &str, window: Duration) -> Heartbeat {
        self.liveness.register(name, window)
    }

    /// The backend check probes: their heartbeat, ready from the start (a probe has no first
    /// sync to wait for).
    pub fn backend_checks(&self) -> Heartbeat {
        let heartbeat = self.liveness.register(BACKEND_CHECKS, WATCH_WINDOW);
        heartbeat.source_ready();
        heartbeat
    }

    /// The track probers: the `tracks` object now, and how their heartbeat is registered (by
    /// the supervisor, once a track is configured; not a sync loop: ready at once).
    pub fn track_probers(&self, board: &Board) -> Box<dyn Fn() -> Heartbeat> {
        let for_http = board.clone();
        self.http
            .sections
            .add("tracks", Box::new(move || supervisor::healthz(&for_http)));
        let liveness = self.liveness.clone();
        Box::new(move || {
            let heartbeat = liveness.register(TRACK_PROBERS, TRACK_PROBERS_WINDOW);
            heartbeat.source_ready();
            heartbeat
        })
    }

    /// The Kubernetes watcher: the `kubernetes` object (the kinds, the skips, and the fields
    /// `state` adds: where the state in force comes from) and its heartbeat (ready once every
    /// enabled kind is in force).
    #[cfg(feature = "kubernetes")]
    pub fn kubernetes(
        &self,
        statuses: crate::kubernetes::watch::status::Statuses,
        state: Box<dyn Fn() -> serde_json::Value + Send + Sync>,
        window: Duration,
    ) -> Heartbeat {
        let heartbeat = self.liveness.register(KUBERNETES, window);
        self.http.sections.add(
            "kubernetes",
            Box::new(move || {
                let mut doc = statuses.healthz();
                if let (Some(doc), serde_json::Value::Object(more)) = (doc.as_object_mut(), state())
                {
                    doc.extend(more);
                }
                doc
            }),
        );
        heartbeat
    }

    /// The objects every daemon shows: the backend checks' `services` (even with the service
    /// controller disabled) and `config`: the confirm state, and `degraded` (`null`, or the
    /// fallback that runs instead of invalid config files; shown only, never part of the
    /// verdict).
    pub fn always(&self, confirm: Arc<ConfirmState>, degraded: Arc<Degraded>) {
        self.http
            .sections
            .add("services", Box::new(backend_check::healthz));
        let clock = self.liveness.clock().clone();
        self.http.sections.add(
            "config",
            Box::new(move || {
                let mut doc = confirm.healthz(clock.wall());
                doc["degraded"] = degraded.healthz();
                doc
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use crate::http::{Method, answer};

    fn healthz_doc(http: &HttpState) -> (u16, serde_json::Value) {
        let reply = answer(http, &Method::Get, "/healthz", None);
        (reply.status, serde_json::from_str(&reply.body).unwrap())
    }

    #[test]
    fn every_member_joins_with_its_entry_and_its_object() {
        let clock = FakeClock::new();
        let http = HttpState {
            liveness: Liveness::new(clock.clone()),
            exporter: None,
            allow: None,
            sections: Default::default(),
            health_ports: Default::default(),
        };
        let liveness = http.liveness.clone();
        let healthz = Healthz {
            liveness: &liveness,
            http: &http,
        };
        healthz.always(
            Arc::new(ConfirmState::default()),
            Degraded::new(liveness.clone()),
        );
        let route = healthz.controller("route", Duration::from_secs(60));
        let probes = healthz.backend_checks();
        let join_tracks = healthz.track_probers(&Board::default());
        let (_, doc) = healthz_doc(&http);
        for object in ["services", "config", "tracks"] {
            assert!(doc.get(object).is_some(), "{object} missing: {doc}");
        }
        let entries = doc["controllers"].as_object().unwrap();
        assert!(entries.contains_key("route") && entries.contains_key(BACKEND_CHECKS));
        assert!(
            !entries.contains_key(TRACK_PROBERS),
            "only once a track is configured"
        );
        assert_eq!(
            doc["controllers"][BACKEND_CHECKS]["syncs"], 1,
            "ready at once"
        );
        let tracks = join_tracks();
        let (_, doc) = healthz_doc(&http);
        assert_eq!(
            doc["controllers"][TRACK_PROBERS]["syncs"], 1,
            "ready at once"
        );
        // Each entry is held to its window like a controller's.
        clock.advance(WATCH_WINDOW + Duration::from_secs(1));
        route.beat();
        tracks.beat();
        let (status, doc) = healthz_doc(&http);
        assert_eq!(status, 503, "{doc}");
        assert_eq!(doc["controllers"][BACKEND_CHECKS]["live"], false);
        probes.beat();
        assert_eq!(healthz_doc(&http).0, 200);
    }
}
