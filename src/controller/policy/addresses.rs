//! The router's own addresses, by interface. A port forward's reflection (hairpin) applies
//! only to connections addressed to the router's addresses on the forward's `from` zone, and
//! those addresses come and go with the links (DHCP, PPPoE), so they are read from the
//! kernel, and an address or link change wakes the policy loop to plan again. The links
//! themselves are kept too: `flow_offload`'s flowtable lists the devices below the zones'
//! interfaces.

use std::net::IpAddr;

use ipnet::IpNet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use log::{debug, warn};

use crate::config::policy::{PolicyConfig, Zone};
use crate::dataplane::route::{LinkTable, RouteError, RouteEvent, RouteMonitor, RouteSocket};
use crate::sync::Trigger;

/// The router's addresses with the interface each is on, and its links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterAddresses {
    /// (interface name, address), sorted.
    entries: Vec<(String, IpAddr)>,
    /// (interface name, address with its prefix length), sorted: the networks the router is
    /// connected to on each interface (empty unless known).
    connected: Vec<(String, IpNet)>,
    /// The links (empty unless read).
    links: LinkTable,
}

impl RouterAddresses {
    /// From (interface, address) pairs in any order.
    pub fn new(mut entries: Vec<(String, IpAddr)>) -> RouterAddresses {
        entries.sort();
        entries.dedup();
        RouterAddresses {
            entries,
            connected: Vec::new(),
            links: LinkTable::default(),
        }
    }

    /// From (interface, address/prefix length) pairs in any order: the addresses and the
    /// networks they connect the router to.
    pub fn from_networks(mut nets: Vec<(String, IpNet)>) -> RouterAddresses {
        nets.sort();
        nets.dedup();
        let mut out =
            RouterAddresses::new(nets.iter().map(|(i, n)| (i.clone(), n.addr())).collect());
        out.connected = nets;
        out
    }

    /// The same addresses with the link table `links`.
    pub fn with_links(mut self, links: LinkTable) -> RouterAddresses {
        self.links = links;
        self
    }

    /// The links as read (empty when they were not).
    pub fn links(&self) -> &LinkTable {
        &self.links
    }

    /// The router's addresses on zone `z`: those on its interfaces; for a zone of networks
    /// only, those inside its networks (never loopback's).
    pub fn of_zone(&self, z: &Zone) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = self
            .entries
            .iter()
            .filter(|(ifname, addr)| {
                if !z.admits(*addr) {
                    false
                } else if z.interfaces.is_empty() {
                    ifname != "lo"
                        && (z.networks.iter().any(|n| n.contains(addr))
                            || z.masked_networks.iter().any(|m| m.contains(*addr)))
                } else {
                    z.has_interface(ifname)
                }
            })
            .map(|(_, addr)| *addr)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// True when `ip` is a host of zone `z`: inside its networks, or, for a zone of
    /// interfaces only, inside a network the router is connected to on one of them. That is
    /// the zone a port forward to `ip` reflects for by default (fw4's destination zone).
    pub fn zone_holds(&self, z: &Zone, ip: IpAddr) -> bool {
        if !z.admits(ip) {
            return false;
        }
        if !z.networks.is_empty() || !z.masked_networks.is_empty() {
            return z.networks.iter().any(|n| n.contains(&ip))
                || z.masked_networks.iter().any(|m| m.contains(ip));
        }
        self.connected
            .iter()
            .any(|(ifname, net)| ifname != "lo" && z.has_interface(ifname) && net.contains(&ip))
    }
}

/// True when some port forward reflects or flows are offloaded: only then are the
/// addresses and links needed.
pub fn needed(cfg: Option<&PolicyConfig>) -> bool {
    cfg.is_some_and(|c| c.flow_offload || c.port_forwards.iter().any(|pf| pf.reflection))
}

/// Reads every interface's addresses, and the link table, through `socket`.
pub async fn read(socket: &RouteSocket) -> Result<RouterAddresses, RouteError> {
    let table = socket.link_table().await?;
    let name = |index: u32| {
        table
            .links
            .binary_search_by_key(&index, |l| l.index)
            .ok()
            .map(|i| table.links[i].name.clone())
    };
    let nets = socket
        .address_networks()
        .await?
        .into_iter()
        .filter_map(|(index, net)| name(index).map(|n| (n, net)))
        .collect();
    Ok(RouterAddresses::from_networks(nets).with_links(table))
}

/// The addresses as last read, with a kernel-event monitor that marks them stale and wakes
/// the loop when an address or a link changes.
#[derive(Default)]
pub struct AddressWatch {
    /// The socket the addresses are read through (opened on the loop's thread, so in the
    /// daemon's network namespace).
    socket: Option<RouteSocket>,
    /// The last reading; `None` before the first or after a failed one.
    current: Option<RouterAddresses>,
    /// Set by the monitor when the reading may be out of date.
    stale: Arc<AtomicBool>,
    /// The monitor task; `None` until started or when it could not be.
    task: Option<smol::Task<()>>,
}

impl AddressWatch {
    /// The router's addresses, read again when the monitor saw a change (or is not running).
    /// A failed reading is logged and yields no addresses: reflection is then off until the
    /// next successful one (the router's own services are never shadowed).
    pub async fn get(&mut self, trigger: &Trigger) -> RouterAddresses {
        self.ensure_monitor(trigger);
        let monitored = self.task.as_ref().is_some_and(|t| !t.is_finished());
        let stale = self.stale.swap(false, Ordering::SeqCst);
        if let Some(cur) = self.current.as_ref().filter(|_| monitored && !stale) {
            return cur.clone();
        }
        match self.read().await {
            Ok(addrs) => {
                self.current = Some(addrs.clone());
                addrs
            }
            Err(e) => {
                warn!(
                    "policy: cannot read the router's addresses ({e}): reflection and flow offload are off"
                );
                self.socket = None;
                self.current = None;
                RouterAddresses::default()
            }
        }
    }

    async fn read(&mut self) -> Result<RouterAddresses, RouteError> {
        if self.socket.is_none() {
            self.socket = Some(RouteSocket::open()?);
        }
        read(self.socket.as_ref().expect("opened above")).await
    }

    fn ensure_monitor(&mut self, trigger: &Trigger) {
        if self.task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        self.stale.store(true, Ordering::SeqCst);
        // Protocol 0 (unspecified) owns no routes worth reporting; only addresses and links
        // matter here.
        match RouteMonitor::open(0, None) {
            Ok(mut monitor) => {
                let (stale, trigger) = (self.stale.clone(), trigger.clone());
                self.task = Some(smol::spawn(async move {
                    while let Some(event) = monitor.next().await {
                        if matches!(
                            event,
                            RouteEvent::Address { .. }
                                | RouteEvent::Link { .. }
                                | RouteEvent::Overrun
                        ) {
                            debug!("policy: {event:?}: the router's addresses are read again");
                            stale.store(true, Ordering::SeqCst);
                            trigger.fire();
                        }
                    }
                    stale.store(true, Ordering::SeqCst);
                }));
            }
            Err(e) => {
                warn!("policy: cannot watch address changes ({e}): they are read at every sync");
                self.task = None;
            }
        }
    }
}
