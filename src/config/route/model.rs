//! The validated route and rule types: plain Rust, no TOML inside.

use std::net::IpAddr;

use ipnet::IpNet;

/// The main routing table's id.
pub const TABLE_MAIN: u32 = 254;

/// Validated routes and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingConfig {
    /// Every `[[route]]`, in file order.
    pub routes: Vec<Route>,
    /// Every `[[route_rule]]`, in file order.
    pub rules: Vec<RouteRule>,
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
