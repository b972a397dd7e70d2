//! What a controller believes is in the kernel, and when it may believe it.
//!
//! Every controller keeps a snapshot of the state its last sync left installed, so a sync
//! with nothing new to look at costs only its own writes. The snapshot is *trusted* (used
//! instead of dumping the kernel) only when all of these hold:
//! - the previous sync succeeded completely (a partial failure leaves the kernel in a state
//!   the snapshot does not describe exactly);
//! - no invalidating event came since (kernel-event monitors and the nftables foreign-commit
//!   watch set the [`Invalidation`] flag);
//! - the event source is running (without it, a change by somebody else goes unnoticed);
//! - the last full verification (dump and compare) is younger than the resync period minus a
//!   tenth of it, so the periodic wake-up always verifies.
//!
//! Otherwise the controller dumps the kernel and compares in full ([`Decision::Verify`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A flag that says "the kernel may have changed behind the cache's back". Cheap to clone;
/// event sources keep a clone and set it.
#[derive(Debug, Clone, Default)]
pub struct Invalidation(Arc<AtomicBool>);

impl Invalidation {
    /// Marks the cache as no longer trusted: the next sync verifies.
    pub fn invalidate(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Reads and clears the flag (an event after this call sets it again).
    fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

/// Whether a sync may use the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The snapshot is what the kernel holds: plan against it, dump nothing.
    Trusted,
    /// Dump the kernel and compare in full.
    Verify,
}

/// A controller's belief about the kernel (`S`: its snapshot of installed state).
#[derive(Debug)]
pub struct KernelCache<S> {
    /// What the last sync left installed, as far as this process knows; `None` = unknown.
    snapshot: Option<S>,
    /// True when the sync that stored the snapshot had no failure.
    complete: bool,
    /// When the kernel was last dumped and compared in full.
    verified_at: Option<Instant>,
    /// Set by event sources; read (and cleared) by [`KernelCache::decide`].
    invalid: Invalidation,
}

impl<S> Default for KernelCache<S> {
    fn default() -> Self {
        KernelCache {
            snapshot: None,
            complete: false,
            verified_at: None,
            invalid: Invalidation::default(),
        }
    }
}

impl<S> KernelCache<S> {
    /// An empty cache (the first sync verifies).
    pub fn new() -> KernelCache<S> {
        KernelCache::default()
    }

    /// An empty cache invalidated through `invalid` (a flag an event source already holds).
    pub fn with_invalidation(invalid: Invalidation) -> KernelCache<S> {
        KernelCache {
            invalid,
            ..KernelCache::default()
        }
    }

    /// The flag event sources set (a clone; it stays connected to this cache).
    pub fn invalidation(&self) -> Invalidation {
        self.invalid.clone()
    }

    /// Marks the cache untrusted (e.g. the controller saw a foreign commit itself).
    pub fn invalidate(&self) {
        self.invalid.invalidate();
    }

    /// Trusted or verify (see the module docs for the rule). `source_running` says whether
    /// the event source that would set the invalidation flag is alive. Clears the flag: an
    /// event that comes later sets it again.
    pub fn decide(&mut self, now: Instant, period: Duration, source_running: bool) -> Decision {
        let invalidated = self.invalid.take();
        let fresh = self
            .verified_at
            .is_some_and(|at| now.saturating_duration_since(at) + period / 10 < period);
        if self.snapshot.is_some() && self.complete && !invalidated && source_running && fresh {
            Decision::Trusted
        } else {
            Decision::Verify
        }
    }

    /// The snapshot, if any.
    pub fn snapshot(&self) -> Option<&S> {
        self.snapshot.as_ref()
    }

    /// The snapshot, if any, to update in place (an incremental sync that kept it exact).
    pub fn snapshot_mut(&mut self) -> Option<&mut S> {
        self.snapshot.as_mut()
    }

    /// Takes the snapshot out, leaving the cache unknown.
    pub fn take(&mut self) -> Option<S> {
        self.verified_at = None;
        self.snapshot.take()
    }

    /// Puts back a snapshot [`KernelCache::take`] took, for a full compare that stopped before
    /// it wrote anything (it gave way to a change): as trusted for a delta as before, and
    /// never verified, so the compare stays due.
    pub fn put_back(&mut self, snapshot: S) {
        self.snapshot = Some(snapshot);
        self.verified_at = None;
    }

    /// Stores the state a sync that dumped and compared the kernel (at `at`) left behind.
    pub fn store_verified(&mut self, snapshot: S, complete: bool, at: Instant) {
        self.snapshot = Some(snapshot);
        self.complete = complete;
        self.verified_at = Some(at);
    }

    /// Stores the state an incremental sync (planned against the trusted snapshot) left
    /// behind; the time of the last verification stays.
    pub fn store_incremental(&mut self, snapshot: S, complete: bool) {
        self.snapshot = Some(snapshot);
        self.complete = complete;
    }

    /// Records that the kernel was just compared in full with the snapshot and matched.
    pub fn mark_verified(&mut self, at: Instant) {
        if self.snapshot.is_some() {
            self.verified_at = Some(at);
        }
    }

    /// Records whether the last sync succeeded completely, keeping the snapshot.
    pub fn set_complete(&mut self, complete: bool) {
        self.complete = complete;
    }

    /// True when the last stored sync had no failure.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Forgets everything: the next sync verifies.
    pub fn forget(&mut self) {
        self.snapshot = None;
        self.complete = false;
        self.verified_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(60);

    fn verified_cache(at: Instant) -> KernelCache<u32> {
        let mut cache = KernelCache::new();
        cache.store_verified(7, true, at);
        cache
    }

    #[test]
    fn an_empty_cache_verifies() {
        let mut cache: KernelCache<u32> = KernelCache::new();
        assert_eq!(cache.decide(Instant::now(), PERIOD, true), Decision::Verify);
    }

    #[test]
    fn a_fresh_complete_cache_with_a_running_source_is_trusted_until_an_event() {
        let t0 = Instant::now();
        let mut cache = verified_cache(t0);
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Trusted);
        let flag = cache.invalidation();
        flag.invalidate();
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Verify);
        assert_eq!(
            cache.decide(t0, PERIOD, true),
            Decision::Trusted,
            "an event is consumed by the decision it caused"
        );
    }

    #[test]
    fn a_partial_failure_or_a_dead_source_means_verify() {
        let t0 = Instant::now();
        let mut cache = verified_cache(t0);
        assert_eq!(cache.decide(t0, PERIOD, false), Decision::Verify);
        cache.set_complete(false);
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Verify);
        cache.store_incremental(8, true);
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Trusted);
        assert_eq!(cache.snapshot(), Some(&8));
    }

    #[test]
    fn the_periodic_wake_up_always_verifies() {
        let t0 = Instant::now();
        let mut cache = verified_cache(t0);
        // Just before the margin: trusted.
        assert_eq!(
            cache.decide(t0 + PERIOD * 8 / 10, PERIOD, true),
            Decision::Trusted
        );
        // A timer that fires a little early still finds the cache too old.
        assert_eq!(
            cache.decide(t0 + PERIOD * 95 / 100, PERIOD, true),
            Decision::Verify
        );
        // An incremental store does not renew the verification.
        cache.store_incremental(9, true);
        assert_eq!(cache.decide(t0 + PERIOD, PERIOD, true), Decision::Verify);
        cache.store_verified(9, true, t0 + PERIOD);
        assert_eq!(cache.decide(t0 + PERIOD, PERIOD, true), Decision::Trusted);
    }

    #[test]
    fn a_snapshot_put_back_is_kept_but_stays_due() {
        let t0 = Instant::now();
        let mut cache = verified_cache(t0);
        let s = cache.take().unwrap();
        cache.put_back(s);
        assert_eq!(cache.snapshot(), Some(&7));
        assert!(cache.is_complete());
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Verify);
        cache.store_incremental(8, true);
        assert_eq!(
            cache.decide(t0, PERIOD, true),
            Decision::Verify,
            "a delta meanwhile does not make it verified"
        );
    }

    #[test]
    fn forgetting_or_taking_the_snapshot_means_verify() {
        let t0 = Instant::now();
        let mut cache = verified_cache(t0);
        assert_eq!(cache.take(), Some(7));
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Verify);
        let mut cache = verified_cache(t0);
        cache.forget();
        assert_eq!(cache.decide(t0, PERIOD, true), Decision::Verify);
        assert!(!cache.is_complete());
    }
}
