//! The netfilter netlink socket: sends batches and reads what the kernel says about each
//! message, runs dumps (listing) and reads the ruleset generation.
//!
//! All calls block. Create the socket on the calling thread (so it lives in the caller's
//! network namespace), then move it into `smol::unblock` for the I/O if needed: [`Nft`] is
//! `Send`.

use std::io;

use nftnl::nftnl_sys::libc;

use super::batch::{Batch, TAG_BATCH};
use super::error::{MessageFailure, NftError};
use super::ffi::{self, Empty, NfSocket, NlMsg, Payload, Request};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_DUMP_INTR: u16 = 0x10;
const SOL_NETLINK: i32 = 270;
const NETLINK_CAP_ACK: i32 = 10;
const NETLINK_EXT_ACK: i32 = 11;
/// Marker sequence numbers (for the generation probe and dumps) live above batch numbers.
const PROBE_SEQ_BASE: u32 = 0x8000_0000;
const HDR_LEN: usize = std::mem::size_of::<libc::nlmsghdr>();

/// A committed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// The ruleset generation right after the commit (see [`Nft::generation`]).
    pub generation: u32,
    /// Messages in the batch (0 for an empty batch, which is not sent).
    pub messages: usize,
}

/// Receive buffer size, in 8-byte words (8-byte aligned, so every message in it is 4-byte
/// aligned as libnftnl's parsers need): 64 KiB, more than the kernel puts in one datagram.
pub(super) const RECV_WORDS: usize = 64 * 1024 / 8;

/// A netlink socket to nf_tables.
pub struct Nft {
    /// The socket (in the namespace of the thread that opened it).
    sock: NfSocket,
    /// Our netlink port id (replies to others are skipped).
    portid: u32,
    /// Last probe/dump sequence number used.
    seq: u32,
    /// Send buffer size forced so far (0 = the default).
    sndbuf: usize,
}

impl Nft {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> Result<Nft, NftError> {
        let sock = NfSocket::open()?;
        let portid = sock.portid();
        let nft = Nft {
            sock,
            portid,
            seq: PROBE_SEQ_BASE,
            sndbuf: 0,
        };
        // Errors carry only the header of the refused message, so many fit the queue.
        nft.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1);
        nft.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1);
        nft.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        Ok(nft)
    }

    /// Best effort: without these options batches still work, with less room for errors
    /// (forcing buffer sizes needs CAP_NET_ADMIN).
    fn setsockopt(&self, level: i32, name: i32, value: i32) {
        let _ = crate::sys::set_int_sockopt(&self.sock, level, name, value);
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1).max(PROBE_SEQ_BASE);
        self.seq
    }

    /// Sends `batch` as one transaction and waits for the kernel's verdict. On refusal, every
    /// refused message is reported with its sequence number and tag (nothing was applied).
    pub fn execute(&mut self, mut batch: Batch) -> Result<Commit, NftError> {
        if let Some(e) = batch.take_error() {
            return Err(e.into());
        }
        let messages = batch.len();
        if messages == 0 {
            return Ok(Commit {
                generation: self.generation()?,
                messages: 0,
            });
        }
        batch.finalize();
        let total = batch.buffer().len();
        if total + 4096 > self.sndbuf {
            let want = (total * 2).max(1 << 20);
            self.setsockopt(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, want as i32);
            self.sndbuf = want;
        }
        if batch.buffer().send(&self.sock)? != total {
            return Err(NftError::Malformed("short send".into()));
        }
        // The kernel handles the batch synchronously in sendmsg: every error is queued before
        // the reply to this probe, which marks the end of what the batch produced.
        let probe = self.send_getgen()?;
        let range = batch.seq_range();
        let mut failures = Vec::new();
        let mut generation = None;
        self.read_until(probe, &mut |m| {
            if m.msg_type() == NLMSG_ERROR {
                let errno = m.error_code();
                let seq = m.seq();
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
            } else if m.seq() == probe {
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

    /// Sends a request (header then `payload`) and returns its sequence number.
    pub(crate) fn request(
        &mut self,
        msg_type: i32,
        family: u16,
        flags: i32,
        payload: &dyn Payload,
    ) -> Result<u32, NftError> {
        let seq = self.next_seq();
        let req = Request::new(msg_type as u16, family, flags as u16, seq, payload)?;
        self.sock.send(req.as_bytes())?;
        Ok(seq)
    }

    fn send_getgen(&mut self) -> Result<u32, NftError> {
        self.request(libc::NFT_MSG_GETGEN, libc::AF_UNSPEC as u16, 0, &Empty)
    }

    /// Reads messages until the answer to `seq` is complete (a reply, NLMSG_DONE or an error
    /// with that sequence number), passing every message to `f`. Messages of other sequence
    /// numbers are passed too (batch errors arrive before the probe's reply).
    pub(crate) fn read_until(
        &mut self,
        seq: u32,
        f: &mut dyn FnMut(NlMsg<'_>) -> Result<(), NftError>,
    ) -> Result<(), NftError> {
        // Allocated for this answer only, and never zeroed: the kernel writes what it sends,
        // and only those pages become resident. A buffer kept (zeroed) per socket was 64 KiB
        // of idle RSS for each of the three the daemon keeps open, most of them for the
        // few bytes of a generation reply. Freed on return, the pages a dump touched go
        // back with the heap trim after the sync.
        let mut buf = Vec::with_capacity(RECV_WORDS);
        loop {
            let bytes = self.sock.recv_uninit(buf.spare_capacity_mut())?;
            let n = bytes.len();
            let mut off = 0usize;
            let mut done = false;
            let mut first_err = None;
            while off + HDR_LEN <= n {
                let m = NlMsg::first(&bytes[off..n])
                    .ok_or_else(|| NftError::Malformed("truncated netlink message".into()))?;
                if m.pid() == self.portid || m.pid() == 0 {
                    if let Err(e) = f(m)
                        && first_err.is_none()
                    {
                        first_err = Some(e);
                    }
                    if m.seq() == seq
                        && (m.flags() & libc::NLM_F_MULTI as u16 == 0
                            || m.msg_type() == NLMSG_DONE
                            || m.msg_type() == NLMSG_ERROR)
                    {
                        done = true;
                    }
                }
                off += m.len().div_ceil(4) * 4;
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
            if m.seq() != seq {
                return Ok(());
            }
            if m.msg_type() == NLMSG_ERROR {
                let errno = m.error_code();
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
        filter: &dyn Payload,
        f: &mut dyn FnMut(NlMsg<'_>) -> Result<(), NftError>,
        reset: &mut dyn FnMut(),
    ) -> Result<(), NftError> {
        for _ in 0..10 {
            let seq = self.request(msg_type, family, libc::NLM_F_DUMP, filter)?;
            let mut interrupted = false;
            self.read_until(seq, &mut |m| {
                if m.seq() != seq {
                    return Ok(());
                }
                if m.flags() & NLM_F_DUMP_INTR != 0 {
                    interrupted = true;
                }
                match m.msg_type() {
                    NLMSG_DONE => Ok(()),
                    NLMSG_ERROR => {
                        let errno = m.error_code();
                        if errno == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(errno).into())
                        }
                    }
                    _ => f(m),
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

fn parse_gen(m: NlMsg<'_>) -> Result<u32, NftError> {
    ffi::parse_gen(m).ok_or_else(|| NftError::Malformed("generation reply".into()))
}
