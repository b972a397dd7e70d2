//! `[[policy.port_forward]]` with `to = "self"`: fw4's redirect to the router itself — the
//! zone's traffic on those ports, to any address (or to `to_addresses` only), DNATed to the
//! router's address on the incoming interface (`redirect`), and admitted by the input chain.

use crate::config::policy::{PolicyConfig, Protocol, Redirect};
use crate::controller::marks::OWN_DNAT_MARK;
use crate::dataplane::nft::ir::*;

use super::super::matches::{Match, address_matches, combine, port_span, zone_match};
use super::{Builder, INPUT, PREROUTING};

/// The match of one protocol on `ports` (first, last), or of every port of it.
fn l4(protocol: Protocol, ports: Option<(u16, u16)>) -> Stmt {
    let (proto, field) = if protocol == Protocol::Udp {
        (17, Field::UdpDport)
    } else {
        (6, Field::TcpDport)
    };
    match ports {
        Some((a, b)) => port_span(field, a, b),
        None => Stmt::Cmp {
            left: Expr::Meta(MetaKey::L4Proto),
            op: CmpOp::Eq,
            right: Value::Proto(proto),
        },
    }
}

impl Builder {
    /// One redirect: in prerouting, the `from` zone's traffic of each protocol on the ports
    /// (from `from_addresses`, to `to_addresses` when given) is counted, marked as
    /// edgenetd's DNAT ([`OWN_DNAT_MARK`]) and redirected; in input, connections so
    /// redirected from the zone, on the router's port they now have, are accepted (as
    /// fw4's "Accept port redirections"), after the rules.
    pub(super) fn redirect(&mut self, cfg: &PolicyConfig, r: &Redirect) {
        self.group(format!("redirect {}", r.name), false);
        let zone = combine(
            &zone_match(&cfg.zones[&r.from], true),
            &address_matches(&cfg.sets, true, &r.from_addresses),
        );
        let selected = combine(&zone, &address_matches(&cfg.sets, false, &r.to_addresses));
        // After the redirect the destination port is the router's.
        let landed = r.to_port.map(|p| (p, p)).or(r.ports);
        for protocol in r.protocol.each() {
            let on_ports = Match {
                stmts: vec![l4(protocol, r.ports)],
                version: None,
            };
            for m in combine(&selected, std::slice::from_ref(&on_ports)) {
                let mut stmts = m.stmts;
                stmts.extend([
                    Stmt::Counter,
                    Stmt::CtMarkOr(OWN_DNAT_MARK),
                    Stmt::Redirect { port: r.to_port },
                ]);
                self.rule(PREROUTING, stmts);
            }
            let admitted = Match {
                stmts: vec![
                    Stmt::Flags {
                        left: Expr::Ct(CtKey::Status),
                        bits: Value::CtStatus(CT_STATUS_DNAT),
                        negate: false,
                    },
                    Stmt::Flags {
                        left: Expr::Ct(CtKey::Mark),
                        bits: Value::Mark(OWN_DNAT_MARK),
                        negate: false,
                    },
                    l4(protocol, landed),
                ],
                version: None,
            };
            for m in combine(&zone, std::slice::from_ref(&admitted)) {
                let mut stmts = m.stmts;
                stmts.extend([Stmt::Counter, Stmt::Verdict(Verdict::Accept)]);
                self.rule(INPUT, stmts);
            }
        }
    }
}
