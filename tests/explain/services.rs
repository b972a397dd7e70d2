//! `edgenetd explain` on the service table's per-path rules (issue 20): a packet to a
//! cluster IP, a node port and a load balancer address is followed the way the kernel does,
//! with the cluster's prefixes a TOML file cannot set filled in as the Kubernetes
//! translation fills them. The kernel's side of each case is tests/service/paths.rs.

use std::sync::Arc;

use crate::common;

use common::controller::load;
use edgenetd::config::DesiredState;
use edgenetd::config::service::{Backend, Masquerade, ServicesConfig, WhenEmpty};
use edgenetd::explain::{explain, query, report};
use serde_json::Value as Json;

/// The router: the outside link (192.168.10.1), a pod link (10.0.1.1) and the node port
/// address.
const ROUTER: &str = "c0=192.168.10.1/24,b1=10.0.1.1/24,b3=10.0.3.1/24";

const SERVICES: &str = r#"
[[route]]
to = "default"
via = "192.168.10.2"

[[service]]
name = "cluster-ip"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080"]

[[service]]
name = "node-port"
address = "192.168.10.1"
port = 30080
backends = ["10.0.1.2:8080"]

[[service]]
name = "lb"
address = "203.0.113.7"
port = 443
backends = ["10.0.1.2:8443"]
"#;

/// The three addresses of one Service port, as the translation makes them.
fn cluster(c: &mut ServicesConfig) {
    c.cluster_cidrs = vec!["10.0.0.0/16".parse().unwrap()];
    c.service_cidrs = vec!["10.96.0.0/16".parse().unwrap()];
    for s in c.services.iter_mut().map(Arc::make_mut) {
        match s.port {
            80 => {
                s.masquerade = Masquerade::OffCluster;
                s.reject_unserved_ports = true;
            }
            30080 => s.masquerade = Masquerade::Always,
            _ => {
                s.source_ranges = vec!["198.51.100.0/24".parse().unwrap()];
                s.internal_backends = Some(vec![
                    Backend {
                        address: "10.0.1.2:8443".parse().unwrap(),
                        weight: 1,
                    },
                    Backend {
                        address: "10.0.3.2:8443".parse().unwrap(),
                        weight: 1,
                    },
                ]);
                s.backends.clear();
                s.when_empty = WhenEmpty::Drop;
            }
        }
        s.name = format!("k8s:ns/web:{}", s.port);
    }
}

fn desired() -> DesiredState {
    let mut d = load(SERVICES);
    cluster(&mut d.services);
    d
}

/// The JSON answer for a TCP packet from `from` arriving on `iif` to `to:dport`.
fn ask(iif: &str, from: &str, to: &str, dport: u16) -> Json {
    let args: Vec<String> = [
        "--in",
        iif,
        "--from",
        from,
        "--to",
        to,
        "--proto",
        "tcp",
        "--dport",
        &dport.to_string(),
        "--addresses",
        ROUTER,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let q = query::parse(&args, "unused").unwrap();
    let e = explain(&desired(), &q).unwrap_or_else(|e| panic!("{e}"));
    report::json(&e)
}

#[test]
fn a_pod_keeps_its_address_on_the_cluster_ip_and_an_outside_client_is_masqueraded() {
    let j = ask("b3", "10.0.3.2", "10.96.0.10", 80);
    assert_eq!(
        (j["verdict"].as_str(), j["dnat"]["to"].as_str()),
        (Some("accept"), Some("10.0.1.2:8080")),
        "{j}"
    );
    assert!(j["snat"].is_null(), "a pod is not masqueraded: {j}");
    let j = ask("c0", "192.168.10.2", "10.96.0.10", 80);
    assert_eq!(j["snat"]["to"], "10.0.1.1", "{j}");
    // The node port masquerades everybody, pods included, though its backend is the
    // cluster IP's.
    let j = ask("b3", "10.0.3.2", "192.168.10.1", 30080);
    assert_eq!(
        (j["dnat"]["to"].as_str(), j["snat"]["to"].as_str()),
        (Some("10.0.1.2:8080"), Some("10.0.1.1")),
        "{j}"
    );
}

#[test]
fn a_backend_reaching_its_own_service_is_masqueraded() {
    let j = ask("b1", "10.0.1.2", "10.96.0.10", 80);
    assert_eq!(
        (j["dnat"]["to"].as_str(), j["snat"]["to"].as_str()),
        (Some("10.0.1.2:8080"), Some("10.0.1.1")),
        "{j}"
    );
}

#[test]
fn an_unserved_port_is_rejected_and_an_unowned_cluster_address_dropped() {
    let j = ask("b3", "10.0.3.2", "10.96.0.10", 81);
    assert_eq!(
        (j["verdict"].as_str(), j["chain"].as_str()),
        (Some("reject"), Some("empty_reject")),
        "{j}"
    );
    let j = ask("b3", "10.0.3.2", "10.96.0.99", 80);
    assert_eq!(
        (j["verdict"].as_str(), j["chain"].as_str()),
        (Some("drop"), Some("unserved_forward")),
        "{j}"
    );
    assert!(
        j["rule"].as_str().unwrap().starts_with("servicecidrs4"),
        "{j}"
    );
}

#[test]
fn the_load_balancer_address_admits_its_source_ranges_and_short_circuits_pods() {
    // Outside its ranges: dropped before DNAT.
    let j = ask("c0", "192.168.10.2", "203.0.113.7", 443);
    assert_eq!(
        (j["verdict"].as_str(), j["rule"].as_str()),
        (Some("drop"), Some("fence4: other sources")),
        "{j}"
    );
    // In the ranges, but no local endpoint: `when_empty` drop for outside clients.
    let j = ask("c0", "198.51.100.9", "203.0.113.7", 443);
    assert_eq!(
        (j["verdict"].as_str(), j["dnat"].is_null()),
        (Some("drop"), true),
        "{j}"
    );
    // A pod in the ranges is short-circuited to every endpoint, not masqueraded.
    let mut d = desired();
    Arc::make_mut(&mut d.services.services[2])
        .source_ranges
        .push("10.0.0.0/16".parse().unwrap());
    let args: Vec<String> = [
        "--in",
        "b3",
        "--from",
        "10.0.3.2",
        "--to",
        "203.0.113.7",
        "--proto",
        "tcp",
        "--dport",
        "443",
        "--addresses",
        ROUTER,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let j = report::json(&explain(&d, &query::parse(&args, "unused").unwrap()).unwrap());
    let backends: Vec<&str> = j["dnat"]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["to"].as_str().unwrap())
        .collect();
    assert_eq!(backends, ["10.0.1.2:8443", "10.0.3.2:8443"], "{j}");
    assert!(j["snat"].is_null(), "{j}");
}
