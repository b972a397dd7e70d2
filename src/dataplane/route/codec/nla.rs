//! Netlink attributes (`struct nlattr`: length, type, value, padded to 4 bytes): a checked
//! reader and the writers the requests need.
//!
//! The reader never trusts a length: an attribute shorter than its own header or longer than
//! what is left is [`Malformed`], so a truncated or garbled message is an error, never a panic
//! or a read past the message.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Malformed;

/// The attribute header's length.
pub const NLA_HEADER: usize = 4;
/// The type bits (the top two bits flag nested and network-byte-order attributes, which the
/// kernel sets on some nested attributes and readers must ignore).
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Rounds up to the 4-byte alignment of attributes and messages.
pub fn align(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// The attributes of one message body (or of one nested attribute), in order.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Attrs<'a> {
    /// Reads the attributes in `bytes`.
    pub fn new(bytes: &'a [u8]) -> Attrs<'a> {
        Attrs { rest: bytes }
    }
}

impl<'a> Iterator for Attrs<'a> {
    /// The attribute's type (flags masked off) and value, or why the rest is unreadable.
    type Item = Result<(u16, &'a [u8]), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let rest = self.rest;
        let header = (rest.len() >= NLA_HEADER)
            .then(|| (u16_at(rest, 0) as usize, u16_at(rest, 2) & NLA_TYPE_MASK));
        match header {
            Some((len, kind)) if (NLA_HEADER..=rest.len()).contains(&len) => {
                // The last attribute may end the buffer unpadded.
                self.rest = &rest[align(len).min(rest.len())..];
                Some(Ok((kind, &rest[NLA_HEADER..len])))
            }
            _ => {
                self.rest = &[];
                Some(Err(Malformed("attribute length")))
            }
        }
    }
}

/// The native-endian `u16` at `at` (the caller has checked the length).
pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// The native-endian `u32` at `at` (the caller has checked the length).
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A `u32` attribute's value.
pub fn as_u32(value: &[u8]) -> Result<u32, Malformed> {
    match value {
        [a, b, c, d] => Ok(u32::from_ne_bytes([*a, *b, *c, *d])),
        _ => Err(Malformed("u32 attribute")),
    }
}

/// A `u8` attribute's value (the kernel pads it; only the first byte counts).
pub fn as_u8(value: &[u8]) -> Result<u8, Malformed> {
    value.first().copied().ok_or(Malformed("u8 attribute"))
}

/// A string attribute's value: up to its NUL (the kernel terminates names with one).
pub fn as_string(value: &[u8]) -> Result<String, Malformed> {
    let text = value.split(|b| *b == 0).next().unwrap_or_default();
    std::str::from_utf8(text)
        .map(str::to_string)
        .map_err(|_| Malformed("string attribute"))
}

/// An address attribute's value: 4 bytes are IPv4, 16 IPv6.
pub fn as_addr(value: &[u8]) -> Result<IpAddr, Malformed> {
    if let Ok(v4) = <[u8; 4]>::try_from(value) {
        Ok(IpAddr::V4(Ipv4Addr::from(v4)))
    } else if let Ok(v6) = <[u8; 16]>::try_from(value) {
        Ok(IpAddr::V6(Ipv6Addr::from(v6)))
    } else {
        Err(Malformed("address attribute"))
    }
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
pub(crate) fn put_u16(buf: &mut Vec<u8>, v: u16) {
    buf.extend_from_slice(&v.to_ne_bytes());
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
pub(crate) fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_ne_bytes());
}

/// Appends an attribute with `value`, padded.
pub fn put_attr(buf: &mut Vec<u8>, kind: u16, value: &[u8]) {
    put_u16(buf, (NLA_HEADER + value.len()) as u16);
    put_u16(buf, kind);
    buf.extend_from_slice(value);
    pad(buf);
}

// Inlined: the crate is built for size, and these run a few times per route.
#[inline(always)]
pub(crate) fn put_attr_u32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    put_u16(buf, 8);
    put_u16(buf, kind);
    put_u32(buf, v);
}

/// Appends an address attribute (4 or 16 bytes: no padding needed).
// Inlined: the crate is built for size, and this runs a few times per route.
#[inline(always)]
pub(crate) fn put_addr(buf: &mut Vec<u8>, kind: u16, addr: IpAddr) {
    match addr {
        IpAddr::V4(a) => {
            put_u16(buf, 8);
            put_u16(buf, kind);
            buf.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            put_u16(buf, 20);
            put_u16(buf, kind);
            buf.extend_from_slice(&a.octets());
        }
    }
}

/// Appends a NUL-terminated string attribute (how the kernel expects interface names).
pub fn put_string(buf: &mut Vec<u8>, kind: u16, text: &str) {
    put_u16(buf, (NLA_HEADER + text.len() + 1) as u16);
    put_u16(buf, kind);
    buf.extend_from_slice(text.as_bytes());
    buf.push(0);
    pad(buf);
}

/// Starts a nested attribute (or any structure whose length is known only at its end):
/// returns where its length goes, for [`end_nested`].
pub fn begin_nested(buf: &mut Vec<u8>, kind: u16) -> usize {
    let start = buf.len();
    put_u16(buf, 0);
    put_u16(buf, kind);
    start
}

/// Writes the length of the attribute begun at `start` (see [`begin_nested`]).
pub fn end_nested(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start) as u16;
    buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
}

/// Pads `buf` to the 4-byte alignment.
pub fn pad(buf: &mut Vec<u8>) {
    buf.resize(align(buf.len()), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_in_order_and_a_bad_length_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        put_attr_u32(&mut buf, 6, 100);
        put_string(&mut buf, 3, "eth0");
        put_addr(&mut buf, 1, "2001:db8::1".parse().unwrap());
        let attrs: Vec<_> = Attrs::new(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(attrs.len(), 3);
        assert_eq!(as_u32(attrs[0].1), Ok(100));
        assert_eq!(as_string(attrs[1].1).unwrap(), "eth0");
        assert_eq!(
            as_addr(attrs[2].1),
            Ok("2001:db8::1".parse::<IpAddr>().unwrap())
        );
        // Every truncation ends in an error or fewer attributes, never a panic.
        for cut in 0..buf.len() {
            let read: Vec<_> = Attrs::new(&buf[..cut]).collect();
            assert!(read.len() <= 3);
            // Attribute boundaries (17..20: the string's padding may be cut off).
            if cut != 0 && cut != 8 && !(17..=20).contains(&cut) {
                assert!(read.last().unwrap().is_err(), "cut at {cut}");
            }
        }
        // A length shorter than the header.
        assert!(Attrs::new(&[2, 0, 1, 0]).next().unwrap().is_err());
        assert_eq!(as_u32(&[1, 2, 3]), Err(Malformed("u32 attribute")));
        assert!(as_addr(&[1, 2, 3, 4, 5]).is_err());
    }

    #[test]
    fn nested_flags_are_masked_off_the_type() {
        let mut buf = Vec::new();
        put_attr_u32(&mut buf, 0x8000 | 8, 1);
        assert_eq!(Attrs::new(&buf).next().unwrap().unwrap().0, 8);
    }
}
