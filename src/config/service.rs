//! `[[service]]`: load-balanced virtual addresses (VIPs).
//!
//! Raw serde structs are deserialized entry by entry (one bad service does not hide the
//! errors of the next), then validated into [`ServicesConfig`]: plain Rust types, no TOML
//! inside. Checked here, each at its `file:line:col`: addresses and ports, a backend of the
//! other family than its VIP, a backend listed twice, two services on the same
//! address:port:protocol, duplicate names, source ranges (prefixes of either family, each
//! once), health-check settings.
//!
//! `[service.health]` configures backend checks (run by the service controller, see
//! `controller::service::backend_check`).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::diag::Diagnostics;
use super::doc::Doc;
use super::duration::parse_duration;
use super::net::{parse_addr, parse_prefix};
use super::nul::no_nul;

/// Most backends one service may have (its slots are spread over at most 1024 map entries).
pub const MAX_BACKENDS: usize = 1024;
/// Names of services taken from a Kubernetes cluster start with this (`k8s:<namespace>/<name>:
/// <port>`); TOML names may not, so a name always tells where a service came from.
pub const CLUSTER_NAME_PREFIX: &str = "k8s:";
/// Largest backend weight.
pub const MAX_WEIGHT: u32 = 1000;

/// Every validated `[[service]]`, in config order, and the facts about the addresses they
/// live in that only a cluster supplies (a TOML file sets none of them today).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicesConfig {
    /// The services.
    pub services: Vec<Service>,
    /// Prefixes the cluster allocates cluster IPs from (kube-proxy's ServiceCIDRs): a packet
    /// to an address in them that no service owns is dropped, so it never leaves the node
    /// towards a default route.
    pub service_cidrs: Vec<IpNet>,
    /// The cluster's pod prefixes: kube-proxy's local-traffic detector. Sources in them are
    /// "pods" for [`Masquerade::OffCluster`] and [`Service::internal_backends`].
    pub cluster_cidrs: Vec<IpNet>,
    /// kube-proxy's health-check node ports: one HTTP answer per `externalTrafficPolicy:
    /// Local` load balancer Service, served by the daemon on this node.
    pub health_check_ports: Vec<HealthCheckPort>,
}

/// One `healthCheckNodePort` this node answers on (kube-proxy's service health server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckPort {
    /// `<namespace>/<name>` of the Service.
    pub service: String,
    /// The TCP port (`spec.healthCheckNodePort`).
    pub port: u16,
    /// This node's endpoints of the Service that take new connections (ready, not
    /// terminating), counted once per address: 200 when above 0, else 503. The answer to
    /// probes over IPv4; for a single-stack Service, to every probe.
    pub local_endpoints: u32,
    /// The same count for probes over IPv6. kube-proxy runs one proxier per IP family, each
    /// counting only the endpoints of its family, and answers a probe with the count of the
    /// family it came over; a single-stack Service has one family, so this equals
    /// `local_endpoints` then.
    pub local_endpoints_v6: u32,
}

/// Whose connections to a service are SNATed to the router on their way to a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Masquerade {
    /// Nobody's: backends see the client's address (a backend reaching its own service is
    /// still masqueraded: it would otherwise drop its own address as a martian).
    #[default]
    Never,
    /// Everybody's (`masquerade = true`; kube-proxy's external addresses with
    /// `externalTrafficPolicy: Cluster`).
    Always,
    /// Only clients outside [`ServicesConfig::cluster_cidrs`]: kube-proxy masquerades
    /// off-cluster traffic to a cluster IP, while pods keep their address. With no
    /// `cluster_cidrs` (no local-traffic detector) nobody is masqueraded, as kube-proxy
    /// without one does.
    OffCluster,
}

/// Transport protocol of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP (Kubernetes Services may have SCTP ports; NAT and conntrack handle it like TCP).
    Sctp,
}

impl Protocol {
    /// Every protocol, for rules written once per protocol: a protocol added to the enum
    /// is added here, and every such rule follows.
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

    /// IANA protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }

    /// The protocol with IANA number `n`, if it is one of [`Protocol::ALL`].
    pub fn from_number(n: u8) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.number() == n)
    }

    /// `tcp` / `udp` / `sctp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// How a backend is chosen for a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Affinity {
    /// At random, weighted.
    #[default]
    None,
    /// By a hash of the client's source address: one client keeps landing on one backend.
    SourceIp,
    /// The first connection of a client picks at random (weighted); the client's next new
    /// connections go to the same backend until `timeout` has passed since its last new
    /// connection (Kubernetes' `sessionAffinity: ClientIP`). Unlike `SourceIp`, adding or
    /// reweighting a backend moves no remembered client.
    Sticky {
        /// How long a client is remembered after its last new connection.
        timeout: Duration,
    },
}

/// Default `affinity_timeout` (Kubernetes' default `timeoutSeconds`: 3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT: Duration = Duration::from_secs(10800);
/// Shortest `affinity_timeout`.
pub const MIN_AFFINITY_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest `affinity_timeout` (Kubernetes' upper bound for `timeoutSeconds`: one day).
pub const MAX_AFFINITY_TIMEOUT: Duration = Duration::from_secs(86400);

/// What a packet to a service gets while it has no backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WhenEmpty {
    /// Refused at once (TCP reset, ICMP port unreachable for UDP): clients fail fast.
    #[default]
    Reject,
    /// Silently dropped: clients time out.
    Drop,
}

/// One backend of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend {
    /// Where connections go.
    pub address: SocketAddr,
    /// Relative share of new connections; 0 = draining (no new connections).
    pub weight: u32,
}

/// Kind of backend check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum BackendCheckKind {
    /// No check: every backend counts as up.
    #[default]
    None,
    /// A TCP connect.
    Tcp,
    /// An HTTP GET of `path`, expecting a status in `expect`.
    Http {
        /// Request path, starting with `/`.
        path: String,
        /// Accepted status codes (inclusive).
        expect: (u16, u16),
    },
    /// A UDP datagram `send`; up when a reply comes back (starting with `expect`, if set).
    Udp {
        /// The datagram sent (may be empty).
        send: Vec<u8>,
        /// The bytes a reply must start with; None = any reply.
        expect: Option<Vec<u8>>,
    },
    /// A DNS query (UDP, type A) for `query_name`; up on any answer with RCODE 0.
    Dns {
        /// The name asked for.
        query_name: String,
    },
    /// A TLS ClientHello; up when the backend answers with a ServerHello.
    Tls {
        /// The server name sent in the ClientHello; None = no SNI extension.
        sni: Option<String>,
    },
}

impl BackendCheckKind {
    /// The name used in the config (`check = "..."`).
    pub fn name(&self) -> &'static str {
        match self {
            BackendCheckKind::None => "none",
            BackendCheckKind::Tcp => "tcp",
            BackendCheckKind::Http { .. } => "http",
            BackendCheckKind::Udp { .. } => "udp",
            BackendCheckKind::Dns { .. } => "dns",
            BackendCheckKind::Tls { .. } => "tls",
        }
    }
}

/// The state a backend starts in before its first checks (`initial`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Initial {
    /// Up at once: a reload or restart never blackholes a service before its first probes.
    #[default]
    Up,
    /// Down until `rise` good checks in a row (a router that just booted sends nothing to a
    /// backend it has not seen answer).
    Down,
}

/// `[service.health]`: how backends are probed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendCheck {
    /// What is checked.
    pub check: BackendCheckKind,
    /// Time between checks.
    pub interval: Duration,
    /// Time one check may take.
    pub timeout: Duration,
    /// Consecutive successes that bring a backend up.
    pub rise: u32,
    /// Consecutive failures that take a backend down.
    pub fall: u32,
    /// The state before the first checks.
    pub initial: Initial,
}

impl Default for BackendCheck {
    fn default() -> Self {
        BackendCheck {
            check: BackendCheckKind::None,
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            rise: 2,
            fall: 3,
            initial: Initial::Up,
        }
    }
}

/// One validated service: one virtual address, port and protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Name (logs, plan output, errors). Unique among TOML services; the entries made from one
    /// Kubernetes Service port (its cluster IPs, external, load balancer and node port
    /// addresses) all share one name, so only the address, port and protocol identify an
    /// entry.
    pub name: String,
    /// The virtual address.
    pub address: IpAddr,
    /// The virtual port.
    pub port: u16,
    /// TCP, UDP or SCTP.
    pub protocol: Protocol,
    /// Backends, all of the VIP's family, each address:port once.
    pub backends: Vec<Backend>,
    /// How backends are chosen.
    pub affinity: Affinity,
    /// Whose connections are SNATed to the router so replies return through it; decided
    /// per address (the VIP a connection was sent to), never per backend.
    pub masquerade: Masquerade,
    /// Only clients in these prefixes reach the service, this node's own connections
    /// included (admitted only when a range holds their source address); others are
    /// dropped. Empty: everybody (kube-proxy's `loadBalancerSourceRanges`).
    pub source_ranges: Vec<IpNet>,
    /// kube-proxy's short-circuit of `externalTrafficPolicy: Local` addresses: connections
    /// from this node (masqueraded) and from [`ServicesConfig::cluster_cidrs`] (not) go to
    /// these backends, every endpoint of the service, instead of `backends` (this node's
    /// only). `None`: every client gets `backends`.
    pub internal_backends: Option<Vec<Backend>>,
    /// The address is a cluster IP: packets to a port of it that no service serves are
    /// rejected (kube-proxy's cluster IP check).
    pub reject_unserved_ports: bool,
    /// What a packet gets while no backend is up and there is no fallback.
    pub when_empty: WhenEmpty,
    /// The sorry server: gets the new connections while no backend is up.
    pub fallback: Option<SocketAddr>,
    /// How its backends are checked (`[service.health]`).
    pub backend_check: BackendCheck,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Spanned<String>,
    address: Spanned<String>,
    port: Spanned<i64>,
    protocol: Option<Spanned<String>>,
    #[serde(default)]
    backends: Vec<Spanned<toml::Value>>,
    affinity: Option<Spanned<String>>,
    affinity_timeout: Option<Spanned<String>>,
    masquerade: Option<bool>,
    source_ranges: Option<Spanned<Vec<Spanned<String>>>>,
    when_empty: Option<Spanned<String>>,
    fallback: Option<Spanned<String>>,
    health: Option<RawHealth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHealth {
    check: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    expect: Option<Spanned<String>>,
    interval: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    rise: Option<Spanned<i64>>,
    fall: Option<Spanned<i64>>,
    initial: Option<Spanned<String>>,
    send: Option<Spanned<String>>,
    expect_bytes: Option<Spanned<String>>,
    query_name: Option<Spanned<String>>,
    sni: Option<Spanned<String>>,
}

/// Validates every `[[service]]` of `doc`.
pub fn validate(doc: &Doc, diags: &mut Diagnostics) -> ServicesConfig {
    if let Some(Err(v)) = doc.array("service") {
        diags.error(
            v.span(),
            "`service` must be an array of tables: write [[service]]",
        );
        return ServicesConfig::default();
    }
    let raws: Vec<Spanned<RawService>> = doc.items("service", diags);
    let mut services = Vec::with_capacity(raws.len());
    let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut vips: BTreeMap<(IpAddr, u16, Protocol), Range<usize>> = BTreeMap::new();
    for raw in raws {
        let span = raw.span();
        let raw = raw.into_inner();
        let Some(service) = validate_one(&raw, diags) else {
            continue;
        };
        if let Some(first) = names.get(&service.name) {
            diags.error_also(
                raw.name.span(),
                format!("duplicate service name `{}`", service.name),
                first.clone(),
                "first used here",
            );
            continue;
        }
        names.insert(service.name.clone(), raw.name.span());
        let vip = (service.address, service.port, service.protocol);
        if let Some(first) = vips.get(&vip) {
            diags.error_also(
                raw.address.span(),
                format!(
                    "service `{}`: {} port {} {} is already used by another service",
                    service.name,
                    service.address,
                    service.port,
                    service.protocol.name()
                ),
                first.clone(),
                "first used here",
            );
            continue;
        }
        vips.insert(vip, span);
        services.push(service);
    }
    ServicesConfig {
        services,
        ..ServicesConfig::default()
    }
}

fn validate_one(raw: &RawService, diags: &mut Diagnostics) -> Option<Service> {
    let before = diags.len();
    let name = raw.name.get_ref().clone();
    if name.is_empty() {
        diags.error(raw.name.span(), "empty service name: expected a name");
    }
    no_nul(&raw.name, "service name", diags);
    if name.starts_with(CLUSTER_NAME_PREFIX) {
        diags.error(
            raw.name.span(),
            format!("invalid service name `{name}`: names starting with `{CLUSTER_NAME_PREFIX}` are reserved for services from a Kubernetes cluster"),
        );
    }
    let address = parse_addr(raw.address.get_ref())
        .map_err(|e| diags.error(raw.address.span(), e))
        .ok();
    let port = match u16::try_from(*raw.port.get_ref()) {
        Ok(p) if p > 0 => p,
        _ => {
            diags.error(
                raw.port.span(),
                format!("invalid port {}: expected 1-65535", raw.port.get_ref()),
            );
            0
        }
    };
    let protocol = choice(
        raw.protocol.as_ref(),
        "protocol",
        &[
            ("tcp", Protocol::Tcp),
            ("udp", Protocol::Udp),
            ("sctp", Protocol::Sctp),
        ],
        diags,
    );
    let affinity = affinity(raw, diags);
    let when_empty = choice(
        raw.when_empty.as_ref(),
        "when_empty",
        &[("reject", WhenEmpty::Reject), ("drop", WhenEmpty::Drop)],
        diags,
    );
    let backends = backends(&raw.backends, address, diags);
    let source_ranges = raw
        .source_ranges
        .as_ref()
        .map(|r| source_ranges(r, diags))
        .unwrap_or_default();
    let fallback = raw
        .fallback
        .as_ref()
        .and_then(|f| fallback(f, address, diags));
    let backend_check = raw
        .health
        .as_ref()
        .map(|h| backend_check(h, diags))
        .unwrap_or_default();
    if protocol == Protocol::Sctp
        && backend_check.check != BackendCheckKind::None
        && let Some(check) = raw.health.as_ref().and_then(|h| h.check.as_ref())
    {
        // Every check is a TCP, UDP or TLS exchange, which an SCTP backend never answers
        // (and this kernel may have no SCTP sockets to probe with).
        diags.error(
            check.span(),
            format!(
                "check = \"{}\" cannot probe an SCTP backend: expected check = \"none\" for protocol = \"sctp\"",
                backend_check.check.name()
            ),
        );
    }
    if diags.len() != before {
        return None;
    }
    Some(Service {
        name,
        address: address?,
        port,
        protocol,
        backends,
        affinity,
        masquerade: if raw.masquerade.unwrap_or(false) {
            Masquerade::Always
        } else {
            Masquerade::Never
        },
        source_ranges,
        internal_backends: None,
        reject_unserved_ports: false,
        when_empty,
        fallback,
        backend_check,
    })
}

/// `source_ranges`: prefixes (or bare addresses) of either family, each once; an empty list
/// is an error (leaving the key out admits everybody, an empty list would read as nobody).
fn source_ranges(raw: &Spanned<Vec<Spanned<String>>>, diags: &mut Diagnostics) -> Vec<IpNet> {
    if raw.get_ref().is_empty() {
        diags.error(
            raw.span(),
            "empty source_ranges: leave the key out to admit every source",
        );
    }
    let mut seen: BTreeMap<IpNet, Range<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for r in raw.get_ref() {
        no_nul(r, "source range", diags);
        match parse_prefix(r.get_ref()) {
            Ok(net) => {
                if let Some(first) = seen.get(&net) {
                    diags.error_also(
                        r.span(),
                        format!("source range {net} is listed twice"),
                        first.clone(),
                        "first listed here",
                    );
                    continue;
                }
                seen.insert(net, r.span());
                out.push(net);
            }
            Err(e) => diags.error(r.span(), e),
        }
    }
    out
}

/// `fallback`: one `addr:port` of the VIP's family.
fn fallback(
    raw: &Spanned<String>,
    vip: Option<IpAddr>,
    diags: &mut Diagnostics,
) -> Option<SocketAddr> {
    let text = raw.get_ref();
    let addr = match parse_backend_addr(text) {
        Ok(a) if a.port() != 0 => a,
        Ok(_) => {
            diags.error(raw.span(), format!("invalid fallback `{text}`: port 0"));
            return None;
        }
        Err(_) => {
            diags.error(
                raw.span(),
                format!(
                    "invalid fallback `{text}`: expected \"address:port\", e.g. \"10.0.9.1:8080\""
                ),
            );
            return None;
        }
    };
    if let Some(vip) = vip
        && vip.is_ipv4() != addr.is_ipv4()
    {
        diags.error(
            raw.span(),
            format!(
                "fallback {addr} is {} but the service address {vip} is {}: expected the same family",
                family(addr.ip()),
                family(vip)
            ),
        );
        return None;
    }
    Some(addr)
}

/// `affinity` and, for `sticky` only, `affinity_timeout`.
fn affinity(raw: &RawService, diags: &mut Diagnostics) -> Affinity {
    let sticky = Affinity::Sticky {
        timeout: DEFAULT_AFFINITY_TIMEOUT,
    };
    let kind = choice(
        raw.affinity.as_ref(),
        "affinity",
        &[
            ("none", Affinity::None),
            ("source-ip", Affinity::SourceIp),
            ("sticky", sticky),
        ],
        diags,
    );
    let Some(t) = &raw.affinity_timeout else {
        return kind;
    };
    if kind != sticky {
        diags.error(
            t.span(),
            "`affinity_timeout` applies only to affinity = \"sticky\"",
        );
        return kind;
    }
    match parse_duration(t.get_ref()) {
        Ok(d)
            if (MIN_AFFINITY_TIMEOUT..=MAX_AFFINITY_TIMEOUT).contains(&d)
                && d.subsec_nanos() == 0 =>
        {
            Affinity::Sticky { timeout: d }
        }
        Ok(_) => {
            diags.error(
                t.span(),
                format!(
                    "invalid affinity_timeout `{}`: expected whole seconds from 1s to 24h",
                    t.get_ref()
                ),
            );
            kind
        }
        Err(e) => {
            diags.error(t.span(), e);
            kind
        }
    }
}

/// One of a few named values; absent = the first. An unknown name is an error listing them.
fn choice<T: Copy>(
    raw: Option<&Spanned<String>>,
    what: &str,
    names: &[(&str, T)],
    diags: &mut Diagnostics,
) -> T {
    let Some(raw) = raw else {
        return names[0].1;
    };
    if let Some((_, value)) = names.iter().find(|(n, _)| n == raw.get_ref()) {
        return *value;
    }
    let expected: Vec<String> = names.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    diags.error(
        raw.span(),
        format!(
            "invalid {what} `{}`: expected {}",
            raw.get_ref(),
            expected.join(" or ")
        ),
    );
    names[0].1
}

/// The backends, each of the VIP's family and listed once.
fn backends(
    raw: &[Spanned<toml::Value>],
    address: Option<IpAddr>,
    diags: &mut Diagnostics,
) -> Vec<Backend> {
    let mut backends = Vec::with_capacity(raw.len());
    let mut seen: BTreeMap<SocketAddr, Range<usize>> = BTreeMap::new();
    if raw.len() > MAX_BACKENDS {
        diags.error(
            raw[MAX_BACKENDS].span(),
            format!("too many backends: at most {MAX_BACKENDS} per service"),
        );
    }
    for b in raw {
        let Some(backend) = backend(b, diags) else {
            continue;
        };
        if let Some(vip) = address
            && vip.is_ipv4() != backend.address.is_ipv4()
        {
            diags.error(
                b.span(),
                format!(
                    "backend {} is {} but the service address {vip} is {}: expected a backend of the same family",
                    backend.address,
                    family(backend.address.ip()),
                    family(vip)
                ),
            );
            continue;
        }
        if let Some(first) = seen.get(&backend.address) {
            diags.error_also(
                b.span(),
                format!("backend {} is listed twice", backend.address),
                first.clone(),
                "first listed here",
            );
            continue;
        }
        seen.insert(backend.address, b.span());
        backends.push(backend);
    }
    backends
}

fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() { "IPv4" } else { "IPv6" }
}

fn parse_backend_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!(
            "invalid backend `{text}`: expected \"address:port\", e.g. \"10.0.1.5:8080\" or \"[2001:db8::5]:8080\""
        )
    })
}

fn backend(b: &Spanned<toml::Value>, diags: &mut Diagnostics) -> Option<Backend> {
    let expected = "expected \"address:port\" or { address = \"address:port\", weight = N }";
    match b.get_ref() {
        toml::Value::String(s) => match parse_backend_addr(s) {
            Ok(address) if address.port() != 0 => Some(Backend { address, weight: 1 }),
            Ok(_) => {
                diags.error(b.span(), format!("invalid backend `{s}`: port 0"));
                None
            }
            Err(e) => {
                diags.error(b.span(), e);
                None
            }
        },
        toml::Value::Table(t) => {
            if let Some(k) = t.keys().find(|k| *k != "address" && *k != "weight") {
                diags.error(
                    b.span(),
                    format!("unknown backend key `{k}`, expected `address` or `weight`"),
                );
                return None;
            }
            let Some(toml::Value::String(s)) = t.get("address") else {
                diags.error(b.span(), format!("backend without an address: {expected}"));
                return None;
            };
            let address = match parse_backend_addr(s) {
                Ok(a) if a.port() != 0 => a,
                Ok(_) => {
                    diags.error(b.span(), format!("invalid backend `{s}`: port 0"));
                    return None;
                }
                Err(e) => {
                    diags.error(b.span(), e);
                    return None;
                }
            };
            let weight = match t.get("weight") {
                None => 1,
                Some(toml::Value::Integer(w)) if (0..=MAX_WEIGHT as i64).contains(w) => *w as u32,
                Some(w) => {
                    diags.error(
                        b.span(),
                        format!(
                            "invalid weight {w}: expected an integer 0-{MAX_WEIGHT} (0 = draining)"
                        ),
                    );
                    return None;
                }
            };
            Some(Backend { address, weight })
        }
        other => {
            diags.error(
                b.span(),
                format!("invalid backend of type {}: {expected}", other.type_str()),
            );
            None
        }
    }
}

fn duration(v: &Option<Spanned<String>>, default: Duration, diags: &mut Diagnostics) -> Duration {
    match v {
        None => default,
        Some(s) => match parse_duration(s.get_ref()) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                diags.error(
                    s.span(),
                    "a zero duration: expected more than 0, e.g. \"2s\"",
                );
                default
            }
            Err(e) => {
                diags.error(s.span(), e);
                default
            }
        },
    }
}

fn count(v: &Option<Spanned<i64>>, default: u32, what: &str, diags: &mut Diagnostics) -> u32 {
    match v {
        None => default,
        Some(n) => match u32::try_from(*n.get_ref()) {
            Ok(c) if (1..=100).contains(&c) => c,
            _ => {
                diags.error(
                    n.span(),
                    format!("invalid {what} {}: expected 1-100", n.get_ref()),
                );
                default
            }
        },
    }
}

fn backend_check(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheck {
    let defaults = BackendCheck::default();
    let check = check_kind(h, diags);
    // Keys of one check kind are an error with any other, so a typo'd kind is not silent.
    let owners: [(&str, &Option<Spanned<String>>, &str); 6] = [
        ("path", &h.path, "http"),
        ("expect", &h.expect, "http"),
        ("send", &h.send, "udp"),
        ("expect_bytes", &h.expect_bytes, "udp"),
        ("query_name", &h.query_name, "dns"),
        ("sni", &h.sni, "tls"),
    ];
    for (key, v, owner) in owners {
        if let Some(v) = v
            && check.name() != owner
        {
            diags.error(
                v.span(),
                format!("`{key}` applies only to check = \"{owner}\""),
            );
        }
    }
    let interval = duration(&h.interval, defaults.interval, diags);
    let timeout = duration(&h.timeout, defaults.timeout, diags);
    if timeout > interval
        && let Some(t) = &h.timeout
    {
        diags.error(
            t.span(),
            "timeout is longer than interval: expected a timeout up to the interval",
        );
    }
    BackendCheck {
        check,
        interval,
        timeout,
        rise: count(&h.rise, defaults.rise, "rise", diags),
        fall: count(&h.fall, defaults.fall, "fall", diags),
        initial: choice(
            h.initial.as_ref(),
            "initial",
            &[("up", Initial::Up), ("down", Initial::Down)],
            diags,
        ),
    }
}

/// `check` and the keys of its kind.
fn check_kind(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheckKind {
    let kind = h.check.as_ref().map(|c| (c.get_ref().as_str(), c.span()));
    match kind {
        None | Some(("none", _)) => BackendCheckKind::None,
        Some(("tcp", _)) => BackendCheckKind::Tcp,
        Some(("http", _)) => http_check(h, diags),
        Some(("udp", _)) => BackendCheckKind::Udp {
            send: h
                .send
                .as_ref()
                .map(|s| s.get_ref().as_bytes().to_vec())
                .unwrap_or_default(),
            expect: h.expect_bytes.as_ref().map(|e| {
                if e.get_ref().is_empty() {
                    diags.error(
                        e.span(),
                        "empty expect_bytes: leave it out to accept any reply",
                    );
                }
                e.get_ref().as_bytes().to_vec()
            }),
        },
        Some(("dns", span)) => BackendCheckKind::Dns {
            query_name: dns_name(h.query_name.as_ref(), span, diags),
        },
        Some(("tls", _)) => BackendCheckKind::Tls {
            sni: h.sni.as_ref().map(|s| {
                if !valid_host_name(s.get_ref()) {
                    diags.error(
                        s.span(),
                        format!(
                            "invalid sni `{}`: expected a host name, e.g. \"www.example.com\"",
                            s.get_ref()
                        ),
                    );
                }
                s.get_ref().clone()
            }),
        },
        Some((other, span)) => {
            diags.error(
                span,
                format!(
                    "invalid check `{other}`: expected \"none\", \"tcp\", \"http\", \"udp\", \"dns\" or \"tls\""
                ),
            );
            BackendCheckKind::None
        }
    }
}

fn http_check(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheckKind {
    let path = match &h.path {
        None => "/".to_string(),
        Some(p) if p.get_ref().starts_with('/') => p.get_ref().clone(),
        Some(p) => {
            diags.error(
                p.span(),
                format!(
                    "invalid path `{}`: expected a path starting with /",
                    p.get_ref()
                ),
            );
            "/".into()
        }
    };
    let expect = match &h.expect {
        None => (200, 399),
        Some(e) => match parse_status_range(e.get_ref()) {
            Some(r) => r,
            None => {
                diags.error(
                    e.span(),
                    format!(
                        "invalid expect `{}`: expected a status or a range, e.g. \"200\" or \"200-399\"",
                        e.get_ref()
                    ),
                );
                (200, 399)
            }
        },
    };
    BackendCheckKind::Http { path, expect }
}

/// The `query_name` of a DNS check: required, a name of labels of 1-63 bytes, 253 at most.
fn dns_name(raw: Option<&Spanned<String>>, check: Range<usize>, diags: &mut Diagnostics) -> String {
    let Some(raw) = raw else {
        diags.error(
            check,
            "check = \"dns\" needs query_name, e.g. query_name = \"example.com\"",
        );
        return String::new();
    };
    let name = raw.get_ref().trim_end_matches('.');
    let ok = name.len() <= 253
        && name
            .split('.')
            .all(|l| (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_graphic()));
    if !ok {
        diags.error(
            raw.span(),
            format!(
                "invalid query_name `{}`: expected a DNS name, e.g. \"example.com\"",
                raw.get_ref()
            ),
        );
    }
    name.to_string()
}

/// A host name for SNI: letters, digits, `-` and `.`, not an IP address (SNI carries names).
fn valid_host_name(s: &str) -> bool {
    s.parse::<IpAddr>().is_err()
        && (1..=253).contains(&s.len())
        && s.split('.').all(|l| {
            (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn parse_status_range(text: &str) -> Option<(u16, u16)> {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    let a: u16 = a.trim().parse().ok()?;
    let b: u16 = b.trim().parse().ok()?;
    ((100..=599).contains(&a) && (a..=599).contains(&b)).then_some((a, b))
}

#[cfg(test)]
#[path = "service_health_tests.rs"]
mod health_tests;
