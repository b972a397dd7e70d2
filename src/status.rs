//! `edgenetd status`: reads a running daemon's /healthz and prints it as a table.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

/// Fetches `url` (http://host:port/path) with a plain HTTP/1.0 GET; returns (status, body).
pub fn http_get(url: &str) -> Result<(u16, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("unsupported URL `{url}`: expected http://host:port/path"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {authority}"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("cannot send request: {e}"))?;
    let mut raw = String::new();
    stream
        .read_to_string(&mut raw)
        .map_err(|e| format!("cannot read answer: {e}"))?;
    let (head, body) = raw.split_once("\r\n\r\n").ok_or("malformed HTTP answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}

/// Renders the /healthz document as a table.
pub fn render(doc: &Value) -> String {
    let mut out = String::new();
    let verdict = |b: &Value| {
        if b.as_bool() == Some(true) {
            "yes"
        } else {
            "NO"
        }
    };
    out.push_str(&format!(
        "live: {}   ready: {}   last updated: {}   now: {}\n\n",
        verdict(&doc["live"]),
        verdict(&doc["ready"]),
        doc["lastUpdated"].as_str().unwrap_or("-"),
        doc["currentTime"].as_str().unwrap_or("-"),
    ));
    let header = [
        "CONTROLLER",
        "LIVE",
        "LAST BEAT",
        "WINDOW",
        "LAST SUCCESS",
        "SYNCS",
        "FAILED",
        "LAST ERROR",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    if let Some(map) = doc["controllers"].as_object() {
        for (name, c) in map {
            rows.push(vec![
                name.clone(),
                verdict(&c["live"]).to_string(),
                format!("{:.1}s ago", c["secondsSinceBeat"].as_f64().unwrap_or(0.0)),
                format!("{:.0}s", c["windowSeconds"].as_f64().unwrap_or(0.0)),
                c["lastSuccess"].as_str().unwrap_or("never").to_string(),
                c["syncs"].to_string(),
                c["failures"].to_string(),
                c["lastError"].as_str().unwrap_or("-").to_string(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == header.len() {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&confirm_lines(&doc["config"]));
    out
}

/// The confirm state of `edgenetd apply --confirm`, when there is one to show.
fn confirm_lines(config: &Value) -> String {
    let mut out = String::new();
    let pending = &config["pendingConfirm"];
    if let Some(deadline) = pending["deadline"].as_str() {
        out.push_str(&format!(
            "\nconfig from {} waits for `edgenetd confirm` until {deadline} ({:.0}s left)\n",
            pending["appliedFrom"].as_str().unwrap_or("?"),
            pending["secondsLeft"].as_f64().unwrap_or(0.0)
        ));
    }
    let rollback = &config["lastRollback"];
    if let Some(at) = rollback["at"].as_str() {
        out.push_str(&format!(
            "\nlast rollback: {at}: {}\n",
            rollback["reason"].as_str().unwrap_or("?")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_a_pending_confirm_and_the_last_rollback() {
        let doc: Value = serde_json::from_str(
            r#"{"live":true,"ready":true,"controllers":{},"config":{
            "pendingConfirm":{"deadline":"2026-11-29T23:00:30.000Z","secondsLeft":29.6,"appliedFrom":"/tmp/new.toml"},
            "lastRollback":{"at":"2026-11-29T22:00:00.000Z","reason":"/tmp/old.toml was not confirmed before its deadline"}}}"#,
        )
        .unwrap();
        let out = render(&doc);
        assert!(
            out.contains("config from /tmp/new.toml waits for `edgenetd confirm` until 2026-11-29T23:00:30.000Z (30s left)"),
            "{out}"
        );
        assert!(
            out.contains(
                "last rollback: 2026-11-29T22:00:00.000Z: /tmp/old.toml was not confirmed"
            ),
            "{out}"
        );
        let quiet: Value = serde_json::from_str(
            r#"{"controllers":{},"config":{"pendingConfirm":null,"lastRollback":null}}"#,
        )
        .unwrap();
        assert!(!render(&quiet).contains("confirm"));
    }

    #[test]
    fn renders_one_row_per_controller() {
        let doc: Value = serde_json::from_str(
            r#"{"lastUpdated":"2026-11-29T23:00:00.000Z","currentTime":"2026-11-29T23:00:01.000Z","live":true,"ready":false,
            "controllers":{"route":{"live":true,"secondsSinceBeat":1.25,"windowSeconds":60,"lastSuccess":null,"syncs":3,"failures":3,"lastError":"route 10.0.0.0/8: Network is unreachable"}}}"#,
        )
        .unwrap();
        let out = render(&doc);
        assert!(out.starts_with("live: yes   ready: NO"), "{out}");
        let row = out.lines().find(|l| l.starts_with("route")).unwrap();
        let cells: Vec<&str> = row
            .split("  ")
            .filter(|c| !c.is_empty())
            .map(str::trim)
            .collect();
        assert_eq!(
            cells,
            [
                "route",
                "yes",
                "1.2s ago",
                "60s",
                "never",
                "3",
                "3",
                "route 10.0.0.0/8: Network is unreachable"
            ]
        );
    }
}
