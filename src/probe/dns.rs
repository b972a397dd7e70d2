//! The DNS wire format a probe needs: one query, and the RCODE of its answer.

/// Record type A (an uplink is not asked this; a backend check's `query_name` is).
pub const A: u16 = 1;
/// Record type NS (an uplink's probe asks the root for its name servers).
pub const NS: u16 = 2;

/// A recursive query for `name` (`.` or empty: the root), type `qtype`, class IN; `id` tells
/// our answer from a stray one.
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    q
}

/// The RCODE of a response to query `id`; None when `reply` is not one.
pub fn rcode(reply: &[u8], id: u16) -> Option<u8> {
    let head = reply.get(..12)?;
    let is_response = head[2] & 0x80 != 0;
    (u16::from_be_bytes([head[0], head[1]]) == id && is_response).then_some(head[3] & 0x0f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uplink_query_asks_the_root_for_ns_with_recursion() {
        let q = query(0xbeef, ".", NS);
        assert_eq!(&q[..4], &[0xbe, 0xef, 0x01, 0x00]);
        assert_eq!(&q[4..6], &[0, 1], "one question");
        assert_eq!(&q[12..], &[0, 0, 2, 0, 1], "root, NS, IN");
    }

    #[test]
    fn dns_query_and_rcode() {
        let q = query(0x1234, "example.com.", A);
        assert_eq!(
            q,
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
        );
        let mut reply = q.clone();
        reply[2] |= 0x80;
        assert_eq!(rcode(&reply, 0x1234), Some(0));
        reply[3] = 0x83;
        assert_eq!(rcode(&reply, 0x1234), Some(3));
        assert_eq!(rcode(&reply, 0x1235), None, "another query's answer");
        assert_eq!(rcode(&q, 0x1234), None, "a query is not an answer");
    }
}
