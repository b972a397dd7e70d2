//! Routes (`struct rtmsg` and its attributes): `RTM_NEWROUTE`/`RTM_DELROUTE` requests from a
//! [`RouteSpec`], the `RTM_GETROUTE` dump request, and a dumped route back to its spec.
//!
//! Requests are built the way `ip route` builds them (header table for ids < 256 plus
//! `RTA_TABLE`, link scope for an IPv4 route without gateway, `RTA_DST` only for a non-zero
//! prefix), so a route edgenetd installs looks exactly like one typed by hand.

use std::net::IpAddr;

use ipnet::IpNet;

use super::header::{self, NLM_F_DUMP};
use super::nla::{
    Attrs, as_addr, as_u32, begin_nested, end_nested, put_addr, put_attr_u32, put_u16, put_u32,
    u16_at, u32_at,
};
use super::{AF_INET, AF_INET6, Malformed};
use crate::dataplane::route::RouteError;
use crate::dataplane::route::message::Links;
use crate::dataplane::route::spec::{Family, NextHop, RouteSpec, RouteType};

/// `RTM_NEWROUTE`.
pub const RTM_NEWROUTE: u16 = 24;
/// `RTM_DELROUTE`.
pub const RTM_DELROUTE: u16 = 25;
/// `RTM_GETROUTE`.
pub const RTM_GETROUTE: u16 = 26;
const RTMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTAX_MTU: u16 = 2;
const RTM_F_ONLINK: u32 = 4;
/// A cached clone, not a route anybody added (only in dumps that ask for them).
const RTM_F_CLONED: u32 = 0x200;
const RTNH_F_ONLINK: u8 = 4;
const RTNH_LEN: usize = 8;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_LINK: u8 = 253;
const RT_SCOPE_NOWHERE: u8 = 255;

fn family_byte(family: Family) -> u8 {
    match family {
        Family::Ipv4 => AF_INET,
        Family::Ipv6 => AF_INET6,
    }
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

fn type_of(byte: u8) -> RouteType {
    match byte {
        1 => RouteType::Unicast,
        6 => RouteType::Blackhole,
        7 => RouteType::Unreachable,
        8 => RouteType::Prohibit,
        9 => RouteType::Throw,
        n => RouteType::Other(n),
    }
}

/// The header's table byte: ids from 256 on live in `RTA_TABLE` only (`RT_TABLE_UNSPEC` here).
pub(super) fn header_table(table: u32) -> u8 {
    if table < 256 { table as u8 } else { 0 }
}

/// `struct rtmsg`: family, prefix length, table, protocol, scope, type, flags.
fn put_rtmsg(buf: &mut Vec<u8>, spec: &RouteSpec, scope: u8, kind: u8, flags: u32) {
    buf.extend_from_slice(&[
        family_byte(spec.family()),
        spec.dst.prefix_len(),
        0,
        0,
        header_table(spec.table),
        spec.protocol,
        scope,
        kind,
    ]);
    put_u32(buf, flags);
}

/// The attributes every request for `spec` starts with: its key.
fn put_key(buf: &mut Vec<u8>, spec: &RouteSpec) {
    if spec.dst.prefix_len() > 0 {
        put_addr(buf, RTA_DST, spec.dst.addr());
    }
    put_attr_u32(buf, RTA_TABLE, spec.table);
    put_attr_u32(buf, RTA_PRIORITY, spec.metric);
}

/// A gateway: `RTA_GATEWAY` in the route's own family, `RTA_VIA` for an IPv6 gateway of an
/// IPv4 route (RFC 5549).
fn put_gateway(buf: &mut Vec<u8>, family: Family, via: IpAddr) {
    match (family, via) {
        (Family::Ipv4, IpAddr::V6(v6)) => {
            put_u16(buf, 4 + 2 + 16);
            put_u16(buf, RTA_VIA);
            put_u16(buf, libc::AF_INET6 as u16);
            buf.extend_from_slice(&v6.octets());
            super::nla::pad(buf);
        }
        (_, via) => put_addr(buf, RTA_GATEWAY, via),
    }
}

/// Appends the `RTM_NEWROUTE` request that installs `spec` (`flags`: create/exclusive or
/// create/replace), devices resolved through `device`.
pub fn put_new<'s>(
    buf: &mut Vec<u8>,
    spec: &'s RouteSpec,
    flags: u16,
    seq: u32,
    device: &mut dyn FnMut(&'s str) -> Result<u32, RouteError>,
) -> Result<(), RouteError> {
    let start = header::begin(buf, RTM_NEWROUTE, flags, seq);
    let family = spec.family();
    let forwards = spec.kind.forwards();
    let has_gateway = spec.via.is_some() || !spec.nexthops.is_empty();
    let scope = if family == Family::Ipv4 && forwards && !has_gateway {
        RT_SCOPE_LINK
    } else {
        RT_SCOPE_UNIVERSE
    };
    let onlink = if forwards && spec.onlink {
        RTM_F_ONLINK
    } else {
        0
    };
    put_rtmsg(buf, spec, scope, type_byte(spec.kind), onlink);
    put_key(buf, spec);
    if forwards {
        if let Some(via) = spec.via {
            put_gateway(buf, family, via);
        }
        if let Some(dev) = &spec.dev {
            put_attr_u32(buf, RTA_OIF, device(dev)?);
        }
        if !spec.nexthops.is_empty() {
            let multipath = begin_nested(buf, RTA_MULTIPATH);
            for hop in &spec.nexthops {
                let ifindex = match &hop.dev {
                    Some(dev) => device(dev)?,
                    None => 0,
                };
                // `struct rtnexthop`; the kernel stores weight - 1 in `rtnh_hops`.
                let at = buf.len();
                put_u16(buf, 0);
                buf.push(if hop.onlink { RTNH_F_ONLINK } else { 0 });
                buf.push((hop.weight.clamp(1, 256) - 1) as u8);
                put_u32(buf, ifindex);
                if let Some(via) = hop.via {
                    put_gateway(buf, family, via);
                }
                end_nested(buf, at);
            }
            end_nested(buf, multipath);
        }
    }
    if let Some(src) = spec.src {
        put_addr(buf, RTA_PREFSRC, src);
    }
    if let Some(mtu) = spec.mtu {
        let metrics = begin_nested(buf, RTA_METRICS);
        put_attr_u32(buf, RTAX_MTU, mtu);
        end_nested(buf, metrics);
    }
    header::end(buf, start);
    Ok(())
}

/// Appends the `RTM_DELROUTE` request that removes exactly `spec`: its key, its protocol (so
/// a route of another owner with the same key is never matched) and, for a single-path route,
/// its gateway; scope and type are wildcards.
pub fn put_delete(buf: &mut Vec<u8>, spec: &RouteSpec, seq: u32) {
    let start = header::begin(buf, RTM_DELROUTE, 0, seq);
    put_rtmsg(buf, spec, RT_SCOPE_NOWHERE, 0, 0);
    put_key(buf, spec);
    if let (Some(via), true) = (spec.via, spec.nexthops.is_empty()) {
        put_gateway(buf, spec.family(), via);
    }
    header::end(buf, start);
}

/// Appends the `RTM_GETROUTE` dump request for every route with `protocol` in every table of
/// `family`; the kernel filters by protocol itself when the socket has strict checking on.
pub fn put_dump(buf: &mut Vec<u8>, family: Family, protocol: u8, seq: u32) {
    let start = header::begin(buf, RTM_GETROUTE, NLM_F_DUMP, seq);
    buf.extend_from_slice(&[family_byte(family), 0, 0, 0, 0, protocol, 0, 0]);
    put_u32(buf, 0);
    header::end(buf, start);
}

/// The protocol (`rtm_protocol`) of a route message body.
pub fn protocol(body: &[u8]) -> Result<u8, Malformed> {
    body.get(5).copied().ok_or(Malformed("rtmsg"))
}

fn gateway(kind: u16, value: &[u8]) -> Result<Option<IpAddr>, Malformed> {
    match kind {
        RTA_GATEWAY => as_addr(value).map(Some),
        RTA_VIA if value.len() >= 2 => as_addr(&value[2..]).map(Some),
        RTA_VIA => Err(Malformed("RTA_VIA")),
        _ => Ok(None),
    }
}

fn nexthops(mut value: &[u8], links: &Links) -> Result<Vec<NextHop>, Malformed> {
    let mut hops = Vec::new();
    while !value.is_empty() {
        if value.len() < RTNH_LEN {
            return Err(Malformed("rtnexthop"));
        }
        let len = u16_at(value, 0) as usize;
        if !(RTNH_LEN..=value.len()).contains(&len) {
            return Err(Malformed("rtnexthop length"));
        }
        let index = u32_at(value, 4);
        let mut via = None;
        for attr in Attrs::new(&value[RTNH_LEN..len]) {
            let (kind, v) = attr?;
            via = gateway(kind, v)?.or(via);
        }
        hops.push(NextHop {
            via,
            dev: (index != 0).then(|| links.name_of(index)),
            weight: u16::from(value[3]) + 1,
            onlink: value[2] & RTNH_F_ONLINK != 0,
        });
        value = &value[super::nla::align(len).min(value.len())..];
    }
    Ok(hops)
}

/// The spec of a dumped route (an `RTM_NEWROUTE` body), devices named through `links`;
/// `None` for what is not an IPv4/IPv6 route, or is a cached clone.
pub fn parse(body: &[u8], links: &Links) -> Result<Option<RouteSpec>, Malformed> {
    if body.len() < RTMSG_LEN {
        return Err(Malformed("rtmsg"));
    }
    let family = match body[0] {
        AF_INET => Family::Ipv4,
        AF_INET6 => Family::Ipv6,
        _ => return Ok(None),
    };
    let flags = u32_at(body, 8);
    if flags & RTM_F_CLONED != 0 {
        return Ok(None);
    }
    let mut dst: IpAddr = match family {
        Family::Ipv4 => IpAddr::V4(0.into()),
        Family::Ipv6 => IpAddr::V6(0u128.into()),
    };
    let mut spec = RouteSpec::new(IpNet::default(), body[5]);
    spec.table = u32::from(body[4]);
    // The kernel leaves out a zero metric (IPv4).
    spec.metric = 0;
    spec.kind = type_of(body[7]);
    for attr in Attrs::new(&body[RTMSG_LEN..]) {
        let (kind, value) = attr?;
        match kind {
            RTA_DST => dst = as_addr(value)?,
            RTA_TABLE => spec.table = as_u32(value)?,
            RTA_PRIORITY => spec.metric = as_u32(value)?,
            RTA_GATEWAY | RTA_VIA => spec.via = gateway(kind, value)?,
            RTA_OIF => spec.dev = Some(links.name_of(as_u32(value)?)),
            RTA_PREFSRC => spec.src = Some(as_addr(value)?),
            RTA_METRICS => {
                for metric in Attrs::new(value) {
                    let (kind, value) = metric?;
                    if kind == RTAX_MTU {
                        spec.mtu = Some(as_u32(value)?);
                    }
                }
            }
            RTA_MULTIPATH => spec.nexthops = nexthops(value, links)?,
            _ => {}
        }
    }
    spec.onlink = spec.nexthops.is_empty() && flags & RTM_F_ONLINK != 0;
    spec.dst = IpNet::new(dst, body[1]).map_err(|_| Malformed("prefix length"))?;
    if Family::of_addr(&dst) != family {
        return Err(Malformed("RTA_DST family"));
    }
    Ok(Some(spec))
}
