//! systemd integration: READY, STATUS, WATCHDOG, RELOADING, STOPPING, EXTEND_TIMEOUT_USEC.
//!
//! Every call is a no-op when `NOTIFY_SOCKET` is unset, so the daemon runs the same outside
//! systemd, and none ever blocks (see [`notify`]). The [`supervise`] task owns the watchdog:
//! it sends `WATCHDOG=1` at most once per half interval (as systemd recommends; syncs under
//! churn wake it several times a second) and *only while every controller is live*; when one
//! is not, it stops pinging, logs which controller is stale, and lets systemd restart the
//! service. Sync failures never stop the pings (see `liveness`).

pub mod notify;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use log::{error, info, warn};
use sd_notify::NotifyState;

use crate::liveness::{Liveness, LivenessReport};
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::TriggerRx;

/// The longest STATUS= line we send; systemctl shows one line anyway.
const STATUS_MAX: usize = 240;

fn send(states: &[NotifyState<'_>]) {
    let mut message = String::new();
    for s in states {
        // Writing into a String cannot fail.
        let _ = writeln!(message, "{s}");
    }
    notify::send(&message);
}

/// `READY=1` with a status line.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `STATUS=` alone.
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// `RELOADING=1` with `MONOTONIC_USEC` (what `Type=notify-reload` expects).
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(e) => {
            warn!("cannot read CLOCK_MONOTONIC: {e}");
            send(&[NotifyState::Reloading]);
        }
    }
}

/// `STOPPING=1`.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// The one-line summary for `STATUS=`, e.g.
/// `2/3 ready; route: sync failing: route 10.0.0.0/8: Network unreachable`.
pub fn status_line(report: &LivenessReport, config_problem: Option<&str>) -> String {
    let total = report.controllers.len();
    let ready = report
        .controllers
        .iter()
        .filter(|c| c.last_success.is_some())
        .count();
    // A controller with a desired state queued or in its sync is not in sync yet: the cluster
    // source is ready as soon as its state is composed, seconds before the service
    // controller has installed it (issue 24).
    let syncing: Vec<&str> = report
        .controllers
        .iter()
        .filter(|c| !c.settled)
        .map(|c| c.name.as_str())
        .collect();
    let mut line = if report.controllers.is_empty() {
        "running; no controllers enabled".to_string()
    } else if ready == total
        && report
            .controllers
            .iter()
            .all(|c| c.live && c.last_error.is_none())
    {
        if syncing.is_empty() {
            format!("{total}/{total} controllers in sync")
        } else {
            format!(
                "{total}/{total} ready; installing the latest state: {}",
                syncing.join(", ")
            )
        }
    } else {
        format!("{ready}/{total} ready")
    };
    if let Some(note) = &report.degraded_note {
        // First: the one thing an operator must see even in a cut line.
        line = format!("DEGRADED: {note}; {line}");
    }
    for c in &report.controllers {
        if !c.live {
            line.push_str(&format!(
                "; {}: NOT LIVE (no heartbeat for {:.0}s)",
                c.name,
                c.since_beat.as_secs_f64()
            ));
        } else if let Some(e) = &c.last_error {
            line.push_str(&format!("; {}: sync failing: {e}", c.name));
        }
    }
    if let Some(problem) = config_problem {
        line.push_str(&format!("; config rejected: {problem}"));
    }
    if let Some(note) = &report.config_note {
        line.push_str(&format!("; {note}"));
    }
    if line.len() > STATUS_MAX {
        let mut cut = STATUS_MAX - 1;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// Shared view of the last config problem, so STATUS= can show it until a good reload.
#[derive(Default)]
pub struct ConfigProblem(std::sync::Mutex<Option<String>>);

impl ConfigProblem {
    /// Sets or clears the problem.
    pub fn set(&self, problem: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = problem;
    }
    /// The current problem.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Sends READY=1 once every controller finished its first sync attempt (whatever the
/// outcome), feeds the watchdog while every controller is live, keeps STATUS= current, and
/// extends the start timeout while the first syncs are still running and alive.
pub async fn supervise(
    liveness: Arc<Liveness>,
    config_problem: Arc<ConfigProblem>,
    sync_done: TriggerRx,
    shutdown: Shutdown,
) {
    let watchdog = sd_notify::watchdog_enabled();
    let interval = watchdog.map_or(Duration::from_secs(30), |w| w / 2);
    if let Some(w) = watchdog {
        info!(
            "systemd watchdog every {:?}: pinging every {:?} while all controllers are live",
            w, interval
        );
    }
    let mut state = Supervisor::default();
    loop {
        let report = liveness.report();
        let line = status_line(&report, config_problem.get().as_deref());
        state.report_status(&report, line, interval);
        let now = Instant::now();
        if watchdog.is_some() {
            state.feed_watchdog(&report, now, interval);
        }
        // Wake early after a sync (READY promptly, status fresh), else on the interval, and
        // when the next ping is due (a wake-up that came too early to ping must not push the
        // ping towards a whole watchdog interval).
        let mut tick = if state.ready_sent {
            interval
        } else {
            interval.min(Duration::from_secs(1))
        };
        if let Some(due) = state.next_ping_in(now, interval).filter(|d| !d.is_zero()) {
            tick = tick.min(due);
        }
        let sync_or_tick = future::or(
            async {
                let _ = sync_done.recv().await;
            },
            async {
                smol::Timer::after(tick).await;
            },
        );
        if unless_shutdown(&shutdown, sync_or_tick).await.is_none() {
            return;
        }
    }
}

/// What the supervisor remembers between two looks at the liveness registry.
#[derive(Default)]
struct Supervisor {
    /// READY=1 has been sent (after every controller's first sync attempt).
    ready_sent: bool,
    /// The last STATUS= line sent, so an unchanged one is not sent again.
    last_status: String,
    /// The controllers that were not live at the last look (empty while pinging).
    was_stale: Vec<String>,
    /// When WATCHDOG=1 was last sent.
    last_ping: Option<Instant>,
}

impl Supervisor {
    /// READY=1 once every first sync was attempted; until then EXTEND_TIMEOUT_USEC while the
    /// loops beat; afterwards STATUS= whenever the line changes.
    fn report_status(&mut self, report: &LivenessReport, line: String, interval: Duration) {
        if !self.ready_sent && report.first_attempts_done() {
            ready(&line);
            info!("ready: {line}");
            self.ready_sent = true;
            self.last_status = line;
            return;
        }
        if !self.ready_sent && report.all_live() {
            // The first syncs are still running but beating: keep systemd's start timeout
            // from firing (a cold start with 100k routes on a slow board takes a while).
            let extend = u32::try_from((interval * 3).as_micros()).unwrap_or(u32::MAX);
            send(&[NotifyState::ExtendTimeoutUsec(extend)]);
        }
        if line != self.last_status {
            status(&line);
            self.last_status = line;
        }
    }

    /// WATCHDOG=1 only while every controller is live, and at most once per `interval`;
    /// when one is not live, no ping, and a log line naming the stale controllers (systemd
    /// restarts the service when pings stop).
    fn feed_watchdog(&mut self, report: &LivenessReport, now: Instant, interval: Duration) {
        if report.all_live() {
            if ping_due(self.last_ping, now, interval) {
                send(&[NotifyState::Watchdog]);
                self.last_ping = Some(now);
            }
            if !self.was_stale.is_empty() {
                info!("watchdog: every controller is live again; pinging resumed");
                self.was_stale.clear();
            }
            return;
        }
        let stale = stale_controllers(report);
        error!(
            "watchdog: NOT pinging systemd: controller not live: {}",
            stale.join(", ")
        );
        self.was_stale = stale;
    }
}

impl Supervisor {
    /// How long until the next ping is due (`None` before the first).
    fn next_ping_in(&self, now: Instant, interval: Duration) -> Option<Duration> {
        self.last_ping
            .map(|at| (at + interval).saturating_duration_since(now))
    }
}

/// True when a ping may go out at `now`: none yet, or the last one `interval` ago.
fn ping_due(last: Option<Instant>, now: Instant, interval: Duration) -> bool {
    last.is_none_or(|at| now.saturating_duration_since(at) >= interval)
}

/// Each controller that is not live, with its heartbeat age, window and queued update.
fn stale_controllers(report: &LivenessReport) -> Vec<String> {
    report
        .controllers
        .iter()
        .filter(|c| !c.live)
        .map(|c| {
            format!(
                "{} (last heartbeat {:.1}s ago, window {:.1}s{})",
                c.name,
                c.since_beat.as_secs_f64(),
                c.window.as_secs_f64(),
                c.queued_for
                    .map(|q| format!(", update queued {:.1}s", q.as_secs_f64()))
                    .unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    #[test]
    fn pings_go_out_at_most_once_per_interval() {
        let t0 = Instant::now();
        let half = Duration::from_millis(500);
        assert!(ping_due(None, t0, half), "the first ping at once");
        assert!(!ping_due(Some(t0), t0 + Duration::from_millis(499), half));
        assert!(ping_due(Some(t0), t0 + half, half));
        assert!(ping_due(Some(t0), t0 + Duration::from_secs(9), half));
    }

    #[test]
    fn the_watchdog_is_fed_only_while_every_controller_is_live() {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone());
        let route = liveness.register("route", Duration::from_secs(10));
        route.record_outcome(None);
        let mut s = Supervisor::default();
        let (t0, half) = (Instant::now(), Duration::from_secs(1));
        s.feed_watchdog(&liveness.report(), t0, half);
        assert_eq!(s.last_ping, Some(t0));
        assert_eq!(s.next_ping_in(t0, half), Some(half));
        s.feed_watchdog(&liveness.report(), t0 + half / 2, half);
        assert_eq!(s.last_ping, Some(t0), "too early: no ping");
        clock.advance(Duration::from_secs(12));
        s.feed_watchdog(&liveness.report(), t0 + half * 3, half);
        assert_eq!(s.last_ping, Some(t0), "a stale loop: no ping");
        assert_eq!(s.was_stale.len(), 1);
        route.beat();
        s.feed_watchdog(&liveness.report(), t0 + half * 4, half);
        assert_eq!(
            s.last_ping,
            Some(t0 + half * 4),
            "live again: a ping at once"
        );
        assert!(s.was_stale.is_empty());
    }

    #[test]
    fn status_line_names_failing_and_stale_controllers() {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone());
        let route = liveness.register("route", Duration::from_secs(10));
        let policy = liveness.register("policy", Duration::from_secs(100));
        policy.record_outcome(None);
        route.record_outcome(Some("route 10.0.0.0/8: Network is unreachable".into()));
        assert_eq!(
            status_line(&liveness.report(), None),
            "1/2 ready; route: sync failing: route 10.0.0.0/8: Network is unreachable"
        );
        route.record_outcome(None);
        assert_eq!(
            status_line(&liveness.report(), None),
            "2/2 controllers in sync"
        );
        // Issue 24: a state queued (the cluster's, say) is not in sync until its sync ends.
        policy.queued();
        assert_eq!(
            status_line(&liveness.report(), None),
            "2/2 ready; installing the latest state: policy"
        );
        policy.sync_started();
        assert_eq!(
            status_line(&liveness.report(), None),
            "2/2 ready; installing the latest state: policy"
        );
        policy.record_outcome(None);
        assert_eq!(
            status_line(&liveness.report(), None),
            "2/2 controllers in sync"
        );
        clock.advance(Duration::from_secs(12));
        assert_eq!(
            status_line(&liveness.report(), Some("a.toml:1:1: bad")),
            "2/2 ready; route: NOT LIVE (no heartbeat for 12s); config rejected: a.toml:1:1: bad"
        );
    }
}
