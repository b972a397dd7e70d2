//! fw4's NAT cases (issue 23, item 5) with real packets between namespaces (a lan host,
//! the router, a wan host; see `common::policy::lan_wan`): the wan host's echo server
//! answers with the source address it saw, so each check shows the translation, or its
//! absence (the wan host routes 10.0.0.0/24 back through the router).

use crate::common;
use crate::netns_test;

use common::controller::Driver;
use common::policy::{HOME, lan_wan};
use common::topology::Host;

/// HOME with `extra` in the wan zone (after its `masquerade = true`) and `tail` appended.
fn home(extra: &str, tail: &str) -> String {
    format!(
        "{}{tail}",
        HOME.replace(
            "masquerade = true\n",
            &format!("masquerade = true\n{extra}")
        )
    )
}

netns_test! {
    fn fw4_03_masq_src_dest_restrictions_narrow_the_zone_masquerade() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.serve(wan, "tcp", 80);
        let mut d = Driver::policy();
        d.sync(&home("masq_src = [\"10.0.0.0/24\", \"!10.0.0.10\"]\nmasq_dest = [\"!192.0.2.3\"]\n", ""))
            .unwrap();
        // Inside masq_src, to a destination masq_dest allows: masqueraded.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        // The excluded source leaves with its own address.
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.2", 80, "10.0.0.10"), "10.0.0.10");
        // So does traffic to the excluded destination.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "10.0.0.2");
        // Without the restrictions, all of it is masqueraded again.
        d.sync(HOME).unwrap();
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.2", 80, "10.0.0.10"), "192.0.2.1");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "192.0.2.1");
    }
}

/// `[[policy.nat]]` entries: `accept` for the partner 192.0.2.3 (no NAT), the server
/// 10.0.0.10 SNATed to the router's second wan address; `swapped` puts the SNAT first.
fn nat_entries(swapped: bool) -> String {
    let accept = "[[policy.nat]]\nname = \"partner-no-nat\"\nto = \"wan\"\nto_addresses = [\"192.0.2.3\"]\naction = \"accept\"\n\n";
    let snat = "[[policy.nat]]\nname = \"server-snat\"\nfrom = [\"10.0.0.10\"]\nto = \"wan\"\naction = \"snat\"\nsnat_address = \"192.0.2.9\"\n\n";
    let entries = if swapped {
        format!("{snat}{accept}")
    } else {
        format!("{accept}{snat}")
    };
    home("", &format!("\n{entries}"))
}

netns_test! {
    fn fw4_02_masq_nat_entries_come_before_the_zone_masquerade_in_config_order() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        t.router().sh("ip addr add 192.0.2.9/24 dev veth-wan");
        t.serve(wan, "tcp", 80);
        let mut d = Driver::policy();
        d.sync(&nat_entries(false)).unwrap();
        // SNAT (fw4 target SNAT, snat_ip) before the zone's masquerade.
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.2", 80, "10.0.0.10"), "192.0.2.9");
        // Everyone else: the zone's masquerade.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
        // target ACCEPT: no source NAT at all, and it comes first for the server too.
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "10.0.0.2");
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.3", 80, "10.0.0.10"), "10.0.0.10");
        // Config order decides: with the SNAT first, the server is SNATed to the partner too.
        d.sync(&nat_entries(true)).unwrap();
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.3", 80, "10.0.0.10"), "192.0.2.9");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.3", 80), "10.0.0.2");
        // target MASQUERADE of one source, the zone without masquerade: only that source
        // is translated.
        let masq = "\n[[policy.nat]]\nname = \"server-masq\"\nfrom = [\"10.0.0.10\"]\nto = \"wan\"\naction = \"masquerade\"\n";
        d.sync(&format!("{}{masq}", HOME.replace("masquerade = true\n", ""))).unwrap();
        assert_eq!(t.connect_from(lan, "tcp", "192.0.2.2", 80, "10.0.0.10"), "192.0.2.1");
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "10.0.0.2");
    }
}

/// Sends `n` TCP segments with SYN and FIN set (which conntrack classes as invalid) from
/// `src` to `dst` port 9 through a raw socket.
fn send_syn_fin(from: &Host, src: &str, dst: &str, n: u32) {
    let script = format!(
        r#"
import socket, struct
src, dst = "{src}", "{dst}"
hdr = struct.pack("!HHIIBBHHH", 40000, 9, 1, 0, 5 << 4, 0x03, 1024, 0, 0)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr))
words = struct.unpack("!%dH" % ((len(pseudo) + len(hdr)) // 2), pseudo + hdr)
c = sum(words)
while c >> 16:
    c = (c & 0xffff) + (c >> 16)
hdr = hdr[:16] + struct.pack("!H", ~c & 0xffff) + hdr[18:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.bind((src, 0))
for _ in range({n}):
    s.sendto(hdr, (dst, 0))
"#
    );
    from.sh(&format!("python3 -c '{script}'"));
}

/// The SYN+FIN segments from the lan host's own address the wan host has received so far
/// (counted by a table of its own, before its conntrack).
fn leaked(wan: &Host) -> u64 {
    let out = wan.sh("nft list chain ip probe pre");
    out.split("packets ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter in {out}"))
}

netns_test! {
    fn fw4_04_masq_allow_invalid_lets_invalid_packets_leave_unmasqueraded() {
        let t = lan_wan();
        let (lan, wan) = (t.host("lan"), t.host("wan"));
        wan.sh("nft add table ip probe && nft add chain ip probe pre '{ type filter hook prerouting priority -300; }' && nft add rule ip probe pre ip saddr 10.0.0.2 tcp flags '& (fin|syn) == fin|syn' counter");
        let mut d = Driver::policy();
        // By default (fw4 without masq_allow_invalid) an invalid packet never leaves: it
        // would leave untranslated, with the lan host's own address (NAT leakage).
        d.sync(HOME).unwrap();
        send_syn_fin(lan, "10.0.0.2", "192.0.2.2", 3);
        assert_eq!(leaked(wan), 0);
        // masq_allow_invalid: it goes on to the rules (lan -> wan accepts) and leaves as it is.
        d.sync(&home("masq_allow_invalid = true\n", "")).unwrap();
        send_syn_fin(lan, "10.0.0.2", "192.0.2.2", 3);
        assert_eq!(leaked(wan), 3);
        // And back: the forward_invalid chain goes with the key, the drop is there again.
        d.sync(HOME).unwrap();
        send_syn_fin(lan, "10.0.0.2", "192.0.2.2", 3);
        assert_eq!(leaked(wan), 3);
        // Valid traffic is masqueraded as before.
        t.serve(wan, "tcp", 80);
        assert_eq!(t.connect(lan, "tcp", "192.0.2.2", 80), "192.0.2.1");
    }
}
