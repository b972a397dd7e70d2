//! `set_dscp`: rules that rewrite the DSCP of the packets they match, at mangle priority in
//! the chain of the packets' path, where fw4 puts its DSCP target: `mangle_forward` for a
//! rule into a zone, `mangle_input` for one to the router, `mangle_output` for the router's
//! own traffic, and `mangle_prerouting` (shared with `set_mark`) for one with no `to`,
//! whose packets may be forwarded or the router's.

use crate::config::policy::{Destination, PolicyConfig, Source};
use crate::dataplane::nft::ir::*;

use super::super::rule_match::rule_matches;
use super::Builder;
use super::marks::{MANGLE_PREROUTING, MANGLE_PRIORITY};

/// The forward chain of `set_dscp` (filter, priority -150): present only when needed, as
/// are the two below.
pub const MANGLE_FORWARD: &str = "mangle_forward";
/// The input chain of `set_dscp` (filter, priority -150).
pub const MANGLE_INPUT: &str = "mangle_input";
/// The output chain of `set_dscp` (route, priority -150: a new DSCP can change the route,
/// which a route chain looks up again).
pub const MANGLE_OUTPUT: &str = "mangle_output";

impl Builder {
    /// Every rule with `set_dscp`, in config order: its match, then the new DSCP (counted),
    /// one rule per IP version (`ip dscp set`, `ip6 dscp set`) the rest of it allows.
    pub(super) fn set_dscps(&mut self, cfg: &PolicyConfig) {
        for r in cfg.rules.iter().filter(|r| r.set_dscp.is_some()) {
            let dscp = u32::from(r.set_dscp.expect("filtered"));
            let (chain, hook, kind, sees_oif) = match (&r.matches.from, &r.matches.to) {
                (Source::Router, _) => (MANGLE_OUTPUT, Hook::Output, ChainType::Route, true),
                (_, Destination::Router) => (MANGLE_INPUT, Hook::Input, ChainType::Filter, false),
                (_, Destination::Zone(_)) => {
                    (MANGLE_FORWARD, Hook::Forward, ChainType::Filter, true)
                }
                (_, Destination::Any) => (
                    MANGLE_PREROUTING,
                    Hook::Prerouting,
                    ChainType::Filter,
                    false,
                ),
            };
            if !self.p.table.chains.iter().any(|c| c.name == chain) {
                self.p.table.chains.push(Chain::base(
                    chain,
                    kind,
                    hook,
                    MANGLE_PRIORITY,
                    ChainPolicy::Accept,
                ));
            }
            self.group(format!("dscp {}", r.name), false);
            for (_, matches) in rule_matches(cfg, &r.matches, sees_oif) {
                for m in matches {
                    let fields = match m.version {
                        Some(IpVersion::V4) => &[Field::IpDscp][..],
                        Some(IpVersion::V6) => &[Field::Ip6Dscp][..],
                        None => &[Field::IpDscp, Field::Ip6Dscp][..],
                    };
                    for field in fields {
                        // Counted after the write: behind its `meta nfproto`, so each
                        // version's rule counts only its own packets.
                        let mut stmts = m.stmts.clone();
                        stmts.push(Stmt::FieldSet {
                            field: *field,
                            value: dscp,
                        });
                        stmts.push(Stmt::Counter);
                        self.rule(chain, stmts);
                    }
                }
            }
        }
    }
}
