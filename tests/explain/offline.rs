//! `edgenetd explain` offline: the JSON contract, the path through port forwards (with
//! reflection), services (each backend's share), masquerade, route rules (from, fwmark,
//! throw) and blackholes, the established state, usage errors, and an IR it cannot evaluate
//! reported as unsupported instead of guessed. The firewall features of issue 11: marks
//! that choose the route, zone SNAT, IPv6 suffixes, source ports, tcp+udp rules, port-forward
//! ranges with their sources, dynamic sets, conntrack helpers and flow offload. Agreement with the kernel is
//! tests/explain/differential.rs.

use crate::common;
use crate::netns_test;

use edgenetd::dataplane::nft::ir::*;
use edgenetd::explain::error::ExplainError;
use edgenetd::explain::eval::{Run, Trace};
use edgenetd::explain::query;
use edgenetd::explain::route::Addresses;
use serde_json::Value as Json;

use common::bin::edgenetd;
use common::scratch::ScratchDir;

/// The config of the differential test: every rule kind.
const CONFIG: &str = include_str!("data/config.toml");
const ROUTER: &str = "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64,veth-wan=192.0.2.1/24,\
     veth-wan=2001:db8::1/64,veth-wan2=100.64.0.1/24,veth-wan2=100.64.0.7/24";

/// Routes with a fwmark rule, a throw, and a default route.
const ROUTES: &str = r#"
[[route]]
to = "default"
via = "192.0.2.254"

[[route_rule]]
priority = 50
fwmark = 7
table = 200

[[route]]
to = "default"
via = "10.0.0.254"
table = 200

[[route]]
to = "198.18.0.0/15"
type = "throw"
table = 200
"#;

/// `edgenetd explain --json` with `args` under `config`.
fn explain(config: &str, args: &[&str]) -> Json {
    let dir = ScratchDir::with_files("explain", &[("edgenetd.toml", config)]);
    let cfg = dir.config();
    let mut all = vec![
        "explain",
        "--json",
        "--config",
        cfg.to_str().unwrap(),
        "--addresses",
        ROUTER,
    ];
    all.extend(args);
    let run = edgenetd(&all);
    assert_eq!(run.code, 0, "edgenetd {all:?}: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn tcp(iif: &str, from: &str, to: &str, dport: u16) -> Vec<String> {
    [
        "--in", iif, "--from", from, "--to", to, "--proto", "tcp", "--dport",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dport.to_string()])
    .collect()
}

fn explain_tcp(config: &str, iif: &str, from: &str, to: &str, dport: u16, more: &[&str]) -> Json {
    let args = tcp(iif, from, to, dport);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(more);
    explain(config, &args)
}

#[test]
fn the_json_keys_operators_script_against_are_always_there() {
    let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.2", "192.0.2.1", 23, &[]);
    for key in ["verdict", "rule", "dnat", "snat", "route"] {
        assert!(j.get(key).is_some(), "key {key} missing from {j}");
    }
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("reject"), Some("telnet-reject"))
    );
    assert_eq!(j["chain"], "input");
    assert!(j["dnat"].is_null() && j["snat"].is_null());
    assert_eq!(j["route"]["decision"], "local");
    // No rule: the input chain's default.
    let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.2", "192.0.2.1", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("drop"), Some("default"))
    );
}

#[test]
fn a_port_forward_dnats_and_reflects_with_masquerade() {
    let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.2", "192.0.2.1", 8080, &[]);
    assert_eq!(j["verdict"], "accept", "{j}");
    assert_eq!(j["dnat"]["to"], "10.0.0.10:80");
    assert_eq!(j["dnat"]["rule"], "port-forward web");
    assert_eq!(
        (j["route"]["dev"].as_str(), j["route"]["table"].as_u64()),
        (Some("veth-lan"), Some(254))
    );
    assert!(j["snat"].is_null(), "{j}");
    // From the lan to the router's wan address: reflected, and masqueraded so the inner
    // host answers through the router.
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "192.0.2.1", 8080, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["dnat"]["to"].as_str()),
        (Some("accept"), Some("10.0.0.10:80"))
    );
    assert_eq!(
        (j["snat"]["to"].as_str(), j["snat"]["masquerade"].as_bool()),
        (Some("10.0.0.1"), Some(true))
    );
    // The router's lan address is the router's own: no port forward there.
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "10.0.0.1", 8080, &[]);
    assert!(j["dnat"].is_null(), "{j}");
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("ssh-from-lan"))
    );
}

#[test]
fn a_service_names_each_backend_with_its_share() {
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "198.51.100.10", 80, &[]);
    assert_eq!(j["verdict"], "accept", "{j}");
    assert_eq!(j["dnat"]["service"], "app");
    let backends = j["dnat"]["backends"].as_array().unwrap();
    let shares: Vec<(String, f64)> = backends
        .iter()
        .map(|b| {
            (
                b["to"].as_str().unwrap().to_string(),
                b["share"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shares.len(), 2, "{shares:?}");
    assert!(
        shares.iter().all(|(_, s)| (s - 0.5).abs() < 1e-9),
        "{shares:?}"
    );
    assert!(shares.iter().any(|(t, _)| t == "192.0.2.2:8080"));
    // Out through the wan: masqueraded to the router's wan address.
    assert_eq!(j["snat"]["to"], "192.0.2.1");
}

#[test]
fn route_rules_pick_tables_by_source_and_mark_and_throw_falls_through() {
    // The route rule of 10.0.0.2 sends 192.0.2.3 to an unreachable route of table 100.
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "192.0.2.3", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["route"]["decision"].as_str()),
        (Some("reject"), Some("unreachable")),
        "{j}"
    );
    assert_eq!(
        (j["route"]["table"].as_u64(), j["route"]["rule"].as_str()),
        (Some(100), Some("route_rule priority 100"))
    );
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.10", "192.0.2.3", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["route"]["table"].as_u64()),
        (Some("accept"), Some(254)),
        "{j}"
    );
    // The blackhole drops silently.
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "203.0.113.5", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["route"]["decision"].as_str()),
        (Some("drop"), Some("blackhole"))
    );
    // A fwmark rule: marked traffic takes table 200's default, except where it throws.
    let cfg = format!("{CONFIG}\n{ROUTES}");
    let j = explain_tcp(
        &cfg,
        "veth-lan",
        "10.0.0.2",
        "8.8.8.8",
        443,
        &["--mark", "7"],
    );
    assert_eq!(
        (j["route"]["table"].as_u64(), j["route"]["via"].as_str()),
        (Some(200), Some("10.0.0.254")),
        "{j}"
    );
    let j = explain_tcp(
        &cfg,
        "veth-lan",
        "10.0.0.2",
        "198.18.0.1",
        443,
        &["--mark", "7"],
    );
    assert_eq!(
        (j["route"]["table"].as_u64(), j["route"]["via"].as_str()),
        (Some(254), Some("192.0.2.254")),
        "{j}"
    );
    let j = explain_tcp(&cfg, "veth-lan", "10.0.0.2", "8.8.8.8", 443, &[]);
    assert_eq!(
        (j["route"]["table"].as_u64(), j["route"]["dev"].as_str()),
        (Some(254), Some("veth-wan")),
        "{j}"
    );
}

#[test]
fn an_established_packet_is_accepted_by_the_established_rule() {
    let j = explain_tcp(
        CONFIG,
        "veth-wan",
        "192.0.2.2",
        "10.0.0.2",
        4444,
        &["--state", "established"],
    );
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("base")),
        "{j}"
    );
    assert!(
        j["rule_text"].as_str().unwrap().contains("established"),
        "{j}"
    );
    let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.2", "10.0.0.2", 4444, &[]);
    assert_eq!(j["verdict"], "drop", "{j}");
}

#[test]
fn ipv6_and_icmp_types_are_matched() {
    let j = explain(
        CONFIG,
        &[
            "--in",
            "veth-wan",
            "--from",
            "2001:db8::2",
            "--to",
            "2001:db8::1",
            "--proto",
            "icmpv6",
        ],
    );
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("ping6-from-wan")),
        "{j}"
    );
    let j = explain(
        CONFIG,
        &[
            "--in",
            "veth-wan",
            "--from",
            "2001:db8::2",
            "--to",
            "2001:db8::1",
            "--proto",
            "icmpv6",
            "--icmp-type",
            "echo-reply",
        ],
    );
    assert_eq!(j["verdict"], "drop", "{j}");
    // An IPv4 port forward does nothing to IPv6 traffic.
    let j = explain_tcp(CONFIG, "veth-wan", "2001:db8::2", "2001:db8::1", 8080, &[]);
    assert!(j["dnat"].is_null(), "{j}");
    assert_eq!(j["verdict"], "drop");
}

#[test]
fn the_text_names_the_path_step_by_step() {
    let dir = ScratchDir::with_files("explain-text", &[("edgenetd.toml", CONFIG)]);
    let cfg = dir.config();
    let run = edgenetd(&[
        "explain",
        "--config",
        cfg.to_str().unwrap(),
        "--addresses",
        ROUTER,
        "--in",
        "veth-wan",
        "--from",
        "192.0.2.2",
        "--to",
        "192.0.2.1",
        "--proto",
        "tcp",
        "--dport",
        "8080",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for expected in [
        "dnat",
        "10.0.0.10:80",
        "port-forward web",
        "route",
        "dev veth-lan",
        "forward",
        "verdict      accept",
    ] {
        assert!(
            run.stdout.contains(expected),
            "{expected:?} not in:\n{}",
            run.stdout
        );
    }
}

#[test]
fn usage_mistakes_exit_2_and_say_what_is_wrong() {
    for (args, says) in [
        (
            vec![
                "explain", "--from", "10.0.0.2", "--to", "10.0.0.1", "--proto", "tcp", "--dport",
                "22",
            ],
            "--in",
        ),
        (
            vec![
                "explain", "--in", "x", "--from", "10.0.0.2", "--to", "10.0.0.1", "--proto", "tcp",
            ],
            "--dport",
        ),
        (
            vec![
                "explain", "--in", "x", "--from", "10.0.0.2", "--to", "fd00::1", "--proto", "udp",
                "--dport", "1",
            ],
            "same IP version",
        ),
        (
            vec![
                "explain", "--in", "x", "--from", "10.0.0.2", "--to", "10.0.0.1", "--proto", "nope",
            ],
            "--proto",
        ),
        (
            vec![
                "explain", "--in", "x", "--from", "10.0.0.2", "--to", "10.0.0.1", "--proto",
                "icmp", "--dport", "1",
            ],
            "no ports",
        ),
        (
            vec![
                "explain",
                "--in",
                "x",
                "--from",
                "10.0.0.2",
                "--to",
                "10.0.0.1",
                "--proto",
                "icmp",
                "--netns",
                "r1",
                "--offline",
            ],
            "--netns reads the addresses from the kernel",
        ),
    ] {
        let run = edgenetd(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

/// The interpreter never guesses: what it cannot evaluate (here a `numgen` compared outside
/// a NAT map) is reported with the rule it is in.
#[test]
fn an_expression_explain_cannot_evaluate_is_reported_not_guessed() {
    let mut table = Table::new(Family::Inet, "t");
    table.chains.push(Chain::base(
        "in",
        ChainType::Filter,
        Hook::Input,
        0,
        ChainPolicy::Accept,
    ));
    table.rules.push(
        Rule::new(
            "in",
            vec![
                Stmt::Cmp {
                    left: Expr::Numgen {
                        modulus: 2,
                        offset: 0,
                    },
                    op: CmpOp::Eq,
                    right: Value::Mark(0),
                },
                Stmt::Verdict(Verdict::Drop),
            ],
        )
        .with_comment("coin flip"),
    );
    let q = query::parse(
        &[
            "--in", "eth0", "--from", "10.0.0.2", "--to", "10.0.0.1", "--proto", "udp", "--dport",
            "53",
        ]
        .map(String::from),
        "unused",
    )
    .unwrap();
    let addrs = Addresses::default();
    let run = Run {
        table: &table,
        local: &addrs,
        masq_addr: None,
    };
    let mut pkt = q.packet.clone();
    let err = run
        .chain("in", &mut pkt, &mut Trace::default())
        .unwrap_err();
    assert!(matches!(err, ExplainError::Unsupported(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("Numgen") && text.contains("coin flip"),
        "{text}"
    );
}

/// The steps of `j` as one text, to search.
fn steps(j: &Json) -> String {
    j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A mark set in `mangle_prerouting` is the mark the route rules see: marked traffic
/// takes the second uplink (the main table has no route there at all) and leaves with
/// that zone's SNAT address.
#[test]
fn a_mark_set_before_routing_picks_the_route_and_the_zone_snats() {
    for proto in ["tcp", "udp"] {
        let j = explain(
            CONFIG,
            &[
                "--in",
                "veth-lan",
                "--from",
                "10.0.0.2",
                "--to",
                "198.51.100.20",
                "--proto",
                proto,
                "--dport",
                "53",
            ],
        );
        assert_eq!(j["verdict"], "accept", "{j}");
        assert_eq!(j["rule"], "forward lan->wan2", "{j}");
        let r = &j["route"];
        assert_eq!(
            (r["table"].as_u64(), r["rule"].as_str(), r["dev"].as_str()),
            (Some(150), Some("route_rule priority 90"), Some("veth-wan2")),
            "{j}"
        );
        assert_eq!(r["via"], "100.64.0.2");
        assert!(
            steps(&j).contains("mark set 0x10/0xff by mark mark-via-wan2"),
            "{j}"
        );
        let n = &j["snat"];
        assert_eq!(
            (
                n["to"].as_str(),
                n["masquerade"].as_bool(),
                n["rule"].as_str()
            ),
            (Some("100.64.0.7"), Some(false), Some("snat wan2")),
            "{j}"
        );
    }
    // The mask keeps the mark's other bits, and the route rule's mask ignores them.
    let j = explain(
        CONFIG,
        &[
            "--in",
            "veth-lan",
            "--from",
            "10.0.0.2",
            "--to",
            "198.51.100.20",
            "--proto",
            "tcp",
            "--dport",
            "22",
            "--mark",
            "0x1200",
        ],
    );
    assert!(steps(&j).contains("is now 0x1210"), "{j}");
    assert_eq!(j["route"]["table"], 150, "{j}");
    // Unmarked (the rule is tcp and udp only): no route, so the router answers unreachable.
    let j = explain(
        CONFIG,
        &[
            "--in",
            "veth-lan",
            "--from",
            "10.0.0.2",
            "--to",
            "198.51.100.20",
            "--proto",
            "icmp",
        ],
    );
    assert_eq!(
        (j["verdict"].as_str(), j["chain"].as_str()),
        (Some("reject"), Some("routing"))
    );
    assert!(!steps(&j).contains("mark set"), "{j}");
}

/// `to_addresses = ["::2/-64"]` compares the last 64 bits only: the same host under another
/// prefix matches, another host under the same prefix does not.
#[test]
fn an_ipv6_suffix_matches_the_host_under_any_prefix() {
    let j = explain_tcp(CONFIG, "veth-wan", "2001:db8::2", "fd00::2", 8200, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("pinhole-lan-host-2")),
        "{j}"
    );
    let j = explain_tcp(CONFIG, "veth-wan", "2001:db8::2", "fd00::3", 8200, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("drop"), Some("default")),
        "{j}"
    );
    // A lan zone of interfaces only: the pinhole follows the host into a new prefix.
    let cfg = r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
[policy.zone.wan]
interfaces = ["veth-wan"]
[[policy.rule]]
name = "nas"
from = "wan"
to = "lan"
to_addresses = ["::1234/-64"]
protocol = "tcp"
ports = [443]
action = "accept"
"#;
    let args = |to: &'static str| {
        [
            "--in",
            "veth-wan",
            "--from",
            "2001:db8::2",
            "--to",
            to,
            "--proto",
            "tcp",
            "--dport",
            "443",
            "--addresses",
            "veth-lan=2001:db8:77::1/64,veth-wan=2001:db8::1/64",
        ]
    };
    for (to, verdict) in [
        ("2001:db8:77::1234", "accept"),
        ("2001:db8:77::1235", "drop"),
    ] {
        let dir = ScratchDir::with_files("explain-suffix", &[("edgenetd.toml", cfg)]);
        let path = dir.config();
        let mut all = vec!["explain", "--json", "--config", path.to_str().unwrap()];
        all.extend(args(to));
        let run = edgenetd(&all);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let j: Json = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(j["verdict"], verdict, "{to}: {j}");
    }
}

/// `source_ports` and `protocol = ["tcp", "udp"]`: both protocols, only from those ports.
#[test]
fn source_ports_and_a_tcp_and_udp_rule_match_both_protocols_from_those_ports() {
    for proto in ["tcp", "udp"] {
        for (sport, verdict, rule) in [
            ("20100", "accept", "low-sports-to-7000"),
            ("20150", "drop", "default"),
        ] {
            let j = explain(
                CONFIG,
                &[
                    "--in",
                    "veth-wan",
                    "--from",
                    "192.0.2.2",
                    "--sport",
                    sport,
                    "--to",
                    "192.0.2.1",
                    "--proto",
                    proto,
                    "--dport",
                    "7000",
                ],
            );
            assert_eq!(
                (j["verdict"].as_str(), j["rule"].as_str()),
                (Some(verdict), Some(rule)),
                "{proto} from port {sport}: {j}"
            );
        }
    }
}

/// A port-forward range maps port by port, and only for its `from_addresses`: another wan
/// source and the lan's reflection meet the router's own rules.
#[test]
fn a_port_forward_range_maps_port_by_port_for_its_sources_only() {
    for (port, to) in [(8049, "10.0.0.11:79"), (8051, "10.0.0.11:81")] {
        let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.2", "192.0.2.1", port, &[]);
        assert_eq!(j["verdict"], "accept", "{j}");
        assert_eq!(
            (j["dnat"]["to"].as_str(), j["dnat"]["rule"].as_str()),
            (Some(to), Some("port-forward range-from-one-host")),
            "{j}"
        );
    }
    let j = explain_tcp(CONFIG, "veth-wan", "192.0.2.4", "192.0.2.1", 8050, &[]);
    assert!(j["dnat"].is_null(), "{j}");
    assert_eq!(
        (j["verdict"].as_str(), j["chain"].as_str()),
        (Some("drop"), Some("input"))
    );
    let j = explain_tcp(CONFIG, "veth-lan", "10.0.0.2", "192.0.2.1", 8050, &[]);
    assert!(j["dnat"].is_null(), "{j}");
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("ssh-from-lan")),
        "{j}"
    );
}

/// A dynamic set (timeout and size flags in the kernel) still holds the config's elements.
#[test]
fn a_dynamic_sets_config_elements_still_match() {
    for from in ["192.0.2.3", "203.0.113.9"] {
        let j = explain_tcp(CONFIG, "veth-wan", from, "192.0.2.1", 2222, &[]);
        assert_eq!(
            (j["verdict"].as_str(), j["rule"].as_str()),
            (Some("drop"), Some("drop-blocklist")),
            "{from}: {j}"
        );
    }
}

/// `ct helper set` and `flow add` decide nothing: the path names them, the verdict is the
/// forward chain's as without them (neither is reported as unsupported).
#[test]
fn a_helper_and_flow_offload_are_steps_of_the_path_not_verdicts() {
    let cfg = r#"
[policy]
forward_default = "drop"
helpers = ["ftp"]
flow_offload = true
[policy.zone.lan]
interfaces = ["veth-lan"]
helpers = ["ftp"]
[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true
[[policy.forward]]
from = "lan"
to = "wan"
"#;
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "192.0.2.2", 21, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("forward lan->wan")),
        "{j}"
    );
    assert!(steps(&j).contains("helpers: helper ftp"), "{j}");
    assert!(
        !steps(&j).contains("offload"),
        "a new connection is not offloaded: {j}"
    );
    let j = explain_tcp(
        cfg,
        "veth-lan",
        "10.0.0.2",
        "192.0.2.2",
        21,
        &["--state", "established"],
    );
    assert_eq!(j["verdict"], "accept", "{j}");
    assert!(steps(&j).contains("flow add @ft"), "{j}");
    assert!(steps(&j).contains("would be offloaded"), "{j}");
    // Another port: no helper.
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "192.0.2.2", 22, &[]);
    assert!(!steps(&j).contains("helper"), "{j}");
}

/// `action = "notrack"` (fw4's NOTRACK): the packet is untracked from `raw_prerouting` on,
/// so no NAT chain sees it (no masquerade) and an answer is not `established`.
#[test]
fn a_notrack_rule_keeps_the_packet_out_of_nat_and_established() {
    let cfg = r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true
[[policy.forward]]
from = "lan"
to = "wan"
[[policy.rule]]
name = "web-untracked"
protocol = "tcp"
ports = [80]
action = "notrack"
"#;
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "192.0.2.2", 80, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("forward lan->wan")),
        "{j}"
    );
    assert!(steps(&j).contains("raw_prerouting: notrack"), "{j}");
    assert!(j["snat"].is_null(), "untracked, so not masqueraded: {j}");
    // Tracked (another port): masqueraded.
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "192.0.2.2", 81, &[]);
    assert_eq!(j["snat"]["masquerade"], true, "{j}");
    // A packet the rule exempts is untracked even when its connection claims to be
    // established: nothing accepts wan -> lan.
    let mut answer = tcp("veth-wan", "192.0.2.2", "10.0.0.2", 80);
    answer.extend(["--state".into(), "established".into()]);
    let answer: Vec<&str> = answer.iter().map(String::as_str).collect();
    let j = explain(cfg, &answer);
    assert_eq!(j["verdict"], "drop", "{j}");
}

/// `synflood_protect`: a new connection's SYN to the router goes through `syn_flood`
/// (under its rate, as `explain` assumes, back to input); an established packet does not.
#[test]
fn a_syn_to_the_router_passes_the_synflood_chain_under_its_rate() {
    let cfg = r#"
[policy]
synflood_protect = true
[policy.zone.lan]
interfaces = ["veth-lan"]
[[policy.rule]]
name = "ssh"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
action = "accept"
"#;
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "10.0.0.1", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("ssh")),
        "{j}"
    );
    assert!(steps(&j).contains("input: jump syn_flood"), "{j}");
    let j = explain_tcp(
        cfg,
        "veth-lan",
        "10.0.0.2",
        "10.0.0.1",
        22,
        &["--state", "established"],
    );
    assert!(!steps(&j).contains("syn_flood"), "{j}");
}

/// An address·port set (`match`, `ipset`): only the listed pair is accepted.
#[test]
fn an_address_port_set_admits_its_pairs_only() {
    let cfg = r#"
[policy]
forward_default = "drop"
[policy.zone.lan]
interfaces = ["veth-lan"]
[policy.zone.wan]
interfaces = ["veth-wan"]
[policy.set.allowed]
type = "ipv4"
match = ["dest_ip", "dest_port"]
elements = ["192.0.2.2 80"]
[[policy.rule]]
name = "allowed-pairs"
from = "lan"
to = "wan"
protocol = "tcp"
ipset = "allowed"
action = "accept"
"#;
    let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", "192.0.2.2", 80, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("accept"), Some("allowed-pairs")),
        "{j}"
    );
    for (to, port) in [("192.0.2.2", 81), ("192.0.2.3", 80)] {
        let j = explain_tcp(cfg, "veth-lan", "10.0.0.2", to, port, &[]);
        assert_eq!(j["verdict"], "drop", "{to}:{port} {j}");
    }
}

/// `edgenetd explain` under `config` with `args` as given (no `--addresses` added): the
/// outcome, for its text or its JSON.
fn explain_as_given(config: &str, args: &[&str]) -> (String, String) {
    let dir = ScratchDir::with_files("explain", &[("edgenetd.toml", config)]);
    let cfg = dir.config();
    let mut all = vec!["explain", "--config", cfg.to_str().unwrap()];
    all.extend(args);
    let run = edgenetd(&all);
    assert_eq!(run.code, 0, "edgenetd {all:?}: {}", run.stderr);
    (run.stdout, run.stderr)
}

fn json_of(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

const TELNET_TO_THE_ROUTER: [&str; 10] = [
    "--in",
    "veth-wan",
    "--from",
    "192.0.2.2",
    "--to",
    "192.0.2.1",
    "--proto",
    "tcp",
    "--dport",
    "23",
];

// Issue 21 item 5: without `--addresses` the router's own address was "no route" and the
// answer `reject` by routing; on the router its addresses are the kernel's.
netns_test! {
    fn explain_on_the_router_takes_its_own_addresses_from_the_kernel() {
        let _t = common::topology::Topology::with_veth("veth-wan", "veth-wanp", &["192.0.2.1/24"]);
        let mut args = TELNET_TO_THE_ROUTER.to_vec();
        let (text, _) = explain_as_given(CONFIG, &args);
        assert!(text.starts_with("addresses: from the kernel\n"), "{text}");
        args.push("--json");
        let j = json_of(&explain_as_given(CONFIG, &args).0);
        assert_eq!(
            (j["verdict"].as_str(), j["rule"].as_str(), j["route"]["decision"].as_str()),
            (Some("reject"), Some("telnet-reject"), Some("local")),
            "{j}"
        );
        assert_eq!(j["addresses"]["from"], "kernel", "{j}");
        assert!(j["addresses"]["netns"].is_null(), "{j}");
        let entries = j["addresses"]["entries"].as_array().unwrap();
        assert!(entries.iter().any(|e| e == "veth-wan=192.0.2.1/24"), "{j}");

        // `--offline` keeps the pure answer: no address is the router's own.
        args.push("--offline");
        let j = json_of(&explain_as_given(CONFIG, &args).0);
        assert_eq!(j["addresses"]["from"], "offline", "{j}");
        assert_ne!(j["route"]["decision"], "local", "{j}");
        assert_ne!(j["rule"], "telnet-reject", "{j}");
        let (text, stderr) = explain_as_given(CONFIG, &TELNET_TO_THE_ROUTER[..].iter().copied().chain(["--offline"]).collect::<Vec<_>>());
        assert!(text.starts_with("addresses: none (--offline)\n"), "{text}");
        assert!(stderr.contains("no address counts as the router's own"), "{stderr}");

        // `--addresses` replaces the kernel's.
        let mut given = TELNET_TO_THE_ROUTER.to_vec();
        given.extend(["--json", "--addresses", "veth-wan=192.0.2.9/24"]);
        let j = json_of(&explain_as_given(CONFIG, &given).0);
        assert_eq!(j["addresses"]["from"], "given", "{j}");
        assert_eq!(j["addresses"]["entries"], serde_json::json!(["veth-wan=192.0.2.9/24"]));
        assert_ne!(j["route"]["decision"], "local", "{j}");
    }
}

netns_test! {
    fn explain_with_netns_reads_that_namespaces_addresses() {
        let mut t = common::topology::Topology::new();
        let host = t.add_host(
            "r1",
            common::topology::Link {
                router_if: "veth-r1",
                router_addrs: &["10.9.0.2/24"],
                host_if: "veth-wan",
                host_addrs: &["192.0.2.1/24"],
                host_routes: &[],
            },
        );
        let ns = host.netns().unwrap().to_string();
        let mut args = TELNET_TO_THE_ROUTER.to_vec();
        args.extend(["--netns", &ns]);
        let (text, _) = explain_as_given(CONFIG, &args);
        assert!(
            text.starts_with(&format!("addresses: from the kernel (netns {ns})\n")),
            "{text}"
        );
        args.push("--json");
        let j = json_of(&explain_as_given(CONFIG, &args).0);
        assert_eq!(
            (j["addresses"]["from"].as_str(), j["addresses"]["netns"].as_str()),
            (Some("kernel"), Some(ns.as_str())),
            "{j}"
        );
        assert_eq!((j["rule"].as_str(), j["route"]["decision"].as_str()), (Some("telnet-reject"), Some("local")), "{j}");
        // The test's own namespace has no veth-wan: without --netns it is not the router.
        let j = json_of(&explain_as_given(CONFIG, &[&TELNET_TO_THE_ROUTER[..], &["--json"]].concat()).0);
        assert_eq!(j["addresses"]["from"], "none", "{j}");
        assert!(j["addresses"]["why"].as_str().unwrap().contains("no interface veth-wan here"), "{j}");
        // A namespace that does not exist is an error, not a silent offline answer.
        let dir = ScratchDir::with_files("explain", &[("edgenetd.toml", CONFIG)]);
        let cfg = dir.config();
        let mut bad = vec!["explain", "--config", cfg.to_str().unwrap(), "--netns", "en-no-such-ns"];
        bad.extend(TELNET_TO_THE_ROUTER);
        let run = edgenetd(&bad);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(run.stderr.contains("en-no-such-ns"), "{}", run.stderr);
    }
}

/// fw4's rule without `target` (issue 23 item 4): the rule matches, counts and logs, and
/// explain says so and goes on to what decides (here the input default).
#[test]
fn a_rule_without_action_counts_logs_and_lets_evaluation_go_on() {
    let config = format!(
        "{CONFIG}\n[[policy.rule]]\nname = \"count-wan-ssh\"\nfrom = \"wan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [22]\nlog = true\n"
    );
    let j = explain_tcp(&config, "veth-wan", "192.0.2.2", "192.0.2.1", 22, &[]);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("drop"), Some("default")),
        "{j}"
    );
    let steps = j["steps"].to_string();
    assert!(
        steps.contains(r#"input: rule count-wan-ssh matched: counted, logged with prefix \"count-wan-ssh: \", no verdict: evaluation goes on"#),
        "{steps}"
    );
}

/// An address·port set with `net` fields (fw4's 05_ipsets `net`, a concatenated interval
/// set): a packet inside one tuple's prefixes matches, one outside every tuple does not.
#[test]
fn fw4_05_ipsets_a_net_tuple_set_matches_the_prefixes_of_its_elements() {
    let cfg = r#"
[policy]
input = "drop"
[policy.zone.wan]
interfaces = ["veth-wan"]
[policy.set.partners]
type = "ipv4"
match = ["src_net", "dest_ip", "dest_port"]
elements = ["192.0.2.0/28 192.0.2.1 2222", "198.51.100.0/24 192.0.2.1 22"]
[[policy.rule]]
name = "partners"
from = "wan"
to = "self"
protocol = "tcp"
ipset = "partners"
action = "accept"
"#;
    for (from, dport, verdict) in [
        ("192.0.2.9", 2222, "accept"),
        ("192.0.2.17", 2222, "drop"),
        ("198.51.100.200", 22, "accept"),
        ("198.51.100.200", 2222, "drop"),
    ] {
        let j = explain_tcp(cfg, "veth-wan", from, "192.0.2.1", dport, &[]);
        assert_eq!(j["verdict"].as_str(), Some(verdict), "{from}:{dport}: {j}");
    }
}

/// Pods are a cluster's: a build without the `kubernetes` feature says so (exit 1), for
/// `--from-pod` and for `--cluster-state`, instead of answering without them.
#[cfg(not(feature = "kubernetes"))]
#[test]
fn pod_names_and_a_cluster_state_need_the_kubernetes_feature() {
    let dir = ScratchDir::with_files("explain", &[("edgenetd.toml", CONFIG)]);
    let cfg = dir.config();
    let base = [
        "explain",
        "--config",
        cfg.to_str().unwrap(),
        "--offline",
        "--in",
        "veth-lan",
        "--proto",
        "tcp",
        "--dport",
        "80",
        "--to",
        "10.0.0.9",
    ];
    let run = edgenetd(&[&base[..], &["--from-pod", "shop/web-1"]].concat());
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("built without the kubernetes feature"),
        "{}",
        run.stderr
    );
    let state = dir.join("state.json");
    let run = edgenetd(
        &[
            &base[..],
            &[
                "--from",
                "10.0.0.5",
                "--cluster-state",
                state.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("--cluster-state: this edgenetd is built without the kubernetes feature"),
        "{}",
        run.stderr
    );
}
