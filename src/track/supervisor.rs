//! Keeps one prober per configured track, and holds the probers to the heartbeat contract.
//!
//! The probers run on an executor of their own, polled inside the daemon's: a track added,
//! changed or removed by a reload starts, restarts or stops its prober as soon as the new
//! snapshot is published, and an unchanged one keeps its state. Once a track was configured,
//! every second the supervisor beats the `track` entry of the liveness registry (with no track
//! ever configured it has nothing to beat and sleeps until the next snapshot, so an idle
//! router without `[[track]]` pays no wake-up for it), but only while every prober finished
//! a probe within its window: a
//! wedged prober (a probe that never returns, a stalled executor) stops the beats, so the
//! entry goes stale like a wedged controller's, /healthz says `live: false` and names the
//! track under `tracks`, and the systemd watchdog is no longer fed.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future;
use log::{info, warn};
use serde_json::{Value, json};

use super::board::{Board, window_of};
use super::prober;
use crate::config::DesiredState;
use crate::config::route::Track;
use crate::liveness::Heartbeat;
use crate::probe::watch::{self, Look, Watch};
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::{Trigger, TriggerRx};

/// What the supervisor works with.
pub struct Supervisor {
    /// The shared track states.
    pub board: Board,
    /// Wakes the route loop on a transition.
    pub route_loop: Trigger,
    /// Registers the probers' `track` entry in the liveness registry, ready (called once a
    /// track is configured; the daemon's /healthz list says how).
    pub join: Box<dyn Fn() -> Heartbeat>,
    /// The current desired state, read every second and after every new snapshot.
    pub current: Box<dyn Fn() -> Arc<DesiredState>>,
    /// Fired when a new snapshot is published.
    pub changed: TriggerRx,
    /// Closed when the daemon stops.
    pub shutdown: Shutdown,
}

/// Runs the supervisor and its probers until shutdown.
pub async fn run(sup: Supervisor) {
    let ex = Rc::new(smol::LocalExecutor::new());
    let inner = ex.clone();
    ex.run(supervise(sup, inner)).await;
}

async fn supervise(sup: Supervisor, ex: Rc<smol::LocalExecutor<'static>>) {
    let mut probers: BTreeMap<String, (Track, smol::Task<()>)> = BTreeMap::new();
    let mut handle: Option<Heartbeat> = None;
    let mut watch = Watch::default();
    loop {
        let tracks = (sup.current)().routing.tracks.clone();
        reconcile(&sup, &ex, &mut probers, &tracks);
        if handle.is_none() && !tracks.is_empty() {
            handle = Some((sup.join)());
        }
        if let Some(h) = &handle {
            let longest = tracks.iter().map(window_of).max().unwrap_or_default();
            h.set_window(longest + Duration::from_secs(2));
            let look = beat_if_live(&mut watch, h, &sup.board, Instant::now());
            if !look.late.is_empty() && look.changed {
                warn!("track: prober(s) wedged: {}", look.late.join(", "));
            }
        }
        let beating = handle.is_some();
        let tick = future::or(
            async {
                let _ = sup.changed.recv().await;
            },
            async {
                if beating {
                    smol::Timer::after(watch::TICK).await;
                } else {
                    future::pending::<()>().await;
                }
            },
        );
        if unless_shutdown(&sup.shutdown, tick).await.is_none() {
            return;
        }
    }
}

/// Beats `handle` when every prober finished a probe within its window; the look's `late`
/// are the wedged.
pub fn beat_if_live(watch: &mut Watch, handle: &Heartbeat, board: &Board, now: Instant) -> Look {
    watch.look(handle, board.wedged(now))
}

/// Starts the probers of new or changed tracks and stops those of removed ones.
fn reconcile(
    sup: &Supervisor,
    ex: &Rc<smol::LocalExecutor<'static>>,
    probers: &mut BTreeMap<String, (Track, smol::Task<()>)>,
    tracks: &[Track],
) {
    let names: BTreeSet<&str> = tracks.iter().map(|t| t.name.as_str()).collect();
    probers.retain(|name, _| {
        let keep = names.contains(name.as_str());
        if !keep {
            info!("track {name}: removed from the configuration, prober stopped");
        }
        keep
    });
    sup.board.retain(&names);
    for track in tracks {
        if probers.get(&track.name).is_some_and(|(t, _)| t == track) {
            continue;
        }
        let task = ex.spawn(prober::run(
            track.clone(),
            sup.board.clone(),
            sup.route_loop.clone(),
        ));
        probers.insert(track.name.clone(), (track.clone(), task));
    }
}

/// The /healthz `tracks` object: each track's state and whether its prober is live.
pub fn healthz(board: &Board) -> Value {
    let now = Instant::now();
    let tracks: serde_json::Map<String, Value> = board
        .states()
        .into_iter()
        .map(|(name, s)| {
            let since = now.saturating_duration_since(s.last_probe);
            let body = json!({
                "up": s.up,
                "live": s.live(now),
                "lastProbe": crate::clock::rfc3339(s.last_probe_wall),
                "secondsSinceProbe": since.as_secs_f64(),
                "windowSeconds": s.window.as_secs_f64(),
                "transitions": s.transitions,
                "lastError": s.last_error,
            });
            (name, body)
        })
        .collect();
    Value::Object(tracks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use crate::config::route::{Track, TrackCheck};

    #[test]
    fn a_wedged_prober_stops_the_beats_so_the_track_entry_goes_stale() {
        let clock = FakeClock::new();
        let liveness = crate::liveness::Liveness::new(clock.clone());
        let h = liveness.register("track", Duration::from_secs(5));
        let board = Board::default();
        board.start(&Track {
            name: "wan1".into(),
            check: TrackCheck::Tcp,
            target: "192.0.2.1:53".parse().unwrap(),
            via: "203.0.113.1".parse().unwrap(),
            dev: "eth0".into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            fall: 3,
            rise: 3,
            table: 32000,
            fwmark: 1,
            priority: 90,
        });
        clock.advance(Duration::from_secs(4));
        let mut watch = Watch::default();
        assert!(
            beat_if_live(&mut watch, &h, &board, Instant::now())
                .late
                .is_empty()
        );
        clock.advance(Duration::from_secs(4));
        assert!(liveness.report().all_live(), "beaten 4 s ago");
        // The prober's window (1 s + 1 s + 2 s) has passed without a probe.
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            beat_if_live(&mut watch, &h, &board, later).late,
            vec!["wan1"]
        );
        clock.advance(Duration::from_secs(2));
        assert_eq!(liveness.report().stale(), vec!["track"]);
        let v = healthz(&board);
        assert_eq!(v["wan1"]["up"], true);
    }
}
