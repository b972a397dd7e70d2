//! Starting the route loop with its track probers: one board shared by the probers (which
//! write it), the controller (which withdraws the routes of down tracks) and /healthz.

use crate::daemon::registry::ControllerDeps;
use crate::daemon::spawner::Spawner;
use crate::sync::TriggerRx;
use crate::track::supervisor::{self, Supervisor};
use crate::track::{self, Board};

use super::RouteController;

/// Builds the route controller, starts its loop and the track supervisor, and adds the
/// `tracks` object to /healthz.
pub fn start(spawner: &mut Spawner<'_, '_>, deps: ControllerDeps, kernel_rx: TriggerRx) {
    track::describe_metrics();
    let board = Board::default();
    let for_http = board.clone();
    spawner
        .http
        .sections
        .add("tracks", Box::new(move || supervisor::healthz(&for_http)));
    let sup = Supervisor {
        board: board.clone(),
        route_loop: deps.kernel_events.clone(),
        health: spawner.health.clone(),
        snapshots: spawner.snapshots.clone(),
        shutdown: spawner.shutdown.clone(),
    };
    spawner.ex.spawn(supervisor::run(sup)).detach();
    let controller = RouteController::with_board(deps.kernel_events, board);
    spawner.spawn(controller, kernel_rx, |desired, name| {
        desired.controller(name)
    });
}
