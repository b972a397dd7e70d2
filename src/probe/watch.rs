//! The probes' heartbeat hookup: probe loops are work like the sync loops, held to the same
//! liveness contract. Every [`TICK`] the caller looks at its loops' deadlines; the watch
//! beats the caller's heartbeat only while no loop is late, so a probe that never returns (or
//! a stalled executor, which stops the look too) stops the beats and the heartbeat goes stale
//! within its window, exactly like a wedged controller's.

use std::time::Duration;

use crate::sync::Progress;

/// How often the probes are looked at while there are some.
pub const TICK: Duration = Duration::from_secs(1);

/// What one look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    /// The loops past their deadline (the caller's names for them).
    pub late: Vec<String>,
    /// Whether the set of late loops differs from the previous look's.
    pub changed: bool,
    /// Whether the previous look found any late loop.
    pub was_late: bool,
}

/// Beats a heartbeat while every probe loop is on time, and remembers the last look.
#[derive(Debug, Default)]
pub struct Watch {
    previous: Vec<String>,
}

impl Watch {
    /// One look: `late` are the loops past their deadline now; beats `heartbeat` when none is.
    pub fn look(&mut self, heartbeat: &dyn Progress, late: Vec<String>) -> Look {
        if late.is_empty() {
            heartbeat.beat();
        }
        let previous = std::mem::replace(&mut self.previous, late.clone());
        Look {
            changed: late != previous,
            was_late: !previous.is_empty(),
            late,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    struct Count(Cell<u32>);

    impl Progress for Count {
        fn beat(&self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn a_late_loop_stops_the_beats_until_it_is_on_time_again() {
        let (beats, mut watch) = (Count(Cell::new(0)), Watch::default());
        let on_time = watch.look(&beats, Vec::new());
        assert_eq!((beats.0.get(), on_time.changed), (1, false));
        let late = watch.look(&beats, vec!["wan1".into()]);
        assert_eq!(beats.0.get(), 1, "no beat while a loop is late");
        assert!(late.changed && !late.was_late);
        let still = watch.look(&beats, vec!["wan1".into()]);
        assert!(!still.changed && still.was_late);
        let more = watch.look(&beats, vec!["wan1".into(), "wan2".into()]);
        assert!(more.changed && more.was_late);
        watch.look(&beats, Vec::new());
        assert_eq!(beats.0.get(), 2, "beats again");
    }
}
