//! Translation between [`RouteSpec`]/[`RuleSpec`] and rtnetlink messages, both ways.
//!
//! Requests are built the way `ip route`/`ip rule` build them (header table for ids < 256 plus
//! `RTA_TABLE`, link scope for an IPv4 route without gateway, `RTA_DST` only for a non-zero
//! prefix), so a route edgenetd installs looks exactly like one typed by hand.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteNextHop,
    RouteNextHopFlags, RouteProtocol, RouteScope, RouteType as NlRouteType, RouteVia,
};
use rtnetlink::packet_route::rule::{RuleAction as NlRuleAction, RuleAttribute, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use super::RouteError;
use super::spec::{Family, NextHop, RouteSpec, RouteType, RuleAction, RuleSpec};

/// The kernel's interfaces, by name and by index, as one dump found them.
#[derive(Debug, Clone, Default)]
pub struct Links {
    by_name: HashMap<String, u32>,
    by_index: HashMap<u32, String>,
}

impl Links {
    /// Records one interface.
    pub fn insert(&mut self, index: u32, name: String) {
        self.by_name.insert(name.clone(), index);
        self.by_index.insert(index, name);
    }

    /// The index of interface `name`.
    pub fn index(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The name of interface `index`.
    pub fn name(&self, index: u32) -> Option<&str> {
        self.by_index.get(&index).map(String::as_str)
    }

    /// Number of interfaces.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when no interface is known.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    fn resolve(&self, name: &str) -> Result<u32, RouteError> {
        self.index(name)
            .ok_or_else(|| RouteError::NoSuchDevice(name.to_string()))
    }

    fn name_of(&self, index: u32) -> String {
        match self.name(index) {
            Some(name) => name.to_string(),
            None => format!("if{index}"),
        }
    }
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
                .push(RouteAttribute::Oif(links.resolve(dev)?));
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
                    nh.interface_index = links.resolve(dev)?;
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

/// What a kernel answer (one datagram: netlink messages back to back) holds, read the way a
/// dump's replies are: each route and rule message turned into its spec, anything else or
/// anything that does not decode skipped. A pure entry point, so the fuzz target can hand it
/// arbitrary bytes; the sockets get their messages already decoded by `rtnetlink`.
pub fn specs_in_datagram(bytes: &[u8], links: &Links) -> (Vec<RouteSpec>, Vec<RuleSpec>) {
    let (mut routes, mut rules) = (Vec::new(), Vec::new());
    let mut rest = bytes;
    while rest.len() >= 16 {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len < 16 || len > rest.len() {
            break;
        }
        if let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..len])
            && let NetlinkPayload::InnerMessage(inner) = msg.payload
        {
            match inner {
                RouteNetlinkMessage::NewRoute(m) => routes.extend(route_from_message(&m, links)),
                RouteNetlinkMessage::NewRule(m) => rules.extend(rule_from_message(&m)),
                _ => {}
            }
        }
        // Messages are padded to 4 bytes; the last one may end the datagram unpadded.
        rest = &rest[(len.div_ceil(4) * 4).min(rest.len())..];
    }
    (routes, rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        let mut l = Links::default();
        l.insert(1, "lo".into());
        l.insert(7, "eth1".into());
        l
    }

    #[test]
    fn add_message_round_trips_through_the_dump_parser() {
        let spec = RouteSpec {
            via: Some("192.168.1.1".parse().unwrap()),
            dev: Some("eth1".into()),
            table: 1000,
            metric: 100,
            src: Some("192.168.1.2".parse().unwrap()),
            onlink: true,
            mtu: Some(1400),
            ..RouteSpec::new("10.20.0.0/16".parse().unwrap(), 190)
        };
        let msg = route_add_message(&spec, &links()).unwrap();
        assert_eq!(msg.header.table, 0, "tables >= 256 go in RTA_TABLE only");
        assert_eq!(msg.header.scope, RouteScope::Universe);
        assert_eq!(route_from_message(&msg, &links()), Some(spec));
    }

    #[test]
    fn a_datagram_of_route_and_rule_messages_gives_their_specs_and_garbage_gives_none() {
        let route = RouteSpec {
            via: Some("192.168.1.1".parse().unwrap()),
            dev: Some("eth1".into()),
            ..RouteSpec::new("10.20.0.0/16".parse().unwrap(), 190)
        };
        let mut rule = RuleSpec::new(Family::Ipv4, 100, 1000, 190);
        rule.from = Some("10.0.0.0/8".parse().unwrap());
        let mut bytes = Vec::new();
        for inner in [
            RouteNetlinkMessage::NewRoute(route_add_message(&route, &links()).unwrap()),
            RouteNetlinkMessage::NewRule(rule_message(&rule)),
        ] {
            let mut msg = NetlinkMessage::from(inner);
            msg.finalize();
            let mut buf = vec![0; msg.buffer_len().div_ceil(4) * 4];
            msg.serialize(&mut buf);
            bytes.extend(buf);
        }
        let (routes, rules) = specs_in_datagram(&bytes, &links());
        assert_eq!(routes, vec![route]);
        assert_eq!(rules, vec![rule.normalized()]);
        for cut in 0..bytes.len() {
            let (routes, rules) = specs_in_datagram(&bytes[..cut], &links());
            assert!(routes.len() + rules.len() <= 2);
        }
    }

    #[test]
    fn real_kernel_dumps_give_the_seed_routes_and_rules() {
        let read = |name: &str| {
            let path = format!(
                "{}/fuzz/corpus/route_dump/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            std::fs::read(path).unwrap()
        };
        let (routes, _) = specs_in_datagram(&read("routes-v4-0"), &Links::default());
        let ours: Vec<_> = routes.iter().filter(|r| r.protocol == 190).collect();
        assert_eq!(ours.len(), 3, "{routes:?}");
        let (_, rules) = specs_in_datagram(&read("rules-v4-0"), &Links::default());
        assert!(
            rules.iter().any(|r| r.priority == 100 && r.table == 1000),
            "{rules:?}"
        );
    }

    #[test]
    fn multipath_weights_are_stored_minus_one() {
        let spec = RouteSpec {
            nexthops: vec![
                NextHop {
                    via: Some("2001:db8::1".parse().unwrap()),
                    dev: Some("eth1".into()),
                    weight: 1,
                    onlink: false,
                },
                NextHop {
                    via: Some("2001:db8::2".parse().unwrap()),
                    dev: None,
                    weight: 256,
                    onlink: true,
                },
            ],
            ..RouteSpec::new("2001:db8:100::/48".parse().unwrap(), 190)
        };
        let msg = route_add_message(&spec, &links()).unwrap();
        let hops = msg
            .attributes
            .iter()
            .find_map(|a| match a {
                RouteAttribute::MultiPath(h) => Some(h.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!((hops[0].hops, hops[1].hops), (0, 255));
        assert_eq!(route_from_message(&msg, &links()), Some(spec));
    }

    #[test]
    fn a_device_route_without_gateway_gets_link_scope_and_a_missing_device_is_an_error() {
        let spec = RouteSpec {
            dev: Some("eth1".into()),
            ..RouteSpec::new("10.9.0.0/24".parse().unwrap(), 190)
        };
        let msg = route_add_message(&spec, &links()).unwrap();
        assert_eq!(msg.header.scope, RouteScope::Link);
        let missing = RouteSpec {
            dev: Some("eth9".into()),
            ..spec
        };
        assert_eq!(
            route_add_message(&missing, &links())
                .unwrap_err()
                .to_string(),
            "device eth9 does not exist"
        );
    }

    #[test]
    fn delete_names_the_protocol_and_wildcards_scope_and_type() {
        let spec = RouteSpec {
            kind: RouteType::Blackhole,
            ..RouteSpec::new("0.0.0.0/0".parse().unwrap(), 190)
        };
        let msg = route_delete_message(&spec);
        assert_eq!(msg.header.protocol, RouteProtocol::Other(190));
        assert_eq!(msg.header.scope, RouteScope::NoWhere);
        assert_eq!(msg.header.kind, NlRouteType::Unspec);
        assert!(
            !msg.attributes
                .iter()
                .any(|a| matches!(a, RouteAttribute::Destination(_))),
            "a default route carries no RTA_DST"
        );
    }

    #[test]
    fn rule_round_trips() {
        let spec = RuleSpec {
            from: Some("10.0.5.0/24".parse().unwrap()),
            iif: Some("eth1".into()),
            fwmark: Some(7),
            fwmask: Some(0xff),
            ..RuleSpec::new(Family::Ipv4, 1000, 100, 190)
        };
        assert_eq!(rule_from_message(&rule_message(&spec)), Some(spec));
    }
}
