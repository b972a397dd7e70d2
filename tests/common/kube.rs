//! The daemon fed by the fake API server: the objects the tests apply (Services,
//! EndpointSlices, Nodes as the API writes them) and the `[kubernetes]` section that points
//! the daemon at the fake.

use serde_json::{Value, json};

use super::fake_apiserver::{FakeApiServer, Request};
use super::scratch::ScratchDir;

/// The Node name the daemon runs as.
pub const NODE: &str = "edge-1";

/// The `[kubernetes]` section for `fake` (client certificate auth), caching in `cache`.
pub fn section(fake: &FakeApiServer, cache: &ScratchDir, feeds: &[&str]) -> String {
    let (cert, key) = fake.client_cert_files();
    let feeds: Vec<String> = feeds.iter().map(|f| format!("{f:?}")).collect();
    format!(
        "[kubernetes]\nserver = {:?}\nca_file = {:?}\nclient_cert = {:?}\nclient_key = {:?}\n\
         node_name = {NODE:?}\nfeeds = [{}]\ncache_file = {:?}\n",
        fake.url(),
        fake.ca_file().display().to_string(),
        cert.display().to_string(),
        key.display().to_string(),
        feeds.join(", "),
        cache.join("cluster.json").display().to_string(),
    )
}

/// A ClusterIP Service `default/<name>` on `ip`, one TCP port `http` `port` -> 8080.
pub fn service(name: &str, ip: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
            "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": 8080}]
        }
    })
}

/// One endpoint: its address and conditions (`ready`, `serving`, `terminating`).
pub fn endpoint(ip: &str, ready: bool, serving: bool, terminating: bool) -> Value {
    json!({
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "nodeName": "worker-2"
    })
}

/// A ready endpoint.
pub fn ready(ip: &str) -> Value {
    endpoint(ip, true, true, false)
}

/// The EndpointSlice `default/<service>-1` of `service`, port `http` 8080.
pub fn slice(service: &str, endpoints: &[Value]) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{service}-1"), "namespace": "default",
            "labels": {"kubernetes.io/service-name": service}
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]
    })
}

/// A Node with an InternalIP and a pod CIDR.
pub fn node(name: &str, internal_ip: &str, pod_cidr: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
        "status": {"addresses": [
            {"type": "InternalIP", "address": internal_ip},
            {"type": "Hostname", "address": name}
        ]}
    })
}

/// The list requests (paged, or streamed: a watch with `sendInitialEvents`) the fake
/// answered for `path`.
pub fn lists(fake: &FakeApiServer, path: &str) -> Vec<Request> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == path && r.is_list())
        .collect()
}

/// The watch requests (a streamed list included: it goes on as the watch) the fake answered
/// 200 for `path`.
pub fn watches(fake: &FakeApiServer, path: &str) -> Vec<Request> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == path && (r.is_watch() || r.is_streamed_list()) && r.code == 200)
        .collect()
}

/// A running Pod `<namespace>/<name>` on `node` with `ip` and `labels`.
pub fn pod(namespace: &str, name: &str, node: &str, ip: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "app",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    })
}

/// A Namespace with the label `name=<name>` (as `kubernetes.io/metadata.name` would be).
pub fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}
    })
}

/// A NetworkPolicy in `namespace` selecting pods with `app=<app>`, admitting TCP 8080 from
/// the pods of the namespace `from_namespace` only.
pub fn admit_namespace(namespace: &str, app: &str, from_namespace: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": format!("{app}-from-{from_namespace}"), "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": {"app": app}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels":
                    {"kubernetes.io/metadata.name": from_namespace}}}],
                "ports": [{"protocol": "TCP", "port": 8080}]
            }]
        }
    })
}
