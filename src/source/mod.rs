//! Where desired state comes from: the TOML files (this module) and, with the `kubernetes`
//! feature, the cluster (not built yet).
//!
//! A reload is asked for by SIGHUP or by a change to any config file (the main file, any
//! `conf.d/*.toml`, or the set of files in `conf.d`). Changes are noticed through inotify on
//! the config directory and `conf.d` (no wake-up while nothing changes); once events have been
//! quiet for [`SETTLE`] (an editor saves in steps), the files' fingerprints decide whether
//! anything really changed. Where inotify is unavailable, the files are polled every
//! [`POLL_INTERVAL`] instead.
//!
//! An invalid new config never replaces the last good one: its errors are logged (every one,
//! with file:line:col), counted, and shown on the systemd STATUS line until a good load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_lite::future;
use log::{error, info, warn};

use crate::clock::unix_seconds;
use crate::config::{self, DesiredState};
use crate::controller::{Snapshots, Trigger, TriggerRx};
use crate::health::Health;
use crate::metrics::record_config_reload;
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::systemd::{self, ConfigProblem};

mod inotify;

/// How often config files are checked for changes when inotify is unavailable.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long change events must be quiet before the files are compared.
pub const SETTLE: Duration = Duration::from_millis(200);

/// A file's modification time, size and inode: what changes when it is edited or replaced.
type FileStamp = (SystemTime, u64, u64);

/// What identifies one version of the config files on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(Vec<(PathBuf, Option<FileStamp>)>);

/// Reads the fingerprint of every file a load of `main` would read.
pub fn fingerprint(main: &Path) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    Fingerprint(
        config::config_files(main)
            .into_iter()
            .map(|p| {
                let meta = std::fs::metadata(&p).ok().map(|m| {
                    (
                        m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        m.len(),
                        m.ino(),
                    )
                });
                (p, meta)
            })
            .collect(),
    )
}

/// Fires `reload` whenever the config files change (until shutdown).
pub async fn watch_files(main: PathBuf, reload: Trigger, shutdown: Shutdown) {
    let dir = main
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let watch = inotify::DirWatch::new().and_then(|w| w.add(&dir).map(|()| w));
    match watch {
        Ok(watch) => watch_with_inotify(&main, watch, reload, shutdown).await,
        Err(e) => {
            warn!(
                "cannot watch {} with inotify ({e}); polling the config files every {POLL_INTERVAL:?}",
                dir.display()
            );
            poll_files(main, reload, shutdown).await;
        }
    }
}

async fn watch_with_inotify(
    main: &Path,
    watch: inotify::DirWatch,
    reload: Trigger,
    shutdown: Shutdown,
) {
    let conf_d = config::conf_d_dir(main);
    // conf.d may not exist yet; it is added again after every event (adding twice is harmless).
    let _ = watch.add(&conf_d);
    let mut seen = fingerprint(main);
    loop {
        let changed = async {
            if let Err(e) = watch.changed().await {
                warn!("config watch failed ({e}); retrying in {POLL_INTERVAL:?}");
                smol::Timer::after(POLL_INTERVAL).await;
            }
        };
        if unless_shutdown(&shutdown, changed).await.is_none() {
            return;
        }
        // Let the burst of an editor's save settle.
        while future::or(async { watch.changed().await.is_ok() }, async {
            smol::Timer::after(SETTLE).await;
            false
        })
        .await
        {}
        let _ = watch.add(&conf_d);
        let now = fingerprint(main);
        if now != seen {
            info!("config files changed; reloading");
            seen = now;
            reload.fire();
        }
    }
}

/// The fallback: compare fingerprints every [`POLL_INTERVAL`].
async fn poll_files(main: PathBuf, reload: Trigger, shutdown: Shutdown) {
    let mut seen = fingerprint(&main);
    let mut pending: Option<Fingerprint> = None;
    loop {
        if unless_shutdown(&shutdown, smol::Timer::after(POLL_INTERVAL))
            .await
            .is_none()
        {
            return;
        }
        let now = fingerprint(&main);
        if now == seen {
            pending = None;
            continue;
        }
        // Take a change once it held still for one poll (editors write in steps).
        if pending.as_ref() == Some(&now) {
            info!("config files changed; reloading");
            seen = now;
            pending = None;
            reload.fire();
        } else {
            pending = Some(now);
        }
    }
}

/// Loads the configuration again; publishes it when valid, keeps the old one otherwise.
/// Returns whether the new configuration was taken.
pub fn reload(
    main: &Path,
    snapshots: &Snapshots,
    health: &Health,
    problem: &ConfigProblem,
) -> bool {
    systemd::reloading();
    let wall = unix_seconds(health.clock().wall());
    let taken = match config::load(main) {
        Ok(next) => {
            warn_about_restart_only_changes(&snapshots.current(), &next);
            let files = next.files.len();
            snapshots.publish(Arc::new(next));
            record_config_reload(true, wall);
            problem.set(None);
            info!("config reloaded from {} ({files} file(s))", main.display());
            true
        }
        Err(e) => {
            error!(
                "config reload rejected ({} problem(s)); the last good configuration stays in force:",
                e.count
            );
            for line in e.rendered.lines() {
                error!("  {line}");
            }
            record_config_reload(false, wall);
            problem.set(Some(e.first.clone()));
            false
        }
    };
    systemd::ready(&systemd::status_line(
        &health.report(),
        problem.get().as_deref(),
    ));
    taken
}

/// Serves reload requests (SIGHUP, file changes) until shutdown.
pub async fn reload_loop(
    main: PathBuf,
    requests: TriggerRx,
    snapshots: Arc<Snapshots>,
    health: Arc<Health>,
    problem: Arc<ConfigProblem>,
    shutdown: Shutdown,
) {
    while let Some(Some(())) = unless_shutdown(&shutdown, requests.recv()).await {
        reload(&main, &snapshots, &health, &problem);
    }
}

fn warn_about_restart_only_changes(old: &DesiredState, new: &DesiredState) {
    if old.daemon != new.daemon {
        warn!("[daemon] settings changed; they take effect at the next restart");
    }
    for name in config::CONTROLLERS {
        if old.controller(name).enabled != new.controller(name).enabled {
            warn!("controller {name}: `enabled` changed; this takes effect at the next restart");
        }
    }
}
