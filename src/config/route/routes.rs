//! `[[route]]` entries: each validated on its own as the loader hands it over, then checked
//! against the routes before it (a route defined twice names both places).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{ElementSink, Value, de_owned};
use super::super::net::parse_prefix;
use super::fast;
use super::model::{NextHopConfig, Route, RouteKind, TABLE_MAIN};
use super::raw::{RawNextHop, RawRoute};
use super::values::{ifname, number, route_addr, table};

/// What identifies a route to the kernel: table, destination and metric.
type RouteKey = (u32, IpNet, u32);

/// The hasher of the duplicate-route index: SipHash was a tenth of reading a 100,000-route
/// file, and the keys come from the operator's own files (no attacker picks them).
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn key(route: &Route) -> RouteKey {
    (route.table, route.to, route.effective_metric())
}

/// The validated `[[route]]` entries of one load, in order, with their own problems kept
/// apart until validation reports them (in the order the whole document would give).
#[derive(Debug, Default)]
pub struct RouteList {
    /// The routes that passed, first definition of each.
    pub(super) routes: Vec<Route>,
    /// Where each route of `routes` was defined.
    seen: HashMap<RouteKey, Range<usize>, BuildHasherDefault<KeyHasher>>,
    /// The problems of the entries so far.
    pub(super) diags: Diagnostics,
    /// The `track` of each route that names one (its index in `routes`), checked against the
    /// `[[track]]` names once every file is read.
    pub(super) tracks: Vec<(usize, Spanned<String>)>,
}

impl ElementSink for RouteList {
    type Mark = (usize, usize);

    fn reserve(&mut self, additional: usize) {
        self.routes.reserve_exact(additional);
        self.seen.reserve(additional);
    }

    fn push(&mut self, element: Value<'_>) {
        let span = element.span();
        if let Some(raw) = de_owned::<RawRoute>(element, &mut self.diags) {
            self.take(raw, span);
        }
    }

    fn push_text(&mut self, text: &str, base: usize) -> Option<Range<usize>> {
        let (raw, header) = fast::read(text, base)?;
        self.take(raw, header.clone());
        Some(header)
    }

    fn mark(&self) -> (usize, usize) {
        (self.routes.len(), self.diags.len())
    }

    fn rollback(&mut self, (routes, diags): (usize, usize)) {
        for route in &self.routes[routes..] {
            self.seen.remove(&key(route));
        }
        self.routes.truncate(routes);
        self.tracks.retain(|(i, _)| *i < routes);
        self.diags.truncate(diags);
    }
}

impl RouteList {
    /// Validates one raw route (`span`: its element's) and keeps it when valid and new.
    fn take(&mut self, raw: RawRoute, span: Range<usize>) {
        let errors_before = self.diags.len();
        let track = raw.track.clone();
        let route = validate_route(raw, span.clone(), &mut self.diags);
        if let Some(route) = route.filter(|_| self.diags.len() == errors_before)
            && self.add(route, span)
            && let Some(track) = track
        {
            self.tracks.push((self.routes.len() - 1, track));
        }
    }

    /// Keeps a valid route unless one with the same identity came first; true when kept.
    fn add(&mut self, route: Route, span: Range<usize>) -> bool {
        let key = key(&route);
        if let Some(first) = self.seen.get(&key) {
            self.diags.error_also(
                span,
                format!(
                    "route to {} (table {}, metric {}) is defined twice: the table, prefix and metric identify a route",
                    route.to, route.table, key.2
                ),
                first.clone(),
                "first defined here",
            );
            return false;
        }
        self.seen.insert(key, span);
        self.routes.push(route);
        true
    }
}

fn destination(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<IpNet> {
    if raw.get_ref() == "default" {
        return Some(IpNet::V4(Default::default()));
    }
    parse_prefix(raw.get_ref())
        .map_err(|msg| diags.error(raw.span(), msg))
        .ok()
}

fn kind(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> RouteKind {
    match raw.map(|k| (k.span(), k.get_ref().as_str())) {
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
    }
}

/// The metric in the kernel's terms: IPv6 has no metric 0 (the kernel stores 1024 instead),
/// so `metric = 0` on an IPv6 route is 1024, in the plan and in the duplicate check alike.
fn metric(raw: Option<&Spanned<i64>>, to: Option<&IpNet>, diags: &mut Diagnostics) -> Option<u32> {
    let metric = number(raw?, 0..=i64::from(u32::MAX), "metric", diags)? as u32;
    match to {
        Some(IpNet::V6(_)) if metric == 0 => Some(1024),
        _ => Some(metric),
    }
}

fn validate_route(raw: RawRoute, span: Range<usize>, diags: &mut Diagnostics) -> Option<Route> {
    let to = destination(&raw.to, diags);
    let kind = kind(raw.kind.as_ref(), diags);
    let addr = |v: &Option<Spanned<String>>, what, diags: &mut Diagnostics| {
        v.as_ref()
            .and_then(|v| route_addr(v, to.as_ref(), what, diags))
    };
    let via = addr(&raw.via, "gateway", diags);
    let src = addr(&raw.src, "preferred source", diags);
    let dev = raw.dev.as_ref().and_then(|d| ifname(d, diags));
    let metric = metric(raw.metric.as_ref(), to.as_ref(), diags);
    let table = match &raw.table {
        Some(t) => table(t, diags)?,
        None => TABLE_MAIN,
    };
    let mtu = raw
        .mtu
        .as_ref()
        .and_then(|m| number(m, 68..=65535, "mtu", diags))
        .map(|m| m as u32);
    let nexthops = match &raw.nexthops {
        Some(list) => multipath(&raw, list, to.as_ref(), diags),
        None => Vec::new(),
    };
    if kind == RouteKind::Unicast {
        check_unicast(&raw, span, diags);
    } else {
        check_not_forwarding(&raw, diags);
    }
    Some(Route {
        to: to?,
        via,
        dev,
        metric,
        table,
        kind,
        src,
        onlink: raw.onlink.as_ref().is_some_and(|o| *o.get_ref()),
        mtu,
        nexthops,
    })
}

/// The next hops of a multipath route; `via`, `dev` and `onlink` then belong in each hop.
fn multipath(
    raw: &RawRoute,
    list: &Spanned<Vec<Spanned<RawNextHop>>>,
    to: Option<&IpNet>,
    diags: &mut Diagnostics,
) -> Vec<NextHopConfig> {
    if list.get_ref().is_empty() {
        diags.error(
            list.span(),
            "empty nexthops: expected at least one { via = ..., dev = ... }",
        );
    }
    let hops = list
        .get_ref()
        .iter()
        .map(|hop| next_hop(hop, to, diags))
        .collect();
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
    hops
}

fn next_hop(
    hop: &Spanned<RawNextHop>,
    to: Option<&IpNet>,
    diags: &mut Diagnostics,
) -> NextHopConfig {
    let h = hop.get_ref();
    let via: Option<IpAddr> = h
        .via
        .as_ref()
        .and_then(|v| route_addr(v, to, "gateway", diags));
    let dev = h.dev.as_ref().and_then(|d| ifname(d, diags));
    if h.via.is_none() && h.dev.is_none() {
        diags.error(hop.span(), "a nexthop needs `via`, `dev` or both");
    }
    let weight = h
        .weight
        .as_ref()
        .and_then(|w| number(w, 1..=256, "weight", diags))
        .unwrap_or(1) as u16;
    if let (Some(o), None) = (&h.onlink, &h.via)
        && *o.get_ref()
    {
        diags.error(
            o.span(),
            "onlink needs a gateway (`via`) in the same nexthop",
        );
    }
    NextHopConfig {
        via,
        dev,
        weight,
        onlink: h.onlink.as_ref().is_some_and(|o| *o.get_ref()),
    }
}

/// A unicast route needs somewhere to send packets.
fn check_unicast(raw: &RawRoute, span: Range<usize>, diags: &mut Diagnostics) {
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
}

/// Blackhole, unreachable, prohibit and throw routes send nothing anywhere.
fn check_not_forwarding(raw: &RawRoute, diags: &mut Diagnostics) {
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
                format!("a {kind_name} route does not forward packets, so `{key}` cannot be set"),
            );
        }
    }
}
