//! Issue 23 items 7 and 9 in the config and the planner: `family` on zones, forwards and
//! rules (fw4's `tests/02_zones/06_family_selections`, `tests/03_rules/08_family_inheritance`,
//! `tests/04_forwardings/01_family_selections`, translated into edgenetd's TOML) and
//! protocols by name or number (`"gre"`, `47`, fw4's `proto`): what loads, the exact rules,
//! every contradiction at its `file:line:col`, and the `plan` text through `nft -c`.

use crate::common;
use crate::netns_test;

use edgenetd::config::load_str;
use edgenetd::config::policy::{Family, Protocol};

use common::policy::{
    assert_all, config_errors as errors, planned_policy_nft, program_of as build,
    rendered_rules as rules,
};
use common::scratch::ScratchDir;

/// fw4's six zones of `02_zones/06_family_selections` (its fourth, IPv6 with an IPv6
/// subnet again, is the third here), each logging its drops so that its match shows.
const ZONES_06: &str = r#"
[policy]
input = "drop"
forward_default = "drop"

[policy.zone.test1]
family = "any"
networks = ["10.0.0.0/8"]
log_drops = true

[policy.zone.test2]
family = "any"
networks = ["2001:db8:1234::/64"]
log_drops = true

[policy.zone.test3]
family = "IPv6"
networks = ["2001:db8:1234::/64"]
log_drops = true

[policy.zone.test5]
family = "ipv6"
interfaces = ["eth0"]
log_drops = true

[policy.zone.test6]
family = "any"
interfaces = ["br-lan"]
log_drops = true
"#;

#[test]
fn fw4_06_family_selections_a_zone_emits_only_its_familys_matches() {
    let p = build(ZONES_06);
    let zone = |name: &str| rules(&p, "input", &format!("log-drops {name}"));
    let log = "counter limit rate 10/minute burst 5 packets log prefix";
    assert_eq!(
        zone("test1"),
        [format!(
            "ip saddr {{ 10.0.0.0/8 }} {log} \"drop test1 input: \""
        )]
    );
    assert_eq!(
        zone("test2"),
        [format!(
            "ip6 saddr {{ 2001:db8:1234::/64 }} {log} \"drop test2 input: \""
        )]
    );
    assert_eq!(
        zone("test3"),
        [format!(
            "ip6 saddr {{ 2001:db8:1234::/64 }} {log} \"drop test3 input: \""
        )]
    );
    // Interfaces only: the family is a test of its own.
    assert_eq!(
        zone("test5"),
        [format!(
            "meta nfproto ipv6 iifname \"eth0\" {log} \"drop test5 input: \""
        )]
    );
    assert_eq!(
        zone("test6"),
        [format!("iifname \"br-lan\" {log} \"drop test6 input: \"")]
    );
    let desired = load_str(&[("edgenetd.toml", ZONES_06)]).unwrap();
    let zones = &desired.policy.unwrap().zones;
    assert_eq!(zones["test3"].family, Family::Ipv6);
    assert_eq!(zones["test6"].family, Family::Any);
}

#[test]
fn fw4_06_family_selections_a_network_of_the_other_family_is_an_error_at_its_place() {
    // fw4 skips such a zone with a warning; edgenetd refuses the config.
    let out = errors(
        "[policy]\n[policy.zone.test4]\nfamily = \"ipv6\"\nnetworks = [\"2001:db8:1234::/64\", \"10.0.0.0/8\"]\n\
         [policy.zone.x]\nfamily = \"ipv5\"\ninterfaces = [\"x0\"]\n",
    );
    assert_all(
        &out,
        &[
            "main.toml:4:35: error: IPv4 network `10.0.0.0/8` in a zone with `family = \"ipv6\"`: expected ipv6 networks (or family \"any\")",
            "main.toml:6:10: error: invalid family `ipv5`: expected \"ipv4\", \"ipv6\" or \"any\"",
        ],
    );
}

/// fw4's `03_rules/08_family_inheritance`: a zone of IPv4 subnets, an IPv4 set, and rules
/// that inherit the zone's family or contradict it.
const INHERITANCE: &str = r#"
[policy]
[policy.zone.ipv4only]
networks = ["192.168.1.0/24"]

[policy.zone.lan]
family = "ipv4"
interfaces = ["br-lan"]

[policy.set.ipv4set]
type = "ipv4"
elements = ["10.0.0.2", "10.0.0.3", "10.0.0.4"]

[[policy.rule]]
name = "rule1"
from = "ipv4only"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"

[[policy.rule]]
name = "rule5"
from = "lan"
to = "self"
action = "accept"

[[policy.rule]]
name = "rule6"
to = "self"
family = "ipv6"
protocol = "tcp"
ports = [22]
action = "accept"
"#;

#[test]
fn fw4_08_family_inheritance_a_rule_takes_the_family_of_its_zone() {
    let p = build(INHERITANCE);
    assert_eq!(
        rules(&p, "input", "rule rule1"),
        ["ip saddr { 192.168.1.0/24 } tcp dport 22 counter accept"]
    );
    // A zone of interfaces with `family = "ipv4"`: its rules test the family.
    assert_eq!(
        rules(&p, "input", "rule rule5"),
        ["meta nfproto ipv4 iifname \"br-lan\" counter accept"]
    );
    // A rule's own family, from anywhere.
    assert_eq!(
        rules(&p, "input", "rule rule6"),
        ["meta nfproto ipv6 tcp dport 22 counter accept"]
    );
}

#[test]
fn fw4_08_family_inheritance_a_family_that_contradicts_the_rule_is_an_error_at_family() {
    let out = errors(
        r#"[policy]
[policy.zone.ipv4only]
networks = ["192.168.1.0/24"]
[policy.set.ipv4set]
type = "ipv4"

[[policy.rule]]
name = "rule2"
from = "10.0.0.1"
family = "IPv6"
action = "accept"

[[policy.rule]]
name = "rule3"
from = "ipv4only"
family = "ipv6"
action = "accept"

[[policy.rule]]
name = "rule4"
from = "@ipv4set"
family = "ipv6"
action = "accept"

[[policy.rule]]
name = "rule7"
protocol = "icmpv6"
family = "ipv4"
action = "accept"

[[policy.rule]]
name = "rule8"
to_addresses = ["fd00::/8"]
family = "ipv4"
action = "accept"
"#,
    );
    assert_all(
        &out,
        &[
            "main.toml:10:10: error: `family = \"ipv6\"` conflicts with `from`, which is IPv4 only",
            "main.toml:16:10: error: `family = \"ipv6\"` conflicts with `from` zone `ipv4only`, which is IPv4 only",
            "main.toml:22:10: error: `family = \"ipv6\"` conflicts with `from` set `@ipv4set`, which is IPv4 only",
            "main.toml:28:10: error: `family = \"ipv4\"` conflicts with `protocol = \"icmpv6\"`, which is IPv6 only",
            "main.toml:34:10: error: `family = \"ipv4\"` conflicts with `to_addresses`, which is IPv6 only",
        ],
    );
}

/// fw4's `04_forwardings/01_family_selections`.
const FORWARDINGS_01: &str = r#"
[policy]
[policy.zone.wanA]
interfaces = ["eth0"]
[policy.zone.wanB]
interfaces = ["eth1"]
[policy.zone.lan]
interfaces = ["eth2"]

[[policy.forward]]
from = "lan"
to = "wanA"
family = "IPv6"

[[policy.forward]]
from = "lan"
to = "wanB"
family = "IPv4"
"#;

#[test]
fn fw4_01_family_selections_a_forward_accepts_only_its_family() {
    let p = build(FORWARDINGS_01);
    assert_eq!(
        rules(&p, "forward", "forward lan->wanA"),
        ["meta nfproto ipv6 iifname \"eth2\" oifname \"eth0\" counter accept"]
    );
    assert_eq!(
        rules(&p, "forward", "forward lan->wanB"),
        ["meta nfproto ipv4 iifname \"eth2\" oifname \"eth1\" counter accept"]
    );
    // Without `family`, from the zones: an IPv4 zone's forward is IPv4 only.
    let inherited = build(&format!(
        "{FORWARDINGS_01}[policy.zone.v4]\nfamily = \"ipv4\"\ninterfaces = [\"eth3\"]\n\
         [[policy.forward]]\nfrom = \"v4\"\nto = \"wanA\"\n"
    ));
    assert_eq!(
        rules(&inherited, "forward", "forward v4->wanA"),
        ["meta nfproto ipv4 iifname \"eth3\" oifname \"eth0\" counter accept"]
    );
    let out = errors(&format!(
        "{FORWARDINGS_01}[policy.zone.v4]\nfamily = \"ipv4\"\ninterfaces = [\"eth3\"]\n\
         [[policy.forward]]\nfrom = \"v4\"\nto = \"wanA\"\nfamily = \"ipv6\"\n"
    ));
    assert_all(
        &out,
        &[
            "main.toml:25:10: error: `family = \"ipv6\"` conflicts with `from` zone `v4`, which is IPv4 only",
        ],
    );
}

/// Rules of fw4's protocols by name and number (`proto` in `03_rules/01_direction` and
/// `03_constraints`).
const PROTOCOLS: &str = r#"
[policy]
[policy.zone.wan]
interfaces = ["eth0"]

[[policy.rule]]
name = "gre"
from = "wan"
to = "self"
protocol = "gre"
action = "accept"

[[policy.rule]]
name = "esp"
from = "wan"
to = "self"
protocol = 50
action = "accept"

[[policy.rule]]
name = "igmp"
from = "wan"
protocol = "IGMP"
action = "drop"

[[policy.rule]]
name = "all"
from = "wan"
to = "self"
protocol = "all"
action = "accept"

[[policy.rule]]
name = "v6icmp"
from = "wan"
to = "self"
protocol = "ipv6-icmp"
icmp_types = ["echo-request"]
action = "accept"
"#;

#[test]
fn fw4_03_constraints_protocols_by_name_or_number_become_meta_l4proto() {
    let desired = load_str(&[("edgenetd.toml", PROTOCOLS)]).unwrap();
    let protocols: Vec<Protocol> = desired
        .policy
        .unwrap()
        .rules
        .iter()
        .map(|r| r.matches.protocol)
        .collect();
    assert_eq!(
        protocols,
        [
            Protocol::Other(47),
            Protocol::Other(50),
            Protocol::Other(2),
            Protocol::Any,
            Protocol::Icmpv6
        ]
    );
    let p = build(PROTOCOLS);
    let wan = "iifname \"eth0\"";
    assert_eq!(
        rules(&p, "input", "rule gre"),
        [format!("{wan} meta l4proto 47 counter accept")]
    );
    assert_eq!(
        rules(&p, "input", "rule esp"),
        [format!("{wan} meta l4proto 50 counter accept")]
    );
    assert_eq!(
        rules(&p, "forward", "rule igmp"),
        [format!("{wan} meta l4proto 2 counter drop")]
    );
    assert_eq!(
        rules(&p, "input", "rule all"),
        [format!("{wan} counter accept")]
    );
    assert_eq!(
        rules(&p, "input", "rule v6icmp"),
        [format!("{wan} icmpv6 type echo-request counter accept")]
    );
}

#[test]
fn fw4_03_constraints_a_bad_protocol_is_an_error_at_its_place() {
    let rule = |protocol: &str, more: &str| {
        format!(
            "[policy]\n[[policy.rule]]\nname = \"r\"\nprotocol = {protocol}\n{more}action = \"accept\"\n"
        )
    };
    let expected = "expected a name such as \"tcp\", \"udp\", \"icmp\", \"icmpv6\", \"gre\"";
    for (value, shown) in [("\"grx\"", "`grx`"), ("256", "256"), ("-1", "-1")] {
        assert_all(
            &errors(&rule(value, "")),
            &[&format!(
                "main.toml:4:12: error: invalid protocol {shown}: {expected}"
            )],
        );
    }
    assert_all(
        &errors(&rule("\"gre\"", "ports = [22]\n")),
        &["main.toml:5:9: error: `ports` needs protocol = \"tcp\" or \"udp\""],
    );
    assert_all(
        &errors(&rule("\"esp\"", "icmp_types = [8]\n")),
        &["main.toml:5:14: error: `icmp_types` needs protocol = \"icmp\" or \"icmpv6\""],
    );
    assert_all(
        &errors(&rule("[\"tcp\", \"gre\"]", "")),
        &["main.toml:4:12: error: invalid protocol `gre` in a list"],
    );
    // 6 is tcp, by number too.
    let d = load_str(&[("m.toml", &rule("6", "ports = [22]\n"))]).unwrap();
    assert_eq!(d.policy.unwrap().rules[0].matches.protocol, Protocol::Tcp);
}

netns_test! {
    fn fw4_family_and_protocol_plans_load_with_nft_c() {
        for (name, config) in [
            ("fw4-zones-06", ZONES_06),
            ("fw4-inheritance", INHERITANCE),
            ("fw4-forwardings-01", FORWARDINGS_01),
            ("fw4-protocols", PROTOCOLS),
            ("fw4-wildcards-04", WILDCARDS_04),
            ("fw4-masks-05", MASKS_05),
        ] {
            let dir = ScratchDir::with_files(name, &[("edgenetd.toml", config)]);
            let (text, _) = planned_policy_nft(&dir);
            assert!(text.contains("edgenetd-policy"), "{name}: {text}");
        }
    }
}

/// fw4's `02_zones/04_wildcard_devices` (its zone of `"!+"` is an error here), each zone
/// logging its drops so that its match shows.
const WILDCARDS_04: &str = r#"
[policy]
input = "drop"

[policy.zone.test1]
interfaces = ["+"]
log_drops = true

[policy.zone.test3]
interfaces = ["test+"]
log_drops = true

[policy.zone.test4]
interfaces = ["foo+", "bar+", "test1", "test2"]
log_drops = true

[policy.zone.test5]
interfaces = ["foo+", "bar+", "!baz+", "!qrx+", "test1", "test2", "!test3", "!test4"]
log_drops = true

[policy.zone.test6]
interfaces = ["!eth1"]
log_drops = true
"#;

#[test]
fn fw4_04_wildcard_devices_plus_is_a_stem_and_bang_leaves_interfaces_out() {
    let p = build(WILDCARDS_04);
    let zone = |name: &str| -> Vec<String> {
        let log = format!(
            "counter limit rate 10/minute burst 5 packets log prefix \"drop {name} input: \""
        );
        rules(&p, "input", &format!("log-drops {name}"))
            .into_iter()
            .map(|r| r.strip_suffix(&log).unwrap_or(&r).trim_end().to_string())
            .collect()
    };
    // `"+"` alone: no interface test at all.
    assert_eq!(zone("test1"), [""]);
    assert_eq!(zone("test3"), ["iifname \"test*\""]);
    assert_eq!(
        zone("test4"),
        [
            "iifname { \"test1\", \"test2\" }",
            "iifname \"bar*\"",
            "iifname \"foo*\""
        ]
    );
    let out = "iifname != { \"test3\", \"test4\" } iifname != \"baz*\" iifname != \"qrx*\"";
    assert_eq!(
        zone("test5"),
        [
            format!("iifname {{ \"test1\", \"test2\" }} {out}"),
            format!("iifname \"bar*\" {out}"),
            format!("iifname \"foo*\" {out}"),
        ]
    );
    // Only a name left out: every other interface.
    assert_eq!(zone("test6"), ["iifname != \"eth1\""]);
    let desired = load_str(&[("edgenetd.toml", WILDCARDS_04)]).unwrap();
    let zones = &desired.policy.unwrap().zones;
    let test5 = &zones["test5"];
    assert!(test5.has_interface("foo0") && test5.has_interface("test2"));
    assert!(!test5.has_interface("test3") && !test5.has_interface("baz0"));
    assert!(!test5.has_interface("other"));
    assert!(zones["test6"].has_interface("eth0") && !zones["test6"].has_interface("eth1"));
}

#[test]
fn fw4_04_wildcard_devices_a_bad_device_pattern_is_an_error_at_its_place() {
    let out = errors(
        "[policy]\n[policy.zone.test2]\ninterfaces = [\"!+\", \"a+b\", \"!!x\", \"eth0\"]\n",
    );
    assert_all(
        &out,
        &[
            "main.toml:3:15: error: `\"!+\"` leaves out every interface",
            "main.toml:3:21: error: invalid interface name `a+b`: expected up to 15 characters, a `*` or `+` only at the end",
            "main.toml:3:28: error: invalid interface name `!!x`",
        ],
    );
}

/// fw4's `02_zones/05_subnet_mask_matches` without its negated entries (edgenetd has no
/// `!` on addresses), and an IPv4 zone of a dotted mask and a contiguous one.
const MASKS_05: &str = r#"
[policy]
input = "drop"

[policy.zone.test1]
networks = ["::1/::ffff"]
log_drops = true

[policy.zone.test2]
networks = ["::1/::ffff", "::2/::ffff", "::3/128", "::4/128"]
log_drops = true

[policy.zone.test3]
networks = ["192.168.0.1/255.255.0.255", "10.0.0.0/255.255.255.0"]
log_drops = true

[[policy.rule]]
name = "mask1"
from = "::1/::ffff"
to_addresses = ["::2/::ffff"]
action = "accept"

[[policy.rule]]
name = "mask2"
from = ["0.0.0.2/0.0.0.255", "10.1.0.0/16"]
to = "self"
to_addresses = ["0.0.0.1/0.0.0.255"]
action = "accept"
"#;

#[test]
fn fw4_05_subnet_mask_matches_a_non_contiguous_mask_is_a_bitwise_match_of_its_own() {
    let p = build(MASKS_05);
    let zone = |name: &str| -> Vec<String> {
        let log = format!(
            "counter limit rate 10/minute burst 5 packets log prefix \"drop {name} input: \""
        );
        rules(&p, "input", &format!("log-drops {name}"))
            .into_iter()
            .map(|r| r.strip_suffix(&log).unwrap_or(&r).trim_end().to_string())
            .collect()
    };
    assert_eq!(zone("test1"), ["ip6 saddr & ::ffff == ::1"]);
    // Masked entries never go into a set: a rule each, after the prefixes' set.
    assert_eq!(
        zone("test2"),
        [
            "ip6 saddr { ::3, ::4 }",
            "ip6 saddr & ::ffff == ::1",
            "ip6 saddr & ::ffff == ::2",
        ]
    );
    // A contiguous dotted mask is its prefix.
    assert_eq!(
        zone("test3"),
        [
            "ip saddr { 10.0.0.0/24 }",
            "ip saddr & 255.255.0.255 == 192.168.0.1",
        ]
    );
    let desired = load_str(&[("edgenetd.toml", MASKS_05)]).unwrap();
    let test3 = &desired.policy.unwrap().zones["test3"];
    assert!(test3.masked_networks[0].contains("192.168.77.1".parse().unwrap()));
    assert!(!test3.masked_networks[0].contains("192.168.77.2".parse().unwrap()));
}

#[test]
fn fw4_06_subnet_mask_matches_masked_rule_addresses_are_bitwise_matches() {
    let p = build(MASKS_05);
    assert_eq!(
        rules(&p, "input", "rule mask1"),
        ["ip6 saddr & ::ffff == ::1 ip6 daddr & ::ffff == ::2 counter accept"]
    );
    assert_eq!(
        rules(&p, "input", "rule mask2"),
        [
            "ip saddr { 10.1.0.0/16 } ip daddr & 0.0.0.255 == 0.0.0.1 counter accept",
            "ip saddr & 0.0.0.255 == 0.0.0.2 ip daddr & 0.0.0.255 == 0.0.0.1 counter accept",
        ]
    );
}

#[test]
fn fw4_06_subnet_mask_matches_a_nonsense_mask_is_an_error_at_its_place() {
    let out = errors(
        r#"[policy]
[policy.zone.a]
networks = ["10.0.0.1/255.0.0.300", "10.0.0.1/0.0.0.0", "10.0.0.1/255.0.0.0", "10.0.0.1/::ff"]

[[policy.rule]]
name = "r"
from = "192.168.1.1/255.255.0.254"
to_addresses = ["1.2.3.4/255.x.0.0"]
action = "accept"
"#,
    );
    assert_all(
        &out,
        &[
            "main.toml:3:13: error: invalid masked address `10.0.0.1/255.0.0.300`: expected an IPv4 address and mask, e.g. \"192.168.1.0/255.255.0.255\"",
            "main.toml:3:37: error: invalid masked address `10.0.0.1/0.0.0.0`: the mask is 0.0.0.0",
            "main.toml:3:57: error: invalid masked address `10.0.0.1/255.0.0.0`: the address has bits outside the mask; did you mean \"10.0.0.0/255.0.0.0\"?",
            "main.toml:3:79: error: invalid suffix `10.0.0.1/::ff`",
            "main.toml:7:8: error: invalid masked address `192.168.1.1/255.255.0.254`: the address has bits outside the mask; did you mean \"192.168.0.0/255.255.0.254\"?",
            "main.toml:8:17: error: invalid masked address `1.2.3.4/255.x.0.0`",
        ],
    );
}
