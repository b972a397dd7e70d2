//! Nodes -> pod routes: every other node's pod CIDRs are routed via that node's InternalIP,
//! as kube-router's routing does on a flat layer-2 network.
//!
//! Which CIDRs a node owns: kube-router's annotations win over the spec, because clusters
//! that run kube-router with its own IPAM set them and leave `spec.podCIDRs` unused or stale:
//! `kube-router.io/pod-cidrs` (comma-separated, dual-stack), else `kube-router.io/pod-cidr`,
//! else `spec.podCIDRs`.
//!
//! A route is only made when the node's InternalIP of the CIDR's family lies on a subnet this
//! router is directly connected to: a gateway that is not on-link would be refused by the
//! kernel (or, worse, resolved through another route). Every CIDR not routed is reported as a
//! [`Skip`] with its reason, so the caller can count and log it; one bad node never hides the
//! routes of the others.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::route::{Route, RouteKind, TABLE_MAIN};

/// kube-router's dual-stack pod CIDR annotation (comma-separated).
pub const ANNOTATION_POD_CIDRS: &str = "kube-router.io/pod-cidrs";
/// kube-router's single pod CIDR annotation.
pub const ANNOTATION_POD_CIDR: &str = "kube-router.io/pod-cidr";

/// The parts of a Node this translation reads, as the API server sends them (strings are
/// parsed here, so a malformed value is a counted skip rather than a mapping failure).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `spec.podCIDRs`.
    pub pod_cidrs: Vec<String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `status.addresses` of type `InternalIP`, in the API's order.
    pub internal_ips: Vec<String>,
}

/// What the translation needs to know about this router.
#[derive(Debug, Clone, Copy)]
pub struct Local<'a> {
    /// This router's own node (`[kubernetes] node_name`): its pods are local, never routed.
    pub node_name: &'a str,
    /// The subnets of this router's interfaces (directly connected).
    pub connected: &'a [IpNet],
}

/// Why a pod CIDR of a node was not turned into a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The CIDR (from the spec or an annotation) does not parse.
    BadCidr,
    /// The node has no parsable InternalIP of the CIDR's family.
    NoInternalIp,
    /// The node's InternalIP of that family is not on a directly connected subnet.
    NotConnected(IpAddr),
    /// Another node, first by name, already claims this CIDR.
    ClaimedBy(String),
}

impl SkipReason {
    /// The `reason` label of `edgenetd_kubernetes_skipped_total`: one word per variant.
    pub fn label(&self) -> &'static str {
        match self {
            SkipReason::BadCidr => "bad_cidr",
            SkipReason::NoInternalIp => "no_internal_ip",
            SkipReason::NotConnected(_) => "not_connected",
            SkipReason::ClaimedBy(_) => "claimed",
        }
    }
}

/// A pod CIDR that is not routed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// The node's name.
    pub node: String,
    /// The CIDR as the node states it.
    pub cidr: String,
    /// Why it is not routed.
    pub reason: SkipReason,
}

/// The routes for the cluster's pod networks, and the CIDRs left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeRoutes {
    /// One route per routed pod CIDR, in node-name order (deterministic whatever the order
    /// the API listed the nodes in).
    pub routes: Vec<Route>,
    /// Every CIDR not routed.
    pub skipped: Vec<Skip>,
}

/// Turns every other node's pod CIDRs into routes via its InternalIP.
pub fn translate(nodes: &[Node], local: Local<'_>) -> NodeRoutes {
    let mut sorted: Vec<&Node> = nodes.iter().filter(|n| n.name != local.node_name).collect();
    crate::kubernetes::order::sort_by(&mut sorted, |a, b| a.name.cmp(&b.name));
    let mut out = NodeRoutes::default();
    let mut claimed: BTreeMap<IpNet, &str> = BTreeMap::new();
    for node in sorted {
        let ips = internal_ips(node);
        for cidr in pod_cidrs(node) {
            match route_for(&cidr, &ips, local.connected, &claimed) {
                Ok(route) => {
                    claimed.insert(route.to, &node.name);
                    out.routes.push(route);
                }
                Err(reason) => out.skipped.push(Skip {
                    node: node.name.clone(),
                    cidr,
                    reason,
                }),
            }
        }
    }
    out
}

/// The node's pod CIDRs as stated (annotations first), each once, unparsed.
fn pod_cidrs(node: &Node) -> Vec<String> {
    let stated: Vec<String> = if let Some(list) = node.annotations.get(ANNOTATION_POD_CIDRS) {
        list.split(',').map(|s| s.trim().to_string()).collect()
    } else if let Some(one) = node.annotations.get(ANNOTATION_POD_CIDR) {
        vec![one.trim().to_string()]
    } else {
        node.pod_cidrs
            .iter()
            .map(|s| s.trim().to_string())
            .collect()
    };
    let mut seen = BTreeSet::new();
    stated
        .into_iter()
        .filter(|s| !s.is_empty() && seen.insert(s.clone()))
        .collect()
}

fn internal_ips(node: &Node) -> Vec<IpAddr> {
    node.internal_ips
        .iter()
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn route_for(
    cidr: &str,
    ips: &[IpAddr],
    connected: &[IpNet],
    claimed: &BTreeMap<IpNet, &str>,
) -> Result<Route, SkipReason> {
    // `trunc`: the API accepts host bits set in a CIDR; the kernel wants the network.
    let to: IpNet = cidr
        .parse::<IpNet>()
        .map_err(|_| SkipReason::BadCidr)?
        .trunc();
    if let Some(first) = claimed.get(&to) {
        return Err(SkipReason::ClaimedBy(first.to_string()));
    }
    let same_family = |ip: &&IpAddr| ip.is_ipv4() == to.addr().is_ipv4();
    let mut candidates = ips.iter().filter(same_family).peekable();
    let first = **candidates.peek().ok_or(SkipReason::NoInternalIp)?;
    let via = candidates
        .find(|ip| connected.iter().any(|net| net.contains(*ip)))
        .copied()
        .ok_or(SkipReason::NotConnected(first))?;
    Ok(pod_route(to, via))
}

/// The route a pod CIDR gets: plain unicast in the main table via the owning node's address
/// (everything else at the kernel's defaults, as a TOML route that only names `to` and `via`).
pub fn pod_route(to: IpNet, via: IpAddr) -> Route {
    Route {
        to,
        via: Some(via),
        dev: None,
        metric: None,
        table: TABLE_MAIN,
        kind: RouteKind::Unicast,
        src: None,
        onlink: false,
        mtu: None,
        nexthops: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cidrs: &[&str], ips: &[&str]) -> Node {
        Node {
            name: name.into(),
            pod_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            annotations: BTreeMap::new(),
            internal_ips: ips.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn connected() -> Vec<IpNet> {
        vec![
            "192.168.1.0/24".parse().unwrap(),
            "fd00:1::/64".parse().unwrap(),
        ]
    }

    fn run(nodes: &[Node]) -> NodeRoutes {
        let subnets = connected();
        translate(
            nodes,
            Local {
                node_name: "self",
                connected: &subnets,
            },
        )
    }

    fn routes(out: &NodeRoutes) -> Vec<(String, String)> {
        out.routes
            .iter()
            .map(|r| (r.to.to_string(), r.via.unwrap().to_string()))
            .collect()
    }

    fn pair(to: &str, via: &str) -> (String, String) {
        (to.to_string(), via.to_string())
    }

    #[test]
    fn every_other_node_gets_a_route_per_family_and_this_node_none() {
        let out = run(&[
            node("self", &["10.244.0.0/24"], &["192.168.1.1"]),
            node(
                "b",
                &["10.244.2.0/24", "fd10:2::/64"],
                &["192.168.1.12", "fd00:1::12"],
            ),
            node("a", &["10.244.1.0/24"], &["192.168.1.11"]),
        ]);
        assert_eq!(
            routes(&out),
            [
                pair("10.244.1.0/24", "192.168.1.11"),
                pair("10.244.2.0/24", "192.168.1.12"),
                pair("fd10:2::/64", "fd00:1::12"),
            ],
            "node-name order, this node left out"
        );
        assert!(out.skipped.is_empty(), "{:?}", out.skipped);
        let r = &out.routes[0];
        assert_eq!(
            (r.table, r.metric, r.kind),
            (TABLE_MAIN, None, RouteKind::Unicast)
        );
    }

    #[test]
    fn a_node_whose_ip_is_not_on_a_connected_subnet_is_skipped_and_counted() {
        let out = run(&[
            node("far", &["10.244.3.0/24"], &["172.16.0.3"]),
            node("near", &["10.244.4.0/24"], &["192.168.1.14"]),
        ]);
        assert_eq!(routes(&out), [pair("10.244.4.0/24", "192.168.1.14")]);
        assert_eq!(
            out.skipped,
            [Skip {
                node: "far".into(),
                cidr: "10.244.3.0/24".into(),
                reason: SkipReason::NotConnected("172.16.0.3".parse().unwrap()),
            }]
        );
    }

    #[test]
    fn the_internal_ip_of_the_cidrs_family_on_a_connected_subnet_is_chosen() {
        // First IPv4 address is remote; the second is on-link and must be the gateway.
        let out = run(&[node(
            "multi",
            &["10.244.5.0/24", "fd10:5::/64"],
            &["fd00:1::15", "172.16.0.5", "192.168.1.15"],
        )]);
        assert_eq!(
            routes(&out),
            [
                pair("10.244.5.0/24", "192.168.1.15"),
                pair("fd10:5::/64", "fd00:1::15"),
            ]
        );
    }

    #[test]
    fn a_cidr_without_an_internal_ip_of_its_family_is_skipped() {
        let out = run(&[node("v4only", &["fd10:6::/64"], &["192.168.1.16"])]);
        assert!(out.routes.is_empty());
        assert_eq!(out.skipped[0].reason, SkipReason::NoInternalIp);
    }

    #[test]
    fn kube_router_annotations_win_over_the_spec_plural_first() {
        let mut both = node("both", &["10.244.7.0/24"], &["192.168.1.17", "fd00:1::17"]);
        both.annotations
            .insert(ANNOTATION_POD_CIDR.into(), "10.99.7.0/24".into());
        both.annotations.insert(
            ANNOTATION_POD_CIDRS.into(),
            "10.88.7.0/24, fd88:7::/64".into(),
        );
        let mut single = node("single", &["10.244.8.0/24"], &["192.168.1.18"]);
        single
            .annotations
            .insert(ANNOTATION_POD_CIDR.into(), "10.99.8.0/24".into());
        let out = run(&[both, single]);
        assert_eq!(
            routes(&out),
            [
                pair("10.88.7.0/24", "192.168.1.17"),
                pair("fd88:7::/64", "fd00:1::17"),
                pair("10.99.8.0/24", "192.168.1.18"),
            ]
        );
    }

    #[test]
    fn malformed_values_are_skipped_without_hiding_the_rest() {
        let out = run(&[node(
            "bad",
            &["10.244.9.0/33", "10.244.10.0/24"],
            &["not-an-ip", "192.168.1.19"],
        )]);
        assert_eq!(routes(&out), [pair("10.244.10.0/24", "192.168.1.19")]);
        assert_eq!(out.skipped.len(), 1);
        assert_eq!(out.skipped[0].reason, SkipReason::BadCidr);
    }

    #[test]
    fn host_bits_are_cleared_and_a_cidr_claimed_twice_goes_to_the_first_node_by_name() {
        let out = run(&[
            node("z", &["10.244.11.0/24"], &["192.168.1.21"]),
            node("y", &["10.244.11.7/24"], &["192.168.1.20"]),
        ]);
        assert_eq!(routes(&out), [pair("10.244.11.0/24", "192.168.1.20")]);
        assert_eq!(out.skipped[0].node, "z");
        assert_eq!(out.skipped[0].reason, SkipReason::ClaimedBy("y".into()));
    }

    #[test]
    fn a_node_without_pod_cidrs_makes_nothing() {
        let out = run(&[node("empty", &[], &["192.168.1.22"])]);
        assert_eq!(out, NodeRoutes::default());
    }
}
