//! ClusterNetworkPolicies with real packets, held to the network-policy-api conformance suite
//! (kubernetes-sigs/network-policy-api, `conformance/tests/*.go` and `conformance/base`):
//! each test is one upstream test, named after its `ShortName`, and runs its subtests
//! (`t.Run`) in order, with upstream's mutations of the policies between them (they build on
//! each other, as upstream's do).
//!
//! The daemon is fed by the fake API server (ClusterNetworkPolicies, NetworkPolicies, Pods and
//! Namespaces as the API writes them) and programs the test's namespace, the node. The
//! cluster is upstream's: four houses of two pods, here each pod a namespace on a veth behind
//! the node; gryffindor's pods (the policies' subject) on this node, the others on another.
//! Pod `<house>-<i>` is `10.<h>.<i+1>.2` (h: gryffindor 1, slytherin 2, ravenclaw 3,
//! hufflepuff 4) and answers with its name on TCP and UDP 80, 8080, 53 and 5353; it declares
//! the container ports `web` (TCP 80) and `dns` (UDP 53), as upstream's pods do.
//!
//! Every probe of a test runs; the test fails at the end with the table of every probe and
//! `HOLDS` or `FAILS`. Upstream's SCTP probes cannot be sent here (the kernel has no SCTP
//! sockets): they are listed as `SCTP` rows, and the test checks instead that the SCTP
//! matches are in the ruleset the kernel accepted.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use serde_json::{Value, json};

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube;
use common::scratch::ScratchDir;
use common::shell::sh_status;
use common::topology::{Link, Topology};
use common::wait::wait_until;

/// How long the daemon gets to program a change.
const STEP: Duration = Duration::from_secs(20);
/// The houses, in upstream's order, with their number in the addresses.
const HOUSES: [(&str, u8); 4] = [
    ("gryffindor", 1),
    ("slytherin", 2),
    ("ravenclaw", 3),
    ("hufflepuff", 4),
];
/// The ports every pod answers on, TCP and UDP alike.
const PORTS: [u16; 4] = [80, 8080, 53, 5353];

/// The pod names of a house, upstream's.
fn pod_name(house: &str, i: u8) -> String {
    let who = match house {
        "gryffindor" => "harry-potter",
        "slytherin" => "draco-malfoy",
        "ravenclaw" => "luna-lovegood",
        _ => "cedric-diggory",
    };
    format!("{who}-{i}")
}

fn house_number(house: &str) -> u8 {
    HOUSES.iter().find(|(h, _)| *h == house).unwrap().1
}

/// `10.<h>.<i+1>.2`.
fn pod_ip(house: &str, i: u8) -> String {
    format!("10.{}.{}.2", house_number(house), i + 1)
}

/// The lab: the node and its eight pods, the fake API server, the daemon once started.
struct Lab {
    net: Topology,
    fake: FakeApiServer,
    cache: ScratchDir,
    daemon: Option<Daemon>,
    /// Every probe so far: the row's name and whether it held.
    rows: Vec<(String, bool)>,
}

impl Lab {
    /// The pods, their servers, the Namespaces and Pods in the fake.
    fn new() -> Lab {
        let mut net = Topology::new();
        for (house, _) in HOUSES {
            for i in 0..2 {
                let ip = pod_ip(house, i);
                let prefix = ip.rsplit_once('.').unwrap().0.to_string();
                let role = pod_name(house, i);
                net.add_host(
                    &role,
                    Link {
                        router_if: &format!("v-{}{i}", &house[..4]),
                        router_addrs: &[&format!("{prefix}.1/24")],
                        host_if: "eth0",
                        host_addrs: &[&format!("{ip}/24")],
                        host_routes: &[&format!("default via {prefix}.1")],
                    },
                );
            }
        }
        net.forwarding();
        for (house, _) in HOUSES {
            for i in 0..2 {
                let role = pod_name(house, i);
                for port in PORTS {
                    net.serve_named(net.host(&role), &role, port);
                }
            }
        }
        let fake = FakeApiServer::start();
        for (house, _) in HOUSES {
            fake.apply("namespaces", namespace(house, house));
            for i in 0..2 {
                fake.apply("pods", pod(house, i));
            }
        }
        Lab {
            net,
            fake,
            cache: ScratchDir::new("k8s-cnp-cache"),
            daemon: None,
            rows: Vec::new(),
        }
    }

    /// Applies `objects` (resource, object), starts the daemon and waits until every
    /// policy among them is programmed.
    fn start(&mut self, objects: &[(&str, Value)]) {
        for (resource, obj) in objects {
            self.fake.apply(resource, obj.clone());
        }
        let config = kube::section(&self.fake, &self.cache, &["network_policies"]);
        let d = Daemon::start("k8s-cnp", &config);
        d.wait_ready();
        self.daemon = Some(d);
        let labels: Vec<String> = objects.iter().map(|(r, o)| label(r, o)).collect();
        wait_until("every policy programmed", STEP, || {
            let rules = ruleset();
            labels.iter().all(|l| rules.contains(l.as_str()))
        });
    }

    /// Applies `obj` and waits until the ruleset changed.
    fn change(&self, resource: &str, obj: Value) {
        let before = ruleset();
        self.fake.apply(resource, obj);
        wait_until("the change programmed", STEP, || ruleset() != before);
    }

    /// Deletes an object and waits until the ruleset changed.
    fn delete(&self, resource: &str, namespace: &str, name: &str) {
        let before = ruleset();
        self.fake.delete(resource, namespace, name);
        wait_until("the deletion programmed", STEP, || ruleset() != before);
    }

    /// One of upstream's `PokeServer` calls: `from` (house, pod) to `to`'s pod on `port`
    /// over `proto`, `allowed` or not; recorded as a row of `case`.
    fn poke(
        &mut self,
        case: &str,
        from: (&str, u8),
        proto: &str,
        to: (&str, u8),
        port: u16,
        allowed: bool,
    ) {
        let client = pod_name(from.0, from.1);
        let server = pod_name(to.0, to.1);
        let want = if allowed { "allowed" } else { "denied" };
        let row = format!("{case}: {client} -> {server} {proto}/{port}, want {want}");
        if proto == "sctp" {
            self.rows.push((
                format!("{row}: SCTP (no SCTP sockets here; judged on the ruleset)"),
                true,
            ));
            return;
        }
        let ip = pod_ip(to.0, to.1);
        let mut answered = self.answered(&client, proto, &ip, port, &server);
        if allowed && !answered {
            // A positive answer missed under load is asked again; a drop never answers.
            answered = self.answered(&client, proto, &ip, port, &server);
        }
        self.rows.push((row, answered == allowed));
    }

    fn answered(&self, client: &str, proto: &str, ip: &str, port: u16, server: &str) -> bool {
        let from = self.net.host(client);
        self.net
            .hits_within(from, proto, ip, port, 1, 1.0)
            .contains_key(server)
    }

    /// Fails with the table of every row when one of them does not hold.
    fn verdict(&self, test: &str) {
        let table: Vec<String> = self
            .rows
            .iter()
            .map(|(row, held)| format!("{} {row}", if *held { "HOLDS" } else { "FAILS" }))
            .collect();
        let table = table.join("\n");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/tmp/cluster_network_policy_conformance");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(format!("{test}.txt")), format!("{table}\n"));
        assert!(
            self.rows.iter().all(|(_, held)| *held),
            "{test}:\n{table}\n\nruleset:\n{}",
            ruleset()
        );
    }
}

/// The policy table as the kernel has it, without counters.
fn ruleset() -> String {
    sh_status("nft -s list table inet edgenetd-policy").1
}

/// The group label of a policy object in rule comments.
fn label(resource: &str, obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap();
    match resource {
        "networkpolicies" => format!(
            "network-policy k8s:{}/{name}",
            obj["metadata"]["namespace"].as_str().unwrap()
        ),
        _ => format!("cluster-network-policy k8s:{name}"),
    }
}

/// A Namespace with upstream's labels (and the one the API server adds).
fn namespace(name: &str, house: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {
            "conformance-house": house, "kubernetes.io/metadata.name": name}}
    })
}

/// Pod `i` of `house`, labelled as upstream's StatefulSets label them.
fn pod(house: &str, i: u8) -> Value {
    let node = if house == "gryffindor" {
        kube::NODE
    } else {
        "worker-2"
    };
    let ip = pod_ip(house, i);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(house, i), "namespace": house,
                     "labels": {"conformance-house": house}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [
            {"containerPort": 80, "protocol": "TCP", "name": "web"},
            {"containerPort": 53, "protocol": "UDP", "name": "dns"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    })
}

/// A ClusterNetworkPolicy.
fn cnp(
    name: &str,
    tier: &str,
    priority: u32,
    subject: Value,
    ingress: Value,
    egress: Value,
) -> Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
        "metadata": {"name": name},
        "spec": {"tier": tier, "priority": priority, "subject": subject,
                 "ingress": ingress, "egress": egress}
    })
}

/// A `namespaces` selector by the name label (upstream's `kubernetes.io/metadata.name`).
fn ns_named(house: &str) -> Value {
    json!({"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": house}}})
}

/// A `namespaces` selector by `conformance-house`.
fn ns_house(house: &str) -> Value {
    json!({"namespaces": {"matchLabels": {"conformance-house": house}}})
}

/// A `pods` selector: the house's namespaces and pods, both by `conformance-house`.
fn pods_house(house: &str) -> Value {
    json!({"pods": {
        "namespaceSelector": {"matchLabels": {"conformance-house": house}},
        "podSelector": {"matchLabels": {"conformance-house": house}}}})
}

/// One rule; `peer_key` is `from` or `to`.
fn rule(peer_key: &str, name: &str, action: &str, peers: Value, protocols: Option<Value>) -> Value {
    let mut r = json!({"name": name, "action": action});
    r[peer_key] = peers;
    if let Some(p) = protocols {
        r["protocols"] = p;
    }
    r
}

/// TCP, UDP and SCTP destination ports.
fn ports(tcp: u16, udp: u16, sctp: u16) -> Value {
    json!([{"tcp": {"destinationPort": {"number": tcp}}},
           {"udp": {"destinationPort": {"number": udp}}},
           {"sctp": {"destinationPort": {"number": sctp}}}])
}

fn swap(policy: &mut Value, direction: &str, a: usize, b: usize) {
    policy["spec"][direction].as_array_mut().unwrap().swap(a, b);
}

/// That the kernel took the SCTP matches of a policy (upstream's SCTP probes' stand-in).
fn sctp_in_ruleset(port: u16) {
    let rules = ruleset();
    let want = format!("sctp dport {port} counter");
    assert!(rules.contains(&want), "{want} in\n{rules}");
}

const G: &str = "gryffindor";
const S: &str = "slytherin";
const R: &str = "ravenclaw";
const H: &str = "hufflepuff";

/// `base/admin_tier/standard-ingress-tcp-rules.yaml`.
fn ingress_tcp() -> Value {
    let i = |name, action, house, port: Option<u16>| {
        rule(
            "from",
            name,
            action,
            json!([ns_named(house)]),
            port.map(|p| json!([{"tcp": {"destinationPort": {"number": p}}}])),
        )
    };
    cnp(
        "ingress-tcp",
        "Admin",
        3,
        ns_named(G),
        json!([
            i("allow-from-ravenclaw-everything", "Accept", R, None),
            i("deny-from-ravenclaw-everything", "Deny", R, None),
            i("pass-from-ravenclaw-everything", "Pass", R, None),
            i("deny-from-slytherin-at-port-80", "Deny", S, Some(80)),
            i("pass-from-slytherin-at-port-80", "Pass", S, Some(80)),
            i("allow-from-hufflepuff-at-port-80", "Accept", H, Some(80)),
            i("deny-from-hufflepuff-everything-else", "Deny", H, None),
        ]),
        json!([]),
    )
}

netns_test! {
    fn cnp_admin_tier_ingress_tcp() {
        let t = "CNPAdminTierIngressTCP";
        let mut lab = Lab::new();
        let mut p = ingress_tcp();
        lab.start(&[("clusternetworkpolicies", p.clone())]);
        let c = "allow-ingress, rule ordering respected";
        lab.poke(c, (R, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (R, 1), "tcp", (G, 0), 8080, true);
        let c = "allow-ingress at the specified port";
        lab.poke(c, (H, 0), "tcp", (G, 1), 80, true);
        lab.poke(c, (H, 1), "tcp", (G, 1), 8080, false);
        let c = "deny-ingress, rule ordering respected";
        swap(&mut p, "ingress", 0, 1);
        lab.change("clusternetworkpolicies", p.clone());
        lab.poke(c, (R, 0), "tcp", (G, 1), 80, false);
        lab.poke(c, (R, 1), "tcp", (G, 1), 8080, false);
        let c = "deny-ingress at the specified port";
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, false);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, true);
        let c = "pass-ingress, rule ordering respected";
        swap(&mut p, "ingress", 0, 2);
        lab.change("clusternetworkpolicies", p.clone());
        lab.poke(c, (R, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (R, 1), "tcp", (G, 0), 8080, true);
        let c = "pass-ingress at the specified port";
        swap(&mut p, "ingress", 3, 4);
        lab.change("clusternetworkpolicies", p.clone());
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, true);
        lab.verdict(t);
    }
}

/// `base/admin_tier/standard-gress-rules-combined.yaml` (and, `Baseline` at priority 10
/// as `default` without the pass rules, `base/baseline_tier/standard-gress-rules-combined.yaml`).
fn gress(tier: &str) -> Value {
    let admin = tier == "Admin";
    let mut egress = vec![
        rule(
            "to",
            "allow-to-ravenclaw-everything",
            "Accept",
            json!([ns_named(R)]),
            None,
        ),
        rule(
            "to",
            "deny-to-ravenclaw-everything",
            "Deny",
            json!([ns_named(R)]),
            None,
        ),
    ];
    let mut ingress = vec![
        rule(
            "from",
            "allow-from-ravenclaw-everything",
            "Accept",
            json!([ns_named(R)]),
            None,
        ),
        rule(
            "from",
            "deny-from-ravenclaw-everything",
            "Deny",
            json!([ns_named(R)]),
            None,
        ),
    ];
    if admin {
        egress.push(rule(
            "to",
            "pass-to-ravenclaw-everything",
            "Pass",
            json!([ns_named(R)]),
            None,
        ));
        ingress.push(rule(
            "from",
            "pass-from-ravenclaw-everything",
            "Pass",
            json!([ns_named(R)]),
            None,
        ));
    }
    egress.push(rule(
        "to",
        "deny-to-slytherin-at-ports-80-53-9003",
        "Deny",
        json!([ns_named(S)]),
        Some(ports(80, 53, 9003)),
    ));
    ingress.push(rule(
        "from",
        "deny-from-slytherin-at-port-80-53-9003",
        "Deny",
        json!([ns_named(S)]),
        Some(ports(80, 53, 9003)),
    ));
    if admin {
        egress.push(rule(
            "to",
            "pass-to-slytherin-at-port-80-53-9003",
            "Pass",
            json!([ns_named(S)]),
            Some(ports(80, 53, 9003)),
        ));
        ingress.push(rule(
            "from",
            "pass-from-slytherin-at-port-80-53-9003",
            "Pass",
            json!([ns_named(S)]),
            Some(ports(80, 53, 9003)),
        ));
    }
    egress.push(rule(
        "to",
        "allow-to-hufflepuff-at-ports-8080-5353-9003",
        "Accept",
        json!([ns_named(H)]),
        Some(ports(8080, 5353, 9003)),
    ));
    egress.push(rule(
        "to",
        "deny-to-hufflepuff-everything-else",
        "Deny",
        json!([ns_named(H)]),
        None,
    ));
    ingress.push(rule(
        "from",
        "allow-from-hufflepuff-at-port-80-5353-9003",
        "Accept",
        json!([ns_named(H)]),
        Some(ports(80, 5353, 9003)),
    ));
    ingress.push(rule(
        "from",
        "deny-from-hufflepuff-everything-else",
        "Deny",
        json!([ns_named(H)]),
        None,
    ));
    let (name, priority) = if admin {
        ("gress-rules", 15)
    } else {
        ("default", 10)
    };
    cnp(
        name,
        tier,
        priority,
        ns_named(G),
        json!(ingress),
        json!(egress),
    )
}

/// The subtests `CNPAdminTierGress` and `CNPBaselineTierGress` share (the allow and deny
/// ones, the second swapping rules 0 and 1 of both directions).
fn gress_allow_and_deny(lab: &mut Lab, p: &mut Value) {
    let c = "allow-gress across protocols (egress)";
    lab.poke(c, (G, 0), "tcp", (R, 0), 80, true);
    lab.poke(c, (G, 1), "udp", (R, 0), 53, true);
    lab.poke(c, (G, 0), "sctp", (R, 0), 9003, true);
    let c = "allow-gress across protocols (ingress)";
    lab.poke(c, (R, 0), "tcp", (G, 0), 80, true);
    lab.poke(c, (R, 1), "udp", (G, 0), 53, true);
    lab.poke(c, (R, 1), "sctp", (G, 0), 9003, true);
    let c = "allow-gress at the specified ports (egress)";
    lab.poke(c, (G, 0), "tcp", (H, 1), 8080, true);
    lab.poke(c, (G, 1), "tcp", (H, 1), 80, false);
    lab.poke(c, (G, 0), "udp", (H, 1), 5353, true);
    lab.poke(c, (G, 1), "udp", (H, 1), 53, false);
    lab.poke(c, (G, 0), "sctp", (H, 1), 9003, true);
    lab.poke(c, (G, 1), "sctp", (H, 1), 9005, false);
    let c = "allow-gress at the specified ports (ingress)";
    lab.poke(c, (H, 0), "tcp", (G, 1), 80, true);
    lab.poke(c, (H, 1), "tcp", (G, 1), 8080, false);
    lab.poke(c, (H, 0), "udp", (G, 1), 5353, true);
    lab.poke(c, (H, 1), "udp", (G, 1), 53, false);
    lab.poke(c, (H, 0), "sctp", (G, 1), 9003, true);
    lab.poke(c, (H, 1), "sctp", (G, 1), 9005, false);
    swap(p, "egress", 0, 1);
    swap(p, "ingress", 0, 1);
    lab.change("clusternetworkpolicies", p.clone());
    let c = "deny-gress across protocols (egress)";
    lab.poke(c, (G, 0), "tcp", (R, 1), 80, false);
    lab.poke(c, (G, 1), "udp", (R, 1), 53, false);
    lab.poke(c, (G, 0), "sctp", (R, 1), 9003, false);
    let c = "deny-gress across protocols (ingress)";
    lab.poke(c, (R, 0), "tcp", (G, 1), 80, false);
    lab.poke(c, (R, 1), "udp", (G, 1), 53, false);
    lab.poke(c, (R, 1), "sctp", (G, 1), 9003, false);
    let c = "deny-gress at the specified ports (egress)";
    lab.poke(c, (G, 0), "tcp", (S, 0), 80, false);
    lab.poke(c, (G, 1), "tcp", (S, 0), 8080, true);
    lab.poke(c, (G, 0), "udp", (S, 0), 53, false);
    lab.poke(c, (G, 1), "udp", (S, 0), 5353, true);
    lab.poke(c, (G, 0), "sctp", (S, 0), 9003, false);
    lab.poke(c, (G, 1), "sctp", (S, 0), 9005, true);
    let c = "deny-gress at the specified ports (ingress)";
    lab.poke(c, (S, 0), "tcp", (G, 0), 80, false);
    lab.poke(c, (S, 1), "tcp", (G, 0), 8080, true);
    lab.poke(c, (S, 0), "udp", (G, 0), 53, false);
    lab.poke(c, (S, 1), "udp", (G, 0), 5353, true);
    lab.poke(c, (S, 0), "sctp", (G, 0), 9003, false);
    lab.poke(c, (S, 1), "sctp", (G, 0), 9005, true);
}

netns_test! {
    fn cnp_admin_tier_gress() {
        let t = "CNPAdminTierGress";
        let mut lab = Lab::new();
        let mut p = gress("Admin");
        lab.start(&[("clusternetworkpolicies", p.clone())]);
        sctp_in_ruleset(9003);
        gress_allow_and_deny(&mut lab, &mut p);
        swap(&mut p, "egress", 0, 2);
        swap(&mut p, "ingress", 0, 2);
        lab.change("clusternetworkpolicies", p.clone());
        let c = "pass-gress across protocols (egress)";
        lab.poke(c, (G, 0), "tcp", (R, 0), 80, true);
        lab.poke(c, (G, 0), "udp", (R, 0), 5353, true);
        lab.poke(c, (G, 0), "sctp", (R, 0), 9003, true);
        let c = "pass-gress across protocols (ingress)";
        lab.poke(c, (R, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (R, 1), "udp", (G, 0), 53, true);
        lab.poke(c, (R, 1), "sctp", (G, 0), 9003, true);
        swap(&mut p, "egress", 3, 4);
        swap(&mut p, "ingress", 3, 4);
        lab.change("clusternetworkpolicies", p.clone());
        let c = "pass-gress at the specified ports (egress)";
        for (i, proto, port) in [(0, "tcp", 80), (1, "tcp", 8080), (0, "udp", 53), (1, "udp", 5353), (0, "sctp", 9003), (1, "sctp", 9005)] {
            lab.poke(c, (G, i), proto, (S, 0), port, true);
        }
        let c = "pass-gress at the specified ports (ingress)";
        for (i, proto, port) in [(0, "tcp", 80), (1, "tcp", 8080), (0, "udp", 53), (1, "udp", 5353), (0, "sctp", 9003), (1, "sctp", 9005)] {
            lab.poke(c, (S, i), proto, (G, 0), port, true);
        }
        lab.verdict(t);
    }
}

netns_test! {
    fn cnp_baseline_tier_gress() {
        let t = "CNPBaselineTierGress";
        let mut lab = Lab::new();
        let mut p = gress("Baseline");
        lab.start(&[("clusternetworkpolicies", p.clone())]);
        sctp_in_ruleset(9003);
        gress_allow_and_deny(&mut lab, &mut p);
        lab.verdict(t);
    }
}

/// `base/admin_tier/standard-priority-field.yaml`.
fn priority_field() -> [Value; 3] {
    let gryffindor = pods_house(G);
    let pair = |name: &str, tier: &str, priority: u32, action: &str, verb: &str| {
        cnp(
            name,
            tier,
            priority,
            gryffindor.clone(),
            json!([rule(
                "from",
                &format!("{verb}-all-ingress-from-slytherin"),
                action,
                json!([pods_house(S)]),
                None
            )]),
            json!([rule(
                "to",
                &format!("{verb}-all-egress-to-slytherin"),
                action,
                json!([pods_house(S)]),
                None
            )]),
        )
    };
    [
        pair("priority-50-example", "Admin", 50, "Deny", "deny"),
        pair(
            "old-priority-60-new-priority-40-example",
            "Admin",
            60,
            "Pass",
            "pass",
        ),
        pair("default", "Baseline", 10, "Accept", "allow"),
    ]
}

netns_test! {
    fn cnp_admin_tier_priority_field() {
        let t = "CNPAdminTierPriorityField";
        let mut lab = Lab::new();
        let [deny50, mut pass60, default] = priority_field();
        lab.start(&[
            ("clusternetworkpolicies", deny50),
            ("clusternetworkpolicies", pass60.clone()),
            ("clusternetworkpolicies", default),
        ]);
        let c = "Deny from slytherin to gryffindor (admin CNP)";
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, false);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, false);
        let c = "Deny to slytherin from gryffindor (admin CNP)";
        lab.poke(c, (G, 0), "tcp", (S, 0), 80, false);
        lab.poke(c, (G, 1), "tcp", (S, 0), 8080, false);
        let c = "priority field: both directions passed to the baseline CNP";
        pass60["spec"]["priority"] = json!(40);
        lab.change("clusternetworkpolicies", pass60);
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, true);
        lab.poke(c, (G, 0), "tcp", (S, 0), 80, true);
        lab.poke(c, (G, 1), "tcp", (S, 0), 8080, true);
        lab.verdict(t);
    }
}

/// `base/api_integration/standard-anp-np-banp.yaml`: an admin CNP, a NetworkPolicy and a
/// baseline CNP over gryffindor.
fn integration() -> (Value, Value, Value) {
    let admin = cnp(
        "pass-example",
        "Admin",
        10,
        ns_house(G),
        json!([rule(
            "from",
            "deny-all-ingress-from-slytherin",
            "Deny",
            json!([ns_house(S)]),
            None
        )]),
        json!([rule(
            "to",
            "deny-all-egress-to-slytherin",
            "Deny",
            json!([ns_house(S)]),
            None
        )]),
    );
    let np = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "allow-gress-from-to-slytherin-to-gryffindor", "namespace": G},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"conformance-house": S}}}]}],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"conformance-house": S}}}]}]
        }
    });
    let baseline = cnp(
        "default",
        "Baseline",
        10,
        ns_house(G),
        json!([rule(
            "from",
            "deny-all-ingress-from-slytherin",
            "Deny",
            json!([ns_house(S)]),
            None
        )]),
        json!([rule(
            "to",
            "deny-all-egress-to-slytherin",
            "Deny",
            json!([ns_house(S)]),
            None
        )]),
    );
    (admin, np, baseline)
}

netns_test! {
    /// The tiers' order against NetworkPolicies: admin before, baseline after, with Pass.
    fn cnp_admin_tier_integration() {
        let t = "CNPAdminTierIntegration";
        let mut lab = Lab::new();
        let (mut admin, np, baseline) = integration();
        lab.start(&[
            ("clusternetworkpolicies", admin.clone()),
            ("networkpolicies", np),
            ("clusternetworkpolicies", baseline),
        ]);
        let c = "Deny from slytherin to gryffindor (admin CNP)";
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, false);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, false);
        let c = "Deny to slytherin from gryffindor (admin CNP)";
        lab.poke(c, (G, 0), "tcp", (S, 0), 80, false);
        lab.poke(c, (G, 1), "tcp", (S, 0), 8080, false);
        let c = "pass-ingress: the NetworkPolicy's allow";
        admin["spec"]["ingress"][0]["action"] = json!("Pass");
        lab.change("clusternetworkpolicies", admin.clone());
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, true);
        let c = "pass-egress: the NetworkPolicy's allow";
        admin["spec"]["egress"][0]["action"] = json!("Pass");
        lab.change("clusternetworkpolicies", admin);
        lab.poke(c, (G, 0), "tcp", (S, 0), 80, true);
        lab.poke(c, (G, 1), "tcp", (S, 0), 8080, true);
        let c = "pass-ingress: the baseline CNP's deny once no NetworkPolicy selects";
        lab.delete("networkpolicies", G, "allow-gress-from-to-slytherin-to-gryffindor");
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, false);
        lab.poke(c, (S, 1), "tcp", (G, 0), 8080, false);
        let c = "pass-egress: the baseline CNP's deny once no NetworkPolicy selects";
        lab.poke(c, (G, 0), "tcp", (S, 0), 80, false);
        lab.poke(c, (G, 1), "tcp", (S, 0), 8080, false);
        lab.verdict(t);
    }
}

/// `base/admin_tier/standard-egress-inline-cidr-rules.yaml`.
fn inline_cidr() -> Value {
    cnp(
        "inline-cidr-as-peers-example",
        "Admin",
        85,
        pods_house(G),
        json!([]),
        json!([
            rule(
                "to",
                "allow-egress-to-slytherin",
                "Accept",
                json!([pods_house(S)]),
                None
            ),
            rule(
                "to",
                "deny-egress-to-internet",
                "Deny",
                json!([{"networks": ["0.0.0.0/0", "::/0"]}]),
                None
            ),
        ]),
    )
}

netns_test! {
    fn cnp_admin_tier_egress_inline_cidr_peers() {
        let t = "CNPAdminTierEgressInlineCIDRPeers";
        let mut lab = Lab::new();
        let mut p = inline_cidr();
        lab.start(&[("clusternetworkpolicies", p.clone())]);
        let probes = |lab: &mut Lab, c: &str, to: (&str, u8), allowed: bool| {
            lab.poke(c, (G, 1), "tcp", to, 80, allowed);
            lab.poke(c, (G, 1), "udp", to, 53, allowed);
            lab.poke(c, (G, 1), "sctp", to, 9003, allowed);
        };
        let c = "deny-egress for egress-cidr-peer";
        probes(&mut lab, c, (R, 0), false);
        probes(&mut lab, c, (H, 0), false);
        probes(&mut lab, c, (S, 0), true);
        lab.change("namespaces", namespace(S, "denied-namespace-label"));
        probes(&mut lab, &format!("{c}, slytherin relabelled"), (S, 0), false);
        lab.change("namespaces", namespace(S, S));
        probes(&mut lab, &format!("{c}, slytherin labelled back"), (S, 0), true);
        let c = "allow-egress for egress-cidr-peer";
        let specific = rule("to", "allow-egress-to-specific-podIPs", "Accept",
            json!([{"networks": [format!("{}/32", pod_ip(R, 0)), format!("{}/32", pod_ip(H, 0))]}]), None);
        p["spec"]["egress"].as_array_mut().unwrap().insert(0, specific);
        lab.change("clusternetworkpolicies", p);
        probes(&mut lab, c, (R, 0), true);
        probes(&mut lab, c, (H, 0), true);
        probes(&mut lab, c, (R, 1), false);
        probes(&mut lab, c, (H, 1), false);
        lab.verdict(t);
    }
}

netns_test! {
    /// `CNPAdminTierEgressNamedPort` (experimental: named ports) on
    /// `base/admin_tier/standard-egress-tcp-rules.yaml`'s rule 5 made a named-port rule;
    /// the rules it needs of that policy (allow hufflepuff on `web`, then deny it).
    fn cnp_admin_tier_egress_named_port() {
        let t = "CNPAdminTierEgressNamedPort";
        let mut lab = Lab::new();
        let p = cnp("egress-tcp", "Admin", 3, ns_named(G),
            json!([]),
            json!([
                rule("to", "allow-to-hufflepuff-at-port-8080", "Accept", json!([ns_named(H)]),
                    Some(json!([{"destinationNamedPort": "web"}]))),
                rule("to", "deny-to-hufflepuff-everything-else", "Deny", json!([ns_named(H)]), None),
            ]));
        lab.start(&[("clusternetworkpolicies", p)]);
        let c = "allow-egress for named port";
        lab.poke(c, (G, 0), "tcp", (H, 1), 80, true);
        lab.poke(c, (G, 1), "tcp", (H, 1), 8080, false);
        lab.verdict(t);
    }
}

netns_test! {
    /// `CNPAdminTierIngressNamedPort` (experimental) on `standard-ingress-udp-rules.yaml`'s
    /// rule 5 made a named-port rule: gryffindor reaches hufflepuff's `dns` port only.
    fn cnp_admin_tier_ingress_named_port() {
        let t = "CNPAdminTierIngressNamedPort";
        let mut lab = Lab::new();
        // The subject here is hufflepuff (upstream's `ingress-udp` selects it): move one of
        // its pods to this node.
        let mut local = pod(H, 1);
        local["spec"]["nodeName"] = json!(kube::NODE);
        lab.fake.apply("pods", local);
        let p = cnp("ingress-udp", "Admin", 4, ns_named(H),
            json!([
                rule("from", "allow-from-gryffindor-at-port-53", "Accept", json!([ns_named(G)]),
                    Some(json!([{"destinationNamedPort": "dns"}]))),
                rule("from", "deny-from-gryffindor-everything-else", "Deny", json!([ns_named(G)]), None),
            ]),
            json!([]));
        lab.start(&[("clusternetworkpolicies", p)]);
        let c = "allow-ingress for named port";
        lab.poke(c, (G, 0), "udp", (H, 1), 53, true);
        lab.poke(c, (G, 1), "udp", (H, 1), 5353, false);
        lab.verdict(t);
    }
}

netns_test! {
    /// `CNPAdminTierEgressNodePeers` (experimental: node peers) is not supported: its rules
    /// fail closed as the API prescribes for a peer an implementation cannot read (an
    /// `Accept` matches nothing, a `Deny` or `Pass` denies all), and the skip is reported.
    fn cnp_admin_tier_egress_node_peers_fail_closed() {
        let t = "CNPAdminTierEgressNodePeers";
        let mut lab = Lab::new();
        let nodes = json!([{"nodes": {"matchLabels": {"kubernetes.io/os": "linux"}}}]);
        let p = cnp("node-and-cidr-as-peers-example", "Admin", 75, pods_house(G), json!([]), json!([
            rule("to", "allow-egress-to-nodes", "Accept", nodes.clone(), Some(json!([{"tcp": {"destinationPort": {"number": 80}}}]))),
            rule("to", "pass-egress-to-nodes", "Pass", nodes, Some(json!([{"udp": {"destinationPort": {"number": 53}}}]))),
        ]));
        lab.start(&[("clusternetworkpolicies", p)]);
        let c = "unsupported node peers fail closed";
        lab.poke(c, (G, 0), "tcp", (R, 0), 80, false);
        lab.poke(c, (G, 1), "udp", (R, 0), 53, false);
        lab.poke(c, (R, 0), "tcp", (G, 0), 80, true);
        let d = lab.daemon.as_ref().unwrap();
        wait_until("the skip counted", STEP, || {
            d.metric(
                "edgenetd_kubernetes_skipped_total",
                &[("kind", "clusternetworkpolicies"), ("reason", "unsupported")],
            ) == Some(2.0)
        });
        lab.verdict(t);
    }
}

netns_test! {
    /// A cluster without the CRD answers 404 for ClusterNetworkPolicies: taken as none, the
    /// NetworkPolicies are programmed as before.
    fn a_cluster_without_the_crd_keeps_its_network_policies() {
        let mut lab = Lab::new();
        lab.fake.set_absent("clusternetworkpolicies");
        let (_, np, _) = integration();
        lab.start(&[("networkpolicies", np)]);
        let rules = ruleset();
        assert!(!rules.contains("pods-ingress-admin"), "{rules}");
        let c = "only the NetworkPolicy";
        lab.poke(c, (S, 0), "tcp", (G, 0), 80, true);
        lab.poke(c, (R, 0), "tcp", (G, 0), 80, false);
        let d = lab.daemon.as_ref().unwrap();
        let (_, body) = d.get("/healthz");
        let h: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            h["kubernetes"]["kinds"]["clusternetworkpolicies"]["state"], "absent",
            "{body}"
        );
        lab.verdict("absent-crd");
    }
}
