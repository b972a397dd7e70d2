//! Route benchmark: edgenetd's route controller against `ip -batch`, in a throwaway network
//! namespace (the program re-executes itself under `unshare --net`; the host's routes are
//! never touched).
//!
//! Prints, side by side (ratio = the other tool's time / edgenetd's; above 1, edgenetd is
//! faster): cold sync of 10k and 100k routes vs `ip -batch` adding the same routes; a no-op
//! resync of 100k, with a full dump and with a trusted cache (time, writes the controller sent,
//! and route notifications an independent `ip monitor route` saw: both must be 0); a one-route
//! change with 100k installed vs `ip route replace`; the real daemon from start to `READY=1`
//! with 100k routes in its TOML config vs `ip -batch` from a text file; and peak RSS (VmHWM)
//! of this process and of the daemon.
//!
//! Run: `scripts/bench-routes.sh` (builds in release mode and runs this as root).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgenetd::config::DesiredState;
use edgenetd::config::route::{Route, RouteKind, RoutingConfig};
use edgenetd::controller::Controller;
use edgenetd::controller::route::RouteController;
use edgenetd::sync::{NoProgress, trigger};
use ipnet::{IpNet, Ipv4Net};

const CHILD: &str = "EDGENETD_BENCH_CHILD";

fn main() {
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().expect("own path");
        let status = Command::new("unshare")
            .arg("--net")
            .arg("--")
            .arg(exe)
            .args(std::env::args().skip(1))
            .env(CHILD, "1")
            .status()
            .expect("unshare --net (run as root)");
        std::process::exit(status.code().unwrap_or(1));
    }
    let daemon = std::env::args().nth(1);
    sh("ip link set lo up");
    // IPv4 only: no IPv6 link-local addresses appearing later (address events invalidate the
    // controller's cache, as they should, which would make the cached figures a dump).
    sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    sh("ip link add r0 type veth peer name r1");
    sh("ip addr add 192.0.2.1/24 dev r0 && ip link set r0 up && ip link set r1 up");

    println!(
        "edgenetd route benchmark (kernel {}, {} CPUs)",
        sh("uname -r").trim(),
        cpus()
    );
    println!();
    println!(
        "{:<44} {:>12} {:>12} {:>8}",
        "", "edgenetd", "ip -batch", "ratio"
    );
    let mut ip_100k = Duration::ZERO;
    for n in [10_000, 100_000] {
        let ip = time_ip_batch(n);
        ip_100k = ip;
        sh("ip route flush proto 190");
        let mut c = RouteController::new(trigger().0);
        let desired = desired(n, None);
        let (ours, report) = timed(|| smol::block_on(c.sync(&desired, &NoProgress)));
        let report = report.expect("cold sync");
        assert_eq!(installed(), n, "every route installed");
        assert_eq!(report.changes as usize, n);
        row(&format!("cold sync, {n} routes"), ours, Some(ip));
        if n == 100_000 {
            noop_and_change(&mut c, &desired, n);
        }
        sh("ip route flush proto 190");
    }
    println!();
    println!(
        "{:<44} {:>12}",
        "peak RSS of this process (VmHWM)",
        status_kb("self", "VmHWM")
    );
    if let Some(bin) = daemon {
        daemon_ready(&bin, 100_000, ip_100k);
    }
}

fn noop_and_change(c: &mut RouteController, desired: &DesiredState, n: usize) {
    let mut monitor = Command::new("ip")
        .args(["-o", "monitor", "route"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("ip monitor");
    std::thread::sleep(Duration::from_millis(300));
    // A controller that has never seen this kernel dumps it in full: what every periodic
    // resync costs.
    let mut fresh = RouteController::new(trigger().0);
    let (t_full, full) = timed(|| smol::block_on(fresh.sync(desired, &NoProgress)));
    let full = full.expect("full no-op resync");
    // The controller that just installed the routes, with no kernel event since: no dump.
    let mut cached_times = Vec::new();
    let mut cached_writes = 0;
    for _ in 0..RUNS {
        let (t, cached) = timed(|| smol::block_on(c.sync(desired, &NoProgress)));
        let cached = cached.expect("no-op sync");
        assert!(cached.summary.contains("not dumped"), "{}", cached.summary);
        cached_writes += cached.changes;
        cached_times.push(t);
    }
    std::thread::sleep(Duration::from_millis(300));
    let _ = monitor.kill();
    // Only edgenetd's protocol: the kernel's own link-local routes may come and go meanwhile.
    let seen = BufReader::new(monitor.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("proto 190"))
        .count();
    let _ = monitor.wait();
    println!(
        "{:<44} {:>12} {:>12}",
        format!("no-op resync, {n} routes (full dump)"),
        ms(t_full),
        "-"
    );
    println!(
        "{:<44} {:>12} {:>12}",
        format!("no-op sync, {n} routes (no event: no dump)"),
        ms(median(cached_times)),
        "-"
    );
    println!(
        "{:<44} {:>12} {:>12}",
        "  kernel writes sent / route events seen",
        format!("{} / {seen}", full.changes + cached_writes),
        "-"
    );
    one_change(c, desired, n);
}

/// A one-route change with `n` installed, by the controller (config change, trusted cache) and
/// by `ip route replace`; then the same change found by a full resync.
fn one_change(c: &mut RouteController, desired: &DesiredState, n: usize) {
    // The route at n/2 changes its gateway and back, RUNS times (odd: it ends changed),
    // first by the controller (config change, trusted cache), then by `ip route replace`.
    let changed = desired_with_change(n);
    let mut ours = Vec::new();
    for k in 0..RUNS {
        let state = if k % 2 == 0 { &changed } else { desired };
        let (t, report) = timed(|| smol::block_on(c.sync(state, &NoProgress)));
        let report = report.expect("one-route change");
        assert!(report.summary.contains("not dumped"), "{}", report.summary);
        assert_eq!(report.changes, 1, "{}", report.summary);
        ours.push(t);
    }
    let theirs: Vec<Duration> = (0..RUNS)
        .map(|k| {
            let gw = if k % 2 == 0 { 3 } else { 2 };
            let cmd = format!(
                "ip route replace {} via 192.0.2.{gw} proto 190",
                prefix(n / 2)
            );
            timed(|| sh(&cmd)).0
        })
        .collect();
    println!(
        "{:<44} {:>12} {:>12}",
        format!("(median of {RUNS})"),
        "edgenetd",
        "ip route replace"
    );
    row(
        &format!("one-route change, {n} installed"),
        median(ours),
        Some(median(theirs)),
    );
    println!("{:<44} {:>12} {:>12}", "  kernel writes sent", 1, 1);
    // The same change found by a full resync (e.g. somebody changed the route by hand).
    sh(&format!(
        "ip route replace {} via 192.0.2.4 proto 190",
        prefix(n / 2)
    ));
    let mut fresh = RouteController::new(trigger().0);
    let (t, report) = timed(|| smol::block_on(fresh.sync(&changed, &NoProgress)));
    let report = report.expect("repair");
    println!(
        "{:<44} {:>12} {:>12}",
        format!("one-route repair, {n} installed (full dump)"),
        ms(t),
        "-"
    );
    assert_eq!(report.changes, 1);
}

/// Repetitions of the short measurements (their median is shown: a loaded machine's
/// scheduler adds milliseconds to single runs).
const RUNS: usize = 7;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One line: what, edgenetd's time, the other tool's time and the ratio.
fn row(what: &str, ours: Duration, theirs: Option<Duration>) {
    match theirs {
        Some(t) => println!(
            "{what:<44} {:>12} {:>12} {:>7.2}x",
            ms(ours),
            ms(t),
            t.as_secs_f64() / ours.as_secs_f64()
        ),
        None => println!("{what:<44} {:>12} {:>12}", ms(ours), "-"),
    }
}

/// Starts the daemon with `n` routes in its config and times it to `READY=1` (which follows
/// every controller's first sync), against `ip -batch` installing the same routes from text.
fn daemon_ready(bin: &str, n: usize, ip_batch: Duration) {
    sh("ip route flush proto 190");
    let dir = std::env::temp_dir().join(format!("edgenetd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("edgenetd.toml");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "[daemon]\nlisten = \"127.0.0.1:19750\"\n[controller.route]\nperiod = \"1h\"\nsync_budget = \"5m\"\n").unwrap();
    for i in 0..n {
        writeln!(f, "[[route]]\nto = \"{}\"\nvia = \"192.0.2.2\"", prefix(i)).unwrap();
    }
    drop(f);
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(["run", "--config"])
        .arg(&path)
        .env("EDGENETD_LOG", "warn")
        .env("NOTIFY_SOCKET", &notify_path)
        .spawn()
        .expect("start the daemon");
    let mut buf = [0u8; 4096];
    loop {
        let len = notify.recv(&mut buf).expect("READY=1 within 5 minutes");
        if String::from_utf8_lossy(&buf[..len]).contains("READY=1") {
            break;
        }
    }
    let took = start.elapsed();
    assert_eq!(installed(), n, "every route installed at READY=1");
    println!();
    println!("{:<44} {:>12} {:>12}", "", "edgenetd", "ip -batch");
    row(
        &format!("daemon: start to READY=1, {n} routes (TOML)"),
        took,
        Some(ip_batch),
    );
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id().to_string();
    println!(
        "{:<44} {:>12}",
        format!("daemon peak RSS, {n} routes (VmHWM)"),
        status_kb(&pid, "VmHWM")
    );
    println!(
        "{:<44} {:>12}",
        "daemon RSS after the sync (VmRSS)",
        status_kb(&pid, "VmRSS")
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn prefix(i: usize) -> Ipv4Net {
    let base = u32::from(Ipv4Addr::new(10, 0, 0, 0)) + (i as u32) * 16;
    Ipv4Net::new(Ipv4Addr::from(base), 28).unwrap()
}

fn route(i: usize, gw: [u8; 4]) -> Route {
    Route {
        to: IpNet::V4(prefix(i)),
        via: Some(IpAddr::from(gw)),
        dev: None,
        metric: None,
        table: 254,
        kind: RouteKind::Unicast,
        src: None,
        onlink: false,
        mtu: None,
        nexthops: Vec::new(),
    }
}

fn desired(n: usize, change: Option<usize>) -> DesiredState {
    let routes = (0..n)
        .map(|i| {
            if Some(i) == change {
                route(i, [192, 0, 2, 3])
            } else {
                route(i, [192, 0, 2, 2])
            }
        })
        .collect();
    DesiredState {
        routing: RoutingConfig {
            routes,
            rules: Vec::new(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn desired_with_change(n: usize) -> DesiredState {
    desired(n, Some(n / 2))
}

fn time_ip_batch(n: usize) -> Duration {
    let path = std::env::temp_dir().join(format!("edgenetd-bench-{}.batch", std::process::id()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..n {
        writeln!(f, "route add {} via 192.0.2.2 proto 190", prefix(i)).unwrap();
    }
    drop(f);
    let (t, _) = timed(|| sh(&format!("ip -batch {}", path.display())));
    assert_eq!(installed(), n);
    let _ = std::fs::remove_file(path);
    t
}

fn installed() -> usize {
    sh("ip route show proto 190 | wc -l")
        .trim()
        .parse()
        .unwrap()
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn status_kb(pid: &str, key: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.1} MiB", kb / 1024.0))
        .unwrap_or_else(|| "?".into())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
