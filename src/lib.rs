//! edgenetd: keeps the Linux kernel's firewall, service load-balancing and routes in line with
//! a desired state written in TOML.

pub mod clock;
pub mod config;
pub mod controller;
pub mod dataplane;
pub mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod systemd;
