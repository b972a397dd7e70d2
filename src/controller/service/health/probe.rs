//! One check of one backend: `Ok` when it answers as the check expects, else the reason in a
//! few words (`refused`, `timeout`, `status 503`, ...) for the transition's log line.
//!
//! The TLS check needs no TLS library: it sends a ClientHello (offering TLS 1.3 and 1.2) and
//! is satisfied by a ServerHello record. It proves a TLS server is answering on the port; it
//! does not verify the certificate nor finish the handshake.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};

use crate::config::service::HealthCheckKind;

/// Runs one check of `backend`, at most `timeout` long.
pub async fn check(
    backend: SocketAddr,
    kind: &HealthCheckKind,
    timeout: Duration,
) -> Result<(), String> {
    #[cfg(feature = "fault-injection")]
    if let HealthCheckKind::Http { path, .. } = kind
        && path.starts_with("/fault-hang")
    {
        // Fault-injection builds: a probe that never returns, past its own timeout (the
        // probe watch's test).
        return std::future::pending().await;
    }
    let attempt = async {
        match kind {
            HealthCheckKind::None => Ok(()),
            HealthCheckKind::Tcp => connect(backend).await.map(drop),
            HealthCheckKind::Http { path, expect } => http(backend, path, *expect).await,
            HealthCheckKind::Udp { send, expect } => udp(backend, send, expect.as_deref()).await,
            HealthCheckKind::Dns { query_name } => dns(backend, query_name).await,
            HealthCheckKind::Tls { sni } => tls(backend, sni.as_deref()).await,
        }
    };
    let timed_out = async {
        smol::Timer::after(timeout).await;
        Err("timeout".to_string())
    };
    attempt.or(timed_out).await
}

/// A random number (std's per-instance hasher keys come from the OS's random source).
pub fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// An I/O error in a few words.
fn reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "refused".into(),
        io::ErrorKind::ConnectionReset => "reset".into(),
        _ => match e.raw_os_error() {
            Some(libc::EHOSTUNREACH) => "host unreachable".into(),
            Some(libc::ENETUNREACH) => "network unreachable".into(),
            _ => e.to_string(),
        },
    }
}

async fn connect(backend: SocketAddr) -> Result<smol::net::TcpStream, String> {
    smol::net::TcpStream::connect(backend)
        .await
        .map_err(|e| reason(&e))
}

async fn http(backend: SocketAddr, path: &str, expect: (u16, u16)) -> Result<(), String> {
    let mut stream = connect(backend).await?;
    let host = backend.ip();
    let req = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: edgenetd\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| reason(&e))?;
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < 12 {
        let m = stream.read(&mut head[n..]).await.map_err(|e| reason(&e))?;
        if m == 0 {
            break;
        }
        n += m;
    }
    match parse_status(&head[..n]) {
        Some(s) if s >= expect.0 && s <= expect.1 => Ok(()),
        Some(s) => Err(format!("status {s}")),
        None => Err("no HTTP status line".into()),
    }
}

/// The status code of an HTTP response head (`HTTP/1.x 200 ...`).
pub fn parse_status(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head).ok()?;
    let mut parts = text.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

/// A UDP socket connected to `backend` (so an ICMP port unreachable reads as `refused`).
async fn udp_socket(backend: SocketAddr) -> Result<smol::net::UdpSocket, String> {
    let any: SocketAddr = if backend.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = smol::net::UdpSocket::bind(any)
        .await
        .map_err(|e| reason(&e))?;
    s.connect(backend).await.map_err(|e| reason(&e))?;
    Ok(s)
}

async fn udp(backend: SocketAddr, send: &[u8], expect: Option<&[u8]>) -> Result<(), String> {
    let s = udp_socket(backend).await?;
    s.send(send).await.map_err(|e| reason(&e))?;
    let mut buf = [0u8; 2048];
    let n = s.recv(&mut buf).await.map_err(|e| reason(&e))?;
    match expect {
        Some(e) if !buf[..n].starts_with(e) => Err("unexpected reply".into()),
        _ => Ok(()),
    }
}

async fn dns(backend: SocketAddr, name: &str) -> Result<(), String> {
    let s = udp_socket(backend).await?;
    let id = random() as u16;
    s.send(&dns_query(id, name)).await.map_err(|e| reason(&e))?;
    let mut buf = [0u8; 4096];
    loop {
        let n = s.recv(&mut buf).await.map_err(|e| reason(&e))?;
        // A reply to someone else's query (another ID, or not a response) is not ours.
        match dns_rcode(&buf[..n], id) {
            Some(0) => return Ok(()),
            Some(rcode) => return Err(format!("DNS rcode {rcode}")),
            None => continue,
        }
    }
}

/// A recursive query for `name`, type A, class IN.
pub fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The RCODE of a response to query `id`; None when `reply` is not one.
pub fn dns_rcode(reply: &[u8], id: u16) -> Option<u8> {
    let head = reply.get(..12)?;
    let is_response = head[2] & 0x80 != 0;
    (u16::from_be_bytes([head[0], head[1]]) == id && is_response).then_some(head[3] & 0x0f)
}

async fn tls(backend: SocketAddr, sni: Option<&str>) -> Result<(), String> {
    let mut stream = connect(backend).await?;
    stream
        .write_all(&client_hello(sni))
        .await
        .map_err(|e| reason(&e))?;
    let mut head = [0u8; 7];
    let mut n = 0;
    while n < head.len() {
        let m = stream.read(&mut head[n..]).await.map_err(|e| reason(&e))?;
        if m == 0 {
            break;
        }
        n += m;
    }
    server_hello(&head[..n])
}

/// Whether the first bytes of the server's answer are a ServerHello record.
pub fn server_hello(head: &[u8]) -> Result<(), String> {
    match head {
        [0x16, 0x03, _, _, _, 0x02, ..] => Ok(()),
        [0x15, 0x03, _, _, _, _, desc] => Err(format!("TLS alert {desc}")),
        [] => Err("closed without an answer".into()),
        _ => Err("not a TLS ServerHello".into()),
    }
}

/// A ClientHello offering TLS 1.3 (an X25519 key share of random bytes: the handshake is
/// never finished) and TLS 1.2, with the suites and extensions common servers expect.
pub fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let mut list = vec![0u8];
        push_u16_bytes(&mut list, n);
        let mut data = Vec::new();
        push_u16_bytes(&mut data, &list);
        ext(&mut exts, 0x0000, &data);
    }
    ext(
        &mut exts,
        0x000a,
        &[0, 6, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18],
    );
    ext(&mut exts, 0x000b, &[1, 0]);
    let sigs: [u16; 9] = [
        0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0807,
    ];
    let mut sig = vec![0u8, (sigs.len() * 2) as u8];
    sigs.iter()
        .for_each(|s| sig.extend_from_slice(&s.to_be_bytes()));
    ext(&mut exts, 0x000d, &sig);
    ext(&mut exts, 0x0017, &[]);
    ext(&mut exts, 0xff01, &[0]);
    ext(&mut exts, 0x002b, &[4, 0x03, 0x04, 0x03, 0x03]);
    let mut share = vec![0x00, 0x1d, 0, 32];
    share.extend_from_slice(&random_bytes::<32>());
    let mut shares = Vec::new();
    push_u16_bytes(&mut shares, &share);
    ext(&mut exts, 0x0033, &shares);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&random_bytes::<32>());
    body.push(32);
    body.extend_from_slice(&random_bytes::<32>());
    let suites: [u16; 11] = [
        0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0x009c, 0x002f,
    ];
    let mut s = Vec::new();
    suites
        .iter()
        .for_each(|c| s.extend_from_slice(&c.to_be_bytes()));
    push_u16_bytes(&mut body, &s);
    body.extend_from_slice(&[1, 0]);
    push_u16_bytes(&mut body, &exts);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    push_u16_bytes(&mut record, &hs);
    record
}

fn ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    push_u16_bytes(out, data);
}

/// `data` preceded by its length as two bytes.
fn push_u16_bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    for chunk in b.chunks_mut(8) {
        let r = random().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    b
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

    #[test]
    fn dns_query_and_rcode() {
        let q = dns_query(0x1234, "example.com.");
        assert_eq!(
            q,
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
        );
        let mut reply = q.clone();
        reply[2] |= 0x80;
        assert_eq!(dns_rcode(&reply, 0x1234), Some(0));
        reply[3] = 0x83;
        assert_eq!(dns_rcode(&reply, 0x1234), Some(3));
        assert_eq!(dns_rcode(&reply, 0x1235), None, "another query's answer");
        assert_eq!(dns_rcode(&q, 0x1234), None, "a query is not an answer");
    }

    #[test]
    fn client_hello_lengths_are_consistent() {
        let h = client_hello(Some("www.example.com"));
        assert_eq!(&h[..3], &[0x16, 0x03, 0x01]);
        assert_eq!(u16::from_be_bytes([h[3], h[4]]) as usize, h.len() - 5);
        assert_eq!(h[5], 0x01);
        let hs_len = u32::from_be_bytes([0, h[6], h[7], h[8]]) as usize;
        assert_eq!(hs_len, h.len() - 9);
        assert!(h.windows(15).any(|w| w == b"www.example.com"));
        assert!(server_hello(&[0x16, 0x03, 0x03, 0, 90, 0x02, 0]).is_ok());
        assert_eq!(
            server_hello(&[0x15, 0x03, 0x03, 0, 2, 2, 70]),
            Err("TLS alert 70".into())
        );
    }
}
