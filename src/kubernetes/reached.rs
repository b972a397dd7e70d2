//! "The router reached the API server after time T": the proof a config from the cluster
//! waits for before it confirms itself (`[kubernetes] config_confirm`). Every request the
//! client makes is timed from before it connects; when the API server answers it (any 200),
//! the time it was opened is recorded here. A connection opened after a change and answered
//! proves the path through the new kernel state, both ways: an existing connection (the
//! firewall lets established ones through) proves nothing, which is why the time of the
//! *opening* counts, not of the answer.
//!
//! Whatever else talks to the API server (a Lease writer renewing the node's Lease) records
//! its requests here too, so the confirm waits for any of them; [`Reached::generation`]
//! counts the answers for whoever just wants to know that one came.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The newest opening time of an answered request.
#[derive(Debug)]
pub struct Reached {
    /// What the recorded times count from.
    epoch: Instant,
    /// Milliseconds after `epoch`, plus one (0: nothing answered yet), of the opening of the
    /// newest answered request.
    opened: AtomicU64,
    /// Answered requests so far.
    answers: AtomicU64,
}

impl Default for Reached {
    fn default() -> Reached {
        Reached {
            epoch: Instant::now(),
            opened: AtomicU64::new(0),
            answers: AtomicU64::new(0),
        }
    }
}

impl Reached {
    /// A request opened (its connection started) at `opened` was answered.
    pub fn answered(&self, opened: Instant) {
        let ms = opened.saturating_duration_since(self.epoch).as_millis() as u64 + 1;
        self.opened.fetch_max(ms, Ordering::SeqCst);
        self.answers.fetch_add(1, Ordering::SeqCst);
    }

    /// True when a request opened at or after `t` was answered.
    pub fn since(&self, t: Instant) -> bool {
        let at = t.saturating_duration_since(self.epoch).as_millis() as u64 + 1;
        self.opened.load(Ordering::SeqCst) >= at
    }

    /// How many requests were answered so far.
    pub fn generation(&self) -> u64 {
        self.answers.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_a_request_opened_after_the_change_proves_the_path() {
        let reached = Reached::default();
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        let change = Instant::now();
        assert!(!reached.since(change));
        // A watch opened before the change, still answering: no proof.
        reached.answered(before);
        assert!(!reached.since(change));
        assert_eq!(reached.generation(), 1);
        std::thread::sleep(Duration::from_millis(5));
        reached.answered(Instant::now());
        assert!(reached.since(change));
        // An older answer arriving late does not move it back.
        reached.answered(before);
        assert!(reached.since(change));
    }
}
