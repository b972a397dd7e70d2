//! The control socket: how `edgenetd apply` and `edgenetd confirm` talk to the running
//! daemon.
//!
//! One unix stream socket per daemon ([`instance`]: `/run/edgenetd/control.sock` for the
//! packaged one, a path of its own for every other). A client writes one
//! JSON request on one line, the daemon answers with one JSON response and closes the
//! connection ([`protocol`]). Only root and members of the group `edgenetd-admin` are served:
//! the socket file is mode 0660 (group: the daemon's group, `edgenetd-admin` in the packaged
//! unit) and every connection's credentials are checked with `SO_PEERCRED`/`SO_PEERGROUPS`
//! ([`peer`]). The daemon keeps the last confirmed configuration and a pending deadline in
//! its state directory ([`store`]); what the requests do is the daemon's business (it hands
//! this module a [`server::Handler`]).

pub mod client;
pub mod instance;
pub mod peer;
pub mod protocol;
pub mod server;
pub mod store;

pub use instance::{DEFAULT_SOCKET, DEFAULT_STATE_DIR};
