//! Support for the policy kernel tests: a lan host, the router (the test's own namespace) and
//! a wan host joined by veth pairs; small python3 servers and clients for real TCP, UDP and
//! ICMP traffic; a policy controller driven sync by sync.
#![allow(dead_code)]

use std::time::Duration;

use crate::common::netns::{Host, sh, sh_status};
use edgenetd::config::{self, DesiredState};
use edgenetd::controller::policy::PolicyController;
use edgenetd::controller::{Controller, NoProgress, SyncError, SyncReport, trigger};

/// TCP/UDP servers that answer with the client's address; a TCP connection then echoes.
pub const SERVER: &str = r#"
import socket, sys, threading
kind, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if len(sys.argv) > 3 and sys.argv[3] == '6' else socket.AF_INET
any_addr = '::' if fam == socket.AF_INET6 else '0.0.0.0'
if kind == 'tcp':
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((any_addr, port)); s.listen(64)
    def serve(c, a):
        try:
            c.sendall((a[0] + '\n').encode())
            while True:
                d = c.recv(100)
                if not d: break
                c.sendall(d)
        except OSError: pass
        finally: c.close()
    while True:
        c, a = s.accept()
        threading.Thread(target=serve, args=(c, a), daemon=True).start()
else:
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((any_addr, port))
    while True:
        d, a = s.recvfrom(100)
        s.sendto((a[0] + '\n').encode(), a)
"#;

/// `client.py tcp|udp|ping HOST [PORT] [SRC]`: prints the server's first line (the address it
/// saw), `PONG`, or `FAIL:<reason>`.
pub const CLIENT: &str = r#"
import socket, sys, struct, time
kind, host = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
src = sys.argv[4] if len(sys.argv) > 4 else None
try:
    if kind == 'tcp':
        fam = socket.AF_INET6 if ':' in host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(1.5)
        if src: s.bind((src, 0))
        s.connect((host, port))
        print(s.makefile().readline().strip())
    elif kind == 'udp':
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.5)
        if src: s.bind((src, 0))
        s.sendto(b'x', (host, port))
        print(s.recvfrom(100)[0].decode().strip())
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(1.5)
        def csum(b):
            b += b'\0' * (len(b) % 2)
            t = sum(struct.unpack('!%dH' % (len(b) // 2), b)); t = (t >> 16) + (t & 0xffff); t += t >> 16
            return ~t & 0xffff
        hdr = struct.pack('!BBHHH', 8, 0, 0, 0x4242, 1) + b'edgenetd'
        hdr = hdr[:2] + struct.pack('!H', csum(hdr)) + hdr[4:]
        s.sendto(hdr, (host, 0))
        end = time.time() + 1.5
        while True:
            s.settimeout(max(0.01, end - time.time()))
            d, a = s.recvfrom(200)
            if a[0] == host and d[20] == 0: print('PONG'); break
except Exception as e:
    print('FAIL:' + str(e))
"#;

/// Writes the helper scripts to /tmp (per process).
pub fn scripts() -> (String, String) {
    let dir = format!("/tmp/edgenetd-policy-test-{}", std::process::id());
    std::fs::create_dir_all(&dir).unwrap();
    let server = format!("{dir}/server.py");
    let client = format!("{dir}/client.py");
    std::fs::write(&server, SERVER).unwrap();
    std::fs::write(&client, CLIENT).unwrap();
    (server, client)
}

/// lan host (10.0.0.2 and 10.0.0.10 on `eth0`, router 10.0.0.1 on `veth-lan`) and wan host
/// (192.0.2.2 and 192.0.2.3 on `eth0`, router 192.0.2.1 on `veth-wan`); forwarding on.
pub struct Topology {
    /// The lan host.
    pub lan: Host,
    /// The wan host.
    pub wan: Host,
    /// Path of server.py.
    pub server: String,
    /// Path of client.py.
    pub client: String,
    children: std::cell::RefCell<Vec<std::process::Child>>,
}

impl Topology {
    /// Builds the topology.
    pub fn new() -> Topology {
        let lan = Host::new("lan");
        let wan = Host::new("wan");
        lan.link_to_router("eth0", "10.0.0.2/24", "veth-lan", "10.0.0.1/24");
        lan.sh("ip addr add 10.0.0.10/24 dev eth0 && ip route add default via 10.0.0.1");
        wan.link_to_router("eth0", "192.0.2.2/24", "veth-wan", "192.0.2.1/24");
        // The wan host may route to the lan (to prove forwarding from wan is filtered), but
        // replies from lan hosts only come back when the router masquerades.
        wan.sh("ip addr add 192.0.2.3/24 dev eth0 && ip route add 10.0.0.0/24 via 192.0.2.1");
        sh("sysctl -qw net.ipv4.ip_forward=1");
        // IPv6 too: lan fd00::2/64 (router fd00::1), wan 2001:db8::2/64 (router 2001:db8::1).
        sh("sysctl -qw net.ipv6.conf.all.forwarding=1");
        sh(
            "ip addr add fd00::1/64 dev veth-lan nodad && ip addr add 2001:db8::1/64 dev veth-wan nodad",
        );
        lan.sh("ip addr add fd00::2/64 dev eth0 nodad && ip -6 route add default via fd00::1");
        wan.sh("ip addr add 2001:db8::2/64 dev eth0 nodad");
        let (server, client) = scripts();
        Topology {
            lan,
            wan,
            server,
            client,
            children: Default::default(),
        }
    }

    /// Starts a server in `host` (None = the router) and waits until it listens.
    pub fn serve(&self, host: Option<&Host>, kind: &str, port: u16) {
        self.serve_family(host, kind, port, "4")
    }

    /// Like [`Topology::serve`]; family "6" listens on IPv6.
    pub fn serve_family(&self, host: Option<&Host>, kind: &str, port: u16, family: &str) {
        let cmd = format!("exec python3 {} {kind} {port} {family}", self.server);
        let child = match host {
            Some(h) => h.spawn(&cmd),
            None => std::process::Command::new("sh")
                .args(["-c", &cmd])
                .stdin(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        };
        self.children.borrow_mut().push(child);
        let flag = if kind == "tcp" { "-ltn" } else { "-lun" };
        for _ in 0..100 {
            let probe = format!("ss -H {flag} 'sport = :{port}'");
            let (_, out, _) = match host {
                Some(h) => h.sh_status(&probe),
                None => sh_status(&probe),
            };
            if !out.trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        panic!("server {kind}:{port} did not start");
    }

    /// Runs the client in `host` (None = the router); returns its one-line answer.
    pub fn connect(&self, host: Option<&Host>, kind: &str, to: &str, port: u16) -> String {
        self.connect_from(host, kind, to, port, None)
    }

    /// Like [`Topology::connect`] with a source address.
    pub fn connect_from(
        &self,
        host: Option<&Host>,
        kind: &str,
        to: &str,
        port: u16,
        src: Option<&str>,
    ) -> String {
        let cmd = format!(
            "python3 {} {kind} {to} {port} {}",
            self.client,
            src.unwrap_or("")
        );
        let out = match host {
            Some(h) => h.sh(&cmd),
            None => sh(&cmd),
        };
        out.trim().to_string()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for c in self.children.get_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(dir) = std::path::Path::new(&self.server).parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A policy controller driven sync by sync, with the config given as TOML text.
pub struct Driver {
    /// The controller.
    pub controller: PolicyController,
}

impl Driver {
    /// A fresh controller (its netlink socket opens at the first sync, in this namespace).
    pub fn new() -> Driver {
        let (t, _rx) = trigger();
        Driver {
            controller: PolicyController::new(t, edgenetd::dataplane::nft::GenerationWatch::new()),
        }
    }

    /// One sync against `toml`.
    pub fn sync(&mut self, toml: &str) -> Result<SyncReport, SyncError> {
        let desired = load(toml);
        smol::block_on(self.controller.sync(&desired, &NoProgress))
    }
}

/// Loads a config from text, panicking with the rendered errors.
pub fn load(toml: &str) -> DesiredState {
    config::load_str(&[("edgenetd.toml", toml)]).unwrap_or_else(|e| panic!("{e}"))
}

/// `nft -j list table inet edgenetd-policy` as JSON objects (rules with handles etc.).
pub fn policy_json() -> serde_json::Value {
    serde_json::from_str(&sh("nft -j list table inet edgenetd-policy")).unwrap()
}

/// Handles of every rule in the policy table, in order.
pub fn rule_handles() -> Vec<u64> {
    policy_json()["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o.get("rule"))
        .map(|r| r["handle"].as_u64().unwrap())
        .collect()
}

/// The home-router policy most tests start from.
pub const HOME: &str = r#"
[policy]
input = "drop"
forward_default = "drop"
output = "accept"

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]

[policy.zone.wan]
interfaces = ["veth-wan"]
masquerade = true

[policy.set.blocklist]
type = "ipv4"
elements = ["203.0.113.0/24"]

[[policy.rule]]
name = "drop-blocklist"
from = "@blocklist"
action = "drop"

[[policy.rule]]
name = "ssh-from-lan"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22, "8000-8100"]
action = "accept"

[[policy.rule]]
name = "dns-from-lan"
from = "lan"
to = "self"
protocol = "udp"
ports = [53]
action = "accept"

[[policy.rule]]
name = "ping-from-lan"
from = "lan"
to = "self"
protocol = "icmp"
icmp_types = ["echo-request"]
action = "accept"

[[policy.rule]]
name = "telnet-reject"
to = "self"
protocol = "tcp"
ports = [23]
action = "reject"

[[policy.forward]]
from = "lan"
to = "wan"

[[policy.port_forward]]
name = "web"
from = "wan"
protocol = "tcp"
port = 8080
to = "10.0.0.10:80"
"#;
