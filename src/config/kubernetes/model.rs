//! The validated `[kubernetes]`: how to reach the cluster, and what to take from it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use super::selector::LabelSelector;

/// Validated `[kubernetes]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesConfig {
    /// How to reach the API server and authenticate.
    pub connection: Connection,
    /// This node's Node name; `None` = the host name (resolved by the daemon).
    pub node_name: Option<String>,
    /// The kinds taken from the cluster, each once.
    pub feeds: BTreeSet<Feed>,
    /// Only Services with these labels (`None` = all).
    pub service_selector: Option<LabelSelector>,
    /// Only Nodes with these labels, for routes (`None` = all).
    pub node_selector: Option<LabelSelector>,
    /// Only NetworkPolicies with these labels (`None` = all).
    pub network_policy_selector: Option<LabelSelector>,
    /// Where the last cluster state is cached; `None` = the daemon's default path.
    pub cache_file: Option<PathBuf>,
    /// `cache_max_age`: a cached state last known to be the cluster's longer ago than this is
    /// not used at start; `None` = no limit.
    pub cache_max_age: Option<Duration>,
    /// `service_cidrs`: cluster IP ranges added to the cluster's ServiceCIDRs.
    pub service_cidrs: Vec<IpNet>,
    /// `cluster_cidrs`: the pod prefixes; `None` = this node's pod CIDRs.
    pub cluster_cidrs: Option<Vec<IpNet>>,
    /// `node_port_addresses`: the addresses NodePorts are served on.
    pub node_port_addresses: NodePortAddresses,
    /// `isolate_unknown_pods`: every address of this node's pod CIDRs that is not yet a
    /// known Pod's is dropped both ways on the forward hook.
    pub isolate_unknown_pods: bool,
    /// `pod_cidrs`: this node's pod prefixes for `isolate_unknown_pods`; `None` = its Node's
    /// `spec.podCIDRs`.
    pub pod_cidrs: Option<Vec<IpNet>>,
    /// `log_denied`: what a NetworkPolicy drops is reported by the daemon (log line and
    /// `edgenetd_denied_packets_total`).
    pub log_denied: bool,
    /// `network_policy_mode`: every NetworkPolicy enforced, or only audited.
    pub network_policy_mode: PolicyMode,
    /// `config_map`: the ConfigMap whose data keys are TOML fragments merged after the local
    /// files; `None` = the router's config is its files alone.
    #[cfg(feature = "kubernetes")]
    pub config_map: Option<ConfigMapRef>,
    /// `config_confirm`: how long a config from the cluster has to prove the router still
    /// reaches the API server before it is rolled back.
    #[cfg(feature = "kubernetes")]
    pub config_confirm: Duration,
    /// `status_namespace`: where this router's Lease (named after its node) is kept and
    /// renewed; `None` = no Lease is written (it needs RBAC the default role does not grant).
    pub status_namespace: Option<String>,
}

/// Whether a NetworkPolicy drops what it does not allow, or only reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum PolicyMode {
    /// `"enforce"`: what it does not allow is dropped.
    #[default]
    Enforce,
    /// `"audit"`: what it would drop is counted and logged, and passes.
    Audit,
}

impl PolicyMode {
    /// The word written in the config and the annotation `edgenetd.io/mode`.
    pub fn word(self) -> &'static str {
        match self {
            PolicyMode::Enforce => "enforce",
            PolicyMode::Audit => "audit",
        }
    }
}

/// The default of `config_confirm`.
#[cfg(feature = "kubernetes")]
pub const DEFAULT_CONFIG_CONFIRM: Duration = Duration::from_secs(120);

/// `config_map = "namespace/name"`: one ConfigMap.
#[cfg(feature = "kubernetes")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

#[cfg(feature = "kubernetes")]
impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Which of this node's addresses serve NodePorts (kube-proxy's `--nodeport-addresses`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NodePortAddresses {
    /// `"primary"`: the Node's primary addresses, one per family (the first InternalIP of
    /// each family, else its first ExternalIP), as kube-proxy's node IPs.
    #[default]
    Primary,
    /// `"all"`: every address of this host's interfaces (loopback aside).
    All,
    /// Prefixes: this host's interface addresses within them.
    Cidrs(Vec<IpNet>),
}

/// Where the API server is and who edgenetd is to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Running in a pod: the service account's token (re-read at each connect, since
    /// projected tokens rotate), CA and the `KUBERNETES_SERVICE_*` address.
    InCluster,
    /// An explicit server, over TLS.
    Server {
        /// The API server.
        server: ServerUrl,
        /// The cluster CA (PEM) that signs the server's certificate.
        ca_file: SecretPath,
        /// The client's credentials.
        credentials: Credentials,
    },
    /// A node-local list/watch proxy on this node's loopback, over plain HTTP (KubeEdge's
    /// MetaServer, OpenYurt's YurtHub): the proxy authenticates to the API server on the
    /// node's behalf, so nothing secret crosses a network in clear.
    LocalProxy {
        /// The proxy (an `http://` URL whose host is a loopback address or `localhost`).
        server: ServerUrl,
        /// A bearer token to send along (YurtHub passes it upstream), or none.
        token_file: Option<SecretPath>,
    },
}

/// How the client authenticates to an explicit server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A bearer token, re-read at each connect.
    Token(SecretPath),
    /// A client certificate and its key (PEM), as k3s issues them.
    ClientCert {
        /// The certificate chain.
        cert: SecretPath,
        /// The private key.
        key: SecretPath,
    },
}

/// A file holding a secret or a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretPath {
    /// An absolute path.
    File(PathBuf),
    /// `credential:NAME`: the file `NAME` in `$CREDENTIALS_DIRECTORY` (systemd credentials).
    Credential(String),
}

/// The environment variable systemd sets to the directory of the unit's credentials.
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// A `credential:NAME` that cannot be found because the process has no credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "credential `{0}`: ${CREDENTIALS_DIRECTORY} is not set (is LoadCredential={0}:... in the unit?)"
)]
pub struct NoCredentialsDirectory(pub String);

impl SecretPath {
    /// The file to read: the path itself, or `NAME` in `credentials_dir` (the value of
    /// `$CREDENTIALS_DIRECTORY`, read by the caller when it connects).
    pub fn resolve(
        &self,
        credentials_dir: Option<&std::path::Path>,
    ) -> Result<PathBuf, NoCredentialsDirectory> {
        match self {
            SecretPath::File(path) => Ok(path.clone()),
            SecretPath::Credential(name) => credentials_dir
                .map(|dir| dir.join(name))
                .ok_or_else(|| NoCredentialsDirectory(name.clone())),
        }
    }
}

/// How a server URL is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `https://`: TLS, the server's certificate checked against `ca_file`.
    Https,
    /// `http://`: plain TCP, only ever to this node's loopback.
    Http,
}

/// A parsed `https://host[:port][/path]` (or loopback `http://`) API server URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// `https` or (to a loopback host only) `http`.
    pub scheme: Scheme,
    /// Host name or address (an IPv6 address without brackets).
    pub host: String,
    /// TCP port (443 for https, 80 for http, when not written).
    pub port: u16,
    /// Path prefix before `/api` (empty, or starting with `/` without a trailing one).
    pub path: String,
}

/// A kind of object edgenetd can take from the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feed {
    /// Services and EndpointSlices become services.
    Services,
    /// Other Nodes' pod CIDRs become routes.
    Routes,
    /// NetworkPolicies (with Pods and Namespaces) become firewall rules.
    NetworkPolicies,
}

impl Feed {
    /// Every feed, in the order they are listed in messages.
    pub const ALL: [Feed; 3] = [Feed::Services, Feed::Routes, Feed::NetworkPolicies];

    /// The name written in `feeds`.
    pub fn name(self) -> &'static str {
        match self {
            Feed::Services => "services",
            Feed::Routes => "routes",
            Feed::NetworkPolicies => "network_policies",
        }
    }
}

/// True for a host that names this node's loopback: an address of 127.0.0.0/8, `::1`, or
/// `localhost` (which resolvers keep on loopback, RFC 6761). Plain HTTP goes nowhere else.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}
