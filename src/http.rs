//! HTTP endpoints (tiny_http): /healthz /livez /readyz /metrics.
//!
//! - `/healthz`: 200 when every controller is live, else 503; JSON with kube-proxy's top-level
//!   fields (`lastUpdated`, `currentTime`) plus one entry per controller.
//! - `/livez`: the same verdict without detail. `/readyz`: 200 once every controller has had a
//!   successful sync. `/metrics`: Prometheus text.
//! - Only GET and HEAD (405 otherwise), unknown paths 404, sources outside `metrics_allow` 403.
//!
//! Robustness: tiny_http reads each connection's request head on a thread of its own, so a
//! slow or malicious client (slowloris, a huge header, garbage) occupies only its own thread;
//! requests reach our handler threads only once fully parsed. The listening socket carries
//! receive/send timeouts that accepted sockets inherit, so a client that stalls mid-read or
//! never reads its answer is dropped instead of holding a thread forever.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use serde::Serialize;
use tiny_http::{Header, Method, Response, Server};

use crate::clock::{rfc3339, unix_seconds};
use crate::health::{Health, HealthReport};
use crate::metrics::Exporter;

/// How long a connection may stall on one read or write before it is dropped.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
/// Threads answering parsed requests (parsing itself happens on tiny_http's own threads).
const HANDLER_THREADS: usize = 2;

/// What the handler needs to answer.
pub struct HttpState {
    /// The heartbeat registry.
    pub health: Arc<Health>,
    /// The metrics exporter (None in tests that do not install one).
    pub exporter: Option<Arc<Exporter>>,
    /// Sources allowed in; None = everyone.
    pub allow: Option<Vec<IpNet>>,
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
}

impl Reply {
    fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }
}

/// Decides the answer to one request (pure apart from reading health and metrics).
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
            let report = state.health.report();
            let status = if report.all_live() { 200 } else { 503 };
            let body = serde_json::to_string_pretty(&HealthzBody::from(&report))
                .expect("serializable")
                + "\n";
            Reply {
                status,
                content_type: "application/json",
                body,
            }
        }
        "/livez" => {
            let report = state.health.report();
            if report.all_live() {
                Reply::text(200, "ok\n")
            } else {
                Reply::text(503, format!("not live: {}\n", report.stale().join(", ")))
            }
        }
        "/readyz" => {
            let report = state.health.report();
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
                body: exporter.render(&state.health),
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

impl From<&HealthReport> for HealthzBody {
    fn from(r: &HealthReport) -> Self {
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
        }
    }
}

/// Binds the listener (so bind errors surface at startup, before READY).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    set_inherited_timeouts(&listener)?;
    Ok(listener)
}

fn set_inherited_timeouts(listener: &TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let tv = libc::timeval {
        tv_sec: SOCKET_TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: valid fd owned by `listener`; tv is a properly sized timeval.
        let rc = unsafe {
            libc::setsockopt(
                listener.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Serves on `listener` from background threads until the process exits.
pub fn serve(listener: TcpListener, state: Arc<HttpState>) -> Result<(), String> {
    let server = Arc::new(Server::from_listener(listener, None).map_err(|e| e.to_string())?);
    for i in 0..HANDLER_THREADS {
        let (server, state) = (Arc::clone(&server), Arc::clone(&state));
        std::thread::Builder::new()
            .name(format!("http-{i}"))
            .spawn(move || {
                for request in server.incoming_requests() {
                    let remote = request.remote_addr().map(|a| a.ip());
                    let reply = answer(&state, request.method(), request.url(), remote);
                    let mut response =
                        Response::from_string(reply.body).with_status_code(reply.status);
                    response.add_header(
                        Header::from_bytes(&b"Content-Type"[..], reply.content_type.as_bytes())
                            .expect("valid header"),
                    );
                    if reply.status == 405 {
                        response.add_header(
                            Header::from_bytes(&b"Allow"[..], &b"GET, HEAD"[..])
                                .expect("valid header"),
                        );
                    }
                    let _ = request.respond(response);
                }
            })
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    fn state(
        allow: Option<Vec<IpNet>>,
    ) -> (Arc<FakeClock>, HttpState, crate::health::HealthHandle) {
        let clock = FakeClock::new();
        let health = Health::new(clock.clone());
        let h = health.register("route", Duration::from_secs(10));
        (
            clock,
            HttpState {
                health,
                exporter: None,
                allow,
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
    fn readyz_waits_for_a_first_success() {
        let (_c, st, h) = state(None);
        assert_eq!(answer(&st, &Method::Get, "/readyz", LOCAL).status, 503);
        h.record_outcome(None);
        assert_eq!(answer(&st, &Method::Get, "/readyz", LOCAL).status, 200);
    }

    #[test]
    fn methods_paths_and_sources_are_checked() {
        let (_c, st, _h) = state(Some(vec!["127.0.0.0/8".parse().unwrap()]));
        assert_eq!(answer(&st, &Method::Post, "/healthz", LOCAL).status, 405);
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
