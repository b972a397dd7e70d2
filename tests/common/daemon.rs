//! The one handle on a running daemon: the real `edgenetd run` binary in the test's network
//! namespace, with its own config directory and a real systemd notify socket whose messages
//! are collected as they arrive.

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::http;
use super::metrics;
use super::scratch::ScratchDir;
use super::wait::{poll_for, wait_until};

/// The daemon's default `[daemon] listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9750";

/// How a daemon is started beyond its config.
pub struct Options<'a> {
    /// Must match the config's `[daemon] listen`.
    pub listen: &'a str,
    /// `WATCHDOG_USEC` to pass, as systemd would; `None` runs without a watchdog.
    pub watchdog_usec: Option<u64>,
    /// Extra arguments for `edgenetd run`.
    pub args: &'a [&'a str],
    /// The notify socket the daemon gets.
    pub notify: NotifySocket,
    /// Give the daemon a control socket and state directory in its scratch directory (where
    /// `args` names none), so that a killed daemon leaves nothing in /run or /var/lib;
    /// `false`: the paths the daemon derives for itself.
    pub scratch_control: bool,
}

/// The systemd notify socket a test daemon sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifySocket {
    /// A path; every message is read and kept.
    Read,
    /// A path nobody reads: its queue fills after a few messages (as with a service manager
    /// that stopped reading).
    Unread,
    /// An `@abstract` name; every message is read and kept.
    Abstract,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            listen: DEFAULT_LISTEN,
            watchdog_usec: None,
            args: &[],
            notify: NotifySocket::Read,
            scratch_control: true,
        }
    }
}

/// A running daemon; killed, and its directory removed, on drop.
pub struct Daemon {
    /// The daemon process.
    child: Child,
    /// Holds edgenetd.toml (and conf.d/), the notify socket and stderr.log.
    dir: ScratchDir,
    /// Every notify message received so far, in order (filled by `reader`).
    messages: Arc<Mutex<Vec<String>>>,
    /// Tells `reader` to stop.
    stop_reader: Arc<AtomicBool>,
    /// The thread that drains the notify socket (so the daemon never blocks on a full one).
    reader: Option<JoinHandle<()>>,
    /// The notify socket of [`NotifySocket::Unread`], held open and never read.
    _unread: Option<UnixDatagram>,
    /// HTTP base URL.
    url: String,
}

impl Daemon {
    /// Starts `edgenetd run` on `config` with the default listen address and no watchdog.
    pub fn start(tag: &str, config: &str) -> Daemon {
        Daemon::start_with(tag, config, Options::default())
    }

    /// Starts `edgenetd run` on `config` (written to a fresh scratch dir named after `tag`)
    /// and returns once its HTTP endpoint answers.
    pub fn start_with(tag: &str, config: &str, opts: Options<'_>) -> Daemon {
        let dir = ScratchDir::with_files(tag, &[("edgenetd.toml", config)]);
        Daemon::spawn_in(dir, tag, opts)
    }

    /// Kills this daemon (if it still runs) and starts `edgenetd run` again in the same
    /// directory, on the config files as they are now: the same main file, state directory
    /// and control socket, as systemd restarts a unit.
    pub fn start_again(mut self, tag: &str, opts: Options<'_>) -> Daemon {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stop_reader.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let dir = std::mem::replace(&mut self.dir, ScratchDir::new("moved"));
        drop(self);
        let _ = std::fs::remove_file(dir.join("notify.sock"));
        Daemon::spawn_in(dir, tag, opts)
    }

    fn spawn_in(dir: ScratchDir, tag: &str, opts: Options<'_>) -> Daemon {
        let sock_path = dir.join("notify.sock");
        let (notify, notify_env) = match opts.notify {
            NotifySocket::Read | NotifySocket::Unread => (
                UnixDatagram::bind(&sock_path).unwrap(),
                sock_path.clone().into_os_string(),
            ),
            NotifySocket::Abstract => {
                use std::os::linux::net::SocketAddrExt;
                let name = format!("edgenetd-test-{}-{tag}", std::process::id());
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
                (
                    UnixDatagram::bind_addr(&addr).unwrap(),
                    format!("@{name}").into(),
                )
            }
        };
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop_reader = Arc::new(AtomicBool::new(false));
        let (reader, unread) = if opts.notify == NotifySocket::Unread {
            (None, Some(notify))
        } else {
            let reader = spawn_reader(notify, messages.clone(), stop_reader.clone());
            (Some(reader), None)
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgenetd"));
        cmd.arg("run")
            .arg("--config")
            .arg(dir.config())
            .args(opts.args)
            .env("NOTIFY_SOCKET", &notify_env)
            .env("EDGENETD_LOG", "debug")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stderr(append(&dir.join("stderr.log")));
        for (flag, name) in [
            ("--control-socket", "control.sock"),
            ("--state-dir", "state"),
        ] {
            if opts.scratch_control && !opts.args.contains(&flag) {
                cmd.arg(flag).arg(dir.join(name));
            }
        }
        if let Some(usec) = opts.watchdog_usec {
            cmd.env("WATCHDOG_USEC", usec.to_string());
        }
        let child = cmd.spawn().expect("spawn edgenetd");
        let mut d = Daemon {
            child,
            dir,
            messages,
            stop_reader,
            reader,
            _unread: unread,
            url: format!("http://{}", opts.listen),
        };
        let what = format!("edgenetd's HTTP endpoint at {}", d.url);
        wait_until(&what, Duration::from_secs(10), || {
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("edgenetd exited at start-up ({status}):\n{}", d.log());
            }
            http::try_get(&d.url, "/livez").is_ok()
        });
        d
    }

    /// The daemon's scratch directory (config files, notify socket, stderr.log).
    pub fn dir(&self) -> &ScratchDir {
        &self.dir
    }

    /// Every notify message received so far.
    pub fn messages(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }

    /// Notify message number `i`.
    pub fn message(&self, i: usize) -> String {
        self.messages.lock().unwrap()[i].clone()
    }

    /// Waits until a notify message at index `from` or later satisfies `pred`; its index.
    pub fn wait_notify(
        &self,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<usize> {
        poll_for(timeout, || {
            let messages = self.messages.lock().unwrap();
            messages[from..]
                .iter()
                .position(|m| pred(m))
                .map(|i| from + i)
        })
    }

    /// Waits (20 s at most: a loaded 2-core builder, a debug build reading a 20 MB list) for
    /// the first `READY=1`; its index.
    pub fn wait_ready(&self) -> usize {
        self.wait_notify(0, Duration::from_secs(20), |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1: {:?}\n{}", self.messages(), self.log()))
    }

    /// How many notify messages satisfying `pred` arrive during the next `dur` (for "this
    /// keeps happening" and "this no longer happens", where the waiting is the test).
    pub fn count_notify_for(&self, dur: Duration, pred: impl Fn(&str) -> bool) -> usize {
        let from = self.messages.lock().unwrap().len();
        std::thread::sleep(dur);
        self.messages.lock().unwrap()[from..]
            .iter()
            .filter(|m| pred(m))
            .count()
    }

    /// GET a path; (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http::get(&self.url, path)
    }

    /// The value of exactly `name` with exactly `labels` in /metrics, if present.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "/metrics: {body}");
        metrics::value(&body, name, labels)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's peak and current resident memory (`VmHWM`, `VmRSS`), in KiB.
    pub fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("{key} in {status}"))
        };
        (kib("VmHWM:"), kib("VmRSS:"))
    }

    /// Sends a signal (`HUP`, `TERM`, ...) to the daemon.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{sig} failed");
    }

    /// Rewrites the main config file in place (no signal: the daemon's file watch sees it).
    pub fn write_config(&self, config: &str) {
        self.dir.write("edgenetd.toml", config);
    }

    /// Replaces the main config file atomically, as an editor saves (no signal: the daemon's
    /// file watch sees it; it never sees a half-written file).
    pub fn replace_config(&self, config: &str) {
        self.dir.replace("edgenetd.toml", config);
    }

    /// Replaces the main config file atomically and sends SIGHUP.
    pub fn reload(&self, config: &str) {
        self.dir.replace("edgenetd.toml", config);
        self.signal("HUP");
    }

    /// Waits for the process to exit; `None` on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        poll_for(timeout, || self.child.try_wait().unwrap())
    }

    /// SIGTERM, then waits (5 s at most) for the exit; its status.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("no exit within 5 s of SIGTERM:\n{}", self.log()))
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stop_reader.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        if std::thread::panicking() {
            eprintln!("--- edgenetd log ---\n{}--- end of log ---", self.log());
        }
    }
}

/// `path` opened for appending (created if missing): a daemon started again in the same
/// directory logs after the one before.
fn append(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

fn spawn_reader(
    sock: UnixDatagram,
    messages: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = sock.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                messages.lock().unwrap().push(text);
            }
        }
    })
}
