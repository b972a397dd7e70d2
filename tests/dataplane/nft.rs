//! Kernel tests of the nftables dataplane: every statement the IR offers is programmed through
//! libnftnl and read back with `nft`, the same IR rendered as text loads to the same kernel
//! state, element deltas touch only elements, refusals map to the right message, and foreign
//! tables are never touched.

use crate::common;
use crate::netns_test;

use common::scratch::ScratchDir;
use common::shell::{sh, sh_status};
use edgenetd::dataplane::nft::ir::*;
use edgenetd::dataplane::nft::{
    Batch, CompileError, Nft, NftError, Op, TableRef, raw_elements, text,
};

fn v4(s: &str) -> Value {
    Value::Ipv4(s.parse().unwrap())
}

fn prefix(s: &str) -> Element {
    Element::key(ElemKey::Prefix(s.parse().unwrap()))
}

/// A table that uses every statement and set kind the dataplane wraps.
fn everything(name: &str) -> Table {
    let mut t = Table::new(Family::Inet, name);
    let mut block = Set::new("blocklist", KeyType::single(DataType::Ipv4Addr));
    block.interval = true;
    block.elements = vec![prefix("203.0.113.0/24"), prefix("198.51.100.7/32")];
    t.sets.push(block);
    let mut ifs = Set::new("lan_ifs", KeyType::single(DataType::IfName));
    ifs.elements = vec![Element::key(ElemKey::Value(Value::IfName(
        "veth-lan".into(),
    )))];
    t.sets.push(ifs);
    let slots = KeyType(vec![
        DataType::Ipv4Addr,
        DataType::InetProto,
        DataType::InetService,
        DataType::Mark,
    ]);
    let mut backends = Set::new("backends", slots);
    backends.data = Some(KeyType(vec![DataType::Ipv4Addr, DataType::InetService]));
    for slot in 0..2u32 {
        backends.elements.push(Element::map(
            ElemKey::Value(Value::Concat(vec![
                v4("10.96.0.10"),
                Value::Proto(6),
                Value::Port(80),
                Value::Mark(slot),
            ])),
            Value::Concat(vec![v4(&format!("10.0.1.{}", 5 + slot)), Value::Port(8080)]),
        ));
    }
    t.sets.push(backends);
    let mut vips = Set::new(
        "vips",
        KeyType(vec![
            DataType::Ipv4Addr,
            DataType::InetProto,
            DataType::InetService,
        ]),
    );
    vips.data = Some(KeyType::single(DataType::Verdict));
    vips.elements.push(Element::map(
        ElemKey::Value(Value::Concat(vec![
            v4("10.96.0.10"),
            Value::Proto(6),
            Value::Port(80),
        ])),
        Value::Verdict(Verdict::Jump("svc".into())),
    ));
    t.sets.push(vips);

    t.chains.push(Chain::base(
        "input",
        ChainType::Filter,
        Hook::Input,
        0,
        ChainPolicy::Drop,
    ));
    t.chains.push(Chain::base(
        "prerouting",
        ChainType::Nat,
        Hook::Prerouting,
        -100,
        ChainPolicy::Accept,
    ));
    t.chains.push(Chain::base(
        "postrouting",
        ChainType::Nat,
        Hook::Postrouting,
        100,
        ChainPolicy::Accept,
    ));
    t.chains.push(Chain::regular("svc"));
    let ct_est = Stmt::Flags {
        left: Expr::Ct(CtKey::State),
        bits: Value::CtState(CT_STATE_ESTABLISHED | CT_STATE_RELATED),
        negate: false,
    };
    let r = |chain: &str, stmts: Vec<Stmt>, c: &str| Rule::new(chain, stmts).with_comment(c);
    t.rules = vec![
        r(
            "input",
            vec![
                Stmt::Cmp {
                    left: Expr::Meta(MetaKey::IifName),
                    op: CmpOp::Eq,
                    right: Value::IfName("lo".into()),
                },
                Stmt::Verdict(Verdict::Accept),
            ],
            "loopback",
        ),
        r(
            "input",
            vec![ct_est, Stmt::Verdict(Verdict::Accept)],
            "established",
        ),
        r(
            "input",
            vec![
                Stmt::Lookup {
                    left: Expr::Payload(Field::IpSaddr),
                    set: SetRef::Named("blocklist".into()),
                    negate: false,
                },
                Stmt::Counter,
                Stmt::Verdict(Verdict::Drop),
            ],
            "blocklist",
        ),
        r(
            "input",
            vec![
                Stmt::Lookup {
                    left: Expr::Meta(MetaKey::IifName),
                    set: SetRef::Named("lan_ifs".into()),
                    negate: false,
                },
                Stmt::Lookup {
                    left: Expr::Payload(Field::TcpDport),
                    set: SetRef::Anonymous {
                        key: KeyType::single(DataType::InetService),
                        interval: true,
                        data: None,
                        elements: vec![
                            Element::key(ElemKey::Value(Value::Port(22))),
                            Element::key(ElemKey::Range(Value::Port(8000), Value::Port(8100))),
                        ],
                    },
                    negate: false,
                },
                Stmt::Limit {
                    rate: 10,
                    unit: RateUnit::Second,
                    burst: 0,
                    over: false,
                },
                Stmt::Log {
                    prefix: "ssh-from-lan: ".into(),
                    group: None,
                },
                Stmt::Counter,
                Stmt::Verdict(Verdict::Accept),
            ],
            "ssh-from-lan",
        ),
        r(
            "input",
            vec![
                Stmt::Range {
                    left: Expr::Payload(Field::UdpDport),
                    negate: false,
                    from: Value::Port(5000),
                    to: Value::Port(5010),
                },
                Stmt::Counter,
                Stmt::Reject(Reject::IcmpxPortUnreachable),
            ],
            "udp-range",
        ),
        r(
            "input",
            vec![
                Stmt::Cmp {
                    left: Expr::Payload(Field::TcpDport),
                    op: CmpOp::Eq,
                    right: Value::Port(23),
                },
                Stmt::Reject(Reject::TcpReset),
            ],
            "telnet",
        ),
        r(
            "input",
            vec![
                Stmt::Cmp {
                    left: Expr::Payload(Field::IcmpType),
                    op: CmpOp::Eq,
                    right: Value::IcmpType(8),
                },
                Stmt::Limit {
                    rate: 5,
                    unit: RateUnit::Second,
                    burst: 10,
                    over: true,
                },
                Stmt::Verdict(Verdict::Drop),
            ],
            "ping-flood",
        ),
        r(
            "input",
            vec![
                Stmt::Cmp {
                    left: Expr::Payload(Field::Icmpv6Type),
                    op: CmpOp::Eq,
                    right: Value::Icmpv6Type(128),
                },
                Stmt::Verdict(Verdict::Accept),
            ],
            "ping6",
        ),
        r(
            "input",
            vec![
                Stmt::Cmp {
                    left: Expr::Payload(Field::Ip6Saddr),
                    op: CmpOp::Neq,
                    right: Value::Ipv6("fd00::1".parse().unwrap()),
                },
                Stmt::Counter,
            ],
            "v6-count",
        ),
        r(
            "prerouting",
            vec![
                Stmt::Cmp {
                    left: Expr::FibDaddrType,
                    op: CmpOp::Eq,
                    right: Value::AddrType(ADDRTYPE_LOCAL),
                },
                Stmt::Cmp {
                    left: Expr::Payload(Field::TcpDport),
                    op: CmpOp::Eq,
                    right: Value::Port(8080),
                },
                Stmt::Nat {
                    kind: NatKind::Dnat,
                    addr: "10.0.0.10".parse().unwrap(),
                    port: Some(80),
                },
            ],
            "port-forward",
        ),
        r(
            "prerouting",
            vec![Stmt::Vmap {
                key: Expr::Concat(vec![
                    Expr::Payload(Field::IpDaddr),
                    Expr::Meta(MetaKey::L4Proto),
                    Expr::Payload(Field::ThDport),
                ]),
                map: SetRef::Named("vips".into()),
            }],
            "vips",
        ),
        r(
            "svc",
            vec![Stmt::NatMap {
                kind: NatKind::Dnat,
                version: IpVersion::V4,
                key: Expr::Concat(vec![
                    Expr::Payload(Field::IpDaddr),
                    Expr::Meta(MetaKey::L4Proto),
                    Expr::Payload(Field::ThDport),
                    Expr::Numgen {
                        modulus: 2,
                        offset: 0,
                    },
                ]),
                map: SetRef::Named("backends".into()),
                with_port: true,
            }],
            "random",
        ),
        r(
            "svc",
            vec![Stmt::NatMap {
                kind: NatKind::Dnat,
                version: IpVersion::V4,
                key: Expr::Concat(vec![
                    Expr::Payload(Field::IpDaddr),
                    Expr::Meta(MetaKey::L4Proto),
                    Expr::Payload(Field::ThDport),
                    Expr::Jhash {
                        input: Box::new(Expr::Payload(Field::IpSaddr)),
                        modulus: 2,
                        seed: 0xfeed,
                        offset: 0,
                    },
                ]),
                map: SetRef::Named("backends".into()),
                with_port: true,
            }],
            "affinity",
        ),
        r(
            "postrouting",
            vec![
                Stmt::Flags {
                    left: Expr::Ct(CtKey::Status),
                    bits: Value::CtStatus(CT_STATUS_DNAT),
                    negate: false,
                },
                Stmt::Cmp {
                    left: Expr::Meta(MetaKey::OifName),
                    op: CmpOp::Neq,
                    right: Value::IfName("lo".into()),
                },
                Stmt::Masquerade,
            ],
            "masq",
        ),
        r(
            "postrouting",
            vec![
                Stmt::Cmp {
                    left: Expr::Payload(Field::IpSaddr),
                    op: CmpOp::Eq,
                    right: v4("10.9.9.9"),
                },
                Stmt::Nat {
                    kind: NatKind::Snat,
                    addr: "192.0.2.1".parse().unwrap(),
                    port: None,
                },
            ],
            "snat",
        ),
    ];
    t
}

fn list(table: &str) -> String {
    sh(&format!("nft list table inet {table}"))
}

netns_test! {
    fn every_wrapped_statement_reads_back_as_written() {
        let table = everything("edgenetd-test");
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.replace_table(&table).unwrap();
        nft.execute(batch).unwrap();
        let text = list("edgenetd-test");
        for want in [
            "iifname \"lo\" accept",
            "ct state established,related accept",
            "ip saddr @blocklist counter packets 0 bytes 0 drop",
            "iifname @lan_ifs tcp dport { 22, 8000-8100 } limit rate 10/second log prefix \"ssh-from-lan: \" counter packets 0 bytes 0 accept",
            "udp dport 5000-5010 counter packets 0 bytes 0 reject comment",
            "tcp dport 23 reject with tcp reset",
            "icmp type echo-request limit rate over 5/second burst 10 packets drop",
            "icmpv6 type echo-request accept",
            "ip6 saddr != fd00::1 counter",
            "fib daddr type local tcp dport 8080 dnat ip to 10.0.0.10:80",
            "ip daddr . meta l4proto . th dport vmap @vips",
            "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @backends",
            "dnat ip to ip daddr . meta l4proto . th dport . jhash ip saddr mod 2 seed 0xfeed map @backends",
            "ct status dnat oifname != \"lo\" masquerade",
            "ip saddr 10.9.9.9 snat ip to 192.0.2.1",
            "elements = { 198.51.100.7, 203.0.113.0/24 }",
            "type ipv4_addr . inet_proto . inet_service . mark : ipv4_addr . inet_service",
            "10.96.0.10 . tcp . 80 : jump svc",
            "comment \"ssh-from-lan\"",
            "elements = { \"veth-lan\" }",
        ] {
            assert!(text.contains(want), "missing `{want}` in:\n{text}");
        }
        // JSON read-back: every rule is there, in order, with its comment.
        let json: serde_json::Value = serde_json::from_str(&sh("nft -j list table inet edgenetd-test")).unwrap();
        let comments: Vec<String> = json["nftables"].as_array().unwrap().iter()
            .filter_map(|o| o.get("rule")).map(|r| r["comment"].as_str().unwrap_or("").to_string()).collect();
        let want: Vec<String> = table.chains.iter()
            .flat_map(|c| table.rules.iter().filter(move |r| r.chain == c.name))
            .map(|r| r.comment.clone().unwrap()).collect();
        assert_eq!(comments, want);
    }
}

netns_test! {
    fn rendered_text_loads_to_the_same_kernel_state_as_the_batch() {
        let batch_table = everything("from-batch");
        let mut text_table = everything("from-text");
        // The map those two rules use is rendered with `typeof` (nft has no cast for a
        // numgen/jhash slot), so `nft list` prints its declaration differently; whole plans
        // with such rules are compared expression by expression in tests/dataplane/plan_nft.rs.
        text_table.rules.retain(|r| r.chain != "svc");
        let mut batch_table = batch_table;
        batch_table.rules.retain(|r| r.chain != "svc");
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.replace_table(&batch_table).unwrap();
        nft.execute(batch).unwrap();
        let text = text::render_replace(&text_table);
        let dir = ScratchDir::with_files("render", &[("render.nft", &text)]);
        let file = dir.join("render.nft").display().to_string();
        let (ok, _, err) = sh_status(&format!("nft -c -f {file}"));
        assert!(ok, "nft -c refused the rendered text: {err}\n{text}");
        sh(&format!("nft -f {file}"));
        let a = list("from-batch").replace("from-batch", "T");
        let b = list("from-text").replace("from-text", "T");
        assert_eq!(a, b, "batch and text differ");
    }
}

netns_test! {
    fn replace_works_with_and_without_the_table_and_leaves_foreign_tables_alone() {
        sh("nft add table inet other && nft add chain inet other c '{ type filter hook input priority 10; }' && nft add rule inet other c tcp dport 9 counter drop");
        sh("nft add table ip edgenetd-test"); // same name, other family: not ours to touch
        let before = sh("nft list table inet other") + &sh("nft list table ip edgenetd-test");
        let mut nft = Nft::open().unwrap();
        let mut table = everything("edgenetd-test");
        for round in 0..3 {
            table.rules[0].comment = Some(format!("loopback round {round}"));
            let mut batch = Batch::new();
            batch.replace_table(&table).unwrap();
            nft.execute(batch).unwrap();
            assert!(list("edgenetd-test").contains(&format!("loopback round {round}")));
        }
        let after = sh("nft list table inet other") + &sh("nft list table ip edgenetd-test");
        assert_eq!(before, after);
        let mut batch = Batch::new();
        batch.table(&TableRef::new(Family::Inet, "edgenetd-test"), Op::Delete);
        nft.execute(batch).unwrap();
        let tables = sh("nft list tables");
        assert!(tables.contains("table inet other") && tables.contains("table ip edgenetd-test"));
        assert!(!tables.contains("table inet edgenetd-test"));
    }
}

netns_test! {
    fn element_delta_changes_only_elements() {
        let table = everything("edgenetd-test");
        let t = TableRef::from(&table);
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.replace_table(&table).unwrap();
        nft.execute(batch).unwrap();
        sh("ping -c1 -W1 127.0.0.1 >/dev/null || true");
        let rules_before = nft.list_rules(&t).unwrap();
        let gen_before = nft.generation().unwrap();
        let set = table.set("blocklist").unwrap();
        let mut batch = Batch::new();
        batch.elements(&t, set, &[prefix("192.0.2.0/25")], Op::Add).unwrap();
        batch.elements(&t, set, &[prefix("198.51.100.7/32")], Op::Delete).unwrap();
        let commit = nft.execute(batch).unwrap();
        assert_eq!(commit.messages, 2);
        assert_ne!(commit.generation, gen_before);
        let text = list("edgenetd-test");
        assert!(text.contains("elements = { 192.0.2.0/25, 203.0.113.0/24 }"), "{text}");
        // Same rules with the same handles (and counters kept): nothing else was rewritten.
        assert_eq!(nft.list_rules(&t).unwrap(), rules_before);
        // The listing agrees with the kernel form of the desired elements.
        let want = raw_elements(set, &[prefix("192.0.2.0/25"), prefix("203.0.113.0/24")]).unwrap();
        let got: Vec<_> = nft.list_elements(&t, "blocklist").unwrap();
        assert_eq!(got, want);
        // Map elements by delta too: one slot of one service.
        let map = table.set("backends").unwrap();
        let mut batch = Batch::new();
        // Deletes need keys only.
        let keys: Vec<Element> = map.elements[1..].iter().map(|e| Element::key(e.key.clone())).collect();
        batch.elements(&t, map, &keys, Op::Delete).unwrap();
        nft.execute(batch).unwrap();
        assert_eq!(nft.list_elements(&t, "backends").unwrap().len(), 1);
        // An unchanged generation means nobody touched anything.
        let g = nft.generation().unwrap();
        assert_eq!(nft.generation().unwrap(), g);
        sh("nft add table inet other");
        assert_ne!(nft.generation().unwrap(), g);
    }
}

netns_test! {
    fn a_refused_message_is_reported_with_its_sequence_and_tag() {
        let t = TableRef::new(Family::Inet, "edgenetd-test");
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.tag(1);
        batch.table(&t, Op::Add);
        batch.chain(&t, &Chain::base("input", ChainType::Filter, Hook::Input, 0, ChainPolicy::Accept), Op::Add);
        batch.add_rule(&t, &Rule::new("input", vec![Stmt::Counter])).unwrap();
        batch.tag(2);
        batch.add_rule(&t, &Rule::new("input", vec![Stmt::Verdict(Verdict::Jump("missing".into()))]).with_comment("bad")).unwrap();
        batch.tag(3);
        batch.add_rule(&t, &Rule::new("input", vec![Stmt::Lookup { left: Expr::Payload(Field::IpSaddr), set: SetRef::Named("nope".into()), negate: false }])).unwrap();
        batch.tag(4);
        batch.add_rule(&t, &Rule::new("input", vec![Stmt::Verdict(Verdict::Accept)])).unwrap();
        let err = nft.execute(batch).unwrap_err();
        let NftError::Rejected(failures) = &err else { panic!("{err}") };
        let tags: Vec<u32> = failures.iter().map(|f| f.tag).collect();
        assert_eq!(tags, vec![2, 3], "{err}");
        assert_eq!(failures[0].seq, 5, "begin=1, table=2, chain=3, rule=4, bad rule=5");
        assert_eq!(failures[0].errno, libc::ENOENT);
        assert!(failures[0].what.contains("bad"), "{}", failures[0].what);
        // Atomic: nothing of the batch exists.
        assert!(!sh("nft list tables").contains("edgenetd-test"));
        // The socket stays usable after a refusal.
        let mut batch = Batch::new();
        batch.table(&t, Op::Add);
        nft.execute(batch).unwrap();
        assert!(sh("nft list tables").contains("edgenetd-test"));
    }
}

netns_test! {
    fn listing_reports_chains_rules_sets_and_detects_edits() {
        let table = everything("edgenetd-test");
        let t = TableRef::from(&table);
        let mut nft = Nft::open().unwrap();
        assert!(nft.list_rules(&t).unwrap().is_empty(), "no table yet");
        let mut batch = Batch::new();
        batch.replace_table(&table).unwrap();
        nft.execute(batch).unwrap();
        assert!(nft.table_exists(&t).unwrap());
        let chains: Vec<String> = nft.list_chains(&t).unwrap().into_iter().map(|c| c.name).collect();
        assert_eq!(chains.len(), 4, "{chains:?}");
        let sets = nft.list_sets(&t).unwrap();
        assert!(sets.iter().any(|s| s.name == "blocklist" && s.flags & 0x4 != 0));
        let rules = nft.list_rules(&t).unwrap();
        assert_eq!(rules.len(), table.rules.len());
        // Counters moving do not change fingerprints; an edit that keeps the comment does.
        sh("ping -c2 -i0.2 -W1 127.0.0.1 >/dev/null || true");
        assert_eq!(nft.list_rules(&t).unwrap(), rules);
        let handle = rules.iter().find(|r| r.comment.as_deref() == Some("telnet")).unwrap().handle;
        sh(&format!("nft replace rule inet edgenetd-test input handle {handle} tcp dport 24 reject with tcp reset comment telnet"));
        let edited = nft.list_rules(&t).unwrap();
        assert_ne!(edited, rules);
    }
}

netns_test! {
    fn a_name_with_a_nul_byte_is_refused_before_anything_is_sent() {
        let good = TableRef::new(Family::Inet, "edgenetd-test");
        let bad = TableRef::new(Family::Inet, "edgenetd\0-test");
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.table(&good, Op::Add);
        batch.table(&bad, Op::Add);
        let err = nft.execute(batch).unwrap_err();
        assert!(
            matches!(&err, NftError::Compile(CompileError::NulInName { what: "table name", name }) if name == "edgenetd\0-test"),
            "{err}"
        );
        // Nothing was sent: not even the good table exists, and no name was cut at the NUL.
        let tables = sh("nft list tables");
        assert!(!tables.contains("edgenetd"), "{tables}");
        // Listing with such a name is the same error, not a listing of "edgenetd".
        assert!(matches!(nft.list_rules(&bad), Err(NftError::Compile(CompileError::NulInName { .. }))));
    }
}

/// A concatenated interval element `net . port` (fw4's `net` ipset fields).
fn net_port(net: &str, port: u16) -> Element {
    let n: ipnet::IpNet = net.parse().unwrap();
    let bound = |a| Value::Concat(vec![Value::ip(a), Value::Port(port)]);
    Element::key(ElemKey::Range(bound(n.network()), bound(n.broadcast())))
}

netns_test! {
    fn a_concatenated_interval_set_is_written_listed_and_changed_by_element() {
        let mut table = Table::new(Family::Inet, "edgenetd-test");
        let mut set = Set::new(
            "nets",
            KeyType(vec![DataType::Ipv4Addr, DataType::InetService]),
        );
        set.interval = true;
        set.elements = vec![net_port("10.0.0.0/24", 80), net_port("192.0.2.7/32", 22)];
        table.sets.push(set);
        let t = TableRef::from(&table);
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.replace_table(&table).unwrap();
        nft.execute(batch).unwrap();
        let listed = sh("nft list set inet edgenetd-test nets");
        for want in ["type ipv4_addr . inet_service", "flags interval", "10.0.0.0/24 . 80", "192.0.2.7 . 22"] {
            assert!(listed.contains(want), "missing `{want}` in:\n{listed}");
        }
        // Each element is read back with its last key: the listing is the desired kernel form.
        let set = table.set("nets").unwrap();
        let got = nft.list_elements(&t, "nets").unwrap();
        assert_eq!(got, raw_elements(set, &set.elements).unwrap());
        assert!(got.iter().all(|e| e.key_end.is_some() && !e.interval_end), "{got:?}");
        // By delta: one added, one deleted.
        let mut batch = Batch::new();
        batch.elements(&t, set, &[net_port("10.1.0.0/16", 80)], Op::Add).unwrap();
        batch.elements(&t, set, &[net_port("192.0.2.7/32", 22)], Op::Delete).unwrap();
        nft.execute(batch).unwrap();
        let listed = sh("nft list set inet edgenetd-test nets");
        assert!(listed.contains("10.1.0.0/16 . 80") && !listed.contains("192.0.2.7 . 22"), "{listed}");
        // The text form of the same set is what nft itself loads to the same set.
        let text = text::render_replace(&table);
        let dir = ScratchDir::with_files("concat-render", &[("render.nft", &text)]);
        let (ok, _, err) = sh_status(&format!("nft -c -f {}", dir.join("render.nft").display()));
        assert!(ok, "nft -c refused the rendered text: {err}\n{text}");
    }
}
