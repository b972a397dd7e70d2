//! Apply with automatic rollback: the daemon's side of `edgenetd apply` and `edgenetd
//! confirm`, the deadline, and the rollback at start-up.
//!
//! An apply validates the new main file as a reload would (with `conf.d`), shows the plan,
//! keeps the current main file as the confirmed copy, records the deadline (both durably,
//! before anything changes), puts the new file in place by atomic rename and publishes it.
//! Unconfirmed at the deadline, the confirmed copy goes back in place of the main file and
//! is published: the next sync of every controller returns the kernel to it, and files and
//! kernel agree again. A daemon that starts and finds a deadline on disk was stopped while a
//! confirm was pending: it puts the confirmed copy back before it loads anything, so its
//! first sync is already the rollback (the new configuration may be what made it restart).
//!
//! A pending record names the main file it was taken for and the digest of what apply put
//! there. A daemon on another main file leaves it alone (it belongs to another daemon that
//! shares the state directory), and a rollback that finds the main file changed since apply
//! keeps that content beside it (`MAIN.rejected-TIME`): a rollback never destroys a file
//! edgenetd did not write.

use std::fs;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_lite::future;
use log::{error, info, warn};

use super::confirm_state::{ConfirmState, Pending, Rollback};
use super::degraded::Degraded;
use super::last_good::LastGood;
use super::plan::plan_all;
use super::snapshots::TomlSink;
use crate::clock::rfc3339;
use crate::config::{self, ConfigError, ConfigTexts, DesiredState, format_duration};
use crate::control::instance::canonical;
use crate::control::protocol::{DaemonId, Request, Response};
use crate::control::server::Handler;
use crate::control::store::{PendingRecord, Store, fingerprint, keep_rejected, write_atomically};
use crate::liveness::Liveness;
use crate::metrics::record_config_rollback;
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::source::content_hash;
use crate::sync::{Trigger, TriggerRx};
use crate::systemd::ConfigProblem;

/// The mode of a main config file edgenetd creates (an existing file keeps its own).
const CONFIG_MODE: u32 = 0o644;

/// Carries out apply and confirm; rolls back at the deadline.
pub struct Confirmer {
    /// The main config file.
    pub main: PathBuf,
    /// Who this daemon is (its canonical main file, netns, pid): every answer says it, and a
    /// request meant for another daemon is refused.
    pub identity: DaemonId,
    /// The confirmed copy and the pending deadline.
    pub store: Store,
    /// Where a new TOML state goes (as a reload's does).
    pub sink: Arc<dyn TomlSink>,
    /// Its clock stamps deadlines; its STATUS= note shows the confirm state.
    pub liveness: Arc<Liveness>,
    /// What the reloader and /healthz see.
    pub state: Arc<ConfirmState>,
    /// The rejection STATUS= shows; a published apply or rollback clears it.
    pub problem: Arc<ConfigProblem>,
    /// Wakes [`watch_deadline`] when a deadline starts or ends.
    pub wake: Trigger,
    /// Keeps every configuration that comes into force (an apply that needs no confirm, a
    /// confirm, a rollback).
    pub last_good: Arc<LastGood>,
    /// Whether a fallback runs instead of the config files (an apply ends it).
    pub degraded: Arc<Degraded>,
    /// Router config from the cluster, when `[kubernetes] config_map` is set: its fragments
    /// in force are loaded with every apply and rollback.
    #[cfg(feature = "kubernetes")]
    pub cluster: Option<Arc<super::cluster_config::ClusterConfig>>,
    /// Asks for a reload: a change that waited for a confirm of a config from the cluster.
    #[cfg(feature = "kubernetes")]
    pub reload: Trigger,
}

impl Handler for Confirmer {
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + '_>> {
        Box::pin(async move {
            let mut response = match self.identity.mismatch(request.target()) {
                Some(why) => {
                    warn!("control socket: refused a request meant for another daemon: {why}");
                    Response::failed(format!("{why}; nothing was changed\n"))
                }
                None => match request {
                    Request::Apply {
                        shown_as,
                        text,
                        confirm_ms,
                        ..
                    } => {
                        self.apply(shown_as, text, confirm_ms.map(Duration::from_millis))
                            .await
                    }
                    Request::Confirm { .. } => self.confirm(),
                },
            };
            response.daemon = Some(self.identity.clone());
            response
        })
    }
}

impl Confirmer {
    /// Validates, shows the plan, installs and publishes `text` as the main config file.
    async fn apply(&self, shown_as: String, text: String, confirm: Option<Duration>) -> Response {
        if let Some(deadline) = self.state.pending_deadline() {
            return Response::failed(format!(
                "a configuration is waiting for `edgenetd confirm` until {}; confirm it, or let it roll back, before applying another one\n",
                rfc3339(deadline)
            ));
        }
        let loaded = self
            .load_replacing_main(Path::new(&shown_as), text.clone())
            .and_then(|(state, texts)| Ok((super::includes::vet(state)?, texts)));
        let (desired, texts) = match loaded {
            Ok(d) => d,
            Err(e) => {
                return Response::failed(format!(
                    "{e}\n{shown_as}: {} problem(s); nothing was changed\n",
                    e.count
                ));
            }
        };
        let plan = plan_all(&desired).await;
        let mut out = plan.text;
        for failure in plan.failures {
            out.push_str(&format!("{failure}\n"));
        }
        match self.install(&shown_as, &text, confirm, &texts) {
            Ok(deadline) => {
                self.sink.take_toml(Arc::new(desired), Some(&texts));
                if deadline.is_none() {
                    self.last_good
                        .keep(texts.clone(), self.liveness.clock().wall());
                }
                self.degraded.clear();
                self.problem.set(None);
                self.wake.fire();
                out.push_str(&self.applied_message(&shown_as, deadline, confirm));
                Response::done(out)
            }
            Err(e) => Response::failed(format!("{out}{e}\n")),
        }
    }

    fn applied_message(
        &self,
        shown_as: &str,
        deadline: Option<SystemTime>,
        confirm: Option<Duration>,
    ) -> String {
        match (deadline, confirm) {
            (Some(deadline), Some(within)) => {
                info!(
                    "applied {shown_as} in place of {}; rolled back at {} unless confirmed",
                    self.main.display(),
                    rfc3339(deadline)
                );
                format!(
                    "applied {shown_as}; run `edgenetd confirm` within {} (before {}), or it is rolled back\n",
                    format_duration(within),
                    rfc3339(deadline)
                )
            }
            _ => {
                info!(
                    "applied and confirmed {shown_as} in place of {}",
                    self.main.display()
                );
                format!("applied and confirmed {shown_as}\n")
            }
        }
    }

    /// Keeps the confirmed copy and the deadline, then puts `text` in place of the main
    /// file. On error nothing the daemon runs on has changed.
    fn install(
        &self,
        shown_as: &str,
        text: &str,
        confirm: Option<Duration>,
        texts: &ConfigTexts,
    ) -> Result<Option<SystemTime>, String> {
        let main = self.main.display();
        self.state_dir_is_ours()?;
        let current = fs::read(&self.main)
            .map_err(|e| format!("cannot read {main}: {e}; nothing was changed"))?;
        // Degraded, the files do not load: what runs is the fallback, and a rollback
        // returns to it.
        let degraded_before = self.degraded.current();
        let previous = self
            .load_state()
            .map(Arc::new)
            .or_else(|| degraded_before.as_ref().map(|(_, state)| state.clone()));
        let deadline = match confirm {
            Some(within) => {
                let deadline = self.liveness.clock().wall() + within;
                self.store
                    .save_confirmed(&current)
                    .and_then(|()| {
                        self.store.save_pending(&PendingRecord {
                            deadline_unix: unix(deadline),
                            applied_from: shown_as.to_string(),
                            main: Some(self.identity.config.clone()),
                            applied: Some(fingerprint(text.as_bytes())),
                        })
                    })
                    .map_err(|e| {
                        format!("cannot keep the confirmed configuration: {e}; nothing was changed")
                    })?;
                Some(deadline)
            }
            None => None,
        };
        if let Err(e) = write_atomically(&self.main, text.as_bytes(), CONFIG_MODE) {
            let _ = self.store.clear_pending();
            return Err(format!("cannot replace {main}: {e}; nothing was changed"));
        }
        if deadline.is_none() {
            // Applied and confirmed: the copy follows the main file.
            if let Err(e) = self.store.save_confirmed(text.as_bytes()) {
                warn!("cannot update the confirmed copy: {e}");
            }
        }
        self.state.set_installed(content_hash(&self.main));
        if let (Some(deadline), Some(within)) = (deadline, confirm) {
            self.state.start_pending(Pending {
                deadline,
                due: self.liveness.clock().now() + within,
                applied_from: shown_as.to_string(),
                applied_text: text.to_string(),
                previous,
                texts: texts.clone(),
                degraded_before: degraded_before.map(|(info, _)| info),
                #[cfg(feature = "kubernetes")]
                from_cluster: false,
            });
            self.liveness.set_config_note(Some(format!(
                "config from {shown_as} waits for confirm until {}",
                rfc3339(deadline)
            )));
        } else {
            self.liveness.set_config_note(None);
        }
        Ok(deadline)
    }

    /// Refuses to write the state directory while it holds another main file's pending
    /// confirm: its confirmed copy is that daemon's way back.
    fn state_dir_is_ours(&self) -> Result<(), String> {
        match self.store.read_pending() {
            Ok(Some(Ok(PendingRecord {
                main: Some(other),
                applied_from,
                ..
            }))) if other != self.identity.config => Err(format!(
                "the state directory {} holds a confirm pending for {other} ({applied_from}), not for {}: give this daemon its own --state-dir; nothing was changed",
                self.store.dir().display(),
                self.identity.config
            )),
            _ => Ok(()),
        }
    }

    /// Makes the pending configuration the confirmed one: the text that was applied (an
    /// edit of the main file made meanwhile was refused and stays for the next reload).
    fn confirm(&self) -> Response {
        #[cfg(feature = "kubernetes")]
        if let Some(applied) = self.confirm_from_cluster() {
            return Response::done(format!("confirmed {applied}\n"));
        }
        let (Some(deadline), Some(text)) =
            (self.state.pending_deadline(), self.state.pending_text())
        else {
            return Response::failed("nothing to confirm: no configuration is waiting for it\n");
        };
        let saved = self
            .store
            .save_confirmed(text.as_bytes())
            .and_then(|()| self.store.clear_pending());
        if let Err(e) = saved {
            return Response::failed(format!(
                "cannot keep {} as the confirmed configuration: {e}; the rollback at {} still stands\n",
                self.main.display(),
                rfc3339(deadline)
            ));
        }
        if let Some(texts) = self.state.pending_texts() {
            self.last_good.keep(texts, self.liveness.clock().wall());
        }
        let applied = self.state.take_pending().map(|p| p.applied_from);
        self.liveness.set_config_note(None);
        self.wake.fire();
        #[cfg(feature = "kubernetes")]
        if self.state.take_deferred() {
            self.reload.fire();
        }
        let applied = applied.unwrap_or_default();
        info!("confirmed: {applied} is the confirmed configuration");
        Response::done(format!("confirmed {applied}\n"))
    }

    /// Loads the config files, with the fragments from the cluster in force
    /// (`[kubernetes] config_map`).
    fn load(&self) -> Result<(DesiredState, ConfigTexts), ConfigError> {
        #[cfg(feature = "kubernetes")]
        return config::fragments::load_with_fragments(&self.main, &self.fragments())
            .map(|l| (l.state, l.texts))
            .map_err(|r| r.error);
        #[cfg(not(feature = "kubernetes"))]
        config::load_keeping_texts(&self.main)
    }

    /// [`Confirmer::load`], the state alone, if it loads.
    fn load_state(&self) -> Option<DesiredState> {
        #[cfg(feature = "kubernetes")]
        return self.load().ok().map(|(state, _)| state);
        #[cfg(not(feature = "kubernetes"))]
        config::load(&self.main).ok()
    }

    /// [`Confirmer::load`] with `text` in place of the main file, shown as `shown_as`.
    fn load_replacing_main(
        &self,
        shown_as: &Path,
        text: String,
    ) -> Result<(DesiredState, ConfigTexts), ConfigError> {
        #[cfg(feature = "kubernetes")]
        return config::fragments::load_replacing_main_with_fragments(
            &self.main,
            shown_as,
            text,
            &self.fragments(),
        )
        .map(|l| (l.state, l.texts))
        .map_err(|r| r.error);
        #[cfg(not(feature = "kubernetes"))]
        config::load_replacing_main_keeping_texts(&self.main, shown_as, text)
    }

    /// The fragments from the cluster in force (none without `config_map`).
    #[cfg(feature = "kubernetes")]
    fn fragments(&self) -> Vec<config::fragments::Fragment> {
        self.cluster
            .as_ref()
            .map(|c| c.in_force())
            .unwrap_or_default()
    }

    /// Confirms a pending config from the cluster (the router reached the API server with
    /// it, or an operator ran `edgenetd confirm`); what it was, when one was pending.
    #[cfg(feature = "kubernetes")]
    pub fn confirm_from_cluster(&self) -> Option<String> {
        if !self.state.pending_from_cluster() {
            return None;
        }
        let pending = self.state.take_pending()?;
        if let Some(cluster) = &self.cluster {
            cluster.confirmed();
        }
        self.last_good
            .keep(pending.texts, self.liveness.clock().wall());
        self.liveness.set_config_note(None);
        self.wake.fire();
        // A change that waited for this one comes in now.
        if self.state.take_deferred() {
            self.reload.fire();
        }
        info!("confirmed: {} is in force", pending.applied_from);
        Some(pending.applied_from)
    }

    /// A config from the cluster was not confirmed in time: the confirmed fragments come
    /// back with the local files (no file was written for it, so none is restored).
    #[cfg(feature = "kubernetes")]
    fn rollback_from_cluster(&self, pending: Pending, reason: String) {
        let fragments = match &self.cluster {
            Some(cluster) => cluster.rolled_back(&reason),
            None => Vec::new(),
        };
        let at = self.liveness.clock().wall();
        let loaded = config::fragments::load_with_fragments(&self.main, &fragments)
            .map_err(|r| r.error)
            .and_then(|l| Ok((super::includes::vet(l.state)?, l.texts)));
        match loaded {
            Ok((state, texts)) => {
                self.sink.take_toml(Arc::new(state), Some(&texts));
                self.last_good.keep(texts, at);
            }
            Err(e) => {
                error!(
                    "rollback: the local files with the confirmed fragments do not load ({} problem(s)); the kernel returns to the configuration before the change",
                    e.count
                );
                if let Some(previous) = pending.previous {
                    self.sink.take_toml(previous, None);
                }
            }
        }
        self.record(reason);
        self.wake.fire();
        if self.state.take_deferred() {
            self.reload.fire();
        }
    }

    /// Puts the confirmed copy back in place of the main file and publishes it.
    pub fn rollback(&self, reason: String) {
        let pending = self.state.take_pending();
        #[cfg(feature = "kubernetes")]
        let pending = match pending {
            Some(p) if p.from_cluster => return self.rollback_from_cluster(p, reason),
            other => other,
        };
        let applied = pending
            .as_ref()
            .map(|p| fingerprint(p.applied_text.as_bytes()));
        let degraded_before = pending.as_ref().and_then(|p| p.degraded_before.clone());
        let previous = pending.and_then(|p| p.previous);
        let at = self.liveness.clock().wall();
        let restored = self.store.read_confirmed().and_then(|text| {
            keep_changed_main(&self.main, applied.as_deref(), &text, at)?;
            write_atomically(&self.main, &text, CONFIG_MODE)
        });
        let loaded = match restored {
            Ok(()) => self
                .load()
                .map_err(|e| format!("does not load ({} problem(s))", e.count)),
            // The main file still holds what it held (the applied text, or an edit that
            // could not be kept): loading it would be no rollback.
            Err(e) => {
                error!(
                    "rollback: cannot put {} back in place of {}: {e}",
                    self.store.confirmed_path().display(),
                    self.main.display()
                );
                Err("was not restored".to_string())
            }
        };
        match loaded {
            Ok((state, texts)) => {
                self.sink.take_toml(Arc::new(state), Some(&texts));
                self.last_good.keep(texts, at);
            }
            Err(e) => {
                error!(
                    "rollback: {} {e}; the kernel returns to the configuration before the apply",
                    self.main.display(),
                );
                if let Some(previous) = previous {
                    if let Some(info) = degraded_before {
                        // The fallback that ran before the apply runs again, and says so.
                        self.degraded.enter(info, previous.clone());
                    }
                    self.sink.take_toml(previous, None);
                }
            }
        }
        if let Err(e) = self.store.clear_pending() {
            error!("rollback: cannot remove the pending deadline: {e}");
        }
        self.problem.set(None);
        self.state.set_installed(content_hash(&self.main));
        self.record(reason);
        #[cfg(feature = "kubernetes")]
        if self.state.take_deferred() {
            self.reload.fire();
        }
    }

    /// Counts and shows a rollback (also one done at start-up).
    pub fn record(&self, reason: String) {
        let at = self.liveness.clock().wall();
        warn!("configuration rolled back: {reason}");
        record_config_rollback();
        self.liveness.set_config_note(Some(format!(
            "config rolled back at {}: {reason}",
            rfc3339(at)
        )));
        self.state.record_rollback(Rollback { at, reason });
    }
}

/// Rolls back when a pending deadline passes (until shutdown).
pub async fn watch_deadline(confirmer: Rc<Confirmer>, wake: TriggerRx, shutdown: Shutdown) {
    loop {
        let due = confirmer.state.due();
        let expired = async {
            match due {
                Some((at, _)) => {
                    smol::Timer::at(at).await;
                    true
                }
                None => future::pending().await,
            }
        };
        let woken = async {
            let _ = wake.recv().await;
            false
        };
        match unless_shutdown(&shutdown, future::or(expired, woken)).await {
            None => return,
            Some(true) if confirmer.state.due() == due => {
                let from = confirmer.state.pending_applied_from();
                #[cfg(feature = "kubernetes")]
                let from_cluster = confirmer.state.pending_from_cluster();
                #[cfg(not(feature = "kubernetes"))]
                let from_cluster = false;
                let why = if from_cluster {
                    format!(
                        "{from} did not reach the API server again before its deadline (config_confirm)"
                    )
                } else {
                    format!("{from} was not confirmed before its deadline")
                };
                confirmer.rollback(why);
            }
            Some(_) => {}
        }
    }
}

/// At start-up, before the first load: a deadline on disk means the daemon stopped while a
/// confirm was pending, so the confirmed copy goes back in place of the main file. A record
/// taken for another main file is left alone. Returns why, when it rolled back.
pub fn recover_at_start(main: &Path, store: &Store) -> Option<String> {
    let pending = store.pending_path();
    let record = match store.read_pending() {
        Ok(None) => return None,
        Ok(Some(Ok(record))) => Some(record),
        Ok(Some(Err(why))) => {
            error!("{}: {why}; rolling back to be safe", pending.display());
            None
        }
        Err(e) => {
            error!("cannot read the pending-confirm state: {e}; rolling back to be safe");
            None
        }
    };
    let ours = canonical(main);
    if let Some((bound, from)) = record
        .as_ref()
        .and_then(|r| Some((r.main.as_deref()?, &r.applied_from)))
        .filter(|(bound, _)| Path::new(bound) != ours)
    {
        warn!(
            "{} holds a confirm pending for {bound} ({from}), not for {} this daemon runs: left alone (a daemon on {bound} with this state directory rolls it back); give each daemon its own --state-dir",
            pending.display(),
            ours.display()
        );
        return None;
    }
    let from = match &record {
        Some(record) => record.applied_from.clone(),
        None => "the last applied configuration".to_string(),
    };
    let restored = store.read_confirmed().and_then(|text| {
        let applied = record.as_ref().and_then(|r| r.applied.as_deref());
        keep_changed_main(main, applied, &text, SystemTime::now())?;
        write_atomically(main, &text, CONFIG_MODE)
    });
    match restored {
        Ok(()) => info!(
            "restored {} in place of {}",
            store.confirmed_path().display(),
            main.display()
        ),
        Err(e) => {
            error!(
                "cannot put the confirmed configuration back in place of {}: {e}; starting on the file as it is",
                main.display()
            );
            return None;
        }
    }
    if let Err(e) = store.clear_pending() {
        error!("cannot remove the pending deadline: {e}");
    }
    Some(format!(
        "the daemon restarted while {from} waited for confirm"
    ))
}

/// Before a rollback replaces `main` with `confirmed`: keeps `main`'s content beside it
/// unless it is what apply wrote (its [`fingerprint`] is `applied`) or already the confirmed
/// text. An error means the content could not be kept, and the rollback must not replace it.
fn keep_changed_main(
    main: &Path,
    applied: Option<&str>,
    confirmed: &[u8],
    at: SystemTime,
) -> std::io::Result<()> {
    let current = match fs::read(main) {
        Ok(bytes) => bytes,
        // Nothing there to lose.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if current == confirmed || applied == Some(fingerprint(&current).as_str()) {
        return Ok(());
    }
    let copy = keep_rejected(main, &current, &stamp(at))?;
    warn!(
        "{} was changed since the apply: its content is kept as {}",
        main.display(),
        copy.display()
    );
    Ok(())
}

/// `20261202T032700.123Z`: RFC 3339 without the separators a file name does not need.
fn stamp(t: SystemTime) -> String {
    rfc3339(t).replace(['-', ':'], "")
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory with a state directory in it.
    fn scratch(tag: &str) -> (PathBuf, Store) {
        let dir =
            std::env::temp_dir().join(format!("edgenetd-recover-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let store = Store::new(dir.join("state"));
        (dir, store)
    }

    fn pending_for(store: &Store, main: &Path, applied: &str) {
        store.save_confirmed(b"# a: confirmed\n").unwrap();
        store
            .save_pending(&PendingRecord {
                deadline_unix: 1,
                applied_from: "b.toml".into(),
                main: Some(canonical(main).display().to_string()),
                applied: Some(fingerprint(applied.as_bytes())),
            })
            .unwrap();
    }

    fn rejected_copies(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".rejected-"))
            .collect();
        found.sort();
        found
    }

    /// The reproduction: a.toml's daemon applied b.toml with --confirm and was killed; a
    /// daemon started on c.toml with the same state directory put a.toml's confirmed copy
    /// in place of c.toml, and c.toml's content was gone.
    #[test]
    fn a_pending_confirm_is_not_restored_over_the_config_of_another_daemon() {
        let (dir, store) = scratch("other");
        let (a, c) = (dir.join("a.toml"), dir.join("c.toml"));
        fs::write(&a, "# b: applied\n").unwrap();
        fs::write(&c, "# c: mine\n").unwrap();
        pending_for(&store, &a, "# b: applied\n");
        assert_eq!(recover_at_start(&c, &store), None);
        assert_eq!(fs::read_to_string(&c).unwrap(), "# c: mine\n");
        assert!(
            store.read_pending().unwrap().is_some(),
            "left for a's daemon"
        );
        // a.toml's own daemon rolls it back, and loses nothing: the file is what apply wrote.
        assert!(recover_at_start(&a, &store).unwrap().contains("b.toml"));
        assert_eq!(fs::read_to_string(&a).unwrap(), "# a: confirmed\n");
        assert_eq!(store.read_pending().unwrap(), None);
        assert_eq!(rejected_copies(&dir), Vec::<PathBuf>::new());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rollback_at_start_keeps_a_main_file_changed_since_the_apply_beside_it() {
        let (dir, store) = scratch("changed");
        let a = dir.join("a.toml");
        fs::write(&a, "# edited by hand after the apply\n").unwrap();
        pending_for(&store, &a, "# b: applied\n");
        assert!(recover_at_start(&a, &store).is_some());
        assert_eq!(fs::read_to_string(&a).unwrap(), "# a: confirmed\n");
        let kept = rejected_copies(&dir);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            fs::read_to_string(&kept[0]).unwrap(),
            "# edited by hand after the apply\n"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Neither a record an older edgenetd wrote (bound to nothing) nor an unreadable one says
    /// what apply wrote: the file is kept before it is replaced.
    #[test]
    fn an_unbound_or_unreadable_record_rolls_back_and_keeps_the_file() {
        for record in [
            &br#"{"deadline_unix":1,"applied_from":"b.toml"}"#[..],
            b"garbage",
        ] {
            let (dir, store) = scratch("unbound");
            let a = dir.join("a.toml");
            fs::write(&a, "# whoever wrote this\n").unwrap();
            store.save_confirmed(b"# a: confirmed\n").unwrap();
            fs::write(store.pending_path(), record).unwrap();
            assert!(recover_at_start(&a, &store).is_some());
            assert_eq!(fs::read_to_string(&a).unwrap(), "# a: confirmed\n");
            assert_eq!(rejected_copies(&dir).len(), 1);
            fs::remove_dir_all(&dir).unwrap();
        }
    }
}
