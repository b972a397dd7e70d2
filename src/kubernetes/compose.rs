//! The one merge step: the last good TOML state and the last cluster state in, one
//! `DesiredState` out, published only when the result changed.
//!
//! Both sources only *set* their part ([`Composer::set_toml`], [`Composer::set_cluster`]);
//! composing happens in [`Composer::take_if_changed`]. That split is what coalesces bursts:
//! the daemon calls `take_if_changed` once the updates have been quiet for a moment (or at
//! most every so often), so 1,000 EndpointSlice updates make one snapshot, not 1,000.
//!
//! Cluster entries carry names under the reserved `k8s:` prefix, which TOML may not use, so a
//! name never says which source an entry came from by accident. A clash of *meaning* (a
//! cluster service on a VIP:port/protocol a TOML service has, a cluster route with the
//! destination, table and metric of a TOML route) keeps the TOML entry: the operator's file is
//! the authority on its own router. Two cluster entries that clash keep the first (services by
//! VIP, port and protocol, routes by destination, table and metric). A name is never a clash:
//! every address of one Kubernetes Service port (its cluster IPs, external and load balancer
//! IPs, node ports) is an entry of the same name. Every clash is logged and counted once, when
//! it appears, not at every compose. Pod isolation (NetworkPolicies) has no TOML counterpart and never
//! clashes: the cluster's units are published as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use log::warn;

use crate::config::DesiredState;
use crate::config::policy::pods::PodPolicies;
use crate::config::route::Route;
use crate::config::service::{
    HealthCheckPort, Protocol, Service, ServicesConfig, changed_positions,
};
use crate::kubernetes::order;

mod vips;

use vips::Claims;

/// Counter of clashes resolved in favour of TOML (or of the first cluster entry), by kind.
pub const CONFLICTS_METRIC: &str = "edgenetd_kubernetes_conflicts_total";

/// Prefix every name made from a cluster object starts with (TOML names may not).
pub const NAME_PREFIX: &str = "k8s:";

/// A kind of cluster-derived entry (the `kind` label of the kubernetes metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Services (from Services and EndpointSlices).
    Services,
    /// Pod routes (from Nodes).
    Routes,
    /// Pod isolation (from NetworkPolicies, Pods and Namespaces).
    NetworkPolicies,
}

impl Kind {
    /// Every kind, for series that must exist from startup.
    pub const ALL: [Kind; 3] = [Kind::Services, Kind::Routes, Kind::NetworkPolicies];

    /// The metric label, spelt as `[kubernetes] feeds` spells the kind.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Services => "services",
            Kind::Routes => "routes",
            Kind::NetworkPolicies => "network_policies",
        }
    }
}

/// Describes the composer's metric and creates its series at 0.
pub fn describe_metrics() {
    metrics::describe_counter!(
        CONFLICTS_METRIC,
        "Cluster-derived entries left out because they clash in meaning with a TOML entry (or an earlier cluster entry), counted once per clash when it appears."
    );
    for kind in Kind::ALL {
        metrics::counter!(CONFLICTS_METRIC, "kind" => kind.label()).absolute(0);
    }
}

/// Everything the cluster contributes, in a canonical order (so the order the API listed
/// objects in never looks like a change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterState {
    /// Services, by name, then VIP, port and protocol (shared with the translation memo and
    /// the snapshots: see [`ServicesConfig::services`]).
    pub services: Vec<Arc<Service>>,
    /// The prefixes cluster IPs are allocated from (`[kubernetes] service_cidrs` and the
    /// cluster's ServiceCIDRs), sorted, each once.
    pub service_cidrs: Vec<IpNet>,
    /// The pod prefixes of the local-traffic detector (`[kubernetes] cluster_cidrs`, else
    /// this node's pod CIDRs), sorted, each once.
    pub cluster_cidrs: Vec<IpNet>,
    /// Routes, by table, destination and metric.
    pub routes: Vec<Route>,
    /// Pod isolation units, by name.
    pub pod_policies: PodPolicies,
    /// The health-check node ports this node answers on, by Service.
    pub health_check_ports: Vec<HealthCheckPort>,
}

/// One kind's complete set of entries, as the latest cluster state says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterPart {
    /// Every cluster-derived service, with what else the services feed supplies
    /// (`service_cidrs`, `cluster_cidrs`, `health_check_ports`; a TOML state has none).
    Services(ServicesConfig),
    /// Every cluster-derived route.
    Routes(Vec<Route>),
    /// Every pod isolation unit for this node's pods.
    NetworkPolicies(PodPolicies),
}

impl ClusterPart {
    /// The services part with these entries and no prefixes.
    pub fn services(services: Vec<Service>) -> ClusterPart {
        ClusterPart::Services(ServicesConfig {
            services: services.into_iter().map(Arc::new).collect(),
            ..ServicesConfig::default()
        })
    }

    /// The kind of entries this is.
    pub fn kind(&self) -> Kind {
        match self {
            ClusterPart::Services(_) => Kind::Services,
            ClusterPart::Routes(_) => Kind::Routes,
            ClusterPart::NetworkPolicies(_) => Kind::NetworkPolicies,
        }
    }
}

/// What identifies a clash, so that it is reported once while it lasts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Clash {
    /// A cluster service left out.
    Service {
        /// The cluster service's name.
        name: String,
        /// The address, port and protocol both claim.
        vip: VipKey,
        /// The entry it clashes with: `TOML service NAME` or `service NAME`.
        with: String,
    },
    /// A cluster route left out.
    Route {
        /// The route's table, destination and metric.
        key: RouteKey,
        /// Whether the route it clashes with is a TOML one.
        with_toml: bool,
    },
}

/// What identifies a route to the kernel: table, destination, metric.
type RouteKey = (u32, IpNet, u32);

/// What identifies a service's traffic: VIP, port, protocol.
type VipKey = (IpAddr, u16, Protocol);

fn route_key(r: &Route) -> RouteKey {
    (r.table, r.to, r.effective_metric())
}

fn vip_key(s: &Service) -> VipKey {
    (s.address, s.port, s.protocol)
}

/// The last published snapshot, and the TOML state it was made from. The snapshot itself is
/// what the next compose compares with (the cluster entries it holds follow the TOML ones):
/// it is shared with the daemon, so keeping it costs nothing, where a copy of the entries it
/// kept would be a third copy of every service.
struct Published {
    /// Its TOML part.
    toml: Arc<DesiredState>,
    /// The snapshot.
    snapshot: Arc<DesiredState>,
}

/// Holds both sources and produces the composed snapshot.
pub struct Composer {
    /// The last good TOML state.
    toml: Arc<DesiredState>,
    /// The last cluster state, whole (clashing entries included: they come back into force
    /// when the TOML entry they clash with goes away).
    cluster: ClusterState,
    /// What the last publish held (at first: the TOML state alone, which the daemon
    /// publishes before any cluster state exists).
    published: Published,
    /// Something was set since the last compose.
    dirty: bool,
    /// The clashes in force at the last compose (each was logged and counted when it appeared).
    clashes: BTreeSet<Clash>,
    /// The kinds the cluster has delivered a complete list of since start.
    listed: BTreeSet<Kind>,
    /// The cluster state was restored from the cache.
    restored: bool,
    /// The last snapshot taken differs from the one before only in its services (see
    /// [`Composer::services_only`]).
    services_only: bool,
    /// Bumped at each change of the cluster state (what the cache holds is compared by it,
    /// not by a copy of the state).
    generation: u64,
    /// The VIP keys the cluster services claim.
    claims: Claims,
}

impl Composer {
    /// Starts from the TOML state the daemon has already published.
    pub fn new(toml: Arc<DesiredState>) -> Composer {
        Composer {
            published: Published {
                toml: Arc::clone(&toml),
                snapshot: Arc::clone(&toml),
            },
            toml,
            cluster: ClusterState::default(),
            dirty: false,
            clashes: BTreeSet::new(),
            listed: BTreeSet::new(),
            restored: false,
            services_only: false,
            generation: 0,
            claims: Claims::default(),
        }
    }

    /// The composer and the daemon's first snapshot: the TOML state with the cluster state
    /// the last run cached. The cached entries must be in the *first* snapshot: a first sync
    /// without them would delete the cluster-derived rules the last run programmed, which is
    /// what the cache is there to prevent during an API outage.
    pub fn start(
        toml: Arc<DesiredState>,
        cached: Option<ClusterState>,
    ) -> (Composer, Arc<DesiredState>) {
        let mut composer = Composer::new(Arc::clone(&toml));
        if let Some(state) = cached {
            composer.restore(state);
        }
        let first = composer.take_if_changed().unwrap_or(toml);
        (composer, first)
    }

    /// A newly loaded TOML state replaces the last one. Every taken load is published, even
    /// one that reads the same as before, as a reload is today (`DesiredState` has no
    /// equality, and a reload the operator asked for should sync).
    pub fn set_toml(&mut self, toml: Arc<DesiredState>) {
        if !Arc::ptr_eq(&self.toml, &toml) {
            self.toml = toml;
            self.dirty = true;
        }
    }

    /// One kind's entries (from a complete list, or the list as events left it) replace that
    /// kind's previous ones; the same entries again (in any order) change nothing.
    pub fn set_cluster(&mut self, part: ClusterPart) {
        self.listed.insert(part.kind());
        match part {
            ClusterPart::Services(part) => {
                let ServicesConfig {
                    mut services,
                    mut service_cidrs,
                    mut cluster_cidrs,
                    mut health_check_ports,
                } = part;
                // Mostly in order already (the translation orders by Service): checked where
                // they changed, sorted only when not in order.
                let order = |a: &Arc<Service>, b: &Arc<Service>| {
                    (&a.name, vip_key(a)).cmp(&(&b.name, vip_key(b)))
                };
                let in_order = |i: usize| {
                    let pair = |j: usize| {
                        services
                            .get(j..j + 2)
                            .is_none_or(|p| order(&p[0], &p[1]).is_le())
                    };
                    i.checked_sub(1).is_none_or(pair) && pair(i)
                };
                let sorted = match changed_positions(&self.cluster.services, &services) {
                    Some(at) => at.into_iter().all(in_order),
                    None => services.is_sorted_by(|a, b| order(a, b).is_le()),
                };
                if !sorted {
                    order::sort_by(&mut services, order);
                }
                for nets in [&mut service_cidrs, &mut cluster_cidrs] {
                    order::sort(nets);
                    nets.dedup();
                }
                order::sort_by(&mut health_check_ports, |a, b| a.service.cmp(&b.service));
                let state = &mut self.cluster;
                if services != state.services
                    || service_cidrs != state.service_cidrs
                    || cluster_cidrs != state.cluster_cidrs
                    || health_check_ports != state.health_check_ports
                {
                    self.claims.update(&state.services, &services);
                    state.services = services;
                    state.service_cidrs = service_cidrs;
                    state.cluster_cidrs = cluster_cidrs;
                    state.health_check_ports = health_check_ports;
                    self.dirty = true;
                    self.generation += 1;
                }
            }
            ClusterPart::Routes(mut routes) => {
                order::sort_by_key(&mut routes, |r| (route_key(r), r.via));
                if routes != self.cluster.routes {
                    self.cluster.routes = routes;
                    self.dirty = true;
                    self.generation += 1;
                }
            }
            ClusterPart::NetworkPolicies(mut pods) => {
                order::sort_by(&mut pods.policies, |a, b| a.name.cmp(&b.name));
                if pods != self.cluster.pod_policies {
                    self.cluster.pod_policies = pods;
                    self.dirty = true;
                    self.generation += 1;
                }
            }
        }
    }

    /// The cluster state cached by the last run, in force until the cluster answers.
    pub fn restore(&mut self, state: ClusterState) {
        self.set_cluster(ClusterPart::Services(ServicesConfig {
            services: state.services,
            service_cidrs: state.service_cidrs,
            cluster_cidrs: state.cluster_cidrs,
            health_check_ports: state.health_check_ports,
        }));
        self.set_cluster(ClusterPart::Routes(state.routes));
        self.set_cluster(ClusterPart::NetworkPolicies(state.pod_policies));
        self.listed.clear();
        self.restored = true;
    }

    /// Ready: every enabled kind was listed once, or the cache was restored (the state the
    /// last run programmed is in force, which is what readiness promises during an outage).
    pub fn ready(&self, enabled: &[Kind]) -> bool {
        self.restored || enabled.iter().all(|k| self.listed.contains(k))
    }

    /// Every kind of `enabled` was listed in this run (the cache aside).
    pub fn listed(&self, enabled: &[Kind]) -> bool {
        enabled.iter().all(|k| self.listed.contains(k))
    }

    /// The cluster state as last set (what the cache stores).
    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }

    /// Changes whenever [`Composer::cluster`] does (equal generations, equal states).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether something was set since the last compose (the daemon's cue to schedule one).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Composes, and returns the snapshot to publish if it differs from the last one.
    pub fn take_if_changed(&mut self) -> Option<Arc<DesiredState>> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        let (kept, clashes) = resolve(&self.toml, &self.cluster, &self.claims);
        Self::report(&mut self.clashes, clashes);
        if Arc::ptr_eq(&self.published.toml, &self.toml)
            && kept.is_in(&self.published.snapshot, &self.toml)
        {
            return None;
        }
        let composed = kept.compose(&self.toml);
        let before = &self.published.snapshot;
        self.services_only = Arc::ptr_eq(&self.published.toml, &self.toml)
            && before.routing.routes == composed.routing.routes
            && before.pod_policies == composed.pod_policies;
        let composed = Arc::new(composed);
        self.published = Published {
            toml: Arc::clone(&self.toml),
            snapshot: Arc::clone(&composed),
        };
        Some(composed)
    }

    /// Whether the last snapshot [`Composer::take_if_changed`] returned differs from the one
    /// before only in its services (the TOML state, the routes and the pod isolation are
    /// the same): the daemon then wakes only the loops that read services.
    pub fn services_only(&self) -> bool {
        self.services_only
    }

    /// Logs and counts the clashes that were not in force at the last compose (`known`), and
    /// makes `now` the ones in force.
    fn report(known: &mut BTreeSet<Clash>, now: BTreeSet<Clash>) {
        for clash in now.difference(known) {
            let kind = match clash {
                Clash::Service {
                    name,
                    vip: (address, port, protocol),
                    with,
                } => {
                    let vip = std::net::SocketAddr::new(*address, *port);
                    warn!(
                        "kubernetes service {name} on {vip}/{} is left out: {with} has that address, port and protocol and is kept",
                        protocol.name()
                    );
                    Kind::Services
                }
                Clash::Route {
                    key: (table, to, metric),
                    with_toml,
                } => {
                    let with = if *with_toml {
                        "a TOML route"
                    } else {
                        "another node's route"
                    };
                    warn!(
                        "kubernetes route to {to} (table {table}, metric {metric}) is left out: {with} has the same destination, table and metric and is kept"
                    );
                    Kind::Routes
                }
            };
            metrics::counter!(CONFLICTS_METRIC, "kind" => kind.label()).increment(1);
        }
        *known = now;
    }
}

/// The cluster entries a compose keeps (those that do not clash), borrowed from the
/// cluster state: they are copied once, into the snapshot, and only when it changed.
struct Kept<'a> {
    /// The services kept, in order.
    services: Vec<&'a Arc<Service>>,
    /// The routes kept, in order.
    routes: Vec<&'a Route>,
    /// The rest, kept whole (no clash).
    cluster: &'a ClusterState,
}

impl Kept<'_> {
    /// The snapshot: the TOML state, then the cluster entries kept.
    fn compose(&self, toml: &DesiredState) -> DesiredState {
        let mut composed = DesiredState::clone(toml);
        let services = &mut composed.services;
        services
            .services
            .extend(self.services.iter().map(|&s| Arc::clone(s)));
        services.service_cidrs =
            with_cidrs(&toml.services.service_cidrs, &self.cluster.service_cidrs);
        services.cluster_cidrs =
            with_cidrs(&toml.services.cluster_cidrs, &self.cluster.cluster_cidrs);
        composed
            .routing
            .routes
            .extend(self.routes.iter().map(|&r| r.clone()));
        composed.pod_policies = self.cluster.pod_policies.clone();
        composed
            .services
            .health_check_ports
            .extend(self.cluster.health_check_ports.iter().cloned());
        composed
    }

    /// True when `snapshot`, composed from `toml`, is what [`Kept::compose`] would make.
    fn is_in(&self, snapshot: &DesiredState, toml: &DesiredState) -> bool {
        let (s, t) = (&snapshot.services, &toml.services);
        s.services.get(t.services.len()..).is_some_and(|added| {
            added.len() == self.services.len()
                && added.iter().zip(&self.services).all(|(a, &b)| a == b)
        }) && snapshot
            .routing
            .routes
            .get(toml.routing.routes.len()..)
            .is_some_and(|added| {
                added.len() == self.routes.len()
                    && added.iter().zip(&self.routes).all(|(a, &b)| a == b)
            })
            && s.health_check_ports.get(t.health_check_ports.len()..)
                == Some(&self.cluster.health_check_ports[..])
            && s.service_cidrs == with_cidrs(&t.service_cidrs, &self.cluster.service_cidrs)
            && s.cluster_cidrs == with_cidrs(&t.cluster_cidrs, &self.cluster.cluster_cidrs)
            && snapshot.pod_policies == self.cluster.pod_policies
    }
}

/// `toml`'s prefixes, then the cluster's that TOML does not have.
fn with_cidrs(toml: &[IpNet], cluster: &[IpNet]) -> Vec<IpNet> {
    let mut all = toml.to_vec();
    all.extend(cluster.iter().filter(|n| !toml.contains(n)));
    all
}

/// The cluster entries that do not clash, and the clashes. Nothing is cloned or formatted
/// for an entry that does not clash: this runs at every compose, over every cluster service.
/// Who claims a VIP first.
#[derive(Clone, Copy)]
enum Claim<'a> {
    /// A TOML service (its name).
    Toml(&'a str),
    /// An earlier cluster service (its name).
    Cluster(&'a str),
}

impl Claim<'_> {
    /// The other side of a clash, as the log line says it.
    fn with(self) -> String {
        match self {
            Claim::Toml(name) => format!("TOML service {name}"),
            Claim::Cluster(name) => format!("service {name}"),
        }
    }
}

fn resolve<'a>(
    toml: &DesiredState,
    cluster: &'a ClusterState,
    claims: &Claims,
) -> (Kept<'a>, BTreeSet<Clash>) {
    let (services, service_clashes) = if claims.clear_of(&toml.services.services) {
        (cluster.services.iter().collect(), BTreeSet::new())
    } else {
        resolve_services(toml, cluster)
    };
    let mut clashes = service_clashes;
    let toml_routes: BTreeSet<RouteKey> = toml.routing.routes.iter().map(route_key).collect();
    let mut seen = BTreeSet::new();
    let mut routes = Vec::new();
    for r in &cluster.routes {
        let key = route_key(r);
        if toml_routes.contains(&key) || !seen.insert(key) {
            clashes.insert(Clash::Route {
                key,
                with_toml: toml_routes.contains(&key),
            });
        } else {
            routes.push(r);
        }
    }
    // Pod policies and health-check ports never clash: a port belongs to one Service, and
    // TOML has none (the node's health answer follows the cluster even where a TOML service
    // keeps the traffic).
    (
        Kept {
            services,
            routes,
            cluster,
        },
        clashes,
    )
}

/// The cluster services that do not clash, and the clashes, where some may: each claims its
/// VIP key in turn, after the TOML services.
fn resolve_services<'a>(
    toml: &DesiredState,
    cluster: &'a ClusterState,
) -> (Vec<&'a Arc<Service>>, BTreeSet<Clash>) {
    let mut clashes = BTreeSet::new();
    let mut vips: BTreeMap<VipKey, Claim<'_>> = toml
        .services
        .services
        .iter()
        .map(|s| (vip_key(s), Claim::Toml(&s.name)))
        .collect();
    let mut services = Vec::new();
    for s in &cluster.services {
        let key = vip_key(s);
        match vips.get(&key) {
            Some(claim) => {
                clashes.insert(Clash::Service {
                    name: s.name.clone(),
                    vip: key,
                    with: claim.with(),
                });
            }
            None => {
                vips.insert(key, Claim::Cluster(&s.name));
                services.push(s);
            }
        }
    }
    (services, clashes)
}

#[cfg(test)]
mod tests;
