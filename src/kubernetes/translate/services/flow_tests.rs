//! kube-proxy's packet flow tests (`pkg/proxy/nftables/proxier_test.go`,
//! `runPacketFlowTests`), read against the entries: which endpoints a packet from a source
//! to a destination may reach, and whether it is masqueraded, as the model's fields say
//! (`backends` or `internal_backends`, `masquerade`, `source_ranges`, `when_empty`). The
//! fixtures are upstream's: node `test-node` at 192.168.0.2, pods in 10.0.0.0/8 (its fake
//! proxier's local-traffic detector), the external client 203.0.113.2.

use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::*;

const NODE: &str = "test-node";
const NODE_IP: &str = "192.168.0.2";
const POD: &str = "10.0.0.2";
const EXTERNAL: &str = "203.0.113.2";

/// What upstream's `packetFlowTest` checks: the endpoints (or DROP / REJECT) and masquerade.
fn flow(entries: &[model::Service], source: &str, dest: &str, port: u16) -> (String, bool) {
    let source: IpAddr = source.parse().unwrap();
    let dest: IpAddr = dest.parse().unwrap();
    let pods: IpNet = "10.0.0.0/8".parse().unwrap();
    let from_node = source == NODE_IP.parse::<IpAddr>().unwrap();
    let from_pod = pods.contains(&source);
    let Some(e) = entries.iter().find(|e| e.address == dest && e.port == port) else {
        return ("no entry".into(), false);
    };
    if !e.source_ranges.is_empty()
        && !from_node
        && !e.source_ranges.iter().any(|r| r.contains(&source))
    {
        return ("DROP".into(), false);
    }
    let short_circuit = e.internal_backends.is_some() && (from_node || from_pod);
    let backends = match (&e.internal_backends, short_circuit) {
        (Some(internal), true) => internal,
        _ => &e.backends,
    };
    let mut usable: Vec<String> = backends
        .iter()
        .filter(|b| b.weight > 0)
        .map(|b| b.address.to_string())
        .collect();
    if usable.is_empty() {
        let verdict = match e.when_empty {
            WhenEmpty::Drop => "DROP",
            WhenEmpty::Reject => "REJECT",
        };
        return (verdict.into(), false);
    }
    usable.sort();
    let masq = match e.masquerade {
        _ if short_circuit => from_node,
        Masquerade::Always => true,
        Masquerade::OffCluster => !from_pod,
        Masquerade::Never => false,
    };
    (usable.join(", "), masq)
}

fn svc1(f: impl FnOnce(&mut core::ServiceSpec, &mut core::ServiceStatus)) -> objects::Service {
    let mut spec = core::ServiceSpec {
        cluster_ip: Some("172.30.1.1".into()),
        cluster_ips: Some(vec!["172.30.1.1".into()]),
        ports: Some(vec![core::ServicePort {
            name: Some(String::new()),
            port: 80,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mut status = core::ServiceStatus::default();
    f(&mut spec, &mut status);
    let s = core::Service {
        metadata: meta::ObjectMeta {
            namespace: Some("ns1".into()),
            name: Some("svc1".into()),
            ..Default::default()
        },
        spec: Some(spec),
        status: Some(status),
    };
    serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
}

/// One endpoint: address, node, ready, serving, terminating.
type Ep = (&'static str, &'static str, bool, bool, bool);

fn slice1(endpoints: &[Ep]) -> objects::EndpointSlice {
    let s = discovery::EndpointSlice {
        metadata: meta::ObjectMeta {
            namespace: Some("ns1".into()),
            name: Some("svc1-1".into()),
            labels: Some([(SERVICE_NAME_LABEL.to_string(), "svc1".to_string())].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        ports: Some(vec![discovery::EndpointPort {
            name: Some(String::new()),
            port: Some(80),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: endpoints
            .iter()
            .map(
                |(ip, node, ready, serving, terminating)| discovery::Endpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(discovery::EndpointConditions {
                        ready: Some(*ready),
                        serving: Some(*serving),
                        terminating: Some(*terminating),
                    }),
                    node_name: Some(node.to_string()),
                    ..Default::default()
                },
            )
            .collect(),
    };
    serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
}

fn entries(svc: &objects::Service, endpoints: &[Ep]) -> Vec<model::Service> {
    let addresses: Vec<IpAddr> = vec![NODE_IP.parse().unwrap()];
    let slices = [slice1(endpoints)];
    let slices: &[objects::EndpointSlice] = if endpoints.is_empty() { &[] } else { &slices };
    translate(
        [svc],
        slices,
        ThisNode {
            name: NODE,
            zone: None,
            addresses: &addresses,
        },
    )
    .services
}

const READY: (bool, bool, bool) = (true, true, false);

const fn ready(ip: &'static str, node: &'static str) -> Ep {
    (ip, node, READY.0, READY.1, READY.2)
}

#[test]
fn test_internal_traffic_policy() {
    let cases: [(&str, Option<&str>, &[Ep], &str); 4] = [
        (
            "internalTrafficPolicy is cluster",
            Some("Cluster"),
            &[
                ready("10.0.1.1", NODE),
                ready("10.0.1.2", "node1"),
                ready("10.0.1.3", "node2"),
            ],
            "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80",
        ),
        (
            "internalTrafficPolicy is local and there is one local endpoint",
            Some("Local"),
            &[
                ready("10.0.1.1", NODE),
                ready("10.0.1.2", "node1"),
                ready("10.0.1.3", "node2"),
            ],
            "10.0.1.1:80",
        ),
        (
            "internalTrafficPolicy is local and there are multiple local endpoints",
            Some("Local"),
            &[
                ready("10.0.1.1", NODE),
                ready("10.0.1.2", NODE),
                ready("10.0.1.3", "node2"),
            ],
            "10.0.1.1:80, 10.0.1.2:80",
        ),
        (
            "internalTrafficPolicy is local and there are no local endpoints",
            Some("Local"),
            &[
                ready("10.0.1.1", "node0"),
                ready("10.0.1.2", "node1"),
                ready("10.0.1.3", "node2"),
            ],
            "DROP",
        ),
    ];
    for (name, policy, endpoints, want) in cases {
        let svc = svc1(|spec, _| spec.internal_traffic_policy = policy.map(str::to_string));
        let got = flow(&entries(&svc, endpoints), POD, "172.30.1.1", 80);
        assert_eq!(got, (want.to_string(), false), "{name}: pod to ClusterIP");
        let gone = flow(&entries(&svc, &[]), POD, "172.30.1.1", 80);
        assert_eq!(gone.0, "REJECT", "{name}: endpoints deleted");
    }
}

#[test]
fn test_terminating_endpoints_traffic_policy_local() {
    let lb = || {
        svc1(|spec, status| {
            spec.type_ = Some("LoadBalancer".into());
            spec.external_traffic_policy = Some("Local".into());
            status.load_balancer = Some(core::LoadBalancerStatus {
                ingress: Some(vec![core::LoadBalancerIngress {
                    ip: Some("1.2.3.4".into()),
                    ..Default::default()
                }]),
            });
        })
    };
    let cases: [(&str, &[Ep], &str, &str); 4] = [
        (
            "ready endpoints exist",
            &[
                ready("10.0.1.1", NODE),
                ready("10.0.1.2", NODE),
                ("10.0.1.3", NODE, false, true, true),
                ("10.0.1.4", NODE, false, false, true),
                ready("10.0.1.5", "node-1"),
            ],
            "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
            "10.0.1.1:80, 10.0.1.2:80",
        ),
        (
            "only terminating endpoints exist",
            &[
                ("10.0.1.2", NODE, false, true, true),
                ("10.0.1.3", NODE, false, true, true),
                ("10.0.1.4", NODE, false, false, true),
                ready("10.0.1.5", "node-1"),
            ],
            "10.0.1.5:80",
            "10.0.1.2:80, 10.0.1.3:80",
        ),
        (
            "terminating endpoints on remote node",
            &[("10.0.1.5", "node-1", false, true, true)],
            "10.0.1.5:80",
            "DROP",
        ),
        (
            "no usable endpoints on any node",
            &[
                ("10.0.1.5", NODE, false, false, true),
                ("10.0.1.6", "node-1", false, false, true),
            ],
            "REJECT",
            "REJECT",
        ),
    ];
    for (name, endpoints, cluster_ip, lb_ip) in cases {
        let e = entries(&lb(), endpoints);
        assert_eq!(
            flow(&e, POD, "172.30.1.1", 80).0,
            cluster_ip,
            "{name}: pod to clusterIP"
        );
        let external = flow(&e, EXTERNAL, "1.2.3.4", 80);
        assert_eq!(external.0, lb_ip, "{name}: external to LB");
        assert!(!external.1, "{name}: eTP Local keeps the client's address");
        let gone = entries(&lb(), &[]);
        assert_eq!(
            flow(&gone, POD, "172.30.1.1", 80).0,
            "REJECT",
            "{name}: endpoints deleted"
        );
        assert_eq!(
            flow(&gone, EXTERNAL, "1.2.3.4", 80).0,
            "REJECT",
            "{name}: endpoints deleted"
        );
    }
}

/// kube-proxy's masquerade rules (`TestOverallNFTablesRules`' flows): off-cluster traffic
/// to a cluster IP is masqueraded, pods' is not; eTP Cluster external addresses masquerade
/// everything; eTP Local ones nothing, except the node's own short-circuited traffic; pods
/// and the node reach every endpoint of an eTP Local address, external clients only the
/// local ones; source ranges guard the LB IP only, for pods too (kube-proxy's firewall
/// runs before DNAT for every source but the node itself).
#[test]
fn masquerade_short_circuit_and_source_range_flows() {
    let endpoints: &[Ep] = &[ready("10.180.0.1", NODE), ready("10.180.2.1", "node-2")];
    let lb = |policy: &'static str| {
        svc1(move |spec, status| {
            spec.type_ = Some("LoadBalancer".into());
            spec.external_traffic_policy = Some(policy.into());
            spec.external_ips = Some(vec!["192.168.99.11".into()]);
            spec.ports.as_mut().unwrap()[0].node_port = Some(3001);
            spec.load_balancer_source_ranges = Some(vec!["203.0.113.0/25".into()]);
            status.load_balancer = Some(core::LoadBalancerStatus {
                ingress: Some(vec![core::LoadBalancerIngress {
                    ip: Some("5.6.7.8".into()),
                    ..Default::default()
                }]),
            });
        })
    };
    let both = "10.180.0.1:80, 10.180.2.1:80";
    let local = "10.180.0.1:80";
    let cluster = entries(&lb("Cluster"), endpoints);
    let local_policy = entries(&lb("Local"), endpoints);
    for (name, e, source, dest, port, want, masq) in [
        (
            "pod to cluster IP",
            &cluster,
            POD,
            "172.30.1.1",
            80,
            both,
            false,
        ),
        (
            "node to cluster IP",
            &cluster,
            NODE_IP,
            "172.30.1.1",
            80,
            both,
            true,
        ),
        (
            "external to cluster IP",
            &cluster,
            EXTERNAL,
            "172.30.1.1",
            80,
            both,
            true,
        ),
        (
            "external to external IP, eTP Cluster",
            &cluster,
            EXTERNAL,
            "192.168.99.11",
            80,
            both,
            true,
        ),
        (
            "external to LB, eTP Cluster",
            &cluster,
            EXTERNAL,
            "5.6.7.8",
            80,
            both,
            true,
        ),
        (
            "external to node port, eTP Cluster",
            &cluster,
            EXTERNAL,
            NODE_IP,
            3001,
            both,
            true,
        ),
        (
            "external to LB, eTP Local",
            &local_policy,
            EXTERNAL,
            "5.6.7.8",
            80,
            local,
            false,
        ),
        (
            "external to node port, eTP Local",
            &local_policy,
            EXTERNAL,
            NODE_IP,
            3001,
            local,
            false,
        ),
        (
            "pod to external IP, eTP Local (short circuit)",
            &local_policy,
            POD,
            "192.168.99.11",
            80,
            both,
            false,
        ),
        (
            "pod outside the source ranges to LB",
            &local_policy,
            POD,
            "5.6.7.8",
            80,
            "DROP",
            false,
        ),
        (
            "node to LB, eTP Local (short circuit)",
            &local_policy,
            NODE_IP,
            "5.6.7.8",
            80,
            both,
            true,
        ),
        (
            "pod to node port, eTP Local (short circuit)",
            &local_policy,
            POD,
            NODE_IP,
            3001,
            both,
            false,
        ),
        (
            "external outside the source ranges to LB",
            &cluster,
            "203.0.113.200",
            "5.6.7.8",
            80,
            "DROP",
            false,
        ),
        (
            "external outside the source ranges to external IP",
            &cluster,
            "203.0.113.200",
            "192.168.99.11",
            80,
            both,
            true,
        ),
        (
            "external outside the source ranges to node port",
            &cluster,
            "203.0.113.200",
            NODE_IP,
            3001,
            both,
            true,
        ),
    ] {
        assert_eq!(
            flow(e, source, dest, port),
            (want.to_string(), masq),
            "{name}"
        );
    }
}
