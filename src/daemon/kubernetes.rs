//! The Kubernetes source in the daemon (feature `kubernetes`): the watcher on its own thread,
//! the composer between it, the reloads and the snapshots, and the cache.
//!
//! - The first snapshot is the TOML state with the cached cluster state, so a restart during
//!   an API outage keeps the cluster-derived rules from the very first sync.
//! - A reload hands its TOML to the composer ([`TomlSink`]), which publishes at once; the
//!   watcher hands it the cluster's parts after each burst of changes. Both publish under the
//!   composer's lock, so snapshots never go back in time.
//! - The cache is written when the cluster state is first complete, then at most every
//!   [`CACHE_EVERY`] while it changes, and at a clean stop (atomically; a failure is logged
//!   and counted, never fatal). Not after every change: at 5,000 Services the file is 2 MB,
//!   whose writing took longer than the change itself took to reach the kernel, and the
//!   file may live on flash (issue 24).
//! - Readiness: the watcher is registered in the liveness registry as `kubernetes`; it counts as
//!   ready once every enabled kind was listed or the cache was loaded.
//! - With `status_namespace`, the router's Lease: its writer's thread reads the liveness
//!   registry's verdict (the systemd watchdog's), the watched kinds' states and the TOML in
//!   force, which every reload hands over with its files ([`TomlSink::take_toml`]). With
//!   `config_map` too, it shows the ConfigMap's version, and its renewals are the second
//!   proof a config from the cluster waits for ([`Reached`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use log::{error, info, warn};

use std::rc::Rc;

use super::Fatal;
use super::cluster_config::{self, ClusterConfig};
use super::cluster_kept;
pub use super::cluster_kept::Restore;
use super::confirm::Confirmer;
use super::healthz::Healthz;
use super::snapshots::{Snapshots, TomlSink};
use crate::clock::rfc3339;
use crate::config::kubernetes::{Connection, Credentials, KubernetesConfig, SecretPath};
use crate::config::{ConfigTexts, DesiredState};
use crate::kubernetes::cache::{self, Cache};
use crate::kubernetes::client::Store;
use crate::kubernetes::client::{Auth, Endpoint, Transport};
use crate::kubernetes::compose::{self, ClusterPart, Composer, Kind};
use crate::kubernetes::freshness::Freshness;
use crate::kubernetes::lease::annotations::{Loop, LoopState};
use crate::kubernetes::lease::in_force::InForce;
use crate::kubernetes::lease::{self, writer};
use crate::kubernetes::objects::ConfigMap;
use crate::kubernetes::reached::Reached;
use crate::kubernetes::watch::status::Statuses;
use crate::kubernetes::watch::{self, Settings, Watcher, local};
use crate::liveness::{Heartbeat, Liveness, LivenessReport};
use crate::shutdown::Shutdown;
use crate::sync::{Trigger, TriggerRx, trigger};

/// The loops that read nothing of the services (so a snapshot that changed only services
/// does not wake them).
const BLIND_TO_SERVICES: [&str; 2] = ["policy", "route"];

/// The shortest time between two writes of the cache file (the first, when the cluster state
/// is complete, is at once). A change is written at the watcher's next tick after this, so
/// at most about twice this late; a restart from the cache lists the cluster again anyway,
/// so what a crash loses of the last seconds only matters during an API outage.
pub const CACHE_EVERY: Duration = Duration::from_secs(5);

/// The service account's files in a pod.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The source, prepared but not running.
pub struct Prepared {
    /// The reflectors.
    watcher: Watcher,
    /// Their states, for /healthz and the metrics.
    statuses: Statuses,
    /// The composer, holding the first snapshot's parts.
    composer: Composer,
    /// Where the cluster state is cached.
    cache: Cache,
    /// The composer's generation of what the cache held at start.
    cached: Option<u64>,
    /// Whether the state in force is this run's or the cache's, and as of when (shared with
    /// /healthz).
    freshness: Arc<Mutex<Freshness>>,
    /// The stamp the cache file holds.
    written: Option<SystemTime>,
    /// Router config from the cluster, when `config_map` is set.
    cluster: Option<ClusterFeed>,
    /// The router's Lease, with `status_namespace`.
    status: Option<writer::Settings>,
    /// The TOML in force (its hash is computed only for the Lease).
    in_force: Arc<InForce>,
}

/// Router config from the cluster (`[kubernetes] config_map`): its state, and what the
/// watcher thread hands the daemon's tasks.
pub struct ClusterFeed {
    /// Which version is in force, pending, refused (shared with the reloads, the confirmer
    /// and /healthz).
    pub config: Arc<ClusterConfig>,
    /// The ConfigMap's store.
    store: Store<ConfigMap>,
    /// Fired when the store changed.
    changed: TriggerRx,
    /// Opens the ConfigMap's watch again (a request whose answer proves the path).
    reconnect: Trigger,
    /// Every answered request of the watcher.
    reached: Arc<Reached>,
}

/// Builds the source for `[kubernetes]` (if the section is there) and the first snapshot:
/// the TOML state with the cached cluster state. `digest` is the content hash of the files
/// `toml` was loaded from ([`status_digest`]; `None` when a fallback runs instead of them).
pub fn prepare(
    toml: DesiredState,
    digest: Option<String>,
    restore: Option<Restore<'_>>,
) -> Result<(Option<Prepared>, Arc<DesiredState>), Fatal> {
    let mut toml = Arc::new(toml);
    let Some(config) = toml.kubernetes.clone() else {
        return Ok((None, toml));
    };
    let settings = settings(&config, |name| std::env::var(name).ok()).map_err(|e| {
        error!("[kubernetes]: {e}");
        Fatal
    })?;
    watch::metrics::describe();
    compose::describe_metrics();
    let over = match settings.endpoint.transport {
        Transport::Tls { .. } => "TLS",
        Transport::Plain => "plain HTTP to a node-local proxy",
    };
    info!(
        "kubernetes: watching {} over {over} as node {}",
        settings.endpoint.authority(),
        settings.node_name
    );
    let node = settings.node_name.clone();
    let settings_for_status = (
        settings.endpoint.clone(),
        settings.path_prefix.clone(),
        settings.node_name.clone(),
    );
    let mut watcher = Watcher::new(settings);
    let cluster = config.config_map.as_ref().map(|cm| {
        cluster_config::describe_metrics();
        let (changed, changed_rx) = trigger();
        let (reconnect, reconnect_rx) = trigger();
        let store = watcher.watch_config_map(cm, changed, reconnect_rx);
        info!(
            "kubernetes: router config from configmap {cm} (confirmed within {})",
            crate::config::format_duration(config.config_confirm)
        );
        let mut state = ClusterConfig::new(cm.clone(), config.config_confirm, node.clone());
        if let Some(restore) = restore {
            let start = cluster_kept::at_start(restore, cm, &node, toml.clone());
            toml = start.toml;
            let (restored, shadowed) = start.restored.unzip();
            state = state.keeping(start.keeper, restored, shadowed.unwrap_or_default());
        }
        ClusterFeed {
            config: Arc::new(state),
            store,
            changed: changed_rx,
            reconnect,
            reached: watcher.reached(),
        }
    });
    let statuses = watcher.statuses();
    let cache = Cache::new(
        config
            .cache_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(cache::DEFAULT_PATH)),
    );
    let loaded = cache.load(config.cache_max_age, SystemTime::now());
    let stamp = loaded.as_ref().map(|l| l.as_of);
    let (composer, first) = Composer::start(toml, loaded.map(|l| l.state));
    let cached = stamp.is_some().then(|| composer.generation());
    let status = config.status_namespace.as_ref().map(|namespace| {
        let renew_every = crate::fault_hook!(
            crate::fault::lease::renew_every().unwrap_or(lease::RENEW_EVERY),
            lease::RENEW_EVERY
        );
        writer::Settings {
            endpoint: settings_for_status.0.clone(),
            path_prefix: settings_for_status.1.clone(),
            node_name: settings_for_status.2.clone(),
            namespace: namespace.clone(),
            renew_every,
        }
    });
    // The hash is worth its computing only where the Lease shows it.
    let in_force = Arc::new(InForce::new(digest));
    let prepared = Prepared {
        watcher,
        statuses,
        composer,
        cache,
        cached,
        freshness: Arc::new(Mutex::new(Freshness::start(stamp))),
        written: stamp.flatten(),
        cluster,
        status,
        in_force,
    };
    Ok((Some(prepared), first))
}

/// What the policy controller tells of its commits: the known pods' addresses go to the
/// watcher's clock, which times each new pod from its arrival
/// (`edgenetd_kubernetes_pod_enforce_seconds`).
pub fn pod_commits(prepared: &Prepared) -> crate::controller::policy::sync::PodCommits {
    watch::enforce::EnforceClock::describe();
    let clock = prepared.watcher.enforce_clock();
    Arc::new(move |pods, at| {
        if let Some(u) = &pods.unknown {
            clock.committed(&u.known, at);
        }
    })
}

/// The content hash of the first configuration's files, where the Lease shows it (it is
/// worth its computing only there).
pub fn status_digest(state: &DesiredState, texts: &ConfigTexts) -> Option<String> {
    let status = state.kubernetes.as_ref()?.status_namespace.as_ref();
    status.map(|_| lease::in_force::digest(texts))
}

/// Resolves the connection (with the environment `env` reads), the node name and the
/// selectors.
fn settings(
    config: &KubernetesConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Settings, String> {
    let creds_dir = env(crate::config::kubernetes::CREDENTIALS_DIRECTORY).map(PathBuf::from);
    let resolve = |p: &SecretPath| p.resolve(creds_dir.as_deref()).map_err(|e| e.to_string());
    let (endpoint, path_prefix) = match &config.connection {
        Connection::InCluster => {
            let var = |name: &str| {
                env(name).ok_or_else(|| format!("in_cluster = true but ${name} is not set"))
            };
            let host = var("KUBERNETES_SERVICE_HOST")?;
            let port = var("KUBERNETES_SERVICE_PORT")?;
            let endpoint = Endpoint {
                host,
                port: port
                    .parse()
                    .map_err(|_| format!("$KUBERNETES_SERVICE_PORT {port:?} is not a port"))?,
                transport: Transport::Tls {
                    ca_file: PathBuf::from(SERVICE_ACCOUNT).join("ca.crt"),
                },
                auth: Auth::TokenFile(PathBuf::from(SERVICE_ACCOUNT).join("token")),
            };
            (endpoint, String::new())
        }
        Connection::Server {
            server,
            ca_file,
            credentials,
        } => {
            let auth = match credentials {
                Credentials::Token(t) => Auth::TokenFile(resolve(t)?),
                Credentials::ClientCert { cert, key } => Auth::ClientCert {
                    cert: resolve(cert)?,
                    key: resolve(key)?,
                },
            };
            let endpoint = Endpoint {
                host: server.host.clone(),
                port: server.port,
                transport: Transport::Tls {
                    ca_file: resolve(ca_file)?,
                },
                auth,
            };
            (endpoint, server.path.clone())
        }
        Connection::LocalProxy { server, token_file } => {
            let auth = match token_file {
                Some(t) => Auth::TokenFile(resolve(t)?),
                None => Auth::None,
            };
            let endpoint = Endpoint {
                host: server.host.clone(),
                port: server.port,
                transport: Transport::Plain,
                auth,
            };
            (endpoint, server.path.clone())
        }
    };
    let node_name = local::node_name(config.node_name.as_deref())?;
    Ok(Settings {
        endpoint,
        path_prefix,
        node_name,
        feeds: config.feeds.clone(),
        service_selector: config.service_selector.clone(),
        node_selector: config.node_selector.clone(),
        network_policy_selector: config.network_policy_selector.clone(),
        service_cidrs: config.service_cidrs.clone(),
        cluster_cidrs: config.cluster_cidrs.clone(),
        node_port_addresses: config.node_port_addresses.clone(),
        isolate_unknown_pods: config.isolate_unknown_pods,
        pod_cidrs: config.pod_cidrs.clone(),
        log_denied: config.log_denied,
        network_policy_mode: config.network_policy_mode,
    })
}

/// What the watcher thread and the reloads share.
struct Shared {
    /// The composer and what was last cached.
    inner: Mutex<Inner>,
    /// Where composed snapshots go.
    snapshots: Arc<Snapshots>,
    /// The kinds readiness waits for.
    kinds: Vec<Kind>,
    /// The watcher's registration (readiness is reported on it).
    heartbeat: Heartbeat,
    /// Readiness was reported.
    ready: AtomicBool,
    /// Every watched kind's state.
    statuses: Statuses,
    /// A first attempt that left the state incomplete was reported.
    incomplete_reported: AtomicBool,
    /// The state's freshness (shared with /healthz; locked inside `inner`'s lock, never the
    /// other way round).
    freshness: Arc<Mutex<Freshness>>,
    /// The TOML in force, when the Lease shows it.
    in_force: Option<Arc<InForce>>,
}

/// The state behind [`Shared`]'s lock.
struct Inner {
    /// The one merge step.
    composer: Composer,
    /// The cache file.
    cache: Cache,
    /// The composer's generation of the cluster state last written to the cache (or
    /// loaded from it): a generation, not a copy of the state, which would be one more copy
    /// of every service.
    cached: Option<u64>,
    /// The last cache write failed (the next failure is logged quietly, not again as a
    /// warning, until a write succeeds).
    cache_failing: bool,
    /// When the cache was last written (or a write last failed): the next waits for
    /// [`CACHE_EVERY`] after it.
    cache_tried: Option<Instant>,
    /// The stamp the cache file holds (see [`Freshness`]).
    written: Option<SystemTime>,
}

impl Shared {
    /// Composes and publishes if the result changed; caches a changed cluster state.
    fn compose(&self, inner: &mut Inner) {
        if let Some(next) = inner.composer.take_if_changed() {
            if inner.composer.services_only() {
                // An endpoint change wakes the service controller alone: the policy and
                // route controllers read none of it (issue 24).
                self.snapshots
                    .publish_waking(next, &|name| !BLIND_TO_SERVICES.contains(&name));
            } else {
                self.snapshots.publish(next);
            }
        }
        let ready = inner.composer.ready(&self.kinds);
        let (stamp, stamp_due) = self.freshness(inner);
        if inner.cache_tried.is_none_or(|t| t.elapsed() >= CACHE_EVERY) {
            Self::cache(ready, inner, stamp, stamp_due);
        }
        if ready && !self.ready.load(Ordering::Relaxed) {
            self.ready.store(true, Ordering::Relaxed);
            info!("kubernetes: every enabled kind is in force");
            self.heartbeat.source_ready();
        } else if !ready && !self.incomplete_reported.load(Ordering::Relaxed) {
            // READY=1 follows first attempts: an API server unreachable at boot (as it may be
            // until the network this unit is ordered before comes up) must not hold the boot.
            if let Some(why) = self.statuses.first_attempt_failed() {
                self.incomplete_reported.store(true, Ordering::Relaxed);
                warn!("kubernetes: {why}; serving the TOML state until the cluster answers");
                self.heartbeat.source_incomplete(why);
            }
        }
    }

    /// The state's freshness, brought up to now: the stamp to write, and whether the file's
    /// stamp is due to move on although the state did not change.
    fn freshness(&self, inner: &Inner) -> (Option<SystemTime>, bool) {
        let mut f = self.freshness.lock().unwrap_or_else(|p| p.into_inner());
        let listed = inner.composer.listed(&self.kinds);
        f.observe(listed, self.statuses.all_live(), SystemTime::now());
        (f.stamp(), f.stamp_due(inner.written))
    }

    /// Writes the cluster state to the cache if it changed since it was last written (or
    /// only its stamp is due) and is complete (`ready`): before every kind is in (or the
    /// cache was loaded) the state is partial, and caching it would make a restart during an
    /// outage take it for the whole.
    fn cache(ready: bool, inner: &mut Inner, stamp: Option<SystemTime>, stamp_due: bool) {
        let generation = inner.composer.generation();
        if !ready || (inner.cached == Some(generation) && !stamp_due) {
            return;
        }
        inner.cache_tried = Some(Instant::now());
        match inner.cache.store(inner.composer.cluster(), stamp) {
            Ok(()) => {
                inner.cached = Some(generation);
                inner.written = stamp;
                inner.cache_failing = false;
            }
            Err(e) => {
                if std::mem::replace(&mut inner.cache_failing, true) {
                    log::debug!("kubernetes: cannot cache the cluster state: {e}");
                } else {
                    warn!(
                        "kubernetes: cannot cache the cluster state (a restart during an API outage would not keep it): {e}"
                    );
                }
                metrics::counter!(watch::metrics::CACHE_WRITE_FAILURES).increment(1);
            }
        }
    }

    /// The watcher's parts after a burst of changes.
    fn cluster(&self, parts: Vec<ClusterPart>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for part in parts {
            inner.composer.set_cluster(part);
        }
        self.compose(&mut inner);
    }
}

impl TomlSink for Shared {
    fn take_toml(&self, toml: Arc<DesiredState>, texts: Option<&ConfigTexts>) {
        if let Some(in_force) = &self.in_force {
            in_force.took(texts);
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.composer.set_toml(toml);
        self.compose(&mut inner);
    }

    fn stopping(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ready = inner.composer.ready(&self.kinds);
        let (stamp, stamp_due) = self.freshness(&inner);
        Self::cache(ready, &mut inner, stamp, stamp_due);
    }
}

/// Starts the watcher thread; returns where reloads hand their TOML, and the router config
/// from the cluster for the daemon's tasks.
pub fn start(
    prepared: Prepared,
    snapshots: Arc<Snapshots>,
    healthz: Healthz<'_>,
    shutdown: Shutdown,
) -> Result<(Arc<dyn TomlSink>, Option<ClusterFeed>), Fatal> {
    let Prepared {
        watcher,
        statuses,
        composer,
        cache,
        cached,
        freshness,
        written,
        cluster,
        status,
        in_force,
    } = prepared;
    let for_healthz = freshness.clone();
    let config_map = cluster.as_ref().map(|c| c.config.clone());
    let state = Box::new(move || {
        let f = for_healthz.lock().unwrap_or_else(|p| p.into_inner());
        let mut doc = state_healthz(&f, SystemTime::now());
        if let Some(c) = &config_map {
            doc["configMap"] = c.healthz(SystemTime::now());
        }
        doc
    });
    let handle = healthz.kubernetes(statuses.clone(), state, watch::WINDOW);
    let shared = Arc::new(Shared {
        kinds: watcher.kinds(),
        inner: Mutex::new(Inner {
            composer,
            cache,
            cached,
            cache_failing: false,
            cache_tried: None,
            written,
        }),
        snapshots,
        heartbeat: handle.clone(),
        ready: AtomicBool::new(false),
        statuses: statuses.clone(),
        incomplete_reported: AtomicBool::new(false),
        freshness: freshness.clone(),
        in_force: status.is_some().then(|| in_force.clone()),
    });
    shared.compose(&mut shared.inner.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(settings) = status {
        let sources = writer::Sources {
            loops: loops_probe(healthz.liveness.clone()),
            in_force,
            freshness,
            config_map: cluster.as_ref().map(|c| {
                let config = c.config.clone();
                Box::new(move || config.lease_status()) as writer::ConfigMapProbe
            }),
            // A config from the cluster then waits for a renewal too.
            reached: cluster.as_ref().map(|c| c.reached.clone()),
        };
        info!(
            "kubernetes: keeping the Lease {}/{} (renewed every {:?} while every loop is live)",
            settings.namespace, settings.node_name, settings.renew_every
        );
        // A thread that cannot start costs the Lease, never the router.
        if let Err(e) = writer::spawn(settings, sources, shutdown.clone()) {
            warn!("kubernetes: cannot start the Lease writer's thread: {e}; no Lease is kept");
        }
    }
    let for_thread = shared.clone();
    std::thread::Builder::new()
        .name("kubernetes".into())
        .spawn(move || {
            watcher.run(handle, shutdown, statuses, |parts| {
                for_thread.cluster(parts)
            });
        })
        .map_err(|e| {
            error!("cannot start the kubernetes watcher thread: {e}");
            Fatal
        })?;
    Ok((shared, cluster))
}

/// Starts the tasks of the router config from the cluster: one follows the ConfigMap (a new
/// version asks `reload` for a load), the other confirms a version in force once the router
/// reached the API server with it.
pub fn spawn_cluster_config(
    ex: &smol::LocalExecutor<'_>,
    feed: ClusterFeed,
    confirmer: Rc<Confirmer>,
    liveness: Arc<Liveness>,
    reload: Trigger,
    shutdown: &Shutdown,
) {
    ex.spawn(cluster_config::follow(
        feed.config.clone(),
        feed.store,
        feed.changed,
        reload,
        shutdown.clone(),
    ))
    .detach();
    ex.spawn(super::cluster_confirm::confirm_when_reached(
        confirmer,
        liveness,
        feed.reached,
        feed.reconnect,
        shutdown.clone(),
    ))
    .detach();
}

/// /healthz's `kubernetes.state`, `asOf` and `ageSeconds`: where the cluster state in force
/// comes from and when it was last known to be the cluster's.
fn state_healthz(f: &Freshness, now: SystemTime) -> serde_json::Value {
    let as_of = f.as_of();
    serde_json::json!({
        "state": f.source().word(),
        "asOf": as_of.map(rfc3339),
        "ageSeconds": as_of.map(|t| now.duration_since(t).unwrap_or_default().as_secs()),
    })
}

/// The loops as the Lease shows them, read from the registry: whether all are live (the
/// registry's verdict, as the systemd watchdog reads it) and each one's state.
fn loops_probe(liveness: Arc<Liveness>) -> writer::LoopsProbe {
    Box::new(move || {
        let report = liveness.report();
        (report.all_live(), loops_of(&report))
    })
}

/// Each loop's state in `report`.
fn loops_of(report: &LivenessReport) -> Vec<Loop> {
    report
        .controllers
        .iter()
        .map(|c| Loop {
            name: c.name.clone(),
            state: match (c.live, &c.last_error, c.last_success) {
                (false, _, _) => LoopState::Stalled,
                (true, Some(_), _) => LoopState::Failing,
                (true, None, None) => LoopState::Starting,
                (true, None, Some(_)) => LoopState::Ready,
            },
            error: c.last_error.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
