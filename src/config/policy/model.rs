//! The validated `[policy]` model: plain Rust types, immutable, nothing of TOML inside.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use ipnet::IpNet;

/// A verdict for traffic no rule decided on, or a rule's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Let it through.
    Accept,
    /// Drop silently.
    Drop,
    /// Refuse: TCP reset for TCP, ICMP port unreachable otherwise.
    Reject,
}

/// IP version of a named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetFamily {
    /// `type = "ipv4"`.
    Ipv4,
    /// `type = "ipv6"`.
    Ipv6,
}

/// `[policy.zone.<name>]`: traffic arriving on its interfaces and/or from its networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The zone's name.
    pub name: String,
    /// Interfaces: exact names, or a stem ending in `*` that matches every name starting
    /// with it (also interfaces that appear later).
    pub interfaces: Vec<String>,
    /// Source prefixes (IPv4 and/or IPv6).
    pub networks: Vec<IpNet>,
    /// SNAT IPv4 traffic leaving through this zone to the router's address there.
    pub masquerade: bool,
    /// SNAT IPv6 traffic leaving through this zone to the router's address there.
    pub masquerade6: bool,
    /// Clamp the MSS of TCP SYNs forwarded through this zone's interfaces to the route's MTU.
    pub mtu_fix: bool,
    /// Log (rate-limited, prefixed with the zone's name) what the default verdict drops of
    /// traffic from this zone.
    pub log_drops: bool,
}

impl Zone {
    /// True when interface `name` belongs to the zone (exactly or by a `*` stem).
    pub fn has_interface(&self, name: &str) -> bool {
        self.interfaces.iter().any(|i| match i.strip_suffix('*') {
            Some(stem) => name.starts_with(stem),
            None => i == name,
        })
    }
}

/// `[policy.set.<name>]`: a named address set that rules can match and that can change by
/// element without reloading the ruleset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedSet {
    /// The set's name (`@name` in rules).
    pub name: String,
    /// Its address family.
    pub family: SetFamily,
    /// Addresses and prefixes, as written.
    pub elements: Vec<IpNet>,
}

/// Where a rule's traffic comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Anywhere (`from` omitted).
    Any,
    /// The router itself (`from = "self"`, an extension): the rule applies to output.
    Router,
    /// A zone.
    Zone(String),
    /// A named set (`from = "@name"`).
    Set(String),
    /// Source prefixes.
    Prefixes(Vec<IpNet>),
}

/// Where a rule's traffic goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Anywhere: to the router and through it (`to` omitted).
    Any,
    /// The router itself (`to = "self"`).
    Router,
    /// Forwarded into a zone.
    Zone(String),
}

/// A rule's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Any protocol.
    Any,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (IPv4).
    Icmp,
    /// ICMPv6.
    Icmpv6,
}

/// A rate: `count` packets per `per_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Packets.
    pub count: u64,
    /// Per this many seconds (1, 60, 3600 or 86400).
    pub per_seconds: u64,
}

/// `[[policy.rule]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// Unique name: the log prefix and the rule's comment in nftables.
    pub name: String,
    /// Source.
    pub from: Source,
    /// Destination.
    pub to: Destination,
    /// Protocol.
    pub protocol: Protocol,
    /// Destination port ranges (inclusive; a single port is `(p, p)`), tcp/udp only.
    pub ports: Vec<(u16, u16)>,
    /// ICMP / ICMPv6 types (icmp/icmpv6 only).
    pub icmp_types: Vec<u8>,
    /// What matching traffic gets.
    pub action: Action,
    /// Log matching packets (rate-limited), with `log_prefix` or else the rule's name as
    /// prefix.
    pub log: bool,
    /// The log prefix (`log_prefix`, which implies `log`); `None` = `"<name>: "`.
    pub log_prefix: Option<String>,
    /// Only packets within this rate match (the rest fall through to later rules).
    pub limit: Option<Rate>,
    /// Test hook (fault-injection builds only): the rule's group is made one the kernel
    /// refuses, to exercise fail-closed isolation.
    pub inject_kernel_reject: bool,
}

/// `[[policy.forward]]`: all traffic from one zone to another is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneForward {
    /// Source zone.
    pub from: String,
    /// Destination zone.
    pub to: String,
}

/// `[[policy.port_forward]]`: DNAT of a port on the router's addresses to an inner host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortForward {
    /// Unique name.
    pub name: String,
    /// The zone it is exposed to (other zones reach it by hairpin).
    pub from: String,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The router's port.
    pub port: u16,
    /// The inner host and port.
    pub to: SocketAddr,
    /// Hairpin (on by default): hosts in other zones reach the inner host through the
    /// router's addresses on the `from` zone.
    pub reflection: bool,
}

/// The validated `[policy]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Default for traffic to the router.
    pub input: Action,
    /// Default for traffic through the router.
    pub forward: Action,
    /// Default for traffic from the router.
    pub output: Action,
    /// Zones by name.
    pub zones: BTreeMap<String, Zone>,
    /// Named sets by name.
    pub sets: BTreeMap<String, NamedSet>,
    /// Rules in order (first match wins).
    pub rules: Vec<PolicyRule>,
    /// Zone-to-zone forwards.
    pub forwards: Vec<ZoneForward>,
    /// Port forwards.
    pub port_forwards: Vec<PortForward>,
    /// The forward chain admits connections DNATed by other tables too (by default only
    /// those edgenetd DNATed, which carry its conntrack mark bit).
    pub forward_foreign_dnat: bool,
    /// Established forwarded connections are offloaded to a flowtable over the zones'
    /// interfaces (their packets skip the forward path).
    pub flow_offload: bool,
    /// The flowtable asks the drivers for hardware offload (`flags offload`).
    pub flow_offload_hw: bool,
}
