//! The match of a config rule (`[[policy.rule]]`), built in one place for every chain that
//! carries the rule: the filter chains and the mangle chain of `set_mark`.

use crate::config::policy::{
    Destination, IpsetMatch, PolicyConfig, Protocol, RuleMatch, SetFamily, Source,
};
use crate::dataplane::nft::ir::*;
use crate::sys;

use super::matches::{
    Match, address_matches, any, combine, icmp_type_match, port_match, prefix_matches, restrict,
    set_match, zone_match,
};
use super::time_match::time_matches;

/// Now, in seconds since the epoch: the instant whose local offset places a local daily
/// window on the UTC clock.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The matches of rule match `m`, one list per single protocol it stands for
/// ([`Protocol::each`]), each with that protocol (a reject answers per protocol). `sees_oif`:
/// the chain knows the outgoing interface (forward, output), so a `to` zone is matched by
/// its interfaces and networks; elsewhere only by `to_addresses`.
pub(super) fn rule_matches(
    cfg: &PolicyConfig,
    m: &RuleMatch,
    sees_oif: bool,
) -> Vec<(Protocol, Vec<Match>)> {
    // Destructured, so a key added to `RuleMatch` is an error here until it is matched.
    let RuleMatch {
        from,
        to,
        protocol,
        ports,
        source_ports,
        to_addresses,
        icmp_types,
        dscp,
        family,
        time,
        ipset,
    } = m;
    let src = rule_source(cfg, from);
    let zone = match to {
        Destination::Zone(z) if sees_oif => zone_match(&cfg.zones[z], false),
        _ => any(),
    };
    let dst = combine(&zone, &address_matches(&cfg.sets, false, to_addresses));
    let src_dst = combine(&combine(&src, &dst), &dscp_matches(dscp));
    // Last: `explain` without `--at` then stops only at rules the packet otherwise matches.
    let when = time
        .as_ref()
        .map_or_else(any, |t| time_matches(t, now(), &sys::utc_offset_at));
    protocol
        .each()
        .into_iter()
        .map(|p| {
            let l4 = proto_match(p, ports, source_ports, icmp_types);
            let l4 = combine(&[l4], &ipset_match(cfg, ipset.as_ref(), p));
            let m = combine(&combine(&src_dst, &l4), &when);
            (p, restrict(m, *family))
        })
        .collect()
}

/// `ip dscp` and `ip6 dscp` for `values` (one value, or a set): one match per IP version,
/// which `combine` keeps only where the rest of the rule allows that version.
fn dscp_matches(values: &[u8]) -> Vec<Match> {
    if values.is_empty() {
        return any();
    }
    let mut values = values.to_vec();
    values.sort();
    values.dedup();
    [
        (Field::IpDscp, IpVersion::V4),
        (Field::Ip6Dscp, IpVersion::V6),
    ]
    .into_iter()
    .map(|(field, version)| {
        let stmt = match values.as_slice() {
            [one] => Stmt::Cmp {
                left: Expr::Payload(field),
                op: CmpOp::Eq,
                right: Value::Field(field, (*one).into()),
            },
            many => Stmt::Lookup {
                left: Expr::Payload(field),
                set: SetRef::Anonymous {
                    key: KeyType::single(DataType::Field(field)),
                    interval: false,
                    data: None,
                    elements: many
                        .iter()
                        .map(|v| Element::key(ElemKey::Value(Value::Field(field, (*v).into()))))
                        .collect(),
                },
                negate: false,
            },
        };
        Match {
            stmts: vec![stmt],
            version: Some(version),
        }
    })
    .collect()
}

/// `ipset`: the packet's address·port pair, in the set's field order, looked up in the set
/// (after the protocol match, which the port field needs).
fn ipset_match(cfg: &PolicyConfig, ipset: Option<&IpsetMatch>, p: Protocol) -> Vec<Match> {
    let Some(m) = ipset else {
        return any();
    };
    let v4 = cfg.sets[&m.set].family == SetFamily::Ipv4;
    let parts = m
        .fields
        .iter()
        .map(|f| {
            Expr::Payload(match (f.is_address(), f.source, v4, p) {
                (true, true, true, _) => Field::IpSaddr,
                (true, false, true, _) => Field::IpDaddr,
                (true, true, false, _) => Field::Ip6Saddr,
                (true, false, false, _) => Field::Ip6Daddr,
                (false, true, _, _) => Field::ThSport,
                (false, false, _, Protocol::Udp) => Field::UdpDport,
                (false, false, _, _) => Field::TcpDport,
            })
        })
        .collect();
    vec![Match {
        stmts: vec![Stmt::Lookup {
            left: Expr::Concat(parts),
            set: SetRef::Named(m.set.clone()),
            negate: m.negate,
        }],
        version: Some(if v4 { IpVersion::V4 } else { IpVersion::V6 }),
    }]
}

/// Where a rule's packets come from, as matches.
fn rule_source(cfg: &PolicyConfig, from: &Source) -> Vec<Match> {
    match from {
        Source::Any | Source::Router => any(),
        Source::Zone(z) => zone_match(&cfg.zones[z], true),
        Source::Set(s) => vec![set_match(&cfg.sets, true, s)],
        Source::Prefixes(nets) => prefix_matches(true, nets),
        Source::Addresses(list) => address_matches(&cfg.sets, true, list),
    }
}

/// The match of one single protocol `p`: destination ports as `tcp|udp dport`, source
/// ports as `th sport` after them (or after `meta l4proto`, which nft needs before a `th`
/// field), ICMP types.
fn proto_match(
    p: Protocol,
    ports: &[(u16, u16)],
    source_ports: &[(u16, u16)],
    icmp_types: &[u8],
) -> Match {
    let mut stmts = Vec::new();
    let mut version = None;
    let (l4, dport) = match p {
        Protocol::Any | Protocol::TcpUdp => return Match::default(),
        Protocol::Tcp => (6, Some(Field::TcpDport)),
        Protocol::Udp => (17, Some(Field::UdpDport)),
        Protocol::Icmp => {
            version = Some(IpVersion::V4);
            (1, None)
        }
        Protocol::Icmpv6 => {
            version = Some(IpVersion::V6);
            (58, None)
        }
        Protocol::Other(n) => (n, None),
    };
    stmts.extend(dport.and_then(|f| port_match(f, ports)));
    if !icmp_types.is_empty() {
        stmts.push(icmp_type_match(l4, icmp_types));
    }
    if stmts.is_empty() {
        stmts.push(Stmt::Cmp {
            left: Expr::Meta(MetaKey::L4Proto),
            op: CmpOp::Eq,
            right: Value::Proto(l4),
        });
    }
    stmts.extend(port_match(Field::ThSport, source_ports));
    Match { stmts, version }
}
