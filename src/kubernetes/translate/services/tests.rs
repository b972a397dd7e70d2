//! Services + EndpointSlices -> entries, on fixtures built with k8s-openapi types and read
//! back through the lean structs (so they have the API's real shapes). Each entry is shown
//! as one line: `name address:port/proto [backend*weight ...] flags`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::*;
use crate::config::service::{BackendCheck, CLUSTER_NAME_PREFIX, MAX_BACKENDS};

fn via_json<T: serde::Serialize, U: serde::de::DeserializeOwned>(value: &T) -> U {
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

fn service(ns: &str, name: &str, spec: impl FnOnce(&mut core::Service)) -> objects::Service {
    let mut s = core::Service {
        metadata: meta::ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(core::ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some("10.96.0.10".into()),
            cluster_ips: Some(vec!["10.96.0.10".into()]),
            ports: Some(vec![port("http", "TCP", 80, None)]),
            ..Default::default()
        }),
        ..Default::default()
    };
    spec(&mut s);
    via_json(&s)
}

fn spec(s: &mut core::Service) -> &mut core::ServiceSpec {
    s.spec.as_mut().unwrap()
}

fn port(name: &str, protocol: &str, number: i32, node_port: Option<i32>) -> core::ServicePort {
    core::ServicePort {
        name: (!name.is_empty()).then(|| name.into()),
        protocol: Some(protocol.into()),
        port: number,
        node_port,
        ..Default::default()
    }
}

fn slice(
    ns: &str,
    svc: &str,
    family: &str,
    ports: &[(&str, &str, i32)],
    endpoints: Vec<discovery::Endpoint>,
) -> objects::EndpointSlice {
    let s = discovery::EndpointSlice {
        metadata: meta::ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(format!("{svc}-{family}")),
            labels: Some(BTreeMap::from([(SERVICE_NAME_LABEL.into(), svc.into())])),
            ..Default::default()
        },
        address_type: family.into(),
        endpoints,
        ports: Some(
            ports
                .iter()
                .map(|(name, protocol, number)| discovery::EndpointPort {
                    name: Some(name.to_string()),
                    protocol: Some(protocol.to_string()),
                    port: Some(*number),
                    ..Default::default()
                })
                .collect(),
        ),
    };
    via_json(&s)
}

/// An endpoint; `None` conditions are left out of the JSON (the API's defaults apply).
fn ep(
    address: &str,
    node: &str,
    ready: Option<bool>,
    serving: Option<bool>,
    terminating: Option<bool>,
) -> discovery::Endpoint {
    let conditions = (ready.is_some() || serving.is_some() || terminating.is_some()).then_some(
        discovery::EndpointConditions {
            ready,
            serving,
            terminating,
        },
    );
    discovery::Endpoint {
        addresses: vec![address.into()],
        node_name: Some(node.into()),
        conditions,
        ..Default::default()
    }
}

fn ready(address: &str, node: &str) -> discovery::Endpoint {
    ep(address, node, None, None, None)
}

const NODE_ADDRESSES: &[&str] = &["192.168.1.1", "2001:db8::1"];

fn run(services: &[objects::Service], slices: &[objects::EndpointSlice]) -> Translated {
    let addresses: Vec<IpAddr> = NODE_ADDRESSES.iter().map(|a| a.parse().unwrap()).collect();
    translate(
        services,
        slices,
        ThisNode {
            name: "edge-1",
            zone: None,
            addresses: &addresses,
        },
    )
}

fn show(t: &Translated) -> Vec<String> {
    t.services
        .iter()
        .map(|s| {
            let vip = SocketAddr::new(s.address, s.port);
            let backends: Vec<String> = s
                .backends
                .iter()
                .map(|b| format!("{}*{}", b.address, b.weight))
                .collect();
            let mut flags = Vec::new();
            match s.masquerade {
                Masquerade::Always => flags.push("masquerade".to_string()),
                Masquerade::OffCluster => flags.push("off-cluster".to_string()),
                Masquerade::Never => {}
            }
            match s.affinity {
                Affinity::SourceIp => flags.push("source-ip".to_string()),
                Affinity::Sticky { timeout } => {
                    flags.push(format!("sticky {}s", timeout.as_secs()));
                }
                Affinity::None => {}
            }
            if s.when_empty == WhenEmpty::Drop {
                flags.push("drop".to_string());
            }
            if s.reject_unserved_ports {
                flags.push("cluster-ip".to_string());
            }
            if !s.source_ranges.is_empty() {
                let ranges: Vec<String> = s.source_ranges.iter().map(|n| n.to_string()).collect();
                flags.push(format!("from {}", ranges.join("+")));
            }
            if let Some(internal) = &s.internal_backends {
                let all: Vec<String> = internal
                    .iter()
                    .map(|b| format!("{}*{}", b.address, b.weight))
                    .collect();
                flags.push(format!("internal [{}]", all.join(" ")));
            }
            format!(
                "{} {vip}/{} [{}] {}",
                s.name,
                s.protocol.name(),
                backends.join(" "),
                flags.join(",")
            )
            .trim_end()
            .to_string()
        })
        .collect()
}

#[test]
fn a_cluster_ip_service_balances_to_its_ready_endpoints() {
    let t = run(
        &[service("shop", "web", |_| {})],
        &[slice(
            "shop",
            "web",
            "IPv4",
            &[("http", "TCP", 8080)],
            vec![ready("10.1.0.5", "edge-1"), ready("10.1.1.5", "edge-2")],
        )],
    );
    assert_eq!(
        show(&t),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,cluster-ip"
        ]
    );
    assert!(t.skipped.is_empty(), "{:?}", t.skipped);
    let s = &t.services[0];
    assert_eq!(
        (s.when_empty, s.backend_check.clone()),
        (WhenEmpty::Reject, BackendCheck::default())
    );
}

#[test]
fn conditions_ready_endpoints_serve_terminating_ones_drain_and_take_over_when_none_is_ready() {
    let some = Some(true);
    let no = Some(false);
    let mixed = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![
            ep("10.1.0.1", "edge-1", None, None, None),
            ep("10.1.0.2", "edge-1", no, some, some),
            ep("10.1.0.3", "edge-1", no, no, no),
            ep("10.1.0.4", "edge-1", no, no, some),
            ep("10.1.0.5", "edge-1", some, some, some),
        ],
    );
    assert_eq!(
        show(&run(&[service("shop", "web", |_| {})], &[mixed])),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.1:8080*1 10.1.0.2:8080*0 10.1.0.4:8080*0 10.1.0.5:8080*0] off-cluster,cluster-ip"
        ],
        "ready serves; terminating drains; not ready and not terminating is out"
    );
    let none_ready = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![
            ep("10.1.0.2", "edge-1", no, some, some),
            ep("10.1.0.3", "edge-1", no, no, no),
            ep("10.1.0.4", "edge-1", no, no, some),
        ],
    );
    assert_eq!(
        show(&run(&[service("shop", "web", |_| {})], &[none_ready])),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.2:8080*1] off-cluster,cluster-ip"],
        "with none ready, serving and terminating ones take the traffic"
    );
}

#[test]
fn an_address_in_two_slices_counts_once_the_more_usable_wins() {
    let endpoints = |state: Option<bool>| vec![ep("10.1.0.9", "edge-1", state, state, None)];
    let mut second = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        endpoints(Some(true)),
    );
    second.metadata.name = "web-second".into();
    let t = run(
        &[service("shop", "web", |_| {})],
        &[
            slice(
                "shop",
                "web",
                "IPv4",
                &[("http", "TCP", 8080)],
                endpoints(Some(false)),
            ),
            second,
        ],
    );
    assert_eq!(
        show(&t),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.9:8080*1] off-cluster,cluster-ip"]
    );
}

fn exposed(external_policy: &str, internal_policy: &str) -> objects::Service {
    service("shop", "web", |s| {
        let spec = spec(s);
        spec.type_ = Some("LoadBalancer".into());
        spec.ports = Some(vec![port("http", "TCP", 80, Some(30080))]);
        spec.external_ips = Some(vec!["192.0.2.7".into()]);
        spec.external_traffic_policy = Some(external_policy.into());
        spec.internal_traffic_policy = Some(internal_policy.into());
        s.status = Some(core::ServiceStatus {
            load_balancer: Some(core::LoadBalancerStatus {
                ingress: Some(vec![
                    core::LoadBalancerIngress {
                        ip: Some("198.51.100.1".into()),
                        ..Default::default()
                    },
                    core::LoadBalancerIngress {
                        ip: Some("198.51.100.2".into()),
                        ip_mode: Some("Proxy".into()),
                        ..Default::default()
                    },
                    core::LoadBalancerIngress {
                        hostname: Some("lb.example".into()),
                        ..Default::default()
                    },
                ]),
            }),
            ..Default::default()
        });
    })
}

fn two_nodes() -> objects::EndpointSlice {
    slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![ready("10.1.0.5", "edge-1"), ready("10.1.1.5", "edge-2")],
    )
}

#[test]
fn external_addresses_load_balancer_ips_and_node_ports_follow_the_external_policy() {
    assert_eq!(
        show(&run(&[exposed("Cluster", "Cluster")], &[two_nodes()])),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,cluster-ip",
            "k8s:shop/web:http 192.0.2.7:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] masquerade",
            "k8s:shop/web:http 198.51.100.1:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] masquerade",
            "k8s:shop/web:http 192.168.1.1:30080/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] masquerade",
        ],
        "ipMode Proxy and hostname-only ingress are not captured; the IPv6 node address has no IPv6 half"
    );
    assert_eq!(
        show(&run(&[exposed("Local", "Cluster")], &[two_nodes()])),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,cluster-ip",
            "k8s:shop/web:http 192.0.2.7:80/tcp [10.1.0.5:8080*1] internal [10.1.0.5:8080*1 10.1.1.5:8080*1]",
            "k8s:shop/web:http 198.51.100.1:80/tcp [10.1.0.5:8080*1] internal [10.1.0.5:8080*1 10.1.1.5:8080*1]",
            "k8s:shop/web:http 192.168.1.1:30080/tcp [10.1.0.5:8080*1] internal [10.1.0.5:8080*1 10.1.1.5:8080*1]",
        ],
        "Local: this node's endpoints only, client address kept; this node and its pods reach every endpoint"
    );
}

#[test]
fn internal_policy_local_restricts_the_cluster_ip_and_drops_without_a_local_endpoint() {
    let only_remote = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![ready("10.1.1.5", "edge-2")],
    );
    let internal_local = service("shop", "web", |s| {
        spec(s).internal_traffic_policy = Some("Local".into())
    });
    assert_eq!(
        show(&run(std::slice::from_ref(&internal_local), &[two_nodes()])),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1] off-cluster,cluster-ip"]
    );
    assert_eq!(
        show(&run(std::slice::from_ref(&internal_local), &[only_remote])),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [] off-cluster,drop,cluster-ip"],
        "endpoints elsewhere but none here: drop, like kube-proxy"
    );
    assert_eq!(
        show(&run(&[internal_local], &[])),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [] off-cluster,cluster-ip"],
        "no endpoint at all: reject"
    );
}

#[test]
fn local_policy_falls_back_to_local_serving_terminating_endpoints() {
    let t = run(
        &[service("shop", "web", |s| {
            spec(s).internal_traffic_policy = Some("Local".into())
        })],
        &[slice(
            "shop",
            "web",
            "IPv4",
            &[("http", "TCP", 8080)],
            vec![
                ready("10.1.1.5", "edge-2"),
                ep("10.1.0.5", "edge-1", Some(false), Some(true), Some(true)),
            ],
        )],
    );
    assert_eq!(
        show(&t),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1] off-cluster,cluster-ip"]
    );
}

#[test]
fn dual_stack_services_are_two_independent_halves() {
    let dual = service("shop", "web", |s| {
        let spec = spec(s);
        spec.type_ = Some("NodePort".into());
        spec.cluster_ips = Some(vec!["10.96.0.10".into(), "fd00::10".into()]);
        spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
        spec.external_ips = Some(vec!["2001:db8:7::7".into(), "192.0.2.7".into()]);
        spec.ports = Some(vec![port("http", "TCP", 80, Some(30080))]);
    });
    let slices = [
        two_nodes(),
        slice(
            "shop",
            "web",
            "IPv6",
            &[("http", "TCP", 8080)],
            vec![ready("fd10::5", "edge-1")],
        ),
    ];
    assert_eq!(
        show(&run(&[dual], &slices)),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,cluster-ip",
            "k8s:shop/web:http 192.0.2.7:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] masquerade",
            "k8s:shop/web:http 192.168.1.1:30080/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] masquerade",
            "k8s:shop/web:http [fd00::10]:80/tcp [[fd10::5]:8080*1] off-cluster,cluster-ip",
            "k8s:shop/web:http [2001:db8:7::7]:80/tcp [[fd10::5]:8080*1] masquerade",
            "k8s:shop/web:http [2001:db8::1]:30080/tcp [[fd10::5]:8080*1] masquerade",
        ]
    );
    let single = service("shop", "web", |s| {
        spec(s).external_ips = Some(vec!["2001:db8:7::7".into()]);
    });
    assert_eq!(
        show(&run(&[single], &slices)),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,cluster-ip"
        ],
        "a family without a cluster IP is not served, its addresses and endpoints neither"
    );
}

#[test]
fn headless_external_name_other_proxy_and_headless_label_are_skipped_sctp_is_proxied() {
    let services = [
        service("a", "headless", |s| {
            spec(s).cluster_ip = Some("None".into());
            spec(s).cluster_ips = Some(vec!["None".into()]);
        }),
        service("b", "alias", |s| {
            let spec = spec(s);
            spec.type_ = Some("ExternalName".into());
            spec.external_name = Some("db.example".into());
            spec.cluster_ip = None;
            spec.cluster_ips = None;
        }),
        service("c", "mesh", |s| {
            s.metadata.labels = Some(BTreeMap::from([(
                SERVICE_PROXY_NAME_LABEL.into(),
                "other-proxy".into(),
            )]))
        }),
        service("e", "labelled", |s| {
            s.metadata.labels = Some(BTreeMap::from([(HEADLESS_LABEL.into(), String::new())]))
        }),
        service("d", "signal", |s| {
            spec(s).ports = Some(vec![
                port("sig", "SCTP", 3868, None),
                port("", "UDP", 53, None),
            ])
        }),
    ];
    let t = run(&services, &[]);
    assert_eq!(
        show(&t),
        [
            "k8s:d/signal:sig 10.96.0.10:3868/sctp [] off-cluster,cluster-ip",
            "k8s:d/signal:53 10.96.0.10:53/udp [] off-cluster,cluster-ip",
        ]
    );
    let skipped: Vec<String> = t
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.object, s.reason))
        .collect();
    assert_eq!(
        skipped,
        [
            "a/headless: headless (no cluster IP)",
            "b/alias: type ExternalName",
            "c/mesh: handled by service proxy `other-proxy`",
            "e/labelled: labelled service.kubernetes.io/headless",
        ]
    );
}

#[test]
fn named_ports_join_slices_by_name_and_protocol() {
    let svc = service("net", "dns", |s| {
        spec(s).ports = Some(vec![
            port("dns", "UDP", 53, None),
            port("dns-tcp", "TCP", 53, None),
            port("metrics", "TCP", 9153, None),
        ]);
    });
    let t = run(
        &[svc],
        &[slice(
            "net",
            "dns",
            "IPv4",
            &[
                ("dns", "UDP", 5353),
                ("dns-tcp", "TCP", 5354),
                ("dns", "TCP", 9999),
                ("metrics", "UDP", 9998),
            ],
            vec![ready("10.1.0.53", "edge-1")],
        )],
    );
    assert_eq!(
        show(&t),
        [
            "k8s:net/dns:dns 10.96.0.10:53/udp [10.1.0.53:5353*1] off-cluster,cluster-ip",
            "k8s:net/dns:dns-tcp 10.96.0.10:53/tcp [10.1.0.53:5354*1] off-cluster,cluster-ip",
            "k8s:net/dns:metrics 10.96.0.10:9153/tcp [] off-cluster,cluster-ip",
        ],
        "a slice port of the same name but another protocol does not join"
    );
}

#[test]
fn slices_of_other_services_and_namespaces_are_not_joined() {
    let t = run(
        &[service("shop", "web", |_| {})],
        &[
            slice(
                "shop",
                "api",
                "IPv4",
                &[("http", "TCP", 8080)],
                vec![ready("10.1.0.7", "edge-1")],
            ),
            slice(
                "other",
                "web",
                "IPv4",
                &[("http", "TCP", 8080)],
                vec![ready("10.1.0.8", "edge-1")],
            ),
        ],
    );
    assert_eq!(
        show(&t),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [] off-cluster,cluster-ip"]
    );
}

#[test]
fn client_ip_affinity_maps_to_sticky_with_its_timeout() {
    let t = run(
        &[service("shop", "web", |s| {
            spec(s).session_affinity = Some("ClientIP".into());
            spec(s).session_affinity_config = Some(core::SessionAffinityConfig {
                client_ip: Some(core::ClientIPConfig {
                    timeout_seconds: Some(600),
                }),
            });
        })],
        &[two_nodes()],
    );
    assert_eq!(
        show(&t),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,sticky 600s,cluster-ip"
        ]
    );
}

#[test]
fn client_ip_affinity_without_a_timeout_remembers_clients_for_three_hours() {
    let t = run(
        &[service("shop", "web", |s| {
            spec(s).session_affinity = Some("ClientIP".into());
        })],
        &[two_nodes()],
    );
    assert_eq!(
        show(&t),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1] off-cluster,sticky 10800s,cluster-ip"
        ]
    );
}

#[test]
fn client_ip_affinity_timeouts_outside_the_api_bounds_are_clamped() {
    for (given, want) in [(0, 1), (-5, 1), (86400, 86400), (100_000, 86400)] {
        let t = run(
            &[service("shop", "web", |s| {
                spec(s).session_affinity = Some("ClientIP".into());
                spec(s).session_affinity_config = Some(core::SessionAffinityConfig {
                    client_ip: Some(core::ClientIPConfig {
                        timeout_seconds: Some(given),
                    }),
                });
            })],
            &[two_nodes()],
        );
        assert!(
            show(&t)[0].ends_with(&format!("sticky {want}s,cluster-ip")),
            "{given}: {:?}",
            show(&t)
        );
    }
}

#[test]
fn session_affinity_none_stays_none() {
    let t = run(
        &[service("shop", "web", |s| {
            spec(s).session_affinity = Some("None".into());
        })],
        &[two_nodes()],
    );
    assert!(
        show(&t)[0].ends_with("8080*1] off-cluster,cluster-ip"),
        "{:?}",
        show(&t)
    );
}

/// The entries pass what TOML services must: same-family backends, each once, ports set.
#[test]
fn every_entry_keeps_the_model_invariants() {
    let many: Vec<discovery::Endpoint> = (0..1100)
        .map(|i| ready(&format!("10.2.{}.{}", i / 250, i % 250 + 1), "edge-1"))
        .collect();
    let t = run(
        &[exposed("Cluster", "Cluster")],
        &[slice("shop", "web", "IPv4", &[("http", "TCP", 8080)], many)],
    );
    assert_eq!(t.services.len(), 4);
    for s in &t.services {
        assert_eq!(s.backends.len(), MAX_BACKENDS);
        let distinct: BTreeSet<_> = s.backends.iter().map(|b| b.address).collect();
        assert_eq!(distinct.len(), s.backends.len());
        assert!(
            s.backends
                .iter()
                .all(|b| b.address.is_ipv4() == s.address.is_ipv4())
        );
        assert!(s.name.starts_with(CLUSTER_NAME_PREFIX));
    }
    assert_eq!(
        t.skipped[0].reason.to_string(),
        "1100 endpoints: only the first 1024 are used"
    );
}

/// With no usable endpoint anywhere, every address rejects, Local ones included.
#[test]
fn unusable_endpoints_everywhere_reject_rather_than_drop() {
    let starting = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![ep("10.1.1.5", "edge-2", Some(false), Some(false), None)],
    );
    let t = run(&[exposed("Local", "Cluster")], &[starting]);
    assert_eq!(
        show(&t),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [] off-cluster,cluster-ip",
            "k8s:shop/web:http 192.0.2.7:80/tcp [] internal []",
            "k8s:shop/web:http 198.51.100.1:80/tcp [] internal []",
            "k8s:shop/web:http 192.168.1.1:30080/tcp [] internal []",
        ]
    );
}

/// kube-proxy's firewall (`loadBalancerSourceRanges`) covers the load balancer ingress IPs
/// only: not the cluster IP, the external IPs or the node ports. Entries are trimmed and
/// parsed sloppily, each family's half takes its own, and an invalid one is left out with
/// the rest kept (kube-proxy's `MapCIDRsByIPFamily`; it never reads the cloud providers'
/// `service.beta.kubernetes.io/load-balancer-source-ranges` annotation).
#[test]
fn load_balancer_source_ranges_apply_to_the_load_balancer_ips_only() {
    let mut svc = exposed("Cluster", "Cluster");
    svc.spec.load_balancer_source_ranges = vec![
        " 203.0.113.0/24 ".into(),
        "010.0.0.0/8".into(),
        "192.168.1.7/24".into(),
        "2001:db8::/32".into(),
        "not-a-prefix".into(),
        "".into(),
    ];
    svc.metadata.annotations.insert(
        "service.beta.kubernetes.io/load-balancer-source-ranges".into(),
        "198.18.0.0/15".into(),
    );
    let t = run(&[svc], &[two_nodes()]);
    let ranges: Vec<(String, Vec<String>)> = t
        .services
        .iter()
        .map(|s| {
            (
                s.address.to_string(),
                s.source_ranges.iter().map(|n| n.to_string()).collect(),
            )
        })
        .collect();
    let none = Vec::<String>::new();
    assert_eq!(
        ranges,
        [
            ("10.96.0.10".to_string(), none.clone()),
            ("192.0.2.7".to_string(), none.clone()),
            (
                "198.51.100.1".to_string(),
                vec![
                    "203.0.113.0/24".to_string(),
                    "10.0.0.0/8".to_string(),
                    "192.168.1.0/24".to_string(),
                    // 192.168.1.0/24 holds this node's 192.168.1.1: kube-proxy's
                    // allowFromNode admits the load balancer IP as a source too.
                    "198.51.100.1/32".to_string(),
                ]
            ),
            ("192.168.1.1".to_string(), none),
        ]
    );
    let skipped: Vec<String> = t.skipped.iter().map(|s| s.reason.to_string()).collect();
    assert_eq!(
        skipped,
        ["invalid loadBalancerSourceRanges entry `not-a-prefix`: ignored"]
    );
}

/// kube-proxy's `allowFromNode`: only when a range holds one of this node's addresses may
/// the node (and the load balancer IP, as a source) pass the firewall; otherwise the node is
/// fenced like any client, and nothing is added to the ranges.
#[test]
fn load_balancer_source_ranges_admit_this_node_only_when_a_range_holds_it() {
    let ranges_of = |ranges: &[&str]| {
        let mut svc = exposed("Cluster", "Cluster");
        svc.spec.load_balancer_source_ranges = ranges.iter().map(|r| r.to_string()).collect();
        let t = run(&[svc], &[two_nodes()]);
        let lb = t
            .services
            .iter()
            .find(|s| s.address.to_string() == "198.51.100.1")
            .expect("the load balancer entry");
        lb.source_ranges
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ranges_of(&["203.0.113.0/24"]), ["203.0.113.0/24"]);
    assert_eq!(
        ranges_of(&["203.0.113.0/24", "192.168.0.0/16"]),
        ["203.0.113.0/24", "192.168.0.0/16", "198.51.100.1/32"]
    );
    assert_eq!(
        ranges_of(&["192.168.0.0/16", "198.51.0.0/16"]),
        ["192.168.0.0/16", "198.51.0.0/16"],
        "a range already holding the load balancer IP"
    );
}

/// kube-proxy reads every address with `netutils.ParseIPSloppy`: IPv4 octets with leading
/// zeros are decimal (the API server accepted them before Kubernetes 1.22).
#[test]
fn addresses_with_leading_zeros_read_as_kube_proxys_sloppy_parser_reads_them() {
    let svc = service("shop", "old", |s| {
        let spec = spec(s);
        spec.cluster_ip = Some("172.30.0.041".into());
        spec.cluster_ips = Some(vec!["172.30.0.041".into()]);
        spec.external_ips = Some(vec!["192.000.002.007".into()]);
    });
    let endpoints = slice(
        "shop",
        "old",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![ready("10.001.000.005", "edge-1")],
    );
    assert_eq!(
        show(&run(&[svc], &[endpoints])),
        [
            "k8s:shop/old:http 172.30.0.41:80/tcp [10.1.0.5:8080*1] off-cluster,cluster-ip",
            "k8s:shop/old:http 192.0.2.7:80/tcp [10.1.0.5:8080*1] masquerade",
        ]
    );
}

#[test]
fn sctp_ports_join_sctp_endpoint_ports() {
    let svc = service("tel", "diameter", |s| {
        spec(s).ports = Some(vec![port("diameter", "SCTP", 3868, None)]);
    });
    let endpoints = slice(
        "tel",
        "diameter",
        "IPv4",
        &[("diameter", "SCTP", 3868), ("diameter", "TCP", 3869)],
        vec![ready("10.1.0.5", "edge-1")],
    );
    assert_eq!(
        show(&run(&[svc], &[endpoints])),
        ["k8s:tel/diameter:diameter 10.96.0.10:3868/sctp [10.1.0.5:3868*1] off-cluster,cluster-ip"]
    );
}

#[test]
fn endpointslices_labelled_headless_or_for_another_proxy_are_not_joined() {
    let mut headless = two_nodes();
    headless
        .metadata
        .labels
        .insert(HEADLESS_LABEL.into(), String::new());
    let mut other = slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![ready("10.1.2.5", "edge-1")],
    );
    other.metadata.name = "web-other".into();
    other
        .metadata
        .labels
        .insert(SERVICE_PROXY_NAME_LABEL.into(), "other".into());
    assert_eq!(
        show(&run(&[service("shop", "web", |_| {})], &[headless, other])),
        ["k8s:shop/web:http 10.96.0.10:80/tcp [] off-cluster,cluster-ip"]
    );
}

/// Topology-aware routing end to end: the hints as the API writes them, this node's zone,
/// and the Cluster policy's addresses (cluster IP, and the Local short-circuit's
/// `internal_backends`) narrowed; Local backends are not.
#[test]
fn zone_hints_narrow_the_cluster_endpoints_to_this_nodes_zone() {
    let hinted = |address: &str, node: &str, zone: &str| discovery::Endpoint {
        hints: Some(discovery::EndpointHints {
            for_zones: Some(vec![discovery::ForZone { name: zone.into() }]),
            ..Default::default()
        }),
        ..ready(address, node)
    };
    let slices = [slice(
        "shop",
        "web",
        "IPv4",
        &[("http", "TCP", 8080)],
        vec![
            hinted("10.1.0.5", "edge-1", "zone-b"),
            hinted("10.1.1.5", "edge-2", "zone-a"),
            hinted("10.1.2.5", "edge-3", "zone-b"),
        ],
    )];
    let addresses: Vec<IpAddr> = vec!["192.168.1.1".parse().unwrap()];
    let translated = |zone: Option<&str>| {
        show(&translate(
            &[exposed("Local", "Cluster")],
            &slices,
            ThisNode {
                name: "edge-1",
                zone,
                addresses: &addresses,
            },
        ))
    };
    assert_eq!(
        translated(Some("zone-a")),
        [
            "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.1.5:8080*1] off-cluster,cluster-ip",
            "k8s:shop/web:http 192.0.2.7:80/tcp [10.1.0.5:8080*1] internal [10.1.1.5:8080*1]",
            "k8s:shop/web:http 198.51.100.1:80/tcp [10.1.0.5:8080*1] internal [10.1.1.5:8080*1]",
            "k8s:shop/web:http 192.168.1.1:30080/tcp [10.1.0.5:8080*1] internal [10.1.1.5:8080*1]",
        ]
    );
    assert_eq!(
        translated(Some("zone-c"))[0],
        "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1 10.1.2.5:8080*1] off-cluster,cluster-ip",
        "no endpoint for this zone: the hints are ignored"
    );
    assert_eq!(
        translated(None)[0],
        "k8s:shop/web:http 10.96.0.10:80/tcp [10.1.0.5:8080*1 10.1.1.5:8080*1 10.1.2.5:8080*1] off-cluster,cluster-ip",
        "a node without a zone label uses every endpoint"
    );
}
