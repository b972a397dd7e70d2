//! Kubernetes source benchmark: 5,000 Services with 20,000 endpoints (`--services N`).
//!
//!   bench_kubernetes                                 the pure pipeline (no kernel, no root)
//!   bench_kubernetes --daemon BIN --netns NAME       + the daemon and the reference, side by
//!       [--feed cluster|toml|kube-proxy|all]           side: fed by the fake API server, fed
//!       [--services N] [--changes N]                   the same services as TOML, and
//!       [--period MS] [--no-rollout]                   kube-proxy's nftables layout by
//!                                                      `nft -f` (default all)
//!
//!   bench_kubernetes --daemon BIN --netns NAME --status [--idle-seconds S] [--services N]
//!       the router's Lease (`status_namespace`): the API server's requests and bytes an
//!       hour idle and per Service change, the router's cost per status write
//!
//! `scripts/bench-kubernetes.sh` builds everything and runs the daemon parts in a throwaway
//! network namespace. Prints figures; asserts only that every service and change arrived.

/// The tests' fake API server (and the scratch directories it keeps its certificates in).
#[allow(dead_code)]
#[path = "../../tests/common"]
mod common {
    pub mod fake_apiserver;
    pub mod scratch;
}

mod daemon;
mod data;
mod kernel;
mod kubeproxy;
mod monitor;
mod pipeline;
mod series;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::fake_apiserver::FakeApiServer;

/// Milliseconds, right-aligned for the tables.
fn ms(d: Duration) -> String {
    format!("{:9.1} ms", d.as_secs_f64() * 1000.0)
}

/// True when this process runs in the network namespace `ip netns` calls `name` (the kernel
/// parts write nftables and must never run in the host's).
pub fn in_netns(name: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let named = ino(&format!("/run/netns/{name}"));
    named.is_some() && named == ino("/proc/self/ns/net")
}

/// The command line.
struct Args {
    /// The daemon binary, for the end-to-end parts.
    daemon: Option<PathBuf>,
    /// The network namespace the daemon programs (`--netns`).
    netns: Option<String>,
    /// Feed the daemon from the fake API server.
    cluster: bool,
    /// Feed the daemon the same services as TOML (the baseline).
    toml: bool,
    /// Load kube-proxy's layout for the same services (the reference).
    kube_proxy: bool,
    /// What each daemon run measures.
    plan: daemon::Plan,
    /// Only the Lease's cost (`--status`).
    status: Option<status::Plan>,
}

/// The value after a flag, as a number.
fn number(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<u64, String> {
    it.next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} takes a number"))
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        daemon: None,
        netns: None,
        cluster: true,
        toml: true,
        kube_proxy: true,
        plan: daemon::Plan {
            changes: 50,
            rollout: true,
            period: Duration::from_secs(2),
        },
        status: None,
    };
    let mut services = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--daemon" => args.daemon = it.next().map(PathBuf::from),
            "--netns" => args.netns = it.next(),
            "--feed" => {
                (args.cluster, args.toml, args.kube_proxy) = match it.next().as_deref() {
                    Some("cluster") => (true, false, false),
                    Some("toml") => (false, true, false),
                    Some("kube-proxy") => (false, false, true),
                    Some("both") => (true, true, false),
                    Some("all") => (true, true, true),
                    _ => return Err("--feed takes cluster, toml, kube-proxy, both or all".into()),
                }
            }
            "--services" => {
                services = true;
                data::set_services(number(&mut it, "--services")? as usize)
            }
            "--changes" => args.plan.changes = number(&mut it, "--changes")? as usize,
            "--period" => args.plan.period = Duration::from_millis(number(&mut it, "--period")?),
            "--no-rollout" => args.plan.rollout = false,
            "--status" => {
                args.status.get_or_insert(status::Plan {
                    idle: Duration::from_secs(300),
                });
            }
            "--idle-seconds" => {
                let idle = Duration::from_secs(number(&mut it, "--idle-seconds")?);
                args.status = Some(status::Plan { idle });
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.status.is_some() && !services {
        // An edge router's share of a cluster, not the load test's 5,000.
        data::set_services(50);
    }
    if args.daemon.is_some() != args.netns.is_some() {
        return Err("--daemon and --netns go together".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_kubernetes: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(plan) = args.status {
        let (Some(binary), Some(netns)) = (&args.daemon, &args.netns) else {
            eprintln!("bench_kubernetes: --status needs --daemon and --netns");
            return ExitCode::from(2);
        };
        status::run(binary, netns, plan);
        return ExitCode::SUCCESS;
    }
    let objects = data::cluster();
    pipeline::run(&objects);
    let fake = FakeApiServer::start();
    let t = Instant::now();
    for (resource, obj) in objects {
        fake.apply(resource, obj);
    }
    println!(
        "  (fake API server populated in {:.1} s)",
        t.elapsed().as_secs_f64()
    );
    pipeline::client_list(&fake);
    let (Some(binary), Some(netns)) = (args.daemon, args.netns) else {
        return ExitCode::SUCCESS;
    };
    if args.cluster {
        println!("daemon fed by the cluster ({}):", binary.display());
        daemon::run(&binary, &netns, daemon::Feed::Cluster(&fake), args.plan);
    }
    if args.toml {
        println!("daemon fed the same services as TOML:");
        daemon::run(&binary, &netns, daemon::Feed::Toml, args.plan);
    }
    if args.kube_proxy {
        println!("kube-proxy's nftables layout for the same services, by nft -f (the reference):");
        kubeproxy::run(&netns);
    }
    ExitCode::SUCCESS
}
