//! From the stores to the composer's parts: which cluster objects make which entries.
//!
//! A part is only made once every store it reads holds a complete list: services from
//! Services without their EndpointSlices would publish every service without backends, and
//! after a restart from the cache that would undo exactly what the cache keeps in force.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::Settings;
use super::memo::{Changed, ServicesMemo};
use super::skips::{Skip, Skips};
use crate::config::kubernetes::selector::LabelSelector;
use crate::config::kubernetes::{NodePortAddresses, PolicyMode};
use crate::config::service::ServicesConfig;
use crate::kubernetes::client::{ObjectKey, Store};
use crate::kubernetes::compose::ClusterPart;
use crate::kubernetes::objects;
use crate::kubernetes::translate::{network_policies, nodes, services, sloppy};

/// The Node label that names its zone (topology-aware routing).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The objects of one store, once it has listed; `None` before.
pub fn listed<T: Clone>(store: &Store<T>) -> Option<Arc<BTreeMap<ObjectKey, T>>> {
    store.is_synced().then(|| store.snapshot())
}

/// This node's primary addresses, kube-proxy's node IPs (`GetNodeHostIPs`): the first of its
/// Node's InternalIP then ExternalIP addresses, and the first of those of the other family.
pub fn primary_addresses(node: Option<&objects::Node>) -> Vec<IpAddr> {
    let Some(node) = node else {
        return Vec::new();
    };
    let of = |kind: &'static str| {
        node.status
            .addresses
            .iter()
            .filter(move |a| a.type_ == kind)
            .filter_map(|a| sloppy::parse_ip(a.address.trim()))
    };
    let all: Vec<IpAddr> = of("InternalIP").chain(of("ExternalIP")).collect();
    let Some(&first) = all.first() else {
        return Vec::new();
    };
    let mut out = vec![first];
    out.extend(all.iter().find(|a| a.is_ipv4() != first.is_ipv4()));
    out
}

/// The addresses NodePorts are served on, as `node_port_addresses` says: the primary
/// addresses, every interface address of this host, or those within the prefixes.
pub fn node_port_addresses(
    node: Option<&objects::Node>,
    mode: &NodePortAddresses,
    host_addresses: &[IpAddr],
) -> Vec<IpAddr> {
    match mode {
        NodePortAddresses::Primary => primary_addresses(node),
        NodePortAddresses::All => host_addresses.to_vec(),
        NodePortAddresses::Cidrs(nets) => host_addresses
            .iter()
            .filter(|a| nets.iter().any(|n| n.contains(*a)))
            .copied()
            .collect(),
    }
}

/// This node's pod CIDRs (`spec.podCIDRs`, else `spec.podCIDR`): kube-proxy's
/// `--detect-local-mode=NodeCIDR`.
pub fn pod_cidrs(node: Option<&objects::Node>) -> Vec<IpNet> {
    let Some(node) = node else {
        return Vec::new();
    };
    let stated = if node.spec.pod_cidrs.is_empty() {
        node.spec.pod_cidr.iter().collect::<Vec<_>>()
    } else {
        node.spec.pod_cidrs.iter().collect()
    };
    stated
        .into_iter()
        .filter_map(|c| sloppy::parse_cidr(c.trim()))
        .collect()
}

/// Who and where the services part is made for.
pub struct Here<'a> {
    /// This node's Node name.
    pub node_name: &'a str,
    /// The watcher's settings (`service_cidrs`, `cluster_cidrs`, `node_port_addresses`).
    pub settings: &'a Settings,
    /// This host's interface addresses (read only when `node_port_addresses` needs them).
    pub host_addresses: &'a [IpAddr],
    /// Where the objects left out are reported.
    pub skips: &'a Skips,
}

/// Every service entry the cluster's Services and EndpointSlices make on this node, with
/// the cluster IP ranges, the local-traffic detector's pod prefixes and the health-check
/// node ports with this node's counts. `memo` keeps each Service's translation: only the
/// Services the changes touch are translated again.
pub fn services_part(
    svcs: Changed<'_, Box<objects::Service>>,
    slices: Changed<'_, Box<objects::EndpointSlice>>,
    cidrs: &BTreeMap<ObjectKey, objects::ServiceCidr>,
    nodes: &BTreeMap<ObjectKey, objects::Node>,
    here: Here<'_>,
    memo: &mut ServicesMemo,
) -> ClusterPart {
    let me = nodes.get(&(String::new(), here.node_name.to_string()));
    let addresses =
        node_port_addresses(me, &here.settings.node_port_addresses, here.host_addresses);
    let zone = me
        .and_then(|n| n.metadata.labels.get(ZONE_LABEL))
        .map(String::as_str);
    let count = svcs.now.len();
    let t = memo.update(
        svcs,
        slices,
        services::ThisNode {
            name: here.node_name,
            zone,
            addresses: &addresses,
        },
    );
    log::debug!(
        "kubernetes: {} of {} Services translated",
        memo.translated(),
        count
    );
    here.skips.report(
        "services",
        t.skipped.iter().map(|s| Skip {
            object: s.object.clone(),
            reason: s.reason.label(),
            detail: s.reason.to_string(),
            expected: s.reason.expected(),
        }),
    );
    let mut service_cidrs = here.settings.service_cidrs.clone();
    let mut bad_cidrs = Vec::new();
    for cidr in cidrs.values() {
        for text in &cidr.cidrs {
            match sloppy::parse_cidr(text.trim()) {
                Some(net) => service_cidrs.push(net),
                None => bad_cidrs.push(Skip {
                    object: cidr.metadata.name.clone(),
                    reason: "bad_cidr",
                    detail: format!("invalid prefix `{text}`: ignored"),
                    expected: false,
                }),
            }
        }
    }
    here.skips.report("servicecidrs", bad_cidrs);

    let cluster_cidrs = here
        .settings
        .cluster_cidrs
        .clone()
        .unwrap_or_else(|| pod_cidrs(me));
    ClusterPart::Services(ServicesConfig {
        services: t.services,
        service_cidrs,
        cluster_cidrs,
        health_check_ports: t.health_check_ports,
    })
}

/// The pod routes to every other selected Node.
pub fn routes_part(
    all: &BTreeMap<ObjectKey, objects::Node>,
    selector: Option<&LabelSelector>,
    node_name: &str,
    connected: &[IpNet],
    skips: &Skips,
) -> ClusterPart {
    let nodes: Vec<nodes::Node> = all
        .values()
        .filter(|n| selector.is_none_or(|s| s.matches(&n.metadata.labels)))
        .map(route_input)
        .collect();
    let t = nodes::translate(
        &nodes,
        nodes::Local {
            node_name,
            connected,
        },
    );
    skips.report(
        "nodes",
        t.skipped.iter().map(|s| Skip {
            object: s.node.clone(),
            reason: s.reason.label(),
            detail: format!("pod CIDR {} not routed: {:?}", s.cidr, s.reason),
            expected: false,
        }),
    );
    ClusterPart::Routes(t.routes)
}

/// Who and how the NetworkPolicies part is made for.
pub struct PolicyHere<'a> {
    /// This node's Node name.
    pub node_name: &'a str,
    /// `network_policy_mode`.
    pub mode: PolicyMode,
    /// `log_denied`.
    pub report_denied: bool,
    /// This node's pod prefixes when `isolate_unknown_pods` (`None`: off).
    pub unknown_cidrs: Option<Vec<IpNet>>,
}

/// Pod isolation for this node's pods, from every NetworkPolicy, ClusterNetworkPolicy, Pod
/// and Namespace.
pub fn network_policies_part(
    policies: &BTreeMap<ObjectKey, objects::NetworkPolicy>,
    cluster_policies: &BTreeMap<ObjectKey, objects::ClusterNetworkPolicy>,
    pods: &BTreeMap<ObjectKey, objects::Pod>,
    namespaces: &BTreeMap<ObjectKey, objects::Namespace>,
    here: &PolicyHere<'_>,
    skips: &Skips,
) -> ClusterPart {
    let (mut isolation, skipped) = network_policies::translate_for(
        policies.values(),
        pods.values(),
        namespaces.values(),
        &network_policies::Options {
            node_name: here.node_name,
            mode: here.mode,
            report_denied: here.report_denied,
            unknown_cidrs: here.unknown_cidrs.clone(),
        },
    );
    let (tiers, cluster_skipped) = network_policies::cluster::translate(
        cluster_policies.values(),
        pods.values(),
        namespaces.values(),
        here.node_name,
    );
    isolation.admin = tiers.admin;
    isolation.baseline = tiers.baseline;
    // Tiers alone program something too: their pods are named as the units' are.
    if isolation.names.is_empty() && isolation.has_tiers() {
        isolation.names =
            network_policies::local_pod_names(pods.values(), namespaces.values(), here.node_name);
    }
    skips.report(
        "clusternetworkpolicies",
        cluster_skipped.iter().map(|s| Skip {
            object: s.policy.clone(),
            reason: "unsupported",
            detail: s.reason.clone(),
            expected: false,
        }),
    );
    skips.report(
        "networkpolicies",
        skipped.iter().map(|s| Skip {
            object: s.policy.clone(),
            reason: "unsupported",
            detail: s.reason.clone(),
            expected: false,
        }),
    );
    ClusterPart::NetworkPolicies(isolation)
}

/// What the route translation reads of a Node.
fn route_input(n: &objects::Node) -> nodes::Node {
    let mut pod_cidrs = n.spec.pod_cidrs.clone();
    if pod_cidrs.is_empty() {
        pod_cidrs.extend(n.spec.pod_cidr.clone());
    }
    nodes::Node {
        name: n.metadata.name.clone(),
        pod_cidrs,
        annotations: n.metadata.annotations.clone(),
        internal_ips: n
            .status
            .addresses
            .iter()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: &str) -> (ObjectKey, objects::Node) {
        let n: objects::Node = serde_json::from_str(json).unwrap();
        ((String::new(), n.metadata.name.clone()), n)
    }

    fn ips(v: &[&str]) -> Vec<IpAddr> {
        v.iter().map(|a| a.parse().unwrap()).collect()
    }

    /// kube-proxy's `--nodeport-addresses`: `primary` is the node IPs (one per family, as
    /// `GetNodeHostIPs` picks them), `all` every local address, prefixes the local
    /// addresses within them.
    #[test]
    fn node_port_addresses_primary_all_and_prefixes() {
        let (_, me) = node(
            r#"{"metadata":{"name":"me"},"status":{"addresses":[
            {"type":"Hostname","address":"me"},{"type":"ExternalIP","address":"203.0.113.5"},
            {"type":"InternalIP","address":"10.0.0.5"},{"type":"InternalIP","address":"10.0.0.6"},
            {"type":"ExternalIP","address":"2001:db8::5"},{"type":"InternalIP","address":"010.0.0.7"}]}}"#,
        );
        let host = ips(&["10.0.0.5", "192.168.7.1", "2001:db8::5", "fd00::1"]);
        let primary = node_port_addresses(Some(&me), &NodePortAddresses::Primary, &host);
        assert_eq!(
            primary,
            ips(&["10.0.0.5", "2001:db8::5"]),
            "the first InternalIP, then the first address of the other family"
        );
        assert!(node_port_addresses(None, &NodePortAddresses::Primary, &host).is_empty());
        assert_eq!(
            node_port_addresses(Some(&me), &NodePortAddresses::All, &host),
            host
        );
        let cidrs = NodePortAddresses::Cidrs(vec![
            "192.168.0.0/16".parse().unwrap(),
            "fd00::/8".parse().unwrap(),
        ]);
        assert_eq!(
            node_port_addresses(Some(&me), &cidrs, &host),
            ips(&["192.168.7.1", "fd00::1"])
        );
        let (_, external_only) = node(
            r#"{"metadata":{"name":"x"},"status":{"addresses":[{"type":"ExternalIP","address":"203.0.113.9"}]}}"#,
        );
        assert_eq!(
            primary_addresses(Some(&external_only)),
            ips(&["203.0.113.9"])
        );
    }

    #[test]
    fn the_local_traffic_detector_defaults_to_this_nodes_pod_cidrs() {
        let (_, both) = node(
            r#"{"metadata":{"name":"me"},"spec":{"podCIDR":"10.42.1.0/24","podCIDRs":["10.42.1.0/24","fd42:1::/64"]}}"#,
        );
        let (_, old) = node(r#"{"metadata":{"name":"me"},"spec":{"podCIDR":"10.42.2.0/24"}}"#);
        let nets = |v: &[&str]| -> Vec<IpNet> { v.iter().map(|n| n.parse().unwrap()).collect() };
        assert_eq!(
            pod_cidrs(Some(&both)),
            nets(&["10.42.1.0/24", "fd42:1::/64"])
        );
        assert_eq!(pod_cidrs(Some(&old)), nets(&["10.42.2.0/24"]));
        assert!(pod_cidrs(None).is_empty());
    }

    #[test]
    fn the_node_selector_narrows_the_routed_nodes_and_pod_cidr_alone_counts() {
        let nodes: BTreeMap<_, _> = [
            node(
                r#"{"metadata":{"name":"a","labels":{"zone":"x"}},"spec":{"podCIDR":"10.244.1.0/24"},
                "status":{"addresses":[{"type":"InternalIP","address":"192.168.1.11"}]}}"#,
            ),
            node(
                r#"{"metadata":{"name":"b","labels":{"zone":"y"}},"spec":{"podCIDRs":["10.244.2.0/24"]},
                "status":{"addresses":[{"type":"InternalIP","address":"192.168.1.12"}]}}"#,
            ),
        ]
        .into_iter()
        .collect();
        let connected: Vec<IpNet> = vec!["192.168.1.0/24".parse().unwrap()];
        let to = |p: &ClusterPart| match p {
            ClusterPart::Routes(r) => r.iter().map(|r| r.to.to_string()).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let all = routes_part(&nodes, None, "me", &connected, &Skips::default());
        assert_eq!(to(&all), ["10.244.1.0/24", "10.244.2.0/24"]);
        let sel = LabelSelector::parse("zone=y").unwrap();
        let some = routes_part(&nodes, Some(&sel), "me", &connected, &Skips::default());
        assert_eq!(to(&some), ["10.244.2.0/24"]);
    }
}
