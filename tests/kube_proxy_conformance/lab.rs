//! The conformance lab: the test's namespace is the node (`edge-1`, 192.168.0.2, the daemon
//! runs there fed by the fake API server on 127.0.0.1), and around it, joined by veth pairs:
//!
//! - **local pods**, each in a namespace of its own on a veth of the node (a CNI in routed
//!   mode: the node's end holds 169.254.1.1 and fe80::1, the pod's default gateway; the node
//!   routes the pod's /32 and /128 to the veth). Each runs an endpoint and, when a row uses
//!   it as a client, an agent;
//! - **node2**, standing for another node: every remote endpoint address is on its loopback,
//!   routed by the node via 192.168.100.2;
//! - **ext**, the LAN side (192.168.0.100): the external clients 203.0.113.2 (inside the
//!   upstream tests' load balancer source range), 203.0.113.130 (outside it) and
//!   2600:5200::1;
//! - **inet**, the node's default route, which answers for the cluster IP, external IP and
//!   load balancer prefixes as "inet": a packet the node should have dropped or rejected but
//!   forwarded is seen as leaked, not as a timeout.
//!
//! The node itself also answers on the node ports ("node"), so a packet that reaches the node
//! without being proxied is seen as such. Every address here, public-looking ones included,
//! exists only inside these namespaces.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::daemon::Daemon;
use crate::common::fake_apiserver::FakeApiServer;
use crate::common::kube;
use crate::common::scratch::ScratchDir;
use crate::common::shell::{sh, sh_status};
use crate::common::topology::{Host, Link, Topology};
use crate::common::wait::poll_for;

use super::objects;

const ENDPOINT: &str = include_str!("scripts/endpoint.py");
const AGENT: &str = include_str!("scripts/agent.py");

/// The ports every endpoint, node2 and inet answer on (TCP and UDP): the target ports of
/// every case.
pub const ENDPOINT_PORTS: &[u16] = &[53, 80, 81, 100, 101, 5353, 8080, 8443];
/// The ports the node itself answers on: the node ports of every case, and 80 (for a packet
/// to a node address that nothing proxied).
const NODE_PORTS: &[u16] = &[80, 3001, 3002, 3003, 30080];

/// The port the default route's sink answers on, whatever port a packet was for.
const INET_PORT: u16 = 9;

/// This node's primary addresses (its Node's InternalIPs).
pub const NODE_IP: &str = "192.168.0.2";
/// The primary IPv6 address.
pub const NODE_IP6: &str = "2001:db8::1";
/// A secondary address of the node (upstream's `testNodeIPAlt`).
pub const NODE_IP_ALT: &str = "192.168.1.2";
/// A secondary IPv6 address (upstream's `testNodeIPv6Alt`).
pub const NODE_IP6_ALT: &str = "2001:db8:1::2";
/// An address of the node that services use as an external IP (upstream's `testExternalIP`).
pub const NODE_EXTERNAL_IP: &str = "192.168.99.11";
/// Upstream's `testExternalClient` (inside the source range 203.0.113.0/25).
pub const EXTERNAL_CLIENT: &str = "203.0.113.2";
/// Upstream's `testExternalClientBlocked` (outside it).
pub const EXTERNAL_CLIENT_BLOCKED: &str = "203.0.113.130";
/// The IPv6 external client of upstream's TestNodePorts.
pub const EXTERNAL_CLIENT6: &str = "2600:5200::1";

/// How long one change may take to reach the kernel.
const SETTLE: Duration = Duration::from_secs(4);

/// A `[kubernetes]` key the suite sets (the contract's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// `service_cidrs`.
    ServiceCidrs,
    /// `cluster_cidrs`.
    ClusterCidrs,
    /// `node_port_addresses`.
    NodePortAddresses,
}

impl Key {
    /// The key as written in the TOML.
    pub fn name(self) -> &'static str {
        match self {
            Key::ServiceCidrs => "service_cidrs",
            Key::ClusterCidrs => "cluster_cidrs",
            Key::NodePortAddresses => "node_port_addresses",
        }
    }
}

/// Upstream's fake proxier (`NewFakeProxier`): the local-traffic detector by 10.0.0.0/8
/// (fd00:10::/64), service CIDRs 172.30.0.0/16 (for IPv6 the prefix of the cluster IPs its
/// IPv6 cases use), node port addresses the primary node IP (edgenetd's default).
pub const UPSTREAM_KEYS: &[(Key, &str)] = &[
    (Key::ClusterCidrs, r#"["10.0.0.0/8", "fd00:10::/64"]"#),
    (
        Key::ServiceCidrs,
        r#"["172.30.0.0/16", "fd00:172:30::/112"]"#,
    ),
];

/// Which addresses live where, for one upstream test.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Local pods, each its own namespace: its addresses (one per family at most).
    pub pods: Vec<Vec<&'static str>>,
    /// Endpoint addresses on the other node.
    pub remote: Vec<&'static str>,
}

impl Spec {
    /// Local pods with one address each, and remote endpoints.
    pub fn new(pods: &[&'static str], remote: &[&'static str]) -> Spec {
        Spec {
            pods: pods.iter().map(|p| vec![*p]).collect(),
            remote: remote.to_vec(),
        }
    }
}

/// A long-running agent (scripts/agent.py) in one namespace.
pub struct Agent {
    /// The process.
    child: Child,
    /// Requests.
    stdin: ChildStdin,
    /// Answers.
    stdout: BufReader<ChildStdout>,
}

impl Agent {
    fn spawn(host: &Host, script: &str) -> Agent {
        let mut child = host
            .command("python3")
            .args(["-u", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Agent {
            child,
            stdin,
            stdout,
        }
    }

    /// One request; the attempts' answers.
    pub fn ask(&mut self, req: &Value) -> Vec<String> {
        writeln!(self.stdin, "{req}").expect("agent stdin");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("agent stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("agent answered {line:?}: {e}"))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a client address lives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// A pod namespace (its role).
    Pod(String),
    /// The external client namespace.
    Ext,
    /// The node itself.
    Node,
}

/// A config the daemon was started with, and the keys this build refused.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// The keys in force.
    pub keys: Vec<Key>,
    /// Keys the daemon's `check` refused, with its message.
    pub refused: Vec<(Key, String)>,
}

/// The node, its neighbours, the fake API server and the daemon.
pub struct Lab {
    /// Namespaces and links.
    pub net: Topology,
    /// The API server the daemon watches.
    pub fake: FakeApiServer,
    /// The daemon's cache directory.
    cache: ScratchDir,
    /// The scripts.
    scripts: ScratchDir,
    /// Where each client address lives.
    places: BTreeMap<IpAddr, Place>,
    /// Pod address -> its namespace's role.
    pod_roles: BTreeMap<IpAddr, String>,
    /// Long-running servers.
    servers: RefCell<BTreeMap<String, Child>>,
    /// Agents by place.
    agents: RefCell<BTreeMap<String, Agent>>,
    /// The daemon, once started.
    pub daemon: Option<Daemon>,
    /// How it was started.
    pub started: Started,
    /// The last resourceVersion written per API resource.
    written: RefCell<BTreeMap<&'static str, u64>>,
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

impl Lab {
    /// Builds the namespaces of `spec` and starts the fake with this node's Node object.
    pub fn new(spec: &Spec) -> Lab {
        let scripts = ScratchDir::with_files(
            "kpc-scripts",
            &[("endpoint.py", ENDPOINT), ("agent.py", AGENT)],
        );
        let mut net = Topology::new();
        sh("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1");
        let mut places = BTreeMap::new();
        let mut pod_roles = BTreeMap::new();
        let mut links = vec!["lan0".to_string(), "up0".to_string(), "n2".to_string()];
        // The LAN and its external clients.
        net.add_host(
            "ext",
            Link {
                router_if: "lan0",
                router_addrs: &[
                    "192.168.0.2/24",
                    "192.168.1.2/24",
                    "192.168.99.11/32",
                    "2001:db8::1/64",
                    "2001:db8:1::2/64",
                ],
                host_if: "eth0",
                host_addrs: &["192.168.0.100/24"],
                host_routes: &["default via 192.168.0.2"],
            },
        );
        let ext = net.host("ext");
        ext.sh("ip -6 addr add 2001:db8::100/64 dev eth0 nodad && ip -6 route add default via 2001:db8::1");
        for a in [EXTERNAL_CLIENT, EXTERNAL_CLIENT_BLOCKED, EXTERNAL_CLIENT6] {
            ext.sh(&format!("ip addr add {a} dev lo"));
            places.insert(a.parse().unwrap(), Place::Ext);
        }
        sh(
            "ip route add 203.0.113.0/24 via 192.168.0.100 && ip -6 route add 2600:5200::/64 via 2001:db8::100",
        );
        for a in [
            NODE_IP,
            NODE_IP_ALT,
            NODE_IP6,
            NODE_IP6_ALT,
            NODE_EXTERNAL_IP,
        ] {
            places.insert(a.parse().unwrap(), Place::Node);
        }
        // The default route, answering for the service prefixes.
        net.add_host(
            "inet",
            Link {
                router_if: "up0",
                router_addrs: &["100.64.0.1/30", "fd64::1/64"],
                host_if: "eth0",
                host_addrs: &["100.64.0.2/30"],
                host_routes: &[],
            },
        );
        let inet = net.host("inet");
        inet.sh("ip -6 addr add fd64::2/64 dev eth0 nodad");
        for p in [
            "172.30.0.0/16",
            "10.20.30.0/24",
            "1.2.3.0/24",
            "5.6.7.0/24",
            "9.10.11.0/24",
            "192.168.99.0/24",
            "fd00:172:30::/64",
        ] {
            inet.sh(&format!("ip route add local {p} dev lo"));
        }
        inet.sh("ip route add 0.0.0.0/0 via 100.64.0.1 && ip -6 route add ::/0 via fd64::1");
        // Every port answers there: a leaked packet to a port nobody listens on must not
        // come back as a refusal, which would pass for the node's reject.
        inet.sh(&format!(
            "nft add table inet sink && nft add chain inet sink pre '{{ type nat hook prerouting priority -100; }}' \
             && nft add rule inet sink pre meta l4proto '{{ tcp, udp }}' redirect to :{INET_PORT}"
        ));
        sh("ip route add default via 100.64.0.2 && ip -6 route add default via fd64::2");
        // The other node and its endpoints.
        net.add_host(
            "node2",
            Link {
                router_if: "n2",
                router_addrs: &["192.168.100.1/24", "fd10:100::1/64"],
                host_if: "eth0",
                host_addrs: &["192.168.100.2/24"],
                host_routes: &["default via 192.168.100.1"],
            },
        );
        let node2 = net.host("node2");
        node2.sh("ip -6 addr add fd10:100::2/64 dev eth0 nodad && ip -6 route add default via fd10:100::1");
        for a in &spec.remote {
            node2.sh(&format!("ip addr add {a} dev lo"));
            let via = if a.contains(':') {
                "fd10:100::2"
            } else {
                "192.168.100.2"
            };
            sh(&format!("ip route add {a} via {via}"));
        }
        // Local pods.
        for (i, addrs) in spec.pods.iter().enumerate() {
            let role = format!("pod{i}");
            let dev = format!("p{i}");
            let v4: Vec<&str> = addrs.iter().copied().filter(|a| !a.contains(':')).collect();
            let host_addrs: Vec<String> = v4.iter().map(|a| format!("{a}/32")).collect();
            net.add_host(
                &role,
                Link {
                    router_if: &dev,
                    router_addrs: &["169.254.1.1/32", "fe80::1/64"],
                    host_if: "eth0",
                    host_addrs: &strs(&host_addrs),
                    host_routes: &[],
                },
            );
            let pod = net.host(&role);
            pod.sh("ip route add 169.254.1.1 dev eth0 scope link && ip route add default via 169.254.1.1 dev eth0");
            pod.sh("ip -6 route add default via fe80::1 dev eth0");
            for a in addrs {
                if a.contains(':') {
                    pod.sh(&format!("ip -6 addr add {a}/128 dev eth0 nodad"));
                }
                sh(&format!("ip route add {a} dev {dev}"));
                places.insert(a.parse().unwrap(), Place::Pod(role.clone()));
                pod_roles.insert(a.parse().unwrap(), role.clone());
            }
            links.push(dev);
        }
        crate::common::links::wait_until_up(&strs(&links));
        let fake = FakeApiServer::start();
        fake.apply("nodes", objects::this_node());
        let lab = Lab {
            net,
            fake,
            cache: ScratchDir::new("kpc-cache"),
            scripts,
            places,
            pod_roles,
            servers: RefCell::new(BTreeMap::new()),
            agents: RefCell::new(BTreeMap::new()),
            daemon: None,
            started: Started::default(),
            written: RefCell::new(BTreeMap::new()),
        };
        lab.serve("node", None, "node", NODE_PORTS);
        lab.serve("inet", Some("inet"), "inet", &[INET_PORT]);
        lab.serve("node2", Some("node2"), "pod", ENDPOINT_PORTS);
        for i in 0..spec.pods.len() {
            let role = format!("pod{i}");
            lab.serve(&role, Some(&role), "pod", ENDPOINT_PORTS);
        }
        lab
    }

    fn host(&self, role: Option<&str>) -> &Host {
        match role {
            Some(r) => self.net.host(r),
            None => self.net.router(),
        }
    }

    /// Starts an endpoint named `name` in `role` (the node for `None`) as server `key`.
    fn serve(&self, key: &str, role: Option<&str>, name: &str, ports: &[u16]) {
        let out = self.scripts.join(&format!("{key}.out"));
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let child = self.host(role).spawn(&format!(
            "exec python3 -u {} {name} {} > {} 2>&1",
            self.scripts.join("endpoint.py").display(),
            ports.join(" "),
            out.display()
        ));
        let ok = poll_for(Duration::from_secs(10), || {
            std::fs::read_to_string(&out)
                .is_ok_and(|r| r.starts_with("listening"))
                .then_some(())
        });
        assert!(
            ok.is_some(),
            "endpoint {key} did not listen: {}",
            std::fs::read_to_string(&out).unwrap_or_default()
        );
        self.servers.borrow_mut().insert(key.to_string(), child);
    }

    /// Stops the endpoint of the pod holding `addr` (the pod is gone; its namespace stays).
    pub fn stop_pod(&self, addr: &str) {
        let role = &self.pod_roles[&addr.parse::<IpAddr>().unwrap()];
        if let Some(mut c) = self.servers.borrow_mut().remove(role) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs one agent request from client address `src`; the attempts' answers.
    pub fn ask(&self, src: &str, mut req: Value) -> Vec<String> {
        let ip: IpAddr = src
            .parse()
            .unwrap_or_else(|_| panic!("client {src} is no address"));
        let place = self
            .places
            .get(&ip)
            .cloned()
            .unwrap_or_else(|| panic!("no client namespace holds {src}"));
        let role = match &place {
            Place::Pod(r) => Some(r.clone()),
            Place::Ext => Some("ext".to_string()),
            Place::Node => None,
        };
        // The node and ext hold several addresses; a pod's is bound too, so every attempt
        // leaves from exactly the row's source.
        req["src"] = Value::String(src.to_string());
        let key = role.clone().unwrap_or_else(|| "node".into());
        let mut agents = self.agents.borrow_mut();
        let agent = agents.entry(key).or_insert_with(|| {
            Agent::spawn(
                self.host(role.as_deref()),
                &self.scripts.join("agent.py").display().to_string(),
            )
        });
        agent.ask(&req)
    }

    /// Makes `addr` an address of the node (on its loopback) from now on.
    pub fn add_node_address(&mut self, addr: &str) {
        sh(&format!("ip addr add {addr} dev lo"));
        self.places.insert(addr.parse().unwrap(), Place::Node);
    }

    /// Takes `addr` off the node's loopback again.
    pub fn remove_node_address(&mut self, addr: &str) {
        let prefix = if addr.contains(':') { 128 } else { 32 };
        sh(&format!("ip addr del {addr}/{prefix} dev lo"));
        self.places.remove(&addr.parse().unwrap());
    }

    /// Creates or replaces an object, remembering its resourceVersion for [`Lab::settle`].
    pub fn apply(&self, resource: &'static str, obj: Value) {
        let rv = self.fake.apply(resource, obj);
        self.written.borrow_mut().insert(resource, rv);
    }

    /// Deletes an object, likewise.
    pub fn delete(&self, resource: &'static str, namespace: &str, name: &str) {
        let rv = self.fake.delete(resource, namespace, name);
        self.written.borrow_mut().insert(resource, rv);
    }

    /// The config with `keys` appended to `[kubernetes]`.
    fn config(&self, keys: &[(Key, &str)]) -> String {
        let mut text = format!(
            "[controller.policy]\nenabled = false\n\n{}",
            kube::section(&self.fake, &self.cache, &["services"])
        );
        for (k, v) in keys {
            text.push_str(&format!("{} = {v}\n", k.name()));
        }
        text
    }

    /// `edgenetd check` on `config`: the error text when it is refused.
    fn refused(&self, config: &str) -> Option<String> {
        let dir = ScratchDir::with_files("kpc-check", &[("edgenetd.toml", config)]);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgenetd"))
            .args(["check", "--config"])
            .arg(dir.config())
            .output()
            .expect("edgenetd check");
        (!out.status.success()).then(|| {
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            // The scratch file's path is noise in a report: from "error:" on.
            let line = text
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or(text.trim());
            line[line.find("error:").unwrap_or(0)..].trim().to_string()
        })
    }

    /// Starts (or restarts) the daemon with `keys`; keys this build refuses are left out and
    /// recorded in [`Lab::started`], so the rows that do not depend on them still run.
    pub fn start(&mut self, keys: &[(Key, &str)]) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.stop();
        }
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        if self.refused(&self.config(keys)).is_some() {
            for kv in keys {
                match self.refused(&self.config(&[*kv])) {
                    Some(err) => refused.push((kv.0, err)),
                    None => kept.push(*kv),
                }
            }
        } else {
            kept = keys.to_vec();
        }
        if let Some(err) = self.refused(&self.config(&kept)) {
            panic!("the suite's own config is refused: {err}");
        }
        let before = ruleset();
        let d = Daemon::start("kpc", &self.config(&kept));
        d.wait_ready();
        self.daemon = Some(d);
        self.started = Started {
            keys: kept.iter().map(|(k, _)| *k).collect(),
            refused,
        };
        self.settle_from(&before);
    }

    /// Waits until the daemon has seen every object written and the kernel holds the
    /// result: the watched resourceVersions caught up, then the ruleset changed from `before`
    /// (or [`SETTLE`] passed: a change may rightly leave the kernel as it was) and stayed the
    /// same for 300 ms.
    pub fn settle_from(&self, before: &str) {
        let Some(d) = &self.daemon else { return };
        let written = self.written.borrow().clone();
        let seen = poll_for(Duration::from_secs(10), || {
            let (status, body) = d.get("/healthz");
            let v: Value = serde_json::from_str(&body).ok()?;
            (status == 200
                && written.iter().all(|(kind, rv)| {
                    v["kubernetes"]["kinds"][*kind]["resourceVersion"]
                        .as_str()
                        .and_then(|s| s.parse::<u64>().ok())
                        .is_some_and(|have| have >= *rv)
                }))
            .then_some(())
        });
        assert!(
            seen.is_some(),
            "the daemon did not catch up with the API:\n{}",
            d.log()
        );
        let start = Instant::now();
        let _ = poll_for(SETTLE, || (ruleset() != before).then_some(()));
        let mut last = ruleset();
        let mut stable = Instant::now();
        while stable.elapsed() < Duration::from_millis(300) && start.elapsed() < SETTLE * 2 {
            std::thread::sleep(Duration::from_millis(50));
            let now = ruleset();
            if now != last {
                last = now;
                stable = Instant::now();
            }
        }
    }

    /// Applies the changes `f` makes and waits until they are in the kernel.
    pub fn change(&self, f: impl FnOnce(&Lab)) {
        let before = ruleset();
        f(self);
        self.settle_from(&before);
    }

    /// The daemon's log.
    pub fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.agents.borrow_mut().clear();
        for (_, mut c) in std::mem::take(&mut *self.servers.borrow_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The node's nftables ruleset without counters: what the daemon programmed.
pub fn ruleset() -> String {
    sh_status("nft -s list ruleset").1
}
