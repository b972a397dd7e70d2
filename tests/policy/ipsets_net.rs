//! Address·port sets with prefixes (issue 23 item 6, fw4's 05_ipsets with `net` fields):
//! a concatenated interval set in the kernel (`flags interval`, each element a key and its
//! last key), the ruleset it makes (fw4's test-set-3), what `check` refuses, real packets
//! between namespaces, the set read back with `nft list set`, and a hand deletion repaired.

use crate::common;
use crate::netns_test;

use edgenetd::dataplane::nft::text::render_table;

use common::controller::Driver;
use common::policy::{
    assert_all, config_errors, lan_wan, planned_policy_nft, program_of, rendered_rules,
    rule_handles,
};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::failed;

/// fw4's 05_ipsets/02_usage test-set-3 and its rule, translated: IPv6, `net . net . port`,
/// the directions given by the rule (`src,dest,dest`). fw4 takes `::1/64` and masks it;
/// edgenetd wants the prefix written without host bits (an error says which one).
const USAGE_V6: &str = r#"
[policy]
[policy.zone.lan]
interfaces = ["br-lan"]

[policy.set.test-set-3]
type = "ipv6"
match = ["net", "net", "port"]
elements = [
    "db80:1234:4567::/64 db80:1234:abcd::/64 80",
    "db80:8765:aaaa::/64 db80:8765:ffff::/64 22",
    "db80:1:2:3:4:0:0:1 0:0:0:0:0:0:0:0/0 443",
]

[[policy.rule]]
name = "set-3-alternative-directions"
protocol = "tcp"
ipset = "test-set-3 src,dest,dest"
"#;

#[test]
fn fw4_05_ipsets_02_usage_net_net_port_is_a_concatenated_interval_set() {
    let p = program_of(USAGE_V6);
    assert_eq!(
        rendered_rules(&p, "forward", "rule set-3"),
        ["meta l4proto tcp ip6 saddr . ip6 daddr . tcp dport @test-set-3 counter"]
    );
    let table = render_table(&p.table);
    let set = &table[table.find("set test-set-3").expect("the set")..];
    let set = &set[..set.find("\n\t}").unwrap()];
    assert_all(
        set,
        &[
            "type ipv6_addr . ipv6_addr . inet_service",
            "flags interval",
            "db80:1234:4567::/64 . db80:1234:abcd::/64 . 80",
            "db80:8765:aaaa::/64 . db80:8765:ffff::/64 . 22",
            "db80:1:2:3:4::1 . ::/0 . 443",
        ],
    );
}

/// fw4's 05_ipsets/01_declaration's shape (address . port, no `net`) stays a hash set: only a
/// `net` field makes it an interval set.
#[test]
fn fw4_05_ipsets_01_declaration_without_net_fields_stays_a_hash_set() {
    let p = program_of(
        r#"[policy]
[policy.set.test-set]
type = "ipv4"
match = ["src_ip", "dest_port"]
elements = ["1.2.3.4 80", "5.6.7.8 22"]
"#,
    );
    let set = p.table.sets.iter().find(|s| s.name == "test-set").unwrap();
    assert!(!set.interval, "{set:?}");
}

#[test]
fn fw4_05_ipsets_bad_net_elements_are_reported_at_their_place() {
    let out = config_errors(
        r#"[policy]
[policy.set.nets]
type = "ipv4"
match = ["src_net", "dest_ip", "dest_port"]
elements = ["10.0.0.0/24 192.0.2.0/24 80", "10.0.0.1/24 192.0.2.2 80", "10.0.0.0/8 192.0.2.2 80", "10.0.0.0/24 192.0.2.2 80 81", "10.0.0.0/24 192.0.2.2 80"]
[policy.set.wide]
type = "ipv6"
match = ["net", "net", "net", "net", "port"]
[policy.set.ports]
type = "ipv4"
match = ["src_port", "dest_port"]
"#,
    );
    assert_all(
        &out,
        &[
            "main.toml:5:13: error: element `10.0.0.0/24 192.0.2.0/24 80`: 192.0.2.0/24 is a prefix, but its field is `ip` (one address): make the field `net` to hold prefixes",
            "main.toml:5:44: error: element `10.0.0.1/24 192.0.2.2 80`: invalid prefix `10.0.0.1/24`: host bits are set; did you mean \"10.0.0.0/24\"?",
            "main.toml:5:99: error: invalid element `10.0.0.0/24 192.0.2.2 80 81`: expected 3 values separated by blanks (PREFIX ADDRESS PORT), e.g. \"192.0.2.0/24 192.0.2.10 443\"",
            "main.toml:5:130: error: element `10.0.0.0/24 192.0.2.2 80` overlaps element `10.0.0.0/8 192.0.2.2 80`: the kernel refuses overlapping elements of a set with `net` fields",
            "main.toml:8:9: error: a set's `match` of 5 fields makes a key of 68 bytes: the kernel takes at most 64",
            "main.toml:11:9: error: a set's `match` is two or more fields, addresses (`ip`, `net`) and at least one `port`",
        ],
    );
}

/// The lan may reach the wan's tuples of `allowed` (source prefix . destination prefix .
/// port); nothing else is forwarded.
const NETS: &str = r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]
[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[policy.set.allowed]
type = "ipv4"
match = ["src_net", "dest_net", "dest_port"]
elements = ["10.0.0.0/29 192.0.2.2/31 80", "10.0.0.0/24 192.0.2.3 81", "10.9.0.0/16 192.0.2.2 81"]

[[policy.rule]]
name = "allowed-tuples"
from = "lan"
to = "wan"
protocol = ["tcp", "udp"]
ipset = "allowed"
action = "accept"
"#;

fn listed() -> String {
    sh("nft list set inet edgenetd-policy allowed")
}

netns_test! {
    fn fw4_05_ipsets_net_fields_match_prefixes_with_real_packets() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        for port in [80, 81] {
            t.serve(wan, "tcp", port);
        }
        let mut d = Driver::policy();
        d.sync(NETS).unwrap();
        let set = listed();
        assert_all(
            &set,
            &[
                "type ipv4_addr . ipv4_addr . inet_service",
                "flags interval",
                "10.0.0.0/29 . 192.0.2.2/31 . 80",
                "10.0.0.0/24 . 192.0.2.3 . 81",
                "10.9.0.0/16 . 192.0.2.2 . 81",
            ],
        );
        for (from, to, port, passes) in [
            ("10.0.0.2", "192.0.2.2", 80, true),
            ("10.0.0.2", "192.0.2.3", 80, true),
            // 10.0.0.10 is outside 10.0.0.0/29.
            ("10.0.0.10", "192.0.2.3", 80, false),
            ("10.0.0.10", "192.0.2.3", 81, true),
            // 192.0.2.2 . 81 is only for 10.9.0.0/16.
            ("10.0.0.2", "192.0.2.2", 81, false),
        ] {
            let got = t.connect_from(lan, "tcp", to, port, from);
            assert_eq!(!failed(&got), passes, "{from} -> {to}:{port}: {got}");
        }
        // A tuple added: one element batch (the rules stay), and it passes.
        let handles = rule_handles();
        let more = NETS.replace("\"10.9.0.0/16 192.0.2.2 81\"]", "\"10.9.0.0/16 192.0.2.2 81\", \"10.0.0.2 192.0.2.2 81\"]");
        d.sync(&more).unwrap();
        assert_eq!(rule_handles(), handles, "an element change rewrote the rules");
        assert!(!failed(&t.connect_from(lan, "tcp", "192.0.2.2", 81, "10.0.0.2")));
        // An element deleted by hand is drift: the next sync puts it back.
        sh("nft delete element inet edgenetd-policy allowed '{ 10.0.0.0/24 . 192.0.2.3 . 81 }'");
        assert!(!listed().contains("10.0.0.0/24 . 192.0.2.3 . 81"), "{}", listed());
        assert!(failed(&t.connect_from(lan, "tcp", "192.0.2.3", 81, "10.0.0.10")));
        let report = d.sync(&more).unwrap();
        assert!(report.drift_repairs >= 1, "{report:?}");
        assert!(listed().contains("10.0.0.0/24 . 192.0.2.3 . 81"), "{}", listed());
        assert!(!failed(&t.connect_from(lan, "tcp", "192.0.2.3", 81, "10.0.0.10")));
        // In sync now: nothing to do.
        let report = d.sync(&more).unwrap();
        assert_eq!((report.changes, report.drift_repairs), (0, 0), "{report:?}");
    }
}

netns_test! {
    fn fw4_05_ipsets_the_plan_of_a_net_set_is_nft_text_nft_accepts() {
        let dir = ScratchDir::with_files("ipsets-net-plan", &[("edgenetd.toml", NETS)]);
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("10.0.0.0/29 . 192.0.2.2/31 . 80"), "{text}");
        let dir = ScratchDir::with_files("ipsets-net-plan-v6", &[("edgenetd.toml", USAGE_V6)]);
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("db80:1:2:3:4::1 . ::/0 . 443"), "{text}");
    }
}

/// `edgenetd check` itself names the overlapping element at its place and exits 1.
#[test]
fn fw4_05_ipsets_check_reports_an_overlapping_net_element_at_its_place() {
    let text = "[policy]\n[policy.set.nets]\ntype = \"ipv4\"\nmatch = [\"src_net\", \"dest_port\"]\nelements = [\"10.0.0.0/8 80\", \"10.1.0.0/16 80\", \"10.1.0.0/16 81\"]\n";
    let dir = ScratchDir::with_files("ipsets-net-check", &[("edgenetd.toml", text)]);
    let path = dir.config();
    let run = common::bin::edgenetd(&["check", "--config", path.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let want = format!(
        "{}:5:30: error: element `10.1.0.0/16 80` overlaps element `10.0.0.0/8 80`",
        path.display()
    );
    assert!(
        run.stderr.contains(&want),
        "missing {want:?} in\n{}",
        run.stderr
    );
    assert_eq!(run.stderr.matches("overlaps").count(), 1, "{}", run.stderr);
}
