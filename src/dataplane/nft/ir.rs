//! The typed nftables IR: tables, chains, sets/maps and rules made of statements.
//!
//! One source of truth: the same values are built into an nftnl batch (`build/`, `batch.rs`)
//! and written as `nft -f` text (`text.rs`). The IR is at the level of nft *statements* (what an
//! operator writes), not of kernel expressions; protocol dependencies (`meta nfproto ipv4`
//! before `ip saddr`, `meta l4proto tcp` before `tcp dport`) are added by the compiler, just
//! as `nft` adds them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

pub use super::fields::Field;

/// A table's address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// `inet`: IPv4 and IPv6.
    Inet,
    /// `ip`: IPv4 only.
    Ip,
    /// `ip6`: IPv6 only.
    Ip6,
}

/// Which IP version an address, a NAT statement or a set is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// A table and everything in it, as one unit that can be replaced atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Address family of the table (and of every set in it).
    pub family: Family,
    /// Table name, e.g. `edgenetd-policy`.
    pub name: String,
    /// Sets and maps, created before the chains so rules can reference them.
    pub sets: Vec<Set>,
    /// Chains in creation order (base chains and regular chains).
    pub chains: Vec<Chain>,
    /// Rules in order; each names its chain.
    pub rules: Vec<Rule>,
    /// `ct helper` objects (created before the rules that assign them).
    pub ct_helpers: Vec<CtHelper>,
    /// Named `limit` objects (created before the rules that refer to them).
    pub limits: Vec<LimitObject>,
    /// Flowtables, created after the sets and before the rules (which `flow add` to them).
    pub flowtables: Vec<Flowtable>,
}

impl Table {
    /// An empty table.
    pub fn new(family: Family, name: impl Into<String>) -> Table {
        Table {
            family,
            name: name.into(),
            sets: Vec::new(),
            chains: Vec::new(),
            rules: Vec::new(),
            ct_helpers: Vec::new(),
            limits: Vec::new(),
            flowtables: Vec::new(),
        }
    }

    /// The set or map called `name`, if any.
    pub fn set(&self, name: &str) -> Option<&Set> {
        self.sets.iter().find(|s| s.name == name)
    }
}

/// A `ct helper` object: the conntrack helper (`nf_conntrack_<type>`) that
/// [`Stmt::CtHelperSet`] attaches to a new connection, so the helper can follow the
/// connections it opens (an FTP data connection is then `related`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CtHelper {
    /// The object's name in the table (`ct helper set "<name>"`).
    pub name: String,
    /// The kernel helper's name, e.g. `ftp`, `sip`, `Q.931`.
    pub helper: String,
    /// The IP protocol of the connections it helps (6 = tcp, 17 = udp).
    pub protocol: u8,
}

/// A named `limit` object: one token bucket that every [`Stmt::LimitRef`] to it shares, so
/// the rules referring to it match at most `rate` per `unit` together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LimitObject {
    /// The object's name in the table (`limit name "<name>"`).
    pub name: String,
    /// Packets per unit.
    pub rate: u64,
    /// The unit.
    pub unit: RateUnit,
    /// Burst in packets (0 = nft's default 5).
    pub burst: u32,
}

/// The netfilter hook of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `prerouting`.
    Prerouting,
    /// `input`.
    Input,
    /// `forward`.
    Forward,
    /// `output`.
    Output,
    /// `postrouting`.
    Postrouting,
}

/// The type of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainType {
    /// `filter`.
    Filter,
    /// `nat`.
    Nat,
    /// `route`.
    Route,
}

/// What a base chain does with a packet that no rule decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainPolicy {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
}

/// Attachment of a base chain to a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BaseChain {
    /// Chain type.
    pub kind: ChainType,
    /// Hook it is attached to.
    pub hook: Hook,
    /// Priority (`filter` = 0, `dstnat` = -100, `srcnat` = 100).
    pub priority: i32,
    /// Default verdict.
    pub policy: ChainPolicy,
}

/// A chain: a base chain when `base` is set, else a regular chain reached by jump/goto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Chain name.
    pub name: String,
    /// Hook attachment for base chains.
    pub base: Option<BaseChain>,
}

impl Chain {
    /// A regular chain.
    pub fn regular(name: impl Into<String>) -> Chain {
        Chain {
            name: name.into(),
            base: None,
        }
    }

    /// A base chain.
    pub fn base(
        name: impl Into<String>,
        kind: ChainType,
        hook: Hook,
        priority: i32,
        policy: ChainPolicy,
    ) -> Chain {
        Chain {
            name: name.into(),
            base: Some(BaseChain {
                kind,
                hook,
                priority,
                policy,
            }),
        }
    }
}

/// A flowtable: connections added to it (`flow add @name`) bypass the forward path, their
/// packets handled at the ingress hook of its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flowtable {
    /// Name, unique in the table.
    pub name: String,
    /// Priority of its ingress hook.
    pub priority: i32,
    /// The devices whose ingress it hooks (each must exist when it is created).
    pub devices: Vec<String>,
    /// `flags offload`: ask the drivers to offload the flows to hardware.
    pub hw_offload: bool,
}

/// The nft data types used for set keys, map data and constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `ipv4_addr` (4 bytes, network order).
    Ipv4Addr,
    /// `ipv6_addr` (16 bytes, network order).
    Ipv6Addr,
    /// `inet_service`: a port (2 bytes, network order).
    InetService,
    /// `inet_proto`: an IP protocol number (1 byte).
    InetProto,
    /// `ifname`: an interface name (16 bytes, NUL padded).
    IfName,
    /// `mark`: a 32-bit integer in host order (also used for numgen/jhash slots).
    Mark,
    /// `icmp_type` (1 byte).
    IcmpType,
    /// `icmpv6_type` (1 byte).
    Icmpv6Type,
    /// `verdict`: map data only (a verdict map).
    Verdict,
    /// The values of a numeric header field (its definition's [`Numeric`](super::fields::Numeric)
    /// gives the type; the length is the field's).
    Field(Field),
    /// `day`: a day of the week, 0 = Sunday (1 byte), what `meta day` loads.
    Day,
}

impl DataType {
    /// nft's numeric type id (used to build concatenated type ids).
    pub fn id(self) -> u32 {
        match self {
            DataType::Verdict => 1,
            DataType::Ipv4Addr => 7,
            DataType::Ipv6Addr => 8,
            DataType::InetProto => 12,
            DataType::InetService => 13,
            DataType::IcmpType => 14,
            DataType::Mark => 19,
            DataType::Icmpv6Type => 29,
            DataType::IfName => 41,
            DataType::Field(f) => f.def().numeric.map_or(0, |n| n.type_id),
            DataType::Day => 45,
        }
    }

    /// Length in bytes of one value.
    pub fn byte_len(self) -> u32 {
        match self {
            DataType::Ipv4Addr | DataType::Mark => 4,
            DataType::Ipv6Addr | DataType::IfName => 16,
            DataType::InetService => 2,
            DataType::InetProto | DataType::IcmpType | DataType::Icmpv6Type | DataType::Day => 1,
            DataType::Verdict => 0,
            DataType::Field(f) => f.def().len,
        }
    }

    /// The name nft uses in `type ...`.
    pub fn nft_name(self) -> &'static str {
        match self {
            DataType::Ipv4Addr => "ipv4_addr",
            DataType::Ipv6Addr => "ipv6_addr",
            DataType::InetService => "inet_service",
            DataType::InetProto => "inet_proto",
            DataType::IfName => "ifname",
            DataType::Mark => "mark",
            DataType::IcmpType => "icmp_type",
            DataType::Icmpv6Type => "icmpv6_type",
            DataType::Verdict => "verdict",
            DataType::Field(f) => f.def().numeric.map_or("integer", |n| n.type_name),
            DataType::Day => "day",
        }
    }
}

/// The type of a (possibly concatenated) set key or map value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyType(pub Vec<DataType>);

impl KeyType {
    /// A single-type key.
    pub fn single(t: DataType) -> KeyType {
        KeyType(vec![t])
    }

    /// nft's type id: for a concatenation, the components' ids shifted by 6 bits each.
    pub fn id(&self) -> u32 {
        self.0.iter().fold(0, |acc, t| (acc << 6) | t.id())
    }

    /// Length in bytes; components of a concatenation are padded to 4 bytes each.
    pub fn byte_len(&self) -> u32 {
        if self.0.len() == 1 {
            self.0[0].byte_len()
        } else {
            self.0.iter().map(|t| t.byte_len().div_ceil(4) * 4).sum()
        }
    }

    /// True for a concatenation of two or more types.
    pub fn is_concat(&self) -> bool {
        self.0.len() > 1
    }
}

/// A verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// `continue`.
    Continue,
    /// `return`.
    Return,
    /// `jump <chain>`.
    Jump(String),
    /// `goto <chain>`.
    Goto(String),
}

/// A constant value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    /// An IPv4 address.
    Ipv4(Ipv4Addr),
    /// An IPv6 address.
    Ipv6(Ipv6Addr),
    /// A port.
    Port(u16),
    /// An IP protocol number (6 = tcp, 17 = udp, 1 = icmp, 58 = icmpv6).
    Proto(u8),
    /// An interface name.
    IfName(String),
    /// A 32-bit host-order integer (`mark`, numgen/jhash slot).
    Mark(u32),
    /// An ICMP type.
    IcmpType(u8),
    /// An ICMPv6 type.
    Icmpv6Type(u8),
    /// A verdict (map data of a verdict map).
    Verdict(Verdict),
    /// Conntrack state bits (`ct state`): see [`CT_STATE_ESTABLISHED`] and friends.
    CtState(u32),
    /// Conntrack status bits (`ct status`): see [`CT_STATUS_DNAT`].
    CtStatus(u32),
    /// `fib ... type` address type (RTN_*): 2 = local.
    AddrType(u32),
    /// TCP flag bits (`tcp flags`): see [`TCP_SYN`].
    TcpFlags(u8),
    /// A concatenation `a . b . c`.
    Concat(Vec<Value>),
    /// Number `n` of a numeric header field (`ip dscp 46`), encoded where the field's
    /// definition puts it.
    Field(Field, u32),
    /// Seconds since midnight UTC (`meta hour`), 0..=86399; nft writes it `"HH:MM:SS"`.
    Hour(u32),
    /// A day of the week (`meta day`), 0 = Sunday .. 6 = Saturday, of the UTC date.
    Day(u8),
    /// Nanoseconds since 1970-01-01 00:00 UTC (`meta time`).
    Time(u64),
}

impl Value {
    /// An IP address of either family.
    pub fn ip(addr: IpAddr) -> Value {
        match addr {
            IpAddr::V4(a) => Value::Ipv4(a),
            IpAddr::V6(a) => Value::Ipv6(a),
        }
    }
}

/// `ct state invalid`.
pub const CT_STATE_INVALID: u32 = 1;
/// `ct state established`.
pub const CT_STATE_ESTABLISHED: u32 = 2;
/// `ct state related`.
pub const CT_STATE_RELATED: u32 = 4;
/// `ct state new`.
pub const CT_STATE_NEW: u32 = 8;
/// `ct state untracked` (a `notrack` packet).
pub const CT_STATE_UNTRACKED: u32 = 64;
/// `ct status dnat` (IPS_DST_NAT).
pub const CT_STATUS_DNAT: u32 = 0x20;
/// `ct status snat` (IPS_SRC_NAT).
pub const CT_STATUS_SNAT: u32 = 0x10;
/// RTN_LOCAL: `fib daddr type local`.
pub const ADDRTYPE_LOCAL: u32 = 2;
/// `tcp flags fin`.
pub const TCP_FIN: u8 = 0x01;
/// `tcp flags syn`.
pub const TCP_SYN: u8 = 0x02;
/// `tcp flags rst`.
pub const TCP_RST: u8 = 0x04;
/// `tcp flags ack`.
pub const TCP_ACK: u8 = 0x10;

/// A set element key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemKey {
    /// One value.
    Value(Value),
    /// An address prefix (interval sets only).
    Prefix(IpNet),
    /// An inclusive range (interval sets only), e.g. ports `8000-8100`.
    Range(Value, Value),
}

/// A set or map element.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Element {
    /// The key.
    pub key: ElemKey,
    /// The mapped value (maps only).
    pub data: Option<Value>,
}

impl Element {
    /// A set element.
    pub fn key(key: ElemKey) -> Element {
        Element { key, data: None }
    }

    /// A map element `key : data`.
    pub fn map(key: ElemKey, data: Value) -> Element {
        Element {
            key,
            data: Some(data),
        }
    }
}

/// A named set (or, with `data`, a map / verdict map).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// Name, unique in the table.
    pub name: String,
    /// Key type (a concatenation when it has several components).
    pub key: KeyType,
    /// Map value type: `Some` makes this a map (`KeyType([Verdict])` = verdict map).
    pub data: Option<KeyType>,
    /// `flags interval`: elements may be prefixes and ranges.
    pub interval: bool,
    /// `flags constant`: elements can only change by replacing the set.
    pub constant: bool,
    /// `flags dynamic,timeout` with `size N`: a map the packet path fills
    /// ([`Stmt::MapUpdate`]), its elements expiring; `Some(N)` bounds it to N elements.
    pub dynamic: Option<u32>,
    /// `flags timeout`: elements may expire. `Some(0)`: only those added with a timeout of
    /// their own; `Some(ms)`: also `timeout <ms>`, the lifetime of elements added without one.
    /// The elements written from [`Set::elements`] never expire either way.
    pub timeout: Option<u64>,
    /// `size N`: the kernel takes at most N elements (`dynamic` carries its own size).
    pub size: Option<u32>,
    /// Elements.
    pub elements: Vec<Element>,
}

impl Set {
    /// A plain set of `key` without elements.
    pub fn new(name: impl Into<String>, key: KeyType) -> Set {
        Set {
            name: name.into(),
            key,
            data: None,
            interval: false,
            constant: false,
            dynamic: None,
            timeout: None,
            size: None,
            elements: Vec::new(),
        }
    }

    /// True for a verdict map.
    pub fn is_vmap(&self) -> bool {
        self.data
            .as_ref()
            .is_some_and(|d| d.0 == [DataType::Verdict])
    }

    /// Same definition (name, types, flags), elements aside.
    pub fn same_definition(&self, other: &Set) -> bool {
        self.name == other.name
            && self.key == other.key
            && self.data == other.data
            && self.interval == other.interval
            && self.constant == other.constant
            && self.dynamic == other.dynamic
            && self.timeout == other.timeout
            && self.size == other.size
    }
}

/// Keys read by `meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKey {
    /// `iifname`.
    IifName,
    /// `oifname`.
    OifName,
    /// `meta l4proto`.
    L4Proto,
    /// `meta nfproto`.
    NfProto,
    /// `meta mark`.
    Mark,
    /// `meta hour`: seconds since midnight of the kernel's clock, which is UTC (nft converts
    /// the local times it is given, at load time; edgenetd's IR holds UTC already).
    Hour,
    /// `meta day`: the day of the week of the UTC date, 0 = Sunday.
    Day,
    /// `meta time`: nanoseconds since the epoch.
    Time,
}

/// Conntrack keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtKey {
    /// `ct state`.
    State,
    /// `ct status`.
    Status,
    /// `ct mark`.
    Mark,
}

/// Fields of a connection's original-direction tuple (`ct original ...`): after DNAT they
/// still hold the address and port the client connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtOrigKey {
    /// `ct original ip daddr`.
    IpDaddr,
    /// `ct original ip6 daddr`.
    Ip6Daddr,
    /// `ct original proto-dst` (nft types it only after a `meta l4proto` match).
    ProtoDst,
}

/// Packet-derived values (the left side of a match, a map key, a hash input).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// `meta <key>`.
    Meta(MetaKey),
    /// A header field.
    Payload(Field),
    /// `ct <key>`.
    Ct(CtKey),
    /// `fib daddr type` (the destination's address type).
    FibDaddrType,
    /// `ct original <key>`.
    CtOriginal(CtOrigKey),
    /// `numgen random mod <modulus> offset <offset>`.
    Numgen {
        /// Result is in `offset .. offset + modulus`.
        modulus: u32,
        /// Added to the result.
        offset: u32,
    },
    /// `jhash <input> mod <modulus> seed <seed> offset <offset>`.
    Jhash {
        /// What is hashed (a field or a concatenation).
        input: Box<Expr>,
        /// Result is in `offset .. offset + modulus`.
        modulus: u32,
        /// Hash seed.
        seed: u32,
        /// Added to the result.
        offset: u32,
    },
    /// `a . b . c`.
    Concat(Vec<Expr>),
    /// `(<input> & <mask>) ^ <xor>`: the kernel's bitwise expression (nft writes it `<input>
    /// & <mask> | <xor>` when the xor bits are outside the mask). `mask` and `xor` have the
    /// input's length.
    Bitwise {
        /// What is masked (a header field).
        input: Box<Expr>,
        /// The bits kept.
        mask: Vec<u8>,
        /// Flipped afterwards.
        xor: Vec<u8>,
    },
}

impl Expr {
    /// Length in bytes of the value this expression produces (components padded for concat).
    pub fn byte_len(&self) -> u32 {
        match self {
            Expr::Meta(MetaKey::IifName | MetaKey::OifName) => 16,
            Expr::Meta(MetaKey::L4Proto | MetaKey::NfProto) => 1,
            Expr::Meta(MetaKey::Mark | MetaKey::Hour) => 4,
            Expr::Meta(MetaKey::Day) => 1,
            Expr::Meta(MetaKey::Time) => 8,
            Expr::Payload(f) => f.def().len,
            Expr::Ct(_) | Expr::FibDaddrType | Expr::Numgen { .. } | Expr::Jhash { .. } => 4,
            Expr::CtOriginal(CtOrigKey::IpDaddr) => 4,
            Expr::CtOriginal(CtOrigKey::Ip6Daddr) => 16,
            Expr::CtOriginal(CtOrigKey::ProtoDst) => 2,
            Expr::Concat(parts) => parts.iter().map(|p| p.byte_len().div_ceil(4) * 4).sum(),
            Expr::Bitwise { input, .. } => input.byte_len(),
        }
    }
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==` (rendered without an operator).
    Eq,
    /// `!=`.
    Neq,
}

/// A set referenced by a rule: a named one, or an anonymous constant set written inline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetRef {
    /// `@name`.
    Named(String),
    /// `{ a, b, c }`, created with the rule in the same batch.
    Anonymous {
        /// Key type of the elements.
        key: KeyType,
        /// Whether elements include prefixes/ranges.
        interval: bool,
        /// The elements (map data included for anonymous maps).
        elements: Vec<Element>,
        /// Map data type for an anonymous map / vmap.
        data: Option<KeyType>,
    },
}

/// Units of a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateUnit {
    /// per second.
    Second,
    /// per minute.
    Minute,
    /// per hour.
    Hour,
    /// per day.
    Day,
}

impl RateUnit {
    /// Seconds in one unit.
    pub fn seconds(self) -> u64 {
        match self {
            RateUnit::Second => 1,
            RateUnit::Minute => 60,
            RateUnit::Hour => 3600,
            RateUnit::Day => 86400,
        }
    }

    /// nft's name.
    pub fn name(self) -> &'static str {
        match self {
            RateUnit::Second => "second",
            RateUnit::Minute => "minute",
            RateUnit::Hour => "hour",
            RateUnit::Day => "day",
        }
    }
}

/// How `reject` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reject {
    /// `reject with tcp reset` (TCP only).
    TcpReset,
    /// `reject with icmpx port-unreachable` (any family).
    IcmpxPortUnreachable,
    /// `reject with icmpx admin-prohibited`.
    IcmpxAdminProhibited,
}

/// SNAT or DNAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `snat`.
    Snat,
    /// `dnat`.
    Dnat,
}

/// One statement of a rule. Matches stop evaluation when they do not match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `<left> [!=] <value>`.
    Cmp {
        /// What is compared.
        left: Expr,
        /// Operator.
        op: CmpOp,
        /// The constant.
        right: Value,
    },
    /// `<left> [!=] from-to` (inclusive).
    Range {
        /// What is compared.
        left: Expr,
        /// Negated match.
        negate: bool,
        /// Lower bound.
        from: Value,
        /// Upper bound.
        to: Value,
    },
    /// `<left> <flags>`: any of the bits set (e.g. `ct state established,related`).
    Flags {
        /// What is tested (`ct state`, `ct status`).
        left: Expr,
        /// The bits (`Value::CtState` / `Value::CtStatus`).
        bits: Value,
        /// `!=`: none of the bits set.
        negate: bool,
    },
    /// `<left> [!=] @set` or `<left> [!=] { ... }`.
    Lookup {
        /// The key.
        left: Expr,
        /// The set.
        set: SetRef,
        /// Negated match.
        negate: bool,
    },
    /// `counter`.
    Counter,
    /// `limit rate [over] <rate>/<unit> burst <burst> packets`.
    Limit {
        /// Packets per unit.
        rate: u64,
        /// The unit.
        unit: RateUnit,
        /// Burst in packets (0 = nft's default 5).
        burst: u32,
        /// `over`: match packets above the rate instead of below.
        over: bool,
    },
    /// `limit name "<name>"`: matches while the table's limit object `name` (shared with
    /// every other rule naming it) is under its rate.
    LimitRef(String),
    /// `log prefix "<prefix>"` (kernel log at level warn), or with `group` `log prefix
    /// "<prefix>" group <n>`: the packet goes to the nflog group `n` (netlink), where a
    /// listener (the daemon's own, for denied flows) reads it.
    Log {
        /// The prefix (nft allows up to 127 bytes).
        prefix: String,
        /// The nflog group; `None` = the kernel log.
        group: Option<u16>,
    },
    /// A verdict statement.
    Verdict(Verdict),
    /// `<key> vmap @map` / `vmap { ... }`.
    Vmap {
        /// The key.
        key: Expr,
        /// The verdict map.
        map: SetRef,
    },
    /// `reject with ...`.
    Reject(Reject),
    /// `masquerade`.
    Masquerade,
    /// `redirect [to :<port>]`: DNAT to the router's own address on the incoming interface
    /// (fw4's redirect to the router itself), to `port` or keeping the destination port.
    Redirect {
        /// The new destination port, if any.
        port: Option<u16>,
    },
    /// `notrack`: the packet's connection is not tracked (in a chain of priority `raw`, which
    /// runs before conntrack; later packets need their own `notrack`).
    Notrack,
    /// `snat|dnat ip|ip6 to <addr>[:<port>]`.
    Nat {
        /// SNAT or DNAT.
        kind: NatKind,
        /// The target address.
        addr: IpAddr,
        /// The target port, if any.
        port: Option<u16>,
    },
    /// `dnat ip|ip6 [addr . port] to <key> map @map`: the target comes from a map lookup whose
    /// data is `ipv4_addr` / `ipv6_addr`, or with `with_port` `addr . inet_service`.
    NatMap {
        /// SNAT or DNAT.
        kind: NatKind,
        /// Address family of the target.
        version: IpVersion,
        /// The lookup key.
        key: Expr,
        /// The map.
        map: SetRef,
        /// Map data carries a port after the address.
        with_port: bool,
    },
    /// `update @map { <key> timeout <t> : <data> }`: adds the element, or when the key is
    /// there already, restarts its timeout and keeps its data (the map must be dynamic).
    MapUpdate {
        /// The named map.
        map: String,
        /// The element's key.
        key: Expr,
        /// The element's lifetime in milliseconds (restarted by every update).
        timeout_ms: u64,
        /// The element's data.
        data: Expr,
    },
    /// `ct mark set ct mark | <bits>`: sets bits of the connection's mark, keeps the others.
    CtMarkOr(u32),
    /// `ct helper set "<name>"`: attaches the table's ct helper object `name` to the
    /// packet's connection (effective while the connection is new).
    CtHelperSet(String),
    /// `tcp option maxseg size set rt mtu`: lowers the MSS option (where present) to what
    /// the route's MTU allows.
    ClampMssToRoute,
    /// `<left> & <mask> == <right>`: only the mask's bits are compared (an IPv6 interface
    /// identifier under a prefix that changes).
    MaskedCmp {
        /// What is compared.
        left: Expr,
        /// The bits that count (same length as `left`).
        mask: Value,
        /// What they must equal (already masked).
        right: Value,
    },
    /// `meta mark set meta mark & and ^ xor` (the kernel's one bitwise step), or `meta mark
    /// set xor` when `and` is zero: the packet's mark, for routing rules to match.
    MetaMarkSet {
        /// The bits of the mark kept.
        and: u32,
        /// Then flipped (set, where `and` cleared them).
        xor: u32,
    },
    /// `flow add @<flowtable>`: offloads the packet's connection to the flowtable (the
    /// kernel takes only confirmed TCP connections in established state, and UDP).
    FlowOffload(String),
    /// A rule nft compiled from text edgenetd does not model (an operator's snippet, fw4's
    /// `include`): the kernel's expressions as nft wrote them, carried unread. It must be the
    /// rule's only statement.
    Opaque(Opaque),
    /// `<field> set <value>` (`ip dscp set af41`): rewrites a numeric header field
    /// ([`FieldDef::numeric`](super::fields::FieldDef)), keeping the other bits of its
    /// bytes; the kernel updates the IPv4 header checksum.
    FieldSet {
        /// The field.
        field: Field,
        /// Its new value.
        value: u32,
    },
}

/// The expressions of a rule nft compiled ([`Stmt::Opaque`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Opaque {
    /// The payload of the rule's `NFTA_RULE_EXPRESSIONS` attribute, as the kernel listed it.
    pub exprs: Vec<u8>,
    /// The rule as `nft list` prints it (what `plan` shows and `explain` names).
    pub text: String,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The chain it is appended to.
    pub chain: String,
    /// Statements in order.
    pub stmts: Vec<Stmt>,
    /// `comment "..."` (stored as rule user data; also the rule's name in error reports).
    pub comment: Option<String>,
}

impl Rule {
    /// A rule without a comment.
    pub fn new(chain: impl Into<String>, stmts: Vec<Stmt>) -> Rule {
        Rule {
            chain: chain.into(),
            stmts,
            comment: None,
        }
    }

    /// Sets the comment.
    pub fn with_comment(mut self, comment: impl Into<String>) -> Rule {
        self.comment = Some(comment.into());
        self
    }
}
