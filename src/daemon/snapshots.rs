//! The current desired state and the loops subscribed to it.
//!
//! Publishing marks every subscriber's update as queued in the liveness registry before waking
//! it, so a loop that stops taking work is caught by the queued-update rule even while
//! something else keeps beating for it.

use std::sync::{Arc, Mutex};

use crate::config::{ConfigTexts, DesiredState};
use crate::liveness::Heartbeat;
use crate::sync::{Trigger, TriggerRx, trigger};

/// Called with every snapshot as it is published (and with the current one when added).
pub type Observer = Box<dyn Fn(&DesiredState) + Send + Sync>;

/// The current desired state and the controllers subscribed to it.
pub struct Snapshots {
    /// The newest published snapshot.
    current: Mutex<Arc<DesiredState>>,
    /// One wake-up and one heartbeat per subscribed loop.
    subscribers: Mutex<Vec<(Trigger, Heartbeat)>>,
    /// What follows every snapshot at once rather than in a loop of its own.
    observers: Mutex<Vec<Observer>>,
}

impl Snapshots {
    /// Starts with a first snapshot.
    pub fn new(first: Arc<DesiredState>) -> Arc<Snapshots> {
        Arc::new(Snapshots {
            current: Mutex::new(first),
            subscribers: Mutex::new(Vec::new()),
            observers: Mutex::new(Vec::new()),
        })
    }

    /// The newest snapshot.
    pub fn current(&self) -> Arc<DesiredState> {
        Arc::clone(&self.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Subscribes a controller: it is woken, and its update counted as queued, on publish.
    pub fn subscribe(&self, heartbeat: Heartbeat) -> TriggerRx {
        let (tx, rx) = trigger();
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((tx, heartbeat));
        rx
    }

    /// Calls `observer` with the current snapshot, then with every published one, on the
    /// publishing thread (it must be quick and must not publish).
    pub fn observe(&self, observer: Observer) {
        let mut observers = self.observers.lock().unwrap_or_else(|p| p.into_inner());
        observer(&self.current());
        observers.push(observer);
    }

    /// Replaces the snapshot, tells every observer and wakes every subscriber.
    pub fn publish(&self, next: Arc<DesiredState>) {
        self.publish_waking(next, &|_| true);
    }

    /// [`Snapshots::publish`], waking only the loops `wake` accepts (by their name in the
    /// liveness registry): for a snapshot that changed nothing the others read, which they
    /// take as it is at their next sync.
    pub fn publish_waking(&self, next: Arc<DesiredState>, wake: &dyn Fn(&str) -> bool) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&next);
        for observer in self
            .observers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            observer(&next);
        }
        for (tx, heartbeat) in self
            .subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            if wake(&heartbeat.name()) {
                heartbeat.queued();
                tx.fire();
            }
        }
    }
}

/// Where a reload hands a newly loaded TOML state: straight to [`Snapshots`], or, with a
/// cluster source, to the composer that adds the cluster's entries before publishing.
pub trait TomlSink: Send + Sync {
    /// Takes a newly loaded TOML state; `texts` are the files it was loaded from, when
    /// known (the cluster source shows their hash in the router's Lease).
    fn take_toml(&self, toml: Arc<DesiredState>, texts: Option<&ConfigTexts>);

    /// The daemon is stopping: write out whatever is kept for the next start and was put off
    /// (the cluster source's cache). Nothing by default.
    fn stopping(&self) {}
}

impl TomlSink for Snapshots {
    fn take_toml(&self, toml: Arc<DesiredState>, _texts: Option<&ConfigTexts>) {
        self.publish(toml);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::SystemClock;
    use crate::liveness::Liveness;

    #[test]
    fn a_snapshot_published_for_some_loops_wakes_those_alone_and_is_current_for_all() {
        let liveness = Liveness::new(Arc::new(SystemClock));
        let snapshots = Snapshots::new(Arc::new(DesiredState::default()));
        let service = snapshots.subscribe(liveness.register("service", Duration::from_secs(60)));
        let policy = snapshots.subscribe(liveness.register("policy", Duration::from_secs(60)));
        let next = Arc::new(DesiredState::default());
        snapshots.publish_waking(Arc::clone(&next), &|name| name != "policy");
        assert!(service.take_pending());
        assert!(!policy.take_pending(), "not woken");
        assert!(
            Arc::ptr_eq(&snapshots.current(), &next),
            "but current for every loop"
        );
        snapshots.publish(Arc::new(DesiredState::default()));
        assert!(service.take_pending() && policy.take_pending());
    }
}
