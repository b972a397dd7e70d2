//! The planner (pure, no kernel) for issue 11 items 8 and 9: the exact rules of richer
//! matches, a port-forward range, zone SNAT and a marking rule, and where each goes.

use edgenetd::controller::policy::program::MANGLE_PREROUTING;

use crate::common::policy::{program_of as build, rendered_rules as rules};
use edgenetd::dataplane::nft::ir::{ChainType, Hook};

const POLICY: &str = r#"
[policy]
[policy.zone.lan]
interfaces = ["br-lan"]
[policy.zone.wan]
interfaces = ["eth0"]
snat = "198.51.100.7"
[policy.set.servers]
type = "ipv6"
elements = ["2001:db8::10"]

[[policy.rule]]
name = "dns"
from = "lan"
to = "wan"
to_addresses = ["192.0.2.0/24", "@servers", "::53/::ffff"]
protocol = ["tcp", "udp"]
ports = [53]
source_ports = ["1000-1100"]
action = "reject"

[[policy.rule]]
name = "mark"
from = "lan"
protocol = "tcp"
ports = [443]
set_mark = "0x10/0xff"

[[policy.port_forward]]
name = "games"
from = "wan"
port = "8000-8001"
to = "10.0.0.2:9000-9001"
from_addresses = ["203.0.113.0/24"]
"#;

#[test]
fn richer_matches_render_one_rule_per_protocol_and_address_kind() {
    let p = build(POLICY);
    let m = "iifname \"br-lan\" oifname \"eth0\"";
    let tail = "th sport 1000-1100 counter";
    assert_eq!(
        rules(&p, "forward", "rule dns"),
        [
            format!("{m} ip daddr {{ 192.0.2.0/24 }} tcp dport 53 {tail} reject with tcp reset"),
            format!("{m} ip6 daddr @servers tcp dport 53 {tail} reject with tcp reset"),
            format!("{m} ip6 daddr & ::ffff == ::53 tcp dport 53 {tail} reject with tcp reset"),
            format!(
                "{m} ip daddr {{ 192.0.2.0/24 }} udp dport 53 {tail} reject with icmpx port-unreachable"
            ),
            format!(
                "{m} ip6 daddr @servers udp dport 53 {tail} reject with icmpx port-unreachable"
            ),
            format!(
                "{m} ip6 daddr & ::ffff == ::53 udp dport 53 {tail} reject with icmpx port-unreachable"
            ),
        ]
    );
}

#[test]
fn a_marking_rule_marks_in_mangle_prerouting_only() {
    let p = build(POLICY);
    let chain = p
        .table
        .chains
        .iter()
        .find(|c| c.name == MANGLE_PREROUTING)
        .unwrap();
    let base = chain.base.unwrap();
    assert_eq!(base.priority, -150);
    assert_eq!(
        rules(&p, MANGLE_PREROUTING, "mark mark"),
        [
            "iifname \"br-lan\" tcp dport 443 counter meta mark set meta mark & 0xffffff00 | 0x00000010"
        ]
    );
    for chain in ["input", "forward", "output"] {
        assert!(rules(&p, chain, "rule mark").is_empty(), "{chain}");
    }
    // A marking rule with an action also filters; without any marking rule there is no
    // mangle chain at all.
    let both = build(&POLICY.replace(
        "set_mark = \"0x10/0xff\"",
        "set_mark = 16\naction = \"accept\"",
    ));
    assert_eq!(
        rules(&both, MANGLE_PREROUTING, "mark mark"),
        ["iifname \"br-lan\" tcp dport 443 counter meta mark set 0x00000010"]
    );
    assert_eq!(rules(&both, "input", "rule mark").len(), 1);
    let none = build(&POLICY.replace("set_mark = \"0x10/0xff\"", "action = \"accept\""));
    assert!(
        none.table
            .chains
            .iter()
            .all(|c| c.name != MANGLE_PREROUTING)
    );
}

/// fw4's 03_rules/12_mark: the six mark rules (`set_mark` with and without a mask, whose
/// value may have bits outside it, and `set_xmark` to set, flip, AND and OR bits) become
/// the one bitwise step fw4 renders for each.
#[test]
fn fw4_12_mark_set_mark_and_set_xmark_compile_to_fw4s_bitwise_steps() {
    let cases = [
        ("set_mark = \"0xaa\"", "meta mark set 0x000000aa"),
        (
            "set_mark = \"0xab/0xff00\"",
            "meta mark set meta mark & 0xffff0054 | 0x000000ab",
        ),
        ("set_xmark = \"0xac\"", "meta mark set 0x000000ac"),
        (
            "set_xmark = \"0xad/0xff00\"",
            "meta mark set meta mark & 0xffff00ff ^ 0x000000ad",
        ),
        (
            "set_xmark = \"0/0xffffff51\"",
            "meta mark set meta mark & 0x000000ae | 0x00000000",
        ),
        (
            "set_xmark = \"0xaf/0xaf\"",
            "meta mark set meta mark & 0xffffff50 | 0x000000af",
        ),
    ];
    let mut text = String::from(
        "[policy]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[policy.zone.wan]\ninterfaces = [\"eth0\"]\n",
    );
    for (i, (key, _)) in cases.iter().enumerate() {
        text.push_str(&format!("[[policy.rule]]\nname = \"m{}\"\n{key}\n", i + 1));
    }
    let p = build(&text);
    for (i, (key, want)) in cases.iter().enumerate() {
        assert_eq!(
            rules(&p, MANGLE_PREROUTING, &format!("mark m{}", i + 1)),
            [format!("counter {want}")],
            "{key}"
        );
    }
}

#[test]
fn a_port_forward_range_maps_each_port_and_snat_replaces_masquerade() {
    let p = build(POLICY);
    assert_eq!(
        rules(&p, "prerouting", "port-forward games"),
        [
            "iifname \"eth0\" ip saddr { 203.0.113.0/24 } fib daddr type local tcp dport 8000-8001 counter ct mark set ct mark | 0x80000000 dnat ip addr . port to tcp dport map { 8000 : 10.0.0.2 . 9000, 8001 : 10.0.0.2 . 9001 }"
        ]
    );
    assert_eq!(
        rules(&p, "postrouting", "snat wan"),
        ["meta nfproto ipv4 oifname != \"lo\" oifname \"eth0\" counter snat ip to 198.51.100.7"]
    );
    assert!(rules(&p, "postrouting", "masquerade").is_empty());
}

/// `set_dscp` goes where fw4 puts its DSCP target: the chain of the packets' path, at
/// mangle priority, one rule per IP version the rest of the rule allows.
#[test]
fn a_set_dscp_rule_rewrites_in_the_mangle_chain_of_its_path() {
    use edgenetd::controller::policy::program::{MANGLE_FORWARD, MANGLE_INPUT, MANGLE_OUTPUT};
    let zones = "[policy]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[policy.zone.wan]\ninterfaces = [\"eth0\"]\n";
    let rule = |name: &str, keys: &str| {
        format!("[[policy.rule]]\nname = \"{name}\"\n{keys}set_dscp = \"ef\"\n")
    };
    let p = build(&format!(
        "{zones}{}{}{}{}",
        rule(
            "fwd",
            "from = \"lan\"\nto = \"wan\"\nprotocol = \"udp\"\nports = [5060]\n"
        ),
        rule("in", "from = \"lan\"\nto = \"self\"\n"),
        rule("out", "from = \"self\"\nprotocol = \"icmp\"\n"),
        rule("pre", "from = \"wan\"\n"),
    ));
    let chain = |name: &str| {
        let c = p.table.chains.iter().find(|c| c.name == name).unwrap();
        let b = c.base.unwrap();
        (b.hook, b.kind, b.priority)
    };
    assert_eq!(
        chain(MANGLE_FORWARD),
        (Hook::Forward, ChainType::Filter, -150)
    );
    assert_eq!(chain(MANGLE_INPUT), (Hook::Input, ChainType::Filter, -150));
    assert_eq!(chain(MANGLE_OUTPUT), (Hook::Output, ChainType::Route, -150));
    assert_eq!(
        chain(MANGLE_PREROUTING),
        (Hook::Prerouting, ChainType::Filter, -150)
    );
    let m = "iifname \"br-lan\" oifname \"eth0\" udp dport 5060";
    assert_eq!(
        rules(&p, MANGLE_FORWARD, "dscp fwd"),
        [
            format!("{m} ip dscp set ef counter"),
            format!("{m} ip6 dscp set ef counter")
        ]
    );
    assert_eq!(
        rules(&p, MANGLE_INPUT, "dscp in"),
        [
            "iifname \"br-lan\" ip dscp set ef counter",
            "iifname \"br-lan\" ip6 dscp set ef counter"
        ]
    );
    // An IPv4-only rule rewrites only `ip dscp`.
    assert_eq!(
        rules(&p, MANGLE_OUTPUT, "dscp out"),
        ["meta l4proto icmp ip dscp set ef counter"]
    );
    assert_eq!(rules(&p, MANGLE_PREROUTING, "dscp pre").len(), 2);
    // A rule that only rewrites is in no filter chain.
    for chain in ["input", "forward", "output"] {
        assert!(rules(&p, chain, "rule ").is_empty(), "{chain}");
    }
}
