//! A real Prometheus server (the `prometheus` Debian package, which brings promtool too)
//! scraping the test's daemon every second, inside the test's network namespace; killed on
//! drop. Queries go through its HTTP API.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::http;
use crate::common::scratch::ScratchDir;
use crate::common::wait::wait_until;

/// Where the server listens (inside the test's namespace).
const LISTEN: &str = "127.0.0.1:9090";

/// A running Prometheus.
pub struct Prometheus {
    /// The server process.
    child: Child,
    /// Its configuration and TSDB; removed after the process is gone.
    dir: ScratchDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (host:port) as job `job` every second; returns once
    /// it has `samples` scrapes of `up` stored. `None` when the binary is not installed.
    pub fn start(job: &str, target: &str, samples: u32) -> Option<Prometheus> {
        let dir = ScratchDir::new("prometheus");
        dir.write(
            "prometheus.yml",
            &format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        );
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={LISTEN}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .ok()?;
        let p = Prometheus { child, dir };
        let enough = format!("count_over_time(up{{job=\"{job}\"}}[1m]) >= {samples}");
        wait_until(
            "Prometheus to store its scrapes",
            Duration::from_secs(30),
            || {
                http::try_get(&format!("http://{LISTEN}"), &query_path(&enough))
                    .ok()
                    .filter(|(status, _)| *status == 200)
                    .is_some_and(|(_, body)| !result(&body).is_empty())
            },
        );
        Some(p)
    }

    /// The instant vector (or scalar, as one sample) `expr` evaluates to now; panics with
    /// Prometheus's error when it refuses the query.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let (status, body) = http::get(&format!("http://{LISTEN}"), &query_path(expr));
        assert_eq!(status, 200, "Prometheus refused {expr:?}: {body}");
        result(&body)
    }

    /// What Prometheus logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn query_path(expr: &str) -> String {
    format!("/api/v1/query?query={}", percent_encode(expr))
}

/// The samples of an API answer: a vector's elements, or a scalar as one element.
fn result(body: &str) -> Vec<Value> {
    let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let data = &answer["data"];
    match data["resultType"].as_str() {
        Some("scalar") => vec![data["result"].clone()],
        _ => data["result"].as_array().cloned().unwrap_or_default(),
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
