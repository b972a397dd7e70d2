//! The interpreter's handling of included rules that do not lift: named once as what makes
//! the verdict uncertain, taken as not matching, the chain going on.

use std::net::{IpAddr, Ipv4Addr};

use super::eval::{ChainEnd, Final, Run, Trace};
use super::packet::{Packet, Proto};
use super::route::Addresses;
use crate::dataplane::nft::ir::*;

fn packet() -> Packet {
    let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    Packet {
        iif: "lan".into(),
        oif: String::new(),
        saddr: a,
        daddr: b,
        proto: Proto::Tcp,
        sport: 40000,
        dport: 22,
        icmp_type: 0,
        dscp: 0,
        ct_state: CT_STATE_NEW,
        ct_status: 0,
        ct_mark: 0,
        mark: 0,
        orig_daddr: b,
        orig_dport: 22,
        at: None,
    }
}

/// An included rule nft never compiled (no expressions: explain without root).
fn unread(text: &str) -> Rule {
    Rule::new(
        "input",
        vec![Stmt::Opaque(Opaque {
            exprs: Vec::new(),
            text: text.into(),
        })],
    )
    .with_comment("include /etc/x.nft #00000000")
}

#[test]
fn an_included_rule_explain_cannot_read_makes_the_verdict_uncertain_and_does_not_match() {
    let mut t = Table::new(Family::Inet, "p");
    t.chains.push(Chain::base(
        "input",
        ChainType::Filter,
        Hook::Input,
        0,
        ChainPolicy::Drop,
    ));
    t.rules.push(unread("tcp dport 22 drop"));
    t.rules
        .push(Rule::new("input", vec![Stmt::Verdict(Verdict::Accept)]).with_comment("all"));
    let local = Addresses { entries: vec![] };
    let run = Run {
        table: &t,
        local: &local,
        masq_addr: None,
    };
    let mut trace = Trace::default();
    let end = run.chain("input", &mut packet(), &mut trace).unwrap();
    let ChainEnd::Verdict(Final::Accept, by) = end else {
        panic!("{end:?}");
    };
    assert_eq!(by.comment.as_deref(), Some("all"));
    assert_eq!(trace.uncertain.len(), 1, "{:?}", trace.uncertain);
    let why = &trace.uncertain[0];
    assert!(why.contains("`tcp dport 22 drop`"), "{why}");
    assert!(
        why.contains("include /etc/x.nft") && !why.contains("#00000000"),
        "{why}"
    );
    assert!(why.contains("chain input"), "{why}");
}
