//! Safe builders for nftables kernel expressions over the raw libnftnl bindings, including the
//! ones the `nftnl` crate lacks (numgen, hash, range, limit, log, reject, fib, NAT from
//! registers, lookups with a data register and inversion). Each returns an owned expression
//! that [`RawRule::push`] hands over to a rule.

use std::ffi::{CStr, CString};
use std::ptr::NonNull;

use nftnl::nftnl_sys as sys;

/// An allocated `nftnl_expr` not yet owned by a rule.
pub struct RawExpr(NonNull<sys::nftnl_expr>);

impl RawExpr {
    fn new(name: &CStr) -> RawExpr {
        // SAFETY: name is a valid C string; a NULL return (OOM) aborts below.
        let ptr = unsafe { sys::nftnl_expr_alloc(name.as_ptr()) };
        RawExpr(NonNull::new(ptr).unwrap_or_else(|| std::process::abort()))
    }

    fn u32(self, attr: u32, v: u32) -> RawExpr {
        // SAFETY: the expression is valid; libnftnl copies the value.
        unsafe { sys::nftnl_expr_set_u32(self.0.as_ptr(), attr as u16, v) };
        self
    }

    fn u64(self, attr: u32, v: u64) -> RawExpr {
        // SAFETY: as above.
        unsafe { sys::nftnl_expr_set_u64(self.0.as_ptr(), attr as u16, v) };
        self
    }

    fn u8(self, attr: u32, v: u8) -> RawExpr {
        // SAFETY: as above.
        unsafe { sys::nftnl_expr_set_u8(self.0.as_ptr(), attr as u16, v) };
        self
    }

    fn data(self, attr: u32, data: &[u8]) -> RawExpr {
        // SAFETY: libnftnl copies `data.len()` bytes from the pointer.
        unsafe {
            sys::nftnl_expr_set(
                self.0.as_ptr(),
                attr as u16,
                data.as_ptr().cast(),
                data.len() as u32,
            )
        };
        self
    }

    fn str(self, attr: u32, s: &str) -> RawExpr {
        let c = CString::new(s.replace('\0', "")).unwrap_or_default();
        // SAFETY: libnftnl copies the NUL-terminated string.
        unsafe { sys::nftnl_expr_set_str(self.0.as_ptr(), attr as u16, c.as_ptr()) };
        self
    }

    /// Gives up ownership (to `nftnl_rule_add_expr`).
    pub(crate) fn into_raw(self) -> *mut sys::nftnl_expr {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for RawExpr {
    fn drop(&mut self) {
        // SAFETY: we own the expression (not yet added to a rule).
        unsafe { sys::nftnl_expr_free(self.0.as_ptr()) };
    }
}

/// The verdict register.
pub const REG_VERDICT: u32 = 0;
/// The first 16-byte data register (`NFT_REG_1`), same storage as `REG32_00..03`.
pub const REG_1: u32 = 1;
/// The first 4-byte register (`NFT_REG32_00`); 16 of them up to 23.
pub const REG32_00: u32 = 8;

/// `meta load <key> => reg`.
pub fn meta(key: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"meta")
        .u32(sys::NFTNL_EXPR_META_KEY, key)
        .u32(sys::NFTNL_EXPR_META_DREG, dreg)
}

/// `payload load <len>b @ <base> + <offset> => reg`.
pub fn payload(base: u32, offset: u32, len: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"payload")
        .u32(sys::NFTNL_EXPR_PAYLOAD_BASE, base)
        .u32(sys::NFTNL_EXPR_PAYLOAD_OFFSET, offset)
        .u32(sys::NFTNL_EXPR_PAYLOAD_LEN, len)
        .u32(sys::NFTNL_EXPR_PAYLOAD_DREG, dreg)
}

/// `ct load <key> => reg`.
pub fn ct(key: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"ct")
        .u32(sys::NFTNL_EXPR_CT_KEY, key)
        .u32(sys::NFTNL_EXPR_CT_DREG, dreg)
}

/// `fib <flags> <result> => reg`.
pub fn fib(flags: u32, result: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"fib")
        .u32(sys::NFTNL_EXPR_FIB_FLAGS, flags)
        .u32(sys::NFTNL_EXPR_FIB_RESULT, result)
        .u32(sys::NFTNL_EXPR_FIB_DREG, dreg)
}

/// `numgen random mod <modulus> offset <offset> => reg` (type 1 = random).
pub fn numgen(modulus: u32, offset: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"numgen")
        .u32(sys::NFTNL_EXPR_NG_DREG, dreg)
        .u32(sys::NFTNL_EXPR_NG_MODULUS, modulus)
        .u32(sys::NFTNL_EXPR_NG_TYPE, 1)
        .u32(sys::NFTNL_EXPR_NG_OFFSET, offset)
}

/// `hash reg <dreg> = jhash(reg <sreg>, <len>, <seed>) % <modulus> + <offset>`.
pub fn jhash(sreg: u32, len: u32, modulus: u32, seed: u32, offset: u32, dreg: u32) -> RawExpr {
    RawExpr::new(c"hash")
        .u32(sys::NFTNL_EXPR_HASH_SREG, sreg)
        .u32(sys::NFTNL_EXPR_HASH_DREG, dreg)
        .u32(sys::NFTNL_EXPR_HASH_LEN, len)
        .u32(sys::NFTNL_EXPR_HASH_MODULUS, modulus)
        .u32(sys::NFTNL_EXPR_HASH_SEED, seed)
        .u32(sys::NFTNL_EXPR_HASH_OFFSET, offset)
        .u32(sys::NFTNL_EXPR_HASH_TYPE, 0)
}

/// `cmp <op> reg <sreg> <data>` (op 0 = eq, 1 = neq).
pub fn cmp(sreg: u32, op: u32, data: &[u8]) -> RawExpr {
    RawExpr::new(c"cmp")
        .u32(sys::NFTNL_EXPR_CMP_SREG, sreg)
        .u32(sys::NFTNL_EXPR_CMP_OP, op)
        .data(sys::NFTNL_EXPR_CMP_DATA, data)
}

/// `range <op> reg <sreg> <from> <to>` (op 0 = eq, 1 = neq).
pub fn range(sreg: u32, op: u32, from: &[u8], to: &[u8]) -> RawExpr {
    RawExpr::new(c"range")
        .u32(sys::NFTNL_EXPR_RANGE_SREG, sreg)
        .u32(sys::NFTNL_EXPR_RANGE_OP, op)
        .data(sys::NFTNL_EXPR_RANGE_FROM_DATA, from)
        .data(sys::NFTNL_EXPR_RANGE_TO_DATA, to)
}

/// `bitwise reg <dreg> = (reg <sreg> & <mask>) ^ <xor>`.
pub fn bitwise(sreg: u32, dreg: u32, mask: &[u8], xor: &[u8]) -> RawExpr {
    RawExpr::new(c"bitwise")
        .u32(sys::NFTNL_EXPR_BITWISE_SREG, sreg)
        .u32(sys::NFTNL_EXPR_BITWISE_DREG, dreg)
        .u32(sys::NFTNL_EXPR_BITWISE_LEN, mask.len() as u32)
        .data(sys::NFTNL_EXPR_BITWISE_MASK, mask)
        .data(sys::NFTNL_EXPR_BITWISE_XOR, xor)
}

/// `lookup reg <sreg> set <name> [id <set_id>] [dreg <dreg>] [inverted]`.
pub fn lookup(
    sreg: u32,
    dreg: Option<u32>,
    set: &str,
    set_id: Option<u32>,
    invert: bool,
) -> RawExpr {
    let mut e = RawExpr::new(c"lookup")
        .u32(sys::NFTNL_EXPR_LOOKUP_SREG, sreg)
        .str(sys::NFTNL_EXPR_LOOKUP_SET, set);
    if let Some(id) = set_id {
        e = e.u32(sys::NFTNL_EXPR_LOOKUP_SET_ID, id);
    }
    if let Some(d) = dreg {
        e = e.u32(sys::NFTNL_EXPR_LOOKUP_DREG, d);
    }
    if invert {
        e = e.u32(sys::NFTNL_EXPR_LOOKUP_FLAGS, 1);
    }
    e
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
pub fn verdict(code: i32, chain: Option<&str>) -> RawExpr {
    let mut e = RawExpr::new(c"immediate")
        .u32(sys::NFTNL_EXPR_IMM_DREG, REG_VERDICT)
        .u32(sys::NFTNL_EXPR_IMM_VERDICT, code as u32);
    if let Some(c) = chain {
        e = e.str(sys::NFTNL_EXPR_IMM_CHAIN, c);
    }
    e
}

/// `counter` (starting at zero).
pub fn counter() -> RawExpr {
    RawExpr::new(c"counter")
        .u64(sys::NFTNL_EXPR_CTR_PACKETS, 0)
        .u64(sys::NFTNL_EXPR_CTR_BYTES, 0)
}

/// `limit rate [over] <rate>/<unit_seconds> burst <burst> packets`.
pub fn limit(rate: u64, unit_seconds: u64, burst: u32, over: bool) -> RawExpr {
    RawExpr::new(c"limit")
        .u64(sys::NFTNL_EXPR_LIMIT_RATE, rate)
        .u64(sys::NFTNL_EXPR_LIMIT_UNIT, unit_seconds)
        .u32(sys::NFTNL_EXPR_LIMIT_BURST, burst)
        .u32(sys::NFTNL_EXPR_LIMIT_TYPE, 0)
        .u32(sys::NFTNL_EXPR_LIMIT_FLAGS, u32::from(over))
}

/// `log prefix "<prefix>"` to the kernel log (level warn).
pub fn log(prefix: &str) -> RawExpr {
    RawExpr::new(c"log").str(sys::NFTNL_EXPR_LOG_PREFIX, prefix)
}

/// `reject type <type> code <code>` (type 1 = tcp reset needs no code; 2 = icmpx).
pub fn reject(kind: u32, code: Option<u8>) -> RawExpr {
    let mut e = RawExpr::new(c"reject").u32(sys::NFTNL_EXPR_REJECT_TYPE, kind);
    if let Some(c) = code {
        e = e.u8(sys::NFTNL_EXPR_REJECT_CODE, c);
    }
    e
}

/// `masq`.
pub fn masquerade() -> RawExpr {
    RawExpr::new(c"masq")
}

/// `nat <snat|dnat> <family> addr_min reg <a> [proto_min reg <p>]` (type 0 = snat, 1 = dnat;
/// family 2 = ipv4, 10 = ipv6). The kernel derives the range flags from the registers given.
pub fn nat(kind: u32, family: u32, addr_reg: u32, proto_reg: Option<u32>) -> RawExpr {
    let mut e = RawExpr::new(c"nat")
        .u32(sys::NFTNL_EXPR_NAT_TYPE, kind)
        .u32(sys::NFTNL_EXPR_NAT_FAMILY, family)
        .u32(sys::NFTNL_EXPR_NAT_REG_ADDR_MIN, addr_reg);
    if let Some(p) = proto_reg {
        e = e.u32(sys::NFTNL_EXPR_NAT_REG_PROTO_MIN, p);
    }
    e
}

/// `immediate reg <dreg> <data>`.
pub fn immediate(dreg: u32, data: &[u8]) -> RawExpr {
    RawExpr::new(c"immediate")
        .u32(sys::NFTNL_EXPR_IMM_DREG, dreg)
        .data(sys::NFTNL_EXPR_IMM_DATA, data)
}
