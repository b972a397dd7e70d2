//! Route write requests encoded straight into a datagram buffer, and the kernel's answers
//! read straight from one.
//!
//! Why not `netlink-packet-route` for every write: each request there is a `RouteMessage`
//! with a vector of attribute enums, sized and emitted attribute by attribute, then parsed
//! back on the answer side; at 100,000 routes that was most of the controller's own time in
//! a cold sync. The routes almost every config holds (one gateway of the route's family
//! and/or one device, any type, table, metric, source) are written here field by field, with
//! the bytes `route_add_message`/`route_delete_message` serialize to (a test holds them
//! equal); anything else (multipath, `mtu`, an IPv6 gateway for an IPv4 route) and every rule
//! is serialized through the library into the same buffer.

use std::net::IpAddr;

use rtnetlink::packet_core::{
    NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage,
};
use rtnetlink::packet_route::RouteNetlinkMessage;

use super::RouteError;
use super::message::{Links, route_add_message, route_delete_message, rule_message};
use super::socket::{RouteWrite, RuleWrite};
use super::spec::{Family, RouteSpec, RouteType};

/// `NLMSG_ERROR`: an ack (error 0) or an error.
pub const NLMSG_ERROR: u16 = 2;
const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_TABLE: u16 = 15;
const RTM_F_ONLINK: u32 = 4;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_LINK: u8 = 253;
const RT_SCOPE_NOWHERE: u8 = 255;

/// The netlink header's length.
pub const HEADER_LEN: usize = 16;

/// Appends the request for one route write (sequence number `seq`, no ack asked: the
/// kernel answers a request without `NLM_F_ACK` only when it fails); the devices are
/// resolved through `links`.
pub fn route_write<'a>(
    buf: &mut Vec<u8>,
    write: &RouteWrite<'a>,
    links: &mut Devices<'a>,
    seq: u32,
) -> Result<(), RouteError> {
    let (spec, kind, flags) = match *write {
        RouteWrite::Add(spec) => (spec, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL),
        RouteWrite::Replace(spec) => (spec, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE),
        RouteWrite::Delete(spec) => (spec, RTM_DELROUTE, 0),
    };
    if !plain(spec) {
        let body = match *write {
            RouteWrite::Delete(spec) => RouteNetlinkMessage::DelRoute(route_delete_message(spec)),
            _ => RouteNetlinkMessage::NewRoute(route_add_message(spec, links.links)?),
        };
        serialize(buf, body, flags, seq);
        return Ok(());
    }
    let oif = match (&spec.dev, kind, spec.kind.forwards()) {
        (Some(dev), RTM_NEWROUTE, true) => Some(
            links
                .index(dev)
                .ok_or_else(|| RouteError::NoSuchDevice(dev.clone()))?,
        ),
        _ => None,
    };
    let start = buf.len();
    buf.reserve(96);
    // Header, its length patched at the end.
    put_u32(buf, 0);
    put_u16(buf, kind);
    put_u16(buf, NLM_F_REQUEST | flags);
    put_u32(buf, seq);
    put_u32(buf, 0);
    let family = spec.family();
    let (scope, rtm_type, rtm_flags) = if kind == RTM_DELROUTE {
        (RT_SCOPE_NOWHERE, 0, 0)
    } else {
        let forwards = spec.kind.forwards();
        let scope = if family == Family::Ipv4 && forwards && spec.via.is_none() {
            RT_SCOPE_LINK
        } else {
            RT_SCOPE_UNIVERSE
        };
        let onlink = if forwards && spec.onlink {
            RTM_F_ONLINK
        } else {
            0
        };
        (scope, type_byte(spec.kind), onlink)
    };
    buf.extend_from_slice(&[
        match family {
            Family::Ipv4 => libc::AF_INET as u8,
            Family::Ipv6 => libc::AF_INET6 as u8,
        },
        spec.dst.prefix_len(),
        0,
        0,
        if spec.table < 256 {
            spec.table as u8
        } else {
            0
        },
        spec.protocol,
        scope,
        rtm_type,
    ]);
    put_u32(buf, rtm_flags);
    if spec.dst.prefix_len() > 0 {
        put_addr(buf, RTA_DST, spec.dst.addr());
    }
    put_attr_u32(buf, RTA_TABLE, spec.table);
    put_attr_u32(buf, RTA_PRIORITY, spec.metric);
    let gateway = kind == RTM_DELROUTE || spec.kind.forwards();
    if let (Some(via), true) = (spec.via, gateway) {
        put_addr(buf, RTA_GATEWAY, via);
    }
    if let Some(oif) = oif {
        put_attr_u32(buf, RTA_OIF, oif);
    }
    if let (Some(src), true) = (spec.src, kind == RTM_NEWROUTE) {
        put_addr(buf, RTA_PREFSRC, src);
    }
    let len = (buf.len() - start) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
    Ok(())
}

/// The links, with the last device looked up remembered: the routes of a config mostly
/// share one or two devices, and a name lookup hashes the name.
pub struct Devices<'a> {
    links: &'a Links,
    last: Option<(&'a str, u32)>,
}

impl<'a> Devices<'a> {
    /// Looks devices up in `links`.
    pub fn new(links: &'a Links) -> Devices<'a> {
        Devices { links, last: None }
    }

    /// The index of device `name`.
    pub fn index(&mut self, name: &'a str) -> Option<u32> {
        if let Some((last, index)) = self.last
            && last == name
        {
            return Some(index);
        }
        let index = self.links.index(name)?;
        self.last = Some((name, index));
        Some(index)
    }
}

/// Appends the request for one rule write (serialized by the library; rules are few).
pub fn rule_write(buf: &mut Vec<u8>, write: &RuleWrite<'_>, seq: u32) {
    let (body, flags) = match *write {
        RuleWrite::Add(spec) => (
            RouteNetlinkMessage::NewRule(rule_message(spec)),
            NLM_F_CREATE | NLM_F_EXCL,
        ),
        RuleWrite::Delete(spec) => (RouteNetlinkMessage::DelRule(rule_message(spec)), 0),
    };
    serialize(buf, body, flags, seq);
}

/// True for a route written field by field here: no multipath, no metrics, and a gateway
/// (if any) of the route's own family.
fn plain(spec: &RouteSpec) -> bool {
    spec.nexthops.is_empty()
        && spec.mtu.is_none()
        && spec
            .via
            .is_none_or(|via| Family::of_addr(&via) == spec.family())
}

fn type_byte(kind: RouteType) -> u8 {
    match kind {
        RouteType::Unicast => 1,
        RouteType::Blackhole => 6,
        RouteType::Unreachable => 7,
        RouteType::Prohibit => 8,
        RouteType::Throw => 9,
        RouteType::Other(n) => n,
    }
}

fn serialize(buf: &mut Vec<u8>, body: RouteNetlinkMessage, flags: u16, seq: u32) {
    let mut msg = NetlinkMessage::from(body);
    msg.header.flags = NLM_F_REQUEST | flags;
    msg.header.sequence_number = seq;
    msg.finalize();
    let start = buf.len();
    buf.resize(start + msg.buffer_len(), 0);
    msg.serialize(&mut buf[start..]);
    // Messages of one datagram start 4-byte aligned.
    buf.resize(buf.len().div_ceil(4) * 4, 0);
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
fn put_u16(buf: &mut Vec<u8>, v: u16) {
    buf.extend_from_slice(&v.to_ne_bytes());
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_ne_bytes());
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
fn put_attr_u32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    put_u16(buf, 8);
    put_u16(buf, kind);
    put_u32(buf, v);
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
fn put_addr(buf: &mut Vec<u8>, kind: u16, addr: IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            put_u16(buf, 8);
            put_u16(buf, kind);
            buf.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            put_u16(buf, 20);
            put_u16(buf, kind);
            buf.extend_from_slice(&a.octets());
        }
    }
}

/// One answer of the kernel to a write: its sequence number, and the error (`None` = ack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The sequence number of the request answered.
    pub seq: u32,
    /// Why it failed; `None` for an ack.
    pub error: Option<RouteError>,
}

/// Every `NLMSG_ERROR` answer in one received datagram (other messages are skipped; a
/// truncated message ends the datagram).
pub fn answers(datagram: &[u8]) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while rest.len() >= HEADER_LEN {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < HEADER_LEN || len > rest.len() {
            break;
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let flags = u16::from_ne_bytes([rest[6], rest[7]]);
        let seq = u32::from_ne_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let payload = &rest[HEADER_LEN..len];
        if kind == NLMSG_ERROR && payload.len() >= 4 {
            let code = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let error = std::num::NonZeroI32::new(code)
                .map(|code| super::socket::kernel_error(code, &payload[4..], flags));
            out.push(Answer { seq, error });
        }
        rest = &rest[len.div_ceil(4).saturating_mul(4).min(rest.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::NLM_F_ACK;

    fn links() -> Links {
        let mut l = Links::default();
        l.insert(1, "lo".into());
        l.insert(7, "eth1".into());
        l
    }

    /// What the library serializes for the same write (the reference).
    fn library(write: &RouteWrite<'_>, seq: u32) -> Vec<u8> {
        let (body, flags) = match *write {
            RouteWrite::Add(s) => (
                RouteNetlinkMessage::NewRoute(route_add_message(s, &links()).unwrap()),
                NLM_F_CREATE | NLM_F_EXCL,
            ),
            RouteWrite::Replace(s) => (
                RouteNetlinkMessage::NewRoute(route_add_message(s, &links()).unwrap()),
                NLM_F_CREATE | NLM_F_REPLACE,
            ),
            RouteWrite::Delete(s) => (RouteNetlinkMessage::DelRoute(route_delete_message(s)), 0),
        };
        let mut buf = Vec::new();
        serialize(&mut buf, body, flags, seq);
        buf
    }

    #[test]
    fn plain_routes_are_encoded_as_the_library_serializes_them() {
        let base = |dst: &str| RouteSpec::new(dst.parse().unwrap(), 190);
        let specs = [
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                dev: Some("eth1".into()),
                ..base("10.0.0.1/32")
            },
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                ..base("10.0.0.16/28")
            },
            RouteSpec {
                dev: Some("eth1".into()),
                table: 1000,
                metric: 100,
                src: Some("192.0.2.1".parse().unwrap()),
                ..base("0.0.0.0/0")
            },
            RouteSpec {
                via: Some("192.0.2.2".parse().unwrap()),
                onlink: true,
                table: 100,
                ..base("10.9.0.0/16")
            },
            RouteSpec {
                kind: RouteType::Blackhole,
                ..base("2001:db8::/32")
            },
            RouteSpec {
                kind: RouteType::Throw,
                table: 7,
                ..base("10.0.0.0/8")
            },
            RouteSpec {
                via: Some("2001:db8::1".parse().unwrap()),
                dev: Some("lo".into()),
                src: Some("2001:db8::2".parse().unwrap()),
                metric: 5,
                ..base("2001:db8:5::/48")
            },
            RouteSpec {
                kind: RouteType::Other(2),
                ..base("10.1.0.0/16")
            },
        ];
        for spec in &specs {
            let l = links();
            for write in [
                RouteWrite::Add(spec),
                RouteWrite::Replace(spec),
                RouteWrite::Delete(spec),
            ] {
                let mut ours = Vec::new();
                route_write(&mut ours, &write, &mut Devices::new(&l), 77).unwrap();
                assert_eq!(ours, library(&write, 77), "{write:?}");
            }
        }
        let l = links();
        let missing = RouteSpec {
            dev: Some("eth9".into()),
            ..base("10.0.0.0/8")
        };
        assert_eq!(
            route_write(
                &mut Vec::new(),
                &RouteWrite::Add(&missing),
                &mut Devices::new(&l),
                1
            ),
            Err(RouteError::NoSuchDevice("eth9".into()))
        );
        // A delete names no device, so a missing one does not matter.
        assert!(
            route_write(
                &mut Vec::new(),
                &RouteWrite::Delete(&missing),
                &mut Devices::new(&l),
                1
            )
            .is_ok()
        );
    }

    #[test]
    fn answers_map_acks_and_errors_to_their_sequence_numbers() {
        let mut datagram = Vec::new();
        for (seq, code) in [(5u32, 0i32), (6, -libc::EEXIST)] {
            let mut msg = vec![0u8; HEADER_LEN];
            msg[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
            msg[8..12].copy_from_slice(&seq.to_ne_bytes());
            msg.extend_from_slice(&code.to_ne_bytes());
            // The capped echo of the request.
            msg.extend_from_slice(&[0u8; HEADER_LEN]);
            let len = msg.len() as u32;
            msg[..4].copy_from_slice(&len.to_ne_bytes());
            msg[6..8].copy_from_slice(&(rtnetlink::packet_core::NLM_F_CAPPED).to_ne_bytes());
            datagram.extend(msg);
        }
        assert_eq!(
            answers(&datagram),
            [
                Answer {
                    seq: 5,
                    error: None
                },
                Answer {
                    seq: 6,
                    error: Some(RouteError::Kernel {
                        errno: libc::EEXIST,
                        message: None
                    })
                }
            ]
        );
        for cut in 0..datagram.len() {
            assert!(answers(&datagram[..cut]).len() <= 2);
        }
        let _ = NLM_F_ACK;
    }
}
