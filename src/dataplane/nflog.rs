//! Packets a rule sent to an nflog group (`log group N`), read over netlink
//! (`NETLINK_NETFILTER`, the `NFNL_SUBSYS_ULOG` subsystem) by the daemon itself, without
//! ulogd: the rule's prefix, the hook, the interfaces and the packet's addresses, protocol and
//! ports. nflog groups are per network namespace; one socket per group may bind it.
// Its raw netlink socket (socket, bind, sendto, recv, setsockopt, close) is libc; each call
// says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::net::IpAddr;

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_ULOG: u16 = 4;
const NFULNL_MSG_PACKET: u16 = 0;
const NFULNL_MSG_CONFIG: u16 = 1;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NFULA_CFG_CMD: u16 = 1;
const NFULA_CFG_MODE: u16 = 2;
const NFULNL_CFG_CMD_BIND: u8 = 1;
const NFULNL_COPY_PACKET: u8 = 2;
const NFULA_PACKET_HDR: u16 = 1;
const NFULA_IFINDEX_INDEV: u16 = 4;
const NFULA_IFINDEX_OUTDEV: u16 = 5;
const NFULA_PAYLOAD: u16 = 9;
const NFULA_PREFIX: u16 = 10;
/// Bytes of each packet copied: the IP header with options and the ports behind it.
const COPY_RANGE: u32 = 128;
/// The socket's receive buffer: a burst of drops waits here while the daemon reads.
const RCVBUF: i32 = 1 << 20;

/// One packet as nflog delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// The rule's log prefix.
    pub prefix: String,
    /// The netfilter hook (0 prerouting, 1 input, 2 forward, 3 output, 4 postrouting).
    pub hook: u8,
    /// The interface it came in on (an index; 0 = none).
    pub in_if: u32,
    /// The interface it was to leave by (an index; 0 = none).
    pub out_if: u32,
    /// Its addresses, protocol and ports (`None` when the payload is no IP packet).
    pub flow: Option<Flow>,
}

/// A packet's 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// The IP protocol number.
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source and destination ports (TCP, UDP, SCTP; `None` for other protocols).
    pub ports: Option<(u16, u16)>,
}

/// A socket bound to one nflog group.
pub struct Listener {
    fd: i32,
    buf: Vec<u8>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

impl Listener {
    /// Binds nflog group `group` of this thread's network namespace and asks for the first
    /// `COPY_RANGE` bytes of each packet. Fails with `EBUSY` when another socket has it.
    pub fn bind(group: u16) -> io::Result<Listener> {
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
        let l = Listener {
            fd,
            buf: vec![0u8; 64 * 1024],
        };
        // SAFETY: a valid int option value of the right size on our own socket.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&RCVBUF as *const i32).cast(),
                std::mem::size_of::<i32>() as u32,
            )
        };
        let mut cmd = Vec::new();
        put_attr(&mut cmd, NFULA_CFG_CMD, &[NFULNL_CFG_CMD_BIND]);
        l.config(group, &cmd)?;
        let mut mode = Vec::new();
        let mut m = COPY_RANGE.to_be_bytes().to_vec();
        m.extend_from_slice(&[NFULNL_COPY_PACKET, 0]);
        put_attr(&mut mode, NFULA_CFG_MODE, &m);
        l.config(group, &mode)?;
        Ok(l)
    }

    /// Sends one config message for `group` and waits for its acknowledgement.
    fn config(&self, group: u16, attrs: &[u8]) -> io::Result<()> {
        let mut msg = Vec::new();
        let len = 16 + 4 + attrs.len();
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG).to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        // nfgenmsg: family (unspec), version, res_id (the group, big-endian).
        msg.extend_from_slice(&[0, 0]);
        msg.extend_from_slice(&group.to_be_bytes());
        msg.extend_from_slice(attrs);
        super::netlink_send::to_kernel(self.fd, &msg)?;
        let mut buf = [0u8; 1024];
        // SAFETY: buf is a valid writable buffer.
        let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 20 {
            return Err(io::Error::last_os_error());
        }
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        let code = i32::from_ne_bytes(buf[16..20].try_into().expect("4 bytes"));
        match (ty, code) {
            (NLMSG_ERROR, 0) => Ok(()),
            (NLMSG_ERROR, c) => Err(io::Error::from_raw_os_error(-c)),
            _ => Ok(()),
        }
    }

    /// Blocks until packets arrive; `f` gets each. An overflowed receive buffer (packets
    /// lost) is returned as `ENOBUFS`: the socket stays usable.
    pub fn read(&mut self, f: &mut dyn FnMut(Logged)) -> io::Result<()> {
        // SAFETY: buf is a valid writable buffer.
        let n = unsafe { libc::recv(self.fd, self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let data = &self.buf[..n as usize];
        let mut off = 0;
        while off + 16 <= data.len() {
            let len = u32::from_ne_bytes(data[off..off + 4].try_into().expect("4 bytes")) as usize;
            let ty = u16::from_ne_bytes([data[off + 4], data[off + 5]]);
            if len < 16 || off + len > data.len() {
                break;
            }
            let body = &data[off + 16..off + len];
            off += len.div_ceil(4) * 4;
            if ty == (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET && body.len() >= 4 {
                f(parse_packet(&body[4..]));
            }
        }
        Ok(())
    }
}

/// A packet message's attributes (after the nfgenmsg) as a [`Logged`].
fn parse_packet(attrs_buf: &[u8]) -> Logged {
    let mut out = Logged {
        prefix: String::new(),
        hook: 0,
        in_if: 0,
        out_if: 0,
        flow: None,
    };
    for (ty, v) in attrs(attrs_buf) {
        match ty {
            NFULA_PACKET_HDR if v.len() >= 3 => out.hook = v[2],
            NFULA_IFINDEX_INDEV if v.len() == 4 => {
                out.in_if = u32::from_be_bytes(v.try_into().expect("4 bytes"))
            }
            NFULA_IFINDEX_OUTDEV if v.len() == 4 => {
                out.out_if = u32::from_be_bytes(v.try_into().expect("4 bytes"))
            }
            NFULA_PREFIX => {
                let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
                out.prefix = String::from_utf8_lossy(&v[..end]).into_owned();
            }
            NFULA_PAYLOAD => out.flow = flow(v),
            _ => {}
        }
    }
    out
}

/// The 5-tuple of an IPv4 or IPv6 packet (IPv6 extension headers are not walked: the
/// protocol is then the first next header, without ports).
pub fn flow(p: &[u8]) -> Option<Flow> {
    let version = p.first()? >> 4;
    let (protocol, src, dst, l4) = match version {
        4 if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let src: [u8; 4] = p[12..16].try_into().ok()?;
            let dst: [u8; 4] = p[16..20].try_into().ok()?;
            (p[9], IpAddr::from(src), IpAddr::from(dst), p.get(ihl..))
        }
        6 if p.len() >= 40 => {
            let src: [u8; 16] = p[8..24].try_into().ok()?;
            let dst: [u8; 16] = p[24..40].try_into().ok()?;
            (p[6], IpAddr::from(src), IpAddr::from(dst), p.get(40..))
        }
        _ => return None,
    };
    let ports = match (protocol, l4) {
        (6 | 17 | 132, Some(l4)) if l4.len() >= 4 => Some((
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        )),
        _ => None,
    };
    Some(Flow {
        protocol,
        src,
        dst,
        ports,
    })
}

/// The name of interface `index` (`None` for 0 or one gone).
pub fn if_name(index: u32) -> Option<String> {
    if index == 0 {
        return None;
    }
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: buf holds IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
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

fn put_attr(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().div_ceil(4) * 4, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_message_reads_as_its_prefix_hook_interfaces_and_five_tuple() {
        let mut ip = vec![
            0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 3, 2, 10, 0, 1, 2,
        ];
        ip.extend_from_slice(&[0x9c, 0x40, 0x1f, 0x90, 0, 0, 0, 0]);
        let mut msg = Vec::new();
        put_attr(&mut msg, NFULA_PACKET_HDR, &[0x08, 0x00, 2, 0]);
        put_attr(&mut msg, NFULA_IFINDEX_INDEV, &7u32.to_be_bytes());
        put_attr(&mut msg, NFULA_PREFIX, b"pods ingress\0");
        put_attr(&mut msg, NFULA_PAYLOAD, &ip);
        let l = parse_packet(&msg);
        assert_eq!(
            (l.prefix.as_str(), l.hook, l.in_if, l.out_if),
            ("pods ingress", 2, 7, 0)
        );
        assert_eq!(
            l.flow,
            Some(Flow {
                protocol: 6,
                src: "10.0.3.2".parse().unwrap(),
                dst: "10.0.1.2".parse().unwrap(),
                ports: Some((40000, 8080)),
            })
        );
        let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 58, 64];
        v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
        v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6]);
        let f = flow(&v6).unwrap();
        assert_eq!((f.protocol, f.ports), (58, None), "ICMPv6: no ports");
        assert_eq!(f.dst, "fd00::6".parse::<IpAddr>().unwrap());
        assert_eq!(flow(&[0x45, 0]), None, "truncated");
    }
}
