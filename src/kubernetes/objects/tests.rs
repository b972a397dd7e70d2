//! The lean structs read what the real API types write: fixtures are built with k8s-openapi,
//! serialized to JSON, and read back here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::networking::v1 as networking;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString as ApiIntOrString;
use serde::de::DeserializeOwned;

use super::*;

fn via_json<T: serde::Serialize, U: DeserializeOwned>(value: &T) -> U {
    let json = serde_json::to_string(value).unwrap();
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn meta(ns: &str, name: &str, rv: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        namespace: (!ns.is_empty()).then(|| ns.into()),
        name: Some(name.into()),
        resource_version: Some(rv.into()),
        ..Default::default()
    }
}

fn api_service() -> core::Service {
    core::Service {
        metadata: meta::ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            annotations: Some(BTreeMap::from([(
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                "{\"a very long\": \"copy of the object\"}".into(),
            )])),
            ..meta("shop", "web", "41")
        },
        spec: Some(core::ServiceSpec {
            type_: Some("LoadBalancer".into()),
            cluster_ip: Some("10.96.0.10".into()),
            cluster_ips: Some(vec!["10.96.0.10".into(), "fd00::10".into()]),
            external_ips: Some(vec!["192.0.2.7".into()]),
            ports: Some(vec![core::ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: 80,
                node_port: Some(30080),
                target_port: Some(ApiIntOrString::String("web".into())),
                ..Default::default()
            }]),
            session_affinity: Some("ClientIP".into()),
            external_traffic_policy: Some("Local".into()),
            internal_traffic_policy: Some("Cluster".into()),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus {
            load_balancer: Some(core::LoadBalancerStatus {
                ingress: Some(vec![core::LoadBalancerIngress {
                    ip: Some("198.51.100.1".into()),
                    ip_mode: Some("VIP".into()),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        }),
    }
}

#[test]
fn a_service_reads_every_field_used_and_drops_foreign_annotations() {
    let s: Service = via_json(&api_service());
    assert_eq!(
        (
            s.metadata.namespace.as_str(),
            s.metadata.name.as_str(),
            s.metadata.resource_version.as_str()
        ),
        ("shop", "web", "41")
    );
    assert!(s.metadata.labels.is_empty(), "no label read: none kept");
    assert!(s.metadata.annotations.is_empty());
    assert_eq!(s.spec.type_.as_deref(), Some("LoadBalancer"));
    assert_eq!(s.spec.cluster_ip.as_deref(), Some("10.96.0.10"));
    assert_eq!(s.spec.cluster_ips, ["10.96.0.10", "fd00::10"]);
    assert_eq!(s.spec.external_ips, ["192.0.2.7"]);
    assert_eq!(
        s.spec.ports,
        [ServicePort {
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            port: 80,
            node_port: Some(30080),
        }]
    );
    assert_eq!(s.spec.session_affinity.as_deref(), Some("ClientIP"));
    assert_eq!(s.spec.external_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(s.spec.internal_traffic_policy.as_deref(), Some("Cluster"));
    let ingress = &s.status.load_balancer.ingress[0];
    assert_eq!(
        (ingress.ip.as_deref(), ingress.ip_mode.as_deref()),
        (Some("198.51.100.1"), Some("VIP"))
    );
}

#[test]
fn a_list_page_carries_its_version_and_continue_token() {
    let list = k8s_openapi::List::<core::Service> {
        metadata: meta::ListMeta {
            resource_version: Some("1000".into()),
            continue_: Some("page-2".into()),
            ..Default::default()
        },
        items: vec![api_service(), api_service()],
    };
    let page: List<Service> = via_json(&list);
    assert_eq!(page.kind, "ServiceList");
    assert_eq!(page.metadata.resource_version, "1000");
    assert_eq!(page.metadata.continue_token, "page-2");
    assert_eq!(page.items.len(), 2);
    let last: List<Service> = serde_json::from_str(
        r#"{"kind":"ServiceList","metadata":{"resourceVersion":"7"},"items":null}"#,
    )
    .unwrap();
    assert_eq!(
        (last.metadata.continue_token.as_str(), last.items.len()),
        ("", 0)
    );
}

#[test]
fn endpoint_conditions_take_the_api_defaults() {
    let slice = discovery::EndpointSlice {
        metadata: meta::ObjectMeta {
            labels: Some(BTreeMap::from([(
                "kubernetes.io/service-name".into(),
                "web".into(),
            )])),
            ..meta("shop", "web-abcde", "42")
        },
        address_type: "IPv4".into(),
        endpoints: vec![
            discovery::Endpoint {
                addresses: vec!["10.1.0.5".into()],
                node_name: Some("edge-1".into()),
                ..Default::default()
            },
            discovery::Endpoint {
                addresses: vec!["10.1.0.6".into()],
                conditions: Some(discovery::EndpointConditions {
                    ready: Some(false),
                    serving: Some(true),
                    terminating: Some(true),
                }),
                ..Default::default()
            },
        ],
        ports: Some(vec![discovery::EndpointPort {
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            port: Some(8080),
            ..Default::default()
        }]),
    };
    let s: EndpointSlice = via_json(&slice);
    assert_eq!(s.address_type, "IPv4");
    let plain = s.endpoints[0].conditions;
    assert!(plain.is_ready() && plain.is_serving() && !plain.is_terminating());
    assert_eq!(s.endpoints[0].node_name.as_deref(), Some("edge-1"));
    let going = s.endpoints[1].conditions;
    assert!(!going.is_ready() && going.is_serving() && going.is_terminating());
    assert_eq!(s.ports[0].port, Some(8080));
}

/// The API server writes `"ports": null` and `"endpoints": null` for an empty slice (those
/// fields have no omitempty); a lean struct that rejected null would drop the whole list.
#[test]
fn an_empty_slice_with_null_lists_reads_as_empty() {
    let s: EndpointSlice = serde_json::from_str(
        r#"{"metadata":{"name":"web-x","namespace":"shop","labels":null,"annotations":null},
            "addressType":"IPv6","endpoints":null,"ports":null}"#,
    )
    .unwrap();
    assert!(s.endpoints.is_empty() && s.ports.is_empty() && s.metadata.labels.is_empty());
}

#[test]
fn a_node_keeps_pod_cidrs_addresses_and_kube_router_annotations_only() {
    let node = core::Node {
        metadata: meta::ObjectMeta {
            annotations: Some(BTreeMap::from([
                ("kube-router.io/pod-cidr".into(), "10.244.3.0/24".into()),
                ("node.alpha.kubernetes.io/ttl".into(), "0".into()),
            ])),
            ..meta("", "edge-3", "9")
        },
        spec: Some(core::NodeSpec {
            pod_cidr: Some("10.244.3.0/24".into()),
            pod_cidrs: Some(vec!["10.244.3.0/24".into(), "fd10:3::/64".into()]),
            ..Default::default()
        }),
        status: Some(core::NodeStatus {
            addresses: Some(vec![
                core::NodeAddress {
                    type_: "InternalIP".into(),
                    address: "192.168.1.3".into(),
                },
                core::NodeAddress {
                    type_: "Hostname".into(),
                    address: "edge-3".into(),
                },
            ]),
            ..Default::default()
        }),
    };
    let n: Node = via_json(&node);
    assert_eq!(
        n.metadata.annotations,
        BTreeMap::from([("kube-router.io/pod-cidr".into(), "10.244.3.0/24".into())])
    );
    assert_eq!(n.spec.pod_cidr.as_deref(), Some("10.244.3.0/24"));
    assert_eq!(n.spec.pod_cidrs, ["10.244.3.0/24", "fd10:3::/64"]);
    assert_eq!(
        (
            n.status.addresses[0].type_.as_str(),
            n.status.addresses[0].address.as_str()
        ),
        ("InternalIP", "192.168.1.3")
    );
}

#[test]
fn a_network_policy_keeps_selectors_peers_and_ports() {
    let selector = |k: &str, v: &str| meta::LabelSelector {
        match_labels: Some(BTreeMap::from([(k.into(), v.into())])),
        match_expressions: Some(vec![meta::LabelSelectorRequirement {
            key: "tier".into(),
            operator: "In".into(),
            values: Some(vec!["a".into(), "b".into()]),
        }]),
    };
    let policy = networking::NetworkPolicy {
        metadata: meta("shop", "allow-front", "77"),
        spec: Some(networking::NetworkPolicySpec {
            pod_selector: Some(selector("app", "web")),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![networking::NetworkPolicyIngressRule {
                from: Some(vec![
                    networking::NetworkPolicyPeer {
                        namespace_selector: Some(selector("team", "front")),
                        pod_selector: Some(meta::LabelSelector::default()),
                        ..Default::default()
                    },
                    networking::NetworkPolicyPeer {
                        ip_block: Some(networking::IPBlock {
                            cidr: "10.0.0.0/8".into(),
                            except: Some(vec!["10.9.0.0/16".into()]),
                        }),
                        ..Default::default()
                    },
                ]),
                ports: Some(vec![
                    networking::NetworkPolicyPort {
                        port: Some(ApiIntOrString::String("http".into())),
                        ..Default::default()
                    },
                    networking::NetworkPolicyPort {
                        protocol: Some("UDP".into()),
                        port: Some(ApiIntOrString::Int(5000)),
                        end_port: Some(5010),
                    },
                ]),
            }]),
            egress: Some(vec![networking::NetworkPolicyEgressRule::default()]),
        }),
    };
    let p: NetworkPolicy = via_json(&policy);
    assert_eq!(p.spec.pod_selector.match_labels["app"], "web");
    assert_eq!(
        p.spec.pod_selector.match_expressions[0],
        LabelSelectorRequirement {
            key: "tier".into(),
            operator: "In".into(),
            values: vec!["a".into(), "b".into()]
        }
    );
    assert_eq!(
        p.spec.policy_types,
        Some(vec!["Ingress".to_string(), "Egress".to_string()])
    );
    let from = &p.spec.ingress[0].from;
    assert_eq!(
        from[0].namespace_selector.as_ref().unwrap().match_labels["team"],
        "front"
    );
    assert_eq!(from[0].pod_selector, Some(LabelSelector::default()));
    let block = from[1].ip_block.as_ref().unwrap();
    assert_eq!(
        (block.cidr.as_str(), block.except.as_slice()),
        ("10.0.0.0/8", &["10.9.0.0/16".to_string()][..])
    );
    let ports = &p.spec.ingress[0].ports;
    assert_eq!(ports[0].port, Some(IntOrString::String("http".into())));
    assert_eq!(
        (
            ports[1].protocol.as_deref(),
            &ports[1].port,
            ports[1].end_port
        ),
        (Some("UDP"), &Some(IntOrString::Int(5000)), Some(5010))
    );
    assert!(p.spec.egress[0].to.is_empty() && p.spec.egress[0].ports.is_empty());
}

#[test]
fn a_pod_and_a_namespace_keep_what_policies_need() {
    let pod = core::Pod {
        metadata: meta::ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..meta("shop", "web-0", "5")
        },
        spec: Some(core::PodSpec {
            node_name: Some("edge-1".into()),
            containers: vec![core::Container {
                name: "web".into(),
                ports: Some(vec![core::ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            phase: Some("Running".into()),
            pod_ips: Some(vec![core::PodIP {
                ip: "10.1.0.5".into(),
            }]),
            ..Default::default()
        }),
    };
    let p: Pod = via_json(&pod);
    assert_eq!(p.spec.node_name.as_deref(), Some("edge-1"));
    assert!(!p.spec.host_network);
    assert_eq!(
        p.spec.containers[0].ports[0],
        ContainerPort {
            name: Some("http".into()),
            container_port: 8080,
            protocol: Some("TCP".into())
        }
    );
    assert_eq!(p.status.pod_ips[0].ip, "10.1.0.5");
    assert_eq!(p.status.phase.as_deref(), Some("Running"));
    let ns = core::Namespace {
        metadata: meta::ObjectMeta {
            labels: Some(BTreeMap::from([("team".into(), "front".into())])),
            ..meta("", "shop", "3")
        },
        ..Default::default()
    };
    let n: Namespace = via_json(&ns);
    assert_eq!(n.metadata.labels.get("team").unwrap(), "front");
}

#[test]
fn watch_events_of_every_type_decode_in_either_key_order() {
    use meta::WatchEvent as Api;
    let added: WatchEvent<Service> = via_json(&Api::Added(api_service()));
    assert!(matches!(&added, WatchEvent::Added(s) if s.metadata.name == "web"));
    let modified: WatchEvent<Service> = via_json(&Api::Modified(api_service()));
    assert!(matches!(modified, WatchEvent::Modified(_)));
    let deleted: WatchEvent<Service> = via_json(&Api::Deleted(api_service()));
    assert!(matches!(deleted, WatchEvent::Deleted(_)));
    let bookmark: WatchEvent<Service> = via_json(&Api::<core::Service>::Bookmark {
        annotations: BTreeMap::from([("k8s.io/initial-events-end".into(), "true".into())]),
        resource_version: "1234".into(),
    });
    assert!(matches!(&bookmark, WatchEvent::Bookmark(b) if b.metadata.resource_version == "1234"));
    let gone: WatchEvent<Service> = via_json(&Api::<core::Service>::ErrorStatus(meta::Status {
        code: Some(410),
        reason: Some("Expired".into()),
        message: Some("too old resource version: 1 (1234)".into()),
        status: Some("Failure".into()),
        ..Default::default()
    }));
    let WatchEvent::Error(status) = gone else {
        panic!("not an error: {gone:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    let reversed: WatchEvent<Service> = serde_json::from_str(
        r#"{"object":{"metadata":{"name":"late","resourceVersion":"9"}},"type":"MODIFIED"}"#,
    )
    .unwrap();
    assert!(matches!(&reversed, WatchEvent::Modified(s) if s.metadata.name == "late"));
    for bad in [
        r#"{"type":"SHRUG","object":{}}"#,
        r#"{"object":{},"type":"SHRUG"}"#,
        r#"{"type":"ADDED"}"#,
        r#"{"object":{}}"#,
    ] {
        assert!(
            serde_json::from_str::<WatchEvent<Service>>(bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_service_cidr_keeps_its_prefixes_and_endpoints_their_hints() {
    let cidr: ServiceCidr = via_json(&networking::ServiceCIDR {
        metadata: meta("", "kubernetes", "7"),
        spec: Some(networking::ServiceCIDRSpec {
            cidrs: Some(vec!["10.96.0.0/12".into(), "fd00:96::/108".into()]),
        }),
        ..Default::default()
    });
    assert_eq!(cidr.metadata.name, "kubernetes");
    assert_eq!(cidr.cidrs, ["10.96.0.0/12", "fd00:96::/108"]);
    let slice: EndpointSlice = via_json(&discovery::EndpointSlice {
        metadata: meta("shop", "web-x", "8"),
        address_type: "IPv4".into(),
        endpoints: vec![
            discovery::Endpoint {
                addresses: vec!["10.1.0.5".into()],
                hints: Some(discovery::EndpointHints {
                    for_zones: Some(vec![discovery::ForZone {
                        name: "zone-a".into(),
                    }]),
                    for_nodes: Some(vec![discovery::ForNode {
                        name: "edge-1".into(),
                    }]),
                }),
                ..Default::default()
            },
            discovery::Endpoint {
                addresses: vec!["10.1.0.6".into()],
                ..Default::default()
            },
        ],
        ports: None,
    });
    assert_eq!(slice.endpoints[0].zone_hints, ["zone-a"]);
    assert_eq!(slice.endpoints[0].node_hints, ["edge-1"]);
    assert!(slice.endpoints[1].zone_hints.is_empty() && slice.endpoints[1].node_hints.is_empty());
    let mut api = api_service();
    api.spec.as_mut().unwrap().load_balancer_source_ranges =
        Some(vec!["203.0.113.0/24".into(), " 10.0.0.0/8".into()]);
    let s: Service = via_json(&api);
    assert_eq!(
        s.spec.load_balancer_source_ranges,
        ["203.0.113.0/24", " 10.0.0.0/8"],
        "kept as written: the translation trims and parses"
    );
}

/// A field of the wrong type fails the object with the field's whole path, as read straight
/// out of the text (no value tree in between).
#[test]
fn a_wrong_type_deep_in_an_object_names_its_path() {
    use crate::kubernetes::client::json;
    let err = json::from_slice::<EndpointSlice>(
        br#"{"metadata":{"name":"s"},"endpoints":[{"addresses":["10.0.0.1"]},{"addresses":[7]}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        err,
        "endpoints[1].addresses[0]: expected a string, found a number"
    );
    let err = json::from_slice::<Service>(br#"{"spec":{"ports":[{"port":"http"}]}}"#).unwrap_err();
    assert_eq!(
        err,
        "spec.ports[0].port: expected an integer, found a string"
    );
    let err =
        json::from_slice::<NetworkPolicy>(br#"{"spec":{"ingress":[{"ports":[{"port":true}]}]}}"#)
            .unwrap_err();
    assert_eq!(
        err,
        "spec.ingress[0].ports[0].port: expected a number or a name"
    );
    let line = br#"{"type":"ADDED","object":{"metadata":{"labels":{"a":1}}}}"#;
    let err = WatchEvent::<Pod>::from_line(line, usize::MAX).unwrap_err();
    assert_eq!(
        err,
        "object.metadata.labels.a: expected a string, found a number"
    );
    let line = br#"{"type":"MODIFIED","object":[]}"#;
    let err = WatchEvent::<Pod>::from_line(line, usize::MAX).unwrap_err();
    assert_eq!(err, "object: expected an object, found a list");
}

/// A Helm chart's labels, and the ones edgenetd reads of some kinds.
fn chart_labels(extra: &[(&str, &str)]) -> String {
    let mut labels: BTreeMap<&str, &str> = BTreeMap::from([
        ("app.kubernetes.io/name", "web"),
        ("app.kubernetes.io/instance", "shop"),
        ("app.kubernetes.io/version", "1.2.3"),
        ("app.kubernetes.io/managed-by", "Helm"),
        ("helm.sh/chart", "web-0.1.0"),
        ("pod-template-hash", "5d4f8c7b9"),
    ]);
    labels.extend(extra.iter().copied());
    serde_json::to_string(&labels).unwrap()
}

/// The labels of `T` read from an object with a chart's labels and `extra`.
fn kept_labels<T: HasMeta + crate::kubernetes::client::json::Decode>(
    extra: &[(&str, &str)],
) -> Vec<String> {
    let text = format!(
        r#"{{"metadata":{{"name":"x","namespace":"shop","labels":{}}}}}"#,
        chart_labels(extra)
    );
    let obj: T = crate::kubernetes::client::json::from_slice(text.as_bytes()).unwrap();
    obj.metadata().labels.keys().cloned().collect()
}

#[test]
fn a_service_keeps_only_the_labels_that_leave_it_out() {
    let read = [
        ("service.kubernetes.io/service-proxy-name", "other"),
        ("service.kubernetes.io/headless", ""),
    ];
    assert_eq!(
        kept_labels::<Service>(&read),
        [
            "service.kubernetes.io/headless",
            "service.kubernetes.io/service-proxy-name"
        ]
    );
    assert!(kept_labels::<Service>(&[]).is_empty());
}

#[test]
fn an_endpoint_slice_keeps_its_service_and_the_labels_that_leave_it_out() {
    let read = [
        ("kubernetes.io/service-name", "web"),
        (
            "endpointslice.kubernetes.io/managed-by",
            "endpointslice-controller.k8s.io",
        ),
        ("service.kubernetes.io/headless", ""),
    ];
    assert_eq!(
        kept_labels::<EndpointSlice>(&read),
        [
            "kubernetes.io/service-name",
            "service.kubernetes.io/headless"
        ]
    );
}

#[test]
fn pods_and_namespaces_keep_every_label_for_the_policies_selectors() {
    // A policy may select on any label, pod-template-hash included.
    assert_eq!(kept_labels::<Pod>(&[("team", "a")]).len(), 7);
    assert_eq!(kept_labels::<Namespace>(&[("team", "a")]).len(), 7);
}

#[test]
fn network_policies_and_service_cidrs_keep_no_label() {
    // Their selector (`network_policy_selector`) is the API server's to apply.
    assert!(kept_labels::<NetworkPolicy>(&[("team", "a")]).is_empty());
    assert!(kept_labels::<ServiceCidr>(&[("team", "a")]).is_empty());
}

#[test]
fn a_node_decodes_every_label_for_its_reflector_to_trim() {
    // Which Node labels are read is known at run time only (the zone and `node_selector`'s
    // keys): the reflector trims them (`ReflectorConfig::label_keys`).
    assert_eq!(
        kept_labels::<Node>(&[("topology.kubernetes.io/zone", "a")]).len(),
        7
    );
}
