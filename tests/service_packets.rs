//! The service controller with real packets: a client, the router (the test's namespace) and
//! three backend hosts with real TCP and UDP servers, joined by veth pairs. Each test builds
//! its topology in fresh namespaces and drives `ServiceController::sync` directly.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::netns::{Host, sh, sh_status};
use edgenetd::config::{self, DesiredState};
use edgenetd::controller::service::ServiceController;
use edgenetd::controller::{Controller, NoProgress, SyncReport, trigger};
use edgenetd::dataplane::nft::GenerationWatch;

const SERVER: &str = r#"
import socket, sys, threading, socketserver
name, port = sys.argv[1], int(sys.argv[2])
class T(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.sendall((name + "\n").encode())
        while True:
            d = s.recv(4096)
            if not d: return
            if d == b"peer?\n":
                s.sendall((name + ":" + self.client_address[0] + "\n").encode())
            else:
                s.sendall((name + ":" + d.decode()).encode())
class TS(socketserver.ThreadingTCPServer):
    address_family = socket.AF_INET6; allow_reuse_address = True; daemon_threads = True
class U(socketserver.BaseRequestHandler):
    def handle(self):
        d, s = self.request
        s.sendto((name + "\n").encode(), self.client_address)
class US(socketserver.UDPServer):
    address_family = socket.AF_INET6; allow_reuse_address = True
t = TS(("::", port), T); u = US(("::", port), U)
threading.Thread(target=u.serve_forever, daemon=True).start()
t.serve_forever()
"#;

const CLIENT: &str = r#"
import socket, sys, collections
proto, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 2
c = collections.Counter()
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
for i in range(n):
    try:
        if proto == 'tcp':
            s = socket.create_connection((host, port), timeout=timeout)
            c[s.recv(100).decode().strip()] += 1
        else:
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(timeout)
            s.sendto(b"hi", (host, port)); c[s.recv(100).decode().strip()] += 1
        s.close()
    except ConnectionRefusedError:
        c["refused"] += 1
    except socket.timeout:
        c["timeout"] += 1
    except OSError as e:
        c["error"] += 1
for k, v in sorted(c.items()):
    print(k, v)
"#;

/// Client, router (this namespace) and three backends b1..b3 with servers on port 8080.
struct Topo {
    client: Host,
    /// Kept so the backend namespaces live as long as the topology.
    _backends: Vec<Host>,
    /// The backends' servers (b1..b3).
    servers: Vec<std::process::Child>,
    dir: String,
    ctrl: ServiceController,
    /// The process's nftables watch, shared with any other controller a test builds.
    watch: GenerationWatch,
}

fn write_scripts() -> String {
    let dir = format!("/tmp/edgenetd-svc-test-{}", std::process::id());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(format!("{dir}/srv.py"), SERVER).unwrap();
    std::fs::write(format!("{dir}/cli.py"), CLIENT).unwrap();
    dir
}

impl Topo {
    fn new() -> Topo {
        let dir = write_scripts();
        sh("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1");
        let client = Host::new("cl");
        client.link_to_router("eth0", "192.168.10.2/24", "c0", "192.168.10.1/24");
        client.sh("ip addr add fd10::2/64 dev eth0 nodad && ip route add default via 192.168.10.1 && ip -6 route add default via fd10::1");
        sh("ip addr add fd10::1/64 dev c0 nodad");
        let mut backends = Vec::new();
        let mut servers = Vec::new();
        for i in 1..=3 {
            let b = Host::new(&format!("b{i}"));
            b.link_to_router(
                "eth0",
                &format!("10.0.{i}.2/24"),
                &format!("b{i}"),
                &format!("10.0.{i}.1/24"),
            );
            b.sh(&format!("ip addr add fd0{i}::2/64 dev eth0 nodad && ip route add default via 10.0.{i}.1 && ip -6 route add default via fd0{i}::1"));
            sh(&format!("ip addr add fd0{i}::1/64 dev b{i} nodad"));
            servers.push(b.spawn(&format!("exec python3 {dir}/srv.py b{i} 8080")));
            backends.push(b);
        }
        // Wait for the servers.
        for i in 1..=3 {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !sh_status(&format!(
                "python3 {dir}/cli.py tcp 10.0.{i}.2 8080 1 | grep -q b{i}"
            ))
            .0
            {
                assert!(Instant::now() < deadline, "backend b{i} did not start");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let (t, _rx) = trigger();
        std::mem::forget(_rx);
        let watch = GenerationWatch::new();
        Topo {
            client,
            _backends: backends,
            servers,
            dir,
            ctrl: ServiceController::new(t, watch.clone()),
            watch,
        }
    }

    fn sync(&mut self, toml: &str) -> SyncReport {
        let desired = desired(toml);
        smol::block_on(self.ctrl.sync(&desired, &NoProgress)).expect("sync")
    }

    /// `n` connections (or datagrams) from the client: answers per backend name.
    fn hits(&self, proto: &str, host: &str, port: u16, n: u32) -> BTreeMap<String, u32> {
        parse_hits(&self.client.sh(&format!(
            "python3 {}/cli.py {proto} {host} {port} {n}",
            self.dir
        )))
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn parse_hits(out: &str) -> BTreeMap<String, u32> {
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect()
}

fn desired(toml: &str) -> DesiredState {
    config::load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"))
}

fn share(h: &BTreeMap<String, u32>, name: &str) -> f64 {
    let total: u32 = h.values().sum();
    *h.get(name).unwrap_or(&0) as f64 / total as f64
}

netns_test! {
    fn tcp_spreads_over_equal_and_weighted_backends() {
        let mut t = Topo::new();
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
        assert!(r.changes > 0 && r.changes <= 32, "this service's 16 slots at most: {r:?}");
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
        assert_eq!(t.ctrl.last_writes(), 0);
    }
}

netns_test! {
    fn udp_is_answered_by_both_backends() {
        let mut t = Topo::new();
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
        let mut t = Topo::new();
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
        let mut t = Topo::new();
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
    s.sendall(b"ping\n"); print(s.recv(100).decode().strip(), flush=True); time.sleep(0.2)
"#;
        std::fs::write(format!("{}/hold.py", t.dir), script).unwrap();
        let mut child = std::process::Command::new("ip")
            .args(["netns", "exec", &t.client.name, "python3", &format!("{}/hold.py", t.dir)])
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
        let mut t = Topo::new();
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
        let start = Instant::now();
        let h = t.hits("tcp", "10.96.0.13", 80, 1);
        assert_eq!(h.get("refused"), Some(&1), "{h:?}");
        assert!(start.elapsed() < Duration::from_secs(1), "refused at once");
        let h = t.hits("tcp", "10.96.0.14", 80, 1);
        assert_eq!(h.get("timeout"), Some(&1), "{h:?}");
    }
}

netns_test! {
    fn router_own_traffic_is_balanced_via_the_output_hook() {
        let mut t = Topo::new();
        // A router has a route for the VIP (usually its default route).
        sh("ip route add default via 192.168.10.2");
        t.sync(TWO);
        let h = parse_hits(&sh(&format!("python3 {}/cli.py tcp 10.96.0.10 80 100", t.dir)));
        eprintln!("output: {h:?}");
        assert!(h.get("b1").copied().unwrap_or(0) > 20 && h.get("b2").copied().unwrap_or(0) > 20, "{h:?}");
    }
}

netns_test! {
    fn ipv6_vip_with_ipv6_backends() {
        let mut t = Topo::new();
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
        let mut t = Topo::new();
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
            t.client.sh(&format!("python3 -c 'import socket; s=socket.create_connection((\"{vip}\",80),timeout=2); s.recv(100); s.sendall(b\"peer?\\n\"); print(s.recv(100).decode().strip())'"))
        };
        assert_eq!(peer("10.96.0.10").trim(), "b1:::ffff:192.168.10.2");
        assert_eq!(peer("10.96.0.11").trim(), "b2:::ffff:10.0.2.1");
    }
}

netns_test! {
    fn deleted_table_is_restored_and_foreign_table_untouched() {
        let mut t = Topo::new();
        sh("nft add table inet other && nft add chain inet other c '{ type filter hook input priority 10; }' && nft add rule inet other c tcp dport 9 counter drop");
        let foreign = sh("nft list table inet other");
        t.sync(TWO);
        sh("nft delete table inet edgenetd-service");
        let r = t.sync(TWO);
        assert!(r.drift_repairs >= 1, "{r:?}");
        let h = t.hits("tcp", "10.96.0.10", 80, 40);
        assert_eq!(h.values().sum::<u32>(), 40, "{h:?}");
        // An element deleted by hand is put back too.
        sh("nft delete element inet edgenetd-service backends4 '{ 10.96.0.10 . tcp . 80 . 0x00000003 }'");
        let r = t.sync(TWO);
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        let listed = sh("nft -j list map inet edgenetd-service backends4");
        let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let elems = v["nftables"][1]["map"]["elem"].as_array().unwrap().len();
        assert_eq!(elems, 16);
        assert_eq!(sh("nft list table inet other"), foreign);
    }
}

netns_test! {
    fn removed_udp_backend_loses_its_conntrack_entries() {
        let mut t = Topo::new();
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
        std::fs::write(format!("{}/udp1.py", t.dir), script).unwrap();
        let first = t.client.sh(&format!("python3 {}/udp1.py", t.dir)).trim().to_string();
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
        let second = t.client.sh(&format!("python3 {}/udp1.py", t.dir)).trim().to_string();
        assert_ne!(first, second, "the same flow moves off the removed backend");
    }
}

netns_test! {
    #[cfg(feature = "fault-injection")]
    fn a_refused_service_never_keeps_the_others_from_working() {
        let mut t = Topo::new();
        let toml = format!("{TWO}\n[[service]]\nname = \"fault-reject-1\"\naddress = \"10.96.0.99\"\nport = 80\nbackends = [\"10.0.3.2:8080\"]\n");
        let desired = desired(&toml);
        for round in 0..2 {
            let err = smol::block_on(t.ctrl.sync(&desired, &NoProgress)).expect_err("the fault service fails");
            assert_eq!(err.failures.len(), 1, "round {round}: {err}");
            assert!(err.failures[0].object.contains("fault-reject-1"), "{err}");
            let h = t.hits("tcp", "10.96.0.10", 80, 20);
            assert_eq!(h.values().sum::<u32>(), 20, "round {round}: the other service works: {h:?}");
        }
    }
}

netns_test! {
    fn a_failed_backend_is_taken_out_and_back_in_by_health_checks() {
        let mut t = Topo::new();
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
        std::thread::sleep(Duration::from_millis(500));
        assert!(t.ctrl.down_backends().is_empty());
        // b1's server dies.
        t.servers[0].kill().unwrap();
        t.servers[0].wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while t.ctrl.down_backends().is_empty() {
            assert!(Instant::now() < deadline, "b1 never detected down");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(t.ctrl.down_backends(), vec!["10.0.1.2:8080".parse().unwrap()]);
        t.sync(toml);
        let h = t.hits("tcp", "10.96.0.10", 80, 30);
        assert_eq!(h.get("b2"), Some(&30), "new connections avoid the failed backend: {h:?}");
        // It comes back.
        t.servers[0] = t._backends[0].spawn(&format!("exec python3 {}/srv.py b1 8080", t.dir));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !t.ctrl.down_backends().is_empty() {
            assert!(Instant::now() < deadline, "b1 never detected up");
            std::thread::sleep(Duration::from_millis(50));
        }
        t.sync(toml);
        let h = t.hits("tcp", "10.96.0.10", 80, 100);
        assert!(h.get("b1").copied().unwrap_or(0) > 20, "b1 is back: {h:?}");
    }
}

netns_test! {
    fn a_service_is_reachable_through_a_forward_drop_policy() {
        use edgenetd::controller::policy::PolicyController;
        let mut t = Topo::new();
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
        let d = desired(toml);
        let (tr, rx) = trigger();
        std::mem::forget(rx);
        let mut policy = PolicyController::new(tr, t.watch.clone());
        smol::block_on(policy.sync(&d, &NoProgress)).expect("policy sync");
        smol::block_on(t.ctrl.sync(&d, &NoProgress)).expect("service sync");
        // Forwarding to a backend directly is dropped by the policy...
        let h = parse_hits(&t.client.sh(&format!("python3 {}/cli.py tcp 10.0.1.2 8080 1 1", t.dir)));
        assert_eq!(h.get("timeout"), Some(&1), "direct: {h:?}");
        // ...but the service's DNATed connections pass.
        let h = t.hits("tcp", "10.96.0.10", 80, 40);
        assert_eq!(h.values().sum::<u32>(), 40, "via the VIP: {h:?}");
        assert!(h.contains_key("b1") && h.contains_key("b2"), "{h:?}");
    }
}
