//! [`Udata`]: the user data buffer nft reads rule comments and set byte orders from.

use std::ffi::CStr;
use std::ptr::NonNull;

use nftnl::nftnl_sys as sys;

use super::super::error::CompileError;
use super::object::{nonnull, with_cstr};

/// The TLV type of a table's tag (see `dataplane::nft::table_tag`); nft's own table TLV (the
/// comment) is 0, and nft skips types it does not know.
pub(crate) const TABLE_TAG_TLV: u8 = 0xe7;

/// The longest tag (a TLV's length is one byte, and the value keeps its NUL).
pub(crate) const TABLE_TAG_MAX: usize = 200;

/// The table user data that stores `tag` (cut to [`TABLE_TAG_MAX`] bytes).
pub(crate) fn encode_table_tag(tag: &str) -> Result<Vec<u8>, CompileError> {
    let end = (0..=TABLE_TAG_MAX.min(tag.len()))
        .rev()
        .find(|i| tag.is_char_boundary(*i))
        .unwrap_or(0);
    let mut buf = Udata::new(TABLE_TAG_MAX as u32 + 8);
    with_cstr("table tag", &tag[..end], |c| buf.put_str(TABLE_TAG_TLV, c))?;
    Ok(buf.as_bytes().to_vec())
}

/// A user data buffer (TLVs nft reads: rule comments, set byte orders).
pub(crate) struct Udata(
    /// The buffer, owned.
    NonNull<sys::nftnl_udata_buf>,
);

impl Udata {
    /// An empty buffer of `capacity` bytes.
    pub(crate) fn new(capacity: u32) -> Udata {
        // SAFETY: allocation takes no pointer.
        Udata(nonnull(unsafe { sys::nftnl_udata_buf_alloc(capacity) }))
    }

    /// Appends a string TLV; false when it does not fit.
    pub(crate) fn put_str(&mut self, ty: u8, s: &CStr) -> bool {
        // SAFETY: a live buffer and a NUL-terminated string; the put checks the capacity.
        unsafe { sys::nftnl_udata_put_strz(self.0.as_ptr(), ty, s.as_ptr()) }
    }

    /// Appends a u32 TLV; false when it does not fit.
    pub(crate) fn put_u32(&mut self, ty: u8, v: u32) -> bool {
        // SAFETY: a live buffer; the put checks the capacity.
        unsafe { sys::nftnl_udata_put_u32(self.0.as_ptr(), ty, v) }
    }

    /// The TLVs written so far.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: data/len describe the written part of the live buffer we borrow.
        unsafe {
            let p = sys::nftnl_udata_buf_data(self.0.as_ptr());
            let len = sys::nftnl_udata_buf_len(self.0.as_ptr());
            std::slice::from_raw_parts(p.cast::<u8>(), len as usize)
        }
    }
}

impl Drop for Udata {
    fn drop(&mut self) {
        // SAFETY: we own the buffer.
        unsafe { sys::nftnl_udata_buf_free(self.0.as_ptr()) };
    }
}
