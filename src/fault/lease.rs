//! The Lease's renewal period, shortened (the `[kubernetes]` key `inject_status_renew_ms`), so
//! the tests see renewals, and their end when a loop wedges, within seconds.
//!
//! Process-wide, like [`super::hang`]: the config parser sets it, the Lease writer reads it
//! when it starts, and the `[kubernetes]` model carries no test-only field.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The period in milliseconds; 0 = the real one.
static RENEW_MS: AtomicU64 = AtomicU64::new(0);

/// Sets the renewal period to `ms` milliseconds (0: the real one).
pub fn set_renew_every(ms: u64) {
    RENEW_MS.store(ms, Ordering::Relaxed);
}

/// The shortened period, if one was set.
pub fn renew_every() -> Option<Duration> {
    match RENEW_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    }
}
