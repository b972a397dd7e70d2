//! The cache file's records: the cluster part of the config types as plain serde data.
//!
//! Conversions destructure the config types field by field and match their enums
//! exhaustively: a field or variant added to `Service` or `Route` does not compile here until
//! the cache stores it too, so the cache can never silently drop part of a cluster entry.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::super::compose::ClusterState;
use super::pod_records::{self, PodPolicyRecord, TierPolicyRecord};
use crate::config::route::{NextHopConfig, Route, RouteKind};
use crate::config::service::{
    Affinity, Backend, BackendCheck, BackendCheckKind, HealthCheckPort, Masquerade, Protocol,
    Service, WhenEmpty,
};
use ipnet::IpNet;

/// The format version written; a file of another version is ignored.
pub(super) const VERSION: u32 = 1;

/// The file's content.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CacheFile {
    /// [`VERSION`].
    pub(super) version: u32,
    /// When the state was last known to be the cluster's, in seconds since the Unix epoch
    /// (absent in files written before stamps: an unknown age).
    #[serde(default)]
    pub(super) as_of: Option<u64>,
    /// The cluster-derived services.
    services: Vec<ServiceRecord>,
    /// The cluster-derived routes.
    routes: Vec<RouteRecord>,
    /// The pod isolation units (absent in files written before they existed: none).
    #[serde(default)]
    pod_policies: Vec<PodPolicyRecord>,
    /// The cluster-wide tier policies (ClusterNetworkPolicies), admin then baseline; left
    /// out when there are none, so a file without them reads in an edgenetd from before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tier_policies: Vec<TierPolicyRecord>,
    /// The health-check node ports (absent in files written before they existed: none).
    #[serde(default)]
    health_check_ports: Vec<HealthPortRecord>,
    /// The cluster IP ranges, as prefixes (absent in older files: none).
    #[serde(default)]
    service_cidrs: Vec<String>,
    /// The pod prefixes of the local-traffic detector (absent in older files: none).
    #[serde(default)]
    cluster_cidrs: Vec<String>,
}

/// The file as written: [`CacheFile`]'s fields, in its order and under its names, each record
/// made as it is written. Building a [`CacheFile`] first copied every service of the state,
/// and the text was held whole before it went to disk: at 5,000 Services 6.5 MB on top of
/// the daemon's, its peak (issue 24). Every stored state must read back equal
/// (`a_stored_state_reads_back_equal_with_its_stamp`).
#[derive(Serialize)]
pub(super) struct CacheFileOut<'a> {
    /// [`VERSION`].
    version: u32,
    /// As [`CacheFile::as_of`].
    as_of: Option<u64>,
    /// As [`CacheFile`]'s.
    services: Each<'a, Arc<Service>, ServiceRecord>,
    /// As [`CacheFile`]'s.
    routes: Each<'a, Route, RouteRecord>,
    /// As [`CacheFile`]'s.
    pod_policies: Vec<PodPolicyRecord>,
    /// As [`CacheFile`]'s (left out when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tier_policies: Vec<TierPolicyRecord>,
    /// As [`CacheFile`]'s.
    health_check_ports: Each<'a, HealthCheckPort, HealthPortRecord>,
    /// As [`CacheFile`]'s.
    service_cidrs: Each<'a, IpNet, String>,
    /// As [`CacheFile`]'s.
    cluster_cidrs: Each<'a, IpNet, String>,
}

/// A sequence written record by record: `make` turns each item into its record as the
/// serializer reaches it.
pub(super) struct Each<'a, T, R> {
    /// The items.
    items: &'a [T],
    /// An item's record.
    make: fn(&T) -> R,
}

impl<T, R: Serialize> Serialize for Each<'_, T, R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.items.iter().map(self.make))
    }
}

impl<'a> CacheFileOut<'a> {
    /// The file for `state`, last known to be the cluster's at `as_of` (`None`: unknown).
    pub(super) fn new(state: &'a ClusterState, as_of: Option<SystemTime>) -> CacheFileOut<'a> {
        let ClusterState {
            services,
            service_cidrs,
            cluster_cidrs,
            routes,
            pod_policies,
            health_check_ports,
        } = state;
        let (pod_policies, tier_policies) = pod_records::records(pod_policies);
        CacheFileOut {
            version: VERSION,
            as_of: seconds(as_of),
            services: Each {
                items: services,
                make: |s| ServiceRecord::from(&**s),
            },
            routes: Each {
                items: routes,
                make: |r| RouteRecord::from(r),
            },
            pod_policies,
            tier_policies,
            health_check_ports: Each {
                items: health_check_ports,
                make: |h| HealthPortRecord::from(h),
            },
            service_cidrs: Each {
                items: service_cidrs,
                make: IpNet::to_string,
            },
            cluster_cidrs: Each {
                items: cluster_cidrs,
                make: IpNet::to_string,
            },
        }
    }
}

/// A stamp in seconds since the Unix epoch (0 for a clock before it).
fn seconds(as_of: Option<SystemTime>) -> Option<u64> {
    as_of.map(|t| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

/// A [`HealthCheckPort`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthPortRecord {
    /// `service`.
    service: String,
    /// `port`.
    port: u16,
    /// `local_endpoints`.
    local_endpoints: u32,
    /// `local_endpoints_v6`.
    local_endpoints_v6: u32,
}

impl From<&HealthCheckPort> for HealthPortRecord {
    fn from(p: &HealthCheckPort) -> HealthPortRecord {
        let HealthCheckPort {
            service,
            port,
            local_endpoints,
            local_endpoints_v6,
        } = p;
        HealthPortRecord {
            service: service.clone(),
            port: *port,
            local_endpoints: *local_endpoints,
            local_endpoints_v6: *local_endpoints_v6,
        }
    }
}

impl From<HealthPortRecord> for HealthCheckPort {
    fn from(r: HealthPortRecord) -> HealthCheckPort {
        HealthCheckPort {
            service: r.service,
            port: r.port,
            local_endpoints: r.local_endpoints,
            local_endpoints_v6: r.local_endpoints_v6,
        }
    }
}

/// A [`Service`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceRecord {
    /// `name`.
    name: String,
    /// `address`.
    address: IpAddr,
    /// `port`.
    port: u16,
    /// `protocol`: `tcp`, `udp` or `sctp`.
    protocol: String,
    /// `backends`: (address, weight).
    backends: Vec<(SocketAddr, u32)>,
    /// `affinity`: `none`, `source-ip` or `sticky:<timeout seconds>`.
    affinity: String,
    /// `masquerade`: true for [`Masquerade::Always`] (files of before
    /// `masquerade_off_cluster` hold only this).
    masquerade: bool,
    /// `masquerade` is [`Masquerade::OffCluster`] (absent in older files: false).
    #[serde(default)]
    masquerade_off_cluster: bool,
    /// `source_ranges`, as prefixes (absent in older files: none).
    #[serde(default)]
    source_ranges: Vec<String>,
    /// `internal_backends`: (address, weight) (absent in older files: none).
    #[serde(default)]
    internal_backends: Option<Vec<(SocketAddr, u32)>>,
    /// `reject_unserved_ports` (absent in older files: false).
    #[serde(default)]
    reject_unserved_ports: bool,
    /// `when_empty`: `reject` or `drop`.
    when_empty: String,
    /// `health`.
    health: BackendCheckRecord,
}

/// A [`BackendCheck`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendCheckRecord {
    /// `none`, `tcp` or `http`.
    check: String,
    /// The HTTP path and accepted status range (`http` only).
    http: Option<(String, (u16, u16))>,
    /// `interval` in milliseconds.
    interval_ms: u64,
    /// `timeout` in milliseconds.
    timeout_ms: u64,
    /// `rise`.
    rise: u32,
    /// `fall`.
    fall: u32,
}

/// A [`Route`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteRecord {
    /// `to`, as a prefix.
    to: String,
    /// `via`.
    via: Option<IpAddr>,
    /// `dev`.
    dev: Option<String>,
    /// `metric`.
    metric: Option<u32>,
    /// `table`.
    table: u32,
    /// `kind`: `unicast`, `blackhole`, `unreachable`, `prohibit` or `throw`.
    kind: String,
    /// `src`.
    src: Option<IpAddr>,
    /// `onlink`.
    onlink: bool,
    /// `mtu`.
    mtu: Option<u32>,
    /// `nexthops`: (via, dev, weight, onlink).
    nexthops: Vec<(Option<IpAddr>, Option<String>, u16, bool)>,
}

impl CacheFile {
    /// The stamp as a time.
    pub(super) fn as_of(&self) -> Option<SystemTime> {
        self.as_of
            .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
    }
}

/// Prefixes written by [`IpNet::to_string`].
fn prefixes_of(words: &[String]) -> Result<Vec<IpNet>, String> {
    words
        .iter()
        .map(|p| p.parse().map_err(|_| format!("invalid prefix {p:?}")))
        .collect()
}

impl TryFrom<CacheFile> for ClusterState {
    type Error = String;

    fn try_from(file: CacheFile) -> Result<ClusterState, String> {
        Ok(ClusterState {
            services: file
                .services
                .into_iter()
                .map(|r| Service::try_from(r).map(Arc::new))
                .collect::<Result<_, _>>()?,
            routes: file
                .routes
                .into_iter()
                .map(Route::try_from)
                .collect::<Result<_, _>>()?,
            pod_policies: pod_records::from_records(file.pod_policies, file.tier_policies)?,
            health_check_ports: file
                .health_check_ports
                .into_iter()
                .map(HealthCheckPort::from)
                .collect(),
            service_cidrs: prefixes_of(&file.service_cidrs)?,
            cluster_cidrs: prefixes_of(&file.cluster_cidrs)?,
        })
    }
}

// The words the records use for the config's enums. Matches, not tables: a new variant
// does not compile until it has a word.

fn protocol_word(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

fn protocol_of(w: &str) -> Result<Protocol, String> {
    match w {
        "tcp" => Ok(Protocol::Tcp),
        "udp" => Ok(Protocol::Udp),
        "sctp" => Ok(Protocol::Sctp),
        _ => Err(format!("unknown protocol {w:?}")),
    }
}

fn affinity_word(a: Affinity) -> String {
    match a {
        Affinity::None => "none".into(),
        Affinity::SourceIp => "source-ip".into(),
        Affinity::Sticky { timeout } => format!("sticky:{}", timeout.as_secs()),
    }
}

fn affinity_of(w: &str) -> Result<Affinity, String> {
    match w {
        "none" => Ok(Affinity::None),
        "source-ip" => Ok(Affinity::SourceIp),
        _ => match w.strip_prefix("sticky:").and_then(|s| s.parse().ok()) {
            Some(secs) => Ok(Affinity::Sticky {
                timeout: std::time::Duration::from_secs(secs),
            }),
            None => Err(format!("unknown affinity {w:?}")),
        },
    }
}

fn when_empty_word(w: WhenEmpty) -> &'static str {
    match w {
        WhenEmpty::Reject => "reject",
        WhenEmpty::Drop => "drop",
    }
}

fn when_empty_of(w: &str) -> Result<WhenEmpty, String> {
    match w {
        "reject" => Ok(WhenEmpty::Reject),
        "drop" => Ok(WhenEmpty::Drop),
        _ => Err(format!("unknown when_empty {w:?}")),
    }
}

fn kind_word(k: RouteKind) -> &'static str {
    match k {
        RouteKind::Unicast => "unicast",
        RouteKind::Blackhole => "blackhole",
        RouteKind::Unreachable => "unreachable",
        RouteKind::Prohibit => "prohibit",
        RouteKind::Throw => "throw",
    }
}

fn kind_of(w: &str) -> Result<RouteKind, String> {
    match w {
        "unicast" => Ok(RouteKind::Unicast),
        "blackhole" => Ok(RouteKind::Blackhole),
        "unreachable" => Ok(RouteKind::Unreachable),
        "prohibit" => Ok(RouteKind::Prohibit),
        "throw" => Ok(RouteKind::Throw),
        _ => Err(format!("unknown route kind {w:?}")),
    }
}

impl From<&Service> for ServiceRecord {
    fn from(s: &Service) -> ServiceRecord {
        let Service {
            name,
            address,
            port,
            protocol,
            backends,
            affinity,
            masquerade,
            source_ranges,
            internal_backends,
            reject_unserved_ports,
            when_empty,
            backend_check,
            // Cluster services have no fallback.
            fallback: _,
        } = s;
        let pairs = |v: &[Backend]| v.iter().map(|b| (b.address, b.weight)).collect();
        ServiceRecord {
            name: name.clone(),
            address: *address,
            port: *port,
            protocol: protocol_word(*protocol).into(),
            backends: pairs(backends),
            affinity: affinity_word(*affinity),
            masquerade: match masquerade {
                Masquerade::Always => true,
                Masquerade::Never | Masquerade::OffCluster => false,
            },
            masquerade_off_cluster: *masquerade == Masquerade::OffCluster,
            source_ranges: source_ranges.iter().map(IpNet::to_string).collect(),
            internal_backends: internal_backends.as_deref().map(pairs),
            reject_unserved_ports: *reject_unserved_ports,
            when_empty: when_empty_word(*when_empty).into(),
            health: BackendCheckRecord::from(backend_check),
        }
    }
}

impl TryFrom<ServiceRecord> for Service {
    type Error = String;

    fn try_from(r: ServiceRecord) -> Result<Service, String> {
        let backends = |v: Vec<(SocketAddr, u32)>| {
            v.into_iter()
                .map(|(address, weight)| Backend { address, weight })
                .collect()
        };
        Ok(Service {
            protocol: protocol_of(&r.protocol)?,
            affinity: affinity_of(&r.affinity)?,
            when_empty: when_empty_of(&r.when_empty)?,
            backend_check: BackendCheck::try_from(r.health)?,
            name: r.name,
            address: r.address,
            port: r.port,
            backends: backends(r.backends),
            masquerade: match (r.masquerade, r.masquerade_off_cluster) {
                (true, _) => Masquerade::Always,
                (false, true) => Masquerade::OffCluster,
                (false, false) => Masquerade::Never,
            },
            source_ranges: prefixes_of(&r.source_ranges)?,
            internal_backends: r.internal_backends.map(backends),
            reject_unserved_ports: r.reject_unserved_ports,
            fallback: None,
        })
    }
}

impl From<&BackendCheck> for BackendCheckRecord {
    fn from(h: &BackendCheck) -> BackendCheckRecord {
        let BackendCheck {
            check,
            interval,
            timeout,
            rise,
            fall,
            // Services from a cluster always start up.
            initial: _,
        } = h;
        let (check, http) = match check {
            BackendCheckKind::Http { path, expect } => ("http", Some((path.clone(), *expect))),
            // Cluster services have only none, tcp or http checks; others do not load back.
            other => (other.name(), None),
        };
        BackendCheckRecord {
            check: check.to_string(),
            http,
            interval_ms: interval.as_millis() as u64,
            timeout_ms: timeout.as_millis() as u64,
            rise: *rise,
            fall: *fall,
        }
    }
}

impl TryFrom<BackendCheckRecord> for BackendCheck {
    type Error = String;

    fn try_from(r: BackendCheckRecord) -> Result<BackendCheck, String> {
        let check = match (r.check.as_str(), r.http) {
            ("none", None) => BackendCheckKind::None,
            ("tcp", None) => BackendCheckKind::Tcp,
            ("http", Some((path, expect))) => BackendCheckKind::Http { path, expect },
            (other, _) => return Err(format!("bad health check {other:?}")),
        };
        Ok(BackendCheck {
            check,
            interval: Duration::from_millis(r.interval_ms),
            timeout: Duration::from_millis(r.timeout_ms),
            rise: r.rise,
            fall: r.fall,
            initial: Default::default(),
        })
    }
}

impl From<&Route> for RouteRecord {
    fn from(r: &Route) -> RouteRecord {
        let Route {
            to,
            via,
            dev,
            metric,
            table,
            kind,
            src,
            onlink,
            mtu,
            nexthops,
        } = r;
        RouteRecord {
            to: to.to_string(),
            via: *via,
            dev: dev.clone(),
            metric: *metric,
            table: *table,
            kind: kind_word(*kind).into(),
            src: *src,
            onlink: *onlink,
            mtu: *mtu,
            nexthops: nexthops
                .iter()
                .map(|n| {
                    let NextHopConfig {
                        via,
                        dev,
                        weight,
                        onlink,
                    } = n;
                    (*via, dev.clone(), *weight, *onlink)
                })
                .collect(),
        }
    }
}

impl TryFrom<RouteRecord> for Route {
    type Error = String;

    fn try_from(r: RouteRecord) -> Result<Route, String> {
        Ok(Route {
            to: r
                .to
                .parse()
                .map_err(|_| format!("bad route destination {:?}", r.to))?,
            kind: kind_of(&r.kind)?,
            via: r.via,
            dev: r.dev,
            metric: r.metric,
            table: r.table,
            src: r.src,
            onlink: r.onlink,
            mtu: r.mtu,
            nexthops: r
                .nexthops
                .into_iter()
                .map(|(via, dev, weight, onlink)| NextHopConfig {
                    via,
                    dev,
                    weight,
                    onlink,
                })
                .collect(),
        })
    }
}
