//! Foreign-commit watch: notices when *another process* committed a change to the ruleset
//! (any table), so a controller can check its tables for drift right away instead of at its
//! next period.
//!
//! Why polling and not events: a socket subscribed to nf_tables' multicast group makes the
//! kernel build a notification for every object of every commit — measured here, it makes a
//! 100,000-element commit five times slower, for edgenetd's own commits too. Instead one
//! thread reads the ruleset generation (one tiny netlink round trip) every interval.
//! Generations advance by one per commit; every controller records the generation of each
//! of its commits in the shared [`GenerationWatch`], so a generation nobody recorded is a
//! foreign commit.
//!
//! The watch is an explicit object: the daemon creates one and hands a clone to every nftables
//! controller, so the policy and service controllers know each other's commits (neither
//! mistakes the other's write for drift) through a value they were given, not a global.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::socket::Nft;

/// How many of this process's own generations are remembered.
const REMEMBERED: usize = 4096;

/// The ruleset-generation watch shared by every nftables controller of a process. Cheap to
/// clone (clones share one record and one thread).
#[derive(Clone, Default)]
pub struct GenerationWatch {
    /// Shared by every clone; the watch thread holds only a weak reference, so it ends once
    /// the last clone is gone.
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Generations committed by this process (most recent last).
    own: Mutex<VecDeque<u32>>,
    /// Subscribers' callbacks, and whether the watch thread runs.
    subscribers: Mutex<Subscribers>,
    /// The poll interval in milliseconds: the shortest any subscriber asked for (0 = none yet).
    interval_ms: AtomicU64,
}

#[derive(Default)]
struct Subscribers {
    /// True once the thread was started.
    started: bool,
    /// Called after every generation change that includes another process's commit.
    callbacks: Vec<Box<dyn Fn() + Send>>,
}

impl GenerationWatch {
    /// A watch with no subscriber and no thread yet.
    pub fn new() -> GenerationWatch {
        GenerationWatch::default()
    }

    /// Records a generation produced by one of this process's commits (call it with
    /// [`Commit::generation`](super::Commit) after every successful `execute`).
    pub fn record_own(&self, generation: u32) {
        let mut own = lock(&self.inner.own);
        if own.len() == REMEMBERED {
            own.pop_front();
        }
        own.push_back(generation);
    }

    /// True when some generation in `(from, to]` was not produced by this process (a commit
    /// by another process happened in between; when in doubt, true).
    pub fn foreign_between(&self, from: u32, to: u32) -> bool {
        foreign_between(&self.inner, from, to)
    }

    /// Subscribes `on_foreign_commit`, starting the watch thread on first use (every
    /// controller shares it, so the process polls once per interval, not once per
    /// controller). The thread's socket is opened on the calling thread (so in its network
    /// namespace); it polls every `interval` (the shortest any subscriber asked for) while a
    /// clone of the watch exists and calls every subscriber after each generation change that
    /// includes another process's commit.
    pub fn subscribe(
        &self,
        interval: Duration,
        on_foreign_commit: impl Fn() + Send + 'static,
    ) -> io::Result<()> {
        let ms = interval.as_millis().clamp(1, u64::MAX as u128) as u64;
        let _ = self
            .inner
            .interval_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == 0 { ms } else { old.min(ms) })
            });
        let mut subs = lock(&self.inner.subscribers);
        subs.callbacks.push(Box::new(on_foreign_commit));
        if subs.started {
            return Ok(());
        }
        let started = start_thread(Arc::downgrade(&self.inner));
        match &started {
            Ok(()) => subs.started = true,
            // Leave no subscriber behind that nothing will ever call; a later caller retries.
            Err(_) => subs.callbacks.clear(),
        }
        started
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn foreign_between(inner: &Inner, from: u32, to: u32) -> bool {
    let steps = to.wrapping_sub(from);
    if steps as usize > REMEMBERED {
        return true;
    }
    let own = lock(&inner.own);
    (1..=steps).any(|i| !own.contains(&from.wrapping_add(i)))
}

fn start_thread(inner: Weak<Inner>) -> io::Result<()> {
    let mut nft = Nft::open().map_err(io::Error::other)?;
    let mut last = nft.generation().map_err(io::Error::other)?;
    std::thread::Builder::new()
        .name("nft-watch".into())
        .spawn(move || {
            loop {
                let Some(ms) = inner
                    .upgrade()
                    .map(|i| i.interval_ms.load(Ordering::Relaxed))
                else {
                    return;
                };
                std::thread::sleep(Duration::from_millis(ms.max(1)));
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                let Ok(now) = nft.generation() else {
                    continue;
                };
                if now != last && foreign_between(&inner, last, now) {
                    for callback in &lock(&inner.subscribers).callbacks {
                        callback();
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
        let watch = GenerationWatch::new();
        watch.record_own(1_000_001);
        watch.clone().record_own(1_000_002);
        assert!(!watch.foreign_between(1_000_000, 1_000_002));
        assert!(watch.foreign_between(1_000_000, 1_000_003));
        assert!(watch.foreign_between(1_000_002, 1_000_003));
        assert!(
            watch.foreign_between(0, 100_000),
            "too many to tell: assume foreign"
        );
    }

    #[test]
    fn separate_watches_do_not_share_their_records() {
        let a = GenerationWatch::new();
        let b = GenerationWatch::new();
        a.record_own(7);
        assert!(!a.foreign_between(6, 7));
        assert!(b.foreign_between(6, 7));
    }
}
