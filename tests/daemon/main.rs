//! The daemon as a process: apply/confirm, reloads, heartbeats and the watchdog, restarts, systemd notifications, the HTTP server.
//!
//! One test binary per area (each linking the crate once); a module per concept.

#[path = "../common/mod.rs"]
mod common;

mod apply_confirm;
mod boot_fallback;
mod config_reload;
#[cfg(feature = "fault-injection")]
mod heartbeat;
mod http_hostile;
#[cfg(feature = "fault-injection")]
mod http_server;
mod includes;
mod loadfile;
mod restart_no_gap;
mod systemd_notify;
