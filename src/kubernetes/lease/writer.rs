//! The Lease writer: a thread of its own that looks at the loops every [`POLL`], and reads,
//! creates and updates the Lease when the [`Schedule`] says so. Every request is bounded in
//! time; nothing here is awaited by anything else, so a slow, hung or refusing API server
//! delays the Lease alone.
//!
//! With `[kubernetes] config_map`, each renewal is also a proof a config from the cluster
//! waits for ([`Reached`]): the writer says at start that it runs, records the time each
//! renewing request was opened, and renews at once when the confirm asks for one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{debug, info, warn};

use super::annotations::{ConfigMapStatus, Loop, Report, annotations};
use super::in_force::InForce;
use super::object::{self, Lease, Spec};
use super::schedule::{Schedule, Write};
use super::{DURATION_PERIODS, MIN_GAP, POLL};
use crate::kubernetes::client::http::{Body, Conn};
use crate::kubernetes::client::json;
use crate::kubernetes::client::meta::Status;
use crate::kubernetes::client::{Endpoint, Error};
use crate::kubernetes::freshness::Freshness;
use crate::kubernetes::reached::Reached;
use crate::shutdown::{Shutdown, unless_shutdown};

/// Lease writes (creates and updates), by `result`: `ok`, `conflict` (409: the Lease changed
/// since it was read), `forbidden` (403: RBAC) or `error`.
pub const WRITES: &str = "edgenetd_kubernetes_status_writes_total";
/// When the Lease was last renewed (Unix seconds).
pub const RENEWED: &str = "edgenetd_kubernetes_status_renew_timestamp_seconds";

/// The longest wait for connecting or for any byte of an answer.
const IDLE: Duration = Duration::from_secs(10);
/// The largest answer read (a Lease is well under 4 KiB).
const MAX_BODY: usize = 64 << 10;
/// Reads and writes of one attempt (a 409 reads again and writes once more).
const TRIES: usize = 3;
/// [`TRIES`] as the docs say it.
#[cfg(test)]
pub(super) const TRIES_SAID: &str = ["zero", "one", "two", "three", "four"][TRIES];
/// [`IDLE`] as the docs say it ("bounded (10 s)").
#[cfg(test)]
pub(super) const IDLE_SECS: u64 = IDLE.as_secs();

/// Describes the metrics.
pub fn describe_metrics() {
    metrics::describe_counter!(
        WRITES,
        "Writes of this router's Lease, by result (ok, conflict: it changed since read and is read again; forbidden: RBAC; error)."
    );
    metrics::describe_gauge!(
        RENEWED,
        "When this router's Lease was last renewed (Unix seconds); renewals stop while a loop is not live."
    );
}

/// Where the Lease is and how often it is renewed.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The API server.
    pub endpoint: Endpoint,
    /// The server URL's path before `/apis` (empty for most servers).
    pub path_prefix: String,
    /// The Lease's name (the node's) and its holder.
    pub node_name: String,
    /// `status_namespace`.
    pub namespace: String,
    /// The renewal period ([`super::RENEW_EVERY`], shorter in tests).
    pub renew_every: Duration,
}

/// Every loop of the liveness registry now: whether all are live (the registry's own
/// verdict, the one the systemd watchdog follows) and each one's state.
pub type LoopsProbe = Box<dyn Fn() -> (bool, Vec<Loop>) + Send>;

/// The ConfigMap of `config_map` now.
pub type ConfigMapProbe = Box<dyn Fn() -> ConfigMapStatus + Send>;

/// What the annotations are made from.
pub struct Sources {
    /// The loops.
    pub loops: LoopsProbe,
    /// The TOML in force.
    pub in_force: Arc<InForce>,
    /// Where the cluster state in force comes from (the one the daemon keeps for /healthz
    /// and the cache's stamp).
    pub freshness: Arc<Mutex<Freshness>>,
    /// The ConfigMap's version, with `config_map`.
    pub config_map: Option<ConfigMapProbe>,
    /// Where the renewals are recorded as a proof for a config from the cluster's confirm,
    /// with `config_map`.
    pub reached: Option<Arc<Reached>>,
}

/// Starts the writer's thread; it stops with the daemon.
pub fn spawn(settings: Settings, sources: Sources, shutdown: Shutdown) -> std::io::Result<()> {
    describe_metrics();
    let reached = sources.reached.clone();
    std::thread::Builder::new()
        .name("kubernetes-status".into())
        .spawn(move || smol::block_on(run(settings, sources, shutdown)))?;
    // Before this returns, so before any confirm runs; and only once the thread runs (a
    // writer that never started must not hold every confirm back).
    if let Some(reached) = reached {
        reached.expect_lease();
    }
    Ok(())
}

/// Looks every [`POLL`], writes when due, until shutdown.
async fn run(settings: Settings, sources: Sources, shutdown: Shutdown) {
    let mut schedule = Schedule::new(settings.renew_every, MIN_GAP.min(settings.renew_every));
    let poll = POLL.min(settings.renew_every / 2);
    let mut w = Writer::new(settings);
    loop {
        let (live, loops) = (sources.loops)();
        let wall = SystemTime::now();
        let (generation, hash) = sources.in_force.get();
        let report = Report {
            generation,
            hash,
            cluster: sources
                .freshness
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .standing(),
            loops,
            config_map: sources.config_map.as_ref().map(|probe| probe()),
        };
        let want = annotations(&report);
        let changed = w.written.as_ref() != Some(&want);
        // A confirm waiting for a renewal gets one as soon as a change would.
        let asked = live && sources.reached.as_ref().is_some_and(|r| r.lease_asked());
        let due = schedule.due(Instant::now(), live, changed || asked);
        // Not renewed yet by this daemon: there is no renewTime of its own to keep.
        let due = due.filter(|&d| d == Write::Renew || w.renewed.is_some());
        if let Some(what) = due {
            let Some(opened) = unless_shutdown(&shutdown, w.write(what, want, wall)).await else {
                return;
            };
            if let (Some(opened), Write::Renew, Some(reached)) = (opened, what, &sources.reached) {
                reached.lease_renewed(opened);
            }
            schedule.attempted(Instant::now(), opened.is_some());
        }
        if unless_shutdown(&shutdown, smol::Timer::after(poll))
            .await
            .is_none()
        {
            return;
        }
    }
}

/// The Lease as this daemon last knew it.
struct Writer {
    /// Where it is.
    settings: Settings,
    /// Its collection's path.
    collection: String,
    /// The version the next update is based on (`None`: read it first).
    resource_version: Option<String>,
    /// When this daemon first renewed it.
    acquired: Option<SystemTime>,
    /// When this daemon last renewed it.
    renewed: Option<SystemTime>,
    /// The annotations last written.
    written: Option<BTreeMap<String, String>>,
    /// The last write failed (the next failure is logged at debug only).
    failing: bool,
    /// Another holder was reported.
    other_holder_reported: bool,
}

/// How a create or an update ended.
enum Outcome {
    /// Written: the new version, and when the request was opened.
    Written(String, Instant),
    /// 409: the Lease changed since it was read (or, for a create, exists already).
    Conflict,
    /// 404 on an update: the Lease was deleted meanwhile.
    Gone,
}

impl Writer {
    fn new(settings: Settings) -> Writer {
        let collection = format!(
            "{}/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            settings.path_prefix, settings.namespace
        );
        Writer {
            settings,
            collection,
            resource_version: None,
            acquired: None,
            renewed: None,
            written: None,
            failing: false,
            other_holder_reported: false,
        }
    }

    /// Writes `annotations` (renewing with `Write::Renew`); when written, the time the
    /// request that wrote was opened.
    async fn write(
        &mut self,
        what: Write,
        annotations: BTreeMap<String, String>,
        wall: SystemTime,
    ) -> Option<Instant> {
        let renewed = match what {
            Write::Renew => wall,
            Write::Annotate => self.renewed.unwrap_or(wall),
        };
        let acquired = *self.acquired.get_or_insert(wall);
        let result = self.put_or_create(&annotations, acquired, renewed).await;
        let s = &self.settings;
        match result {
            Ok(opened) => {
                if std::mem::replace(&mut self.failing, false) {
                    info!(
                        "kubernetes: the Lease {}/{} is written again",
                        s.namespace, s.node_name
                    );
                }
                if what == Write::Renew {
                    self.renewed = Some(renewed);
                    let unix = renewed.duration_since(UNIX_EPOCH).unwrap_or_default();
                    metrics::gauge!(RENEWED).set(unix.as_secs_f64());
                }
                self.written = Some(annotations);
                Some(opened)
            }
            Err(e) => {
                let hint = if e.code() == Some(403) {
                    " (grant get, create and update on leases in that namespace: deploy/kubernetes/status-rbac.yaml)"
                } else {
                    ""
                };
                if std::mem::replace(&mut self.failing, true) {
                    debug!(
                        "kubernetes: cannot write the Lease {}/{}: {e}",
                        s.namespace, s.node_name
                    );
                } else {
                    warn!(
                        "kubernetes: cannot write the Lease {}/{}: {e}{hint}; the router runs on as before, the Lease is tried again every {:?}",
                        s.namespace, s.node_name, s.renew_every
                    );
                }
                None
            }
        }
    }

    /// Updates the Lease from the version known, reading it first when none is, creating it
    /// when there is none; a conflict reads it again, at most [`TRIES`] times. Returns when
    /// the request that wrote was opened.
    async fn put_or_create(
        &mut self,
        annotations: &BTreeMap<String, String>,
        acquired: SystemTime,
        renewed: SystemTime,
    ) -> Result<Instant, Error> {
        let s = self.settings.clone();
        let spec = |rv: Option<&str>| {
            object::body(&Spec {
                name: &s.node_name,
                namespace: &s.namespace,
                resource_version: rv,
                duration: s.renew_every * DURATION_PERIODS,
                acquired,
                renewed,
                annotations,
            })
        };
        let named = format!("{}/{}", self.collection, s.node_name);
        for _ in 0..TRIES {
            let outcome = match self.resource_version.take() {
                Some(rv) => self.send("PUT", &named, &spec(Some(&rv))).await?,
                None => match self.read(&named).await? {
                    Some(rv) => self.send("PUT", &named, &spec(Some(&rv))).await?,
                    None => self.send("POST", &self.collection, &spec(None)).await?,
                },
            };
            match outcome {
                Outcome::Written(rv, opened) => {
                    self.resource_version = Some(rv);
                    return Ok(opened);
                }
                Outcome::Conflict | Outcome::Gone => {}
            }
        }
        Err(Error::Status {
            code: 409,
            message: format!("the Lease changed under every one of {TRIES} writes"),
            retry_after: None,
        })
    }

    /// Reads the Lease's version; `None` when there is no Lease.
    async fn read(&mut self, named: &str) -> Result<Option<String>, Error> {
        let (code, body, _) = self.call("GET", named, None).await?;
        match code {
            200 => {
                let lease: Lease = json::from_slice(&body).map_err(Error::Decode)?;
                let s = &self.settings;
                if !lease.holder.is_empty()
                    && lease.holder != s.node_name
                    && !std::mem::replace(&mut self.other_holder_reported, true)
                {
                    warn!(
                        "kubernetes: the Lease {}/{} is held by {:?}: taking it over (do two routers share node_name {:?}?)",
                        s.namespace, s.node_name, lease.holder, s.node_name
                    );
                }
                Ok(Some(lease.metadata.resource_version))
            }
            404 => Ok(None),
            _ => Err(status_error(code, &body)),
        }
    }

    /// A create (`POST`) or an update (`PUT`), counted by result.
    async fn send(&self, method: &str, path: &str, body: &[u8]) -> Result<Outcome, Error> {
        let result = self.call(method, path, Some(body)).await;
        let label = match &result {
            Ok((200 | 201, _, _)) => "ok",
            Ok((409, _, _)) => "conflict",
            Ok((403, _, _)) => "forbidden",
            _ => "error",
        };
        metrics::counter!(WRITES, "result" => label).increment(1);
        let (code, body, opened) = result?;
        match code {
            200 | 201 => {
                let lease: Lease = json::from_slice(&body).map_err(Error::Decode)?;
                Ok(Outcome::Written(lease.metadata.resource_version, opened))
            }
            409 => {
                debug!("kubernetes: {method} {path}: 409, reading the Lease again");
                Ok(Outcome::Conflict)
            }
            404 if method == "PUT" => Ok(Outcome::Gone),
            _ => Err(status_error(code, &body)),
        }
    }

    /// One request on a connection of its own; the status, the body, and when the
    /// connection was opened (a connection opened after a change of the firewall proves the
    /// path through it; see [`Reached`]).
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>, Instant), Error> {
        let endpoint = &self.settings.endpoint;
        let opened = Instant::now();
        let mut conn = Conn::open(endpoint, IDLE).await?;
        let head = conn.send(endpoint, method, path, body).await?;
        let body = Body::new(&mut conn, &head)
            .read_all(MAX_BODY, "Lease answer")
            .await?;
        Ok((head.code, body, opened))
    }
}

/// An error answer as an [`Error::Status`], with the server's message.
fn status_error(code: u16, body: &[u8]) -> Error {
    let status: Status = json::from_slice(body).unwrap_or_default();
    Error::Status {
        code,
        message: status.message.chars().take(200).collect(),
        retry_after: None,
    }
}
