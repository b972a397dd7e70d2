//! Netlink messages: a checked view of received ones ([`NlMsg`]), and payloads ([`Payload`])
//! written into requests ([`Request`]) and batches (`batch_buf.rs`).

use std::marker::PhantomData;
use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::super::error::CompileError;
use super::object::{Build, Obj, kind, nonnull};

const HDR_LEN: usize = std::mem::size_of::<libc::nlmsghdr>();
/// Header plus `struct nfgenmsg`: what `nftnl_nlmsg_build_hdr` writes and parsers read.
const NFGEN_HDR_LEN: usize = HDR_LEN + 4;
/// Largest message written: nested attribute lengths are u16, so nothing larger is valid,
/// and both the batch pages and request buffers have at least this much room per message.
pub(super) const MSG_MAX: usize = u16::MAX as usize;

/// One complete netlink message inside a 4-byte aligned buffer (what libnftnl's parsers
/// need): its `nlmsg_len` is at least a header and no more than the bytes it views.
#[derive(Clone, Copy)]
pub(crate) struct NlMsg<'a>(
    /// Exactly the message's `nlmsg_len` bytes.
    &'a [u8],
);

impl<'a> NlMsg<'a> {
    /// The message at the start of `bytes`; `None` when misaligned, truncated or shorter
    /// than its header.
    pub(crate) fn first(bytes: &'a [u8]) -> Option<NlMsg<'a>> {
        if bytes.len() < HDR_LEN || bytes.as_ptr().align_offset(4) != 0 {
            return None;
        }
        let len = u32::from_ne_bytes(bytes[0..4].try_into().ok()?) as usize;
        (HDR_LEN..=bytes.len())
            .contains(&len)
            .then(|| NlMsg(&bytes[..len]))
    }

    /// The message's bytes, header included (for the few replies parsed without libnftnl).
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.0
    }

    /// `nlmsg_len`: the message's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn u16_at(&self, off: usize) -> u16 {
        u16::from_ne_bytes([self.0[off], self.0[off + 1]])
    }

    fn u32_at(&self, off: usize) -> u32 {
        u32::from_ne_bytes([
            self.0[off],
            self.0[off + 1],
            self.0[off + 2],
            self.0[off + 3],
        ])
    }

    /// `nlmsg_type`.
    pub(crate) fn msg_type(&self) -> u16 {
        self.u16_at(4)
    }

    /// `nlmsg_flags`.
    pub(crate) fn flags(&self) -> u16 {
        self.u16_at(6)
    }

    /// `nlmsg_seq`.
    pub(crate) fn seq(&self) -> u32 {
        self.u32_at(8)
    }

    /// `nlmsg_pid`.
    pub(crate) fn pid(&self) -> u32 {
        self.u32_at(12)
    }

    /// Positive errno of an NLMSG_ERROR message (0 = ack; EPROTO when too short).
    pub(crate) fn error_code(&self) -> i32 {
        if self.len() < HDR_LEN + 4 {
            return libc::EPROTO;
        }
        -(self.u32_at(HDR_LEN) as i32)
    }

    /// True when the message carries the nfgenmsg libnftnl's parsers read.
    pub(crate) fn has_nfgen(&self) -> bool {
        self.len() >= NFGEN_HDR_LEN
    }

    pub(super) fn as_ptr(&self) -> *const libc::nlmsghdr {
        self.0.as_ptr().cast()
    }
}

/// A message header being filled: only this module can make one, so only its payloads can
/// write through it.
pub(crate) struct Slot<'a> {
    /// The header, with room for the payload's `size()` bytes after it.
    nlh: NonNull<libc::nlmsghdr>,
    /// Ties the slot to the buffer's borrow.
    _buf: PhantomData<&'a mut [u8]>,
}

mod sealed {
    pub trait Sealed {}
}

/// The attributes of one message. Sealed: the room given to [`Payload::put`] is sized by
/// [`Payload::size`], so only this module's payloads, whose sizes it tracks, may exist.
pub(crate) trait Payload: sealed::Sealed {
    /// Upper bound of the bytes [`Payload::put`] appends.
    fn size(&self) -> usize;
    /// Appends the attributes after the header in `slot`.
    fn put(&self, slot: Slot<'_>);
}

impl<K: Build> sealed::Sealed for Obj<K> {}
impl<K: Build> Payload for Obj<K> {
    fn size(&self) -> usize {
        Obj::size(self)
    }
    fn put(&self, slot: Slot<'_>) {
        // SAFETY: slots are only made with `size()` bytes of room after the header.
        unsafe { K::build(slot.nlh.as_ptr(), self.as_ptr()) };
    }
}

/// A message with no attributes (GETGEN, a dump of everything).
pub(crate) struct Empty;

impl sealed::Sealed for Empty {}
impl Payload for Empty {
    fn size(&self) -> usize {
        0
    }
    fn put(&self, _slot: Slot<'_>) {}
}

/// The elements of a set as the payload of a NEWSETELEM/DELSETELEM/GETSETELEM message.
pub(crate) struct Elems(pub Obj<kind::Set>);

impl sealed::Sealed for Elems {}
impl Payload for Elems {
    fn size(&self) -> usize {
        self.0.size()
    }
    fn put(&self, slot: Slot<'_>) {
        // SAFETY: slots are only made with `size()` bytes of room after the header.
        unsafe { sys::nftnl_set_elems_nlmsg_build_payload(slot.nlh.as_ptr(), self.0.as_ptr()) };
    }
}

pub(super) fn fits_size(payload_size: usize) -> bool {
    NFGEN_HDR_LEN + payload_size <= MSG_MAX
}

pub(super) fn check_size(payload: &dyn Payload) -> Result<(), CompileError> {
    if !fits_size(payload.size()) {
        return Err(CompileError::Invalid(format!(
            "a message of up to {} bytes exceeds the netlink limit of {MSG_MAX}",
            NFGEN_HDR_LEN + payload.size()
        )));
    }
    Ok(())
}

/// True when `payload` fits one message (what [`BatchBuf::put`] and [`Request::new`]
/// check), so a caller writing several messages can check them all before writing any.
pub(crate) fn fits(payload: &dyn Payload) -> bool {
    check_size(payload).is_ok()
}

/// Writes an nf_tables header and `payload` at `buf`; returns the message length.
///
/// # Safety
///
/// `buf` is 4-byte aligned with at least `NFGEN_HDR_LEN + payload.size()` writable bytes.
pub(super) unsafe fn write_msg(
    buf: *mut u8,
    msg_type: u16,
    family: u16,
    flags: u16,
    seq: u32,
    payload: &dyn Payload,
) -> usize {
    // SAFETY: room for the header as the caller guarantees.
    let nlh = unsafe { sys::nftnl_nlmsg_build_hdr(buf.cast(), msg_type, family, flags, seq) };
    let nlh = nonnull(nlh);
    payload.put(Slot {
        nlh,
        _buf: PhantomData,
    });
    // SAFETY: the header written above.
    unsafe { (*nlh.as_ptr()).nlmsg_len as usize }
}

/// One request message (a dump or the generation probe), sized to its payload.
pub(crate) struct Request {
    /// The buffer (u64s for alignment).
    words: Vec<u64>,
    /// Length of the message in bytes.
    len: usize,
}

impl Request {
    /// Builds the request.
    pub(crate) fn new(
        msg_type: u16,
        family: u16,
        flags: u16,
        seq: u32,
        payload: &dyn Payload,
    ) -> Result<Request, CompileError> {
        check_size(payload)?;
        let mut words = vec![0u64; (NFGEN_HDR_LEN + payload.size()).div_ceil(8)];
        // SAFETY: an 8-aligned buffer of at least header plus payload size bytes.
        let len = unsafe {
            write_msg(
                words.as_mut_ptr().cast(),
                msg_type,
                family,
                flags,
                seq,
                payload,
            )
        };
        Ok(Request { words, len })
    }

    /// The message bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes of the buffer were written (len <= its size, checked above).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}
