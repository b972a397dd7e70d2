//! Typed libnftnl attributes: each constant names its object (or expression) kind and the
//! shape of its value, so a setter can only be given bytes of the size and form libnftnl
//! reads for that attribute (a string where it `strdup`s, 4 bytes where it copies a u32).
//! Only this module can make an [`Attr`]; that is what makes the setters safe.

use std::marker::PhantomData;

use nftnl::nftnl_sys as sys;

/// Value shapes.
pub(crate) mod shape {
    /// One byte.
    pub(crate) enum U8 {}
    /// A native-endian u16.
    pub(crate) enum U16 {}
    /// A native-endian u32.
    pub(crate) enum U32 {}
    /// A native-endian i32.
    pub(crate) enum I32 {}
    /// A native-endian u64.
    pub(crate) enum U64 {}
    /// A NUL-terminated string (a name, a comment, a prefix).
    pub(crate) enum Str {}
    /// An nft data value: at most [`super::DATA_MAX`] bytes (libnftnl copies it into a
    /// fixed buffer of that size).
    pub(crate) enum Data {}
    /// User data of any length (copied into a heap buffer).
    pub(crate) enum Blob {}
}

/// `NFT_DATA_VALUE_MAXLEN`: the largest key, data or constant the kernel takes.
pub(crate) const DATA_MAX: usize = 64;

/// An attribute of kind `K` whose value has shape `V`.
pub(crate) struct Attr<K, V> {
    /// libnftnl's attribute number.
    pub(super) code: u16,
    /// What the attribute is, for error messages (e.g. `chain name`).
    pub(super) what: &'static str,
    /// The kind and shape (types only).
    _kind: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for Attr<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for Attr<K, V> {}

impl<K, V> Attr<K, V> {
    const fn new(code: u32, what: &'static str) -> Self {
        Attr {
            code: code as u16,
            what,
            _kind: PhantomData,
        }
    }
}

macro_rules! attrs {
    ($kind:ty { $($name:ident: $shape:ident = $code:ident, $what:expr;)* }) => {
        $(
            #[doc = concat!("`", stringify!($code), "`.")]
            pub(crate) const $name: Attr<$kind, shape::$shape> = Attr::new(sys::$code, $what);
        )*
    };
}

/// Table attributes.
pub(crate) mod table {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Table {
        NAME: Str = NFTNL_TABLE_NAME, "table name";
        FAMILY: U32 = NFTNL_TABLE_FAMILY, "table family";
        FLAGS: U32 = NFTNL_TABLE_FLAGS, "table flags";
        USERDATA: Blob = NFTNL_TABLE_USERDATA, "table user data";
    });
}

/// Chain attributes.
pub(crate) mod chain {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Chain {
        TABLE: Str = NFTNL_CHAIN_TABLE, "table name";
        NAME: Str = NFTNL_CHAIN_NAME, "chain name";
        FAMILY: U32 = NFTNL_CHAIN_FAMILY, "chain family";
        HOOKNUM: U32 = NFTNL_CHAIN_HOOKNUM, "chain hook";
        PRIO: I32 = NFTNL_CHAIN_PRIO, "chain priority";
        TYPE: Str = NFTNL_CHAIN_TYPE, "chain type";
        POLICY: U32 = NFTNL_CHAIN_POLICY, "chain policy";
        HANDLE: U64 = NFTNL_CHAIN_HANDLE, "chain handle";
    });
}

/// Rule attributes.
pub(crate) mod rule {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Rule {
        FAMILY: U32 = NFTNL_RULE_FAMILY, "rule family";
        TABLE: Str = NFTNL_RULE_TABLE, "table name";
        CHAIN: Str = NFTNL_RULE_CHAIN, "chain name";
        HANDLE: U64 = NFTNL_RULE_HANDLE, "rule handle";
        USERDATA: Blob = NFTNL_RULE_USERDATA, "rule user data";
    });
}

/// Set attributes.
pub(crate) mod set {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Set {
        TABLE: Str = NFTNL_SET_TABLE, "table name";
        NAME: Str = NFTNL_SET_NAME, "set name";
        FAMILY: U32 = NFTNL_SET_FAMILY, "set family";
        ID: U32 = NFTNL_SET_ID, "set id";
        FLAGS: U32 = NFTNL_SET_FLAGS, "set flags";
        KEY_TYPE: U32 = NFTNL_SET_KEY_TYPE, "set key type";
        KEY_LEN: U32 = NFTNL_SET_KEY_LEN, "set key length";
        DATA_TYPE: U32 = NFTNL_SET_DATA_TYPE, "map data type";
        DATA_LEN: U32 = NFTNL_SET_DATA_LEN, "map data length";
        DESC_SIZE: U32 = NFTNL_SET_DESC_SIZE, "set size";
        TIMEOUT: U64 = NFTNL_SET_TIMEOUT, "set default element timeout";
        USERDATA: Blob = NFTNL_SET_USERDATA, "set user data";
        DESC_CONCAT: Blob = NFTNL_SET_DESC_CONCAT, "set field lengths";
        HANDLE: U64 = NFTNL_SET_HANDLE, "set handle";
    });
}

/// Stateful object attributes (`ct helper` and `limit` objects).
pub(crate) mod object {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Object {
        TABLE: Str = NFTNL_OBJ_TABLE, "table name";
        NAME: Str = NFTNL_OBJ_NAME, "object name";
        TYPE: U32 = NFTNL_OBJ_TYPE, "object type";
        FAMILY: U32 = NFTNL_OBJ_FAMILY, "object family";
        CT_HELPER_NAME: Str = NFTNL_OBJ_CT_HELPER_NAME, "ct helper type";
        CT_HELPER_L4PROTO: U8 = NFTNL_OBJ_CT_HELPER_L4PROTO, "ct helper protocol";
        LIMIT_RATE: U64 = NFTNL_OBJ_LIMIT_RATE, "limit rate";
        LIMIT_UNIT: U64 = NFTNL_OBJ_LIMIT_UNIT, "limit unit";
        LIMIT_BURST: U32 = NFTNL_OBJ_LIMIT_BURST, "limit burst";
        LIMIT_TYPE: U32 = NFTNL_OBJ_LIMIT_TYPE, "limit type";
    });
}

/// Flowtable attributes.
pub(crate) mod flowtable {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Flowtable {
        TABLE: Str = NFTNL_FLOWTABLE_TABLE, "table name";
        NAME: Str = NFTNL_FLOWTABLE_NAME, "flowtable name";
        FAMILY: U32 = NFTNL_FLOWTABLE_FAMILY, "flowtable family";
        HOOKNUM: U32 = NFTNL_FLOWTABLE_HOOKNUM, "flowtable hook";
        PRIO: I32 = NFTNL_FLOWTABLE_PRIO, "flowtable priority";
        FLAGS: U32 = NFTNL_FLOWTABLE_FLAGS, "flowtable flags";
    });
}

/// Set element attributes.
pub(crate) mod elem {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::Elem {
        KEY: Data = NFTNL_SET_ELEM_KEY, "element key";
        KEY_END: Data = NFTNL_SET_ELEM_KEY_END, "element key end";
        FLAGS: U32 = NFTNL_SET_ELEM_FLAGS, "element flags";
        DATA: Data = NFTNL_SET_ELEM_DATA, "element data";
        VERDICT: U32 = NFTNL_SET_ELEM_VERDICT, "element verdict";
        CHAIN: Str = NFTNL_SET_ELEM_CHAIN, "verdict chain";
        TIMEOUT: U64 = NFTNL_SET_ELEM_TIMEOUT, "element timeout";
        EXPIRATION: U64 = NFTNL_SET_ELEM_EXPIRATION, "element expiration";
    });
}

/// Attributes every expression has.
pub(crate) mod any_expr {
    use super::*;
    attrs!(crate::dataplane::nft::ffi::kind::AnyExpr {
        NAME: Str = NFTNL_EXPR_NAME, "expression name";
        // Meaningful only on an expression named `counter` (the codes are per kind).
        CTR_PACKETS: U64 = NFTNL_EXPR_CTR_PACKETS, "counter packets";
        CTR_BYTES: U64 = NFTNL_EXPR_CTR_BYTES, "counter bytes";
    });
}

/// One module of attributes per expression kind (the kind's marker type is in
/// `object::kind`).
macro_rules! expr_attrs {
    ($($module:ident: $kind:ident { $($name:ident: $shape:ident = $code:ident;)* })*) => {
        $(
            #[doc = concat!("`", stringify!($module), "` expression attributes.")]
            pub(crate) mod $module {
                use super::*;
                attrs!(crate::dataplane::nft::ffi::kind::$kind {
                    $($name: $shape = $code, concat!(stringify!($module), " ", stringify!($name));)*
                });
            }
        )*
    };
}

/// Expression attributes, one module per expression kind.
pub(crate) mod expr {
    use super::*;

    expr_attrs! {
        meta: Meta {
            KEY: U32 = NFTNL_EXPR_META_KEY;
            DREG: U32 = NFTNL_EXPR_META_DREG;
            SREG: U32 = NFTNL_EXPR_META_SREG;
        }
        payload: Payload {
            BASE: U32 = NFTNL_EXPR_PAYLOAD_BASE;
            OFFSET: U32 = NFTNL_EXPR_PAYLOAD_OFFSET;
            LEN: U32 = NFTNL_EXPR_PAYLOAD_LEN;
            DREG: U32 = NFTNL_EXPR_PAYLOAD_DREG;
            SREG: U32 = NFTNL_EXPR_PAYLOAD_SREG;
            CSUM_TYPE: U32 = NFTNL_EXPR_PAYLOAD_CSUM_TYPE;
            CSUM_OFFSET: U32 = NFTNL_EXPR_PAYLOAD_CSUM_OFFSET;
        }
        ct: Ct {
            KEY: U32 = NFTNL_EXPR_CT_KEY;
            DREG: U32 = NFTNL_EXPR_CT_DREG;
            DIR: U8 = NFTNL_EXPR_CT_DIR;
            SREG: U32 = NFTNL_EXPR_CT_SREG;
        }
        dynset: Dynset {
            SREG_KEY: U32 = NFTNL_EXPR_DYNSET_SREG_KEY;
            SREG_DATA: U32 = NFTNL_EXPR_DYNSET_SREG_DATA;
            OP: U32 = NFTNL_EXPR_DYNSET_OP;
            TIMEOUT: U64 = NFTNL_EXPR_DYNSET_TIMEOUT;
            SET_NAME: Str = NFTNL_EXPR_DYNSET_SET_NAME;
        }
        rt: Rt { KEY: U32 = NFTNL_EXPR_RT_KEY; DREG: U32 = NFTNL_EXPR_RT_DREG; }
        byteorder: Byteorder {
            SREG: U32 = NFTNL_EXPR_BYTEORDER_SREG;
            DREG: U32 = NFTNL_EXPR_BYTEORDER_DREG;
            OP: U32 = NFTNL_EXPR_BYTEORDER_OP;
            LEN: U32 = NFTNL_EXPR_BYTEORDER_LEN;
            SIZE: U32 = NFTNL_EXPR_BYTEORDER_SIZE;
        }
        exthdr: Exthdr {
            SREG: U32 = NFTNL_EXPR_EXTHDR_SREG;
            TYPE: U8 = NFTNL_EXPR_EXTHDR_TYPE;
            OFFSET: U32 = NFTNL_EXPR_EXTHDR_OFFSET;
            LEN: U32 = NFTNL_EXPR_EXTHDR_LEN;
            OP: U32 = NFTNL_EXPR_EXTHDR_OP;
        }
        fib: Fib {
            FLAGS: U32 = NFTNL_EXPR_FIB_FLAGS;
            RESULT: U32 = NFTNL_EXPR_FIB_RESULT;
            DREG: U32 = NFTNL_EXPR_FIB_DREG;
        }
        numgen: Numgen {
            DREG: U32 = NFTNL_EXPR_NG_DREG;
            MODULUS: U32 = NFTNL_EXPR_NG_MODULUS;
            TYPE: U32 = NFTNL_EXPR_NG_TYPE;
            OFFSET: U32 = NFTNL_EXPR_NG_OFFSET;
        }
        hash: Hash {
            SREG: U32 = NFTNL_EXPR_HASH_SREG;
            DREG: U32 = NFTNL_EXPR_HASH_DREG;
            LEN: U32 = NFTNL_EXPR_HASH_LEN;
            MODULUS: U32 = NFTNL_EXPR_HASH_MODULUS;
            SEED: U32 = NFTNL_EXPR_HASH_SEED;
            OFFSET: U32 = NFTNL_EXPR_HASH_OFFSET;
            TYPE: U32 = NFTNL_EXPR_HASH_TYPE;
        }
        cmp: Cmp {
            SREG: U32 = NFTNL_EXPR_CMP_SREG;
            OP: U32 = NFTNL_EXPR_CMP_OP;
            DATA: Data = NFTNL_EXPR_CMP_DATA;
        }
        range: Range {
            SREG: U32 = NFTNL_EXPR_RANGE_SREG;
            OP: U32 = NFTNL_EXPR_RANGE_OP;
            FROM: Data = NFTNL_EXPR_RANGE_FROM_DATA;
            TO: Data = NFTNL_EXPR_RANGE_TO_DATA;
        }
        bitwise: Bitwise {
            SREG: U32 = NFTNL_EXPR_BITWISE_SREG;
            DREG: U32 = NFTNL_EXPR_BITWISE_DREG;
            LEN: U32 = NFTNL_EXPR_BITWISE_LEN;
            MASK: Data = NFTNL_EXPR_BITWISE_MASK;
            XOR: Data = NFTNL_EXPR_BITWISE_XOR;
        }
        lookup: Lookup {
            SREG: U32 = NFTNL_EXPR_LOOKUP_SREG;
            SET: Str = NFTNL_EXPR_LOOKUP_SET;
            SET_ID: U32 = NFTNL_EXPR_LOOKUP_SET_ID;
            DREG: U32 = NFTNL_EXPR_LOOKUP_DREG;
            FLAGS: U32 = NFTNL_EXPR_LOOKUP_FLAGS;
        }
        immediate: Immediate {
            DREG: U32 = NFTNL_EXPR_IMM_DREG;
            VERDICT: U32 = NFTNL_EXPR_IMM_VERDICT;
            CHAIN: Str = NFTNL_EXPR_IMM_CHAIN;
            DATA: Data = NFTNL_EXPR_IMM_DATA;
        }
        counter: Counter { PACKETS: U64 = NFTNL_EXPR_CTR_PACKETS; BYTES: U64 = NFTNL_EXPR_CTR_BYTES; }
        limit: Limit {
            RATE: U64 = NFTNL_EXPR_LIMIT_RATE;
            UNIT: U64 = NFTNL_EXPR_LIMIT_UNIT;
            BURST: U32 = NFTNL_EXPR_LIMIT_BURST;
            TYPE: U32 = NFTNL_EXPR_LIMIT_TYPE;
            FLAGS: U32 = NFTNL_EXPR_LIMIT_FLAGS;
        }
        log: Log { PREFIX: Str = NFTNL_EXPR_LOG_PREFIX; GROUP: U16 = NFTNL_EXPR_LOG_GROUP; }
        objref: Objref {
            IMM_TYPE: U32 = NFTNL_EXPR_OBJREF_IMM_TYPE;
            IMM_NAME: Str = NFTNL_EXPR_OBJREF_IMM_NAME;
        }
        flow_offload: FlowOffload { TABLE_NAME: Str = NFTNL_EXPR_FLOW_TABLE_NAME; }
        reject: Reject { TYPE: U32 = NFTNL_EXPR_REJECT_TYPE; CODE: U8 = NFTNL_EXPR_REJECT_CODE; }
        redir: Redir { REG_PROTO_MIN: U32 = NFTNL_EXPR_REDIR_REG_PROTO_MIN; }
        nat: Nat {
            TYPE: U32 = NFTNL_EXPR_NAT_TYPE;
            FAMILY: U32 = NFTNL_EXPR_NAT_FAMILY;
            REG_ADDR_MIN: U32 = NFTNL_EXPR_NAT_REG_ADDR_MIN;
            REG_PROTO_MIN: U32 = NFTNL_EXPR_NAT_REG_PROTO_MIN;
        }
    }
}
