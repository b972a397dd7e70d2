//! `edgenetd explain` of fw4's NAT keys (issue 23, item 5): `masq_src` / `masq_dest` narrow
//! the zone's masquerade, and `[[policy.nat]]` entries decide before it in config order.

use crate::common;

use common::bin::edgenetd;
use common::scratch::ScratchDir;
use serde_json::Value as Json;

const CONFIG: &str = r#"
[policy]
forward_default = "drop"

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true
masq_src = ["10.0.0.0/24", "!10.0.0.10"]
masq_dest = ["!192.0.2.4"]

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.nat]]
name = "partner-no-nat"
to = "wan"
to_addresses = ["192.0.2.3"]
action = "accept"

[[policy.nat]]
name = "server-snat"
from = ["10.0.0.20"]
to = "wan"
action = "snat"
snat_address = "192.0.2.9"
snat_port = 40000
"#;

/// `edgenetd explain --json` of a TCP packet from the lan host `from` to `to`:80.
fn explain(from: &str, to: &str) -> Json {
    explain_with(CONFIG, from, to, "tcp", 80)
}

/// `edgenetd explain --json` under `config` of a `proto` packet from the lan host `from`
/// to `to`:`dport`.
fn explain_with(config: &str, from: &str, to: &str, proto: &str, dport: u16) -> Json {
    let dport = dport.to_string();
    let dir = ScratchDir::with_files("explain-nat", &[("edgenetd.toml", config)]);
    let cfg = dir.config();
    let args = [
        "explain",
        "--json",
        "--config",
        cfg.to_str().unwrap(),
        "--addresses",
        "veth-lan=10.0.0.1/24,veth-wan=192.0.2.1/24",
        "--in",
        "veth-lan",
        "--from",
        from,
        "--to",
        to,
        "--proto",
        proto,
        "--dport",
        &dport,
    ];
    let run = edgenetd(&args);
    assert_eq!(run.code, 0, "edgenetd {args:?}: {}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// (new source, masquerade?, the group that translated) of `j`'s SNAT, `None` without one.
fn snat(j: &Json) -> Option<(String, bool, String)> {
    let n = &j["snat"];
    (!n.is_null()).then(|| {
        (
            n["to"].as_str().unwrap_or("?").to_string(),
            n["masquerade"].as_bool().unwrap(),
            n["rule"].as_str().unwrap().to_string(),
        )
    })
}

#[test]
fn fw4_03_masq_src_dest_restrictions_and_02_masq_nat_entries_are_explained() {
    let j = explain("10.0.0.2", "192.0.2.2");
    assert_eq!(j["verdict"], "accept", "{j}");
    assert_eq!(
        snat(&j),
        Some(("192.0.2.1".into(), true, "masquerade wan".into())),
        "{j}"
    );
    // masq_src's `!10.0.0.10` and masq_dest's `!192.0.2.4`: forwarded, not translated.
    for (from, to) in [("10.0.0.10", "192.0.2.2"), ("10.0.0.2", "192.0.2.4")] {
        let j = explain(from, to);
        assert_eq!(
            (j["verdict"].as_str(), snat(&j)),
            (Some("accept"), None),
            "{j}"
        );
    }
    // target ACCEPT: exempt from the zone's masquerade.
    let j = explain("10.0.0.2", "192.0.2.3");
    assert_eq!(
        (j["verdict"].as_str(), snat(&j)),
        (Some("accept"), None),
        "{j}"
    );
    // target SNAT with snat_ip and snat_port, before the zone's masquerade.
    let j = explain("10.0.0.20", "192.0.2.2");
    assert_eq!(
        snat(&j),
        Some(("192.0.2.9:40000".into(), false, "nat server-snat".into())),
        "{j}"
    );
}

/// fw4's 07_redirect: a lan DNS query to a wan server is the router's (`redirect to :53`
/// to the incoming interface's address), admitted by the redirect's own input rule; the
/// wan's own queries are not redirected.
#[test]
fn fw4_07_redirect_to_the_router_is_explained_as_a_dnat_to_its_lan_address() {
    let config = format!(
        "{CONFIG}\n[[policy.port_forward]]\nname = \"transparent-dns\"\nfrom = \"lan\"\nprotocol = \"udp\"\nport = 53\nto = \"self:53\"\n"
    );
    let j = explain_with(&config, "10.0.0.2", "192.0.2.2", "udp", 53);
    assert_eq!(
        (
            j["verdict"].as_str(),
            j["chain"].as_str(),
            j["rule"].as_str()
        ),
        (
            Some("accept"),
            Some("input"),
            Some("redirect transparent-dns")
        ),
        "{j}"
    );
    assert_eq!(
        (j["dnat"]["to"].as_str(), j["dnat"]["rule"].as_str()),
        (Some("10.0.0.1:53"), Some("redirect transparent-dns")),
        "{j}"
    );
    // Another port is forwarded to the wan as before.
    let j = explain_with(&config, "10.0.0.2", "192.0.2.2", "udp", 5353);
    assert!(j["dnat"].is_null(), "{j}");
    assert_eq!(j["rule"], "forward lan->wan", "{j}");
}
