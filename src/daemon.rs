//! `edgenetd run`: wires config, controllers, health, metrics, HTTP and systemd together.
//!
//! Start-up order: load the config (invalid = exit 1, nothing applied), bind HTTP (a bind
//! error is fatal and immediate, before anything touches the kernel), optionally enter the
//! network namespace the kernel work belongs to, then start one loop per enabled controller on
//! one single-threaded smol executor. READY=1 follows every controller's first sync attempt.
//! SIGTERM/SIGINT: STOPPING=1, loops stop, exit 0 within a few seconds; kernel state stays in
//! place (a router keeps forwarding; `edgenetd cleanup` removes it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use log::{error, info, warn};

use crate::clock::{Clock, SystemClock, unix_seconds};
use crate::config::{self, ControllerSettings, DesiredState};
use crate::controller::runner::{LoopInputs, run_loop};
use crate::controller::{Controller, Snapshots, Trigger, TriggerRx, trigger};
use crate::health::Health;
use crate::http::{self, HttpState};
use crate::metrics::{self, Exporter};
use crate::shutdown::unless_shutdown;
use crate::source;
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
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(opts: RunOptions) -> ExitCode {
    let desired = match config::load(&opts.config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            error!(
                "{} configuration problem(s) in {}; nothing was applied",
                e.count,
                opts.config.display()
            );
            return ExitCode::from(1);
        }
    };
    let listener = match http::bind(desired.daemon.listen) {
        Ok(l) => l,
        Err(e) => {
            error!("cannot listen on {}: {e}", desired.daemon.listen);
            return ExitCode::from(1);
        }
    };
    if let Some(ns) = &opts.netns {
        // Before any thread exists: namespaces are per thread and threads inherit them.
        if let Err(e) = enter_netns(ns) {
            error!("cannot enter network namespace {ns}: {e}");
            return ExitCode::from(1);
        }
        info!("programming the kernel in network namespace {ns}");
    }
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            error!("cannot install signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let exporter = match Exporter::install() {
        Ok(e) => Arc::new(e),
        Err(e) => {
            error!("{e}");
            return ExitCode::from(1);
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    metrics::record_initial_load(unix_seconds(clock.wall()));
    let health = Health::new(clock);
    let http_state = Arc::new(HttpState {
        health: health.clone(),
        exporter: Some(exporter.clone()),
        allow: desired.daemon.metrics_allow.clone(),
    });
    if let Err(e) = http::serve(listener, http_state) {
        error!("cannot start the HTTP server: {e}");
        return ExitCode::from(1);
    }
    info!(
        "edgenetd {} listening on http://{}",
        env!("CARGO_PKG_VERSION"),
        desired.daemon.listen
    );

    let ex = smol::LocalExecutor::new();
    let (shutdown_tx, shutdown) = async_channel::bounded::<()>(1);
    let snapshots = Snapshots::new(Arc::new(desired));
    let (sync_done, sync_done_rx) = trigger();
    let mut loops = Vec::new();
    {
        let desired = snapshots.current();
        let mut spawner = Spawner {
            ex: &ex,
            health: &health,
            snapshots: &snapshots,
            shutdown: &shutdown,
            sync_done: &sync_done,
            loops: &mut loops,
        };
        spawn_builtin_controllers(&mut spawner, &desired);
        #[cfg(feature = "fault-injection")]
        for t in &desired.test_controllers {
            if t.settings.enabled {
                let (_kernel, kernel_rx) = trigger();
                spawner.spawn(
                    crate::controller::fault::TestController::new(&t.name),
                    kernel_rx,
                    test_settings,
                );
            }
        }
    }
    if loops.is_empty() {
        warn!("no controller is enabled: edgenetd only serves its HTTP endpoints");
    }
    let problem = Arc::new(ConfigProblem::default());
    let (reload_tx, reload_rx) = trigger();
    ex.spawn(systemd::supervise(
        health.clone(),
        problem.clone(),
        sync_done_rx,
        shutdown.clone(),
    ))
    .detach();
    ex.spawn(source::watch_files(
        opts.config.clone(),
        reload_tx.clone(),
        shutdown.clone(),
    ))
    .detach();
    ex.spawn(source::reload_loop(
        opts.config.clone(),
        reload_rx,
        snapshots.clone(),
        health.clone(),
        problem,
        shutdown.clone(),
    ))
    .detach();
    let upkeep_exporter = exporter.clone();
    let upkeep_shutdown = shutdown.clone();
    ex.spawn(async move {
        let every_minute = || smol::Timer::after(Duration::from_secs(60));
        while unless_shutdown(&upkeep_shutdown, every_minute())
            .await
            .is_some()
        {
            upkeep_exporter.run_upkeep();
        }
    })
    .detach();

    smol::block_on(ex.run(async {
        loop {
            match signals.next().await {
                Signal::Reload => {
                    info!("SIGHUP: reloading configuration");
                    reload_tx.fire();
                }
                Signal::Stop(name) => {
                    info!("{name}: stopping (kernel state stays in place; `edgenetd cleanup` removes it)");
                    systemd::stopping();
                    break;
                }
            }
        }
        drop(shutdown_tx);
        let all = async {
            for l in loops {
                l.await;
            }
        };
        let timed_out = future::or(
            async {
                all.await;
                false
            },
            async {
                smol::Timer::after(STOP_GRACE).await;
                true
            },
        )
        .await;
        if timed_out {
            warn!("a controller did not stop within {STOP_GRACE:?}; exiting anyway");
        }
    }));
    info!("stopped");
    ExitCode::SUCCESS
}

/// Settings of a built-in controller from a snapshot.
fn builtin_settings(desired: &DesiredState, name: &str) -> ControllerSettings {
    desired.controller(name)
}

#[cfg(feature = "fault-injection")]
fn test_settings(desired: &DesiredState, name: &str) -> ControllerSettings {
    desired
        .test_controllers
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.settings)
        .unwrap_or_default()
}

/// Starts one loop per enabled built-in controller.
fn spawn_builtin_controllers(spawner: &mut Spawner<'_, '_>, desired: &DesiredState) {
    use crate::controller::{policy, route, service};
    // One nftables generation watch shared by both nftables controllers.
    let watch = crate::dataplane::nft::GenerationWatch::new();
    for name in config::CONTROLLERS {
        if !desired.controller(name).enabled {
            info!("controller {name} is disabled: not started, owns nothing");
            continue;
        }
        let (trigger, kernel_rx) = trigger();
        match name {
            "policy" => {
                policy::describe_metrics();
                spawner.spawn(
                    policy::PolicyController::new(trigger, watch.clone()),
                    kernel_rx,
                    builtin_settings,
                );
            }
            "service" => {
                service::describe_metrics();
                spawner.spawn(
                    service::ServiceController::new(trigger, watch.clone()),
                    kernel_rx,
                    builtin_settings,
                );
            }
            "route" => {
                route::describe_metrics();
                spawner.spawn(
                    route::RouteController::new(trigger),
                    kernel_rx,
                    builtin_settings,
                );
            }
            other => unreachable!("CONTROLLERS lists only built-in controllers, not {other}"),
        }
    }
}

/// Spawns controller loops on the executor with their health registration.
struct Spawner<'a, 'ex> {
    ex: &'a smol::LocalExecutor<'ex>,
    health: &'a Arc<Health>,
    snapshots: &'a Arc<Snapshots>,
    shutdown: &'a async_channel::Receiver<()>,
    sync_done: &'a Trigger,
    loops: &'a mut Vec<smol::Task<()>>,
}

impl<'ex> Spawner<'_, 'ex> {
    fn spawn<C: Controller + 'ex>(
        &mut self,
        controller: C,
        kernel_rx: TriggerRx,
        settings: fn(&DesiredState, &str) -> ControllerSettings,
    ) {
        let name = controller.name();
        let window = settings(&self.snapshots.current(), name).liveness_window();
        let handle = self.health.register(name, window);
        metrics::register_controller(name);
        let inputs = LoopInputs {
            snapshot_rx: self.snapshots.subscribe(handle.clone()),
            health: handle,
            snapshots: self.snapshots.clone(),
            kernel_rx,
            shutdown: self.shutdown.clone(),
            settings,
            sync_done: Some(self.sync_done.clone()),
        };
        self.loops.push(self.ex.spawn(run_loop(controller, inputs)));
    }
}

fn enter_netns(name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: a valid namespace fd; setns only changes this (still single) thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

enum Signal {
    Reload,
    Stop(&'static str),
}

/// SIGHUP, SIGTERM and SIGINT, delivered to the executor through a channel.
struct Signals(async_channel::Receiver<Signal>);

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGTERM, SIGINT])?;
        let (tx, rx) = async_channel::unbounded();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let s = match sig {
                        SIGHUP => Signal::Reload,
                        SIGTERM => Signal::Stop("SIGTERM"),
                        _ => Signal::Stop("SIGINT"),
                    };
                    if tx.send_blocking(s).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Signals(rx))
    }

    async fn next(&self) -> Signal {
        self.0
            .recv()
            .await
            .unwrap_or(Signal::Stop("signal thread ended"))
    }
}
