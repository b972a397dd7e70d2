//! The real daemon fed the benchmark's cluster: from the first list request to READY=1, the
//! kernel objects its table holds, endpoint changes to the kernel (a series spread over time,
//! with full compares running among them), a rollout, and the daemon's memory. Must run
//! inside a throwaway network namespace (`scripts/bench-kubernetes.sh` makes one and passes
//! its name for `--netns`); the fake API server listens on that namespace's loopback.
//!
//! A change is timed from the write (the fake's update, or the TOML file's rename) to the
//! moment nftables' event group reports the new backend in an added element: the kernel's commit, seen
//! from outside the daemon.
//!
//! The same measurement with the same services written as TOML (`--feed toml`) is the
//! baseline, and exercises every measuring step with a daemon that has no cluster wiring.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::fake_apiserver::FakeApiServer;
use crate::common::scratch::ScratchDir;
use crate::monitor::Monitor;
use crate::series::{Gaps, Series};
use crate::{data, kernel, ms};

/// The daemon's HTTP address, in the benchmark's namespace.
pub const LISTEN: &str = "127.0.0.1:19751";
/// How long the daemon may take to READY=1.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one change may take to reach the kernel.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(300);
/// Services a rollout replaces every endpoint of.
const ROLLOUT: usize = 100;

/// What the run measures besides the cold start.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Endpoint changes in the series (0: none).
    pub changes: usize,
    /// Run the rollout.
    pub rollout: bool,
    /// `[controller.service] period` (full compares come this often).
    pub period: Duration,
}

/// Where the cluster comes from.
pub enum Feed<'a> {
    /// The fake API server (the daemon lists and watches it).
    Cluster(&'a FakeApiServer),
    /// The same services as TOML in the config file (reloaded on change).
    Toml,
}

/// A running daemon.
pub struct Running {
    /// The process.
    pub child: Child,
    /// Its notify socket (READY=1 arrives here).
    notify: UnixDatagram,
    /// When it was spawned.
    spawned: Instant,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill(2) with our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// `[kubernetes]` for the fake (client certificate, as k3s from outside).
pub fn kubernetes_section(fake: &FakeApiServer, cache: &Path) -> String {
    let (cert, key) = fake.client_cert_files();
    format!(
        "[kubernetes]\nserver = \"{}\"\nca_file = \"{}\"\nclient_cert = \"{}\"\nclient_key = \"{}\"\n\
         node_name = \"{}\"\nfeeds = [\"services\"]\ncache_file = \"{}\"\n",
        fake.url(),
        fake.ca_file().display(),
        cert.display(),
        key.display(),
        data::NODE,
        cache.display()
    )
}

/// The services' endpoints where they differ from the first ones (by service).
type Moved = BTreeMap<usize, Vec<Ipv4Addr>>;

/// Service `i`'s endpoints now.
fn endpoints(moved: &Moved, i: usize) -> Vec<Ipv4Addr> {
    moved.get(&i).cloned().unwrap_or_else(|| data::addresses(i))
}

/// Every service as TOML, with its endpoints now.
fn toml_services(moved: &Moved) -> String {
    let mut t = String::with_capacity(data::services() * 160);
    for i in 0..data::services() {
        let addrs = endpoints(moved, i);
        let backends: Vec<String> = addrs
            .iter()
            .map(|a| format!("\"{a}:{}\"", data::TARGET_PORT))
            .collect();
        t.push_str(&format!(
            "[[service]]\nname = \"svc-{i}\"\naddress = \"{}\"\nport = {}\nbackends = [{}]\n\n",
            data::vip(i),
            data::PORT,
            backends.join(", ")
        ));
    }
    t
}

/// Writes the config; with the fake, drops `cache_file` if this build does not know the key
/// (the cache then goes to the daemon's default under /run/edgenetd).
fn write_config(binary: &Path, dir: &ScratchDir, feed: &Feed, period: Duration) -> PathBuf {
    // A directory of its own: the daemon watches the config's directory, and the log and the
    // notify socket beside it would look like config changes.
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let path = etc.join("edgenetd.toml");
    let head = format!(
        "[daemon]\nlisten = \"{LISTEN}\"\n\n[controller.service]\nperiod = \"{}ms\"\n\n",
        period.as_millis()
    );
    let text = match feed {
        Feed::Toml => format!("{head}{}", toml_services(&Moved::new())),
        Feed::Cluster(fake) => format!(
            "{head}{}",
            kubernetes_section(fake, &dir.path().join("cluster.json"))
        ),
    };
    std::fs::write(&path, &text).unwrap();
    if !check(binary, &path) {
        let without: String = text
            .lines()
            .filter(|l| !l.starts_with("cache_file"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&path, without).unwrap();
        assert!(
            check(binary, &path),
            "edgenetd check rejects {}",
            path.display()
        );
        println!("  (this build has no `cache_file` key: the cache is under /run/edgenetd)");
    }
    path
}

/// `edgenetd check` accepts the config.
fn check(binary: &Path, config: &Path) -> bool {
    Command::new(binary)
        .arg("check")
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Starts the daemon with a notify socket of ours.
pub fn spawn(binary: &Path, config: &Path, netns: &str, dir: &ScratchDir) -> Running {
    let sock = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&sock).unwrap();
    notify.set_read_timeout(Some(READY_TIMEOUT)).unwrap();
    let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
    let spawned = Instant::now();
    let child = Command::new(binary)
        .args(["run", "--netns", netns, "--config"])
        .arg(config)
        // The last good configuration it keeps goes with the scratch directory.
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("NOTIFY_SOCKET", &sock)
        .env("EDGENETD_LOG", daemon_log_level())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Running {
        child,
        notify,
        spawned,
    }
}

/// The daemon's log level: `BENCH_DAEMON_LOG` (its log is then printed at the end), or warn.
fn daemon_log_level() -> String {
    std::env::var("BENCH_DAEMON_LOG").unwrap_or_else(|_| "warn".into())
}

/// Waits for READY=1; returns when it came.
pub fn wait_ready(d: &Running, log: &Path) -> Instant {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = d.notify.recv(&mut buf).unwrap_or_else(|e| {
            panic!(
                "no READY=1 ({e}); daemon log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        });
        if String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "READY=1")
        {
            return Instant::now();
        }
    }
}

/// `nft` with these arguments; its stdout, or None when it failed.
fn nft(args: &[&str]) -> Option<String> {
    let out = Command::new("nft").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How many VIPs the kernel's `services4` map holds.
fn kernel_services() -> usize {
    nft(&["list", "map", "inet", "edgenetd-service", "services4"])
        .map_or(0, |t| t.matches(" . tcp . ").count())
}

/// VmRSS and VmHWM of `pid`, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// A figure of the daemon's /metrics (the first series of that name), 0 when absent.
pub fn metric(name: &str) -> f64 {
    let mut tcp = TcpStream::connect(LISTEN).unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            (key == name || key.starts_with(&format!("{name}{{")))
                .then(|| value.trim().parse::<f64>().ok())?
        })
        .unwrap_or(0.0)
}

/// Full compares the service controller has finished or stopped for a change.
fn full_compares() -> f64 {
    metric("edgenetd_service_full_compares_total")
        + metric("edgenetd_service_full_compares_interrupted_total")
}

/// Writes service `i`'s endpoints as they are in `moved`: through the fake, or (for the TOML
/// feed, once for all the services changed) by rewriting the file.
fn publish(feed: &Feed, config: &Path, moved: &Moved, changed: &[usize]) {
    match feed {
        Feed::Cluster(fake) => {
            for &i in changed {
                fake.apply("endpointslices", data::slice(i, &endpoints(moved, i)));
            }
        }
        Feed::Toml => {
            let text = std::fs::read_to_string(config).unwrap();
            let old = text.find("[[service]]").unwrap();
            let fresh = format!("{}{}", &text[..old], toml_services(moved));
            let tmp = config.with_extension("tmp");
            std::fs::write(&tmp, fresh).unwrap();
            std::fs::rename(&tmp, config).unwrap();
        }
    }
}

/// One endpoint change: service `i`'s first endpoint moves to `to`; how long until the
/// kernel had it, and whether a full compare finished meanwhile.
fn one_change(
    feed: &Feed,
    config: &Path,
    monitor: &Monitor,
    moved: &mut Moved,
    i: usize,
    to: Ipv4Addr,
) -> (Duration, bool) {
    let mut addrs = endpoints(moved, i);
    addrs[0] = to;
    moved.insert(i, addrs);
    let compares = full_compares();
    monitor.expect(&[to]);
    let t = Instant::now();
    publish(feed, config, moved, &[i]);
    let seen = monitor
        .wait_all(&[to], CHANGE_TIMEOUT)
        .unwrap_or_else(|| panic!("{to} never reached the kernel"));
    let took = seen.saturating_duration_since(t);
    // A compare that ended (or stopped for the change) after the change was written ran, at
    // least in part, while the change waited or was applied.
    (took, full_compares() > compares)
}

/// The series: `n` changes to services spread over the table, at random gaps.
fn change_series(
    feed: &Feed,
    config: &Path,
    monitor: &Monitor,
    moved: &mut Moved,
    n: usize,
) -> Series {
    let mut series = Series::default();
    let mut gaps = Gaps::new(0x5eed);
    for k in 0..n {
        std::thread::sleep(gaps.next());
        // Spread over the table; never service 0 twice in a row (each a separate change).
        let i = (k * 997 + 1) % data::services();
        let (took, met) = one_change(feed, config, monitor, moved, i, data::moved_ip(k + 1));
        series.push(took, met);
    }
    series
}

/// Every endpoint of `ROLLOUT` services (or of all, when fewer) replaced at once; how many
/// services, and how long until all were in.
fn rollout(feed: &Feed, config: &Path, monitor: &Monitor, moved: &mut Moved) -> (usize, Duration) {
    let first = data::services() / 5;
    let changed: Vec<usize> = (first..(first + ROLLOUT).min(data::services())).collect();
    let mut fresh = Vec::new();
    for &i in &changed {
        let addrs: Vec<Ipv4Addr> = (0..data::ENDPOINTS)
            .map(|j| data::rolled_ip(i, j))
            .collect();
        fresh.extend(&addrs);
        moved.insert(i, addrs);
    }
    monitor.expect(&fresh);
    let t = Instant::now();
    publish(feed, config, moved, &changed);
    let seen = monitor
        .wait_all(&fresh, CHANGE_TIMEOUT)
        .expect("the rollout never reached the kernel");
    (changed.len(), seen.saturating_duration_since(t))
}

/// Runs the daemon, prints its figures.
pub fn run(binary: &Path, netns: &str, feed: Feed, plan: Plan) {
    let dir = ScratchDir::new("bench-kubernetes-daemon");
    let config = write_config(binary, &dir, &feed, plan.period);
    let d = spawn(binary, &config, netns, &dir);
    let ready = wait_ready(&d, &dir.path().join("daemon.log"));
    let in_kernel = kernel_services();
    println!(
        "  start to READY=1 (spawn)                 {}",
        ms(ready - d.spawned)
    );
    if let Feed::Cluster(fake) = &feed {
        let first_list = fake
            .requests()
            .iter()
            .filter(|r| r.at >= d.spawned)
            .map(|r| r.at)
            .min()
            .expect("the daemon listed nothing before READY=1 (is the daemon wiring in?)");
        println!(
            "  first list request to READY=1            {}",
            ms(ready - first_list)
        );
    }
    println!("  services in the kernel at READY=1         {in_kernel:>9}");
    assert_eq!(
        in_kernel,
        data::services(),
        "not every service is programmed"
    );
    let objects = kernel::count("inet", "edgenetd-service");
    let map_elements: usize = objects
        .sets
        .iter()
        .filter(|(name, _)| name.starts_with("services") || name.starts_with("backends"))
        .map(|(_, n)| n)
        .sum();
    println!(
        "  map elements (services, backends)         {map_elements:>9} ({:.1} per service)",
        map_elements as f64 / data::services() as f64
    );
    println!(
        "  kernel objects of the service table       {:>9} ({:.1} per service; {objects})",
        objects.total(),
        objects.total() as f64 / data::services() as f64
    );
    let (rss, hwm) = memory(d.child.id());
    println!("  daemon RSS at READY=1 (VmRSS)             {rss:9.1} MiB");
    println!("  daemon peak RSS until then (VmHWM)        {hwm:9.1} MiB");
    let monitor = Monitor::start();
    let mut moved = Moved::new();
    if plan.changes > 0 {
        let series = change_series(&feed, &config, &monitor, &mut moved, plan.changes);
        println!(
            "  one endpoint change to the kernel         {}",
            series.summary()
        );
        println!(
            "  (service period {} ms; the last full compare took {:.0} ms)",
            plan.period.as_millis(),
            metric("edgenetd_service_full_compare_last_seconds") * 1000.0
        );
    }
    if plan.rollout {
        let (services, took) = rollout(&feed, &config, &monitor, &mut moved);
        println!(
            "  rollout: every endpoint of {services:>3} services  {} to the kernel",
            ms(took)
        );
    }
    let (rss, hwm) = memory(d.child.id());
    println!("  daemon RSS at the end (VmRSS)             {rss:9.1} MiB");
    println!("  daemon peak RSS (VmHWM)                   {hwm:9.1} MiB");
    if std::env::var_os("BENCH_DAEMON_LOG").is_some() {
        let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
        println!("daemon log:\n{log}");
    }
}
