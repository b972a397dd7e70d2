//! Conntrack helpers (`[policy] helpers`, zone `helpers`): one `ct helper` object per kernel
//! helper, and a `helpers` chain (filter, prerouting, priority 0: after conntrack and DNAT,
//! as fw4's `helper_<zone>` chains) that attaches them to connections from the zones that
//! ask, on the helper's port. A connection a helper follows (an FTP data connection) is
//! `related`, which the input and forward chains accept.
//!
//! Each declared helper is a group: its objects and its rules. A kernel without the helper
//! refuses the object; the group is left out (its connections get no helper, nothing more
//! is let through) and the sync reports it, while everything else stays programmed.

use crate::config::policy::{PolicyConfig, Protocol};
use crate::dataplane::nft::ir::*;

use super::super::matches::{Match, combine, zone_match};
use super::Builder;

/// The chain that assigns helpers.
pub const HELPERS: &str = "helpers";

/// The object name of kernel helper `kernel` declared as `name` (`helper-ftp`,
/// `helper-h323-Q.931`).
fn object_name(name: &str, kernel: &str) -> String {
    if name == kernel {
        format!("helper-{name}")
    } else {
        format!("helper-{name}-{kernel}")
    }
}

impl Builder {
    /// The declared helpers' objects and the zones' `ct helper set` rules.
    pub(super) fn ct_helpers(&mut self, cfg: &PolicyConfig) {
        if cfg.helpers.is_empty() {
            return;
        }
        self.p.table.chains.push(Chain::base(
            HELPERS,
            ChainType::Filter,
            Hook::Prerouting,
            0,
            ChainPolicy::Accept,
        ));
        for name in &cfg.helpers {
            let Some(ports) = cfg.helper_ports(name) else {
                continue; // validated: never
            };
            self.group(format!("helper {name}"), false);
            for hp in &ports {
                let (protocol, field) = match hp.protocol {
                    Protocol::Udp => (17, Field::UdpDport),
                    _ => (6, Field::TcpDport),
                };
                let object = object_name(name, &hp.kernel);
                self.p.table.ct_helpers.push(CtHelper {
                    name: object.clone(),
                    helper: hp.kernel.to_string(),
                    protocol,
                });
                self.p.helper_groups.push(self.group);
                let port = Match {
                    stmts: vec![Stmt::Cmp {
                        left: Expr::Payload(field),
                        op: CmpOp::Eq,
                        right: Value::Port(hp.port),
                    }],
                    version: None,
                };
                for z in cfg.zones.values().filter(|z| z.helpers.contains(name)) {
                    for m in combine(&zone_match(z, true), std::slice::from_ref(&port)) {
                        let mut stmts = m.stmts;
                        stmts.push(Stmt::CtHelperSet(object.clone()));
                        self.rule(HELPERS, stmts);
                    }
                }
            }
        }
    }
}
