//! The daemon's own HTTP listener, exempt from connection tracking on loopback.
//!
//! The service table's NAT chains make the kernel track every connection in the network
//! namespace, the daemon's own probes and scrapes over loopback included: a flood of local
//! connections to /healthz or /metrics then fills the conntrack table, and a full table drops
//! every new forwarded flow of the router (issue 21, item 11). Those connections need no
//! tracking: nothing translates them, and the policy table accepts loopback before any
//! `ct state` match. So the service table carries a `raw`-priority output chain (every
//! loopback packet is tracked at output, before it is received) that marks them `notrack`,
//! both directions, on `lo` only: a scrape from another host is tracked as before (the
//! policy's input chain needs its state).
//!
//! Never when that could change a translation: the chain is left out while any service has
//! the listener's port as its own port or as a backend's (a local client of such a service
//! would otherwise skip its DNAT, or its replies their reverse translation). The table
//! exists only while there are services, so without services, or with the service
//! controller disabled, there is no exemption (the policy table's `ct state` rules still
//! track loopback; the HTTP server's held evictions keep that to one connection per client
//! per head deadline).

use std::net::{IpAddr, SocketAddr};

use crate::dataplane::nft::ir::*;

use super::model::{Entry, Model, VipKey, slots_of};

/// The base chain of the exemption.
pub const CHAIN: &str = "local_notrack";
/// Its priority: `raw`, before conntrack (-200) and the NAT chains (-100).
pub const PRIORITY: i32 = -300;

/// The listener the exemption is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    /// Its address, or None when it listens on every address (`0.0.0.0`, `::`).
    pub addr: Option<IpAddr>,
    /// Its TCP port.
    pub port: u16,
}

/// The exemption for the daemon listening on `listen`, or None when a service of `model`
/// uses its port (as a VIP's port or a backend's).
pub fn of(listen: SocketAddr, model: &Model) -> Option<Local> {
    of_entries(listen, model.iter())
}

/// [`of`] over entries given one by one (a patched model's, without building it).
pub fn of_entries<'a>(
    listen: SocketAddr,
    mut entries: impl Iterator<Item = (&'a VipKey, &'a Entry)>,
) -> Option<Local> {
    let port = listen.port();
    let used = entries.any(|(key, entry)| key.port == port || uses_port(entry, port));
    if used {
        return None;
    }
    let addr = listen.ip();
    Some(Local {
        addr: (!addr.is_unspecified()).then_some(addr.to_canonical()),
        port,
    })
}

/// Whether one of the entry's backends listens on `port` (run for every entry at every
/// sync: read in place, nothing collected).
fn uses_port(entry: &Entry, port: u16) -> bool {
    std::iter::once(&entry.action)
        .chain(&entry.internal)
        .any(|a| slots_of(a).iter().any(|b| b.port() == port))
}

/// The chain and its two rules (to the listener, from it); nothing for None.
pub fn objects(local: Option<Local>) -> (Vec<Chain>, Vec<Rule>) {
    let Some(local) = local else {
        return (Vec::new(), Vec::new());
    };
    let chain = Chain::base(
        CHAIN,
        ChainType::Filter,
        Hook::Output,
        PRIORITY,
        ChainPolicy::Accept,
    );
    let rule = |to: bool| {
        let mut stmts = vec![
            Stmt::Cmp {
                left: Expr::Meta(MetaKey::OifName),
                op: CmpOp::Eq,
                right: Value::IfName("lo".into()),
            },
            Stmt::Cmp {
                left: Expr::Meta(MetaKey::L4Proto),
                op: CmpOp::Eq,
                right: Value::Proto(6),
            },
            Stmt::Cmp {
                left: Expr::Payload(if to { Field::ThDport } else { Field::ThSport }),
                op: CmpOp::Eq,
                right: Value::Port(local.port),
            },
        ];
        if let Some(addr) = local.addr {
            let field = match (addr.is_ipv4(), to) {
                (true, true) => Field::IpDaddr,
                (true, false) => Field::IpSaddr,
                (false, true) => Field::Ip6Daddr,
                (false, false) => Field::Ip6Saddr,
            };
            stmts.push(Stmt::Cmp {
                left: Expr::Payload(field),
                op: CmpOp::Eq,
                right: Value::ip(addr),
            });
        }
        stmts.push(Stmt::Notrack);
        let what = if to { "to" } else { "from" };
        Rule::new(CHAIN, stmts).with_comment(format!("{CHAIN}: {what} port {}", local.port))
    };
    (vec![chain], vec![rule(true), rule(false)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(port: u16, backend_port: u16) -> Model {
        let toml = format!(
            "[[service]]\nname = \"web\"\naddress = \"10.96.0.10\"\nport = {port}\nbackends = [\"10.0.1.2:{backend_port}\"]\n"
        );
        let desired = crate::config::load_str(&[("edgenetd.toml", &toml)]).unwrap();
        super::super::model::build(&desired.services)
    }

    #[test]
    fn no_exemption_while_a_service_uses_the_listeners_port() {
        let listen: SocketAddr = "0.0.0.0:9750".parse().unwrap();
        assert_eq!(
            of(listen, &model(80, 8080)),
            Some(Local {
                addr: None,
                port: 9750
            })
        );
        assert_eq!(of(listen, &model(9750, 8080)), None, "a VIP's port");
        assert_eq!(of(listen, &model(80, 9750)), None, "a backend's port");
        let one: SocketAddr = "192.168.1.1:9750".parse().unwrap();
        assert_eq!(
            of(one, &model(80, 8080)).unwrap().addr,
            Some("192.168.1.1".parse().unwrap())
        );
    }

    #[test]
    fn both_directions_on_lo_only_before_conntrack() {
        let local = Local {
            addr: Some("127.0.0.1".parse().unwrap()),
            port: 9750,
        };
        let (chains, rules) = objects(Some(local));
        assert_eq!(chains.len(), 1);
        assert_eq!(rules.len(), 2);
        for r in &rules {
            assert_eq!(r.stmts.last(), Some(&Stmt::Notrack));
            assert!(r.stmts.contains(&Stmt::Cmp {
                left: Expr::Meta(MetaKey::OifName),
                op: CmpOp::Eq,
                right: Value::IfName("lo".into()),
            }));
        }
        assert_eq!(objects(None), (vec![], vec![]));
    }
}
