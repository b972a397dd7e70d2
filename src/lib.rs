//! edgenetd: keeps the Linux kernel's firewall, service load-balancing and routes in line with
//! a desired state written in TOML.

pub mod cli;
pub mod clock;
pub mod config;
pub mod controller;
pub mod daemon;
pub mod dataplane;
pub mod health;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod source;
pub mod status;
pub mod systemd;
