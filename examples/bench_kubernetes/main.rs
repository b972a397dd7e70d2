//! Kubernetes source benchmark: 5,000 Services with 20,000 endpoints.
//!
//!   bench_kubernetes                                  the pure pipeline (no kernel, no root)
//!   bench_kubernetes --daemon BIN --netns NAME        + the daemon fed by the fake API server
//!   bench_kubernetes --daemon BIN --netns NAME --toml + the same services from TOML (baseline)
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
use std::time::Instant;

use common::fake_apiserver::FakeApiServer;

/// The command line.
struct Args {
    /// The daemon binary, for the end-to-end parts.
    daemon: Option<PathBuf>,
    /// The network namespace the daemon programs (`--netns`).
    netns: Option<String>,
    /// Also the TOML baseline.
    toml: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        daemon: None,
        netns: None,
        toml: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--daemon" => args.daemon = it.next().map(PathBuf::from),
            "--netns" => args.netns = it.next(),
            "--toml" => args.toml = true,
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
    println!("daemon fed by the cluster ({}):", binary.display());
    daemon::run(&binary, &netns, daemon::Feed::Cluster(&fake));
    if args.toml {
        println!("daemon fed the same services as TOML:");
        daemon::run(&binary, &netns, daemon::Feed::Toml);
    }
    ExitCode::SUCCESS
}
