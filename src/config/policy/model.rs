//! The validated `[policy]` model: plain Rust types, immutable, nothing of TOML inside.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

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
    /// `log_limit`: the rate all of the zone's logs share (its drop logs and the logs of
    /// rules from it, or to it for the router's own traffic); `None` = the default rate.
    pub log_limit: Option<Rate>,
    /// SNAT traffic leaving through this zone to these addresses (`snat`), at most one per
    /// IP version; a version with an address here is not masqueraded.
    pub snat: Vec<IpAddr>,
    /// Conntrack helpers (names of `[policy] helpers`) attached to new connections from this
    /// zone on the helpers' ports.
    pub helpers: Vec<String>,
    /// `masq_src`: the zone's source NAT (masquerade and `snat`) only for these sources;
    /// per IP version, empty for a version = any source of it.
    pub masq_src: Vec<MasqAddress>,
    /// `masq_dest`: the zone's source NAT only for these destinations (as `masq_src`).
    pub masq_dest: Vec<MasqAddress>,
    /// `masq_allow_invalid`: forwarded packets of `ct state invalid` leaving through this
    /// zone are not dropped (they go on to the rules and the default).
    pub masq_allow_invalid: bool,
}

/// One entry of `masq_src` / `masq_dest`: the address must be in `net`, or with `negate`
/// (`"!10.0.0.1"`) must not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MasqAddress {
    /// The prefix (a host is a full-length prefix).
    pub net: IpNet,
    /// `!`: the address must lie outside `net`.
    pub negate: bool,
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
    /// `dynamic = true`: other programs (fail2ban, CrowdSec, dnsmasq's nftset) add elements
    /// too, which are kept; only the config's elements are edgenetd's to add and delete.
    pub dynamic: bool,
    /// `timeout`: how long an element others add without a timeout of their own lives
    /// (dynamic sets only; the config's elements never expire).
    pub timeout: Option<Duration>,
    /// `size`: the most elements the kernel takes (dynamic sets only).
    pub size: Option<u32>,
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
    /// TCP and UDP (`protocol = ["tcp", "udp"]`): the same ports of either.
    TcpUdp,
}

impl Protocol {
    /// The single protocols this one stands for (TCP and UDP for [`Protocol::TcpUdp`]).
    pub fn each(self) -> Vec<Protocol> {
        match self {
            Protocol::TcpUdp => vec![Protocol::Tcp, Protocol::Udp],
            p => vec![p],
        }
    }
}

/// One entry of `to_addresses` or `from_addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AddressMatch {
    /// An address or prefix (IPv4 or IPv6).
    Prefix(ipnet::IpNet),
    /// A named set (`"@name"`).
    Set(String),
    /// An IPv6 suffix under any prefix: `address & mask == addr` (`"::1234/::ffff:ffff:ffff:ffff"`
    /// or `"::1234/-64"`), for a host whose delegated prefix changes.
    Suffix {
        /// The address bits that must match (zero outside `mask`).
        addr: Ipv6Addr,
        /// The bits compared.
        mask: Ipv6Addr,
    },
}

/// `set_mark = "0x10/0xff"`: the packet mark becomes `mark & !mask | value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MarkSet {
    /// The bits set (always within `mask`).
    pub value: u32,
    /// The bits of the mark the rule owns (all ones for a bare value); never zero.
    pub mask: u32,
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
    /// The packets it selects.
    pub matches: super::RuleMatch,
    /// Mark matching packets before routing (`set_mark`), so `[[route_rule]] fwmark` can
    /// steer them.
    pub set_mark: Option<MarkSet>,
    /// Rewrite the DSCP of matching packets (`set_dscp`, fw4's DSCP target), in the mangle
    /// chain of the rule's path: forward for a `to` zone, input for `to = "self"`, output
    /// for `from = "self"`, prerouting otherwise.
    pub set_dscp: Option<u8>,
    /// What matching traffic gets; `None` (no `action`): the rule counts (and logs, marks)
    /// and decides nothing, evaluation goes on with the next rule (fw4's rule without
    /// `target`).
    pub action: Option<Action>,
    /// Log matching packets (rate-limited), with `log_prefix` or else the rule's name as
    /// prefix.
    pub log: bool,
    /// The log prefix (`log_prefix`, which implies `log`); `None` = `"<name>: "`.
    pub log_prefix: Option<String>,
    /// `log_limit`: the rate of its log (over its zone's `log_limit`); `None` = the zone's
    /// or the default rate.
    pub log_limit: Option<Rate>,
    /// Only packets within this rate match (the rest fall through to later rules).
    pub limit: Option<Rate>,
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
    /// TCP, UDP, or both ([`Protocol::TcpUdp`]).
    pub protocol: Protocol,
    /// The router's port (the first of a range).
    pub port: u16,
    /// The last of the router's ports (`port` for a single port; `port = "8000-8100"`).
    pub port_end: u16,
    /// The inner host and its port; with a range, the first port of the same-size range
    /// the router's ports map to in order.
    pub to: SocketAddr,
    /// Only sources among these are forwarded (`from_addresses`); empty = any source.
    pub from_addresses: Vec<AddressMatch>,
    /// Hairpin (on by default): hosts of the inner host's own zone (the zone whose networks,
    /// or whose interfaces' connected networks, hold `to`) reach it through the router's
    /// addresses on the `from` zone, as fw4 reflects from the redirect's destination zone.
    pub reflection: bool,
    /// More zones whose hosts reach it by hairpin (`reflection_zones`, fw4's
    /// `reflection_zone`); empty = the inner host's zone only.
    pub reflection_zones: Vec<String>,
    /// `reflection_src = "external"`: reflected traffic reaches the inner host from the
    /// router's address on the `from` zone (the address it was sent to), not from the
    /// router's address towards the inner host (masquerade, `"internal"`, the default).
    pub reflection_external: bool,
    /// Only traffic to these destinations is forwarded (`to_addresses`, fw4's `src_dip`),
    /// instead of traffic to any of the router's addresses; reflection then takes them too.
    pub to_addresses: Vec<AddressMatch>,
}

/// `[[policy.port_forward]]` whose `to` is `"self"`: fw4's redirect to the router itself
/// (`dest_port` without `dest_ip`), e.g. transparent DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Unique name.
    pub name: String,
    /// The zone whose traffic is redirected.
    pub from: String,
    /// TCP, UDP, or both ([`Protocol::TcpUdp`]).
    pub protocol: Protocol,
    /// The destination ports redirected (first, last); `None` = every port of the protocol.
    pub ports: Option<(u16, u16)>,
    /// The router's port they go to (`to = "self:PORT"`); `None` keeps the port.
    pub to_port: Option<u16>,
    /// Only sources among these (`from_addresses`); empty = any source.
    pub from_addresses: Vec<AddressMatch>,
    /// Only traffic to these destinations (`to_addresses`, fw4's `src_dip`); empty = to
    /// any address, the router's or not.
    pub to_addresses: Vec<AddressMatch>,
}

/// What a `[[policy.nat]]` entry does to the connections it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatAction {
    /// `action = "snat"`: the source becomes `address` (and `port`, if given).
    Snat {
        /// `snat_address`.
        address: IpAddr,
        /// `snat_port`; `None` keeps the source port (unless it clashes).
        port: Option<u16>,
    },
    /// `action = "masquerade"`: the source becomes the outgoing interface's address.
    Masquerade,
    /// `action = "accept"`: no source NAT at all (the zone's masquerade or SNAT skipped).
    Accept,
}

/// `[[policy.nat]]` (fw4's `config nat`): source NAT of the matching new connections,
/// before the zones' masquerade and SNAT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatRule {
    /// Unique name (shared with rules and port forwards).
    pub name: String,
    /// The packets it selects, with a rule's keys: `to` is the zone the traffic leaves
    /// through (fw4's `src`), never `"self"`; `from` is never `"self"`.
    pub matches: super::RuleMatch,
    /// What it does.
    pub action: NatAction,
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
    /// Port forwards to the router itself (`to = "self"`), in config order.
    pub redirects: Vec<Redirect>,
    /// `[[policy.nat]]` entries, in config order.
    pub nat: Vec<NatRule>,
    /// The forward chain admits connections DNATed by other tables too (by default only
    /// those edgenetd DNATed, which carry its conntrack mark bit).
    pub forward_foreign_dnat: bool,
    /// Established forwarded connections are offloaded to a flowtable over the zones'
    /// interfaces (their packets skip the forward path).
    pub flow_offload: bool,
    /// The flowtable asks the drivers for hardware offload (`flags offload`).
    pub flow_offload_hw: bool,
    /// Declared conntrack helpers (`[policy] helpers`), by config name (see
    /// [`KNOWN_HELPERS`](super::KNOWN_HELPERS)).
    pub helpers: Vec<String>,
}

/// One kernel conntrack helper and the traffic it follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelperPort {
    /// The kernel's name of the helper (`ftp`, `Q.931`).
    pub kernel: &'static str,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The server port of the connections it follows.
    pub port: u16,
}
