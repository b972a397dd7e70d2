//! The one HTTP client of the tests: a plain HTTP/1.0 GET, enough for the daemon's endpoints.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// GET `path` from `base` (`http://host:port`); (status, body). Panics when the server cannot
/// be reached or answers something that is not HTTP.
pub fn get(base: &str, path: &str) -> (u16, String) {
    try_get(base, path).unwrap_or_else(|e| panic!("GET {base}{path}: {e}"))
}

/// Like [`get`], but an unreachable server is an error, not a panic (for waiting on start-up).
pub fn try_get(base: &str, path: &str) -> std::io::Result<(u16, String)> {
    let authority = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(authority)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer from {base}{path}: {raw:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Ok((status, body.to_string()))
}

/// Sends `request` as is to `authority` (`host:port`) and returns the whole answer, head and
/// body, as text ("" when the server closed without answering).
pub fn exchange(authority: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(authority).unwrap_or_else(|e| panic!("{authority}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}
