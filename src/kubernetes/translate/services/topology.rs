//! Which endpoints a service address uses on this node: kube-proxy's `CategorizeEndpoints`
//! (`pkg/proxy/topology.go`).
//!
//! - **Cluster** policy: the ready endpoints, narrowed by topology hints. When every ready
//!   endpoint has node hints (`hints.forNodes`, written for `trafficDistribution:
//!   PreferSameNode`) and one names this node, those hinted for this node; else, when every
//!   ready endpoint has zone hints (`hints.forZones`, written for `PreferClose` and
//!   `PreferSameZone`) and one names this node's zone (its Node's
//!   `topology.kubernetes.io/zone` label), those hinted for the zone; else all of them. Hints
//!   that are incomplete or leave this node without an endpoint are ignored as a whole, so a
//!   zone never goes dark. kube-proxy decides from the hints alone: the EndpointSlice
//!   controller writes them only for Services that ask for them.
//! - **Local** policy: this node's ready endpoints, topology ignored.
//! - Either, with no ready endpoint: the serving and terminating ones (independently).
//!
//! edgenetd keeps one thing kube-proxy has no way to express: while ready endpoints serve, a
//! terminating endpoint stays as a backend of weight 0, so its established connections (UDP
//! included) carry on while new ones go elsewhere.

use std::net::SocketAddr;

use crate::config::service::Backend;

/// One endpoint of one service port, as kube-proxy reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint<'a> {
    /// Where it listens.
    pub address: SocketAddr,
    /// `conditions.ready` (absent = true).
    pub ready: bool,
    /// `conditions.serving` (absent = true).
    pub serving: bool,
    /// `conditions.terminating` (absent = false).
    pub terminating: bool,
    /// `nodeName`.
    pub node_name: Option<&'a str>,
    /// `hints.forZones`.
    pub zone_hints: &'a [String],
    /// `hints.forNodes`.
    pub node_hints: &'a [String],
}

impl Endpoint<'_> {
    /// Takes new connections: ready and not going away (kube-proxy's `IsReady`; the
    /// EndpointSlice controller never writes ready and terminating together).
    pub fn takes_new(&self) -> bool {
        self.ready && !self.terminating
    }

    /// Serving while terminating: the fallback when nothing is ready.
    fn serving_terminating(&self) -> bool {
        self.serving && self.terminating
    }
}

/// Where this node is, for topology and locality.
#[derive(Debug, Clone, Copy)]
pub(super) struct Here<'a> {
    /// This node's name.
    pub node: &'a str,
    /// Its `topology.kubernetes.io/zone` label (`None` or empty: no zone).
    pub zone: Option<&'a str>,
}

/// The topology kube-proxy applies to the Cluster policy's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Every ready endpoint.
    All,
    /// The ready endpoints hinted for this node's zone.
    SameZone,
    /// The ready endpoints hinted for this node.
    SameNode,
}

/// kube-proxy's `topologyModeFromHints`.
pub(super) fn mode(endpoints: &[Endpoint<'_>], here: Here<'_>) -> Mode {
    let zone = here.zone.unwrap_or("");
    let has = |hints: &[String], want: &str| hints.iter().any(|h| h == want);
    let ready: Vec<&Endpoint<'_>> = endpoints.iter().filter(|e| e.takes_new()).collect();
    if ready.is_empty() {
        return Mode::All;
    }
    if ready.iter().all(|e| !e.node_hints.is_empty())
        && ready.iter().any(|e| has(e.node_hints, here.node))
    {
        return Mode::SameNode;
    }
    if ready.iter().all(|e| !e.zone_hints.is_empty())
        && ready.iter().any(|e| has(e.zone_hints, zone))
    {
        return Mode::SameZone;
    }
    Mode::All
}

/// Whether `e` may take this node's new connections under `mode`.
fn in_topology(e: &Endpoint<'_>, mode: Mode, here: Here<'_>) -> bool {
    match mode {
        Mode::All => true,
        Mode::SameNode => e.node_hints.iter().any(|h| h == here.node),
        Mode::SameZone => e.zone_hints.iter().any(|h| Some(h.as_str()) == here.zone),
    }
}

/// The Cluster policy's backends: ready endpoints in topology (weight 1) and terminating
/// ones draining (weight 0); with none ready, the serving and terminating ones (weight 1).
pub(super) fn cluster(endpoints: &[Endpoint<'_>], here: Here<'_>) -> Vec<Backend> {
    let mode = mode(endpoints, here);
    pick(endpoints, |e| in_topology(e, mode, here))
}

/// The Local policy's backends: this node's endpoints, chosen as [`cluster`] chooses them
/// but without topology.
pub(super) fn local(endpoints: &[Endpoint<'_>], here: Here<'_>) -> Vec<Backend> {
    let mine: Vec<Endpoint<'_>> = endpoints
        .iter()
        .filter(|e| e.node_name == Some(here.node))
        .cloned()
        .collect();
    pick(&mine, |_| true)
}

/// Whether the service has a usable endpoint anywhere (kube-proxy's `hasAnyEndpoints`).
pub(super) fn any_usable(endpoints: &[Endpoint<'_>]) -> bool {
    endpoints
        .iter()
        .any(|e| e.takes_new() || e.serving_terminating())
}

/// Ready endpoints that pass `allowed` with weight 1 and terminating ones at weight 0; when
/// none passes, the serving and terminating ones at weight 1.
fn pick(endpoints: &[Endpoint<'_>], allowed: impl Fn(&Endpoint<'_>) -> bool) -> Vec<Backend> {
    let backend = |e: &Endpoint<'_>, weight| Backend {
        address: e.address,
        weight,
    };
    if endpoints.iter().any(|e| e.takes_new() && allowed(e)) {
        endpoints
            .iter()
            .filter_map(|e| {
                if e.takes_new() {
                    allowed(e).then(|| backend(e, 1))
                } else {
                    e.terminating.then(|| backend(e, 0))
                }
            })
            .collect()
    } else {
        endpoints
            .iter()
            .filter(|e| e.serving_terminating())
            .map(|e| backend(e, 1))
            .collect()
    }
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
