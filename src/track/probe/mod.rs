//! One probe of a track's uplink, from a socket carrying the track's mark: the track's rule
//! sends marked packets to its private table, whose one route goes to the target through the
//! track's gateway and device. So the probe tests that uplink even while its routes are
//! withdrawn from the main table (the daemon's CAP_NET_ADMIN allows `SO_MARK`).
//!
//! - tcp: the connection completes (a refusal counts as a failure: the check is that the
//!   target serves);
//! - dns: a query for the root's NS records gets a reply with RCODE 0;
//! - icmp: an echo gets a reply, from an unprivileged ping socket (`net.ipv4.ping_group_range`
//!   must include the daemon's group; where it does not, every probe fails with that reason).

mod socket;

pub use socket::addresses_of;

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use futures_lite::future;
use smol::Async;

use crate::config::route::{Track, TrackCheck};

/// One probe, bounded by the track's timeout; the error is the reason, for logs and /healthz.
pub async fn probe(track: &Track) -> Result<(), String> {
    probe_to(track.check, track.target, track.fwmark, track.timeout).await
}

/// A probe of `target` with `mark`, bounded by `timeout`.
pub async fn probe_to(
    check: TrackCheck,
    target: SocketAddr,
    mark: u32,
    timeout: Duration,
) -> Result<(), String> {
    let work = async {
        match check {
            TrackCheck::Tcp => tcp(target, mark).await,
            TrackCheck::Dns => dns(target, mark).await,
            TrackCheck::Icmp => icmp(target, mark).await,
        }
        .map_err(|e| reason(&e))
    };
    let expire = async {
        smol::Timer::after(timeout).await;
        Err("timeout".to_string())
    };
    future::or(work, expire).await
}

fn reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => "refused".into(),
        Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH) => format!("unreachable ({e})"),
        Some(libc::EACCES) | Some(libc::EPERM) => format!("not permitted ({e})"),
        _ => e.to_string(),
    }
}

async fn tcp(target: SocketAddr, mark: u32) -> io::Result<()> {
    let fd = socket::marked(&target, libc::SOCK_STREAM, libc::IPPROTO_TCP, mark)?;
    socket::start_connect(&fd, &target)?;
    let stream = Async::new(TcpStream::from(fd))?;
    stream.writable().await?;
    if let Some(e) = stream.get_ref().take_error()? {
        return Err(e);
    }
    stream.get_ref().peer_addr().map(|_| ())
}

/// A query for `.` NS, recursion desired; `id` tells our reply from a stray one.
fn dns_query(id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(17);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(&[0, 0, 2, 0, 1]);
    q
}

async fn dns(target: SocketAddr, mark: u32) -> io::Result<()> {
    let fd = socket::marked(&target, libc::SOCK_DGRAM, libc::IPPROTO_UDP, mark)?;
    let udp = Async::new(UdpSocket::from(fd))?;
    udp.get_ref().connect(target)?;
    let id = (std::process::id() as u16)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()) as u16);
    udp.send(&dns_query(id)).await?;
    let mut buf = [0u8; 512];
    loop {
        let n = udp.recv(&mut buf).await?;
        let reply = &buf[..n];
        if n < 12 || reply[..2] != id.to_be_bytes() || reply[2] & 0x80 == 0 {
            continue;
        }
        return match reply[3] & 0x0f {
            0 => Ok(()),
            rcode => Err(io::Error::other(format!("dns rcode {rcode}"))),
        };
    }
}

async fn icmp(target: SocketAddr, mark: u32) -> io::Result<()> {
    let (proto, request, reply) = if target.is_ipv4() {
        (libc::IPPROTO_ICMP, 8u8, 0u8)
    } else {
        (libc::IPPROTO_ICMPV6, 128, 129)
    };
    let fd = socket::marked(&target, libc::SOCK_DGRAM, proto, mark).map_err(|e| {
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
    sock.get_ref().connect(SocketAddr::new(target.ip(), 0))?;
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
    fn the_dns_query_asks_the_root_for_ns_with_recursion() {
        let q = dns_query(0xbeef);
        assert_eq!(&q[..4], &[0xbe, 0xef, 0x01, 0x00]);
        assert_eq!(&q[4..6], &[0, 1], "one question");
        assert_eq!(&q[12..], &[0, 0, 2, 0, 1], "root, NS, IN");
    }
}
