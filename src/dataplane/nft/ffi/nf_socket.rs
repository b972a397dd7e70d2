//! [`NfSocket`]: the nf_tables netlink socket, and the generation in a NEWGEN reply.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nftnl::nftnl_sys as sys;

use super::msg::NlMsg;
use super::object::nonnull;

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

/// As much of `bytes` as fits, copied to the start of `words` and returned from there: what a
/// receive of `bytes` into `words` gives (8-byte aligned, as libnftnl's parsers need).
pub(crate) fn aligned_copy<'w>(bytes: &[u8], words: &'w mut [MaybeUninit<u64>]) -> &'w [u8] {
    let len = bytes.len().min(std::mem::size_of_val(words));
    // SAFETY: `words` is valid for writes of `len` bytes and cannot overlap `bytes` (one
    // is borrowed mutably); after the copy its first `len` bytes are initialised, and u8
    // has no alignment or validity requirement.
    unsafe {
        let dst = words.as_mut_ptr().cast::<u8>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len);
        std::slice::from_raw_parts(dst, len)
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

    /// Receives one datagram into `buf`, which need not be initialised (the kernel writes
    /// what it receives, so untouched pages stay unallocated); returns the bytes received,
    /// at the start of `buf`. A datagram longer than `buf` is an error (ENOSPC, as libmnl's
    /// receive reports it), never a silently cut message.
    pub(crate) fn recv_uninit<'b>(&self, buf: &'b mut [MaybeUninit<u64>]) -> io::Result<&'b [u8]> {
        let len = std::mem::size_of_val(buf);
        // SAFETY: the kernel writes at most `len` bytes at the start of `buf`, which is
        // valid for writes of `len` bytes; MSG_TRUNC only makes it return the datagram's
        // full length.
        let n = unsafe {
            sys::libc::recv(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                len,
                sys::libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize > len {
            return Err(io::Error::from_raw_os_error(sys::libc::ENOSPC));
        }
        // SAFETY: the kernel initialised the first `n` bytes (n <= len); u8 has no
        // alignment or validity requirement.
        Ok(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) })
    }
}

impl AsFd for NfSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the mnl socket owns the fd and keeps it open as long as it lives, which
        // the borrow of `self` covers.
        unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) }
    }
}
