//! edgenetd keeps the Linux kernel's firewall, service load-balancing and routes in line with
//! a desired state written in TOML.
//!
//! # Module map
//!
//! Data flows top to bottom:
//!
//! - [`config`]: TOML files -> one validated, immutable [`config::DesiredState`]; every
//!   problem with file:line:col. Knows nothing of netlink.
//! - [`source`]: reloads on SIGHUP and file change; an invalid config never replaces a good one.
//! - [`controller`]: the [`controller::Controller`] trait and the runner loop (timer OR new
//!   snapshot OR kernel event OR shutdown, bursts coalesced). Controllers plan (pure) and then
//!   apply through the dataplane.
//! - [`dataplane`]: the only code that speaks netlink (nftables batches, rtnetlink).
//! - [`health`]: heartbeats, the liveness window and queued-update rule, readiness,
//!   [`health::run_sync`] (beat, sync, beat).
//! - [`metrics`]: [`metrics::record_sync_result`], the single entry point for sync outcomes;
//!   [`metrics::run_observed_sync`]; the Prometheus exporter.
//! - [`http`]: /healthz /livez /readyz /metrics. [`systemd`]: READY, STATUS, WATCHDOG,
//!   RELOADING, STOPPING. [`daemon`]: wires it all for `edgenetd run`.
//! - [`cli`], [`status`], [`logging`], [`clock`], [`shutdown`]: the other verbs and small
//!   utilities.
//!
//! `unsafe` is denied crate-wide. The few places that must call C are allowed one by one, each
//! a small module of safe wrappers: `dataplane::nft::ffi` (libnftnl, libmnl), [`sys`]
//! (socket options, BPF filter, setns, malloc_trim), [`dataplane::conntrack`] (its netlink
//! socket) and `source::inotify`.
#![deny(unsafe_code)]
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
pub mod shutdown;
pub mod source;
pub mod status;
pub mod sys;
pub mod systemd;
