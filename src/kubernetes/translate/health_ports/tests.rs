//! The health-check ports and counts, on fixtures in the API's JSON shapes. Cases ported
//! from kube-proxy's `TestHealthCheckNodePortWhenTerminating` (pkg/proxy/nftables) and
//! `LocalReadyEndpoints`' reading of EndpointSlices, plus the dual-stack split.

use serde_json::{Value, json};

use super::*;

const NODE: &str = "test-node";

fn service(name: &str, spec: Value) -> objects::Service {
    let mut s = json!({
        "metadata": {"namespace": "ns1", "name": name},
        "spec": {
            "type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30000,
            "clusterIP": "172.30.1.1", "clusterIPs": ["172.30.1.1"],
            "ports": [{"name": "", "port": 80, "protocol": "TCP", "nodePort": 31000}]
        }
    });
    for (k, v) in spec.as_object().unwrap() {
        s["spec"][k] = v.clone();
    }
    serde_json::from_value(s).unwrap()
}

/// An endpoint: address, (ready, serving, terminating), node.
fn ep(ip: &str, conditions: (bool, bool, bool), node: &str) -> Value {
    let (ready, serving, terminating) = conditions;
    json!({
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "nodeName": node
    })
}

const READY: (bool, bool, bool) = (true, true, false);
const TERMINATING: (bool, bool, bool) = (false, true, true);
const GONE: (bool, bool, bool) = (false, false, true);

fn slice(
    svc: &str,
    name: &str,
    family: &str,
    ports: Value,
    endpoints: Vec<Value>,
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns1", "name": name,
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": family,
        "ports": ports,
        "endpoints": endpoints
    }))
    .unwrap()
}

fn port80() -> Value {
    json!([{"name": "", "port": 80, "protocol": "TCP"}])
}

/// `service port v4 v6` per entry.
fn lines(svcs: &[objects::Service], slices: &[EndpointSlice]) -> Vec<String> {
    translate(svcs, slices, NODE)
        .iter()
        .map(|p| {
            format!(
                "{} {} {} {}",
                p.service, p.port, p.local_endpoints, p.local_endpoints_v6
            )
        })
        .collect()
}

#[test]
fn health_check_node_port_when_terminating() {
    let svc = [service("svc1", json!({}))];
    let cases: &[(&str, Vec<Value>, &str)] = &[
        (
            "one local ready endpoint",
            vec![ep("10.0.1.1", READY, "test-node")],
            "ns1/svc1 30000 1 1",
        ),
        (
            "only terminating local endpoints count none",
            vec![
                ep("10.0.1.1", (false, true, false), NODE),
                ep("10.0.1.2", TERMINATING, NODE),
                ep("10.0.1.3", TERMINATING, NODE),
                ep("10.0.1.4", GONE, NODE),
            ],
            "ns1/svc1 30000 0 0",
        ),
        (
            "ready ones count, terminating and other nodes' ones do not",
            vec![
                ep("10.0.1.1", READY, NODE),
                ep("10.0.1.2", READY, NODE),
                ep("10.0.1.3", TERMINATING, NODE),
                ep("10.0.1.4", GONE, NODE),
                ep("10.0.1.5", READY, "node-1"),
            ],
            "ns1/svc1 30000 2 2",
        ),
        (
            "ready and terminating at once counts as terminating",
            vec![ep("10.0.1.1", (true, true, true), NODE)],
            "ns1/svc1 30000 0 0",
        ),
        (
            "absent conditions read as ready",
            vec![json!({"addresses": ["10.0.1.1"], "conditions": {}, "nodeName": NODE})],
            "ns1/svc1 30000 1 1",
        ),
        (
            "an endpoint without a node name is not local",
            vec![json!({"addresses": ["10.0.1.1"], "conditions": {"ready": true}})],
            "ns1/svc1 30000 0 0",
        ),
        ("no endpoints", vec![], "ns1/svc1 30000 0 0"),
    ];
    for (what, endpoints, want) in cases {
        let slices = [slice("svc1", "svc1-1", "IPv4", port80(), endpoints.clone())];
        assert_eq!(lines(&svc, &slices), [*want], "{what}");
    }
}

#[test]
fn local_ready_endpoints_count_each_address_once_over_ports_and_slices() {
    let svc = [service("svc1", json!({}))];
    let two_ports = json!([
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "https", "port": 443, "protocol": "TCP"}
    ]);
    let slices = [
        slice(
            "svc1",
            "svc1-a",
            "IPv4",
            two_ports,
            vec![ep("10.0.1.1", READY, NODE), ep("10.0.1.2", READY, NODE)],
        ),
        // The same address in a second slice (as during a slice's replacement): one endpoint.
        slice(
            "svc1",
            "svc1-b",
            "IPv4",
            port80(),
            vec![ep("10.0.1.2", READY, NODE), ep("10.0.1.3", READY, NODE)],
        ),
        // Another Service's slice with a local endpoint: not this Service's.
        slice(
            "other",
            "other-1",
            "IPv4",
            port80(),
            vec![ep("10.0.9.9", READY, NODE)],
        ),
        // kube-proxy keys endpoints by port: a slice without a port number gives none.
        slice(
            "svc1",
            "svc1-c",
            "IPv4",
            json!([{"name": "", "protocol": "TCP"}]),
            vec![ep("10.0.1.4", READY, NODE)],
        ),
        slice(
            "svc1",
            "svc1-d",
            "IPv4",
            json!(null),
            vec![ep("10.0.1.5", READY, NODE)],
        ),
    ];
    assert_eq!(lines(&svc, &slices), ["ns1/svc1 30000 3 3"]);
}

#[test]
fn dual_stack_services_count_each_family_for_the_probes_over_it() {
    let dual = service(
        "dual",
        json!({"clusterIPs": ["172.30.1.1", "fd00::1"], "ipFamilies": ["IPv4", "IPv6"],
               "healthCheckNodePort": 30001}),
    );
    let v6_only = service(
        "v6",
        json!({"clusterIP": "fd00::2", "clusterIPs": ["fd00::2"], "healthCheckNodePort": 30002}),
    );
    let slices = [
        slice(
            "dual",
            "dual-v4",
            "IPv4",
            port80(),
            vec![ep("10.0.1.1", READY, NODE), ep("10.0.1.2", READY, NODE)],
        ),
        slice(
            "dual",
            "dual-v6",
            "IPv6",
            port80(),
            vec![ep("fd01::1", READY, NODE)],
        ),
        slice(
            "v6",
            "v6-v6",
            "IPv6",
            port80(),
            vec![ep("fd01::2", READY, NODE)],
        ),
        // A family the Service does not have counts for nobody.
        slice(
            "v6",
            "v6-v4",
            "IPv4",
            port80(),
            vec![ep("10.0.1.9", READY, NODE)],
        ),
        slice(
            "v6",
            "v6-fqdn",
            "FQDN",
            port80(),
            vec![ep("a.example", READY, NODE)],
        ),
    ];
    assert_eq!(
        lines(&[dual, v6_only], &slices),
        ["ns1/dual 30001 2 1", "ns1/v6 30002 1 1"]
    );
}

#[test]
fn only_local_load_balancers_with_a_health_check_port_get_one() {
    let cases: &[(&str, Value)] = &[
        (
            "policy Cluster",
            json!({"externalTrafficPolicy": "Cluster"}),
        ),
        ("policy unset", json!({"externalTrafficPolicy": null})),
        ("type NodePort", json!({"type": "NodePort"})),
        ("type ClusterIP", json!({"type": "ClusterIP"})),
        ("no health check port", json!({"healthCheckNodePort": null})),
        ("health check port 0", json!({"healthCheckNodePort": 0})),
        ("out of range", json!({"healthCheckNodePort": 70000})),
        (
            "headless",
            json!({"clusterIP": "None", "clusterIPs": ["None"]}),
        ),
    ];
    let slices = [slice(
        "svc1",
        "svc1-1",
        "IPv4",
        port80(),
        vec![ep("10.0.1.1", READY, NODE)],
    )];
    for (what, spec) in cases {
        assert!(
            lines(&[service("svc1", spec.clone())], &slices).is_empty(),
            "{what}"
        );
    }
    let mut other_proxy = service("svc1", json!({}));
    other_proxy.metadata.labels.insert(
        "service.kubernetes.io/service-proxy-name".into(),
        "other".into(),
    );
    assert!(lines(&[other_proxy], &slices).is_empty(), "another proxy's");
    assert_eq!(
        lines(&[service("svc1", json!({}))], &slices),
        ["ns1/svc1 30000 1 1"],
        "the fixture itself gets one"
    );
}

#[test]
fn entries_are_ordered_by_service_whatever_the_input_order() {
    let b = service("b", json!({"healthCheckNodePort": 30001}));
    let a = service("a", json!({"healthCheckNodePort": 30002}));
    assert_eq!(lines(&[b, a], &[]), ["ns1/a 30002 0 0", "ns1/b 30001 0 0"]);
}
