//! One probe loop: when it probes, and what it does with each outcome (count it by the
//! rise/fall rule in its [`ProbeState`], move its deadline, tell the caller).

use std::time::{Duration, Instant};

use super::random;
use super::state::{ProbeState, StateCell};

/// When the first probe starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum First {
    /// At once (an uplink: its routes wait for the verdict).
    Now,
    /// At a random offset within the interval, so that many targets configured together are
    /// not probed in the same instant (backends).
    RandomOffset,
}

/// What the interval separates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// The starts of two probes (an uplink's `interval`: time between probe starts).
    FromStart,
    /// The end of one probe and the start of the next (a backend's `interval`).
    AfterFinish,
}

/// How one loop probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between probes (see [`Pacing`]).
    pub interval: Duration,
    /// Time one probe may take.
    pub timeout: Duration,
    /// Slack beyond interval and timeout before a loop counts as late (a busy executor).
    pub grace: Duration,
    /// Consecutive good probes that bring a target up.
    pub rise: u32,
    /// Consecutive failed probes that take a target down.
    pub fall: u32,
    /// When the first probe starts.
    pub first: First,
    /// What the interval separates.
    pub pacing: Pacing,
}

impl Schedule {
    /// How long after one probe finished the next must have finished: the interval, the
    /// timeout and the grace.
    pub fn window(&self) -> Duration {
        self.interval + self.timeout + self.grace
    }
}

/// What one probe's outcome did to the loop's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Why the probe failed, if it did.
    pub reason: Option<String>,
    /// The new state, when the target changed state.
    pub flip: Option<bool>,
    /// Consecutive good probes so far.
    pub successes: u32,
    /// Consecutive failed probes so far.
    pub failures: u32,
}

/// Probes for ever (until dropped): `probe` is one probe, its outcome is recorded in `state`
/// and then handed to `recorded` (logs, metrics, waking whoever acts on a transition).
pub async fn run<C, P, F, R>(schedule: &Schedule, state: &C, mut probe: P, mut recorded: R)
where
    C: StateCell,
    P: FnMut() -> F,
    F: Future<Output = Result<(), String>>,
    R: FnMut(&Recorded),
{
    if schedule.first == First::RandomOffset {
        let span = schedule.interval.as_nanos().max(1) as u64;
        let offset = Duration::from_nanos(random() % span);
        state.update(|s| s.expect_within(offset + schedule.timeout + schedule.grace));
        smol::Timer::after(offset).await;
    }
    loop {
        let started = Instant::now();
        let outcome = probe().await;
        let reason = outcome.clone().err();
        let (flip, successes, failures) = state.update(|s: &mut ProbeState| {
            let flip = s.record(outcome, schedule.rise, schedule.fall);
            (flip, s.successes, s.failures)
        });
        recorded(&Recorded {
            reason,
            flip,
            successes,
            failures,
        });
        match schedule.pacing {
            Pacing::FromStart => smol::Timer::at(started + schedule.interval).await,
            Pacing::AfterFinish => smol::Timer::after(schedule.interval).await,
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn schedule(pacing: Pacing) -> Schedule {
        Schedule {
            interval: Duration::from_millis(20),
            timeout: Duration::from_millis(10),
            grace: Duration::from_secs(1),
            rise: 1,
            fall: 2,
            first: First::Now,
            pacing,
        }
    }

    #[test]
    fn a_loop_counts_its_outcomes_and_reports_the_transition_once() {
        let s = schedule(Pacing::AfterFinish);
        let state = Mutex::new(ProbeState::new(true, s.window()));
        let seen = std::cell::RefCell::new(Vec::new());
        let looped = run(
            &s,
            &state,
            || async { Err::<(), _>("refused".to_string()) },
            |r| seen.borrow_mut().push(r.clone()),
        );
        let three = async {
            while seen.borrow().len() < 3 {
                smol::Timer::after(Duration::from_millis(1)).await;
            }
        };
        smol::block_on(futures_lite::future::or(looped, three));
        let seen = seen.borrow();
        assert_eq!(seen[0].flip, None);
        assert_eq!(seen[1].flip, Some(false), "down after fall = 2");
        assert!(seen[2..].iter().all(|r| r.flip.is_none()), "{seen:?}");
        assert_eq!(seen[1].failures, 2);
        assert_eq!(seen[1].reason.as_deref(), Some("refused"));
        assert!(!state.lock().unwrap().up);
    }

    #[test]
    fn a_random_first_offset_moves_the_first_deadline() {
        let mut s = schedule(Pacing::FromStart);
        s.first = First::RandomOffset;
        s.interval = Duration::from_secs(60);
        let state = Mutex::new(ProbeState::new(true, s.window()));
        let window_due = state.lock().unwrap().due;
        let looped = run(&s, &state, || async { Ok(()) }, |_| {});
        smol::block_on(futures_lite::future::or(looped, async {}));
        let due = state.lock().unwrap().due;
        assert!(due < window_due, "offset (< interval) + timeout + grace");
    }
}
