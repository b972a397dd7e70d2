//! The lift of included rules ([`lift`]): snippets compiled by the real nft in a namespace,
//! through the include machinery ([`snippet::compile`]), read back from the kernel and
//! lifted to the IR statements they mean; what the lift does not read is `None`, never a
//! statement that means something else.

use crate::netns_test;

use std::net::Ipv4Addr;

use edgenetd::dataplane::nft::Nft;
use edgenetd::dataplane::nft::ir::*;
use edgenetd::dataplane::nft::lift::lift;
use edgenetd::dataplane::nft::snippet::{self, Snippet};

/// `meta l4proto <p>`, `meta nfproto <p>`: the dependencies nft adds.
fn l4(p: u8) -> Stmt {
    Stmt::Cmp {
        left: Expr::Meta(MetaKey::L4Proto),
        op: CmpOp::Eq,
        right: Value::Proto(p),
    }
}

fn nf(p: u8) -> Stmt {
    Stmt::Cmp {
        left: Expr::Meta(MetaKey::NfProto),
        op: CmpOp::Eq,
        right: Value::Proto(p),
    }
}

fn cmp(left: Expr, right: Value) -> Stmt {
    Stmt::Cmp {
        left,
        op: CmpOp::Eq,
        right,
    }
}

fn prefix(field: Field, net: &str, negate: bool) -> Stmt {
    let net: ipnet::IpNet = net.parse().unwrap();
    Stmt::Lookup {
        left: Expr::Payload(field),
        set: SetRef::Anonymous {
            key: KeyType::single(if net.addr().is_ipv4() {
                DataType::Ipv4Addr
            } else {
                DataType::Ipv6Addr
            }),
            interval: true,
            elements: vec![Element::key(ElemKey::Prefix(net))],
            data: None,
        },
        negate,
    }
}

fn verdict(v: Verdict) -> Stmt {
    Stmt::Verdict(v)
}

/// Each snippet rule and what it must lift to (`None`: it must not lift).
fn cases() -> Vec<(&'static str, Option<Vec<Stmt>>)> {
    use Verdict::*;
    vec![
        (
            "tcp dport 22 accept",
            Some(vec![
                l4(6),
                cmp(Expr::Payload(Field::TcpDport), Value::Port(22)),
                verdict(Accept),
            ]),
        ),
        (
            "udp dport 5000-5010 drop",
            Some(vec![
                l4(17),
                Stmt::Range {
                    left: Expr::Payload(Field::UdpDport),
                    negate: false,
                    from: Value::Port(5000),
                    to: Value::Port(5010),
                },
                verdict(Drop),
            ]),
        ),
        (
            "tcp dport != 80 counter",
            Some(vec![
                l4(6),
                Stmt::Cmp {
                    left: Expr::Payload(Field::TcpDport),
                    op: CmpOp::Neq,
                    right: Value::Port(80),
                },
                Stmt::Counter,
            ]),
        ),
        (
            "tcp dport < 1024 accept",
            Some(vec![
                l4(6),
                Stmt::Range {
                    left: Expr::Payload(Field::TcpDport),
                    negate: false,
                    from: Value::Port(0),
                    to: Value::Port(1023),
                },
                verdict(Accept),
            ]),
        ),
        (
            "meta l4proto udp th sport 53 accept",
            Some(vec![
                l4(17),
                cmp(Expr::Payload(Field::ThSport), Value::Port(53)),
                verdict(Accept),
            ]),
        ),
        (
            "ip saddr 10.0.0.0/24 counter drop",
            Some(vec![
                nf(2),
                prefix(Field::IpSaddr, "10.0.0.0/24", false),
                Stmt::Counter,
                verdict(Drop),
            ]),
        ),
        (
            "ip saddr 10.0.0.0/12 drop",
            Some(vec![
                nf(2),
                prefix(Field::IpSaddr, "10.0.0.0/12", false),
                verdict(Drop),
            ]),
        ),
        (
            "ip daddr 192.0.2.3 drop",
            Some(vec![
                nf(2),
                cmp(
                    Expr::Payload(Field::IpDaddr),
                    Value::Ipv4(Ipv4Addr::new(192, 0, 2, 3)),
                ),
                verdict(Drop),
            ]),
        ),
        (
            "ip6 saddr != fd00::/64 return",
            Some(vec![
                nf(10),
                prefix(Field::Ip6Saddr, "fd00::/64", true),
                verdict(Return),
            ]),
        ),
        (
            "iifname \"veth-lan\" jump inc_chain",
            Some(vec![
                cmp(
                    Expr::Meta(MetaKey::IifName),
                    Value::IfName("veth-lan".into()),
                ),
                verdict(Jump("inc_chain".into())),
            ]),
        ),
        (
            "oifname \"eth*\" goto inc_chain",
            Some(vec![
                cmp(Expr::Meta(MetaKey::OifName), Value::IfName("eth*".into())),
                verdict(Goto("inc_chain".into())),
            ]),
        ),
        (
            "oifname != \"wan\" reject",
            Some(vec![
                Stmt::Cmp {
                    left: Expr::Meta(MetaKey::OifName),
                    op: CmpOp::Neq,
                    right: Value::IfName("wan".into()),
                },
                Stmt::Reject(Reject::IcmpxPortUnreachable),
            ]),
        ),
        (
            "reject with icmpv6 admin-prohibited",
            Some(vec![nf(10), Stmt::Reject(Reject::IcmpxAdminProhibited)]),
        ),
        (
            "reject with icmp admin-prohibited",
            Some(vec![nf(2), Stmt::Reject(Reject::IcmpxAdminProhibited)]),
        ),
        (
            "tcp dport 23 reject with tcp reset",
            Some(vec![
                l4(6),
                cmp(Expr::Payload(Field::TcpDport), Value::Port(23)),
                Stmt::Reject(Reject::TcpReset),
            ]),
        ),
        (
            "ct state established,related accept",
            Some(vec![
                Stmt::Flags {
                    left: Expr::Ct(CtKey::State),
                    bits: Value::CtState(CT_STATE_ESTABLISHED | CT_STATE_RELATED),
                    negate: false,
                },
                verdict(Accept),
            ]),
        ),
        (
            "ct state invalid drop",
            Some(vec![
                Stmt::Flags {
                    left: Expr::Ct(CtKey::State),
                    bits: Value::CtState(CT_STATE_INVALID),
                    negate: false,
                },
                verdict(Drop),
            ]),
        ),
        (
            "tcp flags & (syn | ack) == syn counter",
            Some(vec![
                l4(6),
                Stmt::MaskedCmp {
                    left: Expr::Payload(Field::TcpFlags),
                    mask: Value::TcpFlags(TCP_SYN | TCP_ACK),
                    right: Value::TcpFlags(TCP_SYN),
                },
                Stmt::Counter,
            ]),
        ),
        (
            "ip daddr @blocked log prefix \"blocked \" drop",
            Some(vec![
                nf(2),
                Stmt::Lookup {
                    left: Expr::Payload(Field::IpDaddr),
                    set: SetRef::Named("blocked".into()),
                    negate: false,
                },
                Stmt::Log {
                    prefix: "blocked ".into(),
                    group: None,
                },
                verdict(Drop),
            ]),
        ),
        (
            "ip saddr != @blocked continue",
            Some(vec![
                nf(2),
                Stmt::Lookup {
                    left: Expr::Payload(Field::IpSaddr),
                    set: SetRef::Named("blocked".into()),
                    negate: true,
                },
                verdict(Continue),
            ]),
        ),
        (
            "meta mark 0x10 counter",
            Some(vec![
                cmp(Expr::Meta(MetaKey::Mark), Value::Mark(0x10)),
                Stmt::Counter,
            ]),
        ),
        (
            "meta mark set 0x1",
            Some(vec![Stmt::MetaMarkSet { and: 0, xor: 1 }]),
        ),
        (
            "icmp type echo-request accept",
            Some(vec![
                nf(2),
                l4(1),
                cmp(Expr::Payload(Field::IcmpType), Value::IcmpType(8)),
                verdict(Accept),
            ]),
        ),
        (
            "tcp dport 22 ct state new limit rate 10/minute accept",
            Some(vec![
                l4(6),
                cmp(Expr::Payload(Field::TcpDport), Value::Port(22)),
                Stmt::Flags {
                    left: Expr::Ct(CtKey::State),
                    bits: Value::CtState(CT_STATE_NEW),
                    negate: false,
                },
                Stmt::Limit {
                    rate: 10,
                    unit: RateUnit::Minute,
                    burst: 5,
                    over: false,
                },
                verdict(Accept),
            ]),
        ),
        ("counter", Some(vec![Stmt::Counter])),
        (
            "tcp dport > 1024 accept",
            Some(vec![
                l4(6),
                Stmt::Range {
                    left: Expr::Payload(Field::TcpDport),
                    negate: false,
                    from: Value::Port(1025),
                    to: Value::Port(65535),
                },
                verdict(Accept),
            ]),
        ),
        (
            "tcp dport vmap @ports",
            Some(vec![
                l4(6),
                Stmt::Vmap {
                    key: Expr::Payload(Field::TcpDport),
                    map: SetRef::Named("ports".into()),
                },
            ]),
        ),
        (
            "ct status dnat accept",
            Some(vec![
                Stmt::Flags {
                    left: Expr::Ct(CtKey::Status),
                    bits: Value::CtStatus(CT_STATUS_DNAT),
                    negate: false,
                },
                verdict(Accept),
            ]),
        ),
        (
            "ct mark 0x5 accept",
            Some(vec![
                cmp(Expr::Ct(CtKey::Mark), Value::Mark(5)),
                verdict(Accept),
            ]),
        ),
        (
            "icmpv6 type echo-request accept",
            Some(vec![
                nf(10),
                l4(58),
                cmp(Expr::Payload(Field::Icmpv6Type), Value::Icmpv6Type(128)),
                verdict(Accept),
            ]),
        ),
        (
            "ip saddr & 0.0.0.255 == 0.0.0.7 accept",
            Some(vec![
                nf(2),
                Stmt::MaskedCmp {
                    left: Expr::Payload(Field::IpSaddr),
                    mask: Value::Ipv4(Ipv4Addr::new(0, 0, 0, 255)),
                    right: Value::Ipv4(Ipv4Addr::new(0, 0, 0, 7)),
                },
                verdict(Accept),
            ]),
        ),
        (
            "meta mark & 0xff == 0x1 accept",
            Some(vec![
                Stmt::MaskedCmp {
                    left: Expr::Meta(MetaKey::Mark),
                    mask: Value::Mark(0xff),
                    right: Value::Mark(1),
                },
                verdict(Accept),
            ]),
        ),
        (
            "limit rate over 10/second drop",
            Some(vec![
                Stmt::Limit {
                    rate: 10,
                    unit: RateUnit::Second,
                    burst: 5,
                    over: true,
                },
                verdict(Drop),
            ]),
        ),
        ("meta nftrace set 1 notrack", Some(vec![Stmt::Notrack])),
        // nft compares the whole state here (`!=` of one value), not its bits.
        (
            "ct state != established counter",
            Some(vec![
                Stmt::Cmp {
                    left: Expr::Ct(CtKey::State),
                    op: CmpOp::Neq,
                    right: Value::CtState(CT_STATE_ESTABLISHED),
                },
                Stmt::Counter,
            ]),
        ),
        // What the lift does not read.
        ("ip protocol tcp accept", None),
        // No protocol matched first: the kernel reads those bytes of any header.
        ("th dport 22 accept", None),
        ("meta iif \"lo\" accept", None),
        ("ip dscp 46 accept", None),
        ("ct original ip daddr 10.0.0.1 accept", None),
        ("tcp dport 22 ct mark set 1", None),
        ("ip saddr . tcp dport @pairs accept", None),
        ("limit rate 1 mbytes/second accept", None),
        ("meta l4proto tcp dnat ip to 10.0.0.2", None),
    ]
}

/// The cases whose rule, compiled by nft into a chain `input` of `scratch` and read back,
/// lifts to something other than what the case wants.
fn lifted_otherwise(
    nft: &mut Nft,
    scratch: &Table,
    cases: &[(&'static str, Option<Vec<Stmt>>)],
) -> Vec<String> {
    let family = scratch.family;
    let snippets: Vec<Snippet> = cases
        .iter()
        .enumerate()
        .map(|(i, (text, _))| Snippet {
            chain: Some("input".into()),
            text: text.to_string(),
            shown: format!("{family:?} case {i}"),
        })
        .collect();
    let compiled = snippet::compile(nft, scratch, &snippets).unwrap();
    let mut wrong = Vec::new();
    for ((text, want), c) in cases.iter().zip(&compiled) {
        let [rule] = c.rules.as_slice() else {
            panic!("{family:?} {text}: {} rules", c.rules.len());
        };
        let [Stmt::Opaque(o)] = rule.stmts.as_slice() else {
            panic!("{family:?} {text}: not one opaque statement");
        };
        let got = lift(family, &o.exprs);
        if &got != want {
            wrong.push(format!(
                "{family:?} {text}\n  got  {got:?}\n  want {want:?}"
            ));
        }
    }
    wrong
}

netns_test! {
    fn lift_reads_what_nft_compiled_of_each_snippet_rule_back_as_its_statements() {
        let mut scratch = Table::new(Family::Inet, "lift-test");
        scratch.sets.push(Set::new("blocked", KeyType::single(DataType::Ipv4Addr)));
        scratch.sets.push(Set::new(
            "pairs",
            KeyType(vec![DataType::Ipv4Addr, DataType::InetService]),
        ));
        let mut ports = Set::new("ports", KeyType::single(DataType::InetService));
        ports.data = Some(KeyType::single(DataType::Verdict));
        scratch.sets.push(ports);
        scratch.chains.push(Chain::regular("input"));
        scratch.chains.push(Chain::regular("inc_chain"));
        let mut nft = Nft::open().unwrap();
        let wrong = lifted_otherwise(&mut nft, &scratch, &cases());
        assert!(wrong.is_empty(), "lifted otherwise:\n{}", wrong.join("\n"));
        // A rule never compiled (explain without root) has no expressions: not lifted.
        assert_eq!(lift(Family::Inet, &[]), None);
    }
}

/// Snippet rules of an `ip` or `ip6` table and what they must lift to: the table's family
/// stands for the `meta nfproto` nft does not add there, and the family's own ICMP codes
/// name the answer of a `reject`.
fn family_cases(family: Family) -> Vec<(&'static str, Option<Vec<Stmt>>)> {
    use Verdict::*;
    let common = [
        (
            "tcp dport 22 accept",
            Some(vec![
                l4(6),
                cmp(Expr::Payload(Field::TcpDport), Value::Port(22)),
                verdict(Accept),
            ]),
        ),
        (
            // The same expressions as `udp dport 53`: read as that.
            "meta l4proto udp th dport 53 counter",
            Some(vec![
                l4(17),
                cmp(Expr::Payload(Field::UdpDport), Value::Port(53)),
                Stmt::Counter,
            ]),
        ),
        (
            "iifname \"lan\" reject",
            Some(vec![
                cmp(Expr::Meta(MetaKey::IifName), Value::IfName("lan".into())),
                Stmt::Reject(Reject::IcmpxPortUnreachable),
            ]),
        ),
    ];
    let own = match family {
        Family::Ip => vec![
            (
                "ip saddr 10.0.0.0/24 counter drop",
                Some(vec![
                    prefix(Field::IpSaddr, "10.0.0.0/24", false),
                    Stmt::Counter,
                    verdict(Drop),
                ]),
            ),
            (
                "ip daddr 192.0.2.3 drop",
                Some(vec![
                    cmp(
                        Expr::Payload(Field::IpDaddr),
                        Value::Ipv4(Ipv4Addr::new(192, 0, 2, 3)),
                    ),
                    verdict(Drop),
                ]),
            ),
            (
                "icmp type echo-request accept",
                Some(vec![
                    l4(1),
                    cmp(Expr::Payload(Field::IcmpType), Value::IcmpType(8)),
                    verdict(Accept),
                ]),
            ),
            (
                "reject with icmp admin-prohibited",
                Some(vec![Stmt::Reject(Reject::IcmpxAdminProhibited)]),
            ),
            (
                "reject with icmp host-unreachable",
                Some(vec![Stmt::Reject(Reject::IcmpxPortUnreachable)]),
            ),
        ],
        Family::Ip6 => vec![
            (
                "ip6 saddr != fd00::/64 return",
                Some(vec![
                    prefix(Field::Ip6Saddr, "fd00::/64", true),
                    verdict(Return),
                ]),
            ),
            (
                "icmpv6 type echo-request accept",
                Some(vec![
                    l4(58),
                    cmp(Expr::Payload(Field::Icmpv6Type), Value::Icmpv6Type(128)),
                    verdict(Accept),
                ]),
            ),
            (
                "reject with icmpv6 admin-prohibited",
                Some(vec![Stmt::Reject(Reject::IcmpxAdminProhibited)]),
            ),
            (
                "reject with icmpv6 addr-unreachable",
                Some(vec![Stmt::Reject(Reject::IcmpxPortUnreachable)]),
            ),
        ],
        Family::Inet => unreachable!("the inet cases are `cases`"),
    };
    common.into_iter().chain(own).collect()
}

netns_test! {
    fn lift_reads_rules_of_ip_and_ip6_tables_with_the_family_for_the_nfproto_nft_leaves_out() {
        let mut nft = Nft::open().unwrap();
        let mut wrong = Vec::new();
        for family in [Family::Ip, Family::Ip6] {
            let mut scratch = Table::new(family, "lift-family-test");
            scratch.chains.push(Chain::regular("input"));
            wrong.extend(lifted_otherwise(&mut nft, &scratch, &family_cases(family)));
        }
        assert!(wrong.is_empty(), "lifted otherwise:\n{}", wrong.join("\n"));
    }
}
