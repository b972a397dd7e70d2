//! Services + EndpointSlices -> edgenetd service entries (the same
//! [`crate::config::service::Service`] a TOML `[[service]]` validates into), following
//! kube-proxy's reading of the API (`pkg/proxy` in kubernetes/kubernetes):
//!
//! - **Skipped**: headless services (no cluster IP), `ExternalName` services, and services
//!   labelled `service.kubernetes.io/service-proxy-name` (another proxy owns them) or
//!   `service.kubernetes.io/headless`; EndpointSlices with either label are not read (kube-
//!   proxy's informers select neither). TCP, UDP and SCTP ports are proxied.
//! - **Addresses** parse as kube-proxy's `netutils.ParseIPSloppy` parses them (IPv4 octets
//!   with leading zeros are decimal; [`super::sloppy`]).
//! - **Dual-stack as two halves**: each cluster IP's family is one independent half; a
//!   family without a cluster IP is not served at all (kube-proxy's per-family proxiers do
//!   the same), and each half takes only the addresses, endpoints and source ranges of its
//!   family.
//! - **Addresses** of one service port, each an entry: the cluster IP (port), every
//!   `externalIPs` address (port), every load balancer ingress IP (port; not those with
//!   `ipMode: Proxy`, where the load balancer proxies and nodes must not capture the
//!   address), and with a `nodePort` every node address given by the caller (node port;
//!   the caller applies `node_port_addresses`).
//! - **Endpoints** join the service port by port name and protocol, from every
//!   EndpointSlice labelled `kubernetes.io/service-name` with the service's name, of the
//!   half's address type. Which of them an address uses is `topology`'s: kube-proxy's
//!   `CategorizeEndpoints` (ready ones, narrowed by topology hints for the Cluster policy;
//!   this node's for Local; serving-terminating ones when none is ready), plus edgenetd's
//!   draining of terminating endpoints at weight 0.
//! - **Traffic policies**: `internalTrafficPolicy: Local` restricts the cluster IP, and
//!   `externalTrafficPolicy: Local` the external, load balancer and node port addresses, to
//!   endpoints whose `nodeName` is this node. Such an address with endpoints elsewhere but
//!   none here drops packets (kube-proxy does the same); an address with no endpoint at all
//!   rejects them.
//! - **Per address**, as kube-proxy's nftables proxier programs them: a cluster IP
//!   masquerades off-cluster clients ([`Masquerade::OffCluster`]) and rejects its unserved
//!   ports; an external address with policy `Cluster` masquerades everybody (the backend may
//!   be on another node and must reply through this one); with `Local` it keeps the client's
//!   address, and this node's own and its pods' connections go to the Cluster policy's
//!   endpoints (`internal_backends`, kube-proxy's short-circuit). `loadBalancerSourceRanges`
//!   (trimmed, parsed sloppily, invalid ones left out and reported) restrict the load
//!   balancer ingress IPs only, as kube-proxy's firewall does.
//! - **Session affinity**: `ClientIP` maps to the `sticky` affinity with
//!   `sessionAffinityConfig.clientIP.timeoutSeconds` (default 10800; clamped to 1-86400, the
//!   API server's bounds): like kube-proxy, a client keeps its endpoint while it opens new
//!   connections within the timeout, whatever endpoints come and go.
//!
//! Every entry of one service port is named `k8s:<namespace>/<name>:<port name or number>`;
//! the entries of one port share that name and differ by address.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use self::topology::Endpoint;
use super::sloppy;
use crate::config::service::{self as model, Affinity, Backend, Masquerade, Protocol, WhenEmpty};
use crate::kubernetes::objects::{self, EndpointSlice};
use crate::kubernetes::order;

mod topology;

/// `sessionAffinity: ClientIP` as the sticky mode with its timeout; anything else: none.
fn affinity(spec: &objects::ServiceSpec) -> Affinity {
    if spec.session_affinity.as_deref() != Some("ClientIP") {
        return Affinity::None;
    }
    let seconds = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds)
        .unwrap_or(model::DEFAULT_AFFINITY_TIMEOUT.as_secs() as i64);
    let (min, max) = (
        model::MIN_AFFINITY_TIMEOUT.as_secs() as i64,
        model::MAX_AFFINITY_TIMEOUT.as_secs() as i64,
    );
    Affinity::Sticky {
        timeout: std::time::Duration::from_secs(seconds.clamp(min, max) as u64),
    }
}

/// Services with this label belong to another proxy (kube-proxy ignores them too).
pub const SERVICE_PROXY_NAME_LABEL: &str = "service.kubernetes.io/service-proxy-name";
/// Services (and EndpointSlices) with this label are not proxied: kube-proxy's informers
/// select `!service.kubernetes.io/headless`.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What the translation needs to know about the node it runs on.
#[derive(Debug, Clone, Copy)]
pub struct ThisNode<'a> {
    /// This node's Node name (endpoints with this `nodeName` are local).
    pub name: &'a str,
    /// Its Node's `topology.kubernetes.io/zone` label, for zone hints.
    pub zone: Option<&'a str>,
    /// The addresses NodePorts are served on.
    pub addresses: &'a [IpAddr],
}

/// The result: service entries, and what was left out and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Translated {
    /// The entries, ordered by namespace, name, port, family, address.
    pub services: Vec<model::Service>,
    /// Objects or parts of them that produced no entry.
    pub skipped: Vec<Skipped>,
}

/// One thing left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `<namespace>/<name>` of the Service, or the entry's name for a port.
    pub object: String,
    /// Why.
    pub reason: SkipReason,
}

/// Why something produced no entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// No cluster IP (`None` or empty): DNS-only, nothing to balance.
    Headless,
    /// `type: ExternalName`: a DNS alias.
    ExternalName,
    /// Labelled for another proxy (the label's value).
    OtherProxy(String),
    /// Labelled `service.kubernetes.io/headless`: not proxied.
    HeadlessLabel,
    /// An address that does not parse.
    BadAddress(String),
    /// A `loadBalancerSourceRanges` entry that does not parse (the others still apply).
    BadSourceRange(String),
    /// A protocol neither kube-proxy nor edgenetd balances (not TCP, UDP or SCTP).
    UnsupportedProtocol(String),
    /// A port outside 1-65535.
    BadPort(i32),
    /// More endpoints than one service may have; the first (by address) were kept.
    TooManyBackends(usize),
}

impl SkipReason {
    /// The `reason` label of `edgenetd_kubernetes_skipped_total`: one word per variant.
    pub fn label(&self) -> &'static str {
        match self {
            SkipReason::Headless => "headless",
            SkipReason::ExternalName => "external_name",
            SkipReason::OtherProxy(_) => "other_proxy",
            SkipReason::HeadlessLabel => "headless_label",
            SkipReason::BadAddress(_) => "bad_address",
            SkipReason::BadSourceRange(_) => "bad_source_range",
            SkipReason::UnsupportedProtocol(_) => "unsupported_protocol",
            SkipReason::BadPort(_) => "bad_port",
            SkipReason::TooManyBackends(_) => "too_many_backends",
        }
    }

    /// Left out by design (DNS-only, or another proxy's), not because something is wrong.
    pub fn expected(&self) -> bool {
        matches!(
            self,
            SkipReason::Headless
                | SkipReason::ExternalName
                | SkipReason::OtherProxy(_)
                | SkipReason::HeadlessLabel
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Headless => f.write_str("headless (no cluster IP)"),
            SkipReason::ExternalName => f.write_str("type ExternalName"),
            SkipReason::OtherProxy(p) => write!(f, "handled by service proxy `{p}`"),
            SkipReason::HeadlessLabel => write!(f, "labelled {HEADLESS_LABEL}"),
            SkipReason::BadAddress(a) => write!(f, "invalid address `{a}`"),
            SkipReason::BadSourceRange(r) => {
                write!(f, "invalid loadBalancerSourceRanges entry `{r}`: ignored")
            }
            SkipReason::UnsupportedProtocol(p) => write!(f, "protocol {p} is not balanced"),
            SkipReason::BadPort(p) => write!(f, "invalid port {p}"),
            SkipReason::TooManyBackends(n) => {
                write!(
                    f,
                    "{n} endpoints: only the first {} are used",
                    model::MAX_BACKENDS
                )
            }
        }
    }
}

/// Translates every Service, with the EndpointSlices of the cluster, for `node`.
pub fn translate<'a>(
    services: impl IntoIterator<Item = &'a objects::Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    node: ThisNode<'_>,
) -> Translated {
    let mut by_service: BTreeMap<(&str, &str), Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in slices.into_iter().filter(|s| proxied(s)) {
        if let Some(svc) = slice.metadata.labels.get(SERVICE_NAME_LABEL) {
            by_service
                .entry((slice.metadata.namespace.as_str(), svc.as_str()))
                .or_default()
                .push(slice);
        }
    }
    let mut sorted: Vec<&objects::Service> = services.into_iter().collect();
    order::sort_by(&mut sorted, |a, b| key(a).cmp(&key(b)));
    let mut out = Translated::default();
    for svc in sorted {
        let slices = by_service
            .get(&(svc.metadata.namespace.as_str(), svc.metadata.name.as_str()))
            .map_or(&[][..], Vec::as_slice);
        one_service(svc, slices, node, &mut out);
    }
    out
}

/// Translates one Service with its EndpointSlices (those labelled with its name, in its
/// namespace; the ones kube-proxy does not read are left out here): what [`translate`] makes
/// of it. The watcher's memo calls this for each Service that changed.
pub fn translate_service(
    svc: &objects::Service,
    slices: &[&EndpointSlice],
    node: ThisNode<'_>,
) -> Translated {
    let read: Vec<&EndpointSlice> = slices.iter().copied().filter(|s| proxied(s)).collect();
    let mut out = Translated::default();
    one_service(svc, &read, node, &mut out);
    out
}

/// Whether kube-proxy reads this EndpointSlice: its EndpointSlice informer leaves out the
/// slices labelled as its Service informer leaves out Services.
fn proxied(s: &EndpointSlice) -> bool {
    !s.metadata.labels.contains_key(HEADLESS_LABEL)
        && !s.metadata.labels.contains_key(SERVICE_PROXY_NAME_LABEL)
}

fn key(s: &objects::Service) -> (&str, &str) {
    (&s.metadata.namespace, &s.metadata.name)
}

/// Why kube-proxy would not serve this Service at all, if it would not.
pub(crate) fn skip_reason(svc: &objects::Service) -> Option<SkipReason> {
    if let Some(proxy) = svc.metadata.labels.get(SERVICE_PROXY_NAME_LABEL) {
        return Some(SkipReason::OtherProxy(proxy.clone()));
    }
    if svc.metadata.labels.contains_key(HEADLESS_LABEL) {
        return Some(SkipReason::HeadlessLabel);
    }
    if svc.spec.type_.as_deref() == Some("ExternalName") {
        return Some(SkipReason::ExternalName);
    }
    match svc.spec.cluster_ip.as_deref() {
        None | Some("") | Some("None") => Some(SkipReason::Headless),
        Some(_) => None,
    }
}

fn one_service(
    svc: &objects::Service,
    slices: &[&EndpointSlice],
    node: ThisNode<'_>,
    out: &mut Translated,
) {
    let object = format!("{}/{}", svc.metadata.namespace, svc.metadata.name);
    if let Some(reason) = skip_reason(svc) {
        out.skipped.push(Skipped { object, reason });
        return;
    }
    let cluster_ips = addresses(cluster_ips(svc), &object, out);
    let others = Addresses {
        external_ips: addresses(
            svc.spec.external_ips.iter().map(String::as_str).collect(),
            &object,
            out,
        ),
        load_balancer_ips: addresses(load_balancer_ips(svc), &object, out),
        source_ranges: source_ranges(svc, &object, out),
    };
    for port in &svc.spec.ports {
        let name = entry_name(svc, port);
        let Some(protocol) = protocol(port.protocol.as_deref(), &name, out) else {
            continue;
        };
        let Some(number) = port_number(port.port, &name, out) else {
            continue;
        };
        let node_port = match port.node_port {
            None | Some(0) => None,
            Some(p) => port_number(p, &name, out),
        };
        let port = PortSpec {
            name,
            protocol,
            port: number,
            node_port,
            endpoint_name: port.name.as_deref().unwrap_or(""),
        };
        for &cluster_ip in &cluster_ips {
            let half = Half::of(cluster_ip, &others, node.addresses);
            entries(svc, slices, &port, &half, node, out);
        }
    }
}

/// The cluster IPs, one per family: `clusterIPs`, or `clusterIP` from a server that does not
/// write the list.
fn cluster_ips(svc: &objects::Service) -> Vec<&str> {
    if svc.spec.cluster_ips.is_empty() {
        svc.spec.cluster_ip.iter().map(String::as_str).collect()
    } else {
        svc.spec.cluster_ips.iter().map(String::as_str).collect()
    }
}

/// The load balancer ingress IPs (not `ipMode: Proxy` ones).
fn load_balancer_ips(svc: &objects::Service) -> Vec<&str> {
    svc.status
        .load_balancer
        .ingress
        .iter()
        .filter(|i| i.ip_mode.as_deref() != Some("Proxy"))
        .filter_map(|i| i.ip.as_deref())
        .filter(|ip| !ip.is_empty())
        .collect()
}

/// `loadBalancerSourceRanges` as kube-proxy reads them: each trimmed and parsed sloppily,
/// an invalid one reported and left out (the rest still apply), an empty one ignored.
fn source_ranges(svc: &objects::Service, object: &str, out: &mut Translated) -> Vec<IpNet> {
    let mut ranges = Vec::new();
    for text in &svc.spec.load_balancer_source_ranges {
        let text = text.trim();
        match sloppy::parse_cidr(text) {
            Some(net) if !ranges.contains(&net) => ranges.push(net),
            Some(_) => {}
            None if text.is_empty() => {}
            None => out.skipped.push(Skipped {
                object: object.to_string(),
                reason: SkipReason::BadSourceRange(text.to_string()),
            }),
        }
    }
    ranges
}

/// Parses addresses; a bad one is reported and left out.
fn addresses(texts: Vec<&str>, object: &str, out: &mut Translated) -> Vec<IpAddr> {
    let mut seen = BTreeSet::new();
    let mut parsed = Vec::with_capacity(texts.len());
    for text in texts {
        match sloppy::parse_ip(text) {
            Some(a) if seen.insert(a) => parsed.push(a),
            Some(_) => {}
            None => out.skipped.push(Skipped {
                object: object.to_string(),
                reason: SkipReason::BadAddress(text.to_string()),
            }),
        }
    }
    parsed
}

fn entry_name(svc: &objects::Service, port: &objects::ServicePort) -> String {
    let port_id = match port.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => port.port.to_string(),
    };
    format!(
        "{}{}/{}:{port_id}",
        model::CLUSTER_NAME_PREFIX,
        svc.metadata.namespace,
        svc.metadata.name
    )
}

fn protocol(text: Option<&str>, name: &str, out: &mut Translated) -> Option<Protocol> {
    match text.unwrap_or("TCP") {
        "TCP" => Some(Protocol::Tcp),
        "UDP" => Some(Protocol::Udp),
        "SCTP" => Some(Protocol::Sctp),
        other => {
            out.skipped.push(Skipped {
                object: name.to_string(),
                reason: SkipReason::UnsupportedProtocol(other.to_string()),
            });
            None
        }
    }
}

fn port_number(port: i32, name: &str, out: &mut Translated) -> Option<u16> {
    match u16::try_from(port) {
        Ok(p) if p > 0 => Some(p),
        _ => {
            out.skipped.push(Skipped {
                object: name.to_string(),
                reason: SkipReason::BadPort(port),
            });
            None
        }
    }
}

/// One service port, checked.
struct PortSpec<'a> {
    name: String,
    protocol: Protocol,
    port: u16,
    node_port: Option<u16>,
    /// The name EndpointSlice ports carry for it (empty for an unnamed port).
    endpoint_name: &'a str,
}

/// One family's half of a service: its cluster IP and the other addresses of that family.
struct Half {
    cluster_ip: IpAddr,
    external_ips: Vec<IpAddr>,
    load_balancer_ips: Vec<IpAddr>,
    node: Vec<IpAddr>,
    /// `loadBalancerSourceRanges` of this family (kube-proxy's per-family proxiers each take
    /// their own).
    source_ranges: Vec<IpNet>,
}

impl Half {
    fn of(cluster_ip: IpAddr, addresses: &Addresses, node: &[IpAddr]) -> Half {
        let v4 = cluster_ip.is_ipv4();
        let same = |a: &&IpAddr| a.is_ipv4() == v4;
        let mut half = Half {
            cluster_ip,
            external_ips: addresses
                .external_ips
                .iter()
                .filter(same)
                .copied()
                .collect(),
            load_balancer_ips: addresses
                .load_balancer_ips
                .iter()
                .filter(same)
                .copied()
                .collect(),
            node: node.iter().filter(same).copied().collect(),
            source_ranges: addresses
                .source_ranges
                .iter()
                .filter(|n| matches!(n, IpNet::V4(_)) == v4)
                .copied()
                .collect(),
        };
        half.admit_this_node();
        half
    }

    /// kube-proxy's `allowFromNode`: when a range holds one of this node's addresses, the
    /// node may reach its load balancer IPs, also from those addresses themselves (a node
    /// that holds a load balancer IP locally connects from it). Otherwise the node is
    /// fenced like any other client.
    fn admit_this_node(&mut self) {
        let ranges = &self.source_ranges;
        if !self
            .node
            .iter()
            .any(|a| ranges.iter().any(|n| n.contains(a)))
        {
            return;
        }
        for &ip in &self.load_balancer_ips {
            let host = IpNet::from(ip);
            if !self.source_ranges.iter().any(|n| n.contains(&ip)) {
                self.source_ranges.push(host);
            }
        }
    }

    fn address_type(&self) -> &'static str {
        if self.cluster_ip.is_ipv4() {
            "IPv4"
        } else {
            "IPv6"
        }
    }
}

/// A Service's addresses other than its cluster IPs, parsed, both families.
struct Addresses {
    external_ips: Vec<IpAddr>,
    load_balancer_ips: Vec<IpAddr>,
    source_ranges: Vec<IpNet>,
}

/// The entries of one port in one family.
fn entries(
    svc: &objects::Service,
    slices: &[&EndpointSlice],
    port: &PortSpec<'_>,
    half: &Half,
    node: ThisNode<'_>,
    out: &mut Translated,
) {
    let endpoints = endpoints(slices, port, half.address_type());
    let here = topology::Here {
        node: node.name,
        zone: node.zone.filter(|z| !z.is_empty()),
    };
    let local_policy = |policy: &Option<String>| policy.as_deref() == Some("Local");
    let internal_local = local_policy(&svc.spec.internal_traffic_policy);
    let external_local = local_policy(&svc.spec.external_traffic_policy);
    let mut capped = |chosen: Vec<Backend>| {
        let (backends, dropped) = cap(chosen);
        if dropped > 0 {
            out.skipped.push(Skipped {
                object: port.name.clone(),
                reason: SkipReason::TooManyBackends(dropped + model::MAX_BACKENDS),
            });
        }
        backends
    };
    let cluster = capped(topology::cluster(&endpoints, here));
    let local = capped(topology::local(&endpoints, here));
    let any_usable = topology::any_usable(&endpoints);
    // A Local address with usable endpoints on other nodes only drops; an address of a
    // service with no usable endpoint anywhere rejects (kube-proxy's two verdicts).
    let when_empty = |backends: &[Backend], local_only: bool| {
        if local_only && backends.is_empty() && any_usable {
            WhenEmpty::Drop
        } else {
            WhenEmpty::Reject
        }
    };
    let base = model::Service {
        name: port.name.clone(),
        address: half.cluster_ip,
        port: port.port,
        protocol: port.protocol,
        backends: Vec::new(),
        affinity: affinity(&svc.spec),
        masquerade: Masquerade::Never,
        source_ranges: Vec::new(),
        internal_backends: None,
        reject_unserved_ports: false,
        when_empty: WhenEmpty::Reject,
        fallback: None,
        backend_check: model::BackendCheck::default(),
    };
    let mut seen = BTreeSet::new();
    let mut push = |entry: model::Service| {
        if seen.insert((entry.address, entry.port)) {
            out.services.push(entry);
        }
    };
    // The cluster IP: pods keep their address, off-cluster clients are masqueraded
    // (kube-proxy's `ip saddr != <cluster CIDR>` mark), and its unserved ports reject.
    let backends = if internal_local { &local } else { &cluster };
    push(model::Service {
        backends: backends.clone(),
        masquerade: Masquerade::OffCluster,
        reject_unserved_ports: true,
        when_empty: when_empty(backends, internal_local),
        ..base.clone()
    });
    // External addresses: Cluster masquerades everybody (the backend may be on another
    // node); Local keeps the client's address and sends this node's own and its pods'
    // connections to every endpoint, as kube-proxy's short-circuit does.
    let external = |address: IpAddr, number: u16, source_ranges: &[IpNet]| {
        let (backends, masquerade, internal_backends) = if external_local {
            (local.clone(), Masquerade::Never, Some(cluster.clone()))
        } else {
            (cluster.clone(), Masquerade::Always, None)
        };
        model::Service {
            address,
            port: number,
            when_empty: when_empty(&backends, external_local),
            backends,
            masquerade,
            internal_backends,
            source_ranges: source_ranges.to_vec(),
            ..base.clone()
        }
    };
    for &address in &half.external_ips {
        push(external(address, port.port, &[]));
    }
    for &address in &half.load_balancer_ips {
        push(external(address, port.port, &half.source_ranges));
    }
    if let Some(node_port) = port.node_port {
        for &address in &half.node {
            push(external(address, node_port, &[]));
        }
    }
}

/// The endpoints of `port` in slices of `address_type`, one per address:port.
fn endpoints<'a>(
    slices: &[&'a EndpointSlice],
    port: &PortSpec<'_>,
    address_type: &str,
) -> Vec<Endpoint<'a>> {
    let mut by_address: BTreeMap<SocketAddr, Endpoint<'a>> = BTreeMap::new();
    for slice in slices.iter().filter(|s| s.address_type == address_type) {
        let Some(number) = slice_port(slice, port) else {
            continue;
        };
        for ep in &slice.endpoints {
            let Some(ip) = ep.addresses.first().and_then(|a| sloppy::parse_ip(a)) else {
                continue;
            };
            let candidate = Endpoint {
                address: SocketAddr::new(ip, number),
                ready: ep.conditions.is_ready(),
                serving: ep.conditions.is_serving(),
                terminating: ep.conditions.is_terminating(),
                node_name: ep.node_name.as_deref(),
                zone_hints: &ep.zone_hints,
                node_hints: &ep.node_hints,
            };
            match by_address.get(&candidate.address) {
                Some(have) if rank(have) >= rank(&candidate) => {}
                _ => {
                    by_address.insert(candidate.address, candidate);
                }
            }
        }
    }
    by_address.into_values().collect()
}

/// Rank when one address is in two slices: the more usable one wins.
fn rank(e: &Endpoint<'_>) -> u8 {
    u8::from(e.takes_new()) * 2 + u8::from(e.serving && e.terminating)
}

/// The slice's port number for `port`: same name, same protocol.
fn slice_port(slice: &EndpointSlice, port: &PortSpec<'_>) -> Option<u16> {
    slice
        .ports
        .iter()
        .find(|p| {
            p.name.as_deref().unwrap_or("") == port.endpoint_name
                && p.protocol.as_deref().unwrap_or("TCP") == protocol_name(port.protocol)
        })
        .and_then(|p| p.port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Sctp => "SCTP",
    }
}

/// At most [`model::MAX_BACKENDS`], those taking new connections first; how many were left out.
fn cap(mut backends: Vec<Backend>) -> (Vec<Backend>, usize) {
    if backends.len() <= model::MAX_BACKENDS {
        return (backends, 0);
    }
    order::sort_by_key(&mut backends, |b| (b.weight == 0, b.address));
    let dropped = backends.len() - model::MAX_BACKENDS;
    backends.truncate(model::MAX_BACKENDS);
    order::sort_by_key(&mut backends, |b| b.address);
    (backends, dropped)
}

#[cfg(test)]
#[path = "services/flow_tests.rs"]
mod flow_tests;
#[cfg(test)]
mod tests;
