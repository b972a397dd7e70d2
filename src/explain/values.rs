//! Expressions read from the packet, and how they compare with the IR's constants and set
//! elements: by their encoded bytes (as the kernel compares registers), by number for ranges
//! and flags, by prefix for addresses in interval sets and for `"eth*"` wildcards.

use std::net::IpAddr;

use crate::calendar;
use crate::dataplane::nft::encode::encode;
use crate::dataplane::nft::ir::*;

use super::error::ExplainError;
use super::packet::Packet;

/// What `fib daddr type` answers for an address that is not the router's own (RTN_UNICAST).
const ADDRTYPE_UNICAST: u32 = 1;
/// `meta nfproto ipv4` / `ipv6`.
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// The router's own addresses, which `fib daddr type local` recognises.
pub trait Locality {
    /// True when `addr` is one of the router's addresses (loopback included).
    fn is_local(&self, addr: IpAddr) -> bool;
}

/// The value of `expr` for `pkt`; `None` when the packet has no such header (an `ip saddr`
/// of an IPv6 packet, a `tcp dport` of a UDP one): the kernel's protocol dependency fails,
/// so neither `==` nor `!=` matches.
pub fn load(
    expr: &Expr,
    pkt: &Packet,
    local: &dyn Locality,
) -> Result<Option<Value>, ExplainError> {
    let v4 = pkt.is_v4();
    let ports = pkt.proto.has_ports();
    Ok(match expr {
        Expr::Meta(key) => Some(load_meta(*key, pkt)?),
        Expr::Payload(field) => load_payload(*field, pkt),
        Expr::Ct(CtKey::State) => Some(Value::CtState(pkt.ct_state)),
        Expr::Ct(CtKey::Status) => Some(Value::CtStatus(pkt.ct_status)),
        Expr::Ct(CtKey::Mark) => Some(Value::Mark(pkt.ct_mark)),
        Expr::FibDaddrType => Some(Value::AddrType(if local.is_local(pkt.daddr) {
            ADDRTYPE_LOCAL
        } else {
            ADDRTYPE_UNICAST
        })),
        Expr::CtOriginal(CtOrigKey::IpDaddr) => v4.then(|| Value::ip(pkt.orig_daddr)),
        Expr::CtOriginal(CtOrigKey::Ip6Daddr) => (!v4).then(|| Value::ip(pkt.orig_daddr)),
        Expr::CtOriginal(CtOrigKey::ProtoDst) => ports.then_some(Value::Port(pkt.orig_dport)),
        Expr::Concat(parts) => {
            let mut out = Vec::new();
            for p in parts {
                match load(p, pkt, local)? {
                    Some(v) => out.push(v),
                    None => return Ok(None),
                }
            }
            Some(Value::Concat(out))
        }
        Expr::Bitwise { input, mask, xor } => match load(input, pkt, local)? {
            Some(Value::Ipv4(a)) => {
                Some(Value::ip(IpAddr::from(bitwise::<4>(a.octets(), mask, xor))))
            }
            Some(Value::Ipv6(a)) => Some(Value::ip(IpAddr::from(bitwise::<16>(
                a.octets(),
                mask,
                xor,
            )))),
            None => None,
            Some(v) => {
                return Err(ExplainError::Unsupported(format!("a bitwise of {v:?}")));
            }
        },
        // numgen/jhash have no single value: the NAT map statement that uses them reports
        // each slot's share instead (see `eval`).
        Expr::Numgen { .. } | Expr::Jhash { .. } => {
            return Err(ExplainError::Unsupported(format!("expression {expr:?}")));
        }
    })
}

/// `(bytes & mask) ^ xor`, as the kernel's bitwise expression (missing bytes count as 0).
fn bitwise<const N: usize>(mut bytes: [u8; N], mask: &[u8], xor: &[u8]) -> [u8; N] {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (*b & mask.get(i).copied().unwrap_or(0)) ^ xor.get(i).copied().unwrap_or(0);
    }
    bytes
}

fn load_meta(key: MetaKey, pkt: &Packet) -> Result<Value, ExplainError> {
    if let MetaKey::Hour | MetaKey::Day | MetaKey::Time = key {
        // Without `--at` the verdict depends on when the packet comes: say so, don't guess.
        let Some(at) = pkt.at else {
            let mut what = String::new();
            crate::dataplane::nft::text::render_expr(&mut what, &Expr::Meta(key));
            return Err(ExplainError::NeedsTime(what));
        };
        return Ok(match key {
            MetaKey::Hour => Value::Hour(at.rem_euclid(calendar::DAY) as u32),
            MetaKey::Day => Value::Day(calendar::weekday_from_days(at.div_euclid(calendar::DAY))),
            _ => Value::Time(u64::try_from(at).unwrap_or(0) * 1_000_000_000),
        });
    }
    Ok(match key {
        MetaKey::IifName => Value::IfName(pkt.iif.clone()),
        MetaKey::OifName => Value::IfName(pkt.oif.clone()),
        MetaKey::L4Proto => Value::Proto(pkt.proto.number()),
        MetaKey::NfProto => Value::Proto(if pkt.is_v4() {
            NFPROTO_IPV4
        } else {
            NFPROTO_IPV6
        }),
        MetaKey::Mark => Value::Mark(pkt.mark),
        MetaKey::Hour | MetaKey::Day | MetaKey::Time => unreachable!("answered above"),
    })
}

/// A header field: `None` when the packet lacks that header, i.e. when a protocol
/// dependency of the field's definition fails for it (see [`load`]).
fn load_payload(field: Field, pkt: &Packet) -> Option<Value> {
    let def = field.def();
    let nfproto = if pkt.is_v4() {
        NFPROTO_IPV4
    } else {
        NFPROTO_IPV6
    };
    if def.nfproto.is_some_and(|p| p != nfproto)
        || def.l4proto.is_some_and(|p| p != pkt.proto.number())
    {
        return None;
    }
    pkt.read(field)
}

/// `a == b` as the kernel compares them (`b` a constant, perhaps an `"eth*"` wildcard).
pub fn equal(a: &Value, b: &Value) -> bool {
    if let (Value::IfName(name), Value::IfName(pattern)) = (a, b)
        && let Some(stem) = pattern.strip_suffix('*')
    {
        return name.starts_with(stem);
    }
    match (encode(a), encode(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// `v & mask == right`, byte by byte on the encoded values (as the kernel's bitwise and
/// cmp expressions do); values of different lengths never match.
pub fn masked_equal(v: &Value, mask: &Value, right: &Value) -> bool {
    match (encode(v), encode(mask), encode(right)) {
        (Ok(v), Ok(m), Ok(r)) if v.len() == m.len() && m.len() == r.len() => {
            v.iter().zip(&m).map(|(v, m)| v & m).eq(r.iter().copied())
        }
        _ => false,
    }
}

/// The number a value stands for, for ranges and bit tests.
pub fn number(v: &Value) -> Option<u128> {
    Some(match v {
        Value::Ipv4(a) => u32::from(*a).into(),
        Value::Ipv6(a) => u128::from(*a),
        Value::Port(p) => (*p).into(),
        Value::Proto(p) | Value::IcmpType(p) | Value::Icmpv6Type(p) | Value::TcpFlags(p) => {
            (*p).into()
        }
        Value::Mark(m)
        | Value::CtState(m)
        | Value::CtStatus(m)
        | Value::AddrType(m)
        | Value::Field(_, m)
        | Value::Hour(m) => (*m).into(),
        Value::Day(d) => (*d).into(),
        Value::Time(ns) => (*ns).into(),
        Value::IfName(_) | Value::Verdict(_) | Value::Concat(_) => return None,
    })
}

/// `from <= v <= to`, component by component for concatenations.
pub fn in_range(v: &Value, from: &Value, to: &Value) -> bool {
    match (v, from, to) {
        (Value::Concat(v), Value::Concat(f), Value::Concat(t)) => {
            v.len() == f.len()
                && v.len() == t.len()
                && v.iter()
                    .zip(f.iter().zip(t))
                    .all(|(v, (f, t))| in_range(v, f, t))
        }
        _ => match (number(v), number(from), number(to)) {
            (Some(v), Some(f), Some(t)) => f <= v && v <= t,
            _ => false,
        },
    }
}

/// True when set element key `key` holds `v`.
pub fn element_matches(v: &Value, key: &ElemKey) -> bool {
    match key {
        ElemKey::Value(k) => equal(v, k),
        ElemKey::Prefix(net) => match v {
            Value::Ipv4(a) => net.contains(&IpAddr::V4(*a)),
            Value::Ipv6(a) => net.contains(&IpAddr::V6(*a)),
            _ => false,
        },
        ElemKey::Range(from, to) => in_range(v, from, to),
    }
}

/// True when some bit of `bits` is set in `v`.
pub fn any_bit(v: &Value, bits: &Value) -> bool {
    match (number(v), number(bits)) {
        (Some(v), Some(b)) => v & b != 0,
        _ => false,
    }
}
