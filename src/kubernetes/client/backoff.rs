//! Bounded exponential back-off with jitter: after each failure the wait doubles up to a cap,
//! and a random part spreads a fleet of routers that all lost the same API server.

use std::time::Duration;

/// The back-off state of one reflector.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first wait.
    initial: Duration,
    /// The longest wait.
    max: Duration,
    /// Failures since the last success.
    failures: u32,
    /// xorshift state for the jitter (no crate needed for this much randomness).
    seed: u64,
}

impl Backoff {
    /// A back-off from `initial` doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(u64::from(std::process::id()));
        Backoff {
            initial,
            max,
            failures: 0,
            seed: h.finish() | 1,
        }
    }

    /// The wait before the next attempt after one more failure: `initial * 2^n` capped at
    /// `max`, then a uniformly random part of up to half of it added (and capped again).
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let base = self.initial.saturating_mul(1 << exp).min(self.max);
        let jitter = base.mul_f64(self.random() * 0.5);
        (base + jitter).min(self.max)
    }

    /// Forgets the failures (after a success).
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last reset: 0 while healthy, more during an outage or a storm.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A number in [0, 1).
    fn random(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(150));
        let second = b.next_delay();
        assert!(second >= Duration::from_millis(200) && second <= Duration::from_millis(300));
        for _ in 0..30 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
        assert_eq!(b.next_delay(), Duration::from_secs(2));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(150));
    }
}
