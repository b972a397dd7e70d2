//! Kubernetes source benchmark: 5,000 Services with 20,000 endpoints.
//!
//!   bench_kubernetes                                 the pure pipeline (no kernel, no root)
//!   bench_kubernetes --daemon BIN --netns NAME       + the daemon fed by the fake API server
//!       [--feed cluster|toml|both]                     (toml: the same services as TOML, the
//!                                                       baseline; default cluster)
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
mod pipeline;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::fake_apiserver::FakeApiServer;

/// Milliseconds, right-aligned for the tables.
fn ms(d: Duration) -> String {
    format!("{:9.1} ms", d.as_secs_f64() * 1000.0)
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
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        daemon: None,
        netns: None,
        cluster: true,
        toml: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--daemon" => args.daemon = it.next().map(PathBuf::from),
            "--netns" => args.netns = it.next(),
            "--feed" => {
                (args.cluster, args.toml) = match it.next().as_deref() {
                    Some("cluster") => (true, false),
                    Some("toml") => (false, true),
                    Some("both") => (true, true),
                    _ => return Err("--feed takes cluster, toml or both".into()),
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
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
        daemon::run(&binary, &netns, daemon::Feed::Cluster(&fake));
    }
    if args.toml {
        println!("daemon fed the same services as TOML:");
        daemon::run(&binary, &netns, daemon::Feed::Toml);
    }
    ExitCode::SUCCESS
}
