//! The reaction to a reload request (SIGHUP or a file change): load, then publish the new
//! snapshot or keep the old one, record the attempt, and tell systemd.
//!
//! A SIGHUP and the file watch often both ask for a reload of one edit. A rejected content is
//! counted in `edgenetd_config_reload_failures_total` once: loading the very same rejected
//! files again is logged on one line and not counted as another failure. A load that is taken
//! forgets the rejected content, so the same bad edit made again later counts again.

use std::path::PathBuf;
use std::sync::Arc;

use log::{error, info, warn};

use super::confirm_state::{ConfirmState, ReloadVerdict};
use super::degraded::Degraded;
use super::last_good::LastGood;
use super::snapshots::{Snapshots, TomlSink};
use crate::clock::{rfc3339, unix_seconds};
use crate::config::{self, DesiredState};
use crate::liveness::Liveness;
use crate::metrics::{ReloadRecord, record_config_reload};
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::source::{self, ContentHash, Load, Outcome};
use crate::sync::TriggerRx;
use crate::systemd::{self, ConfigProblem};

/// Everything a reload touches.
pub struct Reloader {
    /// The main config file.
    pub main: PathBuf,
    /// The current snapshot (what a new load is compared with).
    pub snapshots: Arc<Snapshots>,
    /// Where a taken configuration goes (the snapshots themselves, or the composer).
    pub sink: Arc<dyn TomlSink>,
    /// The registry whose report makes the STATUS= line (and whose clock stamps reloads).
    pub liveness: Arc<Liveness>,
    /// The rejection shown on STATUS= until a good load.
    pub problem: Arc<ConfigProblem>,
    /// The contents of the last rejected load, until a load is taken.
    pub last_rejected: Option<ContentHash>,
    /// Whether a configuration applied with `edgenetd apply --confirm` waits for confirm.
    pub confirm: Arc<ConfirmState>,
    /// Keeps every configuration that comes into force.
    pub last_good: Arc<LastGood>,
    /// Whether a fallback runs instead of the config files (a taken load ends it).
    pub degraded: Arc<Degraded>,
    /// Router config from the cluster (`[kubernetes] config_map`): its fragments are loaded
    /// after the files, and a new version of them waits for its confirm.
    #[cfg(feature = "kubernetes")]
    pub cluster: Option<Arc<super::cluster_config::ClusterConfig>>,
    /// Wakes the confirm deadline (a config from the cluster starts one).
    #[cfg(feature = "kubernetes")]
    pub confirm_wake: crate::sync::Trigger,
}

impl Reloader {
    /// Loads the configuration again; publishes it when valid, keeps the old one otherwise.
    /// Returns whether the new configuration was taken.
    pub fn reload(&mut self) -> bool {
        #[cfg(feature = "kubernetes")]
        let choice = self.cluster.as_ref().map(|c| c.choose());
        #[cfg(feature = "kubernetes")]
        let from_cluster = choice.as_ref().is_some_and(|c| c.new.is_some());
        match self.confirm.reload_verdict(&self.main) {
            ReloadVerdict::Proceed => {}
            // The files are what apply put there, but the cluster's fragments are new.
            #[cfg(feature = "kubernetes")]
            ReloadVerdict::InForce if from_cluster => {}
            ReloadVerdict::InForce => {
                log::debug!(
                    "config reload: the files hold what `edgenetd apply` put in place, already in force"
                );
                return false;
            }
            #[cfg(feature = "kubernetes")]
            ReloadVerdict::Refused(deadline) if self.confirm.pending_from_cluster() => {
                self.confirm.defer_reload();
                info!(
                    "config reload waits: a config from the cluster waits for the router to reach the API server until {}; the change is loaded after its confirm or rollback",
                    rfc3339(deadline)
                );
                return false;
            }
            ReloadVerdict::Refused(deadline) => {
                #[cfg(feature = "kubernetes")]
                if from_cluster {
                    // The cluster's new version is not lost: it is loaded after the confirm.
                    self.confirm.defer_reload();
                }
                warn!(
                    "config reload refused: a configuration applied with `edgenetd apply --confirm` waits for `edgenetd confirm` until {}; the change on disk is not applied (reload again after the confirm or the rollback)",
                    rfc3339(deadline)
                );
                return false;
            }
        }
        systemd::reloading();
        #[cfg(feature = "kubernetes")]
        let (mut load, shadowed, in_fragments) = match &choice {
            Some(choice) => source::load_with(&self.main, &choice.fragments),
            None => (source::load(&self.main), Vec::new(), 0),
        };
        #[cfg(not(feature = "kubernetes"))]
        let mut load = source::load(&self.main);
        if let Outcome::Loaded(next, texts) = load.outcome {
            load.outcome = match super::includes::vet(*next) {
                Ok(next) => Outcome::Loaded(Box::new(next), texts),
                Err(e) => Outcome::Rejected(e),
            };
        }
        #[cfg(feature = "kubernetes")]
        if let (Some(cluster), Some(choice)) = (self.cluster.clone(), choice) {
            return self.react_with_cluster(&cluster, choice, load, shadowed, in_fragments);
        }
        let taken = self.react(load);
        self.tell_systemd();
        taken
    }

    /// READY=1 with the STATUS= line, after a reload.
    fn tell_systemd(&self) {
        systemd::ready(&systemd::status_line(
            &self.liveness.report(),
            self.problem.get().as_deref(),
        ));
    }

    /// A load with the cluster's fragments: a new version that does not load is refused on
    /// its own (and the files are loaded again with the fragments in force, so a local edit
    /// still comes in); one that does is taken and waits for its confirm.
    #[cfg(feature = "kubernetes")]
    fn react_with_cluster(
        &mut self,
        cluster: &super::cluster_config::ClusterConfig,
        choice: super::cluster_config::Choice,
        load: Load,
        shadowed: Vec<String>,
        in_fragments: usize,
    ) -> bool {
        if let (Some(new), Outcome::Rejected(e)) = (&choice.new, &load.outcome) {
            if in_fragments > 0 {
                cluster.refused(new, e, in_fragments);
                return self.reload();
            }
        }
        let texts = match &load.outcome {
            Outcome::Loaded(_, texts) => Some(texts.clone()),
            Outcome::Rejected(_) => None,
        };
        // What the kernel returns to should the local files no longer load at the rollback.
        let previous = choice.new.as_ref().and_then(|_| {
            config::fragments::load_with_fragments(&self.main, &cluster.in_force())
                .ok()
                .map(|l| Arc::new(l.state))
        });
        let taken = self.react(load);
        if taken {
            if let (Some(version), Some(texts)) = (cluster.took(choice, shadowed), texts) {
                self.start_cluster_confirm(cluster, &version, previous, texts);
            }
        }
        self.tell_systemd();
        taken
    }

    /// A new version from the cluster is in force: it waits for the router to reach the API
    /// server, until `config_confirm` from now.
    #[cfg(feature = "kubernetes")]
    fn start_cluster_confirm(
        &self,
        cluster: &super::cluster_config::ClusterConfig,
        version: &str,
        previous: Option<Arc<DesiredState>>,
        texts: config::ConfigTexts,
    ) {
        let clock = self.liveness.clock();
        let deadline = clock.wall() + cluster.confirm_within;
        let applied_from = format!(
            "configmap:{} at resourceVersion {}",
            cluster.source,
            if version.is_empty() {
                "(none)"
            } else {
                version
            }
        );
        self.liveness.set_config_note(Some(format!(
            "config from {applied_from} waits to reach the API server until {}",
            rfc3339(deadline)
        )));
        self.confirm.start_pending(super::confirm_state::Pending {
            deadline,
            due: clock.now() + cluster.confirm_within,
            applied_from,
            applied_text: String::new(),
            previous,
            texts,
            degraded_before: None,
            from_cluster: true,
        });
        self.confirm_wake.fire();
    }

    /// Publishes or keeps, and records which; returns whether the load was taken.
    pub fn react(&mut self, load: Load) -> bool {
        let wall = unix_seconds(self.liveness.clock().wall());
        match load.outcome {
            Outcome::Loaded(next, texts) => {
                warn_about_restart_only_changes(&self.snapshots.current(), &next);
                let files = next.files.len();
                self.sink.take_toml(Arc::from(next), Some(&texts));
                self.last_good.keep(texts, self.liveness.clock().wall());
                self.degraded.clear();
                record_config_reload(ReloadRecord::Taken, wall);
                self.problem.set(None);
                self.last_rejected = None;
                self.confirm.forget_installed();
                info!(
                    "config reloaded from {} ({files} file(s))",
                    self.main.display()
                );
                true
            }
            Outcome::Rejected(e)
                if load.content.is_some() && load.content == self.last_rejected =>
            {
                info!(
                    "config reload: the files are unchanged since they were rejected ({} problem(s)); the last good configuration stays in force",
                    e.count
                );
                record_config_reload(ReloadRecord::RejectedAgain, wall);
                false
            }
            Outcome::Rejected(e) => {
                error!(
                    "config reload rejected ({} problem(s)); the last good configuration stays in force:",
                    e.count
                );
                for line in e.rendered.lines() {
                    error!("  {line}");
                }
                record_config_reload(ReloadRecord::Rejected, wall);
                self.problem.set(Some(e.first.clone()));
                self.last_rejected = load.content;
                false
            }
        }
    }
}

/// Serves reload requests (SIGHUP, file changes) until shutdown.
pub async fn serve(mut reloader: Reloader, requests: TriggerRx, shutdown: Shutdown) {
    while let Some(Some(())) = unless_shutdown(&shutdown, requests.recv()).await {
        reloader.reload();
    }
}

fn warn_about_restart_only_changes(old: &DesiredState, new: &DesiredState) {
    // `management` only shapes the boot lockdown: nothing to restart for.
    let restart_only = |d: &config::DaemonSettings| config::DaemonSettings {
        management: Vec::new(),
        ..d.clone()
    };
    if restart_only(&old.daemon) != restart_only(&new.daemon) {
        warn!("[daemon] settings changed; they take effect at the next restart");
    }
    if old.kubernetes != new.kubernetes {
        warn!("[kubernetes] settings changed; they take effect at the next restart");
    }
    for name in config::CONTROLLERS {
        if old.controller(name).enabled != new.controller(name).enabled {
            warn!("controller {name}: `enabled` changed; this takes effect at the next restart");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::clock::FakeClock;
    use crate::metrics::render_with;

    const GOOD: &str = "[daemon]\nroute_protocol = 191\n";
    const BAD: &str = "[daemon]\nroute_protocol = 300\n";
    const OTHER_BAD: &str = "[daemon]\nlisten = \"nowhere\"\n";

    fn reloader(tag: &str) -> Reloader {
        let dir =
            std::env::temp_dir().join(format!("edgenetd-reload-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        let main = dir.join("edgenetd.toml");
        std::fs::write(&main, GOOD).unwrap();
        let snapshots = Snapshots::new(Arc::new(config::load(&main).unwrap()));
        let liveness = Liveness::new(FakeClock::new());
        Reloader {
            sink: snapshots.clone(),
            snapshots,
            last_good: Arc::new(LastGood::new(
                &main,
                crate::control::store::Store::new(dir.join("state")),
            )),
            main,
            degraded: Degraded::new(liveness.clone()),
            liveness,
            problem: Arc::new(ConfigProblem::default()),
            last_rejected: None,
            confirm: Arc::default(),
            #[cfg(feature = "kubernetes")]
            cluster: None,
            #[cfg(feature = "kubernetes")]
            confirm_wake: crate::sync::trigger().0,
        }
    }

    fn write(main: &Path, text: &str) {
        std::fs::write(main, text).unwrap();
    }

    fn series(out: &str, name: &str) -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{out}"))
    }

    /// Bug 8c: a SIGHUP and the file watch both loaded one rejected edit, and
    /// `edgenetd_config_reload_failures_total` counted it twice.
    #[test]
    fn one_rejected_content_loaded_twice_counts_one_reload_failure() {
        let mut r = reloader("8c");
        let out = render_with(|| {
            write(&r.main, BAD);
            assert!(!r.reload(), "SIGHUP");
            assert!(!r.reload(), "the file watch, same content");
        });
        assert_eq!(series(&out, "edgenetd_config_reload_failures_total"), 1.0);
        assert_eq!(series(&out, "edgenetd_config_reloads_total"), 2.0);
        assert_eq!(series(&out, "edgenetd_config_last_reload_successful"), 0.0);
        assert!(r.problem.get().unwrap().contains("route_protocol"));
    }

    #[test]
    fn a_different_rejected_content_counts_again_and_a_good_load_resets() {
        let mut r = reloader("distinct");
        let out = render_with(|| {
            write(&r.main, BAD);
            assert!(!r.reload());
            write(&r.main, OTHER_BAD);
            assert!(!r.reload(), "new content: a new failure");
            write(&r.main, GOOD);
            assert!(r.reload());
            assert_eq!(r.problem.get(), None);
            write(&r.main, BAD);
            assert!(!r.reload(), "the first bad edit again, after a good load");
            assert!(!r.reload(), "and once more: not counted");
        });
        assert_eq!(series(&out, "edgenetd_config_reload_failures_total"), 3.0);
        assert_eq!(series(&out, "edgenetd_config_reloads_total"), 5.0);
    }

    #[test]
    fn a_rejected_load_whose_files_changed_meanwhile_always_counts() {
        let mut r = reloader("racing");
        let rejected = || Load {
            content: None,
            outcome: Outcome::Rejected(config::load_str(&[("a.toml", BAD)]).unwrap_err()),
        };
        let out = render_with(|| {
            assert!(!r.react(rejected()));
            assert!(!r.react(rejected()));
        });
        assert_eq!(series(&out, "edgenetd_config_reload_failures_total"), 2.0);
    }

    #[test]
    fn while_a_confirm_is_pending_an_edit_is_refused_and_not_counted() {
        let mut r = reloader("pending");
        r.confirm
            .set_installed(crate::source::content_hash(&r.main));
        r.confirm
            .start_pending(super::super::confirm_state::Pending {
                deadline: std::time::SystemTime::now(),
                due: std::time::Instant::now(),
                applied_from: "new.toml".into(),
                applied_text: String::new(),
                previous: None,
                texts: config::ConfigTexts::default(),
                degraded_before: None,
                #[cfg(feature = "kubernetes")]
                from_cluster: false,
            });
        let out = render_with(|| {
            assert!(!r.reload(), "what apply installed is already in force");
            write(&r.main, "[daemon]\nroute_protocol = 192\n");
            assert!(!r.reload(), "an edit while the confirm is pending");
        });
        assert_eq!(series(&out, "edgenetd_config_reloads_total"), 0.0);
        assert_eq!(r.snapshots.current().daemon.route_protocol, 191);
        r.confirm.take_pending();
        render_with(|| assert!(r.reload(), "after the confirm, reloads are back"));
        assert_eq!(r.snapshots.current().daemon.route_protocol, 192);
    }

    #[test]
    fn a_taken_load_is_kept_as_the_last_good_one_and_ends_degraded_mode() {
        use super::super::degraded::{DegradedInfo, Fallback};
        let mut r = reloader("keep");
        r.degraded.enter(
            DegradedInfo {
                fallback: Fallback::Lockdown {
                    management: Vec::new(),
                    why: "none kept".into(),
                },
                since: std::time::SystemTime::UNIX_EPOCH,
                count: 1,
                problems: vec!["edgenetd.toml:2:18: error: invalid route_protocol 300".into()],
            },
            Arc::default(),
        );
        let out = render_with(|| {
            write(&r.main, BAD);
            assert!(!r.reload());
            assert!(
                r.degraded.is_degraded(),
                "a rejected reload changes nothing"
            );
            write(&r.main, "[daemon]\nroute_protocol = 192\n");
            assert!(r.reload());
        });
        assert!(!r.degraded.is_degraded());
        assert_eq!(series(&out, "edgenetd_config_degraded"), 0.0);
        r.last_good.settle();
        assert_eq!(r.last_good.load().unwrap().0.daemon.route_protocol, 192);
    }

    #[test]
    fn a_taken_load_is_published() {
        let mut r = reloader("publish");
        write(&r.main, "[daemon]\nroute_protocol = 192\n");
        render_with(|| assert!(r.reload()));
        assert_eq!(r.snapshots.current().daemon.route_protocol, 192);
    }

    /// A version from the cluster that does not load is refused on its own: a local edit
    /// still comes in; one that loads is taken and waits for its confirm until
    /// `config_confirm` from now.
    #[cfg(feature = "kubernetes")]
    #[test]
    fn a_refused_cluster_version_does_not_hold_back_a_local_edit_and_a_good_one_waits_for_its_confirm()
     {
        use super::super::cluster_config::ClusterConfig;
        use crate::config::fragments::Fragment;
        use crate::kubernetes::config_map::Offer;
        let mut r = reloader("cluster");
        let cluster = Arc::new(ClusterConfig::new(
            crate::config::kubernetes::ConfigMapRef {
                namespace: "ns".into(),
                name: "fleet".into(),
            },
            std::time::Duration::from_secs(30),
            "edge-1".into(),
        ));
        r.cluster = Some(cluster.clone());
        let offer = |version: &str, text: &str| Offer {
            version: version.into(),
            fragments: vec![Fragment {
                name: "configmap:ns/fleet:00_x.toml".into(),
                text: text.into(),
            }],
            skipped: Vec::new(),
        };
        // A bad version and a local edit at once: the version is refused, the edit taken.
        assert!(cluster.offer(offer(
            "7",
            "[[route]]\nto = \"10.0.0.0/33\"\nvia = \"192.0.2.1\"\n"
        )));
        write(&r.main, "[daemon]\nroute_protocol = 192\n");
        render_with(|| assert!(r.reload(), "the local edit"));
        assert_eq!(r.snapshots.current().daemon.route_protocol, 192);
        assert!(
            r.snapshots.current().routing.routes.is_empty(),
            "nothing of the version"
        );
        let doc = cluster.healthz(std::time::SystemTime::now());
        assert_eq!(doc["state"], "rejected", "{doc}");
        assert!(
            doc["rejected"]["problems"][0]
                .as_str()
                .unwrap()
                .starts_with("configmap:ns/fleet:00_x.toml:2:6: error:"),
            "{doc}"
        );
        assert!(r.confirm.due().is_none(), "nothing waits");
        // A good version: taken, and pending from the cluster.
        assert!(cluster.offer(offer(
            "8",
            "[[route]]\nto = \"10.9.0.0/16\"\nvia = \"192.0.2.1\"\n"
        )));
        render_with(|| assert!(r.reload()));
        assert_eq!(r.snapshots.current().routing.routes.len(), 1);
        assert!(r.confirm.pending_from_cluster());
        let left = r
            .confirm
            .pending_deadline()
            .unwrap()
            .duration_since(r.liveness.clock().wall())
            .unwrap();
        assert_eq!(left, std::time::Duration::from_secs(30));
        assert_eq!(cluster.pending().as_deref(), Some("8"));
        // While it waits, a local edit waits too.
        write(&r.main, "[daemon]\nroute_protocol = 193\n");
        render_with(|| assert!(!r.reload()));
        assert!(
            r.confirm.take_deferred(),
            "loaded after the confirm or rollback"
        );
        std::fs::remove_dir_all(r.main.parent().unwrap()).unwrap();
    }
}
