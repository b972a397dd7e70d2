//! The netfilter netlink socket: sends batches and reads what the kernel says about each
//! message, runs dumps (listing) and reads the ruleset generation.
//!
//! All calls block. Create the socket on the calling thread (so it lives in the caller's
//! network namespace), then move it into `smol::unblock` for the I/O if needed: [`Nft`] is
//! `Send`.

use std::io;
use std::os::fd::RawFd;

use nftnl::nftnl_sys::{self as sys, libc};

use super::batch::{Batch, TAG_BATCH};
use super::error::{MessageFailure, NftError};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_DUMP_INTR: u16 = 0x10;
const SOL_NETLINK: i32 = 270;
const NETLINK_CAP_ACK: i32 = 10;
const NETLINK_EXT_ACK: i32 = 11;
/// Marker sequence numbers (for the generation probe and dumps) live above batch numbers.
const PROBE_SEQ_BASE: u32 = 0x8000_0000;

/// A committed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// The ruleset generation right after the commit (see [`Nft::generation`]).
    pub generation: u32,
    /// Messages in the batch (0 for an empty batch, which is not sent).
    pub messages: usize,
}

/// A netlink socket to nf_tables.
pub struct Nft {
    sock: mnl::Socket,
    portid: u32,
    buf: Vec<u64>,
    seq: u32,
    sndbuf: usize,
}

// SAFETY: the socket is a file descriptor plus libmnl bookkeeping with no thread affinity;
// `&mut self` on every call keeps it single-user.
unsafe impl Send for Nft {}

/// One netlink message of a reply.
pub(crate) struct Msg<'a> {
    pub hdr: &'a libc::nlmsghdr,
    /// The whole message (header included), for libnftnl's parsers.
    pub ptr: *const libc::nlmsghdr,
}

impl Nft {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> Result<Nft, NftError> {
        let sock = mnl::Socket::new(mnl::Bus::Netfilter)?;
        let portid = sock.portid();
        let nft = Nft {
            sock,
            portid,
            buf: vec![0u64; 64 * 1024 / 8],
            seq: PROBE_SEQ_BASE,
            sndbuf: 0,
        };
        // Errors carry only the header of the refused message, so many fit the queue.
        nft.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1);
        nft.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1);
        nft.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        Ok(nft)
    }

    fn fd(&self) -> RawFd {
        // SAFETY: the socket is open for our lifetime.
        unsafe { mnl::mnl_sys::mnl_socket_get_fd(self.sock.as_raw_socket()) }
    }

    fn setsockopt(&self, level: i32, name: i32, value: i32) -> bool {
        // SAFETY: valid fd and a pointer to an int of the given size.
        unsafe {
            libc::setsockopt(
                self.fd(),
                level,
                name,
                (&value as *const i32).cast(),
                std::mem::size_of::<i32>() as u32,
            ) == 0
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(PROBE_SEQ_BASE);
        self.seq
    }

    /// Sends `batch` as one transaction and waits for the kernel's verdict. On refusal, every
    /// refused message is reported with its sequence number and tag (nothing was applied).
    pub fn execute(&mut self, mut batch: Batch) -> Result<Commit, NftError> {
        let messages = batch.len();
        if messages == 0 {
            return Ok(Commit {
                generation: self.generation()?,
                messages: 0,
            });
        }
        batch.finalize();
        let iov = batch.iovecs();
        let total: usize = iov.iter().map(|v| v.iov_len).sum();
        if total + 4096 > self.sndbuf {
            let want = (total * 2).max(1 << 20);
            self.setsockopt(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, want as i32);
            self.sndbuf = want;
        }
        self.sendmsg(&iov, total)?;
        // The kernel handles the batch synchronously in sendmsg: every error is queued before
        // the reply to this probe, which marks the end of what the batch produced.
        let probe = self.send_getgen()?;
        let range = batch.seq_range();
        let mut failures = Vec::new();
        let mut generation = None;
        self.read_until(probe, &mut |m| {
            if m.hdr.nlmsg_type == NLMSG_ERROR {
                let errno = error_code(m);
                let seq = m.hdr.nlmsg_seq;
                if seq == probe {
                    return Err(NftError::Io(io::Error::from_raw_os_error(errno)));
                }
                if errno != 0 && range.contains(&seq) {
                    let (tag, what) = match batch.msg(seq) {
                        Some(info) => (info.tag, info.what.clone()),
                        None => (TAG_BATCH, "batch".into()),
                    };
                    failures.push(MessageFailure {
                        seq,
                        tag,
                        what,
                        errno,
                    });
                }
            } else if m.hdr.nlmsg_seq == probe {
                generation = Some(parse_gen(m)?);
            }
            Ok(())
        })?;
        if !failures.is_empty() {
            return Err(NftError::Rejected(failures));
        }
        let generation =
            generation.ok_or_else(|| NftError::Malformed("no generation in reply".into()))?;
        Ok(Commit {
            generation,
            messages,
        })
    }

    fn sendmsg(&self, iov: &[libc::iovec], total: usize) -> Result<(), NftError> {
        // SAFETY: a zeroed sockaddr_nl addresses the kernel; the iovecs point into the batch,
        // which outlives the call.
        unsafe {
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as u16;
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = (&mut addr as *mut libc::sockaddr_nl).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_nl>() as u32;
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = iov.len();
            let n = libc::sendmsg(self.fd(), &msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error().into());
            }
            if n as usize != total {
                return Err(NftError::Malformed("short send".into()));
            }
        }
        Ok(())
    }

    /// Sends a request built by `build` (header then payload) and returns its sequence number.
    pub(crate) fn request(
        &mut self,
        msg_type: i32,
        family: u16,
        flags: i32,
        build: impl FnOnce(*mut libc::nlmsghdr),
    ) -> Result<u32, NftError> {
        let seq = self.next_seq();
        let mut buf = vec![0u64; nftnl::nft_nlmsg_maxsize() as usize / 8 + 1];
        // SAFETY: buf is aligned and large enough for one message.
        let len = unsafe {
            let nlh = sys::nftnl_nlmsg_build_hdr(
                buf.as_mut_ptr().cast(),
                msg_type as u16,
                family,
                flags as u16,
                seq,
            );
            build(nlh);
            (*nlh).nlmsg_len as usize
        };
        // SAFETY: the first `len` bytes of buf are the message.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) };
        self.sock.send(bytes)?;
        Ok(seq)
    }

    fn send_getgen(&mut self) -> Result<u32, NftError> {
        self.request(libc::NFT_MSG_GETGEN, libc::AF_UNSPEC as u16, 0, |_| {})
    }

    /// Reads messages until the answer to `seq` is complete (a reply, NLMSG_DONE or an error
    /// with that sequence number), passing every message to `f`. Messages of other sequence
    /// numbers are passed too (batch errors arrive before the probe's reply).
    pub(crate) fn read_until(
        &mut self,
        seq: u32,
        f: &mut dyn FnMut(&Msg<'_>) -> Result<(), NftError>,
    ) -> Result<(), NftError> {
        loop {
            let n = {
                // SAFETY: reinterpreting the aligned u64 buffer as bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.buf.as_mut_ptr().cast::<u8>(),
                        self.buf.len() * 8,
                    )
                };
                self.sock.recv_raw(bytes)?
            };
            let mut off = 0usize;
            let mut done = false;
            let mut first_err = None;
            while off + std::mem::size_of::<libc::nlmsghdr>() <= n {
                // SAFETY: off is 4-aligned inside the received bytes and a header fits.
                let ptr = unsafe {
                    self.buf
                        .as_ptr()
                        .cast::<u8>()
                        .add(off)
                        .cast::<libc::nlmsghdr>()
                };
                let hdr = unsafe { &*ptr };
                let len = hdr.nlmsg_len as usize;
                if len < std::mem::size_of::<libc::nlmsghdr>() || off + len > n {
                    return Err(NftError::Malformed("truncated netlink message".into()));
                }
                if hdr.nlmsg_pid == self.portid || hdr.nlmsg_pid == 0 {
                    let m = Msg { hdr, ptr };
                    if let Err(e) = f(&m)
                        && first_err.is_none()
                    {
                        first_err = Some(e);
                    }
                    if hdr.nlmsg_seq == seq
                        && (hdr.nlmsg_flags & libc::NLM_F_MULTI as u16 == 0
                            || hdr.nlmsg_type == NLMSG_DONE
                            || hdr.nlmsg_type == NLMSG_ERROR)
                    {
                        done = true;
                    }
                }
                off += len.div_ceil(4) * 4;
            }
            if let Some(e) = first_err {
                // Drain the rest of this answer so the socket stays usable.
                if !done {
                    let _ = self.read_until(seq, &mut |_| Ok(()));
                }
                return Err(e);
            }
            if done {
                return Ok(());
            }
        }
    }

    /// The ruleset generation: it moves with every committed change by anyone, so an
    /// unchanged generation means nobody touched any table since it was read.
    pub fn generation(&mut self) -> Result<u32, NftError> {
        let seq = self.send_getgen()?;
        let mut generation = None;
        self.read_until(seq, &mut |m| {
            if m.hdr.nlmsg_seq != seq {
                return Ok(());
            }
            if m.hdr.nlmsg_type == NLMSG_ERROR {
                let errno = error_code(m);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(errno).into());
                }
                return Ok(());
            }
            generation = Some(parse_gen(m)?);
            Ok(())
        })?;
        generation.ok_or_else(|| NftError::Malformed("no generation in reply".into()))
    }

    /// Runs a dump request; `f` gets each object message. Restarts when the kernel reports
    /// the dump was interrupted by a concurrent change.
    pub(crate) fn dump(
        &mut self,
        msg_type: i32,
        family: u16,
        build: &dyn Fn(*mut libc::nlmsghdr),
        f: &mut dyn FnMut(*const libc::nlmsghdr) -> Result<(), NftError>,
        reset: &mut dyn FnMut(),
    ) -> Result<(), NftError> {
        for _ in 0..10 {
            let seq = self.request(msg_type, family, libc::NLM_F_DUMP, build)?;
            let mut interrupted = false;
            self.read_until(seq, &mut |m| {
                if m.hdr.nlmsg_seq != seq {
                    return Ok(());
                }
                if m.hdr.nlmsg_flags & NLM_F_DUMP_INTR != 0 {
                    interrupted = true;
                }
                match m.hdr.nlmsg_type {
                    NLMSG_DONE => Ok(()),
                    NLMSG_ERROR => {
                        let errno = error_code(m);
                        if errno == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(errno).into())
                        }
                    }
                    _ => f(m.ptr),
                }
            })?;
            if !interrupted {
                return Ok(());
            }
            reset();
        }
        Err(NftError::Malformed(
            "dump interrupted by concurrent changes ten times".into(),
        ))
    }
}

/// Positive errno of an NLMSG_ERROR message (0 = ack).
fn error_code(m: &Msg<'_>) -> i32 {
    if (m.hdr.nlmsg_len as usize) < std::mem::size_of::<libc::nlmsghdr>() + 4 {
        return libc::EPROTO;
    }
    // SAFETY: the error code follows the header inside the message.
    let code = unsafe {
        std::ptr::read_unaligned(
            m.ptr
                .cast::<u8>()
                .add(std::mem::size_of::<libc::nlmsghdr>())
                .cast::<i32>(),
        )
    };
    -code
}

fn parse_gen(m: &Msg<'_>) -> Result<u32, NftError> {
    // SAFETY: the message is a complete NEWGEN reply; the gen object is freed below.
    unsafe {
        let g = sys::nftnl_gen_alloc();
        if g.is_null() {
            std::process::abort();
        }
        let ok = sys::nftnl_gen_nlmsg_parse(m.ptr, g) >= 0;
        let id = sys::nftnl_gen_get_u32(g, sys::NFTNL_GEN_ID as u16);
        sys::nftnl_gen_free(g);
        if ok {
            Ok(id)
        } else {
            Err(NftError::Malformed("generation reply".into()))
        }
    }
}
