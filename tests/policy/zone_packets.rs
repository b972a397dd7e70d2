//! Zone features of issue 11 with real packets (a lan host, the router, a wan host on veth
//! pairs): MSS clamping (`mtu_fix`), interface wildcards that match interfaces appearing after
//! the sync, and the counted, rate-limited drop logs of `log_drops`.

use crate::common;
use crate::netns_test;

use common::controller::Driver;
use common::policy::{HOME, lan_wan, rule_handles};
use common::shell::sh;
use common::topology::{Host, Link, Topology, failed};

/// Counters of the wan host's probe rules: (SYNs with MSS above 1360, SYNs with MSS 1360 or
/// less) that arrived for port 80.
fn syn_mss_counts(wan: &Host) -> (u64, u64) {
    let text = wan.sh("nft list chain inet probe in");
    let count = |tag: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.contains(tag))
            .unwrap_or_else(|| panic!("{tag}: {text}"));
        let after = line.split("counter packets ").nth(1).unwrap();
        after.split_whitespace().next().unwrap().parse().unwrap()
    };
    (count("\"big\""), count("\"small\""))
}

netns_test! {
    fn mtu_fix_clamps_the_mss_to_the_wan_links_mtu() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        // A wan link with MTU 1400 (PPPoE-like); the lan side stays at 1500, so lan hosts
        // announce MSS 1460.
        t.router().sh("ip link set veth-wan mtu 1400");
        wan.sh("ip link set eth0 mtu 1400");
        wan.sh("nft add table inet probe");
        wan.sh("nft add chain inet probe in '{ type filter hook input priority 0; }'");
        wan.sh("nft add rule inet probe in tcp dport 80 tcp flags syn tcp option maxseg size 1361-65535 counter comment big");
        wan.sh("nft add rule inet probe in tcp dport 80 tcp flags syn tcp option maxseg size 1-1360 counter comment small");
        t.serve(wan, "tcp", 80);
        let mut d = Driver::policy();
        // Without mtu_fix the lan host's MSS arrives as it was sent.
        d.sync(HOME).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        assert_eq!(syn_mss_counts(wan), (1, 0));
        // With it, the SYN arrives at the wan server with MSS <= 1360.
        d.sync(&HOME.replace("masquerade = true\n", "masquerade = true\nmtu_fix = true\n")).unwrap();
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        assert_eq!(syn_mss_counts(wan), (1, 1));
        let forward = sh("nft list chain inet edgenetd-policy forward");
        assert!(forward.contains("tcp option maxseg size set rt mtu"), "{forward}");
    }
}

/// A host on a new veth pair: the router's end `router_if` with 10.`net`.0.1/24, the host at
/// 10.`net`.0.2/24 routed through it.
fn late_host(t: &mut Topology, role: &str, router_if: &str, net: u8) {
    let router_addr = format!("10.{net}.0.1/24");
    let host_addr = format!("10.{net}.0.2/24");
    let route = format!("default via 10.{net}.0.1");
    t.add_host(
        role,
        Link {
            router_if,
            router_addrs: &[&router_addr],
            host_if: "eth0",
            host_addrs: &[&host_addr],
            host_routes: &[&route],
        },
    );
}

netns_test! {
    fn interface_wildcards_match_interfaces_that_appear_after_the_sync() {
        let mut t = lan_wan();
        t.serve(t.host("wan"), "tcp", 80);
        let cfg = format!(
            "{HOME}\n[policy.zone.vpn]\ninterfaces = [\"wg*\"]\n\n[[policy.forward]]\nfrom = \"vpn\"\nto = \"wan\"\n"
        );
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        let handles = rule_handles();
        // Both interfaces appear after the sync; only the one the wildcard names is in the
        // zone, with no sync in between.
        late_host(&mut t, "vpn", "wg0", 5);
        late_host(&mut t, "other", "other0", 6);
        assert_eq!(t.connect(t.host("vpn"), "tcp", "192.0.2.2", 80), "192.0.2.1");
        assert!(failed(&t.connect(t.host("other"), "tcp", "192.0.2.2", 80)));
        assert_eq!(rule_handles(), handles, "the table was not rewritten");
        let forward = sh("nft list chain inet edgenetd-policy forward");
        assert!(forward.contains("iifname \"wg*\" oifname \"veth-wan\""), "{forward}");
    }
}

/// The packet counter of the policy rule whose text contains `needle`.
fn counter_of(chain: &str, needle: &str) -> u64 {
    let text = sh(&format!("nft list chain inet edgenetd-policy {chain}"));
    let line = text
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {text}"));
    let after = line.split("counter packets ").nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

netns_test! {
    fn log_drops_counts_and_logs_what_the_zones_default_drops() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        let cfg = HOME
            .replace("masquerade = true\n", "masquerade = true\nlog_drops = true\n")
            .replace("name = \"telnet-reject\"\n", "name = \"telnet-reject\"\nlog_prefix = \"telnet: \"\n");
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(input.contains("counter packets 0 bytes 0 limit rate 10/minute log prefix \"drop wan input: \""), "{input}");
        assert!(input.contains("log prefix \"telnet: \""), "{input}");
        let forward = sh("nft list chain inet edgenetd-policy forward");
        assert!(forward.contains("log prefix \"drop wan forward: \""), "{forward}");
        // The lan zone does not log its drops.
        assert!(!input.contains("drop lan"), "{input}");
        t.serve(t.router(), "tcp", 2222);
        // Allowed traffic never reaches the drop log...
        t.serve(wan, "tcp", 80);
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        assert_eq!(counter_of("input", "drop wan input"), 0);
        assert_eq!(counter_of("forward", "drop wan forward"), 0);
        // ...what the wan's default drops does, to the router and through it.
        assert!(failed(&t.connect(wan, "tcp", "192.0.2.1", 2222)));
        assert!(counter_of("input", "drop wan input") >= 1);
        t.serve(lan, "tcp", 81);
        assert!(failed(&t.connect(wan, "tcp", "10.0.0.2", 81)));
        assert!(counter_of("forward", "drop wan forward") >= 1);
    }
}
