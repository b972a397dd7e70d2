//! Validated config -> dataplane specs: the only place that knows both vocabularies.

use crate::config::route::{NextHopConfig, Route, RouteKind, RouteRule, RuleFamily};
use crate::dataplane::route::{Family, NextHop, RouteSpec, RouteType, RuleSpec};

/// The spec of one configured route, owned by `protocol`.
pub fn route_spec(route: &Route, protocol: u8) -> RouteSpec {
    RouteSpec {
        table: route.table,
        metric: route.effective_metric(),
        kind: match route.kind {
            RouteKind::Unicast => RouteType::Unicast,
            RouteKind::Blackhole => RouteType::Blackhole,
            RouteKind::Unreachable => RouteType::Unreachable,
            RouteKind::Prohibit => RouteType::Prohibit,
            RouteKind::Throw => RouteType::Throw,
        },
        via: route.via,
        dev: route.dev.clone(),
        src: route.src,
        onlink: route.onlink,
        mtu: route.mtu,
        nexthops: route.nexthops.iter().map(next_hop).collect(),
        ..RouteSpec::new(route.to, protocol)
    }
}

fn next_hop(hop: &NextHopConfig) -> NextHop {
    NextHop {
        via: hop.via,
        dev: hop.dev.clone(),
        weight: hop.weight,
        onlink: hop.onlink,
    }
}

/// The specs of one configured rule (two when it applies to both families), normalized.
pub fn rule_specs(rule: &RouteRule, protocol: u8) -> impl Iterator<Item = RuleSpec> + '_ {
    let families: &[Family] = match rule.family {
        RuleFamily::Ipv4 => &[Family::Ipv4],
        RuleFamily::Ipv6 => &[Family::Ipv6],
        RuleFamily::Both => &[Family::Ipv4, Family::Ipv6],
    };
    families.iter().map(move |family| {
        RuleSpec {
            from: rule.from,
            to: rule.to,
            iif: rule.iif.clone(),
            oif: rule.oif.clone(),
            fwmark: rule.fwmark.map(|(m, _)| m),
            fwmask: rule.fwmark.and_then(|(_, mask)| mask),
            ..RuleSpec::new(*family, rule.priority, rule.table, protocol)
        }
        .normalized()
    })
}

/// Every desired route and rule of a snapshot.
pub fn desired_specs(
    routes: &[Route],
    rules: &[RouteRule],
    protocol: u8,
) -> (Vec<RouteSpec>, Vec<RuleSpec>) {
    (
        routes.iter().map(|r| route_spec(r, protocol)).collect(),
        rules.iter().flat_map(|r| rule_specs(r, protocol)).collect(),
    )
}
