//! From the stores to the composer's parts: which cluster objects make which entries.
//!
//! A part is only made once every store it reads holds a complete list: services from
//! Services without their EndpointSlices would publish every service without backends, and
//! after a restart from the cache that would undo exactly what the cache keeps in force.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use log::debug;

use crate::config::label_selector::LabelSelector;
use crate::kubernetes::client::{ObjectKey, Store};
use crate::kubernetes::compose::ClusterPart;
use crate::kubernetes::objects;
use crate::kubernetes::translate::{health_ports, network_policies, nodes, services};

/// Node address types NodePorts are served on.
const NODE_PORT_ADDRESS_TYPES: [&str; 2] = ["InternalIP", "ExternalIP"];

/// The objects of one store, once it has listed; `None` before.
pub fn listed<T: Clone>(store: &Store<T>) -> Option<Arc<BTreeMap<ObjectKey, T>>> {
    store.is_synced().then(|| store.snapshot())
}

/// This node's addresses NodePorts are served on: its Node's InternalIP and ExternalIP
/// addresses, in the API's order, each once.
pub fn node_addresses(nodes: &BTreeMap<ObjectKey, objects::Node>, node_name: &str) -> Vec<IpAddr> {
    let Some(node) = nodes.get(&(String::new(), node_name.to_string())) else {
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for a in &node.status.addresses {
        if !NODE_PORT_ADDRESS_TYPES.contains(&a.type_.as_str()) {
            continue;
        }
        if let Ok(ip) = a.address.trim().parse::<IpAddr>() {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
    }
    out
}

/// Every service entry the cluster's Services and EndpointSlices make on this node.
pub fn services_part(
    svcs: &BTreeMap<ObjectKey, objects::Service>,
    slices: &BTreeMap<ObjectKey, objects::EndpointSlice>,
    node_name: &str,
    node_addresses: &[IpAddr],
) -> ClusterPart {
    let t = services::translate(
        svcs.values(),
        slices.values(),
        services::ThisNode {
            name: node_name,
            addresses: node_addresses,
        },
    );
    for s in &t.skipped {
        debug!("kubernetes service {}: skipped: {}", s.object, s.reason);
    }
    ClusterPart::Services(t.services)
}

/// The health-check node ports of the cluster's Services, with this node's counts.
pub fn health_ports_part(
    svcs: &BTreeMap<ObjectKey, objects::Service>,
    slices: &BTreeMap<ObjectKey, objects::EndpointSlice>,
    node_name: &str,
) -> ClusterPart {
    ClusterPart::HealthCheckPorts(health_ports::translate(
        svcs.values(),
        slices.values(),
        node_name,
    ))
}

/// The pod routes to every other selected Node.
pub fn routes_part(
    all: &BTreeMap<ObjectKey, objects::Node>,
    selector: Option<&LabelSelector>,
    node_name: &str,
    connected: &[IpNet],
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
    for s in &t.skipped {
        debug!(
            "kubernetes node {}: pod CIDR {} not routed: {:?}",
            s.node, s.cidr, s.reason
        );
    }
    ClusterPart::Routes(t.routes)
}

/// Pod isolation for this node's pods, from every NetworkPolicy, Pod and Namespace.
pub fn network_policies_part(
    policies: &BTreeMap<ObjectKey, objects::NetworkPolicy>,
    pods: &BTreeMap<ObjectKey, objects::Pod>,
    namespaces: &BTreeMap<ObjectKey, objects::Namespace>,
    node_name: &str,
) -> ClusterPart {
    let (isolation, skipped) = network_policies::translate(
        policies.values(),
        pods.values(),
        namespaces.values(),
        node_name,
    );
    for s in &skipped {
        debug!("kubernetes network policy: {s}");
    }
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

    #[test]
    fn node_ports_are_served_on_this_nodes_internal_and_external_addresses() {
        let nodes: BTreeMap<_, _> = [
            node(
                r#"{"metadata":{"name":"me"},"status":{"addresses":[
                {"type":"Hostname","address":"me"},{"type":"InternalIP","address":"10.0.0.5"},
                {"type":"ExternalIP","address":"203.0.113.5"},{"type":"InternalIP","address":"10.0.0.5"}]}}"#,
            ),
            node(
                r#"{"metadata":{"name":"other"},"status":{"addresses":[
                {"type":"InternalIP","address":"10.0.0.6"}]}}"#,
            ),
        ]
        .into_iter()
        .collect();
        let want: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap(), "203.0.113.5".parse().unwrap()];
        assert_eq!(node_addresses(&nodes, "me"), want);
        assert!(node_addresses(&nodes, "absent").is_empty());
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
        let all = routes_part(&nodes, None, "me", &connected);
        assert_eq!(to(&all), ["10.244.1.0/24", "10.244.2.0/24"]);
        let sel = LabelSelector::parse("zone=y").unwrap();
        let some = routes_part(&nodes, Some(&sel), "me", &connected);
        assert_eq!(to(&some), ["10.244.2.0/24"]);
    }
}
