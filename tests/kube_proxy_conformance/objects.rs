//! Services, EndpointSlices and this node's Node as the API server writes them (defaults
//! filled in: `sessionAffinity: None`, `ipFamilies`, `ipFamilyPolicy`, both traffic policies,
//! `allocateLoadBalancerNodePorts`, empty `status.loadBalancer`), built to mirror upstream's
//! `makeTestService` and `makeTestEndpointSlice` calls field by field.

use serde_json::{Value, json};

use crate::common::kube::NODE;

use super::lab::{NODE_IP, NODE_IP6};

/// This node's Node: InternalIPs 192.168.0.2 and 2001:db8::1, zone `zone-a`.
pub fn this_node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "uid": "uid-node-edge-1", "labels": {
            "kubernetes.io/hostname": NODE,
            "topology.kubernetes.io/zone": "zone-a"
        }},
        "spec": {"podCIDR": "10.180.0.0/24", "podCIDRs": ["10.180.0.0/24", "fd00:10:180::/64"]},
        "status": {"addresses": [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "InternalIP", "address": NODE_IP6},
            {"type": "Hostname", "address": NODE}
        ]}
    })
}

/// A Service under construction.
#[derive(Debug, Clone)]
pub struct Svc(Value);

impl Svc {
    /// `namespace/name` of `type_` (`ClusterIP`, `NodePort`, `LoadBalancer`) on `cluster_ips`
    /// (one per family; the first is `clusterIP`), no ports yet.
    pub fn new(namespace: &str, name: &str, type_: &str, cluster_ips: &[&str]) -> Svc {
        let families: Vec<&str> = cluster_ips
            .iter()
            .map(|ip| if ip.contains(':') { "IPv6" } else { "IPv4" })
            .collect();
        let policy = if cluster_ips.len() > 1 {
            "RequireDualStack"
        } else {
            "SingleStack"
        };
        let mut spec = json!({
            "type": type_,
            "clusterIP": cluster_ips[0],
            "clusterIPs": cluster_ips,
            "ipFamilies": families,
            "ipFamilyPolicy": policy,
            "selector": {"app": name},
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ports": []
        });
        if type_ != "ClusterIP" {
            spec["externalTrafficPolicy"] = json!("Cluster");
        }
        if type_ == "LoadBalancer" {
            spec["allocateLoadBalancerNodePorts"] = json!(true);
        }
        Svc(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": name, "namespace": namespace,
                "uid": format!("uid-svc-{namespace}-{name}"),
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": name}
            },
            "spec": spec,
            "status": {"loadBalancer": {}}
        }))
    }

    /// Adds a port; `node_port` 0 for none. The target port is what endpoints name; kept for
    /// the object's fidelity (kube-proxy takes the number from the EndpointSlice).
    pub fn port(
        mut self,
        name: &str,
        protocol: &str,
        port: u16,
        target: u16,
        node_port: u16,
    ) -> Svc {
        let mut p = json!({"name": name, "protocol": protocol, "port": port, "targetPort": target});
        if node_port != 0 {
            p["nodePort"] = json!(node_port);
        }
        self.0["spec"]["ports"].as_array_mut().unwrap().push(p);
        self
    }

    /// `status.loadBalancer.ingress`: one `{ip}` each.
    pub fn lb(mut self, ips: &[&str]) -> Svc {
        let ingress: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        self.0["status"]["loadBalancer"] = json!({ "ingress": ingress });
        self
    }

    /// `status.loadBalancer.ingress` with an `ipMode`.
    pub fn lb_mode(mut self, ip: &str, mode: &str) -> Svc {
        self.0["status"]["loadBalancer"] = json!({"ingress": [{"ip": ip, "ipMode": mode}]});
        self
    }

    /// `spec.externalIPs`.
    pub fn external_ips(mut self, ips: &[&str]) -> Svc {
        self.0["spec"]["externalIPs"] = json!(ips);
        self
    }

    /// `externalTrafficPolicy: Local` with its `healthCheckNodePort`.
    pub fn etp_local(mut self, health_check_node_port: u16) -> Svc {
        self.0["spec"]["externalTrafficPolicy"] = json!("Local");
        self.0["spec"]["healthCheckNodePort"] = json!(health_check_node_port);
        self
    }

    /// `healthCheckNodePort` alone (upstream sets it on Cluster services too).
    pub fn health_check_node_port(mut self, port: u16) -> Svc {
        self.0["spec"]["healthCheckNodePort"] = json!(port);
        self
    }

    /// `internalTrafficPolicy: Local`.
    pub fn itp_local(mut self) -> Svc {
        self.0["spec"]["internalTrafficPolicy"] = json!("Local");
        self
    }

    /// `spec.loadBalancerSourceRanges`, written as given (upstream has stray whitespace).
    pub fn source_ranges(mut self, ranges: &[&str]) -> Svc {
        self.0["spec"]["loadBalancerSourceRanges"] = json!(ranges);
        self
    }

    /// `sessionAffinity: ClientIP` with `timeoutSeconds`.
    pub fn client_ip_affinity(mut self, timeout_seconds: u32) -> Svc {
        self.0["spec"]["sessionAffinity"] = json!("ClientIP");
        self.0["spec"]["sessionAffinityConfig"] =
            json!({"clientIP": {"timeoutSeconds": timeout_seconds}});
        self
    }

    /// A label on the Service.
    pub fn label(mut self, key: &str, value: &str) -> Svc {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    /// `spec.trafficDistribution`.
    pub fn traffic_distribution(mut self, value: &str) -> Svc {
        self.0["spec"]["trafficDistribution"] = json!(value);
        self
    }

    /// The object.
    pub fn json(&self) -> Value {
        self.0.clone()
    }
}

/// One endpoint of a slice.
#[derive(Debug, Clone)]
pub struct Ep(Value);

impl Ep {
    /// An endpoint at `ip` with no conditions written (the API reads them as ready) and no
    /// `nodeName` (upstream's non-local endpoints).
    pub fn new(ip: &str) -> Ep {
        Ep(json!({"addresses": [ip], "conditions": {}}))
    }

    /// On this node.
    pub fn local(ip: &str) -> Ep {
        Ep::new(ip).node(NODE)
    }

    /// `nodeName`.
    pub fn node(mut self, name: &str) -> Ep {
        self.0["nodeName"] = json!(name);
        self
    }

    /// `conditions` (`ready`, `serving`, `terminating`), all three written.
    pub fn conditions(mut self, ready: bool, serving: bool, terminating: bool) -> Ep {
        self.0["conditions"] =
            json!({"ready": ready, "serving": serving, "terminating": terminating});
        self
    }

    /// `conditions.ready` alone.
    pub fn ready(mut self, ready: bool) -> Ep {
        self.0["conditions"] = json!({ "ready": ready });
        self
    }

    /// `zone` and `hints.forZones`.
    pub fn zone_hints(mut self, zone: &str, for_zones: &[&str]) -> Ep {
        self.0["zone"] = json!(zone);
        let zones: Vec<Value> = for_zones.iter().map(|z| json!({ "name": z })).collect();
        self.0["hints"] = json!({ "forZones": zones });
        self
    }
}

/// An EndpointSlice `namespace/<service>-<n>` of `service` with `endpoints` and `ports`
/// (`(name, protocol, port)`; name `""` for an unnamed port); its address type from the
/// first endpoint.
pub fn slice(
    namespace: &str,
    service: &str,
    n: u32,
    endpoints: &[Ep],
    ports: &[(&str, &str, u16)],
) -> Value {
    let v6 = endpoints
        .first()
        .and_then(|e| e.0["addresses"][0].as_str())
        .is_some_and(|a| a.contains(':'));
    slice_typed(
        namespace,
        service,
        n,
        if v6 { "IPv6" } else { "IPv4" },
        endpoints,
        ports,
    )
}

/// Like [`slice`] with the address type given (for an empty slice).
pub fn slice_typed(
    namespace: &str,
    service: &str,
    n: u32,
    address_type: &str,
    endpoints: &[Ep],
    ports: &[(&str, &str, u16)],
) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(name, protocol, port)| json!({"name": name, "protocol": protocol, "port": port}))
        .collect();
    let endpoints: Vec<Value> = endpoints.iter().map(|e| e.0.clone()).collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{service}-{n}"), "namespace": namespace,
            "uid": format!("uid-eps-{namespace}-{service}-{n}"),
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"
            },
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": service,
                "uid": format!("uid-svc-{namespace}-{service}"), "controller": true,
                "blockOwnerDeletion": true}]
        },
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": ports
    })
}
