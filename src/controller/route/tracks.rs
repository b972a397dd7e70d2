//! Tracks in the route controller's terms: the routes a down track withdraws, and the private
//! route and rule each track's probe leaves through (pure).
//!
//! Each track owns one route (to its target, via its gateway and device, in its private
//! table) and one rule (its mark -> that table). Both are installed and owned like any
//! configured route and rule, whatever the track's state: that is what lets a probe test a
//! withdrawn uplink.

use std::borrow::Cow;
use std::collections::BTreeSet;

use ipnet::IpNet;

use crate::config::route::{Route, RouteKind, RouteRule, Routes, RoutingConfig, RuleFamily, Track};

/// The routes and rules to install given which tracks are down.
#[derive(Debug)]
pub struct Effective<'a> {
    /// The configured routes but those of down tracks, then each track's probe route.
    pub routes: Cow<'a, Routes>,
    /// The configured rules, then each track's probe rule.
    pub rules: Cow<'a, [RouteRule]>,
    /// The routes withdrawn, with their track.
    pub withdrawn: Vec<(&'a Route, &'a str)>,
}

/// Applies the tracks' state to `routing`; without tracks, borrows it as it is (so a config of
/// 100,000 routes is not copied per sync).
pub fn effective<'a>(routing: &'a RoutingConfig, down: &BTreeSet<String>) -> Effective<'a> {
    if routing.tracks.is_empty() {
        return Effective {
            routes: Cow::Borrowed(&routing.routes),
            rules: Cow::Borrowed(&routing.rules),
            withdrawn: Vec::new(),
        };
    }
    let withdrawn: Vec<(&'a Route, &'a str)> = routing
        .routes
        .iter()
        .filter_map(|route| match routing.track_of(route) {
            Some(track) if down.contains(track) => Some((route, track)),
            _ => None,
        })
        .collect();
    // The fingerprints are copied with the routes kept, not taken again.
    let mut routes = if withdrawn.is_empty() {
        routing.routes.clone()
    } else {
        routing
            .routes
            .filtered(|route| !routing.track_of(route).is_some_and(|t| down.contains(t)))
    };
    routes.extend(routing.tracks.iter().map(probe_route));
    let mut rules = routing.rules.clone();
    rules.extend(routing.tracks.iter().map(probe_rule));
    Effective {
        routes: Cow::Owned(routes),
        rules: Cow::Owned(rules),
        withdrawn,
    }
}

/// The routes `routing` ties to each track (what `plan` shows a down track withdraws).
pub fn tied_routes<'a>(routing: &'a RoutingConfig, track: &str) -> Vec<&'a Route> {
    routing
        .routes
        .iter()
        .filter(|r| routing.track_of(r) == Some(track))
        .collect()
}

/// The one route of a track's private table: its target, through its gateway and device.
pub fn probe_route(track: &Track) -> Route {
    Route {
        to: IpNet::from(track.target.ip()),
        via: Some(track.via),
        dev: Some(track.dev.clone()),
        metric: None,
        table: track.table,
        kind: RouteKind::Unicast,
        src: None,
        onlink: false,
        mtu: None,
        nexthops: Vec::new(),
    }
}

/// The rule that sends the track's marked probes to its private table.
pub fn probe_rule(track: &Track) -> RouteRule {
    RouteRule {
        priority: track.priority,
        family: if track.target.is_ipv4() {
            RuleFamily::Ipv4
        } else {
            RuleFamily::Ipv6
        },
        from: None,
        to: None,
        iif: None,
        oif: None,
        fwmark: Some((track.fwmark, None)),
        table: track.table,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    const CONFIG: &str = r#"
[[track]]
name = "wan1"
check = "tcp"
target = "192.0.2.10:53"
via = "203.0.113.1"
dev = "eth0"
[[route]]
to = "default"
via = "203.0.113.1"
dev = "eth0"
metric = 10
track = "wan1"
[[route]]
to = "default"
via = "198.51.100.1"
dev = "eth1"
metric = 20
"#;

    #[test]
    fn a_down_track_withdraws_its_routes_and_keeps_its_probe_route_and_rule() {
        let routing = load_str(&[("e.toml", CONFIG)]).unwrap().routing;
        let up = effective(&routing, &BTreeSet::new());
        assert_eq!(up.routes.len(), 3, "both defaults and the probe route");
        assert_eq!(up.rules.len(), 1);
        assert!(up.withdrawn.is_empty());
        let down = effective(&routing, &BTreeSet::from(["wan1".to_string()]));
        let metrics: Vec<Option<u32>> = down.routes.iter().map(|r| r.metric).collect();
        assert_eq!(
            metrics,
            vec![Some(20), None],
            "metric 10 withdrawn, probe route kept"
        );
        assert_eq!(down.withdrawn.len(), 1);
        assert_eq!(down.withdrawn[0].0.metric, Some(10));
        let probe = &down.routes[1];
        assert_eq!(probe.to, "192.0.2.10/32".parse::<IpNet>().unwrap());
        assert_eq!(probe.table, routing.tracks[0].table);
        assert_eq!(down.rules[0].fwmark, Some((routing.tracks[0].fwmark, None)));
        assert_eq!(down.rules[0].table, routing.tracks[0].table);
    }

    #[test]
    fn without_tracks_the_config_is_borrowed_unchanged() {
        let text = CONFIG.replace("track = \"wan1\"", "");
        let text = &text[text.find("[[route]]").unwrap()..];
        let routing = load_str(&[("e.toml", text)]).unwrap().routing;
        let e = effective(&routing, &BTreeSet::from(["wan1".to_string()]));
        assert!(matches!(e.routes, Cow::Borrowed(_)));
        assert_eq!(e.routes.len(), 2);
    }
}
