//! Degraded mode (issue 23): the daemon started on config files that do not validate and
//! runs a fallback instead — the last good configuration, or the built-in lockdown. It says
//! so on STATUS= (first, `DEGRADED: …`), in /healthz's `config` object (`degraded`, with
//! the problems at `file:line:col`; liveness and the 200/503 verdict are unchanged: the loops
//! are alive and a restart would not fix the files) and in `edgenetd_config_degraded`. The
//! first valid configuration that comes into force (a reload, an apply, a rollback) ends it.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use log::info;
use serde_json::{Value, json};

use crate::clock::rfc3339;
use crate::config::DesiredState;
use crate::liveness::Liveness;
use crate::metrics::record_config_degraded;

/// The most problems /healthz lists (the log has them all).
const MAX_PROBLEMS: usize = 20;

/// What runs instead of the config files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// The last configuration that came into force, kept at `saved`.
    LastGood {
        /// When it was kept.
        saved: SystemTime,
    },
    /// The built-in lockdown: input and forward drop but established/related, loopback and
    /// input from `management`.
    Lockdown {
        /// The `[daemon] management` interfaces it keeps open (empty: none).
        management: Vec<String>,
        /// Why there is no last good configuration to run.
        why: String,
    },
}

/// Why the daemon is degraded and what it runs.
#[derive(Debug, Clone)]
pub struct DegradedInfo {
    /// What runs.
    pub fallback: Fallback,
    /// Since when.
    pub since: SystemTime,
    /// How many problems the config files have.
    pub count: usize,
    /// The problems' summary lines (`file:line:col: error: …`).
    pub problems: Vec<String>,
}

impl DegradedInfo {
    /// The STATUS= note.
    fn note(&self) -> String {
        let what = match &self.fallback {
            Fallback::LastGood { saved } => {
                format!("running the last good configuration of {}", rfc3339(*saved))
            }
            Fallback::Lockdown { management, .. } if management.is_empty() => {
                "LOCKDOWN (input and forward dropped, no management interface)".to_string()
            }
            Fallback::Lockdown { management, .. } => format!(
                "LOCKDOWN (input and forward dropped but from {})",
                management.join(", ")
            ),
        };
        let first = self.problems.first().map(String::as_str).unwrap_or("");
        format!(
            "{what}; config invalid ({} problem(s)): {first}",
            self.count
        )
    }
}

/// The summary lines of a rendered config error: `file:line:col: error: …`, at most
/// `MAX_PROBLEMS`.
pub fn problem_lines(rendered: &str) -> Vec<String> {
    rendered
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(": error: "))
        .take(MAX_PROBLEMS)
        .map(str::to_string)
        .collect()
}

/// The degraded state STATUS=, /healthz and the metric show.
pub struct Degraded {
    /// Where STATUS= reads its note.
    liveness: Arc<Liveness>,
    /// `None` while the config files are in force; else why not, and the fallback state
    /// that runs (what a rollback of an apply returns to when the files still do not load).
    info: Mutex<Option<(DegradedInfo, Arc<DesiredState>)>>,
}

impl Degraded {
    /// Not degraded.
    pub fn new(liveness: Arc<Liveness>) -> Arc<Degraded> {
        Arc::new(Degraded {
            liveness,
            info: Mutex::new(None),
        })
    }

    /// The daemon runs `state`, `info.fallback`, instead of its config files.
    pub fn enter(&self, info: DegradedInfo, state: Arc<DesiredState>) {
        self.liveness.set_degraded_note(Some(info.note()));
        record_config_degraded(true);
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some((info, state));
    }

    /// Why the daemon is degraded and the fallback state it runs, while it is.
    pub fn current(&self) -> Option<(DegradedInfo, Arc<DesiredState>)> {
        self.info.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A valid configuration has come into force: degraded mode is over (if it was on).
    pub fn clear(&self) {
        let was = self.info.lock().unwrap_or_else(|p| p.into_inner()).take();
        if was.is_some() {
            info!("a valid configuration is in force: degraded mode is over");
            self.liveness.set_degraded_note(None);
            record_config_degraded(false);
        }
    }

    /// True while a fallback runs.
    pub fn is_degraded(&self) -> bool {
        self.info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The `degraded` field of /healthz's `config` object (`null` when not degraded).
    pub fn healthz(&self) -> Value {
        let info = self.info.lock().unwrap_or_else(|p| p.into_inner());
        let Some((info, _)) = info.as_ref() else {
            return Value::Null;
        };
        let (mode, detail) = match &info.fallback {
            Fallback::LastGood { saved } => ("last-good", json!({ "savedAt": rfc3339(*saved) })),
            Fallback::Lockdown { management, why } => (
                "lockdown",
                json!({ "management": management, "noLastGood": why }),
            ),
        };
        json!({
            "mode": mode,
            "since": rfc3339(info.since),
            "problemCount": info.count,
            "problems": info.problems,
            "fallback": detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    #[test]
    fn degraded_shows_until_cleared_and_lists_the_problems_at_their_place() {
        let liveness = Liveness::new(FakeClock::new());
        let d = Degraded::new(liveness.clone());
        assert_eq!(d.healthz(), Value::Null);
        let rendered = "a.toml:3:7: error: unknown helper `nope`\n  |\n3 | helpers = [\"nope\"]\n  |       ^\nb.toml:1:1: error: x\n";
        d.enter(
            DegradedInfo {
                fallback: Fallback::Lockdown {
                    management: vec!["eth1".into()],
                    why: "none kept".into(),
                },
                since: SystemTime::UNIX_EPOCH,
                count: 2,
                problems: problem_lines(rendered),
            },
            Arc::default(),
        );
        let doc = d.healthz();
        assert_eq!(doc["mode"], "lockdown");
        assert_eq!(
            doc["problems"][0],
            "a.toml:3:7: error: unknown helper `nope`"
        );
        assert_eq!(doc["problems"].as_array().unwrap().len(), 2);
        let note = liveness.report().degraded_note.unwrap();
        assert!(
            note.starts_with("LOCKDOWN") && note.contains("eth1"),
            "{note}"
        );
        assert!(note.contains("a.toml:3:7"), "{note}");
        d.clear();
        assert!(!d.is_degraded());
        assert_eq!(liveness.report().degraded_note, None);
    }
}
