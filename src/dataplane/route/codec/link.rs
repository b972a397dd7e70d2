//! Links (`struct ifinfomsg` and its attributes): the `RTM_GETLINK` dump request, and what
//! edgenetd reads of a link (dumped or notified): index, name, kind, master, lower device.

use super::Malformed;
use super::header::{self, NLM_F_DUMP};
use super::nla::{Attrs, as_string, as_u32, put_u32, u16_at, u32_at};

/// `RTM_NEWLINK`.
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`.
pub const RTM_DELLINK: u16 = 17;
/// `RTM_GETLINK`.
pub const RTM_GETLINK: u16 = 18;
const IFINFOMSG_LEN: usize = 16;
const IFLA_LINK: u16 = 5;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
/// `ARPHRD_PPP`: a PPP device, whatever created it.
const ARPHRD_PPP: u16 = 512;

/// What edgenetd reads of one link message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// `ifi_index`.
    pub index: u32,
    /// `IFLA_IFNAME`, when the message carries it.
    pub name: Option<String>,
    /// True for `ARPHRD_PPP`.
    pub ppp: bool,
    /// `IFLA_LINKINFO`'s `IFLA_INFO_KIND` (e.g. "bridge", "vlan"), for virtual devices.
    pub kind: Option<String>,
    /// `IFLA_MASTER`: the bridge (or bond, VRF) it is a port of.
    pub master: Option<u32>,
    /// `IFLA_LINK`: the lower device (a VLAN's parent; a veth's peer).
    pub lower: Option<u32>,
}

/// Appends the `RTM_GETLINK` dump request (every link).
pub fn put_dump(buf: &mut Vec<u8>, seq: u32) {
    let start = header::begin(buf, RTM_GETLINK, NLM_F_DUMP, seq);
    buf.extend_from_slice(&[0; IFINFOMSG_LEN - 4]);
    put_u32(buf, 0);
    header::end(buf, start);
}

/// The index of a link message body (`RTM_NEWLINK`/`RTM_DELLINK`) and what else edgenetd
/// reads of it; every other attribute (statistics, VF info, ...) is skipped unread.
pub fn parse(body: &[u8]) -> Result<Link, Malformed> {
    if body.len() < IFINFOMSG_LEN {
        return Err(Malformed("ifinfomsg"));
    }
    let mut link = Link {
        index: u32_at(body, 4),
        ppp: u16_at(body, 2) == ARPHRD_PPP,
        ..Link::default()
    };
    for attr in Attrs::new(&body[IFINFOMSG_LEN..]) {
        let (kind, value) = attr?;
        match kind {
            IFLA_IFNAME => link.name = Some(as_string(value)?),
            IFLA_MASTER => link.master = Some(as_u32(value)?),
            IFLA_LINK => link.lower = Some(as_u32(value)?),
            IFLA_LINKINFO => {
                for info in Attrs::new(value) {
                    let (kind, value) = info?;
                    if kind == IFLA_INFO_KIND {
                        link.kind = Some(as_string(value)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(link)
}
