//! NetworkPolicies -> isolation units, on fixtures built with k8s-openapi types and read back
//! through the lean structs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString as ApiPort;

use super::*;

const NODE: &str = "edge-1";

fn via_json<T: serde::Serialize, U: serde::de::DeserializeOwned>(value: &T) -> U {
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn meta(ns: &str, name: &str, l: &[(&str, &str)]) -> meta::ObjectMeta {
    meta::ObjectMeta {
        namespace: (!ns.is_empty()).then(|| ns.into()),
        name: Some(name.into()),
        labels: labels(l),
        ..Default::default()
    }
}

/// A running pod; `ports` are (name, number, protocol) of one container.
fn pod(
    ns: &str,
    name: &str,
    node: &str,
    ip: &str,
    l: &[(&str, &str)],
    ports: &[(&str, i32, &str)],
) -> Pod {
    via_json(&core::Pod {
        metadata: meta(ns, name, l),
        spec: Some(core::PodSpec {
            node_name: Some(node.into()),
            containers: vec![core::Container {
                name: "c".into(),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, p, proto)| core::ContainerPort {
                            name: Some(n.to_string()),
                            container_port: *p,
                            protocol: Some(proto.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some(ip.split(',').next().unwrap().into()),
            pod_ips: Some(
                ip.split(',')
                    .map(|ip| core::PodIP { ip: ip.into() })
                    .collect(),
            ),
            ..Default::default()
        }),
    })
}

fn namespace(name: &str, l: &[(&str, &str)]) -> Namespace {
    via_json(&core::Namespace {
        metadata: meta("", name, l),
        ..Default::default()
    })
}

fn sel(l: &[(&str, &str)]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: labels(l),
        match_expressions: None,
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![meta::LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }]),
    }
}

fn pods_peer(s: meta::LabelSelector) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        pod_selector: Some(s),
        ..Default::default()
    }
}

fn ns_peer(s: meta::LabelSelector) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        namespace_selector: Some(s),
        ..Default::default()
    }
}

fn block(cidr: &str, except: &[&str]) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        ip_block: Some(net::IPBlock {
            cidr: cidr.into(),
            except: Some(except.iter().map(|e| e.to_string()).collect()),
        }),
        ..Default::default()
    }
}

fn port(p: ApiPort, end: Option<i32>, proto: &str) -> net::NetworkPolicyPort {
    net::NetworkPolicyPort {
        port: Some(p),
        end_port: end,
        protocol: Some(proto.into()),
    }
}

fn policy(ns: &str, name: &str, spec: net::NetworkPolicySpec) -> NetworkPolicy {
    via_json(&net::NetworkPolicy {
        metadata: meta(ns, name, &[]),
        spec: Some(spec),
    })
}

fn ingress(
    target: meta::LabelSelector,
    from: Vec<net::NetworkPolicyPeer>,
    ports: Vec<net::NetworkPolicyPort>,
) -> net::NetworkPolicySpec {
    net::NetworkPolicySpec {
        pod_selector: Some(target),
        ingress: Some(vec![net::NetworkPolicyIngressRule {
            from: Some(from),
            ports: Some(ports),
        }]),
        ..Default::default()
    }
}

/// The cluster of most tests: `shop` (team=front) and `db` (team=back) namespaces, a web pod
/// and a db pod on this node, a client pod in `shop` and one in `db` on another node.
fn cluster() -> (Vec<Pod>, Vec<Namespace>) {
    (
        vec![
            pod(
                "shop",
                "web",
                NODE,
                "10.1.0.5,fd00::5",
                &[("app", "web")],
                &[("http", 8080, "TCP")],
            ),
            pod(
                "db",
                "pg",
                NODE,
                "10.1.0.6",
                &[("app", "pg")],
                &[("sql", 5432, "TCP")],
            ),
            pod(
                "shop",
                "client",
                "edge-2",
                "10.2.0.7",
                &[("app", "client")],
                &[],
            ),
            pod(
                "db",
                "admin",
                "edge-2",
                "10.2.0.8",
                &[("app", "admin")],
                &[("http", 9090, "TCP")],
            ),
        ],
        vec![
            namespace("shop", &[("team", "front")]),
            namespace("db", &[("team", "back")]),
        ],
    )
}

fn run(policies: &[NetworkPolicy]) -> (PodPolicies, Vec<Skipped>) {
    let (pods, namespaces) = cluster();
    translate(policies, &pods, &namespaces, NODE)
}

fn ips(v: &[&str]) -> Vec<IpAddr> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn nets(v: &[&str]) -> Vec<IpNet> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn tcp(first: u16, last: u16) -> PortRange {
    PortRange {
        protocol: L4Protocol::Tcp,
        first,
        last,
    }
}

#[test]
fn ingress_from_a_namespace_selects_local_pods_and_peers_anywhere() {
    let (out, skipped) = run(&[policy(
        "db",
        "from-front",
        ingress(sel(&[]), vec![ns_peer(sel(&[("team", "front")]))], vec![]),
    )]);
    assert_eq!(skipped, []);
    assert_eq!(
        out.policies,
        [PodPolicy {
            name: "k8s:db/from-front".into(),
            ingress: Some(Isolation {
                pods: ips(&["10.1.0.6"]),
                allow: vec![Allow {
                    pods: None,
                    peers: Some(nets(&["10.1.0.5/32", "10.2.0.7/32", "fd00::5/128"])),
                    ports: vec![],
                }],
            }),
            egress: None,
            audit: false,
        }]
    );
}

#[test]
fn pod_and_namespace_selector_in_one_peer_is_an_and() {
    let both = net::NetworkPolicyPeer {
        pod_selector: Some(sel(&[("app", "admin")])),
        namespace_selector: Some(sel(&[("team", "back")])),
        ip_block: None,
    };
    let wrong_ns = net::NetworkPolicyPeer {
        pod_selector: Some(sel(&[("app", "admin")])),
        namespace_selector: Some(sel(&[("team", "front")])),
        ip_block: None,
    };
    let (out, _) = run(&[
        policy(
            "shop",
            "a",
            ingress(sel(&[("app", "web")]), vec![both], vec![]),
        ),
        policy(
            "shop",
            "b",
            ingress(sel(&[("app", "web")]), vec![wrong_ns], vec![]),
        ),
    ]);
    let peers = |i: usize| {
        out.policies[i].ingress.as_ref().unwrap().allow[0]
            .peers
            .clone()
    };
    assert_eq!(peers(0), Some(nets(&["10.2.0.8/32"])));
    assert_eq!(peers(1), Some(vec![]), "matches nobody: allows nothing");
}

#[test]
fn pod_selector_alone_means_the_policy_namespace() {
    let (out, _) = run(&[policy(
        "shop",
        "same-ns",
        ingress(sel(&[("app", "web")]), vec![pods_peer(sel(&[]))], vec![]),
    )]);
    let allow = &out.policies[0].ingress.as_ref().unwrap().allow[0];
    assert_eq!(
        allow.peers,
        Some(nets(&["10.1.0.5/32", "10.2.0.7/32", "fd00::5/128"])),
        "every pod of shop, none of db"
    );
    assert_eq!(
        out.policies[0].ingress.as_ref().unwrap().pods,
        ips(&["10.1.0.5", "fd00::5"]),
        "both families of the target"
    );
}

#[test]
fn match_expressions_in_notin_exists_doesnotexist() {
    let targets = |s: meta::LabelSelector| {
        let (out, skipped) = run(&[policy("shop", "p", ingress(s, vec![], vec![]))]);
        assert_eq!(skipped, []);
        out.policies
            .first()
            .map(|p| p.ingress.clone().unwrap().pods)
            .unwrap_or_default()
    };
    let web = ips(&["10.1.0.5", "fd00::5"]);
    assert_eq!(targets(expr("app", "In", &["web", "x"])), web);
    assert_eq!(
        targets(expr("app", "NotIn", &["web"])),
        ips(&[]),
        "client is not local"
    );
    assert_eq!(targets(expr("app", "Exists", &[])), web);
    assert_eq!(targets(expr("app", "DoesNotExist", &[])), ips(&[]));
    let (out, skipped) = run(&[policy(
        "shop",
        "bad",
        ingress(expr("app", "Like", &[]), vec![], vec![]),
    )]);
    assert!(out.is_empty());
    assert_eq!(skipped[0].policy, "shop/bad");
    assert!(skipped[0].reason.contains("Like"), "{}", skipped[0]);
}

#[test]
fn ip_block_with_except_and_port_range() {
    let (out, _) = run(&[policy(
        "shop",
        "range",
        ingress(
            sel(&[("app", "web")]),
            vec![block("192.168.0.0/24", &["192.168.0.128/25"])],
            vec![
                port(ApiPort::Int(8000), Some(8100), "TCP"),
                port(ApiPort::Int(53), None, "UDP"),
            ],
        ),
    )]);
    assert_eq!(
        out.policies[0].ingress.as_ref().unwrap().allow,
        [Allow {
            pods: None,
            peers: Some(nets(&["192.168.0.0/25"])),
            ports: vec![
                tcp(8000, 8100),
                PortRange {
                    protocol: L4Protocol::Udp,
                    first: 53,
                    last: 53
                }
            ],
        }]
    );
}

#[test]
fn policy_types_default_and_explicit() {
    let mut spec = ingress(sel(&[]), vec![], vec![]);
    spec.ingress = None;
    let (out, _) = run(&[policy("shop", "deny-in", spec.clone())]);
    let p = &out.policies[0];
    assert_eq!(
        p.ingress.as_ref().unwrap().allow,
        [],
        "isolated, nothing allowed"
    );
    assert_eq!(p.egress, None, "no egress rules: not an egress policy");
    spec.policy_types = Some(vec!["Egress".into()]);
    let (out, _) = run(&[policy("shop", "deny-out", spec.clone())]);
    assert_eq!(out.policies[0].ingress, None);
    assert_eq!(out.policies[0].egress.as_ref().unwrap().allow, []);
    spec.policy_types = None;
    spec.egress = Some(vec![net::NetworkPolicyEgressRule {
        to: Some(vec![block("0.0.0.0/0", &["10.0.0.0/8"])]),
        ports: None,
    }]);
    let (out, _) = run(&[policy("shop", "out", spec)]);
    let p = &out.policies[0];
    assert!(p.ingress.is_some(), "Ingress is always implied");
    assert_eq!(
        p.egress.as_ref().unwrap().allow[0]
            .peers
            .as_ref()
            .unwrap()
            .len(),
        8
    );
}

#[test]
fn named_ports_resolve_through_targets_for_ingress() {
    let (pods, namespaces) = cluster();
    let mut pods = pods;
    pods.push(pod(
        "shop",
        "web2",
        NODE,
        "10.1.0.9",
        &[("app", "web")],
        &[("http", 8081, "TCP")],
    ));
    pods.push(pod(
        "shop",
        "web3",
        NODE,
        "10.1.0.10",
        &[("app", "web")],
        &[],
    ));
    let p = policy(
        "shop",
        "named",
        ingress(
            sel(&[("app", "web")]),
            vec![],
            vec![
                port(ApiPort::String("http".into()), None, "TCP"),
                port(ApiPort::String("http".into()), None, "UDP"),
            ],
        ),
    );
    let (out, _) = translate(&[p], &pods, &namespaces, NODE);
    let iso = out.policies[0].ingress.clone().unwrap();
    assert_eq!(
        iso.pods,
        ips(&["10.1.0.5", "10.1.0.9", "10.1.0.10", "fd00::5"])
    );
    assert_eq!(
        iso.allow,
        [
            Allow {
                pods: Some(ips(&["10.1.0.5", "fd00::5"])),
                peers: None,
                ports: vec![tcp(8080, 8080)],
            },
            Allow {
                pods: Some(ips(&["10.1.0.9"])),
                peers: None,
                ports: vec![tcp(8081, 8081)],
            },
        ],
        "web3 has no port `http`; no pod has it over UDP"
    );
}

#[test]
fn named_ports_resolve_through_peers_for_egress() {
    let spec = net::NetworkPolicySpec {
        pod_selector: Some(sel(&[("app", "web")])),
        egress: Some(vec![net::NetworkPolicyEgressRule {
            to: Some(vec![
                ns_peer(sel(&[("team", "back")])),
                block("203.0.113.0/24", &[]),
            ]),
            ports: Some(vec![
                port(ApiPort::String("http".into()), None, "TCP"),
                port(ApiPort::Int(443), None, "TCP"),
            ]),
        }]),
        ..Default::default()
    };
    let (out, _) = run(&[policy("shop", "out", spec)]);
    let p = &out.policies[0];
    assert!(
        p.ingress.as_ref().unwrap().allow.is_empty(),
        "Ingress implied, no rules"
    );
    assert_eq!(
        p.egress.as_ref().unwrap().allow,
        [
            Allow {
                pods: None,
                peers: Some(nets(&["10.1.0.6/32", "10.2.0.8/32", "203.0.113.0/24"])),
                ports: vec![tcp(443, 443)],
            },
            Allow {
                pods: None,
                peers: Some(nets(&["10.2.0.8/32"])),
                ports: vec![tcp(9090, 9090)],
            },
        ],
        "`http` is 9090 on admin; pg has no `http`"
    );
}

#[test]
fn only_pods_on_this_node_running_and_not_host_network() {
    let (mut pods, namespaces) = cluster();
    pods[1].status.phase = Some("Succeeded".into());
    let mut host = pods[0].clone();
    host.metadata.name = "host".into();
    host.spec.host_network = true;
    host.status.pod_ips.clear();
    host.status.pod_ip = Some("192.0.2.1".into());
    pods.push(host);
    let p = policy("db", "all", ingress(sel(&[]), vec![], vec![]));
    let (out, _) = translate(std::slice::from_ref(&p), &pods, &namespaces, NODE);
    assert!(out.is_empty(), "the only local db pod finished");
    let (out, _) = translate(&[p], &pods, &namespaces, "edge-2");
    assert_eq!(
        out.policies[0].ingress.as_ref().unwrap().pods,
        ips(&["10.2.0.8"])
    );
}

#[test]
fn invalid_peers_and_ports_are_left_out_of_their_rule_only() {
    let (out, skipped) = run(&[policy(
        "shop",
        "partly-bad",
        ingress(
            sel(&[("app", "web")]),
            vec![block("300.0.0.0/8", &[]), block("10.9.0.0/16", &[])],
            vec![
                port(ApiPort::Int(0), None, "TCP"),
                port(ApiPort::Int(80), None, "ICMP"),
                port(ApiPort::Int(22), None, "TCP"),
            ],
        ),
    )]);
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert_eq!(
        out.policies[0].ingress.as_ref().unwrap().allow,
        [Allow {
            pods: None,
            peers: Some(nets(&["10.9.0.0/16"])),
            ports: vec![tcp(22, 22)],
        }]
    );
}

#[test]
fn output_is_sorted_and_independent_of_input_order() {
    let a = policy("shop", "a", ingress(sel(&[]), vec![], vec![]));
    let b = policy("db", "b", ingress(sel(&[]), vec![], vec![]));
    let (one, _) = run(&[a.clone(), b.clone()]);
    let (two, _) = run(&[b, a]);
    assert_eq!(one, two);
    let names: Vec<&str> = one.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["k8s:db/b", "k8s:shop/a"]);
}

#[test]
fn the_mode_annotation_wins_over_the_configured_mode_and_unknown_addresses_are_listed() {
    use super::{MODE_ANNOTATION, Options, translate_for};
    use crate::config::kubernetes::PolicyMode;
    let annotated = |name: &str, mode: Option<&str>| {
        let mut p = policy("db", name, ingress(sel(&[]), vec![], vec![]));
        if let Some(m) = mode {
            p.metadata
                .annotations
                .insert(MODE_ANNOTATION.into(), m.into());
        }
        p
    };
    let policies = [
        annotated("a", Some("audit")),
        annotated("e", Some("enforce")),
        annotated("n", None),
        annotated("x", Some("dry-run")),
    ];
    let (pods, namespaces) = cluster();
    let modes = |mode| {
        let opts = Options {
            node_name: NODE,
            mode,
            report_denied: true,
            unknown_cidrs: Some(nets(&["10.1.0.0/24"])),
        };
        let (out, skipped) = translate_for(&policies, &pods, &namespaces, &opts);
        let audits: Vec<bool> = out.policies.iter().map(|p| p.audit).collect();
        (out, audits, skipped)
    };
    let (out, audits, skipped) = modes(PolicyMode::Enforce);
    assert_eq!(audits, [true, false, false, false], "a, e, n, x");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].reason.contains("`dry-run`"), "{skipped:?}");
    let unknown = out.unknown.unwrap();
    assert_eq!(
        unknown.known,
        ips(&["10.1.0.5", "10.1.0.6"]),
        "known pods in the prefix"
    );
    assert!(out.report_denied);
    assert_eq!(out.names[&"10.1.0.6".parse::<IpAddr>().unwrap()], "db/pg");
    assert!(
        !out.names
            .contains_key(&"10.2.0.7".parse::<IpAddr>().unwrap()),
        "local pods only"
    );
    let (_, audits, _) = modes(PolicyMode::Audit);
    assert_eq!(
        audits,
        [true, false, true, true],
        "network_policy_mode = audit for the rest"
    );
}

#[test]
fn pod_names_are_kept_only_where_something_is_programmed() {
    use super::{Options, translate_for};
    let (pods, namespaces) = cluster();
    let p = policy("db", "a", ingress(sel(&[]), vec![], vec![]));
    let names = |policies: &[NetworkPolicy], unknown: bool| {
        let opts = Options {
            node_name: NODE,
            unknown_cidrs: unknown.then(|| nets(&["10.1.0.0/24"])),
            ..Options::default()
        };
        translate_for(policies, &pods, &namespaces, &opts).0.names
    };
    assert!(names(&[], false).is_empty(), "nothing programmed: no names");
    let named = names(std::slice::from_ref(&p), false);
    assert_eq!(named[&"10.1.0.6".parse::<IpAddr>().unwrap()], "db/pg");
    assert!(
        !named.contains_key(&"10.2.0.7".parse::<IpAddr>().unwrap()),
        "local pods only"
    );
    assert!(!names(&[], true).is_empty(), "isolate_unknown_pods");
}
