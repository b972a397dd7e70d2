//! The service table's per-path decisions with real packets: masquerade decided on the
//! address a connection was sent to (not per backend), hairpin, the short-circuit of
//! internal backends, source ranges, unserved ports of a cluster IP and the service CIDRs,
//! and what an address whose endpoints are all gone answers. Backends report the client
//! address they saw, so masquerade is asserted, not assumed.
//!
//! The topology is the service lab's: client `cl` (192.168.10.2) plays the host outside the
//! cluster, backends b1..b3 (10.0.i.2) are pods (`cluster_cidrs = 10.0.0.0/16`), b3 also the
//! pod client, and the router (the test's namespace) the node.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::controller::{Driver, load};
use common::service_lab::{Family, client_and_three_backends};
use common::shell::sh;
use common::topology::{Host, Topology};
use edgenetd::config::DesiredState;
use edgenetd::config::service::{Backend, Masquerade, ServicesConfig};
use edgenetd::controller::service::ServiceController;

/// The lab and a controller driven sync by sync.
struct Lab {
    net: Topology,
    ctrl: Driver<ServiceController>,
}

impl Lab {
    fn new() -> Lab {
        let (net, _) = client_and_three_backends(Family::Dual);
        // The node's default route points at the outside host, as a router's would: a packet
        // to a cluster IP that nothing captures would leave that way.
        sh("ip route add default via 192.168.10.2");
        sh("ip -6 route add default via fd10::2");
        Lab {
            net,
            ctrl: Driver::service(),
        }
    }

    /// Syncs `toml`'s services after `edit` set what only a cluster supplies.
    fn sync(&mut self, toml: &str, edit: impl FnOnce(&mut ServicesConfig)) {
        let mut d: DesiredState = load(toml);
        d.services.cluster_cidrs =
            vec!["10.0.0.0/16".parse().unwrap(), "fd00::/12".parse().unwrap()];
        edit(&mut d.services);
        self.ctrl.sync_state(&d).expect("sync");
    }

    fn host(&self, role: &str) -> &Host {
        if role == "router" {
            self.net.router()
        } else {
            self.net.host(role)
        }
    }

    /// One TCP connection from `from`: "BACKEND PEER" (the address the backend saw), or the
    /// failure (`FAIL:refused`, `FAIL:timeout`).
    fn ask(&self, from: &str, to: &str, port: u16) -> String {
        self.client(from, &format!("tcp {to} {port} --peer"))
    }

    /// `n` TCP connections from `from`: answers ("BACKEND PEER" or a failure) counted.
    fn asks(&self, from: &str, to: &str, port: u16, n: u32) -> BTreeMap<String, u32> {
        self.client(
            from,
            &format!("tcp {to} {port} --peer --count {n} --timeout 1.5"),
        )
        .lines()
        .map(|l| {
            let (a, c) = l.rsplit_once(' ').unwrap();
            (a.to_string(), c.parse().unwrap())
        })
        .collect()
    }

    /// One UDP datagram from `from`, from source port `sport` (connected: an ICMP port
    /// unreachable is `FAIL:refused`).
    fn udp(&self, from: &str, to: &str, port: u16, sport: u16) -> String {
        self.client(from, &format!("udp {to} {port} --peer --sport {sport}"))
    }

    fn client(&self, from: &str, args: &str) -> String {
        let script = self.net.script("noop", "");
        let dir = std::path::Path::new(&script)
            .parent()
            .unwrap()
            .to_path_buf();
        self.host(from)
            .sh(&format!("python3 {}/client.py {args}", dir.display()))
            .trim()
            .to_string()
    }
}

/// One Kubernetes Service port's entries: its cluster IP and a node port on the router's
/// outside address, sharing one name as the translation makes them.
fn web(backends: &str, extra: &str) -> String {
    let mut s = String::new();
    for (i, (addr, port)) in [("10.96.0.10", 80), ("192.168.10.1", 30080)]
        .iter()
        .enumerate()
    {
        s.push_str(&format!(
            "[[service]]\nname = \"web{i}\"\naddress = \"{addr}\"\nport = {port}\nbackends = [{backends}]\n{extra}\n"
        ));
    }
    s
}

/// The cluster IP masquerades off-cluster clients, the node port everybody (kube-proxy's
/// `externalTrafficPolicy: Cluster`); both named as one Service port.
fn shared_name(cfg: &mut ServicesConfig) {
    for s in cfg.services.iter_mut().map(Arc::make_mut) {
        s.name = "k8s:ns/web:80".into();
        s.masquerade = if s.port == 80 {
            Masquerade::OffCluster
        } else {
            Masquerade::Always
        };
    }
}

netns_test! {
    fn a_cluster_ip_keeps_the_pod_address_when_its_backend_is_also_behind_a_masquerading_address() {
        let mut t = Lab::new();
        t.sync(&web("\"10.0.1.2:8080\"", ""), shared_name);
        // A pod keeps its address on the cluster IP, and is masqueraded on the node port.
        assert_eq!(t.ask("b3", "10.96.0.10", 80), "b1 10.0.3.2");
        assert_eq!(t.ask("b3", "192.168.10.1", 30080), "b1 10.0.1.1");
        // The outside host is masqueraded on both.
        assert_eq!(t.ask("cl", "10.96.0.10", 80), "b1 10.0.1.1");
        assert_eq!(t.ask("cl", "192.168.10.1", 30080), "b1 10.0.1.1");
        // UDP decides the same way.
        let udp = web("\"10.0.1.2:8080\"", "protocol = \"udp\"");
        t.sync(&udp, shared_name);
        assert_eq!(t.udp("b3", "10.96.0.10", 80, 4000), "b1 10.0.3.2");
        assert_eq!(t.udp("cl", "10.96.0.10", 80, 4000), "b1 10.0.1.1");
        // Without cluster prefixes there is no local-traffic detector: nobody is
        // masqueraded on the cluster IP, as kube-proxy does.
        t.sync(&web("\"10.0.1.2:8080\"", ""), |c| {
            shared_name(c);
            c.cluster_cidrs.clear();
        });
        assert_eq!(t.ask("cl", "10.96.0.10", 80), "b1 192.168.10.2");
        assert_eq!(t.ask("cl", "192.168.10.1", 30080), "b1 10.0.1.1");
    }
}

netns_test! {
    fn a_backend_reaching_its_own_service_through_the_address_is_masqueraded() {
        let mut t = Lab::new();
        let svc = "[[service]]\nname = \"self\"\naddress = \"10.96.0.20\"\nport = 80\nbackends = [\"10.0.1.2:8080\"]\n\
                   [[service]]\nname = \"self6\"\naddress = \"fd96::20\"\nport = 80\nbackends = [\"[fd01::2]:8080\"]\n";
        t.sync(svc, |_| {});
        // Masquerade = never: another pod keeps its address, the backend itself is
        // masqueraded (its reply would otherwise go straight back to itself).
        assert_eq!(t.ask("b3", "10.96.0.20", 80), "b1 10.0.3.2");
        assert_eq!(t.ask("b1", "10.96.0.20", 80), "b1 10.0.1.1");
        assert_eq!(t.ask("b1", "fd96::20", 80), "b1 fd01::1");
        assert_eq!(t.ask("b3", "fd96::20", 80), "b1 fd03::2");
    }
}

/// A Service port's cluster IP (TCP and UDP) with `backends`, rejecting its unserved ports.
fn cluster_ip(backends: &str) -> String {
    let mut s = String::new();
    for proto in ["tcp", "udp"] {
        s.push_str(&format!(
            "[[service]]\nname = \"dns-{proto}\"\naddress = \"10.96.0.53\"\nport = 53\nprotocol = \"{proto}\"\nbackends = [{backends}]\n"
        ));
    }
    s
}

fn cluster_ip_of_a_port(cfg: &mut ServicesConfig) {
    cfg.service_cidrs = vec!["10.96.0.0/16".parse().unwrap()];
    for s in cfg.services.iter_mut().map(Arc::make_mut) {
        s.name = "k8s:kube-system/dns:53".into();
        s.reject_unserved_ports = true;
        s.masquerade = Masquerade::OffCluster;
    }
}

netns_test! {
    fn a_cluster_ip_whose_endpoints_are_all_gone_is_rejected_from_everywhere() {
        let mut t = Lab::new();
        // A packet that leaked towards the default route (the outside host, which does not
        // forward) would time out: only the node answers with a refusal.
        t.sync(&cluster_ip("\"10.0.1.2:8080\""), cluster_ip_of_a_port);
        assert_eq!(t.ask("b3", "10.96.0.53", 53), "b1 10.0.3.2");
        // A UDP client that keeps its source port across the changes.
        assert_eq!(t.udp("b3", "10.96.0.53", 53, 5353), "b1 10.0.3.2");
        assert_eq!(t.udp("router", "10.96.0.53", 53, 5354), "b1 10.0.1.1");
        // Terminating while none is ready: still serving (weight 1), then draining (0),
        // then gone.
        for backends in ["{ address = \"10.0.1.2:8080\", weight = 0 }", ""] {
            t.sync(&cluster_ip(backends), cluster_ip_of_a_port);
            for from in ["b3", "cl", "router"] {
                assert_eq!(t.ask(from, "10.96.0.53", 53), "FAIL:refused", "tcp from {from} ({backends:?})");
            }
            for (from, sport) in [("b3", 5353), ("cl", 5355)] {
                assert_eq!(t.udp(from, "10.96.0.53", 53, sport), "FAIL:refused", "udp from {from} ({backends:?})");
            }
            // The node's own datagram is refused by its output chain before it leaves.
            assert_eq!(t.udp("router", "10.96.0.53", 53, 5354), "FAIL:eperm");
        }
        // And the unserved ports of the address: refused, never leaked.
        assert_eq!(t.ask("b3", "10.96.0.53", 8053), "FAIL:refused");
        assert_eq!(t.ask("router", "10.96.0.53", 8053), "FAIL:refused");
    }
}

netns_test! {
    fn a_cluster_ip_never_leaks_out_of_the_node() {
        let mut t = Lab::new();
        // The outside host answers for two addresses of the service CIDR.
        t.net.host("cl").sh("ip addr add 10.96.0.10/32 dev lo && ip addr add 10.96.0.99/32 dev lo");
        t.net.serve_named(t.net.host("cl"), "leaked", 81);
        t.net.serve_named(t.net.host("cl"), "leaked80", 80);
        let cfg = |c: &mut ServicesConfig| {
            c.service_cidrs = vec!["10.96.0.0/16".parse().unwrap()];
            for s in c.services.iter_mut().map(Arc::make_mut) {
                s.reject_unserved_ports = s.address.to_string() == "10.96.0.10";
            }
        };
        t.sync(&web("\"10.0.1.2:8080\"", ""), cfg);
        // The served port is served; the unserved one refused, from a pod and the node.
        assert_eq!(t.ask("b3", "10.96.0.10", 80), "b1 10.0.3.2");
        assert_eq!(t.ask("b3", "10.96.0.10", 81), "FAIL:refused");
        assert_eq!(t.ask("router", "10.96.0.10", 81), "FAIL:refused");
        // An address of the service CIDR nobody owns is dropped, not routed.
        assert_eq!(t.ask("b3", "10.96.0.99", 80), "FAIL:timeout");
        // The node port's address is the router's own: its other ports are untouched.
        t.net.serve_named(t.net.router(), "node", 8081);
        assert_eq!(t.ask("b3", "192.168.10.1", 8081), "node 10.0.3.2");
        // Without the check, the same packets leave towards the default route.
        t.sync(&web("\"10.0.1.2:8080\"", ""), |_| {});
        assert_eq!(t.ask("b3", "10.96.0.10", 81), "leaked 10.0.3.2");
        assert_eq!(t.ask("b3", "10.96.0.99", 80), "leaked80 10.0.3.2");
    }
}

netns_test! {
    fn source_ranges_admit_their_sources_only_the_nodes_own_connections_included() {
        let mut t = Lab::new();
        t.net.host("cl").sh("ip addr add 192.168.10.3/24 dev eth0");
        let svc = "[[service]]\nname = \"lb\"\naddress = \"10.96.1.1\"\nport = 80\nbackends = [\"10.0.1.2:8080\"]\n";
        let ranges = |list: &'static [&'static str]| {
            move |c: &mut ServicesConfig| {
                Arc::make_mut(&mut c.services[0]).source_ranges = list.iter().map(|r| r.parse().unwrap()).collect();
            }
        };
        t.sync(svc, ranges(&["192.168.10.2/32", "10.0.2.0/24", "2001:db8::/32"]));
        assert_eq!(t.ask("cl", "10.96.1.1", 80), "b1 192.168.10.2");
        assert_eq!(t.ask("b2", "10.96.1.1", 80), "b1 10.0.2.2");
        let from3 = t.client("cl", "tcp 10.96.1.1 80 --peer --src 192.168.10.3");
        assert_eq!(from3, "FAIL:timeout", "192.168.10.3 is outside the ranges");
        assert_eq!(t.ask("b3", "10.96.1.1", 80), "FAIL:timeout");
        // The node itself is fenced like any client (as kube-proxy's firewall check at the
        // output hook): its source, its outside address towards the default route, is in
        // no range.
        assert_eq!(t.ask("router", "10.96.1.1", 80), "FAIL:timeout");
        // Ranges change as elements: a /23 around both client addresses and the router's.
        t.sync(svc, ranges(&["192.168.10.0/23"]));
        assert_eq!(t.client("cl", "tcp 10.96.1.1 80 --peer --src 192.168.10.3"), "b1 192.168.10.3");
        assert_eq!(t.ask("router", "10.96.1.1", 80), "b1 192.168.10.1");
        assert_eq!(t.ask("b2", "10.96.1.1", 80), "FAIL:timeout");
        // Only ranges of the other family: no source of this one is admitted.
        t.sync(svc, ranges(&["2001:db8::/32"]));
        assert_eq!(t.ask("cl", "10.96.1.1", 80), "FAIL:timeout");
        assert_eq!(t.ask("router", "10.96.1.1", 80), "FAIL:timeout");
        // No ranges: everybody.
        t.sync(svc, ranges(&[]));
        assert_eq!(t.ask("b3", "10.96.1.1", 80), "b1 10.0.3.2");
    }
}

netns_test! {
    fn internal_backends_serve_pods_and_the_node_while_outside_clients_get_the_local_ones() {
        let mut t = Lab::new();
        let svc = |backends: &str| {
            format!("[[service]]\nname = \"lb\"\naddress = \"10.96.1.2\"\nport = 80\nbackends = [{backends}]\n")
        };
        let internal = |when_empty_drop: bool| {
            move |c: &mut ServicesConfig| {
                let s = Arc::make_mut(&mut c.services[0]);
                s.internal_backends = Some(
                    ["10.0.1.2:8080", "10.0.2.2:8080"]
                        .iter()
                        .map(|a| Backend { address: a.parse().unwrap(), weight: 1 })
                        .collect(),
                );
                if when_empty_drop {
                    s.when_empty = edgenetd::config::service::WhenEmpty::Drop;
                }
            }
        };
        // The local endpoint is b1; every endpoint of the service is b1 and b2.
        t.sync(&svc("\"10.0.1.2:8080\""), internal(false));
        let outside = t.asks("cl", "10.96.1.2", 80, 20);
        assert_eq!(outside, BTreeMap::from([("b1 192.168.10.2".to_string(), 20)]), "local only, address kept");
        let pods = t.asks("b3", "10.96.1.2", 80, 40);
        assert!(pods.keys().all(|k| k.ends_with(" 10.0.3.2")), "pods are not masqueraded: {pods:?}");
        assert!(pods.len() == 2, "pods reach every endpoint: {pods:?}");
        // The node reaches every endpoint, masqueraded (its connection left with its outside
        // address, towards the default route, and now goes to a pod's link).
        let node = t.asks("router", "10.96.1.2", 80, 40);
        assert_eq!(
            node.keys().collect::<Vec<_>>(),
            ["b1 10.0.1.1", "b2 10.0.2.1"],
            "{node:?}"
        );
        // No local endpoint: outside clients are dropped, pods and the node still served.
        t.sync(&svc(""), internal(true));
        assert_eq!(t.ask("cl", "10.96.1.2", 80), "FAIL:timeout");
        assert!(t.ask("b3", "10.96.1.2", 80).ends_with(" 10.0.3.2"));
        assert!(!t.ask("router", "10.96.1.2", 80).starts_with("FAIL"));
    }
}

netns_test! {
    fn a_udp_client_keeping_its_port_leaves_a_backend_removed_while_the_controller_was_down() {
        let mut t = Lab::new();
        let svc = |b: &str| {
            format!("[[service]]\nname = \"dns\"\naddress = \"10.96.0.53\"\nport = 53\nprotocol = \"udp\"\nbackends = [\"{b}\"]\n")
        };
        t.sync(&svc("10.0.1.2:8080"), |_| {});
        assert_eq!(t.udp("cl", "10.96.0.53", 53, 6000), "b1 192.168.10.2");
        // A restart: the new process knows nothing of b1 and finds its slots in the kernel.
        t.ctrl = Driver::service();
        t.sync(&svc("10.0.2.2:8080"), |_| {});
        assert_eq!(t.udp("cl", "10.96.0.53", 53, 6000), "b2 192.168.10.2", "the flow to b1 was deleted");
    }
}
