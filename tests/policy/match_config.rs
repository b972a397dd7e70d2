//! Issue 11 items 8 and 9 in the config: richer matches (`to_addresses`, `source_ports`,
//! protocol lists, IPv6 suffixes), port-forward ranges and `from_addresses`, zone `snat`
//! and rule `set_mark`: what valid keys load to, and every bad value reported at its
//! `file:line:col` with what was expected.

use edgenetd::config::load_str;

use crate::common::policy::{assert_all, config_errors as errors};
use edgenetd::config::policy::{AddressMatch, MarkSet, Protocol};

const ZONES: &str = r#"[policy]
[policy.zone.lan]
interfaces = ["br-lan"]
networks = ["10.0.0.0/24", "fd00::/64"]
[policy.zone.wan]
interfaces = ["eth0"]
[policy.set.servers]
type = "ipv4"
elements = ["192.0.2.10"]
"#;

#[test]
fn richer_match_keys_are_read() {
    let text = format!(
        r#"{ZONES}
[policy.zone.dmz]
interfaces = ["dmz0"]
snat = ["203.0.113.7", "2001:db8::7"]

[[policy.rule]]
name = "r"
from = "lan"
to = "wan"
to_addresses = ["10.0.0.0/8", "@servers", "::1234/-64", "::5/::ffff"]
protocol = ["udp", "tcp"]
ports = [53]
source_ports = [1024, "5000-5100"]
action = "accept"

[[policy.rule]]
name = "m"
from = "lan"
set_mark = "0x10/0xff"

[[policy.rule]]
name = "m2"
from = "lan"
protocol = ["tcp"]
set_mark = 7
action = "drop"

[[policy.port_forward]]
name = "range"
from = "wan"
protocol = ["tcp", "udp"]
port = "8000-8100"
to = "10.0.0.2:9000-9100"
from_addresses = ["198.51.100.0/24", "@servers"]

[[policy.port_forward]]
name = "same"
from = "wan"
port = "7000-7010"
to = "10.0.0.2"
"#
    );
    let p = load_str(&[("main.toml", &text)]).unwrap().policy.unwrap();
    let r = &p.rules[0];
    assert_eq!(r.matches.protocol, Protocol::TcpUdp);
    assert_eq!(r.matches.protocol.each(), [Protocol::Tcp, Protocol::Udp]);
    assert_eq!(r.matches.source_ports, [(1024, 1024), (5000, 5100)]);
    assert_eq!(
        r.matches.to_addresses,
        [
            AddressMatch::Prefix("10.0.0.0/8".parse().unwrap()),
            AddressMatch::Set("servers".into()),
            AddressMatch::Suffix {
                addr: "::1234".parse().unwrap(),
                mask: "::ffff:ffff:ffff:ffff".parse().unwrap(),
            },
            AddressMatch::Suffix {
                addr: "::5".parse().unwrap(),
                mask: "::ffff".parse().unwrap(),
            },
        ]
    );
    assert_eq!((r.set_mark, r.action.is_none()), (None, false));
    let m = &p.rules[1];
    assert_eq!(
        (m.set_mark, m.action.is_none()),
        (
            Some(MarkSet {
                value: 0x10,
                mask: 0xff,
                xor: false
            }),
            true
        )
    );
    let m2 = &p.rules[2];
    assert_eq!(m2.matches.protocol, Protocol::Tcp);
    assert_eq!(
        (m2.set_mark, m2.action.is_none()),
        (
            Some(MarkSet {
                value: 7,
                mask: u32::MAX,
                xor: false
            }),
            false
        )
    );
    let pf = &p.port_forwards[0];
    assert_eq!(pf.protocol, Protocol::TcpUdp);
    assert_eq!((pf.port, pf.port_end), (8000, 8100));
    assert_eq!(pf.to, "10.0.0.2:9000".parse().unwrap());
    assert_eq!(pf.from_addresses.len(), 2);
    let same = &p.port_forwards[1];
    assert_eq!(
        (same.port, same.port_end, same.to.port()),
        (7000, 7010, 7000)
    );
    assert_eq!(
        p.zones["dmz"].snat,
        [
            "203.0.113.7".parse::<std::net::IpAddr>().unwrap(),
            "2001:db8::7".parse().unwrap()
        ]
    );
    assert!(p.zones["wan"].snat.is_empty());
}

#[test]
fn bad_match_values_are_reported_at_their_place() {
    let out = errors(&format!(
        r#"{ZONES}
[[policy.rule]]
name = "a"
to_addresses = ["10.0.0.1/8", "@nope", "2001:db8::1/-64", "::1/-200"]
protocol = ["tcp", "icmp"]
action = "accept"

[[policy.rule]]
name = "b"
protocol = "icmp"
source_ports = [22]
action = "accept"

[[policy.rule]]
name = "c"
protocol = "tcp"
source_ports = [0]
to_addresses = []
action = "accept"

[[policy.rule]]
name = "d"
to_addresses = ["10.0.0.0/8"]
protocol = "icmpv6"
action = "accept"
"#
    ));
    assert_all(
        &out,
        &[
            "main.toml:13:17: error: invalid prefix `10.0.0.1/8`: host bits are set; did you mean \"10.0.0.0/8\"?",
            "main.toml:13:31: error: set `nope` is used but never defined: expected one of `@servers`",
            "main.toml:13:40: error: invalid suffix `2001:db8::1/-64`: the address has bits outside the mask; did you mean \"::1/::ffff:ffff:ffff:ffff\"?",
            "main.toml:13:59: error: invalid suffix `::1/-200`: the bits after `-` must be 1-128",
            "main.toml:14:12: error: invalid protocol `icmp` in a list: a protocol list holds \"tcp\" and/or \"udp\"",
            "main.toml:20:16: error: `source_ports` needs protocol = \"tcp\" or \"udp\" (or both: [\"tcp\", \"udp\"])",
            "main.toml:26:17: error: invalid port: expected a number 1-65535",
            "main.toml:27:16: error: empty `to_addresses`: expected addresses",
            "main.toml:31:8: error: rule `d` can never match: its `from`, `to`, `to_addresses`, `ipset` and `protocol` have no IP version in common",
        ],
    );
}

#[test]
fn bad_port_forward_ranges_and_sources_are_reported_at_their_place() {
    let out = errors(&format!(
        r#"{ZONES}
[[policy.port_forward]]
name = "a"
from = "wan"
port = "8000-8100"
to = "10.0.0.2:9000-9050"

[[policy.port_forward]]
name = "b"
from = "wan"
port = "8000-8100"
to = "10.0.0.2:9000"

[[policy.port_forward]]
name = "c"
from = "wan"
port = "9-8"
to = "10.0.0.2"

[[policy.port_forward]]
name = "d"
from = "wan"
port = 80
to = "[fd00::2]:80"
from_addresses = ["@servers", "198.51.100.0/24"]

[[policy.port_forward]]
name = "e"
from = "wan"
port = "65000-65535"
to = "10.0.0.2:65500"
"#
    ));
    assert_all(
        &out,
        &[
            "main.toml:15:6: error: target `10.0.0.2:9000-9050` has 51 ports but `port` has 101: expected a range of the same size; did you mean \"10.0.0.2:9000-9100\"?",
            "main.toml:21:6: error: target `10.0.0.2:9000` has 1 port but `port` has 101",
            "main.toml:26:8: error: invalid port: expected a number 1-65535 or a range",
            "main.toml:34:18: error: no entry of `from_addresses` is IPv6 like the target `[fd00::2]:80`",
            "main.toml:40:6: error: target `10.0.0.2:65500` has 1 port but `port` has 536: expected a range of the same size",
        ],
    );
    assert!(!out.contains("did you mean \"10.0.0.2:65500-"), "{out}");
}

#[test]
fn bad_snat_values_are_reported_at_their_place() {
    let out = errors(
        r#"[policy]
[policy.zone.a]
interfaces = ["a0"]
snat = "203.0.113.300"
[policy.zone.b]
interfaces = ["b0"]
masquerade = true
snat = "203.0.113.7"
[policy.zone.c]
interfaces = ["c0"]
snat = ["203.0.113.7", "203.0.113.8"]
[policy.zone.d]
interfaces = ["d0"]
masquerade6 = true
snat = ["2001:db8::7"]
"#,
    );
    assert_all(
        &out,
        &[
            "main.toml:4:8: error: invalid address `203.0.113.300`: expected an IPv4 or IPv6 address",
            "main.toml:8:8: error: `snat = \"203.0.113.7\"` and `masquerade = true` both choose the source of the zone's IPv4 traffic: keep one",
            "main.toml:11:8: error: `snat` has two IPv4 addresses: expected at most one per IP version",
            "main.toml:15:8: error: `snat = \"2001:db8::7\"` and `masquerade6 = true` both choose the source of the zone's IPv6 traffic: keep one",
        ],
    );
}

#[test]
fn bad_marks_are_reported_at_their_place() {
    let out = errors(&format!(
        r#"{ZONES}
[[policy.rule]]
name = "a"
set_xmark = "0/0"

[[policy.rule]]
name = "b"
set_mark = "ten"

[[policy.rule]]
name = "c"
set_mark = "0x10/0"

[[policy.rule]]
name = "d"
from = "lan"
to = "wan"
set_mark = "0x10"

[[policy.rule]]
name = "e"
from = "self"
set_mark = "0x10"

[[policy.rule]]
name = "f"
set_mark = "0x10"
set_xmark = "0x1/0x0"

[[policy.rule]]
name = "g"
to = "wan"
set_xmark = "0x1"
"#
    ));
    assert_all(
        &out,
        &[
            "main.toml:13:13: error: invalid set_xmark 0x0/0x0: it changes no bit of the mark",
            "main.toml:17:12: error: invalid set_mark: expected a number or a string \"MARK\" or \"MARK/MASK\"",
            "main.toml:21:12: error: invalid set_mark 0x10/0x0: expected a non-zero mask",
            "main.toml:26:6: error: a rule with `set_mark` marks packets before routing, when their way out is not known yet: expected no `to` (select destinations with `to_addresses`)",
            "main.toml:32:12: error: `set_mark` marks packets arriving at the router (prerouting): expected a `from` other than \"self\"",
            "main.toml:37:13: error: a rule has one mark change: expected `set_mark` or `set_xmark`, not both",
            "main.toml:41:6: error: a rule with `set_xmark` marks packets before routing",
        ],
    );
}

/// The examples of docs/policy.md that use the keys of items 8 and 9 validate (with the
/// zones and the set they refer to).
#[test]
fn the_documented_match_snat_and_mark_examples_validate() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md")).unwrap();
    let keys = [
        "snat",
        "to_addresses",
        "source_ports",
        "set_mark",
        "from_addresses",
        "ipset",
    ];
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .filter(|b| keys.iter().any(|k| b.contains(&format!("{k} ="))))
        .collect();
    // +2: the `[[policy.nat]]` and redirect examples of issue 23 item 5 use `to_addresses`;
    // and notrack's and ipset's.
    assert_eq!(blocks.len(), 8, "one example per group of keys");
    for b in blocks {
        let text = format!("{ZONES}{b}");
        if let Err(e) = load_str(&[("docs-example.toml", &text)]) {
            panic!("{e}\nin:\n{b}");
        }
    }
}

/// `set_dscp` (issue 23 item 3): a name in any case or a number, with or without an
/// `action`; a bad value at its place.
#[test]
fn set_dscp_takes_a_name_or_a_number_and_reports_a_bad_one_at_its_place() {
    let rule = |value: &str, action: &str| {
        format!(
            "{ZONES}[[policy.rule]]\nname = \"video\"\nfrom = \"lan\"\nto = \"wan\"\nset_dscp = {value}\n{action}"
        )
    };
    let dscp_of = |value: &str, action: &str| {
        let d = load_str(&[("main.toml", &rule(value, action))]).unwrap();
        let r = &d.policy.unwrap().rules[0];
        (r.set_dscp, r.action.is_none())
    };
    assert_eq!(dscp_of("\"AF41\"", ""), (Some(34), true));
    assert_eq!(dscp_of("46", "action = \"accept\"\n"), (Some(46), false));
    assert_eq!(dscp_of("\"le\"", ""), (Some(1), true));
    let expected = "expected a number 0-63 or a name: cs0-cs7, af11-af43, ef, le, va";
    for (value, shown) in [
        ("\"af44\"", "invalid set_dscp \"af44\""),
        ("64", "invalid set_dscp 64"),
        ("-1", "invalid set_dscp -1"),
    ] {
        let out = errors(&rule(value, ""));
        assert_all(
            &out,
            &[&format!("main.toml:14:12: error: {shown}: {expected}")],
        );
    }
    // Without `set_dscp` (or `set_mark`) nor `action`, the rule only counts (fw4's rule
    // without target): it rewrites nothing.
    let counter = rule("1", "").replace("set_dscp = 1\n", "");
    let d = load_str(&[("main.toml", &counter)]).unwrap();
    let r = &d.policy.unwrap().rules[0];
    assert_eq!((r.set_dscp, r.action), (None, None));
}
