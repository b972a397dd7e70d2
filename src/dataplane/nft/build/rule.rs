//! Rule statements -> kernel expressions: register allocation (concatenations use
//! consecutive 32-bit registers), implicit protocol dependencies, and the anonymous sets a
//! rule needs created before it.

use nftnl::nftnl_sys::libc;

use super::objects::verdict_code;
use crate::dataplane::nft::encode::encode;
use crate::dataplane::nft::error::CompileError;
use crate::dataplane::nft::expr::{self, REG_1, REG_VERDICT, REG32_00};
use crate::dataplane::nft::ffi;
use crate::dataplane::nft::ir::*;

/// Protocol facts established earlier in the rule (so dependencies are not repeated).
#[derive(Default)]
struct Deps {
    nfproto: Option<u8>,
    l4proto: Option<u8>,
}

const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;
// `enum nft_meta_keys` (linux/netfilter/nf_tables.h); the libc crate does not have them.
const NFT_META_TIME_NS: i32 = 30;
const NFT_META_TIME_DAY: i32 = 31;
const NFT_META_TIME_HOUR: i32 = 32;

fn field_deps(e: &Expr, out: &mut Vec<(MetaKey, u8)>) {
    match e {
        Expr::Payload(f) => {
            let def = f.def();
            out.extend(def.nfproto.map(|p| (MetaKey::NfProto, p)));
            out.extend(def.l4proto.map(|p| (MetaKey::L4Proto, p)));
        }
        Expr::Jhash { input, .. } | Expr::Bitwise { input, .. } => field_deps(input, out),
        Expr::Concat(parts) => parts.iter().for_each(|p| field_deps(p, out)),
        _ => {}
    }
}

fn emit_deps(
    family: Family,
    exprs: &[&Expr],
    deps: &mut Deps,
    raw: &mut ffi::Rule,
) -> Result<(), CompileError> {
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
        raw.add_expr(expr::meta(k as u32, REG_1));
        raw.add_expr(expr::cmp(REG_1, 0, &[value])?);
        *slot = Some(value);
    }
    Ok(())
}

/// Loads field `f` into `reg`: its bytes, then its mask when it is narrower than them.
fn load_field(f: Field, reg: u32, raw: &mut ffi::Rule) -> Result<(), CompileError> {
    let def = f.def();
    raw.add_expr(expr::payload(def.base.code(), def.offset, def.len, reg));
    if !def.mask.is_empty() {
        raw.add_expr(expr::bitwise(reg, reg, def.mask, &vec![0; def.mask.len()])?);
    }
    Ok(())
}

/// A lookup in an anonymous set of one element, compiled the way nft compiles it.
///
/// nft never creates a one-element anonymous set: it turns `ip saddr { 10.0.0.0/16 }` into a
/// plain comparison. Doing the same keeps the kernel program equal to what the rendered text
/// (`edgenetd plan`) loads to, and it is the same match. Returns false (nothing emitted) for
/// any other lookup.
fn single_element_lookup(
    left: &Expr,
    set: &SetRef,
    negate: bool,
    raw: &mut ffi::Rule,
) -> Result<bool, CompileError> {
    let SetRef::Anonymous {
        elements,
        data: None,
        ..
    } = set
    else {
        return Ok(false);
    };
    let [only] = elements.as_slice() else {
        return Ok(false);
    };
    let op = u32::from(negate); // NFT_CMP_EQ / NFT_CMP_NEQ, NFT_RANGE_EQ / NFT_RANGE_NEQ
    match (&only.key, left) {
        (ElemKey::Value(v), _) => {
            let reg = load_key(left, raw)?;
            raw.add_expr(expr::cmp(reg, op, &encode(v)?)?);
        }
        (ElemKey::Range(a, b), _) => {
            let reg = load_key(left, raw)?;
            raw.add_expr(expr::range(reg, op, &encode(a)?, &encode(b)?)?);
        }
        (ElemKey::Prefix(net), Expr::Payload(field))
            if net.prefix_len() > 0 && field.def().mask.is_empty() =>
        {
            let addr = encode(&Value::ip(net.network()))?;
            let bits = u32::from(net.prefix_len());
            if bits % 8 == 0 {
                // Byte-aligned: nft loads only the prefix's bytes.
                let def = field.def();
                raw.add_expr(expr::payload(
                    def.base.code(),
                    def.offset,
                    bits / 8,
                    REG32_00,
                ));
                raw.add_expr(expr::cmp(REG32_00, op, &addr[..(bits / 8) as usize])?);
            } else {
                let mask: Vec<u8> = (0..addr.len() as u32)
                    .map(|i| (0xff00u16 >> bits.saturating_sub(i * 8).min(8)) as u8)
                    .collect();
                let reg = load_key(left, raw)?;
                raw.add_expr(expr::bitwise(reg, reg, &mask, &vec![0; mask.len()])?);
                raw.add_expr(expr::cmp(reg, op, &addr)?);
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Loads `e` into 32-bit registers starting at `reg`; `scratch` is the first register free
/// after the whole destination (for hash inputs).
fn load(e: &Expr, reg: u32, scratch: u32, raw: &mut ffi::Rule) -> Result<(), CompileError> {
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
                MetaKey::Hour => NFT_META_TIME_HOUR,
                MetaKey::Day => NFT_META_TIME_DAY,
                MetaKey::Time => NFT_META_TIME_NS,
            };
            raw.add_expr(expr::meta(key as u32, reg));
            // Host-order integers, compared in network order as nft compiles them.
            match k {
                MetaKey::Hour => raw.add_expr(expr::hton(reg, 4, 4)),
                MetaKey::Time => raw.add_expr(expr::hton(reg, 8, 8)),
                _ => {}
            }
        }
        Expr::Payload(f) => load_field(*f, reg, raw)?,
        Expr::Ct(k) => {
            let key = match k {
                CtKey::State => libc::NFT_CT_STATE,
                CtKey::Status => libc::NFT_CT_STATUS,
                CtKey::Mark => libc::NFT_CT_MARK,
            };
            raw.add_expr(expr::ct(key as u32, reg));
        }
        Expr::FibDaddrType => {
            // NFTA_FIB_F_DADDR = 2, NFT_FIB_RESULT_ADDRTYPE = 3.
            raw.add_expr(expr::fib(2, 3, reg));
        }
        Expr::CtOriginal(k) => {
            let key = match k {
                CtOrigKey::IpDaddr => libc::NFT_CT_DST_IP,
                CtOrigKey::Ip6Daddr => libc::NFT_CT_DST_IP6,
                CtOrigKey::ProtoDst => libc::NFT_CT_PROTO_DST,
            };
            raw.add_expr(expr::ct_original(key as u32, reg));
        }
        Expr::Numgen { modulus, offset } => raw.add_expr(expr::numgen(*modulus, *offset, reg)),
        Expr::Jhash {
            input,
            modulus,
            seed,
            offset,
        } => {
            load(input, scratch, scratch + input.byte_len().div_ceil(4), raw)?;
            raw.add_expr(expr::jhash(
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
        Expr::Bitwise { input, mask, xor } => {
            let len = input.byte_len() as usize;
            if mask.len() != len || xor.len() != len {
                return Err(CompileError::Invalid(format!(
                    "a bitwise mask and xor of {} and {} bytes on a {len}-byte value",
                    mask.len(),
                    xor.len()
                )));
            }
            load(input, reg, scratch, raw)?;
            raw.add_expr(expr::bitwise(reg, reg, mask, xor)?);
        }
    }
    Ok(())
}

fn load_key(e: &Expr, raw: &mut ffi::Rule) -> Result<u32, CompileError> {
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
            // nft's names: the kernel numbers them, a map's apart from a set's.
            let name = if data.is_some() { "__map%d" } else { "__set%d" };
            let mut s = Set::new(name, key.clone());
            s.interval = *interval;
            s.constant = true;
            s.data = data.clone();
            s.elements = elements.clone();
            anon.push((id, s));
            (name.to_string(), Some(id))
        }
    }
}

/// Lowers a rule's statements into kernel expressions on `raw`.
pub(crate) fn compile_rule(
    family: Family,
    rule: &Rule,
    raw: &mut ffi::Rule,
    new_id: &mut dyn FnMut() -> u32,
    anon: &mut Vec<AnonSet>,
) -> Result<(), CompileError> {
    let mut cx = RuleCx {
        family,
        raw,
        new_id,
        anon,
        deps: Deps::default(),
    };
    for stmt in &rule.stmts {
        cx.lower(stmt)?;
    }
    Ok(())
}

/// What lowering one rule's statements carries from one statement to the next.
struct RuleCx<'a> {
    /// The table's family (decides which protocol dependencies a match needs).
    family: Family,
    /// The rule being built.
    raw: &'a mut ffi::Rule,
    /// Hands out ids for anonymous sets.
    new_id: &'a mut dyn FnMut() -> u32,
    /// Anonymous sets the rule refers to, sent before it in the batch.
    anon: &'a mut Vec<AnonSet>,
    /// Protocol matches already emitted (or implied by an earlier statement).
    deps: Deps,
}

impl RuleCx<'_> {
    /// Appends the expressions of one statement.
    fn lower(&mut self, stmt: &Stmt) -> Result<(), CompileError> {
        match stmt {
            Stmt::Cmp { left, op, right } => self.cmp(left, *op, right)?,
            Stmt::Range {
                left,
                negate,
                from,
                to,
            } => {
                let reg = self.load(left)?;
                let (from, to) = (encode(from)?, encode(to)?);
                if *negate {
                    self.raw.add_expr(expr::range(reg, 1, &from, &to)?);
                } else {
                    // As nft compiles `a-b`: two comparisons (NFT_CMP_GTE, NFT_CMP_LTE) on
                    // the network-order value.
                    self.raw.add_expr(expr::cmp(reg, 5, &from)?);
                    self.raw.add_expr(expr::cmp(reg, 3, &to)?);
                }
            }
            Stmt::Flags { left, bits, negate } => {
                let mask = encode(bits)?;
                let reg = self.load(left)?;
                let zero = vec![0; mask.len()];
                self.raw.add_expr(expr::bitwise(reg, reg, &mask, &zero)?);
                let code = if *negate { 0 } else { 1 };
                self.raw.add_expr(expr::cmp(reg, code, &zero)?);
            }
            Stmt::Lookup { left, set, negate } => {
                emit_deps(self.family, &[left], &mut self.deps, self.raw)?;
                if !single_element_lookup(left, set, *negate, self.raw)? {
                    let (name, id) = set_name(set, self.new_id, self.anon);
                    let reg = load_key(left, self.raw)?;
                    self.raw
                        .add_expr(expr::lookup(reg, None, &name, id, *negate)?);
                }
            }
            Stmt::Counter => self.raw.add_expr(expr::counter()),
            Stmt::Limit {
                rate,
                unit,
                burst,
                over,
            } => self
                .raw
                .add_expr(expr::limit(*rate, unit.seconds(), *burst, *over)),
            Stmt::LimitRef(name) => self.raw.add_expr(expr::limit_ref(name)?),
            Stmt::Log { prefix, group } => self.raw.add_expr(expr::log(prefix, *group)?),
            Stmt::Verdict(v) => {
                let (code, chain) = verdict_code(v);
                self.raw.add_expr(expr::verdict(code, chain)?);
            }
            Stmt::Vmap { key, map } => {
                let reg = self.load(key)?;
                let (name, id) = set_name(map, self.new_id, self.anon);
                self.raw
                    .add_expr(expr::lookup(reg, Some(REG_VERDICT), &name, id, false)?);
            }
            Stmt::Reject(r) => self.raw.add_expr(reject_expr(*r)),
            Stmt::Masquerade => self.raw.add_expr(expr::masquerade()),
            Stmt::Redirect { port } => {
                let reg = match port {
                    Some(p) => {
                        self.raw.add_expr(expr::immediate(REG_1, &p.to_be_bytes())?);
                        Some(REG_1)
                    }
                    None => None,
                };
                self.raw.add_expr(expr::redirect(reg));
            }
            Stmt::Notrack => self.raw.add_expr(expr::notrack()),
            Stmt::Nat { kind, addr, port } => self.nat(*kind, addr, *port)?,
            Stmt::NatMap {
                kind,
                version,
                key,
                map,
                with_port,
            } => self.nat_map(*kind, *version, key, map, *with_port)?,
            Stmt::MapUpdate {
                map,
                key,
                timeout_ms,
                data,
            } => self.map_update(map, key, *timeout_ms, data)?,
            Stmt::CtMarkOr(bits) => {
                // As nft compiles `ct mark set ct mark | bits`: load, (mark & !bits) ^ bits,
                // store.
                let key = libc::NFT_CT_MARK as u32;
                self.raw.add_expr(expr::ct(key, REG_1));
                self.raw.add_expr(expr::bitwise(
                    REG_1,
                    REG_1,
                    &(!bits).to_ne_bytes(),
                    &bits.to_ne_bytes(),
                )?);
                self.raw.add_expr(expr::ct_set(key, REG_1));
            }
            Stmt::MaskedCmp { left, mask, right } => {
                let (mask, right) = (encode(mask)?, encode(right)?);
                let reg = self.load(left)?;
                let zero = vec![0; mask.len()];
                self.raw.add_expr(expr::bitwise(reg, reg, &mask, &zero)?);
                self.raw.add_expr(expr::cmp(reg, 0, &right)?);
            }
            Stmt::MetaMarkSet { and, xor } => {
                let key = libc::NFT_META_MARK as u32;
                if *and == 0 {
                    // As nft compiles `meta mark set VALUE`: no load, an immediate.
                    self.raw
                        .add_expr(expr::immediate(REG_1, &xor.to_ne_bytes())?);
                } else {
                    // As nft compiles `meta mark set meta mark & AND ^ XOR` (and `| XOR`).
                    self.raw.add_expr(expr::meta(key, REG_1));
                    self.raw.add_expr(expr::bitwise(
                        REG_1,
                        REG_1,
                        &and.to_ne_bytes(),
                        &xor.to_ne_bytes(),
                    )?);
                }
                self.raw.add_expr(expr::meta_set(key, REG_1));
            }
            Stmt::CtHelperSet(name) => self.raw.add_expr(expr::ct_helper_set(name)?),
            Stmt::FlowOffload(name) => self.raw.add_expr(expr::flow_offload(name)?),
            Stmt::FieldSet { field, value } => self.field_set(*field, *value)?,
            // Its expressions are the rule's own, set when the rule object was made.
            Stmt::Opaque(_) => {}
            Stmt::ClampMssToRoute => {
                emit_deps(
                    self.family,
                    &[&Expr::Payload(Field::TcpFlags)],
                    &mut self.deps,
                    self.raw,
                )?;
                // NFT_RT_TCPMSS, converted to network order, written over the MSS option's
                // two value bytes (kind 2, offset 2).
                self.raw.add_expr(expr::rt(3, REG_1));
                self.raw.add_expr(expr::hton(REG_1, 2, 2));
                self.raw.add_expr(expr::tcpopt_write(2, 2, 2, REG_1));
            }
        }
        Ok(())
    }

    /// `<field> set <value>` as nft compiles it: the field's bytes widened to whole 16-bit
    /// words (the unit of the checksum update) are loaded, the field's bits replaced, and
    /// written back, with the IPv4 header checksum (at byte 10) updated for an IPv4 field.
    fn field_set(&mut self, field: Field, value: u32) -> Result<(), CompileError> {
        emit_deps(
            self.family,
            &[&Expr::Payload(field)],
            &mut self.deps,
            self.raw,
        )?;
        let def = field.def();
        let numeric = def.numeric.ok_or_else(|| {
            CompileError::Invalid(format!("{} is not a numeric field to set", def.text))
        })?;
        let (start, end) = (def.offset & !1, (def.offset + def.len).div_ceil(2) * 2);
        let lead = (def.offset - start) as usize;
        let mut keep = vec![0xff; (end - start) as usize];
        let mut set = vec![0; keep.len()];
        let shifted = u64::from(value) << numeric.shift;
        for i in 0..def.len as usize {
            let bits = def.mask.get(i).copied().unwrap_or(0xff);
            let byte = (shifted >> (8 * (def.len as usize - 1 - i))) as u8;
            keep[lead + i] = !bits;
            set[lead + i] = byte & bits;
        }
        let base = def.base.code();
        let csum = def.write_checksum();
        self.raw
            .add_expr(expr::payload(base, start, end - start, REG_1));
        self.raw.add_expr(expr::bitwise(REG_1, REG_1, &keep, &set)?);
        self.raw
            .add_expr(expr::payload_write(base, start, end - start, REG_1, csum));
        Ok(())
    }

    /// `update @map { key timeout t : data }`: the key from the first register, the data
    /// right after it (where nft puts them, so the program equals the rendered text's).
    fn map_update(
        &mut self,
        map: &str,
        key: &Expr,
        timeout_ms: u64,
        data: &Expr,
    ) -> Result<(), CompileError> {
        emit_deps(self.family, &[key, data], &mut self.deps, self.raw)?;
        let key_words = key.byte_len().div_ceil(4);
        let data_words = data.byte_len().div_ceil(4);
        // nft starts the data at the next 16-byte register boundary after the key; when that
        // leaves too little room (an IPv6 key and data), right after the key.
        let data_reg = match key_words.div_ceil(4) * 4 {
            aligned if aligned + data_words <= 16 => REG32_00 + aligned,
            _ => REG32_00 + key_words,
        };
        let after = data_reg + data.byte_len().div_ceil(4);
        load(key, REG32_00, after, self.raw)?;
        load(data, data_reg, after, self.raw)?;
        self.raw
            .add_expr(expr::dynset_update(map, REG32_00, data_reg, timeout_ms)?);
        Ok(())
    }

    /// Emits the protocol matches `key` depends on, then loads it into a register.
    fn load(&mut self, key: &Expr) -> Result<u32, CompileError> {
        emit_deps(self.family, &[key], &mut self.deps, self.raw)?;
        load_key(key, self.raw)
    }

    /// `left op right`; an equality on the l4 or network protocol also satisfies later
    /// statements' dependency on it.
    fn cmp(&mut self, left: &Expr, op: CmpOp, right: &Value) -> Result<(), CompileError> {
        if let Value::IfName(name) = right
            && let Some(stem) = name.strip_suffix('*')
        {
            // A wildcard compares only the name's first bytes, as nft compiles `"ppp*"`.
            let reg = self.load(left)?;
            let code = if op == CmpOp::Eq { 0 } else { 1 };
            self.raw.add_expr(expr::cmp(reg, code, stem.as_bytes())?);
            return Ok(());
        }
        let data = encode(right)?;
        if data.len() as u32 != left.byte_len() {
            return Err(CompileError::Invalid(format!(
                "comparing {} bytes with a {}-byte value",
                left.byte_len(),
                data.len()
            )));
        }
        let reg = self.load(left)?;
        let code = if op == CmpOp::Eq { 0 } else { 1 };
        self.raw.add_expr(expr::cmp(reg, code, &data)?);
        if op == CmpOp::Eq {
            match (left, right) {
                (Expr::Meta(MetaKey::L4Proto), Value::Proto(p)) => self.deps.l4proto = Some(*p),
                (Expr::Meta(MetaKey::NfProto), Value::Proto(p)) => self.deps.nfproto = Some(*p),
                _ => {}
            }
        }
        Ok(())
    }

    /// NAT to a fixed address (and port).
    fn nat(
        &mut self,
        kind: NatKind,
        addr: &std::net::IpAddr,
        port: Option<u16>,
    ) -> Result<(), CompileError> {
        let (fam, bytes) = match addr {
            std::net::IpAddr::V4(a) => (NFPROTO_IPV4, a.octets().to_vec()),
            std::net::IpAddr::V6(a) => (NFPROTO_IPV6, a.octets().to_vec()),
        };
        self.raw.add_expr(expr::immediate(REG_1, &bytes)?);
        let proto_reg = match port {
            // The second 16-byte register.
            Some(p) => {
                self.raw.add_expr(expr::immediate(2, &p.to_be_bytes())?);
                Some(2)
            }
            None => None,
        };
        self.raw
            .add_expr(expr::nat(nat_code(kind), u32::from(fam), REG_1, proto_reg));
        Ok(())
    }

    /// NAT to the address (and port) a map lookup of `key` gives.
    fn nat_map(
        &mut self,
        kind: NatKind,
        version: IpVersion,
        key: &Expr,
        map: &SetRef,
        with_port: bool,
    ) -> Result<(), CompileError> {
        let fam = match version {
            IpVersion::V4 => NFPROTO_IPV4,
            IpVersion::V6 => NFPROTO_IPV6,
        };
        emit_deps(self.family, &[key], &mut self.deps, self.raw)?;
        // nft loads a hash input here four 32-bit registers further than after the key (it
        // keeps the first 16-byte register for the NAT address); making the same choice keeps
        // the program equal to what the rendered text loads to.
        let reg = if with_port {
            let scratch = REG32_00 + 4 + key.byte_len().div_ceil(4);
            load(key, REG32_00, scratch, self.raw)?;
            REG32_00
        } else {
            load_key(key, self.raw)?
        };
        let (name, id) = set_name(map, self.new_id, self.anon);
        self.raw
            .add_expr(expr::lookup(reg, Some(REG_1), &name, id, false)?);
        let addr_words = if version == IpVersion::V4 { 1 } else { 4 };
        let proto_reg = with_port.then_some(REG32_00 + addr_words);
        self.raw
            .add_expr(expr::nat(nat_code(kind), u32::from(fam), REG_1, proto_reg));
        Ok(())
    }
}

/// The reject expression of a reject statement.
fn reject_expr(r: Reject) -> ffi::Expr<ffi::kind::Reject> {
    match r {
        Reject::TcpReset => expr::reject(1, None),
        // NFT_REJECT_ICMPX_UNREACH with NFT_REJECT_ICMPX_PORT_UNREACH / ADMIN_PROHIBITED.
        Reject::IcmpxPortUnreachable => expr::reject(2, Some(1)),
        Reject::IcmpxAdminProhibited => expr::reject(2, Some(3)),
    }
}

fn nat_code(k: NatKind) -> u32 {
    match k {
        NatKind::Snat => 0,
        NatKind::Dnat => 1,
    }
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
