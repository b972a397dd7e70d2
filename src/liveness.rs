//! The liveness registry: is every loop alive? Each controller loop (and each other piece of
//! work held to the same contract: the backend check probes, the track probers, the
//! Kubernetes watcher) has a [`Heartbeat`] in it; /healthz, /livez, /readyz, the systemd
//! watchdog and the liveness metrics read it. (Not to be confused with the backend checks of
//! `[service.health]`, which say whether a backend answers: `controller::service::backend_check`.)
//!
//! A heartbeat asserts one thing only: *this controller's loop is not wedged.* It does not
//! assert that the last sync succeeded: gating liveness on success would turn problems a
//! restart cannot fix (a rejected rule, an unreachable gateway) into a restart loop that takes
//! the router's whole network stack down with it. Sync outcomes are kept here only to be
//! *shown* (/healthz, STATUS=); they never change liveness.
//!
//! A controller is live while
//! - `now - last_beat <= period + sync_budget` (its window), and
//! - no desired-state change has waited longer than the window without a sync starting
//!   (kube-proxy's `QueuedUpdate`/`Updated` rule: it catches a loop that stopped taking work
//!   while something else keeps beating for it).
//!
//! Readiness: every controller has had at least one successful sync.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::clock::Clock;

/// The registry shared by the runners, the HTTP server and the systemd supervisor.
pub struct Liveness {
    clock: Arc<dyn Clock>,
    entries: Mutex<Vec<Entry>>,
    /// What STATUS= says about the configuration's confirm state (a pending confirm, the
    /// last rollback); not part of liveness.
    config_note: Mutex<Option<String>>,
    /// What STATUS= says first while the daemon runs a fallback instead of its config (the
    /// last good configuration, or the boot lockdown); not part of liveness.
    degraded_note: Mutex<Option<String>>,
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    window: Duration,
    last_beat: Instant,
    last_beat_wall: SystemTime,
    queued_since: Option<Instant>,
    /// The work said it has nothing to do ([`crate::sync::Progress::rest`]): live however long
    /// ago its last beat was, until it beats again.
    resting: bool,
    /// Desired-state changes queued so far, the count the last started sync serves, and the
    /// count the last finished sync served: settled when the last two equal the first.
    queued_count: u64,
    started_count: u64,
    served_count: u64,
    attempts: u64,
    failures: u64,
    last_success: Option<SystemTime>,
    last_error: Option<String>,
}

/// One controller's view of the registry: how its loop reports in.
#[derive(Clone)]
pub struct Heartbeat {
    liveness: Arc<Liveness>,
    index: usize,
}

/// The state of one controller at one instant, as /healthz shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerStatus {
    /// Controller name.
    pub name: String,
    /// Wall-clock time of the last heartbeat (registration counts as the first).
    pub last_beat: SystemTime,
    /// Time since the last heartbeat.
    pub since_beat: Duration,
    /// The liveness window: period + sync_budget.
    pub window: Duration,
    /// How long the oldest unserved desired-state change has waited, if any.
    pub queued_for: Option<Duration>,
    /// Whether the loop counts as alive (see the module docs).
    pub live: bool,
    /// Every desired-state change queued for it has been through a finished sync (whatever
    /// its outcome); READY=1 waits for this, so it follows the state known at start.
    pub settled: bool,
    /// Desired-state changes queued for it so far (what a config from the cluster's
    /// confirm waits to see served).
    #[cfg(feature = "kubernetes")]
    pub queued: u64,
    /// Of those, how many a finished sync (whatever its outcome) has served: once this
    /// reaches a `queued` read earlier, the state queued then is in the kernel.
    #[cfg(feature = "kubernetes")]
    pub served: u64,
    /// Wall-clock time of the last successful sync.
    pub last_success: Option<SystemTime>,
    /// Syncs attempted so far.
    pub attempts: u64,
    /// Syncs that failed so far.
    pub failures: u64,
    /// The last sync's error, if the last sync failed.
    pub last_error: Option<String>,
}

/// Everything at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct LivenessReport {
    /// When the report was taken.
    pub current_time: SystemTime,
    /// The most recent heartbeat of any controller.
    pub last_updated: Option<SystemTime>,
    /// One entry per controller, in registration order.
    pub controllers: Vec<ControllerStatus>,
    /// The configuration's confirm state for STATUS= (`edgenetd apply --confirm`), if any.
    pub config_note: Option<String>,
    /// The fallback the daemon runs instead of its config, for STATUS= (`degraded: …`).
    pub degraded_note: Option<String>,
}

impl LivenessReport {
    /// True when every controller is live (an empty registry is live).
    pub fn all_live(&self) -> bool {
        self.controllers.iter().all(|c| c.live)
    }

    /// True when every controller has had a successful sync.
    pub fn ready(&self) -> bool {
        self.controllers.iter().all(|c| c.last_success.is_some())
    }

    /// True when every controller has finished at least one sync attempt, and every
    /// desired-state change published so far went through a finished sync (a cluster state
    /// that arrived after the first syncs is attempted before READY=1, too).
    pub fn first_attempts_done(&self) -> bool {
        self.controllers.iter().all(|c| c.attempts > 0 && c.settled)
    }

    /// The names of the controllers that are not live.
    pub fn stale(&self) -> Vec<&str> {
        self.controllers
            .iter()
            .filter(|c| !c.live)
            .map(|c| c.name.as_str())
            .collect()
    }
}

impl Liveness {
    /// An empty registry on a clock.
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Liveness> {
        Arc::new(Liveness {
            clock,
            entries: Mutex::new(Vec::new()),
            config_note: Mutex::new(None),
            degraded_note: Mutex::new(None),
        })
    }

    /// Sets or clears what STATUS= says about the configuration's confirm state.
    pub fn set_config_note(&self, note: Option<String>) {
        *self.config_note.lock().unwrap_or_else(|p| p.into_inner()) = note;
    }

    /// Sets or clears what STATUS= says first about a fallback configuration.
    pub fn set_degraded_note(&self, note: Option<String>) {
        *self.degraded_note.lock().unwrap_or_else(|p| p.into_inner()) = note;
    }

    /// The registry's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Registers a controller; registration counts as its first heartbeat.
    pub fn register(self: &Arc<Self>, name: &str, window: Duration) -> Heartbeat {
        let mut entries = self.lock();
        let entry = Entry {
            name: name.to_string(),
            window,
            last_beat: self.clock.now(),
            last_beat_wall: self.clock.wall(),
            queued_since: None,
            resting: false,
            queued_count: 0,
            started_count: 0,
            served_count: 0,
            attempts: 0,
            failures: 0,
            last_success: None,
            last_error: None,
        };
        let index = match entries.iter().position(|e| e.name == name) {
            Some(i) => {
                entries[i] = entry;
                i
            }
            None => {
                entries.push(entry);
                entries.len() - 1
            }
        };
        Heartbeat {
            liveness: Arc::clone(self),
            index,
        }
    }

    /// The state of every controller now.
    pub fn report(&self) -> LivenessReport {
        let now = self.clock.now();
        let entries = self.lock();
        let controllers: Vec<ControllerStatus> = entries
            .iter()
            .map(|e| {
                let since_beat = now.saturating_duration_since(e.last_beat);
                let queued_for = e.queued_since.map(|q| now.saturating_duration_since(q));
                let live = (e.resting || since_beat <= e.window)
                    && queued_for.is_none_or(|q| q <= e.window);
                ControllerStatus {
                    name: e.name.clone(),
                    last_beat: e.last_beat_wall,
                    since_beat,
                    window: e.window,
                    queued_for,
                    settled: e.served_count == e.queued_count,
                    #[cfg(feature = "kubernetes")]
                    queued: e.queued_count,
                    #[cfg(feature = "kubernetes")]
                    served: e.served_count,
                    live,
                    last_success: e.last_success,
                    attempts: e.attempts,
                    failures: e.failures,
                    last_error: e.last_error.clone(),
                }
            })
            .collect();
        let last_updated = controllers.iter().map(|c| c.last_beat).max();
        LivenessReport {
            current_time: self.clock.wall(),
            last_updated,
            controllers,
            config_note: self
                .config_note
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            degraded_note: self
                .degraded_note
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        // A panic while holding the lock cannot leave an entry half-written in a way that
        // matters for liveness, so keep serving rather than poisoning every later caller.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Heartbeat {
    /// The controller's name.
    pub fn name(&self) -> String {
        self.liveness.lock()[self.index].name.clone()
    }

    /// The registry this handle reports to.
    pub fn liveness(&self) -> &Arc<Liveness> {
        &self.liveness
    }

    /// Records a heartbeat now.
    pub fn beat(&self) {
        let (now, wall) = (self.liveness.clock.now(), self.liveness.clock.wall());
        let mut entries = self.liveness.lock();
        let e = &mut entries[self.index];
        e.last_beat = now;
        e.last_beat_wall = wall;
        e.resting = false;
    }

    /// Beats, then holds no silence against the work until its next beat (it has nothing to
    /// do until something wakes it).
    pub fn rest(&self) {
        self.beat();
        self.liveness.lock()[self.index].resting = true;
    }

    /// A new desired state is waiting for this controller (kube-proxy's `QueuedUpdate`):
    /// the oldest waiting change is what counts, so a later one does not reset the clock.
    pub fn queued(&self) {
        let now = self.liveness.clock.now();
        let mut entries = self.liveness.lock();
        let e = &mut entries[self.index];
        e.queued_since.get_or_insert(now);
        e.queued_count += 1;
    }

    /// A sync starts: beat, and every queued change is now being served (`Updated`).
    pub fn sync_started(&self) {
        let (now, wall) = (self.liveness.clock.now(), self.liveness.clock.wall());
        let mut entries = self.liveness.lock();
        let e = &mut entries[self.index];
        e.last_beat = now;
        e.last_beat_wall = wall;
        e.queued_since = None;
        e.started_count = e.queued_count;
    }

    /// Records a finished sync's outcome (called only by `metrics::record_sync_result`, and
    /// by [`Heartbeat::source_ready`]).
    pub(crate) fn record_outcome(&self, error: Option<String>) {
        let wall = self.liveness.clock.wall();
        let mut entries = self.liveness.lock();
        let e = &mut entries[self.index];
        e.attempts += 1;
        e.served_count = e.started_count;
        match error {
            None => {
                e.last_success = Some(wall);
                e.last_error = None;
            }
            Some(err) => {
                e.failures += 1;
                e.last_error = Some(err);
            }
        }
    }

    /// A source that is not a sync loop (the kubernetes watcher) has a complete state: counted
    /// as one successful attempt, so readiness and READY=1 wait for it like for a first sync.
    pub fn source_ready(&self) {
        self.record_outcome(None);
    }

    /// A source that is not a sync loop could not complete its state on its first attempt:
    /// counted as one failed attempt, so READY=1 (which follows every first attempt, as for a
    /// controller whose first sync failed) does not wait for it, while readiness (/readyz,
    /// `ready`) does until [`Heartbeat::source_ready`].
    pub fn source_incomplete(&self, why: String) {
        self.record_outcome(Some(why));
    }

    /// Changes the liveness window (settings reloaded).
    pub fn set_window(&self, window: Duration) {
        self.liveness.lock()[self.index].window = window;
    }
}

impl crate::sync::Progress for Heartbeat {
    fn beat(&self) {
        Heartbeat::beat(self);
    }

    fn rest(&self) {
        Heartbeat::rest(self);
    }
}

/// Beat, run one sync, beat again — the second beat whatever the sync returned (and even if
/// the sync's future panics or is dropped part-way).
pub async fn run_sync<T, F>(handle: &Heartbeat, sync: F) -> T
where
    F: Future<Output = T>,
{
    struct BeatOnDrop<'a>(&'a Heartbeat);
    impl Drop for BeatOnDrop<'_> {
        fn drop(&mut self) {
            self.0.beat();
        }
    }
    handle.sync_started();
    let _second_beat = BeatOnDrop(handle);
    sync.await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    fn setup(window_secs: u64) -> (Arc<FakeClock>, Arc<Liveness>, Heartbeat) {
        let clock = FakeClock::new();
        let liveness = Liveness::new(clock.clone());
        let h = liveness.register("route", Duration::from_secs(window_secs));
        (clock, liveness, h)
    }

    /// The kubernetes benchmark's finding: READY=1 came while the cluster state, published
    /// after the first (TOML-only) sync, was still unsynced: 0 of 5,000 services in the kernel.
    #[test]
    fn a_state_published_after_the_first_sync_holds_first_attempts_until_a_sync_serves_it() {
        let (_clock, liveness, h) = setup(10);
        h.sync_started();
        h.record_outcome(None);
        assert!(liveness.report().first_attempts_done());
        h.queued();
        assert!(
            !liveness.report().first_attempts_done(),
            "queued, not served"
        );
        h.sync_started();
        assert!(!liveness.report().first_attempts_done(), "being served");
        h.queued();
        h.record_outcome(Some("refused".into()));
        assert!(
            !liveness.report().first_attempts_done(),
            "a change queued during the sync waits for the next one"
        );
        h.sync_started();
        h.record_outcome(Some("refused".into()));
        assert!(
            liveness.report().first_attempts_done(),
            "served, whatever the outcome"
        );
    }

    #[test]
    fn live_until_the_window_passes_without_a_beat() {
        let (clock, liveness, h) = setup(10);
        assert!(liveness.report().all_live());
        clock.advance(Duration::from_secs(10));
        assert!(
            liveness.report().all_live(),
            "exactly at the window edge is still live"
        );
        clock.advance(Duration::from_millis(1));
        assert_eq!(liveness.report().stale(), ["route"]);
        h.beat();
        assert!(liveness.report().all_live(), "a beat makes it live again");
    }

    #[test]
    fn a_resting_heartbeat_stays_live_past_its_window_until_its_next_beat() {
        let (clock, liveness, h) = setup(10);
        h.rest();
        clock.advance(Duration::from_secs(3600));
        assert!(liveness.report().all_live(), "nothing to do is not a stall");
        h.beat();
        clock.advance(Duration::from_secs(11));
        assert_eq!(
            liveness.report().stale(),
            ["route"],
            "a beat ends the rest: silence counts again"
        );
    }

    #[test]
    fn queued_update_unserved_past_the_window_is_not_live_even_while_beating() {
        let (clock, liveness, h) = setup(10);
        h.queued();
        for _ in 0..10 {
            clock.advance(Duration::from_secs(1));
            h.beat(); // a timer keeps beating, but no sync picks the update up
        }
        assert!(liveness.report().all_live());
        clock.advance(Duration::from_secs(1));
        h.beat();
        let r = liveness.report();
        assert!(!r.all_live(), "{r:?}");
        assert_eq!(r.controllers[0].queued_for, Some(Duration::from_secs(11)));
        h.sync_started();
        assert!(
            liveness.report().all_live(),
            "starting a sync serves the queued update"
        );
    }

    #[test]
    fn a_later_queued_update_does_not_reset_the_oldest() {
        let (clock, liveness, h) = setup(10);
        h.queued();
        clock.advance(Duration::from_secs(8));
        h.queued();
        h.beat();
        clock.advance(Duration::from_secs(3));
        h.beat();
        assert!(!liveness.report().all_live());
    }

    #[test]
    fn outcomes_do_not_change_liveness_and_readiness_needs_one_success() {
        let (_clock, liveness, h) = setup(10);
        assert!(!liveness.report().first_attempts_done());
        h.record_outcome(Some("gateway unreachable".into()));
        let r = liveness.report();
        assert!(r.all_live() && r.first_attempts_done() && !r.ready());
        assert_eq!(
            r.controllers[0].last_error.as_deref(),
            Some("gateway unreachable")
        );
        h.record_outcome(None);
        let r = liveness.report();
        assert!(r.ready());
        assert_eq!(
            (r.controllers[0].attempts, r.controllers[0].failures),
            (2, 1)
        );
        assert_eq!(r.controllers[0].last_error, None);
    }

    #[test]
    fn run_sync_beats_twice_when_the_sync_fails() {
        let (clock, liveness, h) = setup(10);
        let start = liveness.report().controllers[0].last_beat;
        let result: Result<(), &str> = smol::block_on(run_sync(&h, async {
            clock.advance(Duration::from_secs(4));
            let during = liveness.report().controllers[0].last_beat;
            assert_eq!(
                during.duration_since(start).unwrap(),
                Duration::ZERO,
                "first beat at start"
            );
            clock.advance(Duration::from_secs(4));
            Err("boom")
        }));
        assert_eq!(result, Err("boom"));
        let after = liveness.report().controllers[0].last_beat;
        assert_eq!(
            after.duration_since(start).unwrap(),
            Duration::from_secs(8),
            "second beat at the end"
        );
    }

    #[test]
    fn run_sync_beats_at_start_even_when_the_previous_beat_is_old() {
        let (clock, liveness, h) = setup(10);
        clock.advance(Duration::from_secs(30));
        assert!(!liveness.report().all_live());
        smol::block_on(run_sync(&h, async {
            assert!(
                liveness.report().all_live(),
                "the first beat revives a loop that starts a sync"
            );
        }));
    }
}
