//! `action = "notrack"` (fw4's `target NOTRACK`): rules whose packets conntrack never sees,
//! in chains of priority `raw`, which run before conntrack: `raw_prerouting` for traffic
//! arriving at the router, `raw_output` for the router's own (fw4's two raw chains).

use crate::config::policy::{PolicyConfig, Source};
use crate::dataplane::nft::ir::*;

use super::super::rule_match::rule_matches;
use super::Builder;

/// The notrack chain of arriving traffic (filter, hook prerouting, priority -300): present
/// only when some rule needs it, as is [`RAW_OUTPUT`].
pub const RAW_PREROUTING: &str = "raw_prerouting";
/// The notrack chain of the router's own traffic (filter, hook output, priority -300).
pub const RAW_OUTPUT: &str = "raw_output";

/// `raw`: before conntrack (-200) takes the packet.
const RAW_PRIORITY: i32 = -300;

impl Builder {
    /// Every notrack rule, in config order: its match, counted, then `notrack`. Before
    /// routing nothing knows the way out, so a notrack rule has no `to` (config refuses one).
    pub(super) fn notracks(&mut self, cfg: &PolicyConfig) {
        for r in cfg.rules.iter().filter(|r| r.notrack) {
            let (chain, hook) = match r.matches.from {
                Source::Router => (RAW_OUTPUT, Hook::Output),
                _ => (RAW_PREROUTING, Hook::Prerouting),
            };
            if !self.p.table.chains.iter().any(|c| c.name == chain) {
                self.p.table.chains.push(Chain::base(
                    chain,
                    ChainType::Filter,
                    hook,
                    RAW_PRIORITY,
                    ChainPolicy::Accept,
                ));
            }
            self.group(format!("notrack {}", r.name), false);
            for (_, matches) in rule_matches(cfg, &r.matches, false) {
                for m in matches {
                    let mut stmts = m.stmts;
                    stmts.push(Stmt::Counter);
                    stmts.push(Stmt::Notrack);
                    self.rule(chain, stmts);
                }
            }
        }
    }
}
