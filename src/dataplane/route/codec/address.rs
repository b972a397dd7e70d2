//! Addresses (`struct ifaddrmsg` and its attributes): the `RTM_GETADDR` dump request, and an
//! address read back as its interface and `ADDR/LEN`.

use ipnet::IpNet;

use super::Malformed;
use super::header::{self, NLM_F_DUMP};
use super::nla::{Attrs, as_addr, put_u32, u32_at};

/// `RTM_NEWADDR`.
pub const RTM_NEWADDR: u16 = 20;
/// `RTM_DELADDR`.
pub const RTM_DELADDR: u16 = 21;
/// `RTM_GETADDR`.
pub const RTM_GETADDR: u16 = 22;
const IFADDRMSG_LEN: usize = 8;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;

/// Appends the `RTM_GETADDR` dump request (every address of both families).
pub fn put_dump(buf: &mut Vec<u8>, seq: u32) {
    let start = header::begin(buf, RTM_GETADDR, NLM_F_DUMP, seq);
    put_u32(buf, 0);
    put_u32(buf, 0);
    header::end(buf, start);
}

/// The interface index and `ADDR/LEN` of an address message body: the local address
/// (`IFA_LOCAL`) of a point-to-point link (PPP), not its peer's (`IFA_ADDRESS`), and
/// `IFA_ADDRESS` otherwise (the kernel sends only that for IPv6). `None` when it has neither.
pub fn parse(body: &[u8]) -> Result<Option<(u32, IpNet)>, Malformed> {
    if body.len() < IFADDRMSG_LEN {
        return Err(Malformed("ifaddrmsg"));
    }
    let (prefix_len, index) = (body[1], u32_at(body, 4));
    let (mut local, mut address) = (None, None);
    for attr in Attrs::new(&body[IFADDRMSG_LEN..]) {
        let (kind, value) = attr?;
        match kind {
            IFA_LOCAL => local = Some(as_addr(value)?),
            IFA_ADDRESS => address = Some(as_addr(value)?),
            _ => {}
        }
    }
    match local.or(address) {
        Some(ip) => IpNet::new(ip, prefix_len)
            .map(|net| Some((index, net)))
            .map_err(|_| Malformed("address prefix length")),
        None => Ok(None),
    }
}
