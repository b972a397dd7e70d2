//! The control socket: how `edgenetd apply` and `edgenetd confirm` talk to the running
//! daemon.
//!
//! One unix stream socket (`/run/edgenetd/control.sock` by default). A client writes one
//! JSON request on one line, the daemon answers with one JSON response and closes the
//! connection ([`protocol`]). Only root and members of the group `edgenetd-admin` are served:
//! the socket file is mode 0660 (group: the daemon's group, `edgenetd-admin` in the packaged
//! unit) and every connection's credentials are checked with `SO_PEERCRED`/`SO_PEERGROUPS`
//! ([`peer`]). The daemon keeps the last confirmed configuration and a pending deadline in
//! its state directory ([`store`]); what the requests do is the daemon's business (it hands
//! this module a [`server::Handler`]).

pub mod client;
pub mod peer;
pub mod protocol;
pub mod server;
pub mod store;

/// The control socket when `--control-socket` is not given.
pub const DEFAULT_SOCKET: &str = "/run/edgenetd/control.sock";
/// The state directory when `--state-dir` is not given (the unit's `StateDirectory=`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/edgenetd";
