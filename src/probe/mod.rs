//! The probe engine, one for both of its users: uplink tracks (`track`, WAN failover) and
//! backend checks (`controller::service::backend_check`). Each maps its own config onto it
//! and keeps its own logs, metrics and /healthz object.
//!
//! - [`check()`]: one probe of one target (tcp, http, udp, dns, tls, icmp), bounded by a
//!   timeout, from a socket with the caller's mark if it has one ([`socket`]); the wire
//!   formats in [`dns`], [`http`] and [`tls`];
//! - [`state`]: one loop's state: up/down by the rise/fall rule, and the deadline its next
//!   probe must meet;
//! - [`schedule`]: one loop: the first probe at once or at a random offset, the interval
//!   between starts or after each finish, every outcome recorded then handed to the caller;
//! - [`watch`]: the heartbeat hookup: a heartbeat beaten only while no loop is late.
//!
//! Knows nothing of the config nor of the liveness registry: a caller hands it a
//! [`crate::sync::Progress`] to beat.

pub mod check;
pub mod dns;
pub mod http;
pub mod schedule;
pub mod socket;
pub mod state;
pub mod tls;
pub mod watch;

use std::hash::{BuildHasher, Hasher};

pub use check::{Check, Target, check};
pub use schedule::{First, Pacing, Recorded, Schedule};
pub use socket::addresses_of;
pub use state::{ProbeState, StateCell};
pub use watch::Watch;

/// A random number (std's per-instance hasher keys come from the OS's random source).
pub fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}
