//! "The router reached the API server after time T": the proof a config from the cluster
//! waits for before it confirms itself (`[kubernetes] config_confirm`). Every request the
//! watcher makes is timed from before it connects; when the API server answers it (any 200),
//! the time it was opened is recorded here. A connection opened after a change and answered
//! proves the path through the new kernel state, both ways: an existing connection (the
//! firewall lets established ones through) proves nothing, which is why the time of the
//! *opening* counts, not of the answer.
//!
//! The node's Lease, once something renews it, is a second proof the confirm waits for: the
//! Lease writer says so once ([`Reached::expect_lease`]) and records each renewal it opened
//! ([`Reached::lease_renewed`]); from then on [`Reached::since`] needs a watch request *and*
//! a renewal opened after the change. The confirm asks for that renewal
//! ([`Reached::ask_lease`]) as it opens the watch again, so the writer renews at once rather
//! than at its next period. [`Reached::generation`] counts the answers for whoever just wants
//! to know that one came.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The newest opening times of answered requests.
#[derive(Debug)]
pub struct Reached {
    /// What the recorded times count from.
    epoch: Instant,
    /// Milliseconds after `epoch`, plus one (0: none yet), of the opening of the newest
    /// answered watcher request.
    watch: AtomicU64,
    /// The same for the newest Lease renewal.
    lease: AtomicU64,
    /// A Lease writer runs: its renewals are part of the proof.
    lease_expected: AtomicBool,
    /// The same for the time from which a renewal is asked for (0: never asked).
    lease_asked: AtomicU64,
    /// Answered requests so far.
    answers: AtomicU64,
}

impl Default for Reached {
    fn default() -> Reached {
        Reached {
            epoch: Instant::now(),
            watch: AtomicU64::new(0),
            lease: AtomicU64::new(0),
            lease_expected: AtomicBool::new(false),
            lease_asked: AtomicU64::new(0),
            answers: AtomicU64::new(0),
        }
    }
}

impl Reached {
    /// `t` as recorded: milliseconds after the epoch, plus one.
    fn stamp(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_millis() as u64 + 1
    }

    /// A watcher request opened (its connection started) at `opened` was answered.
    pub fn answered(&self, opened: Instant) {
        self.watch.fetch_max(self.stamp(opened), Ordering::SeqCst);
        self.answers.fetch_add(1, Ordering::SeqCst);
    }

    /// A Lease writer runs: from now on the confirm waits for a renewal too.
    pub fn expect_lease(&self) {
        self.lease_expected.store(true, Ordering::SeqCst);
    }

    /// A renewal of the node's Lease opened at `opened` was answered.
    pub fn lease_renewed(&self, opened: Instant) {
        self.lease.fetch_max(self.stamp(opened), Ordering::SeqCst);
        self.answers.fetch_add(1, Ordering::SeqCst);
    }

    /// A renewal opened at or after `t` is wanted (the confirm of a change waits for one).
    pub fn ask_lease(&self, t: Instant) {
        self.lease_asked.fetch_max(self.stamp(t), Ordering::SeqCst);
    }

    /// True while a renewal was asked for and none opened since has been answered: the
    /// writer renews without waiting for its period.
    pub fn lease_asked(&self) -> bool {
        self.lease_asked.load(Ordering::SeqCst) > self.lease.load(Ordering::SeqCst)
    }

    /// True when a watcher request opened at or after `t` was answered, and (with a Lease
    /// writer) a renewal opened at or after `t` too.
    pub fn since(&self, t: Instant) -> bool {
        let at = self.stamp(t);
        self.watch.load(Ordering::SeqCst) >= at
            && (!self.lease_expected.load(Ordering::SeqCst)
                || self.lease.load(Ordering::SeqCst) >= at)
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

    #[test]
    fn with_a_lease_writer_a_renewal_after_the_change_is_needed_too() {
        let reached = Reached::default();
        reached.expect_lease();
        let change = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        reached.answered(Instant::now());
        assert!(!reached.since(change), "the watch alone");
        reached.lease_renewed(Instant::now());
        assert!(reached.since(change));
        assert_eq!(reached.generation(), 2);
    }

    #[test]
    fn a_renewal_opened_before_the_change_does_not_count_and_one_is_asked_for() {
        let reached = Reached::default();
        reached.expect_lease();
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        let change = Instant::now();
        assert!(!reached.lease_asked(), "nothing asked yet");
        reached.ask_lease(change);
        assert!(reached.lease_asked());
        std::thread::sleep(Duration::from_millis(5));
        reached.answered(Instant::now());
        // A renewal that was on its way before the change, answered after it.
        reached.lease_renewed(before);
        assert!(
            !reached.since(change),
            "the renewal opened before the change"
        );
        assert!(reached.lease_asked(), "still asked for");
        reached.lease_renewed(Instant::now());
        assert!(reached.since(change));
        assert!(!reached.lease_asked(), "answered");
    }

    #[test]
    fn without_a_lease_writer_the_watch_alone_proves_it() {
        let reached = Reached::default();
        let change = Instant::now();
        reached.ask_lease(change);
        std::thread::sleep(Duration::from_millis(5));
        reached.answered(Instant::now());
        assert!(reached.since(change));
    }
}
