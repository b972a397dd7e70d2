//! The periodic full compare gives way to changes, within a bound (issue 24).
//!
//! At 5,000 services the full compare reads and checks every element of the table: seconds
//! on a loaded 2-core router, during which a change used to wait. Only the *periodic* compare
//! may give way: the mirror is known and no other process committed, so the mirror is as
//! good for a delta as it was before the compare fell due. The others (at startup, after a
//! failed batch, after a foreign commit) are how the mirror becomes trustworthy again, and
//! run to the end.
//!
//! How it gives way, the simplest way that stays correct:
//! - a sync that falls due for the periodic compare while its desired state differs from the
//!   mirror runs the delta only, and leaves the compare due;
//! - a periodic compare checks, between sets and every few hundred elements, whether newer
//!   work waits for the loop ([`crate::sync::Progress::waiting`]: a new snapshot, a backend
//!   check or kernel event). It then stops before writing anything, puts the mirror back as it
//!   was (trusted, still due) and the loop's next sync runs the change by delta;
//! - after a sync that left the compare due, the controller wakes its loop at once, so the
//!   compare starts again right after the change.
//!
//! A stopped compare starts again from the beginning rather than resuming: what it had checked
//! was checked against a desired state the delta has since changed, and the kernel elements it
//! had read may be the ones the delta rewrote; sorting out which findings still hold costs
//! more code (and more ways to be wrong) than reading the table again.
//!
//! The bound: giving way starts a clock ([`Deferral`]); once the compare has been put off for
//! [`bound`] (half a period), it runs to the end whatever waits, so drift is found and
//! repaired under an endless stream of changes too — at most half a period later than without
//! changes (the change that arrives during that one compare waits for it, as every change did
//! before). Half a period, not less: a burst of changes that outlasts the bound would have one
//! of its changes wait a whole compare.

use std::time::{Duration, Instant};

/// How long the periodic compare may be put off, from the first time it gave way.
pub fn bound(period: Duration) -> Duration {
    period / 2
}

/// The periodic compare's giving way since it last ran to the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deferral {
    /// When it first gave way; `None`: it has not (or it ran to the end since).
    since: Option<Instant>,
    /// How many times it gave way since then (a change went first, or it stopped).
    times: u32,
}

impl Deferral {
    /// Whether the compare, due at `now`, may still give way to a change.
    pub fn may_yield(&self, now: Instant, period: Duration) -> bool {
        self.since
            .is_none_or(|since| now.saturating_duration_since(since) < bound(period))
    }

    /// Records that the compare gave way at `now`.
    pub fn yielded(&mut self, now: Instant) {
        self.since.get_or_insert(now);
        self.times += 1;
    }

    /// True while the compare has given way and not yet run to the end (it is still due).
    pub fn pending(&self) -> bool {
        self.since.is_some()
    }

    /// The compare ran to the end (or a compare that may not give way did): how long and how
    /// many times it had been put off, for the log; the clock stops.
    pub fn done(&mut self, now: Instant) -> Option<(Duration, u32)> {
        let since = self.since.take()?;
        let times = std::mem::take(&mut self.times);
        Some((now.saturating_duration_since(since), times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(30);

    #[test]
    fn a_compare_that_never_gave_way_may_give_way() {
        let d = Deferral::default();
        assert!(d.may_yield(Instant::now(), PERIOD));
        assert!(!d.pending());
    }

    #[test]
    fn giving_way_is_bounded_from_the_first_time_not_the_last() {
        let t0 = Instant::now();
        let mut d = Deferral::default();
        d.yielded(t0);
        assert!(d.pending());
        // A change every second: each may go first until the bound, counted from t0.
        let mut t = t0;
        while t < t0 + bound(PERIOD) {
            assert!(d.may_yield(t, PERIOD), "at {:?}", t - t0);
            d.yielded(t);
            t += Duration::from_secs(1);
        }
        assert!(
            !d.may_yield(t0 + bound(PERIOD), PERIOD),
            "at the bound: runs to the end"
        );
        assert!(!d.may_yield(t0 + PERIOD, PERIOD));
        assert_eq!(d.done(t0 + bound(PERIOD)), Some((bound(PERIOD), 16)));
    }

    #[test]
    fn running_to_the_end_restarts_the_clock() {
        let t0 = Instant::now();
        let mut d = Deferral::default();
        d.yielded(t0);
        assert!(!d.may_yield(t0 + PERIOD, PERIOD));
        assert_eq!(d.done(t0 + PERIOD), Some((PERIOD, 1)));
        assert!(!d.pending());
        assert_eq!(d.done(t0 + PERIOD), None, "nothing put off since");
        assert!(
            d.may_yield(t0 + PERIOD * 2, PERIOD),
            "the next period's compare may give way again"
        );
        d.yielded(t0 + PERIOD * 2);
        assert!(d.may_yield(t0 + PERIOD * 2 + bound(PERIOD) / 2, PERIOD));
    }

    #[test]
    fn the_bound_is_within_the_period() {
        for p in [1, 30, 3600] {
            let period = Duration::from_secs(p);
            assert!(bound(period) > Duration::ZERO && bound(period) < period);
        }
    }
}
