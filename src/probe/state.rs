//! One probe loop's state: up or down by the rise/fall rule, and when its next probe must
//! have finished (the deadline the heartbeat hookup holds it to).
//!
//! The rise/fall rule: a target that is up goes down after `fall` failed probes in a row, one
//! that is down goes up after `rise` good probes in a row; a probe of the other outcome resets
//! the count.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// One probe loop's state.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeState {
    /// Whether the target counts as up.
    pub up: bool,
    /// Consecutive successful probes (reset by a failure).
    pub successes: u32,
    /// Consecutive failed probes (reset by a success).
    pub failures: u32,
    /// Up/down transitions so far.
    pub transitions: u64,
    /// When the last probe finished (monotonic), or when the loop started.
    pub last_probe: Instant,
    /// The same, in wall-clock time (for /healthz).
    pub last_probe_wall: SystemTime,
    /// How long after a finished probe the next one must have finished
    /// ([`super::Schedule::window`]).
    pub window: Duration,
    /// When the probe under way (or the next one) must have finished.
    pub due: Instant,
    /// Why the last probe failed, if it did.
    pub last_error: Option<String>,
}

impl ProbeState {
    /// A loop starting now, `up` or down, held to `window`.
    pub fn new(up: bool, window: Duration) -> ProbeState {
        let now = Instant::now();
        ProbeState {
            up,
            successes: 0,
            failures: 0,
            transitions: 0,
            last_probe: now,
            last_probe_wall: SystemTime::now(),
            window,
            due: now + window,
            last_error: None,
        }
    }

    /// The loop (re)starts now with `window`, keeping its up/down state and counts: its start
    /// counts as a finished probe.
    pub fn restart(&mut self, window: Duration) {
        let now = Instant::now();
        self.window = window;
        self.last_probe = now;
        self.last_probe_wall = SystemTime::now();
        self.due = now + window;
    }

    /// The next probe must have finished within `allow` from now (a first probe after an
    /// offset).
    pub fn expect_within(&mut self, allow: Duration) {
        self.due = Instant::now() + allow;
    }

    /// Records one probe's outcome by the rise/fall rule; returns the new state when the
    /// target changed state.
    pub fn record(&mut self, outcome: Result<(), String>, rise: u32, fall: u32) -> Option<bool> {
        let now = Instant::now();
        self.last_probe = now;
        self.last_probe_wall = SystemTime::now();
        self.due = now + self.window;
        match outcome {
            Ok(()) => {
                self.successes = self.successes.saturating_add(1);
                self.failures = 0;
                self.last_error = None;
            }
            Err(e) => {
                self.failures = self.failures.saturating_add(1);
                self.successes = 0;
                self.last_error = Some(e);
            }
        }
        let flip = if self.up {
            self.failures >= fall
        } else {
            self.successes >= rise
        };
        if !flip {
            return None;
        }
        self.up = !self.up;
        self.transitions += 1;
        Some(self.up)
    }

    /// Whether the loop is on time: the probe due has not overrun its deadline.
    pub fn live(&self, now: Instant) -> bool {
        now <= self.due
    }
}

/// Where a probe loop's state lives: the loop updates it through this, its readers (a
/// controller, /healthz, the heartbeat hookup) read it their own way.
pub trait StateCell {
    /// Runs `f` on the state.
    fn update<T>(&self, f: impl FnOnce(&mut ProbeState) -> T) -> T;
}

impl StateCell for Mutex<ProbeState> {
    fn update<T>(&self, f: impl FnOnce(&mut ProbeState) -> T) -> T {
        f(&mut lock(self))
    }
}

/// Locks `m`; a panic elsewhere leaves nothing half-written that matters (plain values).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_after_fall_failures_in_a_row_and_up_after_rise_successes() {
        let mut s = ProbeState::new(true, Duration::from_secs(4));
        let fail = || Err("timeout".to_string());
        assert_eq!(s.record(fail(), 2, 3), None);
        assert_eq!(s.record(fail(), 2, 3), None);
        assert_eq!(s.record(Ok(()), 2, 3), None, "a success resets the count");
        assert_eq!(s.record(fail(), 2, 3), None);
        assert_eq!(s.record(fail(), 2, 3), None);
        assert_eq!(s.record(Err("refused".into()), 2, 3), Some(false));
        assert_eq!(s.last_error.as_deref(), Some("refused"));
        assert_eq!(s.record(fail(), 2, 3), None, "no repeat");
        assert_eq!(s.record(Ok(()), 2, 3), None);
        assert_eq!(s.record(Ok(()), 2, 3), Some(true));
        assert_eq!((s.transitions, s.last_error.clone()), (2, None));
    }

    #[test]
    fn a_loop_that_starts_down_needs_rise_successes() {
        let mut s = ProbeState::new(false, Duration::from_secs(4));
        assert_eq!(s.record(Err("refused".into()), 2, 1), None, "already down");
        assert_eq!(s.record(Ok(()), 2, 1), None);
        assert_eq!(s.record(Ok(()), 2, 1), Some(true));
    }

    #[test]
    fn a_loop_is_late_once_its_probe_overran_the_deadline() {
        let mut s = ProbeState::new(true, Duration::from_secs(4));
        let now = Instant::now();
        assert!(s.live(now + Duration::from_secs(3)));
        assert!(!s.live(now + Duration::from_secs(5)));
        s.expect_within(Duration::from_secs(10));
        assert!(s.live(now + Duration::from_secs(9)));
        s.record(Ok(()), 1, 1);
        assert!(
            !s.live(Instant::now() + Duration::from_secs(5)),
            "back to the window"
        );
    }
}
