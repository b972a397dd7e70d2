//! Conntrack cleanup over ctnetlink: deleting the UDP flows of a removed service backend, and
//! the masqueraded flows of a failed uplink.
//!
//! UDP has no close: a client that keeps sending to a VIP keeps its conntrack entry, and with
//! it the NAT binding to a backend that is gone. So when a UDP backend loses its slots, its
//! flows for that VIP are deleted (as kube-proxy does): the next packet is a new flow and gets
//! a live backend. TCP needs none of this: established connections drain on their own.
//!
//! The kernel's flush filters cannot match a tuple, so this dumps the table's UDP entries of
//! one family, picks those whose original destination is the VIP and whose reply source is
//! the backend, and deletes each by its original tuple. Blocking; small on an edge router.
// Its raw netlink socket (socket, sendto, recv, close) is libc; each call says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, SocketAddr};

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLA_F_NESTED: u16 = 0x8000;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;

/// Deletes the UDP conntrack entries of flows to `vip:port` that were NATed to `backend`;
/// returns how many were deleted.
pub fn delete_udp_flows(vip: IpAddr, port: u16, backend: SocketAddr) -> io::Result<usize> {
    delete_flows(vip.is_ipv4(), |o, r| {
        o.proto == Some(17)
            && o.dst == Some(vip)
            && o.dport == Some(port)
            && r.src == Some(backend.ip())
            && r.sport == Some(backend.port())
    })
}

/// Deletes the conntrack entries of flows masqueraded to `addr` (their reply goes to `addr`
/// but they did not start there): the NAT bindings of clients behind a failed uplink, so
/// their next packet is a new flow that takes the route in force now. Returns how many.
pub fn delete_masqueraded_flows(addr: IpAddr) -> io::Result<usize> {
    delete_flows(addr.is_ipv4(), |o, r| {
        r.dst == Some(addr) && o.src != Some(addr)
    })
}

/// Dumps the conntrack table of one family and deletes every entry whose original and reply
/// tuples `doomed` picks (an entry gone meanwhile is not an error); returns how many.
fn delete_flows(v4: bool, doomed: impl Fn(&Tuple, &Tuple) -> bool) -> io::Result<usize> {
    let sock = Socket::open()?;
    let family = if v4 { libc::AF_INET } else { libc::AF_INET6 } as u8;
    let mut victims: Vec<Vec<u8>> = Vec::new();
    sock.dump(family, &mut |attrs| {
        let (Some(orig), Some(reply)) = (find(attrs, CTA_TUPLE_ORIG), find(attrs, CTA_TUPLE_REPLY))
        else {
            return;
        };
        if doomed(&Tuple::parse(orig), &Tuple::parse(reply)) {
            victims.push(orig.to_vec());
        }
    })?;
    let mut deleted = 0;
    for orig in victims {
        let mut payload = Vec::new();
        put_attr(&mut payload, CTA_TUPLE_ORIG | NLA_F_NESTED, &orig);
        match sock.request(IPCTNL_MSG_CT_DELETE, family, NLM_F_ACK, &payload) {
            Ok(()) => deleted += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[derive(Default)]
struct Tuple {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    sport: Option<u16>,
    dport: Option<u16>,
}

impl Tuple {
    fn parse(nested: &[u8]) -> Tuple {
        let mut t = Tuple::default();
        for (ty, v) in attrs(nested) {
            match ty {
                CTA_TUPLE_IP => {
                    for (ty, v) in attrs(v) {
                        let addr = match v.len() {
                            4 => <[u8; 4]>::try_from(v).ok().map(IpAddr::from),
                            16 => <[u8; 16]>::try_from(v).ok().map(IpAddr::from),
                            _ => None,
                        };
                        match ty {
                            CTA_IP_V4_SRC | CTA_IP_V6_SRC => t.src = addr,
                            CTA_IP_V4_DST | CTA_IP_V6_DST => t.dst = addr,
                            _ => {}
                        }
                    }
                }
                CTA_TUPLE_PROTO => {
                    for (ty, v) in attrs(v) {
                        match (ty, v.len()) {
                            (CTA_PROTO_NUM, 1) => t.proto = Some(v[0]),
                            (CTA_PROTO_SRC_PORT, 2) => {
                                t.sport = Some(u16::from_be_bytes([v[0], v[1]]))
                            }
                            (CTA_PROTO_DST_PORT, 2) => {
                                t.dport = Some(u16::from_be_bytes([v[0], v[1]]))
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        t
    }
}

/// Iterates the netlink attributes of `buf` as (type without flags, value).
fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        if off + 4 > buf.len() {
            return None;
        }
        let len = u16::from_ne_bytes([buf[off], buf[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([buf[off + 2], buf[off + 3]]) & 0x3fff;
        if len < 4 || off + len > buf.len() {
            return None;
        }
        let v = &buf[off + 4..off + len];
        off += len.div_ceil(4) * 4;
        Some((ty, v))
    })
}

fn find(buf: &[u8], want: u16) -> Option<&[u8]> {
    attrs(buf).find(|(t, _)| *t == want).map(|(_, v)| v)
}

fn put_attr(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().div_ceil(4) * 4, 0);
}

struct Socket {
    fd: i32,
    seq: std::cell::Cell<u32>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

impl Socket {
    fn open() -> io::Result<Socket> {
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Socket {
            fd,
            seq: std::cell::Cell::new(1),
        })
    }

    fn send(&self, msg_type: u16, family: u8, flags: u16, payload: &[u8]) -> io::Result<u32> {
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        let mut msg = Vec::with_capacity(20 + payload.len());
        let len = 16 + 4 + payload.len();
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&((NFNL_SUBSYS_CTNETLINK << 8) | msg_type).to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&[family, 0, 0, 0]); // nfgenmsg: family, version, res_id
        msg.extend_from_slice(payload);
        super::netlink_send::to_kernel(self.fd, &msg)?;
        Ok(seq)
    }

    /// Reads replies to `seq` until done; `f` gets each data message's attributes.
    fn read(&self, seq: u32, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buf is a valid writable buffer.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let data = &buf[..n as usize];
            let mut off = 0;
            while off + 16 <= data.len() {
                let len = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap()) as usize;
                let ty = u16::from_ne_bytes([data[off + 4], data[off + 5]]);
                let flags = u16::from_ne_bytes([data[off + 6], data[off + 7]]);
                let mseq = u32::from_ne_bytes(data[off + 8..off + 12].try_into().unwrap());
                if len < 16 || off + len > data.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "truncated netlink message",
                    ));
                }
                let body = &data[off + 16..off + len];
                off += len.div_ceil(4) * 4;
                if mseq != seq {
                    continue;
                }
                match ty {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let code = i32::from_ne_bytes(body[..4].try_into().unwrap());
                        return if code == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(-code))
                        };
                    }
                    _ => {
                        if body.len() >= 4 {
                            f(&body[4..]);
                        }
                        if flags & 2 == 0 {
                            // not NLM_F_MULTI: a single reply
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    fn dump(&self, family: u8, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let seq = self.send(IPCTNL_MSG_CT_GET, family, NLM_F_DUMP, &[])?;
        self.read(seq, f)
    }

    fn request(&self, msg_type: u16, family: u8, flags: u16, payload: &[u8]) -> io::Result<()> {
        let seq = self.send(msg_type, family, flags, payload)?;
        self.read(seq, &mut |_| {})
    }
}
