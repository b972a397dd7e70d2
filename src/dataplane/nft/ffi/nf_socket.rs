//! [`NfSocket`]: the nf_tables netlink socket, and the generation in a NEWGEN reply.

use std::io;
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
