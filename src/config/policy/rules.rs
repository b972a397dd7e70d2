//! `[[policy.rule]]` and `[[policy.port_forward]]` entries: protocols, ports, ICMP types,
//! rates, sources and destinations.

use std::ops::Range;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::matches::{addresses, has_ports, protocol, set_mark};
use super::model::*;
use super::raw::*;
use super::zones::zone_ref;
use crate::names::{icmp_type_by_name, icmpv6_type_by_name};

pub(super) fn parse_port(text: &str) -> Option<u16> {
    text.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

pub(super) fn port_range(p: &Spanned<RawPort>, diags: &mut Diagnostics) -> Option<(u16, u16)> {
    let bad = |diags: &mut Diagnostics| {
        diags.error(
            p.span(),
            "invalid port: expected a number 1-65535 or a range \"from-to\", e.g. 22 or \"8000-8100\"",
        );
        None
    };
    match p.get_ref() {
        RawPort::Number(n) => match u16::try_from(*n) {
            Ok(n) if n > 0 => Some((n, n)),
            _ => bad(diags),
        },
        RawPort::Text(t) => {
            let (a, b) = t.split_once('-').unwrap_or((t, t));
            match (parse_port(a), parse_port(b)) {
                (Some(a), Some(b)) if a <= b => Some((a, b)),
                _ => bad(diags),
            }
        }
    }
}

pub(super) fn icmp_type(
    p: &Spanned<RawPort>,
    protocol: Protocol,
    diags: &mut Diagnostics,
) -> Option<u8> {
    let found = match p.get_ref() {
        RawPort::Number(n) => u8::try_from(*n).ok(),
        RawPort::Text(t) if protocol == Protocol::Icmpv6 => icmpv6_type_by_name(t),
        RawPort::Text(t) => icmp_type_by_name(t),
    };
    if found.is_none() {
        diags.error(
            p.span(),
            "invalid ICMP type: expected a number 0-255 or a name such as \"echo-request\"",
        );
    }
    found
}

/// A verdict by name.
pub(super) fn parse_action(s: &str) -> Option<Action> {
    match s {
        "accept" => Some(Action::Accept),
        "drop" => Some(Action::Drop),
        "reject" => Some(Action::Reject),
        _ => None,
    }
}

pub(super) fn parse_limit(text: &str) -> Option<Rate> {
    let (n, unit) = text.split_once('/')?;
    let count: u64 = n.trim().parse().ok().filter(|c| *c > 0)?;
    let per_seconds = match unit.trim() {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86400,
        _ => return None,
    };
    Some(Rate { count, per_seconds })
}

pub(super) fn validate_rule(
    raw: RawRule,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<PolicyRule> {
    // Every step reports its own problems; the rule is kept only when all of them passed.
    let from = source(raw.from.as_ref(), cfg, diags);
    let to = destination(raw.to.as_ref(), cfg, diags);
    let not_self_to_self = !(from == Some(Source::Router) && to == Some(Destination::Router));
    if !not_self_to_self {
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
    let set_mark = set_mark(raw.set_mark.as_ref(), diags);
    let marking = mark_place(&raw, from.as_ref(), diags);
    let action = action_or_mark(&raw, diags);
    let limit = limit(raw.limit.as_ref(), diags);
    let log_prefix = log_prefix(raw.log_prefix.as_ref(), diags);
    #[cfg(feature = "fault-injection")]
    let inject_kernel_reject = raw.inject_kernel_reject;
    #[cfg(not(feature = "fault-injection"))]
    let inject_kernel_reject = false;
    let (from, to, ports, source_ports, to_addresses, icmp_types, limit, log_prefix, set_mark) = (
        from?,
        to?,
        ports?,
        source_ports?,
        to_addresses?,
        icmp_types?,
        limit?,
        log_prefix?,
        set_mark?,
    );
    if !not_self_to_self || !marking {
        return None;
    }
    if let Some(p) = protocol
        && !can_match(&from, &to, &to_addresses, p, cfg)
    {
        diags.error(
            raw.name.span(),
            format!(
                "rule `{}` can never match: its `from`, `to`, `to_addresses` and `protocol` have no IP version in common (e.g. an IPv4-only zone or set with icmpv6)",
                raw.name.get_ref()
            ),
        );
        return None;
    }
    Some(PolicyRule {
        name: raw.name.into_inner(),
        from,
        to,
        protocol: protocol?,
        ports,
        source_ports,
        to_addresses,
        set_mark,
        mark_only: raw.action.is_none(),
        icmp_types,
        action: action?,
        log: raw.log || log_prefix.is_some(),
        log_prefix,
        limit,
        inject_kernel_reject,
    })
}

/// The rule's `action`; a rule with `set_mark` may go without (it only marks: `Accept`
/// stands in, unused). `None` when missing or invalid (reported).
fn action_or_mark(raw: &RawRule, diags: &mut Diagnostics) -> Option<Action> {
    match (&raw.action, &raw.set_mark) {
        (Some(a), _) => rule_action(a, diags),
        (None, Some(_)) => Some(Action::Accept),
        (None, None) => {
            diags.error(
                raw.name.span(),
                format!(
                    "rule `{}` has no `action`: expected action = \"accept\", \"drop\" or \"reject\" (or a `set_mark`)",
                    raw.name.get_ref()
                ),
            );
            None
        }
    }
}

/// A rule with `set_mark` marks in prerouting, before routing: it cannot select the
/// outgoing zone (`to`), nor the router's own traffic. False when that is asked (reported).
fn mark_place(raw: &RawRule, from: Option<&Source>, diags: &mut Diagnostics) -> bool {
    let Some(mark) = &raw.set_mark else {
        return true;
    };
    if let Some(to) = &raw.to {
        diags.error(
            to.span(),
            "a rule with `set_mark` marks packets before routing, when their way out is not known yet: expected no `to` (select destinations with `to_addresses`)",
        );
        return false;
    }
    if from == Some(&Source::Router) {
        diags.error(
            mark.span(),
            "`set_mark` marks packets arriving at the router (prerouting): expected a `from` other than \"self\"",
        );
        return false;
    }
    true
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

fn rule_action(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<Action> {
    let action = parse_action(raw.get_ref());
    if action.is_none() {
        diags.error(
            raw.span(),
            format!(
                "invalid action `{}`: expected \"accept\", \"drop\" or \"reject\"",
                raw.get_ref()
            ),
        );
    }
    action
}

/// `limit`: `Some(None)` when absent, `None` when invalid (reported).
fn limit(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Option<Rate>> {
    let Some(l) = raw else {
        return Some(None);
    };
    let rate = parse_limit(l.get_ref());
    if rate.is_none() {
        diags.error(
            l.span(),
            format!("invalid limit `{}`: expected \"<count>/<second|minute|hour|day>\", e.g. \"10/second\"", l.get_ref()),
        );
    }
    rate.map(Some)
}

/// The longest log prefix the kernel keeps (NF_LOG_PREFIXLEN is 128 with the NUL).
const LOG_PREFIX_MAX: usize = 127;

/// `log_prefix`: `Some(None)` when absent, `None` when invalid (reported).
fn log_prefix(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Option<String>> {
    let Some(p) = raw else {
        return Some(None);
    };
    let text = p.get_ref();
    let printable = text
        .chars()
        .all(|c| (' '..='~').contains(&c) && c != '"' && c != '\\');
    if text.is_empty() || text.len() > LOG_PREFIX_MAX || !printable {
        diags.error(
            p.span(),
            format!("invalid log_prefix `{text}`: expected 1-{LOG_PREFIX_MAX} printable ASCII characters, no `\"` or `\\`"),
        );
        return None;
    }
    Some(Some(text.clone()))
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
