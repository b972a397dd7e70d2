//! One rtnetlink connection (netlink-proto on smol, as rtnetlink uses it) for dumps and
//! pipelined writes.
//!
//! Why not one `rtnetlink` request future per route: each would cost a `sendto`, a `recvfrom`
//! and a round trip through the executor, exactly the ping-pong `ip -batch` does. Instead,
//! writes go out in *chunks*: up to [`CHUNK`] requests (at most [`DATAGRAM_BYTES`]) encoded
//! into one datagram (the kernel processes every message of a datagram in order and answers
//! each), with up to [`WINDOW`] chunks in flight before the oldest chunk's answers are awaited. Every request asks for an
//! ack, and since the kernel answers in order, the i-th answer of a chunk belongs to its i-th
//! request: every ack or error maps back to its route. The in-flight bound keeps the acks of
//! all outstanding requests inside the socket's receive buffer (enlarged at open), because the
//! kernel drops an ack that does not fit.

use std::collections::VecDeque;
use std::num::NonZeroI32;
use std::os::fd::{AsFd, BorrowedFd};

use futures_lite::StreamExt;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE,
    NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::proto::ConnectionHandle;
use rtnetlink::sys::{AsyncSocket, SocketAddr, protocols::NETLINK_ROUTE};

use super::datagram::WholeDatagramSocket;

use super::RouteError;
use super::message::{
    Links, route_add_message, route_delete_message, route_dump_message, route_from_message,
    rule_dump_message, rule_from_message, rule_message,
};
use super::spec::{Family, RouteSpec, RuleSpec};

/// Requests encoded into one datagram.
pub const CHUNK: usize = 256;
/// Bytes of requests in one datagram at most (well under the default socket send buffer,
/// whatever the size of each route).
pub const DATAGRAM_BYTES: usize = 64 << 10;
/// Chunks in flight before the oldest one's answers are awaited.
pub const WINDOW: usize = 4;
/// Receive buffer asked for (SO_RCVBUFFORCE, root only): room for every ack in flight.
const RCVBUF: usize = 8 << 20;
/// A generous estimate of the receive-buffer space one ack takes (skb overhead included);
/// without the forced buffer (not root) chunks shrink so acks still fit.
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

/// A connection to the kernel's routing netlink.
///
/// The connection task runs on smol's executor; dropping the `RouteSocket` ends it.
#[derive(Debug, Clone)]
pub struct RouteSocket {
    handle: ConnectionHandle<RouteNetlinkMessage>,
    port: u32,
    chunk: usize,
}

impl RouteSocket {
    /// Opens the socket (on the calling thread, so it lives in the caller's network namespace)
    /// with strict checking (kernel-side dump filters), capped acks with extended error
    /// messages, and a receive buffer large enough for a window of acks.
    pub fn open() -> Result<RouteSocket, RouteError> {
        let (mut conn, handle, _unsolicited) = rtnetlink::proto::new_connection_with_socket::<
            RouteNetlinkMessage,
            WholeDatagramSocket,
        >(NETLINK_ROUTE)
        .map_err(RouteError::from)?;
        conn.set_forward_ack(true);
        // A dump is complete only when its Done arrives; a connection that ends first (e.g.
        // the kernel refused the request) must not look like an empty dump.
        conn.set_forward_done(true);
        let socket = conn.socket_mut().socket_mut();
        // Each option is an optimisation, not a requirement (an emulator such as qemu-user
        // may refuse one): without strict checking the kernel ignores the dump filter and
        // `dump_routes` filters by protocol itself; without capped acks the echoed request is
        // longer; without extended acks errors carry only their errno.
        let _ = socket.set_netlink_get_strict_chk(true);
        let _ = socket.set_cap_ack(true);
        let _ = socket.set_ext_ack(true);
        let addr = socket.bind_auto().map_err(RouteError::from)?;
        let rcvbuf = force_rcvbuf(socket.as_fd(), RCVBUF);
        smol::spawn(conn).detach();
        Ok(RouteSocket {
            handle,
            port: addr.port_number(),
            chunk: (rcvbuf / ACK_TRUESIZE / WINDOW).clamp(8, CHUNK),
        })
    }

    /// The socket's netlink port id: kernel notifications about changes this socket made carry
    /// it, so a monitor can tell edgenetd's own writes from somebody else's.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Runs one dump, handing each message to `each` as it arrives (a dump of 100k routes is
    /// never held as raw messages).
    pub(super) async fn dump(
        &self,
        body: RouteNetlinkMessage,
        mut each: impl FnMut(RouteNetlinkMessage),
    ) -> Result<(), RouteError> {
        let mut req = NetlinkMessage::from(body);
        req.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut stream = self
            .handle
            .request(req, SocketAddr::new(0, 0))
            .map_err(|_| RouteError::Closed)?;
        while let Some(msg) = stream.next().await {
            match msg.payload {
                NetlinkPayload::InnerMessage(inner) => each(inner),
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(kernel_error(code, &e.header, msg.header.flags));
                    }
                }
                NetlinkPayload::Overrun(_) => return Err(RouteError::Overrun),
                _ => {}
            }
        }
        Err(RouteError::Closed)
    }

    /// Every interface by name and index.
    pub async fn links(&self) -> Result<Links, RouteError> {
        let mut links = Links::default();
        self.dump(
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            |msg| {
                if let RouteNetlinkMessage::NewLink(link) = msg {
                    for attr in link.attributes {
                        if let LinkAttribute::IfName(name) = attr {
                            links.insert(link.header.index, name);
                        }
                    }
                }
            },
        )
        .await?;
        Ok(links)
    }

    /// Every address of every interface: (interface index, address), the local address of
    /// point-to-point links (PPP), not their peer's.
    pub async fn addresses(&self) -> Result<Vec<(u32, std::net::IpAddr)>, RouteError> {
        use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
        let mut out = Vec::new();
        self.dump(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            |msg| {
                if let RouteNetlinkMessage::NewAddress(a) = msg {
                    let local = a.attributes.iter().find_map(|at| match at {
                        AddressAttribute::Local(ip) => Some(*ip),
                        _ => None,
                    });
                    let addr = a.attributes.iter().find_map(|at| match at {
                        AddressAttribute::Address(ip) => Some(*ip),
                        _ => None,
                    });
                    if let Some(ip) = local.or(addr) {
                        out.push((a.header.index, ip));
                    }
                }
            },
        )
        .await?;
        Ok(out)
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
            let request = RouteNetlinkMessage::GetRoute(route_dump_message(family, protocol));
            self.dump(request, |msg| {
                // The filter is the kernel's; checking again costs nothing and protects
                // against a kernel that ignored it.
                if let RouteNetlinkMessage::NewRoute(route) = msg
                    && u8::from(route.header.protocol) == protocol
                {
                    out.extend(route_from_message(&route, links));
                }
            })
            .await?;
        }
        Ok(out)
    }

    /// Every rule of both families whose protocol is `protocol` (the kernel cannot filter rule
    /// dumps, so this filters here).
    ///
    /// The dump runs on a connection of its own: a kernel without policy routing (or qemu-user,
    /// which does not translate rule messages) refuses the request at send time, which ends
    /// the connection it was sent on; the route connection must survive that.
    pub async fn dump_rules(&self, protocol: u8) -> Result<Vec<RuleSpec>, RouteError> {
        RouteSocket::open()?.dump_rules_here(protocol).await
    }

    async fn dump_rules_here(&self, protocol: u8) -> Result<Vec<RuleSpec>, RouteError> {
        let mut out = Vec::new();
        for family in [Family::Ipv4, Family::Ipv6] {
            let request = RouteNetlinkMessage::GetRule(rule_dump_message(family));
            self.dump(request, |msg| {
                if let RouteNetlinkMessage::NewRule(rule) = msg {
                    out.extend(rule_from_message(&rule).filter(|r| r.protocol == protocol));
                }
            })
            .await?;
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
        let build =
            |w: &RouteWrite<'_>| -> Result<NetlinkMessage<RouteNetlinkMessage>, RouteError> {
                let (body, flags) = match *w {
                    RouteWrite::Add(spec) => (
                        RouteNetlinkMessage::NewRoute(route_add_message(spec, links)?),
                        NLM_F_CREATE | NLM_F_EXCL,
                    ),
                    RouteWrite::Replace(spec) => (
                        RouteNetlinkMessage::NewRoute(route_add_message(spec, links)?),
                        NLM_F_CREATE | NLM_F_REPLACE,
                    ),
                    RouteWrite::Delete(spec) => {
                        (RouteNetlinkMessage::DelRoute(route_delete_message(spec)), 0)
                    }
                };
                let mut msg = NetlinkMessage::from(body);
                msg.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
                Ok(msg)
            };
        self.pipeline(writes.len(), |i| build(&writes[i]), progress)
            .await
    }

    /// Sends every rule write, pipelined like [`RouteSocket::write_routes`].
    pub async fn write_rules(&self, writes: &[RuleWrite<'_>]) -> WriteOutcome {
        let build = |i: usize| -> Result<NetlinkMessage<RouteNetlinkMessage>, RouteError> {
            let (body, flags) = match writes[i] {
                RuleWrite::Add(spec) => (
                    RouteNetlinkMessage::NewRule(rule_message(spec)),
                    NLM_F_CREATE | NLM_F_EXCL,
                ),
                RuleWrite::Delete(spec) => (RouteNetlinkMessage::DelRule(rule_message(spec)), 0),
            };
            let mut msg = NetlinkMessage::from(body);
            msg.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
            Ok(msg)
        };
        self.pipeline(writes.len(), build, &mut |_| {}).await
    }

    async fn pipeline(
        &self,
        count: usize,
        mut build: impl FnMut(usize) -> Result<NetlinkMessage<RouteNetlinkMessage>, RouteError>,
        progress: &mut dyn FnMut(usize),
    ) -> WriteOutcome {
        let mut outcome = WriteOutcome::default();
        let mut in_flight = VecDeque::with_capacity(WINDOW);
        let mut next = 0;
        let mut answered = 0;
        while next < count || !in_flight.is_empty() {
            // Fill the window.
            while next < count && in_flight.len() < WINDOW {
                let mut indices = Vec::with_capacity(self.chunk);
                let mut messages = Vec::with_capacity(self.chunk);
                let mut bytes = 0;
                while next < count && messages.len() < self.chunk && bytes < DATAGRAM_BYTES {
                    match build(next) {
                        Ok(msg) => {
                            bytes += msg.buffer_len();
                            indices.push(next);
                            messages.push(msg);
                        }
                        Err(error) => outcome.failures.push(WriteFailure { index: next, error }),
                    }
                    next += 1;
                }
                if messages.is_empty() {
                    continue;
                }
                outcome.sent += messages.len();
                match self.handle.request_batch(messages, SocketAddr::new(0, 0)) {
                    Ok(stream) => in_flight.push_back((indices, stream)),
                    Err(_) => {
                        outcome
                            .failures
                            .extend(indices.into_iter().map(|index| WriteFailure {
                                index,
                                error: RouteError::Closed,
                            }))
                    }
                }
            }
            // Collect the oldest chunk's answers: one per request, in request order.
            let Some((indices, mut stream)) = in_flight.pop_front() else {
                continue;
            };
            let mut got = 0;
            while got < indices.len() {
                let Some(msg) = stream.next().await else {
                    break;
                };
                match msg.payload {
                    NetlinkPayload::Error(e) => {
                        if let Some(code) = e.code {
                            outcome.failures.push(WriteFailure {
                                index: indices[got],
                                error: kernel_error(code, &e.header, msg.header.flags),
                            });
                        }
                        got += 1;
                    }
                    NetlinkPayload::Overrun(_) => break,
                    _ => {}
                }
            }
            for &index in &indices[got..] {
                outcome.failures.push(WriteFailure {
                    index,
                    error: RouteError::NoAnswer,
                });
            }
            answered += indices.len();
            progress(answered);
        }
        outcome.failures.sort_by_key(|f| f.index);
        outcome
    }
}

/// Turns a netlink error into a [`RouteError`], with the extended-ack message when present.
/// The echoed request is its 16-byte header when capped (`NETLINK_CAP_ACK`), else the whole
/// request (its length is in its header); the TLVs follow it.
fn kernel_error(code: NonZeroI32, echoed: &[u8], flags: u16) -> RouteError {
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
