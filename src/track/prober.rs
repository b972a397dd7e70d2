//! One track's loop on the probe engine: probe on the track's schedule, count rise/fall on the
//! board, and on a transition log it with its reason, update the metrics and wake the route
//! loop (which withdraws or restores the track's routes at once instead of at its next
//! period).

use log::{info, warn};
use metrics::{counter, gauge};

use super::board::Board;
use super::probe::{probe, schedule_of};
use super::{TRACK_TRANSITIONS, TRACK_UP};
use crate::config::route::Track;
use crate::probe::schedule;
use crate::sync::Trigger;

/// Probes `track` until dropped (the supervisor drops it when the track is removed or
/// changed, and at shutdown).
pub async fn run(track: Track, board: Board, route_loop: Trigger) {
    board.start(&track);
    let labels = [("track", track.name.clone())];
    gauge!(TRACK_UP, &labels).set(if board.is_down(&track.name) { 0.0 } else { 1.0 });
    counter!(TRACK_TRANSITIONS, &labels).increment(0);
    let t = &track;
    let mut probed = false;
    let one_probe = move || {
        // Test hook: a prober wedged for good after its first probe (what the supervisor
        // must catch).
        let hang = crate::fault_hook!(crate::fault::hang::track_hangs(&t.name), false)
            && std::mem::replace(&mut probed, true);
        async move {
            if hang {
                futures_lite::future::pending::<()>().await;
            }
            probe(t).await
        }
    };
    let recorded = |r: &schedule::Recorded| {
        let Some(up) = r.flip else {
            return;
        };
        gauge!(TRACK_UP, &labels).set(if up { 1.0 } else { 0.0 });
        counter!(TRACK_TRANSITIONS, &labels).increment(1);
        if up {
            info!(
                "track {}: up ({} good {} probe(s) of {} via {} dev {}): its routes come back",
                t.name,
                t.rise,
                t.check.name(),
                t.target_text(),
                t.via,
                t.dev
            );
        } else {
            warn!(
                "track {}: down ({} failed {} probe(s) of {} via {} dev {}, last: {}): its routes are withdrawn",
                t.name,
                t.fall,
                t.check.name(),
                t.target_text(),
                t.via,
                t.dev,
                r.reason.as_deref().unwrap_or("?")
            );
        }
        route_loop.fire();
    };
    schedule::run(&schedule_of(t), &board.cell(t), one_probe, recorded).await;
}
