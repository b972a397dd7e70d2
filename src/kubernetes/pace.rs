//! When to compose: a lone change at once (the leading edge), the changes that follow it
//! within the quiet gap after the burst has been quiet for that gap, but never later than a
//! bound after the first of them.
//!
//! A rollout sends EndpointSlice updates in a stream; composing after each would sync the
//! kernel once per update. Waiting for a quiet gap turns a burst into one snapshot; the bound
//! keeps a stream that never pauses (a big cluster always changing somewhere) from postponing
//! every change forever. A change that comes after a quiet gap is no burst yet: it is
//! composed at once, so a lone endpoint change pays no wait (issue 24). Pure: the caller
//! passes the time and sleeps until [`Pacer::due`].

use std::time::{Duration, Instant};

/// The quiet gap that ends a burst: the one figure the daemon runs and the docs state
/// (docs/kubernetes.md and the README, held equal by `the_docs_state_the_watch_figures`).
pub const QUIET: Duration = Duration::from_millis(50);
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
    /// The last change seen, composed or not: a change a quiet gap after it leads.
    last_change: Option<Instant>,
    /// The pending change leads (no change in the quiet gap before it): due at once.
    leading: bool,
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
            last_change: None,
            leading: false,
        }
    }

    /// Something changed at `now`.
    pub fn changed(&mut self, now: Instant) {
        let quiet_before = self
            .last_change
            .is_none_or(|t| now.saturating_duration_since(t) >= self.quiet);
        self.last_change = Some(now);
        match self.pending {
            None => {
                self.pending = Some((now, now));
                self.leading = quiet_before;
            }
            Some((first, _)) => self.pending = Some((first, now)),
        }
    }

    /// When to compose: `None` while nothing is pending.
    pub fn due(&self) -> Option<Instant> {
        let (first, last) = self.pending?;
        if self.leading {
            return Some(first);
        }
        Some((last + self.quiet).min(first + self.max_wait))
    }

    /// Whether a compose is due at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.due().is_some_and(|at| at <= now)
    }

    /// The pending changes were composed.
    pub fn composed(&mut self) {
        self.pending = None;
        self.leading = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Issue 24: every change waited for the quiet gap, a lone one too.
    #[test]
    fn a_lone_change_is_composed_at_once() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.due(), None);
        p.changed(t0);
        assert_eq!(p.due(), Some(t0));
        assert!(p.is_due(t0));
        p.composed();
        assert_eq!(p.due(), None);
        // Another lone one, a quiet gap later: at once again.
        p.changed(t0 + QUIET);
        assert!(p.is_due(t0 + QUIET));
    }

    #[test]
    fn a_change_soon_after_another_waits_for_the_quiet_gap() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        p.changed(t0);
        p.composed();
        p.changed(t0 + 10 * MS);
        assert_eq!(p.due(), Some(t0 + 10 * MS + QUIET));
        assert!(!p.is_due(t0 + 10 * MS + QUIET - MS));
    }

    #[test]
    fn a_burst_is_its_leading_change_then_one_compose_after_its_last_update() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        let mut composes = Vec::new();
        for i in 0..50 {
            let now = t0 + i * MS;
            p.changed(now);
            if p.is_due(now) {
                composes.push(i);
                p.composed();
            }
        }
        assert_eq!(composes, [0], "the first at once, the rest wait");
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
        assert_eq!(
            composes,
            [0, 1001, 2002],
            "the leading one, then once per MAX_WAIT, not per update"
        );
    }
}
