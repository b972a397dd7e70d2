//! `flow_offload`: the flowtable over the zones' devices and the forward-chain rule that
//! offloads established connections to it.
//!
//! # Which devices
//!
//! A flowtable hooks the *ingress* of real devices: the kernel's forward path lookup
//! (`dev_fill_forward_path`) walks from the route's device down to the device packets
//! arrive on, and offloads a connection only when that device is in the flowtable. So a
//! zone's interface resolves to:
//! - a bridge: its ports (each resolved in turn);
//! - a VLAN: its parent;
//! - a PPP device: itself (for PPP without an Ethernet below it) and the devices PPPoE
//!   sessions run over (the kernel does not say which session a PPP unit carries);
//! - anything else: itself.
//!
//! Only links that exist at planning time can be listed (the kernel refuses a flowtable
//! naming a missing device), so a wildcard (`ppp*`) covers the matching links of the moment.
//! A link that appears, goes or changes bridge later wakes the policy loop (its address
//! watch follows link events), which plans again and rewrites the table with the new device
//! list.

use std::collections::BTreeSet;

use crate::config::policy::{PolicyConfig, Zone};
use crate::dataplane::nft::ir::*;
use crate::dataplane::route::{LinkKind, LinkTable};

use super::{Builder, FORWARD};

/// Name of the flowtable.
pub const FLOWTABLE: &str = "ft";
/// Label of its rule group.
pub const GROUP_LABEL: &str = "flow-offload";
/// How deep device stacking is followed (a VLAN on a bridge on a bond is three).
const MAX_DEPTH: usize = 8;

/// The devices the flowtable of `zones` hooks, given the links of the moment: sorted,
/// without duplicates, never `lo`.
pub fn flowtable_devices<'a>(
    zones: impl IntoIterator<Item = &'a Zone>,
    links: &LinkTable,
) -> Vec<String> {
    let zones: Vec<&Zone> = zones.into_iter().collect();
    let mut out = BTreeSet::new();
    for link in &links.links {
        if link.name != "lo" && zones.iter().any(|z| z.has_interface(&link.name)) {
            resolve(links, link.index, 0, &mut out);
        }
    }
    out.into_iter().collect()
}

fn resolve(links: &LinkTable, index: u32, depth: usize, out: &mut BTreeSet<String>) {
    let Some(link) = links.links.iter().find(|l| l.index == index) else {
        return;
    };
    if depth > MAX_DEPTH {
        return;
    }
    match link.kind {
        LinkKind::Bridge => {
            for port in links.links.iter().filter(|l| l.master == Some(index)) {
                resolve(links, port.index, depth + 1, out);
            }
        }
        LinkKind::Vlan => match link.parent {
            Some(p) => resolve(links, p, depth + 1, out),
            None => {
                out.insert(link.name.clone());
            }
        },
        LinkKind::Ppp => {
            out.insert(link.name.clone());
            for dev in &links.pppoe_devices {
                if let Some(l) = links.links.iter().find(|l| &l.name == dev) {
                    resolve(links, l.index, depth + 1, out);
                }
            }
        }
        LinkKind::Other => {
            out.insert(link.name.clone());
        }
    }
}

/// The forward-chain rule that offloads a connection: established TCP and UDP (what the
/// kernel offloads), counted so the counter shows how much still takes the slow path.
pub fn offload_rule() -> Vec<Stmt> {
    vec![
        Stmt::Flags {
            left: Expr::Ct(CtKey::State),
            bits: Value::CtState(CT_STATE_ESTABLISHED),
            negate: false,
        },
        Stmt::Lookup {
            left: Expr::Meta(MetaKey::L4Proto),
            set: SetRef::Anonymous {
                key: KeyType::single(DataType::InetProto),
                interval: false,
                elements: [6u8, 17]
                    .into_iter()
                    .map(|p| Element::key(ElemKey::Value(Value::Proto(p))))
                    .collect(),
                data: None,
            },
            negate: false,
        },
        Stmt::Counter,
        Stmt::FlowOffload(FLOWTABLE.into()),
    ]
}

impl Builder {
    /// With `flow_offload`: the flowtable over the zones' devices and the offload rule, one
    /// group (so a kernel without flowtables refuses both and keeps everything else). The
    /// rule goes right before the forward chain's established accept: a packet accepted by
    /// a rule never reaches a later one, and every established packet there belongs to a
    /// connection whose first packets the forward chain accepted. Nothing when no zone
    /// interface exists yet (a flowtable without devices offloads nothing).
    pub(super) fn flow_offload(&mut self, cfg: &PolicyConfig, links: &LinkTable) {
        if !cfg.flow_offload {
            return;
        }
        let devices = flowtable_devices(cfg.zones.values(), links);
        if devices.is_empty() {
            return;
        }
        self.group(GROUP_LABEL.into(), false);
        self.p.table.flowtables.push(Flowtable {
            name: FLOWTABLE.into(),
            priority: 0,
            devices,
            hw_offload: cfg.flow_offload_hw,
        });
        self.p.flowtable_groups.push(self.group);
        self.rule(FORWARD, offload_rule());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::Family;
    use crate::dataplane::route::LinkInfo;

    fn zone(interfaces: &[&str]) -> Zone {
        Zone {
            name: "z".into(),
            interfaces: interfaces.iter().map(|s| s.to_string()).collect(),
            excluded_interfaces: Vec::new(),
            networks: Vec::new(),
            masked_networks: Vec::new(),
            family: Family::Any,
            masquerade: false,
            masquerade6: false,
            mtu_fix: false,
            log_drops: false,
            log_limit: None,
            snat: Vec::new(),
            helpers: Vec::new(),
            masq_src: Vec::new(),
            masq_dest: Vec::new(),
            masq_allow_invalid: false,
        }
    }

    fn link(
        index: u32,
        name: &str,
        kind: LinkKind,
        master: Option<u32>,
        parent: Option<u32>,
    ) -> LinkInfo {
        LinkInfo {
            index,
            name: name.into(),
            kind,
            master,
            parent,
        }
    }

    /// A typical router: br-lan over two ports, a VLAN on eth1, PPPoE on eth2, a WireGuard
    /// tunnel, loopback.
    fn router() -> LinkTable {
        use LinkKind::*;
        LinkTable {
            links: vec![
                link(1, "lo", Other, None, None),
                link(2, "lan1", Other, Some(10), None),
                link(3, "lan2", Other, Some(10), None),
                link(4, "eth1", Other, None, None),
                link(5, "eth1.7", Vlan, None, Some(4)),
                link(6, "eth2", Other, None, None),
                link(7, "ppp0", Ppp, None, None),
                link(8, "wg0", Other, None, None),
                link(9, "br-lan.10", Vlan, None, Some(10)),
                link(10, "br-lan", Bridge, None, None),
                link(11, "eth3", Other, None, None),
            ],
            pppoe_devices: vec!["eth2".into()],
        }
    }

    #[test]
    fn a_bridge_resolves_to_its_ports() {
        assert_eq!(
            flowtable_devices([&zone(&["br-lan"])], &router()),
            ["lan1", "lan2"]
        );
    }

    #[test]
    fn a_vlan_resolves_to_its_parent_and_a_vlan_on_a_bridge_to_the_ports() {
        assert_eq!(flowtable_devices([&zone(&["eth1.7"])], &router()), ["eth1"]);
        assert_eq!(
            flowtable_devices([&zone(&["br-lan.10"])], &router()),
            ["lan1", "lan2"]
        );
    }

    #[test]
    fn pppoe_resolves_to_the_session_device_and_keeps_the_ppp_unit() {
        assert_eq!(
            flowtable_devices([&zone(&["ppp*"])], &router()),
            ["eth2", "ppp0"]
        );
    }

    #[test]
    fn wildcards_take_the_links_that_exist_and_duplicates_and_lo_go() {
        let wan = zone(&["eth*", "wg*", "lo", "missing0"]);
        let lan = zone(&["br-lan", "lan1"]);
        assert_eq!(
            flowtable_devices([&wan, &lan], &router()),
            ["eth1", "eth2", "eth3", "lan1", "lan2", "wg0"]
        );
        assert!(flowtable_devices([&zone(&["missing*"])], &router()).is_empty());
    }

    #[test]
    fn a_zone_of_networks_only_adds_no_device() {
        let mut z = zone(&[]);
        z.networks = vec!["10.0.0.0/8".parse().unwrap()];
        assert!(flowtable_devices([&z], &router()).is_empty());
    }

    #[test]
    fn a_bridge_loop_does_not_recurse_forever() {
        use LinkKind::*;
        let t = LinkTable {
            links: vec![
                link(1, "a", Bridge, Some(2), None),
                link(2, "b", Bridge, Some(1), None),
            ],
            pppoe_devices: Vec::new(),
        };
        assert!(flowtable_devices([&zone(&["a"])], &t).is_empty());
    }
}
