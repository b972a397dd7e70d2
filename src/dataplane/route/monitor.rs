//! Kernel route events: the multicast groups for IPv4/IPv6 routes and rules and for links,
//! reduced to what matters to the route controller.
//!
//! Reported: a change to a route or rule carrying the owned protocol made by *someone else*
//! (the notification's port id is not that of edgenetd's own write socket: the kernel stamps
//! every notification with the port of the socket whose request caused it), any link
//! appearing, changing or disappearing (IPv4 silently drops routes of a link that goes down,
//! and a route on a device that did not exist yet can be installed once it appears), and any
//! address added or removed (IPv4 silently drops routes whose preferred source goes away). When the
//! monitor's buffer overflows (e.g. while edgenetd itself installs 100k routes), events were
//! lost and [`RouteEvent::Overrun`] says "resync to be sure". Notifications of edgenetd's own
//! writes are dropped by a socket filter in the kernel, so they cost nothing and never fill
//! the buffer.

use futures_lite::StreamExt;
use futures_lite::stream::Boxed;
use rtnetlink::MulticastGroup;
use rtnetlink::packet_core::NetlinkMessage;
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::LinkAttribute;
use rtnetlink::sys::{AsyncSocket, SmolSocket};
use std::os::fd::{AsFd, BorrowedFd};

use super::RouteError;
use super::socket::force_rcvbuf;

type Receiver = Boxed<(
    NetlinkMessage<RouteNetlinkMessage>,
    rtnetlink::sys::SocketAddr,
)>;

/// Something that may need a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteEvent {
    /// A route with the owned protocol was added/changed (`removed == false`) or deleted.
    OwnedRoute {
        /// True for RTM_DELROUTE.
        removed: bool,
    },
    /// A rule with the owned protocol was added or deleted.
    OwnedRule {
        /// True for RTM_DELRULE.
        removed: bool,
    },
    /// A link appeared or changed (`removed == false`) or disappeared.
    Link {
        /// Interface index.
        index: u32,
        /// Interface name, when the message carried it.
        name: Option<String>,
        /// True for RTM_DELLINK.
        removed: bool,
    },
    /// An address was added or removed (IPv4 silently drops routes whose preferred source
    /// was a removed address; a route that needs an address can now be installed).
    Address {
        /// True for RTM_DELADDR.
        removed: bool,
    },
    /// Notifications were lost (receive buffer overflow): state may have changed unseen.
    Overrun,
}

/// A subscription to route, rule and link notifications.
pub struct RouteMonitor {
    rx: Receiver,
    protocol: u8,
    own_port: Option<u32>,
}

/// Size asked for the monitor's receive buffer: bursts of a few thousand events fit.
const MONITOR_RCVBUF: usize = 4 << 20;

impl RouteMonitor {
    /// Subscribes (on the calling thread's network namespace). Changes made through the socket
    /// with port id `own_port` (see [`super::RouteSocket::port`]) are not reported.
    pub fn open(protocol: u8, own_port: Option<u32>) -> Result<RouteMonitor, RouteError> {
        let (mut conn, _handle, rx) =
            rtnetlink::new_multicast_connection_with_socket::<SmolSocket>(&[
                MulticastGroup::Ipv4Route,
                MulticastGroup::Ipv6Route,
                MulticastGroup::Ipv4Rule,
                MulticastGroup::Ipv6Rule,
                MulticastGroup::Link,
                MulticastGroup::Ipv4Ifaddr,
                MulticastGroup::Ipv6Ifaddr,
            ])
            .map_err(RouteError::from)?;
        let fd = conn.socket_mut().socket_ref().as_fd();
        force_rcvbuf(fd, MONITOR_RCVBUF);
        if let Some(port) = own_port {
            // Best effort: without the filter the same messages are dropped in `next`.
            let _ = drop_own_notifications(fd, port);
        }
        smol::spawn(conn).detach();
        Ok(RouteMonitor {
            rx: rx.boxed(),
            protocol,
            own_port,
        })
    }

    /// The next event worth a sync; `None` when the connection ended.
    pub async fn next(&mut self) -> Option<RouteEvent> {
        while let Some((msg, _from)) = self.rx.next().await {
            let by_self = self.own_port.is_some_and(|p| p == msg.header.port_number);
            let event = match msg.payload {
                NetlinkPayload::Overrun(_) => Some(RouteEvent::Overrun),
                NetlinkPayload::InnerMessage(inner) => self.classify(inner, by_self),
                _ => None,
            };
            if event.is_some() {
                return event;
            }
        }
        None
    }

    fn classify(&self, msg: RouteNetlinkMessage, by_self: bool) -> Option<RouteEvent> {
        match msg {
            RouteNetlinkMessage::NewRoute(r) | RouteNetlinkMessage::DelRoute(r)
                if by_self || u8::from(r.header.protocol) != self.protocol =>
            {
                None
            }
            RouteNetlinkMessage::NewRoute(_) => Some(RouteEvent::OwnedRoute { removed: false }),
            RouteNetlinkMessage::DelRoute(_) => Some(RouteEvent::OwnedRoute { removed: true }),
            RouteNetlinkMessage::NewRule(r) | RouteNetlinkMessage::DelRule(r)
                if by_self || !rule_is_owned(&r, self.protocol) =>
            {
                None
            }
            RouteNetlinkMessage::NewRule(_) => Some(RouteEvent::OwnedRule { removed: false }),
            RouteNetlinkMessage::DelRule(_) => Some(RouteEvent::OwnedRule { removed: true }),
            RouteNetlinkMessage::NewLink(l) => Some(link_event(&l, false)),
            RouteNetlinkMessage::DelLink(l) => Some(link_event(&l, true)),
            RouteNetlinkMessage::NewAddress(_) => Some(RouteEvent::Address { removed: false }),
            RouteNetlinkMessage::DelAddress(_) => Some(RouteEvent::Address { removed: true }),
            _ => None,
        }
    }
}

fn rule_is_owned(rule: &rtnetlink::packet_route::rule::RuleMessage, protocol: u8) -> bool {
    rule.attributes.iter().any(|a| {
        matches!(a, rtnetlink::packet_route::rule::RuleAttribute::Protocol(p) if u8::from(*p) == protocol)
    })
}

fn link_event(link: &rtnetlink::packet_route::link::LinkMessage, removed: bool) -> RouteEvent {
    RouteEvent::Link {
        index: link.header.index,
        name: link.attributes.iter().find_map(|a| match a {
            LinkAttribute::IfName(n) => Some(n.clone()),
            _ => None,
        }),
        removed,
    }
}

/// Attaches a classic BPF filter that drops, in the kernel, every notification caused by the
/// socket with port id `port` (edgenetd's own writes): a cold sync of 100k routes then costs
/// the monitor nothing and cannot overrun its buffer. Each notification is one message whose
/// header has `nlmsg_pid` (host byte order) at offset 12; BPF loads words big-endian.
fn drop_own_notifications(fd: BorrowedFd<'_>, port: u32) -> std::io::Result<()> {
    let pid_as_loaded = u32::from_be_bytes(port.to_ne_bytes());
    let program = [
        // A = word at offset 12 (nlmsg_pid)
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 12,
        },
        // if A == own port: drop (skip one), else accept (next)
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 1,
            jf: 0,
            k: pid_as_loaded,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: u32::MAX,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    crate::sys::attach_socket_filter(fd, &program)
}
