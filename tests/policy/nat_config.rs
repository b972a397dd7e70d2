//! The fw4 NAT keys of issue 23 (item 5): zone `masq_src` / `masq_dest` /
//! `masq_allow_invalid` and `[[policy.nat]]`, read into the model, every mistake reported
//! at its file:line:col, and the plan loadable by `nft -c`.

use edgenetd::config::load_str;
use edgenetd::config::policy::*;

use crate::common;
use common::policy::planned_policy_nft;
use common::scratch::ScratchDir;

/// A zone pair, a set, and the fw4 NAT keys of 02_masq and 03_masq_src_dest_restrictions
/// (fw4's `config nat` as `[[policy.nat]]`: `src` -> `to`, `src_ip` -> `from`, `dest_ip` ->
/// `to_addresses`, `src_port` -> `source_ports`, `dest_port` -> `ports`, `target` ->
/// `action`, `snat_ip` -> `snat_address`).
const NAT: &str = r#"
[policy]
input = "drop"
forward_default = "drop"

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24", "fd00::/64"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true
masquerade6 = true
masq_src = ["10.0.0.0/24", "!10.0.0.10", "fd00::/64", "!fd00::10"]
masq_dest = ["!192.0.2.3"]
masq_allow_invalid = true

[policy.zone.wan2]
interfaces = ["veth-wan2"]
snat = "203.0.113.7"
masq_src = ["10.0.0.0/25"]

[policy.set.guests]
type = "ipv4"
elements = ["10.0.0.128/25"]

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.nat]]
name = "partner-no-nat"
to = "wan"
to_addresses = ["198.51.100.0/24"]
action = "accept"

[[policy.nat]]
name = "server-snat"
from = ["10.0.0.10"]
to = "wan"
protocol = "tcp"
source_ports = [80]
ports = ["1000-2000"]
action = "snat"
snat_address = "192.0.2.9"
snat_port = 40000

[[policy.nat]]
name = "guests-masq"
from = "@guests"
action = "masquerade"
"#;

#[test]
fn fw4_02_masq_and_03_masq_src_dest_restrictions_keys_are_read() {
    let p = load_str(&[("edgenetd.toml", NAT)]).unwrap().policy.unwrap();
    let wan = &p.zones["wan"];
    let show = |l: &[MasqAddress]| -> Vec<String> {
        l.iter()
            .map(|a| format!("{}{}", if a.negate { "!" } else { "" }, a.net))
            .collect()
    };
    assert_eq!(
        show(&wan.masq_src),
        ["10.0.0.0/24", "!10.0.0.10/32", "fd00::/64", "!fd00::10/128"]
    );
    assert_eq!(show(&wan.masq_dest), ["!192.0.2.3/32"]);
    assert!(wan.masq_allow_invalid);
    assert!(!p.zones["lan"].masq_allow_invalid && p.zones["lan"].masq_src.is_empty());
    let names: Vec<&str> = p.nat.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["partner-no-nat", "server-snat", "guests-masq"]);
    assert_eq!(p.nat[0].action, NatAction::Accept);
    assert_eq!(p.nat[0].matches.to, Destination::Zone("wan".into()));
    assert_eq!(
        p.nat[1].action,
        NatAction::Snat {
            address: "192.0.2.9".parse().unwrap(),
            port: Some(40000)
        }
    );
    let m = &p.nat[1].matches;
    assert_eq!(
        (m.protocol, m.ports.as_slice(), m.source_ports.as_slice()),
        (Protocol::Tcp, &[(1000, 2000)][..], &[(80, 80)][..])
    );
    assert_eq!(p.nat[2].action, NatAction::Masquerade);
    assert_eq!(p.nat[2].matches.from, Source::Set("guests".into()));
    assert_eq!(p.nat[2].matches.to, Destination::Any);
}

#[test]
fn fw4_02_masq_nat_entries_plan_before_the_zone_masquerade_and_nft_loads_them() {
    let dir = ScratchDir::with_files("fw4-nat-plan", &[("edgenetd.toml", NAT)]);
    let (text, _) = planned_policy_nft(&dir);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
    };
    // fw4's srcnat order: the nat entries in config order, then the zone's masquerade.
    let accept = at("ip daddr { 198.51.100.0/24 } counter accept");
    let snat = at("snat ip to 192.0.2.9:40000");
    let masq = at("ip saddr @guests counter masquerade");
    let zone = at(
        "ip saddr { 10.0.0.0/24 } ip saddr != 10.0.0.10 ip daddr != 192.0.2.3 counter masquerade",
    );
    assert!(accept < snat && snat < masq && masq < zone, "{text}");
    // masq_src's IPv6 entries narrow the IPv6 masquerade only.
    at("ip6 saddr { fd00::/64 } ip6 saddr != fd00::10 counter masquerade");
    // ...and a zone's `snat` the same way.
    at("oifname \"veth-wan2\" ip saddr { 10.0.0.0/25 } counter snat ip to 203.0.113.7");
    // masq_allow_invalid: invalid forwarded packets leaving through the wan go back to the
    // rules; the rest are dropped as before.
    at("ct state invalid jump forward_invalid");
    at("oifname \"veth-wan\" return");
}

/// `file:line:col` of the first `needle` in `text` (as `main.toml`); the last one when it
/// starts with `LAST `.
fn place(text: &str, needle: &str) -> String {
    let at = match needle.strip_prefix("LAST ") {
        Some(n) => text.rfind(n),
        None => text.find(needle),
    }
    .unwrap_or_else(|| panic!("no {needle:?} in the test config"));
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    format!("main.toml:{line}:{col}")
}

#[test]
fn fw4_nat_key_errors_are_reported_at_their_place() {
    let text = r#"[policy]
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]
masq_src = ["10.0.0.0/24"]
masq_allow_invalid = true

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true
masq_src = ["10.0.0.0/33", "!"]
masq_dest = []

[[policy.rule]]
name = "taken"
action = "accept"

[[policy.nat]]
name = "no-address"
to = "wan"
action = "snat"

[[policy.nat]]
name = "dnat"
action = "dnat"

[[policy.nat]]
name = "masq-port"
action = "masquerade"
snat_port = 4000

[[policy.nat]]
name = "port-range"
action = "snat"
snat_address = "192.0.2.9"
snat_port = "4000-5000"

[[policy.nat]]
name = "to-self"
to = "self"
action = "accept"

[[policy.nat]]
name = "from-self"
from = "self"
action = "accept"

[[policy.nat]]
name = "wrong-family"
from = ["10.0.0.0/24"]
action = "snat"
snat_address = "2001:db8::9"

[[policy.nat]]
name = "fw4-spelling"
target = "SNAT"
action = "accept"

[[policy.nat]]
name = "taken"
action = "accept"
"#;
    let out = load_str(&[("main.toml", text)])
        .expect_err("config must be rejected")
        .rendered;
    for (needle, message) in [
        (
            "[\"10.0.0.0/24\"]\nmasq_allow",
            "error: `masq_src` narrows the zone's masquerade, but the zone has none",
        ),
        (
            "true\n\n[policy.zone.wan]",
            "error: `masq_allow_invalid` keeps invalid packets leaving through a masquerading zone, but the zone has no masquerade",
        ),
        ("\"10.0.0.0/33\"", "error: invalid prefix `10.0.0.0/33`"),
        ("\"!\"", "error: invalid prefix ``"),
        ("[]\n", "error: empty `masq_dest`"),
        (
            "\"snat\"\n\n[[policy.nat]]\nname = \"dnat\"",
            "error: nat entry `no-address`: `action = \"snat\"` needs `snat_address`",
        ),
        (
            "\"dnat\"\n\n",
            "error: invalid nat action `dnat`: expected \"snat\", \"masquerade\" or \"accept\"",
        ),
        (
            "4000\n",
            "error: `snat_port` is only for `action = \"snat\"`",
        ),
        ("\"4000-5000\"", "error: `snat_port` is one port here"),
        (
            "\"self\"\naction",
            "error: a nat entry cannot be `to = \"self\"`",
        ),
        (
            "\"self\"\naction = \"accept\"\n\n[[policy.nat]]\nname = \"wrong",
            "error: a nat entry cannot be `from = \"self\"`",
        ),
        (
            "\"2001:db8::9\"",
            "error: `snat_address = \"2001:db8::9\"` is IPv6, but the entry only matches IPv4 traffic",
        ),
        ("target", "error: unknown field `target`"),
        ("LAST \"taken\"", "error: duplicate name `taken`"),
    ] {
        let e = format!("{}: {message}", place(text, needle));
        assert!(out.contains(&e), "missing {e:?} in:\n{out}");
    }
}

#[test]
fn the_documented_nat_examples_validate() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md")).unwrap();
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .filter(|b| {
            b.contains("[[policy.nat]]") || b.contains("masq_src") || b.contains("to = \"self:")
        })
        .collect();
    assert_eq!(
        blocks.len(),
        3,
        "docs/policy.md has its nat and redirect examples"
    );
    for b in blocks {
        // The wan zone of the masq_src example, or zones for the entries to name.
        let zones = if b.contains("[policy.zone.wan]") {
            ""
        } else {
            "[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n[policy.zone.wan]\ninterfaces = [\"eth0\"]\nmasquerade = true\n"
        };
        let text = format!("[policy]\n{zones}{b}");
        load_str(&[("docs-example.toml", &text)]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }
}

/// fw4's 07_redirect cases as port forwards: the lan's DNS to whatever server answered by
/// the router (`dest_port` without `dest_ip`), every UDP port to one address (`src_dip`,
/// no `src_dport`) to the router's proxy, and a forward whose reflection comes from the
/// router's wan address (`reflection_src = "external"`).
const REDIRECTS: &str = r#"
[policy]
[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24", "fd00::/64"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[[policy.port_forward]]
name = "transparent-dns"
from = "lan"
protocol = ["tcp", "udp"]
port = 53
to = "self:53"

[[policy.port_forward]]
name = "to-the-proxy"
from = "lan"
protocol = "udp"
to = "self:8053"
to_addresses = ["192.0.2.3"]

[[policy.port_forward]]
name = "web"
from = "wan"
port = 8080
to = "10.0.0.10:80"
reflection_src = "external"
to_addresses = ["192.0.2.9"]
"#;

#[test]
fn fw4_07_redirect_keys_are_read() {
    let p = load_str(&[("edgenetd.toml", REDIRECTS)])
        .unwrap()
        .policy
        .unwrap();
    assert_eq!(p.redirects.len(), 2);
    let dns = &p.redirects[0];
    assert_eq!(
        (
            dns.name.as_str(),
            dns.from.as_str(),
            dns.protocol,
            dns.ports,
            dns.to_port
        ),
        (
            "transparent-dns",
            "lan",
            Protocol::TcpUdp,
            Some((53, 53)),
            Some(53)
        )
    );
    assert!(dns.to_addresses.is_empty());
    let proxy = &p.redirects[1];
    assert_eq!((proxy.ports, proxy.to_port), (None, Some(8053)));
    assert_eq!(
        proxy.to_addresses,
        [AddressMatch::Prefix("192.0.2.3/32".parse().unwrap())]
    );
    assert_eq!(p.port_forwards.len(), 1);
    assert!(p.port_forwards[0].reflection_external);
    assert_eq!(
        p.port_forwards[0].to_addresses,
        [AddressMatch::Prefix("192.0.2.9/32".parse().unwrap())]
    );
}

#[test]
fn fw4_07_redirect_plans_a_redirect_and_its_input_accept_and_nft_loads_them() {
    let dir = ScratchDir::with_files("fw4-redirect-plan", &[("edgenetd.toml", REDIRECTS)]);
    let (text, _) = planned_policy_nft(&dir);
    for needle in [
        "iifname \"veth-lan\" ip saddr { 10.0.0.0/24 } udp dport 53 counter ct mark set ct mark | 0x80000000 redirect to :53",
        "iifname \"veth-lan\" ip6 saddr { fd00::/64 } tcp dport 53 counter ct mark set ct mark | 0x80000000 redirect to :53",
        "iifname \"veth-lan\" ip saddr { 10.0.0.0/24 } ip daddr 192.0.2.3 meta l4proto udp counter ct mark set ct mark | 0x80000000 redirect to :8053",
        "iifname \"veth-lan\" ip saddr { 10.0.0.0/24 } ct status dnat ct mark & 0x80000000 != 0 udp dport 8053 counter accept",
        // A forward's to_addresses (fw4's src_dip) replaces the router's addresses.
        "iifname \"veth-wan\" ip daddr 192.0.2.9 tcp dport 8080 counter ct mark set ct mark | 0x80000000 dnat ip to 10.0.0.10:80",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

#[test]
fn fw4_07_redirect_key_errors_are_reported_at_their_place() {
    let text = r#"[policy]
[policy.zone.lan]
interfaces = ["veth-lan"]

[[policy.port_forward]]
name = "bad-port"
from = "lan"
port = 53
to = "self:0"

[[policy.port_forward]]
name = "no-port"
from = "lan"
to = "self"

[[policy.port_forward]]
name = "hairpin"
from = "lan"
port = 53
to = "self"
reflection = false

[[policy.port_forward]]
name = "host-without-port"
from = "lan"
to = "10.0.0.10"

[[policy.port_forward]]
name = "host-src-dip"
from = "lan"
port = 80
to = "10.0.0.10"
to_addresses = ["2001:db8::1"]

[[policy.port_forward]]
name = "src-word"
from = "lan"
port = 81
to = "10.0.0.10"
reflection_src = "outside"

[[policy.port_forward]]
name = "src-without-reflection"
from = "lan"
port = 82
to = "10.0.0.10"
reflection = false
reflection_src = "external"
"#;
    let out = load_str(&[("main.toml", text)])
        .expect_err("config must be rejected")
        .rendered;
    for (needle, message) in [
        (
            "\"self:0\"",
            "error: invalid target `self:0`: expected \"self\" or \"self:PORT\"",
        ),
        (
            "\"self\"\n\n[[policy.port_forward]]\nname = \"hairpin\"",
            "error: a redirect of every port needs the router's port",
        ),
        (
            "false\n\n[[policy.port_forward]]\nname = \"host-without-port\"",
            "error: `reflection` is for a port forward to a host",
        ),
        (
            "\"10.0.0.10\"\n\n[[policy.port_forward]]\nname = \"host-src-dip\"",
            "error: a port forward to a host needs `port`",
        ),
        (
            "[\"2001:db8::1\"]",
            "error: no entry of `to_addresses` is IPv4 like the target `10.0.0.10:80`",
        ),
        (
            "\"outside\"",
            "error: invalid reflection_src `outside`: expected \"internal\"",
        ),
        (
            "LAST \"external\"",
            "error: `reflection_src = \"external\"` chooses the source of reflected traffic, but `reflection = false` turns reflection off",
        ),
    ] {
        let e = format!("{}: {message}", place(text, needle));
        assert!(out.contains(&e), "missing {e:?} in:\n{out}");
    }
}
