//! One netlink socket for dumps (see the `dump` module) and one for pipelined writes, both
//! plain `netlink-sys` sockets on smol, every message encoded and read by [`super::codec`].
//!
//! Why not one `rtnetlink` request future per route: each would cost a `sendto`, a `recvfrom`
//! and a round trip through the executor, exactly the ping-pong `ip -batch` does. Instead,
//! writes go out in *chunks*: up to [`CHUNK`] requests (at most [`DATAGRAM_BYTES`]) encoded
//! straight into one datagram (see [`super::wire`]); the kernel processes every message of a
//! datagram in order, inside the `send` call. Only the last request of a chunk asks for an
//! ack: the kernel answers a request without `NLM_F_ACK` only when it fails, so a chunk of
//! 256 routes that all succeed costs one `send` and one `recv`, and the ack of the last one
//! says every earlier answer has arrived. Each answer carries its request's sequence number,
//! so every error maps back to its write. One chunk is in flight at a time, so its answers
//! (at most one per request) always fit the socket's receive buffer (enlarged at open);
//! an answer lost anyway fails the chunk's writes as unanswered.

use std::num::NonZeroI32;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use rtnetlink::sys::{Socket, protocols::NETLINK_ROUTE};

use super::RouteError;
use super::codec::header::{NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED};
use super::codec::{Malformed, address, link, route, rule};
use super::dump::Dumper;
use super::message::Links;
use super::spec::{Family, RouteSpec, RuleSpec};
use super::wire;

/// Requests encoded into one datagram.
pub const CHUNK: usize = 256;
/// Bytes of requests in one datagram at most (well under the default socket send buffer,
/// whatever the size of each route).
pub const DATAGRAM_BYTES: usize = 64 << 10;
/// Receive buffer asked for (SO_RCVBUFFORCE, root only): room for a dump's replies, and for
/// an answer to every request of a chunk.
const RCVBUF: usize = 8 << 20;
/// A generous estimate of the receive-buffer space one answer takes (skb overhead included);
/// without the forced buffer (not root) chunks shrink so answers still fit.
const ACK_TRUESIZE: usize = 1024;

/// One write to the kernel.
#[derive(Debug, Clone, Copy)]
pub enum RouteWrite<'a> {
    /// Creates a route that must not exist yet (`NLM_F_CREATE | NLM_F_EXCL`): a route of
    /// another owner with the same key is never overwritten; the add fails with "File exists".
    Add(&'a RouteSpec),
    /// Replaces an owned route with the same key in place (`NLM_F_CREATE | NLM_F_REPLACE`):
    /// no window without the route.
    Replace(&'a RouteSpec),
    /// Deletes an owned route.
    Delete(&'a RouteSpec),
}

/// One write to the kernel's rule list.
#[derive(Debug, Clone, Copy)]
pub enum RuleWrite<'a> {
    /// Adds a rule (`NLM_F_EXCL`: an identical rule is not added twice).
    Add(&'a RuleSpec),
    /// Deletes a rule.
    Delete(&'a RuleSpec),
}

/// A write that failed: its index in the slice given to the write call, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    /// Index of the failed write.
    pub index: usize,
    /// The error (the kernel's, with its extended-ack message when it gave one).
    pub error: RouteError,
}

/// What a batch of writes did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Requests sent to the kernel (a write that failed before sending, e.g. a missing
    /// device, is not counted).
    pub sent: usize,
    /// Every failed write.
    pub failures: Vec<WriteFailure>,
}

/// A connection to the kernel's routing netlink: its sockets close with the last clone.
///
/// Clones share the sockets: one dump at a time, one pipeline of writes at a time.
#[derive(Debug, Clone)]
pub struct RouteSocket {
    dumper: Arc<smol::lock::Mutex<Dumper>>,
    writer: Arc<smol::lock::Mutex<Writer>>,
    port: u32,
    chunk: usize,
}

/// The write socket and its buffers (one pipeline at a time).
#[derive(Debug)]
struct Writer {
    socket: smol::Async<Socket>,
    /// The next sequence number.
    seq: u32,
    /// The chunk being sent.
    out: Vec<u8>,
    /// One received datagram.
    answer: Vec<u8>,
}

impl RouteSocket {
    /// Opens the sockets (on the calling thread, so they live in the caller's network
    /// namespace): the dump socket with strict checking (kernel-side dump filters), the
    /// write socket with capped acks and extended error messages and a receive buffer large
    /// enough for the answers it waits for.
    pub fn open() -> Result<RouteSocket, RouteError> {
        let dumper = Dumper::open()?;
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(RouteError::from)?;
        // Optimisations, not requirements (an emulator such as qemu-user may refuse one):
        // without capped acks the echoed request is longer; without extended acks errors
        // carry only their errno.
        let _ = socket.set_cap_ack(true);
        let _ = socket.set_ext_ack(true);
        let addr = socket.bind_auto().map_err(RouteError::from)?;
        let rcvbuf = force_rcvbuf(socket.as_fd(), RCVBUF);
        let socket = smol::Async::new(socket).map_err(RouteError::from)?;
        Ok(RouteSocket {
            dumper: Arc::new(smol::lock::Mutex::new(dumper)),
            writer: Arc::new(smol::lock::Mutex::new(Writer {
                socket,
                seq: 1,
                out: Vec::with_capacity(DATAGRAM_BYTES + 4096),
                answer: Vec::with_capacity(64 << 10),
            })),
            port: addr.port_number(),
            chunk: (rcvbuf / ACK_TRUESIZE).clamp(8, CHUNK),
        })
    }

    /// The write socket's netlink port id: kernel notifications about changes this socket
    /// made carry it, so a monitor can tell edgenetd's own writes from somebody else's.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Runs one dump (see [`Dumper::dump`]): each message is folded into the result as it
    /// arrives (a dump of 100k routes is never held as raw messages).
    pub(super) async fn dump<T: Default>(
        &self,
        put: impl Fn(&mut Vec<u8>, u32),
        each: impl FnMut(&mut T, u16, &[u8]),
    ) -> Result<T, RouteError> {
        self.dumper.lock().await.dump(put, each).await
    }

    /// Every interface by name and index.
    pub async fn links(&self) -> Result<Links, RouteError> {
        self.dump(link::put_dump, |links: &mut Links, kind, body| {
            if kind == link::RTM_NEWLINK {
                match link::parse(body) {
                    Ok(link::Link {
                        index,
                        name: Some(name),
                        ..
                    }) => links.insert(index, name),
                    Ok(_) => {}
                    Err(e) => skipped(e),
                }
            }
        })
        .await
    }

    /// Every address of every interface: (interface index, address), the local address of
    /// point-to-point links (PPP), not their peer's.
    pub async fn addresses(&self) -> Result<Vec<(u32, std::net::IpAddr)>, RouteError> {
        let nets = self.address_networks().await?;
        Ok(nets.into_iter().map(|(i, n)| (i, n.addr())).collect())
    }

    /// [`RouteSocket::addresses`] with each address's prefix length (`ip addr`'s
    /// `ADDR/LEN`): what tells the connected route an address brings.
    pub async fn address_networks(&self) -> Result<Vec<(u32, ipnet::IpNet)>, RouteError> {
        self.dump(address::put_dump, |out: &mut Vec<_>, kind, body| {
            if kind == address::RTM_NEWADDR {
                match address::parse(body) {
                    Ok(net) => out.extend(net),
                    Err(e) => skipped(e),
                }
            }
        })
        .await
    }

    /// Every route of both families in every table whose protocol is `protocol` (filtered in
    /// the kernel), with devices named through `links`.
    pub async fn dump_routes(
        &self,
        protocol: u8,
        links: &Links,
    ) -> Result<Vec<RouteSpec>, RouteError> {
        let mut out = Vec::new();
        for family in [Family::Ipv4, Family::Ipv6] {
            let put = |buf: &mut Vec<u8>, seq| route::put_dump(buf, family, protocol, seq);
            let routes = self.dump(put, |out: &mut Vec<_>, kind, body| {
                // The filter is the kernel's; checking again costs nothing and protects
                // against a kernel that ignored it.
                if kind == route::RTM_NEWROUTE && route::protocol(body) == Ok(protocol) {
                    match route::parse(body, links) {
                        Ok(spec) => out.extend(spec),
                        Err(e) => skipped(e),
                    }
                }
            });
            out.extend(routes.await?);
        }
        Ok(out)
    }

    /// Every rule of both families whose protocol is `protocol` (the kernel cannot filter rule
    /// dumps, so this filters here). A kernel without policy routing (or qemu-user, which does
    /// not translate rule messages) refuses the request: that fails this dump only.
    pub async fn dump_rules(&self, protocol: u8) -> Result<Vec<RuleSpec>, RouteError> {
        let mut out = Vec::new();
        for family in [Family::Ipv4, Family::Ipv6] {
            let put = |buf: &mut Vec<u8>, seq| rule::put_dump(buf, family, seq);
            let rules = self.dump(put, |out: &mut Vec<_>, kind, body| {
                if kind == rule::RTM_NEWRULE {
                    match rule::parse(body) {
                        Ok(spec) => out.extend(spec.filter(|r| r.protocol == protocol)),
                        Err(e) => skipped(e),
                    }
                }
            });
            out.extend(rules.await?);
        }
        Ok(out)
    }

    /// Sends every write, pipelined (see the module docs), and returns every failure with its
    /// index; one failure never stops the others. `progress` is called with the number of
    /// writes answered so far after each chunk.
    pub async fn write_routes(
        &self,
        writes: &[RouteWrite<'_>],
        links: &Links,
        progress: &mut dyn FnMut(usize),
    ) -> WriteOutcome {
        let mut devices = wire::Devices::new(links);
        self.pipeline(
            writes.len(),
            |i, buf, seq| wire::route_write(buf, &writes[i], &mut devices, seq),
            progress,
        )
        .await
    }

    /// Sends every rule write, pipelined like [`RouteSocket::write_routes`].
    pub async fn write_rules(&self, writes: &[RuleWrite<'_>]) -> WriteOutcome {
        let build = |i: usize, buf: &mut Vec<u8>, seq| {
            wire::rule_write(buf, &writes[i], seq);
            Ok(())
        };
        self.pipeline(writes.len(), build, &mut |_| {}).await
    }

    async fn pipeline(
        &self,
        count: usize,
        mut build: impl FnMut(usize, &mut Vec<u8>, u32) -> Result<(), RouteError>,
        progress: &mut dyn FnMut(usize),
    ) -> WriteOutcome {
        let mut outcome = WriteOutcome::default();
        if count == 0 {
            return outcome;
        }
        let mut writer = self.writer.lock().await;
        let writer = &mut *writer;
        let mut next = 0;
        let mut answered = 0;
        let mut indices = Vec::with_capacity(self.chunk);
        while next < count {
            writer.out.clear();
            indices.clear();
            let first = writer.seq;
            let mut last = 0;
            while next < count && indices.len() < self.chunk && writer.out.len() < DATAGRAM_BYTES {
                let start = writer.out.len();
                let seq = first.wrapping_add(indices.len() as u32);
                match build(next, &mut writer.out, seq) {
                    Ok(()) => {
                        last = start;
                        indices.push(next);
                    }
                    Err(error) => {
                        writer.out.truncate(start);
                        outcome.failures.push(WriteFailure { index: next, error });
                    }
                }
                next += 1;
            }
            if indices.is_empty() {
                continue;
            }
            writer.seq = first.wrapping_add(indices.len() as u32);
            // The last request asks for the ack that closes the chunk.
            let flags = &mut writer.out[last + 6..last + 8];
            let asked = u16::from_ne_bytes([flags[0], flags[1]]) | NLM_F_ACK;
            flags.copy_from_slice(&asked.to_ne_bytes());
            outcome.sent += indices.len();
            match writer.exchange(first, indices.len()).await {
                Ok(errors) => outcome
                    .failures
                    .extend(errors.into_iter().map(|(k, error)| WriteFailure {
                        index: indices[k],
                        error,
                    })),
                Err(error) => outcome
                    .failures
                    .extend(indices.iter().map(|&index| WriteFailure {
                        index,
                        error: error.clone(),
                    })),
            }
            answered += indices.len();
            progress(answered);
        }
        outcome.failures.sort_by_key(|f| f.index);
        outcome
    }
}

impl Writer {
    /// Sends the chunk in `out` (`n` requests numbered from `first`, the last one asking for
    /// an ack) and reads answers until that ack: the errors, by position in the chunk. An
    /// error here (the send failed, or an answer was lost) is every request's.
    async fn exchange(
        &mut self,
        first: u32,
        n: usize,
    ) -> Result<Vec<(usize, RouteError)>, RouteError> {
        let Writer {
            socket,
            out,
            answer,
            ..
        } = self;
        // Linux takes a netlink datagram whole or not at all; qemu-user (the aarch64 smoke
        // test) may report a short count for a whole send, so the count is ignored.
        socket
            .write_with(|s| s.send(out, 0))
            .await
            .map_err(RouteError::from)?;
        let last = first.wrapping_add(n as u32 - 1);
        let mut errors = Vec::new();
        loop {
            answer.clear();
            match socket.read_with(|s| s.recv(answer, 0)).await {
                Ok(_) => {}
                // The receive buffer overflowed: some answer is gone.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Err(RouteError::NoAnswer);
                }
                Err(e) => return Err(RouteError::from(e)),
            }
            for a in wire::answers(answer) {
                let k = a.seq.wrapping_sub(first) as usize;
                // An answer to an earlier chunk whose wait was cancelled.
                if k >= n {
                    continue;
                }
                if let Some(error) = a.error {
                    errors.push((k, error));
                }
                if a.seq == last {
                    return Ok(errors);
                }
            }
        }
    }
}

/// A message the kernel would never send is skipped, and said so.
pub(super) fn skipped(e: Malformed) {
    log::warn!("route netlink: skipped a message: {e}");
}

/// Turns a netlink error into a [`RouteError`], with the extended-ack message when present.
/// The echoed request is its 16-byte header when capped (`NETLINK_CAP_ACK`), else the whole
/// request (its length is in its header); the TLVs follow it.
pub(super) fn kernel_error(code: NonZeroI32, echoed: &[u8], flags: u16) -> RouteError {
    let errno = -code.get();
    let mut message = None;
    let request_len = if flags & NLM_F_CAPPED != 0 || echoed.len() < 4 {
        16
    } else {
        let len = u32::from_ne_bytes([echoed[0], echoed[1], echoed[2], echoed[3]]) as usize;
        (len + 3) & !3
    };
    if flags & NLM_F_ACK_TLVS != 0 && echoed.len() > request_len {
        let mut tlvs = &echoed[request_len..];
        while tlvs.len() >= 4 {
            let len = u16::from_ne_bytes([tlvs[0], tlvs[1]]) as usize;
            let kind = u16::from_ne_bytes([tlvs[2], tlvs[3]]);
            if len < 4 || len > tlvs.len() {
                break;
            }
            // NLMSGERR_ATTR_MSG: a NUL-terminated string.
            if kind == 1 {
                let text = &tlvs[4..len];
                let text = text.split(|b| *b == 0).next().unwrap_or_default();
                message = Some(String::from_utf8_lossy(text).into_owned());
            }
            tlvs = &tlvs[((len + 3) & !3).min(tlvs.len())..];
        }
    }
    RouteError::Kernel { errno, message }
}

/// Asks for a receive buffer of `size` bytes (forced past `rmem_max` when root) and returns
/// the size the kernel granted.
pub(crate) fn force_rcvbuf(fd: BorrowedFd<'_>, size: usize) -> usize {
    let size = size as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if crate::sys::set_int_sockopt(fd, libc::SOL_SOCKET, opt, size).is_ok() {
            break;
        }
    }
    match crate::sys::get_int_sockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF) {
        Ok(granted) if granted > 0 => granted as usize,
        _ => 212_992,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv_msg(text: &str) -> Vec<u8> {
        let mut v = Vec::new();
        let body = [text.as_bytes(), &[0]].concat();
        let len = 4 + body.len();
        v.extend_from_slice(&(len as u16).to_ne_bytes());
        v.extend_from_slice(&1u16.to_ne_bytes());
        v.extend_from_slice(&body);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn extended_ack_messages_are_read_after_a_capped_or_a_full_echo() {
        let code = NonZeroI32::new(-libc::ENETUNREACH).unwrap();
        let mut capped = vec![0u8; 16];
        capped.extend(tlv_msg("Nexthop has invalid gateway"));
        assert_eq!(
            kernel_error(code, &capped, NLM_F_CAPPED | NLM_F_ACK_TLVS).to_string(),
            "Network is unreachable: Nexthop has invalid gateway"
        );
        let mut full = vec![0u8; 44];
        full[..4].copy_from_slice(&44u32.to_ne_bytes());
        full.extend(tlv_msg("Nexthop has invalid gateway"));
        assert_eq!(
            kernel_error(code, &full, NLM_F_ACK_TLVS).to_string(),
            "Network is unreachable: Nexthop has invalid gateway"
        );
        assert_eq!(
            kernel_error(code, &capped, 0).to_string(),
            "Network is unreachable"
        );
    }
}
