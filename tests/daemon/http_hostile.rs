//! Hostile input to the HTTP server of the real binary: a thousand connections that send
//! nothing, a hundred that send their head a byte at a time, oversized heads, invalid UTF-8,
//! absolute-form targets, pipelined requests and a flood from one source, while a probe from
//! loopback keeps asking for /healthz. The probe's p50/p99/max latencies are printed next to
//! the 100 ms the reliability issue asks for; p99 is asserted under 100 ms and the worst
//! under 1 s (two shared cores run the whole suite; see the assertion); the daemon's RSS and
//! open fds are printed
//! and must come back to their idle values afterwards. Runs in its own network namespace; the hostile clients come
//! from addresses put on its `lo`.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Options};
use common::http;
use common::shell::sh;

const LISTEN: &str = "0.0.0.0:9750";
/// Sources of the idle and byte-by-byte clients: 40 addresses, so the per-source cap (32)
/// does not refuse them before the global cap and eviction are reached.
const SOURCES: u32 = 40;

/// Where the child (in its namespace) leaves the figures for the parent to print: the
/// namespace runner shows a passing child's output to no one.
fn figures_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("http_hostile-figures.txt")
}

/// Prints a measured figure and keeps it for the parent process.
macro_rules! report {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        println!("{line}");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(figures_path())
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }};
}

#[path = "http_hostile/idle_flood.rs"]
mod idle_flood;

fn config() -> String {
    format!(
        "[daemon]\nlisten = \"{LISTEN}\"\n[controller.policy]\nenabled = false\n\
         [controller.service]\nenabled = false\n[controller.route]\nenabled = false\n\n\
         [[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n"
    )
}

/// Raises this process's soft open-file limit to `want` when it is lower: the test holds
/// 1,000 client sockets at once (the daemon, a child, inherits the raised limit).
fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur < want {
        lim.rlim_cur = want.min(lim.rlim_max);
        // SAFETY: a valid in-pointer.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    }
    report!("fd limit: {} (wanted {want})", lim.rlim_cur);
    assert!(lim.rlim_cur >= want, "ulimit -n is below {want}");
}

/// (RSS in kB, open fds) of `pid`.
fn footprint(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (rss, fds)
}

/// A probe that GETs /healthz from loopback until stopped, once every 20 ms, each a single
/// attempt (no retry).
struct Probe {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Probed>,
}

/// What the probe saw.
struct Probed {
    /// Answers 200.
    ok: usize,
    /// Everything else.
    failures: Vec<String>,
    /// Every request's latency, sorted.
    latencies: Vec<Duration>,
}

impl Probed {
    /// The latency below which `pct` percent of the requests were answered.
    fn percentile(&self, pct: usize) -> Duration {
        let n = self.latencies.len();
        if n == 0 {
            return Duration::ZERO;
        }
        self.latencies[((n * pct).div_ceil(100)).clamp(1, n) - 1]
    }
}

impl Probe {
    fn start() -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let (mut ok, mut failures, mut latencies) = (0, Vec::new(), Vec::new());
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                match http::try_get("http://127.0.0.1:9750", "/healthz") {
                    Ok((200, _)) => ok += 1,
                    other => failures.push(format!("{other:?}")),
                }
                latencies.push(t.elapsed());
                thread::sleep(Duration::from_millis(20));
            }
            latencies.sort();
            Probed {
                ok,
                failures,
                latencies,
            }
        });
        Probe { stop, handle }
    }

    fn finish(self) -> Probed {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

fn source(i: u32) -> String {
    format!("10.0.{}.{}", i / 200 + 1, i % 200 + 1)
}

/// Connects to the daemon at `from`, an address on `lo`, which the connection then comes
/// from.
fn connect_from(from: &str) -> TcpStream {
    let s = TcpStream::connect(format!("{from}:9750")).unwrap_or_else(|e| panic!("{from}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Sends `request` (a write cut short by the server closing is fine) and reads the answer.
fn send(request: &[u8]) -> String {
    let mut s = connect_from("10.0.1.1");
    let _ = s.write_all(request);
    answer_of(s)
}

/// Reads whatever the server answers until it closes (or 10 s pass).
fn answer_of(mut s: TcpStream) -> String {
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

fn idle_clients() {
    let t = Instant::now();
    let idle: Vec<TcpStream> = (0..1000)
        .map(|i| connect_from(&source(i % SOURCES)))
        .collect();
    report!("1000 idle connections open in {:?}", t.elapsed());
    thread::sleep(Duration::from_secs(2));
    drop(idle);
}

fn byte_by_byte_heads() {
    let head = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut conns: Vec<TcpStream> = (0..100)
        .map(|i| connect_from(&source(i % SOURCES)))
        .collect();
    for b in head {
        for c in &mut conns {
            c.write_all(&[*b]).unwrap();
        }
        thread::sleep(Duration::from_millis(30));
    }
    let ok = conns
        .into_iter()
        .map(answer_of)
        .filter(|a| a.starts_with("HTTP/1.1 200 "))
        .count();
    report!("byte-by-byte heads answered 200: {ok} of 100");
    assert_eq!(ok, 100, "a slow but complete head must be answered");
}

fn malformed_heads() {
    let big = format!(
        "GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let mut many = String::from("GET /livez HTTP/1.1\r\nHost: x\r\n");
    for i in 0..100 {
        many.push_str(&format!("X-{i}: y\r\n"));
    }
    many.push_str("\r\n");
    let cases: [(&[u8], &str); 6] = [
        (big.as_bytes(), "431"),
        (many.as_bytes(), "431"),
        (b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", "400"),
        (b"GET /livez HTTP/1.1\r\nHost: \xc3\x28\r\n\r\n", "200"),
        (
            b"GET http://10.0.0.1:9750/livez HTTP/1.1\r\nHost: x\r\n\r\n",
            "200",
        ),
        (b"GET https://h HTTP/1.1\r\nHost: x\r\n\r\n", "404"),
    ];
    for (request, status) in cases {
        let answer = send(request);
        let first = answer.lines().next().unwrap_or_default().to_string();
        report!("{:?}...: {first}", String::from_utf8_lossy(&request[..20]));
        // The server closes a too-large head with bytes of it unread, so the kernel may
        // reset the connection before the 431 is read; the 100-header case is read whole.
        let reset_ok = request.len() > 16 * 1024 && answer.is_empty();
        assert!(
            reset_ok || answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{:?}: {answer:?}",
            String::from_utf8_lossy(&request[..40.min(request.len())])
        );
    }
}

fn pipelined() {
    let two = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = send(two);
    let answers = answer.matches("HTTP/1.1 ").count();
    report!("pipelined pair: {answers} answer(s), connection closed after it");
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert_eq!(answers, 1, "one request per connection (Connection: close)");
}

/// `threads` clients from one source asking as fast as they can for `secs`.
fn flood(threads: usize, secs: u64) -> (usize, usize) {
    let until = Instant::now() + Duration::from_secs(secs);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            thread::spawn(move || {
                let (mut ok, mut other) = (0, 0);
                while Instant::now() < until {
                    match http::try_get("http://10.0.1.1:9750", "/livez") {
                        Ok((200, _)) => ok += 1,
                        _ => other += 1,
                    }
                }
                (ok, other)
            })
        })
        .collect();
    workers
        .into_iter()
        .map(|w| w.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// Waits up to 10 s for the daemon's footprint to come back near `idle`.
fn settles(pid: u32, idle: (u64, usize)) -> (u64, usize) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = footprint(pid);
        let back = now.1 <= idle.1 + 2 && now.0 <= idle.0 + 4096;
        if back || Instant::now() > until {
            return now;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// The tests of this file flood a daemon each and measure its probes' latencies: one at a
/// time, so that two cores are not shared by two floods.
static ONE_FLOOD_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn hostile_clients_do_not_slow_the_health_probe_or_leak_memory_and_fds() {
    let _one = ONE_FLOOD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let name = common::netns::test_path(
        module_path!(),
        "hostile_clients_do_not_slow_the_health_probe_or_leak_memory_and_fds",
    );
    if !common::netns::in_child() {
        let _ = std::fs::remove_file(figures_path());
    }
    common::netns::run_isolated(&name, hostile_clients);
    if !common::netns::in_child() {
        print!(
            "{}",
            std::fs::read_to_string(figures_path()).unwrap_or_default()
        );
    }
}

fn hostile_clients() {
    {
        raise_fd_limit(4096);
        for i in 0..SOURCES {
            sh(&format!("ip addr add {}/32 dev lo", source(i)));
        }
        let opts = Options {
            listen: LISTEN,
            ..Options::default()
        };
        let d = Daemon::start_with("hostile", &config(), opts);
        d.wait_ready();
        for _ in 0..20 {
            http::get("http://127.0.0.1:9750", "/healthz");
        }
        let pid = d.pid();
        let idle = footprint(pid);
        report!("idle: RSS {} kB, {} fds", idle.0, idle.1);
        let probe = Probe::start();
        let mut peak = idle;
        let mut step = |name: &str, f: &dyn Fn()| {
            let t = Instant::now();
            f();
            let now = footprint(pid);
            peak = (peak.0.max(now.0), peak.1.max(now.1));
            report!(
                "{name}: {:?}, then RSS {} kB, {} fds",
                t.elapsed(),
                now.0,
                now.1
            );
        };
        step("idle clients", &idle_clients);
        step("byte-by-byte heads", &byte_by_byte_heads);
        step("malformed heads", &malformed_heads);
        step("pipelined", &pipelined);
        step("flood", &|| {
            let (ok, other) = flood(8, 3);
            report!("flood from one source: {ok} answered 200, {other} refused or failed");
            assert!(ok > 100, "the flood itself is served too");
        });
        let probed = probe.finish();
        let worst = probed.percentile(100);
        report!(
            "probe: {} answers, {} failures, latency p50 {:?} p99 {:?} max {worst:?} \
             (the issue asks for 100 ms: {})",
            probed.ok,
            probed.failures.len(),
            probed.percentile(50),
            probed.percentile(99),
            if worst <= Duration::from_millis(100) {
                "met"
            } else {
                "NOT met"
            }
        );
        let after = settles(pid, idle);
        report!(
            "RSS kB idle/peak/after: {}/{}/{}; fds idle/peak/after: {}/{}/{}",
            idle.0,
            peak.0,
            after.0,
            idle.1,
            peak.1,
            after.1
        );
        assert!(
            probed.failures.is_empty(),
            "the probe failed: {:?}",
            probed.failures
        );
        // A SYN the kernel drops (a full accept queue) costs the probe 1 s, its client's
        // retransmission timeout: the 1,024 backlog keeps that from happening while 1,000
        // connections are opened at once (with std's 128 it did, ~1.01 s). The 100 ms
        // is asserted for 99 % of the probes; the worst one may meet a descheduled HTTP thread
        // on two cores shared by the whole suite (measured alone: max 17-74 ms).
        assert!(
            worst < Duration::from_secs(1),
            "a probe waited for a SYN retransmission: {worst:?}"
        );
        assert!(
            probed.percentile(99) <= Duration::from_millis(100),
            "p99 probe latency {:?}",
            probed.percentile(99)
        );
        assert!(
            after.1 <= idle.1 + 2,
            "fds {} after, {} idle",
            after.1,
            idle.1
        );
        assert!(
            after.0 <= idle.0 + 4096,
            "RSS {} kB after, {} kB idle",
            after.0,
            idle.0
        );
        drop(d);
    }
}
