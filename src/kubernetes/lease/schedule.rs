//! When the writer writes (pure): a renewal every period while every loop is live, a change
//! of the annotations at once but at least the minimum gap after the last write, and after a
//! failure nothing for a whole period (a server that refuses writes gets one attempt a
//! period, whatever changes meanwhile).

use std::time::{Duration, Instant};

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Renews: `renewTime` is now (every loop is live).
    Renew,
    /// Writes the annotations and keeps the last `renewTime` (some loop is not live: the
    /// Lease runs out, and says why).
    Annotate,
}

/// The writer's timing.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The renewal period.
    renew_every: Duration,
    /// The shortest gap between two writes.
    min_gap: Duration,
    /// When the last write was attempted.
    last_attempt: Option<Instant>,
    /// The last attempt failed.
    failed: bool,
}

impl Schedule {
    /// A schedule that writes at once.
    pub fn new(renew_every: Duration, min_gap: Duration) -> Schedule {
        Schedule {
            renew_every,
            min_gap,
            last_attempt: None,
            failed: false,
        }
    }

    /// What to write at `now`, if anything: `live` when every loop is live, `changed` when
    /// the annotations differ from those last written.
    pub fn due(&self, now: Instant, live: bool, changed: bool) -> Option<Write> {
        let waited = |gap: Duration| {
            self.last_attempt
                .is_none_or(|t| now.saturating_duration_since(t) >= gap)
        };
        let change_gap = if self.failed {
            self.renew_every
        } else {
            self.min_gap
        };
        let change_due = changed && waited(change_gap);
        match live {
            true if waited(self.renew_every) || change_due => Some(Write::Renew),
            false if change_due => Some(Write::Annotate),
            _ => None,
        }
    }

    /// A write was attempted at `now`; `ok` when it succeeded.
    pub fn attempted(&mut self, now: Instant, ok: bool) {
        self.last_attempt = Some(now);
        self.failed = !ok;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_live_router_renews_every_period_and_writes_a_change_after_the_gap() {
        let t0 = Instant::now();
        let mut s = Schedule::new(10 * S, 2 * S);
        assert_eq!(s.due(t0, true, true), Some(Write::Renew), "at once");
        s.attempted(t0, true);
        assert_eq!(s.due(t0 + S, true, false), None);
        assert_eq!(s.due(t0 + S, true, true), None, "within the gap");
        assert_eq!(s.due(t0 + 2 * S, true, true), Some(Write::Renew));
        assert_eq!(s.due(t0 + 9 * S, true, false), None);
        assert_eq!(s.due(t0 + 10 * S, true, false), Some(Write::Renew));
    }

    #[test]
    fn a_stalled_router_stops_renewing_and_writes_only_changes() {
        let t0 = Instant::now();
        let mut s = Schedule::new(10 * S, 2 * S);
        s.attempted(t0, true);
        assert_eq!(s.due(t0 + 60 * S, false, false), None, "no renewal");
        assert_eq!(s.due(t0 + 3 * S, false, true), Some(Write::Annotate));
        s.attempted(t0 + 3 * S, true);
        assert_eq!(s.due(t0 + 60 * S, false, false), None);
        assert_eq!(
            s.due(t0 + 60 * S, true, false),
            Some(Write::Renew),
            "live again"
        );
    }

    #[test]
    fn after_a_failure_nothing_is_tried_for_a_period() {
        let t0 = Instant::now();
        let mut s = Schedule::new(10 * S, 2 * S);
        s.attempted(t0, false);
        assert_eq!(s.due(t0 + 5 * S, true, true), None);
        assert_eq!(s.due(t0 + 5 * S, false, true), None);
        assert_eq!(s.due(t0 + 10 * S, false, true), Some(Write::Annotate));
        assert_eq!(s.due(t0 + 10 * S, true, false), Some(Write::Renew));
    }
}
