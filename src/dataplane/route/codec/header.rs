//! The netlink message header (`struct nlmsghdr`) and the messages of one datagram.

use super::Malformed;
use super::nla::{align, put_u16, put_u32, u16_at, u32_at};

/// The header's length.
pub const HEADER_LEN: usize = 16;
/// `NLMSG_ERROR`: an ack (error 0) or an error.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x01;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x04;
/// `NLM_F_DUMP_INTR`: the kernel's objects changed during the dump, which may be inconsistent.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `NLM_F_REPLACE`.
pub const NLM_F_REPLACE: u16 = 0x100;
/// `NLM_F_EXCL`.
pub const NLM_F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE`.
pub const NLM_F_CREATE: u16 = 0x400;
/// `NLM_F_CAPPED` (on an error): the echoed request is its header only.
pub const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS` (on an error or done): extended-ack attributes follow.
pub const NLM_F_ACK_TLVS: u16 = 0x200;

/// One message of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`: the request answered (0 for a notification).
    pub seq: u32,
    /// `nlmsg_pid`: for a notification, the port of the socket whose request caused it.
    pub port: u32,
    /// What follows the header, up to the header's length.
    pub body: &'a [u8],
}

/// The messages of one datagram, back to back, each 4-byte aligned.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Messages<'a> {
    /// Reads the messages of `datagram`.
    pub fn new(datagram: &'a [u8]) -> Messages<'a> {
        Messages { rest: datagram }
    }
}

impl<'a> Iterator for Messages<'a> {
    /// The next message, or why the rest of the datagram is unreadable (after which the
    /// iteration ends: a length that lies leaves no way to find the next message).
    type Item = Result<Message<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        if rest.is_empty() {
            return None;
        }
        self.rest = &[];
        if rest.len() < HEADER_LEN {
            return Some(Err(Malformed("message header")));
        }
        let len = u32_at(rest, 0) as usize;
        if !(HEADER_LEN..=rest.len()).contains(&len) {
            return Some(Err(Malformed("message length")));
        }
        // The last message may end the datagram unpadded.
        self.rest = &rest[align(len).min(rest.len())..];
        Some(Ok(Message {
            kind: u16_at(rest, 4),
            flags: u16_at(rest, 6),
            seq: u32_at(rest, 8),
            port: u32_at(rest, 12),
            body: &rest[HEADER_LEN..len],
        }))
    }
}

/// Starts a request in `buf` (after whatever it holds): returns where the message starts,
/// for [`end`], which writes its length.
pub fn begin(buf: &mut Vec<u8>, kind: u16, flags: u16, seq: u32) -> usize {
    let start = buf.len();
    put_u32(buf, 0);
    put_u16(buf, kind);
    put_u16(buf, NLM_F_REQUEST | flags);
    put_u32(buf, seq);
    // Port 0: the kernel fills in the sender's.
    put_u32(buf, 0);
    start
}

/// Ends the message begun at `start`: writes its length and pads it, so the next message of
/// the datagram starts aligned.
pub fn end(buf: &mut Vec<u8>, start: usize) {
    let len = (buf.len() - start) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_ne_bytes());
    super::nla::pad(buf);
}

/// The error code of an `NLMSG_ERROR` (0: an ack) or `NLMSG_DONE` body (a dump that failed
/// part-way ends with a negative errno in its done message); `None` when the body is too short.
pub fn code(body: &[u8]) -> Option<i32> {
    (body.len() >= 4).then(|| u32_at(body, 0) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_split_by_their_lengths_and_a_lying_length_ends_the_datagram() {
        let mut buf = Vec::new();
        let a = begin(&mut buf, 24, NLM_F_DUMP, 7);
        buf.extend_from_slice(&[1, 2, 3]);
        end(&mut buf, a);
        let b = begin(&mut buf, NLMSG_DONE, 0, 7);
        buf.extend_from_slice(&0i32.to_ne_bytes());
        end(&mut buf, b);
        let read: Vec<_> = Messages::new(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(
            (read[0].kind, read[0].flags, read[0].seq, read[0].body),
            (24, NLM_F_REQUEST | NLM_F_DUMP, 7, &[1u8, 2, 3][..])
        );
        assert_eq!((read[1].kind, code(read[1].body)), (NLMSG_DONE, Some(0)));
        for cut in 1..buf.len() {
            let read: Vec<_> = Messages::new(&buf[..cut]).collect();
            // A cut inside the first message leaves nothing readable.
            assert!(read.len() <= 2, "cut at {cut}");
            if cut < 19 {
                assert!(matches!(read[..], [Err(_)]), "cut at {cut}");
            }
        }
        let mut lying = buf.clone();
        lying[..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(
            Messages::new(&lying).collect::<Vec<_>>(),
            [Err(Malformed("message length"))]
        );
    }
}
