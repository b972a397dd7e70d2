//! The service controller with real packets: a client, the router (the test's namespace) and
//! three backend hosts with real TCP and UDP servers, joined by veth pairs. Each test builds
//! its topology in fresh namespaces and drives `ServiceController::sync` directly.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::controller::{Driver, load};
use common::service_lab::{Family, client_and_three_backends};
use common::shell::sh;
use common::topology::{Host, ServerId, Topology};
use common::wait::wait_until;
use edgenetd::controller::service::ServiceController;
use edgenetd::dataplane::nft::GenerationWatch;
use edgenetd::sync::SyncReport;

/// Client `cl`, the router (this namespace) and three backends b1..b3, each running a server
/// on port 8080 that answers with its name; a service controller driven sync by sync.
struct Lab {
    /// The namespaces and servers.
    net: Topology,
    /// The backends' servers (b1..b3).
    servers: Vec<ServerId>,
    /// The controller under test.
    ctrl: Driver<ServiceController>,
    /// The process's nftables watch, shared with any other controller a test builds.
    watch: GenerationWatch,
}

impl Lab {
    fn new() -> Lab {
        let (net, servers) = client_and_three_backends(Family::Dual);
        let watch = GenerationWatch::new();
        Lab {
            net,
            servers,
            ctrl: Driver::service_sharing(&watch),
            watch,
        }
    }

    fn client(&self) -> &Host {
        self.net.host("cl")
    }

    fn sync(&mut self, toml: &str) -> SyncReport {
        self.ctrl.sync(toml).expect("sync")
    }

    /// `n` connections (or datagrams) from the client: answers per backend name.
    fn hits(&self, proto: &str, host: &str, port: u16, n: u32) -> BTreeMap<String, u32> {
        self.net.hits(self.client(), proto, host, port, n)
    }
}

fn share(h: &BTreeMap<String, u32>, name: &str) -> f64 {
    let total: u32 = h.values().sum();
    *h.get(name).unwrap_or(&0) as f64 / total as f64
}

netns_test! {
    fn tcp_spreads_over_equal_and_weighted_backends() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
"#);
        let h = t.hits("tcp", "10.96.0.10", 80, 300);
        eprintln!("equal: {h:?}");
        assert_eq!(h.values().sum::<u32>(), 300, "{h:?}");
        for b in ["b1", "b2"] {
            let s = share(&h, b);
            assert!((0.35..=0.65).contains(&s), "{b} got {s}: {h:?}");
        }
        let r = t.sync(r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = [{ address = "10.0.1.2:8080", weight = 1 }, { address = "10.0.2.2:8080", weight = 3 }]
"#);
        assert!(r.changes > 0 && r.changes <= 8, "this service's 2 slots and the 2 more of 1:3 at most: {r:?}");
        let h = t.hits("tcp", "10.96.0.10", 80, 300);
        eprintln!("1:3: {h:?}");
        let s = share(&h, "b2");
        assert!((0.65..=0.85).contains(&s), "b2 got {s}: {h:?}");
        // A no-op resync writes nothing.
        t.sync(r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = [{ address = "10.0.1.2:8080", weight = 1 }, { address = "10.0.2.2:8080", weight = 3 }]
"#);
        assert_eq!(t.ctrl.controller.last_writes(), 0);
    }
}

netns_test! {
    fn udp_is_answered_by_both_backends() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
"#);
        let h = t.hits("udp", "10.96.0.53", 53, 100);
        eprintln!("udp: {h:?}");
        assert!(h.get("b1").copied().unwrap_or(0) > 10 && h.get("b2").copied().unwrap_or(0) > 10, "{h:?}");
    }
}

netns_test! {
    fn source_ip_affinity_keeps_one_backend() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "sticky"
address = "10.96.0.12"
port = 80
affinity = "source-ip"
backends = ["10.0.1.2:8080", "10.0.2.2:8080", "10.0.3.2:8080"]
"#);
        let h = t.hits("tcp", "10.96.0.12", 80, 50);
        eprintln!("affinity: {h:?}");
        assert_eq!(h.len(), 1, "all 50 on one backend: {h:?}");
        assert_eq!(h.values().sum::<u32>(), 50);
    }
}

const TWO: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
"#;

netns_test! {
    fn removed_backend_drains_gracefully() {
        let mut t = Lab::new();
        t.sync(TWO);
        // Open connections until one lands on b1, and keep it.
        let script = r#"
import socket, time, sys
for i in range(50):
    s = socket.create_connection(("10.96.0.10", 80), timeout=2)
    if s.recv(100).decode().strip() == "b1": break
    s.close()
print("ready", flush=True)
sys.stdin.readline()
for i in range(3):
    s.sendall(b"ping\n"); print(s.recv(100).decode().strip(), flush=True); time.sleep(0.2)  # paced: the connection keeps flowing over time
"#;
        let hold = t.net.script("hold.py", script);
        let mut child = t.client().command("python3").arg(&hold)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn().unwrap();
        use std::io::{BufRead, Write};
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        let reload = Instant::now();
        t.sync(r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.2.2:8080"]
"#);
        let h = t.hits("tcp", "10.96.0.10", 80, 30);
        assert!(reload.elapsed() < Duration::from_secs(10));
        assert_eq!(h.get("b2"), Some(&30), "new connections avoid b1: {h:?}");
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let mut echoes = Vec::new();
        for _ in 0..3 {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            echoes.push(l.trim().to_string());
        }
        assert!(child.wait().unwrap().success());
        assert_eq!(echoes, vec!["b1:ping"; 3], "the old connection keeps flowing");
    }
}

netns_test! {
    fn no_backend_rejects_or_drops_as_configured() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "empty-reject"
address = "10.96.0.13"
port = 80
backends = []

[[service]]
name = "empty-drop"
address = "10.96.0.14"
port = 80
backends = []
when_empty = "drop"
"#);
        // "refused" is a reset received before the client's timeout, so it was refused at
        // once; a wall-clock bound here would time the Python client's start on a loaded
        // machine, not the kernel.
        let h = t.hits("tcp", "10.96.0.13", 80, 1);
        assert_eq!(h.get("refused"), Some(&1), "{h:?}");
        let h = t.hits("tcp", "10.96.0.14", 80, 1);
        assert_eq!(h.get("timeout"), Some(&1), "{h:?}");
    }
}

netns_test! {
    fn router_own_traffic_is_balanced_via_the_output_hook() {
        let mut t = Lab::new();
        // A router has a route for the VIP (usually its default route).
        sh("ip route add default via 192.168.10.2");
        t.sync(TWO);
        let h = t.net.hits(t.net.router(), "tcp", "10.96.0.10", 80, 100);
        eprintln!("output: {h:?}");
        assert!(h.get("b1").copied().unwrap_or(0) > 20 && h.get("b2").copied().unwrap_or(0) > 20, "{h:?}");
    }
}

netns_test! {
    fn ipv6_vip_with_ipv6_backends() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "web6"
address = "fd96::10"
port = 80
backends = ["[fd01::2]:8080", "[fd02::2]:8080"]
"#);
        let h = t.hits("tcp", "fd96::10", 80, 100);
        eprintln!("v6: {h:?}");
        assert!(h.get("b1").copied().unwrap_or(0) > 20 && h.get("b2").copied().unwrap_or(0) > 20, "{h:?}");
    }
}

netns_test! {
    fn masquerade_makes_the_router_the_source() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "plain"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080"]

[[service]]
name = "masq"
address = "10.96.0.11"
port = 80
backends = ["10.0.2.2:8080"]
masquerade = true
"#);
        let peer = |vip: &str| {
            t.client().sh(&format!("python3 -c 'import socket; s=socket.create_connection((\"{vip}\",80),timeout=2); s.recv(100); s.sendall(b\"peer?\\n\"); print(s.recv(100).decode().strip())'"))
        };
        assert_eq!(peer("10.96.0.10").trim(), "b1:::ffff:192.168.10.2");
        assert_eq!(peer("10.96.0.11").trim(), "b2:::ffff:10.0.2.1");
    }
}

netns_test! {
    fn deleted_table_is_restored_and_foreign_table_untouched() {
        let mut t = Lab::new();
        sh("nft add table inet other && nft add chain inet other c '{ type filter hook input priority 10; }' && nft add rule inet other c tcp dport 9 counter drop");
        let foreign = sh("nft list table inet other");
        t.sync(TWO);
        sh("nft delete table inet edgenetd-service");
        let r = t.sync(TWO);
        assert!(r.drift_repairs >= 1, "{r:?}");
        let h = t.hits("tcp", "10.96.0.10", 80, 40);
        assert_eq!(h.values().sum::<u32>(), 40, "{h:?}");
        // An element deleted by hand is put back too.
        sh("nft delete element inet edgenetd-service backends4 '{ 10.96.0.10 . tcp . 80 . 0x00000001 }'");
        let r = t.sync(TWO);
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        let listed = sh("nft -j list map inet edgenetd-service backends4");
        let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let elems = v["nftables"][1]["map"]["elem"].as_array().unwrap().len();
        assert_eq!(elems, 2);
        assert_eq!(sh("nft list table inet other"), foreign);
    }
}

netns_test! {
    fn removed_udp_backend_loses_its_conntrack_entries() {
        let mut t = Lab::new();
        t.sync(r#"
[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
"#);
        // One client socket that keeps its source port: its flow is pinned to one backend.
        let script = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.bind(("0.0.0.0", 40000))
s.sendto(b"hi", ("10.96.0.53", 53)); print(s.recv(100).decode().strip())
"#;
        let udp1 = t.net.script("udp1.py", script);
        let first = t.client().sh(&format!("python3 {udp1}")).trim().to_string();
        let (keep, gone) = if first == "b1" { ("10.0.2.2:8080", "b2") } else { ("10.0.1.2:8080", "b1") };
        let _ = gone;
        t.sync(&format!(r#"
[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["{keep}"]
"#));
        let second = t.client().sh(&format!("python3 {udp1}")).trim().to_string();
        assert_ne!(first, second, "the same flow moves off the removed backend");
    }
}

netns_test! {
    #[cfg(feature = "fault-injection")]
    fn a_refused_service_never_keeps_the_others_from_working() {
        let mut t = Lab::new();
        let toml = format!("{TWO}\n[[service]]\nname = \"fault-reject-1\"\naddress = \"10.96.0.99\"\nport = 80\nbackends = [\"10.0.3.2:8080\"]\n");
        let desired = load(&toml);
        for round in 0..2 {
            let err = t.ctrl.sync_state(&desired).expect_err("the fault service fails");
            assert_eq!(err.failures.len(), 1, "round {round}: {err}");
            assert!(err.failures[0].object.contains("fault-reject-1"), "{err}");
            let h = t.hits("tcp", "10.96.0.10", 80, 20);
            assert_eq!(h.values().sum::<u32>(), 20, "round {round}: the other service works: {h:?}");
        }
    }
}

netns_test! {
    fn a_failed_backend_is_taken_out_and_back_in_by_health_checks() {
        let mut t = Lab::new();
        let toml = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
[service.health]
check = "tcp"
interval = "200ms"
timeout = "100ms"
rise = 1
fall = 2
"#;
        t.sync(toml);
        // Three probes seen by each backend: the first two (fall = 2) have finished.
        for (i, server) in t.servers[..2].iter().enumerate() {
            let router = format!("10.0.{}.1", i + 1);
            wait_until("three health probes at each backend", Duration::from_secs(5), || {
                t.net.connections(*server).iter().filter(|a| a.ends_with(&router)).count() >= 3
            });
        }
        assert!(t.ctrl.controller.down_backends().is_empty());
        // b1's server dies.
        t.net.stop(t.servers[0]);
        wait_until("b1 to be detected down", Duration::from_secs(5), || !t.ctrl.controller.down_backends().is_empty());
        assert_eq!(t.ctrl.controller.down_backends(), vec!["10.0.1.2:8080".parse().unwrap()]);
        t.sync(toml);
        let h = t.hits("tcp", "10.96.0.10", 80, 30);
        assert_eq!(h.get("b2"), Some(&30), "new connections avoid the failed backend: {h:?}");
        // It comes back.
        t.servers[0] = t.net.serve_named(t.net.host("b1"), "b1", 8080);
        wait_until("b1 to be detected up", Duration::from_secs(5), || t.ctrl.controller.down_backends().is_empty());
        t.sync(toml);
        let h = t.hits("tcp", "10.96.0.10", 80, 100);
        assert!(h.get("b1").copied().unwrap_or(0) > 20, "b1 is back: {h:?}");
    }
}

netns_test! {
    fn a_service_is_reachable_through_a_forward_drop_policy() {
        let mut t = Lab::new();
        let toml = r#"
[policy]
input = "drop"
forward = "drop"

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
"#;
        let d = load(toml);
        let mut policy = Driver::policy_sharing(&t.watch);
        policy.sync_state(&d).expect("policy sync");
        t.ctrl.sync_state(&d).expect("service sync");
        // Forwarding to a backend directly is dropped by the policy...
        let h = t.net.hits_within(t.client(), "tcp", "10.0.1.2", 8080, 1, 1.0);
        assert_eq!(h.get("timeout"), Some(&1), "direct: {h:?}");
        // ...but the service's DNATed connections pass.
        let h = t.hits("tcp", "10.96.0.10", 80, 40);
        assert_eq!(h.values().sum::<u32>(), 40, "via the VIP: {h:?}");
        assert!(h.contains_key("b1") && h.contains_key("b2"), "{h:?}");
    }
}
