//! Plain descriptions of routes and routing rules, in the kernel's terms but with device
//! *names*: what the controller wants and what a dump found are both expressed as these, so the
//! planner can compare them without knowing anything about netlink (or TOML).

use std::cmp::Ordering;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// The main routing table (`RT_TABLE_MAIN`).
pub const TABLE_MAIN: u32 = 254;
/// The default metric the kernel gives IPv6 routes added without one (`IP6_RT_PRIO_USER`).
pub const IPV6_DEFAULT_METRIC: u32 = 1024;

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// AF_INET.
    Ipv4,
    /// AF_INET6.
    Ipv6,
}

impl Family {
    /// The family of a prefix.
    pub fn of_net(net: &IpNet) -> Family {
        match net {
            IpNet::V4(_) => Family::Ipv4,
            IpNet::V6(_) => Family::Ipv6,
        }
    }

    /// The family of an address.
    pub fn of_addr(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::Ipv4,
            IpAddr::V6(_) => Family::Ipv6,
        }
    }

    /// The metric the kernel assumes when a route gives none (0 for IPv4, 1024 for IPv6).
    pub fn default_metric(self) -> u32 {
        match self {
            Family::Ipv4 => 0,
            Family::Ipv6 => IPV6_DEFAULT_METRIC,
        }
    }

    /// The metric the kernel records for a route given `metric`: IPv6 has no metric 0 (the
    /// kernel turns it into 1024), IPv4 keeps what it is given.
    pub fn kernel_metric(self, metric: u32) -> u32 {
        match (self, metric) {
            (Family::Ipv6, 0) => IPV6_DEFAULT_METRIC,
            (_, m) => m,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        })
    }
}

/// A route's type (`rtm_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum RouteType {
    /// A gateway or directly connected route.
    #[default]
    Unicast,
    /// Silently drops packets.
    Blackhole,
    /// Drops packets with ICMP "host unreachable".
    Unreachable,
    /// Drops packets with ICMP "administratively prohibited".
    Prohibit,
    /// Ends the lookup in this table: policy routing continues with the next rule.
    Throw,
    /// A type edgenetd never installs but may find on a route carrying its protocol
    /// (e.g. `local`); such a route is only ever deleted.
    Other(u8),
}

impl RouteType {
    /// True for the types that forward packets somewhere (and so take a gateway or device).
    pub fn forwards(self) -> bool {
        self == RouteType::Unicast
    }
}

impl fmt::Display for RouteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteType::Unicast => f.write_str("unicast"),
            RouteType::Blackhole => f.write_str("blackhole"),
            RouteType::Unreachable => f.write_str("unreachable"),
            RouteType::Prohibit => f.write_str("prohibit"),
            RouteType::Throw => f.write_str("throw"),
            RouteType::Other(n) => write!(f, "type-{n}"),
        }
    }
}

/// One path of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Gateway address; `None` for a directly connected path.
    pub via: Option<IpAddr>,
    /// Output device; `None` lets the kernel pick it from the gateway.
    pub dev: Option<String>,
    /// Relative weight, 1..=256 (`ip route`'s `weight`; the kernel stores weight - 1).
    pub weight: u16,
    /// The gateway is on the link even if no local prefix covers it.
    pub onlink: bool,
}

/// A route as edgenetd installs it or found it in a dump.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteSpec {
    /// Destination prefix (host bits zero); its family is the route's family.
    pub dst: IpNet,
    /// Routing table id (254 = main).
    pub table: u32,
    /// Metric (`priority`): part of the route's identity in Linux.
    pub metric: u32,
    /// Route type.
    pub kind: RouteType,
    /// Gateway of a single-path route.
    pub via: Option<IpAddr>,
    /// Output device of a single-path route, by name.
    pub dev: Option<String>,
    /// Preferred source address (`src`).
    pub src: Option<IpAddr>,
    /// Single-path gateway is on-link.
    pub onlink: bool,
    /// Path MTU (`mtu` metric).
    pub mtu: Option<u32>,
    /// Multipath next hops; non-empty means `via`/`dev`/`onlink` are unused.
    pub nexthops: Vec<NextHop>,
    /// `rtm_protocol`: marks who owns the route.
    pub protocol: u8,
}

impl RouteSpec {
    /// A unicast route to `dst` in the main table with the family's default metric and nothing
    /// else set; fill in the rest with struct update syntax.
    pub fn new(dst: IpNet, protocol: u8) -> RouteSpec {
        let family = Family::of_net(&dst);
        RouteSpec {
            dst: dst.trunc(),
            table: TABLE_MAIN,
            metric: family.default_metric(),
            kind: RouteType::Unicast,
            via: None,
            dev: None,
            src: None,
            onlink: false,
            mtu: None,
            nexthops: Vec::new(),
            protocol,
        }
    }

    /// The route's family.
    pub fn family(&self) -> Family {
        Family::of_net(&self.dst)
    }

    /// What makes this route distinct from every other in the kernel: family, table, prefix
    /// and metric. Two routes with one key cannot both exist (without `NLM_F_APPEND`), so a
    /// route whose metric changes is a different route (delete + add), while any other change
    /// is a replace of the same route.
    pub fn key(&self) -> RouteKey {
        let family = self.family();
        RouteKey {
            family,
            table: self.table,
            dst: self.dst,
            metric: family.kernel_metric(self.metric),
        }
    }

    /// True when `installed` (from a dump) already is this desired route, so no write is
    /// needed. Compares every attribute edgenetd sets; an attribute the desired route leaves to
    /// the kernel (a device chosen from the gateway, a reject route's `lo`) is not compared.
    pub fn is_satisfied_by(&self, installed: &RouteSpec) -> bool {
        self.key() == installed.key()
            && self.kind == installed.kind
            && self.protocol == installed.protocol
            && self.src == installed.src
            && self.mtu == installed.mtu
            && if self.kind.forwards() {
                self.via == installed.via
                    && dev_matches(&self.dev, &installed.dev)
                    && self.onlink == installed.onlink
                    && self.nexthops.len() == installed.nexthops.len()
                    && self
                        .nexthops
                        .iter()
                        .zip(&installed.nexthops)
                        .all(|(want, have)| {
                            want.via == have.via
                                && dev_matches(&want.dev, &have.dev)
                                && want.weight == have.weight
                                && want.onlink == have.onlink
                        })
            } else {
                true
            }
    }
}

fn dev_matches(want: &Option<String>, have: &Option<String>) -> bool {
    match want {
        None => true,
        Some(_) => want == have,
    }
}

/// A route's identity in the kernel (see [`RouteSpec::key`]); orders plans stably.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteKey {
    /// Address family.
    pub family: Family,
    /// Routing table id.
    pub table: u32,
    /// Destination prefix.
    pub dst: IpNet,
    /// Metric.
    pub metric: u32,
}

impl Ord for RouteKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (
            self.family,
            self.table,
            self.dst.addr(),
            self.dst.prefix_len(),
            self.metric,
        )
            .cmp(&(
                other.family,
                other.table,
                other.dst.addr(),
                other.dst.prefix_len(),
                other.metric,
            ))
    }
}

impl PartialOrd for RouteKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Writes a table id as `ip` does: `main`, `local`, `default` or the number.
pub fn fmt_table(table: u32, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match table {
        254 => f.write_str("main"),
        255 => f.write_str("local"),
        253 => f.write_str("default"),
        n => write!(f, "{n}"),
    }
}

struct Table(u32);

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_table(self.0, f)
    }
}

impl fmt::Display for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} table {} metric {}",
            self.dst,
            Table(self.table),
            self.metric
        )
    }
}

/// `ip route` syntax, e.g. `10.20.0.0/16 via 192.168.1.1 dev eth1 table 100 metric 100 proto 190`.
impl fmt::Display for RouteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind != RouteType::Unicast {
            write!(f, "{} ", self.kind)?;
        }
        write!(f, "{}", self.dst)?;
        if let Some(via) = self.via {
            write!(f, " via {via}")?;
        }
        if let Some(dev) = &self.dev {
            write!(f, " dev {dev}")?;
        }
        write!(f, " table {} metric {}", Table(self.table), self.metric)?;
        if let Some(src) = self.src {
            write!(f, " src {src}")?;
        }
        if self.onlink {
            f.write_str(" onlink")?;
        }
        if let Some(mtu) = self.mtu {
            write!(f, " mtu {mtu}")?;
        }
        for hop in &self.nexthops {
            f.write_str(" nexthop")?;
            if let Some(via) = hop.via {
                write!(f, " via {via}")?;
            }
            if let Some(dev) = &hop.dev {
                write!(f, " dev {dev}")?;
            }
            write!(f, " weight {}", hop.weight)?;
            if hop.onlink {
                f.write_str(" onlink")?;
            }
        }
        write!(f, " proto {}", self.protocol)
    }
}

/// What a rule does with a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleAction {
    /// Look the packet up in `table` (the only action edgenetd installs).
    Lookup,
    /// Any other `FR_ACT_*` found on a rule carrying edgenetd's protocol (only ever deleted).
    Other(u8),
}

/// A routing policy rule (`ip rule`).
///
/// Rules have no identity besides their whole content: the kernel happily holds two equal
/// rules and has no replace, so a changed rule is an add of the new one and a delete of the
/// old one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleSpec {
    /// Priority (`pref`); lower is evaluated first.
    pub priority: u32,
    /// Address family of the rule.
    pub family: Family,
    /// Source prefix to match.
    pub from: Option<IpNet>,
    /// Destination prefix to match.
    pub to: Option<IpNet>,
    /// Input interface name to match.
    pub iif: Option<String>,
    /// Output interface name to match.
    pub oif: Option<String>,
    /// Firewall mark to match.
    pub fwmark: Option<u32>,
    /// Mask for `fwmark`; the kernel uses all ones when a mark is given without one.
    pub fwmask: Option<u32>,
    /// Table to look up.
    pub table: u32,
    /// What the rule does.
    pub action: RuleAction,
    /// `FRA_PROTOCOL`: marks who owns the rule.
    pub protocol: u8,
}

impl RuleSpec {
    /// A lookup rule with nothing to match yet.
    pub fn new(family: Family, priority: u32, table: u32, protocol: u8) -> RuleSpec {
        RuleSpec {
            priority,
            family,
            from: None,
            to: None,
            iif: None,
            oif: None,
            fwmark: None,
            fwmask: None,
            table,
            action: RuleAction::Lookup,
            protocol,
        }
    }

    /// The form a dump shows: prefixes truncated, a mark's implicit all-ones mask made explicit.
    pub fn normalized(mut self) -> RuleSpec {
        self.from = self.from.map(|n| n.trunc());
        self.to = self.to.map(|n| n.trunc());
        if self.fwmark.is_some_and(|m| m != 0) && self.fwmask.is_none() {
            self.fwmask = Some(u32::MAX);
        }
        if self.fwmark == Some(0) && self.fwmask.is_none() {
            self.fwmark = None;
        }
        self
    }
}

/// `ip rule` syntax, e.g. `1000: from 10.0.5.0/24 lookup 100 proto 190`.
impl fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.priority, self.family)?;
        match self.from {
            Some(from) => write!(f, " from {from}")?,
            None => f.write_str(" from all")?,
        }
        if let Some(to) = self.to {
            write!(f, " to {to}")?;
        }
        if let Some(iif) = &self.iif {
            write!(f, " iif {iif}")?;
        }
        if let Some(oif) = &self.oif {
            write!(f, " oif {oif}")?;
        }
        if let Some(mark) = self.fwmark {
            write!(f, " fwmark {mark:#x}")?;
            if let Some(mask) = self.fwmask.filter(|m| *m != u32::MAX) {
                write!(f, "/{mask:#x}")?;
            }
        }
        match self.action {
            RuleAction::Lookup => write!(f, " lookup {}", Table(self.table))?,
            RuleAction::Other(a) => write!(f, " action {a}")?,
        }
        write!(f, " proto {}", self.protocol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn ipv6_routes_default_to_metric_1024_and_prefixes_are_truncated() {
        let r = RouteSpec::new(net("2001:db8::1/64"), 190);
        assert_eq!(r.metric, 1024);
        assert_eq!(r.dst, net("2001:db8::/64"));
        assert_eq!(RouteSpec::new(net("10.0.0.0/8"), 190).metric, 0);
    }

    #[test]
    fn bug_8a_ipv6_metric_0_is_the_same_route_as_metric_1024() {
        let zero = RouteSpec {
            metric: 0,
            ..RouteSpec::new(net("2001:db8::/64"), 190)
        };
        let kernel = RouteSpec::new(net("2001:db8::/64"), 190);
        assert_eq!(zero.key(), kernel.key());
        assert!(zero.is_satisfied_by(&kernel));
        let v4 = RouteSpec::new(net("10.0.0.0/8"), 190);
        assert_ne!(
            v4.key(),
            RouteSpec {
                metric: 1024,
                ..v4.clone()
            }
            .key()
        );
    }

    #[test]
    fn a_device_left_to_the_kernel_is_not_compared() {
        let want = RouteSpec {
            via: Some("192.0.2.1".parse().unwrap()),
            ..RouteSpec::new(net("10.1.0.0/16"), 190)
        };
        let have = RouteSpec {
            dev: Some("eth0".into()),
            ..want.clone()
        };
        assert!(want.is_satisfied_by(&have));
        let want_dev = RouteSpec {
            dev: Some("eth1".into()),
            ..want.clone()
        };
        assert!(!want_dev.is_satisfied_by(&have));
        let have_mtu = RouteSpec {
            mtu: Some(1400),
            ..have
        };
        assert!(
            !want.is_satisfied_by(&have_mtu),
            "an MTU set by hand is drift"
        );
    }

    #[test]
    fn reject_routes_ignore_the_kernels_lo_device() {
        let want = RouteSpec {
            kind: RouteType::Unreachable,
            ..RouteSpec::new(net("2001:db8:1::/48"), 190)
        };
        let have = RouteSpec {
            dev: Some("lo".into()),
            ..want.clone()
        };
        assert!(want.is_satisfied_by(&have));
    }

    #[test]
    fn display_is_ip_route_syntax() {
        let r = RouteSpec {
            via: Some("192.168.1.1".parse().unwrap()),
            dev: Some("eth1".into()),
            table: 100,
            metric: 100,
            ..RouteSpec::new(net("10.20.0.0/16"), 190)
        };
        assert_eq!(
            r.to_string(),
            "10.20.0.0/16 via 192.168.1.1 dev eth1 table 100 metric 100 proto 190"
        );
        let rule = RuleSpec {
            from: Some(net("10.0.5.0/24")),
            fwmark: Some(0x10),
            ..RuleSpec::new(Family::Ipv4, 1000, 254, 190)
        }
        .normalized();
        assert_eq!(rule.fwmask, Some(u32::MAX));
        assert_eq!(
            rule.to_string(),
            "1000: ipv4 from 10.0.5.0/24 fwmark 0x10 lookup main proto 190"
        );
    }
}
