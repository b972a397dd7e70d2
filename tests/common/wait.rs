//! Waiting on observable events instead of sleeping: a test that needs "X has happened" polls
//! for X and fails naming X when it does not come.

use std::time::{Duration, Instant};

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `ok` until it holds; panics naming `what` after `timeout`. Returns how long it took.
pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    wait_for(what, timeout, || ok().then_some(()));
    start.elapsed()
}

/// Polls `f` until it returns `Some`; panics naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll_for(timeout, f).unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Polls `f` until it returns `Some`, for `timeout` at most (the caller handles `None`).
pub fn poll_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}
