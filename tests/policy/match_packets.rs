//! Issue 11 items 8 and 9 with real packets (a lan host, the router, a wan host on veth
//! pairs; see `common::policy::lan_wan`): destination addresses and sets, source ports,
//! TCP and UDP in one rule, port-forward ranges and sources, an IPv6 suffix pinhole that
//! survives a prefix change, zone SNAT, a rule's mark steering traffic through a second
//! uplink by a `[[route_rule]] fwmark`, and `dscp` (issue 22) over IPv4 and IPv6, with its
//! `plan` text and `explain`.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::bin::edgenetd;
use common::controller::Driver;
use common::policy::{ZONES_ONLY, lan_wan, planned_policy_nft};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::{Host, Link, Topology, failed};
use common::wait::poll_for;
use edgenetd::controller::route::RouteController;
use edgenetd::sync::trigger;

/// A TCP client that connects from source port `sport`: prints the server's first line or
/// `FAIL:<reason>`.
const SPORT_CLIENT: &str = r#"
import socket, sys
host, port, sport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.settimeout(1.5)
try:
    s.bind(('0.0.0.0', sport))
    s.connect((host, port))
    print(s.makefile().readline().strip())
except Exception as e:
    print('FAIL:' + str(e))
"#;

/// The first answer from `from` that is not a failure, retried for up to 10 s (IPv6
/// neighbour discovery on a loaded machine); the last failure otherwise.
fn settled(t: &Topology, from: &Host, kind: &str, to: &str, port: u16) -> String {
    let mut last = String::new();
    poll_for(Duration::from_secs(10), || {
        last = t.connect(from, kind, to, port);
        (!failed(&last)).then(|| last.clone())
    })
    .unwrap_or(last)
}

netns_test! {
    fn to_addresses_admit_only_the_listed_destinations() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let config = format!(
            "{ZONES_ONLY}[policy.set.servers]\ntype = \"ipv4\"\nelements = [\"192.0.2.3\"]\n\
             [[policy.rule]]\nname = \"web\"\nfrom = \"lan\"\nto = \"wan\"\n\
             to_addresses = [\"192.0.2.2/32\"]\nprotocol = \"tcp\"\nports = [80]\naction = \"accept\"\n"
        );
        let mut d = Driver::policy();
        d.sync(&config).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "10.0.0.2");
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.3", 80)));
        // A set entry admits the set's addresses.
        d.sync(&config.replace("[\"192.0.2.2/32\"]", "[\"@servers\"]")).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "10.0.0.2");
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.2", 80)));
    }
}

netns_test! {
    fn source_ports_admit_only_connections_from_those_ports() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let client = t.script("sport.py", SPORT_CLIENT);
        let from_port = |sport: u16| lan.sh(&format!("python3 {client} 192.0.2.2 80 {sport}")).trim().to_string();
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"low-ports\"\nfrom = \"lan\"\nto = \"wan\"\n\
             protocol = \"tcp\"\nports = [80]\nsource_ports = [999, \"1000-1100\"]\naction = \"accept\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        assert_eq!(from_port(1050), "10.0.0.2");
        assert_eq!(from_port(999), "10.0.0.2");
        assert!(failed(&from_port(2000)), "a source port outside the list passed");
    }
}

netns_test! {
    fn a_tcp_and_udp_rule_admits_both_protocols_on_its_ports() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve_named(wan, "dns", 53);
        t.serve_named(wan, "other", 54);
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"dns\"\nfrom = \"lan\"\nto = \"wan\"\n\
             protocol = [\"tcp\", \"udp\"]\nports = [53]\naction = \"accept\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 53), "dns");
        assert_eq!(t.connect(lan, "udp", "192.0.2.2", 53), "dns");
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.2", 54)));
        assert!(failed(&t.connect(lan, "udp", "192.0.2.2", 54)));
    }
}

netns_test! {
    fn a_port_forward_range_maps_port_by_port() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve_named(lan, "shifted-9005", 9005);
        t.serve_named(lan, "same-7001", 7001);
        let config = format!(
            "{ZONES_ONLY}[[policy.port_forward]]\nname = \"shifted\"\nfrom = \"wan\"\nprotocol = [\"tcp\", \"udp\"]\n\
             port = \"8000-8010\"\nto = \"10.0.0.2:9000-9010\"\n\
             [[policy.port_forward]]\nname = \"same\"\nfrom = \"wan\"\nport = \"7000-7002\"\nto = \"10.0.0.2\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        // 8005 is the sixth port of the range: the sixth of the inner range, 9005.
        // (The lan host's first address: a UDP answer leaves from it.)
        assert_eq!(settled(&t, wan, "tcp", "192.0.2.1", 8005), "shifted-9005");
        assert_eq!(t.connect(wan, "udp", "192.0.2.1", 8005), "shifted-9005");
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 8004)));
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 7001), "same-7001");
        // Outside the range nothing is forwarded (the router drops it).
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 7003)));
    }
}

netns_test! {
    fn a_port_forward_with_from_addresses_forwards_only_those_sources() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(lan, "tcp", 80);
        let config = format!(
            "{ZONES_ONLY}[[policy.port_forward]]\nname = \"web\"\nfrom = \"wan\"\nport = 8080\n\
             to = \"10.0.0.10:80\"\nfrom_addresses = [\"192.0.2.2\"]\n"
        );
        Driver::policy().sync(&config).unwrap();
        assert_eq!(
            t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.2"),
            "192.0.2.2"
        );
        assert!(failed(&t.connect_from(wan, "tcp", "192.0.2.1", 8080, "192.0.2.3")));
    }
}

netns_test! {
    fn an_ipv6_suffix_pinhole_follows_a_prefix_change() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        wan.sh("ip -6 route add fd00::/8 via 2001:db8::1");
        lan.sh("ip -6 addr add fd00::3/64 dev eth0 nodad");
        t.serve_v6(lan, "tcp", 80);
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"pinhole\"\nfrom = \"wan\"\nto = \"lan\"\n\
             to_addresses = [\"::2/-64\"]\nprotocol = \"tcp\"\nports = [80]\naction = \"accept\"\n"
        );
        let mut d = Driver::policy();
        d.sync(&config).unwrap();
        assert_eq!(settled(&t, wan, "tcp", "fd00::2", 80), "2001:db8::2");
        // Another host of the same prefix stays closed.
        assert!(failed(&t.connect(wan, "tcp", "fd00::3", 80)));
        // The ISP delegates a new prefix: the host's new address is reached without a
        // config change or resync.
        t.router().sh("ip -6 addr add fd01::1/64 dev veth-lan nodad");
        lan.sh("ip -6 addr add fd01::2/64 dev eth0 nodad");
        assert_eq!(settled(&t, wan, "tcp", "fd01::2", 80), "2001:db8::2");
        // The mask form is the same match.
        d.sync(&config.replace("::2/-64", "::2/::ffff:ffff:ffff:ffff")).unwrap();
        assert_eq!(settled(&t, wan, "tcp", "fd01::2", 80), "2001:db8::2");
        assert!(failed(&t.connect(wan, "tcp", "fd00::3", 80)));
    }
}

netns_test! {
    fn zone_snat_leaves_with_the_snat_address() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // The SNAT addresses are the router's (so the wan host's answers reach it).
        t.router().sh("ip addr add 192.0.2.77/24 dev veth-wan");
        t.router().sh("ip -6 addr add 2001:db8::77/64 dev veth-wan nodad");
        t.serve(wan, "tcp", 80);
        t.serve_v6(wan, "tcp", 81);
        let config = format!(
            "{}[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\n",
            ZONES_ONLY.replace(
                "interfaces = [\"veth-wan\"]\n",
                "interfaces = [\"veth-wan\"]\nsnat = [\"192.0.2.77\", \"2001:db8::77\"]\n"
            )
        );
        let mut d = Driver::policy();
        d.sync(&config).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.77");
        assert_eq!(settled(&t, lan, "tcp", "2001:db8::2", 81), "2001:db8::77");
        // IPv4 only: IPv6 leaves with the lan host's own address (the wan host routes the
        // lan prefix back through the router).
        wan.sh("ip -6 route add fd00::/64 via 2001:db8::1");
        d.sync(&config.replace(", \"2001:db8::77\"", "")).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.77");
        assert_eq!(settled(&t, lan, "tcp", "2001:db8::2", 81), "fd00::2");
    }
}

/// lan_wan plus a second uplink, wan2 (198.51.100.2; the router 198.51.100.1 on
/// `veth-wan2`). Both uplink hosts hold 203.0.113.50 (the "internet" server) and answer
/// with their own name; each routes the lan back through the router.
fn two_uplinks() -> Topology {
    let mut t = lan_wan();
    t.add_host(
        "wan2",
        Link {
            router_if: "veth-wan2",
            router_addrs: &["198.51.100.1/24"],
            host_if: "eth0",
            host_addrs: &["198.51.100.2/24"],
            host_routes: &["10.0.0.0/24 via 198.51.100.1"],
        },
    );
    for (role, name) in [("wan", "wan1"), ("wan2", "wan2")] {
        let h = t.host(role);
        h.sh("ip addr add 203.0.113.50/32 dev lo");
        t.serve_named(h, name, 80);
        t.serve_named(h, name, 443);
    }
    // Answers from wan2 for the lan come in on veth-wan2 though the main route to
    // 203.0.113.50 is via wan: no reverse-path filter in the way.
    sh("sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0");
    sh("for i in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $i; done");
    t
}

/// Policy and routes of the split: HTTPS from the lan is marked 0x10 and a route rule
/// sends marked traffic to table 100, whose route to the internet is via wan2.
const SPLIT: &str = r#"
[policy]
input = "drop"
forward_default = "drop"

[policy.zone.lan]
interfaces = ["veth-lan"]

[policy.zone.wan]
interfaces = ["veth-wan", "veth-wan2"]

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.rule]]
name = "https-via-wan2"
from = "lan"
protocol = "tcp"
ports = [443]
set_mark = "0x10/0xff"

[[route]]
to = "203.0.113.0/24"
via = "192.0.2.2"

[[route]]
to = "203.0.113.0/24"
via = "198.51.100.2"
table = 100

[[route_rule]]
priority = 100
fwmark = "0x10/0xff"
table = 100
"#;

netns_test! {
    fn a_rules_set_mark_steers_traffic_through_the_uplink_of_a_fwmark_route_rule() {
        let t = two_uplinks();
        let lan = t.host("lan");
        let (tx, _rx) = trigger();
        let mut routes = Driver::with(RouteController::new(tx), None);
        routes.sync(SPLIT).unwrap();
        Driver::policy().sync(SPLIT).unwrap();
        // Marked (HTTPS): through wan2, chosen by the route rule; unmarked: the main route.
        assert_eq!(t.connect(lan, "tcp", "203.0.113.50", 443), "wan2");
        assert_eq!(t.connect(lan, "tcp", "203.0.113.50", 80), "wan1");
        let mangle = sh("nft list chain inet edgenetd-policy mangle_prerouting");
        // (nft lists the mask folded with the value: `& 0xffffff10 | 0x00000010`.)
        assert!(
            mangle.contains("tcp dport 443") && mangle.contains("| 0x00000010"),
            "{mangle}"
        );
        // Without the mark rule HTTPS takes the main route too: the mark did the steering.
        let unmarked = SPLIT.replace("set_mark = \"0x10/0xff\"", "action = \"accept\"");
        Driver::policy().sync(&unmarked).unwrap();
        assert_eq!(t.connect(lan, "tcp", "203.0.113.50", 443), "wan1");
    }
}

netns_test! {
    /// fw4's 03_rules/12_mark, with packets: `set_xmark` flips bits another rule set (fw4's
    /// XOR), so the route rule sees 0x10 where an OR would leave 0x11.
    fn fw4_12_mark_set_xmark_flips_the_bits_a_set_mark_rule_set_before_the_route_rule_reads_them() {
        let t = two_uplinks();
        let lan = t.host("lan");
        let (tx, _rx) = trigger();
        let mut routes = Driver::with(RouteController::new(tx), None);
        routes.sync(SPLIT).unwrap();
        let flipped = SPLIT.replace(
            "set_mark = \"0x10/0xff\"",
            "set_mark = \"0x11/0xff\"\n\n[[policy.rule]]\nname = \"flip\"\nfrom = \"lan\"\nset_xmark = \"0x1/0x0\"",
        );
        Driver::policy().sync(&flipped).unwrap();
        assert_eq!(t.connect(lan, "tcp", "203.0.113.50", 443), "wan2");
        let mangle = sh("nft list chain inet edgenetd-policy mangle_prerouting");
        assert!(mangle.contains("meta mark set meta mark ^ 0x00000001"), "{mangle}");
        // Without the flip the mark stays 0x11, which the route rule (0x10/0xff) does not take.
        let unflipped = SPLIT.replace("set_mark = \"0x10/0xff\"", "set_mark = \"0x11/0xff\"");
        Driver::policy().sync(&unflipped).unwrap();
        assert_eq!(t.connect(lan, "tcp", "203.0.113.50", 443), "wan1");
    }
}

/// `ping -Q <tos>` from `host` to `to` (IPv6 when `to` has a `:`; the TOS byte is the
/// traffic class there): true when the echo came back.
fn ping_with_tos(host: &Host, to: &str, tos: u8) -> bool {
    let six = if to.contains(':') { "-6 " } else { "" };
    host.sh_status(&format!("ping {six}-n -c 1 -W 1 -Q {tos:#04x} {to}"))
        .0
}

/// [`ping_with_tos`] retried for up to 10 s (IPv6 neighbour discovery on a loaded machine).
fn pings_with_tos(host: &Host, to: &str, tos: u8) -> bool {
    poll_for(Duration::from_secs(10), || {
        ping_with_tos(host, to, tos).then_some(())
    })
    .is_some()
}

/// The kernel expressions of every rule in `listing` (`nft --debug=netlink list ...`),
/// anonymous set numbers and counters' values dropped.
fn bytecode(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.starts_with("  ["))
        .map(|l| l.split(" pkts ").next().unwrap_or(l))
        .map(|l| {
            l.split(' ')
                .map(|w| if w.starts_with("__set") { "__set" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

netns_test! {
    fn dscp_admits_only_packets_with_the_listed_code_points_over_ipv4_and_ipv6() {
        let t = lan_wan();
        let lan = t.host("lan");
        // A list (a set per IP version) and one value (a comparison), names and numbers.
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"voice\"\nfrom = \"lan\"\nto = \"self\"\n\
             dscp = [\"AF41\", 46]\naction = \"accept\"\n\
             [[policy.rule]]\nname = \"bulk\"\nfrom = \"lan\"\nto = \"self\"\n\
             protocol = \"icmp\"\ndscp = \"cs1\"\naction = \"accept\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        // (TOS = DSCP << 2: ef 0xb8, af41 0x88, cs1 0x20, cs2 0x40.) Each ping is a process
        // of its own, so an echo id of its own: a new connection every time.
        assert!(pings_with_tos(lan, "10.0.0.1", 0xb8), "ef dropped over IPv4");
        assert!(pings_with_tos(lan, "fd00::1", 0x88), "af41 dropped over IPv6");
        assert!(ping_with_tos(lan, "10.0.0.1", 0x20), "cs1 dropped over IPv4");
        // The ECN bits are not the DSCP's: af41 with ECT(0) still matches.
        assert!(ping_with_tos(lan, "fd00::1", 0x8a), "af41 with ECN bits dropped");
        assert!(!ping_with_tos(lan, "10.0.0.1", 0x40), "cs2 passed over IPv4");
        assert!(!ping_with_tos(lan, "fd00::1", 0x40), "cs2 passed over IPv6");
        assert!(!ping_with_tos(lan, "fd00::1", 0x20), "cs1 passed over IPv6 (the rule is icmp)");
        assert!(!ping_with_tos(lan, "10.0.0.1", 0), "no DSCP passed");

        // What the kernel holds reads back as nft writes it.
        let listed = sh("nft list table inet edgenetd-policy");
        for expected in [
            "ip dscp { af41, ef }",
            "ip6 dscp { af41, ef }",
            "ip dscp cs1",
        ] {
            assert!(listed.contains(expected), "no `{expected}` in:\n{listed}");
        }
        assert!(!listed.contains("ip6 dscp cs1"), "an icmp rule matched IPv6:\n{listed}");

        // `plan` prints it as nft text that nft accepts and that loads to the very
        // expressions the batch programmed.
        let dir = ScratchDir::with_files("dscp-plan", &[("edgenetd.toml", &config)]);
        let (text, file) = planned_policy_nft(&dir);
        assert!(text.contains("ip6 dscp { af41, ef }"), "{text}");
        let from_text = bytecode(&sh(&format!(
            "unshare --net sh -c 'nft -f {} && nft --debug=netlink list table inet edgenetd-policy'",
            file.display()
        )));
        let batch = bytecode(&sh("nft --debug=netlink list table inet edgenetd-policy"));
        assert!(batch.iter().any(|e| e.contains("& 0x0000c00f")), "{batch:?}");
        assert_eq!(batch, from_text, "the batch and the plan's text differ");

        // `explain` reads the DSCP it is given.
        let cfg = dir.config();
        let explain = |dscp: &str, from: &str, to: &str, proto: &str| {
            let run = edgenetd(&[
                "explain", "--json", "--config", cfg.to_str().unwrap(), "--addresses",
                "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64", "--in", "veth-lan", "--from", from,
                "--to", to, "--proto", proto, "--dscp", dscp,
            ]);
            assert_eq!(run.code, 0, "explain: {}", run.stderr);
            let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            format!("{} {}", j["verdict"].as_str().unwrap(), j["rule"].as_str().unwrap())
        };
        assert_eq!(explain("ef", "10.0.0.2", "10.0.0.1", "icmp"), "accept voice");
        assert_eq!(explain("34", "fd00::2", "fd00::1", "icmpv6"), "accept voice");
        assert_eq!(explain("cs1", "10.0.0.2", "10.0.0.1", "icmp"), "accept bulk");
        assert_eq!(explain("cs1", "fd00::2", "fd00::1", "icmpv6"), "drop default");
        assert_eq!(explain("0", "10.0.0.2", "10.0.0.1", "icmp"), "drop default");
    }
}

netns_test! {
    fn set_dscp_rewrites_forwarded_packets_before_the_filter_over_ipv4_and_ipv6() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // The wan host counts what arrives, by DSCP and ECN (an IPv4 header whose checksum
        // the rewrite broke never reaches its input hook).
        wan.sh("ip -6 route add fd00::/64 via 2001:db8::1");
        wan.sh("nft add table inet probe");
        wan.sh("nft add chain inet probe in '{ type filter hook input priority 0; }'");
        for (name, m) in [
            ("v4_af41", "ip dscp af41 ip ecn not-ect icmp type echo-request"),
            ("v4_af41_ect1", "ip dscp af41 ip ecn ect1 icmp type echo-request"),
            ("v6_af41", "ip6 dscp af41 icmpv6 type echo-request"),
            ("v4_other", "ip dscp != af41 icmp type echo-request"),
        ] {
            wan.sh(&format!("nft add rule inet probe in {m} counter comment {name}"));
        }
        // The rewrite (forward chain at mangle priority) comes before the filter, which
        // admits only af41: a packet passes only if it was rewritten first.
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"video\"\nfrom = \"lan\"\nto = \"wan\"\n\
             set_dscp = \"AF41\"\n\
             [[policy.rule]]\nname = \"af41-only\"\nfrom = \"lan\"\nto = \"wan\"\n\
             dscp = 34\naction = \"accept\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        assert!(pings_with_tos(lan, "192.0.2.2", 0), "IPv4 echo lost: not rewritten before the filter, or its header checksum broken");
        assert!(pings_with_tos(lan, "2001:db8::2", 0x20), "IPv6 (cs1) dropped");
        assert!(ping_with_tos(lan, "192.0.2.2", 0x01), "IPv4 with ECT(1) dropped");
        let counted = |name: &str| -> u64 {
            let chain = wan.sh("nft list chain inet probe in");
            let line = chain.lines().find(|l| l.contains(&format!("comment \"{name}\""))).unwrap();
            let after = line.split("packets ").nth(1).unwrap();
            after.split(' ').next().unwrap().parse().unwrap()
        };
        assert!(counted("v4_af41") >= 1, "{}", wan.sh("nft list chain inet probe in"));
        assert_eq!(counted("v4_af41_ect1"), 1, "the ECN bits were not kept");
        assert!(counted("v6_af41") >= 1, "{}", wan.sh("nft list chain inet probe in"));
        assert_eq!(counted("v4_other"), 0, "a packet left with another DSCP");

        let listed = sh("nft list chain inet edgenetd-policy mangle_forward");
        assert!(listed.contains("hook forward priority mangle"), "{listed}");
        for expected in ["ip dscp set af41", "ip6 dscp set af41"] {
            assert!(listed.contains(expected), "no `{expected}` in:\n{listed}");
        }

        // `plan`'s text loads (nft -c -f, then nft -f) to the very expressions of the batch.
        let dir = ScratchDir::with_files("set-dscp-plan", &[("edgenetd.toml", &config)]);
        let (text, file) = planned_policy_nft(&dir);
        assert!(text.contains("ip6 dscp set af41"), "{text}");
        let from_text = bytecode(&sh(&format!(
            "unshare --net sh -c 'nft -f {} && nft --debug=netlink list table inet edgenetd-policy'",
            file.display()
        )));
        let batch = bytecode(&sh("nft --debug=netlink list table inet edgenetd-policy"));
        assert!(
            batch.iter().any(|e| e.contains("payload write reg 1 => 2b @ network header + 0 csum_type 1 csum_off 10")),
            "{batch:?}"
        );
        assert_eq!(batch, from_text, "the batch and the plan's text differ");

        // `explain` rewrites the packet as the kernel does, and the filter sees the new DSCP.
        let cfg = dir.config();
        let run = edgenetd(&[
            "explain", "--json", "--config", cfg.to_str().unwrap(), "--addresses",
            "veth-lan=10.0.0.1/24,veth-wan=192.0.2.1/24", "--in", "veth-lan", "--from",
            "10.0.0.2", "--to", "192.0.2.2", "--proto", "icmp", "--dscp", "cs1",
        ]);
        assert_eq!(run.code, 0, "explain: {}", run.stderr);
        let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!((j["verdict"].as_str(), j["rule"].as_str()), (Some("accept"), Some("af41-only")), "{j}");
        let steps = j["steps"].to_string();
        assert!(steps.contains("mangle_forward: ip dscp set af41 by"), "{steps}");
    }
}
