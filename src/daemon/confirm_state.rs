//! The confirm state the control socket, the reloader and /healthz share: whether a
//! configuration applied with `edgenetd apply --confirm` waits for `edgenetd confirm`, which
//! file contents the daemon itself put in place, and the last rollback.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use serde_json::json;

use super::degraded::DegradedInfo;
use crate::clock::rfc3339;
use crate::config::{ConfigTexts, DesiredState};
use crate::source::{ContentHash, content_hash};

/// A confirm that is pending.
pub struct Pending {
    /// Wall-clock deadline (shown, and persisted).
    pub deadline: SystemTime,
    /// The same deadline on the monotonic clock (what the timer waits for).
    pub due: Instant,
    /// The file the applied configuration came from.
    pub applied_from: String,
    /// The applied main file's text: what a confirm keeps (an edit made on disk meanwhile
    /// was refused, so it is not what runs).
    pub applied_text: String,
    /// The TOML state before the apply: what the kernel returns to if the restored files
    /// cannot be loaded.
    pub previous: Option<Arc<DesiredState>>,
    /// Every file of the applied configuration: what a confirm keeps as the last good one.
    pub texts: ConfigTexts,
    /// Why the daemon ran a fallback before the apply, if it did: a rollback to files that
    /// still do not load is degraded again.
    pub degraded_before: Option<DegradedInfo>,
    /// A config from the cluster (`[kubernetes] config_map`), not an apply: no file was
    /// written, the router confirms it itself, and a rollback brings the confirmed fragments
    /// back.
    #[cfg(feature = "kubernetes")]
    pub from_cluster: bool,
}

/// One rollback.
#[derive(Debug, Clone)]
pub struct Rollback {
    /// When it happened.
    pub at: SystemTime,
    /// Why (deadline passed, or restart while pending).
    pub reason: String,
}

/// What a reload request should do while the confirm state is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadVerdict {
    /// Reload as always.
    Proceed,
    /// The files hold what apply or a rollback put there, already in force: nothing to do.
    InForce,
    /// A confirm is pending until this deadline: a second change must not bury the first.
    Refused(SystemTime),
}

#[derive(Default)]
struct Inner {
    /// The confirm that is pending, if any.
    pending: Option<Pending>,
    /// Counts pendings, so a timer that fires late cannot roll back a newer one.
    generation: u64,
    /// The config files' contents as apply or a rollback left them (and published).
    installed: Option<ContentHash>,
    /// The last rollback, shown until the daemon stops.
    last_rollback: Option<Rollback>,
    /// Rollbacks since start (the metric counts the same).
    rollbacks: u64,
    /// A reload waited for the pending confirm of a config from the cluster: it is asked
    /// again once that ends.
    #[cfg(feature = "kubernetes")]
    deferred: bool,
}

/// The shared confirm state.
#[derive(Default)]
pub struct ConfirmState(Mutex<Inner>);

impl ConfirmState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a reload of `main` should do now.
    pub fn reload_verdict(&self, main: &Path) -> ReloadVerdict {
        let inner = self.lock();
        if inner.installed.is_none() && inner.pending.is_none() {
            return ReloadVerdict::Proceed;
        }
        if inner.installed.is_some() && inner.installed == Some(content_hash(main)) {
            return ReloadVerdict::InForce;
        }
        match &inner.pending {
            Some(p) => ReloadVerdict::Refused(p.deadline),
            None => ReloadVerdict::Proceed,
        }
    }

    /// The files now hold what the daemon put there and published.
    pub fn set_installed(&self, hash: ContentHash) {
        self.lock().installed = Some(hash);
    }

    /// A reload published something else.
    pub fn forget_installed(&self) {
        self.lock().installed = None;
    }

    /// Starts a pending confirm.
    pub fn start_pending(&self, pending: Pending) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.pending = Some(pending);
    }

    /// Ends the pending confirm (confirmed or rolled back); what it was.
    pub fn take_pending(&self) -> Option<Pending> {
        self.lock().pending.take()
    }

    /// A reload waits for the pending confirm (of a config from the cluster) to end.
    #[cfg(feature = "kubernetes")]
    pub fn defer_reload(&self) {
        self.lock().deferred = true;
    }

    /// Whether a reload waited (and forgets it).
    #[cfg(feature = "kubernetes")]
    pub fn take_deferred(&self) -> bool {
        std::mem::take(&mut self.lock().deferred)
    }

    /// True while the pending confirm is of a config from the cluster.
    #[cfg(feature = "kubernetes")]
    pub fn pending_from_cluster(&self) -> bool {
        self.lock().pending.as_ref().is_some_and(|p| p.from_cluster)
    }

    /// The pending deadline, if any.
    pub fn pending_deadline(&self) -> Option<SystemTime> {
        self.lock().pending.as_ref().map(|p| p.deadline)
    }

    /// The file the pending configuration came from (empty when none is pending).
    pub fn pending_applied_from(&self) -> String {
        self.lock()
            .pending
            .as_ref()
            .map(|p| p.applied_from.clone())
            .unwrap_or_default()
    }

    /// Every file of the pending configuration, if one is pending.
    pub fn pending_texts(&self) -> Option<ConfigTexts> {
        self.lock().pending.as_ref().map(|p| p.texts.clone())
    }

    /// The applied text of the pending confirm, if one is pending.
    pub fn pending_text(&self) -> Option<String> {
        self.lock().pending.as_ref().map(|p| p.applied_text.clone())
    }

    /// When the pending confirm expires, and which pending it is.
    pub fn due(&self) -> Option<(Instant, u64)> {
        let inner = self.lock();
        inner.pending.as_ref().map(|p| (p.due, inner.generation))
    }

    /// Records a rollback.
    pub fn record_rollback(&self, rollback: Rollback) {
        let mut inner = self.lock();
        inner.rollbacks += 1;
        inner.last_rollback = Some(rollback);
    }

    /// The `config` object of /healthz.
    pub fn healthz(&self, now: SystemTime) -> serde_json::Value {
        let inner = self.lock();
        let pending = inner.pending.as_ref().map(|p| {
            let left = p.deadline.duration_since(now).unwrap_or_default();
            #[allow(unused_mut)]
            let mut doc = json!({
                "deadline": rfc3339(p.deadline),
                "secondsLeft": left.as_secs_f64(),
                "appliedFrom": p.applied_from,
            });
            #[cfg(feature = "kubernetes")]
            {
                doc["fromCluster"] = p.from_cluster.into();
            }
            doc
        });
        let rollback = inner
            .last_rollback
            .as_ref()
            .map(|r| json!({ "at": rfc3339(r.at), "reason": r.reason }));
        json!({
            "pendingConfirm": pending,
            "lastRollback": rollback,
            "rollbacks": inner.rollbacks,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_pending_confirm_refuses_other_content_but_not_what_it_installed() {
        let dir = std::env::temp_dir().join(format!("edgenetd-confirm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("edgenetd.toml");
        std::fs::write(&main, "[daemon]\n").unwrap();
        let state = ConfirmState::default();
        assert_eq!(state.reload_verdict(&main), ReloadVerdict::Proceed);
        state.set_installed(content_hash(&main));
        let deadline = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        state.start_pending(Pending {
            deadline,
            due: Instant::now(),
            applied_from: "new.toml".into(),
            applied_text: String::new(),
            previous: None,
            texts: ConfigTexts::default(),
            degraded_before: None,
            #[cfg(feature = "kubernetes")]
            from_cluster: false,
        });
        assert_eq!(state.reload_verdict(&main), ReloadVerdict::InForce);
        std::fs::write(&main, "[daemon]\n# edited\n").unwrap();
        assert_eq!(
            state.reload_verdict(&main),
            ReloadVerdict::Refused(deadline)
        );
        let doc = state.healthz(deadline - Duration::from_secs(3));
        assert_eq!(doc["pendingConfirm"]["secondsLeft"], 3.0);
        assert!(state.take_pending().is_some());
        assert_eq!(state.reload_verdict(&main), ReloadVerdict::Proceed);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
