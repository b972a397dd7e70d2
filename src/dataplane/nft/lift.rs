//! The kernel's expressions of an included rule ([`Opaque`]) lifted back to the IR's
//! statements, so `explain` can run a rule nft compiled as it runs edgenetd's own.
//!
//! The lift is the compiler read backwards, for what snippets usually hold: `meta`
//! (iifname, oifname, l4proto, nfproto, mark), `payload` loads of the fields
//! [`Field::def`] knows and `ct` (state, status, mark) loads, then `cmp` (all six
//! operators), `range`, `bitwise` + `cmp` (address prefixes, masks, flag tests), lookups in
//! named sets and verdict maps, `counter`, `log`, `limit`, `notrack`, `reject`, `meta mark
//! set` / `meta nftrace set` and immediate verdicts. The dependencies nft added (`meta
//! nfproto ipv4` before `ip saddr`) come back as the comparisons they are. Anything else,
//! or a register read in a way the lift does not follow (a concatenation), and the rule
//! does not lift: [`lift`] says `None`, never a statement that means something else.
//!
//! [`Opaque`]: super::ir::Opaque

use super::build::objects::opaque_rule_in;
use super::ffi::attr::{any_expr, expr};
use super::ffi::{Ref, kind};
use super::fields::Base;
use super::ir::*;
use super::table_ref::TableRef;

/// `meta nfproto` of IPv4 and IPv6.
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// The statements the kernel's expressions `exprs` (an `NFTA_RULE_EXPRESSIONS` payload as
/// the kernel listed it) of a rule of a `family` table mean, or `None` when one of them is
/// not one the lift reads (an empty list included: a rule that was never compiled).
pub fn lift(family: Family, exprs: &[u8]) -> Option<Vec<Stmt>> {
    if exprs.is_empty() {
        return None;
    }
    let rule = opaque_rule_in(&TableRef::new(family, "lift"), "lift", exprs).ok()?;
    let view = rule.view();
    let mut st = State {
        regs: Vec::new(),
        nfproto: match family {
            Family::Inet => None,
            Family::Ip => Some(NFPROTO_IPV4),
            Family::Ip6 => Some(NFPROTO_IPV6),
        },
        l4proto: None,
        out: Vec::new(),
    };
    for e in view.exprs() {
        let name = e.str(any_expr::NAME)?.to_str().ok()?;
        st.expr(name, e)?;
    }
    Some(st.out)
}

/// What a register holds.
#[derive(Debug, Clone)]
enum Reg {
    /// Bytes `at .. at + mask.len()` of `expr`'s value, each masked by its byte of `mask`.
    Loaded {
        /// The whole value the bytes are part of.
        expr: Expr,
        /// Where the loaded bytes start in it.
        at: usize,
        /// The bits kept of each loaded byte (all ones until a `bitwise`).
        mask: Vec<u8>,
    },
    /// An immediate's data.
    Const(Vec<u8>),
}

/// The lift's state along one rule.
struct State {
    /// Registers written and not read yet, by number.
    regs: Vec<(u32, Reg)>,
    /// The `meta nfproto` matched so far (or the table's family's).
    nfproto: Option<u8>,
    /// The `meta l4proto` matched so far.
    l4proto: Option<u8>,
    /// The statements.
    out: Vec<Stmt>,
}

impl State {
    fn write(&mut self, reg: u32, v: Reg) {
        self.regs.retain(|(r, _)| *r != reg);
        self.regs.push((reg, v));
    }

    /// The register `reg`, read (it keeps its value): `None` when it holds nothing known,
    /// or when another register was written after it (the parts of a concatenation).
    fn read(&self, reg: u32) -> Option<Reg> {
        match self.regs.last() {
            Some((r, v)) if *r == reg => Some(v.clone()),
            _ => None,
        }
    }

    /// Appends `stmt`; a range right after one of the same value is the intersection of the
    /// two (nft writes `a-b` as `>= a` then `<= b`).
    fn push(&mut self, stmt: Stmt) {
        if let (
            Some(Stmt::Range {
                left: l0,
                negate: false,
                from: f0,
                to: t0,
            }),
            Stmt::Range {
                left,
                negate: false,
                from,
                to,
            },
        ) = (self.out.last_mut(), &stmt)
            && l0 == left
        {
            let host = host_order(left);
            let n = |v: &Value| super::encode::encode(v).ok().and_then(|b| number(&b, host));
            if let (Some(a), Some(b), Some(c), Some(d)) = (n(f0), n(from), n(t0), n(to)) {
                if b > a {
                    *f0 = from.clone();
                }
                if d < c {
                    *t0 = to.clone();
                }
                return;
            }
        }
        self.learn(&stmt);
        self.out.push(stmt);
    }

    fn expr(&mut self, name: &str, e: Ref<'_, kind::AnyExpr>) -> Option<()> {
        match name {
            "meta" => self.meta(e.as_kind()),
            "payload" => self.payload(e.as_kind()),
            "ct" => self.ct(e.as_kind()),
            "cmp" => {
                let c = e.as_kind::<kind::Cmp>();
                let reg = self.read(c.u32(expr::cmp::SREG)?)?;
                let stmt = cmp(reg, c.u32(expr::cmp::OP)?, c.data(expr::cmp::DATA)?)?;
                self.push(stmt);
                Some(())
            }
            "range" => {
                let r = e.as_kind::<kind::Range>();
                let reg = self.read(r.u32(expr::range::SREG)?)?;
                let (left, _) = whole(reg)?;
                let from = value_of(&left, r.data(expr::range::FROM)?)?;
                let to = value_of(&left, r.data(expr::range::TO)?)?;
                let negate = match r.u32(expr::range::OP)? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                self.push(Stmt::Range {
                    left,
                    negate,
                    from,
                    to,
                });
                Some(())
            }
            "bitwise" => {
                let b = e.as_kind::<kind::Bitwise>();
                let Reg::Loaded { expr, at, mask } = self.read(b.u32(expr::bitwise::SREG)?)? else {
                    return None;
                };
                let and = b.data(expr::bitwise::MASK)?;
                let xor = b.data(expr::bitwise::XOR).unwrap_or(&[]);
                if and.len() != mask.len() || xor.iter().any(|x| *x != 0) {
                    return None;
                }
                let mask = mask.iter().zip(and).map(|(m, a)| m & a).collect();
                self.write(b.u32(expr::bitwise::DREG)?, Reg::Loaded { expr, at, mask });
                Some(())
            }
            "lookup" => {
                let l = e.as_kind::<kind::Lookup>();
                let set = l.str(expr::lookup::SET)?.to_str().ok()?.to_string();
                // `__set%d`, `__map%d`: anonymous, which an include never carries.
                if set.starts_with("__") {
                    return None;
                }
                let (left, _) = whole(self.read(l.u32(expr::lookup::SREG)?)?)?;
                let negate = l.u32(expr::lookup::FLAGS).unwrap_or(0) & 1 != 0;
                self.out.push(match l.u32(expr::lookup::DREG) {
                    None => Stmt::Lookup {
                        left,
                        set: SetRef::Named(set),
                        negate,
                    },
                    Some(0) if !negate => Stmt::Vmap {
                        key: left,
                        map: SetRef::Named(set),
                    },
                    Some(_) => return None,
                });
                Some(())
            }
            "immediate" => {
                let i = e.as_kind::<kind::Immediate>();
                match i.u32(expr::immediate::DREG)? {
                    0 => {
                        let chain = || {
                            i.str(expr::immediate::CHAIN)
                                .and_then(|c| c.to_str().ok())
                                .map(str::to_string)
                        };
                        let v = match i.u32(expr::immediate::VERDICT)? as i32 {
                            1 => Verdict::Accept,
                            0 => Verdict::Drop,
                            -1 => Verdict::Continue,
                            -5 => Verdict::Return,
                            -3 => Verdict::Jump(chain()?),
                            -4 => Verdict::Goto(chain()?),
                            _ => return None,
                        };
                        self.out.push(Stmt::Verdict(v));
                    }
                    reg => {
                        let data = i.data(expr::immediate::DATA)?.to_vec();
                        self.write(reg, Reg::Const(data));
                    }
                }
                Some(())
            }
            "counter" => {
                self.out.push(Stmt::Counter);
                Some(())
            }
            "log" => {
                let l = e.as_kind::<kind::Log>();
                let prefix = l
                    .str(expr::log::PREFIX)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let group = l.u16(expr::log::GROUP);
                self.out.push(Stmt::Log { prefix, group });
                Some(())
            }
            "limit" => {
                let l = e.as_kind::<kind::Limit>();
                // Packets only: a byte rate has no value explain assumes.
                if l.u32(expr::limit::TYPE).unwrap_or(0) != 0 {
                    return None;
                }
                let unit = match l.u64(expr::limit::UNIT)? {
                    1 => RateUnit::Second,
                    60 => RateUnit::Minute,
                    3600 => RateUnit::Hour,
                    86400 => RateUnit::Day,
                    _ => return None,
                };
                self.out.push(Stmt::Limit {
                    rate: l.u64(expr::limit::RATE)?,
                    unit,
                    burst: l.u32(expr::limit::BURST).unwrap_or(0),
                    over: l.u32(expr::limit::FLAGS).unwrap_or(0) & 1 != 0,
                });
                Some(())
            }
            "notrack" => {
                self.out.push(Stmt::Notrack);
                Some(())
            }
            "reject" => {
                let r = e.as_kind::<kind::Reject>();
                let code = r.u8(expr::reject::CODE).unwrap_or(0);
                let how = match (r.u32(expr::reject::TYPE)?, code) {
                    // NFT_REJECT_TCP_RST.
                    (1, _) => Reject::TcpReset,
                    // NFT_REJECT_ICMPX_UNREACH: port unreachable, admin prohibited.
                    (2, 1) => Reject::IcmpxPortUnreachable,
                    (2, 3) => Reject::IcmpxAdminProhibited,
                    // NFT_REJECT_ICMP_UNREACH with the family's own code (the rule's
                    // `meta nfproto`, or its table's family): the verdict is the same drop
                    // with an answer. Admin prohibited is 13 in ICMP, 1 in ICMPv6.
                    (0, 13) if self.nfproto == Some(NFPROTO_IPV4) => Reject::IcmpxAdminProhibited,
                    (0, 1) if self.nfproto == Some(NFPROTO_IPV6) => Reject::IcmpxAdminProhibited,
                    (0, _) => Reject::IcmpxPortUnreachable,
                    _ => return None,
                };
                self.out.push(Stmt::Reject(how));
                Some(())
            }
            _ => None,
        }
    }

    fn meta(&mut self, m: Ref<'_, kind::Meta>) -> Option<()> {
        let key = m.u32(expr::meta::KEY)?;
        if let Some(dreg) = m.u32(expr::meta::DREG) {
            // NFT_META_* numbers.
            let key = match key {
                3 => MetaKey::Mark,
                6 => MetaKey::IifName,
                7 => MetaKey::OifName,
                15 => MetaKey::NfProto,
                16 => MetaKey::L4Proto,
                _ => return None,
            };
            self.load(dreg, Expr::Meta(key), 0);
            return Some(());
        }
        let Reg::Const(data) = self.read(m.u32(expr::meta::SREG)?)? else {
            return None;
        };
        match key {
            // `meta mark set <n>`: nothing of the old mark kept.
            3 => {
                let xor = u32::from_ne_bytes(data.as_slice().try_into().ok()?);
                self.out.push(Stmt::MetaMarkSet { and: 0, xor });
            }
            // `meta nftrace set`: the trace, nothing of the packet's path.
            12 => {}
            _ => return None,
        }
        Some(())
    }

    fn payload(&mut self, p: Ref<'_, kind::Payload>) -> Option<()> {
        if p.u32(expr::payload::SREG).is_some() {
            return None;
        }
        let base = match p.u32(expr::payload::BASE)? {
            1 => Base::Network,
            2 => Base::Transport,
            _ => return None,
        };
        let offset = p.u32(expr::payload::OFFSET)?;
        let len = p.u32(expr::payload::LEN)?;
        let field = self.field(base, offset, len)?;
        let at = (offset - field.def().offset) as usize;
        let dreg = p.u32(expr::payload::DREG)?;
        self.write(
            dreg,
            Reg::Loaded {
                expr: Expr::Payload(field),
                at,
                mask: vec![0xff; len as usize],
            },
        );
        Some(())
    }

    fn ct(&mut self, c: Ref<'_, kind::Ct>) -> Option<()> {
        // A direction (`ct original ...`) or a write (`ct mark set`): not lifted.
        if c.u8(expr::ct::DIR).is_some() || c.u32(expr::ct::SREG).is_some() {
            return None;
        }
        // NFT_CT_STATE, NFT_CT_STATUS, NFT_CT_MARK.
        let key = match c.u32(expr::ct::KEY)? {
            0 => CtKey::State,
            2 => CtKey::Status,
            3 => CtKey::Mark,
            _ => return None,
        };
        self.load(c.u32(expr::ct::DREG)?, Expr::Ct(key), 0);
        Some(())
    }

    fn load(&mut self, reg: u32, expr: Expr, at: usize) {
        let len = expr.byte_len() as usize;
        self.write(
            reg,
            Reg::Loaded {
                expr,
                at,
                mask: vec![0xff; len],
            },
        );
    }

    /// The field whose bytes `offset .. offset + len` of header `base` are, for the
    /// protocols matched so far: `tcp dport` after `meta l4proto tcp`, `th dport` after
    /// `meta l4proto udp` (no `udp sport` field); a field of the other IP version never.
    fn field(&self, base: Base, offset: u32, len: u32) -> Option<Field> {
        let fits = |f: &Field| {
            let d = f.def();
            d.base == base
                && d.mask.is_empty()
                && d.offset <= offset
                && offset + len <= d.offset + d.len
                && !matches!((d.nfproto, self.nfproto), (Some(a), Some(b)) if a != b)
                && !matches!((d.l4proto, self.l4proto), (Some(a), Some(b)) if a != b)
                // A transport header of no protocol matched (`th dport` alone): the kernel
                // reads those bytes of any protocol's header (an ICMP checksum), explain
                // only of a protocol with ports.
                && (d.base != Base::Transport || self.l4proto.is_some())
        };
        Field::ALL
            .iter()
            .filter(|f| fits(f))
            .copied()
            .max_by_key(|f| {
                let d = f.def();
                (d.l4proto.is_some(), d.nfproto.is_some(), d.offset == offset)
            })
    }

    /// Remembers the protocol a match pins down, for the loads after it.
    fn learn(&mut self, stmt: &Stmt) {
        if let Stmt::Cmp {
            left: Expr::Meta(key),
            op: CmpOp::Eq,
            right: Value::Proto(p),
        } = stmt
        {
            match key {
                MetaKey::NfProto => self.nfproto = Some(*p),
                MetaKey::L4Proto => self.l4proto = Some(*p),
                _ => {}
            }
        }
    }
}

/// The whole value of a register loaded without a mask, with its length.
fn whole(reg: Reg) -> Option<(Expr, usize)> {
    let Reg::Loaded { expr, at, mask } = reg else {
        return None;
    };
    let len = expr.byte_len() as usize;
    (at == 0 && mask.len() == len && mask.iter().all(|m| *m == 0xff)).then_some((expr, len))
}

/// A `cmp` of `data` with what `reg` holds, `op` the kernel's NFT_CMP_* number.
fn cmp(reg: Reg, op: u32, data: &[u8]) -> Option<Stmt> {
    let Reg::Loaded { expr, at, mask } = reg else {
        return None;
    };
    if data.len() > mask.len() {
        return None;
    }
    let len = expr.byte_len() as usize;
    // The whole value's mask and bytes: what was neither loaded nor compared counts 0.
    let mut full_mask = vec![0u8; len];
    let mut full = vec![0u8; len];
    for (i, (d, m)) in data.iter().zip(&mask).enumerate() {
        full_mask[at + i] = *m;
        full[at + i] = d & m;
    }
    let all = full_mask.iter().all(|m| *m == 0xff);
    if let Expr::Meta(MetaKey::IifName | MetaKey::OifName) = expr {
        return ifname(expr, op, at, &mask, data);
    }
    let op_eq = match op {
        0 => CmpOp::Eq,
        1 => CmpOp::Neq,
        2..=5 if all => return order(expr, op, &full),
        _ => return None,
    };
    if all {
        return Some(Stmt::Cmp {
            left: expr.clone(),
            op: op_eq,
            right: value_of(&expr, &full)?,
        });
    }
    let flags = matches!(
        expr,
        Expr::Ct(CtKey::State | CtKey::Status) | Expr::Payload(Field::TcpFlags)
    );
    if flags && full.iter().all(|b| *b == 0) {
        return Some(Stmt::Flags {
            bits: value_of(&expr, &full_mask)?,
            left: expr,
            negate: op_eq == CmpOp::Eq,
        });
    }
    if let Some(net) = prefix(&expr, &full_mask, &full) {
        let key = KeyType::single(if net.addr().is_ipv4() {
            DataType::Ipv4Addr
        } else {
            DataType::Ipv6Addr
        });
        return Some(Stmt::Lookup {
            left: expr,
            set: SetRef::Anonymous {
                key,
                interval: true,
                elements: vec![Element::key(ElemKey::Prefix(net))],
                data: None,
            },
            negate: op_eq == CmpOp::Neq,
        });
    }
    if op_eq != CmpOp::Eq {
        return None;
    }
    Some(Stmt::MaskedCmp {
        mask: value_of(&expr, &full_mask)?,
        right: value_of(&expr, &full)?,
        left: expr,
    })
}

/// An interface name match: the whole name, or (fewer bytes than the name's 16, no NUL)
/// a `"name*"` wildcard.
fn ifname(expr: Expr, op: u32, at: usize, mask: &[u8], data: &[u8]) -> Option<Stmt> {
    if at != 0 || mask.iter().any(|m| *m != 0xff) {
        return None;
    }
    let op = match op {
        0 => CmpOp::Eq,
        1 => CmpOp::Neq,
        _ => return None,
    };
    let name = match data.iter().position(|b| *b == 0) {
        Some(end) if data[end..].iter().all(|b| *b == 0) => {
            std::str::from_utf8(&data[..end]).ok()?.to_string()
        }
        Some(_) => return None,
        None if data.len() < 16 => format!("{}*", std::str::from_utf8(data).ok()?),
        None => return None,
    };
    Some(Stmt::Cmp {
        left: expr,
        op,
        right: Value::IfName(name),
    })
}

/// `<`, `<=`, `>`, `>=` (NFT_CMP_LT .. NFT_CMP_GTE) as the inclusive range it is.
fn order(expr: Expr, op: u32, data: &[u8]) -> Option<Stmt> {
    let host = host_order(&expr);
    let n = number(data, host)?;
    let max = if data.len() >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * data.len())) - 1
    };
    let (from, to) = match op {
        2 => (0, n.checked_sub(1)?),
        3 => (0, n),
        4 => (n.checked_add(1).filter(|m| *m <= max)?, max),
        5 => (n, max),
        _ => return None,
    };
    let bytes = |v: u128| bytes_of(v, data.len(), host);
    Some(Stmt::Range {
        from: value_of(&expr, &bytes(from))?,
        to: value_of(&expr, &bytes(to))?,
        left: expr,
        negate: false,
    })
}

/// Values the kernel keeps in host order (meta and ct integers); header fields are in
/// network order.
fn host_order(expr: &Expr) -> bool {
    matches!(expr, Expr::Meta(MetaKey::Mark) | Expr::Ct(_))
}

fn number(data: &[u8], host: bool) -> Option<u128> {
    if data.len() > 16 {
        return None;
    }
    let be = |d: &mut dyn Iterator<Item = &u8>| d.fold(0u128, |n, b| (n << 8) | u128::from(*b));
    Some(if host && cfg!(target_endian = "little") {
        be(&mut data.iter().rev())
    } else {
        be(&mut data.iter())
    })
}

fn bytes_of(v: u128, len: usize, host: bool) -> Vec<u8> {
    let mut out: Vec<u8> = v.to_be_bytes()[16 - len..].to_vec();
    if host && cfg!(target_endian = "little") {
        out.reverse();
    }
    out
}

/// An address field's mask that is a prefix (ones, then zeros) as that network.
fn prefix(expr: &Expr, mask: &[u8], value: &[u8]) -> Option<ipnet::IpNet> {
    let Expr::Payload(f) = expr else {
        return None;
    };
    if !matches!(
        f.def().reads,
        super::fields::Reads::Saddr | super::fields::Reads::Daddr
    ) {
        return None;
    }
    let bits: u32 = mask.iter().map(|m| m.count_ones()).sum();
    let contiguous = mask
        .iter()
        .flat_map(|m| (0..8).rev().map(move |i| m >> i & 1 == 1))
        .skip(bits as usize)
        .all(|b| !b);
    if !contiguous {
        return None;
    }
    let addr: std::net::IpAddr = match value.len() {
        4 => <[u8; 4]>::try_from(value).ok()?.into(),
        16 => <[u8; 16]>::try_from(value).ok()?.into(),
        _ => return None,
    };
    ipnet::IpNet::new(addr, bits as u8).ok()
}

/// The IR constant of `expr`'s type whose encoding is `bytes`.
fn value_of(expr: &Expr, bytes: &[u8]) -> Option<Value> {
    let u32_ne = || bytes.try_into().ok().map(u32::from_ne_bytes);
    Some(match expr {
        Expr::Meta(MetaKey::IifName | MetaKey::OifName) => {
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
            Value::IfName(std::str::from_utf8(&bytes[..end]).ok()?.to_string())
        }
        Expr::Meta(MetaKey::L4Proto | MetaKey::NfProto) => Value::Proto(*single(bytes)?),
        Expr::Meta(MetaKey::Mark) | Expr::Ct(CtKey::Mark) => Value::Mark(u32_ne()?),
        Expr::Ct(CtKey::State) => Value::CtState(u32_ne()?),
        Expr::Ct(CtKey::Status) => Value::CtStatus(u32_ne()?),
        Expr::Payload(f) => {
            use super::fields::Reads;
            match f.def().reads {
                Reads::Saddr | Reads::Daddr => match bytes.len() {
                    4 => Value::Ipv4(<[u8; 4]>::try_from(bytes).ok()?.into()),
                    16 => Value::Ipv6(<[u8; 16]>::try_from(bytes).ok()?.into()),
                    _ => return None,
                },
                Reads::Dport | Reads::Sport => {
                    Value::Port(u16::from_be_bytes(bytes.try_into().ok()?))
                }
                Reads::IcmpType => Value::IcmpType(*single(bytes)?),
                Reads::Icmpv6Type => Value::Icmpv6Type(*single(bytes)?),
                Reads::TcpFlags => Value::TcpFlags(*single(bytes)?),
                Reads::Dscp => return None,
            }
        }
        _ => return None,
    })
}

fn single(bytes: &[u8]) -> Option<&u8> {
    match bytes {
        [b] => Some(b),
        _ => None,
    }
}
