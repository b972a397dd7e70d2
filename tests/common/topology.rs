//! The one topology builder: the test's own namespace is the router; hosts are `ip netns`
//! namespaces joined to it by veth pairs, with addresses and routes; servers and clients are
//! small Python programs (tests/common/scripts) that report what they saw.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::scratch::ScratchDir;
use super::shell::{sh, sh_status};
use super::wait::wait_until;

/// Numbers the hosts of this process, so two topologies never share a namespace name.
static NEXT_HOST: AtomicUsize = AtomicUsize::new(0);

const SERVER: &str = include_str!("scripts/server.py");
const CLIENT: &str = include_str!("scripts/client.py");

/// Turns off duplicate address detection for every link made in a namespace from now on.
/// With it on, a new veth's own link-local address is tentative for 1–2 s, and a router
/// sends no neighbour solicitation for a *forwarded* IPv6 packet until it has a usable
/// link-local source: the first forwarded connections over a new link time out
/// (kube_proxy_conformance `e2e_dual_stack` failed so in CI: 2.05 s before a first forwarded
/// ping got through, 0.006 s with this). Test links have no duplicates to detect.
const NO_DAD: &str = "sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0";

/// A namespace of the topology: the router (the test's own namespace) or a host.
pub struct Host {
    /// The `ip netns` name; `None` for the router.
    name: Option<String>,
    /// The role the test gave it (`router` for the router).
    role: String,
}

impl Host {
    fn router() -> Host {
        Host {
            name: None,
            role: "router".into(),
        }
    }

    /// Creates `ip netns` `en-<role>-<pid>-<n>` with `lo` up.
    fn new(role: &str) -> Host {
        let n = NEXT_HOST.fetch_add(1, Ordering::Relaxed);
        let name = format!("en-{role}-{}-{n}", std::process::id());
        let _ = sh_status(&format!("ip netns del {name}"));
        sh(&format!("ip netns add {name}"));
        let host = Host {
            name: Some(name),
            role: role.into(),
        };
        host.sh(&format!("ip link set lo up && {NO_DAD}"));
        host
    }

    /// Its `ip netns` name (`None` for the router, the test's own namespace).
    pub fn netns(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The role it was created with.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// A command that runs `program` inside this namespace.
    pub fn command(&self, program: &str) -> Command {
        match &self.name {
            Some(name) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", name, program]);
                cmd
            }
            None => Command::new(program),
        }
    }

    /// Runs a shell command inside this namespace; its stdout. Panics on failure.
    pub fn sh(&self, cmd: &str) -> String {
        let (ok, out, err) = self.sh_status(cmd);
        assert!(ok, "`{cmd}` failed in {}: {err}", self.role);
        out
    }

    /// Like [`Host::sh`] but returns (success, stdout, stderr).
    pub fn sh_status(&self, cmd: &str) -> (bool, String, String) {
        let out = self
            .command("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .output()
            .expect("spawn sh");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Spawns a long-running shell command inside this namespace (the caller ends it).
    pub fn spawn(&self, cmd: &str) -> Child {
        self.command("sh")
            .args(["-c", cmd])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn in netns")
    }

    /// Adds addresses (CIDR) to `dev`; IPv6 ones without duplicate address detection.
    fn add_addrs(&self, dev: &str, addrs: &[&str]) {
        for addr in addrs {
            let nodad = if addr.contains(':') { " nodad" } else { "" };
            self.sh(&format!("ip addr add {addr} dev {dev}{nodad}"));
        }
    }

    /// Adds routes (`ip route add` arguments; `ip -6` for IPv6 ones).
    fn add_routes(&self, routes: &[&str]) {
        for route in routes {
            let family = if route.contains(':') { "-6 " } else { "" };
            self.sh(&format!("ip {family}route add {route}"));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(name) = &self.name {
            let _ = sh_status(&format!("ip netns pids {name} | xargs -r kill -9"));
            let _ = sh_status(&format!("ip netns del {name}"));
        }
    }
}

/// A veth pair from the router to a new host.
pub struct Link<'a> {
    /// The router's end.
    pub router_if: &'a str,
    /// Addresses (CIDR) on the router's end.
    pub router_addrs: &'a [&'a str],
    /// The host's end.
    pub host_if: &'a str,
    /// Addresses (CIDR) on the host's end.
    pub host_addrs: &'a [&'a str],
    /// The host's routes, as `ip route add` arguments (e.g. `default via 10.0.0.1`).
    pub host_routes: &'a [&'a str],
}

/// True for a [`Topology::connect`] answer that reports a failure.
pub fn failed(answer: &str) -> bool {
    answer.starts_with("FAIL:")
}

/// A server started with [`Topology::serve`] and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerId(usize);

/// A running server and where it reports.
struct Server {
    /// The server process.
    child: Child,
    /// Its stdout: `listening`, then one line per connection or datagram.
    report: PathBuf,
}

/// The router, its hosts, and the servers running in them; torn down on drop.
pub struct Topology {
    /// The test's own namespace.
    router: Host,
    /// Hosts in creation order.
    hosts: Vec<Host>,
    /// Holds the scripts and the servers' reports.
    dir: ScratchDir,
    /// Every server started, in order (`None` once stopped).
    servers: RefCell<Vec<Option<Server>>>,
}

impl Default for Topology {
    fn default() -> Self {
        Topology::new()
    }
}

impl Topology {
    /// Just the router.
    pub fn new() -> Topology {
        let dir = ScratchDir::with_files("net", &[("server.py", SERVER), ("client.py", CLIENT)]);
        sh(NO_DAD);
        Topology {
            router: Host::router(),
            hosts: Vec::new(),
            dir,
            servers: RefCell::new(Vec::new()),
        }
    }

    /// The router: the test's own namespace.
    pub fn router(&self) -> &Host {
        &self.router
    }

    /// Turns on IPv4 and IPv6 forwarding in the router.
    pub fn forwarding(&self) {
        sh("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1");
    }

    /// Just the router, with a veth pair `a` <-> `b` inside it (see [`Topology::veth`]).
    pub fn with_veth(a: &str, b: &str, addrs: &[&str]) -> Topology {
        let net = Topology::new();
        net.veth(a, b, addrs);
        net
    }

    /// A veth pair inside the router, both ends up, `addrs` on `a`.
    pub fn veth(&self, a: &str, b: &str, addrs: &[&str]) {
        sh(&format!("ip link add {a} type veth peer name {b}"));
        self.router.add_addrs(a, addrs);
        sh(&format!("ip link set {a} up && ip link set {b} up"));
    }

    /// Adds a host joined to the router by `link` (both ends up).
    pub fn add_host(&mut self, role: &str, link: Link<'_>) -> &Host {
        let host = Host::new(role);
        let ns = host.name.as_deref().unwrap();
        sh(&format!(
            "ip link add {} type veth peer name {} netns {ns}",
            link.router_if, link.host_if
        ));
        self.router.add_addrs(link.router_if, link.router_addrs);
        sh(&format!("ip link set {} up", link.router_if));
        host.add_addrs(link.host_if, link.host_addrs);
        host.sh(&format!("ip link set {} up", link.host_if));
        host.add_routes(link.host_routes);
        // Neighbour discovery over before the test's first packet: a first IPv6 connection
        // (1.5 s timeout) sometimes timed out on a loaded machine while the router and the
        // host resolved each other. One echo from the router resolves both ends; a link
        // without an IPv6 address on the router's side has nothing to resolve.
        for addr in link.host_addrs.iter().filter(|a| a.contains(':')) {
            let addr = addr.split('/').next().unwrap_or(addr);
            let _ = std::process::Command::new("ping")
                .args(["-6", "-c", "1", "-W", "5", "-I", link.router_if, addr])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        self.hosts.push(host);
        self.hosts.last().unwrap()
    }

    /// The host added as `role`.
    pub fn host(&self, role: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.role == role)
            .unwrap_or_else(|| panic!("no host {role}"))
    }

    /// Writes a test's own script beside the shared ones; its path.
    pub fn script(&self, name: &str, text: &str) -> String {
        self.dir.write(name, text);
        self.dir.join(name).display().to_string()
    }

    /// An IPv4 `tcp` or `udp` server on `port` in `at` that answers with the client's
    /// address; returns once it listens.
    pub fn serve(&self, at: &Host, kind: &str, port: u16) -> ServerId {
        self.start_server(at, &format!("{kind} {port} 4"))
    }

    /// Like [`Topology::serve`], listening on IPv6 (and IPv4-mapped) addresses.
    pub fn serve_v6(&self, at: &Host, kind: &str, port: u16) -> ServerId {
        self.start_server(at, &format!("{kind} {port} 6"))
    }

    /// A TCP and UDP server on `port` in `at`, IPv6 and IPv4, that answers with `name`.
    pub fn serve_named(&self, at: &Host, name: &str, port: u16) -> ServerId {
        self.start_server(at, &format!("both {port} 6 {name}"))
    }

    fn start_server(&self, at: &Host, args: &str) -> ServerId {
        let id = self.servers.borrow().len();
        let report = self.dir.join(&format!("server-{id}.out"));
        let server = self.dir.join("server.py");
        let child = at.spawn(&format!(
            "exec python3 -u {} {args} > {} 2>&1",
            server.display(),
            report.display()
        ));
        let what = format!("server {args} in {} to report listening", at.role);
        wait_until(&what, Duration::from_secs(10), || {
            std::fs::read_to_string(&report).is_ok_and(|r| r.starts_with("listening\n"))
        });
        self.servers
            .borrow_mut()
            .push(Some(Server { child, report }));
        ServerId(id)
    }

    /// Stops a server (kill and reap).
    pub fn stop(&self, id: ServerId) {
        let mut server = self.servers.borrow_mut()[id.0]
            .take()
            .expect("server already stopped");
        server.child.kill().unwrap();
        server.child.wait().unwrap();
    }

    /// Client addresses of the TCP connections a server accepted so far.
    pub fn connections(&self, id: ServerId) -> Vec<String> {
        let servers = self.servers.borrow();
        let path = match &servers[id.0] {
            Some(s) => s.report.clone(),
            None => panic!("server {id:?} stopped"),
        };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("conn "))
            .map(str::to_string)
            .collect()
    }

    /// One `tcp`, `udp` or `ping` exchange from `from` to `to`: the server's first line,
    /// `PONG`, or `FAIL:<reason>` (1.5 s timeout).
    pub fn connect(&self, from: &Host, kind: &str, to: &str, port: u16) -> String {
        self.client(from, &format!("{kind} {to} {port}"))
    }

    /// Like [`Topology::connect`] from source address `src`.
    pub fn connect_from(&self, from: &Host, kind: &str, to: &str, port: u16, src: &str) -> String {
        self.client(from, &format!("{kind} {to} {port} --src {src}"))
    }

    /// `n` exchanges from `from`: how often each answer came (failures as `refused`,
    /// `timeout`, `error`), 2 s timeout each.
    pub fn hits(
        &self,
        from: &Host,
        kind: &str,
        to: &str,
        port: u16,
        n: u32,
    ) -> BTreeMap<String, u32> {
        self.hits_within(from, kind, to, port, n, 2.0)
    }

    /// Like [`Topology::hits`] with a timeout in seconds.
    pub fn hits_within(
        &self,
        from: &Host,
        kind: &str,
        to: &str,
        port: u16,
        n: u32,
        timeout: f64,
    ) -> BTreeMap<String, u32> {
        let out = self.client(
            from,
            &format!("{kind} {to} {port} --count {n} --timeout {timeout}"),
        );
        out.lines()
            .map(|l| {
                let (answer, count) = l.rsplit_once(' ').expect("ANSWER COUNT");
                (answer.to_string(), count.parse().unwrap())
            })
            .collect()
    }

    fn client(&self, from: &Host, args: &str) -> String {
        let client = self.dir.join("client.py");
        from.sh(&format!("python3 {} {args}", client.display()))
            .trim()
            .to_string()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for server in self.servers.get_mut().iter_mut().flatten() {
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
    }
}
