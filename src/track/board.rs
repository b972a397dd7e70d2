//! The state of every track, shared between the probers, the route controller and /healthz.
//!
//! A track starts up: a router that just booted keeps its routes until a probe proves the
//! uplink dead (`fall` failures), so a restart never withdraws a working default route.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::config::route::Track;

/// One track's state.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackState {
    /// Whether the track's routes are installed.
    pub up: bool,
    /// Consecutive successful probes (reset by a failure).
    pub successes: u32,
    /// Consecutive failed probes (reset by a success).
    pub failures: u32,
    /// Up/down transitions so far.
    pub transitions: u64,
    /// When the last probe finished (monotonic), or when the prober started.
    pub last_probe: Instant,
    /// The same, in wall-clock time (for /healthz).
    pub last_probe_wall: SystemTime,
    /// How long the prober may go without finishing a probe before it counts as wedged.
    pub window: Duration,
    /// Why the last probe failed, if it did.
    pub last_error: Option<String>,
}

impl TrackState {
    fn new(window: Duration) -> TrackState {
        TrackState {
            up: true,
            successes: 0,
            failures: 0,
            transitions: 0,
            last_probe: Instant::now(),
            last_probe_wall: SystemTime::now(),
            window,
            last_error: None,
        }
    }

    /// Whether the prober finished a probe within its window.
    pub fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_probe) <= self.window
    }
}

/// The window of a track's prober: one interval plus one timeout plus slack for a busy
/// executor.
pub fn window_of(track: &Track) -> Duration {
    track.interval + track.timeout + Duration::from_secs(2)
}

/// Every track's state (cheap to clone: shared).
#[derive(Debug, Clone, Default)]
pub struct Board(Arc<Mutex<BTreeMap<String, TrackState>>>);

impl Board {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, TrackState>> {
        // Each update is one assignment of plain values: nothing half-written to fear.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts (or restarts) tracking `track`: a known track keeps its up/down state, so a
    /// reload does not flap it; a new one starts up.
    pub fn start(&self, track: &Track) {
        let window = window_of(track);
        let mut map = self.lock();
        let state = map
            .entry(track.name.clone())
            .or_insert_with(|| TrackState::new(window));
        state.window = window;
        state.last_probe = Instant::now();
        state.last_probe_wall = SystemTime::now();
    }

    /// Forgets every track not in `names` (removed from the config).
    pub fn retain(&self, names: &BTreeSet<&str>) {
        self.lock().retain(|name, _| names.contains(name.as_str()));
    }

    /// Records one probe's outcome; returns the new state when the track changed state.
    pub fn record(&self, track: &Track, outcome: Result<(), String>) -> Option<bool> {
        let mut map = self.lock();
        let state = map
            .entry(track.name.clone())
            .or_insert_with(|| TrackState::new(window_of(track)));
        state.last_probe = Instant::now();
        state.last_probe_wall = SystemTime::now();
        match outcome {
            Ok(()) => {
                state.successes = state.successes.saturating_add(1);
                state.failures = 0;
                state.last_error = None;
            }
            Err(e) => {
                state.failures = state.failures.saturating_add(1);
                state.successes = 0;
                state.last_error = Some(e);
            }
        }
        let flip = if state.up {
            state.failures >= track.fall
        } else {
            state.successes >= track.rise
        };
        if !flip {
            return None;
        }
        state.up = !state.up;
        state.transitions += 1;
        Some(state.up)
    }

    /// Whether `name` is down (an unknown track is up).
    pub fn is_down(&self, name: &str) -> bool {
        self.lock().get(name).is_some_and(|s| !s.up)
    }

    /// The names of the tracks that are down.
    pub fn down(&self) -> BTreeSet<String> {
        self.lock()
            .iter()
            .filter(|(_, s)| !s.up)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// A copy of every track's state.
    pub fn states(&self) -> BTreeMap<String, TrackState> {
        self.lock().clone()
    }

    /// The tracks whose prober missed its window (wedged).
    pub fn wedged(&self, now: Instant) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, s)| !s.live(now))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::route::TrackCheck;

    fn track(fall: u32, rise: u32) -> Track {
        Track {
            name: "wan1".into(),
            check: TrackCheck::Tcp,
            target: "192.0.2.1:53".parse().unwrap(),
            via: "203.0.113.1".parse().unwrap(),
            dev: "eth0".into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            fall,
            rise,
            table: 32000,
            fwmark: 1,
            priority: 90,
            inject_hang: false,
        }
    }

    #[test]
    fn a_track_goes_down_after_fall_failures_in_a_row_and_up_after_rise_successes() {
        let (t, board) = (track(3, 2), Board::default());
        board.start(&t);
        assert!(!board.is_down("wan1"), "a new track starts up");
        assert_eq!(board.record(&t, Err("timeout".into())), None);
        assert_eq!(board.record(&t, Err("timeout".into())), None);
        assert_eq!(board.record(&t, Ok(())), None, "a success resets the count");
        assert_eq!(board.record(&t, Err("timeout".into())), None);
        assert_eq!(board.record(&t, Err("timeout".into())), None);
        assert_eq!(board.record(&t, Err("refused".into())), Some(false));
        assert!(board.is_down("wan1"));
        assert_eq!(board.record(&t, Err("refused".into())), None, "no repeat");
        assert_eq!(board.record(&t, Ok(())), None);
        assert_eq!(board.record(&t, Ok(())), Some(true));
        assert_eq!(board.states()["wan1"].transitions, 2);
    }

    #[test]
    fn a_restarted_track_keeps_its_state_and_a_removed_one_is_forgotten() {
        let (t, board) = (track(1, 1), Board::default());
        board.start(&t);
        board.record(&t, Err("timeout".into()));
        board.start(&t);
        assert!(board.is_down("wan1"), "a reload does not flap the track");
        board.retain(&BTreeSet::new());
        assert!(!board.is_down("wan1"));
        assert!(board.states().is_empty());
    }

    #[test]
    fn a_prober_that_misses_its_window_is_wedged() {
        let (t, board) = (track(1, 1), Board::default());
        board.start(&t);
        let now = Instant::now();
        assert!(board.wedged(now).is_empty());
        assert_eq!(board.wedged(now + Duration::from_secs(5)), vec!["wan1"]);
    }
}
