//! The links with what a flowtable needs to know of them: kind, bridge master, VLAN parent,
//! and the devices PPPoE sessions run over.

use super::RouteError;
use super::codec::link::{self, Link};
use super::socket::{RouteSocket, skipped};

/// What kind of device a link is, as far as resolving it to real devices goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkKind {
    /// A bridge: its traffic enters through its ports.
    Bridge,
    /// An 802.1Q/802.1ad VLAN on top of its parent.
    Vlan,
    /// A PPP device (PPPoE, or another PPP transport).
    Ppp,
    /// Anything else: a device in its own right.
    Other,
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkInfo {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Its kind.
    pub kind: LinkKind,
    /// The bridge (or other master) it is a port of.
    pub master: Option<u32>,
    /// The parent of a VLAN (`IFLA_LINK`; only read for VLANs, a veth's names its peer).
    pub parent: Option<u32>,
}

/// Every link, and the devices PPPoE sessions run over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LinkTable {
    /// Links, sorted by index (interface indexes are unique).
    pub links: Vec<LinkInfo>,
    /// Devices carrying a PPPoE session (`/proc/net/pppoe`), sorted. The kernel does not
    /// tell which PPP unit a session belongs to; a router runs one or two sessions.
    pub pppoe_devices: Vec<String>,
}

impl RouteSocket {
    /// The links of the socket's namespace, with the PPPoE devices of the calling thread's
    /// namespace (the same one when the socket was opened there).
    pub async fn link_table(&self) -> Result<LinkTable, RouteError> {
        let mut links = self
            .dump(link::put_dump, |links: &mut Vec<_>, kind, body| {
                if kind == link::RTM_NEWLINK {
                    match link::parse(body) {
                        Ok(link) => links.extend(link_info(link)),
                        Err(e) => skipped(e),
                    }
                }
            })
            .await?;
        links.sort();
        // This thread's namespace (`/proc/net` is the process's), empty without PPPoE.
        let pppoe = std::fs::read_to_string("/proc/thread-self/net/pppoe")
            .or_else(|_| std::fs::read_to_string("/proc/net/pppoe"))
            .unwrap_or_default();
        Ok(LinkTable {
            links,
            pppoe_devices: pppoe_devices(&pppoe),
        })
    }
}

fn link_info(link: Link) -> Option<LinkInfo> {
    let kind = match link.kind.as_deref() {
        Some("bridge") => LinkKind::Bridge,
        Some("vlan") => LinkKind::Vlan,
        Some("ppp") => LinkKind::Ppp,
        _ if link.ppp => LinkKind::Ppp,
        _ => LinkKind::Other,
    };
    Some(LinkInfo {
        index: link.index,
        name: link.name?,
        kind,
        master: link.master,
        parent: link.lower.filter(|_| kind == LinkKind::Vlan),
    })
}

/// The device column of `/proc/net/pppoe` (`Id Address Device`), sorted, deduplicated.
pub fn pppoe_devices(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pppoe_devices_are_read_from_the_device_column() {
        let text = "Id       Address              Device\n\
                    00000001 00:11:22:33:44:55    eth1\n\
                    00000002 00:11:22:33:44:66    eth1\n\
                    00000003 00:11:22:33:44:77    eth0.7\n";
        assert_eq!(pppoe_devices(text), ["eth0.7", "eth1"]);
        assert!(pppoe_devices("Id       Address              Device\n").is_empty());
        assert!(pppoe_devices("").is_empty());
    }
}
