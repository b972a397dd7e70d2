//! IR -> libnftnl objects: tables, chains, sets with elements, and rules whose statements are
//! lowered to kernel expressions with register allocation (concatenations use consecutive
//! 32-bit registers) and implicit protocol dependencies.

use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::batch::{TableRef, cstr};
use super::encode::{RawKey, encode};
use super::error::CompileError;
use super::expr::{self, REG_1, REG_VERDICT, REG32_00};
use super::ir::*;

/// NFPROTO_* of a table family.
pub(crate) fn family_code(f: Family) -> u16 {
    (match f {
        Family::Inet => libc::NFPROTO_INET,
        Family::Ip => libc::NFPROTO_IPV4,
        Family::Ip6 => libc::NFPROTO_IPV6,
    }) as u16
}

macro_rules! owned {
    ($name:ident, $ty:ty, $free:path) => {
        pub(crate) struct $name(NonNull<$ty>);
        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: we own the object.
                unsafe { $free(self.0.as_ptr()) };
            }
        }
    };
}

fn nonnull<T>(p: *mut T) -> NonNull<T> {
    NonNull::new(p).unwrap_or_else(|| std::process::abort())
}

owned!(RawTable, sys::nftnl_table, sys::nftnl_table_free);

impl RawTable {
    pub(crate) fn new(t: &TableRef) -> RawTable {
        // SAFETY: fresh object; libnftnl copies strings.
        unsafe {
            let p = nonnull(sys::nftnl_table_alloc());
            let name = cstr(&t.name);
            sys::nftnl_table_set_str(p.as_ptr(), sys::NFTNL_TABLE_NAME as u16, name.as_ptr());
            sys::nftnl_table_set_u32(
                p.as_ptr(),
                sys::NFTNL_TABLE_FAMILY as u16,
                u32::from(family_code(t.family)),
            );
            RawTable(p)
        }
    }

    pub(crate) fn build(&self, nlh: *mut libc::nlmsghdr) {
        // SAFETY: nlh points at a header in a buffer with room for the payload.
        unsafe { sys::nftnl_table_nlmsg_build_payload(nlh, self.0.as_ptr()) };
    }
}

owned!(RawChain, sys::nftnl_chain, sys::nftnl_chain_free);

impl RawChain {
    pub(crate) fn new(t: &TableRef, chain: &Chain, with_base: bool) -> RawChain {
        // SAFETY: fresh object; libnftnl copies strings and values.
        unsafe {
            let p = nonnull(sys::nftnl_chain_alloc());
            let c = p.as_ptr();
            let table = cstr(&t.name);
            let name = cstr(&chain.name);
            sys::nftnl_chain_set_str(c, sys::NFTNL_CHAIN_TABLE as u16, table.as_ptr());
            sys::nftnl_chain_set_str(c, sys::NFTNL_CHAIN_NAME as u16, name.as_ptr());
            sys::nftnl_chain_set_u32(
                c,
                sys::NFTNL_CHAIN_FAMILY as u16,
                u32::from(family_code(t.family)),
            );
            if let (true, Some(base)) = (with_base, &chain.base) {
                let hook = match base.hook {
                    Hook::Prerouting => libc::NF_INET_PRE_ROUTING,
                    Hook::Input => libc::NF_INET_LOCAL_IN,
                    Hook::Forward => libc::NF_INET_FORWARD,
                    Hook::Output => libc::NF_INET_LOCAL_OUT,
                    Hook::Postrouting => libc::NF_INET_POST_ROUTING,
                };
                let kind = match base.kind {
                    ChainType::Filter => c"filter",
                    ChainType::Nat => c"nat",
                    ChainType::Route => c"route",
                };
                sys::nftnl_chain_set_u32(c, sys::NFTNL_CHAIN_HOOKNUM as u16, hook as u32);
                sys::nftnl_chain_set_s32(c, sys::NFTNL_CHAIN_PRIO as u16, base.priority);
                sys::nftnl_chain_set_str(c, sys::NFTNL_CHAIN_TYPE as u16, kind.as_ptr());
                let policy = match base.policy {
                    ChainPolicy::Accept => libc::NF_ACCEPT,
                    ChainPolicy::Drop => libc::NF_DROP,
                };
                sys::nftnl_chain_set_u32(c, sys::NFTNL_CHAIN_POLICY as u16, policy as u32);
            }
            RawChain(p)
        }
    }

    pub(crate) fn build(&self, nlh: *mut libc::nlmsghdr) {
        // SAFETY: as for tables.
        unsafe { sys::nftnl_chain_nlmsg_build_payload(nlh, self.0.as_ptr()) };
    }
}

owned!(RawRule, sys::nftnl_rule, sys::nftnl_rule_free);

impl RawRule {
    pub(crate) fn new(t: &TableRef, chain: &str) -> RawRule {
        // SAFETY: fresh object; libnftnl copies strings.
        unsafe {
            let p = nonnull(sys::nftnl_rule_alloc());
            let table = cstr(&t.name);
            let chain = cstr(chain);
            sys::nftnl_rule_set_u32(
                p.as_ptr(),
                sys::NFTNL_RULE_FAMILY as u16,
                u32::from(family_code(t.family)),
            );
            sys::nftnl_rule_set_str(p.as_ptr(), sys::NFTNL_RULE_TABLE as u16, table.as_ptr());
            sys::nftnl_rule_set_str(p.as_ptr(), sys::NFTNL_RULE_CHAIN as u16, chain.as_ptr());
            RawRule(p)
        }
    }

    pub(crate) fn set_handle(&mut self, handle: u64) {
        // SAFETY: valid rule.
        unsafe { sys::nftnl_rule_set_u64(self.0.as_ptr(), sys::NFTNL_RULE_HANDLE as u16, handle) };
    }

    pub(crate) fn set_comment(&mut self, comment: &str) {
        let c = cstr(comment);
        // SAFETY: udata buffer of the maximal comment size; the put fails (and we skip the
        // comment) when the comment does not fit; libnftnl copies the data into the rule.
        unsafe {
            let buf = sys::nftnl_udata_buf_alloc(sys::NFTNL_UDATA_COMMENT_MAXLEN);
            if buf.is_null() {
                std::process::abort();
            }
            if sys::nftnl_udata_put_strz(buf, sys::NFTNL_UDATA_RULE_COMMENT as u8, c.as_ptr()) {
                sys::nftnl_rule_set_data(
                    self.0.as_ptr(),
                    sys::NFTNL_RULE_USERDATA as u16,
                    sys::nftnl_udata_buf_data(buf),
                    sys::nftnl_udata_buf_len(buf),
                );
            }
            sys::nftnl_udata_buf_free(buf);
        }
    }

    fn push(&mut self, e: expr::RawExpr) {
        // SAFETY: the rule takes ownership of the expression.
        unsafe { sys::nftnl_rule_add_expr(self.0.as_ptr(), e.into_raw()) };
    }

    pub(crate) fn build(&self, nlh: *mut libc::nlmsghdr) {
        // SAFETY: as for tables.
        unsafe { sys::nftnl_rule_nlmsg_build_payload(nlh, self.0.as_ptr()) };
    }
}

/// Data of one kernel element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ElemData {
    None,
    Bytes(Vec<u8>),
    Verdict(Verdict),
}

owned!(RawSet, sys::nftnl_set, sys::nftnl_set_free);

const SET_ANONYMOUS: u32 = 0x1;
const SET_CONSTANT: u32 = 0x2;
const SET_INTERVAL: u32 = 0x4;
const SET_MAP: u32 = 0x8;

impl RawSet {
    pub(crate) fn named(t: &TableRef, name: &str, id: Option<u32>) -> RawSet {
        // SAFETY: fresh object; libnftnl copies strings.
        unsafe {
            let p = nonnull(sys::nftnl_set_alloc());
            let s = p.as_ptr();
            let table = cstr(&t.name);
            let name = cstr(name);
            sys::nftnl_set_set_str(s, sys::NFTNL_SET_TABLE as u16, table.as_ptr());
            sys::nftnl_set_set_str(s, sys::NFTNL_SET_NAME as u16, name.as_ptr());
            sys::nftnl_set_set_u32(
                s,
                sys::NFTNL_SET_FAMILY as u16,
                u32::from(family_code(t.family)),
            );
            if let Some(id) = id {
                sys::nftnl_set_set_u32(s, sys::NFTNL_SET_ID as u16, id);
            }
            RawSet(p)
        }
    }

    pub(crate) fn definition(t: &TableRef, set: &Set, id: Option<u32>, anonymous: bool) -> RawSet {
        let name = if anonymous { "__set%d" } else { &set.name };
        let raw = RawSet::named(t, name, id);
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
        if set.data.is_some() {
            flags |= SET_MAP;
        }
        // SAFETY: valid set; plain values.
        unsafe {
            let s = raw.0.as_ptr();
            set_byteorder_udata(s, set);
            sys::nftnl_set_set_u32(s, sys::NFTNL_SET_FLAGS as u16, flags);
            sys::nftnl_set_set_u32(s, sys::NFTNL_SET_KEY_TYPE as u16, set.key.id());
            sys::nftnl_set_set_u32(s, sys::NFTNL_SET_KEY_LEN as u16, set.key.byte_len());
            if let Some(data) = &set.data {
                if data.0 == [DataType::Verdict] {
                    sys::nftnl_set_set_u32(
                        s,
                        sys::NFTNL_SET_DATA_TYPE as u16,
                        libc::NFT_DATA_VERDICT,
                    );
                } else {
                    sys::nftnl_set_set_u32(s, sys::NFTNL_SET_DATA_TYPE as u16, data.id());
                    sys::nftnl_set_set_u32(s, sys::NFTNL_SET_DATA_LEN as u16, data.byte_len());
                }
            }
        }
        raw
    }

    pub(crate) fn with_elements(
        t: &TableRef,
        name: &str,
        id: Option<u32>,
        elems: &[(RawKey, ElemData)],
    ) -> RawSet {
        let raw = RawSet::named(t, name, id);
        for (k, d) in elems {
            // SAFETY: fresh element filled with copied data, then owned by the set.
            unsafe {
                let e = nonnull(sys::nftnl_set_elem_alloc()).as_ptr();
                sys::nftnl_set_elem_set(
                    e,
                    sys::NFTNL_SET_ELEM_KEY as u16,
                    k.key.as_ptr().cast(),
                    k.key.len() as u32,
                );
                if k.interval_end {
                    sys::nftnl_set_elem_set_u32(
                        e,
                        sys::NFTNL_SET_ELEM_FLAGS as u16,
                        libc::NFT_SET_ELEM_INTERVAL_END as u32,
                    );
                }
                match d {
                    ElemData::None => {}
                    ElemData::Bytes(b) => {
                        sys::nftnl_set_elem_set(
                            e,
                            sys::NFTNL_SET_ELEM_DATA as u16,
                            b.as_ptr().cast(),
                            b.len() as u32,
                        );
                    }
                    ElemData::Verdict(v) => {
                        let (code, chain) = verdict_code(v);
                        sys::nftnl_set_elem_set_u32(
                            e,
                            sys::NFTNL_SET_ELEM_VERDICT as u16,
                            code as u32,
                        );
                        if let Some(c) = chain {
                            let c = cstr(c);
                            sys::nftnl_set_elem_set_str(
                                e,
                                sys::NFTNL_SET_ELEM_CHAIN as u16,
                                c.as_ptr(),
                            );
                        }
                    }
                }
                sys::nftnl_set_elem_add(raw.0.as_ptr(), e);
            }
        }
        raw
    }

    pub(crate) fn build(&self, nlh: *mut libc::nlmsghdr) {
        // SAFETY: as for tables.
        unsafe { sys::nftnl_set_nlmsg_build_payload(nlh, self.0.as_ptr()) };
    }

    pub(crate) fn build_elements(&self, nlh: *mut libc::nlmsghdr) {
        // SAFETY: as for tables; the element count is bounded so the nest fits.
        unsafe { sys::nftnl_set_elems_nlmsg_build_payload(nlh, self.0.as_ptr()) };
    }
}

/// nft (the CLI) reads the key's byte order from the set's user data to print host-order
/// keys (interface names, marks); without it `nft list` shows them garbled.
unsafe fn set_byteorder_udata(s: *mut sys::nftnl_set, set: &Set) {
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
    // SAFETY: a fresh udata buffer, copied into the set and freed.
    unsafe {
        let buf = sys::nftnl_udata_buf_alloc(64);
        if buf.is_null() {
            std::process::abort();
        }
        if let Some(k) = key {
            sys::nftnl_udata_put_u32(buf, sys::NFTNL_UDATA_SET_KEYBYTEORDER as u8, k);
        }
        if let Some(d) = data {
            sys::nftnl_udata_put_u32(buf, sys::NFTNL_UDATA_SET_DATABYTEORDER as u8, d);
        }
        sys::nftnl_set_set_data(
            s,
            sys::NFTNL_SET_USERDATA as u16,
            sys::nftnl_udata_buf_data(buf),
            sys::nftnl_udata_buf_len(buf),
        );
        sys::nftnl_udata_buf_free(buf);
    }
}

fn verdict_code(v: &Verdict) -> (i32, Option<&str>) {
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

/// Protocol facts established earlier in the rule (so dependencies are not repeated).
#[derive(Default)]
struct Deps {
    nfproto: Option<u8>,
    l4proto: Option<u8>,
}

const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

fn field_deps(e: &Expr, out: &mut Vec<(MetaKey, u8)>) {
    match e {
        Expr::Payload(f) => match f {
            Field::IpSaddr | Field::IpDaddr => out.push((MetaKey::NfProto, NFPROTO_IPV4)),
            Field::Ip6Saddr | Field::Ip6Daddr => out.push((MetaKey::NfProto, NFPROTO_IPV6)),
            Field::TcpDport => out.push((MetaKey::L4Proto, 6)),
            Field::UdpDport => out.push((MetaKey::L4Proto, 17)),
            Field::IcmpType => out.push((MetaKey::L4Proto, 1)),
            Field::Icmpv6Type => out.push((MetaKey::L4Proto, 58)),
            Field::ThDport | Field::ThSport => {}
        },
        Expr::Jhash { input, .. } => field_deps(input, out),
        Expr::Concat(parts) => parts.iter().for_each(|p| field_deps(p, out)),
        _ => {}
    }
}

fn emit_deps(family: Family, exprs: &[&Expr], deps: &mut Deps, raw: &mut RawRule) {
    let mut need = Vec::new();
    for e in exprs {
        field_deps(e, &mut need);
    }
    for (key, value) in need {
        let slot = match key {
            MetaKey::NfProto if family != Family::Inet => continue,
            MetaKey::NfProto => &mut deps.nfproto,
            _ => &mut deps.l4proto,
        };
        if *slot == Some(value) {
            continue;
        }
        let k = match key {
            MetaKey::NfProto => libc::NFT_META_NFPROTO,
            _ => libc::NFT_META_L4PROTO,
        };
        raw.push(expr::meta(k as u32, REG_1));
        raw.push(expr::cmp(REG_1, 0, &[value]));
        *slot = Some(value);
    }
}

/// Loads `e` into 32-bit registers starting at `reg`; `scratch` is the first register free
/// after the whole destination (for hash inputs).
fn load(e: &Expr, reg: u32, scratch: u32, raw: &mut RawRule) -> Result<(), CompileError> {
    if reg + e.byte_len().div_ceil(4) > REG32_00 + 16 {
        return Err(CompileError::Invalid(
            "expression does not fit the registers".into(),
        ));
    }
    match e {
        Expr::Meta(k) => {
            let key = match k {
                MetaKey::IifName => libc::NFT_META_IIFNAME,
                MetaKey::OifName => libc::NFT_META_OIFNAME,
                MetaKey::L4Proto => libc::NFT_META_L4PROTO,
                MetaKey::NfProto => libc::NFT_META_NFPROTO,
                MetaKey::Mark => libc::NFT_META_MARK,
            };
            raw.push(expr::meta(key as u32, reg));
        }
        Expr::Payload(f) => {
            let (base, offset, len) = match f {
                Field::IpSaddr => (1, 12, 4),
                Field::IpDaddr => (1, 16, 4),
                Field::Ip6Saddr => (1, 8, 16),
                Field::Ip6Daddr => (1, 24, 16),
                Field::TcpDport | Field::UdpDport | Field::ThDport => (2, 2, 2),
                Field::ThSport => (2, 0, 2),
                Field::IcmpType | Field::Icmpv6Type => (2, 0, 1),
            };
            raw.push(expr::payload(base, offset, len, reg));
        }
        Expr::Ct(k) => {
            let key = match k {
                CtKey::State => libc::NFT_CT_STATE,
                CtKey::Status => libc::NFT_CT_STATUS,
                CtKey::Mark => libc::NFT_CT_MARK,
            };
            raw.push(expr::ct(key as u32, reg));
        }
        Expr::FibDaddrType => {
            // NFTA_FIB_F_DADDR = 2, NFT_FIB_RESULT_ADDRTYPE = 3.
            raw.push(expr::fib(2, 3, reg));
        }
        Expr::Numgen { modulus, offset } => raw.push(expr::numgen(*modulus, *offset, reg)),
        Expr::Jhash {
            input,
            modulus,
            seed,
            offset,
        } => {
            load(input, scratch, scratch + input.byte_len().div_ceil(4), raw)?;
            raw.push(expr::jhash(
                scratch,
                input.byte_len(),
                *modulus,
                *seed,
                *offset,
                reg,
            ));
        }
        Expr::Concat(parts) => {
            let mut r = reg;
            for p in parts {
                load(p, r, scratch, raw)?;
                r += p.byte_len().div_ceil(4);
            }
        }
    }
    Ok(())
}

fn load_key(e: &Expr, raw: &mut RawRule) -> Result<u32, CompileError> {
    let scratch = REG32_00 + e.byte_len().div_ceil(4);
    load(e, REG32_00, scratch, raw)?;
    Ok(REG32_00)
}

/// An anonymous set to create before the rule that uses it.
pub(crate) type AnonSet = (u32, Set);

fn set_name(
    set: &SetRef,
    new_id: &mut dyn FnMut() -> u32,
    anon: &mut Vec<AnonSet>,
) -> (String, Option<u32>) {
    match set {
        SetRef::Named(n) => (n.clone(), None),
        SetRef::Anonymous {
            key,
            interval,
            elements,
            data,
        } => {
            let id = new_id();
            let mut s = Set::new("__set%d", key.clone());
            s.interval = *interval;
            s.constant = true;
            s.data = data.clone();
            s.elements = elements.clone();
            anon.push((id, s));
            ("__set%d".to_string(), Some(id))
        }
    }
}

/// Lowers a rule's statements into kernel expressions on `raw`.
pub(crate) fn compile_rule(
    family: Family,
    rule: &Rule,
    raw: &mut RawRule,
    new_id: &mut dyn FnMut() -> u32,
    anon: &mut Vec<AnonSet>,
) -> Result<(), CompileError> {
    let mut deps = Deps::default();
    for stmt in &rule.stmts {
        match stmt {
            Stmt::Cmp { left, op, right } => {
                emit_deps(family, &[left], &mut deps, raw);
                let data = encode(right)?;
                if data.len() as u32 != left.byte_len() {
                    return Err(CompileError::Invalid(format!(
                        "comparing {} bytes with a {}-byte value",
                        left.byte_len(),
                        data.len()
                    )));
                }
                let reg = load_key(left, raw)?;
                let code = if *op == CmpOp::Eq { 0 } else { 1 };
                raw.push(expr::cmp(reg, code, &data));
                if *op == CmpOp::Eq {
                    match (left, right) {
                        (Expr::Meta(MetaKey::L4Proto), Value::Proto(p)) => deps.l4proto = Some(*p),
                        (Expr::Meta(MetaKey::NfProto), Value::Proto(p)) => deps.nfproto = Some(*p),
                        _ => {}
                    }
                }
            }
            Stmt::Range {
                left,
                negate,
                from,
                to,
            } => {
                emit_deps(family, &[left], &mut deps, raw);
                let reg = load_key(left, raw)?;
                raw.push(expr::range(
                    reg,
                    u32::from(*negate),
                    &encode(from)?,
                    &encode(to)?,
                ));
            }
            Stmt::Flags { left, bits, negate } => {
                let mask = encode(bits)?;
                let reg = load_key(left, raw)?;
                raw.push(expr::bitwise(reg, reg, &mask, &vec![0; mask.len()]));
                let code = if *negate { 0 } else { 1 };
                raw.push(expr::cmp(reg, code, &vec![0; mask.len()]));
            }
            Stmt::Lookup { left, set, negate } => {
                emit_deps(family, &[left], &mut deps, raw);
                let (name, id) = set_name(set, new_id, anon);
                let reg = load_key(left, raw)?;
                raw.push(expr::lookup(reg, None, &name, id, *negate));
            }
            Stmt::Counter => raw.push(expr::counter()),
            Stmt::Limit {
                rate,
                unit,
                burst,
                over,
            } => raw.push(expr::limit(*rate, unit.seconds(), *burst, *over)),
            Stmt::Log { prefix } => raw.push(expr::log(prefix)),
            Stmt::Verdict(v) => {
                let (code, chain) = verdict_code(v);
                raw.push(expr::verdict(code, chain));
            }
            Stmt::Vmap { key, map } => {
                emit_deps(family, &[key], &mut deps, raw);
                let (name, id) = set_name(map, new_id, anon);
                let reg = load_key(key, raw)?;
                raw.push(expr::lookup(reg, Some(REG_VERDICT), &name, id, false));
            }
            Stmt::Reject(r) => raw.push(match r {
                Reject::TcpReset => expr::reject(1, None),
                // NFT_REJECT_ICMPX_UNREACH with NFT_REJECT_ICMPX_PORT_UNREACH / ADMIN_PROHIBITED.
                Reject::IcmpxPortUnreachable => expr::reject(2, Some(1)),
                Reject::IcmpxAdminProhibited => expr::reject(2, Some(3)),
            }),
            Stmt::Masquerade => raw.push(expr::masquerade()),
            Stmt::Nat { kind, addr, port } => {
                let (fam, bytes) = match addr {
                    std::net::IpAddr::V4(a) => (NFPROTO_IPV4, a.octets().to_vec()),
                    std::net::IpAddr::V6(a) => (NFPROTO_IPV6, a.octets().to_vec()),
                };
                raw.push(expr::immediate(REG_1, &bytes));
                let proto_reg = port.map(|p| {
                    // The second 16-byte register.
                    raw.push(expr::immediate(2, &p.to_be_bytes()));
                    2
                });
                raw.push(expr::nat(nat_code(*kind), u32::from(fam), REG_1, proto_reg));
            }
            Stmt::NatMap {
                kind,
                version,
                key,
                map,
                with_port,
            } => {
                let fam = match version {
                    IpVersion::V4 => NFPROTO_IPV4,
                    IpVersion::V6 => NFPROTO_IPV6,
                };
                emit_deps(family, &[key], &mut deps, raw);
                let (name, id) = set_name(map, new_id, anon);
                let reg = load_key(key, raw)?;
                raw.push(expr::lookup(reg, Some(REG_1), &name, id, false));
                let addr_words = if *version == IpVersion::V4 { 1 } else { 4 };
                let proto_reg = with_port.then_some(REG32_00 + addr_words);
                raw.push(expr::nat(nat_code(*kind), u32::from(fam), REG_1, proto_reg));
            }
        }
    }
    Ok(())
}

fn nat_code(k: NatKind) -> u32 {
    match k {
        NatKind::Snat => 0,
        NatKind::Dnat => 1,
    }
}
