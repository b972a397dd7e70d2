//! The validated route and rule types: plain Rust, no TOML inside.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;

use super::fingerprint::Routes;

/// The main routing table's id.
pub const TABLE_MAIN: u32 = 254;

/// Validated routes and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingConfig {
    /// Every `[[route]]`, in file order, each with its fingerprint.
    pub routes: Routes,
    /// Every `[[route_rule]]`, in file order.
    pub rules: Vec<RouteRule>,
    /// Every `[[track]]`, in file order.
    pub tracks: Vec<Track>,
    /// The routes that name a track, by identity (table, prefix, metric as the kernel stores
    /// it): a route is identified by these, so the map survives routes being added around it.
    pub tracked: BTreeMap<RouteId, String>,
}

/// What identifies a configured route: table, destination and effective metric.
pub type RouteId = (u32, IpNet, u32);

impl Route {
    /// The route's identity in [`RoutingConfig::tracked`].
    pub fn id(&self) -> RouteId {
        (self.table, self.to, self.effective_metric())
    }
}

impl RoutingConfig {
    /// The track a route is tied to, if any.
    pub fn track_of(&self, route: &Route) -> Option<&str> {
        if self.tracked.is_empty() {
            return None;
        }
        self.tracked.get(&route.id()).map(String::as_str)
    }
}

/// How a track probes its uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackCheck {
    /// A TCP connection to `target` completes.
    Tcp,
    /// A DNS query to `target` gets an answer with RCODE 0.
    Dns,
    /// An ICMP echo to `target` gets a reply (unprivileged ping socket).
    Icmp,
}

impl TrackCheck {
    /// The name as configured.
    pub fn name(self) -> &'static str {
        match self {
            TrackCheck::Tcp => "tcp",
            TrackCheck::Dns => "dns",
            TrackCheck::Icmp => "icmp",
        }
    }
}

impl Track {
    /// The target as configured: `ADDR:PORT`, or just the address for icmp.
    pub fn target_text(&self) -> String {
        match self.check {
            TrackCheck::Icmp => self.target.ip().to_string(),
            _ => self.target.to_string(),
        }
    }
}

/// A validated `[[track]]`: a probe of one uplink that always leaves through `via`/`dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// Unique name, what `[[route]] track` refers to.
    pub name: String,
    /// The kind of probe.
    pub check: TrackCheck,
    /// Where the probe goes (port 0 for icmp).
    pub target: SocketAddr,
    /// The uplink's gateway, the probe's next hop whatever the main table says.
    pub via: IpAddr,
    /// The uplink's device.
    pub dev: String,
    /// Time between probes.
    pub interval: Duration,
    /// How long one probe may take before it counts as failed.
    pub timeout: Duration,
    /// Consecutive failures that take the track down.
    pub fall: u32,
    /// Consecutive successes that bring it back up.
    pub rise: u32,
    /// The private table holding the probe's route to `target`.
    pub table: u32,
    /// The socket mark of the probe, and of the rule that sends it to `table`.
    pub fwmark: u32,
    /// The priority of that rule.
    pub priority: u32,
}

/// A route's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RouteKind {
    /// Forward via a gateway or out of a device.
    #[default]
    Unicast,
    /// Drop silently.
    Blackhole,
    /// Drop with ICMP host unreachable.
    Unreachable,
    /// Drop with ICMP administratively prohibited.
    Prohibit,
    /// Continue policy routing with the next rule.
    Throw,
}

/// One path of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHopConfig {
    /// Gateway.
    pub via: Option<IpAddr>,
    /// Output device.
    pub dev: Option<String>,
    /// Relative weight, 1..=256 (default 1).
    pub weight: u16,
    /// Gateway is on-link.
    pub onlink: bool,
}

/// A validated `[[route]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix (`"default"` = 0.0.0.0/0).
    pub to: IpNet,
    /// Gateway, same family as `to`.
    pub via: Option<IpAddr>,
    /// Output device.
    pub dev: Option<String>,
    /// Metric; `None` = the kernel's default (0 for IPv4, 1024 for IPv6).
    pub metric: Option<u32>,
    /// Table id (default 254, main).
    pub table: u32,
    /// Route type.
    pub kind: RouteKind,
    /// Preferred source address, same family as `to`.
    pub src: Option<IpAddr>,
    /// Gateway is on-link.
    pub onlink: bool,
    /// Path MTU.
    pub mtu: Option<u32>,
    /// Multipath next hops (instead of `via`/`dev`).
    pub nexthops: Vec<NextHopConfig>,
}

impl Route {
    /// The metric the kernel will record (explicit, or the family's default).
    pub fn effective_metric(&self) -> u32 {
        self.metric.unwrap_or(match self.to {
            IpNet::V4(_) => 0,
            IpNet::V6(_) => 1024,
        })
    }
}

/// Which address families a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleFamily {
    /// IPv4 only.
    Ipv4,
    /// IPv6 only.
    Ipv6,
    /// One rule for each family.
    Both,
}

/// A validated `[[route_rule]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRule {
    /// Priority (`pref`).
    pub priority: u32,
    /// Families: from the prefixes when given, else `family`, else both.
    pub family: RuleFamily,
    /// Source prefix.
    pub from: Option<IpNet>,
    /// Destination prefix.
    pub to: Option<IpNet>,
    /// Input interface.
    pub iif: Option<String>,
    /// Output interface.
    pub oif: Option<String>,
    /// Firewall mark and optional mask.
    pub fwmark: Option<(u32, Option<u32>)>,
    /// Table to look up.
    pub table: u32,
}
