//! Issue 21, item 11: 2,000 idle connections from 100 loopback sources, each client
//! reconnecting the moment it is closed, against the 256-connection cap. Before the fix every
//! new connection evicted (closed) the oldest idle one, whose client came straight back:
//! 291,931 connections in 20 s, the namespace's conntrack table full (the service table's NAT
//! hooks track everything there) and health probes without a connection. Now an evicted
//! connection is held open until its head deadline and the daemon's own port on loopback is
//! not tracked; this test holds the churn, the conntrack entries of the port and every probe
//! to their bounds, with the service controller on so that conntrack is active.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::daemon::{Daemon, Options};
use crate::common::shell::sh;

const PORT: u16 = 9750;
const CLIENTS: usize = 2000;
const SOURCES: usize = 100;
/// How long the flood runs.
const WINDOW: Duration = Duration::from_secs(12);
/// A probe's deadline, connection and answer together (the prober: 2 s).
const PROBE_DEADLINE: Duration = Duration::from_secs(2);

fn figures_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("http_idle_flood-figures.txt")
}

/// Prints a figure and keeps it for the parent (a passing child's output is shown to no one).
fn figure(line: String) {
    println!("{line}");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(figures_path())
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

fn config() -> String {
    format!(
        "[daemon]\nlisten = \"0.0.0.0:{PORT}\"\n[controller.policy]\nenabled = false\n\
         [controller.route]\nenabled = false\n\n\
         [[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = 80\n\
         backends = [\"10.244.0.2:8080\"]\n"
    )
}

/// The loopback address of source `i` (127/8 is all on `lo`: nothing to add, and loopback
/// sources are trusted, so the flood competes with the probes for the same slots).
fn source(i: usize) -> SocketAddr {
    format!("127.0.1.{}:{PORT}", i % SOURCES + 1)
        .parse()
        .unwrap()
}

/// Connects to the daemon from `addr` (the destination is the source, as the address is ours).
fn connect(addr: &SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect_timeout(addr, Duration::from_secs(1)).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

/// Whether the server closed `s` (an idle client never reads anything else).
fn is_closed(s: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        // EOF; or bytes, which the daemon never sends before a request: gone either way.
        Ok(0 | 1..) => true,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// Ten threads of 200 idle clients each; a client closed by the server reconnects at once.
/// Returns the connections made (the first 2,000 included).
fn idle_flood(stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let made = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..10)
            .map(|w| {
                let (stop, made) = (Arc::clone(&stop), Arc::clone(&made));
                thread::spawn(move || {
                    let addrs: Vec<SocketAddr> =
                        (0..CLIENTS / 10).map(|i| source(w * 200 + i)).collect();
                    let mut conns: Vec<Option<TcpStream>> = addrs.iter().map(connect).collect();
                    made.fetch_add(conns.iter().flatten().count() as u64, Ordering::Relaxed);
                    while !stop.load(Ordering::Relaxed) {
                        for (conn, addr) in conns.iter_mut().zip(&addrs) {
                            if conn.as_mut().is_none_or(is_closed) {
                                *conn = connect(addr);
                                made.fetch_add(u64::from(conn.is_some()), Ordering::Relaxed);
                            }
                        }
                        thread::sleep(Duration::from_millis(5));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        made.load(Ordering::Relaxed)
    })
}

/// One GET /healthz from 127.0.0.1 within [`PROBE_DEADLINE`]: Ok(latency) or why not.
fn probe() -> Result<Duration, String> {
    let t = Instant::now();
    let addr: SocketAddr = format!("127.0.0.1:{PORT}").parse().unwrap();
    let mut s = TcpStream::connect_timeout(&addr, PROBE_DEADLINE).map_err(|e| e.to_string())?;
    let left = PROBE_DEADLINE
        .saturating_sub(t.elapsed())
        .max(Duration::from_millis(1));
    s.set_read_timeout(Some(left)).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    if !answer.starts_with("HTTP/1.1 200 ") {
        return Err(format!("answer {:?}", answer.lines().next()));
    }
    let took = t.elapsed();
    if took > PROBE_DEADLINE {
        return Err(format!("answered after {took:?}"));
    }
    Ok(took)
}

/// Conntrack entries of `port` in this namespace.
fn conntrack_entries(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/nf_conntrack").unwrap_or_default();
    let port = format!("port={port} ");
    table.lines().filter(|l| l.contains(&port)).count()
}

/// A loopback connection to another port is tracked: the namespace's conntrack is active and
/// read, so no entry for the daemon's port means the exemption works, not a blind reader.
fn conntrack_is_active() {
    let other = std::net::TcpListener::bind("127.0.0.1:9751").unwrap();
    let _client = TcpStream::connect("127.0.0.1:9751").unwrap();
    let _server = other.accept().unwrap();
    assert!(
        conntrack_entries(9751) >= 1,
        "no conntrack entry for a loopback connection beside the daemon's port"
    );
}

#[test]
fn idle_floods_do_not_multiply_into_connection_churn() {
    let _one = super::ONE_FLOOD_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let in_child = crate::common::netns::in_child();
    if !in_child {
        let _ = std::fs::remove_file(figures_path());
    }
    let name = crate::common::netns::test_path(
        module_path!(),
        "idle_floods_do_not_multiply_into_connection_churn",
    );
    crate::common::netns::run_isolated(&name, idle_flood_in_a_namespace);
    if !in_child {
        print!(
            "{}",
            std::fs::read_to_string(figures_path()).unwrap_or_default()
        );
    }
}

fn idle_flood_in_a_namespace() {
    super::raise_fd_limit(16_384);
    let opts = Options {
        listen: "0.0.0.0:9750",
        ..Options::default()
    };
    let mut d = Daemon::start_with("idle-flood", &config(), opts);
    d.wait_ready();
    let tables = sh("nft list tables");
    assert!(
        tables.contains("edgenetd-service"),
        "the service table (with its NAT hooks, so conntrack is active): {tables}"
    );
    let table = sh("nft list table inet edgenetd-service");
    assert!(
        table.contains("oifname \"lo\"") && table.contains("notrack"),
        "the loopback exemption of the daemon's port: {table}"
    );
    conntrack_is_active();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = idle_flood(Arc::clone(&stop));
    let started = Instant::now();
    let (mut latencies, mut failures, mut peak_ct) = (Vec::new(), Vec::new(), 0);
    while started.elapsed() < WINDOW {
        match probe() {
            Ok(took) => latencies.push(took),
            Err(why) => failures.push(format!("at {:?}: {why}", started.elapsed())),
        }
        peak_ct = peak_ct.max(conntrack_entries(PORT));
        thread::sleep(Duration::from_millis(40));
    }
    stop.store(true, Ordering::Relaxed);
    let made = flood.join().unwrap();
    let elapsed = started.elapsed();
    latencies.sort();
    let worst = latencies.last().copied().unwrap_or_default();
    figure(format!(
        "{CLIENTS} idle clients from {SOURCES} sources for {elapsed:?}: {made} connections \
         (before the fix: ~291,931 in 20 s), conntrack entries of port {PORT} at most \
         {peak_ct}; probes: {} answered, {} failed, slowest {worst:?}",
        latencies.len(),
        failures.len(),
    ));
    assert!(
        failures.is_empty(),
        "probes without an answer in 2 s: {failures:?}"
    );
    assert!(
        latencies.len() >= 100,
        "the prober ran ({} probes)",
        latencies.len()
    );
    // Each client is closed once per head deadline (5 s) at most: 2,000 + 2,000 x 12 / 5
    // = 6,800; the bound leaves room for slow scheduling and is 10x below the old rate.
    let bound = (CLIENTS as u64) * (2 + elapsed.as_secs() / 5) + 2000;
    assert!(
        made <= bound,
        "{made} connections in {elapsed:?} (bound {bound})"
    );
    assert!(
        peak_ct <= 64,
        "conntrack entries of the daemon's port on loopback: {peak_ct}"
    );
    let cfg = d.dir().join("edgenetd.toml");
    d.stop();
    // The exemption lives in the service table, so `cleanup` takes it with the table.
    let run = crate::common::bin::edgenetd(&["cleanup", "--config", cfg.to_str().unwrap()]);
    assert!(run.ok(), "cleanup: {} {}", run.stdout, run.stderr);
    let left = sh("nft list ruleset");
    assert!(
        !left.contains("notrack"),
        "cleanup left the exemption: {left}"
    );
    drop(d);
}
