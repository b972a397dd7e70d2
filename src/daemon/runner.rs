//! The loop that runs one controller: wait for timer OR new snapshot OR kernel event OR
//! shutdown, then one observed sync.
//!
//! Bursts coalesce: each wake-up source is a channel of capacity one, so any number of
//! triggers that arrive during a sync leave at most one wake-up pending, which causes at most
//! one more sync, which reads the newest snapshot.
//!
//! A sync sees those wake-ups pending without taking them ([`Progress::waiting`]): the service
//! controller's periodic full compare gives way to a change that waits (see
//! `controller::service::defer`).

use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use log::{info, warn};

use super::observed::run_observed_sync;
use super::snapshots::Snapshots;
use crate::config::{ControllerSettings, DesiredState};
use crate::controller::Controller;
use crate::liveness::Heartbeat;
use crate::shutdown::Shutdown;
use crate::sync::{Progress, SyncReport, Trigger, TriggerRx, Waiting};

/// Why a loop woke up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    Start,
    Timer,
    Snapshot,
    Kernel,
    Shutdown,
}

/// Everything one loop needs besides its controller.
pub struct LoopInputs {
    /// Its heartbeat in the liveness registry.
    pub heartbeat: Heartbeat,
    /// Where snapshots come from.
    pub snapshots: Arc<Snapshots>,
    /// Snapshot wake-ups (from [`Snapshots::subscribe`]).
    pub snapshot_rx: TriggerRx,
    /// Kernel-event wake-ups (the controller holds the [`Trigger`]).
    pub kernel_rx: TriggerRx,
    /// Closed when the daemon shuts down.
    pub shutdown: Shutdown,
    /// Reads this controller's settings from a snapshot.
    pub settings: fn(&DesiredState, &str) -> ControllerSettings,
    /// Fired after every sync (the systemd supervisor sends READY=1 and STATUS= promptly).
    pub sync_done: Option<Trigger>,
}

/// Runs a controller until shutdown. The first sync starts at once.
pub async fn run_loop<C: Controller>(mut controller: C, inputs: LoopInputs) {
    let name = controller.name();
    let mut wake = Wake::Start;
    let progress = LoopProgress {
        heartbeat: &inputs.heartbeat,
        waiting: Waiting::never()
            .and(&inputs.snapshot_rx)
            .and(&inputs.kernel_rx),
    };
    loop {
        if wake == Wake::Shutdown {
            info!("{name}: loop stopped");
            return;
        }
        let desired = inputs.snapshots.current();
        let settings = (inputs.settings)(&desired, name);
        inputs.heartbeat.set_window(settings.liveness_window());
        let held = desired.held.contains(&name);
        let sync = async {
            if held {
                Ok(SyncReport {
                    summary: "held: what is in the kernel stays (the built-in lockdown)".into(),
                    ..SyncReport::default()
                })
            } else {
                controller.sync(&desired, &progress).await
            }
        };
        let result = run_observed_sync(&inputs.heartbeat, sync).await;
        match &result {
            Ok(report) if report.changes > 0 || wake == Wake::Start => {
                info!("{name}: sync ({wake:?}) ok: {}", report_summary(report));
            }
            Ok(report) => log::debug!("{name}: sync ({wake:?}) ok: {}", report_summary(report)),
            Err(e) => warn!("{name}: sync ({wake:?}) failed: {e}"),
        }
        if let Some(done) = &inputs.sync_done {
            done.fire();
        }
        // A sync's buffers (kernel dumps, batches) are freed by now: hand their pages back,
        // so the idle daemon holds what it keeps, not its last sync's peak.
        crate::sys::trim_heap();
        wake = next_wake(&inputs, settings.period).await;
    }
}

/// A sync's progress: beats go to the loop's heartbeat; newer work is whatever wakes the loop
/// (a snapshot, a kernel event) pending while it syncs.
struct LoopProgress<'a> {
    heartbeat: &'a Heartbeat,
    waiting: Waiting,
}

impl Progress for LoopProgress<'_> {
    fn beat(&self) {
        self.heartbeat.beat();
    }

    fn rest(&self) {
        self.heartbeat.rest();
    }

    fn waiting(&self) -> Waiting {
        self.waiting.clone()
    }
}

fn report_summary(r: &SyncReport) -> String {
    if r.summary.is_empty() {
        format!("{} changes", r.changes)
    } else {
        r.summary.clone()
    }
}

async fn next_wake(inputs: &LoopInputs, period: Duration) -> Wake {
    let shutdown = async {
        let _ = inputs.shutdown.recv().await;
        Wake::Shutdown
    };
    let snapshot = async {
        let _ = inputs.snapshot_rx.recv().await;
        Wake::Snapshot
    };
    let kernel = async {
        match inputs.kernel_rx.recv().await {
            Some(()) => Wake::Kernel,
            // The controller dropped its trigger (it has no kernel events): never wake.
            None => future::pending().await,
        }
    };
    let timer = async {
        smol::Timer::after(period).await;
        Wake::Timer
    };
    // Shutdown first, so a stop is never delayed by other pending wake-ups.
    let wake = future::or(shutdown, future::or(snapshot, future::or(kernel, timer))).await;
    // The sync about to run reads the newest snapshot and the kernel as it is now, so it
    // serves every other wake-up already pending too.
    while inputs.snapshot_rx.take_pending() || inputs.kernel_rx.take_pending() {}
    wake
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::clock::SystemClock;
    use crate::liveness::Liveness;
    use crate::sync::{Progress, SyncError, trigger};

    struct Counting {
        syncs: Rc<RefCell<u32>>,
        hold: Option<async_channel::Receiver<()>>,
    }

    impl Controller for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        async fn sync(
            &mut self,
            _: &DesiredState,
            _: &dyn Progress,
        ) -> Result<SyncReport, SyncError> {
            *self.syncs.borrow_mut() += 1;
            if let Some(hold) = &self.hold {
                let _ = hold.recv().await;
            }
            Ok(SyncReport::default())
        }
    }

    fn long_period(_: &DesiredState, _: &str) -> ControllerSettings {
        ControllerSettings {
            enabled: true,
            period: Duration::from_secs(3600),
            sync_budget: Duration::from_secs(60),
        }
    }

    /// A loop's inputs, and the ends a test drives them by: its snapshots, its kernel
    /// trigger and its shutdown.
    struct Rig {
        inputs: LoopInputs,
        snapshots: Arc<Snapshots>,
        kernel_tx: crate::sync::Trigger,
        shutdown_tx: async_channel::Sender<()>,
    }

    fn rig(name: &'static str) -> Rig {
        let liveness = Liveness::new(Arc::new(SystemClock));
        let handle = liveness.register(name, Duration::from_secs(60));
        let snapshots = Snapshots::new(Arc::new(DesiredState::default()));
        let (kernel_tx, kernel_rx) = trigger();
        let (shutdown_tx, shutdown) = async_channel::bounded(1);
        let inputs = LoopInputs {
            heartbeat: handle.clone(),
            snapshot_rx: snapshots.subscribe(handle),
            snapshots: snapshots.clone(),
            kernel_rx,
            shutdown,
            settings: long_period,
            sync_done: None,
        };
        Rig {
            inputs,
            snapshots,
            kernel_tx,
            shutdown_tx,
        }
    }

    #[test]
    fn a_burst_of_triggers_during_a_sync_causes_at_most_one_more_sync() {
        let ex = smol::LocalExecutor::new();
        let Rig {
            inputs,
            snapshots,
            kernel_tx,
            shutdown_tx,
        } = rig("counting");
        let (release_tx, release_rx) = async_channel::unbounded();
        let syncs = Rc::new(RefCell::new(0));
        let task = ex.spawn(run_loop(
            Counting {
                syncs: syncs.clone(),
                hold: Some(release_rx),
            },
            inputs,
        ));
        smol::block_on(ex.run(async {
            // First sync starts at once and is held; fire 100 kernel triggers and 100 snapshots.
            while *syncs.borrow() == 0 {
                smol::future::yield_now().await;
            }
            for _ in 0..100 {
                kernel_tx.fire();
                snapshots.publish(Arc::new(DesiredState::default()));
            }
            for _ in 0..10 {
                release_tx.send(()).await.unwrap();
                for _ in 0..50 {
                    smol::future::yield_now().await;
                }
            }
            drop(shutdown_tx);
            task.await;
        }));
        // 1 initial + exactly one for everything that piled up meanwhile, never 200.
        assert_eq!(*syncs.borrow(), 2);
    }

    /// Records, in each sync, whether newer work waits when it starts and after it is held.
    struct Looking {
        seen: Rc<RefCell<Vec<(bool, bool)>>>,
        hold: async_channel::Receiver<()>,
    }

    impl Controller for Looking {
        fn name(&self) -> &'static str {
            "looking"
        }
        async fn sync(
            &mut self,
            _: &DesiredState,
            progress: &dyn Progress,
        ) -> Result<SyncReport, SyncError> {
            let waiting = progress.waiting();
            let at_start = waiting.now();
            let _ = self.hold.recv().await;
            self.seen.borrow_mut().push((at_start, waiting.now()));
            Ok(SyncReport::default())
        }
    }

    #[test]
    fn a_sync_sees_a_snapshot_or_kernel_event_that_came_during_it_as_waiting() {
        let ex = smol::LocalExecutor::new();
        let Rig {
            inputs,
            snapshots,
            kernel_tx,
            shutdown_tx,
        } = rig("looking");
        let (release_tx, release_rx) = async_channel::unbounded();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let task = ex.spawn(run_loop(
            Looking {
                seen: seen.clone(),
                hold: release_rx,
            },
            inputs,
        ));
        let settle = || async {
            for _ in 0..50 {
                smol::future::yield_now().await;
            }
        };
        smol::block_on(ex.run(async {
            settle().await;
            // During the first sync a snapshot comes; during the second, a kernel event; the
            // third is left alone.
            snapshots.publish(Arc::new(DesiredState::default()));
            release_tx.send(()).await.unwrap();
            settle().await;
            kernel_tx.fire();
            release_tx.send(()).await.unwrap();
            settle().await;
            release_tx.send(()).await.unwrap();
            settle().await;
            drop(shutdown_tx);
            task.await;
        }));
        assert_eq!(
            *seen.borrow(),
            [(false, true), (false, true), (false, false)],
            "taken by the loop when the next sync starts, never by looking"
        );
    }

    #[test]
    fn shutdown_stops_an_idle_loop_at_once() {
        let ex = smol::LocalExecutor::new();
        let Rig {
            inputs,
            shutdown_tx,
            ..
        } = rig("counting");
        let syncs = Rc::new(RefCell::new(0));
        let started = std::time::Instant::now();
        smol::block_on(ex.run(async {
            let task = ex.spawn(run_loop(
                Counting {
                    syncs: syncs.clone(),
                    hold: None,
                },
                inputs,
            ));
            smol::Timer::after(Duration::from_millis(20)).await;
            drop(shutdown_tx);
            task.await;
        }));
        assert_eq!(*syncs.borrow(), 1);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
