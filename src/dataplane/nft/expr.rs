//! Builders of nftables kernel expressions, including the ones the `nftnl` crate lacks
//! (numgen, hash, range, limit, log, reject, fib, NAT from registers, lookups with a data
//! register and inversion). Each returns an owned expression that a rule takes over with
//! [`ffi::Rule::add_expr`](super::ffi::Obj::add_expr).

use super::error::CompileError;
use super::ffi::attr::expr::*;
use super::ffi::{Expr, kind};

/// The verdict register.
pub const REG_VERDICT: u32 = 0;
/// The first 16-byte data register (`NFT_REG_1`), same storage as `REG32_00..03`.
pub const REG_1: u32 = 1;
/// The first 4-byte register (`NFT_REG32_00`); 16 of them up to 23.
pub const REG32_00: u32 = 8;

/// `meta load <key> => reg`.
pub(crate) fn meta(key: u32, dreg: u32) -> Expr<kind::Meta> {
    Expr::new()
        .with_u32(meta::KEY, key)
        .with_u32(meta::DREG, dreg)
}

/// `payload load <len>b @ <base> + <offset> => reg`.
pub(crate) fn payload(base: u32, offset: u32, len: u32, dreg: u32) -> Expr<kind::Payload> {
    Expr::new()
        .with_u32(payload::BASE, base)
        .with_u32(payload::OFFSET, offset)
        .with_u32(payload::LEN, len)
        .with_u32(payload::DREG, dreg)
}

/// `payload write reg <sreg> => <len>b @ <base> + <offset>`, with `csum_offset` the
/// offset of an internet checksum over the written bytes that the kernel updates
/// (`csum_type 1`, the IPv4 header's), or none.
pub(crate) fn payload_write(
    base: u32,
    offset: u32,
    len: u32,
    sreg: u32,
    csum_offset: Option<u32>,
) -> Expr<kind::Payload> {
    Expr::new()
        .with_u32(payload::BASE, base)
        .with_u32(payload::OFFSET, offset)
        .with_u32(payload::LEN, len)
        .with_u32(payload::SREG, sreg)
        .with_u32(payload::CSUM_TYPE, u32::from(csum_offset.is_some()))
        .with_u32(payload::CSUM_OFFSET, csum_offset.unwrap_or(0))
}

/// `ct load <key> => reg`.
pub(crate) fn ct(key: u32, dreg: u32) -> Expr<kind::Ct> {
    Expr::new().with_u32(ct::KEY, key).with_u32(ct::DREG, dreg)
}

/// `ct load <key> => reg, dir original` (a field of the original-direction tuple).
pub(crate) fn ct_original(key: u32, dreg: u32) -> Expr<kind::Ct> {
    Expr::new()
        .with_u32(ct::KEY, key)
        .with_u32(ct::DREG, dreg)
        .with_u8(ct::DIR, 0)
}

/// `dynset update reg_key <key> set <name> sreg_data <data> timeout <ms>ms` (op 1 =
/// update: add, or restart the timeout of an element that is there).
pub(crate) fn dynset_update(
    set: &str,
    sreg_key: u32,
    sreg_data: u32,
    timeout_ms: u64,
) -> Result<Expr<kind::Dynset>, CompileError> {
    Expr::new()
        .with_u32(dynset::SREG_KEY, sreg_key)
        .with_u32(dynset::SREG_DATA, sreg_data)
        .with_u32(dynset::OP, 1)
        .with_u64(dynset::TIMEOUT, timeout_ms)
        .with_str(dynset::SET_NAME, set)
}

/// `fib <flags> <result> => reg`.
pub(crate) fn fib(flags: u32, result: u32, dreg: u32) -> Expr<kind::Fib> {
    Expr::new()
        .with_u32(fib::FLAGS, flags)
        .with_u32(fib::RESULT, result)
        .with_u32(fib::DREG, dreg)
}

/// `numgen random mod <modulus> offset <offset> => reg` (type 1 = random).
pub(crate) fn numgen(modulus: u32, offset: u32, dreg: u32) -> Expr<kind::Numgen> {
    Expr::new()
        .with_u32(numgen::DREG, dreg)
        .with_u32(numgen::MODULUS, modulus)
        .with_u32(numgen::TYPE, 1)
        .with_u32(numgen::OFFSET, offset)
}

/// `hash reg <dreg> = jhash(reg <sreg>, <len>, <seed>) % <modulus> + <offset>`.
pub(crate) fn jhash(
    sreg: u32,
    len: u32,
    modulus: u32,
    seed: u32,
    offset: u32,
    dreg: u32,
) -> Expr<kind::Hash> {
    Expr::new()
        .with_u32(hash::SREG, sreg)
        .with_u32(hash::DREG, dreg)
        .with_u32(hash::LEN, len)
        .with_u32(hash::MODULUS, modulus)
        .with_u32(hash::SEED, seed)
        .with_u32(hash::OFFSET, offset)
        .with_u32(hash::TYPE, 0)
}

/// `cmp <op> reg <sreg> <data>` (op 0 = eq, 1 = neq).
pub(crate) fn cmp(sreg: u32, op: u32, data: &[u8]) -> Result<Expr<kind::Cmp>, CompileError> {
    Expr::new()
        .with_u32(cmp::SREG, sreg)
        .with_u32(cmp::OP, op)
        .with_data(cmp::DATA, data)
}

/// `range <op> reg <sreg> <from> <to>` (op 0 = eq, 1 = neq).
pub(crate) fn range(
    sreg: u32,
    op: u32,
    from: &[u8],
    to: &[u8],
) -> Result<Expr<kind::Range>, CompileError> {
    Expr::new()
        .with_u32(range::SREG, sreg)
        .with_u32(range::OP, op)
        .with_data(range::FROM, from)?
        .with_data(range::TO, to)
}

/// `bitwise reg <dreg> = (reg <sreg> & <mask>) ^ <xor>`.
pub(crate) fn bitwise(
    sreg: u32,
    dreg: u32,
    mask: &[u8],
    xor: &[u8],
) -> Result<Expr<kind::Bitwise>, CompileError> {
    Expr::new()
        .with_u32(bitwise::SREG, sreg)
        .with_u32(bitwise::DREG, dreg)
        .with_u32(bitwise::LEN, mask.len() as u32)
        .with_data(bitwise::MASK, mask)?
        .with_data(bitwise::XOR, xor)
}

/// `lookup reg <sreg> set <name> [id <set_id>] [dreg <dreg>] [inverted]`.
pub(crate) fn lookup(
    sreg: u32,
    dreg: Option<u32>,
    set: &str,
    set_id: Option<u32>,
    invert: bool,
) -> Result<Expr<kind::Lookup>, CompileError> {
    let mut e = Expr::new()
        .with_u32(lookup::SREG, sreg)
        .with_str(lookup::SET, set)?;
    if let Some(id) = set_id {
        e.set_u32(lookup::SET_ID, id);
    }
    if let Some(d) = dreg {
        e.set_u32(lookup::DREG, d);
    }
    if invert {
        e.set_u32(lookup::FLAGS, 1);
    }
    Ok(e)
}

/// Kernel verdict codes.
pub mod verdict {
    /// NF_DROP.
    pub const DROP: i32 = 0;
    /// NF_ACCEPT.
    pub const ACCEPT: i32 = 1;
    /// NFT_CONTINUE.
    pub const CONTINUE: i32 = -1;
    /// NFT_JUMP.
    pub const JUMP: i32 = -3;
    /// NFT_GOTO.
    pub const GOTO: i32 = -4;
    /// NFT_RETURN.
    pub const RETURN: i32 = -5;
}

/// `immediate reg 0 <verdict> [<chain>]`.
pub(crate) fn verdict(
    code: i32,
    chain: Option<&str>,
) -> Result<Expr<kind::Immediate>, CompileError> {
    let mut e = Expr::new()
        .with_u32(immediate::DREG, REG_VERDICT)
        .with_u32(immediate::VERDICT, code as u32);
    if let Some(c) = chain {
        e.set_str(immediate::CHAIN, c)?;
    }
    Ok(e)
}

/// `counter` (starting at zero).
pub(crate) fn counter() -> Expr<kind::Counter> {
    Expr::new()
        .with_u64(counter::PACKETS, 0)
        .with_u64(counter::BYTES, 0)
}

/// `limit rate [over] <rate>/<unit_seconds> burst <burst> packets`.
pub(crate) fn limit(rate: u64, unit_seconds: u64, burst: u32, over: bool) -> Expr<kind::Limit> {
    Expr::new()
        .with_u64(limit::RATE, rate)
        .with_u64(limit::UNIT, unit_seconds)
        .with_u32(limit::BURST, burst)
        .with_u32(limit::TYPE, 0)
        .with_u32(limit::FLAGS, u32::from(over))
}

/// `log prefix "<prefix>"` to the kernel log (level warn).
pub(crate) fn log(prefix: &str, group: Option<u16>) -> Result<Expr<kind::Log>, CompileError> {
    let mut e = Expr::new().with_str(log::PREFIX, prefix)?;
    if let Some(g) = group {
        e.set_u16(log::GROUP, g);
    }
    Ok(e)
}

/// `NFT_OBJECT_CT_HELPER`.
pub(crate) const OBJECT_CT_HELPER: u32 = 3;
/// `NFT_OBJECT_LIMIT`.
pub(crate) const OBJECT_LIMIT: u32 = 4;

/// `limit name "<name>"`: a reference to the table's limit object `name`.
pub(crate) fn limit_ref(name: &str) -> Result<Expr<kind::Objref>, CompileError> {
    Expr::new()
        .with_u32(objref::IMM_TYPE, OBJECT_LIMIT)
        .with_str(objref::IMM_NAME, name)
}

/// `ct helper set "<name>"`: a reference to the table's ct helper object `name`.
pub(crate) fn ct_helper_set(name: &str) -> Result<Expr<kind::Objref>, CompileError> {
    Expr::new()
        .with_u32(objref::IMM_TYPE, OBJECT_CT_HELPER)
        .with_str(objref::IMM_NAME, name)
}

/// `reject type <type> code <code>` (type 1 = tcp reset needs no code; 2 = icmpx).
pub(crate) fn reject(kind: u32, code: Option<u8>) -> Expr<kind::Reject> {
    let e = Expr::new().with_u32(reject::TYPE, kind);
    match code {
        Some(c) => e.with_u8(reject::CODE, c),
        None => e,
    }
}

/// `masq`.
pub(crate) fn masquerade() -> Expr<kind::Masq> {
    Expr::new()
}

/// `redir [proto_min reg <p>]`: to the incoming interface's address; the kernel derives
/// the range flags from the register given.
pub(crate) fn redirect(proto_reg: Option<u32>) -> Expr<kind::Redir> {
    match proto_reg {
        Some(p) => Expr::new().with_u32(redir::REG_PROTO_MIN, p),
        None => Expr::new(),
    }
}

/// `notrack`.
pub(crate) fn notrack() -> Expr<kind::Notrack> {
    Expr::new()
}

/// `nat <snat|dnat> <family> addr_min reg <a> [proto_min reg <p>]` (type 0 = snat, 1 = dnat;
/// family 2 = ipv4, 10 = ipv6). The kernel derives the range flags from the registers given.
pub(crate) fn nat(
    kind: u32,
    family: u32,
    addr_reg: u32,
    proto_reg: Option<u32>,
) -> Expr<kind::Nat> {
    let e = Expr::new()
        .with_u32(nat::TYPE, kind)
        .with_u32(nat::FAMILY, family)
        .with_u32(nat::REG_ADDR_MIN, addr_reg);
    match proto_reg {
        Some(p) => e.with_u32(nat::REG_PROTO_MIN, p),
        None => e,
    }
}

/// `immediate reg <dreg> <data>`.
pub(crate) fn immediate(dreg: u32, data: &[u8]) -> Result<Expr<kind::Immediate>, CompileError> {
    Expr::new()
        .with_u32(immediate::DREG, dreg)
        .with_data(immediate::DATA, data)
}

/// `ct set <key> with reg <sreg>`.
pub(crate) fn ct_set(key: u32, sreg: u32) -> Expr<kind::Ct> {
    Expr::new().with_u32(ct::KEY, key).with_u32(ct::SREG, sreg)
}

/// `meta set <key> with reg <sreg>`.
pub(crate) fn meta_set(key: u32, sreg: u32) -> Expr<kind::Meta> {
    Expr::new()
        .with_u32(meta::KEY, key)
        .with_u32(meta::SREG, sreg)
}

/// `rt load <key> => reg` (key 3 = tcpmss: the route's MTU minus the headers).
pub(crate) fn rt(key: u32, dreg: u32) -> Expr<kind::Rt> {
    Expr::new().with_u32(rt::KEY, key).with_u32(rt::DREG, dreg)
}

/// `byteorder reg <reg> = hton(reg <reg>, <size>, <len>)` (op 1 = hton).
pub(crate) fn hton(reg: u32, size: u32, len: u32) -> Expr<kind::Byteorder> {
    Expr::new()
        .with_u32(byteorder::SREG, reg)
        .with_u32(byteorder::DREG, reg)
        .with_u32(byteorder::OP, 1)
        .with_u32(byteorder::LEN, len)
        .with_u32(byteorder::SIZE, size)
}

/// `exthdr write tcpopt reg <sreg> => <len>b @ <option> + <offset>` (type 2 = tcpopt; the
/// TCP option kind goes in `TYPE`, op 1 = tcp options).
pub(crate) fn tcpopt_write(option: u8, offset: u32, len: u32, sreg: u32) -> Expr<kind::Exthdr> {
    Expr::new()
        .with_u8(exthdr::TYPE, option)
        .with_u32(exthdr::OFFSET, offset)
        .with_u32(exthdr::LEN, len)
        .with_u32(exthdr::OP, 1)
        .with_u32(exthdr::SREG, sreg)
}

/// `flow_offload <flowtable>`: offloads the packet's connection to the named flowtable.
pub(crate) fn flow_offload(flowtable: &str) -> Result<Expr<kind::FlowOffload>, CompileError> {
    Expr::new().with_str(flow_offload::TABLE_NAME, flowtable)
}
