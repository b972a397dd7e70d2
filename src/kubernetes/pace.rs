//! When to compose: after the cluster's updates have been quiet for a moment, but never later
//! than a bound after the first of them.
//!
//! A rollout sends EndpointSlice updates in a stream; composing after each would sync the
//! kernel once per update. Waiting for a quiet gap turns a burst into one snapshot; the bound
//! keeps a stream that never pauses (a big cluster always changing somewhere) from postponing
//! every change forever. Pure: the caller passes the time and sleeps until [`Pacer::due`].

use std::time::{Duration, Instant};

/// The quiet gap that ends a burst: the one figure the daemon runs and the docs state
/// (docs/kubernetes.md and the README, held equal by `the_docs_state_the_watch_figures`).
pub const QUIET: Duration = Duration::from_millis(200);
/// The longest a change waits for the burst it belongs to to end.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The changes not yet composed, and when they came.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// The quiet gap that ends a burst.
    quiet: Duration,
    /// The longest the first change waits.
    max_wait: Duration,
    /// (first, last) change since the last compose.
    pending: Option<(Instant, Instant)>,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(QUIET, MAX_WAIT)
    }
}

impl Pacer {
    /// A pacer with its own gap and bound.
    pub fn new(quiet: Duration, max_wait: Duration) -> Pacer {
        Pacer {
            quiet,
            max_wait,
            pending: None,
        }
    }

    /// Something changed at `now`.
    pub fn changed(&mut self, now: Instant) {
        let first = self.pending.map_or(now, |(first, _)| first);
        self.pending = Some((first, now));
    }

    /// When to compose: `None` while nothing is pending.
    pub fn due(&self) -> Option<Instant> {
        let (first, last) = self.pending?;
        Some((last + self.quiet).min(first + self.max_wait))
    }

    /// Whether a compose is due at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.due().is_some_and(|at| at <= now)
    }

    /// The pending changes were composed.
    pub fn composed(&mut self) {
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn one_change_is_composed_after_the_quiet_gap() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.due(), None);
        p.changed(t0);
        assert_eq!(p.due(), Some(t0 + QUIET));
        assert!(!p.is_due(t0 + QUIET - MS));
        assert!(p.is_due(t0 + QUIET));
        p.composed();
        assert_eq!(p.due(), None);
    }

    #[test]
    fn a_burst_is_one_compose_after_its_last_update() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        for i in 0..50 {
            p.changed(t0 + i * MS);
            assert!(!p.is_due(t0 + i * MS), "update {i}");
        }
        assert_eq!(p.due(), Some(t0 + 49 * MS + QUIET));
    }

    #[test]
    fn a_stream_that_never_pauses_is_composed_at_the_bound() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        let mut composes = Vec::new();
        // 3,000 updates, one every millisecond: never a quiet gap.
        for i in 0..3000 {
            let now = t0 + i * MS;
            p.changed(now);
            if p.is_due(now) {
                composes.push(i);
                p.composed();
            }
        }
        assert_eq!(composes, [1000, 2001], "once per MAX_WAIT, not per update");
    }
}
