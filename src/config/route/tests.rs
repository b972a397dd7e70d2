//! Route and rule validation: every key read, every mistake at its place.

use super::super::load_str;
use super::*;

fn routing(text: &str) -> RoutingConfig {
    load_str(&[("edgenetd.toml", text)]).unwrap().routing
}

fn errors(text: &str) -> String {
    load_str(&[("edgenetd.toml", text)])
        .expect_err("config must be rejected")
        .rendered
}

#[test]
fn every_route_key_is_read() {
    let r = routing(
        r#"
[[route]]
to = "10.20.0.0/16"
via = "192.168.1.1"
dev = "eth1"
metric = 100
table = 100
src = "192.168.1.2"
onlink = true
mtu = 1400

[[route]]
to = "default"
type = "unicast"
table = "main"
nexthops = [ { via = "192.168.1.1", dev = "eth1", weight = 1 },
         { via = "192.168.2.1", dev = "eth2", weight = 2, onlink = true } ]

[[route]]
to = "2001:db8::/32"
type = "unreachable"

[[route_rule]]
priority = 1000
from = "10.0.5.0/24"
table = 100

[[route_rule]]
priority = 1001
iif = "eth1"
oif = "eth2"
fwmark = "0x10/0xff"
to = "2001:db8::/32"
table = "main"

[[route_rule]]
priority = 1002
fwmark = 7
table = 7
"#,
    );
    assert_eq!(
        r.routes[0],
        Route {
            to: "10.20.0.0/16".parse().unwrap(),
            via: Some("192.168.1.1".parse().unwrap()),
            dev: Some("eth1".into()),
            metric: Some(100),
            table: 100,
            kind: RouteKind::Unicast,
            src: Some("192.168.1.2".parse().unwrap()),
            onlink: true,
            mtu: Some(1400),
            nexthops: vec![],
        }
    );
    assert_eq!(r.routes[1].to.to_string(), "0.0.0.0/0");
    assert_eq!(r.routes[1].table, 254);
    assert_eq!(r.routes[1].nexthops[1].weight, 2);
    assert!(r.routes[1].nexthops[1].onlink);
    assert_eq!(r.routes[2].kind, RouteKind::Unreachable);
    assert_eq!(r.routes[2].effective_metric(), 1024);
    assert_eq!(r.rules[0].family, RuleFamily::Ipv4);
    assert_eq!(r.rules[1].family, RuleFamily::Ipv6);
    assert_eq!(r.rules[1].fwmark, Some((0x10, Some(0xff))));
    assert_eq!(r.rules[1].table, 254);
    assert_eq!(r.rules[2].family, RuleFamily::Both);
    assert_eq!(r.rules[2].fwmark, Some((7, None)));
}

#[test]
fn a_gateway_of_the_wrong_family_is_pointed_at() {
    assert_eq!(
        errors("[[route]]\nto = \"10.0.0.0/8\"\nvia = \"2001:db8::1\"\n"),
        "edgenetd.toml:3:7: error: gateway 2001:db8::1 is IPv6 but the route to 10.0.0.0/8 is IPv4: expected an IPv4 address\n  |\n3 | via = \"2001:db8::1\"\n  |       ^^^^^^^^^^^^^\n"
    );
}

#[test]
fn a_multipath_route_that_also_sets_via_is_an_error_at_via() {
    let e = errors(
        "[[route]]\nto = \"10.0.0.0/8\"\nvia = \"192.0.2.1\"\nnexthops = [{ via = \"192.0.2.2\" }]\n",
    );
    assert!(
        e.starts_with("edgenetd.toml:3:7: error: a multipath route sets `via` in each of its nexthops, not on the route"),
        "{e}"
    );
}

#[test]
fn bad_values_each_get_their_own_error_with_place() {
    let e = errors(
        r#"[[route]]
to = "10.0.0.1/8"
via = "192.0.2.1"

[[route]]
to = "10.1.0.0/16"
dev = "eth1"
table = "vpn"

[[route]]
to = "10.2.0.0/16"
type = "blackhole"
via = "192.0.2.1"

[[route]]
to = "10.3.0.0/16"

[[route]]
to = "10.4.0.0/16"
dev = "eth1"
mtu = 20
tabel = 5

[[route_rule]]
priority = 0
table = 100

[[route_rule]]
priority = 10
from = "10.0.0.0/8"
to = "2001:db8::/32"
fwmark = "x/y"
table = 100
"#,
    );
    for expected in [
        "edgenetd.toml:2:6: error: invalid prefix `10.0.0.1/8`: host bits are set; did you mean \"10.0.0.0/8\"?",
        "edgenetd.toml:8:9: error: unknown table name `vpn`",
        "edgenetd.toml:13:7: error: a blackhole route does not forward packets, so `via` cannot be set",
        "edgenetd.toml:15:1: error: a unicast route needs `via`, `dev` or `nexthops`",
        "edgenetd.toml:22:1: error: unknown field `tabel`",
        "edgenetd.toml:25:12: error: invalid priority 0: expected a number from 1 to 4294967295",
        "edgenetd.toml:31:6: error: `to` is IPv6 but the rule's from is not",
        "edgenetd.toml:30:8: note: family decided here",
        "edgenetd.toml:32:10: error: invalid fwmark",
    ] {
        assert!(e.contains(expected), "missing {expected:?} in:\n{e}");
    }
}

#[test]
fn nexthop_source_and_onlink_mistakes_are_pointed_at() {
    let e = errors(
        r#"[[route]]
to = "2001:db8::/32"
src = "192.0.2.1"
nexthops = [{ via = "2001:db8::1", weight = 0 }, { weight = 2 }, { dev = "eth0", onlink = true }]
onlink = true

[[route]]
to = "10.0.0.0/8"
dev = "eth0"
onlink = true
metric = -1

[[route]]
to = "10.1.0.0/16"
dev = "this-name-is-too-long"
nexthops = []
"#,
    );
    for expected in [
        "edgenetd.toml:3:7: error: preferred source 192.0.2.1 is IPv4 but the route to 2001:db8::/32 is IPv6",
        "edgenetd.toml:4:45: error: invalid weight 0: expected a number from 1 to 256",
        "edgenetd.toml:4:50: error: a nexthop needs `via`, `dev` or both",
        "edgenetd.toml:4:91: error: onlink needs a gateway (`via`) in the same nexthop",
        "edgenetd.toml:5:10: error: a multipath route sets `onlink` in each of its nexthops",
        "edgenetd.toml:10:10: error: onlink needs a gateway (`via`)",
        "edgenetd.toml:11:10: error: invalid metric -1: expected a number from 0 to 4294967295",
        "edgenetd.toml:15:7: error: invalid interface name `this-name-is-too-long`",
        "edgenetd.toml:16:12: error: empty nexthops",
        "edgenetd.toml:15:7: error: a multipath route sets `dev` in each of its nexthops",
    ] {
        assert!(e.contains(expected), "missing {expected:?} in:\n{e}");
    }
}

#[test]
fn a_route_defined_twice_names_both_places_even_across_files() {
    let e = load_str(&[
        (
            "edgenetd.toml",
            "[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth0\"\n",
        ),
        (
            "conf.d/10-extra.toml",
            "[[route]]\nto = \"10.0.0.0/8\"\nvia = \"192.0.2.1\"\nmetric = 0\n",
        ),
    ])
    .unwrap_err()
    .rendered;
    assert!(
        e.contains("conf.d/10-extra.toml:1:1: error: route to 10.0.0.0/8 (table 254, metric 0) is defined twice"),
        "{e}"
    );
    assert!(
        e.contains("edgenetd.toml:1:1: note: first defined here"),
        "{e}"
    );
    // Another metric is another route.
    let ok = load_str(&[(
        "edgenetd.toml",
        "[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth0\"\n[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth1\"\nmetric = 10\n",
    )]);
    assert_eq!(ok.unwrap().routing.routes.len(), 2);
}

/// The kernel stores an IPv6 route's metric 0 as 1024, so `metric = 0` and `metric = 1024`
/// (or no metric) on the same IPv6 prefix are one route; and the validated route carries 1024,
/// the metric the kernel will report.
#[test]
fn ipv6_metric_0_is_metric_1024_in_the_duplicate_check() {
    let e = errors(
        "[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth0\"\nmetric = 1024\n[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth1\"\nmetric = 0\n",
    );
    assert!(
        e.starts_with("edgenetd.toml:5:1: error: route to 2001:db8::/32 (table 254, metric 1024) is defined twice"),
        "{e}"
    );
    assert!(
        e.contains("edgenetd.toml:1:1: note: first defined here"),
        "{e}"
    );
    let r = routing("[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth0\"\nmetric = 0\n");
    assert_eq!(
        (r.routes[0].metric, r.routes[0].effective_metric()),
        (Some(1024), 1024)
    );
    // IPv4 keeps metric 0, and IPv6 without a metric is 1024 as well.
    let r = routing("[[route]]\nto = \"10.0.0.0/8\"\ndev = \"eth0\"\nmetric = 0\n");
    assert_eq!(r.routes[0].effective_metric(), 0);
    let e = errors(
        "[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth0\"\n[[route]]\nto = \"2001:db8::/32\"\ndev = \"eth1\"\nmetric = 0\n",
    );
    assert!(e.contains("is defined twice"), "{e}");
}

/// `fwmark = "16"` and `fwmark = "0x10/0xffffffff"` are one mark to the kernel (a mark
/// without a mask matches under all ones); the same rule spelled both ways used to pass, and
/// `plan` then showed four rules for two.
#[test]
fn the_same_rule_spelled_differently_is_defined_twice() {
    let e = errors(
        "[[route_rule]]\npriority = 100\nfwmark = \"16\"\ntable = 100\n[[route_rule]]\npriority = 100\nfwmark = \"0x10/0xffffffff\"\ntable = 100\n",
    );
    assert!(
        e.starts_with("edgenetd.toml:5:1: error: this route_rule is defined twice"),
        "{e}"
    );
    assert!(
        e.contains("edgenetd.toml:1:1: note: first defined here"),
        "{e}"
    );
    for (a, b) in [
        (
            "fwmark = 16\ntable = \"main\"",
            "fwmark = \"0x10\"\ntable = 254",
        ),
        ("fwmark = 0\ntable = 7", "table = 7"),
        (
            "from = \"10.0.0.0/8\"\ntable = 7",
            "family = \"ipv4\"\nfrom = \"10.0.0.0/8\"\ntable = 7",
        ),
    ] {
        let text =
            format!("[[route_rule]]\npriority = 9\n{a}\n[[route_rule]]\npriority = 9\n{b}\n");
        assert!(errors(&text).contains("is defined twice"), "{text}");
    }
    // A mask other than all ones is another rule, and so is mark 0 under a mask.
    let r = routing(
        "[[route_rule]]\npriority = 9\nfwmark = \"0x10/0xff\"\ntable = 7\n[[route_rule]]\npriority = 9\nfwmark = \"0x10\"\ntable = 7\n[[route_rule]]\npriority = 9\nfwmark = \"0/0xffffffff\"\ntable = 7\n[[route_rule]]\npriority = 9\ntable = 7\n",
    );
    assert_eq!(r.rules.len(), 4);
    assert_eq!(r.rules[1].fwmark, Some((0x10, None)));
    assert_eq!(r.rules[2].fwmark, Some((0, Some(u32::MAX))));
    assert_eq!(r.rules[3].fwmark, None);
}

const TWO_UPLINKS: &str = r#"
[[track]]
name = "wan1"
check = "tcp"
target = "1.1.1.1:53"
via = "203.0.113.1"
dev = "eth0"
interval = "2s"
fall = 3
rise = 3

[[route]]
to = "default"
via = "203.0.113.1"
dev = "eth0"
metric = 10
track = "wan1"

[[route]]
to = "default"
via = "198.51.100.1"
dev = "eth1"
metric = 20
"#;

#[test]
fn the_issue_12_track_example_is_read_with_its_defaults() {
    let r = routing(TWO_UPLINKS);
    assert_eq!(r.tracks.len(), 1);
    let t = &r.tracks[0];
    assert_eq!(t.name, "wan1");
    assert_eq!(t.check, TrackCheck::Tcp);
    assert_eq!(t.target, "1.1.1.1:53".parse().unwrap());
    assert_eq!(t.via, "203.0.113.1".parse::<std::net::IpAddr>().unwrap());
    assert_eq!(t.dev, "eth0");
    assert_eq!(t.interval, std::time::Duration::from_secs(2));
    assert_eq!(t.timeout, std::time::Duration::from_secs(2));
    assert_eq!((t.fall, t.rise), (3, 3));
    assert_eq!(
        (t.table, t.fwmark, t.priority),
        (TRACK_TABLE_BASE, TRACK_MARK_BASE, TRACK_PRIORITY_BASE)
    );
    assert_eq!(r.track_of(&r.routes[0]), Some("wan1"));
    assert_eq!(
        r.track_of(&r.routes[1]),
        None,
        "an untracked route stays untracked"
    );
}

#[test]
fn a_route_naming_an_unknown_track_is_an_error_at_the_name() {
    let text = TWO_UPLINKS.replace("track = \"wan1\"", "track = \"wan9\"");
    let e = errors(&text);
    assert!(
        e.contains("unknown track `wan9`: defined tracks: `wan1`"),
        "{e}"
    );
    assert!(
        e.contains("edgenetd.toml:17:9"),
        "file:line:col of the name: {e}"
    );
}

#[test]
fn track_keys_are_checked_each_at_its_place() {
    let e = errors(
        r#"
[[track]]
name = "a"
check = "http"
target = "1.1.1.1:53"
via = "203.0.113.1"
dev = "eth0"

[[track]]
name = "b"
check = "icmp"
target = "1.1.1.1:53"
via = "2001:db8::1"
dev = "eth0"
fall = 0

[[track]]
name = "c"
check = "tcp"
target = "1.1.1.1"
via = "203.0.113.1"
dev = "eth0"
colour = "red"
"#,
    );
    assert!(e.contains("unknown check `http`"), "{e}");
    assert!(
        e.contains("an icmp target is an address without a port"),
        "{e}"
    );
    assert!(e.contains("invalid fall 0"), "{e}");
    assert!(e.contains("unknown field `colour`"), "{e}");
}

#[test]
fn a_track_defined_twice_names_both_places_and_dns_defaults_to_port_53() {
    let one = r#"
[[track]]
name = "wan1"
check = "dns"
target = "192.0.2.53"
via = "203.0.113.1"
dev = "eth0"
"#;
    let r = routing(one);
    assert_eq!(r.tracks[0].target, "192.0.2.53:53".parse().unwrap());
    assert_eq!(r.tracks[0].interval, DEFAULT_INTERVAL);
    let e = errors(&format!("{one}{one}"));
    assert!(e.contains("track `wan1` is defined twice"), "{e}");
    assert!(e.contains("first defined here"), "{e}");
}

#[test]
fn two_tracks_sharing_a_table_or_mark_is_an_error() {
    let track = |name: &str, extra: &str| {
        format!(
            "[[track]]\nname = \"{name}\"\ncheck = \"tcp\"\ntarget = \"192.0.2.1:53\"\nvia = \"203.0.113.1\"\ndev = \"eth0\"\n{extra}"
        )
    };
    let two = routing(&format!("{}{}", track("a", ""), track("b", "")));
    assert_eq!(
        two.tracks[0].table + 1,
        two.tracks[1].table,
        "defaults count up"
    );
    assert_eq!(two.tracks[0].fwmark + 1, two.tracks[1].fwmark);
    let e = errors(&format!(
        "{}{}",
        track("a", ""),
        track("b", "table = 32000\n")
    ));
    assert!(
        e.contains("track `b` shares its table (32000) or fwmark"),
        "{e}"
    );
    let e = errors(&format!(
        "{}{}",
        track("a", "fwmark = 7\n"),
        track("b", "fwmark = \"0x7\"\n")
    ));
    assert!(e.contains("with track `a`"), "{e}");
}

/// The plain-block reader (`fast.rs`) against toml's parser: values, places of every message
/// and every fallback, in files of routes long enough to take the loader's fast path.
#[test]
fn plain_route_blocks_read_without_the_parser_give_what_the_parser_gives() {
    // Everything the loader gives for one file: the validated state or the rendered errors.
    let load = |file: &str, min_blocks| match super::super::load_str_split(
        &[("f.toml", file)],
        min_blocks,
    ) {
        Ok(state) => format!("{state:#?}"),
        Err(e) => e.rendered,
    };
    let same = |file: &str| assert_eq!(load(file, 1), load(file, usize::MAX), "{file}");
    let blocks = [
        // Plain: read without the parser.
        "[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.1\"\ndev = \"eth0\"\n",
        "[[route]]   # c\n\tto='10.2.0.0/16'  # c\n\n# c\ntype = \"blackhole\"\n",
        "[[route]]\nto = \"10.3.0.0/16\"\nmetric = +7\ntable = 100\nmtu = 1400\nonlink = false\ndev = \"x\"\n",
        "[[route]]\nto = \"10.4.0.0/16\"\ntable = \"main\"\nsrc = \"192.0.2.9\"\nvia = \"192.0.2.1\"\nonlink = true\n",
        "[[route]]\r\nto = \"10.5.0.0/16\"\r\nvia = \"192.0.2.1\"\r\n",
        "[[route]]\nto=\"10.6.0.0/16\"#c\nvia=\"192.0.2.1\"",
        // Plain but invalid: each message at its value.
        "[[route]]\nto = \"10.7.0.1/16\"\nvia = \"192.0.2.1\"\n",
        "[[route]]\nto = \"10.8.0.0/16\"\nvia = \"2001:db8::1\"\n",
        "[[route]]\nto = \"10.9.0.0/16\"\ndev = \"a/b\"\nmetric = -1\nmtu = 9\n",
        "[[route]]\nto = \"10.10.0.0/16\"\ntable = \"nope\"\n",
        "[[route]]\nto = \"10.11.0.0/16\"\ntable = 0\nonlink = true\ndev = \"x\"\n",
        "[[route]]\nto = \"10.12.0.0/16\"\ntype = \"blackhole\"\nvia = \"192.0.2.1\"\n",
        "[[route]]\nto = \"10.13.0.0/16\"\ntype = \"bogus\"\ntrack = \"t\"\n",
        "[[route]]\nto = \"10.1.0.0/16\"\ndev = \"again\"\n",
        "[[route]]\nto = \"10.14.0.0/16\"\n",
        "[[route]]\nto = \"\"\nvia = \"\"\n",
        "[[route]]\nto = \"10.15.0.0/16\"\nmetric = 9223372036854775807\ndev = \"x\"\n",
        // Not plain: left to the parser (its messages, its values).
        "[[route]]\nto = \"10.16.0.0/16\"\ndev = \"e\\u0074h0\"\n",
        "[[route]]\nto = \"10.17.0.0/16\"\nmetric = 1_000\ndev = \"x\"\n",
        "[[route]]\nto = \"10.18.0.0/16\"\nmetric = 010\ndev = \"x\"\n",
        "[[route]]\nto = \"10.19.0.0/16\"\nmetric = 0x10\ndev = \"x\"\n",
        "[[route]]\nto = \"10.20.0.0/16\"\nmetric = 99999999999999999999\ndev = \"x\"\n",
        "[[route]]\nto = \"10.21.0.0/16\"\nmetric = \"5\"\ndev = \"x\"\n",
        "[[route]]\nto = \"10.22.0.0/16\"\ndev = \"x\"\ndev = \"y\"\n",
        "[[route]]\nto = \"10.23.0.0/16\"\ndve = \"x\"\n",
        "[[route]]\nvia = \"192.0.2.1\"\n",
        "[[route]]\nto = \"10.24.0.0/16\"\nonlink = True\n",
        "[[route]]\nto = \"10.25.0.0/16\" x\n",
        "[[route]]\nto = \"10.26.0.0/16\"\nvia.x = \"192.0.2.1\"\n",
        "[[route]]\n\"to\" = \"10.27.0.0/16\"\ndev = \"x\"\n",
        "[[route]]\nto = \"10.28.0.0/16\"\ndev = \"a\u{1}b\"\n",
        "[[route]]\nto = \"10.29.0.0/16\"\rdev = \"x\"\n",
        "[[route]]\nto = \"10.30.0.0/16\"\nnexthops = [{ via = \"192.0.2.1\" }]\n",
        "[[route]]\nto = \"10.31.0.0/16\"\nmetric = 1.5\ndev = \"x\"\n",
        "[[route]]\nto = \"10.32.0.0/16\"\ndev = \"x\"\nmtu = inf\n",
        "[[route]]\nto = \"\"\"10.33.0.0/16\"\"\"\ndev = \"x\"\n",
        "[[route]]\nto = '10.34.0.0/16'''\ndev = \"x\"\n",
    ];
    for (i, block) in blocks.iter().enumerate() {
        assert_eq!(super::fast::read(block, 0).is_some(), i < 17, "{block:?}");
        // Alone after 70 plain routes, and at the head of them.
        let plain: String = (0..70)
            .map(|i| format!("[[route]]\nto = \"10.200.{i}.0/24\"\nvia = \"192.0.2.1\"\n"))
            .collect();
        for file in [format!("{plain}{block}"), format!("{block}\n{plain}")] {
            same(&file);
        }
    }
}
