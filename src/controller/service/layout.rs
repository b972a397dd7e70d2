//! The fixed layout of table `inet <prefix>-service` and the elements that stand for one
//! service.
//!
//! Why this shape (see also `docs/architecture.md`): kube-proxy's nftables layout creates a
//! chain and an anonymous `numgen` vmap per service, and creating an anonymous set scans
//! every existing set name, so loading 10k services is quadratic (tens of seconds). Here the
//! rules and chains are a constant skeleton and every service is only *elements* of a few
//! named maps:
//!
//! ```text
//! prerouting/output (nat, dstnat) -> services: ip daddr . l4proto . th dport vmap @services4
//!   services4[vip . proto . port] = goto random16_4 | source64_4 | ... | empty_reject | drop
//!   random16_4: ct mark set ct mark | 0x80000000
//!               dnat ip to ip daddr . l4proto . th dport . numgen random mod 16 map @backends4
//!   source16_4: ct mark set ct mark | 0x80000000
//!               dnat ip to ip daddr . l4proto . th dport . jhash ip saddr mod 16 map @backends4
//!   backends4[vip . proto . port . slot] = backend addr . port
//! postrouting (nat, srcnat): ct status dnat ip daddr . l4proto . th dport @masquerade4
//!                            oifname != "lo" masquerade
//! ```
//!
//! One dispatch chain per slot class (16, 64, 256, 1024), per selection (random, source
//! hash) and per family. Cost is linear in services and an update to one service touches
//! only its own elements. Masquerade is decided in postrouting on the *translated*
//! destination (the backend address . protocol . port of a service that asks for it, for
//! DNATed connections only), which needs neither a packet mark nor a per-service rule.
//! The `masquerade` set is shared by services with a common backend, so the controller keeps
//! a reference count per element.

use std::net::{IpAddr, SocketAddr};

use crate::dataplane::nft::ir::*;

use super::model::{Action, Entry, VipKey};
use super::slots::SLOT_CLASSES;

/// Seed of the source-affinity hash: fixed, so a client keeps its backend across restarts.
pub const AFFINITY_SEED: u32 = 0x6564_6765; // "edge"

/// The named sets and maps of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetId {
    /// `services4`: IPv4 VIP . proto . port -> verdict.
    Services4,
    /// `services6`.
    Services6,
    /// `backends4`: IPv4 VIP . proto . port . slot -> backend addr . port.
    Backends4,
    /// `backends6`.
    Backends6,
    /// `masquerade4`: IPv4 backend addr . proto . port of masquerading services.
    Masquerade4,
    /// `masquerade6`.
    Masquerade6,
}

impl SetId {
    /// All of them, in creation order.
    pub const ALL: [SetId; 6] = [
        SetId::Services4,
        SetId::Services6,
        SetId::Backends4,
        SetId::Backends6,
        SetId::Masquerade4,
        SetId::Masquerade6,
    ];

    /// Index into [`SetId::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The set's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            SetId::Services4 => "services4",
            SetId::Services6 => "services6",
            SetId::Backends4 => "backends4",
            SetId::Backends6 => "backends6",
            SetId::Masquerade4 => "masquerade4",
            SetId::Masquerade6 => "masquerade6",
        }
    }

    fn services(v4: bool) -> SetId {
        if v4 {
            SetId::Services4
        } else {
            SetId::Services6
        }
    }

    fn backends(v4: bool) -> SetId {
        if v4 {
            SetId::Backends4
        } else {
            SetId::Backends6
        }
    }

    /// The masquerade set of an address's family.
    pub fn masquerade(v4: bool) -> SetId {
        if v4 {
            SetId::Masquerade4
        } else {
            SetId::Masquerade6
        }
    }

    /// True for the IPv4 sets.
    pub fn is_v4(self) -> bool {
        matches!(
            self,
            SetId::Services4 | SetId::Backends4 | SetId::Masquerade4
        )
    }

    /// Its definition (without elements).
    pub fn definition(self) -> Set {
        use DataType::*;
        let addr = if self.is_v4() { Ipv4Addr } else { Ipv6Addr };
        let (key, data) = match self {
            SetId::Services4 | SetId::Services6 => {
                (vec![addr, InetProto, InetService], Some(vec![Verdict]))
            }
            SetId::Backends4 | SetId::Backends6 => (
                vec![addr, InetProto, InetService, Mark],
                Some(vec![addr, InetService]),
            ),
            SetId::Masquerade4 | SetId::Masquerade6 => (vec![addr, InetProto, InetService], None),
        };
        let mut set = Set::new(self.name(), KeyType(key));
        set.data = data.map(KeyType);
        set
    }
}

/// Name of the chain that dispatches over `slots` slots (`random16_4`, `source64_6`, ...).
pub fn dispatch_chain(affinity: bool, slots: usize, v4: bool) -> String {
    format!(
        "{}{slots}_{}",
        if affinity { "source" } else { "random" },
        if v4 { 4 } else { 6 }
    )
}

/// The chain that refuses connections to a service without backends.
pub const EMPTY_REJECT: &str = "empty_reject";

/// The verdict of a service's `services` element.
pub fn verdict(key: &VipKey, entry: &Entry) -> Verdict {
    // Fault injection (test builds only): a service whose name starts with `fault-reject`
    // points at a chain that does not exist, so the kernel refuses its elements.
    #[cfg(feature = "fault-injection")]
    if entry.name.starts_with("fault-reject") {
        return Verdict::Goto("fault-missing-chain".into());
    }
    match &entry.action {
        Action::Balance { affinity, slots } => {
            Verdict::Goto(dispatch_chain(*affinity, slots.len(), key.addr.is_ipv4()))
        }
        Action::Reject => Verdict::Goto(EMPTY_REJECT.into()),
        Action::Drop => Verdict::Drop,
    }
}

fn vip_key(key: &VipKey) -> Vec<Value> {
    vec![
        Value::ip(key.addr),
        Value::Proto(key.proto.number()),
        Value::Port(key.port),
    ]
}

/// The `services` element of a service.
pub fn service_element(key: &VipKey, entry: &Entry) -> (SetId, Element) {
    (
        SetId::services(key.addr.is_ipv4()),
        Element::map(
            ElemKey::Value(Value::Concat(vip_key(key))),
            Value::Verdict(verdict(key, entry)),
        ),
    )
}

/// The `services` key of a service (for deletion).
pub fn service_key(key: &VipKey) -> (SetId, Element) {
    (
        SetId::services(key.addr.is_ipv4()),
        Element::key(ElemKey::Value(Value::Concat(vip_key(key)))),
    )
}

/// The `backends` element of one slot.
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

/// Key of a `masquerade` element: a backend of a masquerading service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MasqKey {
    /// The backend.
    pub backend: SocketAddr,
    /// The service's protocol number.
    pub proto: u8,
}

/// The `masquerade` element of a backend.
pub fn masquerade_element(m: &MasqKey) -> (SetId, Element) {
    (
        SetId::masquerade(m.backend.is_ipv4()),
        Element::key(ElemKey::Value(Value::Concat(vec![
            Value::ip(m.backend.ip()),
            Value::Proto(m.proto),
            Value::Port(m.backend.port()),
        ]))),
    )
}

fn vip_concat(v4: bool) -> Expr {
    Expr::Concat(vec![
        Expr::Payload(if v4 { Field::IpDaddr } else { Field::Ip6Daddr }),
        Expr::Meta(MetaKey::L4Proto),
        Expr::Payload(Field::ThDport),
    ])
}

/// The whole table without elements: sets, chains and rules. Constant in size.
pub fn skeleton(table: &str) -> Table {
    let mut t = Table::new(Family::Inet, table);
    t.sets = SetId::ALL.iter().map(|s| s.definition()).collect();
    t.chains = skeleton_chains();
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
            vec![Stmt::Vmap {
                key: vip_concat(v4),
                map: SetRef::Named(SetId::services(v4).name().into()),
            }],
            if v4 { "vip4" } else { "vip6" },
        ));
    }
    t.rules.extend(empty_reject_rules());
    for v4 in [true, false] {
        for affinity in [false, true] {
            for k in SLOT_CLASSES {
                t.rules.push(dispatch_rule(v4, affinity, k));
            }
        }
    }
    for v4 in [true, false] {
        t.rules.push(masquerade_rule(v4));
    }
    t
}

fn rule(chain: &str, stmts: Vec<Stmt>, comment: &str) -> Rule {
    Rule::new(chain, stmts).with_comment(comment)
}

/// The NAT base chains, `services`, the empty-service reject chain and every dispatch chain.
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
    ];
    for v4 in [true, false] {
        for affinity in [false, true] {
            for k in SLOT_CLASSES {
                chains.push(Chain::regular(dispatch_chain(affinity, k as usize, v4)));
            }
        }
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

/// The rule of one dispatch chain: picks slot `numgen`/`jhash mod k` and DNATs to the
/// backend the `backends` map holds for (VIP, slot).
fn dispatch_rule(v4: bool, affinity: bool, k: u32) -> Rule {
    let slot = if affinity {
        Expr::Jhash {
            input: Box::new(Expr::Payload(if v4 {
                Field::IpSaddr
            } else {
                Field::Ip6Saddr
            })),
            modulus: k,
            seed: AFFINITY_SEED,
            offset: 0,
        }
    } else {
        Expr::Numgen {
            modulus: k,
            offset: 0,
        }
    };
    let Expr::Concat(mut key) = vip_concat(v4) else {
        unreachable!()
    };
    key.push(slot);
    let chain = dispatch_chain(affinity, k as usize, v4);
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

/// Masquerade of DNATed traffic to a VIP whose service masquerades (and not to `lo`).
fn masquerade_rule(v4: bool) -> Rule {
    rule(
        "postrouting",
        vec![
            Stmt::Flags {
                left: Expr::Ct(CtKey::Status),
                bits: Value::CtStatus(CT_STATUS_DNAT),
                negate: false,
            },
            Stmt::Lookup {
                left: vip_concat(v4),
                set: SetRef::Named(SetId::masquerade(v4).name().into()),
                negate: false,
            },
            Stmt::Cmp {
                left: Expr::Meta(MetaKey::OifName),
                op: CmpOp::Neq,
                right: Value::IfName("lo".into()),
            },
            Stmt::Masquerade,
        ],
        if v4 { "masquerade4" } else { "masquerade6" },
    )
}

/// The fields of a kernel element's key, read straight from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyParts {
    /// The VIP (services, backends) or the backend address (masquerade).
    pub addr: IpAddr,
    /// The layer-4 protocol number.
    pub proto: u8,
    /// The port.
    pub port: u16,
    /// The slot (only in the backends maps).
    pub slot: Option<u32>,
}

/// Splits the key of a kernel element of `set` into its fields. `None` when the bytes do not
/// have the set's layout (address, protocol and port each padded to 4 bytes, then the slot in
/// the backends maps).
pub fn key_parts(set: SetId, key: &[u8]) -> Option<KeyParts> {
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

/// Decodes the key of a kernel element of `set` back into the IR (for deleting strays found
/// by a dump). `None` when the bytes do not have the set's layout.
pub fn decode_key(set: SetId, key: &[u8]) -> Option<Element> {
    let k = key_parts(set, key)?;
    let mut parts = vec![
        Value::ip(k.addr),
        Value::Proto(k.proto),
        Value::Port(k.port),
    ];
    if let Some(slot) = k.slot {
        parts.push(Value::Mark(slot));
    }
    Some(Element::key(ElemKey::Value(Value::Concat(parts))))
}
