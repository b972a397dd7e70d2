//! Matches: the statements that select a zone's, a set's or some prefixes' traffic, a
//! protocol with ports or ICMP types, and how they combine (a match per IP version when
//! addresses are involved; combinations of different versions are dropped).

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::config::policy::{AddressMatch, Family, MaskedAddr, NamedSet, SetFamily, Zone};
use crate::dataplane::nft::intervals::{normalize_port_ranges, normalize_prefixes};
use crate::dataplane::nft::ir::*;

/// A partial match and the IP version it implies.
#[derive(Debug, Clone, Default)]
pub(super) struct Match {
    /// The statements that match.
    pub(super) stmts: Vec<Stmt>,
    /// The IP version they imply, if any.
    pub(super) version: Option<IpVersion>,
}

pub(super) fn combine(a: &[Match], b: &[Match]) -> Vec<Match> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let version = match (x.version, y.version) {
                (Some(v), Some(w)) if v != w => continue,
                (v, w) => v.or(w),
            };
            let mut stmts = x.stmts.clone();
            stmts.extend(y.stmts.iter().cloned());
            out.push(Match { stmts, version });
        }
    }
    out
}

pub(super) fn any() -> Vec<Match> {
    vec![Match::default()]
}

pub(super) fn ifname_match(key: MetaKey, ifs: &[String], negate: bool) -> Stmt {
    if let [one] = ifs {
        return Stmt::Cmp {
            left: Expr::Meta(key),
            op: if negate { CmpOp::Neq } else { CmpOp::Eq },
            right: Value::IfName(one.clone()),
        };
    }
    let mut sorted = ifs.to_vec();
    sorted.sort();
    sorted.dedup();
    Stmt::Lookup {
        left: Expr::Meta(key),
        set: SetRef::Anonymous {
            key: KeyType::single(DataType::IfName),
            interval: false,
            data: None,
            elements: sorted
                .into_iter()
                .map(|i| Element::key(ElemKey::Value(Value::IfName(i))))
                .collect(),
        },
        negate,
    }
}

pub(super) fn addr_match(source: bool, version: IpVersion, nets: &[IpNet]) -> Stmt {
    let field = match (source, version) {
        (true, IpVersion::V4) => Field::IpSaddr,
        (false, IpVersion::V4) => Field::IpDaddr,
        (true, IpVersion::V6) => Field::Ip6Saddr,
        (false, IpVersion::V6) => Field::Ip6Daddr,
    };
    let nets = normalize_prefixes(nets.iter().copied());
    if let [one] = nets.as_slice()
        && one.prefix_len() == one.max_prefix_len()
    {
        return Stmt::Cmp {
            left: Expr::Payload(field),
            op: CmpOp::Eq,
            right: Value::ip(one.addr()),
        };
    }
    Stmt::Lookup {
        left: Expr::Payload(field),
        set: SetRef::Anonymous {
            key: KeyType::single(match version {
                IpVersion::V4 => DataType::Ipv4Addr,
                IpVersion::V6 => DataType::Ipv6Addr,
            }),
            interval: true,
            data: None,
            elements: nets
                .into_iter()
                .map(|n| Element::key(ElemKey::Prefix(n)))
                .collect(),
        },
        negate: false,
    }
}

pub(super) fn split_nets(nets: &[IpNet]) -> (Vec<IpNet>, Vec<IpNet>) {
    nets.iter().partition(|n| matches!(n, IpNet::V4(_)))
}

pub(super) fn prefix_matches(source: bool, nets: &[IpNet]) -> Vec<Match> {
    let (v4, v6) = split_nets(nets);
    let mut out = Vec::new();
    if !v4.is_empty() {
        out.push(Match {
            stmts: vec![addr_match(source, IpVersion::V4, &v4)],
            version: Some(IpVersion::V4),
        });
    }
    if !v6.is_empty() {
        out.push(Match {
            stmts: vec![addr_match(source, IpVersion::V6, &v6)],
            version: Some(IpVersion::V6),
        });
    }
    out
}

/// One match for the exact names (a comparison or a set) and one per `*` stem, compared by
/// its first bytes only (nft's wildcard match, which also matches interfaces that appear
/// later); a single match of no interface test for `"*"`, every interface. Each then
/// leaves out `excluded` (fw4's `"!eth1"`): a `!=` on the exact names (one or a set) and one
/// per stem.
fn interface_matches(key: MetaKey, ifs: &[String], excluded: &[String]) -> Vec<Match> {
    let mut out = Vec::new();
    if ifs.iter().any(|i| i == "*") {
        out.push(Match::default());
    } else {
        let (stems, exact): (Vec<String>, Vec<String>) =
            ifs.iter().cloned().partition(|i| i.ends_with('*'));
        if !exact.is_empty() {
            out.push(Match {
                stmts: vec![ifname_match(key, &exact, false)],
                version: None,
            });
        }
        out.extend(sorted(stems).into_iter().map(|stem| Match {
            stmts: vec![wildcard_cmp(key, stem, CmpOp::Eq)],
            version: None,
        }));
    }
    let (stems, exact): (Vec<String>, Vec<String>) =
        excluded.iter().cloned().partition(|i| i.ends_with('*'));
    let mut leave_out = Vec::new();
    if !exact.is_empty() {
        leave_out.push(ifname_match(key, &exact, true));
    }
    leave_out.extend(
        sorted(stems)
            .into_iter()
            .map(|stem| wildcard_cmp(key, stem, CmpOp::Neq)),
    );
    for m in &mut out {
        m.stmts.extend(leave_out.iter().cloned());
    }
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// `key` against wildcard `stem` (`"eth*"`).
fn wildcard_cmp(key: MetaKey, stem: String, op: CmpOp) -> Stmt {
    Stmt::Cmp {
        left: Expr::Meta(key),
        op,
        right: Value::IfName(stem),
    }
}

/// The matches of `matches` that `family` allows: those of the other IP version dropped,
/// those of no version limited to `family`'s by `meta nfproto` (fw4's family test).
pub(super) fn restrict(matches: Vec<Match>, family: Family) -> Vec<Match> {
    let (version, nfproto) = match family {
        Family::Any => return matches,
        Family::Ipv4 => (IpVersion::V4, NFPROTO_IPV4),
        Family::Ipv6 => (IpVersion::V6, NFPROTO_IPV6),
    };
    matches
        .into_iter()
        .filter_map(|mut m| match m.version {
            Some(v) if v != version => None,
            Some(_) => Some(m),
            None => {
                m.stmts.insert(
                    0,
                    Stmt::Cmp {
                        left: Expr::Meta(MetaKey::NfProto),
                        op: CmpOp::Eq,
                        right: Value::Proto(nfproto),
                    },
                );
                m.version = Some(version);
                Some(m)
            }
        })
        .collect()
}

/// `meta nfproto ipv4`.
const NFPROTO_IPV4: u8 = 2;
/// `meta nfproto ipv6`.
const NFPROTO_IPV6: u8 = 10;

/// Traffic arriving from a zone (`source`) or leaving into it, of the zone's `family` only.
pub(super) fn zone_match(z: &Zone, source: bool) -> Vec<Match> {
    restrict(zone_match_any_family(z, source), z.family)
}

/// [`zone_match`] before the zone's `family` applies.
fn zone_match_any_family(z: &Zone, source: bool) -> Vec<Match> {
    let key = if source {
        MetaKey::IifName
    } else {
        MetaKey::OifName
    };
    let ifs = if z.interfaces.is_empty() {
        any()
    } else {
        interface_matches(key, &z.interfaces, &z.excluded_interfaces)
    };
    if z.networks.is_empty() && z.masked_networks.is_empty() {
        return ifs;
    }
    let mut nets = prefix_matches(source, &z.networks);
    nets.extend(z.masked_networks.iter().map(|m| masked_match(source, m)));
    combine(&ifs, &nets)
}

/// The port match of `field` for `ports` (one port, one range, or an interval set): the
/// one port-range lookup every chain uses.
pub(super) fn port_match(field: Field, ports: &[(u16, u16)]) -> Option<Stmt> {
    let ports = normalize_port_ranges(ports.iter().copied());
    match ports.as_slice() {
        [] => None,
        [(a, b)] if a == b => Some(Stmt::Cmp {
            left: Expr::Payload(field),
            op: CmpOp::Eq,
            right: Value::Port(*a),
        }),
        [(a, b)] => Some(Stmt::Range {
            left: Expr::Payload(field),
            negate: false,
            from: Value::Port(*a),
            to: Value::Port(*b),
        }),
        many => Some(Stmt::Lookup {
            left: Expr::Payload(field),
            set: SetRef::Anonymous {
                key: KeyType::single(DataType::InetService),
                interval: true,
                data: None,
                elements: many
                    .iter()
                    .map(|(a, b)| {
                        Element::key(if a == b {
                            ElemKey::Value(Value::Port(*a))
                        } else {
                            ElemKey::Range(Value::Port(*a), Value::Port(*b))
                        })
                    })
                    .collect(),
            },
            negate: false,
        }),
    }
}

/// The ICMP (`l4` 1) or ICMPv6 type match for `types` (one type, or a set).
pub(super) fn icmp_type_match(l4: u8, types: &[u8]) -> Stmt {
    let (field, mk, dt): (Field, fn(u8) -> Value, DataType) = if l4 == 1 {
        (Field::IcmpType, Value::IcmpType, DataType::IcmpType)
    } else {
        (Field::Icmpv6Type, Value::Icmpv6Type, DataType::Icmpv6Type)
    };
    let mut types = types.to_vec();
    types.sort();
    types.dedup();
    if let [one] = types.as_slice() {
        return Stmt::Cmp {
            left: Expr::Payload(field),
            op: CmpOp::Eq,
            right: mk(*one),
        };
    }
    Stmt::Lookup {
        left: Expr::Payload(field),
        set: SetRef::Anonymous {
            key: KeyType::single(dt),
            interval: false,
            data: None,
            elements: types
                .into_iter()
                .map(|t| Element::key(ElemKey::Value(mk(t))))
                .collect(),
        },
        negate: false,
    }
}

/// Matches of packets whose source (`source`) or destination is any of `list` (any packet
/// when it is empty): one per IP version for the prefixes, one per named set, one per
/// IPv6 suffix.
pub(super) fn address_matches(
    sets: &BTreeMap<String, NamedSet>,
    source: bool,
    list: &[AddressMatch],
) -> Vec<Match> {
    if list.is_empty() {
        return any();
    }
    let prefixes: Vec<IpNet> = list
        .iter()
        .filter_map(|a| match a {
            AddressMatch::Prefix(n) => Some(*n),
            _ => None,
        })
        .collect();
    let mut out = prefix_matches(source, &prefixes);
    for a in list {
        match a {
            AddressMatch::Prefix(_) => {}
            AddressMatch::Set(name) => out.push(set_match(sets, source, name)),
            AddressMatch::Masked(m) => out.push(masked_match(source, m)),
            AddressMatch::Suffix { addr, mask } => out.push(Match {
                stmts: vec![Stmt::MaskedCmp {
                    left: Expr::Payload(if source {
                        Field::Ip6Saddr
                    } else {
                        Field::Ip6Daddr
                    }),
                    mask: Value::Ipv6(*mask),
                    right: Value::Ipv6(*addr),
                }],
                version: Some(IpVersion::V6),
            }),
        }
    }
    out
}

/// Packets whose source (`source`) or destination address has `m.addr`'s bits under
/// `m.mask` (`ip saddr & 255.0.0.255 == 10.0.0.1`): a bitwise match, never in a set.
pub(super) fn masked_match(source: bool, m: &MaskedAddr) -> Match {
    let (field, version) = match (m.addr.is_ipv4(), source) {
        (true, true) => (Field::IpSaddr, IpVersion::V4),
        (true, false) => (Field::IpDaddr, IpVersion::V4),
        (false, true) => (Field::Ip6Saddr, IpVersion::V6),
        (false, false) => (Field::Ip6Daddr, IpVersion::V6),
    };
    Match {
        stmts: vec![Stmt::MaskedCmp {
            left: Expr::Payload(field),
            mask: Value::ip(m.mask),
            right: Value::ip(m.addr),
        }],
        version: Some(version),
    }
}

/// Packets whose source (`source`) or destination is in named set `name`.
pub(super) fn set_match(sets: &BTreeMap<String, NamedSet>, source: bool, name: &str) -> Match {
    let (field, version) = match (sets[name].family, source) {
        (SetFamily::Ipv4, true) => (Field::IpSaddr, IpVersion::V4),
        (SetFamily::Ipv4, false) => (Field::IpDaddr, IpVersion::V4),
        (SetFamily::Ipv6, true) => (Field::Ip6Saddr, IpVersion::V6),
        (SetFamily::Ipv6, false) => (Field::Ip6Daddr, IpVersion::V6),
    };
    Match {
        stmts: vec![Stmt::Lookup {
            left: Expr::Payload(field),
            set: SetRef::Named(name.to_string()),
            negate: false,
        }],
        version: Some(version),
    }
}

/// `field` within `first..=last` (one port: equal).
pub(super) fn port_span(field: Field, first: u16, last: u16) -> Stmt {
    port_match(field, &[(first, last)]).expect("one range")
}
