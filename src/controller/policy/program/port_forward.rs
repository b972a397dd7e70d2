//! `[[policy.port_forward]]`: DNAT of the router's port (or port range) to an inner host,
//! limited to sources when `from_addresses` says so, with hairpin reflection.

use ipnet::IpNet;

use crate::config::policy::{AddressMatch, PolicyConfig, PortForward, Protocol, Zone};
use crate::controller::marks::OWN_DNAT_MARK;
use crate::dataplane::nft::ir::*;

use super::super::addresses::RouterAddresses;
use super::super::matches::{Match, addr_match, address_matches, combine, port_span, zone_match};
use super::{Builder, POSTROUTING, PREROUTING};

/// The last inner port of a port forward (its range is as long as the router's).
fn to_end(pf: &PortForward) -> u16 {
    pf.to.port() + (pf.port_end - pf.port)
}

/// The match of a port forward's traffic: to a local address, on its port(s).
fn port_forward_target(pf: &PortForward, version: IpVersion, field: Field) -> Match {
    Match {
        stmts: vec![
            Stmt::Cmp {
                left: Expr::FibDaddrType,
                op: CmpOp::Eq,
                right: Value::AddrType(ADDRTYPE_LOCAL),
            },
            port_span(field, pf.port, pf.port_end),
        ],
        version: Some(version),
    }
}

/// The match of reflected port-forward traffic: to one of the router's addresses on the
/// port forward's `from` zone (`outer`), on its port(s).
fn reflection_target(pf: &PortForward, version: IpVersion, field: Field, outer: &[IpNet]) -> Match {
    Match {
        stmts: vec![
            addr_match(false, version, outer),
            port_span(field, pf.port, pf.port_end),
        ],
        version: Some(version),
    }
}

/// The translation: to the inner host and port; for a range, port by port in order — the
/// same ports need only the address, shifted ones a map from the router's port to the inner
/// address and port.
fn dnat(pf: &PortForward, field: Field, version: IpVersion) -> Stmt {
    if pf.port == pf.port_end || pf.port == pf.to.port() {
        return Stmt::Nat {
            kind: NatKind::Dnat,
            addr: pf.to.ip(),
            port: (pf.port == pf.port_end).then_some(pf.to.port()),
        };
    }
    let addr_type = match version {
        IpVersion::V4 => DataType::Ipv4Addr,
        IpVersion::V6 => DataType::Ipv6Addr,
    };
    Stmt::NatMap {
        kind: NatKind::Dnat,
        version,
        key: Expr::Payload(field),
        map: SetRef::Anonymous {
            key: KeyType::single(DataType::InetService),
            interval: false,
            data: Some(KeyType(vec![addr_type, DataType::InetService])),
            elements: (pf.port..=pf.port_end)
                .zip(pf.to.port()..)
                .map(|(outer, inner)| {
                    Element::map(
                        ElemKey::Value(Value::Port(outer)),
                        Value::Concat(vec![Value::ip(pf.to.ip()), Value::Port(inner)]),
                    )
                })
                .collect(),
        },
        with_port: true,
    }
}

/// A port forward's DNAT after match `m`: counted, marked as edgenetd's, translated.
fn dnat_statements(m: Match, pf: &PortForward, field: Field, version: IpVersion) -> Vec<Stmt> {
    let mut stmts = m.stmts;
    stmts.push(Stmt::Counter);
    stmts.push(Stmt::CtMarkOr(OWN_DNAT_MARK));
    stmts.push(dnat(pf, field, version));
    stmts
}

/// The match of hairpinned port-forward traffic after DNAT: to the inner host and port(s).
fn hairpin_match(pf: &PortForward, version: IpVersion, field: Field) -> Match {
    Match {
        stmts: vec![
            Stmt::Flags {
                left: Expr::Ct(CtKey::Status),
                bits: Value::CtStatus(CT_STATUS_DNAT),
                negate: false,
            },
            Stmt::Cmp {
                left: Expr::Payload(if version == IpVersion::V4 {
                    Field::IpDaddr
                } else {
                    Field::Ip6Daddr
                }),
                op: CmpOp::Eq,
                right: Value::ip(pf.to.ip()),
            },
            port_span(field, pf.to.port(), to_end(pf)),
        ],
        version: Some(version),
    }
}

/// The zones a port forward reflects for: the inner host's own zone (whose networks, or
/// whose interfaces' connected networks, hold `to`: fw4's destination zone) and the
/// `reflection_zones`, never its `from` zone (that one reaches every local address anyway).
/// A guest zone with no forward to the lan never reaches a lan host through the wan address.
fn reflecting_zones<'a>(
    cfg: &'a PolicyConfig,
    pf: &PortForward,
    addrs: &RouterAddresses,
) -> Vec<&'a Zone> {
    cfg.zones
        .values()
        .filter(|z| z.name != pf.from)
        .filter(|z| pf.reflection_zones.contains(&z.name) || addrs.zone_holds(z, pf.to.ip()))
        .collect()
}

/// The source NAT of reflected traffic: masquerade, the router's address towards the inner
/// host (`reflection_src = "internal"`); or, `"external"`, SNAT to an outside address: the
/// first single address of `to_addresses` of the host's version (fw4's `src_dip`, which it
/// takes first too), else the router's lowest address on the `from` zone (`outer`). fw4
/// writes one SNAT rule per address of the zone's networks, of which the first in netifd's
/// order always wins; edgenetd reads the kernel's addresses, where that order is not to be had.
fn reflection_source(pf: &PortForward, outer: &[IpNet]) -> Stmt {
    let chosen = pf.to_addresses.iter().find_map(|a| match a {
        AddressMatch::Prefix(n)
            if n.prefix_len() == n.max_prefix_len() && n.addr().is_ipv4() == pf.to.is_ipv4() =>
        {
            Some(n.addr())
        }
        _ => None,
    });
    match chosen.or_else(|| outer.first().map(IpNet::addr)) {
        Some(addr) if pf.reflection_external => Stmt::Nat {
            kind: NatKind::Snat,
            addr,
            port: None,
        },
        _ => Stmt::Masquerade,
    }
}

impl Builder {
    /// One `[[policy.port_forward]]`: DNAT of traffic from the zone it is exposed to (to any
    /// of the router's addresses; from `from_addresses` only when given); then, with
    /// reflection, hairpin from the inner host's zone and the `reflection_zones` for traffic
    /// to the router's addresses on the `from` zone only (DNAT, and masquerade so the inner host answers through the router).
    /// The router's addresses on the other zones stay the router's: a LAN host reaches the
    /// router's own service on the router's LAN address. Every DNAT marks the connection as
    /// edgenetd's ([`OWN_DNAT_MARK`]). TCP and UDP each get their own rules.
    pub(super) fn port_forward(
        &mut self,
        cfg: &PolicyConfig,
        pf: &PortForward,
        addrs: &RouterAddresses,
    ) {
        self.group(format!("port-forward {}", pf.name), false);
        let version = if pf.to.is_ipv4() {
            IpVersion::V4
        } else {
            IpVersion::V6
        };
        let from = &cfg.zones[&pf.from];
        let sources = address_matches(&cfg.sets, true, &pf.from_addresses);
        let outer: Vec<IpNet> = addrs
            .of_zone(from)
            .into_iter()
            .filter(|a| a.is_ipv4() == pf.to.is_ipv4())
            .map(IpNet::from)
            .collect();
        for protocol in pf.protocol.each() {
            let field = if protocol == Protocol::Udp {
                Field::UdpDport
            } else {
                Field::TcpDport
            };
            // `to_addresses` (fw4's `src_dip`): those destinations, reflected or not, instead
            // of the router's addresses.
            let chosen = combine(
                &address_matches(&cfg.sets, false, &pf.to_addresses),
                &[Match {
                    stmts: vec![port_span(field, pf.port, pf.port_end)],
                    version: Some(version),
                }],
            );
            let target = if pf.to_addresses.is_empty() {
                vec![port_forward_target(pf, version, field)]
            } else {
                chosen.clone()
            };
            let from_zone = combine(&zone_match(from, true), &sources);
            for m in combine(&from_zone, &target) {
                self.rule(PREROUTING, dnat_statements(m, pf, field, version));
            }
            if !pf.reflection || (outer.is_empty() && pf.to_addresses.is_empty()) {
                continue;
            }
            let reflected = if pf.to_addresses.is_empty() {
                vec![reflection_target(pf, version, field, &outer)]
            } else {
                chosen
            };
            let inner = hairpin_match(pf, version, field);
            for z in reflecting_zones(cfg, pf, addrs) {
                let other = combine(&zone_match(z, true), &sources);
                for m in combine(&other, &reflected) {
                    self.rule(PREROUTING, dnat_statements(m, pf, field, version));
                }
                for m in combine(&other, std::slice::from_ref(&inner)) {
                    let mut stmts = m.stmts;
                    stmts.push(Stmt::Counter);
                    stmts.push(reflection_source(pf, &outer));
                    self.rule(POSTROUTING, stmts);
                }
            }
        }
    }
}
