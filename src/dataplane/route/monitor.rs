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

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};

use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::RouteError;
use super::codec::{Messages, address, link, route, rule};
use super::socket::{force_rcvbuf, skipped};

/// The multicast groups (`RTNLGRP_*`, all below 32, so one bind mask holds them): links,
/// IPv4 and IPv6 addresses, routes and rules.
const GROUPS: [u32; 7] = [1, 5, 7, 8, 9, 11, 19];
/// The receive buffer to start with: a notification is one message, a link's the largest
/// (a bigger one grows it).
const RECV_BYTES: usize = 16 << 10;

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
    socket: smol::Async<Socket>,
    buf: Vec<u8>,
    /// Events of the last datagram not handed out yet.
    pending: VecDeque<RouteEvent>,
    protocol: u8,
    own_port: Option<u32>,
}

/// Size asked for the monitor's receive buffer: bursts of a few thousand events fit.
const MONITOR_RCVBUF: usize = 4 << 20;

impl RouteMonitor {
    /// Subscribes (on the calling thread's network namespace). Changes made through the socket
    /// with port id `own_port` (see [`super::RouteSocket::port`]) are not reported.
    pub fn open(protocol: u8, own_port: Option<u32>) -> Result<RouteMonitor, RouteError> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        let mask = GROUPS.iter().fold(0, |mask, g| mask | 1 << (g - 1));
        socket.bind(&SocketAddr::new(0, mask))?;
        force_rcvbuf(socket.as_fd(), MONITOR_RCVBUF);
        if let Some(port) = own_port {
            // Best effort: without the filter the same messages are dropped in `next`.
            let _ = drop_own_notifications(socket.as_fd(), port);
        }
        Ok(RouteMonitor {
            socket: smol::Async::new(socket)?,
            buf: Vec::with_capacity(RECV_BYTES),
            pending: VecDeque::new(),
            protocol,
            own_port,
        })
    }

    /// The next event worth a sync; `None` when the socket failed.
    pub async fn next(&mut self) -> Option<RouteEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            let buf = &mut self.buf;
            match self
                .socket
                .read_with(|s| crate::sys::recv_datagram(s.as_fd(), buf))
                .await
            {
                Ok(_) => {}
                // The receive buffer overflowed: notifications were lost.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Some(RouteEvent::Overrun);
                }
                Err(e) => {
                    log::warn!("route monitor: {e}");
                    return None;
                }
            }
            for msg in Messages::new(&self.buf) {
                match msg {
                    Ok(msg) => {
                        let by_self = self.own_port == Some(msg.port);
                        match classify(msg.kind, msg.body, by_self, self.protocol) {
                            Ok(event) => self.pending.extend(event),
                            Err(e) => skipped(e),
                        }
                    }
                    Err(e) => {
                        // Whatever it said is lost: resync to be sure.
                        skipped(e);
                        self.pending.push_back(RouteEvent::Overrun);
                    }
                }
            }
        }
    }
}

/// The event one notification is worth, if any: a route or rule change counts only when it
/// carries `protocol` and another socket than edgenetd's own (`by_self`) made it.
fn classify(
    kind: u16,
    body: &[u8],
    by_self: bool,
    protocol: u8,
) -> Result<Option<RouteEvent>, super::codec::Malformed> {
    let owned = |p: u8| !by_self && p == protocol;
    Ok(match kind {
        route::RTM_NEWROUTE | route::RTM_DELROUTE => {
            owned(route::protocol(body)?).then_some(RouteEvent::OwnedRoute {
                removed: kind == route::RTM_DELROUTE,
            })
        }
        rule::RTM_NEWRULE | rule::RTM_DELRULE => {
            owned(rule::protocol(body)?).then_some(RouteEvent::OwnedRule {
                removed: kind == rule::RTM_DELRULE,
            })
        }
        link::RTM_NEWLINK | link::RTM_DELLINK => {
            let link = link::parse(body)?;
            Some(RouteEvent::Link {
                index: link.index,
                name: link.name,
                removed: kind == link::RTM_DELLINK,
            })
        }
        address::RTM_NEWADDR | address::RTM_DELADDR => Some(RouteEvent::Address {
            removed: kind == address::RTM_DELADDR,
        }),
        _ => None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::route::codec::nla::{put_attr, put_string};
    use crate::dataplane::route::spec::{Family, RouteSpec, RuleSpec};

    fn route_body(protocol: u8) -> Vec<u8> {
        let mut buf = Vec::new();
        let spec = RouteSpec::new("10.0.0.0/8".parse().unwrap(), protocol);
        route::put_delete(&mut buf, &spec, 1);
        buf[16..].to_vec()
    }

    #[test]
    fn only_foreign_changes_of_owned_routes_and_rules_are_events() {
        let ours = route_body(190);
        assert_eq!(
            classify(route::RTM_NEWROUTE, &ours, false, 190),
            Ok(Some(RouteEvent::OwnedRoute { removed: false }))
        );
        assert_eq!(
            classify(route::RTM_DELROUTE, &ours, false, 190),
            Ok(Some(RouteEvent::OwnedRoute { removed: true }))
        );
        assert_eq!(classify(route::RTM_NEWROUTE, &ours, true, 190), Ok(None));
        assert_eq!(
            classify(route::RTM_NEWROUTE, &route_body(4), false, 190),
            Ok(None)
        );
        assert!(classify(route::RTM_NEWROUTE, &ours[..4], false, 190).is_err());

        let mut rule = Vec::new();
        rule::put(
            &mut rule,
            rule::RTM_NEWRULE,
            &RuleSpec::new(Family::Ipv4, 9, 100, 190),
            0,
            1,
        );
        assert_eq!(
            classify(rule::RTM_DELRULE, &rule[16..], false, 190),
            Ok(Some(RouteEvent::OwnedRule { removed: true }))
        );
        assert_eq!(classify(rule::RTM_NEWRULE, &rule[16..], false, 7), Ok(None));
        // A rule without FRA_PROTOCOL is nobody's.
        assert_eq!(classify(rule::RTM_NEWRULE, &[2; 12], false, 190), Ok(None));
    }

    #[test]
    fn link_and_address_changes_are_always_events() {
        let mut link = vec![0u8; 16];
        link[4..8].copy_from_slice(&3u32.to_ne_bytes());
        put_string(&mut link, 3, "wan0");
        assert_eq!(
            classify(link::RTM_DELLINK, &link, true, 190),
            Ok(Some(RouteEvent::Link {
                index: 3,
                name: Some("wan0".into()),
                removed: true
            }))
        );
        let mut addr = vec![2, 24, 0, 0, 3, 0, 0, 0];
        put_attr(&mut addr, 2, &[192, 0, 2, 1]);
        assert_eq!(
            classify(address::RTM_NEWADDR, &addr, false, 190),
            Ok(Some(RouteEvent::Address { removed: false }))
        );
        assert_eq!(classify(99, &addr, false, 190), Ok(None));
    }
}
