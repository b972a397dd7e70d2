//! fw4's 07_redirect cases with real packets (a lan host, the router, a wan host; see
//! `common::policy::lan_wan`): redirects to the router itself answer instead of the wan
//! host, and `reflection_src = "external"` shows the inner host the router's wan address.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::policy::{HOME, lan_wan};
use common::topology::{Host, Topology, failed};
use common::wait::poll_for;

/// The first answer of `kind` from `from` to `to`:`port` that is not a failure, retried
/// for up to 10 s (IPv6 neighbour discovery on a fresh topology); the last failure otherwise.
fn settled(t: &Topology, from: &Host, kind: &str, to: &str, port: u16) -> String {
    let mut last = String::new();
    poll_for(Duration::from_secs(10), || {
        last = t.connect(from, kind, to, port);
        (!failed(&last)).then(|| last.clone())
    })
    .unwrap_or(last)
}

netns_test! {
    fn fw4_07_redirect_transparent_dns_answers_every_lan_query_from_the_router() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve_named(t.router(), "router", 53);
        t.serve_named(wan, "wan-dns", 53);
        let mut d = Driver::policy();
        d.sync(HOME).unwrap();
        // Without the redirect a query to the wan's server reaches it.
        assert_eq!(t.connect(lan, "udp", "192.0.2.2", 53), "wan-dns");
        // `dest_port` without `dest_ip`: every lan query on port 53, to any address, is the
        // router's, over UDP and TCP, IPv4 and IPv6 (HOME has no rule letting the lan's TCP
        // 53 in: the redirect's own input accept does).
        let dns = "\n[[policy.port_forward]]\nname = \"transparent-dns\"\nfrom = \"lan\"\nprotocol = [\"tcp\", \"udp\"]\nport = 53\nto = \"self:53\"\n";
        let cfg = format!(
            "{}{dns}",
            HOME.replace(r#"networks = ["10.0.0.0/24"]"#, r#"networks = ["10.0.0.0/24", "fd00::/64"]"#)
        );
        d.sync(&cfg).unwrap();
        assert_eq!(t.connect(lan, "udp", "192.0.2.2", 53), "router");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 53), "router");
        assert_eq!(t.connect(lan, "udp", "198.51.100.53", 53), "router");
        assert_eq!(settled(&t, lan, "udp", "2001:db8::2", 53), "router");
        // The wan host's own queries are not the lan's: they still reach its server.
        assert_eq!(t.connect(wan, "udp", "192.0.2.2", 53), "wan-dns");
    }
}

netns_test! {
    fn fw4_07_redirect_without_src_dport_takes_every_port_to_the_src_dip_only() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve_named(t.router(), "proxy", 8053);
        t.serve_named(wan, "wan-5000", 5000);
        let proxy = "\n[[policy.port_forward]]\nname = \"to-the-proxy\"\nfrom = \"lan\"\nprotocol = \"udp\"\nto = \"self:8053\"\nto_addresses = [\"192.0.2.3\"]\n";
        let mut d = Driver::policy();
        d.sync(&format!("{HOME}{proxy}")).unwrap();
        // Any UDP port to 192.0.2.3 (fw4's src_dip) goes to the router's 8053...
        assert_eq!(t.connect(lan, "udp", "192.0.2.3", 5000), "proxy");
        assert_eq!(t.connect(lan, "udp", "192.0.2.3", 7), "proxy");
        // ...other destinations are forwarded as before, and TCP is not redirected.
        assert_eq!(t.connect(lan, "udp", "192.0.2.2", 5000), "wan-5000");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 5000), "wan-5000");
    }
}

netns_test! {
    fn fw4_07_redirect_reflection_src_external_shows_the_routers_wan_address() {
        let t = lan_wan();
        let lan = t.host("lan");
        t.serve(lan, "tcp", 80);
        let mut d = Driver::policy();
        // HOME's `web` forward (wan 8080 -> 10.0.0.10:80), reflected for the lan.
        d.sync(HOME).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 8080), "10.0.0.1");
        let external = HOME.replace("to = \"10.0.0.10:80\"\n", "to = \"10.0.0.10:80\"\nreflection_src = \"external\"\n");
        assert_ne!(external, HOME);
        d.sync(&external).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.1", 8080), "192.0.2.1");
    }
}

netns_test! {
    fn fw4_07_redirect_reflection_src_external_takes_the_src_dip_address_among_several() {
        let t = lan_wan();
        let lan = t.host("lan");
        // A second wan address: fw4 reflects with the first `src_dip` address when one is
        // given, and so does edgenetd; without one, the router's lowest wan address.
        t.router().sh("ip addr add 192.0.2.9/24 dev veth-wan");
        t.serve(lan, "tcp", 80);
        let mut d = Driver::policy();
        let external = HOME.replace("to = \"10.0.0.10:80\"\n", "to = \"10.0.0.10:80\"\nreflection_src = \"external\"\n");
        d.sync(&external).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.9", 8080), "192.0.2.1");
        let src_dip = external.replace("reflection_src = \"external\"\n", "reflection_src = \"external\"\nto_addresses = [\"192.0.2.9\"]\n");
        assert_ne!(src_dip, external);
        d.sync(&src_dip).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.9", 8080), "192.0.2.9");
    }
}

netns_test! {
    fn fw4_07_redirect_src_dip_forwards_only_traffic_to_that_address() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.router().sh("ip addr add 192.0.2.9/24 dev veth-wan");
        t.serve(lan, "tcp", 80);
        let mut d = Driver::policy();
        // HOME's `web` forward (wan 8080 -> 10.0.0.10:80) for 192.0.2.9 only.
        let src_dip = HOME.replace("to = \"10.0.0.10:80\"\n", "to = \"10.0.0.10:80\"\nto_addresses = [\"192.0.2.9\"]\n");
        assert_ne!(src_dip, HOME);
        d.sync(&src_dip).unwrap();
        assert_eq!(t.connect(wan, "tcp", "192.0.2.9", 8080), "192.0.2.2");
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 8080)));
        // Reflection takes the same address.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.9", 8080), "10.0.0.1");
        assert!(failed(&t.connect(lan, "tcp", "192.0.2.1", 8080)));
        // Without it, every router address forwards.
        d.sync(HOME).unwrap();
        assert_eq!(t.connect(wan, "tcp", "192.0.2.1", 8080), "192.0.2.2");
    }
}
