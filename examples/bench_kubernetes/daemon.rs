//! The real daemon fed the benchmark's cluster: from the first list request to READY=1, one
//! endpoint change to the kernel, and the daemon's memory. Must run inside a throwaway network
//! namespace (`scripts/bench-kubernetes.sh` makes one and passes its name for `--netns`);
//! the fake API server listens on that namespace's loopback.
//!
//! The same measurement with the same services written as TOML (`--toml`) is the baseline,
//! and exercises every measuring step with a daemon that has no cluster wiring.

use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgenetd::controller::service::slots::slot_count;

use crate::common::fake_apiserver::FakeApiServer;
use crate::common::scratch::ScratchDir;
use crate::data;

/// How long the daemon may take to READY=1.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one change may take to reach the kernel.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);
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
    let path = dir.path().join("edgenetd.toml");
    let head = "[daemon]\nlisten = \"127.0.0.1:19751\"\n\n";
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
        .env("NOTIFY_SOCKET", &sock)
        .env("EDGENETD_LOG", "warn")
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

/// Milliseconds.
fn ms(d: Duration) -> String {
    format!("{:9.1} ms", d.as_secs_f64() * 1000.0)
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
            .filter(|r| !r.is_watch())
            .map(|r| r.at)
            .min()
            .expect("the daemon listed nothing before READY=1");
        println!(
            "  first list request to READY=1            {}",
            ms(ready - first_list)
        );
    }
    println!("  services in the kernel at READY=1         {in_kernel:>9}");
    assert_eq!(in_kernel, data::SERVICES, "not every service is programmed");
    let mut runs = Vec::new();
    for n in 0..CHANGES {
        let to = data::moved_ip(n + 1);
        let t = Instant::now();
        change(&feed, &config, to);
        while !service0_slots()
            .is_some_and(|s| s.contains(&format!("{to} . {}", data::TARGET_PORT)))
        {
            assert!(
                t.elapsed() < CHANGE_TIMEOUT,
                "{to} never reached the kernel"
            );
        }
        runs.push(t.elapsed());
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
}
