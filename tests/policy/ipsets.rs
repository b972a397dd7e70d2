//! Address·port sets (issue 23 item 6, fw4's 05_ipsets): a set's `match` and pairs, a rule's
//! `ipset`, the ruleset they make (fw4's cases), what `check` refuses, and with real packets
//! that only the listed address·port pairs pass.

use crate::common;
use crate::netns_test;

use edgenetd::config::load_str;
use edgenetd::dataplane::nft::text::render_table;

use common::controller::Driver;
use common::policy::{lan_wan, planned_policy_nft, program_of, rendered_rules, rule_handles};
use common::scratch::ScratchDir;
use common::topology::failed;

/// fw4's 05_ipsets/02_usage, translated: its two IPv4 sets and five rules (no `target`:
/// they count).
const USAGE: &str = r#"
[policy]
[policy.zone.lan]
interfaces = ["br-lan"]

[policy.set.test-set-1]
type = "ipv4"
match = ["src_ip", "dest_port"]
elements = ["1.2.3.4 80", "5.6.7.8 . 22"]

[policy.set.test-set-2]
type = "ipv4"
match = ["ip", "port"]
elements = ["1.2.3.4 80", "5.6.7.8 22"]

[[policy.rule]]
name = "set-1"
protocol = "tcp"
ipset = "test-set-1"

[[policy.rule]]
name = "set-2-source-by-default"
protocol = "tcp"
ipset = "test-set-2"

[[policy.rule]]
name = "set-1-overridden"
protocol = "tcp"
ipset = "test-set-1 dst src"

[[policy.rule]]
name = "set-2-specified"
protocol = "tcp"
ipset = "test-set-2 dst,dst"

[[policy.rule]]
name = "set-1-overridden-inverted"
protocol = "tcp"
ipset = "!test-set-1 dst src"
"#;

#[test]
fn fw4_05_ipsets_02_usage_pairs_match_in_the_directions_fw4_gives_them() {
    let p = program_of(USAGE);
    let forward = rendered_rules(&p, "forward", "rule set-");
    assert_eq!(
        forward,
        [
            "meta l4proto tcp ip saddr . tcp dport @test-set-1 counter",
            "meta l4proto tcp ip saddr . th sport @test-set-2 counter",
            "meta l4proto tcp ip daddr . th sport @test-set-1 counter",
            "meta l4proto tcp ip daddr . tcp dport @test-set-2 counter",
            "meta l4proto tcp ip daddr . th sport != @test-set-1 counter",
        ]
    );
    let table = render_table(&p.table);
    assert!(
        table.contains("type ipv4_addr . inet_service")
            && table.contains("1.2.3.4 . 80")
            && table.contains("5.6.7.8 . 22"),
        "{table}"
    );
}

#[test]
fn bad_ipset_keys_are_reported_at_their_place() {
    let out = load_str(&[(
        "main.toml",
        r#"[policy]
[policy.set.pairs]
type = "ipv4"
match = ["dest_ip", "dest_port"]
elements = ["192.0.2.1 80", "2001:db8::1 80", "192.0.2.1"]
[policy.set.macs]
type = "ipv4"
match = ["src_mac", "dest_port"]
[policy.set.plain]
type = "ipv4"
[[policy.rule]]
name = "a"
ipset = "pairs"
[[policy.rule]]
name = "b"
protocol = "tcp"
ipset = "plain"
[[policy.rule]]
name = "c"
protocol = "tcp"
from = "@pairs"
[[policy.rule]]
name = "d"
protocol = "udp"
ipset = "pairs dst"
"#,
    )])
    .expect_err("config must be rejected")
    .rendered;
    for e in [
        "main.toml:5:29: error: element `2001:db8::1 80`: 2001:db8::1 is not of the set's type (\"ipv4\")",
        "main.toml:5:47: error: invalid element `192.0.2.1`: expected 2 values separated by blanks (ADDRESS PORT), e.g. \"192.0.2.10 443\"",
        "main.toml:8:10: error: invalid set match field `mac`: expected `ip`, `net` or `port`",
        "main.toml:13:9: error: set `pairs` matches ports: expected `protocol` \"tcp\", \"udp\" or both",
        "main.toml:17:9: error: set `plain` holds addresses, not address·port pairs",
        "main.toml:21:8: error: set `pairs` holds address·port pairs, not addresses: match it with `ipset = \"pairs\"`",
        "main.toml:25:9: error: `ipset` gives 1 direction for the 2 fields of set `pairs`",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

/// The lan may reach exactly the pairs of `allowed` on the wan (tcp and udp); nothing
/// else is forwarded.
const PAIRS: &str = r#"
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
match = ["dest_ip", "dest_port"]
elements = ["192.0.2.2 80", "192.0.2.3 81"]

[[policy.rule]]
name = "allowed-pairs"
from = "lan"
to = "wan"
protocol = ["tcp", "udp"]
ipset = "allowed"
action = "accept"
"#;

netns_test! {
    fn fw4_05_ipsets_only_the_listed_address_port_pairs_pass() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        for port in [80, 81] {
            t.serve(wan, "tcp", port);
        }
        Driver::policy().sync(PAIRS).unwrap();
        for (to, port, passes) in [
            ("192.0.2.2", 80, true),
            ("192.0.2.3", 81, true),
            ("192.0.2.2", 81, false),
            ("192.0.2.3", 80, false),
        ] {
            let got = t.connect(lan, "tcp", to, port);
            assert_eq!(!failed(&got), passes, "{to}:{port}: {got}");
        }
        // A pair added to the set: one element batch, and it passes.
        let more = PAIRS.replace("\"192.0.2.3 81\"]", "\"192.0.2.3 81\", \"192.0.2.3 80\"]");
        let mut d = Driver::policy();
        d.sync(PAIRS).unwrap();
        let handles = rule_handles();
        d.sync(&more).unwrap();
        assert!(!failed(&t.connect(lan, "tcp", "192.0.2.3", 80)));
        assert_eq!(rule_handles(), handles, "an element change rewrote the rules");
    }
}

netns_test! {
    fn the_plan_of_address_port_sets_is_nft_text_nft_accepts() {
        let dir = ScratchDir::with_files("ipsets-plan", &[("edgenetd.toml", USAGE)]);
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("ip daddr . th sport != @test-set-1"), "{text}");
    }
}
