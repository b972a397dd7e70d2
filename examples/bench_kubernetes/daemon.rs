//! The real daemon fed the benchmark's cluster: from the first list request to READY=1, one
//! endpoint change to the kernel, and the daemon's memory. Must run inside a throwaway network
//! namespace (`scripts/bench-kubernetes.sh` makes one and passes its name for `--netns`);
//! the fake API server listens on that namespace's loopback.
//!
//! The same measurement with the same services written as TOML (`--toml`) is the baseline,
//! and exercises every measuring step with a daemon that has no cluster wiring.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgenetd::controller::service::slots::slot_count;

use crate::common::fake_apiserver::FakeApiServer;
use crate::common::scratch::ScratchDir;
use crate::data;
use crate::ms;

/// The daemon's HTTP address, in the benchmark's namespace.
const LISTEN: &str = "127.0.0.1:19751";
/// How long the daemon may take to READY=1.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one change may take to reach the kernel.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(300);
/// Endpoint changes measured (median reported).
const CHANGES: usize = 5;

/// Where the cluster comes from.
pub enum Feed<'a> {
    /// The fake API server (the daemon lists and watches it).
    Cluster(&'a FakeApiServer),
    /// The same services as TOML in the config file (reloaded on change).
    Toml,
}

/// A running daemon.
struct Running {
    /// The process.
    child: Child,
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
fn kubernetes_section(fake: &FakeApiServer, cache: &Path) -> String {
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

/// Every service as TOML, service 0's first backend at `first`.
fn toml_services(first: Ipv4Addr) -> String {
    let mut t = String::with_capacity(data::SERVICES * 160);
    for i in 0..data::SERVICES {
        let mut addrs = data::addresses(i);
        if i == 0 {
            addrs[0] = first;
        }
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
fn write_config(binary: &Path, dir: &ScratchDir, feed: &Feed) -> PathBuf {
    // A directory of its own: the daemon watches the config's directory, and the log and the
    // notify socket beside it would look like config changes.
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let path = etc.join("edgenetd.toml");
    let head = format!("[daemon]\nlisten = \"{LISTEN}\"\n\n");
    let text = match feed {
        Feed::Toml => format!("{head}{}", toml_services(data::endpoint_ip(0, 0))),
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
fn spawn(binary: &Path, config: &Path, netns: &str, dir: &ScratchDir) -> Running {
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
fn wait_ready(d: &Running, log: &Path) -> Instant {
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

/// Service 0's slots in the kernel, as `nft get element` prints them.
fn service0_slots() -> Option<String> {
    let slots = slot_count(data::ENDPOINTS);
    let keys: Vec<String> = (0..slots)
        .map(|s| format!("{} . tcp . {} . {s}", data::vip(0), data::PORT))
        .collect();
    let elements = format!("{{ {} }}", keys.join(", "));
    nft(&[
        "get",
        "element",
        "inet",
        "edgenetd-service",
        "backends4",
        &elements,
    ])
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

/// The service controller's completed syncs (`edgenetd_controller_syncs_total`).
fn service_syncs() -> u64 {
    let mut tcp = TcpStream::connect(LISTEN).unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("edgenetd_controller_syncs_total{controller=\"service\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("edgenetd_controller_syncs_total{controller=\"service\"} in /metrics") as u64
}

/// Makes one change and times it to the end of the service sync that put it in the kernel.
/// `nft get element` is far slower than a sync on a map this large (it reads the whole set),
/// so the sync counter is polled instead and the kernel checked after each completed sync;
/// a periodic sync that finished first is not taken for the change's.
fn change_to_kernel(feed: &Feed, config: &Path, to: Ipv4Addr) -> Duration {
    let wanted = format!("{to} . {}", data::TARGET_PORT);
    let mut seen = service_syncs();
    let t = Instant::now();
    change(feed, config, to);
    loop {
        let now = service_syncs();
        if now > seen {
            let took = t.elapsed();
            if service0_slots().is_some_and(|s| s.contains(&wanted)) {
                return took;
            }
            seen = now;
        }
        assert!(
            t.elapsed() < CHANGE_TIMEOUT,
            "{to} never reached the kernel"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Moves service 0's first endpoint to `to`, through the fake or by rewriting the TOML.
fn change(feed: &Feed, config: &Path, to: Ipv4Addr) {
    match feed {
        Feed::Cluster(fake) => {
            let mut addrs = data::addresses(0);
            addrs[0] = to;
            fake.apply("endpointslices", data::slice(0, &addrs));
        }
        Feed::Toml => {
            let text = std::fs::read_to_string(config).unwrap();
            let old = text.find("[[service]]").unwrap();
            let fresh = format!("{}{}", &text[..old], toml_services(to));
            let tmp = config.with_extension("tmp");
            std::fs::write(&tmp, fresh).unwrap();
            std::fs::rename(&tmp, config).unwrap();
        }
    }
}

/// Runs the daemon, prints its figures.
pub fn run(binary: &Path, netns: &str, feed: Feed) {
    let dir = ScratchDir::new("bench-kubernetes-daemon");
    let config = write_config(binary, &dir, &feed);
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
            .filter(|r| !r.is_watch() && r.at >= d.spawned)
            .map(|r| r.at)
            .min()
            .expect("the daemon listed nothing before READY=1 (is the daemon wiring in?)");
        println!(
            "  first list request to READY=1            {}",
            ms(ready - first_list)
        );
    }
    println!("  services in the kernel at READY=1         {in_kernel:>9}");
    assert_eq!(in_kernel, data::SERVICES, "not every service is programmed");
    let t = Instant::now();
    assert!(
        service0_slots().is_some(),
        "service 0 has no slots in the kernel"
    );
    println!(
        "  (one kernel read, nft get element: {}; changes are timed by the service",
        ms(t.elapsed()).trim()
    );
    println!("   controller's sync counter, then checked in the kernel, untimed)");
    let mut runs = Vec::new();
    for n in 0..CHANGES {
        let to = data::moved_ip(n + 1);
        runs.push(change_to_kernel(&feed, &config, to));
    }
    runs.sort();
    println!(
        "  one endpoint change to the kernel         {} (median of {CHANGES}; worst {})",
        ms(runs[CHANGES / 2]),
        ms(runs[CHANGES - 1]).trim()
    );
    let (rss, hwm) = memory(d.child.id());
    println!("  daemon RSS after the changes (VmRSS)      {rss:9.1} MiB");
    println!("  daemon peak RSS (VmHWM)                   {hwm:9.1} MiB");
    if std::env::var_os("BENCH_DAEMON_LOG").is_some() {
        let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
        println!("daemon log:\n{log}");
    }
}
