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

/// The IP versions a zone, forward or rule is restricted to (`family`, fw4's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Family {
    /// Both (`family = "any"`, or no `family`).
    #[default]
    Any,
    /// IPv4 only (`family = "ipv4"`).
    Ipv4,
    /// IPv6 only (`family = "ipv6"`).
    Ipv6,
}

impl Family {
    /// (IPv4 allowed, IPv6 allowed).
    pub fn versions(self) -> (bool, bool) {
        match self {
            Family::Any => (true, true),
            Family::Ipv4 => (true, false),
            Family::Ipv6 => (false, true),
        }
    }

    /// The name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Family::Any => "any",
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }
}

/// `[policy.zone.<name>]`: traffic arriving on its interfaces and/or from its networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The zone's name.
    pub name: String,
    /// Interfaces: exact names, or a stem ending in `*` (fw4's `+`) that matches every name
    /// starting with it (also interfaces that appear later); `"*"` alone is every interface.
    pub interfaces: Vec<String>,
    /// Interfaces left out (`"!eth1"`, `"!wg+"`), of the same forms: a packet on one of
    /// them is not the zone's even when `interfaces` holds it.
    pub excluded_interfaces: Vec<String>,
    /// Source prefixes (IPv4 and/or IPv6; only of `family`'s version when it has one).
    pub networks: Vec<IpNet>,
    /// Source addresses under non-contiguous masks (`networks = ["10.0.0.1/255.0.0.255"]`),
    /// alternatives to `networks`.
    pub masked_networks: Vec<MaskedAddr>,
    /// `family`: the zone's interfaces, networks, forwards, rules, masquerade and drop logs
    /// see only this IP version's traffic.
    pub family: Family,
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
    /// True when the zone's `family` admits `ip`'s IP version.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let (v4, v6) = self.family.versions();
        if ip.is_ipv4() { v4 } else { v6 }
    }

    /// True when interface `name` belongs to the zone (exactly or by a `*` stem, and not
    /// left out).
    pub fn has_interface(&self, name: &str) -> bool {
        let matches = |i: &String| match i.strip_suffix('*') {
            Some(stem) => name.starts_with(stem),
            None => i == name,
        };
        self.interfaces.iter().any(matches) && !self.excluded_interfaces.iter().any(matches)
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
    /// Addresses and prefixes, as written: those of `elements`, then those of `loadfile`.
    pub elements: Vec<IpNet>,
    /// `dynamic = true`: other programs (fail2ban, CrowdSec, dnsmasq's nftset) add elements
    /// too, which are kept; only the config's elements are edgenetd's to add and delete.
    pub dynamic: bool,
    /// `timeout`: how long an element others add without a timeout of their own lives
    /// (dynamic sets only; the config's elements never expire).
    pub timeout: Option<Duration>,
    /// `size`: the most elements the kernel takes (dynamic sets only).
    pub size: Option<u32>,
    /// `match` (fw4's ipset `match`): the set holds tuples of addresses, prefixes and ports,
    /// its key these fields in this order; empty: a set of addresses (`elements`).
    pub tuple: Vec<TupleField>,
    /// The tuples of a set with a `match`, each one value per field in the fields' order:
    /// those of `elements` and `loadfile`, sorted, once each.
    pub tuples: Vec<Vec<TupleValue>>,
}

impl NamedSet {
    /// True when a field of the set's `match` holds prefixes (`net`): the kernel's set is
    /// then a concatenated interval set.
    pub fn has_prefix_field(&self) -> bool {
        self.tuple.iter().any(|f| f.kind == TupleKind::Net)
    }
}

/// One field of an address·port set's key (fw4's ipset `match`: `src_ip`, `dest_net`,
/// `dest_port`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TupleField {
    /// What the field holds.
    pub kind: TupleKind,
    /// Taken from the packet's source (`src_`, and fw4's default), else its destination.
    pub source: bool,
}

impl TupleField {
    /// True for an address field (`ip` or `net`), false for a port.
    pub fn is_address(&self) -> bool {
        self.kind != TupleKind::Port
    }
}

/// What one field of an address·port set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TupleKind {
    /// `ip`: one address.
    Ip,
    /// `net`: a prefix (an address is its host prefix).
    Net,
    /// `port`: one port.
    Port,
}

/// One value of a tuple of an address·port set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TupleValue {
    /// An `ip` field's address (a host prefix) or a `net` field's prefix (host bits clear).
    Address(IpNet),
    /// A `port` field's port.
    Port(u16),
}

/// `ipset = "name"` (fw4's rule `ipset`): the packet's address·port pair is (or, negated,
/// is not) in the named set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IpsetMatch {
    /// The set (one with a `match`).
    pub set: String,
    /// The set's fields, with the directions the rule gave (`"name dst src"`) or the set's.
    pub fields: Vec<TupleField>,
    /// `"!name"`: the pair is not in the set.
    pub negate: bool,
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
    /// Source addresses of which some are under a non-contiguous mask (`from =
    /// "10.0.0.1/255.0.0.255"`, fw4's masked `src_ip`): any of them matches.
    Addresses(Vec<AddressMatch>),
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
    /// Another IP protocol, by its number (`protocol = "gre"` or `47`): `meta l4proto`,
    /// no ports.
    Other(u8),
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
    /// An IPv4 address under a non-contiguous mask (`"10.0.0.1/255.0.0.255"`; IPv6 ones
    /// are [`AddressMatch::Suffix`]).
    Masked(MaskedAddr),
    /// An IPv6 suffix under any prefix: `address & mask == addr` (`"::1234/::ffff:ffff:ffff:ffff"`
    /// or `"::1234/-64"`), for a host whose delegated prefix changes.
    Suffix {
        /// The address bits that must match (zero outside `mask`).
        addr: Ipv6Addr,
        /// The bits compared.
        mask: Ipv6Addr,
    },
}

/// An address under a non-contiguous mask (fw4's `"192.168.1.0/255.255.0.255"`,
/// `"::1/::ffff"`): `address & mask == addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaskedAddr {
    /// The address bits that must match (zero outside `mask`).
    pub addr: IpAddr,
    /// The bits compared, of the same IP version.
    pub mask: IpAddr,
}

impl MaskedAddr {
    /// True when `ip` (of the same IP version) has `addr`'s bits under `mask`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, self.mask, ip) {
            (IpAddr::V4(a), IpAddr::V4(m), IpAddr::V4(i)) => {
                u32::from(i) & u32::from(m) == u32::from(a)
            }
            (IpAddr::V6(a), IpAddr::V6(m), IpAddr::V6(i)) => {
                u128::from(i) & u128::from(m) == u128::from(a)
            }
            _ => false,
        }
    }
}

/// `set_mark = "0x10/0xff"` or `set_xmark = "0x10/0xff"`: how a rule changes the packet
/// mark (fw4's `MARK` target with either key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MarkSet {
    /// The bits set (`set_mark`) or flipped (`set_xmark`) after the mask's bits are cleared.
    pub value: u32,
    /// The bits of the mark cleared first (all ones for a bare value).
    pub mask: u32,
    /// `set_xmark`: `value` is XORed into the mark (fw4's `set_xmark`), not ORed.
    pub xor: bool,
}

impl MarkSet {
    /// The kernel's one bitwise step `mark = (mark & and) ^ xor` that does it. For
    /// `set_mark` the value's own bits are cleared too, so XOR sets them: `mark & ~mask |
    /// value` even where the value has bits outside the mask (fw4 sets those as well).
    pub fn bitwise(&self) -> (u32, u32) {
        if self.xor {
            (!self.mask, self.value)
        } else {
            (!(self.mask | self.value), self.value)
        }
    }
}

/// A rate: `count` packets per `per_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Packets.
    pub count: u64,
    /// Per this many seconds (1, 60, 3600 or 86400).
    pub per_seconds: u64,
}

/// `synflood_protect = true`: the rate of SYNs to the router that pass (fw4's
/// `synflood_rate`, `synflood_burst`); the others are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SynFlood {
    /// SYNs that pass (`synflood_rate`, default 25/second).
    pub rate: Rate,
    /// Passed at once over the rate (`synflood_burst`, default 50).
    pub burst: u32,
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
    /// `action = "notrack"` (fw4's `NOTRACK` target): conntrack never sees matching
    /// packets; the rule lives in a raw chain, `action` is `None` and nothing else is set.
    pub notrack: bool,
}

/// `[[policy.forward]]`: all traffic from one zone to another is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneForward {
    /// Source zone.
    pub from: String,
    /// Destination zone.
    pub to: String,
    /// `family`: only this IP version's traffic is accepted (the zones' own families
    /// restrict it further).
    pub family: Family,
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
    /// `log_drops` (the section's, not a zone's): every packet a dropping or rejecting
    /// `[[policy.rule]]` or a dropping or rejecting default drops is reported by the daemon
    /// (nflog: a rate-limited log line and `edgenetd_denied_packets_total`).
    pub log_drops: bool,
    /// Established forwarded connections are offloaded to a flowtable over the zones'
    /// interfaces (their packets skip the forward path).
    pub flow_offload: bool,
    /// The flowtable asks the drivers for hardware offload (`flags offload`).
    pub flow_offload_hw: bool,
    /// New TCP connections to the router are rate-limited (`synflood_protect`); `None`:
    /// they are not.
    pub synflood: Option<SynFlood>,
    /// Declared conntrack helpers (`[policy] helpers`, and every `[policy.helper.<name>]`),
    /// by config name (see [`KNOWN_HELPERS`](super::KNOWN_HELPERS)).
    pub helpers: Vec<String>,
    /// Helpers the config defines (`[policy.helper.<name>]`, fw4's `config helper`): a
    /// kernel helper on a protocol and port of the operator's choosing, by config name.
    pub custom_helpers: BTreeMap<String, HelperPort>,
    /// `[[policy.include]]`s (enabled ones), in file order.
    pub includes: Vec<Include>,
}

impl PolicyConfig {
    /// The kernel helper(s) of the declared or defined helper `name`.
    pub fn helper_ports(&self, name: &str) -> Option<Vec<HelperPort>> {
        match self.custom_helpers.get(name) {
            Some(custom) => Some(vec![custom.clone()]),
            None => super::helper_ports(name).map(<[HelperPort]>::to_vec),
        }
    }
}

/// One kernel conntrack helper and the traffic it follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HelperPort {
    /// The kernel's name of the helper (`ftp`, `Q.931`).
    pub kernel: std::borrow::Cow<'static, str>,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The server port of the connections it follows.
    pub port: u16,
}

/// Where an include's snippet goes (fw4's `position`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludePosition {
    /// `table-pre`: its chains before edgenetd's.
    TablePre,
    /// `table-post` (the default): its chains after edgenetd's.
    TablePost,
    /// `chain-pre`: its rules at the top of `chain`.
    ChainPre,
    /// `chain-post`: its rules at the bottom of `chain`.
    ChainPost,
}

/// `[[policy.include]]`: a snippet of nft's language, read at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The snippet file (absolute).
    pub path: std::path::PathBuf,
    /// Where it goes.
    pub position: IncludePosition,
    /// The chain of a `chain-pre`/`chain-post` include.
    pub chain: Option<String>,
    /// The file's text.
    pub text: String,
    /// The `path` key's place in the config (global offsets).
    pub span: std::ops::Range<usize>,
    /// That place as `file:line:col` (what nft's refusal of the snippet is reported at).
    pub at: String,
}
