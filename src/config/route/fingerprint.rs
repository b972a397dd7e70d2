//! The configured routes with a fingerprint of each, taken when the list is built.
//!
//! A sync of 100,000 routes whose config changed in one place has to find that place. Reading
//! and comparing every route (128 bytes, plus a device name on the heap) against the previous
//! sync's took milliseconds, longer than `ip route replace` takes for the whole change; a
//! fingerprint (8 bytes per route) compared against the previous sync's fingerprints finds
//! it in a tenth of that. The fingerprints are taken where the routes are built (the loader
//! reads every byte of them anyway) and can never go stale: [`Routes`] lends its routes out
//! only for reading, and every way to change them ([`Routes::edit`], [`Routes::set`],
//! [`Extend`]) takes the fingerprints again.
//!
//! Equal routes always have equal fingerprints. Different routes have different ones but
//! with a chance of 2^-64 when more than one field differs (each mixing step is a bijection
//! of the state, so a route differing from another in one field always fingerprints
//! differently); whoever compares fingerprints must still verify, in full, now and then
//! (the route controller dumps and compares the kernel every period).

use std::net::IpAddr;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use ipnet::IpNet;

use super::model::{NextHopConfig, Route};

/// Routes in order, each with its fingerprint ([`fingerprint`]). Cloning is cheap: clones
/// share the routes until one of them changes (copy on write), so what keeps the routes of a
/// sync (the route controller's snapshot) shares the config's list instead of copying it.
#[derive(Clone, Default)]
pub struct Routes {
    /// The routes and their fingerprints, shared by clones.
    inner: Arc<Inner>,
}

/// What [`Routes`] shares.
#[derive(Clone, Default)]
struct Inner {
    /// The routes.
    list: Vec<Route>,
    /// `fingerprint(&list[i])` at `i`.
    prints: Vec<u64>,
}

impl Routes {
    /// No routes.
    pub fn new() -> Routes {
        Routes::default()
    }

    /// The routes, in order.
    pub fn as_slice(&self) -> &[Route] {
        &self.inner.list
    }

    /// The fingerprint of each route, in the same order.
    pub fn fingerprints(&self) -> &[u64] {
        &self.inner.prints
    }

    /// True when `other` is a clone of these routes not changed since (no route compared).
    pub fn shares(&self, other: &Routes) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Changes the routes through a guard that takes every fingerprint again when dropped
    /// (for tests and tools; what builds a large list uses `collect` or [`Extend`]).
    pub fn edit(&mut self) -> RoutesMut<'_> {
        RoutesMut(self)
    }

    /// Puts `route` at `index` (which must exist).
    pub fn set(&mut self, index: usize, route: Route) {
        let inner = Arc::make_mut(&mut self.inner);
        inner.prints[index] = fingerprint(&route);
        inner.list[index] = route;
    }

    /// Keeps the first `len` routes.
    pub fn truncate(&mut self, len: usize) {
        let inner = Arc::make_mut(&mut self.inner);
        inner.list.truncate(len);
        inner.prints.truncate(len);
    }

    /// Appends a route.
    pub fn push(&mut self, route: Route) {
        let inner = Arc::make_mut(&mut self.inner);
        inner.prints.push(fingerprint(&route));
        inner.list.push(route);
    }

    /// The routes `keep` says yes to, with their fingerprints (copied, not taken again).
    pub fn filtered(&self, mut keep: impl FnMut(&Route) -> bool) -> Routes {
        let mut out = Inner {
            list: Vec::with_capacity(self.len()),
            prints: Vec::with_capacity(self.len()),
        };
        for (route, &print) in self.inner.list.iter().zip(&self.inner.prints) {
            if keep(route) {
                out.list.push(route.clone());
                out.prints.push(print);
            }
        }
        Routes {
            inner: Arc::new(out),
        }
    }
}

impl Deref for Routes {
    type Target = [Route];

    fn deref(&self) -> &[Route] {
        &self.inner.list
    }
}

impl From<Vec<Route>> for Routes {
    fn from(list: Vec<Route>) -> Routes {
        let prints = list.iter().map(fingerprint).collect();
        Routes {
            inner: Arc::new(Inner { list, prints }),
        }
    }
}

impl FromIterator<Route> for Routes {
    fn from_iter<I: IntoIterator<Item = Route>>(iter: I) -> Routes {
        Routes::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl Extend<Route> for Routes {
    fn extend<I: IntoIterator<Item = Route>>(&mut self, iter: I) {
        for route in iter {
            self.push(route);
        }
    }
}

impl<'a> IntoIterator for &'a Routes {
    type Item = &'a Route;
    type IntoIter = std::slice::Iter<'a, Route>;

    fn into_iter(self) -> Self::IntoIter {
        self.inner.list.iter()
    }
}

/// Equal routes in the same order (shared ones without a look; then the fingerprints first:
/// unequal lists mostly differ there, and they are 16 times smaller).
impl PartialEq for Routes {
    fn eq(&self, other: &Routes) -> bool {
        self.shares(other)
            || (self.inner.prints == other.inner.prints && self.inner.list == other.inner.list)
    }
}

impl Eq for Routes {}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.list.fmt(f)
    }
}

/// The mutable routes of [`Routes::edit`]; the fingerprints are taken again on drop.
pub struct RoutesMut<'a>(&'a mut Routes);

impl Deref for RoutesMut<'_> {
    type Target = Vec<Route>;

    fn deref(&self) -> &Vec<Route> {
        &self.0.inner.list
    }
}

impl DerefMut for RoutesMut<'_> {
    fn deref_mut(&mut self) -> &mut Vec<Route> {
        &mut Arc::make_mut(&mut self.0.inner).list
    }
}

impl Drop for RoutesMut<'_> {
    fn drop(&mut self) {
        let inner = Arc::make_mut(&mut self.0.inner);
        inner.prints.clear();
        inner.prints.extend(inner.list.iter().map(fingerprint));
    }
}

/// The multiplier of the mixing step (the one rustc's own hasher uses: odd, so multiplying by
/// it is a bijection).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// A fingerprint of every field of `route`: each field is one or more words of a fixed
/// layout (a tag, then the value), mixed in by a step that is a bijection of the state.
pub fn fingerprint(route: &Route) -> u64 {
    let mut h = Mix(0);
    h.net(&route.to);
    h.addr(route.via);
    h.addr(route.src);
    h.add(u64::from(route.table));
    h.add(opt(route.metric));
    h.add((u64::from(route.kind as u8) << 41) | (u64::from(route.onlink) << 40) | opt(route.mtu));
    h.name(route.dev.as_deref());
    h.add(route.nexthops.len() as u64);
    for hop in &route.nexthops {
        h.hop(hop);
    }
    h.0
}

/// `None` -> 0, `Some(v)` -> 2^32 + v.
fn opt(v: Option<u32>) -> u64 {
    v.map_or(0, |v| (1 << 32) | u64::from(v))
}

/// The fingerprint's state.
struct Mix(u64);

impl Mix {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }

    #[inline(always)]
    fn net(&mut self, net: &IpNet) {
        match net {
            IpNet::V4(n) => self
                .add((4 << 40) | (u64::from(n.prefix_len()) << 32) | u64::from(n.addr().to_bits())),
            IpNet::V6(n) => {
                let bits = n.addr().to_bits();
                self.add((6 << 40) | (u64::from(n.prefix_len()) << 32));
                self.add((bits >> 64) as u64);
                self.add(bits as u64);
            }
        }
    }

    #[inline(always)]
    fn addr(&mut self, addr: Option<IpAddr>) {
        match addr {
            None => self.add(0),
            Some(IpAddr::V4(a)) => self.add((4 << 40) | u64::from(a.to_bits())),
            Some(IpAddr::V6(a)) => {
                let bits = a.to_bits();
                self.add(6 << 40);
                self.add((bits >> 64) as u64);
                self.add(bits as u64);
            }
        }
    }

    /// The length (or `None`), then the bytes, 8 at a time.
    #[inline(always)]
    fn name(&mut self, name: Option<&str>) {
        let Some(name) = name else {
            self.add(u64::MAX);
            return;
        };
        let bytes = name.as_bytes();
        self.add(bytes.len() as u64);
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn hop(&mut self, hop: &NextHopConfig) {
        self.addr(hop.via);
        self.name(hop.dev.as_deref());
        self.add((u64::from(hop.weight) << 8) | u64::from(hop.onlink));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::route::RouteKind;

    fn route(to: &str) -> Route {
        Route {
            to: to.parse().unwrap(),
            via: Some("192.0.2.1".parse().unwrap()),
            dev: None,
            metric: None,
            table: 254,
            kind: RouteKind::Unicast,
            src: None,
            onlink: false,
            mtu: None,
            nexthops: Vec::new(),
        }
    }

    /// One field changed at a time, every one of them: each fingerprints differently from the
    /// base and from every other variant.
    #[test]
    fn a_route_differing_in_any_one_field_fingerprints_differently() {
        let base = route("10.0.0.0/24");
        let hop = NextHopConfig {
            via: Some("192.0.2.1".parse().unwrap()),
            dev: None,
            weight: 1,
            onlink: false,
        };
        let variants = [
            base.clone(),
            route("10.0.1.0/24"),
            route("10.0.0.0/25"),
            route("2001:db8::/64"),
            route("2001:db8::/65"),
            Route {
                via: None,
                ..base.clone()
            },
            Route {
                via: Some("192.0.2.2".parse().unwrap()),
                ..base.clone()
            },
            Route {
                src: Some("192.0.2.1".parse().unwrap()),
                ..base.clone()
            },
            Route {
                dev: Some("eth0".into()),
                ..base.clone()
            },
            Route {
                dev: Some("eth1".into()),
                ..base.clone()
            },
            Route {
                dev: Some(String::new()),
                ..base.clone()
            },
            Route {
                dev: Some("a-long-ifname15".into()),
                ..base.clone()
            },
            Route {
                metric: Some(0),
                ..base.clone()
            },
            Route {
                metric: Some(1),
                ..base.clone()
            },
            Route {
                table: 100,
                ..base.clone()
            },
            Route {
                kind: RouteKind::Blackhole,
                ..base.clone()
            },
            Route {
                onlink: true,
                ..base.clone()
            },
            Route {
                mtu: Some(1400),
                ..base.clone()
            },
            Route {
                via: None,
                nexthops: vec![hop.clone()],
                ..base.clone()
            },
            Route {
                via: None,
                nexthops: vec![NextHopConfig {
                    weight: 2,
                    ..hop.clone()
                }],
                ..base.clone()
            },
            Route {
                via: None,
                nexthops: vec![hop.clone(), hop.clone()],
                ..base.clone()
            },
        ];
        for (i, a) in variants.iter().enumerate() {
            assert_eq!(fingerprint(a), fingerprint(&a.clone()), "deterministic");
            for b in &variants[i + 1..] {
                assert_ne!(fingerprint(a), fingerprint(b), "{a:?} / {b:?}");
            }
        }
    }

    #[test]
    fn every_way_to_change_the_routes_takes_their_fingerprints_again() {
        let mut routes: Routes = (0..4).map(|i| route(&format!("10.0.{i}.0/24"))).collect();
        let fresh = |r: &Routes| r.iter().map(fingerprint).collect::<Vec<_>>();
        assert_eq!(routes.fingerprints(), fresh(&routes));
        routes.edit()[1].via = None;
        assert_eq!(routes.fingerprints(), fresh(&routes));
        routes.set(2, route("10.9.0.0/16"));
        routes.extend([route("10.8.0.0/16")]);
        routes.edit().remove(0);
        assert_eq!(routes.fingerprints(), fresh(&routes));
        let kept = routes.filtered(|r| r.via.is_some());
        assert_eq!(kept.len(), 3);
        assert_eq!(kept.fingerprints(), fresh(&kept));
        routes.truncate(1);
        assert_eq!(routes.fingerprints(), fresh(&routes));
    }

    #[test]
    fn a_clone_shares_the_routes_until_one_side_changes_them() {
        let routes: Routes = (0..4).map(|i| route(&format!("10.0.{i}.0/24"))).collect();
        let mut copy = routes.clone();
        assert!(copy.shares(&routes));
        copy.set(0, route("10.9.0.0/16"));
        assert!(!copy.shares(&routes), "copied on write");
        assert_eq!(routes[0], route("10.0.0.0/24"), "the original is unchanged");
        assert_eq!(copy.fingerprints()[1..], routes.fingerprints()[1..]);
        assert_ne!(copy.fingerprints()[0], routes.fingerprints()[0]);
    }
}
