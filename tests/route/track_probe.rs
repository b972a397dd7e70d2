//! The uplink probes of `[[track]]` against real servers, each test in a fresh namespace: a
//! "far" host holds 198.18.0.1, reachable only through table 500, which only packets marked
//! 0x77 look up; so a probe that succeeds has really carried the track's mark.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::shell::sh;
use common::topology::{Link, Topology};
use common::wait::wait_until;
use edgenetd::config::route::TrackCheck;
use edgenetd::track::probe::probe_to;

const MARK: u32 = 0x77;
const TIMEOUT: Duration = Duration::from_millis(500);

/// A DNS responder on 198.18.0.1: port 53 answers RCODE 0, 5353 answers SERVFAIL (2), 5354
/// reads and never answers.
const DNS: &str = r#"
import socket, threading
def serve(port, rcode):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("198.18.0.1", port))
    while True:
        q, a = u.recvfrom(512)
        if rcode is None:
            continue
        r = bytearray(q); r[2] |= 0x80; r[3] = (r[3] & 0xf0) | rcode
        u.sendto(bytes(r), a)
for port, rcode in ((5353, 2), (5354, None)):
    threading.Thread(target=serve, args=(port, rcode), daemon=True).start()
serve(53, 0)
"#;

fn far() -> Topology {
    let mut t = Topology::new();
    t.add_host(
        "far",
        Link {
            router_if: "up0",
            router_addrs: &["10.9.0.1/24"],
            host_if: "eth0",
            host_addrs: &["10.9.0.2/24"],
            host_routes: &[],
        },
    );
    t.host("far").sh("ip addr add 198.18.0.1/32 dev lo");
    sh("ip route add 198.18.0.0/24 via 10.9.0.2 dev up0 table 500");
    sh(&format!("ip rule add fwmark {MARK} lookup 500 priority 90"));
    t
}

fn probe(check: TrackCheck, target: &str, mark: u32) -> Result<(), String> {
    smol::block_on(probe_to(check, target.parse().unwrap(), mark, TIMEOUT))
}

netns_test! {
    fn tcp_probe_is_up_with_a_server_refused_when_closed_and_needs_the_mark() {
        let t = far();
        t.serve(t.host("far"), "tcp", 53);
        assert_eq!(probe(TrackCheck::Tcp, "198.18.0.1:53", MARK), Ok(()));
        assert_eq!(probe(TrackCheck::Tcp, "198.18.0.1:54", MARK), Err("refused".into()));
        let unmarked = probe(TrackCheck::Tcp, "198.18.0.1:53", 0).unwrap_err();
        assert!(unmarked.contains("unreachable"), "the main table has no way there: {unmarked}");
        // Silent: the far host drops everything to the port.
        t.host("far").sh("ip route add blackhole 198.18.0.2/32");
        assert_eq!(probe(TrackCheck::Tcp, "198.18.0.2:53", MARK), Err("timeout".into()));
    }
}

netns_test! {
    fn dns_probe_is_up_with_rcode_0_and_down_with_servfail_silence_or_nothing() {
        let t = far();
        let script = t.script("dns.py", DNS);
        let mut responder = t.host("far").spawn(&format!("exec python3 -u {script}"));
        wait_until("the DNS responder", Duration::from_secs(10), || {
            t.host("far").sh("ss -lunH").matches("198.18.0.1:").count() == 3
        });
        assert_eq!(probe(TrackCheck::Dns, "198.18.0.1:53", MARK), Ok(()));
        let servfail = probe(TrackCheck::Dns, "198.18.0.1:5353", MARK).unwrap_err();
        assert!(servfail.contains("rcode 2"), "{servfail}");
        assert_eq!(probe(TrackCheck::Dns, "198.18.0.1:5354", MARK), Err("timeout".into()));
        let closed = probe(TrackCheck::Dns, "198.18.0.1:5355", MARK).unwrap_err();
        assert!(closed == "refused" || closed == "timeout", "{closed}");
        responder.kill().unwrap();
        responder.wait().unwrap();
    }
}

netns_test! {
    fn icmp_probe_needs_unprivileged_ping_sockets_and_says_so_when_they_are_not_allowed() {
        let _t = far();
        // This namespace's own setting: nobody may open ping sockets.
        sh("sysctl -qw net.ipv4.ping_group_range='1 0'");
        let refused = probe(TrackCheck::Icmp, "198.18.0.1:0", MARK).unwrap_err();
        assert!(refused.contains("ping_group_range"), "{refused}");
        sh("sysctl -qw net.ipv4.ping_group_range='0 2147483647'");
        assert_eq!(probe(TrackCheck::Icmp, "198.18.0.1:0", MARK), Ok(()));
        assert_eq!(probe(TrackCheck::Icmp, "198.18.0.9:0", MARK), Err("timeout".into()));
    }
}
