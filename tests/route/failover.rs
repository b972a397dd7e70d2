//! WAN failover with real packets (issue 12): the router (this test's namespace) has a lan
//! host and two uplinks, each to an ISP namespace with an "internet" host behind it that holds
//! the same addresses (198.18.0.10 serves, 198.18.0.53 is the probe target), so which way a
//! connection left shows in whose server answered and which address it saw.

use crate::common;
use crate::netns_test;

use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::shell::sh;
use common::topology::{Host, Link, Topology};
use common::wait::wait_until;

const INTERVAL_MS: u64 = 500;
const FALL: u64 = 3;
const RISE: u64 = 2;

fn config() -> String {
    format!(
        r#"
[controller.route]
period = "1h"
sync_budget = "30s"

[policy]
input = "drop"
forward_default = "drop"
output = "accept"

[policy.zone.lan]
interfaces = ["lan0"]
networks = ["10.0.0.0/24"]

[policy.zone.wan]
interfaces = ["wan1", "wan2"]
masquerade = true

[[policy.forward]]
from = "lan"
to = "wan"

[[track]]
name = "wan1"
check = "tcp"
target = "198.18.0.53:53"
via = "203.0.113.1"
dev = "wan1"
interval = "{INTERVAL_MS}ms"
timeout = "300ms"
fall = {FALL}
rise = {RISE}

[[route]]
to = "default"
via = "203.0.113.1"
dev = "wan1"
metric = 10
track = "wan1"

[[route]]
to = "default"
via = "198.51.100.1"
dev = "wan2"
metric = 20
"#
    )
}

/// `ip netns` namespaces made by the test itself (the internet hosts) and the servers in
/// them, killed and deleted on drop.
struct Internet(Vec<String>, Vec<std::process::Child>);

impl Drop for Internet {
    fn drop(&mut self) {
        for child in &mut self.1 {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.0 {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", ns])
                .status();
        }
    }
}

/// An ISP host on `router_if`, with an internet namespace behind it on 100.64.N.0/30 that has
/// the "internet" addresses.
fn isp(t: &mut Topology, n: u8, router_if: &'static str, prefix: &str, internet: &mut Internet) {
    let router_addr = format!("{prefix}.2/24");
    let isp_addr = format!("{prefix}.1/24");
    let role = format!("isp{n}");
    t.add_host(
        &role,
        Link {
            router_if,
            router_addrs: &[router_addr.as_str()],
            host_if: "eth0",
            host_addrs: &[isp_addr.as_str()],
            host_routes: &[],
        },
    );
    let ns = format!("en-inet{n}-{}", std::process::id());
    sh(&format!("ip netns add {ns}"));
    internet.0.push(ns.clone());
    let host = t.host(&role);
    host.sh(&format!(
        "sysctl -qw net.ipv4.ip_forward=1 && ip link add inet type veth peer name eth0 netns {ns} && ip addr add 100.64.{n}.1/30 dev inet && ip link set inet up && ip route add 198.18.0.0/24 via 100.64.{n}.2"
    ));
    sh(&format!(
        "ip -n {ns} link set lo up && ip -n {ns} addr add 100.64.{n}.2/30 dev eth0 && ip -n {ns} link set eth0 up && ip -n {ns} addr add 198.18.0.10/32 dev lo && ip -n {ns} addr add 198.18.0.53/32 dev lo && ip -n {ns} route add default via 100.64.{n}.1"
    ));
}

/// A TCP (and UDP) server in internet namespace `ns` answering with its name.
fn serve_in(t: &Topology, ns: &str, name: &str, port: u16) -> std::process::Child {
    let path = t.script(
        &format!("srv-{name}-{port}.py"),
        &format!(
            r#"
import socket, threading
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", {port})); s.listen(64)
    while True:
        c, a = s.accept(); c.sendall(("{name} " + a[0] + "\n").encode()); c.close()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("198.18.0.10", {port}))
    while True:
        d, a = u.recvfrom(512); u.sendto(("{name} " + a[0] + "\n").encode(), a)
threading.Thread(target=udp, daemon=True).start()
tcp()
"#
        ),
    );
    std::process::Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-u", &path])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// One exchange from the lan host: "NAME ADDR" (who answered, the client address it saw), or
/// "FAIL ..." ; `udp_port` sends a datagram from that fixed source port instead.
fn ask(lan: &Host, proto: &str, sport: u16) -> String {
    let script = match proto {
        "tcp" => "import socket\ns=socket.create_connection(('198.18.0.10',80),timeout=1)\nprint(s.recv(100).decode().strip())".to_string(),
        _ => format!("import socket\nu=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nu.bind(('0.0.0.0',{sport}))\nu.settimeout(1)\nu.sendto(b'x',('198.18.0.10',80))\nprint(u.recv(100).decode().strip())"),
    };
    // A datagram's reply must come from the address it went to (conntrack matches it), so
    // the server binds 198.18.0.10 rather than any address.
    let (ok, out, err) = lan.sh_status(&format!("python3 -c \"{script}\""));
    if ok {
        out.trim().to_string()
    } else {
        format!("FAIL {}", err.lines().last().unwrap_or(""))
    }
}

netns_test! {
    fn issue_12_two_uplinks_fail_over_to_wan2_masqueraded_and_back_after_rise() {
        let mut internet = Internet(Vec::new(), Vec::new());
        let mut t = Topology::new();
        t.add_host(
            "lan",
            Link {
                router_if: "lan0",
                router_addrs: &["10.0.0.1/24"],
                host_if: "eth0",
                host_addrs: &["10.0.0.2/24"],
                host_routes: &["default via 10.0.0.1"],
            },
        );
        isp(&mut t, 1, "wan1", "203.0.113", &mut internet);
        isp(&mut t, 2, "wan2", "198.51.100", &mut internet);
        t.forwarding();
        // Loose reverse-path filtering (the usual distribution setting): a strict one would
        // drop the probe's replies on wan1 while the main table points at wan2.
        sh("sysctl -qw net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.wan1.rp_filter=2 net.ipv4.conf.wan2.rp_filter=2");
        for (i, name) in [(0, "inet1"), (1, "inet2")] {
            for port in [80, 53] {
                let child = serve_in(&t, &internet.0[i], name, port);
                internet.1.push(child);
            }
            let ns = internet.0[i].clone();
            wait_until("the internet servers to listen", Duration::from_secs(10), || {
                sh(&format!("ip netns exec {ns} ss -ltnH")).matches("LISTEN").count() == 2
            });
        }
        let lan = t.host("lan");
        let d = Daemon::start("failover", &config());
        let isp1 = t.host("isp1");

        // Up: new connections leave through wan1, masqueraded to its address.
        let first = wait_until("traffic through wan1", Duration::from_secs(10), || {
            ask(lan, "tcp", 0) == "inet1 203.0.113.2"
        });
        eprintln!("first connection through wan1 after {first:?}");
        assert_eq!(ask(lan, "udp", 40000), "inet1 203.0.113.2", "a UDP flow through wan1");
        wait_until("track up metric", Duration::from_secs(5), || {
            d.metric("edgenetd_track_up", &[("track", "wan1")]) == Some(1.0)
        });
        // The probe's private table and rule are installed and owned.
        let rules = sh("ip rule show");
        assert!(rules.contains("fwmark 0xe0d0000 lookup 32000"), "{rules}");
        let table = sh("ip route show table 32000");
        assert!(table.contains("198.18.0.53 via 203.0.113.1 dev wan1"), "{table}");

        // The wan1 ISP stops answering the probe target (it still forwards everything else).
        isp1.sh("ip route add blackhole 198.18.0.53/32");
        let failed_at = Instant::now();
        let budget = Duration::from_millis(FALL * INTERVAL_MS + 300) + Duration::from_secs(2);
        let took = wait_until("new connections through wan2", budget, || {
            ask(lan, "tcp", 0) == "inet2 198.51.100.2"
        });
        eprintln!("failover after {took:?} (budget {budget:?})");
        assert!(!sh("ip route show").contains("metric 10"), "wan1's default is withdrawn");
        // The same UDP flow (same source port) was masqueraded to wan1: its entry was flushed,
        // so its next datagram is a new flow through wan2.
        assert_eq!(ask(lan, "udp", 40000), "inet2 198.51.100.2", "flushed and re-masqueraded");
        assert_eq!(d.metric("edgenetd_track_up", &[("track", "wan1")]), Some(0.0));
        assert_eq!(d.metric("edgenetd_track_transitions_total", &[("track", "wan1")]), Some(1.0));
        let (status, body) = d.get("/healthz");
        assert_eq!(status, 200, "a down track is not a dead daemon: {body}");
        let health: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(health["tracks"]["wan1"]["up"], false, "{body}");
        assert_eq!(health["tracks"]["wan1"]["live"], true, "{body}");
        assert!(health["tracks"]["wan1"]["lastError"].as_str().is_some_and(|e| e.contains("timeout")), "{body}");
        assert_eq!(health["controllers"]["track"]["live"], true, "{body}");
        // Still down while the target stays silent (the probe really takes wan1, not the
        // default through wan2 where the target answers).
        std::thread::sleep(Duration::from_millis(3 * INTERVAL_MS));
        assert_eq!(ask(lan, "tcp", 0), "inet2 198.51.100.2");
        // A reload that changes something else keeps the track down: no flap, no restore.
        d.reload(&format!(
            "{}\n[[route]]\nto = \"10.77.0.0/16\"\nvia = \"198.51.100.1\"\ndev = \"wan2\"\n",
            config()
        ));
        wait_until("the reloaded route", Duration::from_secs(5), || {
            sh("ip route show").contains("10.77.0.0/16")
        });
        assert!(!sh("ip route show").contains("metric 10"), "still withdrawn after the reload");
        assert_eq!(d.metric("edgenetd_track_transitions_total", &[("track", "wan1")]), Some(1.0));
        assert_eq!(ask(lan, "tcp", 0), "inet2 198.51.100.2");

        // wan1 answers again: after `rise` good probes new connections use wan1 again.
        isp1.sh("ip route del blackhole 198.18.0.53/32");
        let budget = Duration::from_millis(RISE * INTERVAL_MS + 300) + Duration::from_secs(2);
        let back = wait_until("new connections through wan1 again", budget, || {
            ask(lan, "tcp", 0) == "inet1 203.0.113.2"
        });
        eprintln!("back on wan1 after {back:?} (budget {budget:?}); failed at {:?} ago", failed_at.elapsed());
        assert_eq!(d.metric("edgenetd_track_transitions_total", &[("track", "wan1")]), Some(2.0));
        assert!(d.log().contains("track wan1: down"), "one log line per transition");
    }
}

netns_test! {
    #[cfg(feature = "fault-injection")]
    fn issue_12_a_wedged_prober_is_caught_and_named_by_healthz() {
        let _net = Topology::with_veth("r0", "r1", &["192.0.2.1/24"]);
        let config = "[controller.route]\nperiod = \"1h\"\nsync_budget = \"30s\"\n\n\
            [[track]]\nname = \"wan1\"\ncheck = \"tcp\"\ntarget = \"192.0.2.2:53\"\nvia = \"192.0.2.2\"\n\
            dev = \"r0\"\ninterval = \"200ms\"\ntimeout = \"100ms\"\ninject_hang = true\n";
        let d = Daemon::start("failover-wedge", config);
        let healthz = || {
            let (status, body) = d.get("/healthz");
            (status, serde_json::from_str::<serde_json::Value>(&body).unwrap())
        };
        wait_until("the track entry, live", Duration::from_secs(5), || {
            let (status, h) = healthz();
            status == 200 && h["controllers"]["track"]["live"] == true
        });
        // The prober hangs after its first probe: within its window (0.3 s + 2 s slack) plus
        // the entry's own (that + 2 s) the daemon is not live, and /healthz says which track.
        let took = wait_until("the wedge to be caught", Duration::from_secs(10), || {
            let (status, h) = healthz();
            status != 200 && h["controllers"]["track"]["live"] == false
        });
        eprintln!("wedged prober caught after {took:?}");
        let (_, h) = healthz();
        assert_eq!(h["live"], false, "{h}");
        assert_eq!(h["tracks"]["wan1"]["live"], false, "{h}");
        assert_eq!(h["controllers"]["route"]["live"], true, "the route loop itself is fine: {h}");
        assert!(d.log().contains("track: prober(s) wedged: wan1"), "{}", d.log());
    }
}
