//! The route controller: the dataplane, syncs, the daemon, WAN failover and the uplink probes of `[[track]]`.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod controller;
mod daemon;
mod dataplane;
mod failover;
mod track_probe;
