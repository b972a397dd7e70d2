//! Foreign-commit watch: a thread that notices when *another process* committed a change to
//! the ruleset (any table), so a controller can check its tables for drift right away
//! instead of at its next period.
//!
//! Why polling and not events: a socket subscribed to nf_tables' multicast group makes the
//! kernel build a notification for every object of every commit — measured here, it makes a
//! 100,000-element commit five times slower, for edgenetd's own commits too. Instead the
//! thread reads the ruleset generation (one tiny netlink round trip) every `interval`.
//! Generations advance by one per commit, and [`Nft::execute`](super::Nft::execute) records
//! every generation this process produced, so a generation that is not ours is a foreign
//! commit.

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::socket::Nft;

/// Generations committed by this process (most recent last).
static OWN: Mutex<VecDeque<u32>> = Mutex::new(VecDeque::new());
const REMEMBERED: usize = 4096;

/// Records a generation produced by one of this process's commits.
pub(crate) fn record_own(generation: u32) {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    if own.len() == REMEMBERED {
        own.pop_front();
    }
    own.push_back(generation);
}

/// True when some generation in `(from, to]` was not produced by this process (a commit by
/// another process happened in between; when in doubt, true).
pub fn foreign_between(from: u32, to: u32) -> bool {
    let steps = to.wrapping_sub(from);
    if steps as usize > REMEMBERED {
        return true;
    }
    let own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    (1..=steps).any(|i| !own.contains(&from.wrapping_add(i)))
}

/// Callbacks of every subscriber, and whether the one watch thread runs.
struct Watch {
    started: bool,
    subscribers: Vec<Box<dyn Fn() + Send>>,
}

static WATCH: Mutex<Watch> = Mutex::new(Watch {
    started: false,
    subscribers: Vec::new(),
});
/// The poll interval in milliseconds: the shortest any subscriber asked for.
static INTERVAL_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Subscribes `on_foreign_commit` to the process's one watch thread, starting it on first use
/// (every controller shares it, so the process polls once per interval, not once per
/// controller). The thread's socket is opened on the calling thread (so in its network
/// namespace); it polls every `interval` (the shortest any subscriber asked for) for the life
/// of the process and calls every subscriber after each generation change that includes
/// another process's commit.
pub fn spawn_foreign_commit_watch(
    interval: Duration,
    on_foreign_commit: impl Fn() + Send + 'static,
) -> io::Result<()> {
    INTERVAL_MS.fetch_min(interval.as_millis().max(1) as u64, Ordering::Relaxed);
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    watch.subscribers.push(Box::new(on_foreign_commit));
    if watch.started {
        return Ok(());
    }
    let started = start_thread();
    match &started {
        Ok(()) => watch.started = true,
        // Leave no subscriber behind that nothing will ever call; a later caller retries.
        Err(_) => watch.subscribers.clear(),
    }
    started
}

fn start_thread() -> io::Result<()> {
    let mut nft = Nft::open().map_err(io::Error::other)?;
    let mut last = nft.generation().map_err(io::Error::other)?;
    std::thread::Builder::new()
        .name("nft-watch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(INTERVAL_MS.load(Ordering::Relaxed)));
                let Ok(now) = nft.generation() else {
                    continue;
                };
                if now != last && foreign_between(last, now) {
                    let watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
                    for subscriber in &watch.subscribers {
                        subscriber();
                    }
                }
                last = now;
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_generations_we_did_not_make_are_foreign() {
        record_own(1_000_001);
        record_own(1_000_002);
        assert!(!foreign_between(1_000_000, 1_000_002));
        assert!(foreign_between(1_000_000, 1_000_003));
        assert!(foreign_between(1_000_002, 1_000_003));
        assert!(
            foreign_between(0, 100_000),
            "too many to tell: assume foreign"
        );
    }
}
