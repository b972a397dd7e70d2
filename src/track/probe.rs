//! What a track's probe is, on the probe engine: its check kind, its target with the track's
//! mark, and its schedule. The mark matters: the track's rule sends marked packets to its
//! private table, whose one route goes to the target through the track's gateway and device.
//! So the probe tests that uplink even while its routes are withdrawn from the main table (the
//! daemon's CAP_NET_ADMIN allows `SO_MARK`).
//!
//! - tcp: the connection completes (a refusal counts as a failure);
//! - dns: a query for the root's NS records gets a reply with RCODE 0;
//! - icmp: an echo gets a reply, from an unprivileged ping socket.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::route::{Track, TrackCheck};
use crate::probe::{self, Check, First, Pacing, Schedule, Target};

/// The slack of a track's window beyond one interval and one timeout (a busy executor).
pub const GRACE: Duration = Duration::from_secs(2);

/// One probe, bounded by the track's timeout; the error is the reason, for logs and /healthz.
pub async fn probe(track: &Track) -> Result<(), String> {
    probe_to(track.check, track.target, track.fwmark, track.timeout).await
}

/// A probe of `target` with `mark`, bounded by `timeout`.
pub async fn probe_to(
    check: TrackCheck,
    target: SocketAddr,
    mark: u32,
    timeout: Duration,
) -> Result<(), String> {
    let check = match check {
        TrackCheck::Tcp => Check::Tcp,
        TrackCheck::Dns => Check::Dns {
            name: ".",
            qtype: probe::dns::NS,
        },
        TrackCheck::Icmp => Check::Icmp,
    };
    let target = Target {
        addr: target,
        mark: Some(mark),
    };
    probe::check(target, &check, timeout).await
}

/// How a track probes: at once, then every `interval` between starts.
pub fn schedule_of(track: &Track) -> Schedule {
    Schedule {
        interval: track.interval,
        timeout: track.timeout,
        grace: GRACE,
        rise: track.rise,
        fall: track.fall,
        first: First::Now,
        pacing: Pacing::FromStart,
    }
}
