//! One track's loop: probe every interval, count rise/fall on the board, and on a transition
//! log it with its reason, update the metrics and wake the route loop (which withdraws or
//! restores the track's routes at once instead of at its next period).

use std::time::Instant;

use log::{info, warn};
use metrics::{counter, gauge};

use super::board::Board;
use super::probe::probe;
use super::{TRACK_TRANSITIONS, TRACK_UP};
use crate::config::route::Track;
use crate::sync::Trigger;

/// Probes `track` until dropped (the supervisor drops it when the track is removed or
/// changed, and at shutdown).
pub async fn run(track: Track, board: Board, route_loop: Trigger) {
    board.start(&track);
    let labels = [("track", track.name.clone())];
    gauge!(TRACK_UP, &labels).set(if board.is_down(&track.name) { 0.0 } else { 1.0 });
    counter!(TRACK_TRANSITIONS, &labels).increment(0);
    loop {
        let started = Instant::now();
        let outcome = probe(&track).await;
        let reason = outcome.clone().err();
        if let Some(up) = board.record(&track, outcome) {
            gauge!(TRACK_UP, &labels).set(if up { 1.0 } else { 0.0 });
            counter!(TRACK_TRANSITIONS, &labels).increment(1);
            if up {
                info!(
                    "track {}: up ({} good {} probe(s) of {} via {} dev {}): its routes come back",
                    track.name,
                    track.rise,
                    track.check.name(),
                    track.target_text(),
                    track.via,
                    track.dev
                );
            } else {
                warn!(
                    "track {}: down ({} failed {} probe(s) of {} via {} dev {}, last: {}): its routes are withdrawn",
                    track.name,
                    track.fall,
                    track.check.name(),
                    track.target_text(),
                    track.via,
                    track.dev,
                    reason.as_deref().unwrap_or("?")
                );
            }
            route_loop.fire();
        }
        if track.inject_hang {
            // Test hook: a prober wedged for good (what the supervisor must catch).
            futures_lite::future::pending::<()>().await;
        }
        smol::Timer::at(started + track.interval).await;
    }
}
