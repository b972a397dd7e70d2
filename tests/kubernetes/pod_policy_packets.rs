//! Kubernetes NetworkPolicies with real packets: cluster objects (as the API server writes
//! them) go through the translation into the policy controller, which programs the node;
//! "pods" are namespaces behind the node (the test's own namespace) on veth pairs, clients
//! are namespaces on other links. Each test runs in fresh namespaces.
//!
//! Addresses: pods `web` 10.1.1.2 (shop), `pg` 10.1.2.2 (db), `cache` 10.1.3.2 (db), each on
//! its own /24 behind the node; clients `front` 10.2.1.2 (a pod of `shop`, team=front, on
//! another node) and `back` 10.2.2.2 (a pod of `ops`, team=back).

use crate::common;
use crate::netns_test;

use edgenetd::config::DesiredState;
use edgenetd::config::policy::pods::PodPolicies;
use edgenetd::controller::policy::program::PODS;
use edgenetd::kubernetes::objects::{Namespace, NetworkPolicy, Pod};
use edgenetd::kubernetes::translate::network_policies::translate;
use serde_json::{Value, json};

use common::controller::{Driver, load};
use common::shell::{sh, sh_status};
use common::topology::{Link, Topology, failed};

const NODE: &str = "edge-1";

/// The node with three pods and two clients, forwarding on.
fn cluster_net() -> Topology {
    let mut t = Topology::new();
    for (role, n) in [("web", 1), ("pg", 2), ("cache", 3)] {
        host(&mut t, role, &format!("10.1.{n}"));
    }
    host(&mut t, "front", "10.2.1");
    host(&mut t, "back", "10.2.2");
    t.forwarding();
    t
}

/// A host on `<net>.0/24` and its IPv6 twin (10.A.B -> fd0A:B::/64), the node at `.1`.
fn host(t: &mut Topology, role: &str, net: &str) {
    let v6 = v6_net(net);
    t.add_host(
        role,
        Link {
            router_if: &format!("v-{role}"),
            router_addrs: &[&format!("{net}.1/24"), &format!("{v6}1/64")],
            host_if: "eth0",
            host_addrs: &[&format!("{net}.2/24"), &format!("{v6}2/64")],
            host_routes: &[
                &format!("default via {net}.1"),
                &format!("default via {v6}1"),
            ],
        },
    );
}

/// `10.A.B` -> `fd0A:B::`.
fn v6_net(net: &str) -> String {
    let parts: Vec<&str> = net.split('.').collect();
    format!("fd0{}:{}::", parts[1], parts[2])
}

/// A pod's addresses: the IPv4 one given and its IPv6 twin.
fn dual(ip: &str) -> Value {
    let (net, host) = ip.rsplit_once('.').unwrap();
    json!([{"ip": ip}, {"ip": format!("{}{host}", v6_net(net))}])
}

fn pod(ns: &str, name: &str, node: &str, ip: &str, labels: Value, ports: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": dual(ip)}
    }))
    .unwrap()
}

/// The cluster's pods: three local, two on another node.
fn pods() -> Vec<Pod> {
    vec![
        pod(
            "shop",
            "web",
            NODE,
            "10.1.1.2",
            json!({"app": "web"}),
            json!([{"name": "http", "containerPort": 8080}]),
        ),
        pod(
            "db",
            "pg",
            NODE,
            "10.1.2.2",
            json!({"app": "pg"}),
            json!([]),
        ),
        pod(
            "db",
            "cache",
            NODE,
            "10.1.3.2",
            json!({"app": "cache"}),
            json!([]),
        ),
        pod(
            "shop",
            "front",
            "edge-2",
            "10.2.1.2",
            json!({"app": "front"}),
            json!([]),
        ),
        pod(
            "ops",
            "back",
            "edge-2",
            "10.2.2.2",
            json!({"app": "back"}),
            json!([]),
        ),
    ]
}

fn namespaces() -> Vec<Namespace> {
    [("shop", "front"), ("db", "data"), ("ops", "back")]
        .into_iter()
        .map(|(name, team)| {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
                .unwrap()
        })
        .collect()
}

fn policy(ns: &str, name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

/// The policies translated for this node.
fn isolation(policies: &[NetworkPolicy]) -> PodPolicies {
    let (out, skipped) = translate(policies, &pods(), &namespaces(), NODE);
    assert_eq!(skipped, [], "every policy reads");
    out
}

/// A desired state from `toml` with the pod isolation of `policies`.
fn desired(toml: &str, policies: &[NetworkPolicy]) -> DesiredState {
    DesiredState {
        pod_policies: isolation(policies),
        ..load(toml)
    }
}

/// `pg` admits only pods of namespaces labelled team=front, on 5432.
fn pg_from_front() -> NetworkPolicy {
    policy(
        "db",
        "pg-from-front",
        json!({
            "podSelector": {"matchLabels": {"app": "pg"}},
            "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"team": "front"}}}],
                "ports": [{"protocol": "TCP", "port": 5432}]
            }]
        }),
    )
}

netns_test! {
    fn a_network_policy_admitting_one_namespace_lets_it_through_and_blocks_another() {
        let t = cluster_net();
        Driver::policy().sync_state(&desired("", &[pg_from_front()])).unwrap();
        let pg = t.host("pg");
        t.serve(pg, "tcp", 5432);
        t.serve(pg, "tcp", 5433);
        assert_eq!(t.connect(t.host("front"), "tcp", "10.1.2.2", 5432), "10.2.1.2");
        assert!(failed(&t.connect(t.host("back"), "tcp", "10.1.2.2", 5432)));
        assert!(failed(&t.connect(t.host("front"), "tcp", "10.1.2.2", 5433)), "port not admitted");
        assert_eq!(
            t.connect(t.host("web"), "tcp", "10.1.2.2", 5432),
            "10.1.1.2",
            "a pod of shop on this node is admitted too (pod to pod through the node)"
        );
    }
}

netns_test! {
    fn an_unselected_pod_stays_open_and_the_node_itself_reaches_isolated_ones() {
        let t = cluster_net();
        Driver::policy().sync_state(&desired("", &[pg_from_front()])).unwrap();
        t.serve(t.host("cache"), "tcp", 6379);
        t.serve(t.host("pg"), "tcp", 5432);
        assert_eq!(t.connect(t.host("back"), "tcp", "10.1.3.2", 6379), "10.2.2.2");
        assert_eq!(t.connect(t.router(), "tcp", "10.1.2.2", 5432), "10.1.2.1", "node traffic is output, never isolated");
    }
}

netns_test! {
    fn established_replies_pass_an_egress_isolated_pod() {
        let t = cluster_net();
        let cache_closed_out = policy(
            "db",
            "cache-no-egress",
            json!({"podSelector": {"matchLabels": {"app": "cache"}}, "policyTypes": ["Egress"]}),
        );
        Driver::policy().sync_state(&desired("", &[cache_closed_out])).unwrap();
        t.serve(t.host("cache"), "tcp", 6379);
        t.serve(t.host("back"), "tcp", 80);
        assert_eq!(t.connect(t.host("back"), "tcp", "10.1.3.2", 6379), "10.2.2.2", "the reply passes");
        assert!(failed(&t.connect(t.host("cache"), "tcp", "10.2.2.2", 80)), "a new connection out does not");
    }
}

netns_test! {
    fn egress_to_an_ip_block_with_an_exception() {
        let t = cluster_net();
        let web_out = policy(
            "shop",
            "web-out",
            json!({
                "podSelector": {"matchLabels": {"app": "web"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {"cidr": "10.2.0.0/16", "except": ["10.2.2.0/24"]}}]}]
            }),
        );
        Driver::policy().sync_state(&desired("", &[web_out])).unwrap();
        t.serve(t.host("front"), "tcp", 80);
        t.serve(t.host("back"), "tcp", 80);
        let web = t.host("web");
        assert_eq!(t.connect(web, "tcp", "10.2.1.2", 80), "10.1.1.2");
        assert!(failed(&t.connect(web, "tcp", "10.2.2.2", 80)), "the exception");
        t.serve(t.host("pg"), "tcp", 5432);
        assert!(failed(&t.connect(web, "tcp", "10.1.2.2", 5432)), "outside the block");
    }
}

netns_test! {
    fn a_named_port_resolves_through_the_target_pod() {
        let t = cluster_net();
        let web_http = policy(
            "shop",
            "web-http",
            json!({
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"ports": [{"port": "http"}]}]
            }),
        );
        Driver::policy().sync_state(&desired("", &[web_http])).unwrap();
        let web = t.host("web");
        t.serve(web, "tcp", 8080);
        t.serve(web, "tcp", 8081);
        assert_eq!(t.connect(t.host("back"), "tcp", "10.1.1.2", 8080), "10.2.2.2");
        assert!(failed(&t.connect(t.host("back"), "tcp", "10.1.1.2", 8081)));
    }
}

netns_test! {
    // The refusal is set in the fault module's side table (feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    fn a_refused_policy_fails_closed_for_exactly_the_pods_it_selects() {
        let t = cluster_net();
        let open = |name: &str, app: &str| {
            policy("db", name, json!({"podSelector": {"matchLabels": {"app": app}}, "ingress": [{}]}))
        };
        let state = desired("", &[open("pg-open", "pg"), open("cache-open", "cache")]);
        assert!(state.pod_policies.policies.iter().any(|p| p.name == "k8s:db/pg-open"));
        edgenetd::fault::kernel_reject::refuse_unit("k8s:db/pg-open", true);
        let mut d = Driver::policy();
        let err = d.sync_state(&state).unwrap_err();
        assert_eq!(err.failures.len(), 1, "{err}");
        assert_eq!(err.failures[0].object, "policy network-policy k8s:db/pg-open");
        t.serve(t.host("pg"), "tcp", 5432);
        t.serve(t.host("cache"), "tcp", 6379);
        t.serve(t.host("web"), "tcp", 8080);
        let back = t.host("back");
        assert!(failed(&t.connect(back, "tcp", "10.1.2.2", 5432)), "fails closed");
        assert_eq!(t.connect(back, "tcp", "10.1.3.2", 6379), "10.2.2.2", "the other policy works");
        assert_eq!(t.connect(back, "tcp", "10.1.1.2", 8080), "10.2.2.2", "unselected: open");
        edgenetd::fault::kernel_reject::refuse_unit("k8s:db/pg-open", false);
        d.sync_state(&state).unwrap();
        assert_eq!(t.connect(back, "tcp", "10.1.2.2", 5432), "10.2.2.2", "programmed once accepted");
    }
}

netns_test! {
    fn without_a_policy_section_the_table_holds_only_the_pod_chains_and_goes_with_them() {
        let _t = cluster_net();
        let mut d = Driver::policy();
        d.sync_state(&desired("", &[pg_from_front()])).unwrap();
        let chains = sh("nft list table inet edgenetd-policy");
        assert!(chains.contains(&format!("chain {PODS} ")), "{chains}");
        assert!(!chains.contains("chain input"), "no [policy]: no input chain\n{chains}");
        d.sync_state(&desired("", &[])).unwrap();
        assert!(!sh_status("nft list table inet edgenetd-policy").0, "no pod policies either: no table");
    }
}

netns_test! {
    fn a_new_pod_for_a_policy_is_an_element_change_only() {
        let _t = cluster_net();
        let mut d = Driver::policy();
        let all_db = policy("db", "all", json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}));
        let mut state = desired("", std::slice::from_ref(&all_db));
        d.sync_state(&state).unwrap();
        let before = sh("nft -a list chain inet edgenetd-policy pods-ingress");
        let mut more = pods();
        more.push(pod("db", "pg-1", NODE, "10.1.4.2", json!({"app": "pg"}), json!([])));
        state.pod_policies = translate(std::slice::from_ref(&all_db), &more, &namespaces(), NODE).0;
        let report = d.sync_state(&state).unwrap();
        assert!(report.summary.starts_with("set elements:"), "{}", report.summary);
        assert_eq!(sh("nft -a list chain inet edgenetd-policy pods-ingress"), before, "rules untouched");
        let set = sh("nft list set inet edgenetd-policy pods.in4");
        assert!(set.contains("10.1.4.2"), "{set}");
    }
}

/// Ports of every shape: UDP, TCP ranges and sets, a whole protocol (SCTP), a named port;
/// peers of every shape, egress with an exception.
fn every_kind_of_port() -> NetworkPolicy {
    policy(
        "shop",
        "ports",
        json!({
            "podSelector": {},
            "ingress": [{
                "from": [{"podSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}},
                         {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "back"}}},
                         {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"port": 8000, "endPort": 8100},
                          {"port": 9000}, {"protocol": "SCTP"}, {"port": "http"}]
            }],
            "egress": [{"to": [{"ipBlock": {"cidr": "::/0", "except": ["fd02::/16"]}}]}]
        }),
    )
}

netns_test! {
    fn every_kind_of_port_and_peer_is_accepted_by_the_kernel() {
        let _t = cluster_net();
        let state = desired("", &[pg_from_front(), every_kind_of_port()]);
        let report = Driver::policy().sync_state(&state).unwrap();
        assert!(report.summary.starts_with("table written"), "{}", report.summary);
        let chain = sh("nft list chain inet edgenetd-policy pods-ingress");
        for want in ["udp dport 53", "tcp dport { 8000-8100, 9000 }", "meta l4proto sctp", "tcp dport 8080"] {
            assert!(chain.contains(want), "{want} in\n{chain}");
        }
    }
}

netns_test! {
    fn the_plan_shows_pod_rules_that_nft_accepts() {
        let _t = cluster_net();
        for toml in ["", "[policy]\nforward_default = \"accept\"\n"] {
            let state = desired(toml, &[pg_from_front(), every_kind_of_port()]);
            let text = smol::block_on(edgenetd::controller::policy::plan(&state)).unwrap();
            let begin = text.find("# nft begin").expect("a ruleset");
            let end = text.find("# nft end").unwrap();
            let ruleset = &text[begin..end];
            assert!(ruleset.contains("chain pods-ingress"), "{ruleset}");
            let path = std::env::temp_dir().join(format!("pod-plan-{}.nft", std::process::id()));
            std::fs::write(&path, ruleset).unwrap();
            let (ok, _, err) = sh_status(&format!("nft -c -f {}", path.display()));
            assert!(ok, "{err}\n{ruleset}");
        }
    }
}

netns_test! {
    fn with_a_policy_section_both_the_operator_rules_and_the_pod_policies_decide() {
        let t = cluster_net();
        let toml = r#"
[policy]
forward_default = "accept"

[[policy.rule]]
name = "no-front-to-cache"
from = ["10.2.1.2"]
to = "any-pod"
protocol = "tcp"
ports = [6379]
action = "drop"

[policy.zone.any-pod]
networks = ["10.1.0.0/16"]
"#;
        Driver::policy().sync_state(&desired(toml, &[pg_from_front()])).unwrap();
        t.serve(t.host("pg"), "tcp", 5432);
        t.serve(t.host("cache"), "tcp", 6379);
        let (front, back) = (t.host("front"), t.host("back"));
        assert_eq!(t.connect(front, "tcp", "10.1.2.2", 5432), "10.2.1.2");
        assert!(failed(&t.connect(back, "tcp", "10.1.2.2", 5432)), "the pod policy");
        assert!(failed(&t.connect(front, "tcp", "10.1.3.2", 6379)), "the operator's rule");
        assert_eq!(t.connect(back, "tcp", "10.1.3.2", 6379), "10.2.2.2");
    }
}

netns_test! {
    fn drift_in_the_pod_chains_is_repaired() {
        let t = cluster_net();
        let mut d = Driver::policy();
        let state = desired("", &[pg_from_front()]);
        d.sync_state(&state).unwrap();
        sh("nft flush chain inet edgenetd-policy pods-ingress");
        sh("nft flush set inet edgenetd-policy pods.in4");
        let report = d.sync_state(&state).unwrap();
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        t.serve(t.host("pg"), "tcp", 5432);
        assert!(failed(&t.connect(t.host("back"), "tcp", "10.1.2.2", 5432)), "isolated again");
        assert_eq!(t.connect(t.host("front"), "tcp", "10.1.2.2", 5432), "10.2.1.2");
    }
}

netns_test! {
    fn an_ipv6_pod_is_isolated_the_same_way() {
        let t = cluster_net();
        Driver::policy().sync_state(&desired("", &[pg_from_front()])).unwrap();
        t.serve_v6(t.host("pg"), "tcp", 5432);
        assert_eq!(t.connect(t.host("front"), "tcp", "fd01:2::2", 5432), "fd02:1::2");
        assert!(failed(&t.connect(t.host("back"), "tcp", "fd01:2::2", 5432)));
        assert_eq!(t.connect(t.host("front"), "tcp", "10.1.2.2", 5432), "::ffff:10.2.1.2");
    }
}
