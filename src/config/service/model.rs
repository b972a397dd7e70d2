//! The validated `[[service]]` types: plain Rust, no TOML inside (what the service controller
//! and the Kubernetes translation build and read).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

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
    /// The services. Shared, not copied: a cluster-fed daemon holds the same entry in the
    /// translation memo, the cluster state, the snapshot and the service controller, and a
    /// compose that changed one entry copies 5,000 pointers, not 5,000 services (issue 24).
    /// An unchanged entry is the same allocation from one snapshot to the next, so
    /// comparing two is a pointer comparison first.
    pub services: Vec<Arc<Service>>,
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

/// The positions of `now` whose service is another allocation than the one at the same
/// position of `before`, or `None` when the two differ in length. Snapshots share unchanged
/// services (see [`ServicesConfig::services`]), so between two of them this is what changed,
/// found by one pointer comparison per service, none of them read.
pub fn changed_positions(before: &[Arc<Service>], now: &[Arc<Service>]) -> Option<Vec<usize>> {
    (before.len() == now.len()).then(|| {
        before
            .iter()
            .zip(now)
            .enumerate()
            .filter(|(_, (a, b))| !Arc::ptr_eq(a, b))
            .map(|(i, _)| i)
            .collect()
    })
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
