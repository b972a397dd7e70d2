//! Each object read field by field straight out of its JSON text (the conventions:
//! `client::json`): a field the struct does not keep is skipped, never built.

use super::*;
use crate::kubernetes::client::json::{self, Decode, Reader};
use crate::kubernetes::translate::services::{
    HEADLESS_LABEL, SERVICE_NAME_LABEL, SERVICE_PROXY_NAME_LABEL,
};

/// The labels of a Service the translation reads (the ones that make kube-proxy leave it
/// out); a chart's dozen others are read by nothing.
pub(super) fn service_label(key: &str) -> bool {
    key == SERVICE_PROXY_NAME_LABEL || key == HEADLESS_LABEL
}

/// The labels of an EndpointSlice the translation reads: its Service, and the ones that
/// leave it out as its Service would be.
pub(super) fn endpoint_slice_label(key: &str) -> bool {
    key == SERVICE_NAME_LABEL || service_label(key)
}

/// No label: kinds whose labels only the API server's `labelSelector` reads.
pub(super) fn no_label(_: &str) -> bool {
    false
}

/// `Decode` for a struct whose fields are read by the match arms given: `key => place =
/// reader call`; every other key is skipped.
macro_rules! decode_fields {
    ($t:ty, |$r:ident, $v:ident| { $($key:literal => $body:expr,)* }) => {
        impl Decode for $t {
            fn decode($r: &mut Reader<'_>) -> json::Result<$t> {
                let mut $v = <$t>::default();
                $r.object(&mut |$r, key| {
                    match key {
                        $($key => $body,)*
                        _ => $r.skip()?,
                    }
                    Ok(())
                })?;
                Ok($v)
            }
        }
    };
}

decode_fields!(Service, |r, s| {
    "metadata" => s.metadata = ObjectMeta::decode_keeping(r, service_label)?,
    "spec" => s.spec = ServiceSpec::decode(r)?,
    "status" => s.status = ServiceStatus::decode(r)?,
});

decode_fields!(ServiceSpec, |r, s| {
    "type" => s.type_ = r.opt_str()?,
    "clusterIP" => s.cluster_ip = r.opt_str()?,
    "clusterIPs" => s.cluster_ips = r.strings()?,
    "externalIPs" => s.external_ips = r.strings()?,
    "ports" => s.ports = r.objects()?,
    "sessionAffinity" => s.session_affinity = r.opt_str()?,
    "sessionAffinityConfig" => s.session_affinity_config = opt_object(r)?,
    "externalTrafficPolicy" => s.external_traffic_policy = r.opt_str()?,
    "internalTrafficPolicy" => s.internal_traffic_policy = r.opt_str()?,
    "healthCheckNodePort" => s.health_check_node_port = r.opt_i32()?,
    "loadBalancerSourceRanges" => s.load_balancer_source_ranges = r.strings()?,
});

decode_fields!(SessionAffinityConfig, |r, c| {
    "clientIP" => c.client_ip = opt_object(r)?,
});

decode_fields!(ClientIpConfig, |r, c| {
    "timeoutSeconds" => c.timeout_seconds = r.opt_int()?,
});

decode_fields!(ServicePort, |r, p| {
    "name" => p.name = r.opt_str()?,
    "protocol" => p.protocol = r.opt_str()?,
    "port" => p.port = r.i32()?,
    "nodePort" => p.node_port = r.opt_i32()?,
});

decode_fields!(ServiceStatus, |r, s| {
    "loadBalancer" => s.load_balancer = LoadBalancerStatus::decode(r)?,
});

decode_fields!(LoadBalancerStatus, |r, s| {
    "ingress" => s.ingress = r.objects()?,
});

decode_fields!(LoadBalancerIngress, |r, i| {
    "ip" => i.ip = r.opt_str()?,
    "ipMode" => i.ip_mode = r.opt_str()?,
});

decode_fields!(EndpointSlice, |r, s| {
    "metadata" => s.metadata = ObjectMeta::decode_keeping(r, endpoint_slice_label)?,
    "addressType" => s.address_type = r.str()?,
    "endpoints" => s.endpoints = r.objects()?,
    "ports" => s.ports = r.objects()?,
});

decode_fields!(Endpoint, |r, e| {
    "addresses" => e.addresses = r.strings()?,
    "conditions" => e.conditions = EndpointConditions::decode(r)?,
    "nodeName" => e.node_name = r.opt_str()?,
    "hints" => r.object(&mut |r, key| {
        match key {
            "forZones" => e.zone_hints = r.list(name)?,
            "forNodes" => e.node_hints = r.list(name)?,
            _ => r.skip()?,
        }
        Ok(())
    })?,
});

/// A hint's `name` (`{"name": …}`).
fn name(r: &mut Reader<'_>) -> json::Result<String> {
    let mut name = String::new();
    r.object(&mut |r, key| match key {
        "name" => {
            name = r.str()?;
            Ok(())
        }
        _ => r.skip(),
    })?;
    Ok(name)
}

/// An object field that stays `None` when `null` (present, even empty, is `Some`).
fn opt_object<T: Decode>(r: &mut Reader<'_>) -> json::Result<Option<T>> {
    if r.null()? {
        return Ok(None);
    }
    T::decode(r).map(Some)
}

decode_fields!(EndpointConditions, |r, c| {
    "ready" => c.ready = r.opt_bool()?,
    "serving" => c.serving = r.opt_bool()?,
    "terminating" => c.terminating = r.opt_bool()?,
});

decode_fields!(EndpointPort, |r, p| {
    "name" => p.name = r.opt_str()?,
    "protocol" => p.protocol = r.opt_str()?,
    "port" => p.port = r.opt_i32()?,
});

decode_fields!(Node, |r, n| {
    "metadata" => n.metadata = ObjectMeta::decode(r)?,
    "spec" => n.spec = NodeSpec::decode(r)?,
    "status" => n.status = NodeStatus::decode(r)?,
});

decode_fields!(NodeSpec, |r, s| {
    "podCIDR" => s.pod_cidr = r.opt_str()?,
    "podCIDRs" => s.pod_cidrs = r.strings()?,
});

decode_fields!(NodeStatus, |r, s| {
    "addresses" => s.addresses = r.objects()?,
});

decode_fields!(NodeAddress, |r, a| {
    "type" => a.type_ = r.str()?,
    "address" => a.address = r.str()?,
});

decode_fields!(ServiceCidr, |r, c| {
    "metadata" => c.metadata = ObjectMeta::decode_keeping(r, no_label)?,
    "spec" => r.object(&mut |r, key| {
        match key {
            "cidrs" => c.cidrs = r.strings()?,
            _ => r.skip()?,
        }
        Ok(())
    })?,
});

decode_fields!(NetworkPolicy, |r, p| {
    "metadata" => p.metadata = ObjectMeta::decode_keeping(r, no_label)?,
    "spec" => p.spec = NetworkPolicySpec::decode(r)?,
});

decode_fields!(NetworkPolicySpec, |r, s| {
    "podSelector" => s.pod_selector = LabelSelector::decode(r)?,
    "policyTypes" => s.policy_types = r.opt_strings()?,
    "ingress" => s.ingress = r.objects()?,
    "egress" => s.egress = r.objects()?,
});

decode_fields!(NetworkPolicyIngressRule, |r, rule| {
    "from" => rule.from = r.objects()?,
    "ports" => rule.ports = r.objects()?,
});

decode_fields!(NetworkPolicyEgressRule, |r, rule| {
    "to" => rule.to = r.objects()?,
    "ports" => rule.ports = r.objects()?,
});

decode_fields!(NetworkPolicyPeer, |r, p| {
    "podSelector" => p.pod_selector = opt_object(r)?,
    "namespaceSelector" => p.namespace_selector = opt_object(r)?,
    "ipBlock" => p.ip_block = opt_object(r)?,
});

decode_fields!(IpBlock, |r, b| {
    "cidr" => b.cidr = r.str()?,
    "except" => b.except = r.strings()?,
});

decode_fields!(NetworkPolicyPort, |r, p| {
    "protocol" => p.protocol = r.opt_str()?,
    "port" => p.port = int_or_string(r)?,
    "endPort" => p.end_port = r.opt_i32()?,
});

decode_fields!(ClusterNetworkPolicy, |r, p| {
    "metadata" => p.metadata = ObjectMeta::decode_keeping(r, no_label)?,
    "spec" => p.spec = ClusterNetworkPolicySpec::decode(r)?,
});

decode_fields!(ClusterNetworkPolicySpec, |r, s| {
    "tier" => s.tier = r.str()?,
    "priority" => s.priority = r.opt_int()?,
    "subject" => s.subject = ClusterNetworkPolicySubject::decode(r)?,
    "ingress" => s.ingress = r.objects()?,
    "egress" => s.egress = r.objects()?,
});

decode_fields!(ClusterNetworkPolicySubject, |r, s| {
    "namespaces" => s.namespaces = opt_object(r)?,
    "pods" => s.pods = opt_object(r)?,
});

decode_fields!(NamespacedPod, |r, p| {
    "namespaceSelector" => p.namespace_selector = LabelSelector::decode(r)?,
    "podSelector" => p.pod_selector = LabelSelector::decode(r)?,
});

decode_fields!(ClusterNetworkPolicyRule, |r, rule| {
    "name" => rule.name = r.opt_str()?,
    "action" => rule.action = r.str()?,
    "from" => rule.peers = r.objects()?,
    "to" => rule.peers = r.objects()?,
    "protocols" => rule.protocols = r.objects()?,
});

// Peers and protocols note the fields they do not know: a newer API's peer type, read as
// nothing, would make a `Deny` rule match less; the translation fails such a rule closed.
impl Decode for ClusterNetworkPolicyPeer {
    fn decode(r: &mut Reader<'_>) -> json::Result<ClusterNetworkPolicyPeer> {
        let mut p = ClusterNetworkPolicyPeer::default();
        r.object(&mut |r, key| {
            match key {
                "namespaces" => p.namespaces = opt_object(r)?,
                "pods" => p.pods = opt_object(r)?,
                "networks" => p.networks = r.strings()?,
                "nodes" => p.nodes = opt_object(r)?,
                "domainNames" => p.domain_names = r.strings()?,
                other => {
                    if !r.null()? {
                        p.unknown.push(other.to_string());
                        r.skip()?;
                    }
                }
            }
            Ok(())
        })?;
        Ok(p)
    }
}

impl Decode for ClusterNetworkPolicyProtocol {
    fn decode(r: &mut Reader<'_>) -> json::Result<ClusterNetworkPolicyProtocol> {
        let mut p = ClusterNetworkPolicyProtocol::default();
        r.object(&mut |r, key| {
            match key {
                "tcp" => p.tcp = opt_object(r)?,
                "udp" => p.udp = opt_object(r)?,
                "sctp" => p.sctp = opt_object(r)?,
                "destinationNamedPort" => p.destination_named_port = r.opt_str()?,
                other => {
                    if !r.null()? {
                        p.unknown.push(other.to_string());
                        r.skip()?;
                    }
                }
            }
            Ok(())
        })?;
        Ok(p)
    }
}

decode_fields!(ProtocolPort, |r, p| {
    "destinationPort" => p.destination_port = opt_object(r)?,
});

impl Decode for PortOrRange {
    fn decode(r: &mut Reader<'_>) -> json::Result<PortOrRange> {
        let mut p = PortOrRange::default();
        r.object(&mut |r, key| {
            match key {
                "number" => p.number = r.opt_int()?,
                "range" => {
                    if !r.null()? {
                        let (mut start, mut end) = (0, 0);
                        r.object(&mut |r, key| {
                            match key {
                                "start" => start = r.opt_int()?.unwrap_or(0),
                                "end" => end = r.opt_int()?.unwrap_or(0),
                                _ => r.skip()?,
                            }
                            Ok(())
                        })?;
                        p.range = Some((start, end));
                    }
                }
                _ => r.skip()?,
            }
            Ok(())
        })?;
        Ok(p)
    }
}

/// A policy port: a number or a named container port; `None` for `null`.
fn int_or_string(r: &mut Reader<'_>) -> json::Result<Option<IntOrString>> {
    if r.at_string() {
        return Ok(r.opt_str()?.map(IntOrString::String));
    }
    match r.opt_int() {
        Ok(n) => n
            .map(|n| {
                i32::try_from(n)
                    .map(IntOrString::Int)
                    .map_err(|_| format!("{n} is not a port"))
            })
            .transpose(),
        Err(e) if e.starts_with("expected") => Err("expected a number or a name".into()),
        Err(e) => Err(e),
    }
}

decode_fields!(LabelSelector, |r, s| {
    "matchLabels" => s.match_labels = r.string_map(|_| true)?,
    "matchExpressions" => s.match_expressions = r.objects()?,
});

decode_fields!(LabelSelectorRequirement, |r, e| {
    "key" => e.key = r.str()?,
    "operator" => e.operator = r.str()?,
    "values" => e.values = r.strings()?,
});

decode_fields!(Pod, |r, p| {
    "metadata" => p.metadata = ObjectMeta::decode(r)?,
    "spec" => p.spec = PodSpec::decode(r)?,
    "status" => p.status = PodStatus::decode(r)?,
});

decode_fields!(PodSpec, |r, s| {
    "nodeName" => s.node_name = r.opt_str()?,
    "hostNetwork" => s.host_network = r.opt_bool()?.unwrap_or(false),
    "containers" => s.containers = r.objects()?,
});

decode_fields!(Container, |r, c| {
    "ports" => c.ports = r.objects()?,
});

decode_fields!(ContainerPort, |r, p| {
    "name" => p.name = r.opt_str()?,
    "containerPort" => p.container_port = r.i32()?,
    "protocol" => p.protocol = r.opt_str()?,
});

decode_fields!(PodStatus, |r, s| {
    "phase" => s.phase = r.opt_str()?,
    "podIPs" => s.pod_ips = r.objects()?,
    "podIP" => s.pod_ip = r.opt_str()?,
});

decode_fields!(PodIp, |r, ip| {
    "ip" => ip.ip = r.str()?,
});

decode_fields!(Namespace, |r, n| {
    "metadata" => n.metadata = ObjectMeta::decode(r)?,
});

decode_fields!(ConfigMap, |r, c| {
    "metadata" => c.metadata = ObjectMeta::decode_keeping(r, no_label)?,
    "data" => c.data = r.string_map(|_| true)?,
});
