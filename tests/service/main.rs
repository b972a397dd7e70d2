//! The service controller: the table, syncs, backend checks, and real packets to VIPs.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod backend_check;
mod backend_check_daemon;
mod backend_check_probes;
mod daemon;
mod give_way;
mod packets;
mod paths;
mod slots;
mod sticky;
mod sync;
