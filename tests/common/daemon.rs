//! Runs the real `edgenetd` binary with a real systemd notify socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running daemon, its config directory and the notify socket it reports to.
pub struct Daemon {
    /// The daemon process.
    pub child: Child,
    /// Directory holding edgenetd.toml (and conf.d/).
    pub dir: PathBuf,
    /// The socket bound as NOTIFY_SOCKET.
    pub notify: UnixDatagram,
    /// Every notify message received so far, in order.
    pub messages: Vec<String>,
    /// HTTP base URL.
    pub url: String,
}

/// A scratch directory unique to this process and tag.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("edgenetd-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Daemon {
    /// Starts `edgenetd run` on `config` (written to a fresh directory). `listen` must match
    /// the config's `[daemon] listen`.
    pub fn start(tag: &str, config: &str, listen: &str, watchdog_usec: Option<u64>) -> Daemon {
        Self::start_with(tag, config, listen, watchdog_usec, &[])
    }

    /// Like [`Daemon::start`] with extra arguments for `edgenetd run`.
    pub fn start_with(
        tag: &str,
        config: &str,
        listen: &str,
        watchdog_usec: Option<u64>,
        extra: &[&str],
    ) -> Daemon {
        let dir = scratch_dir(tag);
        std::fs::write(dir.join("edgenetd.toml"), config).unwrap();
        let sock_path = dir.join("notify.sock");
        let notify = UnixDatagram::bind(&sock_path).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgenetd"));
        cmd.arg("run")
            .arg("--config")
            .arg(dir.join("edgenetd.toml"))
            .args(extra);
        cmd.env("NOTIFY_SOCKET", &sock_path)
            .env("EDGENETD_LOG", "debug")
            .stdin(Stdio::null());
        cmd.env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM");
        if let Some(usec) = watchdog_usec {
            cmd.env("WATCHDOG_USEC", usec.to_string());
        }
        let log = std::fs::File::create(dir.join("stderr.log")).unwrap();
        cmd.stderr(log);
        let child = cmd.spawn().expect("spawn edgenetd");
        Daemon {
            child,
            dir,
            notify,
            messages: Vec::new(),
            url: format!("http://{listen}"),
        }
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.notify.recv(&mut buf) {
            self.messages
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }

    /// Waits until a notify message satisfying `pred` arrives (or was already received
    /// after index `from`); returns its index.
    pub fn wait_notify(
        &mut self,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.messages.iter().skip(from).position(|m| pred(m)) {
                return Some(from + i);
            }
            if Instant::now() > deadline {
                return None;
            }
            self.drain();
        }
    }

    /// Collects notify messages for `dur` and returns how many satisfy `pred` in that time.
    pub fn count_notify_for(&mut self, dur: Duration, pred: impl Fn(&str) -> bool) -> usize {
        self.drain();
        let from = self.messages.len();
        let deadline = Instant::now() + dur;
        while Instant::now() < deadline {
            self.drain();
        }
        self.messages[from..].iter().filter(|m| pred(m)).count()
    }

    /// GET a path; (status, body). Retries connection errors for up to 5 s (start-up).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.url, path)
    }

    /// The value of one metric line (exact name with labels), if present.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics");
        body.lines().find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .map(|v| v.trim().parse().unwrap())
        })
    }

    /// Sends a signal to the daemon.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Waits for the process to exit; None on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// Rewrites the main config file.
    pub fn write_config(&self, config: &str) {
        std::fs::write(self.dir.join("edgenetd.toml"), config).unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A minimal HTTP/1.0 GET; retries connection errors for up to 5 s.
pub fn http_get(base: &str, path: &str) -> (u16, String) {
    let authority = base.trim_start_matches("http://");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(authority) {
            Ok(mut s) => {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
                let mut raw = String::new();
                s.read_to_string(&mut raw).unwrap();
                let (head, body) = raw.split_once("\r\n\r\n").expect("HTTP answer");
                let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                return (status, body.to_string());
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("cannot connect to {authority}: {e}"),
        }
    }
}
