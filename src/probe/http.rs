//! The HTTP a probe needs: one `GET` over HTTP/1.0, and the status code of its answer.

use std::net::IpAddr;

/// The request of an `http` check (`Connection: close`: one answer, then the server closes).
pub fn request(path: &str, host: IpAddr) -> String {
    format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: edgenetd\r\nConnection: close\r\n\r\n"
    )
}

/// The status code of an HTTP response head (`HTTP/1.x 200 ...`).
pub fn parse_status(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head).ok()?;
    let mut parts = text.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.0 200 OK\r\n"), Some(200));
        assert_eq!(parse_status(b"HTTP/1.1 503 Service"), Some(503));
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH"), None);
        assert_eq!(parse_status(b""), None);
    }
}
