//! The reference for the codec's tests: the translation between specs and
//! `netlink-packet-route` messages edgenetd used before it had a codec of its own (test
//! builds only, so the library's parse and emit code is never linked into the daemon). The
//! codec must emit the bytes the library serializes these messages to, and read back from any
//! bytes what the library's parse gives.

use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteNextHop,
    RouteNextHopFlags, RouteProtocol, RouteScope, RouteType as NlRouteType, RouteVia,
};
use rtnetlink::packet_route::rule::{RuleAction as NlRuleAction, RuleAttribute, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::dataplane::route::RouteError;
use crate::dataplane::route::message::Links;
use crate::dataplane::route::spec::{Family, NextHop, RouteSpec, RouteType, RuleAction, RuleSpec};

fn resolve(links: &Links, name: &str) -> Result<u32, RouteError> {
    links
        .index(name)
        .ok_or_else(|| RouteError::NoSuchDevice(name.to_string()))
}

fn family_nl(family: Family) -> AddressFamily {
    match family {
        Family::Ipv4 => AddressFamily::Inet,
        Family::Ipv6 => AddressFamily::Inet6,
    }
}

fn kind_nl(kind: RouteType) -> NlRouteType {
    match kind {
        RouteType::Unicast => NlRouteType::Unicast,
        RouteType::Blackhole => NlRouteType::BlackHole,
        RouteType::Unreachable => NlRouteType::Unreachable,
        RouteType::Prohibit => NlRouteType::Prohibit,
        RouteType::Throw => NlRouteType::Throw,
        RouteType::Other(n) => NlRouteType::from(n),
    }
}

fn kind_from_nl(kind: NlRouteType) -> RouteType {
    match kind {
        NlRouteType::Unicast => RouteType::Unicast,
        NlRouteType::BlackHole => RouteType::Blackhole,
        NlRouteType::Unreachable => RouteType::Unreachable,
        NlRouteType::Prohibit => RouteType::Prohibit,
        NlRouteType::Throw => RouteType::Throw,
        other => RouteType::Other(u8::from(other)),
    }
}

fn header_table(table: u32) -> u8 {
    if table < 256 {
        table as u8
    } else {
        RouteHeader::RT_TABLE_UNSPEC
    }
}

fn gateway_attr(family: Family, via: IpAddr) -> RouteAttribute {
    match (family, via) {
        (Family::Ipv4, IpAddr::V6(v6)) => RouteAttribute::Via(RouteVia::Inet6(v6)),
        (_, via) => RouteAttribute::Gateway(RouteAddress::from(via)),
    }
}

fn header_for(spec: &RouteSpec) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = family_nl(spec.family());
    msg.header.destination_prefix_length = spec.dst.prefix_len();
    msg.header.table = header_table(spec.table);
    msg.header.protocol = RouteProtocol::from(spec.protocol);
    if spec.dst.prefix_len() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(
                spec.dst.addr(),
            )));
    }
    msg.attributes.push(RouteAttribute::Table(spec.table));
    msg.attributes.push(RouteAttribute::Priority(spec.metric));
    msg
}

/// The `RTM_NEWROUTE` body that installs `spec` (devices resolved through `links`).
pub fn route_add_message(spec: &RouteSpec, links: &Links) -> Result<RouteMessage, RouteError> {
    let family = spec.family();
    let mut msg = header_for(spec);
    msg.header.kind = kind_nl(spec.kind);
    let has_gateway = spec.via.is_some() || !spec.nexthops.is_empty();
    msg.header.scope = if family == Family::Ipv4 && spec.kind.forwards() && !has_gateway {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    if spec.kind.forwards() {
        if spec.onlink {
            msg.header.flags.insert(RouteFlags::Onlink);
        }
        if let Some(via) = spec.via {
            msg.attributes.push(gateway_attr(family, via));
        }
        if let Some(dev) = &spec.dev {
            msg.attributes
                .push(RouteAttribute::Oif(resolve(links, dev)?));
        }
        if !spec.nexthops.is_empty() {
            let mut hops = Vec::with_capacity(spec.nexthops.len());
            for hop in &spec.nexthops {
                let mut nh = RouteNextHop::default();
                nh.hops = (hop.weight.clamp(1, 256) - 1) as u8;
                if hop.onlink {
                    nh.flags.insert(RouteNextHopFlags::Onlink);
                }
                if let Some(dev) = &hop.dev {
                    nh.interface_index = resolve(links, dev)?;
                }
                if let Some(via) = hop.via {
                    nh.attributes.push(gateway_attr(family, via));
                }
                hops.push(nh);
            }
            msg.attributes.push(RouteAttribute::MultiPath(hops));
        }
    }
    if let Some(src) = spec.src {
        msg.attributes
            .push(RouteAttribute::PrefSource(RouteAddress::from(src)));
    }
    if let Some(mtu) = spec.mtu {
        msg.attributes
            .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
    }
    Ok(msg)
}

/// The `RTM_DELROUTE` body that removes exactly `spec`: its key, its protocol (so a route of
/// another owner with the same key is never matched) and, for a single-path route, its gateway.
pub fn route_delete_message(spec: &RouteSpec) -> RouteMessage {
    let mut msg = header_for(spec);
    msg.header.scope = RouteScope::NoWhere;
    msg.header.kind = NlRouteType::Unspec;
    if let (Some(via), true) = (spec.via, spec.nexthops.is_empty()) {
        msg.attributes.push(gateway_attr(spec.family(), via));
    }
    msg
}

/// The `RTM_GETROUTE` dump request for every route with `protocol` in every table of
/// `family`; the kernel filters by protocol itself when the socket has strict checking on.
pub fn route_dump_message(family: Family, protocol: u8) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = family_nl(family);
    msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
    msg.header.protocol = RouteProtocol::from(protocol);
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = NlRouteType::Unspec;
    msg
}

fn addr_of(addr: &RouteAddress) -> Option<IpAddr> {
    match addr {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

fn via_of(via: &RouteVia) -> Option<IpAddr> {
    match via {
        RouteVia::Inet(a) => Some(IpAddr::V4(*a)),
        RouteVia::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// The spec of a dumped route, or `None` for what is not an IPv4/IPv6 route (or is a cached
/// clone, which a dump without `RTM_F_CLONED` does not return anyway).
pub fn route_from_message(msg: &RouteMessage, links: &Links) -> Option<RouteSpec> {
    let h = &msg.header;
    let family = match h.address_family {
        AddressFamily::Inet => Family::Ipv4,
        AddressFamily::Inet6 => Family::Ipv6,
        _ => return None,
    };
    if h.flags.contains(RouteFlags::Cloned) {
        return None;
    }
    let mut dst_addr: IpAddr = match family {
        Family::Ipv4 => IpAddr::V4(0.into()),
        Family::Ipv6 => IpAddr::V6(0u128.into()),
    };
    let mut table = u32::from(h.table);
    let mut metric = 0;
    let mut spec_via = None;
    let mut oif = None;
    let mut src = None;
    let mut mtu = None;
    let mut nexthops = Vec::new();
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Destination(a) => dst_addr = addr_of(a)?,
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Gateway(a) => spec_via = addr_of(a),
            RouteAttribute::Via(v) => spec_via = via_of(v),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::PrefSource(a) => src = addr_of(a),
            RouteAttribute::Metrics(metrics) => {
                for m in metrics {
                    if let RouteMetric::Mtu(v) = m {
                        mtu = Some(*v);
                    }
                }
            }
            RouteAttribute::MultiPath(hops) => {
                for nh in hops {
                    let mut via = None;
                    for a in &nh.attributes {
                        match a {
                            RouteAttribute::Gateway(g) => via = addr_of(g),
                            RouteAttribute::Via(v) => via = via_of(v),
                            _ => {}
                        }
                    }
                    nexthops.push(NextHop {
                        via,
                        dev: (nh.interface_index != 0).then(|| links.name_of(nh.interface_index)),
                        weight: u16::from(nh.hops) + 1,
                        onlink: nh.flags.contains(RouteNextHopFlags::Onlink),
                    });
                }
            }
            _ => {}
        }
    }
    let dst = IpNet::new(dst_addr, h.destination_prefix_length).ok()?;
    Some(RouteSpec {
        dst,
        table,
        metric,
        kind: kind_from_nl(h.kind),
        via: spec_via,
        dev: oif.map(|i| links.name_of(i)),
        src,
        onlink: nexthops.is_empty() && h.flags.contains(RouteFlags::Onlink),
        mtu,
        nexthops,
        protocol: u8::from(h.protocol),
    })
}

/// The `RTM_NEWRULE`/`RTM_DELRULE` body for `spec` (a delete matches every attribute given,
/// including the protocol, so it never removes another owner's rule).
pub fn rule_message(spec: &RuleSpec) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = family_nl(spec.family);
    msg.header.table = header_table(spec.table);
    msg.header.action = match spec.action {
        RuleAction::Lookup => NlRuleAction::ToTable,
        RuleAction::Other(a) => NlRuleAction::from(a),
    };
    msg.attributes.push(RuleAttribute::Priority(spec.priority));
    if let Some(from) = spec.from {
        msg.header.src_len = from.prefix_len();
        msg.attributes.push(RuleAttribute::Source(from.addr()));
    }
    if let Some(to) = spec.to {
        msg.header.dst_len = to.prefix_len();
        msg.attributes.push(RuleAttribute::Destination(to.addr()));
    }
    if let Some(iif) = &spec.iif {
        msg.attributes.push(RuleAttribute::Iifname(iif.clone()));
    }
    if let Some(oif) = &spec.oif {
        msg.attributes.push(RuleAttribute::Oifname(oif.clone()));
    }
    if let Some(mark) = spec.fwmark {
        msg.attributes.push(RuleAttribute::FwMark(mark));
    }
    if let Some(mask) = spec.fwmask {
        msg.attributes.push(RuleAttribute::FwMask(mask));
    }
    if spec.action == RuleAction::Lookup {
        msg.attributes.push(RuleAttribute::Table(spec.table));
    }
    msg.attributes
        .push(RuleAttribute::Protocol(RouteProtocol::from(spec.protocol)));
    msg
}

/// The `RTM_GETRULE` dump request for `family` (rule dumps cannot be filtered in the kernel).
pub fn rule_dump_message(family: Family) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = family_nl(family);
    msg
}

/// The spec of a dumped rule.
pub fn rule_from_message(msg: &RuleMessage) -> Option<RuleSpec> {
    let h = &msg.header;
    let family = match h.family {
        AddressFamily::Inet => Family::Ipv4,
        AddressFamily::Inet6 => Family::Ipv6,
        _ => return None,
    };
    let mut spec = RuleSpec::new(family, 0, u32::from(h.table), 0);
    spec.action = match h.action {
        NlRuleAction::ToTable => RuleAction::Lookup,
        other => RuleAction::Other(u8::from(other)),
    };
    for attr in &msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => spec.priority = *p,
            RuleAttribute::Source(a) => spec.from = IpNet::new(*a, h.src_len).ok(),
            RuleAttribute::Destination(a) => spec.to = IpNet::new(*a, h.dst_len).ok(),
            RuleAttribute::Iifname(n) => spec.iif = Some(n.clone()),
            RuleAttribute::Oifname(n) => spec.oif = Some(n.clone()),
            RuleAttribute::FwMark(m) => spec.fwmark = Some(*m),
            RuleAttribute::FwMask(m) => spec.fwmask = Some(*m),
            RuleAttribute::Table(t) => spec.table = *t,
            RuleAttribute::Protocol(p) => spec.protocol = u8::from(*p),
            _ => {}
        }
    }
    if spec.action != RuleAction::Lookup {
        spec.table = 0;
    }
    Some(spec.normalized())
}

/// The library's serialization of `body` as one request (padded, as in a datagram).
pub fn serialize(body: RouteNetlinkMessage, flags: u16, seq: u32) -> Vec<u8> {
    let mut msg = NetlinkMessage::from(body);
    msg.header.flags = rtnetlink::packet_core::NLM_F_REQUEST | flags;
    msg.header.sequence_number = seq;
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf.resize(buf.len().div_ceil(4) * 4, 0);
    buf
}

/// The library's reading of one message: the route or rule it holds, if it parses.
pub fn parse(message: &[u8], links: &Links) -> (Option<RouteSpec>, Option<RuleSpec>) {
    match NetlinkMessage::<RouteNetlinkMessage>::deserialize(message).map(|m| m.payload) {
        Ok(NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(m))) => {
            (route_from_message(&m, links), None)
        }
        Ok(NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRule(m))) => {
            (None, rule_from_message(&m))
        }
        _ => (None, None),
    }
}
