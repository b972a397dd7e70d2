//! Model: desired state -> the route controller's model, the route and rule specs its planner
//! reads ([`route_specs`], [`rule_specs_of`]; pure; the only place that knows both
//! vocabularies).
//!
//! Specs are in the kernel's terms, so the planner compares like with like: an IPv6 route
//! configured with `metric = 0` is stored by the kernel as metric 1024 (`IP6_RT_PRIO_USER`),
//! and so it is here.

use crate::config::route::{NextHopConfig, Route, RouteKind, RouteRule, RuleFamily};
use crate::dataplane::route::{Family, NextHop, RouteKey, RouteSpec, RouteType, RuleSpec};

/// The metric the kernel records for a configured route.
pub fn kernel_metric(route: &Route) -> u32 {
    Family::of_net(&route.to).kernel_metric(route.effective_metric())
}

/// The kernel identity of a configured route, without building its spec (no allocation).
pub fn route_key(route: &Route) -> RouteKey {
    RouteKey {
        family: Family::of_net(&route.to),
        table: route.table,
        dst: route.to.trunc(),
        metric: kernel_metric(route),
    }
}

/// The spec of one configured route, owned by `protocol`.
pub fn route_spec(route: &Route, protocol: u8) -> RouteSpec {
    RouteSpec {
        table: route.table,
        metric: kernel_metric(route),
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

/// Every desired route spec of a snapshot.
pub fn route_specs(routes: &[Route], protocol: u8) -> Vec<RouteSpec> {
    routes.iter().map(|r| route_spec(r, protocol)).collect()
}

/// Every desired rule spec of a snapshot.
pub fn rule_specs_of(rules: &[RouteRule], protocol: u8) -> Vec<RuleSpec> {
    rules.iter().flat_map(|r| rule_specs(r, protocol)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(to: &str, metric: Option<u32>) -> Route {
        Route {
            to: to.parse().unwrap(),
            via: None,
            dev: Some("eth0".into()),
            metric,
            table: 254,
            kind: RouteKind::Unicast,
            src: None,
            onlink: false,
            mtu: None,
            nexthops: Vec::new(),
        }
    }

    #[test]
    fn bug_8a_an_ipv6_route_with_metric_0_is_metric_1024_as_the_kernel_stores_it() {
        let v6 = route_spec(&route("2001:db8:1::/48", Some(0)), 190);
        assert_eq!(v6.metric, 1024);
        assert_eq!(
            v6.key(),
            route_spec(&route("2001:db8:1::/48", None), 190).key()
        );
        // IPv4 keeps metric 0 (the kernel stores what it is given).
        assert_eq!(route_spec(&route("10.1.0.0/16", Some(0)), 190).metric, 0);
        assert_eq!(
            route_spec(&route("2001:db8:1::/48", Some(5)), 190).metric,
            5
        );
    }

    #[test]
    fn the_key_without_a_spec_is_the_specs_key() {
        for r in [
            route("10.1.2.3/16", None),
            route("10.1.0.0/16", Some(7)),
            route("2001:db8::1/64", Some(0)),
            Route {
                table: 100,
                ..route("::/0", Some(300))
            },
        ] {
            assert_eq!(route_key(&r), route_spec(&r, 190).key(), "{r:?}");
        }
    }
}
