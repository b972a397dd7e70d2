//! WAN failover: probers that check each `[[track]]`'s uplink, and the board the route
//! controller reads to withdraw the routes of a track that is down.
//!
//! The probing itself (the checks, the rise/fall rule, the schedule, the heartbeat hookup) is
//! the probe engine's ([`crate::probe`]), shared with the service controller's backend
//! checks; this module is what is particular to uplinks:
//!
//! - [`board`]: the up/down state of every track (shared; the prober writes, the route
//!   controller, /healthz and the supervisor read);
//! - [`probe`]: a track's probe on the engine (tcp, dns, icmp) from a socket carrying the
//!   track's mark, so it leaves through the track's own table whatever the main table says;
//! - [`prober`]: one track's loop (the engine's, plus the track's log lines, metrics and the
//!   route loop's wake-up);
//! - [`supervisor`]: keeps one prober per configured track across reloads and holds the
//!   probers to the heartbeat contract.

pub mod board;
pub mod probe;
pub mod prober;
pub mod supervisor;

use metrics::{describe_counter, describe_gauge};

pub use board::{Board, TrackState};

/// 1 while a track is up, 0 while it is down.
pub const TRACK_UP: &str = "edgenetd_track_up";
/// Up/down transitions of a track.
pub const TRACK_TRANSITIONS: &str = "edgenetd_track_transitions_total";

/// Describes the track metrics (once, before the probers start).
pub fn describe_metrics() {
    describe_gauge!(
        TRACK_UP,
        "1 while the track's uplink answers its probe (after rise), 0 while it is down (after fall)."
    );
    describe_counter!(
        TRACK_TRANSITIONS,
        "Times the track went up or down (its routes came back or were withdrawn)."
    );
}
