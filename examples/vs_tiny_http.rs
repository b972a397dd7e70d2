//! edgenetd's HTTP server against tiny_http 0.12 (the crate the design first named), under the
//! clients that matter on a router: one huge header line, slow clients under a task limit, a
//! health probe arriving in a burst of slow clients, and running out of file descriptors.
//!
//! Everything happens in a throwaway network namespace (the program re-executes itself under
//! `unshare --net`), on 127.0.0.1 only. Each server runs in a child process as `nobody`
//! (root is exempt from RLIMIT_NPROC) under `prlimit`, so an abort ends the child, never the
//! bench; every child is killed at the end of its scenario, and every client has a timeout.
//! Prints one row per scenario, both servers side by side.
//!
//! Run: `scripts/bench-tiny-http.sh` (release build, the profile edgenetd ships with:
//! `panic = "abort"`).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD: &str = "EDGENETD_VS_CHILD";
const PORT: u16 = 9780;
/// The huge header line, in MiB.
const HUGE_MIB: usize = 300;
/// Slow clients opened against the task limit.
const SLOW_UNDER_NPROC: usize = 100;
/// The task limit (threads count as tasks).
const NPROC: u32 = 64;
/// Burst trials, and slow clients per burst.
const BURST_TRIALS: usize = 10;
const BURST_SLOW: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tiny,
    Edgenetd,
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::Tiny => "tiny",
            Kind::Edgenetd => "edgenetd",
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        return serve(&args[2]);
    }
    if std::env::var_os(CHILD).is_none() {
        let exe = std::env::current_exe().expect("own path");
        let status = Command::new("unshare")
            .arg("--net")
            .arg(exe)
            .env(CHILD, "1")
            .status();
        return match status {
            Ok(s) if s.success() => ExitCode::SUCCESS,
            Ok(s) => {
                eprintln!("bench failed: {s}");
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("cannot run unshare --net (needs root): {e}");
                ExitCode::FAILURE
            }
        };
    }
    sh("ip link set lo up");
    let exe = copy_for_nobody();
    let rows = [
        huge_header(&exe),
        slow_under_nproc(&exe),
        probe_in_burst(&exe),
        fd_exhaustion(&exe, 32),
        fd_exhaustion(&exe, 33),
    ];
    for (what, tiny, ours) in rows {
        println!("{what}\n  tiny_http 0.12.0: {tiny}\n  edgenetd:         {ours}");
    }
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    ExitCode::SUCCESS
}

/// The server half: `serve tiny|edgenetd` on 127.0.0.1:PORT until killed.
fn serve(kind: &str) -> ExitCode {
    let addr = SocketAddr::from(([127, 0, 0, 1], PORT));
    if kind == "tiny" {
        let server = tiny_http::Server::http(addr).expect("bind");
        loop {
            match server.recv() {
                Ok(rq) => {
                    let _ = rq.respond(tiny_http::Response::from_string("ok\n"));
                }
                Err(e) => eprintln!("recv: {e}"),
            }
        }
    }
    use edgenetd::clock::SystemClock;
    use edgenetd::http::{HttpState, bind, serve};
    use edgenetd::liveness::Liveness;
    let state = HttpState {
        liveness: Liveness::new(Arc::new(SystemClock)),
        exporter: None,
        allow: None,
        sections: Default::default(),
        health_ports: Default::default(),
    };
    serve(bind(addr).expect("bind"), Arc::new(state)).expect("serve");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn sh(cmd: &str) {
    let ok = Command::new("sh").arg("-c").arg(cmd).status();
    assert!(ok.is_ok_and(|s| s.success()), "{cmd}");
}

/// A copy of this program `nobody` can execute (the build directory may not be reachable).
fn copy_for_nobody() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vs-tiny-http.{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("vs_tiny_http");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    sh(&format!("chmod 755 {} {}", dir.display(), exe.display()));
    exe
}

/// A server child running as `nobody` under `prlimit limits`, up and accepting.
struct Server {
    /// The child (same pid through setpriv and prlimit, which exec).
    child: Child,
}

impl Server {
    fn start(exe: &std::path::Path, kind: Kind, limits: &[String]) -> Server {
        let child = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg("prlimit")
            .args(limits)
            .arg("--")
            .arg(exe)
            .args(["serve", kind.arg()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("setpriv/prlimit");
        let until = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", PORT)).is_err() {
            assert!(Instant::now() < until, "server did not come up");
            std::thread::sleep(Duration::from_millis(10));
        }
        Server { child }
    }

    /// Peak resident memory (VmHWM), MiB.
    fn peak_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    /// None while running, else how it ended and the last line it wrote to stderr.
    fn ended(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        let mut err = String::new();
        let _ = self.child.stderr.take()?.read_to_string(&mut err);
        Some(format!("{status}: {}", last_words(&err)))
    }

    /// Kills the child; the last line it wrote to stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = pipe.read_to_string(&mut err);
        }
        last_words(&err)
    }
}

/// What a child said last: a panic's message and place if it panicked, else its last line.
fn last_words(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let said = match lines.iter().position(|l| l.contains("panicked at")) {
        Some(i) => {
            let place = lines[i].split("panicked at ").nth(1).unwrap_or("");
            let place = place.rsplit("/src/").next().unwrap_or(place);
            format!("panic at {place} {}", lines.get(i + 1).unwrap_or(&""))
        }
        None => lines.last().unwrap_or(&"").to_string(),
    };
    said.chars().take(110).collect()
}

/// One GET /livez: time to the status line, or None (no answer within `timeout`).
fn probe(timeout: Duration) -> Option<Duration> {
    let t = Instant::now();
    let addr = SocketAddr::from(([127, 0, 0, 1], PORT));
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.windows(2).any(|w| w == b"\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got.starts_with(b"HTTP/1.").then(|| t.elapsed())
}

/// A connection that sent half a request head and then nothing.
fn slow_client() -> Option<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", PORT)).ok()?;
    s.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .ok()?;
    Some(s)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

type Row = (String, String, String);

fn both(what: String, run: impl Fn(Kind) -> String) -> Row {
    (what, run(Kind::Tiny), run(Kind::Edgenetd))
}

/// One header line of HUGE_MIB: how much the server reads, its answer, its peak memory.
fn huge_header(exe: &std::path::Path) -> Row {
    both(format!("one {HUGE_MIB} MiB header line"), |kind| {
        let server = Server::start(exe, kind, &[]);
        let mut s = TcpStream::connect(("127.0.0.1", PORT)).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Huge: ");
        let chunk = vec![b'a'; 1 << 20];
        let mut sent = 0;
        while sent < HUGE_MIB && s.write_all(&chunk).is_ok() {
            sent += 1;
        }
        let _ = s.write_all(b"\r\n\r\n");
        let _ = s.shutdown(Shutdown::Write);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let status = String::from_utf8_lossy(answer.get(9..12).unwrap_or(b"none")).into_owned();
        let peak = server.peak_mib();
        let _ = server.stop();
        format!("peak RSS {peak:.1} MiB; client got {sent} MiB in; answer {status}")
    })
}

/// SLOW_UNDER_NPROC slow clients, one after another, under `prlimit --nproc=NPROC`.
fn slow_under_nproc(exe: &std::path::Path) -> Row {
    let what = format!("{SLOW_UNDER_NPROC} slow clients, --nproc={NPROC} (as nobody)");
    both(what, |kind| {
        let limits = [format!("--nproc={NPROC}")];
        let mut server = Server::start(exe, kind, &limits);
        let mut held = Vec::new();
        for i in 1..=SLOW_UNDER_NPROC {
            held.extend(slow_client());
            std::thread::sleep(Duration::from_millis(5));
            if let Some(end) = server.ended() {
                return format!("died at slow client {i}: {end}");
            }
        }
        let answer = probe(Duration::from_secs(2));
        let _ = server.stop();
        match answer {
            Some(t) => format!("alive; probe answered in {}", ms(t)),
            None => "alive; probe unanswered after 2 s".into(),
        }
    })
}

/// A probe right behind a burst of BURST_SLOW slow clients, on a fresh server each trial.
fn probe_in_burst(exe: &std::path::Path) -> Row {
    let what = format!("probe behind {BURST_SLOW} slow clients, {BURST_TRIALS} trials");
    both(what, |kind| {
        let (mut answered, mut worst) = (0, Duration::ZERO);
        for _ in 0..BURST_TRIALS {
            let server = Server::start(exe, kind, &[]);
            let held: Vec<TcpStream> = (0..BURST_SLOW).filter_map(|_| slow_client()).collect();
            if let Some(t) = probe(Duration::from_secs(2)) {
                answered += 1;
                worst = worst.max(t);
            }
            drop(held);
            let _ = server.stop();
        }
        format!(
            "answered {answered}/{BURST_TRIALS} (2 s timeout), slowest {}",
            ms(worst)
        )
    })
}

/// Slow clients until the fd limit, then all of them gone: does the server still answer?
fn fd_exhaustion(exe: &std::path::Path, nofile: u32) -> Row {
    let what = format!("60 slow clients, --nofile={nofile}, then closed");
    both(what, |kind| {
        let mut server = Server::start(exe, kind, &[format!("--nofile={nofile}")]);
        let mut held = Vec::new();
        for i in 1..=60 {
            held.extend(slow_client());
            std::thread::sleep(Duration::from_millis(5));
            if let Some(end) = server.ended() {
                return format!("died at slow client {i}: {end}");
            }
        }
        drop(held);
        std::thread::sleep(Duration::from_millis(300));
        let answer = probe(Duration::from_secs(2));
        if let Some(end) = server.ended() {
            return format!("exited: {end}");
        }
        let said = server.stop();
        match answer {
            Some(t) => format!("alive; then answered in {}", ms(t)),
            None => format!("alive; then no answer; said {said:?}"),
        }
    })
}
