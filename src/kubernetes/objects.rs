//! The Kubernetes API objects edgenetd reads, as lean structs: only the fields it uses, read
//! field by field straight out of each object's text (`decode`), everything else skipped (a big
//! list is kept in a fraction of the memory the full types would take). Field names follow the
//! API's JSON exactly.
//!
//! The generic shapes (`metadata`, list pages, watch events, `Status`) are the client's
//! ([`super::client::meta`]), re-exported here; every kind implements [`HasMeta`] so a
//! reflector can keep it. The same conventions hold: unknown fields are ignored, and a missing
//! field and an explicit `null` both read as the default (an EndpointSlice's `ports` and
//! `endpoints` have no `omitempty`).

use std::collections::BTreeMap;

use super::client::meta::deserialize_by_decode;
pub use super::client::meta::{
    Bookmark, HasMeta, KEPT_ANNOTATION_PREFIX, List, ListMeta, OWN_ANNOTATION_PREFIX, ObjectMeta,
    Status, WatchEvent,
};

/// Every kind the reflectors keep (a kind added below gets a line here).
macro_rules! has_meta {
    ($($kind:ty),*) => {$(
        impl HasMeta for $kind {
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    )*};
}

has_meta!(
    Service,
    EndpointSlice,
    Node,
    NetworkPolicy,
    ClusterNetworkPolicy,
    Pod,
    Namespace,
    ServiceCidr,
    ConfigMap
);
deserialize_by_decode!(
    Service,
    EndpointSlice,
    Node,
    NetworkPolicy,
    ClusterNetworkPolicy,
    Pod,
    Namespace,
    ServiceCidr
);

/// A Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// What the service is.
    pub spec: ServiceSpec,
    /// Where a load balancer put it.
    pub status: ServiceStatus,
}

/// `Service.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceSpec {
    /// `ClusterIP` (the default), `NodePort`, `LoadBalancer` or `ExternalName`.
    pub type_: Option<String>,
    /// The primary cluster IP, or `None` for headless services.
    pub cluster_ip: Option<String>,
    /// The cluster IPs, one per family (dual-stack); the first equals `clusterIP`.
    pub cluster_ips: Vec<String>,
    /// Addresses outside the cluster that route to the service.
    pub external_ips: Vec<String>,
    /// The ports.
    pub ports: Vec<ServicePort>,
    /// `None` or `ClientIP`.
    pub session_affinity: Option<String>,
    /// How long `ClientIP` affinity remembers a client.
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// `Cluster` (default) or `Local` for external addresses and NodePorts.
    pub external_traffic_policy: Option<String>,
    /// `Cluster` (default) or `Local` for cluster IPs.
    pub internal_traffic_policy: Option<String>,
    /// The node port load balancers probe (`LoadBalancer` with `externalTrafficPolicy:
    /// Local`; the API server allocates it).
    pub health_check_node_port: Option<i32>,
    /// Prefixes allowed to reach the load balancer ingress IPs (as written: kube-proxy trims
    /// and parses them).
    pub load_balancer_source_ranges: Vec<String>,
}

/// `Service.spec.sessionAffinityConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionAffinityConfig {
    /// Settings of `ClientIP` affinity.
    pub client_ip: Option<ClientIpConfig>,
}

/// `Service.spec.sessionAffinityConfig.clientIP`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientIpConfig {
    /// Seconds a client stays with its endpoint after its last new connection (the API
    /// server defaults it to 10800 and accepts 1 to 86400).
    pub timeout_seconds: Option<i64>,
}

/// One port of a Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicePort {
    /// Name; may be empty when the service has one port.
    pub name: Option<String>,
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: Option<String>,
    /// The service port.
    pub port: i32,
    /// The node port (NodePort and LoadBalancer services).
    pub node_port: Option<i32>,
}

/// `Service.status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceStatus {
    /// The load balancer's addresses.
    pub load_balancer: LoadBalancerStatus,
}

/// `Service.status.loadBalancer`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerStatus {
    /// One entry per address.
    pub ingress: Vec<LoadBalancerIngress>,
}

/// One load balancer address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerIngress {
    /// The address (hostname-only entries have none).
    pub ip: Option<String>,
    /// `VIP` (default: nodes take the address) or `Proxy` (the load balancer proxies; nodes
    /// must not capture the address).
    pub ip_mode: Option<String>,
}

/// An EndpointSlice (discovery.k8s.io/v1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSlice {
    /// Name, namespace, and the `kubernetes.io/service-name` label that ties it to its
    /// Service.
    pub metadata: ObjectMeta,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// The ports every endpoint of the slice serves (`null` = none).
    pub ports: Vec<EndpointPort>,
}

/// One endpoint of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// Its addresses (consumers use the first, as kube-proxy does).
    pub addresses: Vec<String>,
    /// Ready, serving, terminating.
    pub conditions: EndpointConditions,
    /// The node it runs on (for `Local` traffic policies).
    pub node_name: Option<String>,
    /// `hints.forZones[].name`: the zones whose nodes should use it (topology-aware routing).
    pub zone_hints: Vec<String>,
    /// `hints.forNodes[].name`: the nodes that should use it (`PreferSameNode`).
    pub node_hints: Vec<String>,
}

/// `Endpoint.conditions`; `None` means the API's default (see the accessors).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointConditions {
    /// May take new connections.
    pub ready: Option<bool>,
    /// Serving, whether or not terminating.
    pub serving: Option<bool>,
    /// Being shut down.
    pub terminating: Option<bool>,
}

impl EndpointConditions {
    /// `ready`; absent = true ("unknown" reads as ready, as kube-proxy reads it).
    pub fn is_ready(&self) -> bool {
        self.ready.unwrap_or(true)
    }

    /// `serving`; absent = true.
    pub fn is_serving(&self) -> bool {
        self.serving.unwrap_or(true)
    }

    /// `terminating`; absent = false.
    pub fn is_terminating(&self) -> bool {
        self.terminating.unwrap_or(false)
    }
}

/// One port of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPort {
    /// Matches the Service port's name (empty for an unnamed port).
    pub name: Option<String>,
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: Option<String>,
    /// The endpoints' port; `None` = all ports (not usable for a service entry).
    pub port: Option<i32>,
}

/// A Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// Name, labels, kube-router's annotations.
    pub metadata: ObjectMeta,
    /// Pod CIDRs.
    pub spec: NodeSpec,
    /// Addresses.
    pub status: NodeStatus,
}

/// `Node.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSpec {
    /// The primary pod CIDR.
    pub pod_cidr: Option<String>,
    /// Pod CIDRs, one per family; the first equals `podCIDR`.
    pub pod_cidrs: Vec<String>,
}

/// `Node.status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// `InternalIP`, `ExternalIP`, `Hostname`, …
    pub addresses: Vec<NodeAddress>,
}

/// One address of a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, `InternalDNS`, `ExternalDNS`.
    pub type_: String,
    /// The address.
    pub address: String,
}

/// A ServiceCIDR (networking.k8s.io/v1): a range the cluster allocates cluster IPs from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceCidr {
    /// Name.
    pub metadata: ObjectMeta,
    /// `spec.cidrs`: at most one prefix per family.
    pub cidrs: Vec<String>,
}

/// A NetworkPolicy (networking.k8s.io/v1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Name, namespace (the policy selects pods of its own namespace only).
    pub metadata: ObjectMeta,
    /// The rules.
    pub spec: NetworkPolicySpec,
}

/// `NetworkPolicy.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicySpec {
    /// The pods (of the policy's namespace) it applies to; empty = all of them.
    pub pod_selector: LabelSelector,
    /// `Ingress`, `Egress`; the API server fills it in when a client leaves it out.
    pub policy_types: Option<Vec<String>>,
    /// Allowed incoming traffic.
    pub ingress: Vec<NetworkPolicyIngressRule>,
    /// Allowed outgoing traffic.
    pub egress: Vec<NetworkPolicyEgressRule>,
}

/// One ingress rule: traffic from any of `from` to any of `ports`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicyIngressRule {
    /// Sources; empty = every source.
    pub from: Vec<NetworkPolicyPeer>,
    /// Ports; empty = every port.
    pub ports: Vec<NetworkPolicyPort>,
}

/// One egress rule: traffic to any of `to` on any of `ports`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicyEgressRule {
    /// Destinations; empty = every destination.
    pub to: Vec<NetworkPolicyPeer>,
    /// Ports; empty = every port.
    pub ports: Vec<NetworkPolicyPort>,
}

/// A peer: pods by selector (in namespaces by selector; both given = AND), or an address block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicyPeer {
    /// Pods with these labels.
    pub pod_selector: Option<LabelSelector>,
    /// Namespaces with these labels.
    pub namespace_selector: Option<LabelSelector>,
    /// A CIDR with exceptions.
    pub ip_block: Option<IpBlock>,
}

/// `ipBlock`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpBlock {
    /// The block.
    pub cidr: String,
    /// Parts of it that are not meant.
    pub except: Vec<String>,
}

/// A port of a policy rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicyPort {
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: Option<String>,
    /// A number or a named container port; `None` = every port.
    pub port: Option<IntOrString>,
    /// The end of a range starting at `port` (numbers only).
    pub end_port: Option<i32>,
}

/// A ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2): a cluster-wide policy of the
/// `Admin` tier (before NetworkPolicies) or the `Baseline` tier (after them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicy {
    /// Name (the kind is cluster-scoped).
    pub metadata: ObjectMeta,
    /// The tier, priority, subject and rules.
    pub spec: ClusterNetworkPolicySpec,
}

/// `ClusterNetworkPolicy.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicySpec {
    /// `Admin` or `Baseline`.
    pub tier: String,
    /// 0 to 1000; lower is checked first within the tier.
    pub priority: Option<i64>,
    /// The pods it applies to.
    pub subject: ClusterNetworkPolicySubject,
    /// Rules for traffic to the subject, in order.
    pub ingress: Vec<ClusterNetworkPolicyRule>,
    /// Rules for traffic from the subject, in order.
    pub egress: Vec<ClusterNetworkPolicyRule>,
}

/// `spec.subject`: exactly one of its fields is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicySubject {
    /// Every pod of the namespaces with these labels.
    pub namespaces: Option<LabelSelector>,
    /// The pods with these labels in the namespaces with those.
    pub pods: Option<NamespacedPod>,
}

/// `NamespacedPod`: pods by labels in namespaces by labels (empty selects all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacedPod {
    /// The namespaces.
    pub namespace_selector: LabelSelector,
    /// The pods in them.
    pub pod_selector: LabelSelector,
}

/// One ingress or egress rule of a ClusterNetworkPolicy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicyRule {
    /// The rule's name (for people).
    pub name: Option<String>,
    /// `Accept`, `Deny` or `Pass`.
    pub action: String,
    /// `from` (ingress) or `to` (egress): any of them matches.
    pub peers: Vec<ClusterNetworkPolicyPeer>,
    /// `protocols`: any of them matches; empty = all traffic.
    pub protocols: Vec<ClusterNetworkPolicyProtocol>,
}

/// A peer: exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicyPeer {
    /// Every pod of the namespaces with these labels.
    pub namespaces: Option<LabelSelector>,
    /// Pods by labels in namespaces by labels.
    pub pods: Option<NamespacedPod>,
    /// Prefixes (egress only).
    pub networks: Vec<String>,
    /// Nodes by labels (egress only, experimental).
    pub nodes: Option<LabelSelector>,
    /// Domain names (egress `Accept` rules only, experimental).
    pub domain_names: Vec<String>,
    /// The names of the fields this version does not know (a newer API's peer types).
    pub unknown: Vec<String>,
}

/// One protocol match: exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworkPolicyProtocol {
    /// TCP, optionally to a port.
    pub tcp: Option<ProtocolPort>,
    /// UDP, optionally to a port.
    pub udp: Option<ProtocolPort>,
    /// SCTP, optionally to a port.
    pub sctp: Option<ProtocolPort>,
    /// A container port name of the destination pods.
    pub destination_named_port: Option<String>,
    /// The names of the fields this version does not know.
    pub unknown: Vec<String>,
}

/// `tcp`/`udp`/`sctp` of a protocol match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolPort {
    /// The destination port; `None` = every port.
    pub destination_port: Option<PortOrRange>,
}

/// A port number or a range: exactly one is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortOrRange {
    /// One port.
    pub number: Option<i64>,
    /// An inclusive range, `(start, end)`.
    pub range: Option<(i64, i64)>,
}

/// A number or a name (`intstr.IntOrString`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrString {
    /// A number.
    Int(i32),
    /// A name.
    String(String),
}

/// An API label selector (`matchLabels` AND `matchExpressions`); empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Labels that must be equal.
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

/// A Pod: what network policies select, and where named ports resolve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// Node and ports.
    pub spec: PodSpec,
    /// Addresses and phase.
    pub status: PodStatus,
}

/// `Pod.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSpec {
    /// The node it is scheduled on.
    pub node_name: Option<String>,
    /// In the node's network namespace (policies do not apply to it).
    pub host_network: bool,
    /// The containers, for their named ports.
    pub containers: Vec<Container>,
}

/// A container, reduced to its ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    /// The ports it declares.
    pub ports: Vec<ContainerPort>,
}

/// A declared container port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerPort {
    /// The name policies may refer to.
    pub name: Option<String>,
    /// The port.
    pub container_port: i32,
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: Option<String>,
}

/// `Pod.status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub phase: Option<String>,
    /// The pod's addresses, one per family.
    pub pod_ips: Vec<PodIp>,
    /// The primary address (older API servers and clients may only write this one).
    pub pod_ip: Option<String>,
}

/// One pod address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodIp {
    /// The address.
    pub ip: String,
}

/// A Namespace: its labels are what `namespaceSelector` matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespace {
    /// Name and labels.
    pub metadata: ObjectMeta,
}

/// A ConfigMap (`[kubernetes] config_map`): its data keys are TOML fragments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigMap {
    /// Name, namespace, resourceVersion (no label is read).
    pub metadata: ObjectMeta,
    /// `data`: key to text (`binaryData` is not read).
    pub data: BTreeMap<String, String>,
}

mod decode;
#[cfg(test)]
mod tests;
