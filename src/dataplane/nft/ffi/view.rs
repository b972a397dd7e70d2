//! Borrowed views of libnftnl objects: [`Ref`] reads typed attributes; [`ExprIter`] and
//! [`ElemIter`] walk a rule's expressions and a set's elements (which their parent owns).

use std::ffi::CStr;
use std::marker::PhantomData;
use std::ptr::NonNull;

use nftnl::nftnl_sys as sys;

use super::attr::{Attr, shape};
use super::object::{ExprKind, Kind, kind, nonnull};

/// A borrowed libnftnl object of kind `K` (owned by an [`Obj`] or by a parent object).
pub(crate) struct Ref<'a, K: Kind> {
    /// The object, borrowed.
    raw: NonNull<K::Raw>,
    /// Ties the view to its owner's borrow.
    _owner: PhantomData<&'a K::Raw>,
}

impl<K: Kind> Clone for Ref<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Kind> Copy for Ref<'_, K> {}

impl<'a, K: Kind> Ref<'a, K> {
    /// A view of `raw`, which must stay alive and unchanged for 'a (its owner is borrowed).
    pub(super) fn new(raw: NonNull<K::Raw>) -> Ref<'a, K> {
        Ref {
            raw,
            _owner: PhantomData,
        }
    }

    fn raw_attr(&self, code: u16) -> Option<&'a [u8]> {
        let mut len = 0u32;
        // SAFETY: the object outlives 'a and cannot change meanwhile (its owner is borrowed).
        let p = unsafe { K::get(self.raw.as_ptr(), code, &mut len) };
        if p.is_null() {
            return None;
        }
        // SAFETY: libnftnl returned `len` readable bytes it owns, valid as long as the object
        // is unchanged, i.e. for 'a.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len as usize) })
    }

    /// A u8 attribute (`None` when unset).
    pub(crate) fn u8(&self, a: Attr<K, shape::U8>) -> Option<u8> {
        match self.raw_attr(a.code)? {
            [b] => Some(*b),
            _ => None,
        }
    }

    /// A u16 attribute (`None` when unset).
    pub(crate) fn u16(&self, a: Attr<K, shape::U16>) -> Option<u16> {
        self.raw_attr(a.code)?
            .try_into()
            .ok()
            .map(u16::from_ne_bytes)
    }

    /// A u32 attribute (`None` when unset).
    pub(crate) fn u32(&self, a: Attr<K, shape::U32>) -> Option<u32> {
        self.raw_attr(a.code)?
            .try_into()
            .ok()
            .map(u32::from_ne_bytes)
    }

    /// An i32 attribute.
    pub(crate) fn i32(&self, a: Attr<K, shape::I32>) -> Option<i32> {
        self.raw_attr(a.code)?
            .try_into()
            .ok()
            .map(i32::from_ne_bytes)
    }

    /// A u64 attribute.
    pub(crate) fn u64(&self, a: Attr<K, shape::U64>) -> Option<u64> {
        self.raw_attr(a.code)?
            .try_into()
            .ok()
            .map(u64::from_ne_bytes)
    }

    /// A string attribute.
    pub(crate) fn str(&self, a: Attr<K, shape::Str>) -> Option<&'a CStr> {
        CStr::from_bytes_until_nul(self.raw_attr(a.code)?).ok()
    }

    /// A data attribute.
    pub(crate) fn data(&self, a: Attr<K, shape::Data>) -> Option<&'a [u8]> {
        self.raw_attr(a.code)
    }

    /// A user data attribute.
    pub(crate) fn blob(&self, a: Attr<K, shape::Blob>) -> Option<&'a [u8]> {
        self.raw_attr(a.code)
    }
}

impl<'a> Ref<'a, kind::Rule> {
    /// The rule's expressions in order.
    pub(crate) fn exprs(&self) -> ExprIter<'a> {
        // SAFETY: a live rule borrowed for 'a; NULL (OOM) aborts.
        let it = nonnull(unsafe { sys::nftnl_expr_iter_create(self.raw.as_ptr()) });
        ExprIter {
            it,
            _rule: PhantomData,
        }
    }
}

impl<'a> Ref<'a, kind::Set> {
    /// The set's elements in order.
    pub(crate) fn elems(&self) -> ElemIter<'a> {
        // SAFETY: a live set borrowed for 'a; NULL (OOM) aborts.
        let it = nonnull(unsafe { sys::nftnl_set_elems_iter_create(self.raw.as_ptr()) });
        ElemIter {
            it,
            _set: PhantomData,
        }
    }
}

impl<'a> Ref<'a, kind::AnyExpr> {
    /// The same expression read as kind `K`: libnftnl's getter dispatches on the
    /// expression's own type, so the caller checks [`any_expr::NAME`] first (an attribute
    /// code of another kind reads whatever that kind keeps under it).
    ///
    /// [`any_expr::NAME`]: super::attr::any_expr::NAME
    pub(crate) fn as_kind<K: ExprKind>(&self) -> Ref<'a, K> {
        Ref::new(self.raw)
    }

    /// libnftnl's debug text of the expression, written into `buf` (cut at its length).
    pub(crate) fn debug_text<'b>(&self, buf: &'b mut [u8]) -> Option<&'b CStr> {
        if buf.is_empty() {
            return None;
        }
        // SAFETY: snprintf writes at most `buf.len()` bytes, NUL included; a live expression.
        let n = unsafe {
            sys::nftnl_expr_snprintf(buf.as_mut_ptr().cast(), buf.len(), self.raw.as_ptr(), 0, 0)
        };
        if n < 0 {
            return None;
        }
        CStr::from_bytes_until_nul(buf).ok()
    }
}

/// The expressions of a rule.
pub(crate) struct ExprIter<'a> {
    /// libnftnl's iterator, owned.
    it: NonNull<sys::nftnl_expr_iter>,
    /// Ties the iterator to the rule's borrow.
    _rule: PhantomData<&'a sys::nftnl_rule>,
}

impl<'a> Iterator for ExprIter<'a> {
    type Item = Ref<'a, kind::AnyExpr>;
    fn next(&mut self) -> Option<Self::Item> {
        // SAFETY: a live iterator over a rule borrowed for 'a.
        let e = unsafe { sys::nftnl_expr_iter_next(self.it.as_ptr()) };
        NonNull::new(e).map(|raw| Ref {
            raw,
            _owner: PhantomData,
        })
    }
}

impl Drop for ExprIter<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the iterator (not the expressions).
        unsafe { sys::nftnl_expr_iter_destroy(self.it.as_ptr()) };
    }
}

/// The elements of a set.
pub(crate) struct ElemIter<'a> {
    /// libnftnl's iterator, owned.
    it: NonNull<sys::nftnl_set_elems_iter>,
    /// Ties the iterator to the set's borrow.
    _set: PhantomData<&'a sys::nftnl_set>,
}

impl<'a> Iterator for ElemIter<'a> {
    type Item = Ref<'a, kind::Elem>;
    fn next(&mut self) -> Option<Self::Item> {
        // SAFETY: a live iterator over a set borrowed for 'a.
        let e = unsafe { sys::nftnl_set_elems_iter_next(self.it.as_ptr()) };
        NonNull::new(e).map(|raw| Ref {
            raw,
            _owner: PhantomData,
        })
    }
}

impl Drop for ElemIter<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the iterator (not the elements).
        unsafe { sys::nftnl_set_elems_iter_destroy(self.it.as_ptr()) };
    }
}
