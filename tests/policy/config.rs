//! `[policy]` validation: every key read, every error at its exact file:line:col.

use edgenetd::config::load_str;
use edgenetd::config::policy::*;

fn errors(files: &[(&str, &str)]) -> String {
    load_str(files)
        .expect_err("config must be rejected")
        .rendered
}

#[test]
fn every_policy_key_is_read() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        r#"
[policy]
input = "reject"
forward = "accept"
output = "drop"

[policy.zone.lan]
interfaces = ["br-lan", "wlan0"]
networks = ["10.0.0.0/24", "fd00::/64"]

[policy.zone.wan]
interfaces = ["eth0"]
masquerade = true

[policy.set.blocklist]
type = "ipv4"
elements = ["203.0.113.0/24", "198.51.100.7"]

[policy.set.block6]
type = "ipv6"
elements = ["2001:db8::/32"]

[[policy.rule]]
name = "ssh-from-lan"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22, "8000-8100"]
action = "accept"
log = true
limit = "10/second"

[[policy.rule]]
name = "drop-blocklist"
from = "@blocklist"
action = "drop"

[[policy.rule]]
name = "pings"
from = ["192.0.2.0/24", "2001:db8:1::/48"]
to = "wan"
protocol = "icmpv6"
icmp_types = ["echo-request", 129]
action = "reject"

[[policy.rule]]
name = "from-router"
from = "self"
to = "wan"
protocol = "udp"
ports = [53]
action = "accept"

[[policy.port_forward]]
name = "web"
from = "wan"
port = 8080
to = "10.0.0.10:80"

[[policy.port_forward]]
name = "dns6"
from = "wan"
protocol = "udp"
port = 53
to = "[fd00::53]:5353"
"#,
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    assert_eq!(
        (p.input, p.forward, p.output),
        (Action::Reject, Action::Accept, Action::Drop)
    );
    assert_eq!(p.zones["lan"].interfaces, ["br-lan", "wlan0"]);
    assert_eq!(p.zones["lan"].networks.len(), 2);
    assert!(p.zones["wan"].masquerade && !p.zones["lan"].masquerade);
    assert_eq!(p.sets["blocklist"].family, SetFamily::Ipv4);
    assert_eq!(
        p.sets["blocklist"].elements[1].to_string(),
        "198.51.100.7/32"
    );
    assert_eq!(p.sets["block6"].family, SetFamily::Ipv6);
    let ssh = &p.rules[0];
    assert_eq!(ssh.matches.from, Source::Zone("lan".into()));
    assert_eq!(ssh.matches.to, Destination::Router);
    assert_eq!(ssh.matches.protocol, Protocol::Tcp);
    assert_eq!(ssh.matches.ports, [(22, 22), (8000, 8100)]);
    assert!(ssh.log);
    assert_eq!(
        ssh.limit,
        Some(Rate {
            count: 10,
            per_seconds: 1
        })
    );
    assert_eq!(p.rules[1].matches.from, Source::Set("blocklist".into()));
    assert_eq!(p.rules[1].matches.to, Destination::Any);
    assert_eq!(p.rules[1].matches.protocol, Protocol::Any);
    assert!(matches!(&p.rules[2].matches.from, Source::Prefixes(n) if n.len() == 2));
    assert_eq!(p.rules[2].matches.icmp_types, [128, 129]);
    assert_eq!(p.rules[2].action, Some(Action::Reject));
    assert_eq!(p.rules[3].matches.from, Source::Router);
    assert_eq!(p.port_forwards[0].protocol, Protocol::Tcp);
    assert_eq!(p.port_forwards[0].to.to_string(), "10.0.0.10:80");
    assert_eq!(p.port_forwards[1].to.to_string(), "[fd00::53]:5353");
    assert!(p.forwards.is_empty());
}

#[test]
fn defaults_and_zone_forwards() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        "[policy]\n[policy.zone.a]\ninterfaces = [\"a0\"]\n[policy.zone.b]\nnetworks = [\"10.1.0.0/16\"]\n[[policy.forward]]\nfrom = \"a\"\nto = \"b\"\n",
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    assert_eq!(
        (p.input, p.forward, p.output),
        (Action::Drop, Action::Drop, Action::Accept)
    );
    assert_eq!(
        p.forwards,
        [ZoneForward {
            from: "a".into(),
            to: "b".into(),
            family: Family::Any,
        }]
    );
    assert!(
        load_str(&[("e.toml", "[daemon]\n")])
            .unwrap()
            .policy
            .is_none()
    );
    // forward_default sets the forward default next to [[policy.forward]].
    let cfg = load_str(&[(
        "e.toml",
        "[policy]\nforward_default = \"reject\"\n[policy.zone.a]\ninterfaces = [\"a0\"]\n[[policy.forward]]\nfrom = \"a\"\nto = \"a\"\n",
    )])
    .unwrap();
    assert_eq!(cfg.policy.unwrap().forward, Action::Reject);
}

#[test]
fn policy_parts_merge_across_conf_d_files() {
    let cfg = load_str(&[
        ("edgenetd.toml", "[policy]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[[policy.rule]]\nname = \"a\"\naction = \"accept\"\n"),
        ("conf.d/10-more.toml", "[policy.set.bad]\ntype = \"ipv4\"\n[[policy.rule]]\nname = \"b\"\nfrom = \"lan\"\naction = \"drop\"\n"),
    ])
    .unwrap();
    let p = cfg.policy.unwrap();
    assert_eq!(
        p.rules.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(p.sets.contains_key("bad"));
}

#[test]
fn every_policy_error_is_reported_at_its_place() {
    let out = errors(&[(
        "main.toml",
        r#"[policy]
input = "allow"
colour = "blue"

[policy.zone.lan]
interfaces = ["br-lan"]
networks = ["10.0.0.1/24"]

[policy.zone.empty]

[policy.set.blocklist]
type = "ipv4"
elements = ["2001:db8::1", "nope"]

[[policy.rule]]
name = "r1"
from = "dmz"
to = "self"
protocol = "tcp"
ports = [0, "90-80"]
action = "allow"

[[policy.rule]]
name = "r1"
from = "@missing"
protocol = "icmp"
ports = [22]
limit = "fast"
action = "drop"

[[policy.forward]]
from = "lan"
to = "guest"

[[policy.port_forward]]
name = "web"
from = "wan"
port = 70000
to = "10.0.0.10"
tpo = 1
"#,
    )]);
    let expected = [
        "main.toml:2:9: error: invalid input `allow`: expected \"accept\", \"drop\" or \"reject\"",
        "main.toml:3:1: error: unknown key `colour` in [policy], expected one of `input`",
        "main.toml:7:13: error: invalid prefix `10.0.0.1/24`: host bits are set; did you mean \"10.0.0.0/24\"?",
        "main.toml:9:14: error: zone `empty` has neither interfaces nor networks",
        "main.toml:13:13: error: element `2001:db8::1` is not an IPv4 address or prefix, but set `blocklist` has type \"ipv4\"",
        "main.toml:13:28: error: invalid prefix `nope`",
        "main.toml:17:8: error: zone `dmz` is used but never defined: expected one of `lan` (define it with [policy.zone.dmz])",
        "main.toml:20:10: error: invalid port: expected a number 1-65535",
        "main.toml:20:13: error: invalid port",
        "main.toml:21:10: error: invalid action `allow`",
        "main.toml:24:8: error: duplicate name `r1`: rule, port forward and nat names must be unique",
        "main.toml:16:8: note: first used here",
        "main.toml:25:8: error: set `missing` is used but never defined: expected one of `@blocklist`",
        "main.toml:27:9: error: `ports` needs protocol = \"tcp\" or \"udp\"",
        "main.toml:28:9: error: invalid limit `fast`",
        "main.toml:33:6: error: zone `guest` is used but never defined",
        "main.toml:40:1: error: unknown field `tpo`",
    ];
    for e in expected {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

#[test]
fn port_forward_values_are_checked() {
    let out = errors(&[(
        "main.toml",
        "[policy.zone.wan]\ninterfaces = [\"eth0\"]\n[[policy.port_forward]]\nname = \"x\"\nfrom = \"wan\"\nprotocol = \"icmp\"\nport = 70000\nto = \"host:80\"\n",
    )]);
    for e in [
        "main.toml:6:12: error: a port forward's protocol must be \"tcp\" or \"udp\"",
        "main.toml:7:8: error: invalid port: expected a number 1-65535",
        "main.toml:8:6: error: invalid target `host:80`",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

#[test]
fn forward_default_beside_policy_forward_entries() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        r#"
[policy]
input = "drop"
forward_default = "reject"
output = "accept"

[policy.zone.lan]
interfaces = ["br-lan"]

[policy.zone.wan]
interfaces = ["eth0"]

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.forward]]
from = "lan"
to = "dmz"
"#,
    )]);
    let out = cfg.expect_err("dmz is not a zone").rendered;
    assert!(
        out.contains("edgenetd.toml:19:6: error: zone `dmz` is used but never defined"),
        "{out}"
    );
    let ok = load_str(&[(
        "edgenetd.toml",
        "[policy]\nforward_default = \"reject\"\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[[policy.forward]]\nfrom = \"lan\"\nto = \"lan\"\n",
    )])
    .unwrap()
    .policy
    .unwrap();
    assert_eq!(ok.forward, Action::Reject);
    assert_eq!(ok.forwards.len(), 1);
    // The inline form works too.
    let inline = load_str(&[(
        "e.toml",
        "[policy]\nforward = [{ from = \"lan\", to = \"lan\" }]\n[policy.zone.lan]\ninterfaces = [\"x\"]\n",
    )])
    .unwrap()
    .policy
    .unwrap();
    assert_eq!((inline.forward, inline.forwards.len()), (Action::Drop, 1));
    // `forward = "..."` stays valid in a config without [[policy.forward]].
    let verdict = load_str(&[("e.toml", "[policy]\nforward = \"accept\"\n")])
        .unwrap()
        .policy
        .unwrap();
    assert_eq!(verdict.forward, Action::Accept);
}

/// `[policy] forward = "drop"` beside `[[policy.forward]]` is not TOML (one key cannot be a
/// string and an array of tables); it used to be accepted by rewriting the text before
/// parsing. Now it is an error at both places that says to write `forward_default`.
#[test]
fn forward_verdict_beside_policy_forward_entries_is_an_error_at_both_places() {
    let out = errors(&[(
        "edgenetd.toml",
        "[policy]\nforward = \"reject\"\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[[policy.forward]]\nfrom = \"lan\"\nto = \"lan\"\n",
    )]);
    assert!(
        out.starts_with(
            "edgenetd.toml:5:10: error: `forward` under [policy] is both the forward verdict"
        ),
        "{out}"
    );
    assert!(
        out.contains("write the verdict as `forward_default = \"...\"`"),
        "{out}"
    );
    assert!(
        out.contains("edgenetd.toml:2:1: note: the other `forward` is here"),
        "{out}"
    );
    assert!(
        out.contains("5 | [[policy.forward]]\n  |          ^^^^^^^"),
        "{out}"
    );
}

#[test]
fn the_schema_example_validates() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/schema-example.toml"
    ))
    .unwrap();
    // The policy part only (other areas validate their own sections).
    let text = text.split("[[service]]").next().unwrap();
    let state = load_str(&[("schema-example.toml", text)]).unwrap_or_else(|e| panic!("{e}"));
    let p = state.policy.unwrap();
    assert_eq!(p.forward, Action::Drop);
    assert_eq!(
        p.forwards,
        [ZoneForward {
            from: "lan".into(),
            to: "wan".into(),
            family: Family::Any,
        }]
    );
    assert_eq!(p.port_forwards[0].to.to_string(), "10.0.0.10:80");
    assert_eq!(p.rules.len(), 2);
}

#[test]
fn the_documented_examples_validate() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md")).unwrap();
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert!(blocks.len() >= 2, "docs/policy.md has its examples");
    let home = load_str(&[("docs-example.toml", blocks[0])]).unwrap_or_else(|e| panic!("{e}"));
    let p = home.policy.unwrap();
    assert_eq!(
        (
            p.zones.len(),
            p.rules.len(),
            p.forwards.len(),
            p.port_forwards.len()
        ),
        (2, 4, 1, 1)
    );
    let with_dhcp = format!("{}{}", blocks[0], blocks[1]);
    load_str(&[("docs-example.toml", &with_dhcp)]).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn rules_and_port_forwards_that_can_never_match_are_errors() {
    let out = errors(&[(
        "main.toml",
        r#"[policy.zone.v4only]
networks = ["10.0.0.0/8"]
[policy.set.bl]
type = "ipv4"
[[policy.rule]]
name = "ping6-from-bl"
from = "@bl"
protocol = "icmpv6"
action = "drop"
[[policy.rule]]
name = "v6-to-v4-zone"
from = ["2001:db8::/32"]
to = "v4only"
action = "drop"
[[policy.port_forward]]
name = "web6"
from = "v4only"
port = 80
to = "[fd00::1]:80"
"#,
    )]);
    for e in [
        "main.toml:6:8: error: rule `ping6-from-bl` can never match",
        "main.toml:11:8: error: rule `v6-to-v4-zone` can never match",
        "main.toml:19:6: error: target `[fd00::1]:80` is IPv6, but zone `v4only` only has IPv4 networks",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

#[test]
fn issue11_keys_are_read_with_their_defaults() {
    let cfg = load_str(&[(
        "edgenetd.toml",
        r#"
[policy]
forward_foreign_dnat = true

[policy.zone.lan]
interfaces = ["br-lan"]

[policy.zone.wan]
interfaces = ["eth0", "ppp*", "wg*"]
masquerade6 = true
mtu_fix = true
log_drops = true

[[policy.rule]]
name = "ssh"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
log_prefix = "lan ssh: "

[[policy.rule]]
name = "quiet"
to = "self"
action = "drop"

[[policy.port_forward]]
name = "a"
from = "wan"
port = 22
to = "10.0.0.2"
reflection = false

[[policy.port_forward]]
name = "b"
from = "wan"
port = 80
to = "10.0.0.2"
"#,
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    assert!(p.forward_foreign_dnat);
    let (lan, wan) = (&p.zones["lan"], &p.zones["wan"]);
    assert!(!lan.masquerade && !lan.masquerade6 && !lan.mtu_fix && !lan.log_drops);
    assert!(!wan.masquerade && wan.masquerade6 && wan.mtu_fix && wan.log_drops);
    assert_eq!(wan.interfaces, ["eth0", "ppp*", "wg*"]);
    assert!(wan.has_interface("ppp0") && wan.has_interface("wg-home") && wan.has_interface("eth0"));
    assert!(!wan.has_interface("eth01") && !wan.has_interface("pp"));
    // `log_prefix` implies `log`.
    assert!(p.rules[0].log);
    assert_eq!(p.rules[0].log_prefix.as_deref(), Some("lan ssh: "));
    assert!(!p.rules[1].log && p.rules[1].log_prefix.is_none());
    assert!(!p.port_forwards[0].reflection);
    assert!(p.port_forwards[1].reflection);
    // Without the keys: foreign DNAT is not admitted.
    let plain = load_str(&[("e.toml", "[policy]\n")])
        .unwrap()
        .policy
        .unwrap();
    assert!(!plain.forward_foreign_dnat);
}

#[test]
fn issue11_key_errors_are_reported_at_their_place() {
    let out = errors(&[(
        "main.toml",
        r#"[policy]
forward_foreign_dnat = "yes"

[policy.zone.wan]
interfaces = ["pp*p", "*", "eth0"]

[policy.zone.b]
interfaces = ["b0"]
mtu_fix = 1

[[policy.rule]]
name = "r"
action = "drop"
log_prefix = "say \"hi\""

[[policy.rule]]
name = "s"
action = "drop"
log_prefix = ""

[[policy.port_forward]]
name = "x"
from = "wan"
port = 22
to = "10.0.0.2"
reflection = "off"
"#,
    )]);
    for e in [
        "main.toml:2:24: error: invalid type: string \"yes\", expected a boolean",
        "main.toml:5:15: error: invalid interface name `pp*p`: expected up to 15 characters, a `*` or `+` only at the end (\"ppp*\")",
        "main.toml:5:23: error: invalid interface name `*`",
        "main.toml:9:11: error: invalid type: integer `1`, expected a boolean",
        "main.toml:14:14: error: invalid log_prefix `say \"hi\"`: expected 1-127 printable ASCII characters",
        "main.toml:19:14: error: invalid log_prefix ``",
        "main.toml:26:14: error: invalid type: string \"off\", expected a boolean",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

#[test]
fn reflection_zones_name_defined_zones_at_their_place_and_need_reflection() {
    let base = "[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n\n[policy.zone.wan]\ninterfaces = [\"eth0\"]\n\n[policy.zone.guest]\ninterfaces = [\"br-guest\"]\n";
    let ok = load_str(&[(
        "ok.toml",
        &format!("[policy]\n{base}\n[[policy.port_forward]]\nname = \"x\"\nfrom = \"wan\"\nport = 22\nto = \"10.0.0.2\"\nreflection_zones = [\"guest\", \"guest\"]\n"),
    )])
    .unwrap()
    .policy
    .unwrap();
    assert_eq!(ok.port_forwards[0].reflection_zones, ["guest"]);
    let out = errors(&[(
        "main.toml",
        &format!(
            "[policy]\n{base}\n[[policy.port_forward]]\nname = \"x\"\nfrom = \"wan\"\nport = 22\nto = \"10.0.0.2\"\nreflection_zones = [\"guest\", \"dmz\"]\n\n[[policy.port_forward]]\nname = \"y\"\nfrom = \"wan\"\nport = 23\nto = \"10.0.0.2\"\nreflection = false\nreflection_zones = [\"guest\"]\n"
        ),
    )]);
    assert!(
        out.contains("main.toml:16:30: error: zone `dmz` is used but never defined"),
        "{out}"
    );
    assert!(
        out.contains("main.toml:24:20: error: `reflection_zones` widens the reflection, but `reflection = false` turns it off"),
        "{out}"
    );
}

#[test]
fn bad_log_limit_values_are_reported_at_their_place() {
    let out = errors(&[(
        "main.toml",
        r#"[policy]
input = "drop"

[policy.zone.lan]
interfaces = ["eth0"]
log_limit = "0/minute"

[[policy.rule]]
name = "count"
from = "lan"
log_limit = "5/fortnight"
"#,
    )]);
    for e in [
        "main.toml:6:13: error: invalid log_limit `0/minute`: expected \"<count>/<second|minute|hour|day>\"",
        "main.toml:11:13: error: invalid log_limit `5/fortnight`: expected \"<count>/<second|minute|hour|day>\"",
    ] {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}

/// A rule without `action` (fw4's rule without `target`) is valid: it counts, and with
/// `log_limit` (which implies `log`) logs; it decides nothing.
#[test]
fn a_rule_without_action_is_a_counter_and_log_limit_implies_log() {
    let cfg = load_str(&[(
        "main.toml",
        r#"[policy]
input = "drop"

[policy.zone.lan]
interfaces = ["eth0"]
log_limit = "1/minute"

[[policy.rule]]
name = "count"
from = "lan"

[[policy.rule]]
name = "log"
from = "lan"
log_limit = "5/minute"
"#,
    )])
    .unwrap();
    let p = cfg.policy.unwrap();
    let minute = |count| {
        Some(Rate {
            count,
            per_seconds: 60,
        })
    };
    assert_eq!(p.zones["lan"].log_limit, minute(1));
    assert_eq!((p.rules[0].action, p.rules[0].log), (None, false));
    assert_eq!(
        (p.rules[1].action, p.rules[1].log, p.rules[1].log_limit),
        (None, true, minute(5))
    );
}
