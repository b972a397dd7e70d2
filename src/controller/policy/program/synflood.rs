//! `synflood_protect` (fw4's default of that name): TCP SYNs to the router over a rate are
//! dropped, in a chain of their own as fw4 renders it, so a flood of new connections cannot
//! swamp the router's own services. Forwarded traffic is not limited (fw4 neither).

use crate::config::policy::PolicyConfig;
use crate::dataplane::nft::ir::*;

use super::{Builder, INPUT, rate_unit};

/// The regular chain the input chain jumps to for every SYN.
pub const SYN_FLOOD: &str = "syn_flood";

/// `fin | syn | rst | ack`: a SYN is a packet with these bits `syn` only.
const SYN_MASK: u8 = TCP_FIN | TCP_SYN | TCP_RST | TCP_ACK;

impl Builder {
    /// The input chain's jump for SYNs (after established/related and invalid, before the
    /// rules: nothing the rules accept escapes the limit) and the chain: under the rate,
    /// back to input; over it, counted and dropped.
    pub(super) fn synflood(&mut self, cfg: &PolicyConfig) {
        let Some(flood) = cfg.synflood else {
            return;
        };
        self.group("synflood".into(), true);
        self.p.table.chains.push(Chain::regular(SYN_FLOOD));
        self.rule(
            INPUT,
            vec![
                Stmt::MaskedCmp {
                    left: Expr::Payload(Field::TcpFlags),
                    mask: Value::TcpFlags(SYN_MASK),
                    right: Value::TcpFlags(TCP_SYN),
                },
                Stmt::Verdict(Verdict::Jump(SYN_FLOOD.into())),
            ],
        );
        self.rule(
            SYN_FLOOD,
            vec![
                Stmt::Limit {
                    rate: flood.rate.count,
                    unit: rate_unit(flood.rate),
                    burst: flood.burst,
                    over: false,
                },
                Stmt::Verdict(Verdict::Return),
            ],
        );
        self.rule(SYN_FLOOD, vec![Stmt::Counter, Stmt::Verdict(Verdict::Drop)]);
    }
}
