//! Dumps on edgenetd's own netlink socket: one request with `NLM_F_DUMP`, then the kernel's
//! multipart answer, datagram by datagram, until `NLMSG_DONE`.
//!
//! Why not netlink-proto's connection: it parses every message into `RouteNetlinkMessage`
//! (linking the whole of `netlink-packet-route`) and keeps buffers of its own per connection.
//! Here each message's body goes to the caller's closure as bytes, read with [`super::codec`],
//! and one receive buffer is reused. Answers are matched by sequence number: what is left of
//! an abandoned dump (its future dropped, or ended by an error) is skipped by the next one.
//! The kernel runs one dump per socket at a time (a second request is refused with `EBUSY`),
//! so an abandoned dump is read to its end before the next request. A dump the kernel flags as
//! interrupted (`NLM_F_DUMP_INTR`: the objects changed while it ran, so it may be
//! inconsistent) is run again.

use std::os::fd::AsFd;

use rtnetlink::sys::{Socket, protocols::NETLINK_ROUTE};

use super::RouteError;
use super::codec::Messages;
use super::codec::header::{
    HEADER_LEN, NLM_F_CAPPED, NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR, code,
};
use super::socket::kernel_error;

/// Attempts of one dump while the kernel says it was interrupted; the last result is then
/// kept (as `ip` does, with a warning): the monitor reports the change that interrupted it.
const ATTEMPTS: usize = 4;
/// The receive buffer to start with: the kernel sizes dump datagrams to the reader's buffer,
/// up to 32 KiB (a bigger datagram, one huge link message, grows it).
const RECV_BYTES: usize = 32 << 10;

/// A netlink socket for dumps, with strict checking on (so the kernel applies dump filters).
#[derive(Debug)]
pub struct Dumper {
    socket: smol::Async<Socket>,
    seq: u32,
    /// The dump whose answer was not read to its end (its future was dropped).
    unfinished: Option<u32>,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl Dumper {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open() -> Result<Dumper, RouteError> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        // Without strict checking the kernel ignores dump filters (the callers filter again);
        // without extended acks errors carry only their errno.
        let _ = socket.set_netlink_get_strict_chk(true);
        let _ = socket.set_cap_ack(true);
        let _ = socket.set_ext_ack(true);
        socket.bind_auto()?;
        Ok(Dumper {
            socket: smol::Async::new(socket)?,
            seq: 0,
            unfinished: None,
            request: Vec::with_capacity(64),
            buf: Vec::with_capacity(RECV_BYTES),
        })
    }

    /// Runs the dump `put` appends (given its sequence number) and folds every message of the
    /// answer into a `T` with `each` (message type, body). An interrupted dump starts again
    /// from `T::default()`.
    pub async fn dump<T: Default>(
        &mut self,
        put: impl Fn(&mut Vec<u8>, u32),
        mut each: impl FnMut(&mut T, u16, &[u8]),
    ) -> Result<T, RouteError> {
        if let Some(seq) = self.unfinished {
            // Its errors were its caller's; this dump only needs the socket free again.
            let _ = self.answer(seq, &mut (), &mut |_, _, _| {}).await;
            self.unfinished = None;
        }
        let mut attempt = 1;
        loop {
            self.seq = self.seq.wrapping_add(1);
            let seq = self.seq;
            self.request.clear();
            put(&mut self.request, seq);
            // Linux takes a netlink datagram whole or not at all; qemu-user (the aarch64
            // smoke test) may report a short count for a whole send, so the count is ignored.
            let request = &self.request;
            self.socket.write_with(|s| s.send(request, 0)).await?;
            let mut out = T::default();
            self.unfinished = Some(seq);
            let interrupted = self.answer(seq, &mut out, &mut each).await;
            // Only a dropped future leaves the dump unfinished: after a failed receive or a
            // malformed datagram the end may never come, and waiting for it would hang every
            // later dump (a dump still running refuses the next with `EBUSY`, an error).
            self.unfinished = None;
            if !interrupted? {
                return Ok(out);
            }
            if attempt == ATTEMPTS {
                log::warn!("route netlink: dump interrupted {ATTEMPTS} times; keeping the last");
                return Ok(out);
            }
            attempt += 1;
        }
    }

    /// Reads the answer to dump `seq` up to its done message (or error): whether the kernel
    /// flagged it interrupted.
    async fn answer<T>(
        &mut self,
        seq: u32,
        out: &mut T,
        each: &mut impl FnMut(&mut T, u16, &[u8]),
    ) -> Result<bool, RouteError> {
        let mut interrupted = false;
        loop {
            let buf = &mut self.buf;
            match self
                .socket
                .read_with(|s| crate::sys::recv_datagram(s.as_fd(), buf))
                .await
            {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Err(RouteError::Overrun);
                }
                Err(e) => return Err(e.into()),
            }
            for msg in Messages::new(buf) {
                let msg = match msg {
                    Ok(msg) => msg,
                    // The kernel never sends this. What else the datagram held is lost, maybe
                    // the done message too: waiting for it could wait for ever.
                    Err(e) => return Err(RouteError::Io(e.to_string())),
                };
                if msg.seq != seq {
                    continue;
                }
                interrupted |= msg.flags & NLM_F_DUMP_INTR != 0;
                match msg.kind {
                    // A dump that failed part-way ends with the errno in its done message.
                    NLMSG_DONE | NLMSG_ERROR => {
                        return match code(msg.body).and_then(std::num::NonZeroI32::new) {
                            Some(c) if c.get() < 0 => Err(failed(c, msg.kind, msg.body, msg.flags)),
                            _ => Ok(interrupted),
                        };
                    }
                    kind => each(out, kind, msg.body),
                }
            }
        }
    }
}

/// The error a dump ended with. An error message echoes the request (its header, when capped)
/// before the extended-ack attributes; a done message has the attributes right after the
/// errno, so it is given an empty echo to read the same way.
fn failed(code: std::num::NonZeroI32, kind: u16, body: &[u8], flags: u16) -> RouteError {
    if kind == NLMSG_ERROR {
        return kernel_error(code, &body[4..], flags);
    }
    let mut echoed = vec![0; HEADER_LEN];
    echoed.extend_from_slice(&body[4..]);
    kernel_error(code, &echoed, flags | NLM_F_CAPPED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::route::codec::header::NLM_F_ACK_TLVS;

    #[test]
    fn a_dump_that_failed_part_way_gives_the_kernels_message() {
        let mut done = (-libc::EINVAL).to_ne_bytes().to_vec();
        crate::dataplane::route::codec::nla::put_string(&mut done, 1, "Invalid dump filter");
        let code = std::num::NonZeroI32::new(-libc::EINVAL).unwrap();
        assert_eq!(
            failed(code, NLMSG_DONE, &done, NLM_F_ACK_TLVS).to_string(),
            "Invalid argument: Invalid dump filter"
        );
        let mut error = (-libc::EINVAL).to_ne_bytes().to_vec();
        error.extend_from_slice(&[0; HEADER_LEN]);
        crate::dataplane::route::codec::nla::put_string(&mut error, 1, "Invalid dump filter");
        assert_eq!(
            failed(code, NLMSG_ERROR, &error, NLM_F_ACK_TLVS | NLM_F_CAPPED).to_string(),
            "Invalid argument: Invalid dump filter"
        );
    }
}
