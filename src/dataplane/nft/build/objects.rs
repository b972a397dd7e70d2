//! IR -> libnftnl objects (through the `ffi` module): tables, chains, flowtables, `ct helper`s,
//! sets with their definition, set elements, and the shell of a rule (whose statements
//! [`super::rule`] compiles into expressions). Nothing here writes messages: the batch does,
//! from these objects.

use nftnl::nftnl_sys::{self as sys, libc};

use crate::dataplane::nft::encode::RawKey;
use crate::dataplane::nft::error::CompileError;
use crate::dataplane::nft::expr;
use crate::dataplane::nft::ffi::attr::{
    chain as chain_attr, elem, flowtable as ft_attr, object, rule as rule_attr, set as set_attr,
    table,
};
use crate::dataplane::nft::ffi::{self, Udata, with_cstr};
use crate::dataplane::nft::ir::*;
use crate::dataplane::nft::table_ref::TableRef;

/// NFPROTO_* of a table family.
pub(crate) fn family_code(f: Family) -> u16 {
    (match f {
        Family::Inet => libc::NFPROTO_INET,
        Family::Ip => libc::NFPROTO_IPV4,
        Family::Ip6 => libc::NFPROTO_IPV6,
    }) as u16
}

fn family_u32(f: Family) -> u32 {
    u32::from(family_code(f))
}

/// A table object naming `t`.
pub(crate) fn table(t: &TableRef) -> Result<ffi::Table, CompileError> {
    let mut o = ffi::Table::new();
    o.set_str(table::NAME, &t.name)?
        .set_u32(table::FAMILY, family_u32(t.family));
    Ok(o)
}

/// A `ct helper` object.
pub(crate) fn ct_helper(t: &TableRef, h: &CtHelper) -> Result<ffi::Object, CompileError> {
    let mut o = ffi::Object::new();
    o.set_str(object::TABLE, &t.name)?
        .set_str(object::NAME, &h.name)?
        .set_u32(object::FAMILY, family_u32(t.family))
        .set_u32(object::TYPE, expr::OBJECT_CT_HELPER);
    o.set_str(object::CT_HELPER_NAME, &h.helper)?
        .set_u8(object::CT_HELPER_L4PROTO, h.protocol);
    Ok(o)
}

/// A named `limit` object (packets per unit).
pub(crate) fn limit_object(t: &TableRef, l: &LimitObject) -> Result<ffi::Object, CompileError> {
    let mut o = ffi::Object::new();
    o.set_str(object::TABLE, &t.name)?
        .set_str(object::NAME, &l.name)?
        .set_u32(object::FAMILY, family_u32(t.family))
        .set_u32(object::TYPE, expr::OBJECT_LIMIT);
    o.set_u64(object::LIMIT_RATE, l.rate)
        .set_u64(object::LIMIT_UNIT, l.unit.seconds())
        .set_u32(object::LIMIT_BURST, l.burst)
        .set_u32(object::LIMIT_TYPE, 0);
    Ok(o)
}

/// A chain object; with `with_base`, a base chain's hook, type, priority and policy.
pub(crate) fn chain(
    t: &TableRef,
    chain: &Chain,
    with_base: bool,
) -> Result<ffi::Chain, CompileError> {
    let mut c = ffi::Chain::new();
    c.set_str(chain_attr::TABLE, &t.name)?
        .set_str(chain_attr::NAME, &chain.name)?
        .set_u32(chain_attr::FAMILY, family_u32(t.family));
    if let (true, Some(base)) = (with_base, &chain.base) {
        let hook = match base.hook {
            Hook::Prerouting => libc::NF_INET_PRE_ROUTING,
            Hook::Input => libc::NF_INET_LOCAL_IN,
            Hook::Forward => libc::NF_INET_FORWARD,
            Hook::Output => libc::NF_INET_LOCAL_OUT,
            Hook::Postrouting => libc::NF_INET_POST_ROUTING,
        };
        let kind = match base.kind {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        };
        let policy = match base.policy {
            ChainPolicy::Accept => libc::NF_ACCEPT,
            ChainPolicy::Drop => libc::NF_DROP,
        };
        c.set_u32(chain_attr::HOOKNUM, hook as u32)
            .set_i32(chain_attr::PRIO, base.priority)
            .set_str(chain_attr::TYPE, kind)?
            .set_u32(chain_attr::POLICY, policy as u32);
    }
    Ok(c)
}

/// `NF_NETDEV_INGRESS`: the only hook a flowtable has.
const NF_NETDEV_INGRESS: u32 = 0;
/// `NFT_FLOWTABLE_HW_OFFLOAD`.
const FLOWTABLE_HW_OFFLOAD: u32 = 0x1;

/// A flowtable object: hook, priority, devices and flags.
pub(crate) fn flowtable(t: &TableRef, ft: &Flowtable) -> Result<ffi::Flowtable, CompileError> {
    let mut o = ffi::Flowtable::new();
    o.set_str(ft_attr::TABLE, &t.name)?
        .set_str(ft_attr::NAME, &ft.name)?
        .set_u32(ft_attr::FAMILY, family_u32(t.family))
        .set_u32(ft_attr::HOOKNUM, NF_NETDEV_INGRESS)
        .set_i32(ft_attr::PRIO, ft.priority)
        .set_devices(&ft.devices)?;
    if ft.hw_offload {
        o.set_u32(ft_attr::FLAGS, FLOWTABLE_HW_OFFLOAD);
    }
    Ok(o)
}

/// A rule object in `chain` of `t`, with no expressions yet.
pub(crate) fn rule_in(t: &TableRef, chain: &str) -> Result<ffi::Rule, CompileError> {
    let mut r = ffi::Rule::new();
    r.set_u32(rule_attr::FAMILY, family_u32(t.family))
        .set_str(rule_attr::TABLE, &t.name)?
        .set_str(rule_attr::CHAIN, chain)?;
    Ok(r)
}

/// `NFTA_RULE_TABLE`, `NFTA_RULE_CHAIN`, `NFTA_RULE_EXPRESSIONS` (linux/netfilter/nf_tables.h).
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
pub(crate) const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NLA_F_NESTED: u16 = 0x8000;

/// A rule in `chain` of `t` whose expressions are `exprs`, the payload of an
/// `NFTA_RULE_EXPRESSIONS` attribute the kernel listed ([`Opaque`]). libnftnl reads them
/// from a message made as a dump reply would be, so every expression nft can write comes
/// back as an object the batch sends like any other.
pub(crate) fn opaque_rule_in(
    t: &TableRef,
    chain: &str,
    exprs: &[u8],
) -> Result<ffi::Rule, CompileError> {
    fn attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) -> Result<(), CompileError> {
        let len = u16::try_from(4 + payload.len())
            .map_err(|_| CompileError::Invalid("an included rule is too long".into()))?;
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(out.len().div_ceil(4) * 4, 0);
        Ok(())
    }
    let cstr = |s: &str| {
        if s.contains('\0') {
            return Err(CompileError::NulInName {
                what: "chain",
                name: s.to_string(),
            });
        }
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        Ok(v)
    };
    let mut msg = vec![0u8; 16];
    // nfgenmsg: family, version 0, resource id 0.
    msg.extend_from_slice(&[family_code(t.family) as u8, 0, 0, 0]);
    attr(&mut msg, NFTA_RULE_TABLE, &cstr(&t.name)?)?;
    attr(&mut msg, NFTA_RULE_CHAIN, &cstr(chain)?)?;
    attr(&mut msg, NFTA_RULE_EXPRESSIONS | NLA_F_NESTED, exprs)?;
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    let ty = ((libc::NFNL_SUBSYS_NFTABLES as u16) << 8) | libc::NFT_MSG_NEWRULE as u16;
    msg[4..6].copy_from_slice(&ty.to_ne_bytes());
    let mut words = vec![std::mem::MaybeUninit::<u64>::uninit(); msg.len().div_ceil(8)];
    let aligned = ffi::aligned_copy(&msg, &mut words);
    let parsed = ffi::NlMsg::first(aligned).and_then(ffi::Rule::parse);
    let mut r = parsed.ok_or_else(|| {
        CompileError::Invalid(format!("an included rule of chain {chain} does not parse"))
    })?;
    r.set_u32(rule_attr::FAMILY, family_u32(t.family));
    Ok(r)
}

/// Attaches `comment` as nft's comment user data. A comment longer than nft allows is left
/// out (nft would refuse it); one with a NUL byte is an error.
pub(crate) fn set_comment(r: &mut ffi::Rule, comment: &str) -> Result<(), CompileError> {
    let mut buf = Udata::new(sys::NFTNL_UDATA_COMMENT_MAXLEN);
    let fits = with_cstr("rule comment", comment, |c| {
        buf.put_str(sys::NFTNL_UDATA_RULE_COMMENT as u8, c)
    })?;
    if fits {
        r.set_blob(rule_attr::USERDATA, buf.as_bytes());
    }
    Ok(())
}

/// Data of one kernel element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ElemData {
    None,
    Bytes(Vec<u8>),
    Verdict(Verdict),
}

const SET_ANONYMOUS: u32 = 0x1;
const SET_CONSTANT: u32 = 0x2;
const SET_INTERVAL: u32 = 0x4;
const SET_MAP: u32 = 0x8;
const SET_TIMEOUT: u32 = 0x10;
const SET_EVAL: u32 = 0x20;
/// `NFT_SET_CONCAT`: an interval set of a concatenation, its field lengths in the
/// description (the kernel then picks its pipapo backend).
const SET_CONCAT: u32 = 0x80;

/// A set object carrying only table, name, family and (when given) the batch-local id.
pub(crate) fn set_named(
    t: &TableRef,
    name: &str,
    id: Option<u32>,
) -> Result<ffi::Set, CompileError> {
    let mut s = ffi::Set::new();
    s.set_str(set_attr::TABLE, &t.name)?
        .set_str(set_attr::NAME, name)?
        .set_u32(set_attr::FAMILY, family_u32(t.family));
    if let Some(id) = id {
        s.set_u32(set_attr::ID, id);
    }
    Ok(s)
}

/// The definition of `set` (flags, key and data types), without elements.
pub(crate) fn set_definition(
    t: &TableRef,
    set: &Set,
    id: Option<u32>,
    anonymous: bool,
) -> Result<ffi::Set, CompileError> {
    // An anonymous set carries nft's name template (`__set%d`, `__map%d`).
    let name = &set.name;
    let mut s = set_named(t, name, id)?;
    let mut flags = 0;
    if anonymous {
        flags |= SET_ANONYMOUS | SET_CONSTANT;
    }
    if set.constant {
        flags |= SET_CONSTANT;
    }
    if set.interval {
        flags |= SET_INTERVAL;
    }
    if set.interval && set.key.is_concat() {
        flags |= SET_CONCAT;
        // libnftnl reads one byte per field, up to the first zero.
        let lengths: Vec<u8> = set.key.0.iter().map(|t| t.byte_len() as u8).collect();
        s.set_blob(set_attr::DESC_CONCAT, &lengths);
    }
    if set.data.is_some() {
        flags |= SET_MAP;
    }
    if let Some(size) = set.dynamic {
        flags |= SET_TIMEOUT | SET_EVAL;
        s.set_u32(set_attr::DESC_SIZE, size);
    }
    if let Some(ms) = set.timeout {
        flags |= SET_TIMEOUT;
        if ms > 0 {
            s.set_u64(set_attr::TIMEOUT, ms);
        }
    }
    if let Some(size) = set.size {
        s.set_u32(set_attr::DESC_SIZE, size);
    }
    set_byteorder_udata(&mut s, set);
    s.set_u32(set_attr::FLAGS, flags)
        .set_u32(set_attr::KEY_TYPE, set.key.id())
        .set_u32(set_attr::KEY_LEN, set.key.byte_len());
    if let Some(data) = &set.data {
        if data.0 == [DataType::Verdict] {
            s.set_u32(set_attr::DATA_TYPE, libc::NFT_DATA_VERDICT);
        } else {
            s.set_u32(set_attr::DATA_TYPE, data.id())
                .set_u32(set_attr::DATA_LEN, data.byte_len());
        }
    }
    Ok(s)
}

/// One kernel element: key (or interval end) and data.
pub(crate) fn elem(k: &RawKey, d: &ElemData) -> Result<ffi::Elem, CompileError> {
    let mut e = ffi::Elem::new();
    e.set_data(elem::KEY, k.start())?;
    if let Some(end) = k.key_end() {
        e.set_data(elem::KEY_END, end)?;
    }
    if k.interval_end {
        e.set_u32(elem::FLAGS, libc::NFT_SET_ELEM_INTERVAL_END as u32);
    }
    match d {
        ElemData::None => {}
        ElemData::Bytes(b) => {
            e.set_data(elem::DATA, b)?;
        }
        ElemData::Verdict(v) => {
            let (code, chain) = verdict_code(v);
            e.set_u32(elem::VERDICT, code as u32);
            if let Some(c) = chain {
                e.set_str(elem::CHAIN, c)?;
            }
        }
    }
    Ok(e)
}

/// Sets an element's timeout (0: never expires, even in a set with a default timeout) and,
/// when given, the expiry it has left.
pub(crate) fn elem_timing(e: &mut ffi::Elem, timeout_ms: u64, expires_ms: Option<u64>) {
    e.set_u64(elem::TIMEOUT, timeout_ms);
    if let Some(x) = expires_ms {
        e.set_u64(elem::EXPIRATION, x);
    }
}

/// nft (the CLI) reads the key's byte order from the set's user data to print host-order
/// keys (interface names, marks); without it `nft list` shows them garbled.
fn set_byteorder_udata(s: &mut ffi::Set, set: &Set) {
    const HOST: u32 = 1;
    const BIG: u32 = 2;
    let order = |t: &KeyType| match t.0.as_slice() {
        [DataType::IfName | DataType::Mark] => Some(HOST),
        [DataType::Verdict] => None,
        [_] => Some(BIG),
        _ => None,
    };
    let key = order(&set.key);
    let data = set.data.as_ref().and_then(order);
    if key.is_none() && data.is_none() {
        return;
    }
    let mut buf = Udata::new(64);
    if let Some(k) = key {
        buf.put_u32(sys::NFTNL_UDATA_SET_KEYBYTEORDER as u8, k);
    }
    if let Some(d) = data {
        buf.put_u32(sys::NFTNL_UDATA_SET_DATABYTEORDER as u8, d);
    }
    s.set_blob(set_attr::USERDATA, buf.as_bytes());
}

/// Kernel verdict code and chain of a verdict: the one conversion from the IR's verdicts to
/// the codes of [`expr::verdict`](mod@expr::verdict), for rules, verdict maps and
/// `raw_elements` alike.
pub(crate) fn verdict_code(v: &Verdict) -> (i32, Option<&str>) {
    use expr::verdict::*;
    match v {
        Verdict::Accept => (ACCEPT, None),
        Verdict::Drop => (DROP, None),
        Verdict::Continue => (CONTINUE, None),
        Verdict::Return => (RETURN, None),
        Verdict::Jump(c) => (JUMP, Some(c)),
        Verdict::Goto(c) => (GOTO, Some(c)),
    }
}
