//! The state of every track, shared between the probers, the route controller and /healthz.
//!
//! A track starts up: a router that just booted keeps its routes until a probe proves the
//! uplink dead (`fall` failures), so a restart never withdraws a working default route.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::probe::schedule_of;
use crate::config::route::Track;
use crate::probe::{ProbeState, StateCell};

/// One track's state: the probe engine's (up/down, counts, last probe, deadline).
pub type TrackState = ProbeState;

/// The window of a track's prober: one interval plus one timeout plus slack for a busy
/// executor.
pub fn window_of(track: &Track) -> Duration {
    schedule_of(track).window()
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
            .or_insert_with(|| TrackState::new(true, window));
        state.restart(window);
    }

    /// Forgets every track not in `names` (removed from the config).
    pub fn retain(&self, names: &BTreeSet<&str>) {
        self.lock().retain(|name, _| names.contains(name.as_str()));
    }

    /// Records one probe's outcome; returns the new state when the track changed state.
    pub fn record(&self, track: &Track, outcome: Result<(), String>) -> Option<bool> {
        self.cell(track)
            .update(|s| s.record(outcome, track.rise, track.fall))
    }

    /// Where `track`'s prober keeps its state: its entry on the board (made again, up, when
    /// it was forgotten under a running prober).
    pub fn cell<'a>(&'a self, track: &'a Track) -> Cell<'a> {
        Cell { board: self, track }
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

/// One track's entry on the board, as the probe engine updates it.
pub struct Cell<'a> {
    board: &'a Board,
    track: &'a Track,
}

impl StateCell for Cell<'_> {
    fn update<T>(&self, f: impl FnOnce(&mut ProbeState) -> T) -> T {
        let mut map = self.board.lock();
        let state = map
            .entry(self.track.name.clone())
            .or_insert_with(|| TrackState::new(true, window_of(self.track)));
        f(state)
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
