//! When a backend address reached the kernel, as nftables' own event group reports the
//! element writes of the benchmark's namespace: the moment the kernel committed the batch,
//! seen from outside the daemon, without reading back a map of tens of thousands of elements
//! (a `nft get element` on such a map reads the whole set and takes longer than the change
//! itself; `nft monitor` re-reads its cache and falls behind on a table this big).
//!
//! A netlink socket joins `NFNLGRP_NFTABLES` before the first change; a reader thread looks
//! for the addresses asked for ([`Monitor::expect`]) in every new-element message and notes
//! the first time each appears, so a wait is a lookup.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// nfnetlink's nftables subsystem, and its new-element message.
const NEWSETELEM: u16 = (10 << 8) | 12;
/// The multicast group of nftables' events.
const NFNLGRP_NFTABLES: libc::c_int = 7;
/// The socket's receive buffer: a rollout's burst of element messages fits.
const RCVBUF: libc::c_int = 32 << 20;

/// The addresses waited for, and when each was first seen (`None`: not yet).
type Wanted = Arc<Mutex<HashMap<Ipv4Addr, Option<Instant>>>>;

/// The event socket and its reader.
pub struct Monitor {
    /// What the reader looks for.
    wanted: Wanted,
}

impl Monitor {
    /// Joins the event group (from here on every commit is seen) and starts the reader.
    pub fn start() -> Monitor {
        let fd = events_socket().expect("an nftables event socket");
        let wanted: Wanted = Arc::default();
        let noted = wanted.clone();
        std::thread::spawn(move || read_events(fd, noted));
        Monitor { wanted }
    }

    /// Looks out for `addrs` from now on (call before the change that writes them).
    pub fn expect(&self, addrs: &[Ipv4Addr]) {
        let mut w = self.wanted.lock().unwrap();
        for a in addrs {
            w.insert(*a, None);
        }
    }

    /// Waits until every one of `addrs` was seen (or `timeout` passed); the last sighting.
    pub fn wait_all(&self, addrs: &[Ipv4Addr], timeout: Duration) -> Option<Instant> {
        let t = Instant::now();
        loop {
            {
                let w = self.wanted.lock().unwrap();
                let times: Option<Vec<Instant>> =
                    addrs.iter().map(|a| w.get(a).copied().flatten()).collect();
                if let Some(times) = times {
                    return times.into_iter().max();
                }
            }
            if t.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// A netlink socket of the netfilter family in the nftables event group.
fn events_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once below.
    let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_NETFILTER) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let set = |level, name, value: libc::c_int| {
        // SAFETY: setsockopt(2) reads an int from a live local for its stated size.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // A bigger buffer where root may have it; the default one otherwise.
    set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF)
        .or_else(|_| set(libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF))?;
    // The group is joined by binding with it (a membership asked for on an unbound socket
    // receives nothing).
    // SAFETY: an all-zero sockaddr_nl is a valid value of that plain C struct.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = 1 << (NFNLGRP_NFTABLES - 1);
    // SAFETY: bind(2) reads a live local sockaddr_nl for its stated size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Reads events until the process ends, noting the wanted addresses that appear.
fn read_events(fd: OwnedFd, wanted: Wanted) {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        // SAFETY: recv(2) writes at most `buf.len()` bytes into `buf`, which outlives the call.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            // ENOBUFS: events were lost; a change not seen then times out, loudly.
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                eprintln!("bench_kubernetes: nftables events overflowed the socket buffer");
                continue;
            }
            return;
        }
        let at = Instant::now();
        let mut w = wanted.lock().unwrap();
        if w.values().all(Option::is_some) {
            continue;
        }
        for msg in messages(&buf[..n as usize]) {
            for (addr, seen) in w.iter_mut().filter(|(_, s)| s.is_none()) {
                if contains(msg, &addr.octets()) {
                    *seen = Some(at);
                }
            }
        }
    }
}

/// The new-element messages of one datagram (their whole bytes).
fn messages(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 16 {
        let len = u32::from_ne_bytes(data[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(data[4..6].try_into().unwrap());
        if len < 16 || len > data.len() {
            break;
        }
        if kind == NEWSETELEM {
            out.push(&data[16..len]);
        }
        data = &data[len.next_multiple_of(4).min(data.len())..];
    }
    out
}

/// `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `nft -f -` with `text`; its stderr when it failed.
pub fn nft_f(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A netlink message header and `payload`.
    fn msg(kind: u16, payload: &[u8]) -> Vec<u8> {
        let len = 16 + payload.len();
        let mut m = Vec::new();
        m.extend((len as u32).to_ne_bytes());
        m.extend(kind.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(payload);
        m.resize(len.next_multiple_of(4), 0);
        m
    }

    #[test]
    fn new_element_messages_are_found_among_others() {
        let mut d = msg(NEWSETELEM, &[10, 250, 0, 1, 0x1f, 0x90]);
        d.extend(msg((10 << 8) | 6, &[10, 250, 0, 2]));
        d.extend(msg(NEWSETELEM, &[10, 250, 0, 3]));
        let found = messages(&d);
        assert_eq!(found.len(), 2);
        assert!(contains(found[0], &[10, 250, 0, 1]));
        assert!(!found.iter().any(|m| contains(m, &[10, 250, 0, 2])));
        assert!(contains(found[1], &[10, 250, 0, 3]));
    }
}
