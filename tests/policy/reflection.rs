//! Port-forward reflection (hairpin) from the inner host's zone only, as fw4 reflects from a
//! redirect's destination zone, and `reflection_zones` to widen it (issue 23): real packets
//! from a lan host, a guest host and a wan host through the router.

use crate::common;
use crate::netns_test;

use common::controller::Driver;
use common::policy::{HOME, lan_wan};
use common::topology::{Link, Topology, failed};

/// The lan/wan topology plus a guest host (10.0.2.2 on `eth0`; router 10.0.2.1 on
/// `veth-guest`).
fn with_guest() -> Topology {
    let mut t = lan_wan();
    t.add_host(
        "guest",
        Link {
            router_if: "veth-guest",
            router_addrs: &["10.0.2.1/24"],
            host_if: "eth0",
            host_addrs: &["10.0.2.2/24"],
            host_routes: &["default via 10.0.2.1"],
        },
    );
    t
}

/// HOME with a guest zone that may go to the wan but has no forward to the lan, and the
/// router's SSH port on the wan forwarded to the lan host's 10.0.0.10:22 (`extra` in the port
/// forward). The guest zone is a zone of interfaces only.
fn guest_policy(extra: &str) -> String {
    format!(
        "{HOME}
[policy.zone.guest]
interfaces = [\"veth-guest\"]

[[policy.forward]]
from = \"guest\"
to = \"wan\"

[[policy.port_forward]]
name = \"ssh\"
from = \"wan\"
port = 22
to = \"10.0.0.10:22\"
{extra}"
    )
}

netns_test! {
    fn bug_port_forward_reflection_lets_a_guest_zone_reach_a_lan_host_through_the_wan_address() {
        let t = with_guest();
        let mut d = Driver::policy();
        d.sync(&guest_policy("")).unwrap();
        let (lan, guest, wan) = (t.host("lan"), t.host("guest"), t.host("wan"));
        t.serve_named(lan, "inner", 22);
        // The guest zone has no forward to the lan: the wan address is no way in.
        assert!(failed(&t.connect(guest, "tcp", "192.0.2.1", 22)), "the guest reached the lan host");
        // The inner host's own zone reflects (a zone of `networks`), the wan is forwarded.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 22), "inner");
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 22), "inner");
        // `reflection_zones` widens it to the guest.
        d.sync(&guest_policy("reflection_zones = [\"guest\"]\n")).unwrap();
        assert_eq!(t.connect(guest, "tcp", "192.0.2.1", 22), "inner");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 22), "inner");
    }
}

netns_test! {
    fn a_zone_of_interfaces_only_reflects_for_the_hosts_of_its_connected_networks() {
        let t = with_guest();
        let mut d = Driver::policy();
        // The lan zone without `networks`: 10.0.0.10 is its host because the router's
        // address on veth-lan is 10.0.0.1/24.
        let policy = guest_policy("").replace("networks = [\"10.0.0.0/24\"]\n", "");
        assert!(!policy.contains("10.0.0.0/24"), "{policy}");
        d.sync(&policy).unwrap();
        let (lan, guest) = (t.host("lan"), t.host("guest"));
        t.serve_named(lan, "inner", 22);
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 22), "inner");
        assert!(failed(&t.connect(guest, "tcp", "192.0.2.1", 22)));
    }
}
