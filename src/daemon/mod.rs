//! `edgenetd run`: wires config, controllers, liveness, metrics, HTTP and systemd together, and
//! owns everything that orchestrates them: the controller loops ([`runner`]), the current
//! snapshot ([`snapshots`]), how a sync is observed ([`observed`]), the reaction to a reload
//! ([`reload`]), the table of built-in controllers ([`registry`]) and apply with automatic
//! rollback ([`confirm`], served on the control socket).
//!
//! Start-up order: load the config (invalid: every problem logged at `file:line:col`, and
//! the daemon runs the last good configuration or, with none, the built-in lockdown, reported
//! as degraded; see [`last_good`] and [`degraded`]), bind HTTP (a bind
//! error is fatal and immediate, before anything touches the kernel), optionally enter the
//! network namespace the kernel work belongs to, then start one loop per enabled controller on
//! one single-threaded smol executor. READY=1 follows every controller's first sync attempt
//! (and, fed by a cluster, the kubernetes source's first complete state or its cache).
//! SIGTERM/SIGINT: STOPPING=1, loops stop, exit 0 within a few seconds; kernel state stays in
//! place (a router keeps forwarding; `edgenetd cleanup` removes it).

#[cfg(feature = "kubernetes")]
pub mod cluster_config;
#[cfg(feature = "kubernetes")]
mod cluster_confirm;
#[cfg(feature = "kubernetes")]
pub mod cluster_kept;
pub mod confirm;
pub mod confirm_state;
pub mod degraded;
mod health_ports;
pub mod healthz;
pub mod includes;
#[cfg(feature = "kubernetes")]
mod kubernetes;
pub mod last_good;
mod netns;
pub mod observed;
pub mod plan;
pub mod registry;
pub mod reload;
pub mod runner;
mod signals;
pub mod snapshots;
pub mod spawner;
pub mod tracks;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use log::{error, info, warn};

use self::confirm::Confirmer;
use self::confirm_state::ConfirmState;
use self::degraded::{Degraded, DegradedInfo, Fallback, problem_lines};
use self::healthz::Healthz;
use self::last_good::LastGood;
use self::netns::enter_netns;
use self::reload::Reloader;
use self::signals::{Signal, Signals};
use self::snapshots::{Snapshots, TomlSink};
use self::spawner::Spawner;
use crate::clock::{Clock, SystemClock, unix_seconds};
use crate::config::{self, DesiredState};
use crate::control;
use crate::control::instance::canonical;
use crate::control::protocol::DaemonId;
use crate::control::server as control_server;
use crate::control::store::Store;
use crate::http::{self, HttpState};
use crate::liveness::Liveness;
use crate::metrics::{self, Exporter};
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::source;
use crate::sync::{Trigger, TriggerRx, trigger};
use crate::systemd::{self, ConfigProblem};

/// How long loops get to stop after SIGTERM before the process exits anyway.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Options of `edgenetd run`.
pub struct RunOptions {
    /// The main config file.
    pub config: PathBuf,
    /// Program the kernel inside this named network namespace (`ip netns`), while HTTP stays
    /// in the namespace edgenetd was started in.
    pub netns: Option<String>,
    /// The control socket `edgenetd apply` and `confirm` connect to (this instance's own,
    /// `control::instance`, unless given).
    pub control_socket: PathBuf,
    /// Where the confirmed configuration and a pending deadline are kept (this instance's
    /// own unless given).
    pub state_dir: PathBuf,
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(opts: RunOptions) -> ExitCode {
    crate::sys::single_malloc_arena();
    match start(&opts) {
        Ok(started) => match serve(&opts, started) {
            Ok(()) => {
                info!("stopped");
                ExitCode::SUCCESS
            }
            Err(Fatal) => ExitCode::from(1),
        },
        // Each step has logged why it failed.
        Err(Fatal) => ExitCode::from(1),
    }
}

/// A start-up step failed; it has logged why. Nothing was applied to the kernel.
struct Fatal;

/// What the start-up steps produce for the serving phase.
struct Started {
    /// The first snapshot: the first, valid configuration (with the cached cluster entries
    /// when fed by a cluster), or the fallback `degraded` names.
    desired: Arc<DesiredState>,
    /// Why the first snapshot is a fallback, when the config files did not validate.
    degraded: Option<DegradedInfo>,
    /// Keeps every configuration that comes into force.
    last_good: Arc<LastGood>,
    /// The kubernetes source, ready to start.
    #[cfg(feature = "kubernetes")]
    kubernetes: Option<kubernetes::Prepared>,
    /// What the HTTP server serves (sources add their /healthz objects to it).
    http: Arc<HttpState>,
    /// The heartbeat registry (HTTP already serves it).
    liveness: Arc<Liveness>,
    /// The Prometheus exporter (HTTP already serves it).
    exporter: Arc<Exporter>,
    /// SIGHUP, SIGTERM, SIGINT.
    signals: Signals,
    /// Why start-up rolled back a configuration that waited for confirm, if it did.
    rolled_back: Option<String>,
    /// The control socket, bound (`None`: unavailable, logged).
    control: Option<control_server::Bound>,
}

/// Every step before the first controller starts; each logs its own failure.
fn start(opts: &RunOptions) -> Result<Started, Fatal> {
    // Before the recovery: a second daemon on the same socket must stop before it touches
    // the first one's files.
    let control = bind_control(opts)?;
    // Before the first load, so the first sync already serves the confirmed configuration.
    let rolled_back = confirm::recover_at_start(&opts.config, &Store::new(&opts.state_dir));
    let last_good = Arc::new(LastGood::new(&opts.config, Store::new(&opts.state_dir)));
    let (desired, degraded, _digest) = load_first(opts, &last_good);
    let listener = http::bind(desired.daemon.listen).map_err(|e| {
        error!("cannot listen on {}: {e}", desired.daemon.listen);
        Fatal
    })?;
    // Before entering another namespace: an @abstract NOTIFY_SOCKET is looked up in the
    // namespace the socket was made in.
    systemd::notify::open();
    if let Some(ns) = &opts.netns {
        // Before any thread exists: namespaces are per thread and threads inherit them.
        enter_netns(ns).map_err(|e| {
            error!("cannot enter network namespace {ns}: {e}");
            Fatal
        })?;
        info!("programming the kernel in network namespace {ns}");
    }
    let signals = Signals::install().map_err(|e| {
        error!("cannot install signal handlers: {e}");
        Fatal
    })?;
    let (liveness, exporter, http) = start_observability(&desired, listener, degraded.is_none())?;
    // Fragments of the cluster's config kept at the last confirm join the files (never a
    // fallback's: those run because the files do not load).
    #[cfg(feature = "kubernetes")]
    let restore = degraded.is_none().then(|| kubernetes::Restore {
        main: &opts.config,
        state_dir: &opts.state_dir,
    });
    #[cfg(feature = "kubernetes")]
    let (kubernetes, desired) = kubernetes::prepare(desired, _digest, restore)?;
    #[cfg(not(feature = "kubernetes"))]
    let desired = Arc::new(desired);
    Ok(Started {
        desired,
        degraded,
        last_good,
        #[cfg(feature = "kubernetes")]
        kubernetes,
        http,
        liveness,
        exporter,
        signals,
        rolled_back,
        control,
    })
}

/// Binds the control socket. Another daemon on it is fatal: run on, this one would leave
/// `apply` and `confirm` changing the other. Any other failure (no directory for it, as when
/// the package's unit is copied by hand) leaves the router running without them.
fn bind_control(opts: &RunOptions) -> Result<Option<control_server::Bound>, Fatal> {
    match control_server::bind(&opts.control_socket) {
        Ok(bound) => {
            info!(
                "main config {}, netns {}: control socket {}, state directory {}",
                opts.config.display(),
                opts.netns.as_deref().unwrap_or("-"),
                opts.control_socket.display(),
                opts.state_dir.display()
            );
            Ok(Some(bound))
        }
        Err(e @ control_server::BindError::InUse { .. }) => {
            error!(
                "control socket {e}: another edgenetd runs on the same main config and netns, or was given the same --control-socket; give each daemon its own --control-socket and --state-dir (see docs/operations.md, Several daemons on one host); nothing was applied"
            );
            Err(Fatal)
        }
        Err(e) => {
            // A unit that runs another --config (a drop-in) gets a derived path its sandbox
            // cannot write: say how to keep the packaged one.
            let hint = if opts.control_socket == std::path::Path::new(control::DEFAULT_SOCKET) {
                ""
            } else {
                " (under the packaged unit's sandbox, add --control-socket /run/edgenetd/control.sock --state-dir /var/lib/edgenetd; see docs/operations.md, Several daemons on one host)"
            };
            warn!("control socket: {e}; `edgenetd apply` and `confirm` are unavailable{hint}");
            Ok(None)
        }
    }
}

/// The first load. A valid config is kept as the last good one. An invalid one is never
/// fatal (systemd would restart the daemon every few seconds while the router stood open):
/// every problem is logged, and the daemon runs the last good configuration, or with none
/// the built-in lockdown, until a valid config is loaded (SIGHUP, a file change, apply).
/// The third value is the files' content hash where the router's Lease shows it (feature
/// `kubernetes`, with `status_namespace`).
fn load_first(
    opts: &RunOptions,
    last_good: &Arc<LastGood>,
) -> (DesiredState, Option<DegradedInfo>, Option<String>) {
    let loaded = config::load_keeping_texts(&opts.config)
        .and_then(|(state, texts)| Ok((includes::vet_in(opts.netns.as_deref(), state)?, texts)));
    let e = match loaded {
        Ok((state, texts)) => {
            #[cfg(feature = "kubernetes")]
            let digest = kubernetes::status_digest(&state, &texts);
            #[cfg(not(feature = "kubernetes"))]
            let digest = None;
            last_good.keep(texts, std::time::SystemTime::now());
            return (state, None, digest);
        }
        Err(e) => e,
    };
    error!(
        "{} configuration problem(s) in {}:",
        e.count,
        opts.config.display()
    );
    for line in e.rendered.lines() {
        error!("  {line}");
    }
    let since = std::time::SystemTime::now();
    let problems = problem_lines(&e.rendered);
    let fallback = match last_good.load() {
        Ok((state, saved)) => {
            error!(
                "DEGRADED: running the last good configuration (kept {}) instead; fix the files and reload (SIGHUP, or save them again)",
                crate::clock::rfc3339(saved)
            );
            return (
                state,
                Some(DegradedInfo {
                    fallback: Fallback::LastGood { saved },
                    since,
                    count: e.count,
                    problems,
                }),
                None,
            );
        }
        Err(why) => why,
    };
    let (daemon, controllers) = match config::boot::read_settings_leniently(&opts.config) {
        Ok(settings) => settings,
        Err(se) => {
            error!(
                "[daemon] and [controller.*] do not validate on their own either ({}): the lockdown runs with their defaults and no management interface",
                se.first
            );
            (config::DaemonSettings::default(), Default::default())
        }
    };
    let management = daemon.management.clone();
    error!(
        "DEGRADED: no last good configuration ({fallback}): LOCKDOWN: input and forward are dropped but established/related, loopback and input from [daemon] management ({}); routes and services: none; fix the files and reload (SIGHUP, or save them again)",
        if management.is_empty() {
            "none".to_string()
        } else {
            management.join(", ")
        }
    );
    (
        config::boot::lockdown(daemon, controllers),
        Some(DegradedInfo {
            fallback: Fallback::Lockdown {
                management,
                why: fallback,
            },
            since,
            count: e.count,
            problems,
        }),
        None,
    )
}

/// The liveness registry, the exporter and what HTTP serves.
type Observability = (Arc<Liveness>, Arc<Exporter>, Arc<HttpState>);

/// Installs the metrics recorder, creates the liveness registry and serves HTTP.
fn start_observability(
    desired: &DesiredState,
    listener: TcpListener,
    config_valid: bool,
) -> Result<Observability, Fatal> {
    let exporter = Arc::new(Exporter::install().map_err(|e| {
        error!("{e}");
        Fatal
    })?);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    metrics::record_initial_load(unix_seconds(clock.wall()), config_valid);
    systemd::notify::describe_metrics();
    http::health_ports::describe_metrics();
    let liveness = Liveness::new(clock);
    let http_state = Arc::new(HttpState {
        liveness: liveness.clone(),
        exporter: Some(exporter.clone()),
        allow: desired.daemon.metrics_allow.clone(),
        sections: Default::default(),
        health_ports: Default::default(),
    });
    http::serve(listener, http_state.clone()).map_err(|e| {
        error!("cannot start the HTTP server: {e}");
        Fatal
    })?;
    info!(
        "edgenetd {} listening on http://{}",
        env!("CARGO_PKG_VERSION"),
        desired.daemon.listen
    );
    Ok((liveness, exporter, http_state))
}

/// Starts the loops and background tasks, then runs until a stop signal.
fn serve(opts: &RunOptions, started: Started) -> Result<(), Fatal> {
    let Started {
        desired,
        degraded: degraded_at_start,
        last_good,
        #[cfg(feature = "kubernetes")]
        kubernetes,
        http,
        liveness,
        exporter,
        signals,
        rolled_back,
        control,
    } = started;
    let ex = smol::LocalExecutor::new();
    let (shutdown_tx, shutdown) = async_channel::bounded::<()>(1);
    let snapshots = Snapshots::new(desired);
    // Bound in this namespace (the HTTP thread started after entering `--netns`): where the
    // node ports are, and where load balancers probe.
    let ports = http.health_ports.clone();
    snapshots.observe(Box::new(move |d| ports.set(health_ports::of(d))));
    let (sync_done, sync_done_rx) = trigger();
    let mut spawner = Spawner {
        ex: &ex,
        liveness: &liveness,
        snapshots: &snapshots,
        shutdown: &shutdown,
        sync_done: &sync_done,
        http: &http,
        loops: Vec::new(),
    };
    #[cfg(feature = "kubernetes")]
    let pod_commits = kubernetes.as_ref().map(kubernetes::pod_commits);
    #[cfg(not(feature = "kubernetes"))]
    let pod_commits = None;
    registry::start_all(&mut spawner, &snapshots.current(), pod_commits);
    let loops = spawner.loops;
    if loops.is_empty() {
        warn!("no controller is enabled: edgenetd only serves its HTTP endpoints");
    }
    #[cfg(feature = "kubernetes")]
    let (sink, cluster) = toml_sink(
        kubernetes,
        &snapshots,
        Healthz {
            liveness: &liveness,
            http: &http,
        },
        &shutdown,
    )?;
    #[cfg(not(feature = "kubernetes"))]
    let sink: Arc<dyn TomlSink> = snapshots.clone();
    let stopping = Arc::clone(&sink);
    let confirm_state = Arc::new(ConfirmState::default());
    let degraded = Degraded::new(liveness.clone());
    if let Some(info) = degraded_at_start {
        degraded.enter(info, snapshots.current());
    }
    Healthz {
        liveness: &liveness,
        http: &http,
    }
    .always(confirm_state.clone(), degraded.clone());
    // The HTTP server holds its own reference; sources have added their sections by now.
    drop(http);
    let reload_tx = spawn_background(
        &ex,
        Background {
            main: opts.config.clone(),
            snapshots,
            sink,
            liveness,
            exporter,
            sync_done: sync_done_rx,
            shutdown,
            control,
            identity: DaemonId {
                pid: std::process::id(),
                config: canonical(&opts.config).display().to_string(),
                netns: opts.netns.clone(),
            },
            store: Store::new(&opts.state_dir),
            confirm: confirm_state,
            rolled_back,
            last_good,
            degraded,
            #[cfg(feature = "kubernetes")]
            cluster,
        },
    );
    smol::block_on(ex.run(async {
        wait_for_stop(&signals, &reload_tx).await;
        drop(shutdown_tx);
        stop_loops(loops).await;
    }));
    stopping.stopping();
    Ok(())
}

/// Starts the cluster source, if configured; returns where reloads hand their TOML state,
/// and the router config from the cluster when `config_map` is set.
#[cfg(feature = "kubernetes")]
fn toml_sink(
    source: Option<kubernetes::Prepared>,
    snapshots: &Arc<Snapshots>,
    healthz: Healthz<'_>,
    shutdown: &Shutdown,
) -> Result<(Arc<dyn TomlSink>, Option<kubernetes::ClusterFeed>), Fatal> {
    match source {
        Some(prepared) => kubernetes::start(prepared, snapshots.clone(), healthz, shutdown.clone()),
        None => Ok((snapshots.clone(), None)),
    }
}

/// What the background tasks share.
struct Background {
    /// The main config file (watched, and reloaded).
    main: PathBuf,
    /// The current snapshot.
    snapshots: Arc<Snapshots>,
    /// Where a reload hands its TOML state.
    sink: Arc<dyn TomlSink>,
    /// The heartbeat registry.
    liveness: Arc<Liveness>,
    /// Its histogram buffers are drained every minute.
    exporter: Arc<Exporter>,
    /// Fired after every sync (the systemd supervisor wakes on it).
    sync_done: TriggerRx,
    /// Closed when the daemon stops.
    shutdown: Shutdown,
    /// The control socket, bound (`None`: unavailable).
    control: Option<control_server::Bound>,
    /// Who this daemon is, as the control socket's answers say.
    identity: DaemonId,
    /// The confirmed copy and the pending deadline.
    store: Store,
    /// The confirm state the reloader, the control socket and /healthz share.
    confirm: Arc<ConfirmState>,
    /// Why start-up rolled back, if it did.
    rolled_back: Option<String>,
    /// Keeps every configuration that comes into force.
    last_good: Arc<LastGood>,
    /// Whether a fallback runs instead of the config files.
    degraded: Arc<Degraded>,
    /// Router config from the cluster, when `[kubernetes] config_map` is set.
    #[cfg(feature = "kubernetes")]
    cluster: Option<kubernetes::ClusterFeed>,
}

/// Starts the systemd supervisor, the file watch, the reload server and the metrics upkeep;
/// returns the trigger that asks for a reload.
fn spawn_background(ex: &smol::LocalExecutor<'_>, bg: Background) -> Trigger {
    let problem = Arc::new(ConfigProblem::default());
    let (reload_tx, reload_rx) = trigger();
    ex.spawn(systemd::supervise(
        bg.liveness.clone(),
        problem.clone(),
        bg.sync_done,
        bg.shutdown.clone(),
    ))
    .detach();
    let last_good = bg.last_good.clone();
    ex.spawn(source::watch_files(
        bg.main.clone(),
        move || last_good.data_paths(),
        reload_tx.clone(),
        bg.shutdown.clone(),
    ))
    .detach();
    let (confirm_tx, confirm_rx) = trigger();
    let confirmer = Rc::new(Confirmer {
        main: bg.main.clone(),
        identity: bg.identity,
        store: bg.store,
        sink: bg.sink.clone(),
        liveness: bg.liveness.clone(),
        state: bg.confirm.clone(),
        problem: problem.clone(),
        wake: confirm_tx,
        last_good: bg.last_good.clone(),
        degraded: bg.degraded.clone(),
        #[cfg(feature = "kubernetes")]
        cluster: bg.cluster.as_ref().map(|c| c.config.clone()),
        #[cfg(feature = "kubernetes")]
        reload: reload_tx.clone(),
    });
    if let Some(reason) = bg.rolled_back {
        confirmer.record(reason);
    }
    #[cfg(feature = "kubernetes")]
    let cluster = bg.cluster.as_ref().map(|c| c.config.clone());
    #[cfg(feature = "kubernetes")]
    if let Some(feed) = bg.cluster {
        kubernetes::spawn_cluster_config(
            ex,
            feed,
            confirmer.clone(),
            bg.liveness.clone(),
            reload_tx.clone(),
            &bg.shutdown,
        );
    }
    #[cfg(feature = "kubernetes")]
    let confirm_wake = confirmer.wake.clone();
    spawn_control(ex, confirmer, confirm_rx, bg.control, &bg.shutdown);
    let reloader = Reloader {
        main: bg.main,
        snapshots: bg.snapshots,
        sink: bg.sink,
        liveness: bg.liveness,
        problem,
        last_rejected: None,
        confirm: bg.confirm,
        last_good: bg.last_good,
        degraded: bg.degraded,
        #[cfg(feature = "kubernetes")]
        cluster,
        #[cfg(feature = "kubernetes")]
        confirm_wake,
    };
    ex.spawn(reload::serve(reloader, reload_rx, bg.shutdown.clone()))
        .detach();
    let (exporter, shutdown) = (bg.exporter, bg.shutdown);
    ex.spawn(async move {
        let every_minute = || smol::Timer::after(Duration::from_secs(60));
        while unless_shutdown(&shutdown, every_minute()).await.is_some() {
            exporter.run_upkeep();
        }
    })
    .detach();
    reload_tx
}

/// Serves the control socket (if it was bound) and the confirm deadline.
fn spawn_control(
    ex: &smol::LocalExecutor<'_>,
    confirmer: Rc<Confirmer>,
    wake: TriggerRx,
    control: Option<control_server::Bound>,
    shutdown: &Shutdown,
) {
    if let Some(bound) = control {
        let handler: Rc<dyn control_server::Handler> = confirmer.clone();
        ex.spawn(control_server::serve(bound, handler, shutdown.clone()))
            .detach();
    }
    ex.spawn(confirm::watch_deadline(confirmer, wake, shutdown.clone()))
        .detach();
}

/// Serves SIGHUP until SIGTERM or SIGINT.
async fn wait_for_stop(signals: &Signals, reload: &Trigger) {
    loop {
        match signals.next().await {
            Signal::Reload => {
                info!("SIGHUP: reloading configuration");
                reload.fire();
            }
            Signal::Stop(name) => {
                info!(
                    "{name}: stopping (kernel state stays in place; `edgenetd cleanup` removes it)"
                );
                systemd::stopping();
                return;
            }
        }
    }
}

/// Waits for every loop to stop, at most [`STOP_GRACE`].
async fn stop_loops(loops: Vec<smol::Task<()>>) {
    let all = async {
        for l in loops {
            l.await;
        }
        false
    };
    let grace = async {
        smol::Timer::after(STOP_GRACE).await;
        true
    };
    if future::or(all, grace).await {
        warn!("a controller did not stop within {STOP_GRACE:?}; exiting anyway");
    }
}
