//! The translation of ClusterNetworkPolicies, on the network-policy-api conformance suite's
//! cluster (four houses of two pods; gryffindor's on this node).

use serde_json::{Value, json};

use super::*;

const NODE: &str = "edge-1";

fn pod(ns: &str, name: &str, ip: &str, local: bool, ports: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": {"conformance-house": ns}},
        "spec": {"nodeName": if local { NODE } else { "edge-2" },
                 "containers": [{"name": "c", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    }))
    .unwrap()
}

fn cluster() -> (Vec<Pod>, Vec<Namespace>) {
    let web = json!([{"name": "web", "containerPort": 80}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}]);
    let pods = vec![
        pod("gryffindor", "harry-0", "10.1.1.2", true, web.clone()),
        pod("gryffindor", "harry-1", "10.1.1.3", true, web.clone()),
        pod("slytherin", "draco-0", "10.2.1.2", false, web.clone()),
        pod("ravenclaw", "luna-0", "10.2.2.2", false, web),
        pod("hufflepuff", "cedric-0", "10.2.3.2", false, json!([])),
    ];
    let namespaces = ["gryffindor", "slytherin", "ravenclaw", "hufflepuff"]
        .iter()
        .map(|n| {
            serde_json::from_value(json!({"metadata": {"name": n, "labels": {
                "conformance-house": n, "kubernetes.io/metadata.name": n}}}))
            .unwrap()
        })
        .collect();
    (pods, namespaces)
}

fn cnp(name: &str, spec: Value) -> ClusterNetworkPolicy {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn house(h: &str) -> Value {
    json!({"namespaces": {"matchLabels": {"conformance-house": h}}})
}

fn run(policies: &[ClusterNetworkPolicy]) -> (Tiers, Vec<Skipped>) {
    let (pods, namespaces) = cluster();
    translate(policies, &pods, &namespaces, NODE)
}

fn nets(v: &[&str]) -> Option<Vec<IpNet>> {
    Some(v.iter().map(|s| s.parse().unwrap()).collect())
}

fn tcp(first: u16, last: u16) -> PortRange {
    PortRange {
        protocol: L4Protocol::Tcp,
        first,
        last,
    }
}

#[test]
fn tiers_are_ordered_by_priority_then_name_and_rules_keep_their_order() {
    let rules = json!([
        {"name": "a", "action": "Accept", "from": [house("ravenclaw")]},
        {"name": "d", "action": "Deny", "from": [house("ravenclaw")]},
        {"name": "p", "action": "Pass", "from": [house("slytherin")],
         "protocols": [{"tcp": {"destinationPort": {"number": 80}}},
                       {"tcp": {"destinationPort": {"range": {"start": 8000, "end": 8100}}}}]}
    ]);
    let spec = |tier: &str, priority: i64| {
        json!({"tier": tier, "priority": priority,
               "subject": house("gryffindor"), "ingress": rules})
    };
    let (t, skipped) = run(&[
        cnp("z", spec("Admin", 3)),
        cnp("b", spec("Admin", 50)),
        cnp("a", spec("Admin", 50)),
        cnp("default", spec("Baseline", 10)),
    ]);
    assert_eq!(skipped, []);
    let names: Vec<&str> = t.admin.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["k8s:z", "k8s:a", "k8s:b"]);
    assert_eq!(t.baseline.len(), 1);
    let z = &t.admin[0];
    assert_eq!(z.pods.len(), 2, "both local gryffindor pods");
    let actions: Vec<TierAction> = z.ingress.iter().map(|r| r.action).collect();
    assert_eq!(
        actions,
        [TierAction::Accept, TierAction::Deny, TierAction::Pass]
    );
    assert_eq!(z.ingress[0].matches.peers, nets(&["10.2.2.2/32"]));
    assert_eq!(z.ingress[2].matches.ports, [tcp(80, 80), tcp(8000, 8100)]);
    assert!(z.egress.is_empty());
}

#[test]
fn a_policy_without_local_subjects_is_not_programmed_here() {
    let (t, skipped) = run(&[cnp(
        "s",
        json!({"tier": "Admin", "priority": 1, "subject": house("slytherin"),
               "ingress": [{"action": "Deny", "from": [house("ravenclaw")]}]}),
    )]);
    assert_eq!(skipped, []);
    assert!(t.admin.is_empty());
}

#[test]
fn pods_subjects_and_peers_and_egress_networks() {
    let sel = |h: &str| {
        json!({"pods": {"namespaceSelector": {"matchLabels": {"conformance-house": h}},
                        "podSelector": {"matchLabels": {"conformance-house": h}}}})
    };
    let (t, skipped) = run(&[cnp(
        "inline-cidr",
        json!({"tier": "Admin", "priority": 85, "subject": sel("gryffindor"),
               "egress": [
                 {"action": "Accept", "to": [sel("slytherin")]},
                 {"action": "Deny", "to": [{"networks": ["0.0.0.0/0", "::/0", "10.9.9.9/24"]}]}]}),
    )]);
    assert_eq!(skipped, []);
    let p = &t.admin[0];
    assert_eq!(p.egress[0].matches.peers, nets(&["10.2.1.2/32"]));
    assert_eq!(
        p.egress[1].matches.peers,
        nets(&["0.0.0.0/0", "10.9.9.0/24", "::/0"]),
        "host bits cleared"
    );
}

#[test]
fn named_ports_resolve_through_the_subject_for_ingress_and_the_peers_for_egress() {
    let (t, skipped) = run(&[cnp(
        "named",
        json!({"tier": "Baseline", "priority": 1, "subject": house("gryffindor"),
               "ingress": [{"action": "Accept", "from": [house("ravenclaw")],
                            "protocols": [{"destinationNamedPort": "dns"}]}],
               "egress": [{"action": "Accept", "to": [house("slytherin"), house("hufflepuff")],
                           "protocols": [{"destinationNamedPort": "web"}]}]}),
    )]);
    assert_eq!(skipped, []);
    let p = &t.baseline[0];
    let udp53 = PortRange {
        protocol: L4Protocol::Udp,
        first: 53,
        last: 53,
    };
    assert_eq!(p.ingress.len(), 1);
    assert_eq!(p.ingress[0].matches.ports, [udp53]);
    assert_eq!(
        p.ingress[0].matches.pods,
        Some(vec![
            "10.1.1.2".parse().unwrap(),
            "10.1.1.3".parse().unwrap()
        ])
    );
    assert_eq!(p.egress.len(), 1, "cedric declares no `web`");
    assert_eq!(p.egress[0].matches.peers, nets(&["10.2.1.2/32"]));
    assert_eq!(p.egress[0].matches.ports, [tcp(80, 80)]);
}

/// The API's "fail closed" for peers an implementation cannot read: an `Accept` rule
/// matches nothing, a `Deny` or `Pass` rule denies all.
#[test]
fn unreadable_peers_fail_closed() {
    let (t, skipped) = run(&[cnp(
        "experimental",
        json!({"tier": "Admin", "priority": 75, "subject": house("gryffindor"),
               "egress": [
                 {"name": "to-nodes", "action": "Accept", "to": [{"nodes": {"matchLabels": {"kubernetes.io/os": "linux"}}}]},
                 {"name": "fqdn", "action": "Accept", "to": [{"domainNames": ["kubernetes.io"]}]},
                 {"name": "newer", "action": "Pass", "to": [{"serviceAccounts": {}}]},
                 {"name": "empty", "action": "Deny", "to": [{}]},
                 {"name": "bad-cidr", "action": "Deny", "to": [{"networks": ["10.0.0.300/8"]}]},
                 {"name": "bad-port", "action": "Accept", "to": [house("ravenclaw")],
                  "protocols": [{"tcp": {"destinationPort": {"range": {"start": 90, "end": 80}}}}]}]}),
    )]);
    let reasons: Vec<&str> = skipped.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "rule `to-nodes`: `nodes` peers are not supported: matches nothing",
            "rule `fqdn`: `domainNames` peers are not supported: matches nothing",
            "rule `newer`: a peer of an unknown type `serviceAccounts`: denies all",
            "rule `empty`: a peer needs exactly one field, it has 0 (a newer API?): denies all",
            "rule `bad-cidr`: invalid network `10.0.0.300/8`: denies all",
            "rule `bad-port`: invalid port range 90-80: matches nothing",
        ]
    );
    assert_eq!(t.admin[0].egress, [deny_all(), deny_all(), deny_all()]);
    assert_eq!(skipped[0].policy, "experimental");
}

#[test]
fn a_policy_whose_tier_priority_or_subject_does_not_read_is_left_out() {
    let (t, skipped) = run(&[
        cnp(
            "t",
            json!({"tier": "Developer", "priority": 1, "subject": house("gryffindor")}),
        ),
        cnp(
            "p",
            json!({"tier": "Admin", "priority": 1001, "subject": house("gryffindor")}),
        ),
        cnp("s", json!({"tier": "Admin", "priority": 1, "subject": {}})),
    ]);
    assert!(t.admin.is_empty() && t.baseline.is_empty());
    let reasons: Vec<String> = skipped
        .iter()
        .map(|s| format!("{}: {}", s.policy, s.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            "t: left out: unknown tier `Developer`",
            "p: left out: priority 1001 is not within 0-1000",
            "s: left out: subject: the subject needs exactly one of `namespaces` and `pods`",
        ]
    );
}
