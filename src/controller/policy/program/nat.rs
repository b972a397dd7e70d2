//! `[[policy.nat]]`: source NAT of the connections an entry selects (SNAT, masquerade, or
//! `accept`: none), in config order, before the zones' masquerade and SNAT (fw4's order).

use crate::config::policy::{NatAction, PolicyConfig};
use crate::dataplane::nft::ir::*;

use super::super::rule_match::rule_matches;
use super::{Builder, NFPROTO_IPV4, NFPROTO_IPV6, POSTROUTING};

impl Builder {
    /// Each entry a group: its rule-like match in the postrouting chain (the outgoing zone
    /// by its interfaces and networks), never through `lo`, counted, then the translation.
    /// An SNAT to an address applies to that address's IP version only.
    pub(super) fn nat_rules(&mut self, cfg: &PolicyConfig) {
        for n in &cfg.nat {
            self.group(format!("nat {}", n.name), false);
            let version = match n.action {
                NatAction::Snat { address, .. } if address.is_ipv4() => Some(IpVersion::V4),
                NatAction::Snat { .. } => Some(IpVersion::V6),
                NatAction::Masquerade | NatAction::Accept => None,
            };
            let last = match n.action {
                NatAction::Snat { address, port } => Stmt::Nat {
                    kind: NatKind::Snat,
                    addr: address,
                    port,
                },
                NatAction::Masquerade => Stmt::Masquerade,
                NatAction::Accept => Stmt::Verdict(Verdict::Accept),
            };
            for (_, matches) in rule_matches(cfg, &n.matches, true) {
                for m in matches {
                    let nfproto = match (m.version, version) {
                        (Some(v), Some(w)) if v != w => continue,
                        (None, Some(IpVersion::V4)) => Some(NFPROTO_IPV4),
                        (None, Some(IpVersion::V6)) => Some(NFPROTO_IPV6),
                        _ => None,
                    };
                    let mut stmts = super::leaving_zone(nfproto, m.stmts);
                    stmts.push(last.clone());
                    self.rule(POSTROUTING, stmts);
                }
            }
        }
    }
}
