//! `action = "notrack"` (issue 23 item 9, fw4's `target NOTRACK`, its 03_rules/10_notrack):
//! where the rules go, what `check` refuses, and with real packets that conntrack (and so
//! masquerade) never sees the traffic.

use crate::common;
use crate::netns_test;

use edgenetd::config::load_str;
use edgenetd::controller::policy::program::{RAW_OUTPUT, RAW_PREROUTING};
use edgenetd::dataplane::nft::ir::Hook;

use common::controller::Driver;
use common::policy::{HOME, lan_wan, program_of, rendered_rules};

/// The rules of `chain` in the program of `text`, as nft text.
fn rendered(text: &str, chain: &str) -> Vec<String> {
    rendered_rules(&program_of(text), chain, "")
}
use common::shell::sh;

/// fw4's three zones of 10_notrack (a device, loopback and a loopback subnet), with a
/// notrack rule from each, and the router's own traffic as edgenetd spells it.
const ZONES: &str = r#"
[policy]
[policy.zone.zone1]
interfaces = ["eth0"]
[policy.zone.zone3]
networks = ["127.0.0.0/8", "::1/128"]

[[policy.rule]]
name = "notrack-1"
from = "zone1"
action = "notrack"

[[policy.rule]]
name = "notrack-2"
from = "self"
action = "notrack"

[[policy.rule]]
name = "notrack-3"
from = "zone3"
protocol = ["tcp", "udp"]
action = "notrack"
"#;

#[test]
fn fw4_10_notrack_rules_end_up_in_the_raw_chain_of_their_source() {
    let p = program_of(ZONES);
    for (name, hook) in [
        (RAW_PREROUTING, Hook::Prerouting),
        (RAW_OUTPUT, Hook::Output),
    ] {
        let chain = p.table.chains.iter().find(|c| c.name == name).unwrap();
        let base = chain.base.unwrap();
        assert_eq!((base.hook, base.priority), (hook, -300), "{name}");
    }
    assert_eq!(
        rendered(ZONES, RAW_PREROUTING),
        [
            "iifname \"eth0\" counter notrack",
            "ip saddr { 127.0.0.0/8 } meta l4proto tcp counter notrack",
            "ip6 saddr ::1 meta l4proto tcp counter notrack",
            "ip saddr { 127.0.0.0/8 } meta l4proto udp counter notrack",
            "ip6 saddr ::1 meta l4proto udp counter notrack",
        ]
    );
    assert_eq!(rendered(ZONES, RAW_OUTPUT), ["counter notrack"]);
    // Nothing of them in the filter chains, and no raw chain without a notrack rule.
    for chain in ["input", "forward", "output"] {
        let rules = rendered(ZONES, chain);
        assert!(
            rules.iter().all(|r| !r.contains("notrack")),
            "{chain}: {rules:?}"
        );
    }
    let none = ZONES.replace("action = \"notrack\"", "action = \"accept\"");
    assert!(rendered(&none, RAW_PREROUTING).is_empty());
    let p = program_of(&none);
    assert!(p.table.chains.iter().all(|c| !c.name.starts_with("raw_")));
}

#[test]
fn a_notrack_rule_that_asks_for_more_than_the_exemption_is_reported_at_each_key() {
    let out = load_str(&[(
        "main.toml",
        r#"[policy]
[policy.zone.lan]
interfaces = ["br-lan"]
[policy.zone.wan]
interfaces = ["eth0"]

[[policy.rule]]
name = "a"
from = "lan"
to = "wan"
action = "notrack"

[[policy.rule]]
name = "b"
from = "lan"
action = "notrack"
set_mark = "0x1"
limit = "10/second"

[[policy.rule]]
name = "c"
from = "lan"
action = "notrack"
log = true

[[policy.rule]]
name = "d"
action = "untrack"
"#,
    )])
    .expect_err("config must be rejected")
    .rendered;
    for e in [
        "main.toml:10:6: error: a notrack rule only exempts packets from connection tracking, before routing, when their way out is not known yet: expected no `to`",
        "main.toml:17:12: error: a notrack rule only exempts packets from connection tracking, before routing: expected no `set_mark`",
        "main.toml:18:9: error: a notrack rule only exempts packets from connection tracking, before routing: expected no `limit`",
        "main.toml:21:8: error: a notrack rule only exempts packets from connection tracking, before routing: expected no `log`",
        "main.toml:28:10: error: invalid action `untrack`: expected \"accept\", \"drop\", \"reject\" or \"notrack\"",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

/// HOME with TCP to the wan host's 192.0.2.3:80 exempted both ways, and the two rules an
/// untracked flow then needs (nothing is `established` for it).
fn untracked_web() -> String {
    format!(
        r#"{HOME}
[[policy.rule]]
name = "web-out-untracked"
from = "lan"
to_addresses = ["192.0.2.3"]
protocol = "tcp"
ports = [80]
action = "notrack"

[[policy.rule]]
name = "web-back-untracked"
from = ["192.0.2.3/32"]
protocol = "tcp"
source_ports = [80]
action = "notrack"

[[policy.rule]]
name = "web-back"
from = "wan"
to = "lan"
protocol = "tcp"
source_ports = [80]
action = "accept"
"#
    )
}

netns_test! {
    /// Masquerade lives in the conntrack entry: an untracked flow leaves with the lan
    /// host's own address, while a tracked one to the same server is masqueraded.
    fn fw4_10_notrack_traffic_is_never_tracked_so_never_masqueraded() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        Driver::policy().sync(&untracked_web()).unwrap();
        t.serve(wan, "tcp", 80);
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "10.0.0.2");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        let raw = sh("nft list chain inet edgenetd-policy raw_prerouting");
        assert!(
            raw.contains("tcp dport 80 counter packets") && !raw.contains("packets 0 bytes 0 notrack"),
            "{raw}"
        );
        // Without the exemption the same connection is masqueraded.
        let tracked = untracked_web().replace("action = \"notrack\"", "action = \"accept\"");
        Driver::policy().sync(&tracked).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "192.0.2.1");
    }
}
