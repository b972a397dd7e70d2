//! [`BatchBuf`]: the libnftnl batch, and sending it in one `sendmsg`.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

use nftnl::nftnl_sys::{self as sys, libc};

use super::super::error::CompileError;
use super::msg::{MSG_MAX, Payload, check_size, write_msg};
use super::nf_socket::NfSocket;
use super::object::nonnull;

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

    /// Writes a batch begin message that makes the kernel refuse the whole batch with
    /// `ERESTART` unless the ruleset is still at `generation` (`NFNL_BATCH_GENID`): nobody
    /// committed since the caller read what the batch was built from.
    pub(crate) fn begin_at_generation(&mut self, seq: u32, generation: u32) {
        const NFNL_BATCH_GENID: u16 = 1;
        const ATTR_LEN: usize = 8;
        let buf = self.cursor();
        // SAFETY: the cursor has room for MSG_MAX bytes; the begin message is 20 bytes and
        // the attribute 8 more, written right after it (aligned: 20 is a multiple of 4).
        unsafe {
            let nlh = sys::nftnl_batch_begin(buf.cast(), seq);
            let len = (*nlh).nlmsg_len as usize;
            let attr = buf.add(len);
            let mut bytes = [0u8; ATTR_LEN];
            bytes[0..2].copy_from_slice(&(ATTR_LEN as u16).to_ne_bytes());
            bytes[2..4].copy_from_slice(&NFNL_BATCH_GENID.to_ne_bytes());
            bytes[4..8].copy_from_slice(&generation.to_be_bytes());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), attr, ATTR_LEN);
            (*nlh).nlmsg_len = (len + ATTR_LEN) as u32;
        }
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
