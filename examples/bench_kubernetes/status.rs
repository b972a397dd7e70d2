//! The router's Lease (`[kubernetes] status_namespace`) priced on both sides: what the API
//! server serves one router, idle (requests and bytes in a measured window, extrapolated to
//! an hour) and per Service change, with the Lease's share apart; and what the status writes
//! cost the router (the writer thread's CPU time, its bytes on the wire, per write).
//!
//! The daemon runs with the real renewal period (10 s), fed a small cluster (`--services`,
//! 50 by default here) by the fake API server, which sends a watch bookmark every 60 s as a
//! real API server does and counts every byte on the wire (TLS included). Watches end after
//! the daemon's `timeoutSeconds` (290 s) and are opened again: a window shorter than that
//! may miss those re-opens, so the default window is 300 s (`--idle-seconds`).

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::common::fake_apiserver::{FakeApiServer, Traffic};
use crate::common::scratch::ScratchDir;
use crate::daemon::{self, LISTEN};
use crate::data;

/// The status namespace of the run.
const NAMESPACE: &str = "edgenetd-status";
/// What the writes counter is called.
const WRITES: &str = "edgenetd_kubernetes_status_writes_total";
/// Changes of each kind, a gap apart.
const CHANGES: usize = 20;
const CHANGE_GAP: Duration = Duration::from_millis(500);

/// What the run measures.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// The idle window.
    pub idle: Duration,
}

/// Everything the fake has counted, at one instant.
struct Counts {
    at: Instant,
    requests: usize,
    connections: usize,
    bytes: (u64, u64),
}

fn counts(fake: &FakeApiServer) -> Counts {
    Counts {
        at: Instant::now(),
        requests: fake.requests().len(),
        connections: fake.connections().len(),
        bytes: fake.bytes(),
    }
}

/// The Lease's connections that ended since `from` (each one request: `Connection: close`).
fn lease_traffic(fake: &FakeApiServer, from: &Counts) -> Vec<Traffic> {
    fake.connections()[from.connections..]
        .iter()
        .filter(|c| c.path.contains("/leases"))
        .cloned()
        .collect()
}

/// The on-CPU time of the daemon's thread named `name` (`/proc/.../schedstat`, nanoseconds).
fn thread_cpu(pid: u32, name: &str) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap();
            let ns: u64 = stat.split_whitespace().next().unwrap().parse().unwrap();
            return Duration::from_nanos(ns);
        }
    }
    panic!("no thread {name} in {pid}");
}

/// The daemon's CPU time, every thread (`/proc/<pid>/stat` utime + stime).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf reads a constant of the system; no memory is involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis((f[11] + f[12]) * 1000 / hz)
}

fn kib(bytes: f64) -> String {
    format!("{:8.1} KiB", bytes / 1024.0)
}

/// Runs the daemon with the Lease and prints its cost.
pub fn run(binary: &Path, netns: &str, plan: Plan) {
    let fake = FakeApiServer::start();
    fake.set_bookmarks(Some(Duration::from_secs(60)));
    for (resource, obj) in data::cluster() {
        fake.apply(resource, obj);
    }
    let dir = ScratchDir::new("bench-k8s-status");
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let config = etc.join("edgenetd.toml");
    let text = format!(
        "[daemon]\nlisten = \"{LISTEN}\"\n\n{}status_namespace = \"{NAMESPACE}\"\n",
        daemon::kubernetes_section(&fake, &dir.path().join("cluster.json"))
    );
    std::fs::write(&config, text).unwrap();
    let d = daemon::spawn(binary, &config, netns, &dir);
    daemon::wait_ready(&d, &dir.path().join("daemon.log"));
    let pid = d.child.id();
    let started = Instant::now();
    while fake.get("leases", NAMESPACE, data::NODE).is_none() {
        assert!(started.elapsed() < Duration::from_secs(30), "no Lease");
        sleep(Duration::from_millis(100));
    }
    // The first renewal after READY=1 has settled every annotation.
    sleep(Duration::from_secs(2));

    println!(
        "the router's Lease ({} Services, renewed every 10 s, lease 40 s; one router):",
        data::services()
    );
    let c0 = counts(&fake);
    let writes0 = daemon::metric(&format!("{WRITES}{{result=\"ok\"}}"));
    let (thread0, process0) = (thread_cpu(pid, "kubernetes-stat"), process_cpu(pid));
    sleep(plan.idle);
    let c1 = counts(&fake);
    let writes = daemon::metric(&format!("{WRITES}{{result=\"ok\"}}")) - writes0;
    let (thread1, process1) = (thread_cpu(pid, "kubernetes-stat"), process_cpu(pid));
    let window = c1.at - c0.at;
    let hour = 3600.0 / window.as_secs_f64();
    let lease = lease_traffic(&fake, &c0);
    let lease_in: u64 = lease.iter().map(|c| c.bytes_in).sum();
    let lease_out: u64 = lease.iter().map(|c| c.bytes_out).sum();
    let all_in = (c1.bytes.0 - c0.bytes.0) as f64;
    let all_out = (c1.bytes.1 - c0.bytes.1) as f64;
    let requests = (c1.requests - c0.requests) as f64;
    println!(
        "  API server, idle ({:.0} s measured, times {hour:.1} for an hour):",
        window.as_secs_f64()
    );
    println!(
        "    every request           {:8.0} requests/h, {} in, {} out per hour",
        requests * hour,
        kib(all_in * hour),
        kib(all_out * hour)
    );
    println!(
        "    of which the Lease      {:8.0} requests/h, {} in, {} out per hour ({} writes measured)",
        lease.len() as f64 * hour,
        kib(lease_in as f64 * hour),
        kib(lease_out as f64 * hour),
        lease.len()
    );
    println!(
        "    the watches (the rest)  {:8.0} requests/h, {} in, {} out per hour (bookmarks every 60 s, re-opens every 290 s)",
        (requests - lease.len() as f64) * hour,
        kib((all_in - lease_in as f64) * hour),
        kib((all_out - lease_out as f64) * hour)
    );

    // Per change: Service objects, then EndpointSlices, each a gap apart.
    for (what, resource) in [
        ("Service update (a label)", "services"),
        ("EndpointSlice update (an endpoint moved)", "endpointslices"),
    ] {
        let c0 = counts(&fake);
        for k in 0..CHANGES {
            let i = k % data::services();
            let obj = match resource {
                "services" => {
                    let mut s = data::service(i);
                    s["metadata"]["labels"]["bench/change"] = k.to_string().into();
                    s
                }
                _ => {
                    let mut addrs = data::addresses(i);
                    addrs[0] = data::moved_ip(k);
                    data::slice(i, &addrs)
                }
            };
            fake.apply(resource, obj);
            sleep(CHANGE_GAP);
        }
        sleep(Duration::from_secs(1));
        let c1 = counts(&fake);
        let lease = lease_traffic(&fake, &c0);
        let lease_in: u64 = lease.iter().map(|c| c.bytes_in).sum();
        let lease_out: u64 = lease.iter().map(|c| c.bytes_out).sum();
        let out = (c1.bytes.1 - c0.bytes.1 - lease_out) as f64;
        let inb = (c1.bytes.0 - c0.bytes.0 - lease_in) as f64;
        let other_requests = c1.requests - c0.requests - lease.len();
        println!(
            "  API server, per {what}: {:.0} bytes out, {:.0} in, {:.2} requests (the Lease apart: {} renewals in the {:.0} s)",
            out / CHANGES as f64,
            inb / CHANGES as f64,
            other_requests as f64 / CHANGES as f64,
            lease.len(),
            (c1.at - c0.at).as_secs_f64()
        );
    }

    let thread = thread1 - thread0;
    let process = process1 - process0;
    let per_write = |d: Duration| d.as_secs_f64() * 1000.0 / writes.max(1.0);
    println!("  router, the status writes ({writes:.0} in the idle window):");
    println!(
        "    writer thread CPU       {:8.3} ms per write ({:.1} ms in {:.0} s; the whole daemon {:.0} ms)",
        per_write(thread),
        thread.as_secs_f64() * 1000.0,
        window.as_secs_f64(),
        process.as_secs_f64() * 1000.0
    );
    println!(
        "    on the wire             {:8.0} bytes sent, {:.0} received per write (a TLS connection each)",
        lease_in as f64 / lease.len().max(1) as f64,
        lease_out as f64 / lease.len().max(1) as f64
    );
    let lease = fake.get("leases", NAMESPACE, data::NODE).unwrap();
    println!(
        "    the Lease               {} bytes of JSON as stored",
        lease.to_string().len()
    );
}
