//! Starting the route loop with its track probers: one board shared by the probers (which
//! write it), the route controller (which withdraws the routes of down tracks) and /healthz.

use super::spawner::Spawner;
use crate::controller::route::RouteController;
use crate::sync::{Trigger, TriggerRx, trigger};
use crate::track::supervisor::{self, Supervisor};
use crate::track::{self, Board};

/// Builds the route controller, starts its loop and the track supervisor, and adds the
/// `tracks` object to /healthz.
pub fn start_route(spawner: &mut Spawner<'_, '_>, kernel_events: Trigger, kernel_rx: TriggerRx) {
    track::describe_metrics();
    let board = Board::default();
    let join = spawner.healthz().track_probers(&board);
    let snapshots = spawner.snapshots.clone();
    let (changed_tx, changed) = trigger();
    snapshots.observe(Box::new(move |_| changed_tx.fire()));
    let sup = Supervisor {
        board: board.clone(),
        route_loop: kernel_events.clone(),
        join,
        current: Box::new(move || snapshots.current()),
        changed,
        shutdown: spawner.shutdown.clone(),
    };
    spawner.ex.spawn(supervisor::run(sup)).detach();
    let controller = RouteController::with_board(kernel_events, board);
    spawner.spawn(controller, kernel_rx, |desired, name| {
        desired.controller(name)
    });
}
