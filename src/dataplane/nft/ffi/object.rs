//! RAII wrappers of libnftnl objects: one owner type [`Obj`] for tables, chains, rules, sets,
//! set elements and expressions (its `Drop` calls the matching `_free`); [`Obj::view`] lends
//! a [`Ref`] for reading. Handing an expression to a rule or an element to a set consumes
//! the wrapper, so each object is freed exactly once, by whoever owns it last.

use std::ffi::{CStr, CString, c_int, c_void};
use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::super::error::CompileError;
use super::attr::{Attr, DATA_MAX, shape};
use super::msg::NlMsg;
use super::view::Ref;

/// Marker types naming what an [`Obj`] or [`Ref`] is.
pub(crate) mod kind {
    macro_rules! markers {
        ($($name:ident),*) => {
            $(
                #[doc = concat!("Marker: a libnftnl `", stringify!($name), "` object.")]
                pub(crate) enum $name {}
            )*
        };
    }
    markers!(
        Table,
        Chain,
        Rule,
        Set,
        Elem,
        AnyExpr,
        Meta,
        Payload,
        Ct,
        Fib,
        Numgen,
        Hash,
        Cmp,
        Range,
        Bitwise,
        Lookup,
        Immediate,
        Counter,
        Limit,
        Log,
        Reject,
        Masq,
        Redir,
        Notrack,
        Nat,
        Dynset,
        Rt,
        Byteorder,
        Exthdr,
        Object,
        Objref,
        Flowtable,
        FlowOffload
    );
}

mod sealed {
    pub trait Sealed {}
}

/// A libnftnl object type: how to read and write its attributes.
pub(crate) trait Kind: sealed::Sealed {
    /// The C type.
    type Raw;
    /// Sets attribute `attr` from `len` bytes at `data`; libnftnl copies them. Returns
    /// libnftnl's status (negative when it refused or ran out of memory).
    ///
    /// # Safety
    ///
    /// `obj` is a live object of this kind, and `data` points at `len` readable bytes shaped
    /// as libnftnl reads attribute `attr` of this kind (a NUL-terminated string for string
    /// attributes, exactly the integer's size for integer attributes, at most
    /// [`DATA_MAX`] bytes for data attributes).
    unsafe fn set(obj: *mut Self::Raw, attr: u16, data: *const c_void, len: u32) -> c_int;
    /// The bytes of attribute `attr` (NULL when unset); `len` receives their count. They
    /// belong to the object and stay valid until it is changed or freed.
    ///
    /// # Safety
    ///
    /// `obj` is a live object of this kind.
    unsafe fn get(obj: *const Self::Raw, attr: u16, len: &mut u32) -> *const c_void;
}

/// A kind whose objects this module allocates and frees.
pub(crate) trait Owned: Kind {
    /// Serialized size allowance of what libnftnl writes for an object of this kind beyond
    /// the attributes set on it (nests, names, list headers).
    const BASE: usize;
    /// A fresh, empty object (aborts when out of memory, like the rest of Rust).
    fn alloc() -> NonNull<Self::Raw>;
    /// Frees `obj`.
    ///
    /// # Safety
    ///
    /// `obj` came from [`Owned::alloc`] of this kind, is owned by the caller and is not used
    /// afterwards.
    unsafe fn free(obj: *mut Self::Raw);
}

/// An expression kind (can be added to a rule).
pub(crate) trait ExprKind: Owned<Raw = sys::nftnl_expr> {}

/// A kind that parses from a netlink message (a dump reply).
pub(crate) trait Parse: Owned {
    /// Fills `obj` from the message; negative on a malformed message.
    ///
    /// # Safety
    ///
    /// `nlh` points at a complete message of at least header plus `nfgenmsg` bytes, whose
    /// `nlmsg_len` bytes are readable; `obj` is a live object of this kind.
    unsafe fn parse(nlh: *const libc::nlmsghdr, obj: *mut Self::Raw) -> c_int;
}

/// A kind that serializes as the payload of its own message (NEWTABLE, DELRULE, ...).
pub(crate) trait Build: Owned {
    /// Appends the object's attributes to the message at `nlh`.
    ///
    /// # Safety
    ///
    /// `nlh` is a message header followed by at least the object's
    /// [`Obj::size`] writable bytes; `obj` is a live object of this kind.
    unsafe fn build(nlh: *mut libc::nlmsghdr, obj: *const Self::Raw);
}

pub(super) fn nonnull<T>(p: *mut T) -> NonNull<T> {
    NonNull::new(p).unwrap_or_else(|| std::process::abort())
}

macro_rules! object_kind {
    ($kind:ident: $raw:ty, $base:expr, $alloc:ident, $free:ident, $set:ident, $get:ident) => {
        impl sealed::Sealed for kind::$kind {}
        impl Kind for kind::$kind {
            type Raw = $raw;
            unsafe fn set(obj: *mut $raw, attr: u16, data: *const c_void, len: u32) -> c_int {
                // SAFETY: the caller upholds `Kind::set`'s contract.
                unsafe { sys::$set(obj, attr, data, len) as c_int }
            }
            unsafe fn get(obj: *const $raw, attr: u16, len: &mut u32) -> *const c_void {
                // SAFETY: the caller upholds `Kind::get`'s contract; the getter only reads.
                unsafe { sys::$get(obj as _, attr, len) }
            }
        }
        impl Owned for kind::$kind {
            const BASE: usize = $base;
            fn alloc() -> NonNull<$raw> {
                // SAFETY: allocation takes no input.
                nonnull(unsafe { sys::$alloc() })
            }
            unsafe fn free(obj: *mut $raw) {
                // SAFETY: the caller owns `obj` and gives it up.
                unsafe { sys::$free(obj as _) }
            }
        }
    };
}

object_kind!(Table: sys::nftnl_table, OBJ_BASE, nftnl_table_alloc, nftnl_table_free,
    nftnl_table_set_data, nftnl_table_get_data);
object_kind!(Chain: sys::nftnl_chain, OBJ_BASE, nftnl_chain_alloc, nftnl_chain_free,
    nftnl_chain_set_data, nftnl_chain_get_data);
object_kind!(Rule: sys::nftnl_rule, OBJ_BASE, nftnl_rule_alloc, nftnl_rule_free,
    nftnl_rule_set_data, nftnl_rule_get_data);
object_kind!(Set: sys::nftnl_set, OBJ_BASE, nftnl_set_alloc, nftnl_set_free,
    nftnl_set_set_data, nftnl_set_get_data);
object_kind!(Flowtable: sys::nftnl_flowtable, OBJ_BASE, nftnl_flowtable_alloc,
    nftnl_flowtable_free, nftnl_flowtable_set_data, nftnl_flowtable_get_data);
object_kind!(Elem: sys::nftnl_set_elem, ELEM_BASE, nftnl_set_elem_alloc, nftnl_set_elem_free,
    nftnl_set_elem_set, nftnl_set_elem_get);

// libnftnl's object setter returns nothing (it cannot fail short of memory, which aborts).
impl sealed::Sealed for kind::Object {}
impl Kind for kind::Object {
    type Raw = sys::nftnl_obj;
    unsafe fn set(obj: *mut sys::nftnl_obj, attr: u16, data: *const c_void, len: u32) -> c_int {
        // SAFETY: the caller upholds `Kind::set`'s contract.
        unsafe { sys::nftnl_obj_set_data(obj, attr, data, len) };
        0
    }
    unsafe fn get(obj: *const sys::nftnl_obj, attr: u16, len: &mut u32) -> *const c_void {
        // SAFETY: the caller upholds `Kind::get`'s contract; the getter only reads.
        unsafe { sys::nftnl_obj_get_data(obj as _, attr, len) }
    }
}
impl Owned for kind::Object {
    const BASE: usize = OBJ_BASE;
    fn alloc() -> NonNull<sys::nftnl_obj> {
        // SAFETY: allocation takes no input.
        nonnull(unsafe { sys::nftnl_obj_alloc() })
    }
    unsafe fn free(obj: *mut sys::nftnl_obj) {
        // SAFETY: the caller owns `obj` and gives it up.
        unsafe { sys::nftnl_obj_free(obj as _) }
    }
}

macro_rules! parse_build {
    ($kind:ident: $raw:ty, $parse:ident, $build:ident) => {
        impl Parse for kind::$kind {
            unsafe fn parse(nlh: *const libc::nlmsghdr, obj: *mut $raw) -> c_int {
                // SAFETY: the caller upholds `Parse::parse`'s contract.
                unsafe { sys::$parse(nlh, obj) }
            }
        }
        impl Build for kind::$kind {
            unsafe fn build(nlh: *mut libc::nlmsghdr, obj: *const $raw) {
                // SAFETY: the caller upholds `Build::build`'s contract.
                unsafe { sys::$build(nlh, obj as _) }
            }
        }
    };
}

parse_build!(Table: sys::nftnl_table, nftnl_table_nlmsg_parse, nftnl_table_nlmsg_build_payload);
parse_build!(Chain: sys::nftnl_chain, nftnl_chain_nlmsg_parse, nftnl_chain_nlmsg_build_payload);
parse_build!(Rule: sys::nftnl_rule, nftnl_rule_nlmsg_parse, nftnl_rule_nlmsg_build_payload);
parse_build!(Set: sys::nftnl_set, nftnl_set_nlmsg_parse, nftnl_set_nlmsg_build_payload);
parse_build!(Object: sys::nftnl_obj, nftnl_obj_nlmsg_parse, nftnl_obj_nlmsg_build_payload);
parse_build!(Flowtable: sys::nftnl_flowtable, nftnl_flowtable_nlmsg_parse,
    nftnl_flowtable_nlmsg_build_payload);

impl sealed::Sealed for kind::AnyExpr {}
impl Kind for kind::AnyExpr {
    type Raw = sys::nftnl_expr;
    unsafe fn set(obj: *mut sys::nftnl_expr, attr: u16, data: *const c_void, len: u32) -> c_int {
        // SAFETY: the caller upholds `Kind::set`'s contract.
        unsafe { sys::nftnl_expr_set(obj, attr, data, len) }
    }
    unsafe fn get(obj: *const sys::nftnl_expr, attr: u16, len: &mut u32) -> *const c_void {
        // SAFETY: the caller upholds `Kind::get`'s contract.
        unsafe { sys::nftnl_expr_get(obj, attr, len) }
    }
}

macro_rules! expr_kind {
    ($($kind:ident = $name:literal),* $(,)?) => {$(
        impl sealed::Sealed for kind::$kind {}
        impl Kind for kind::$kind {
            type Raw = sys::nftnl_expr;
            unsafe fn set(obj: *mut sys::nftnl_expr, attr: u16, data: *const c_void, len: u32)
                -> c_int {
                // SAFETY: forwarded; every expression kind shares libnftnl's setter, which
                // dispatches on the expression's own type.
                unsafe { <kind::AnyExpr as Kind>::set(obj, attr, data, len) }
            }
            unsafe fn get(obj: *const sys::nftnl_expr, attr: u16, len: &mut u32)
                -> *const c_void {
                // SAFETY: forwarded, as above.
                unsafe { <kind::AnyExpr as Kind>::get(obj, attr, len) }
            }
        }
        impl Owned for kind::$kind {
            const BASE: usize = EXPR_BASE;
            fn alloc() -> NonNull<sys::nftnl_expr> {
                // SAFETY: a NUL-terminated name of an expression libnftnl knows.
                nonnull(unsafe { sys::nftnl_expr_alloc($name.as_ptr()) })
            }
            unsafe fn free(obj: *mut sys::nftnl_expr) {
                // SAFETY: the caller owns `obj` and gives it up.
                unsafe { sys::nftnl_expr_free(obj) }
            }
        }
        impl ExprKind for kind::$kind {}
    )*};
}

expr_kind!(
    Meta = c"meta",
    Payload = c"payload",
    Ct = c"ct",
    Fib = c"fib",
    Numgen = c"numgen",
    Hash = c"hash",
    Cmp = c"cmp",
    Range = c"range",
    Bitwise = c"bitwise",
    Lookup = c"lookup",
    Immediate = c"immediate",
    Counter = c"counter",
    Limit = c"limit",
    Log = c"log",
    Reject = c"reject",
    Masq = c"masq",
    Redir = c"redir",
    Notrack = c"notrack",
    Nat = c"nat",
    Dynset = c"dynset",
    Rt = c"rt",
    Byteorder = c"byteorder",
    Exthdr = c"exthdr",
    Objref = c"objref",
    FlowOffload = c"flow_offload",
);

// Serialized size allowances (netlink attribute headers are 4 bytes, values padded to 4).
/// A table, chain, rule or set: the nests libnftnl adds around hooks, expressions, elements.
const OBJ_BASE: usize = 64;
/// An expression: list element nest, name attribute (names are short), data nest.
const EXPR_BASE: usize = 32;
/// A set element: list element nest, and the data nest around a verdict.
const ELEM_BASE: usize = 8;
/// Per attribute: its header, up to two nest headers around it (data values, verdicts), a
/// NUL and padding.
const ATTR_OVERHEAD: usize = 16;

/// Runs `f` with `s` as a C string, borrowing a stack buffer for names of usual length (no
/// allocation on element and rule paths). A NUL inside `s` is an error, never dropped.
pub(crate) fn with_cstr<R>(
    what: &'static str,
    s: &str,
    f: impl FnOnce(&CStr) -> R,
) -> Result<R, CompileError> {
    let nul = || CompileError::NulInName {
        what,
        name: s.to_string(),
    };
    if s.as_bytes().contains(&0) {
        return Err(nul());
    }
    let mut buf = [0u8; 256];
    if s.len() < buf.len() {
        buf[..s.len()].copy_from_slice(s.as_bytes());
        let c = CStr::from_bytes_with_nul(&buf[..=s.len()]).map_err(|_| nul())?;
        Ok(f(c))
    } else {
        let c = CString::new(s).map_err(|_| nul())?;
        Ok(f(&c))
    }
}

/// An owned libnftnl object of kind `K`, freed on drop unless handed to a parent.
pub(crate) struct Obj<K: Owned> {
    /// The object, owned.
    raw: NonNull<K::Raw>,
    /// Upper bound of its serialized size in bytes (checked before it is written into a
    /// message, because libnftnl writes without bounds).
    size: usize,
}

impl<K: Owned> Drop for Obj<K> {
    fn drop(&mut self) {
        // SAFETY: we own the object (ownership transfers go through `into_raw`, which skips
        // this drop).
        unsafe { K::free(self.raw.as_ptr()) };
    }
}

impl<K: Owned> Default for Obj<K> {
    fn default() -> Self {
        Obj::new()
    }
}

impl<K: Owned> Obj<K> {
    /// A fresh, empty object.
    pub(crate) fn new() -> Obj<K> {
        Obj {
            raw: K::alloc(),
            size: K::BASE,
        }
    }

    /// Upper bound of the serialized size in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A borrowed view for reading attributes.
    pub(crate) fn view(&self) -> Ref<'_, K> {
        Ref::new(self.raw)
    }

    pub(super) fn as_ptr(&self) -> *mut K::Raw {
        self.raw.as_ptr()
    }

    /// Gives up ownership (to a parent object that frees it).
    fn into_raw(self) -> (NonNull<K::Raw>, usize) {
        let out = (self.raw, self.size);
        std::mem::forget(self);
        out
    }

    /// # Safety
    ///
    /// `bytes` is shaped as libnftnl reads attribute `code` of kind `K` (see [`Kind::set`]).
    unsafe fn set_raw(&mut self, code: u16, bytes: &[u8]) -> c_int {
        self.size += bytes.len() + ATTR_OVERHEAD;
        // SAFETY: a live object we own; the caller vouches for the shape of `bytes`.
        unsafe {
            K::set(
                self.raw.as_ptr(),
                code,
                bytes.as_ptr().cast(),
                bytes.len() as u32,
            )
        }
    }

    /// Sets a u8 attribute.
    pub(crate) fn set_u8(&mut self, a: Attr<K, shape::U8>, v: u8) -> &mut Self {
        // SAFETY: the attribute's shape is U8: libnftnl reads one byte.
        unsafe { self.set_raw(a.code, &[v]) };
        self
    }

    /// Sets a u16 attribute.
    pub(crate) fn set_u16(&mut self, a: Attr<K, shape::U16>, v: u16) -> &mut Self {
        // SAFETY: the attribute's shape is U16: libnftnl reads two bytes.
        unsafe { self.set_raw(a.code, &v.to_ne_bytes()) };
        self
    }

    /// Sets a u32 attribute.
    pub(crate) fn set_u32(&mut self, a: Attr<K, shape::U32>, v: u32) -> &mut Self {
        // SAFETY: the attribute's shape is U32: libnftnl reads four bytes.
        unsafe { self.set_raw(a.code, &v.to_ne_bytes()) };
        self
    }

    /// Sets an i32 attribute.
    pub(crate) fn set_i32(&mut self, a: Attr<K, shape::I32>, v: i32) -> &mut Self {
        // SAFETY: the attribute's shape is I32: libnftnl reads four bytes.
        unsafe { self.set_raw(a.code, &v.to_ne_bytes()) };
        self
    }

    /// Sets a u64 attribute.
    pub(crate) fn set_u64(&mut self, a: Attr<K, shape::U64>, v: u64) -> &mut Self {
        // SAFETY: the attribute's shape is U64: libnftnl reads eight bytes.
        unsafe { self.set_raw(a.code, &v.to_ne_bytes()) };
        self
    }

    /// Sets a string attribute; a NUL inside `s` is [`CompileError::NulInName`].
    pub(crate) fn set_str(
        &mut self,
        a: Attr<K, shape::Str>,
        s: &str,
    ) -> Result<&mut Self, CompileError> {
        // SAFETY: the attribute's shape is Str and the bytes are NUL-terminated.
        let rc = with_cstr(a.what, s, |c| unsafe {
            self.set_raw(a.code, c.to_bytes_with_nul())
        })?;
        refused(rc, a.what)?;
        Ok(self)
    }

    /// Sets a data attribute (a key, map data or constant of at most 64 bytes).
    pub(crate) fn set_data(
        &mut self,
        a: Attr<K, shape::Data>,
        d: &[u8],
    ) -> Result<&mut Self, CompileError> {
        if d.len() > DATA_MAX {
            return Err(CompileError::Invalid(format!(
                "{}: {} bytes, the kernel takes at most {DATA_MAX}",
                a.what,
                d.len()
            )));
        }
        // SAFETY: the attribute's shape is Data and `d` fits libnftnl's buffer.
        let rc = unsafe { self.set_raw(a.code, d) };
        refused(rc, a.what)?;
        Ok(self)
    }

    /// Sets a user data attribute (copied whole).
    pub(crate) fn set_blob(&mut self, a: Attr<K, shape::Blob>, d: &[u8]) -> &mut Self {
        // SAFETY: the attribute's shape is Blob: libnftnl copies `d.len()` bytes.
        unsafe { self.set_raw(a.code, d) };
        self
    }

    /// [`Obj::set_u32`] by value, for chained builders.
    pub(crate) fn with_u32(mut self, a: Attr<K, shape::U32>, v: u32) -> Self {
        self.set_u32(a, v);
        self
    }

    /// [`Obj::set_u64`] by value.
    pub(crate) fn with_u64(mut self, a: Attr<K, shape::U64>, v: u64) -> Self {
        self.set_u64(a, v);
        self
    }

    /// [`Obj::set_u8`] by value.
    pub(crate) fn with_u8(mut self, a: Attr<K, shape::U8>, v: u8) -> Self {
        self.set_u8(a, v);
        self
    }

    /// [`Obj::set_str`] by value.
    pub(crate) fn with_str(
        mut self,
        a: Attr<K, shape::Str>,
        s: &str,
    ) -> Result<Self, CompileError> {
        self.set_str(a, s)?;
        Ok(self)
    }

    /// [`Obj::set_data`] by value.
    pub(crate) fn with_data(
        mut self,
        a: Attr<K, shape::Data>,
        d: &[u8],
    ) -> Result<Self, CompileError> {
        self.set_data(a, d)?;
        Ok(self)
    }
}

fn refused(rc: c_int, what: &'static str) -> Result<(), CompileError> {
    if rc < 0 {
        Err(CompileError::Invalid(format!(
            "libnftnl refused the {what}"
        )))
    } else {
        Ok(())
    }
}

impl<K: Parse> Obj<K> {
    /// The object a dump reply message describes (`None` when it does not parse).
    pub(crate) fn parse(msg: NlMsg<'_>) -> Option<Obj<K>> {
        if !msg.has_nfgen() {
            return None;
        }
        let o = Obj::<K>::new();
        // SAFETY: `msg` is a complete, aligned message with its nfgenmsg; a live object.
        let rc = unsafe { K::parse(msg.as_ptr(), o.as_ptr()) };
        (rc >= 0).then_some(o)
    }
}

impl Obj<kind::Rule> {
    /// Appends `e` to the rule, which owns it from now on.
    pub(crate) fn add_expr<E: ExprKind>(&mut self, e: Obj<E>) {
        let (raw, size) = e.into_raw();
        self.size += size;
        // SAFETY: both live; the rule takes ownership of the expression (freed with it).
        unsafe { sys::nftnl_rule_add_expr(self.as_ptr(), raw.as_ptr()) };
    }
}

impl Obj<kind::Flowtable> {
    /// Sets the devices whose ingress the flowtable hooks (libnftnl copies the names). A name
    /// with a NUL inside is [`CompileError::NulInName`].
    pub(crate) fn set_devices(&mut self, devices: &[String]) -> Result<&mut Self, CompileError> {
        let names = devices
            .iter()
            .map(|d| {
                CString::new(d.as_str()).map_err(|_| CompileError::NulInName {
                    what: "flowtable device",
                    name: d.clone(),
                })
            })
            .collect::<Result<Vec<CString>, CompileError>>()?;
        // libnftnl reads a NULL-terminated array of C strings.
        let mut ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        self.size += names
            .iter()
            .map(|n| n.as_bytes_with_nul().len() + ATTR_OVERHEAD)
            .sum::<usize>();
        // SAFETY: a live flowtable we own; `ptrs` is NULL-terminated and every pointer is a
        // NUL-terminated string that outlives the call (libnftnl duplicates them).
        let rc = unsafe {
            sys::nftnl_flowtable_set_array(
                self.as_ptr(),
                sys::NFTNL_FLOWTABLE_DEVICES as u16,
                ptrs.as_mut_ptr(),
            )
        };
        refused(rc, "flowtable devices")?;
        Ok(self)
    }
}

impl Obj<kind::Set> {
    /// Adds `e` to the set, which owns it from now on.
    pub(crate) fn add_elem(&mut self, e: Obj<kind::Elem>) {
        let (raw, size) = e.into_raw();
        self.size += size;
        // SAFETY: both live; the set takes ownership of the element (freed with it).
        unsafe { sys::nftnl_set_elem_add(self.as_ptr(), raw.as_ptr()) };
    }

    /// True when the set's elements message still fits one message with `e` added.
    pub(crate) fn fits_elem(&self, e: &Obj<kind::Elem>) -> bool {
        super::msg::fits_size(self.size + e.size)
    }

    /// The set (with its elements) an element dump reply message describes.
    pub(crate) fn parse_elems(msg: NlMsg<'_>) -> Option<Obj<kind::Set>> {
        if !msg.has_nfgen() {
            return None;
        }
        let o = Obj::<kind::Set>::new();
        // SAFETY: `msg` is a complete, aligned message with its nfgenmsg; a live set.
        let rc = unsafe { sys::nftnl_set_elems_nlmsg_parse(msg.as_ptr(), o.as_ptr()) };
        (rc >= 0).then_some(o)
    }
}
