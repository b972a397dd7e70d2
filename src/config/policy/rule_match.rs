//! The match of a `[[policy.rule]]`: every key that selects its packets (`from`, `to`,
//! `protocol`, `ports`, `source_ports`, `to_addresses`, `icmp_types`, `dscp`, `family`, and
//! the time keys of `time_match`), parsed into one [`RuleMatch`]. A new match key is all in this file: its raw key (as written, with its
//! span) in [`with_raw_match_keys`], its field in [`RuleMatch`] and its parser in
//! [`RuleMatch::parse`]; the policy controller's `rule_matches` destructures the struct, so
//! the compiler points there next.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::matches::{addresses, family, family_agrees, has_ports, parse_subnet, rule_protocol};
use super::model::*;
use super::raw::*;
use super::rules::{icmp_type, port_range};
use super::time_match::{RawTime, TimeMatch, time_match};
use super::zones::zone_ref;
use crate::names::dscp_by_name;

/// Declares the raw rule struct (`raw.rs`'s `RawRule`) with the match keys spliced in between
/// its leading fields and the rest, so that a match key's raw shape lives here beside the
/// [`RuleMatch`] field it becomes. Not a `#[serde(flatten)]`ed struct: flatten buffers the
/// values, which loses the spans every error is reported at (toml-rs/toml#589), and serde
/// does not support it together with `deny_unknown_fields`.
macro_rules! with_raw_match_keys {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($before:tt)* } then { $($after:tt)* }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($before)*
            pub(super) from: Option<Spanned<RawFrom>>,
            pub(super) to: Option<Spanned<String>>,
            pub(super) protocol: Option<Spanned<$crate::config::policy::rule_match::RawValues>>,
            pub(super) ports: Option<Spanned<Vec<Spanned<RawPort>>>>,
            pub(super) source_ports: Option<Spanned<Vec<Spanned<RawPort>>>>,
            pub(super) to_addresses: Option<Spanned<Vec<Spanned<String>>>>,
            pub(super) icmp_types: Option<Spanned<Vec<Spanned<RawPort>>>>,
            pub(super) dscp: Option<Spanned<$crate::config::policy::rule_match::RawValues>>,
            pub(super) ipset: Option<Spanned<String>>,
            pub(super) family: Option<Spanned<String>>,
            pub(super) start_time: Option<Spanned<String>>,
            pub(super) stop_time: Option<Spanned<String>>,
            pub(super) weekdays: Option<Spanned<RawFrom>>,
            pub(super) start_date: Option<Spanned<String>>,
            pub(super) stop_date: Option<Spanned<String>>,
            pub(super) utc_time: Option<Spanned<bool>>,
            pub(super) monthdays: Option<Spanned<serde::de::IgnoredAny>>,
            $($after)*
        }
    };
}
pub(super) use with_raw_match_keys;

/// One value or a list of them (`dscp = "ef"`, `dscp = ["cs1", 46]`), each a name or a
/// number. Read by hand: serde's untagged enums answer a wrong type with "data did not
/// match any variant", this says what was expected.
pub(super) enum RawValues {
    One(RawPort),
    Many(Vec<RawPort>),
}

/// What [`RawValues`] expects, in the error for anything else.
const NAME_OR_NUMBER: &str = "a name or a number, or a list of them";

/// One name or number of a [`RawValues`] list.
struct RawValue(RawPort);

struct ValuesVisitor;

impl<'de> serde::de::Visitor<'de> for ValuesVisitor {
    type Value = RawValues;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(NAME_OR_NUMBER)
    }

    fn visit_i64<E>(self, n: i64) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Number(n)))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Number(
            i64::try_from(n).unwrap_or(i64::MAX),
        )))
    }

    fn visit_str<E>(self, s: &str) -> Result<RawValues, E> {
        Ok(RawValues::One(RawPort::Text(s.to_string())))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawValues, A::Error> {
        let mut out = Vec::new();
        while let Some(RawValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(RawValues::Many(out))
    }
}

impl<'de> Deserialize<'de> for RawValues {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawValues, D::Error> {
        d.deserialize_any(ValuesVisitor)
    }
}

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawValue, D::Error> {
        match RawValues::deserialize(d)? {
            RawValues::One(v) => Ok(RawValue(v)),
            RawValues::Many(_) => Err(serde::de::Error::custom(format!(
                "a list inside the list: expected {NAME_OR_NUMBER}"
            ))),
        }
    }
}

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
    /// DSCP values (`dscp`), of IPv4 and IPv6 alike; empty = any.
    pub dscp: Vec<u8>,
    /// `family`: only this IP version's packets (the rule's zones, addresses and protocol
    /// restrict it further, as fw4's rules inherit their zones' family).
    pub family: Family,
    /// When the rule applies (`start_time`, `stop_time`, `weekdays`, `start_date`,
    /// `stop_date`, `utc_time`); `None` = always.
    pub time: Option<TimeMatch>,
    /// An address·port set the packet's pair must (not) be in (`ipset`, fw4's).
    pub ipset: Option<IpsetMatch>,
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
        let protocol = rule_protocol(raw.protocol.as_ref(), diags);
        let source_ports = ports("source_ports", raw.source_ports.as_ref(), protocol, diags);
        let ports = ports("ports", raw.ports.as_ref(), protocol, diags);
        let to_addresses = addresses("to_addresses", raw.to_addresses.as_ref(), cfg, diags);
        let icmp_types = icmp_types(raw.icmp_types.as_ref(), protocol, diags);
        let dscp = dscp(raw.dscp.as_ref(), diags);
        let ipset = super::ipset::ipset(raw.ipset.as_ref(), protocol, cfg, diags);
        let family = family(raw.family.as_ref(), diags);
        let time = time_match(
            RawTime {
                start_time: raw.start_time.as_ref(),
                stop_time: raw.stop_time.as_ref(),
                weekdays: raw.weekdays.as_ref(),
                start_date: raw.start_date.as_ref(),
                stop_date: raw.stop_date.as_ref(),
                utc_time: raw.utc_time.as_ref(),
                monthdays: raw.monthdays.as_ref(),
            },
            diags,
        );
        let m = RuleMatch {
            from: from?,
            to: to?,
            protocol: protocol?,
            ports: ports?,
            source_ports: source_ports?,
            to_addresses: to_addresses?,
            icmp_types: icmp_types?,
            dscp: dscp?,
            family: family?,
            time: time?,
            ipset: ipset?,
        };
        let agrees = m.family_agrees(raw.family.as_ref(), cfg, diags);
        (!self_to_self && agrees).then_some(m)
    }

    /// True when an explicit `family` (`raw`) allows an IP version of each of `from`, `to`,
    /// `to_addresses` and the protocol; else reported at `family`, naming the first key that
    /// rules it out.
    fn family_agrees(
        &self,
        raw: Option<&Spanned<String>>,
        cfg: &PolicyConfig,
        diags: &mut Diagnostics,
    ) -> bool {
        if self.family == Family::Any {
            return true;
        }
        let from = match &self.from {
            Source::Zone(z) => format!("`from` zone `{z}`"),
            Source::Set(s) => format!("`from` set `@{s}`"),
            _ => "`from`".to_string(),
        };
        let to = match &self.to {
            Destination::Zone(z) => format!("`to` zone `{z}`"),
            _ => "`to`".to_string(),
        };
        let protocol = if self.protocol == Protocol::Icmp {
            "`protocol = \"icmp\"`"
        } else {
            "`protocol = \"icmpv6\"`"
        };
        [
            (source_versions(&self.from, cfg), from),
            (dest_versions(&self.to, cfg), to),
            (
                address_versions(&self.to_addresses, cfg),
                "`to_addresses`".to_string(),
            ),
            (protocol_versions(self.protocol), protocol.to_string()),
        ]
        .into_iter()
        .all(|(versions, what)| family_agrees(raw, self.family, versions, &what, diags))
    }

    /// True when some IP version can satisfy `from`, `to`, `to_addresses` and the protocol
    /// at once; reported at the rule's `name` when none can.
    pub(super) fn can_match(
        &self,
        name: &Spanned<String>,
        cfg: &PolicyConfig,
        diags: &mut Diagnostics,
    ) -> bool {
        let ok = can_match(&self.from, &self.to, &self.to_addresses, self.protocol, cfg)
            && self.ipset.as_ref().is_none_or(|m| {
                let family = cfg.sets.get(&m.set).map(|s| s.family);
                let set = match family {
                    Some(SetFamily::Ipv4) => (true, false),
                    Some(SetFamily::Ipv6) => (false, true),
                    None => (true, true),
                };
                let rest = and(
                    and(
                        source_versions(&self.from, cfg),
                        dest_versions(&self.to, cfg),
                    ),
                    address_versions(&self.to_addresses, cfg),
                );
                let (v4, v6) = and(rest, set);
                v4 || v6
            });
        if !ok {
            diags.error(
                name.span(),
                format!(
                    "rule `{}` can never match: its `from`, `to`, `to_addresses`, `ipset` and `protocol` have no IP version in common (e.g. an IPv4-only zone or set with icmpv6)",
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
        RawFrom::One(s) if s.contains(['.', ':']) => {
            prefix_list(std::slice::from_ref(s), f.span(), diags)
        }
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
    if let Some(set) = cfg.sets.get(name) {
        if !set.tuple.is_empty() {
            diags.error(
                span,
                format!("set `{name}` holds address·port pairs, not addresses: match it with `ipset = \"{name}\"`"),
            );
            return None;
        }
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

/// Source prefixes, or [`Source::Addresses`] when some are under a non-contiguous mask.
fn prefix_list(list: &[String], span: Range<usize>, diags: &mut Diagnostics) -> Option<Source> {
    let mut nets = Vec::new();
    let mut ok = true;
    for s in list {
        match parse_subnet(s.trim()) {
            Ok(a) => nets.push(a),
            Err(e) => {
                diags.error(span.clone(), e);
                ok = false;
            }
        }
    }
    let prefixes: Vec<ipnet::IpNet> = nets
        .iter()
        .filter_map(|a| match a {
            AddressMatch::Prefix(n) => Some(*n),
            _ => None,
        })
        .collect();
    let empty = nets.is_empty();
    let source = if prefixes.len() == nets.len() {
        Source::Prefixes(prefixes)
    } else {
        Source::Addresses(nets)
    };
    if empty && ok {
        diags.error(
            span,
            "empty `from` list: expected prefixes, e.g. [\"10.0.0.0/8\"]",
        );
        ok = false;
    }
    ok.then_some(source)
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

/// `dscp`: one value or a list, each a number 0-63 or a name (`"ef"`, `"af41"`, `"cs1"`,
/// any case). `Some(empty)` when absent, `None` when any value is invalid (reported).
fn dscp(raw: Option<&Spanned<RawValues>>, diags: &mut Diagnostics) -> Option<Vec<u8>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let values = match raw.get_ref() {
        RawValues::One(v) => std::slice::from_ref(v),
        RawValues::Many(list) => list.as_slice(),
    };
    if values.is_empty() {
        diags.error(
            raw.span(),
            "empty `dscp`: expected DSCP values, e.g. [\"ef\", \"af41\"] (or leave `dscp` out)",
        );
        return None;
    }
    let mut out = Vec::new();
    for v in values {
        let found = match v {
            RawPort::Number(n) => u8::try_from(*n).ok().filter(|d| *d <= 63),
            RawPort::Text(t) => dscp_by_name(t.trim()),
        };
        match found {
            Some(d) => out.push(d),
            None => {
                let shown = match v {
                    RawPort::Number(n) => n.to_string(),
                    RawPort::Text(t) => format!("\"{t}\""),
                };
                diags.error(
                    raw.span(),
                    format!("invalid dscp {shown}: expected a number 0-63 or a name: cs0-cs7, af11-af43, ef, le, va"),
                );
            }
        }
    }
    (out.len() == values.len()).then_some(out)
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
            AddressMatch::Masked(m) => (m.addr.is_ipv4(), m.addr.is_ipv6()),
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
        Source::Zone(z) => cfg.zones.get(z).map_or((true, true), zone_versions),
        Source::Set(n) => match cfg.sets.get(n).map(|s| s.family) {
            Some(SetFamily::Ipv4) => (true, false),
            Some(SetFamily::Ipv6) => (false, true),
            None => (true, true),
        },
        Source::Prefixes(nets) => net_versions(nets),
        Source::Addresses(list) => address_versions(list, cfg),
    }
}

fn dest_versions(d: &Destination, cfg: &PolicyConfig) -> Versions {
    match d {
        Destination::Any | Destination::Router => (true, true),
        Destination::Zone(z) => cfg.zones.get(z).map_or((true, true), zone_versions),
    }
}

/// The IP versions zone `z` sees: its `family`'s, and of those only its networks' versions
/// when it has networks.
pub(super) fn zone_versions(z: &Zone) -> Versions {
    if z.networks.is_empty() && z.masked_networks.is_empty() {
        return z.family.versions();
    }
    let (n4, n6) = if z.networks.is_empty() {
        (false, false)
    } else {
        net_versions(&z.networks)
    };
    let (m4, m6) = z
        .masked_networks
        .iter()
        .fold((false, false), |(v4, v6), m| {
            (v4 || m.addr.is_ipv4(), v6 || m.addr.is_ipv6())
        });
    and(z.family.versions(), (n4 || m4, n6 || m6))
}

fn protocol_versions(p: Protocol) -> Versions {
    match p {
        Protocol::Icmp => (true, false),
        Protocol::Icmpv6 => (false, true),
        _ => (true, true),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::load_str;

    const ZONES: &str = "[policy]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n";

    fn rule(dscp: &str) -> String {
        format!(
            "{ZONES}[[policy.rule]]\nname = \"voice\"\nfrom = \"lan\"\ndscp = {dscp}\naction = \"accept\"\n"
        )
    }

    fn dscp_of(dscp: &str) -> Vec<u8> {
        let d = load_str(&[("main.toml", &rule(dscp))]).unwrap();
        d.policy.unwrap().rules[0].matches.dscp.clone()
    }

    fn error_of(dscp: &str) -> String {
        load_str(&[("main.toml", &rule(dscp))])
            .expect_err("config must be rejected")
            .rendered
    }

    #[test]
    fn dscp_takes_names_in_any_case_and_numbers_one_or_a_list() {
        assert_eq!(dscp_of(r#"["cs1", "af41", 46]"#), [8, 34, 46]);
        assert_eq!(dscp_of(r#""ef""#), [46]);
        assert_eq!(dscp_of("63"), [63]);
        assert_eq!(dscp_of(r#"["LE", "Va", "CS0", "af43"]"#), [1, 44, 0, 38]);
        let d = load_str(&[("main.toml", &rule("[]").replace("dscp = []\n", ""))]).unwrap();
        assert!(d.policy.unwrap().rules[0].matches.dscp.is_empty());
    }

    #[test]
    fn a_bad_dscp_is_reported_at_its_place_with_what_was_expected() {
        let expected = "expected a number 0-63 or a name: cs0-cs7, af11-af43, ef, le, va";
        for (value, shown) in [
            (r#"["cs1", "af44"]"#, r#"invalid dscp "af44""#),
            ("64", "invalid dscp 64"),
            (r#"[8, -1]"#, "invalid dscp -1"),
            (r#""""#, r#"invalid dscp """#),
        ] {
            let out = error_of(value);
            assert!(
                out.contains(&format!("main.toml:7:8: error: {shown}: {expected}")),
                "{value}: {out}"
            );
        }
        assert!(error_of("[]").contains("main.toml:7:8: error: empty `dscp`"));
        assert!(
            error_of("true").contains("main.toml:7:8: error: invalid type: boolean `true`, expected a name or a number, or a list of them"),
            "{}",
            error_of("true")
        );
        assert!(
            error_of("[[8]]").contains("a list inside the list"),
            "{}",
            error_of("[[8]]")
        );
    }
}
