//! Issue 23 items 7 and 9 with real packets (a lan host, the router, a wan host on veth
//! pairs; see `common::policy::lan_wan`): a forward, a zone and a rule restricted by
//! `family` pass pings of their IP version and refuse the other's (fw4's
//! `04_forwardings/01_family_selections`, `02_zones/06_family_selections`,
//! `03_rules/08_family_inheritance`); a rule of `protocol = "gre"` (or `50`) admits GRE (or
//! ESP) packets, sent from a raw socket, to the router and not the other protocol; and
//! `explain` says the same.

use crate::common;
use crate::netns_test;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::bin::edgenetd;
use common::controller::Driver;
use common::policy::{ZONES_ONLY, lan_wan};
use common::scratch::ScratchDir;
use common::topology::{Host, Topology};
use common::wait::poll_for;

/// Waits (for `argv[4]` seconds) for a packet of IP protocol `argv[2]` to `argv[1]`'s
/// family whose payload holds `argv[3]`; prints READY once it listens, then GOT or NONE.
/// A raw socket sees a packet only after the input hook accepted it.
const RECEIVE: &str = r#"
import select, socket, sys, time
family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(family, socket.SOCK_RAW, int(sys.argv[2]))
print('READY', flush=True)
end = time.time() + float(sys.argv[4])
while time.time() < end:
    ready, _, _ = select.select([s], [], [], max(0.0, end - time.time()))
    if ready and sys.argv[3].encode() in s.recv(65535):
        print('GOT', flush=True)
        sys.exit(0)
print('NONE', flush=True)
"#;

/// Sends five packets of IP protocol `argv[2]` with payload `argv[3]` to `argv[1]`.
const SEND: &str = r#"
import socket, sys, time
family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(family, socket.SOCK_RAW, int(sys.argv[2]))
for _ in range(5):
    s.sendto(sys.argv[3].encode(), (sys.argv[1], 0))
    time.sleep(0.2)
"#;

/// True when a packet of IP protocol `proto` sent by the lan host reaches a raw socket of
/// the router's at `to`.
fn delivered(t: &Topology, proto: u8, to: &str) -> bool {
    let receive = t.script("raw_receive.py", RECEIVE);
    let send = t.script("raw_send.py", SEND);
    let marker = format!("edgenetd-{proto}-{}", to.len());
    let mut child = t
        .router()
        .command("python3")
        .args([receive.as_str(), to, &proto.to_string(), &marker, "3"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    t.host("lan")
        .sh(&format!("python3 {send} {to} {proto} {marker}"));
    let answer = lines.next().unwrap().unwrap();
    child.wait().unwrap();
    answer == "GOT"
}

/// A ping from `host` to `to` passes within 10 s (IPv6 neighbour discovery on a loaded
/// machine); `false` when the last one failed.
fn pings(host: &Host, to: &str) -> bool {
    poll_for(Duration::from_secs(10), || {
        host.sh_status(&format!("ping -n -c 1 -W 1 {to}"))
            .0
            .then_some(())
    })
    .is_some()
}

/// One ping, once (for the refusals: no retry can make it pass).
fn ping_once(host: &Host, to: &str) -> bool {
    host.sh_status(&format!("ping -n -c 1 -W 1 {to}")).0
}

/// `explain`'s verdict and rule for a packet in on `iif` from `from` to `to`.
fn explain(config: &str, iif: &str, from: &str, to: &str, proto: &str) -> String {
    let dir = ScratchDir::with_files("fw4-family-explain", &[("edgenetd.toml", config)]);
    let run = edgenetd(&[
        "explain",
        "--json",
        "--config",
        dir.config().to_str().unwrap(),
        "--addresses",
        "veth-lan=10.0.0.1/24,veth-lan=fd00::1/64,veth-wan=192.0.2.1/24,veth-wan=2001:db8::1/64",
        "--in",
        iif,
        "--from",
        from,
        "--to",
        to,
        "--proto",
        proto,
    ]);
    assert_eq!(run.code, 0, "explain: {}", run.stderr);
    let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    format!(
        "{} {}",
        j["verdict"].as_str().unwrap(),
        j["rule"].as_str().unwrap_or("")
    )
}

netns_test! {
    fn fw4_01_family_selections_an_ipv4_forward_passes_ipv4_pings_and_refuses_ipv6() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        wan.sh("ip -6 route add fd00::/64 via 2001:db8::1");
        let forward = |family: &str| {
            format!("{ZONES_ONLY}[[policy.forward]]\nfrom = \"lan\"\nto = \"wan\"\nfamily = \"{family}\"\n")
        };
        let mut d = Driver::policy();
        // IPv6 only first: the IPv6 path works, so its refusal below is the firewall's.
        d.sync(&forward("ipv6")).unwrap();
        assert!(pings(lan, "2001:db8::2"), "an ipv6 forward refused an IPv6 ping");
        assert!(!ping_once(lan, "192.0.2.2"), "an ipv6 forward passed an IPv4 ping");
        d.sync(&forward("ipv4")).unwrap();
        assert!(pings(lan, "192.0.2.2"), "an ipv4 forward refused an IPv4 ping");
        assert!(!ping_once(lan, "2001:db8::2"), "an ipv4 forward passed an IPv6 ping");
        // Both, without `family`.
        d.sync(&forward("any")).unwrap();
        assert!(pings(lan, "2001:db8::2") && pings(lan, "192.0.2.2"));

        let v4 = forward("ipv4");
        assert_eq!(explain(&v4, "veth-lan", "10.0.0.2", "192.0.2.2", "icmp"), "accept forward lan->wan");
        assert_eq!(explain(&v4, "veth-lan", "fd00::2", "2001:db8::2", "icmpv6"), "drop default");
    }
}

netns_test! {
    fn fw4_06_family_selections_an_ipv6_zone_of_interfaces_sees_only_ipv6() {
        let t = lan_wan();
        let lan = t.host("lan");
        let rule = "[[policy.rule]]\nname = \"from-lan\"\nfrom = \"lan\"\nto = \"self\"\naction = \"accept\"\n";
        let zone = ZONES_ONLY.replace(
            "[policy.zone.lan]\n",
            "[policy.zone.lan]\nfamily = \"ipv6\"\n",
        );
        assert_ne!(zone, ZONES_ONLY);
        let config = format!("{zone}{rule}");
        Driver::policy().sync(&config).unwrap();
        assert!(pings(lan, "fd00::1"), "an ipv6 zone's rule refused an IPv6 ping");
        assert!(!ping_once(lan, "10.0.0.1"), "an ipv6 zone's rule passed an IPv4 ping");
        assert_eq!(explain(&config, "veth-lan", "fd00::2", "fd00::1", "icmpv6"), "accept from-lan");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.2", "10.0.0.1", "icmp"), "drop default");
    }
}

netns_test! {
    fn fw4_08_family_inheritance_a_rules_own_family_restricts_a_zone_of_both() {
        let t = lan_wan();
        let lan = t.host("lan");
        let config = format!(
            "{ZONES_ONLY}[[policy.rule]]\nname = \"v4-from-lan\"\nfrom = \"lan\"\nto = \"self\"\nfamily = \"ipv4\"\naction = \"accept\"\n"
        );
        Driver::policy().sync(&config).unwrap();
        assert!(pings(lan, "10.0.0.1"), "an ipv4 rule refused an IPv4 ping");
        assert!(!ping_once(lan, "fd00::1"), "an ipv4 rule passed an IPv6 ping");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.2", "10.0.0.1", "icmp"), "accept v4-from-lan");
        assert_eq!(explain(&config, "veth-lan", "fd00::2", "fd00::1", "icmpv6"), "drop default");
    }
}

netns_test! {
    fn fw4_03_constraints_a_gre_rule_admits_gre_and_not_esp_and_a_numbered_one_esp() {
        let t = lan_wan();
        let rule = |protocol: &str| {
            format!("{ZONES_ONLY}[[policy.rule]]\nname = \"tunnel\"\nfrom = \"lan\"\nto = \"self\"\nprotocol = {protocol}\naction = \"accept\"\n")
        };
        let mut d = Driver::policy();
        let gre = rule("\"gre\"");
        d.sync(&gre).unwrap();
        assert!(delivered(&t, 47, "10.0.0.1"), "a gre rule dropped GRE");
        assert!(delivered(&t, 47, "fd00::1"), "a gre rule dropped GRE over IPv6");
        assert!(!delivered(&t, 50, "10.0.0.1"), "a gre rule admitted ESP");
        d.sync(&rule("50")).unwrap();
        assert!(delivered(&t, 50, "10.0.0.1"), "a rule of protocol 50 dropped ESP");
        assert!(!delivered(&t, 47, "10.0.0.1"), "a rule of protocol 50 admitted GRE");

        assert_eq!(explain(&gre, "veth-lan", "10.0.0.2", "10.0.0.1", "gre"), "accept tunnel");
        assert_eq!(explain(&gre, "veth-lan", "fd00::2", "fd00::1", "47"), "accept tunnel");
        assert_eq!(explain(&gre, "veth-lan", "10.0.0.2", "10.0.0.1", "esp"), "drop default");
    }
}

/// ZONES_ONLY with the lan zone's `interfaces` replaced by `interfaces` (and `more` keys),
/// and a rule accepting everything from it to the router.
fn lan_zone(interfaces: &str, more: &str) -> String {
    let zones = ZONES_ONLY.replace(
        "[policy.zone.lan]\ninterfaces = [\"veth-lan\"]\n",
        &format!("[policy.zone.lan]\ninterfaces = {interfaces}\n{more}"),
    );
    assert_ne!(zones, ZONES_ONLY);
    format!(
        "{zones}[[policy.rule]]\nname = \"from-lan\"\nfrom = \"lan\"\nto = \"self\"\naction = \"accept\"\n"
    )
}

netns_test! {
    fn fw4_04_wildcard_devices_a_plus_stem_holds_the_veths_and_bang_leaves_one_out() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        let mut d = Driver::policy();
        // `veth+` but not `veth-wan`: the lan's veth only.
        let config = lan_zone("[\"veth+\", \"!veth-wan\"]", "");
        d.sync(&config).unwrap();
        assert!(pings(lan, "10.0.0.1"), "veth-lan is in `veth+` and not left out");
        assert!(!ping_once(wan, "192.0.2.1"), "veth-wan was left out, yet its ping passed");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.2", "10.0.0.1", "icmp"), "accept from-lan");
        assert_eq!(explain(&config, "veth-wan", "192.0.2.2", "192.0.2.1", "icmp"), "drop default");
        // Every interface but the lan's.
        let config = lan_zone("[\"!veth-lan\"]", "");
        d.sync(&config).unwrap();
        assert!(pings(wan, "192.0.2.1"), "every interface but veth-lan: veth-wan refused");
        assert!(!ping_once(lan, "10.0.0.1"), "veth-lan was left out, yet its ping passed");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.2", "10.0.0.1", "icmp"), "drop default");
    }
}

netns_test! {
    fn fw4_05_subnet_mask_matches_a_zone_of_a_masked_network_holds_only_those_hosts() {
        let t = lan_wan();
        let lan = t.host("lan");
        // Host .2 of any 10.0.X.0/24 (the lan host has 10.0.0.2 and 10.0.0.10).
        let config = lan_zone("[\"veth-lan\"]", "networks = [\"10.0.0.2/255.255.0.255\"]\n");
        Driver::policy().sync(&config).unwrap();
        let from = |src: &str| format!("ping -n -c 1 -W 1 -I {src} 10.0.0.1");
        assert!(
            poll_for(Duration::from_secs(10), || lan.sh_status(&from("10.0.0.2")).0.then_some(())).is_some(),
            "10.0.0.2 is under the mask, yet refused"
        );
        assert!(!lan.sh_status(&from("10.0.0.10")).0, "10.0.0.10 is not under the mask, yet passed");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.2", "10.0.0.1", "icmp"), "accept from-lan");
        assert_eq!(explain(&config, "veth-lan", "10.0.0.10", "10.0.0.1", "icmp"), "drop default");
    }
}
