//! Support for the policy kernel tests: the lan/wan topology around the router, the policy
//! table read back, and the home-router policy most tests start from.

use std::path::PathBuf;

use super::bin::edgenetd;
use super::scratch::ScratchDir;
use super::shell::{sh, sh_status};
use super::topology::{Link, Topology};

/// A lan host (10.0.0.2, 10.0.0.10 and fd00::2 on `eth0`; router 10.0.0.1 and fd00::1 on
/// `veth-lan`) and a wan host (192.0.2.2, 192.0.2.3 and 2001:db8::2 on `eth0`; router
/// 192.0.2.1 and 2001:db8::1 on `veth-wan`); forwarding on.
pub fn lan_wan() -> Topology {
    let mut t = Topology::new();
    t.add_host(
        "lan",
        Link {
            router_if: "veth-lan",
            router_addrs: &["10.0.0.1/24", "fd00::1/64"],
            host_if: "eth0",
            host_addrs: &["10.0.0.2/24", "10.0.0.10/24", "fd00::2/64"],
            host_routes: &["default via 10.0.0.1", "default via fd00::1"],
        },
    );
    // The wan host may route to the lan (to prove forwarding from wan is filtered), but
    // replies from lan hosts only come back when the router masquerades.
    t.add_host(
        "wan",
        Link {
            router_if: "veth-wan",
            router_addrs: &["192.0.2.1/24", "2001:db8::1/64"],
            host_if: "eth0",
            host_addrs: &["192.0.2.2/24", "192.0.2.3/24", "2001:db8::2/64"],
            host_routes: &["10.0.0.0/24 via 192.0.2.1"],
        },
    );
    t.forwarding();
    t
}

/// `nft -j list table inet edgenetd-policy` as JSON objects (rules with handles etc.).
pub fn policy_json() -> serde_json::Value {
    serde_json::from_str(&sh("nft -j list table inet edgenetd-policy")).unwrap()
}

/// Handles of every rule in the policy table, in order.
pub fn rule_handles() -> Vec<u64> {
    policy_json()["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o.get("rule"))
        .map(|r| r["handle"].as_u64().unwrap())
        .collect()
}

/// Zones only (`veth-lan`, `veth-wan`), everything dropped by default but output: each
/// packet test adds the rules it proves.
pub const ZONES_ONLY: &str = r#"
[policy]
input = "drop"
forward_default = "drop"
output = "accept"

[policy.zone.lan]
interfaces = ["veth-lan"]

[policy.zone.wan]
interfaces = ["veth-wan"]
"#;

/// A virtual address balanced to the lan host's port 80 (`10.96.0.10:80`).
pub const WEB_SERVICE: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
protocol = "tcp"
backends = ["10.0.0.10:80"]
"#;

/// The home-router policy most tests start from.
pub const HOME: &str = r#"
[policy]
input = "drop"
forward_default = "drop"
output = "accept"

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[policy.set.blocklist]
type = "ipv4"
elements = ["203.0.113.0/24"]

[[policy.rule]]
name = "drop-blocklist"
from = "@blocklist"
action = "drop"

[[policy.rule]]
name = "ssh-from-lan"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22, "8000-8100"]
action = "accept"

[[policy.rule]]
name = "dns-from-lan"
from = "lan"
to = "self"
protocol = "udp"
ports = [53]
action = "accept"

[[policy.rule]]
name = "ping-from-lan"
from = "lan"
to = "self"
protocol = "icmp"
icmp_types = ["echo-request"]
action = "accept"

[[policy.rule]]
name = "telnet-reject"
to = "self"
protocol = "tcp"
ports = [23]
action = "reject"

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.port_forward]]
name = "web"
from = "wan"
protocol = "tcp"
port = 8080
to = "10.0.0.10:80"
"#;

/// `edgenetd plan` of `dir`'s config: the policy table's nft part (its markers kept), written
/// to `dir/policy.nft`, which `nft -c -f` must accept. Returns the text and the file.
pub fn planned_policy_nft(dir: &ScratchDir) -> (String, PathBuf) {
    let run = edgenetd(&["plan", "--config", dir.config().to_str().unwrap()]);
    assert!(run.ok(), "plan failed: {}", run.stderr);
    let text: String = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("# nft begin: table inet edgenetd-policy"))
        .take_while(|l| !l.starts_with("# nft end:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let file = dir.join("policy.nft");
    std::fs::write(&file, &text).unwrap();
    let (ok, _, err) = sh_status(&format!("nft -c -f {}", file.display()));
    assert!(ok, "nft -c refused the plan: {err}\n{text}");
    (text, file)
}

/// The policy program `text` plans, with no router address known (pure: no kernel).
pub fn program_of(text: &str) -> edgenetd::controller::policy::program::Program {
    let desired =
        edgenetd::config::load_str(&[("edgenetd.toml", text)]).unwrap_or_else(|e| panic!("{e}"));
    edgenetd::controller::policy::program::build_with(
        desired.policy.as_ref().expect("a [policy]"),
        "edgenetd-policy",
        &edgenetd::controller::policy::addresses::RouterAddresses::default(),
    )
}

/// The rules of `chain` in `p` whose comment starts with `label`, as nft text without their
/// comments.
pub fn rendered_rules(
    p: &edgenetd::controller::policy::program::Program,
    chain: &str,
    label: &str,
) -> Vec<String> {
    p.table
        .rules
        .iter()
        .filter(|r| r.chain == chain)
        .filter(|r| r.comment.as_deref().unwrap_or("").starts_with(label))
        .map(|r| {
            let text = edgenetd::dataplane::nft::text::render_rule(p.table.family, r);
            text[..text.find(" comment").unwrap_or(text.len())].to_string()
        })
        .collect()
}

/// The rendered problems of loading `text` as `main.toml` (which must be rejected).
pub fn config_errors(text: &str) -> String {
    edgenetd::config::load_str(&[("main.toml", text)])
        .expect_err("config must be rejected")
        .rendered
}

/// Every one of `expected` is in `out` (each problem's text is searched, not its order).
pub fn assert_all(out: &str, expected: &[&str]) {
    for e in expected {
        assert!(out.contains(e), "missing {e:?} in:\n{out}");
    }
}
