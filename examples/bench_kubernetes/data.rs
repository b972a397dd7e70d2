//! The cluster of the benchmark, as the API server would hold it: 5,000 Services (`--services`) in 50
//! namespaces, each with one EndpointSlice of 4 ready endpoints (20,000 endpoints), and the
//! Node edgenetd runs on. Objects carry the metadata a real cluster writes (uid, timestamps,
//! managedFields, kubectl's last-applied annotation, and the dozen labels and the annotations
//! a Helm chart puts on what it installs), since decoding and skipping those is part of what a
//! list costs, and keeping them of what the stores hold.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

/// Services in the cluster unless `--services` says otherwise.
pub const DEFAULT_SERVICES: usize = 5000;
/// Services in this run (`--services`, set once before anything is generated).
static SERVICES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Sets the run's service count (first call wins).
pub fn set_services(n: usize) {
    let _ = SERVICES.set(n);
}

/// Services in the cluster.
pub fn services() -> usize {
    *SERVICES.get_or_init(|| DEFAULT_SERVICES)
}
/// Ready endpoints per service.
pub const ENDPOINTS: usize = 4;
/// Namespaces the services are spread over.
const NAMESPACES: usize = 50;
/// The Node edgenetd runs as.
pub const NODE: &str = "bench-node";
/// That node's InternalIP.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 1);
/// The port every service listens on, and every endpoint's port.
pub const PORT: u16 = 80;
/// The endpoints' port.
pub const TARGET_PORT: u16 = 8080;

/// Service `i`'s cluster IP (10.96.0.0/16).
pub fn vip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, (i >> 8) as u8, i as u8)
}

/// Endpoint `j` of service `i`.
pub fn endpoint_ip(i: usize, j: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 200 + j as u8, (i >> 8) as u8, i as u8)
}

/// The address a changed endpoint moves to (`n` tells successive changes apart).
pub fn moved_ip(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 250, (n >> 8) as u8, n as u8)
}

/// Endpoint `j` of service `i` after a rollout replaced them all.
pub fn rolled_ip(i: usize, j: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 230 + j as u8, (i >> 8) as u8, i as u8)
}

/// Service `i`'s namespace and name.
pub fn service_name(i: usize) -> (String, String) {
    (format!("ns-{}", i % NAMESPACES), format!("svc-{i}"))
}

/// The labels a Helm chart puts on service `i`'s objects (12, as real charts carry: the
/// recommended `app.kubernetes.io/*` set, Helm's own, and the older `app`/`release`/`tier`
/// ones many charts still write). The EndpointSlice controller copies them onto the slices.
fn chart_labels(i: usize, name: &str) -> serde_json::Map<String, Value> {
    let release = format!("release-{}", i / 10);
    let component = ["api", "web", "worker", "cache"][i % 4];
    let labels = json!({
        "app": name,
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/version": format!("1.{}.{}", i % 7, i % 13),
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": format!("product-{}", i % 25),
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": format!("{name}-chart-0.{}.{}", i % 9, i % 4),
        "release": release,
        "heritage": "Helm",
        "tier": "backend",
        "team": format!("team-{}", i % 12),
    });
    let Value::Object(labels) = labels else {
        unreachable!()
    };
    labels
}

/// The annotations Helm puts on what it installs.
fn chart_annotations(i: usize, ns: &str) -> Value {
    json!({
        "meta.helm.sh/release-name": format!("release-{}", i / 10),
        "meta.helm.sh/release-namespace": ns,
    })
}

/// What every object's metadata carries besides name and namespace.
fn metadata(ns: &str, name: &str, labels: Value, extra_annotations: Value) -> Value {
    let mut annotations = json!({
        "kubectl.kubernetes.io/last-applied-configuration": format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{{\"annotations\":{{}},\"labels\":{{\"app\":\"{name}\"}},\"name\":\"{name}\",\"namespace\":\"{ns}\"}},\"spec\":{{\"ports\":[{{\"name\":\"http\",\"port\":{PORT},\"protocol\":\"TCP\",\"targetPort\":{TARGET_PORT}}}],\"selector\":{{\"app\":\"{name}\"}}}}}}\n"
        ),
    });
    if let (Some(a), Some(extra)) = (annotations.as_object_mut(), extra_annotations.as_object()) {
        a.extend(extra.clone());
    }
    json!({
        "name": name,
        "namespace": ns,
        "uid": format!("7f1c2a9e-{:04x}-4c1b-9a55-{:012x}", name.len(), name.len() * 7919),
        "creationTimestamp": "2026-11-30T12:00:00Z",
        "labels": labels,
        "annotations": annotations,
        "managedFields": [{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-30T12:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}, "f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:internalTrafficPolicy": {}, "f:ports": {".": {}, "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}}, "f:selector": {}, "f:sessionAffinity": {}, "f:type": {}}}
        }]
    })
}

/// Service `i`.
pub fn service(i: usize) -> Value {
    let (ns, name) = service_name(i);
    json!({
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": metadata(&ns, &name, Value::Object(chart_labels(i, &name)), chart_annotations(i, &ns)),
        "spec": {
            "type": "ClusterIP",
            "clusterIP": vip(i).to_string(),
            "clusterIPs": [vip(i).to_string()],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "http", "protocol": "TCP", "port": PORT, "targetPort": TARGET_PORT}],
            "selector": {"app": name},
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster"
        },
        "status": {"loadBalancer": {}}
    })
}

/// Service `i`'s EndpointSlice with these endpoint addresses (all ready).
pub fn slice(i: usize, addresses: &[Ipv4Addr]) -> Value {
    let (ns, name) = service_name(i);
    let endpoints: Vec<Value> = addresses
        .iter()
        .enumerate()
        .map(|(j, a)| {
            json!({
                "addresses": [a.to_string()],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": format!("node-{}", (i + j) % 20),
                "targetRef": {"kind": "Pod", "namespace": ns, "name": format!("{name}-{j}"), "uid": format!("0b5e{i:08x}{j:04x}")}
            })
        })
        .collect();
    let mut labels = chart_labels(i, &name);
    labels.insert("kubernetes.io/service-name".into(), json!(name));
    labels.insert(
        "endpointslice.kubernetes.io/managed-by".into(),
        json!("endpointslice-controller.k8s.io"),
    );
    json!({
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": metadata(
            &ns,
            &format!("{name}-abcde"),
            Value::Object(labels),
            json!({"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-30T12:00:00Z"}),
        ),
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": TARGET_PORT}]
    })
}

/// Service `i`'s endpoint addresses as first created.
pub fn addresses(i: usize) -> Vec<Ipv4Addr> {
    (0..ENDPOINTS).map(|j| endpoint_ip(i, j)).collect()
}

/// The Node edgenetd runs as.
pub fn node() -> Value {
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": NODE, "labels": {
            "kubernetes.io/hostname": NODE,
            "kubernetes.io/arch": "arm64",
            "kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "arm64",
            "beta.kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "edge-router",
            "topology.kubernetes.io/region": "eu-west",
            "topology.kubernetes.io/zone": "eu-west-a",
            "failure-domain.beta.kubernetes.io/region": "eu-west",
            "failure-domain.beta.kubernetes.io/zone": "eu-west-a",
            "node-role.kubernetes.io/edge": "",
            "edgenetd.io/router": "true"
        }, "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"
        }},
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": NODE_IP.to_string()}, {"type": "Hostname", "address": NODE}]}
    })
}

/// Every object, as `(resource, object)`: the services, their slices, the node.
pub fn cluster() -> Vec<(&'static str, Value)> {
    let mut out = Vec::with_capacity(2 * services() + 1);
    for i in 0..services() {
        out.push(("services", service(i)));
        out.push(("endpointslices", slice(i, &addresses(i))));
    }
    out.push(("nodes", node()));
    out
}
