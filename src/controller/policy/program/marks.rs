//! `set_mark`: rules that mark packets in a prerouting chain at mangle priority, before the
//! routing decision, so `[[route_rule]] fwmark` can choose the route. (A mark set in the
//! forward chain would come after routing: too late to steer anything.)

use crate::config::policy::{PolicyConfig, PolicyRule};
use crate::dataplane::nft::ir::*;

use super::super::rule_match::rule_matches;
use super::Builder;

/// The marking chain (filter, hook prerouting, priority -150 as iptables' mangle table):
/// present only when some rule has `set_mark`.
pub const MANGLE_PREROUTING: &str = "mangle_prerouting";

/// Priority of [`MANGLE_PREROUTING`]: after conntrack (-200), before DNAT (-100).
pub(super) const MANGLE_PRIORITY: i32 = -150;

impl Builder {
    /// Every rule with `set_mark`, in config order: its match (source, destination
    /// addresses, protocol and ports), counted, then the mark set.
    pub(super) fn set_marks(&mut self, cfg: &PolicyConfig) {
        let marking: Vec<&PolicyRule> = cfg.rules.iter().filter(|r| r.set_mark.is_some()).collect();
        if marking.is_empty() {
            return;
        }
        self.p.table.chains.push(Chain::base(
            MANGLE_PREROUTING,
            ChainType::Filter,
            Hook::Prerouting,
            MANGLE_PRIORITY,
            ChainPolicy::Accept,
        ));
        for r in marking {
            let mark = r.set_mark.expect("filtered");
            self.group(format!("mark {}", r.name), false);
            // Before routing: no outgoing interface, so no `to` zone (the config refuses one).
            for (_, matches) in rule_matches(cfg, &r.matches, false) {
                for m in matches {
                    let mut stmts = m.stmts;
                    stmts.push(Stmt::Counter);
                    let (and, xor) = mark.bitwise();
                    stmts.push(Stmt::MetaMarkSet { and, xor });
                    self.rule(MANGLE_PREROUTING, stmts);
                }
            }
        }
    }
}
