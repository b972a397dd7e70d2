//! `[[route]]` and `[[route_rule]]`: static routes and routing policy rules.
//!
//! Raw serde structs (unknown keys are errors) are validated into plain types. Every problem
//! points at the offending value: a gateway of the wrong family, a multipath route that also
//! sets `via`, a bad prefix, an unknown table name, a route or rule defined twice (naming both
//! places). Nothing here knows about netlink; the route controller translates these types.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::diag::Diagnostics;
use super::doc::{Doc, Value, de};
use super::net::{parse_addr, parse_prefix};
use toml::de::DeValue;

/// The main routing table's id.
pub const TABLE_MAIN: u32 = 254;

/// Validated routes and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingConfig {
    /// Every `[[route]]`, in file order.
    pub routes: Vec<Route>,
    /// Every `[[route_rule]]`, in file order.
    pub rules: Vec<RouteRule>,
}

/// A route's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteKind {
    /// Forward via a gateway or out of a device.
    #[default]
    Unicast,
    /// Drop silently.
    Blackhole,
    /// Drop with ICMP host unreachable.
    Unreachable,
    /// Drop with ICMP administratively prohibited.
    Prohibit,
    /// Continue policy routing with the next rule.
    Throw,
}

/// One path of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHopConfig {
    /// Gateway.
    pub via: Option<IpAddr>,
    /// Output device.
    pub dev: Option<String>,
    /// Relative weight, 1..=256 (default 1).
    pub weight: u16,
    /// Gateway is on-link.
    pub onlink: bool,
}

/// A validated `[[route]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix (`"default"` = 0.0.0.0/0).
    pub to: IpNet,
    /// Gateway, same family as `to`.
    pub via: Option<IpAddr>,
    /// Output device.
    pub dev: Option<String>,
    /// Metric; `None` = the kernel's default (0 for IPv4, 1024 for IPv6).
    pub metric: Option<u32>,
    /// Table id (default 254, main).
    pub table: u32,
    /// Route type.
    pub kind: RouteKind,
    /// Preferred source address, same family as `to`.
    pub src: Option<IpAddr>,
    /// Gateway is on-link.
    pub onlink: bool,
    /// Path MTU.
    pub mtu: Option<u32>,
    /// Multipath next hops (instead of `via`/`dev`).
    pub nexthops: Vec<NextHopConfig>,
}

impl Route {
    /// The metric the kernel will record (explicit, or the family's default).
    pub fn effective_metric(&self) -> u32 {
        self.metric.unwrap_or(match self.to {
            IpNet::V4(_) => 0,
            IpNet::V6(_) => 1024,
        })
    }
}

/// Which address families a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleFamily {
    /// IPv4 only.
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// One rule for each family.
    Both,
}

/// A validated `[[route_rule]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRule {
    /// Priority (`pref`).
    pub priority: u32,
    /// Families: from the prefixes when given, else `family`, else both.
    pub family: RuleFamily,
    /// Source prefix.
    pub from: Option<IpNet>,
    /// Destination prefix.
    pub to: Option<IpNet>,
    /// Input interface.
    pub iif: Option<String>,
    /// Output interface.
    pub oif: Option<String>,
    /// Firewall mark and optional mask.
    pub fwmark: Option<(u32, Option<u32>)>,
    /// Table to look up.
    pub table: u32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawTable {
    Number(i64),
    Name(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawMark {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNextHop {
    via: Option<Spanned<String>>,
    dev: Option<Spanned<String>>,
    weight: Option<Spanned<i64>>,
    onlink: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    to: Spanned<String>,
    via: Option<Spanned<String>>,
    dev: Option<Spanned<String>>,
    metric: Option<Spanned<i64>>,
    table: Option<Spanned<RawTable>>,
    #[serde(rename = "type")]
    kind: Option<Spanned<String>>,
    src: Option<Spanned<String>>,
    onlink: Option<Spanned<bool>>,
    mtu: Option<Spanned<i64>>,
    nexthops: Option<Spanned<Vec<Spanned<RawNextHop>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    priority: Spanned<i64>,
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    iif: Option<Spanned<String>>,
    oif: Option<Spanned<String>>,
    fwmark: Option<Spanned<RawMark>>,
    table: Spanned<RawTable>,
    family: Option<Spanned<String>>,
}

/// Validates every `[[route]]` and `[[route_rule]]`.
pub fn validate(doc: &Doc<'_>, diags: &mut Diagnostics) -> RoutingConfig {
    let mut out = RoutingConfig::default();
    let mut seen: HashMap<(u32, IpNet, u32), Range<usize>> = HashMap::new();
    // Item by item (not `doc.items`): a config of 100k routes never holds every raw route.
    for value in array_items(doc, "route", diags) {
        let Some(raw) = de::<RawRoute>(value, diags) else {
            continue;
        };
        let span = value.span();
        let errors_before = diags.len();
        let route = validate_route(raw, span.clone(), diags);
        if let Some(route) = route.filter(|_| diags.len() == errors_before) {
            let key = (route.table, route.to, route.effective_metric());
            if let Some(first) = seen.get(&key) {
                diags.error_also(
                    span,
                    format!(
                        "route to {} (table {}, metric {}) is defined twice: the table, prefix and metric identify a route",
                        route.to,
                        route.table,
                        route.effective_metric()
                    ),
                    first.clone(),
                    "first defined here",
                );
                continue;
            }
            seen.insert(key, span);
            out.routes.push(route);
        }
    }
    let mut seen_rules: Vec<(RouteRule, Range<usize>)> = Vec::new();
    for item in doc.items::<RawRule>("route_rule", diags) {
        let span = item.span();
        let errors_before = diags.len();
        let rule = validate_rule(item.into_inner(), diags);
        if let Some(rule) = rule.filter(|_| diags.len() == errors_before) {
            if let Some((_, first)) = seen_rules.iter().find(|(r, _)| *r == rule) {
                diags.error_also(
                    span,
                    "this route_rule is defined twice",
                    first.clone(),
                    "first defined here",
                );
                continue;
            }
            seen_rules.push((rule.clone(), span));
            out.rules.push(rule);
        }
    }
    out
}

/// The elements of top-level array `key` (an error if it is not an array).
fn array_items<'d, 'a>(doc: &'d Doc<'a>, key: &str, diags: &mut Diagnostics) -> Vec<&'d Value<'a>> {
    let Some(value) = doc.value(key) else {
        return Vec::new();
    };
    match value.get_ref() {
        DeValue::Array(items) => items.iter().collect(),
        other => {
            diags.error(
                value.span(),
                format!(
                    "invalid type: {}, expected an array of tables such as [[{key}]]",
                    other.type_str()
                ),
            );
            Vec::new()
        }
    }
}

fn family_name(net: &IpNet) -> &'static str {
    match net {
        IpNet::V4(_) => "IPv4",
        IpNet::V6(_) => "IPv6",
    }
}

fn addr_family_name(addr: &IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

fn same_family(net: &IpNet, addr: &IpAddr) -> bool {
    matches!(
        (net, addr),
        (IpNet::V4(_), IpAddr::V4(_)) | (IpNet::V6(_), IpAddr::V6(_))
    )
}

/// Parses an address of the route's family; errors name both.
fn route_addr(
    raw: &Spanned<String>,
    to: Option<&IpNet>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<IpAddr> {
    match parse_addr(raw.get_ref()) {
        Ok(addr) => match to {
            Some(to) if !same_family(to, &addr) => {
                diags.error(
                    raw.span(),
                    format!(
                        "{what} {addr} is {} but the route to {to} is {}: expected an {} address",
                        addr_family_name(&addr),
                        family_name(to),
                        family_name(to)
                    ),
                );
                None
            }
            _ => Some(addr),
        },
        Err(msg) => {
            diags.error(raw.span(), msg);
            None
        }
    }
}

/// Checks a Linux interface name: 1 to 15 bytes, no '/', ':' or whitespace.
fn ifname(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<String> {
    let name = raw.get_ref();
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    if ok {
        Some(name.clone())
    } else {
        diags.error(
            raw.span(),
            format!("invalid interface name `{name}`: expected 1 to 15 characters without '/', ':' or spaces"),
        );
        None
    }
}

fn table(raw: &Spanned<RawTable>, diags: &mut Diagnostics) -> Option<u32> {
    match raw.get_ref() {
        RawTable::Number(n) => match u32::try_from(*n) {
            Ok(t) if t > 0 => Some(t),
            _ => {
                diags.error(
                    raw.span(),
                    format!(
                        "invalid table {n}: expected a number from 1 to 4294967295, or \"main\""
                    ),
                );
                None
            }
        },
        RawTable::Name(name) => match name.as_str() {
            "main" => Some(TABLE_MAIN),
            "default" => Some(253),
            "local" => Some(255),
            other => {
                diags.error(
                    raw.span(),
                    format!("unknown table name `{other}`: expected a number from 1 to 4294967295, or \"main\", \"default\", \"local\""),
                );
                None
            }
        },
    }
}

fn number(
    raw: &Spanned<i64>,
    range: std::ops::RangeInclusive<i64>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<i64> {
    let n = *raw.get_ref();
    if range.contains(&n) {
        Some(n)
    } else {
        diags.error(
            raw.span(),
            format!(
                "invalid {what} {n}: expected a number from {} to {}",
                range.start(),
                range.end()
            ),
        );
        None
    }
}

fn validate_route(raw: RawRoute, span: Range<usize>, diags: &mut Diagnostics) -> Option<Route> {
    let to = if raw.to.get_ref() == "default" {
        Some(IpNet::V4(Default::default()))
    } else {
        match parse_prefix(raw.to.get_ref()) {
            Ok(net) => Some(net),
            Err(msg) => {
                diags.error(raw.to.span(), msg);
                None
            }
        }
    };
    let kind = match raw.kind.as_ref().map(|k| (k.span(), k.get_ref().as_str())) {
        None | Some((_, "unicast")) => RouteKind::Unicast,
        Some((_, "blackhole")) => RouteKind::Blackhole,
        Some((_, "unreachable")) => RouteKind::Unreachable,
        Some((_, "prohibit")) => RouteKind::Prohibit,
        Some((_, "throw")) => RouteKind::Throw,
        Some((span, other)) => {
            diags.error(
                span,
                format!("unknown route type `{other}`: expected one of `unicast`, `blackhole`, `unreachable`, `prohibit`, `throw`"),
            );
            RouteKind::Unicast
        }
    };
    let via = raw
        .via
        .as_ref()
        .and_then(|v| route_addr(v, to.as_ref(), "gateway", diags));
    let src = raw
        .src
        .as_ref()
        .and_then(|v| route_addr(v, to.as_ref(), "preferred source", diags));
    let dev = raw.dev.as_ref().and_then(|d| ifname(d, diags));
    let metric = raw
        .metric
        .as_ref()
        .and_then(|m| number(m, 0..=i64::from(u32::MAX), "metric", diags))
        .map(|m| m as u32);
    let table = match &raw.table {
        Some(t) => table(t, diags)?,
        None => TABLE_MAIN,
    };
    let mtu = raw
        .mtu
        .as_ref()
        .and_then(|m| number(m, 68..=65535, "mtu", diags))
        .map(|m| m as u32);
    let onlink = raw.onlink.as_ref().is_some_and(|o| *o.get_ref());

    let mut nexthops = Vec::new();
    if let Some(list) = &raw.nexthops {
        if list.get_ref().is_empty() {
            diags.error(
                list.span(),
                "empty nexthops: expected at least one { via = ..., dev = ... }",
            );
        }
        for hop in list.get_ref() {
            let h = hop.get_ref();
            let via = h
                .via
                .as_ref()
                .and_then(|v| route_addr(v, to.as_ref(), "gateway", diags));
            let dev = h.dev.as_ref().and_then(|d| ifname(d, diags));
            if h.via.is_none() && h.dev.is_none() {
                diags.error(hop.span(), "a nexthop needs `via`, `dev` or both");
            }
            let weight = h
                .weight
                .as_ref()
                .and_then(|w| number(w, 1..=256, "weight", diags))
                .unwrap_or(1) as u16;
            let hop_onlink = h.onlink.as_ref().is_some_and(|o| *o.get_ref());
            if let (Some(o), None) = (&h.onlink, &h.via)
                && *o.get_ref()
            {
                diags.error(
                    o.span(),
                    "onlink needs a gateway (`via`) in the same nexthop",
                );
            }
            nexthops.push(NextHopConfig {
                via,
                dev,
                weight,
                onlink: hop_onlink,
            });
        }
        for (key, value) in [("via", raw.via.as_ref()), ("dev", raw.dev.as_ref())] {
            if let Some(v) = value {
                diags.error(
                    v.span(),
                    format!("a multipath route sets `{key}` in each of its nexthops, not on the route: remove this `{key}` or the nexthops"),
                );
            }
        }
        if let Some(o) = &raw.onlink {
            diags.error(
                o.span(),
                "a multipath route sets `onlink` in each of its nexthops",
            );
        }
    }

    if kind == RouteKind::Unicast {
        if raw.via.is_none() && raw.dev.is_none() && raw.nexthops.is_none() {
            diags.error(
                span,
                "a unicast route needs `via`, `dev` or `nexthops` (or a `type` such as \"blackhole\")",
            );
        }
        if let (Some(o), None) = (&raw.onlink, &raw.via)
            && *o.get_ref()
            && raw.nexthops.is_none()
        {
            diags.error(o.span(), "onlink needs a gateway (`via`)");
        }
    } else {
        let kind_name = raw.kind.as_ref().map_or("", |k| k.get_ref().as_str());
        let forwarding_keys = [
            ("via", raw.via.as_ref().map(|v| v.span())),
            ("dev", raw.dev.as_ref().map(|v| v.span())),
            ("nexthops", raw.nexthops.as_ref().map(|v| v.span())),
            ("onlink", raw.onlink.as_ref().map(|v| v.span())),
        ];
        for (key, at) in forwarding_keys {
            if let Some(at) = at {
                diags.error(
                    at,
                    format!(
                        "a {kind_name} route does not forward packets, so `{key}` cannot be set"
                    ),
                );
            }
        }
    }

    Some(Route {
        to: to?,
        via,
        dev,
        metric,
        table,
        kind,
        src,
        onlink,
        mtu,
        nexthops,
    })
}

fn mark(raw: &Spanned<RawMark>, diags: &mut Diagnostics) -> Option<(u32, Option<u32>)> {
    fn num(text: &str) -> Option<u32> {
        let t = text.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        }
    }
    let parsed = match raw.get_ref() {
        RawMark::Number(n) => u32::try_from(*n).ok().map(|m| (m, None)),
        RawMark::Text(t) => match t.split_once('/') {
            Some((m, mask)) => num(m).zip(num(mask)).map(|(m, k)| (m, Some(k))),
            None => num(t).map(|m| (m, None)),
        },
    };
    if parsed.is_none() {
        diags.error(
            raw.span(),
            "invalid fwmark: expected a number or a string \"MARK\" or \"MARK/MASK\" (decimal or 0x hex), e.g. \"0x10/0xff\"",
        );
    }
    parsed
}

fn validate_rule(raw: RawRule, diags: &mut Diagnostics) -> Option<RouteRule> {
    let priority = number(&raw.priority, 1..=i64::from(u32::MAX), "priority", diags)? as u32;
    let mut prefix = |p: &Option<Spanned<String>>| {
        p.as_ref().and_then(|p| match parse_prefix(p.get_ref()) {
            Ok(net) => Some((net, p.span())),
            Err(msg) => {
                diags.error(p.span(), msg);
                None
            }
        })
    };
    let from = prefix(&raw.from);
    let to = prefix(&raw.to);
    let explicit = match raw
        .family
        .as_ref()
        .map(|f| (f.span(), f.get_ref().as_str()))
    {
        None => None,
        Some((_, "ipv4")) => Some(RuleFamily::Ipv4),
        Some((_, "ipv6")) => Some(RuleFamily::Ipv6),
        Some((_, "both")) => Some(RuleFamily::Both),
        Some((span, other)) => {
            diags.error(
                span,
                format!("unknown family `{other}`: expected `ipv4`, `ipv6` or `both`"),
            );
            return None;
        }
    };
    let net_family = |net: &IpNet| match net {
        IpNet::V4(_) => RuleFamily::Ipv4,
        IpNet::V6(_) => RuleFamily::Ipv6,
    };
    let mut family = explicit.unwrap_or(RuleFamily::Both);
    let mut decided_by: Option<(Range<usize>, &str)> =
        raw.family.as_ref().map(|f| (f.span(), "family"));
    for (net, span, key) in [
        from.as_ref().map(|(n, s)| (n, s, "from")),
        to.as_ref().map(|(n, s)| (n, s, "to")),
    ]
    .into_iter()
    .flatten()
    {
        let f = net_family(net);
        match &decided_by {
            Some((first, what)) if family != f => {
                diags.error_also(
                    span.clone(),
                    format!(
                        "`{key}` is {} but the rule's {what} is not",
                        family_name(net)
                    ),
                    first.clone(),
                    "family decided here",
                );
            }
            _ => {
                family = f;
                decided_by = Some((span.clone(), key));
            }
        }
    }
    let iif = raw.iif.as_ref().and_then(|d| ifname(d, diags));
    let oif = raw.oif.as_ref().and_then(|d| ifname(d, diags));
    let fwmark = raw.fwmark.as_ref().and_then(|m| mark(m, diags));
    let table = table(&raw.table, diags)?;
    Some(RouteRule {
        priority,
        family,
        from: from.map(|(n, _)| n),
        to: to.map(|(n, _)| n),
        iif,
        oif,
        fwmark,
        table,
    })
}

#[cfg(test)]
mod tests {
    use super::super::load_str;
    use super::*;

    fn routing(text: &str) -> RoutingConfig {
        load_str(&[("edgenetd.toml", text)]).unwrap().routing
    }

    fn errors(text: &str) -> String {
        load_str(&[("edgenetd.toml", text)])
            .expect_err("config must be rejected")
            .rendered
    }

    #[test]
    fn every_route_key_is_read() {
        let r = routing(
            r#"
[[route]]
to = "10.20.0.0/16"
via = "192.168.1.1"
dev = "eth1"
metric = 100
table = 100
src = "192.168.1.2"
onlink = true
mtu = 1400

[[route]]
to = "default"
type = "unicast"
table = "main"
nexthops = [ { via = "192.168.1.1", dev = "eth1", weight = 1 },
             { via = "192.168.2.1", dev = "eth2", weight = 2, onlink = true } ]

[[route]]
to = "2001:db8::/32"
type = "unreachable"

[[route_rule]]
priority = 1000
from = "10.0.5.0/24"
table = 100

[[route_rule]]
priority = 1001
iif = "eth1"
oif = "eth2"
fwmark = "0x10/0xff"
to = "2001:db8::/32"
table = "main"

[[route_rule]]
priority = 1002
fwmark = 7
table = 7
"#,
        );
        assert_eq!(
            r.routes[0],
            Route {
                to: "10.20.0.0/16".parse().unwrap(),
                via: Some("192.168.1.1".parse().unwrap()),
                dev: Some("eth1".into()),
                metric: Some(100),
                table: 100,
                kind: RouteKind::Unicast,
                src: Some("192.168.1.2".parse().unwrap()),
                onlink: true,
                mtu: Some(1400),
                nexthops: vec![],
            }
        );
        assert_eq!(r.routes[1].to.to_string(), "0.0.0.0/0");
        assert_eq!(r.routes[1].table, 254);
        assert_eq!(r.routes[1].nexthops[1].weight, 2);
        assert!(r.routes[1].nexthops[1].onlink);
        assert_eq!(r.routes[2].kind, RouteKind::Unreachable);
        assert_eq!(r.routes[2].effective_metric(), 1024);
        assert_eq!(r.rules[0].family, RuleFamily::Ipv4);
        assert_eq!(r.rules[1].family, RuleFamily::Ipv6);
        assert_eq!(r.rules[1].fwmark, Some((0x10, Some(0xff))));
        assert_eq!(r.rules[1].table, 254);
        assert_eq!(r.rules[2].family, RuleFamily::Both);
        assert_eq!(r.rules[2].fwmark, Some((7, None)));
    }

    #[test]
    fn a_gateway_of_the_wrong_family_is_pointed_at() {
        assert_eq!(
            errors("[[route]]\nto = \"10.0.0.0/8\"\nvia = \"2001:db8::1\"\n"),
            "edgenetd.toml:3:7: error: gateway 2001:db8::1 is IPv6 but the route to 10.0.0.0/8 is IPv4: expected an IPv4 address\n  |\n3 | via = \"2001:db8::1\"\n  |       ^^^^^^^^^^^^^\n"
        );
    }

    #[test]
    fn a_multipath_route_that_also_sets_via_is_an_error_at_via() {
        let e = errors(
            "[[route]]\nto = \"10.0.0.0/8\"\nvia = \"192.0.2.1\"\nnexthops = [{ via = \"192.0.2.2\" }]\n",
        );
        assert!(
            e.starts_with("edgenetd.toml:3:7: error: a multipath route sets `via` in each of its nexthops, not on the route"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_each_get_their_own_error_with_place() {
        let e = errors(
            r#"[[route]]
to = "10.0.0.1/8"
via = "192.0.2.1"

[[route]]
to = "10.1.0.0/16"
dev = "eth1"
table = "vpn"

[[route]]
to = "10.2.0.0/16"
type = "blackhole"
via = "192.0.2.1"

[[route]]
to = "10.3.0.0/16"

[[route]]
to = "10.4.0.0/16"
dev = "eth1"
mtu = 20
tabel = 5

[[route_rule]]
priority = 0
table = 100

[[route_rule]]
priority = 10
from = "10.0.0.0/8"
to = "2001:db8::/32"
fwmark = "x/y"
table = 100
"#,
        );
        for expected in [
            "edgenetd.toml:2:6: error: invalid prefix `10.0.0.1/8`: host bits are set; did you mean \"10.0.0.0/8\"?",
            "edgenetd.toml:8:9: error: unknown table name `vpn`",
            "edgenetd.toml:13:7: error: a blackhole route does not forward packets, so `via` cannot be set",
            "edgenetd.toml:15:1: error: a unicast route needs `via`, `dev` or `nexthops`",
            "edgenetd.toml:22:1: error: unknown field `tabel`",
            "edgenetd.toml:25:12: error: invalid priority 0: expected a number from 1 to 4294967295",
            "edgenetd.toml:31:6: error: `to` is IPv6 but the rule's from is not",
            "edgenetd.toml:30:8: note: family decided here",
            "edgenetd.toml:32:10: error: invalid fwmark",
        ] {
            assert!(e.contains(expected), "missing {expected:?} in:\n{e}");
        }
    }

    #[test]
    fn nexthop_source_and_onlink_mistakes_are_pointed_at() {
        let e = errors(
            r#"[[route]]
to = "2001:db8::/32"
src = "192.0.2.1"
nexthops = [{ via = "2001:db8::1", weight = 0 }, { weight = 2 }, { dev = "eth0", onlink = true }]
onlink = true

[[route]]
to = "10.0.0.0/8"
dev = "eth0"
onlink = true
metric = -1

[[route]]
to = "10.1.0.0/16"
dev = "this-name-is-too-long"
nexthops = []
"#,
        );
        for expected in [
            "edgenetd.toml:3:7: error: preferred source 192.0.2.1 is IPv4 but the route to 2001:db8::/32 is IPv6",
            "edgenetd.toml:4:45: error: invalid weight 0: expected a number from 1 to 256",
            "edgenetd.toml:4:50: error: a nexthop needs `via`, `dev` or both",
            "edgenetd.toml:4:91: error: onlink needs a gateway (`via`) in the same nexthop",
            "edgenetd.toml:5:10: error: a multipath route sets `onlink` in each of its nexthops",
            "edgenetd.toml:10:10: error: onlink needs a gateway (`via`)",
            "edgenetd.toml:11:10: error: invalid metric -1: expected a number from 0 to 4294967295",
            "edgenetd.toml:15:7: error: invalid interface name `this-name-is-too-long`",
            "edgenetd.toml:16:12: error: empty nexthops",
            "edgenetd.toml:15:7: error: a multipath route sets `dev` in each of its nexthops",
        ] {
            assert!(e.contains(expected), "missing {expected:?} in:\n{e}");
        }
    }

    #[test]
    fn a_route_defined_twice_names_both_places_even_across_files() {
        let e = load_str(&[
            (
                "edgenetd.toml",
                "[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth0\"\n",
            ),
            (
                "conf.d/10-extra.toml",
                "[[route]]\nto = \"10.0.0.0/8\"\nvia = \"192.0.2.1\"\nmetric = 0\n",
            ),
        ])
        .unwrap_err()
        .rendered;
        assert!(
            e.contains("conf.d/10-extra.toml:1:1: error: route to 10.0.0.0/8 (table 254, metric 0) is defined twice"),
            "{e}"
        );
        assert!(
            e.contains("edgenetd.toml:1:1: note: first defined here"),
            "{e}"
        );
        // Another metric is another route.
        let ok = load_str(&[(
            "edgenetd.toml",
            "[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth0\"\n[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth1\"\nmetric = 10\n",
        )]);
        assert_eq!(ok.unwrap().routing.routes.len(), 2);
    }
}
