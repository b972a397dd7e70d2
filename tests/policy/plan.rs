//! The planner (pure, no kernel): exact ruleset text for a small policy, and how a refused
//! rule group is left out fail-closed.

use std::collections::BTreeSet;

use edgenetd::config::load_str;
use edgenetd::controller::policy::addresses::RouterAddresses;
use edgenetd::controller::policy::program::{self, Program};
use edgenetd::dataplane::nft::text::{render_rule, render_table};

const SMALL: &str = r#"
[policy]
input = "reject"

[policy.zone.lan]
interfaces = ["br-lan"]

[policy.zone.wan]
interfaces = ["eth0"]
masquerade = true

[policy.set.blocklist]
type = "ipv4"
elements = ["203.0.113.0/24", "203.0.113.9", "192.0.2.1"]

[[policy.rule]]
name = "drop-blocklist"
from = "@blocklist"
action = "drop"

[[policy.rule]]
name = "ssh"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
log = true

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.port_forward]]
name = "web"
from = "wan"
port = 8080
to = "192.168.1.10:80"
"#;

/// The router's addresses the small policy is planned with: reflection goes to the wan
/// address only, and comes from the lan (192.168.1.10 is inside br-lan's 192.168.1.1/24).
fn router_addresses() -> RouterAddresses {
    RouterAddresses::from_networks(vec![
        ("eth0".into(), "198.51.100.1/24".parse().unwrap()),
        ("eth0".into(), "2001:db8::1/64".parse().unwrap()),
        ("br-lan".into(), "192.168.1.1/24".parse().unwrap()),
    ])
}

fn build() -> Program {
    let desired = load_str(&[("edgenetd.toml", SMALL)]).unwrap();
    program::build_with(
        desired.policy.as_ref().unwrap(),
        "edgenetd-policy",
        &router_addresses(),
    )
}

/// Rule text without the `#hash` part of comments.
fn strip_hashes(text: &str) -> String {
    text.lines()
        .map(|l| match l.find(" #") {
            Some(i) if l.ends_with('"') => format!("{}\"", &l[..i]),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Without a connected network that holds the inner host (nor a zone network), nothing
/// reflects: fw4 reflects from the destination zone only, and no zone is one here.
#[test]
fn a_port_forward_to_a_host_of_no_zone_does_not_reflect() {
    let desired = load_str(&[("edgenetd.toml", SMALL)]).unwrap();
    let addrs = RouterAddresses::new(vec![
        ("eth0".into(), "198.51.100.1".parse().unwrap()),
        ("br-lan".into(), "192.168.1.1".parse().unwrap()),
    ]);
    let p = program::build_with(desired.policy.as_ref().unwrap(), "edgenetd-policy", &addrs);
    let text = render_table(&p.table);
    assert_eq!(
        text.matches("dnat ip to 192.168.1.10:80").count(),
        1,
        "{text}"
    );
    assert!(
        !text.contains("masquerade comment \"port-forward web"),
        "{text}"
    );
}

#[test]
fn small_policy_renders_exactly() {
    let p = build();
    let got = strip_hashes(&render_table(&p.table));
    let want = r#"table inet edgenetd-policy {
	set blocklist {
		type ipv4_addr
		flags interval
		elements = { 192.0.2.1, 203.0.113.0/24 }
	}

	chain input {
		type filter hook input priority 0; policy drop;
		iifname "lo" accept comment "base"
		ct state established,related accept comment "base"
		ct state invalid counter drop comment "base"
		icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept comment "base"
		ip saddr @blocklist counter drop comment "rule drop-blocklist"
		iifname "br-lan" tcp dport 22 limit rate 10/minute burst 5 packets log prefix "ssh: " comment "rule ssh"
		iifname "br-lan" tcp dport 22 counter accept comment "rule ssh"
		meta l4proto tcp counter reject with tcp reset comment "base"
		counter reject with icmpx port-unreachable comment "base"
	}

	chain forward {
		type filter hook forward priority 0; policy drop;
		ct state established,related accept comment "base"
		ct state invalid counter drop comment "base"
		ip saddr @blocklist counter drop comment "rule drop-blocklist"
		ct status dnat ct mark & 0x80000000 != 0 counter accept comment "base"
		iifname "br-lan" oifname "eth0" counter accept comment "forward lan->wan"
	}

	chain output {
		type filter hook output priority 0; policy accept;
		oifname "lo" accept comment "base"
		ct state established,related accept comment "base"
		ct state invalid counter drop comment "base"
		icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept comment "base"
	}

	chain prerouting {
		type nat hook prerouting priority -100; policy accept;
		iifname "eth0" fib daddr type local tcp dport 8080 counter ct mark set ct mark | 0x80000000 dnat ip to 192.168.1.10:80 comment "port-forward web"
		iifname "br-lan" ip daddr 198.51.100.1 tcp dport 8080 counter ct mark set ct mark | 0x80000000 dnat ip to 192.168.1.10:80 comment "port-forward web"
	}

	chain postrouting {
		type nat hook postrouting priority 100; policy accept;
		iifname "br-lan" ct status dnat ip daddr 192.168.1.10 tcp dport 80 counter masquerade comment "port-forward web"
		meta nfproto ipv4 oifname != "lo" oifname "eth0" counter masquerade comment "masquerade wan"
	}
}"#;
    assert_eq!(got, want, "\n{got}");
}

#[test]
fn comments_carry_a_hash_of_the_rule_text() {
    let p = build();
    for r in &p.table.rules {
        let comment = r.comment.as_deref().unwrap();
        let (_, hash) = comment.rsplit_once(" #").unwrap();
        assert_eq!(hash.len(), 8, "{comment}");
        let mut bare = r.clone();
        bare.comment = None;
        assert!(!render_rule(p.table.family, &bare).is_empty());
    }
    // Same input, same program (plans are deterministic).
    assert_eq!(build(), p);
}

#[test]
fn a_refused_accept_group_is_left_out_and_a_refused_deny_group_leaves_a_barrier() {
    let p = build();
    let group = |label: &str| p.groups.iter().position(|g| g.label == label).unwrap() as u32;
    let ssh = group("rule ssh");
    let (t, rule_groups, _) = p.without(&BTreeSet::from([ssh]));
    assert_eq!(t.rules.len(), p.table.rules.len() - 2);
    assert!(
        !t.rules
            .iter()
            .any(|r| r.comment.as_deref().unwrap().starts_with("rule ssh"))
    );
    assert_eq!(rule_groups.len(), t.rules.len());
    let block = group("rule drop-blocklist");
    let set = group("set blocklist");
    let (t, _, set_groups) = p.without(&BTreeSet::from([block, set]));
    assert!(t.sets.is_empty() && set_groups.is_empty());
    let barriers: Vec<String> = t
        .rules
        .iter()
        .filter(|r| r.comment.as_deref().unwrap().contains("fail closed"))
        .map(|r| format!("{} {}", r.chain, render_rule(t.family, r)))
        .collect();
    assert_eq!(
        barriers,
        [
            "input counter drop comment \"rule drop-blocklist refused by the kernel: fail closed\"",
            "forward counter drop comment \"rule drop-blocklist refused by the kernel: fail closed\"",
        ]
    );
}

#[test]
fn element_only_changes_keep_the_structure() {
    let a = build();
    let desired = load_str(&[(
        "edgenetd.toml",
        &SMALL.replace("\"192.0.2.1\"]", "\"192.0.2.1\", \"192.0.2.77\"]"),
    )])
    .unwrap();
    let b = program::build_with(
        desired.policy.as_ref().unwrap(),
        "edgenetd-policy",
        &router_addresses(),
    );
    assert_ne!(a, b);
    assert!(a.same_structure(&b));
    // Patching the changed set gives exactly what planning from scratch gives.
    let old = load_str(&[("edgenetd.toml", SMALL)])
        .unwrap()
        .policy
        .unwrap();
    let new = desired.policy.clone().unwrap();
    assert!(program::only_set_elements_differ(&old, &new));
    assert_eq!(program::with_set_elements(&a, &old, &new), b);
    let desired = load_str(&[(
        "edgenetd.toml",
        &SMALL.replace("ports = [22]", "ports = [2222]"),
    )])
    .unwrap();
    let c = program::build(desired.policy.as_ref().unwrap(), "edgenetd-policy");
    assert!(!a.same_structure(&c));
}

#[test]
fn sets_of_single_addresses_are_hash_sets_and_prefixes_make_them_interval_sets() {
    let cfg = |elements: &str| {
        let text = format!(
            "[policy]\n[policy.set.s]\ntype = \"ipv4\"\nelements = [{elements}]\n[[policy.rule]]\nname = \"r\"\nfrom = \"@s\"\naction = \"drop\"\n"
        );
        let d = load_str(&[("e.toml", &text)]).unwrap();
        program::build(d.policy.as_ref().unwrap(), "t")
    };
    let hosts = cfg("\"192.0.2.1\", \"192.0.2.2\"");
    let text = render_table(&hosts.table);
    assert!(
        text.contains("set s {\n\t\ttype ipv4_addr\n\t\telements = { 192.0.2.1, 192.0.2.2 }"),
        "{text}"
    );
    let mixed = cfg("\"192.0.2.1\", \"198.51.100.0/24\"");
    let text = render_table(&mixed.table);
    assert!(
        text.contains(
            "type ipv4_addr\n\t\tflags interval\n\t\telements = { 192.0.2.1, 198.51.100.0/24 }"
        ),
        "{text}"
    );
    assert!(!hosts.same_structure(&mixed), "the flip rewrites the table");
}

#[test]
fn the_routers_addresses_on_a_zone_follow_its_interfaces_or_networks() {
    let desired = load_str(&[(
        "edgenetd.toml",
        "[policy.zone.wan]\ninterfaces = [\"ppp*\", \"eth0\"]\n\
         [policy.zone.lan]\nnetworks = [\"192.168.1.0/24\"]\n",
    )])
    .unwrap();
    let p = desired.policy.unwrap();
    let addrs = RouterAddresses::new(vec![
        ("ppp0".into(), "203.0.113.5".parse().unwrap()),
        ("ppp1".into(), "2001:db8::5".parse().unwrap()),
        ("eth0".into(), "198.51.100.1".parse().unwrap()),
        ("eth01".into(), "198.51.100.2".parse().unwrap()),
        ("br-lan".into(), "192.168.1.1".parse().unwrap()),
        ("lo".into(), "192.168.1.9".parse().unwrap()),
    ]);
    let strs = |v: Vec<std::net::IpAddr>| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    // Interfaces by exact name and by `*` stem (not `eth01`).
    assert_eq!(
        strs(addrs.of_zone(&p.zones["wan"])),
        ["198.51.100.1", "203.0.113.5", "2001:db8::5"]
    );
    // A zone of networks only: the router's addresses inside them, never loopback's.
    assert_eq!(strs(addrs.of_zone(&p.zones["lan"])), ["192.168.1.1"]);
    // Without addresses (none read), port forwards do not reflect.
    let cfg = load_str(&[("edgenetd.toml", SMALL)])
        .unwrap()
        .policy
        .unwrap();
    let text = render_table(&program::build(&cfg, "t").table);
    assert!(!text.contains("iifname \"br-lan\" ip daddr"), "{text}");
    assert_eq!(
        text.matches("dnat ip to 192.168.1.10:80").count(),
        1,
        "{text}"
    );
}
