//! Services + EndpointSlices -> edgenetd service entries (the same
//! [`crate::config::service::Service`] a TOML `[[service]]` validates into), following
//! kube-proxy's reading of the API (`pkg/proxy` in kubernetes/kubernetes):
//!
//! - **Skipped**: headless services (no cluster IP), `ExternalName` services, and services
//!   labelled `service.kubernetes.io/service-proxy-name` (another proxy owns them). SCTP
//!   ports are skipped too (edgenetd balances TCP and UDP).
//! - **Dual-stack as two halves**: each cluster IP's family is one independent half; a
//!   family without a cluster IP is not served at all (kube-proxy's per-family proxiers do
//!   the same), and each half takes only the addresses and endpoints of its family.
//! - **Addresses** of one service port, each an entry: the cluster IP (port), every
//!   `externalIPs` address (port), every load balancer ingress IP (port; not those with
//!   `ipMode: Proxy`, where the load balancer proxies and nodes must not capture the
//!   address), and with a `nodePort` every node address given by the caller (node port).
//! - **Endpoints** join the service port by port name and protocol, from every
//!   EndpointSlice labelled `kubernetes.io/service-name` with the service's name, of the
//!   half's address type. Conditions as kube-proxy reads them: `ready` and `serving` default
//!   to true, `terminating` to false. Ready endpoints take new connections; a terminating
//!   endpoint while others are ready stays with weight 0 (draining: its connections, UDP
//!   included, keep going, new ones go elsewhere); when none is ready, the serving and
//!   terminating ones take the traffic (weight 1), so a rolling update of a one-replica
//!   service is not a gap. Endpoints neither ready nor terminating are left out. An
//!   endpoint that says ready and terminating at once (the EndpointSlice controller never
//!   writes that) counts as terminating.
//! - **Traffic policies**: `internalTrafficPolicy: Local` restricts the cluster IP, and
//!   `externalTrafficPolicy: Local` the external, load balancer and node port addresses, to
//!   endpoints whose `nodeName` is this node. Such an address with endpoints elsewhere but
//!   none here drops packets (kube-proxy does the same); an address with no endpoint at all
//!   rejects them. External addresses with policy `Cluster` masquerade (the backend may be
//!   on another node and must reply through this one); `Local` keeps the client's address.
//!   Cluster IPs do not masquerade: their clients are pods and the node itself, whose replies
//!   come back through this node's connection tracking anyway.
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

use crate::config::service::{self as model, Affinity, Backend, Masquerade, Protocol, WhenEmpty};
use crate::kubernetes::objects::{self, EndpointSlice};
use crate::kubernetes::order;

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
/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What the translation needs to know about the node it runs on.
#[derive(Debug, Clone, Copy)]
pub struct ThisNode<'a> {
    /// This node's Node name (endpoints with this `nodeName` are local).
    pub name: &'a str,
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
    /// An address that does not parse.
    BadAddress(String),
    /// A protocol edgenetd does not balance (SCTP).
    UnsupportedProtocol(String),
    /// A port outside 1-65535.
    BadPort(i32),
    /// More endpoints than one service may have; the first (by address) were kept.
    TooManyBackends(usize),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Headless => f.write_str("headless (no cluster IP)"),
            SkipReason::ExternalName => f.write_str("type ExternalName"),
            SkipReason::OtherProxy(p) => write!(f, "handled by service proxy `{p}`"),
            SkipReason::BadAddress(a) => write!(f, "invalid address `{a}`"),
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
    for slice in slices {
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

fn key(s: &objects::Service) -> (&str, &str) {
    (&s.metadata.namespace, &s.metadata.name)
}

/// Why kube-proxy would not serve this Service at all, if it would not.
pub(crate) fn skip_reason(svc: &objects::Service) -> Option<SkipReason> {
    if let Some(proxy) = svc.metadata.labels.get(SERVICE_PROXY_NAME_LABEL) {
        return Some(SkipReason::OtherProxy(proxy.clone()));
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
    let external = addresses(external_addresses(svc), &object, out);
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
            let half = Half::of(cluster_ip, &external, node.addresses);
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

/// `externalIPs` and load balancer ingress IPs (not `ipMode: Proxy` ones).
fn external_addresses(svc: &objects::Service) -> Vec<&str> {
    let lb = svc
        .status
        .load_balancer
        .ingress
        .iter()
        .filter(|i| i.ip_mode.as_deref() != Some("Proxy"))
        .filter_map(|i| i.ip.as_deref());
    svc.spec
        .external_ips
        .iter()
        .map(String::as_str)
        .chain(lb)
        .collect()
}

/// Parses addresses; a bad one is reported and left out.
fn addresses(texts: Vec<&str>, object: &str, out: &mut Translated) -> Vec<IpAddr> {
    let mut seen = BTreeSet::new();
    let mut parsed = Vec::with_capacity(texts.len());
    for text in texts {
        match text.parse::<IpAddr>() {
            Ok(a) if seen.insert(a) => parsed.push(a),
            Ok(_) => {}
            Err(_) => out.skipped.push(Skipped {
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
    external: Vec<IpAddr>,
    node: Vec<IpAddr>,
}

impl Half {
    fn of(cluster_ip: IpAddr, external: &[IpAddr], node: &[IpAddr]) -> Half {
        let same = |a: &&IpAddr| a.is_ipv4() == cluster_ip.is_ipv4();
        Half {
            cluster_ip,
            external: external.iter().filter(same).copied().collect(),
            node: node.iter().filter(same).copied().collect(),
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
    let local = |internal: bool| {
        let policy = if internal {
            &svc.spec.internal_traffic_policy
        } else {
            &svc.spec.external_traffic_policy
        };
        policy.as_deref() == Some("Local")
    };
    let affinity = affinity(&svc.spec);
    let mut seen = BTreeSet::new();
    let mut push = |address: IpAddr, number: u16, internal: bool| {
        if !seen.insert((address, number)) {
            return;
        }
        let local_only = local(internal);
        let chosen = choose(&endpoints, local_only.then_some(node.name));
        let (backends, dropped) = cap(chosen);
        if dropped > 0 {
            out.skipped.push(Skipped {
                object: port.name.clone(),
                reason: SkipReason::TooManyBackends(dropped + model::MAX_BACKENDS),
            });
        }
        // A Local address with usable endpoints on other nodes only drops; an address of a
        // service with no usable endpoint anywhere rejects (kube-proxy's two verdicts).
        let elsewhere = || !choose(&endpoints, None).is_empty();
        let when_empty = if local_only && backends.is_empty() && elsewhere() {
            WhenEmpty::Drop
        } else {
            WhenEmpty::Reject
        };
        out.services.push(model::Service {
            name: port.name.clone(),
            address,
            port: number,
            protocol: port.protocol,
            backends,
            affinity,
            masquerade: if !internal && !local_only {
                Masquerade::Always
            } else {
                Masquerade::Never
            },
            source_ranges: Vec::new(),
            internal_backends: None,
            reject_unserved_ports: false,
            when_empty,
            fallback: None,
            health: model::HealthCheck::default(),
        });
    };
    push(half.cluster_ip, port.port, true);
    for &address in &half.external {
        push(address, port.port, false);
    }
    if let Some(node_port) = port.node_port {
        for &address in &half.node {
            push(address, node_port, false);
        }
    }
}

/// One endpoint of one service port, as kube-proxy reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint<'a> {
    address: SocketAddr,
    ready: bool,
    serving: bool,
    terminating: bool,
    node_name: Option<&'a str>,
}

impl Endpoint<'_> {
    /// Takes new connections: ready and not going away.
    fn takes_new(&self) -> bool {
        self.ready && !self.terminating
    }

    /// Rank when one address is in two slices: the more usable one wins.
    fn rank(&self) -> u8 {
        u8::from(self.takes_new()) * 2 + u8::from(self.serving && self.terminating)
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
            let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else {
                continue;
            };
            let candidate = Endpoint {
                address: SocketAddr::new(ip, number),
                ready: ep.conditions.is_ready(),
                serving: ep.conditions.is_serving(),
                terminating: ep.conditions.is_terminating(),
                node_name: ep.node_name.as_deref(),
            };
            match by_address.get(&candidate.address) {
                Some(have) if have.rank() >= candidate.rank() => {}
                _ => {
                    by_address.insert(candidate.address, candidate);
                }
            }
        }
    }
    by_address.into_values().collect()
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
    }
}

/// The backends among `endpoints` (only those on node `local` when given): ready ones with
/// weight 1 and terminating ones draining with weight 0; with none ready, the serving and
/// terminating ones with weight 1.
fn choose(endpoints: &[Endpoint<'_>], local: Option<&str>) -> Vec<Backend> {
    let usable: Vec<&Endpoint<'_>> = endpoints
        .iter()
        .filter(|e| local.is_none() || e.node_name == local)
        .collect();
    let backend = |e: &&Endpoint<'_>, weight| Backend {
        address: e.address,
        weight,
    };
    if usable.iter().any(|e| e.takes_new()) {
        usable
            .iter()
            .filter_map(|e| match (e.takes_new(), e.terminating) {
                (true, _) => Some(backend(e, 1)),
                (false, true) => Some(backend(e, 0)),
                (false, false) => None,
            })
            .collect()
    } else {
        usable
            .iter()
            .filter(|e| e.serving && e.terminating)
            .map(|e| backend(e, 1))
            .collect()
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
mod tests;
