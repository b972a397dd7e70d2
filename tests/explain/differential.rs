//! `edgenetd explain` against the kernel, with real packets.
//!
//! The same config is programmed by the policy, service and route controllers into the
//! router of a lan/wan topology (a port forward with reflection, a service VIP with two
//! backends, sets (one dynamic), port ranges, ICMP and ICMPv6 types, zones, masquerade, IPv6,
//! a route rule and blackhole/unreachable routes; a marking rule whose fwmark route rule
//! steers to a second uplink that SNATs to a fixed address; destination addresses with an
//! IPv6 suffix, source ports, a tcp+udp rule, a port-forward range limited to one source, a service fenced by source ranges, time rules by date). A seeded generator makes a few hundred packets; for
//! each, `explain` predicts the verdict and, when it is accepted, the address and port it
//! arrives at and the source address it arrives with. A real packet is then sent (one
//! prober per sending host, all cases in parallel) to receivers on every address that
//! answer with exactly those three facts; an RST or an ICMP error is a reject, silence a
//! drop. For TCP and UDP cases decided in the policy's input or forward chain, the kernel's
//! own account (`meta nftrace set 1` and `nft monitor trace`) must name the same rule as
//! `explain` (or both the chain's default). Any disagreement fails the test (a disagreeing case is first re-sent once with a
//! longer timeout, so a packet lost to a loaded machine is not taken for a drop).
//!
//! The seed is printed; `EXPLAIN_SEED=<n>` replays one.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::process::{Child, Stdio};
use std::time::Duration;

use edgenetd::controller::route::RouteController;
use edgenetd::dataplane::nft::GenerationWatch;
use edgenetd::explain::eval::Final;
use edgenetd::explain::walk::Decider;
use edgenetd::explain::{explain, query};
use edgenetd::sync::trigger;

use common::controller::{Driver, load};
use common::policy::lan_wan;
use common::topology::{Host, Link, Topology};
use common::wait::poll_for;

/// The config every case is explained under and the kernel is programmed with.
const CONFIG: &str = include_str!("data/config.toml");
const RECEIVER: &str = include_str!("data/receiver.py");
const PROBER: &str = include_str!("data/prober.py");

/// The router's addresses, as `--addresses` gives them.
const ROUTER: &str = "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64,veth-wan=192.0.2.1/24,\
     veth-wan=2001:db8::1/64,veth-wan2=100.64.0.1/24,veth-wan2=100.64.0.7/24";
const LAN: [&str; 4] = ["10.0.0.2", "10.0.0.10", "10.0.0.11", "fd00::2"];
const WAN: [&str; 3] = ["192.0.2.2", "192.0.2.3", "2001:db8::2"];
const ROUTER_ADDRS: [&str; 4] = ["10.0.0.1", "192.0.2.1", "fd00::1", "2001:db8::1"];
/// A service VIP, and a destination the main table blackholes.
const ELSEWHERE: [&str; 2] = ["198.51.100.10", "203.0.113.5"];
/// Only the second uplink's host has this address, and only marked packets are routed
/// there: arriving at it proves the mark chose the route.
const WAN2: [&str; 1] = ["198.51.100.20"];
const TCP_PORTS: [u16; 9] = [22, 23, 80, 2222, 7000, 8050, 8080, 8200, 9000];
const UDP_PORTS: [u16; 7] = [53, 5005, 5353, 6000, 7000, 9999, 10000];
const CASES: usize = 300;
/// The policy table's name (the default prefix).
const POLICY: &str = "edgenetd-policy";
/// The table that marks the cases' packets for tracing (their source ports are 20000 +
/// case id): `nft monitor trace` then names the rule that decided each.
const TRACE_TABLE: &str = "table inet explain-trace {
  chain pre {
    type filter hook prerouting priority -350;
    iifname { \"veth-lan\", \"veth-wan\" } th sport 20000-20999 meta nftrace set 1
  }
}";

/// `nft monitor trace` running in the router.
pub(super) struct Tracer(Child, std::path::PathBuf);

impl Tracer {
    pub(super) fn start(t: &Topology) -> Tracer {
        t.router()
            .sh(&format!("nft -f - <<'EOF'\n{TRACE_TABLE}\nEOF"));
        let out = t.script("explain-trace.txt", "");
        let child = t.router().spawn(&format!("exec nft monitor trace > {out}"));
        std::thread::sleep(Duration::from_millis(300));
        Tracer(child, out.into())
    }

    /// The kernel's deciding rule in the policy's input/forward chain, by source port:
    /// `Some(comment)` for a rule, `None` for the chain's policy.
    pub(super) fn decisions(mut self) -> BTreeMap<u16, Option<String>> {
        std::thread::sleep(Duration::from_millis(300));
        let _ = self.0.kill();
        let _ = self.0.wait();
        let text = std::fs::read_to_string(&self.1).unwrap();
        let mut sport_of: BTreeMap<String, u16> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [_, _, id, _, table, chain, what, ..] = words.as_slice() else {
                continue;
            };
            if *what == "packet:" {
                if let Some(i) = words.iter().position(|w| *w == "sport") {
                    sport_of.insert(id.to_string(), words[i + 1].parse().unwrap_or(0));
                }
                continue;
            }
            if *table != POLICY || !["input", "forward"].contains(chain) {
                continue;
            }
            let Some(&sport) = sport_of.get(*id) else {
                continue;
            };
            let decided = match *what {
                "policy" => None,
                // A jump or goto decides nothing here: the chain it enters does, or the
                // rules after it once that chain returns.
                "rule"
                    if !line.ends_with("(verdict continue)")
                        && !line.contains("(verdict jump ")
                        && !line.contains("(verdict goto ") =>
                {
                    line.split("comment \"")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .map(str::to_string)
                }
                _ => continue,
            };
            // The connection's first packet: later ones meet the established rule.
            out.entry(sport).or_insert(decided);
        }
        out
    }
}

/// splitmix64: small, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// One generated packet.
#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) id: usize,
    pub(super) sender: &'static str,
    pub(super) iif: &'static str,
    pub(super) proto: &'static str,
    pub(super) src: &'static str,
    pub(super) dst: &'static str,
    pub(super) dport: u16,
}

/// Cases every seed sends (sender, proto, source, destination, port), so each feature the
/// config has is met whatever the seed: before the generated ones (their source ports,
/// 20000 + id, are within `low-sports-to-7000`'s) ...
const DIRECTED_FIRST: [(&str, &str, &str, &str, u16); 11] = [
    // `family = "ipv6"` and a masked source (issue 23): each side of both.
    ("wan", "tcp", "2001:db8::2", "2001:db8::1", 80),
    ("wan", "tcp", "192.0.2.2", "192.0.2.1", 80),
    ("lan", "tcp", "10.0.0.10", "10.0.0.1", 80),
    ("lan", "tcp", "10.0.0.2", "10.0.0.1", 80),
    ("lan", "tcp", "10.0.0.2", "198.51.100.20", 22),
    ("lan", "udp", "10.0.0.10", "198.51.100.20", 53),
    ("wan", "tcp", "2001:db8::2", "fd00::2", 8200),
    ("wan", "tcp", "192.0.2.2", "192.0.2.1", 7000),
    ("wan", "udp", "192.0.2.2", "192.0.2.1", 7000),
    ("wan", "tcp", "192.0.2.2", "192.0.2.1", 8050),
    ("lan", "tcp", "10.0.0.2", "192.0.2.1", 8050),
];
/// ... and after them (source ports above that rule's).
const DIRECTED_LAST: [(&str, &str, &str, &str, u16); 4] = [
    ("wan", "tcp", "192.0.2.2", "192.0.2.1", 7000),
    ("wan", "udp", "192.0.2.2", "192.0.2.1", 7000),
    // The fenced service: a source in its ranges and one outside.
    ("lan", "udp", "10.0.0.2", "198.51.100.10", 9999),
    ("lan", "udp", "10.0.0.10", "198.51.100.10", 9999),
];

pub(super) fn directed(
    out: &mut Vec<Case>,
    cases: &[(&'static str, &'static str, &'static str, &'static str, u16)],
) {
    for &(sender, proto, src, dst, dport) in cases {
        out.push(Case {
            id: out.len(),
            sender,
            iif: if sender == "lan" {
                "veth-lan"
            } else {
                "veth-wan"
            },
            proto,
            src,
            dst,
            dport,
        });
    }
}

fn generate(seed: u64) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    directed(&mut out, &DIRECTED_FIRST);
    while out.len() < CASES {
        let lan = rng.next() % 2 == 0;
        let (sender, iif, srcs, others): (_, _, &[&str], &[&str]) = if lan {
            ("lan", "veth-lan", &LAN, &WAN)
        } else {
            ("wan", "veth-wan", &WAN, &LAN)
        };
        let src = *rng.pick(srcs);
        let mut dsts: Vec<&'static str> = ROUTER_ADDRS.to_vec();
        dsts.extend(others.iter().chain(&ELSEWHERE).chain(&WAN2));
        // The service's backends are the wan host's own addresses: a wan client could be
        // dealt itself, and a host never accepts its own address as a packet's source.
        dsts.retain(|d| lan || *d != ELSEWHERE[0]);
        dsts.retain(|d| d.contains(':') == src.contains(':'));
        let dst = *rng.pick(&dsts);
        let v6 = src.contains(':');
        let (proto, dport) = match rng.next() % 20 {
            0..8 => ("tcp", *rng.pick(&TCP_PORTS)),
            8..15 => ("udp", *rng.pick(&UDP_PORTS)),
            _ if v6 => ("icmpv6", 0),
            _ => ("icmp", 0),
        };
        out.push(Case {
            id: out.len(),
            sender,
            iif,
            proto,
            src,
            dst,
            dport,
        });
    }
    directed(&mut out, &DIRECTED_LAST);
    out
}

/// What explain predicts, in the terms the probers observe.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Prediction {
    pub(super) verdict: &'static str,
    /// Accepted TCP/UDP: (address, port) it may arrive at (several for a service), and
    /// the source it arrives with.
    pub(super) arrival: Option<(Vec<(IpAddr, u16)>, IpAddr)>,
    /// The deciding rule, for the failure message.
    pub(super) rule: String,
    /// The DNAT's rule, if any.
    pub(super) dnat: Option<String>,
    /// Refused by routing: the router's ICMP error is best effort (see [`agrees`]).
    pub(super) by_routing: bool,
    /// Decided in the policy's input or forward chain: the deciding rule's comment, or
    /// `None` for the chain's default (compared with the kernel's trace).
    pub(super) filter: Option<Option<String>>,
    /// The SNAT's (or masquerade's) rule on the way out, if any.
    pub(super) snat: Option<String>,
}

/// The config with time rules (issue 23 item 8) before `telnet-reject`, made here because
/// one depends on now (the offline tests share the file and give no `--at`): a reject that
/// ended long ago (never matches: port 2222 stays the next rules'), and one of tcp port
/// 9000 within ±3 h of now on today and tomorrow (UTC), which decides those cases.
fn with_time_rules(config: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let hm = |s: i64| edgenetd::calendar::format_time_of_day(s.rem_euclid(86_400) as u32);
    let today = edgenetd::calendar::weekday_from_days(now.div_euclid(86_400));
    let day = |k: u8| edgenetd::calendar::WEEKDAYS[usize::from((today + k) % 7)];
    let rules = format!(
        "[[policy.rule]]\nname = \"ssh-2222-ended\"\nto = \"self\"\nprotocol = \"tcp\"\n\
         ports = [2222]\nstart_date = \"2022\"\nstop_date = \"2023-01-01T12:00\"\n\
         utc_time = true\naction = \"reject\"\n\n\
         [[policy.rule]]\nname = \"tcp-9000-now\"\nto = \"self\"\nprotocol = \"tcp\"\n\
         ports = [9000]\nstart_time = \"{}\"\nstop_time = \"{}\"\nweekdays = \"{} {}\"\n\
         utc_time = true\naction = \"reject\"\n\n",
        hm(now - 3 * 3600),
        hm(now + 3 * 3600),
        day(0),
        day(1)
    );
    let at = "[[policy.rule]]\nname = \"telnet-reject\"";
    assert!(config.contains(at), "config.toml has no telnet-reject rule");
    config.replacen(at, &format!("{rules}{at}"), 1)
}

/// Now as `--at` takes it, in UTC.
fn at_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    format!(
        "{}Z",
        edgenetd::calendar::format_date_time(secs).replace(' ', "T")
    )
}

fn predict(desired: &edgenetd::config::DesiredState, c: &Case, sport: u16) -> Prediction {
    predict_with(desired, c, sport, ROUTER)
}

/// [`predict`] with the router's addresses `router` (as `--addresses` takes them).
pub(super) fn predict_with(
    desired: &edgenetd::config::DesiredState,
    c: &Case,
    sport: u16,
    router: &str,
) -> Prediction {
    let mut args: Vec<String> = [
        "--in",
        c.iif,
        "--from",
        c.src,
        "--to",
        c.dst,
        "--proto",
        c.proto,
        "--addresses",
        router,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if c.dport != 0 {
        args.extend(["--dport".into(), c.dport.to_string()]);
        args.extend(["--sport".into(), sport.to_string()]);
    }
    // The config's time rules: explained at now, when the packets are sent.
    args.extend(["--at".into(), at_now()]);
    let q = query::parse(&args, "unused").unwrap();
    let e = explain(desired, &q).unwrap_or_else(|err| panic!("explain {c:?}: {err}"));
    let json = edgenetd::explain::report::json(&e);
    let verdict = match e.verdict {
        Final::Accept => "accept",
        Final::Drop => "drop",
        Final::Reject(_) => "reject",
    };
    let arrival = (e.verdict == Final::Accept && c.dport != 0).then(|| {
        let mut to = vec![(e.packet.daddr, e.packet.dport)];
        if let Some(d) = &e.dnat
            && !d.shares.is_empty()
        {
            to = d
                .shares
                .iter()
                .map(|(a, p, _)| (*a, p.unwrap_or(c.dport)))
                .collect();
        }
        (to, e.packet.saddr)
    });
    Prediction {
        verdict,
        arrival,
        rule: json["rule"].as_str().unwrap_or("?").to_string(),
        dnat: json["dnat"]["rule"].as_str().map(str::to_string),
        snat: json["snat"]["rule"].as_str().map(str::to_string),
        by_routing: json["chain"] == "routing",
        filter: match &e.decider {
            Decider::Rule(r)
                if ["input", "forward"].contains(&r.chain.as_str()) && r.table == POLICY =>
            {
                Some(r.comment.clone())
            }
            Decider::Default(t, c) if t == POLICY && ["input", "forward"].contains(&c.as_str()) => {
                Some(None)
            }
            _ => None,
        },
    }
}

/// A property of a case and its prediction.
type CaseCheck = dyn Fn(&Case, &Prediction) -> bool;

/// Marked to the second uplink (the only way there) and SNATed to its fixed address.
fn via_wan2(proto: &'static str) -> impl Fn(&Case, &Prediction) -> bool {
    move |c, p| {
        c.proto == proto
            && p.arrival.as_ref().is_some_and(|(to, from)| {
                to[0].0.to_string() == WAN2[0] && from.to_string() == "100.64.0.7"
            })
    }
}

/// Decided by `rule`.
fn decided_by(rule: &'static str, proto: &'static str) -> impl Fn(&Case, &Prediction) -> bool {
    move |c, p| c.proto == proto && p.rule == rule
}

/// The generator must reach each of the firewall features this config was extended with
/// (or the test proves less than it claims): how many cases each one decides.
fn coverage(cases: &[Case], predictions: &[Prediction]) {
    assert!(
        predictions.iter().all(|p| p.rule != "ssh-2222-ended"),
        "a rule that ended in 2023 decided a case"
    );
    let checks: [(&str, Box<CaseCheck>); 10] = [
        (
            "a rule of family ipv6",
            Box::new(decided_by("http-v6-from-wan", "tcp")),
        ),
        (
            "a source under a non-contiguous mask",
            Box::new(decided_by("http-from-hosts-10-11", "tcp")),
        ),
        (
            "time rule around now",
            Box::new(decided_by("tcp-9000-now", "tcp")),
        ),
        (
            "tcp marked to the second uplink, SNATed",
            Box::new(via_wan2("tcp")),
        ),
        (
            "udp marked to the second uplink, SNATed",
            Box::new(via_wan2("udp")),
        ),
        (
            "IPv6 suffix pinhole",
            Box::new(decided_by("pinhole-lan-host-2", "tcp")),
        ),
        (
            "tcp+udp rule, tcp",
            Box::new(decided_by("low-sports-to-7000", "tcp")),
        ),
        (
            "tcp+udp rule, udp",
            Box::new(decided_by("low-sports-to-7000", "udp")),
        ),
        (
            "source port outside the rule's",
            Box::new(|c: &Case, p: &Prediction| {
                c.dport == 7000
                    && c.sender == "wan"
                    && ROUTER_ADDRS.contains(&c.dst)
                    && first(c) > 20149
                    && p.verdict == "drop"
            }),
        ),
        (
            "port-forward range from its one source",
            Box::new(|_: &Case, p: &Prediction| {
                p.dnat.as_deref() == Some("port-forward range-from-one-host")
            }),
        ),
    ];
    for (what, check) in checks {
        let n = cases
            .iter()
            .filter(|c| check(c, &predictions[c.id]))
            .count();
        eprintln!("explain differential: {n} cases: {what}");
        assert!(n > 0, "no generated case covers: {what}");
    }
}

/// True when the prober's observation is what was predicted. A packet routing refuses is
/// answered with an ICMP error the kernel sends best effort (it skips one now and then
/// under load even with every rate limit off), so for those silence also agrees; the test
/// checks that most of them were answered.
pub(super) fn agrees(p: &Prediction, outcome: &str, answer: &str) -> bool {
    if p.by_routing && p.verdict == "reject" && outcome == "drop" {
        return true;
    }
    if outcome != p.verdict {
        return false;
    }
    let Some((to, from)) = &p.arrival else {
        return true;
    };
    let parts: Vec<&str> = answer.split_whitespace().collect();
    let [_, addr, port, peer] = parts.as_slice() else {
        return false;
    };
    let (Ok(addr), Ok(port), Ok(peer)) = (
        addr.parse::<IpAddr>(),
        port.parse::<u16>(),
        peer.parse::<IpAddr>(),
    ) else {
        return false;
    };
    to.contains(&(addr, port)) && peer == *from
}

/// The receivers, ended when the test ends, passed or not (a receiver left running would
/// hold the test's output open).
pub(super) struct Receivers(pub(super) Vec<Child>);

impl Drop for Receivers {
    fn drop(&mut self) {
        for r in self.0.iter_mut() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}

/// Starts a receiver in `host` on every port of the pools at each of `addrs`.
pub(super) fn receive(t: &Topology, host: &Host, addrs: &[&str]) -> Child {
    let script = t.script("explain-receiver.py", RECEIVER);
    let mut specs = Vec::new();
    for a in addrs {
        let a = if a.contains(':') {
            format!("[{a}]")
        } else {
            a.to_string()
        };
        let a = a.trim_matches(|c| c == '[' || c == ']').to_string();
        specs.extend(TCP_PORTS.iter().map(|p| format!("tcp:{a}:{p}")));
        specs.extend(UDP_PORTS.iter().map(|p| format!("udp:{a}:{p}")));
    }
    let mut child = host
        .command("python3")
        .arg(&script)
        .arg(host.role())
        .args(&specs)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn receiver");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "receiver in {}", host.role());
    child
}

/// Sends `cases` from `host` with ports `sport(case)`; outcome and answer by case id.
pub(super) fn probe(
    t: &Topology,
    host: &Host,
    cases: &[&Case],
    sport: impl Fn(&Case) -> u16,
    timeout: f64,
) -> BTreeMap<usize, (String, String)> {
    let script = t.script("explain-prober.py", PROBER);
    let input: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            serde_json::json!({"id": c.id, "proto": c.proto, "src": c.src, "sport": sport(c),
                               "dst": c.dst, "dport": c.dport})
        })
        .collect();
    let mut child = host
        .command("python3")
        .args([&script, &timeout.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn prober");
    let body = serde_json::to_vec(&input).unwrap();
    child.stdin.take().unwrap().write_all(&body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "prober in {} failed", host.role());
    let answers: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    answers
        .iter()
        .map(|a| {
            let field = |k: &str| a[k].as_str().unwrap_or("").to_string();
            (
                a["id"].as_u64().unwrap() as usize,
                (field("outcome"), field("answer")),
            )
        })
        .collect()
}

/// The topology of `lan_wan` with a third lan address, routes from the wan host to the
/// VIP and to the lan's IPv6 network, a second uplink (`wan2`, the router's end with the
/// SNAT address too, so the answers to it arrive), and ICMP errors never rate-limited (a
/// reject must answer every time).
pub(super) fn topology() -> Topology {
    let mut t = lan_wan();
    t.add_host(
        "wan2",
        Link {
            router_if: "veth-wan2",
            router_addrs: &["100.64.0.1/24", "100.64.0.7/24"],
            host_if: "eth0",
            host_addrs: &["100.64.0.2/24", "198.51.100.20/32"],
            host_routes: &[],
        },
    );
    // The answers from the second uplink's host have a source only the marked route
    // reaches: reverse-path filtering (strict or loose) would drop them.
    t.router()
        .sh("sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.veth-wan2.rp_filter=0");
    let (lan, wan) = (t.host("lan"), t.host("wan"));
    lan.sh("ip addr add 10.0.0.11/24 dev eth0");
    wan.sh("ip route add 198.51.100.0/24 via 192.0.2.1");
    wan.sh("ip route add 203.0.113.0/24 via 192.0.2.1");
    wan.sh("ip -6 route add default via 2001:db8::1");
    for h in [t.router(), lan, wan, t.host("wan2")] {
        h.sh("sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0");
        // Nor limited by the host-wide ICMP budget other tests share.
        h.sh("sysctl -qw net.ipv4.icmp_ratemask=0 net.ipv6.icmp.ratemask=");
    }
    t
}

/// Resolves the neighbours before the first case, while no firewall is loaded (a slow first
/// neighbour discovery would look like a drop).
pub(super) fn warm_up(t: &Topology) {
    for (sender, iif, src, dst) in [
        ("lan", "veth-lan", "10.0.0.2", "10.0.0.1"),
        ("lan", "veth-lan", "fd00::2", "fd00::1"),
        ("wan", "veth-wan", "192.0.2.2", "192.0.2.1"),
        ("wan", "veth-wan", "2001:db8::2", "2001:db8::1"),
        // The second uplink's two ends, the SNAT address included.
        ("wan2", "veth-wan2", "100.64.0.2", "100.64.0.7"),
    ] {
        let proto = if src.contains(':') { "icmpv6" } else { "icmp" };
        let c = Case {
            id: 1,
            sender,
            iif,
            proto,
            src,
            dst,
            dport: 0,
        };
        let mut last = BTreeMap::new();
        let ok = poll_for(Duration::from_secs(10), || {
            last = probe(t, t.host(sender), &[&c], |_| 0, 1.0);
            (last[&1].0 == "accept").then_some(())
        });
        assert!(ok.is_some(), "warm-up {src} -> {dst}: {last:?}");
    }
}

/// The source ports of a case's first sending and of its re-sending.
pub(super) fn first(c: &Case) -> u16 {
    20000 + c.id as u16
}

pub(super) fn again(c: &Case) -> u16 {
    40000 + c.id as u16
}

/// Programs `desired` as the daemon would: policy, services, routes.
pub(super) fn program(desired: &edgenetd::config::DesiredState) {
    let watch = GenerationWatch::new();
    Driver::policy_sharing(&watch).sync_state(desired).unwrap();
    Driver::service_sharing(&watch).sync_state(desired).unwrap();
    let (rt, rx) = trigger();
    Driver::with(RouteController::new(rt), Some(rx))
        .sync_state(desired)
        .unwrap();
}

/// The cases whose deciding rule `explain` and the kernel's trace name differently.
pub(super) fn rule_disagreements(
    cases: &[Case],
    predictions: &[Prediction],
    traced: &BTreeMap<u16, Option<String>>,
    at_least: usize,
) -> Vec<String> {
    let mut compared = 0;
    let mut out = Vec::new();
    for c in cases {
        let (Some(expected), Some(kernel)) = (&predictions[c.id].filter, traced.get(&first(c)))
        else {
            continue;
        };
        compared += 1;
        if expected != kernel {
            out.push(format!(
                "{c:?}: explain says rule {expected:?}; the kernel's trace {kernel:?}"
            ));
        }
    }
    eprintln!("explain differential: deciding rule compared with nftrace for {compared} cases");
    assert!(compared >= at_least, "only {compared} cases traced");
    out
}

/// The cases whose fate differs from the prediction, after re-sending each disagreeing one.
pub(super) fn outcome_disagreements(
    t: &Topology,
    desired: &edgenetd::config::DesiredState,
    router: &str,
    cases: &[Case],
    predictions: &[Prediction],
    observed: &BTreeMap<usize, (String, String)>,
) -> Vec<String> {
    let routed: Vec<&Case> = cases
        .iter()
        .filter(|c| predictions[c.id].by_routing && predictions[c.id].verdict == "reject")
        .collect();
    let unanswered = routed
        .iter()
        .filter(|c| observed[&c.id].0 == "drop")
        .count();
    eprintln!(
        "explain differential: {unanswered} of {} ICMP errors for refused routes unanswered",
        routed.len()
    );
    assert!(
        unanswered * 2 <= routed.len(),
        "most refused routes must be answered"
    );
    let mut out = Vec::new();
    let retry = cases.iter().filter(|c| {
        let (o, a) = &observed[&c.id];
        !agrees(&predictions[c.id], o, a)
    });
    // One at a time: under load the kernel skips an ICMP error now and then (its ICMP
    // socket is busy), which must not pass for a drop. The re-sent packet has other ports,
    // so its prediction is made afresh.
    for c in retry {
        for (_, (o, a)) in probe(t, t.host(c.sender), &[c], again, 4.0) {
            let p = predict_with(desired, c, again(c), router);
            if !agrees(&p, &o, &a) {
                out.push(format!(
                    "{c:?}: explain says {} by {:?} arriving {:?}; the kernel: {o} {a:?}",
                    p.verdict, p.rule, p.arrival
                ));
            }
        }
    }
    out
}

/// A case written by hand: (sender, proto, source, destination, port, what it proves, what
/// explain must say of it, in the suite's own terms).
pub(super) type Directed<E> = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u16,
    &'static str,
    E,
);

/// The cases of a directed suite and explain's prediction for each, having checked that each
/// prediction is what its case was written to prove (`proves`): else the suite proves less
/// than its names claim, whatever the kernel does.
pub(super) fn predict_directed<E>(
    desired: &edgenetd::config::DesiredState,
    router: &str,
    suite: &[Directed<E>],
    proves: impl Fn(&E, &Prediction) -> bool,
) -> (Vec<Case>, Vec<Prediction>) {
    let mut cases: Vec<Case> = Vec::new();
    let plain: Vec<_> = suite.iter().map(|d| (d.0, d.1, d.2, d.3, d.4)).collect();
    directed(&mut cases, &plain);
    let predictions: Vec<Prediction> = cases
        .iter()
        .map(|c| predict_with(desired, c, first(c), router))
        .collect();
    let wrong: Vec<String> = suite
        .iter()
        .zip(&predictions)
        .filter(|(d, p)| !proves(&d.6, p))
        .map(|(d, p)| format!("{}: explain says {p:?}", d.5))
        .collect();
    assert!(
        wrong.is_empty(),
        "explain predicts otherwise:\n{}",
        wrong.join("\n")
    );
    (cases, predictions)
}

/// Sends every case as a real packet while the kernel traces them, and fails `label`'s test
/// if the trace names another deciding rule than explain (for at least `traced_at_least`
/// cases compared) or a packet meets another fate than predicted. The receivers are ended
/// before the verdict.
#[allow(clippy::too_many_arguments)]
pub(super) fn against_kernel(
    label: &str,
    t: &Topology,
    desired: &edgenetd::config::DesiredState,
    router: &str,
    receivers: Receivers,
    cases: &[Case],
    predictions: &[Prediction],
    traced_at_least: usize,
) {
    let tracer = Tracer::start(t);
    let mut observed = BTreeMap::new();
    for sender in ["lan", "wan"] {
        let mine: Vec<&Case> = cases.iter().filter(|c| c.sender == sender).collect();
        observed.extend(probe(t, t.host(sender), &mine, first, 1.5));
    }
    let rules = rule_disagreements(cases, predictions, &tracer.decisions(), traced_at_least);
    assert!(
        rules.is_empty(),
        "{label}: explain and the kernel's trace name different rules:\n{}",
        rules.join("\n")
    );
    let agreed = cases
        .iter()
        .filter(|c| {
            let (o, a) = &observed[&c.id];
            agrees(&predictions[c.id], o, a)
        })
        .count();
    eprintln!(
        "explain differential ({label}): {agreed} of {} cases agreed at once",
        cases.len()
    );
    let fates = outcome_disagreements(t, desired, router, cases, predictions, &observed);
    drop(receivers);
    assert!(
        fates.is_empty(),
        "{label}: explain and the kernel disagree on {} of {} cases:\n{}",
        fates.len(),
        cases.len(),
        fates.join("\n")
    );
}

netns_test! {
    fn explain_agrees_with_the_kernel_on_generated_packets() {
        let seed = std::env::var("EXPLAIN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x0e0e_2026_u64);
        eprintln!("explain differential: seed {seed} (EXPLAIN_SEED={seed} replays it)");
        let t = topology();
        warm_up(&t);
        let config = with_time_rules(CONFIG);
        let desired = load(&config);
        program(&desired);
        let receivers = Receivers(vec![
            receive(&t, t.router(), &ROUTER_ADDRS),
            receive(&t, t.host("lan"), &LAN),
            receive(&t, t.host("wan"), &WAN),
            receive(&t, t.host("wan2"), &WAN2),
        ]);
        let cases = generate(seed);
        let predictions: Vec<Prediction> =
            cases.iter().map(|c| predict(&desired, c, first(c))).collect();
        let mut verdicts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &predictions {
            *verdicts.entry(p.verdict).or_default() += 1;
        }
        eprintln!("explain differential: {} cases, verdicts {verdicts:?}", cases.len());
        // The generator must reach every outcome, or the test proves less than it claims.
        assert!(verdicts.len() == 3, "verdicts {verdicts:?}");
        coverage(&cases, &predictions);

        let label = format!("seed {seed}");
        against_kernel(&label, &t, &desired, ROUTER, receivers, &cases, &predictions, CASES / 3);
    }
}
