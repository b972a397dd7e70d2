//! The fixed layout of table `inet <prefix>-service` and the elements that stand for one
//! service.
//!
//! Why this shape (see also `docs/architecture.md`): kube-proxy's nftables layout creates a
//! chain and an anonymous `numgen` vmap per service, and creating an anonymous set scans
//! every existing set name, so loading 10k services is quadratic (tens of seconds). Here the
//! rules and chains are a constant skeleton and every service is only *elements* of a few
//! named sets and maps (`<vip>` is `ip daddr . meta l4proto . th dport`, one rule per family;
//! `MASQ` is the conntrack mark bit [`SERVICE_MASQ_MARK`], 0x40000000):
//!
//! ```text
//! prerouting (nat, dstnat):
//!   <vip> @fenced4 jump fence4                      source ranges (kube-proxy's firewall-check)
//!   ip saddr @cluster4 <vip> vmap @internal4        short-circuit: pods to internal backends
//!   jump services
//! output (nat, dstnat):
//!   <vip> @fenced4 jump fence4                      source ranges, for this node's own too
//!   <vip> @shortcut4 ct mark set ct mark | MASQ     short-circuit: this node, masqueraded
//!   <vip> vmap @internal4
//!   jump services
//! fence4: ip saddr @range16_4 ... (see `fence_rules`); drop
//! services:
//!   <vip> @masqvips4 ct mark set ct mark | MASQ                       Masquerade::Always
//!   ip saddr != @cluster4 <vip> @offcluster4 ct mark set ct mark | MASQ  Masquerade::OffCluster
//!   <vip> vmap @services4
//!   services4[vip . proto . port] = goto random16_4 | source64_4 | ... | empty_reject | drop
//!   internal4[vip . proto . port] = goto irandom16_4 | isource64_4 | ... | empty_reject | drop
//!   random16_4:  ct mark set ct mark | 0x80000000
//!                dnat ip to ip daddr . l4proto . th dport . numgen random mod 16 map @backends4
//!   irandom16_4: the same with `offset 65536`: the internal backends' slots
//!   backends4[vip . proto . port . slot] = backend addr . port
//! postrouting (nat, srcnat):
//!   ct status dnat ct mark & MASQ oifname != "lo" masquerade          the path asked for it
//!   ct status dnat ip saddr . ip daddr @hairpin4 oifname != "lo" masquerade   hairpin
//! unserved_forward (filter, forward, -1) and unserved_output (filter, output, -1):
//!   ct state new ct status != dnat ip daddr @unserved4 goto empty_reject
//!   ct state new ct status != dnat ip daddr @servicecidrs4 ip daddr != @owned4 drop
//! ```
//!
//! One dispatch chain per slot class (1 to 32, 64, 128, 256, 512, 1024), per selection (random, source
//! hash, sticky), per family, and per backend set (the service's, the internal one), but only
//! those some service's verdict points at ([`OnDemand`]): all 444 would cost the idle daemon
//! half a MiB of kernel-side memory and the skeleton 40 ms to load, for the two or three a
//! small config uses. Cost is linear in services and an update to one service touches only
//! its own elements (and, when it moves to a slot class no other service uses, one chain).
//!
//! **Masquerade is decided per path, before DNAT**, on the address the connection was sent
//! to: the rules above set the `MASQ` conntrack mark bit, and postrouting masquerades the
//! DNATed connections that carry it. A backend behind a masquerading address and behind a
//! cluster IP at once is thus masqueraded on the first path only (a per-backend decision in
//! postrouting could not tell them apart). The mark lives on the connection (`ct mark`, not
//! the packet's `meta mark` that routing rules and the policy's `set_mark` use), and only its
//! first packet crosses the NAT chains.
//!
//! **Hairpin**: a backend that reaches its own service through the address is DNATed back
//! to itself; its reply would bypass the router, so it is masqueraded whatever the service
//! says. After DNAT its source equals its destination, which nft cannot compare directly:
//! `hairpin4` holds `b . b` for every backend address `b`, shared by the entries that have a
//! backend there (reference-counted).
//!
//! **Unserved ports and service CIDRs** (kube-proxy's cluster-ips-check) run in filter
//! chains after DNAT: what is still addressed to a cluster IP was not served by any entry.
//! `unserved4` (addresses with `reject_unserved_ports`) and `owned4` (every entry's address)
//! are shared by the entries of one address and reference-counted; the service CIDRs are
//! elements of `servicecidrs4`. DNATed traffic (`ct status dnat`) and, in output, the
//! router's own addresses are never touched.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use crate::config::service::Protocol;
use crate::controller::marks::{OWN_DNAT_MARK, SERVICE_MASQ_MARK};
use crate::dataplane::nft::ir::*;

use std::collections::BTreeSet;

use super::model::{Action, Entry, MasqPath, Selection, VipKey};
use super::slots::SLOT_CLASSES;

/// Seed of the source-affinity hash: fixed, so a client keeps its backend across restarts.
pub const AFFINITY_SEED: u32 = 0x6564_6765; // "edge"

/// The first slot number of the internal backends in the `backends` maps: slot `i` of the
/// internal set is `INTERNAL_SLOT_BASE + i` (its dispatch chains pick with `offset`).
pub const INTERNAL_SLOT_BASE: u32 = 0x1_0000;

macro_rules! set_ids {
    ($($v4:ident $v6:ident $n4:literal $n6:literal;)*) => {
        /// The named sets and maps of the layout.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum SetId {
            $(
                #[doc = concat!("`", $n4, "` (see the module docs).")]
                $v4,
                #[doc = concat!("`", $n6, "`.")]
                $v6,
            )*
        }

        impl SetId {
            /// All of them, in creation order.
            pub const ALL: [SetId; 2 * [$($n4),*].len()] = [$(SetId::$v4, SetId::$v6),*];

            /// The set's name in the table.
            pub fn name(self) -> &'static str {
                match self {
                    $(SetId::$v4 => $n4, SetId::$v6 => $n6,)*
                }
            }

            /// True for the IPv4 sets.
            pub fn is_v4(self) -> bool {
                match self {
                    $(SetId::$v4 => true, SetId::$v6 => false,)*
                }
            }

            /// The set of the same kind of family `v4`.
            pub fn of_family(self, v4: bool) -> SetId {
                match self {
                    $(SetId::$v4 | SetId::$v6 => if v4 { SetId::$v4 } else { SetId::$v6 },)*
                }
            }
        }
    };
}

set_ids! {
    Services4 Services6 "services4" "services6";
    Backends4 Backends6 "backends4" "backends6";
    StickyVips4 StickyVips6 "stickyvips4" "stickyvips6";
    MasqVips4 MasqVips6 "masqvips4" "masqvips6";
    OffCluster4 OffCluster6 "offcluster4" "offcluster6";
    Internal4 Internal6 "internal4" "internal6";
    Shortcut4 Shortcut6 "shortcut4" "shortcut6";
    Fenced4 Fenced6 "fenced4" "fenced6";
    Ranges4 Ranges6 "ranges4" "ranges6";
    Hosts4 Hosts6 "hosts4" "hosts6";
    Hairpin4 Hairpin6 "hairpin4" "hairpin6";
    Unserved4 Unserved6 "unserved4" "unserved6";
    Owned4 Owned6 "owned4" "owned6";
    Cluster4 Cluster6 "cluster4" "cluster6";
    ServiceCidrs4 ServiceCidrs6 "servicecidrs4" "servicecidrs6";
}

/// What a set's elements stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetRole {
    /// Elements of one entry, keyed `vip . proto . port` (and the slot in `backends`).
    Entry,
    /// Elements shared by the entries of one address or backend, reference-counted.
    Shared,
    /// Prefixes of the whole config (cluster and service CIDRs).
    Global,
}

impl SetId {
    /// Index into [`SetId::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// What its elements stand for.
    pub fn role(self) -> SetRole {
        use SetId::*;
        match self {
            Hairpin4 | Hairpin6 | Unserved4 | Unserved6 | Owned4 | Owned6 => SetRole::Shared,
            Cluster4 | Cluster6 | ServiceCidrs4 | ServiceCidrs6 => SetRole::Global,
            _ => SetRole::Entry,
        }
    }

    /// The sticky-VIP map of a family.
    pub fn sticky_vips(v4: bool) -> SetId {
        SetId::StickyVips4.of_family(v4)
    }

    fn backends(v4: bool) -> SetId {
        SetId::Backends4.of_family(v4)
    }

    /// True for the interval sets (prefixes).
    pub fn is_interval(self) -> bool {
        self.role() == SetRole::Global
    }

    /// Its definition (without elements).
    pub fn definition(self) -> Set {
        use DataType::*;
        use SetId::*;
        let addr = if self.is_v4() { Ipv4Addr } else { Ipv6Addr };
        let vip = vec![addr, InetProto, InetService];
        let (key, data) = match self {
            Services4 | Services6 | StickyVips4 | StickyVips6 | Internal4 | Internal6 => {
                (vip, Some(vec![Verdict]))
            }
            Backends4 | Backends6 => (
                vec![addr, InetProto, InetService, Mark],
                Some(vec![addr, InetService]),
            ),
            MasqVips4 | MasqVips6 | OffCluster4 | OffCluster6 | Shortcut4 | Shortcut6 | Fenced4
            | Fenced6 => (vip, None),
            Ranges4 | Ranges6 | Hosts4 | Hosts6 => (vec![addr, addr, InetProto, InetService], None),
            Hairpin4 | Hairpin6 => (vec![addr, addr], None),
            Unserved4 | Unserved6 | Owned4 | Owned6 | Cluster4 | Cluster6 | ServiceCidrs4
            | ServiceCidrs6 => (vec![addr], None),
        };
        let mut set = Set::new(self.name(), KeyType(key));
        set.data = data.map(KeyType);
        set.interval = self.is_interval();
        set
    }
}

/// Name of the chain that dispatches over `slots` slots of a service's backends
/// (`random16_4`, `source64_6`, `sticky256_4`, ...).
pub fn dispatch_chain(selection: Selection, slots: usize, v4: bool) -> String {
    dispatch_chain_of(selection, slots, v4, false)
}

/// Name of a dispatch chain; `internal`: over the internal backends' slots (`irandom16_4`).
pub fn dispatch_chain_of(selection: Selection, slots: usize, v4: bool, internal: bool) -> String {
    format!(
        "{}{}{slots}_{}",
        if internal { "i" } else { "" },
        match selection {
            Selection::Random => "random",
            Selection::SourceHash => "source",
            Selection::Sticky { .. } => "sticky",
        },
        if v4 { 4 } else { 6 }
    )
}

/// Most clients one family's sticky map remembers (nft's default size for dynamic sets, as
/// kube-proxy's affinity sets get): beyond it new clients are dealt at random, unremembered.
pub const STICKY_SIZE: u32 = 65535;

/// Name of the dynamic map of remembered clients of a family.
pub fn sticky_map_name(v4: bool) -> &'static str {
    if v4 { "sticky4" } else { "sticky6" }
}

/// `sticky4`: client . VIP . proto . port -> backend addr . port, filled by the recorder
/// chains, each element expiring `timeout` after the client's last new connection.
pub fn sticky_map(v4: bool) -> Set {
    use DataType::*;
    let addr = if v4 { Ipv4Addr } else { Ipv6Addr };
    let mut set = Set::new(
        sticky_map_name(v4),
        KeyType(vec![addr, addr, InetProto, InetService]),
    );
    set.data = Some(KeyType(vec![addr, InetService]));
    set.dynamic = Some(STICKY_SIZE);
    set
}

/// The recorder chain of sticky services of one timeout (seconds) and family.
pub fn recorder_chain(timeout: u32, v4: bool) -> String {
    format!("sticky_rec_{timeout}s_{}", if v4 { 4 } else { 6 })
}

/// The (timeout, family) of a recorder chain's name.
pub fn parse_recorder_chain(name: &str) -> Option<(u32, bool)> {
    let rest = name.strip_prefix("sticky_rec_")?;
    let (secs, fam) = rest.split_once("s_")?;
    let v4 = match fam {
        "4" => true,
        "6" => false,
        _ => return None,
    };
    let t: u32 = secs.parse().ok()?;
    (secs == t.to_string()).then_some((t, v4))
}

/// The base chains that run the recorders, after DNAT (`dstnat + 1`): they exist only
/// while some service is sticky, so other setups have no filter hook for it.
pub const RECORD_HOOKS: [(&str, Hook); 2] = [
    ("sticky_record_pre", Hook::Prerouting),
    ("sticky_record_out", Hook::Output),
];

/// The chain that refuses connections to a service without backends (and, from the
/// unserved-port chains, to a cluster IP's unserved ports).
pub const EMPTY_REJECT: &str = "empty_reject";

/// The filter base chains of the unserved-port and service-CIDR checks.
pub const UNSERVED_HOOKS: [(&str, Hook); 2] = [
    ("unserved_forward", Hook::Forward),
    ("unserved_output", Hook::Output),
];

/// The chain of a family's source-range check.
pub fn fence_chain(v4: bool) -> &'static str {
    if v4 { "fence4" } else { "fence6" }
}

/// The verdict of an action: goto a dispatch chain (of the internal slots with `internal`),
/// the reject chain, or drop.
fn action_verdict(key: &VipKey, action: &Action, internal: bool) -> Verdict {
    match action {
        Action::Balance { selection, slots } => Verdict::Goto(dispatch_chain_of(
            *selection,
            slots.len(),
            key.addr.is_ipv4(),
            internal,
        )),
        Action::Reject => Verdict::Goto(EMPTY_REJECT.into()),
        Action::Drop => Verdict::Drop,
    }
}

/// The verdict of a service's `services` element.
pub fn verdict(key: &VipKey, entry: &Entry) -> Verdict {
    // Fault injection (test builds only): the service's elements point at a chain that does
    // not exist, so the kernel refuses them.
    if crate::fault_hook!(crate::fault::by_name::service_refused(&entry.name), false) {
        return Verdict::Goto("fault-missing-chain".into());
    }
    action_verdict(key, &entry.action, false)
}

fn vip_key(key: &VipKey) -> Vec<Value> {
    vec![
        Value::ip(key.addr),
        Value::Proto(key.proto.number()),
        Value::Port(key.port),
    ]
}

fn vip_element(set: SetId, key: &VipKey, data: Option<Verdict>) -> (SetId, Element) {
    let k = ElemKey::Value(Value::Concat(vip_key(key)));
    (
        set.of_family(key.addr.is_ipv4()),
        match data {
            Some(v) => Element::map(k, Value::Verdict(v)),
            None => Element::key(k),
        },
    )
}

/// The `services` element of a service.
pub fn service_element(key: &VipKey, entry: &Entry) -> (SetId, Element) {
    vip_element(SetId::Services4, key, Some(verdict(key, entry)))
}

/// The `services` key of a service (for deletion).
pub fn service_key(key: &VipKey) -> (SetId, Element) {
    vip_element(SetId::Services4, key, None)
}

/// The elements of one entry keyed by its address, port and protocol, the slots aside:
/// its verdict, its sticky recorder, its masquerade path, its short-circuit and its fence.
pub fn entry_elements(key: &VipKey, entry: &Entry) -> Vec<(SetId, Element)> {
    let mut v = vec![service_element(key, entry)];
    v.extend(sticky_vip_element(key, entry));
    match entry.masquerade {
        MasqPath::Never => {}
        MasqPath::Always => v.push(vip_element(SetId::MasqVips4, key, None)),
        MasqPath::OffCluster => v.push(vip_element(SetId::OffCluster4, key, None)),
    }
    if let Some(internal) = &entry.internal {
        v.push(vip_element(SetId::Shortcut4, key, None));
        v.push(vip_element(
            SetId::Internal4,
            key,
            Some(action_verdict(key, internal, true)),
        ));
    }
    if let Some(ranges) = &entry.source_ranges {
        v.push(vip_element(SetId::Fenced4, key, None));
        v.extend(ranges.iter().map(|n| range_element(key, *n)));
    }
    v
}

/// The element of one source prefix of a fenced entry: `source . vip . proto . port`. A
/// host prefix goes to `hosts` as it is; a shorter one to `ranges` as its network address
/// with the first host bit set (the marker): the fence rule of a prefix length masks the
/// source to that length and sets the same bit, so the marker's position tells the lengths
/// apart and a key matches only its own prefix.
fn range_element(key: &VipKey, net: IpNet) -> (SetId, Element) {
    let v4 = key.addr.is_ipv4();
    let (set, addr) = if net.prefix_len() == net.max_prefix_len() {
        (SetId::Hosts4, net.network())
    } else {
        let mut bytes = ip_bytes(net.network());
        let marker = marker(net.prefix_len(), bytes.len());
        for (b, m) in bytes.iter_mut().zip(&marker) {
            *b |= m;
        }
        (SetId::Ranges4, ip_from(&bytes))
    };
    let mut k = vec![Value::ip(addr)];
    k.extend(vip_key(key));
    (
        set.of_family(v4),
        Element::key(ElemKey::Value(Value::Concat(k))),
    )
}

fn ip_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn ip_from(b: &[u8]) -> IpAddr {
    match b.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(b).expect("4 bytes")),
        _ => IpAddr::from(<[u8; 16]>::try_from(b).expect("16 bytes")),
    }
}

/// The mask of a prefix length over `len` bytes.
pub fn prefix_mask(prefix: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let bits = (prefix as usize).saturating_sub(i * 8).min(8);
            if bits == 0 { 0 } else { 0xffu8 << (8 - bits) }
        })
        .collect()
}

/// The first bit after a prefix of length `prefix` (< the address length), over `len` bytes.
pub fn marker(prefix: u8, len: usize) -> Vec<u8> {
    let mut m = vec![0u8; len];
    m[prefix as usize / 8] = 0x80 >> (prefix % 8);
    m
}

/// An element shared by the entries of one address or backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shared {
    /// `hairpin`: `b . b` for a backend address `b`.
    Hairpin(IpAddr),
    /// `unserved`: an address with `reject_unserved_ports`.
    Unserved(IpAddr),
    /// `owned`: an address some entry serves.
    Owned(IpAddr),
}

impl Shared {
    /// Its set and element.
    pub fn element(self) -> (SetId, Element) {
        let (set, a, twice) = match self {
            Shared::Hairpin(a) => (SetId::Hairpin4, a, true),
            Shared::Unserved(a) => (SetId::Unserved4, a, false),
            Shared::Owned(a) => (SetId::Owned4, a, false),
        };
        let key = if twice {
            Value::Concat(vec![Value::ip(a), Value::ip(a)])
        } else {
            Value::ip(a)
        };
        (
            set.of_family(a.is_ipv4()),
            Element::key(ElemKey::Value(key)),
        )
    }

    /// The shared element a kernel key of `set` stands for.
    pub fn decode(set: SetId, key: &[u8]) -> Option<Shared> {
        let a = ip_at(key, set.is_v4())?;
        let alen = if set.is_v4() { 4 } else { 16 };
        match set {
            SetId::Hairpin4 | SetId::Hairpin6 => (key.len() == 2 * alen
                && ip_at(&key[alen..], set.is_v4()) == Some(a))
            .then_some(Shared::Hairpin(a)),
            SetId::Unserved4 | SetId::Unserved6 => {
                (key.len() == alen).then_some(Shared::Unserved(a))
            }
            SetId::Owned4 | SetId::Owned6 => (key.len() == alen).then_some(Shared::Owned(a)),
            _ => None,
        }
    }
}

/// The shared elements one entry uses (each once).
pub fn shared_keys(key: &VipKey, entry: &Entry) -> Vec<Shared> {
    let mut v = vec![Shared::Owned(key.addr)];
    if entry.reject_unserved_ports {
        v.push(Shared::Unserved(key.addr));
    }
    let mut ips: Vec<IpAddr> = entry.backends().iter().map(|b| b.ip()).collect();
    ips.dedup();
    v.extend(ips.into_iter().map(Shared::Hairpin));
    v
}

/// The element of a cluster (`cluster`) or service (`!cluster`: `servicecidrs`) prefix.
pub fn cidr_element(cluster: bool, net: IpNet) -> (SetId, Element) {
    let set = if cluster {
        SetId::Cluster4
    } else {
        SetId::ServiceCidrs4
    };
    (
        set.of_family(net.addr().is_ipv4()),
        Element::key(ElemKey::Prefix(net)),
    )
}

/// The `stickyvips` element of a sticky service: its recorder chain.
pub fn sticky_vip_element(key: &VipKey, entry: &Entry) -> Option<(SetId, Element)> {
    let timeout = entry.sticky_timeout()?;
    let v4 = key.addr.is_ipv4();
    Some(vip_element(
        SetId::StickyVips4,
        key,
        Some(Verdict::Goto(recorder_chain(timeout, v4))),
    ))
}

/// The `stickyvips` key of a service (for deletion).
pub fn sticky_vip_key(key: &VipKey) -> (SetId, Element) {
    vip_element(SetId::StickyVips4, key, None)
}

/// The `backends` element of one slot (internal slots from [`INTERNAL_SLOT_BASE`]).
pub fn slot_element(key: &VipKey, slot: u32, backend: SocketAddr) -> (SetId, Element) {
    let mut k = vip_key(key);
    k.push(Value::Mark(slot));
    (
        SetId::backends(key.addr.is_ipv4()),
        Element::map(
            ElemKey::Value(Value::Concat(k)),
            Value::Concat(vec![Value::ip(backend.ip()), Value::Port(backend.port())]),
        ),
    )
}

/// The `backends` key of one slot (for deletion).
pub fn slot_key(key: &VipKey, slot: u32) -> (SetId, Element) {
    let mut k = vip_key(key);
    k.push(Value::Mark(slot));
    (
        SetId::backends(key.addr.is_ipv4()),
        Element::key(ElemKey::Value(Value::Concat(k))),
    )
}

fn vip_concat(v4: bool) -> Expr {
    Expr::Concat(vec![
        Expr::Payload(if v4 { Field::IpDaddr } else { Field::Ip6Daddr }),
        Expr::Meta(MetaKey::L4Proto),
        Expr::Payload(Field::ThDport),
    ])
}

fn saddr(v4: bool) -> Expr {
    Expr::Payload(if v4 { Field::IpSaddr } else { Field::Ip6Saddr })
}

fn daddr(v4: bool) -> Expr {
    Expr::Payload(if v4 { Field::IpDaddr } else { Field::Ip6Daddr })
}

fn fam(v4: bool) -> &'static str {
    if v4 { "4" } else { "6" }
}

fn in_set(left: Expr, set: SetId, v4: bool, negate: bool) -> Stmt {
    Stmt::Lookup {
        left,
        set: SetRef::Named(set.of_family(v4).name().into()),
        negate,
    }
}

fn vmap(set: SetId, v4: bool) -> Stmt {
    Stmt::Vmap {
        key: vip_concat(v4),
        map: SetRef::Named(set.of_family(v4).name().into()),
    }
}

/// A chain the table has only while some service's elements point at it (directly, or
/// through the sticky chain's fallback to the random one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OnDemand {
    /// A dispatch chain ([`dispatch_chain_of`]); a sticky one's timeout is always 0 (the
    /// chain does not depend on it).
    Dispatch {
        /// IPv4.
        v4: bool,
        /// Over the internal backends' slots.
        internal: bool,
        /// The selection.
        selection: Selection,
        /// The slot class.
        slots: u32,
    },
    /// The recorder chain of sticky services of one timeout (seconds) and family.
    Recorder {
        /// The remembering timeout, in seconds.
        timeout: u32,
        /// IPv4.
        v4: bool,
    },
}

/// The chains on demand a table has or needs.
pub type Demand = BTreeSet<OnDemand>;

impl OnDemand {
    /// The dispatch chain(s) a balanced action needs: a sticky chain needs the random one of
    /// the same class and backend set, where its new clients go.
    pub fn dispatch(selection: Selection, slots: u32, v4: bool, internal: bool) -> Vec<OnDemand> {
        let of = |selection| OnDemand::Dispatch {
            v4,
            internal,
            selection,
            slots,
        };
        match selection {
            Selection::Sticky { .. } => {
                vec![of(Selection::Sticky { timeout: 0 }), of(Selection::Random)]
            }
            s => vec![of(s)],
        }
    }

    /// The chain's name.
    pub fn chain(self) -> String {
        match self {
            OnDemand::Dispatch {
                v4,
                internal,
                selection,
                slots,
            } => dispatch_chain_of(selection, slots as usize, v4, internal),
            OnDemand::Recorder { timeout, v4 } => recorder_chain(timeout, v4),
        }
    }

    /// The chain on demand a kernel chain's name stands for.
    pub fn parse(name: &str) -> Option<OnDemand> {
        if let Some((timeout, v4)) = parse_recorder_chain(name) {
            return Some(OnDemand::Recorder { timeout, v4 });
        }
        let (internal, rest) = match name.strip_prefix('i') {
            Some(rest) => (true, rest),
            None => (false, name),
        };
        let (selection, rest) = [
            ("random", Selection::Random),
            ("source", Selection::SourceHash),
            ("sticky", Selection::Sticky { timeout: 0 }),
        ]
        .into_iter()
        .find_map(|(p, s)| Some((s, rest.strip_prefix(p)?)))?;
        let (digits, fam) = rest.split_once('_')?;
        let v4 = match fam {
            "4" => true,
            "6" => false,
            _ => return None,
        };
        let slots: u32 = digits.parse().ok()?;
        (digits == slots.to_string() && SLOT_CLASSES.contains(&slots)).then_some(
            OnDemand::Dispatch {
                v4,
                internal,
                selection,
                slots,
            },
        )
    }
}

/// The chains and rules of `demand`: its dispatch chains, its recorder chains and, when it
/// has any recorder, the base chains that reach them.
pub fn on_demand_objects(demand: &Demand) -> (Vec<Chain>, Vec<Rule>) {
    let recorders: BTreeSet<(u32, bool)> = demand
        .iter()
        .filter_map(|d| match *d {
            OnDemand::Recorder { timeout, v4 } => Some((timeout, v4)),
            OnDemand::Dispatch { .. } => None,
        })
        .collect();
    let mut chains = Vec::new();
    let mut rules = Vec::new();
    for d in demand {
        if let OnDemand::Dispatch {
            v4,
            internal,
            selection,
            slots,
        } = *d
        {
            chains.push(Chain::regular(d.chain()));
            rules.extend(dispatch_rules(v4, selection, slots, internal));
        }
    }
    let (c, r) = recorder_objects(&recorders);
    chains.extend(c);
    rules.extend(r);
    (chains, rules)
}

/// [`skeleton`] with the loopback exemption of the daemon's listener (`super::local`).
pub fn skeleton_with(table: &str, demand: &Demand, local: Option<super::local::Local>) -> Table {
    let mut t = skeleton(table, demand);
    let (chains, rules) = super::local::objects(local);
    t.chains.extend(chains);
    t.rules.extend(rules);
    t
}

/// The whole table without elements: sets, chains and rules, plus the chains on demand of
/// `demand` (dispatch and recorder chains). Constant in size but for one chain per slot
/// class, selection, backend set and family in use, and per distinct sticky timeout and
/// family.
pub fn skeleton(table: &str, demand: &Demand) -> Table {
    let mut t = Table::new(Family::Inet, table);
    t.sets = SetId::ALL.iter().map(|s| s.definition()).collect();
    t.sets.extend([sticky_map(true), sticky_map(false)]);
    t.chains = skeleton_chains();
    // The router's own connections are fenced too, before their short-circuit (kube-proxy's
    // firewall check runs at the output hook as well): the translation admits them by
    // putting the router's addresses in the ranges where kube-proxy would.
    for hook in ["prerouting", "output"] {
        for v4 in [true, false] {
            t.rules.push(rule(
                hook,
                vec![
                    in_set(vip_concat(v4), SetId::Fenced4, v4, false),
                    Stmt::Verdict(Verdict::Jump(fence_chain(v4).into())),
                ],
                &format!("fenced{}: source ranges", fam(v4)),
            ));
        }
    }
    for v4 in [true, false] {
        t.rules.push(rule(
            "prerouting",
            vec![
                in_set(saddr(v4), SetId::Cluster4, v4, false),
                vmap(SetId::Internal4, v4),
            ],
            &format!("internal{}: cluster sources", fam(v4)),
        ));
    }
    for v4 in [true, false] {
        t.rules.push(rule(
            "output",
            vec![
                in_set(vip_concat(v4), SetId::Shortcut4, v4, false),
                Stmt::CtMarkOr(SERVICE_MASQ_MARK),
            ],
            &format!("shortcut{}: this node masquerades", fam(v4)),
        ));
        t.rules.push(rule(
            "output",
            vec![vmap(SetId::Internal4, v4)],
            &format!("internal{}: this node", fam(v4)),
        ));
    }
    for hook in ["prerouting", "output"] {
        t.rules.push(rule(
            hook,
            vec![Stmt::Verdict(Verdict::Jump("services".into()))],
            "services",
        ));
    }
    for v4 in [true, false] {
        t.rules.push(rule(
            "services",
            vec![
                in_set(vip_concat(v4), SetId::MasqVips4, v4, false),
                Stmt::CtMarkOr(SERVICE_MASQ_MARK),
            ],
            &format!("masquerade{}: always", fam(v4)),
        ));
        t.rules.push(rule(
            "services",
            vec![
                in_set(saddr(v4), SetId::Cluster4, v4, true),
                in_set(vip_concat(v4), SetId::OffCluster4, v4, false),
                Stmt::CtMarkOr(SERVICE_MASQ_MARK),
            ],
            &format!("masquerade{}: off-cluster", fam(v4)),
        ));
    }
    for v4 in [true, false] {
        t.rules.push(rule(
            "services",
            vec![vmap(SetId::Services4, v4)],
            if v4 { "vip4" } else { "vip6" },
        ));
    }
    t.rules.extend(empty_reject_rules());
    t.rules.extend(masquerade_rules());
    t.rules.extend(unserved_rules());
    t.rules.extend(fence_rules());
    let (chains, rules) = on_demand_objects(demand);
    t.chains.extend(chains);
    t.rules.extend(rules);
    t
}

fn rule(chain: &str, stmts: Vec<Stmt>, comment: &str) -> Rule {
    Rule::new(chain, stmts).with_comment(comment)
}

/// The NAT base chains, `services`, the empty-service reject chain, the unserved-port
/// chains and the fence chains.
fn skeleton_chains() -> Vec<Chain> {
    let mut chains = vec![
        Chain::base(
            "prerouting",
            ChainType::Nat,
            Hook::Prerouting,
            -100,
            ChainPolicy::Accept,
        ),
        Chain::base(
            "output",
            ChainType::Nat,
            Hook::Output,
            -100,
            ChainPolicy::Accept,
        ),
        Chain::base(
            "postrouting",
            ChainType::Nat,
            Hook::Postrouting,
            100,
            ChainPolicy::Accept,
        ),
        Chain::regular("services"),
        Chain::regular(EMPTY_REJECT),
        Chain::regular(fence_chain(true)),
        Chain::regular(fence_chain(false)),
    ];
    // Before the policy table's filter chains (priority 0), so an unserved port is
    // refused rather than silently dropped by a default policy.
    for (name, hook) in UNSERVED_HOOKS {
        chains.push(Chain::base(
            name,
            ChainType::Filter,
            hook,
            -1,
            ChainPolicy::Accept,
        ));
    }
    chains
}

/// A service without backends: TCP reset, else ICMP port unreachable.
fn empty_reject_rules() -> [Rule; 2] {
    [
        rule(
            EMPTY_REJECT,
            vec![
                Stmt::Cmp {
                    left: Expr::Meta(MetaKey::L4Proto),
                    op: CmpOp::Eq,
                    right: Value::Proto(6),
                },
                Stmt::Reject(Reject::TcpReset),
            ],
            "no backend: tcp reset",
        ),
        rule(
            EMPTY_REJECT,
            vec![Stmt::Reject(Reject::IcmpxPortUnreachable)],
            "no backend: port unreachable",
        ),
    ]
}

/// The rules of one dispatch chain. Random and source: one rule that picks slot
/// `numgen`/`jhash mod k` (plus [`INTERNAL_SLOT_BASE`] for the internal backends) and DNATs
/// to the backend the `backends` map holds for (VIP, slot). Sticky: DNAT to the client's
/// remembered backend; a client without one (the lookup misses) goes on to the random chain
/// of the same slot class and backend set.
fn dispatch_rules(v4: bool, selection: Selection, k: u32, internal: bool) -> Vec<Rule> {
    let chain = dispatch_chain_of(selection, k as usize, v4, internal);
    if let Selection::Sticky { .. } = selection {
        let key = Expr::Concat(vec![
            saddr(v4),
            daddr(v4),
            Expr::Meta(MetaKey::L4Proto),
            Expr::Payload(Field::ThDport),
        ]);
        let random = dispatch_chain_of(Selection::Random, k as usize, v4, internal);
        return vec![
            rule(
                &chain,
                vec![
                    // As in the other dispatch chains: the policy's forward chain admits the
                    // connections edgenetd DNATed (a miss goes on to the random chain, which
                    // sets the same bit).
                    Stmt::CtMarkOr(OWN_DNAT_MARK),
                    Stmt::NatMap {
                        kind: NatKind::Dnat,
                        version: if v4 { IpVersion::V4 } else { IpVersion::V6 },
                        key,
                        map: SetRef::Named(sticky_map_name(v4).into()),
                        with_port: true,
                    },
                ],
                &format!("{chain}: remembered"),
            ),
            rule(
                &chain,
                vec![Stmt::Verdict(Verdict::Goto(random))],
                &format!("{chain}: new client"),
            ),
        ];
    }
    vec![dispatch_rule(v4, selection, k, internal)]
}

/// The rule of a random or source dispatch chain.
fn dispatch_rule(v4: bool, selection: Selection, k: u32, internal: bool) -> Rule {
    let offset = if internal { INTERNAL_SLOT_BASE } else { 0 };
    let slot = if selection == Selection::SourceHash {
        Expr::Jhash {
            input: Box::new(saddr(v4)),
            modulus: k,
            seed: AFFINITY_SEED,
            offset,
        }
    } else {
        Expr::Numgen { modulus: k, offset }
    };
    let Expr::Concat(mut key) = vip_concat(v4) else {
        unreachable!()
    };
    key.push(slot);
    let chain = dispatch_chain_of(selection, k as usize, v4, internal);
    rule(
        &chain,
        vec![
            // Marks the connection as DNATed by edgenetd: the policy's forward chain admits it.
            Stmt::CtMarkOr(OWN_DNAT_MARK),
            Stmt::NatMap {
                kind: NatKind::Dnat,
                version: if v4 { IpVersion::V4 } else { IpVersion::V6 },
                key: Expr::Concat(key),
                map: SetRef::Named(SetId::backends(v4).name().into()),
                with_port: true,
            },
        ],
        &chain,
    )
}

fn dnat_status() -> Stmt {
    Stmt::Flags {
        left: Expr::Ct(CtKey::Status),
        bits: Value::CtStatus(CT_STATUS_DNAT),
        negate: false,
    }
}

fn not_lo() -> Stmt {
    Stmt::Cmp {
        left: Expr::Meta(MetaKey::OifName),
        op: CmpOp::Neq,
        right: Value::IfName("lo".into()),
    }
}

/// Postrouting: masquerade what the path marked, and hairpin connections (not to `lo`).
fn masquerade_rules() -> Vec<Rule> {
    let mut v = vec![rule(
        "postrouting",
        vec![
            dnat_status(),
            Stmt::Flags {
                left: Expr::Ct(CtKey::Mark),
                bits: Value::Mark(SERVICE_MASQ_MARK),
                negate: false,
            },
            not_lo(),
            Stmt::Masquerade,
        ],
        "masquerade: marked path",
    )];
    for v4 in [true, false] {
        v.push(rule(
            "postrouting",
            vec![
                dnat_status(),
                in_set(
                    Expr::Concat(vec![saddr(v4), daddr(v4)]),
                    SetId::Hairpin4,
                    v4,
                    false,
                ),
                not_lo(),
                Stmt::Masquerade,
            ],
            &format!("hairpin{}", fam(v4)),
        ));
    }
    v
}

/// The unserved-port and service-CIDR checks, in forward and output: new connections that
/// were not DNATed and are still addressed to a cluster IP (reject) or to an address of the
/// service CIDRs no entry owns (drop). In output, never the router's own addresses.
fn unserved_rules() -> Vec<Rule> {
    let mut v = Vec::new();
    for (chain, hook) in UNSERVED_HOOKS {
        for v4 in [true, false] {
            let mut head = vec![
                Stmt::Flags {
                    left: Expr::Ct(CtKey::State),
                    bits: Value::CtState(CT_STATE_NEW),
                    negate: false,
                },
                Stmt::Flags {
                    left: Expr::Ct(CtKey::Status),
                    bits: Value::CtStatus(CT_STATUS_DNAT),
                    negate: true,
                },
            ];
            if hook == Hook::Output {
                head.push(Stmt::Cmp {
                    left: Expr::FibDaddrType,
                    op: CmpOp::Neq,
                    right: Value::AddrType(ADDRTYPE_LOCAL),
                });
            }
            let mut reject = head.clone();
            reject.extend([
                in_set(daddr(v4), SetId::Unserved4, v4, false),
                Stmt::Verdict(Verdict::Goto(EMPTY_REJECT.into())),
            ]);
            v.push(rule(chain, reject, &format!("unserved{}: reject", fam(v4))));
            let mut drop = head;
            drop.extend([
                in_set(daddr(v4), SetId::ServiceCidrs4, v4, false),
                in_set(daddr(v4), SetId::Owned4, v4, true),
                Stmt::Verdict(Verdict::Drop),
            ]);
            v.push(rule(
                chain,
                drop,
                &format!("servicecidrs{}: unowned drop", fam(v4)),
            ));
        }
    }
    v
}

/// The fence chains: a source in one of the entry's ranges returns (and goes on to the
/// short-circuit and the services), any other is dropped. Only connections to a fenced
/// entry (`fenced4`) come here, from prerouting and from output (this node's own
/// connections are admitted only by a range that holds their source). One rule for hosts and one per prefix length shorter than a host's (the
/// source masked to it, its marker bit set, looked up in `ranges`): constant, and only the
/// first packet of a connection to a fenced address pays for them.
fn fence_rules() -> Vec<Rule> {
    let mut v = Vec::new();
    for v4 in [true, false] {
        let chain = fence_chain(v4);
        let len = if v4 { 4 } else { 16 };
        let tail = || {
            vec![
                daddr(v4),
                Expr::Meta(MetaKey::L4Proto),
                Expr::Payload(Field::ThDport),
            ]
        };
        let mut key = vec![saddr(v4)];
        key.extend(tail());
        v.push(rule(
            chain,
            vec![
                in_set(Expr::Concat(key), SetId::Hosts4, v4, false),
                Stmt::Verdict(Verdict::Return),
            ],
            &format!("fence{}: host", fam(v4)),
        ));
        for prefix in 0..(len * 8) as u8 {
            let mut key = vec![Expr::Bitwise {
                input: Box::new(saddr(v4)),
                mask: prefix_mask(prefix, len),
                xor: marker(prefix, len),
            }];
            key.extend(tail());
            v.push(rule(
                chain,
                vec![
                    in_set(Expr::Concat(key), SetId::Ranges4, v4, false),
                    Stmt::Verdict(Verdict::Return),
                ],
                &format!("fence{}: /{prefix}", fam(v4)),
            ));
        }
        v.push(rule(
            chain,
            vec![Stmt::Verdict(Verdict::Drop)],
            &format!("fence{}: other sources", fam(v4)),
        ));
    }
    v
}

/// The recorder chains of `recorders` (timeout, family) and, when there is any, the base
/// chains that reach them.
///
/// Why after DNAT, in a filter chain at `dstnat + 1`: the backend is known only once the
/// dispatch chain has run, and a second NAT chain at the same hook would not even be called
/// for a connection the first one translated. The original tuple (`ct original`) still holds
/// the VIP. Only a connection's first packet (`ct state new`) of a sticky service (its VIP
/// in `stickyvips`) is recorded; `update` adds the client or restarts its timeout.
/// `ct original proto-dst` is typed by nft only after a protocol match, hence a rule per
/// protocol.
fn recorder_objects(recorders: &BTreeSet<(u32, bool)>) -> (Vec<Chain>, Vec<Rule>) {
    let mut chains = Vec::new();
    let mut rules = Vec::new();
    if recorders.is_empty() {
        return (chains, rules);
    }
    for (name, hook) in RECORD_HOOKS {
        chains.push(Chain::base(
            name,
            ChainType::Filter,
            hook,
            -99,
            ChainPolicy::Accept,
        ));
        for v4 in [true, false] {
            for proto in Protocol::ALL {
                let proto = proto.number();
                let vip = Expr::Concat(vec![
                    Expr::CtOriginal(if v4 {
                        CtOrigKey::IpDaddr
                    } else {
                        CtOrigKey::Ip6Daddr
                    }),
                    Expr::Meta(MetaKey::L4Proto),
                    Expr::CtOriginal(CtOrigKey::ProtoDst),
                ]);
                rules.push(rule(
                    name,
                    vec![
                        l4proto_is(proto),
                        Stmt::Flags {
                            left: Expr::Ct(CtKey::State),
                            bits: Value::CtState(CT_STATE_NEW),
                            negate: false,
                        },
                        Stmt::Flags {
                            left: Expr::Ct(CtKey::Status),
                            bits: Value::CtStatus(CT_STATUS_DNAT),
                            negate: false,
                        },
                        Stmt::Vmap {
                            key: vip,
                            map: SetRef::Named(SetId::sticky_vips(v4).name().into()),
                        },
                    ],
                    &format!("record {}", if v4 { "ipv4" } else { "ipv6" }),
                ));
            }
        }
    }
    for (timeout, v4) in recorders {
        let chain = recorder_chain(*timeout, *v4);
        chains.push(Chain::regular(&chain));
        for proto in Protocol::ALL {
            rules.push(recorder_rule(&chain, *timeout, *v4, proto.number()));
        }
    }
    (chains, rules)
}

fn l4proto_is(proto: u8) -> Stmt {
    Stmt::Cmp {
        left: Expr::Meta(MetaKey::L4Proto),
        op: CmpOp::Eq,
        right: Value::Proto(proto),
    }
}

/// `update @sticky4 { ip saddr . ct original ip daddr . meta l4proto . ct original proto-dst
/// timeout T : ip daddr . th dport }` for one protocol.
fn recorder_rule(chain: &str, timeout: u32, v4: bool, proto: u8) -> Rule {
    let (saddr, daddr, orig) = if v4 {
        (Field::IpSaddr, Field::IpDaddr, CtOrigKey::IpDaddr)
    } else {
        (Field::Ip6Saddr, Field::Ip6Daddr, CtOrigKey::Ip6Daddr)
    };
    rule(
        chain,
        vec![
            l4proto_is(proto),
            Stmt::MapUpdate {
                map: sticky_map_name(v4).into(),
                key: Expr::Concat(vec![
                    Expr::Payload(saddr),
                    Expr::CtOriginal(orig),
                    Expr::Meta(MetaKey::L4Proto),
                    Expr::CtOriginal(CtOrigKey::ProtoDst),
                ]),
                timeout_ms: u64::from(timeout) * 1000,
                data: Expr::Concat(vec![Expr::Payload(daddr), Expr::Payload(Field::ThDport)]),
            },
        ],
        &format!(
            "{chain} {}",
            Protocol::ALL
                .iter()
                .find(|p| p.number() == proto)
                .map_or("?", |p| p.name())
        ),
    )
}

/// The fields of a kernel element's key, read straight from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyParts {
    /// The VIP.
    pub addr: IpAddr,
    /// The layer-4 protocol number.
    pub proto: u8,
    /// The port.
    pub port: u16,
    /// The slot (only in the backends maps).
    pub slot: Option<u32>,
}

/// Splits the key of a kernel element of a set keyed by `vip . proto . port` (and the slot in
/// the backends maps) into its fields. `None` for other sets and when the bytes do not have
/// the set's layout (address, protocol and port each padded to 4 bytes, then the slot).
pub fn key_parts(set: SetId, key: &[u8]) -> Option<KeyParts> {
    if set.role() != SetRole::Entry
        || matches!(
            set,
            SetId::Ranges4 | SetId::Ranges6 | SetId::Hosts4 | SetId::Hosts6
        )
    {
        return None;
    }
    let alen = if set.is_v4() { 4 } else { 16 };
    let slot = matches!(set, SetId::Backends4 | SetId::Backends6);
    if key.len() != alen + 8 + if slot { 4 } else { 0 } {
        return None;
    }
    let addr = if alen == 4 {
        IpAddr::from(<[u8; 4]>::try_from(&key[..4]).ok()?)
    } else {
        IpAddr::from(<[u8; 16]>::try_from(&key[..16]).ok()?)
    };
    let slot = slot.then(|| {
        let b = &key[alen + 8..alen + 12];
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    });
    Some(KeyParts {
        addr,
        proto: key[alen],
        port: u16::from_be_bytes([key[alen + 4], key[alen + 5]]),
        slot,
    })
}

/// Decodes the key of a kernel element of a plain (not interval) `set` back into the IR
/// (for deleting strays found by a dump). `None` when the bytes do not have the set's layout
/// (each component padded to 4 bytes in a concatenation).
pub fn decode_key(set: SetId, key: &[u8]) -> Option<Element> {
    let def = set.definition();
    if def.interval {
        return None;
    }
    let types = &def.key.0;
    if key.len() != def.key.byte_len() as usize {
        return None;
    }
    let mut parts = Vec::with_capacity(types.len());
    let mut at = 0;
    for t in types {
        let len = t.byte_len() as usize;
        let b = key.get(at..at + len)?;
        parts.push(match t {
            DataType::Ipv4Addr => Value::ip(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
            DataType::Ipv6Addr => Value::ip(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
            DataType::InetProto => Value::Proto(b[0]),
            DataType::InetService => Value::Port(u16::from_be_bytes([b[0], b[1]])),
            DataType::Mark => Value::Mark(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            _ => return None,
        });
        at += if types.len() > 1 {
            len.div_ceil(4) * 4
        } else {
            len
        };
    }
    let value = if parts.len() == 1 {
        parts.pop()?
    } else {
        Value::Concat(parts)
    };
    Some(Element::key(ElemKey::Value(value)))
}

/// A remembered client: one element of a sticky map, read from its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    /// The client's address.
    pub client: IpAddr,
    /// The service it connected to.
    pub vip: IpAddr,
    /// The service's protocol number.
    pub proto: u8,
    /// The service's port.
    pub port: u16,
    /// The backend it is stuck to.
    pub backend: SocketAddr,
}

impl Remembered {
    /// The element's key (for deleting it).
    pub fn key(&self) -> Element {
        Element::key(ElemKey::Value(Value::Concat(vec![
            Value::ip(self.client),
            Value::ip(self.vip),
            Value::Proto(self.proto),
            Value::Port(self.port),
        ])))
    }
}

fn ip_at(bytes: &[u8], v4: bool) -> Option<IpAddr> {
    Some(if v4 {
        IpAddr::from(<[u8; 4]>::try_from(bytes.get(..4)?).ok()?)
    } else {
        IpAddr::from(<[u8; 16]>::try_from(bytes.get(..16)?).ok()?)
    })
}

/// Reads an element of the sticky map of a family (`None` when the bytes do not have its
/// layout: addresses, then protocol and ports each padded to 4 bytes).
pub fn remembered(v4: bool, key: &[u8], data: &[u8]) -> Option<Remembered> {
    let alen = if v4 { 4 } else { 16 };
    if key.len() != 2 * alen + 8 || data.len() != alen + 4 {
        return None;
    }
    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    Some(Remembered {
        client: ip_at(key, v4)?,
        vip: ip_at(&key[alen..], v4)?,
        proto: key[2 * alen],
        port: port(&key[2 * alen + 4..]),
        backend: SocketAddr::new(ip_at(data, v4)?, port(&data[alen..])),
    })
}
