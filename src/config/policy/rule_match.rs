//! The match of a `[[policy.rule]]`: every key that selects its packets (`from`, `to`,
//! `protocol`, `ports`, `source_ports`, `to_addresses`, `icmp_types`), parsed into one
//! [`RuleMatch`]. A new match key is a field here, its raw key in `raw.rs`, and its parser
//! in [`RuleMatch::parse`]; the policy controller's `rule_matches` destructures the struct,
//! so the compiler points there next.

use std::ops::Range;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::matches::{addresses, has_ports, protocol};
use super::model::*;
use super::raw::*;
use super::rules::{icmp_type, port_range};
use super::zones::zone_ref;

/// The packets a `[[policy.rule]]` selects: all of its keys must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    /// Source.
    pub from: Source,
    /// Destination.
    pub to: Destination,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port ranges (inclusive; a single port is `(p, p)`), tcp/udp only.
    pub ports: Vec<(u16, u16)>,
    /// Source port ranges (`source_ports`, same forms as `ports`), tcp/udp only.
    pub source_ports: Vec<(u16, u16)>,
    /// Destination addresses (`to_addresses`): any of them matches; empty = any address.
    pub to_addresses: Vec<AddressMatch>,
    /// ICMP / ICMPv6 types (icmp/icmpv6 only).
    pub icmp_types: Vec<u8>,
}

impl RuleMatch {
    /// The match keys of `raw`, each checked and every problem reported at its place;
    /// `None` when any key is invalid.
    pub(super) fn parse(
        raw: &RawRule,
        cfg: &PolicyConfig,
        diags: &mut Diagnostics,
    ) -> Option<RuleMatch> {
        let from = source(raw.from.as_ref(), cfg, diags);
        let to = destination(raw.to.as_ref(), cfg, diags);
        let self_to_self = from == Some(Source::Router) && to == Some(Destination::Router);
        if self_to_self {
            diags.error(
                raw.to.as_ref().map(|t| t.span()).unwrap_or(raw.name.span()),
                "a rule from \"self\" cannot go to \"self\": expected a zone or no `to`",
            );
        }
        let protocol = protocol(raw.protocol.as_ref(), diags);
        let source_ports = ports("source_ports", raw.source_ports.as_ref(), protocol, diags);
        let ports = ports("ports", raw.ports.as_ref(), protocol, diags);
        let to_addresses = addresses("to_addresses", raw.to_addresses.as_ref(), cfg, diags);
        let icmp_types = icmp_types(raw.icmp_types.as_ref(), protocol, diags);
        let m = RuleMatch {
            from: from?,
            to: to?,
            protocol: protocol?,
            ports: ports?,
            source_ports: source_ports?,
            to_addresses: to_addresses?,
            icmp_types: icmp_types?,
        };
        (!self_to_self).then_some(m)
    }

    /// True when some IP version can satisfy `from`, `to`, `to_addresses` and the protocol
    /// at once; reported at the rule's `name` when none can.
    pub(super) fn can_match(
        &self,
        name: &Spanned<String>,
        cfg: &PolicyConfig,
        diags: &mut Diagnostics,
    ) -> bool {
        let ok = can_match(&self.from, &self.to, &self.to_addresses, self.protocol, cfg);
        if !ok {
            diags.error(
                name.span(),
                format!(
                    "rule `{}` can never match: its `from`, `to`, `to_addresses` and `protocol` have no IP version in common (e.g. an IPv4-only zone or set with icmpv6)",
                    name.get_ref()
                ),
            );
        }
        ok
    }
}

/// A rule's `from`; `None` when it is invalid (reported).
fn source(
    from: Option<&Spanned<RawFrom>>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Source> {
    let Some(f) = from else {
        return Some(Source::Any);
    };
    match f.get_ref() {
        RawFrom::One(s) if s == "self" => Some(Source::Router),
        RawFrom::One(s) if s.starts_with('@') => {
            known_set(&s[1..], f.span(), cfg, diags).map(Source::Set)
        }
        RawFrom::One(s) if s.contains(['.', ':']) => match parse_prefix(s) {
            Ok(n) => Some(Source::Prefixes(vec![n])),
            Err(e) => {
                diags.error(f.span(), e);
                None
            }
        },
        RawFrom::One(s) => {
            zone_ref(&Spanned::new(f.span(), s.clone()), cfg, diags).map(Source::Zone)
        }
        RawFrom::Many(list) => prefix_list(list, f.span(), diags),
    }
}

/// `@name` must be a set of `[policy.set.*]`; an error naming the sets that exist otherwise.
pub(super) fn known_set(
    name: &str,
    span: Range<usize>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<String> {
    if cfg.sets.contains_key(name) {
        return Some(name.to_string());
    }
    let known: Vec<String> = cfg.sets.keys().map(|k| format!("`@{k}`")).collect();
    diags.error(
        span,
        format!(
            "set `{name}` is used but never defined: expected one of {} (define it with [policy.set.{name}])",
            if known.is_empty() { "no sets yet".to_string() } else { known.join(", ") }
        ),
    );
    None
}

fn prefix_list(list: &[String], span: Range<usize>, diags: &mut Diagnostics) -> Option<Source> {
    let mut nets = Vec::new();
    let mut ok = true;
    for s in list {
        match parse_prefix(s) {
            Ok(n) => nets.push(n),
            Err(e) => {
                diags.error(span.clone(), e);
                ok = false;
            }
        }
    }
    if nets.is_empty() && ok {
        diags.error(
            span,
            "empty `from` list: expected prefixes, e.g. [\"10.0.0.0/8\"]",
        );
        ok = false;
    }
    ok.then_some(Source::Prefixes(nets))
}

/// A rule's `to`; `None` when it names an unknown zone (reported).
fn destination(
    to: Option<&Spanned<String>>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Destination> {
    match to {
        None => Some(Destination::Any),
        Some(t) if t.get_ref() == "self" => Some(Destination::Router),
        Some(t) => zone_ref(t, cfg, diags).map(Destination::Zone),
    }
}

/// `ports` or `source_ports` (`key`): only with tcp and/or udp. `None` when the protocol
/// does not allow them.
fn ports(
    key: &str,
    list: Option<&Spanned<Vec<Spanned<RawPort>>>>,
    protocol: Option<Protocol>,
    diags: &mut Diagnostics,
) -> Option<Vec<(u16, u16)>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let allowed = has_ports(protocol);
    if !allowed {
        diags.error(
            list.span(),
            format!("`{key}` needs protocol = \"tcp\" or \"udp\" (or both: [\"tcp\", \"udp\"])"),
        );
    }
    let ports: Vec<(u16, u16)> = list
        .get_ref()
        .iter()
        .filter_map(|p| port_range(p, diags))
        .collect();
    allowed.then_some(ports)
}

/// `icmp_types`: only with icmp or icmpv6. `None` when the protocol does not allow them.
fn icmp_types(
    list: Option<&Spanned<Vec<Spanned<RawPort>>>>,
    protocol: Option<Protocol>,
    diags: &mut Diagnostics,
) -> Option<Vec<u8>> {
    match (list, protocol) {
        (None, _) => Some(Vec::new()),
        (Some(list), Some(p @ (Protocol::Icmp | Protocol::Icmpv6))) => Some(
            list.get_ref()
                .iter()
                .filter_map(|t| icmp_type(t, p, diags))
                .collect(),
        ),
        (Some(list), _) => {
            diags.error(
                list.span(),
                "`icmp_types` needs protocol = \"icmp\" or \"icmpv6\"",
            );
            None
        }
    }
}

/// True when some IP version can satisfy `from`, `to`, `to_addresses` and the protocol at
/// once.
fn can_match(
    from: &Source,
    to: &Destination,
    to_addresses: &[AddressMatch],
    p: Protocol,
    cfg: &PolicyConfig,
) -> bool {
    let (v4, v6) = and(
        and(source_versions(from, cfg), dest_versions(to, cfg)),
        and(protocol_versions(p), address_versions(to_addresses, cfg)),
    );
    v4 || v6
}

/// The IP versions a list of address matches can hold (both when it is empty: any address).
pub(super) fn address_versions(list: &[AddressMatch], cfg: &PolicyConfig) -> Versions {
    if list.is_empty() {
        return (true, true);
    }
    list.iter().fold((false, false), |(v4, v6), a| {
        let (a4, a6) = match a {
            AddressMatch::Prefix(n) => net_versions(std::slice::from_ref(n)),
            AddressMatch::Suffix { .. } => (false, true),
            AddressMatch::Set(s) => match cfg.sets.get(s).map(|s| s.family) {
                Some(SetFamily::Ipv4) => (true, false),
                Some(SetFamily::Ipv6) => (false, true),
                None => (true, true),
            },
        };
        (v4 || a4, v6 || a6)
    })
}

/// (IPv4 possible, IPv6 possible).
pub(super) type Versions = (bool, bool);

pub(super) fn and(a: Versions, b: Versions) -> Versions {
    (a.0 && b.0, a.1 && b.1)
}

pub(super) fn net_versions(nets: &[ipnet::IpNet]) -> Versions {
    if nets.is_empty() {
        return (true, true);
    }
    (
        nets.iter().any(|n| matches!(n, ipnet::IpNet::V4(_))),
        nets.iter().any(|n| matches!(n, ipnet::IpNet::V6(_))),
    )
}

fn source_versions(s: &Source, cfg: &PolicyConfig) -> Versions {
    match s {
        Source::Any | Source::Router => (true, true),
        Source::Zone(z) => cfg
            .zones
            .get(z)
            .map_or((true, true), |z| net_versions(&z.networks)),
        Source::Set(n) => match cfg.sets.get(n).map(|s| s.family) {
            Some(SetFamily::Ipv4) => (true, false),
            Some(SetFamily::Ipv6) => (false, true),
            None => (true, true),
        },
        Source::Prefixes(nets) => net_versions(nets),
    }
}

fn dest_versions(d: &Destination, cfg: &PolicyConfig) -> Versions {
    match d {
        Destination::Any | Destination::Router => (true, true),
        Destination::Zone(z) => cfg
            .zones
            .get(z)
            .map_or((true, true), |z| net_versions(&z.networks)),
    }
}

fn protocol_versions(p: Protocol) -> Versions {
    match p {
        Protocol::Icmp => (true, false),
        Protocol::Icmpv6 => (false, true),
        _ => (true, true),
    }
}
