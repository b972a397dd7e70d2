//! The NAT bugs of issue 11, pinned with real packets (a lan host, the router, a wan host on
//! veth pairs; see `common::policy::lan_wan`): a port forward no longer shadows the router's
//! own service, `masquerade` is IPv4 only, and the forward chain admits only the DNAT
//! edgenetd did unless `forward_foreign_dnat` says otherwise.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::policy::{HOME, lan_wan};
use common::shell::sh;
use common::topology::{Host, Topology, failed};
use common::wait::{poll_for, wait_until};

/// HOME with the router's SSH published on the wan to the lan host's 10.0.0.10:22 (HOME
/// already lets the lan reach the router's own SSH).
fn ssh_forward(reflection: Option<bool>) -> String {
    let reflection = reflection.map_or(String::new(), |r| format!("reflection = {r}\n"));
    format!(
        "{HOME}\n[[policy.port_forward]]\nname = \"ssh\"\nfrom = \"wan\"\nport = 22\nto = \"10.0.0.10:22\"\n{reflection}"
    )
}

netns_test! {
    fn a_port_forward_shadows_the_routers_own_service() {
        let t = lan_wan();
        let mut d = Driver::policy();
        d.sync(&ssh_forward(None)).unwrap();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve_named(t.router(), "router", 22);
        t.serve_named(lan, "inner", 22);
        // lan -> the router's lan address: the router's own service.
        assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "router");
        // lan -> the router's wan address: reflected to the forwarded host.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 22), "inner");
        // wan -> the router's wan address: the forwarded host.
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 22), "inner");
        // The router's wan address changes (DHCP, PPPoE): the new one reflects too, once the
        // address monitor has made the controller read the addresses again.
        t.router().sh("ip addr add 192.0.2.9/24 dev veth-wan");
        wait_until("reflection to the new wan address", Duration::from_secs(10), || {
            d.sync(&ssh_forward(None)).unwrap();
            t.connect(lan, "tcp", "192.0.2.9", 22) == "inner"
        });
        assert_eq!(t.connect(lan, "tcp", "10.0.0.1", 22), "router");
        // `reflection = false`: no hairpin; the router's wan address is the router's own
        // from the lan, and the wan still reaches the forwarded host.
        d.sync(&ssh_forward(Some(false))).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 22), "router");
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 22), "inner");
    }
}

/// HOME with IPv6 lan networks (so the lan zone holds IPv6 traffic) and `extra` in the wan
/// zone.
fn dual_stack(extra: &str) -> String {
    HOME.replace(
        r#"networks = ["10.0.0.0/24"]"#,
        r#"networks = ["10.0.0.0/24", "fd00::/64"]"#,
    )
    .replace(
        "masquerade = true\n",
        &format!("masquerade = true\n{extra}"),
    )
}

/// The first answer of a TCP exchange from `from` that is not a failure, retried for up to
/// 10 s (the first IPv6 packets of a fresh topology wait for neighbour discovery, which a
/// loaded machine can stretch past the client's timeout); the last failure otherwise.
fn settled_answer(t: &Topology, from: &Host, to: &str, port: u16) -> String {
    let mut last = String::new();
    poll_for(Duration::from_secs(10), || {
        last = t.connect(from, "tcp", to, port);
        (!failed(&last)).then(|| last.clone())
    })
    .unwrap_or(last)
}

netns_test! {
    fn masquerade_true_nats_ipv6_too() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // The wan host can answer the lan's own IPv6 addresses, so a connection that is not
        // masqueraded still completes and shows its real source.
        wan.sh("ip -6 route add fd00::/64 via 2001:db8::1");
        t.serve_v6(wan, "tcp", 80);
        let mut d = Driver::policy();
        d.sync(&dual_stack("")).unwrap();
        // `masquerade = true` is IPv4 only: IPv6 leaves with the lan host's own address.
        assert_eq!(settled_answer(&t, lan, "2001:db8::2", 80), "fd00::2");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "::ffff:192.0.2.1");
        // `masquerade6 = true` NATs IPv6 to the router's wan address.
        d.sync(&dual_stack("masquerade6 = true\n")).unwrap();
        assert_eq!(t.connect(lan, "tcp", "2001:db8::2", 80), "2001:db8::1");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "::ffff:192.0.2.1");
        // And IPv6 alone: IPv4 leaves unmasqueraded (the wan host routes 10.0.0.0/24 back).
        d.sync(&dual_stack("masquerade6 = true\n").replace("masquerade = true\n", ""))
            .unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "::ffff:10.0.0.2");
        assert_eq!(t.connect(lan, "tcp", "2001:db8::2", 80), "2001:db8::1");
    }
}

/// Another program's DNAT (a container runtime's, miniupnpd's): wan -> router:9000 ->
/// 10.0.0.10:80, in a table of its own.
const FOREIGN_DNAT: &str = "table ip foreign {
    chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        iifname \"veth-wan\" tcp dport 9000 dnat to 10.0.0.10:80
    }
}";

netns_test! {
    fn ct_status_dnat_accept_admits_any_tables_dnat() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(lan, "tcp", 80);
        let dir = common::scratch::ScratchDir::with_files("foreign-dnat", &[("f.nft", FOREIGN_DNAT)]);
        sh(&format!("nft -f {}", dir.join("f.nft").display()));
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        // edgenetd's own port forward passes the forward chain (forward default drop)...
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 8080), "192.0.2.2");
        // ...another table's DNAT does not.
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 9000)));
        let forward = sh("nft list chain inet edgenetd-policy forward");
        // (nft lists the mark test as a prefix: `ct mark != 0x00000000/1`.)
        assert!(forward.contains("ct status dnat ct mark"), "{forward}");
        // `forward_foreign_dnat = true` admits it too.
        let foreign = HOME.replace("output = \"accept\"\n", "output = \"accept\"\nforward_foreign_dnat = true\n");
        d.sync(&foreign).unwrap();
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 9000), "192.0.2.2");
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 8080), "192.0.2.2");
    }
}
