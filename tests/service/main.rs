//! The service controller: the table, syncs, health checks, and real packets to VIPs.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod daemon;
mod health;
mod health_checks;
mod health_daemon;
mod packets;
mod paths;
mod sticky;
mod sync;
