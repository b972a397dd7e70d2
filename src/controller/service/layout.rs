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

use std::collections::BTreeSet;

use super::model::{Action, Entry, Selection, VipKey};
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
    /// `stickyvips4`: IPv4 VIP . proto . port of a sticky service -> goto the recorder chain
    /// of its timeout.
    StickyVips4,
    /// `stickyvips6`.
    StickyVips6,
}

impl SetId {
    /// All of them, in creation order.
    pub const ALL: [SetId; 8] = [
        SetId::Services4,
        SetId::Services6,
        SetId::Backends4,
        SetId::Backends6,
        SetId::Masquerade4,
        SetId::Masquerade6,
        SetId::StickyVips4,
        SetId::StickyVips6,
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
            SetId::StickyVips4 => "stickyvips4",
            SetId::StickyVips6 => "stickyvips6",
        }
    }

    fn services(v4: bool) -> SetId {
        if v4 {
            SetId::Services4
        } else {
            SetId::Services6
        }
    }

    /// The sticky-VIP map of a family.
    pub fn sticky_vips(v4: bool) -> SetId {
        if v4 {
            SetId::StickyVips4
        } else {
            SetId::StickyVips6
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
            SetId::Services4 | SetId::Backends4 | SetId::Masquerade4 | SetId::StickyVips4
        )
    }

    /// Its definition (without elements).
    pub fn definition(self) -> Set {
        use DataType::*;
        let addr = if self.is_v4() { Ipv4Addr } else { Ipv6Addr };
        let (key, data) = match self {
            SetId::Services4 | SetId::Services6 | SetId::StickyVips4 | SetId::StickyVips6 => {
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

/// Name of the chain that dispatches over `slots` slots (`random16_4`, `source64_6`,
/// `sticky256_4`, ...).
pub fn dispatch_chain(selection: Selection, slots: usize, v4: bool) -> String {
    format!(
        "{}{slots}_{}",
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
        Action::Balance { selection, slots } => {
            Verdict::Goto(dispatch_chain(*selection, slots.len(), key.addr.is_ipv4()))
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

/// The `stickyvips` element of a sticky service: its recorder chain.
pub fn sticky_vip_element(key: &VipKey, entry: &Entry) -> Option<(SetId, Element)> {
    let timeout = entry.sticky_timeout()?;
    let v4 = key.addr.is_ipv4();
    Some((
        SetId::sticky_vips(v4),
        Element::map(
            ElemKey::Value(Value::Concat(vip_key(key))),
            Value::Verdict(Verdict::Goto(recorder_chain(timeout, v4))),
        ),
    ))
}

/// The `stickyvips` key of a service (for deletion).
pub fn sticky_vip_key(key: &VipKey) -> (SetId, Element) {
    (
        SetId::sticky_vips(key.addr.is_ipv4()),
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

/// [`skeleton`] with the loopback exemption of the daemon's listener (`super::local`).
pub fn skeleton_with(
    table: &str,
    recorders: &BTreeSet<(u32, bool)>,
    local: Option<super::local::Local>,
) -> Table {
    let mut t = skeleton(table, recorders);
    let (chains, rules) = super::local::objects(local);
    t.chains.extend(chains);
    t.rules.extend(rules);
    t
}

/// The whole table without elements: sets, chains and rules, plus the recorder chains of
/// the (timeout, family) pairs in `recorders`. Constant in size but for one chain per
/// distinct sticky timeout and family.
pub fn skeleton(table: &str, recorders: &BTreeSet<(u32, bool)>) -> Table {
    let mut t = Table::new(Family::Inet, table);
    t.sets = SetId::ALL.iter().map(|s| s.definition()).collect();
    t.sets.extend([sticky_map(true), sticky_map(false)]);
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
        for selection in SELECTIONS {
            for k in SLOT_CLASSES {
                t.rules.extend(dispatch_rules(v4, selection, k));
            }
        }
    }
    for v4 in [true, false] {
        t.rules.push(masquerade_rule(v4));
    }
    let (chains, rules) = recorder_objects(recorders);
    t.chains.extend(chains);
    t.rules.extend(rules);
    t
}

/// One dispatch chain family per selection (the sticky one's timeout is not in its name).
const SELECTIONS: [Selection; 3] = [
    Selection::Random,
    Selection::SourceHash,
    Selection::Sticky { timeout: 0 },
];

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
        for selection in SELECTIONS {
            for k in SLOT_CLASSES {
                chains.push(Chain::regular(dispatch_chain(selection, k as usize, v4)));
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

/// The rules of one dispatch chain. Random and source: one rule that picks slot
/// `numgen`/`jhash mod k` and DNATs to the backend the `backends` map holds for (VIP, slot).
/// Sticky: DNAT to the client's remembered backend; a client without one (the lookup
/// misses) goes on to the random chain of the same slot class.
fn dispatch_rules(v4: bool, selection: Selection, k: u32) -> Vec<Rule> {
    let chain = dispatch_chain(selection, k as usize, v4);
    if let Selection::Sticky { .. } = selection {
        let (saddr, daddr) = if v4 {
            (Field::IpSaddr, Field::IpDaddr)
        } else {
            (Field::Ip6Saddr, Field::Ip6Daddr)
        };
        let key = Expr::Concat(vec![
            Expr::Payload(saddr),
            Expr::Payload(daddr),
            Expr::Meta(MetaKey::L4Proto),
            Expr::Payload(Field::ThDport),
        ]);
        let random = dispatch_chain(Selection::Random, k as usize, v4);
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
    vec![dispatch_rule(v4, selection == Selection::SourceHash, k)]
}

/// The rule of a random or source dispatch chain.
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
    let selection = if affinity {
        Selection::SourceHash
    } else {
        Selection::Random
    };
    let chain = dispatch_chain(selection, k as usize, v4);
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
pub fn recorder_objects(recorders: &BTreeSet<(u32, bool)>) -> (Vec<Chain>, Vec<Rule>) {
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
            for proto in [6u8, 17] {
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
        for proto in [6u8, 17] {
            rules.push(recorder_rule(&chain, *timeout, *v4, proto));
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
        &format!("{chain} {}", if proto == 6 { "tcp" } else { "udp" }),
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
