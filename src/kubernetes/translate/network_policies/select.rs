//! Who is who: pods reduced to what policies match on (namespace, labels, addresses, named
//! ports), API label selectors as the config's selector type, and `ipBlock` as prefixes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::kubernetes::selector::{LabelSelector, Operator, Requirement};
use crate::config::policy::pods::L4Protocol;
use crate::kubernetes::client::Labels;
use crate::kubernetes::objects::{self, Pod};

/// A pod as policies see it.
#[derive(Debug, Clone)]
pub(super) struct PodView<'a> {
    /// Its namespace.
    pub(super) namespace: &'a str,
    /// Its labels.
    pub(super) labels: &'a Labels,
    /// Its labels' namespace's labels (empty when the Namespace is unknown).
    pub(super) namespace_labels: &'a Labels,
    /// Its addresses (one per family).
    pub(super) ips: Vec<IpAddr>,
    /// On this node (policies isolate these; all pods can be peers).
    pub(super) local: bool,
    /// The whole pod, for its named ports.
    pod: &'a Pod,
}

impl PodView<'_> {
    /// The number of the container port `name` of `protocol`, if the pod declares one.
    pub(super) fn named_port(&self, name: &str, protocol: L4Protocol) -> Option<u16> {
        self.pod
            .spec
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .find(|p| {
                p.name.as_deref() == Some(name)
                    && parse_protocol(p.protocol.as_deref()) == Some(protocol)
            })
            .and_then(|p| u16::try_from(p.container_port).ok().filter(|n| *n > 0))
    }
}

/// Pods that take part in policies: with an address, not in the node's network namespace
/// (policies do not apply to host-network pods), not finished (their address may be reused);
/// each with its Namespace's labels (`empty` for a Namespace not known).
pub(super) fn pod_views<'a: 'n, 'n>(
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a objects::Namespace>,
    node_name: &str,
    empty: &'n Labels,
) -> Vec<PodView<'n>> {
    let namespaces: BTreeMap<&'n str, &'n Labels> = namespaces
        .into_iter()
        .map(|n| (n.metadata.name.as_str(), &n.metadata.labels))
        .collect();
    pods.into_iter()
        .filter(|p| !p.spec.host_network)
        .filter(|p| !matches!(p.status.phase.as_deref(), Some("Succeeded" | "Failed")))
        .filter_map(|p| {
            let mut ips: BTreeSet<IpAddr> = p
                .status
                .pod_ips
                .iter()
                .filter_map(|ip| ip.ip.parse().ok())
                .collect();
            ips.extend(
                p.status
                    .pod_ip
                    .as_deref()
                    .and_then(|ip| ip.parse::<IpAddr>().ok()),
            );
            let namespace = p.metadata.namespace.as_str();
            (!ips.is_empty()).then(|| PodView {
                namespace,
                labels: &p.metadata.labels,
                namespace_labels: namespaces.get(namespace).copied().unwrap_or(empty),
                ips: ips.into_iter().collect(),
                local: p.spec.node_name.as_deref() == Some(node_name),
                pod: p,
            })
        })
        .collect()
}

/// The protocol of a policy or container port (`None` in the API = TCP); `None` = unknown.
pub(super) fn parse_protocol(p: Option<&str>) -> Option<L4Protocol> {
    match p.unwrap_or("TCP") {
        "TCP" => Some(L4Protocol::Tcp),
        "UDP" => Some(L4Protocol::Udp),
        "SCTP" => Some(L4Protocol::Sctp),
        _ => None,
    }
}

/// An API selector as a [`LabelSelector`]; `Err` names an operator the API does not define.
pub(super) fn selector(s: &objects::LabelSelector) -> Result<LabelSelector, String> {
    let mut requirements: Vec<Requirement> = s
        .match_labels
        .iter()
        .map(|(k, v)| Requirement {
            key: k.clone(),
            op: Operator::Equals,
            values: vec![v.clone()],
        })
        .collect();
    for e in &s.match_expressions {
        let op = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => return Err(format!("unknown selector operator `{other}`")),
        };
        requirements.push(Requirement {
            key: e.key.clone(),
            op,
            values: e.values.clone(),
        });
    }
    Ok(LabelSelector { requirements })
}

/// `cidr` without `except`, as prefixes (the API requires each exception inside the block).
pub(super) fn ip_block(block: &objects::IpBlock) -> Result<Vec<IpNet>, String> {
    let parse = |s: &str| {
        s.parse::<IpNet>()
            .map(|n| n.trunc())
            .map_err(|_| format!("invalid CIDR `{s}`"))
    };
    let mut nets = vec![parse(&block.cidr)?];
    for e in &block.except {
        let e = parse(e)?;
        nets = nets.into_iter().flat_map(|n| subtract(n, e)).collect();
    }
    Ok(nets)
}

/// `net` minus `hole`: `net` itself when they do not overlap, nothing when `hole` covers it,
/// else the halves of `net` on the way down to `hole` that do not contain it.
pub(super) fn subtract(net: IpNet, hole: IpNet) -> Vec<IpNet> {
    if hole.contains(&net) {
        return Vec::new();
    }
    if !net.contains(&hole) {
        return vec![net];
    }
    let mut out = Vec::new();
    let mut current = net;
    while current.prefix_len() < hole.prefix_len() {
        let halves: Vec<IpNet> = current
            .subnets(current.prefix_len() + 1)
            .expect("a longer prefix exists below the hole's")
            .collect();
        let (inside, outside) = if halves[0].contains(&hole) {
            (halves[0], halves[1])
        } else {
            (halves[1], halves[0])
        };
        out.push(outside);
        current = inside;
    }
    crate::kubernetes::order::sort(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn subtract_leaves_the_halves_around_the_hole() {
        let n = |s: &str| s.parse::<IpNet>().unwrap();
        assert_eq!(
            subtract(n("10.0.0.0/24"), n("10.0.0.128/25")),
            nets(&["10.0.0.0/25"])
        );
        assert_eq!(
            subtract(n("10.0.0.0/24"), n("10.0.0.5/32")),
            nets(&[
                "10.0.0.0/30",
                "10.0.0.4/32",
                "10.0.0.6/31",
                "10.0.0.8/29",
                "10.0.0.16/28",
                "10.0.0.32/27",
                "10.0.0.64/26",
                "10.0.0.128/25"
            ])
        );
        assert_eq!(
            subtract(n("10.0.0.0/24"), n("10.1.0.0/16")),
            nets(&["10.0.0.0/24"])
        );
        assert_eq!(subtract(n("10.0.0.0/24"), n("10.0.0.0/8")), nets(&[]));
    }

    #[test]
    fn ip_block_with_two_exceptions() {
        let block = objects::IpBlock {
            cidr: "192.168.0.0/16".into(),
            except: vec!["192.168.1.0/24".into(), "192.168.128.0/17".into()],
        };
        assert_eq!(
            ip_block(&block).unwrap(),
            nets(&[
                "192.168.0.0/24",
                "192.168.2.0/23",
                "192.168.4.0/22",
                "192.168.8.0/21",
                "192.168.16.0/20",
                "192.168.32.0/19",
                "192.168.64.0/18"
            ])
        );
        let bad = objects::IpBlock {
            cidr: "nope".into(),
            except: vec![],
        };
        assert!(ip_block(&bad).is_err());
    }
}
