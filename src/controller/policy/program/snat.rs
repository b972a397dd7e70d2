//! Zone `snat`: traffic leaving through the zone gets a fixed source address instead of
//! the router's address there (masquerade), narrowed by `masq_src` / `masq_dest` as the
//! masquerade is.

use crate::config::policy::PolicyConfig;
use crate::dataplane::nft::ir::*;

use super::super::matches::zone_match;
use super::masq::restriction;
use super::{Builder, NFPROTO_IPV4, NFPROTO_IPV6, POSTROUTING};

impl Builder {
    /// One group per zone with `snat`: for each of its addresses, the zone's outgoing
    /// traffic of that address's IP version (never through `lo`) is SNATed to it.
    pub(super) fn snats(&mut self, cfg: &PolicyConfig) {
        for z in cfg.zones.values().filter(|z| !z.snat.is_empty()) {
            self.group(format!("snat {}", z.name), false);
            for addr in &z.snat {
                let version = if addr.is_ipv4() {
                    IpVersion::V4
                } else {
                    IpVersion::V6
                };
                for m in zone_match(z, false) {
                    // A match that implies the other version never sees this version's
                    // packets; one that implies none needs the family test.
                    let nfproto = match m.version {
                        Some(v) if v != version => continue,
                        Some(_) => None,
                        None if addr.is_ipv4() => Some(NFPROTO_IPV4),
                        None => Some(NFPROTO_IPV6),
                    };
                    let mut selected = m.stmts;
                    selected.extend(restriction(z, version));
                    let mut stmts = super::leaving_zone(nfproto, selected);
                    stmts.push(Stmt::Nat {
                        kind: NatKind::Snat,
                        addr: *addr,
                        port: None,
                    });
                    self.rule(POSTROUTING, stmts);
                }
            }
        }
    }
}
