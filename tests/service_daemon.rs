//! The service controller inside the real daemon, in a fresh network namespace: the table
//! appears with the config's services, the gauges follow, a reload changes only what
//! changed, a table deleted by hand is restored within seconds (foreign-commit watch), and
//! /healthz reports the controller.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::sh;

struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    fn start(config: &str) -> Daemon {
        let dir = std::env::temp_dir().join(format!("edgenetd-service-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("edgenetd.toml"), config).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_edgenetd"))
            .args(["run", "--config"])
            .arg(dir.join("edgenetd.toml"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start edgenetd");
        let d = Daemon { child, dir };
        wait_for("the HTTP endpoint", || http_get("/metrics").is_some());
        d
    }

    fn reload(&self, config: &str) {
        let tmp = self.dir.join("next.tmp");
        std::fs::write(&tmp, config).unwrap();
        std::fs::rename(tmp, self.dir.join("edgenetd.toml")).unwrap();
        sh(&format!("kill -HUP {}", self.child.id()));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn http_get(path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect("127.0.0.1:9750").ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

fn metric(name: &str) -> Option<f64> {
    let (_, body) = http_get("/metrics")?;
    body.lines()
        .find(|l| l.split([' ', '{']).next() == Some(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const CONFIG: &str = r#"
[controller.policy]
enabled = false
[controller.route]
enabled = false

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:53"]
"#;

fn table() -> String {
    common::netns::sh_status("nft list table inet edgenetd-service").1
}

netns_test! {
    fn the_daemon_programs_services_reloads_and_repairs() {
        let d = Daemon::start(CONFIG);
        wait_for("the service table", || table().contains("10.96.0.53 . udp . 53"));
        wait_for("the gauges", || metric("edgenetd_services") == Some(2.0));
        assert_eq!(metric("edgenetd_service_backends"), Some(3.0));
        assert_eq!(metric("edgenetd_service_drift_repairs_total"), Some(0.0));
        let (status, body) = http_get("/healthz").unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"service\""), "{body}");
        // A reload that swaps one backend.
        d.reload(&CONFIG.replace("10.0.2.2:8080", "10.0.3.2:8080"));
        wait_for("the new backend", || table().contains("10.0.3.2 . 8080"));
        assert!(!table().contains("10.0.2.2 . 8080"));
        // Deleted by hand: back within seconds, counted.
        sh("nft delete table inet edgenetd-service");
        wait_for("the restored table", || table().contains("10.0.3.2 . 8080"));
        wait_for("the drift counter", || {
            metric("edgenetd_service_drift_repairs_total").is_some_and(|v| v >= 1.0)
        });
        // No services left: no table.
        d.reload("[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n");
        wait_for("the table to go", || !sh("nft list tables").contains("edgenetd-service"));
        wait_for("the gauges", || metric("edgenetd_services") == Some(0.0));
    }
}
