//! HTTP endpoints: /healthz /livez /readyz /metrics.
//!
//! - `/healthz`: 200 when every controller is live, else 503; JSON with kube-proxy's top-level
//!   fields (`lastUpdated`, `currentTime`) plus one entry per controller.
//! - `/livez`: the same verdict without detail. `/readyz`: 200 once every controller has had a
//!   successful sync. `/metrics`: Prometheus text.
//! - Only GET and HEAD (405 otherwise), unknown paths 404, sources outside `metrics_allow` 403.
//! - Beside them, kube-proxy's health-check node ports (`health_ports`), on the same thread
//!   and executor, one listener per port.
//!
//! Robustness (see `server`): one thread of its own runs a small async server; every
//! connection is a task with a hard deadline for its request head and a size cap, slots are
//! handed out per source with a reserve for trusted sources and eviction of a slow head when
//! full (its socket held until its deadline, `held`, so evictions never invite a reconnect),
//! so a slow or malicious client (slowloris, a 1 MB header, garbage bytes)
//! only ever costs its own task and a few KiB, and never delays the answers to others.
//!
//! Why not tiny_http (the crate first chosen): it reads each request on a pool thread with no
//! deadline and no size cap, spawns a thread per busy connection (and aborts when it cannot),
//! unwraps `try_clone` on accepted sockets (aborts when out of fds), ends its accept loop on
//! the first accept error, and can queue a probe behind busy threads. Measured side by side by
//! `examples/vs_tiny_http.rs` (`scripts/bench-tiny-http.sh`; figures in the README).

mod admission;
mod connection;
pub mod health_ports;
mod held;
pub mod request;
mod response;
mod server;

pub use server::{bind, serve};

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use serde::Serialize;

use crate::clock::{rfc3339, unix_seconds};
use crate::liveness::{Liveness, LivenessReport};
use crate::metrics::Exporter;

/// The request methods edgenetd distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD: like GET, without the body.
    Head,
    /// Anything else (answered 405).
    Other,
}

impl Method {
    /// Parses a request-line method.
    pub fn parse(text: &str) -> Method {
        match text {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            _ => Method::Other,
        }
    }
}

/// What the handler needs to answer.
pub struct HttpState {
    /// The heartbeat registry.
    pub liveness: Arc<Liveness>,
    /// The metrics exporter (None in tests that do not install one).
    pub exporter: Option<Arc<Exporter>>,
    /// Sources allowed in; None = everyone.
    pub allow: Option<Vec<IpNet>>,
    /// Objects /healthz shows beside the controllers (e.g. `kubernetes`), added after the
    /// HTTP server started (the daemon's one list of them: `daemon::healthz`).
    pub sections: Sections,
    /// The health-check node ports served beside the main listener, and their answers.
    pub health_ports: Arc<health_ports::HealthPorts>,
}

/// Renders one extra /healthz object.
pub type Section = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// The extra /healthz objects, by key.
#[derive(Default)]
pub struct Sections(std::sync::Mutex<Vec<(&'static str, Section)>>);

impl Sections {
    /// Adds the object `key`, rendered at every request.
    pub fn add(&self, key: &'static str, render: Section) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key, render));
    }

    /// Every object now.
    fn render(&self) -> std::collections::BTreeMap<&'static str, serde_json::Value> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, f)| (*k, f()))
            .collect()
    }
}

/// An answer, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Content-Type header value.
    pub content_type: &'static str,
    /// Body (omitted on the wire for HEAD).
    pub body: String,
    /// Headers beyond the ones every answer carries.
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            headers: Vec::new(),
        }
    }
}

/// Decides the answer to one request (pure apart from reading liveness and metrics).
pub fn answer(state: &HttpState, method: &Method, url: &str, remote: Option<IpAddr>) -> Reply {
    if let Some(allow) = &state.allow {
        let ok = remote.is_some_and(|ip| allow.iter().any(|net| net.contains(&ip.to_canonical())));
        if !ok {
            return Reply::text(403, "forbidden\n");
        }
    }
    let path = url.split('?').next().unwrap_or("");
    let known = matches!(path, "/healthz" | "/livez" | "/readyz" | "/metrics");
    if !known {
        return Reply::text(
            404,
            "not found: try /healthz, /livez, /readyz or /metrics\n",
        );
    }
    if !matches!(method, Method::Get | Method::Head) {
        return Reply::text(405, "method not allowed: use GET or HEAD\n");
    }
    match path {
        "/healthz" => {
            let report = state.liveness.report();
            let status = if report.all_live() { 200 } else { 503 };
            let mut healthz = HealthzBody::from(&report);
            healthz.sections = state.sections.render();
            let body = serde_json::to_string_pretty(&healthz).expect("serializable") + "\n";
            Reply {
                status,
                content_type: "application/json",
                body,
                headers: Vec::new(),
            }
        }
        "/livez" => {
            let report = state.liveness.report();
            if report.all_live() {
                Reply::text(200, "ok\n")
            } else {
                Reply::text(503, format!("not live: {}\n", report.stale().join(", ")))
            }
        }
        "/readyz" => {
            let report = state.liveness.report();
            if report.ready() {
                Reply::text(200, "ready\n")
            } else {
                let waiting: Vec<&str> = report
                    .controllers
                    .iter()
                    .filter(|c| c.last_success.is_none())
                    .map(|c| c.name.as_str())
                    .collect();
                Reply::text(
                    503,
                    format!(
                        "not ready: no successful sync yet: {}\n",
                        waiting.join(", ")
                    ),
                )
            }
        }
        _ => match &state.exporter {
            Some(exporter) => Reply {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: exporter.render(&state.liveness),
                headers: Vec::new(),
            },
            None => Reply::text(503, "metrics are not enabled\n"),
        },
    }
}

/// The /healthz document.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HealthzBody {
    last_updated: Option<String>,
    current_time: String,
    live: bool,
    ready: bool,
    controllers: std::collections::BTreeMap<String, ControllerBody>,
    /// Extra objects (e.g. `kubernetes`), none without a source that adds one.
    #[serde(flatten)]
    sections: std::collections::BTreeMap<&'static str, serde_json::Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ControllerBody {
    last_beat: String,
    seconds_since_beat: f64,
    window_seconds: f64,
    queued_update_seconds: Option<f64>,
    live: bool,
    last_success: Option<String>,
    last_success_unix: f64,
    syncs: u64,
    failures: u64,
    last_error: Option<String>,
}

impl From<&LivenessReport> for HealthzBody {
    fn from(r: &LivenessReport) -> Self {
        HealthzBody {
            last_updated: r.last_updated.map(rfc3339),
            current_time: rfc3339(r.current_time),
            live: r.all_live(),
            ready: r.ready(),
            controllers: r
                .controllers
                .iter()
                .map(|c| {
                    let body = ControllerBody {
                        last_beat: rfc3339(c.last_beat),
                        seconds_since_beat: c.since_beat.as_secs_f64(),
                        window_seconds: c.window.as_secs_f64(),
                        queued_update_seconds: c.queued_for.map(|q| q.as_secs_f64()),
                        live: c.live,
                        last_success: c.last_success.map(rfc3339),
                        last_success_unix: c.last_success.map_or(0.0, unix_seconds),
                        syncs: c.attempts,
                        failures: c.failures,
                        last_error: c.last_error.clone(),
                    };
                    (c.name.clone(), body)
                })
                .collect(),
            sections: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::FakeClock;

    fn state(allow: Option<Vec<IpNet>>) -> (Arc<FakeClock>, HttpState, crate::liveness::Heartbeat) {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone());
        let h = liveness.register("route", Duration::from_secs(10));
        (
            clock,
            HttpState {
                liveness,
                exporter: None,
                allow,
                sections: Sections::default(),
                health_ports: Default::default(),
            },
            h,
        )
    }

    const LOCAL: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn healthz_is_200_with_kube_proxy_fields_then_503_when_stale() {
        let (clock, st, h) = state(None);
        h.record_outcome(Some("route 10.0.0.0/8: Network is unreachable".into()));
        let r = answer(&st, &Method::Get, "/healthz", LOCAL);
        assert_eq!(
            r.status, 200,
            "a failed sync does not make the loop unhealthy"
        );
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert!(
            v["lastUpdated"].is_string() && v["currentTime"].is_string(),
            "{v}"
        );
        assert_eq!(v["controllers"]["route"]["live"], true);
        assert_eq!(v["controllers"]["route"]["failures"], 1);
        assert_eq!(
            v["controllers"]["route"]["lastError"],
            "route 10.0.0.0/8: Network is unreachable"
        );
        assert_eq!(v["controllers"]["route"]["lastSuccessUnix"], 0.0);
        clock.advance(Duration::from_secs(11));
        let r = answer(&st, &Method::Get, "/healthz", LOCAL);
        assert_eq!(r.status, 503);
        assert_eq!(
            answer(&st, &Method::Get, "/livez", LOCAL),
            Reply::text(503, "not live: route\n")
        );
    }

    #[test]
    fn healthz_shows_an_added_section_beside_the_unchanged_fields() {
        let (_clock, st, _h) = state(None);
        let before: serde_json::Value =
            serde_json::from_str(&answer(&st, &Method::Get, "/healthz", LOCAL).body).unwrap();
        assert!(before.get("kubernetes").is_none(), "{before}");
        st.sections.add(
            "kubernetes",
            Box::new(|| serde_json::json!({"kinds": {"services": {"state": "watching"}}})),
        );
        let r = answer(&st, &Method::Get, "/healthz", LOCAL);
        assert_eq!(r.status, 200);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["kubernetes"]["kinds"]["services"]["state"], "watching");
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.retain(|k| k != "kubernetes");
            k.sort();
            k
        };
        assert_eq!(keys(&v), keys(&before));
        assert_eq!(v["controllers"]["route"]["live"], true);
    }

    #[test]
    fn readyz_waits_for_a_first_success() {
        let (_c, st, h) = state(None);
        assert_eq!(answer(&st, &Method::Get, "/readyz", LOCAL).status, 503);
        h.record_outcome(None);
        assert_eq!(answer(&st, &Method::Get, "/readyz", LOCAL).status, 200);
    }

    #[test]
    fn methods_paths_and_sources_are_checked() {
        let (_c, st, _h) = state(Some(vec!["127.0.0.0/8".parse().unwrap()]));
        assert_eq!(answer(&st, &Method::Other, "/healthz", LOCAL).status, 405);
        assert_eq!(answer(&st, &Method::Head, "/livez", LOCAL).status, 200);
        assert_eq!(answer(&st, &Method::Get, "/nope", LOCAL).status, 404);
        assert_eq!(answer(&st, &Method::Get, "/livez?x=1", LOCAL).status, 200);
        let lan = Some("192.168.1.9".parse().unwrap());
        assert_eq!(answer(&st, &Method::Get, "/metrics", lan).status, 403);
        let mapped = Some("::ffff:127.0.0.1".parse().unwrap());
        assert_eq!(
            answer(&st, &Method::Get, "/livez", mapped).status,
            200,
            "v4-mapped v6 source"
        );
    }
}
