//! Each object read out of its parsed JSON, field by field (the conventions: `client::json`).

use serde_json::Value;

use super::*;
use crate::kubernetes::client::json::{self, Fields};

impl Service {
    /// Reads a Service.
    pub fn from_fields(mut f: Fields) -> json::Result<Service> {
        Ok(Service {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            spec: f.with("spec", ServiceSpec::from_fields)?,
            status: ServiceStatus {
                load_balancer: LoadBalancerStatus {
                    ingress: f
                        .obj("status")?
                        .obj("loadBalancer")?
                        .objects("ingress", LoadBalancerIngress::from_fields)?,
                },
            },
        })
    }
}

impl ServiceSpec {
    /// Reads `Service.spec`.
    fn from_fields(mut f: Fields) -> json::Result<ServiceSpec> {
        let timeout_seconds = match f.opt_obj("sessionAffinityConfig")? {
            None => None,
            Some(mut config) => Some(SessionAffinityConfig {
                client_ip: match config.opt_obj("clientIP")? {
                    None => None,
                    Some(mut ip) => Some(ClientIpConfig {
                        timeout_seconds: ip.opt_int("timeoutSeconds")?,
                    }),
                },
            }),
        };
        Ok(ServiceSpec {
            type_: f.opt_str("type")?,
            cluster_ip: f.opt_str("clusterIP")?,
            cluster_ips: f.strings("clusterIPs")?,
            external_ips: f.strings("externalIPs")?,
            ports: f.objects("ports", ServicePort::from_fields)?,
            session_affinity: f.opt_str("sessionAffinity")?,
            session_affinity_config: timeout_seconds,
            external_traffic_policy: f.opt_str("externalTrafficPolicy")?,
            internal_traffic_policy: f.opt_str("internalTrafficPolicy")?,
            health_check_node_port: f.opt_i32("healthCheckNodePort")?,
            load_balancer_source_ranges: f.strings("loadBalancerSourceRanges")?,
        })
    }
}

impl ServicePort {
    /// Reads a Service port.
    fn from_fields(mut f: Fields) -> json::Result<ServicePort> {
        Ok(ServicePort {
            name: f.opt_str("name")?,
            protocol: f.opt_str("protocol")?,
            port: f.i32("port")?,
            node_port: f.opt_i32("nodePort")?,
        })
    }
}

impl LoadBalancerIngress {
    /// Reads a load balancer address.
    fn from_fields(mut f: Fields) -> json::Result<LoadBalancerIngress> {
        Ok(LoadBalancerIngress {
            ip: f.opt_str("ip")?,
            ip_mode: f.opt_str("ipMode")?,
        })
    }
}

impl EndpointSlice {
    /// Reads an EndpointSlice.
    pub fn from_fields(mut f: Fields) -> json::Result<EndpointSlice> {
        Ok(EndpointSlice {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            address_type: f.str("addressType")?,
            endpoints: f.objects("endpoints", Endpoint::from_fields)?,
            ports: f.objects("ports", EndpointPort::from_fields)?,
        })
    }
}

impl Endpoint {
    /// Reads an endpoint of a slice.
    fn from_fields(mut f: Fields) -> json::Result<Endpoint> {
        let mut c = f.obj("conditions")?;
        let mut hints = f.obj("hints")?;
        let name = |mut h: Fields| h.str("name");
        Ok(Endpoint {
            zone_hints: hints.objects("forZones", name)?,
            node_hints: hints.objects("forNodes", name)?,
            addresses: f.strings("addresses")?,
            conditions: EndpointConditions {
                ready: c.opt_bool("ready")?,
                serving: c.opt_bool("serving")?,
                terminating: c.opt_bool("terminating")?,
            },
            node_name: f.opt_str("nodeName")?,
        })
    }
}

impl EndpointPort {
    /// Reads a port of a slice.
    fn from_fields(mut f: Fields) -> json::Result<EndpointPort> {
        Ok(EndpointPort {
            name: f.opt_str("name")?,
            protocol: f.opt_str("protocol")?,
            port: f.opt_i32("port")?,
        })
    }
}

impl Node {
    /// Reads a Node.
    pub fn from_fields(mut f: Fields) -> json::Result<Node> {
        let mut spec = f.obj("spec")?;
        Ok(Node {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            spec: NodeSpec {
                pod_cidr: spec.opt_str("podCIDR")?,
                pod_cidrs: spec.strings("podCIDRs")?,
            },
            status: NodeStatus {
                addresses: f
                    .obj("status")?
                    .objects("addresses", NodeAddress::from_fields)?,
            },
        })
    }
}

impl NodeAddress {
    /// Reads an address of a Node.
    fn from_fields(mut f: Fields) -> json::Result<NodeAddress> {
        Ok(NodeAddress {
            type_: f.str("type")?,
            address: f.str("address")?,
        })
    }
}

impl ServiceCidr {
    /// Reads a ServiceCIDR.
    pub fn from_fields(mut f: Fields) -> json::Result<ServiceCidr> {
        Ok(ServiceCidr {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            cidrs: f.obj("spec")?.strings("cidrs")?,
        })
    }
}

impl NetworkPolicy {
    /// Reads a NetworkPolicy.
    pub fn from_fields(mut f: Fields) -> json::Result<NetworkPolicy> {
        let mut spec = f.obj("spec")?;
        let policy_types = spec.opt_strings("policyTypes")?;
        Ok(NetworkPolicy {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            spec: NetworkPolicySpec {
                pod_selector: spec.with("podSelector", LabelSelector::from_fields)?,
                policy_types,
                ingress: spec.objects("ingress", |mut r| {
                    Ok(NetworkPolicyIngressRule {
                        from: r.objects("from", NetworkPolicyPeer::from_fields)?,
                        ports: r.objects("ports", NetworkPolicyPort::from_fields)?,
                    })
                })?,
                egress: spec.objects("egress", |mut r| {
                    Ok(NetworkPolicyEgressRule {
                        to: r.objects("to", NetworkPolicyPeer::from_fields)?,
                        ports: r.objects("ports", NetworkPolicyPort::from_fields)?,
                    })
                })?,
            },
        })
    }
}

impl NetworkPolicyPeer {
    /// Reads a policy peer.
    fn from_fields(mut f: Fields) -> json::Result<NetworkPolicyPeer> {
        Ok(NetworkPolicyPeer {
            pod_selector: f.opt_with("podSelector", LabelSelector::from_fields)?,
            namespace_selector: f.opt_with("namespaceSelector", LabelSelector::from_fields)?,
            ip_block: f.opt_with("ipBlock", |mut b| {
                Ok(IpBlock {
                    cidr: b.str("cidr")?,
                    except: b.strings("except")?,
                })
            })?,
        })
    }
}

impl NetworkPolicyPort {
    /// Reads a port of a policy rule.
    fn from_fields(mut f: Fields) -> json::Result<NetworkPolicyPort> {
        let port = match f.take("port") {
            None => None,
            Some(Value::String(name)) => Some(IntOrString::String(name)),
            Some(Value::Number(n)) => Some(IntOrString::Int(
                n.as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| format!("port: {n} is not a port"))?,
            )),
            Some(_) => return Err("port: expected a number or a name".into()),
        };
        Ok(NetworkPolicyPort {
            protocol: f.opt_str("protocol")?,
            port,
            end_port: f.opt_i32("endPort")?,
        })
    }
}

impl LabelSelector {
    /// Reads a label selector.
    fn from_fields(mut f: Fields) -> json::Result<LabelSelector> {
        Ok(LabelSelector {
            match_labels: f.string_map("matchLabels", |_| true)?,
            match_expressions: f.objects("matchExpressions", |mut e| {
                Ok(LabelSelectorRequirement {
                    key: e.str("key")?,
                    operator: e.str("operator")?,
                    values: e.strings("values")?,
                })
            })?,
        })
    }
}

impl Pod {
    /// Reads a Pod.
    pub fn from_fields(mut f: Fields) -> json::Result<Pod> {
        let mut spec = f.obj("spec")?;
        let mut status = f.obj("status")?;
        Ok(Pod {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
            spec: PodSpec {
                node_name: spec.opt_str("nodeName")?,
                host_network: spec.opt_bool("hostNetwork")?.unwrap_or(false),
                containers: spec.objects("containers", |mut c| {
                    Ok(Container {
                        ports: c.objects("ports", |mut p| {
                            Ok(ContainerPort {
                                name: p.opt_str("name")?,
                                container_port: p.i32("containerPort")?,
                                protocol: p.opt_str("protocol")?,
                            })
                        })?,
                    })
                })?,
            },
            status: PodStatus {
                phase: status.opt_str("phase")?,
                pod_ips: status.objects("podIPs", |mut ip| Ok(PodIp { ip: ip.str("ip")? }))?,
                pod_ip: status.opt_str("podIP")?,
            },
        })
    }
}

impl Namespace {
    /// Reads a Namespace.
    pub fn from_fields(mut f: Fields) -> json::Result<Namespace> {
        Ok(Namespace {
            metadata: f.with("metadata", ObjectMeta::from_fields)?,
        })
    }
}
