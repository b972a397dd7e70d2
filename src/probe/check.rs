//! One probe of one target: `Ok` when it answers as the check expects, else the reason in a
//! few words (`refused`, `timeout`, `status 503`, `DNS rcode 2`, ...) for the caller's log
//! line and /healthz.
//!
//! - tcp: the connection completes (a refusal counts as a failure: the check is that the
//!   target serves);
//! - http: a `GET` is answered with a status in the expected range;
//! - udp: a datagram is answered, optionally with a reply starting with the expected bytes;
//! - dns: a query is answered with RCODE 0;
//! - tls: a ClientHello is answered with a ServerHello (see [`super::tls`]);
//! - icmp: an echo is answered, from an unprivileged ping socket (`net.ipv4.ping_group_range`
//!   must include the daemon's group; where it does not, every probe fails with that reason).

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt, future};
use smol::Async;

use super::{dns, http, random, socket, tls};

/// Where a probe goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The address (and port) probed; the port is ignored by `icmp`.
    pub addr: SocketAddr,
    /// The socket's `SO_MARK` (an uplink track's: its rule sends the probe through the
    /// track's own table), or none (the router's routing table decides).
    pub mark: Option<u32>,
}

/// What a probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check<'a> {
    /// The TCP connection completes.
    Tcp,
    /// `GET path` is answered with a status within `expect` (inclusive).
    Http {
        /// The request path.
        path: &'a str,
        /// The lowest and highest status that count as up.
        expect: (u16, u16),
    },
    /// `send` is answered; with `expect`, by a reply starting with those bytes.
    Udp {
        /// The datagram sent.
        send: &'a [u8],
        /// What the reply must start with, if anything.
        expect: Option<&'a [u8]>,
    },
    /// A recursive query for `name` (`.` for the root), class IN, answered with RCODE 0.
    Dns {
        /// The name asked for.
        name: &'a str,
        /// The record type asked for ([`dns::A`], [`dns::NS`]).
        qtype: u16,
    },
    /// A ClientHello (with `sni`, if any) is answered with a ServerHello.
    Tls {
        /// The server name sent, if any.
        sni: Option<&'a str>,
    },
    /// An echo request is answered.
    Icmp,
}

/// One probe of `target`, bounded by `timeout`.
pub async fn check(target: Target, check: &Check<'_>, timeout: Duration) -> Result<(), String> {
    let work = async {
        let (addr, mark) = (target.addr, target.mark);
        match *check {
            Check::Tcp => connect(addr, mark).await.map(drop),
            Check::Http { path, expect } => get(addr, mark, path, expect).await,
            Check::Udp { send, expect } => udp(addr, mark, send, expect).await,
            Check::Dns { name, qtype } => ask(addr, mark, name, qtype).await,
            Check::Tls { sni } => hello(addr, mark, sni).await,
            Check::Icmp => icmp(addr, mark).await,
        }
    };
    let expire = async {
        smol::Timer::after(timeout).await;
        Err("timeout".to_string())
    };
    future::or(work, expire).await
}

/// An I/O error in a few words.
fn reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => "refused".into(),
        Some(libc::ECONNRESET) => "reset".into(),
        Some(libc::EHOSTUNREACH) => "host unreachable".into(),
        Some(libc::ENETUNREACH) => "network unreachable".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => format!("not permitted ({e})"),
        _ => e.to_string(),
    }
}

/// A completed TCP connection to `addr`.
async fn connect(addr: SocketAddr, mark: Option<u32>) -> Result<Async<TcpStream>, String> {
    connected(addr, mark).await.map_err(|e| reason(&e))
}

async fn connected(addr: SocketAddr, mark: Option<u32>) -> io::Result<Async<TcpStream>> {
    let fd = socket::open(&addr, libc::SOCK_STREAM, libc::IPPROTO_TCP, mark)?;
    socket::start_connect(&fd, &addr)?;
    let stream = Async::new(TcpStream::from(fd))?;
    stream.writable().await?;
    if let Some(e) = stream.get_ref().take_error()? {
        return Err(e);
    }
    stream.get_ref().peer_addr()?;
    Ok(stream)
}

/// A UDP socket connected to `addr` (so an ICMP port unreachable reads as `refused`).
fn udp_socket(addr: SocketAddr, mark: Option<u32>) -> Result<Async<UdpSocket>, String> {
    udp_connected(addr, mark).map_err(|e| reason(&e))
}

fn udp_connected(addr: SocketAddr, mark: Option<u32>) -> io::Result<Async<UdpSocket>> {
    let fd = socket::open(&addr, libc::SOCK_DGRAM, libc::IPPROTO_UDP, mark)?;
    let udp = Async::new(UdpSocket::from(fd))?;
    udp.get_ref().connect(addr)?;
    Ok(udp)
}

/// Reads until `buf` holds `want` bytes or the peer closes; returns how many it holds.
async fn read_at_least(
    stream: &mut Async<TcpStream>,
    buf: &mut [u8],
    want: usize,
) -> Result<usize, String> {
    let mut n = 0;
    while n < want {
        let m = stream.read(&mut buf[n..]).await.map_err(|e| reason(&e))?;
        if m == 0 {
            break;
        }
        n += m;
    }
    Ok(n)
}

async fn get(
    addr: SocketAddr,
    mark: Option<u32>,
    path: &str,
    expect: (u16, u16),
) -> Result<(), String> {
    let mut stream = connect(addr, mark).await?;
    let request = http::request(path, addr.ip());
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| reason(&e))?;
    let mut head = [0u8; 64];
    let n = read_at_least(&mut stream, &mut head, 12).await?;
    match http::parse_status(&head[..n]) {
        Some(s) if s >= expect.0 && s <= expect.1 => Ok(()),
        Some(s) => Err(format!("status {s}")),
        None => Err("no HTTP status line".into()),
    }
}

async fn udp(
    addr: SocketAddr,
    mark: Option<u32>,
    send: &[u8],
    expect: Option<&[u8]>,
) -> Result<(), String> {
    let s = udp_socket(addr, mark)?;
    s.send(send).await.map_err(|e| reason(&e))?;
    let mut buf = [0u8; 2048];
    let n = s.recv(&mut buf).await.map_err(|e| reason(&e))?;
    match expect {
        Some(e) if !buf[..n].starts_with(e) => Err("unexpected reply".into()),
        _ => Ok(()),
    }
}

async fn ask(addr: SocketAddr, mark: Option<u32>, name: &str, qtype: u16) -> Result<(), String> {
    let s = udp_socket(addr, mark)?;
    let id = random() as u16;
    s.send(&dns::query(id, name, qtype))
        .await
        .map_err(|e| reason(&e))?;
    let mut buf = [0u8; 4096];
    loop {
        let n = s.recv(&mut buf).await.map_err(|e| reason(&e))?;
        // A reply to someone else's query (another ID, or not a response) is not ours.
        match dns::rcode(&buf[..n], id) {
            Some(0) => return Ok(()),
            Some(rcode) => return Err(format!("DNS rcode {rcode}")),
            None => continue,
        }
    }
}

async fn hello(addr: SocketAddr, mark: Option<u32>, sni: Option<&str>) -> Result<(), String> {
    let mut stream = connect(addr, mark).await?;
    stream
        .write_all(&tls::client_hello(sni))
        .await
        .map_err(|e| reason(&e))?;
    let mut head = [0u8; 7];
    let n = read_at_least(&mut stream, &mut head, 7).await?;
    tls::server_hello(&head[..n])
}

async fn icmp(addr: SocketAddr, mark: Option<u32>) -> Result<(), String> {
    echo(addr, mark).await.map_err(|e| reason(&e))
}

async fn echo(addr: SocketAddr, mark: Option<u32>) -> io::Result<()> {
    let (proto, request, reply) = if addr.is_ipv4() {
        (libc::IPPROTO_ICMP, 8u8, 0u8)
    } else {
        (libc::IPPROTO_ICMPV6, 128, 129)
    };
    let fd = socket::open(&addr, libc::SOCK_DGRAM, proto, mark).map_err(|e| {
        if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
            io::Error::new(
                e.kind(),
                "unprivileged ping sockets are not allowed here (net.ipv4.ping_group_range excludes the daemon's group)",
            )
        } else {
            e
        }
    })?;
    let sock = Async::new(UdpSocket::from(fd))?;
    sock.get_ref().connect(SocketAddr::new(addr.ip(), 0))?;
    // The kernel sets the identifier and the checksum of a ping socket's echo.
    let echo = [request, 0, 0, 0, 0, 0, 0, 1, b'e', b'n'];
    sock.send(&echo).await?;
    let mut buf = [0u8; 256];
    loop {
        let n = sock.recv(&mut buf).await?;
        if n >= 8 && buf[0] == reply {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_read_in_a_few_words() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(reason(&os(libc::ECONNREFUSED)), "refused");
        assert_eq!(reason(&os(libc::ECONNRESET)), "reset");
        assert_eq!(reason(&os(libc::EHOSTUNREACH)), "host unreachable");
        assert_eq!(reason(&os(libc::ENETUNREACH)), "network unreachable");
        assert!(reason(&os(libc::EPERM)).starts_with("not permitted ("));
        let ping = io::Error::new(io::ErrorKind::PermissionDenied, "ping_group_range");
        assert_eq!(
            reason(&ping),
            "ping_group_range",
            "a message of ours is kept"
        );
    }

    fn local(addr: SocketAddr) -> Target {
        Target { addr, mark: None }
    }

    #[test]
    fn an_unmarked_tcp_probe_is_up_with_a_listener_and_refused_without() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let probe = |c| smol::block_on(check(local(addr), &c, Duration::from_secs(2)));
        assert_eq!(probe(Check::Tcp), Ok(()));
        drop(listener);
        assert_eq!(probe(Check::Tcp), Err("refused".into()));
    }

    #[test]
    fn an_http_probe_reads_the_status_and_holds_it_to_the_expected_range() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for status in ["200 OK", "503 Busy"] {
                let (mut conn, _) = listener.accept().unwrap();
                let mut head = [0u8; 512];
                let n = std::io::Read::read(&mut conn, &mut head).unwrap();
                assert!(head[..n].starts_with(b"GET /ready HTTP/1.0\r\n"));
                let reply = format!("HTTP/1.0 {status}\r\n\r\n");
                std::io::Write::write_all(&mut conn, reply.as_bytes()).unwrap();
            }
        });
        let http = Check::Http {
            path: "/ready",
            expect: (200, 299),
        };
        let probe = || smol::block_on(check(local(addr), &http, Duration::from_secs(2)));
        assert_eq!(probe(), Ok(()));
        assert_eq!(probe(), Err("status 503".into()));
        server.join().unwrap();
    }
}
