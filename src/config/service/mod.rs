//! `[[service]]`: load-balanced virtual addresses (VIPs).
//!
//! Raw serde structs are deserialized entry by entry (one bad service does not hide the
//! errors of the next), then validated into [`ServicesConfig`]: plain Rust types, no TOML
//! inside. Checked here, each at its `file:line:col`: addresses and ports, a backend of the
//! other family than its VIP, a backend listed twice, two services on the same
//! address:port:protocol, duplicate names, source ranges (prefixes of either family, each
//! once), health-check settings.
//!
//! `[service.health]` configures backend checks (run by the service controller, see
//! `controller::service::backend_check`).
//!
//! One shape with `policy/` and `route/`: `model` (the validated types the controllers
//! read), `raw` (the serde structs as written), `validate` (raw -> model, every problem at its
//! place) and `backend_check` (the `[service.health]` table's own validation).

mod backend_check;
mod model;
mod raw;
mod validate;

pub use model::*;
pub use validate::validate;

#[cfg(test)]
#[path = "backend_check_tests.rs"]
mod backend_check_tests;
