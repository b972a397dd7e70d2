//! `[policy]`: the router's firewall, validated into plain types ([`PolicyConfig`]).
//!
//! Knows nothing of nftables: the policy controller turns this model into a ruleset.
//! Every problem is reported at its `file:line:col`, all at once: unknown keys, bad values,
//! a zone or set used but never defined, duplicate names, an address of the wrong family.
//!
//! One TOML wrinkle: `forward` under `[policy]` is both the default verdict for forwarded
//! traffic (`forward = "drop"`) and the array of zone-to-zone forwards (`[[policy.forward]]`).
//! Plain TOML calls that a duplicate key; the loader renames `[[policy.forward]]` headers to
//! [`POLICY_FORWARDS_KEY`] before parsing (spans unchanged), so both arrive here. An inline
//! array (`forward = [{ from = "lan", to = "wan" }]`) is accepted too, and the extension key
//! `forward_default` sets the default where `forward` is the array.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::diag::Diagnostics;
use super::doc::{Doc, POLICY_FORWARDS_KEY, Value, de, de_each};
use super::net::parse_prefix;

/// A verdict for traffic no rule decided on, or a rule's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Let it through.
    Accept,
    /// Drop silently.
    Drop,
    /// Refuse: TCP reset for TCP, ICMP port unreachable otherwise.
    Reject,
}

/// IP version of a named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetFamily {
    /// `type = "ipv4"`.
    Ipv4,
    /// `type = "ipv6"`.
    Ipv6,
}

/// `[policy.zone.<name>]`: traffic arriving on its interfaces and/or from its networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The zone's name.
    pub name: String,
    /// Interfaces (exact names).
    pub interfaces: Vec<String>,
    /// Source prefixes (IPv4 and/or IPv6).
    pub networks: Vec<IpNet>,
    /// SNAT traffic leaving through this zone to the router's address there.
    pub masquerade: bool,
}

/// `[policy.set.<name>]`: a named address set that rules can match and that can change by
/// element without reloading the ruleset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedSet {
    /// The set's name (`@name` in rules).
    pub name: String,
    /// Its address family.
    pub family: SetFamily,
    /// Addresses and prefixes, as written.
    pub elements: Vec<IpNet>,
}

/// Where a rule's traffic comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Anywhere (`from` omitted).
    Any,
    /// The router itself (`from = "self"`, an extension): the rule applies to output.
    Router,
    /// A zone.
    Zone(String),
    /// A named set (`from = "@name"`).
    Set(String),
    /// Source prefixes.
    Prefixes(Vec<IpNet>),
}

/// Where a rule's traffic goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Anywhere: to the router and through it (`to` omitted).
    Any,
    /// The router itself (`to = "self"`).
    Router,
    /// Forwarded into a zone.
    Zone(String),
}

/// A rule's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Any protocol.
    Any,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (IPv4).
    Icmp,
    /// ICMPv6.
    Icmpv6,
}

/// A rate: `count` packets per `per_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Packets.
    pub count: u64,
    /// Per this many seconds (1, 60, 3600 or 86400).
    pub per_seconds: u64,
}

/// `[[policy.rule]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// Unique name: the log prefix and the rule's comment in nftables.
    pub name: String,
    /// Source.
    pub from: Source,
    /// Destination.
    pub to: Destination,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port ranges (inclusive; a single port is `(p, p)`), tcp/udp only.
    pub ports: Vec<(u16, u16)>,
    /// ICMP / ICMPv6 types (icmp/icmpv6 only).
    pub icmp_types: Vec<u8>,
    /// What matching traffic gets.
    pub action: Action,
    /// Log matching packets (rate-limited) with the rule's name as prefix.
    pub log: bool,
    /// Only packets within this rate match (the rest fall through to later rules).
    pub limit: Option<Rate>,
    /// Test hook (fault-injection builds only): the rule's group is made one the kernel
    /// refuses, to exercise fail-closed isolation.
    pub inject_kernel_reject: bool,
}

/// `[[policy.forward]]`: all traffic from one zone to another is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneForward {
    /// Source zone.
    pub from: String,
    /// Destination zone.
    pub to: String,
}

/// `[[policy.port_forward]]`: DNAT of a port on the router's addresses to an inner host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortForward {
    /// Unique name.
    pub name: String,
    /// The zone it is exposed to (other zones reach it by hairpin).
    pub from: String,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The router's port.
    pub port: u16,
    /// The inner host and port.
    pub to: SocketAddr,
}

/// The validated `[policy]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Default for traffic to the router.
    pub input: Action,
    /// Default for traffic through the router.
    pub forward: Action,
    /// Default for traffic from the router.
    pub output: Action,
    /// Zones by name.
    pub zones: BTreeMap<String, Zone>,
    /// Named sets by name.
    pub sets: BTreeMap<String, NamedSet>,
    /// Rules in order (first match wins).
    pub rules: Vec<PolicyRule>,
    /// Zone-to-zone forwards.
    pub forwards: Vec<ZoneForward>,
    /// Port forwards.
    pub port_forwards: Vec<PortForward>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZone {
    #[serde(default)]
    interfaces: Vec<Spanned<String>>,
    #[serde(default)]
    networks: Vec<Spanned<String>>,
    #[serde(default)]
    masquerade: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    #[serde(rename = "type")]
    kind: Spanned<String>,
    #[serde(default)]
    elements: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawFrom {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawPort {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: Spanned<String>,
    from: Option<Spanned<RawFrom>>,
    to: Option<Spanned<String>>,
    protocol: Option<Spanned<String>>,
    ports: Option<Spanned<Vec<Spanned<RawPort>>>>,
    icmp_types: Option<Spanned<Vec<Spanned<RawPort>>>>,
    action: Spanned<String>,
    #[serde(default)]
    log: bool,
    limit: Option<Spanned<String>>,
    #[cfg(feature = "fault-injection")]
    #[serde(default)]
    inject_kernel_reject: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForward {
    from: Spanned<String>,
    to: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPortForward {
    name: Spanned<String>,
    from: Spanned<String>,
    protocol: Option<Spanned<String>>,
    port: Spanned<i64>,
    to: Spanned<String>,
}

const KEYS: &[&str] = &[
    "input",
    "forward",
    "output",
    "forward_default",
    "zone",
    "set",
    "rule",
    "port_forward",
];

/// Validates `[policy]`; `None` when the section is absent (no firewall table at all).
pub fn validate(doc: &Doc<'_>, diags: &mut Diagnostics) -> Option<PolicyConfig> {
    let section = doc.value("policy")?;
    let DeValue::Table(table) = section.get_ref() else {
        diags.error(
            section.span(),
            "`policy` must be a table: expected `[policy]`",
        );
        return None;
    };
    let mut cfg = PolicyConfig {
        input: Action::Drop,
        forward: Action::Drop,
        output: Action::Accept,
        zones: BTreeMap::new(),
        sets: BTreeMap::new(),
        rules: Vec::new(),
        forwards: Vec::new(),
        port_forwards: Vec::new(),
    };
    let get = |k: &str| table.get(k);
    if let Some(v) = get("input") {
        cfg.input = action(v, diags, "input").unwrap_or(cfg.input);
    }
    if let Some(v) = get("output") {
        cfg.output = action(v, diags, "output").unwrap_or(cfg.output);
    }
    let mut forward_is_verdict = false;
    if let Some(v) = get("forward") {
        if let DeValue::String(_) = v.get_ref() {
            forward_is_verdict = true;
            cfg.forward = action(v, diags, "forward").unwrap_or(cfg.forward);
        }
    }
    if let Some(v) = get("forward_default") {
        if forward_is_verdict {
            diags.error(
                v.span(),
                "`forward_default` and `forward = \"...\"` both set the forward default: keep one",
            );
        }
        cfg.forward = action(v, diags, "forward_default").unwrap_or(cfg.forward);
    }
    for (key, _) in table.iter() {
        let key_name: &str = key.get_ref().as_ref();
        if !KEYS.contains(&key_name) && key_name != POLICY_FORWARDS_KEY {
            let expected: Vec<String> = KEYS.iter().map(|k| format!("`{k}`")).collect();
            diags.error(
                key.span(),
                format!(
                    "unknown key `{}` in [policy], expected one of {}",
                    key.get_ref(),
                    expected.join(", ")
                ),
            );
        }
    }
    if let Some(v) = get("zone") {
        for (name, name_span, value) in subtables(v, "policy.zone", diags) {
            if let Some(z) = validate_zone(&name, name_span, value, diags) {
                cfg.zones.insert(name, z);
            }
        }
    }
    if let Some(v) = get("set") {
        for (name, name_span, value) in subtables(v, "policy.set", diags) {
            if let Some(s) = validate_set(&name, name_span, value, diags) {
                cfg.sets.insert(name, s);
            }
        }
    }
    let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
    if let Some(v) = get("rule") {
        for raw in de_each::<RawRule>(v, diags) {
            let raw = raw.into_inner();
            unique_name(&raw.name, &mut names, diags);
            if let Some(r) = validate_rule(raw, &cfg, diags) {
                cfg.rules.push(r);
            }
        }
    }
    let forward_arrays = [
        get("forward").filter(|_| !forward_is_verdict),
        get(POLICY_FORWARDS_KEY),
    ];
    for v in forward_arrays.into_iter().flatten() {
        for raw in de_each::<RawForward>(v, diags) {
            let raw = raw.into_inner();
            let from = zone_ref(&raw.from, &cfg, diags);
            let to = zone_ref(&raw.to, &cfg, diags);
            if let (Some(from), Some(to)) = (from, to) {
                cfg.forwards.push(ZoneForward { from, to });
            }
        }
    }
    if let Some(v) = get("port_forward") {
        for raw in de_each::<RawPortForward>(v, diags) {
            let raw = raw.into_inner();
            unique_name(&raw.name, &mut names, diags);
            if let Some(pf) = validate_port_forward(raw, &cfg, diags) {
                cfg.port_forwards.push(pf);
            }
        }
    }
    Some(cfg)
}

fn action(v: &Value<'_>, diags: &mut Diagnostics, key: &str) -> Option<Action> {
    let s: String = de(v, diags)?;
    parse_action(&s).or_else(|| {
        diags.error(
            v.span(),
            format!("invalid {key} `{s}`: expected \"accept\", \"drop\" or \"reject\""),
        );
        None
    })
}

fn parse_action(s: &str) -> Option<Action> {
    match s {
        "accept" => Some(Action::Accept),
        "drop" => Some(Action::Drop),
        "reject" => Some(Action::Reject),
        _ => None,
    }
}

fn subtables<'v, 'a>(
    v: &'v Value<'a>,
    what: &str,
    diags: &mut Diagnostics,
) -> Vec<(String, Range<usize>, &'v Value<'a>)> {
    match v.get_ref() {
        DeValue::Table(t) => t
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), k.span(), v))
            .collect(),
        _ => {
            diags.error(
                v.span(),
                format!("`{what}` must be a table of named tables, e.g. `[{what}.name]`"),
            );
            Vec::new()
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn validate_zone(
    name: &str,
    span: Range<usize>,
    v: &Value<'_>,
    diags: &mut Diagnostics,
) -> Option<Zone> {
    if !valid_name(name) || name == "self" {
        diags.error(
            span.clone(),
            format!("invalid zone name `{name}`: expected letters, digits, `_` or `-` (up to 32, not \"self\")"),
        );
    }
    let raw: RawZone = de(v, diags)?;
    let mut interfaces = Vec::new();
    for i in &raw.interfaces {
        let s = i.get_ref();
        if s.is_empty() || s.len() > 15 || s.contains(['*', '"', '\'', ' ', '/']) {
            diags.error(
                i.span(),
                format!("invalid interface name `{s}`: expected up to 15 characters, no wildcards"),
            );
        } else {
            interfaces.push(s.clone());
        }
    }
    let networks = prefixes(&raw.networks, diags);
    if raw.interfaces.is_empty() && raw.networks.is_empty() {
        diags.error(
            span,
            format!("zone `{name}` has neither interfaces nor networks: expected at least one"),
        );
        return None;
    }
    Some(Zone {
        name: name.to_string(),
        interfaces,
        networks,
        masquerade: raw.masquerade,
    })
}

fn prefixes(items: &[Spanned<String>], diags: &mut Diagnostics) -> Vec<IpNet> {
    let mut out = Vec::new();
    for i in items {
        match parse_prefix(i.get_ref()) {
            Ok(n) => out.push(n),
            Err(e) => diags.error(i.span(), e),
        }
    }
    out
}

fn validate_set(
    name: &str,
    span: Range<usize>,
    v: &Value<'_>,
    diags: &mut Diagnostics,
) -> Option<NamedSet> {
    if !valid_name(name) {
        diags.error(
            span,
            format!("invalid set name `{name}`: expected a letter, then letters, digits, `_` or `-` (up to 32)"),
        );
    }
    let raw: RawSet = de(v, diags)?;
    let family = match raw.kind.get_ref().as_str() {
        "ipv4" => SetFamily::Ipv4,
        "ipv6" => SetFamily::Ipv6,
        other => {
            diags.error(
                raw.kind.span(),
                format!("invalid set type `{other}`: expected \"ipv4\" or \"ipv6\""),
            );
            return None;
        }
    };
    let mut elements = Vec::with_capacity(raw.elements.len());
    for e in &raw.elements {
        match parse_prefix(e.get_ref()) {
            Ok(n)
                if matches!(
                    (family, n),
                    (SetFamily::Ipv4, IpNet::V4(_)) | (SetFamily::Ipv6, IpNet::V6(_))
                ) =>
            {
                elements.push(n)
            }
            Ok(_) => diags.error(
                e.span(),
                format!(
                    "element `{}` is not an {} address or prefix, but set `{name}` has type \"{}\"",
                    e.get_ref(),
                    if family == SetFamily::Ipv4 {
                        "IPv4"
                    } else {
                        "IPv6"
                    },
                    raw.kind.get_ref()
                ),
            ),
            Err(msg) => diags.error(e.span(), msg),
        }
    }
    Some(NamedSet {
        name: name.to_string(),
        family,
        elements,
    })
}

fn unique_name(
    name: &Spanned<String>,
    seen: &mut BTreeMap<String, Range<usize>>,
    diags: &mut Diagnostics,
) {
    let n = name.get_ref();
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
    if !ok {
        diags.error(
            name.span(),
            format!("invalid name `{n}`: expected up to 64 letters, digits, `_`, `-`, `.` or `:`"),
        );
    }
    if let Some(first) = seen.get(n) {
        diags.error_also(
            name.span(),
            format!("duplicate name `{n}`: rule and port forward names must be unique"),
            first.clone(),
            "first used here",
        );
    } else {
        seen.insert(n.clone(), name.span());
    }
}

fn zone_ref(z: &Spanned<String>, cfg: &PolicyConfig, diags: &mut Diagnostics) -> Option<String> {
    let name = z.get_ref();
    if cfg.zones.contains_key(name) {
        Some(name.clone())
    } else {
        let known: Vec<String> = cfg.zones.keys().map(|k| format!("`{k}`")).collect();
        diags.error(
            z.span(),
            format!(
                "zone `{name}` is used but never defined: expected one of {} (define it with [policy.zone.{name}])",
                if known.is_empty() { "no zones yet".to_string() } else { known.join(", ") }
            ),
        );
        None
    }
}

fn protocol(p: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Protocol> {
    let Some(p) = p else {
        return Some(Protocol::Any);
    };
    match p.get_ref().as_str() {
        "any" => Some(Protocol::Any),
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        "icmp" => Some(Protocol::Icmp),
        "icmpv6" => Some(Protocol::Icmpv6),
        other => {
            diags.error(
                p.span(),
                format!("invalid protocol `{other}`: expected \"tcp\", \"udp\", \"icmp\", \"icmpv6\" or \"any\""),
            );
            None
        }
    }
}

fn parse_port(text: &str) -> Option<u16> {
    text.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

fn port_range(p: &Spanned<RawPort>, diags: &mut Diagnostics) -> Option<(u16, u16)> {
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

fn icmp_type(p: &Spanned<RawPort>, protocol: Protocol, diags: &mut Diagnostics) -> Option<u8> {
    use crate::dataplane::nft::render::{icmp_type_by_name, icmpv6_type_by_name};
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

fn parse_limit(text: &str) -> Option<Rate> {
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

fn validate_rule(raw: RawRule, cfg: &PolicyConfig, diags: &mut Diagnostics) -> Option<PolicyRule> {
    let mut ok = true;
    let from = match &raw.from {
        None => Source::Any,
        Some(f) => match f.get_ref() {
            RawFrom::One(s) if s == "self" => Source::Router,
            RawFrom::One(s) if s.starts_with('@') => {
                let name = &s[1..];
                if cfg.sets.contains_key(name) {
                    Source::Set(name.to_string())
                } else {
                    let known: Vec<String> = cfg.sets.keys().map(|k| format!("`@{k}`")).collect();
                    diags.error(
                        f.span(),
                        format!(
                            "set `{name}` is used but never defined: expected one of {} (define it with [policy.set.{name}])",
                            if known.is_empty() { "no sets yet".to_string() } else { known.join(", ") }
                        ),
                    );
                    ok = false;
                    Source::Any
                }
            }
            RawFrom::One(s) if s.contains(['.', ':']) => match parse_prefix(s) {
                Ok(n) => Source::Prefixes(vec![n]),
                Err(e) => {
                    diags.error(f.span(), e);
                    ok = false;
                    Source::Any
                }
            },
            RawFrom::One(s) => match zone_ref(&Spanned::new(f.span(), s.clone()), cfg, diags) {
                Some(z) => Source::Zone(z),
                None => {
                    ok = false;
                    Source::Any
                }
            },
            RawFrom::Many(list) => {
                let mut nets = Vec::new();
                for s in list {
                    match parse_prefix(s) {
                        Ok(n) => nets.push(n),
                        Err(e) => {
                            diags.error(f.span(), e);
                            ok = false;
                        }
                    }
                }
                if nets.is_empty() && ok {
                    diags.error(
                        f.span(),
                        "empty `from` list: expected prefixes, e.g. [\"10.0.0.0/8\"]",
                    );
                    ok = false;
                }
                Source::Prefixes(nets)
            }
        },
    };
    let to = match &raw.to {
        None => Destination::Any,
        Some(t) if t.get_ref() == "self" => Destination::Router,
        Some(t) => match zone_ref(t, cfg, diags) {
            Some(z) => Destination::Zone(z),
            None => {
                ok = false;
                Destination::Any
            }
        },
    };
    if from == Source::Router && to == Destination::Router {
        diags.error(
            raw.to.as_ref().map(|t| t.span()).unwrap_or(raw.name.span()),
            "a rule from \"self\" cannot go to \"self\": expected a zone or no `to`",
        );
        ok = false;
    }
    let protocol = protocol(raw.protocol.as_ref(), diags);
    let ports: Vec<(u16, u16)> = match &raw.ports {
        None => Vec::new(),
        Some(list) => {
            if !matches!(protocol, Some(Protocol::Tcp | Protocol::Udp)) {
                diags.error(list.span(), "`ports` needs protocol = \"tcp\" or \"udp\"");
                ok = false;
            }
            list.get_ref()
                .iter()
                .filter_map(|p| port_range(p, diags))
                .collect()
        }
    };
    let icmp_types: Vec<u8> = match (&raw.icmp_types, protocol) {
        (None, _) => Vec::new(),
        (Some(list), Some(p @ (Protocol::Icmp | Protocol::Icmpv6))) => list
            .get_ref()
            .iter()
            .filter_map(|t| icmp_type(t, p, diags))
            .collect(),
        (Some(list), _) => {
            diags.error(
                list.span(),
                "`icmp_types` needs protocol = \"icmp\" or \"icmpv6\"",
            );
            ok = false;
            Vec::new()
        }
    };
    let action = match parse_action(raw.action.get_ref()) {
        Some(a) => Some(a),
        None => {
            diags.error(
                raw.action.span(),
                format!(
                    "invalid action `{}`: expected \"accept\", \"drop\" or \"reject\"",
                    raw.action.get_ref()
                ),
            );
            None
        }
    };
    let limit = match &raw.limit {
        None => None,
        Some(l) => match parse_limit(l.get_ref()) {
            Some(r) => Some(r),
            None => {
                diags.error(
                    l.span(),
                    format!("invalid limit `{}`: expected \"<count>/<second|minute|hour|day>\", e.g. \"10/second\"", l.get_ref()),
                );
                ok = false;
                None
            }
        },
    };
    #[cfg(feature = "fault-injection")]
    let inject_kernel_reject = raw.inject_kernel_reject;
    #[cfg(not(feature = "fault-injection"))]
    let inject_kernel_reject = false;
    if !ok {
        return None;
    }
    Some(PolicyRule {
        name: raw.name.into_inner(),
        from,
        to,
        protocol: protocol?,
        ports,
        icmp_types,
        action: action?,
        log: raw.log,
        limit,
        inject_kernel_reject,
    })
}

fn validate_port_forward(
    raw: RawPortForward,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<PortForward> {
    let from = zone_ref(&raw.from, cfg, diags);
    let protocol = match protocol(raw.protocol.as_ref(), diags) {
        None => None,
        Some(Protocol::Any) if raw.protocol.is_none() => Some(Protocol::Tcp),
        Some(p @ (Protocol::Tcp | Protocol::Udp)) => Some(p),
        Some(_) => {
            let span = raw
                .protocol
                .as_ref()
                .map(|p| p.span())
                .unwrap_or(raw.name.span());
            diags.error(span, "a port forward's protocol must be \"tcp\" or \"udp\"");
            None
        }
    };
    let port = match u16::try_from(*raw.port.get_ref()) {
        Ok(p) if p > 0 => Some(p),
        _ => {
            diags.error(raw.port.span(), "invalid port: expected a number 1-65535");
            None
        }
    };
    let text = raw.to.get_ref();
    let to = match (text.parse::<SocketAddr>(), text.parse::<IpAddr>(), port) {
        (Ok(sa), _, _) if sa.port() > 0 => Some(sa),
        (_, Ok(ip), Some(p)) => Some(SocketAddr::new(ip, p)),
        _ => {
            diags.error(
                raw.to.span(),
                format!("invalid target `{text}`: expected \"address:port\", e.g. \"10.0.0.10:80\" or \"[fd00::10]:80\""),
            );
            None
        }
    };
    Some(PortForward {
        name: raw.name.into_inner(),
        from: from?,
        protocol: protocol?,
        port: port?,
        to: to?,
    })
}
