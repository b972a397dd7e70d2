//! edgenetd keeps the Linux kernel's firewall, service load-balancing and routes in line with
//! a desired state written in TOML.
//!
//! # Module map
//!
//! Imports point one way (`tests/repo/layering.rs` holds the allowed edges and fails on any
//! other, and on any cycle). From the bottom up:
//!
//! - Leaves: [`sync`] (the sync vocabulary: [`sync::SyncReport`], [`sync::SyncError`],
//!   [`sync::Progress`], [`sync::Trigger`]), [`clock`], [`shutdown`], [`logging`],
//!   [`status`], [`math`] (`exp`, `log`, `log1p`, `log2`, which the binary defines as its
//!   C symbols so that it needs no libm).
//! - `fault` (feature `fault-injection`, never in release builds): test hooks, in two
//!   layers: side tables below everything (`fault::kernel_reject`, `fault::hang`,
//!   `fault::by_name`), which config, the controllers and the track probers consult through
//!   [`fault_hook!`]; and `fault::test_controller` (`[[test_controller]]`: its section,
//!   registered through [`config::extension`], and its controller), above the controllers,
//!   which the daemon's registry starts.
//! - [`config`]: TOML files -> one validated, immutable [`config::DesiredState`]; every
//!   problem with file:line:col. Knows nothing of netlink. One folder per section
//!   (`daemon`, [`config::policy`] with the pod isolation model [`config::policy::pods`],
//!   [`config::service`], [`config::route`], [`config::kubernetes`] with its label selector
//!   grammar), each with its raw types, model, validators and own diagnostics; sections
//!   from above come in through [`config::extension`].
//! - [`dataplane`]: the only code that speaks netlink (nftables batches, rtnetlink).
//! - [`probe`]: the probe engine, one for uplinks and backends: the checks (tcp, http, udp,
//!   dns, tls, icmp), the rise/fall state, the schedule, the heartbeat hookup. Knows nothing
//!   of the config; beats a [`sync::Progress`].
//! - [`track`]: WAN failover's uplink probers (`[[track]]` on the probe engine) and the
//!   up/down board they write.
//! - [`controller`]: the [`controller::Controller`] trait and one module per kernel domain.
//!   Controllers plan (pure) and then apply through the dataplane; the route controller
//!   reads the track board; the service controller runs the backend checks
//!   ([`controller::service::backend_check`], on the probe engine).
//! - [`source`]: loads the config files ([`source::Outcome::Loaded`] or
//!   [`source::Outcome::Rejected`]) and watches them for changes; nothing more.
//! - [`liveness`]: the liveness registry: heartbeats, the liveness window and queued-update
//!   rule, readiness, [`liveness::run_sync`] (beat, sync, beat). Records only. (*Liveness*
//!   is about edgenetd's own loops; a *backend check* is about a service's backend; only the
//!   config key `[service.health]` and the path `/healthz` keep the older word.)
//! - [`metrics`]: [`metrics::record_sync_result`], the single entry point for sync outcomes;
//!   the Prometheus exporter. Records only; reads liveness for derived gauges.
//! - [`http`]: /healthz /livez /readyz /metrics. [`systemd`]: READY, STATUS, WATCHDOG,
//!   RELOADING, STOPPING.
//! - [`control`]: the control socket (`edgenetd apply`/`confirm` to the running daemon):
//!   which daemon a socket and state directory belong to (one pair per main config and
//!   netns), the wire format, who may connect, the persisted confirm state. The daemon
//!   supplies what the requests do.
//! - [`daemon`]: the orchestration of `edgenetd run`: controller loops (timer OR new
//!   snapshot OR kernel event OR shutdown, bursts coalesced), snapshots, the observed sync,
//!   the reaction to a reload, the registry of built-in controllers, and the one list of
//!   what joins /healthz ([`daemon::healthz`]).
//! - [`explain`]: `edgenetd explain`, offline: builds the nft IR the controllers would program
//!   and interprets it for one packet (DNAT, route, deciding rule, SNAT, verdict).
//! - [`cli`]: the verbs, parsed once into [`cli::Verb`].
//! - `kubernetes` (feature `kubernetes`, off by default): the Kubernetes source: a small
//!   list+watch client (rustls on smol), the API objects, their pure translation into the
//!   config model, the watcher thread, the composer (TOML + cluster) and its cache; the
//!   daemon starts it from `daemon::kubernetes` when the config has `[kubernetes]`.
//!
//! The design in prose (layers, controller shape, heartbeat contract, kernel ownership, test
//! isolation) is in `docs/architecture.md`.
//!
//! `unsafe` is denied crate-wide. The few places that must call C are allowed one by one, each
//! a small module of safe wrappers: `dataplane::nft::ffi` (libnftnl, libmnl), [`sys`]
//! (socket options, peer credentials, group lookup, BPF filter, setns, malloc_trim), [`dataplane::conntrack`] (its netlink
//! socket), `probe::socket` (probe sockets with a mark, interface addresses) and
//! `source::inotify`.
#![deny(unsafe_code)]

/// A test hook: `$hook` in builds with the `fault-injection` feature (it may call
/// `crate::fault`), `$otherwise` in every other build, where `$hook` is not compiled at all.
#[macro_export]
macro_rules! fault_hook {
    ($hook:expr, $otherwise:expr) => {{
        #[cfg(feature = "fault-injection")]
        let value = $hook;
        #[cfg(not(feature = "fault-injection"))]
        let value = $otherwise;
        value
    }};
}

pub mod calendar;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod controller;
pub mod daemon;
pub mod dataplane;
pub mod explain;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod http;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod liveness;
pub mod logging;
pub mod math;
pub mod metrics;
pub mod names;
pub mod probe;
pub mod shutdown;
pub mod source;
pub mod status;
pub mod sync;
pub mod sys;
pub mod systemd;
pub mod track;
