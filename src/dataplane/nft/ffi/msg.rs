//! Netlink messages: a checked view of received ones ([`NlMsg`]), payloads written into
//! requests and batches ([`Payload`]), the libnftnl batch buffer ([`BatchBuf`]) and the
//! nf_tables socket ([`NfSocket`]).

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::super::error::CompileError;
use super::object::{Build, Obj, kind, nonnull};

const HDR_LEN: usize = std::mem::size_of::<libc::nlmsghdr>();
/// Header plus `struct nfgenmsg`: what `nftnl_nlmsg_build_hdr` writes and parsers read.
const NFGEN_HDR_LEN: usize = HDR_LEN + 4;
/// Largest message written: nested attribute lengths are u16, so nothing larger is valid,
/// and both the batch pages and request buffers have at least this much room per message.
const MSG_MAX: usize = u16::MAX as usize;

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

fn check_size(payload: &dyn Payload) -> Result<(), CompileError> {
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
unsafe fn write_msg(
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

/// A libnftnl batch: messages written one after another into pages sent as one `sendmsg`.
pub(crate) struct BatchBuf(
    /// The batch, owned.
    NonNull<sys::nftnl_batch>,
);

// SAFETY: the batch owns its pages, has no thread affinity, and every write takes
// `&mut self`.
unsafe impl Send for BatchBuf {}

impl Default for BatchBuf {
    fn default() -> Self {
        BatchBuf::new()
    }
}

impl BatchBuf {
    /// An empty batch whose pages leave room for a message of the largest size after every
    /// position a message may start at.
    pub(crate) fn new() -> BatchBuf {
        let overrun = nftnl::nft_nlmsg_maxsize();
        debug_assert!(overrun as usize >= MSG_MAX);
        // SAFETY: plain sizes.
        let raw = unsafe { sys::nftnl_batch_alloc(nftnl::default_batch_page_size(), overrun) };
        BatchBuf(nonnull(raw))
    }

    /// Where the next message goes: at least `nft_nlmsg_maxsize()` bytes of room.
    fn cursor(&mut self) -> *mut u8 {
        // SAFETY: a live batch.
        unsafe { sys::nftnl_batch_buffer(self.0.as_ptr()).cast() }
    }

    /// Accounts the message just written at the cursor (moving to a new page if needed).
    fn advance(&mut self) {
        // SAFETY: a complete message was written at the cursor.
        if unsafe { sys::nftnl_batch_update(self.0.as_ptr()) } < 0 {
            std::process::abort();
        }
    }

    /// Writes the batch begin message.
    pub(crate) fn begin(&mut self, seq: u32) {
        let buf = self.cursor();
        // SAFETY: the cursor has room for this 20-byte message.
        unsafe { sys::nftnl_batch_begin(buf.cast(), seq) };
        self.advance();
    }

    /// Writes the batch end message.
    pub(crate) fn end(&mut self, seq: u32) {
        let buf = self.cursor();
        // SAFETY: the cursor has room for this 20-byte message.
        unsafe { sys::nftnl_batch_end(buf.cast(), seq) };
        self.advance();
    }

    /// Writes one nf_tables message; an oversized payload is refused before anything is
    /// written.
    pub(crate) fn put(
        &mut self,
        msg_type: u16,
        family: u16,
        flags: u16,
        seq: u32,
        payload: &dyn Payload,
    ) -> Result<(), CompileError> {
        check_size(payload)?;
        let buf = self.cursor();
        // SAFETY: the cursor is aligned with room for MSG_MAX bytes, which the message fits.
        unsafe { write_msg(buf, msg_type, family, flags, seq, payload) };
        self.advance();
        Ok(())
    }

    fn iovecs(&self) -> Vec<libc::iovec> {
        // SAFETY: a live batch; the iovecs point into its pages.
        let n = unsafe { sys::nftnl_batch_iovec_len(self.0.as_ptr()) };
        let mut v = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            n.max(0) as usize
        ];
        // SAFETY: `v` has room for the `n` iovecs written.
        unsafe { sys::nftnl_batch_iovec(self.0.as_ptr(), v.as_mut_ptr(), v.len() as u32) };
        v
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.iovecs().iter().map(|v| v.iov_len).sum()
    }

    /// Sends every page to the kernel in one `sendmsg`; returns the bytes sent.
    pub(crate) fn send(&self, sock: &NfSocket) -> io::Result<usize> {
        let iov = self.iovecs();
        // SAFETY: zeroed sockaddr_nl and msghdr are valid (the address is the kernel's).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut addr as *mut libc::sockaddr_nl).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        msg.msg_iov = iov.as_ptr().cast_mut();
        msg.msg_iovlen = iov.len();
        // SAFETY: msg points at the address and at iovecs into this batch, all alive for the
        // call; the kernel only reads them.
        let n = unsafe { libc::sendmsg(sock.as_fd().as_raw_fd(), &msg, 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl Drop for BatchBuf {
    fn drop(&mut self) {
        // SAFETY: we own the batch.
        unsafe { sys::nftnl_batch_free(self.0.as_ptr()) };
    }
}

/// The ruleset generation in a NEWGEN reply.
pub(crate) fn parse_gen(msg: NlMsg<'_>) -> Option<u32> {
    if !msg.has_nfgen() {
        return None;
    }
    // SAFETY: allocation takes no input.
    let g = nonnull(unsafe { sys::nftnl_gen_alloc() });
    // SAFETY: a complete, aligned message with its nfgenmsg, and a live gen object, freed
    // right after.
    unsafe {
        let ok = sys::nftnl_gen_nlmsg_parse(msg.as_ptr(), g.as_ptr()) >= 0;
        let id = sys::nftnl_gen_get_u32(g.as_ptr(), sys::NFTNL_GEN_ID as u16);
        sys::nftnl_gen_free(g.as_ptr());
        ok.then_some(id)
    }
}

/// A netlink socket on the netfilter bus.
pub(crate) struct NfSocket(
    /// The socket, owned.
    mnl::Socket,
);

// SAFETY: an fd plus libmnl's bookkeeping of it (port id), with no thread affinity; users
// hold it through `&mut` (see `Nft`).
unsafe impl Send for NfSocket {}

impl NfSocket {
    /// Opens one in the calling thread's network namespace.
    pub(crate) fn open() -> io::Result<NfSocket> {
        Ok(NfSocket(mnl::Socket::new(mnl::Bus::Netfilter)?))
    }

    /// Its netlink port id.
    pub(crate) fn portid(&self) -> u32 {
        self.0.portid()
    }

    /// Sends one buffer.
    pub(crate) fn send(&self, bytes: &[u8]) -> io::Result<usize> {
        self.0.send(bytes)
    }

    /// Receives one datagram into `buf`; returns its length.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv_raw(buf)
    }
}

impl AsFd for NfSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the mnl socket owns the fd and keeps it open as long as it lives, which
        // the borrow of `self` covers.
        unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) }
    }
}
