//! Upstream's traffic policy tests: `TestExternalTrafficPolicyLocal`,
//! `TestExternalTrafficPolicyCluster`, `TestInternalTrafficPolicy` and
//! `TestInternalExternalMasquerade`.

use super::flow::{self, Flow, flow};
use super::lab::{EXTERNAL_CLIENT, Key, Lab, NODE_IP, Spec, UPSTREAM_KEYS};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

const CLUSTER_CIDRS: &[Key] = &[Key::ClusterCidrs];
const BOTH: &str = "10.180.0.1:80, 10.180.2.1:80";
const LOCAL: &str = "10.180.2.1:80";

/// The Service both eTP tests share: LoadBalancer 172.30.0.41, external IP 192.168.99.11
/// (an address of the node), node port 3001, LB 1.2.3.4; endpoints 10.180.0.1 (another
/// node) and 10.180.2.1 (this node).
fn etp_lab(local: bool) -> Lab {
    let mut lab = Lab::new(&Spec::new(&["10.0.0.2", "10.180.2.1"], &["10.180.0.1"]));
    let svc = Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.0.41"])
        .external_ips(&["192.168.99.11"])
        .port("p80", "TCP", 80, 80, 3001)
        .lb(&["1.2.3.4"]);
    let svc = if local { svc.etp_local(30000) } else { svc };
    lab.apply("services", svc.json());
    lab.apply(
        "endpointslices",
        slice(
            "ns1",
            "svc1",
            1,
            &[Ep::new("10.180.0.1"), Ep::local("10.180.2.1")],
            &[("p80", "TCP", 80)],
        ),
    );
    lab.start(UPSTREAM_KEYS);
    lab
}

const ETP_LOCAL: &[Flow] = &[
    flow(
        "pod to cluster IP hits both endpoints, unmasqueraded",
        "10.0.0.2",
        "172.30.0.41",
        80,
        BOTH,
        false,
    ),
    flow(
        "pod to external IP hits both endpoints, unmasqueraded",
        "10.0.0.2",
        "192.168.99.11",
        80,
        BOTH,
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to external IP hits only local endpoint, unmasqueraded",
        EXTERNAL_CLIENT,
        "192.168.99.11",
        80,
        LOCAL,
        false,
    ),
    flow(
        "pod to LB IP hits only both endpoints, unmasqueraded",
        "10.0.0.2",
        "1.2.3.4",
        80,
        BOTH,
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to LB IP hits only local endpoint, unmasqueraded",
        EXTERNAL_CLIENT,
        "1.2.3.4",
        80,
        LOCAL,
        false,
    ),
    flow(
        "pod to NodePort hits both endpoints, unmasqueraded",
        "10.0.0.2",
        NODE_IP,
        3001,
        BOTH,
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to NodePort hits only local endpoint, unmasqueraded",
        EXTERNAL_CLIENT,
        NODE_IP,
        3001,
        LOCAL,
        false,
    ),
];

netns_test! {
    fn test_external_traffic_policy_local() {
        let lab = etp_lab(true);
        let mut report = Report::new("TestExternalTrafficPolicyLocal");
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestExternalTrafficPolicyLocal", "initial", ETP_LOCAL);
        let hc = "TestExternalTrafficPolicyLocal/health check node port (not an upstream row)";
        super::load_balancer::health_row(&mut report, hc, "initial", 30000, 200, 1);
        // The local endpoint goes: external traffic has nowhere to go on this node.
        lab.change(|l| l.apply("endpointslices", slice("ns1", "svc1", 1,
            &[Ep::new("10.180.0.1")], &[("p80", "TCP", 80)])));
        flow::run(&lab, &mut report, "TestExternalTrafficPolicyLocal", "local endpoint deleted", &[
            flow("external to LB IP with no local endpoint drops", EXTERNAL_CLIENT, "1.2.3.4", 80, "DROP", false)
                .note("not an upstream row: the endpoint-change phase of this suite (upstream's TestOverallNFTablesRules svc2)"),
            flow("external to NodePort with no local endpoint drops", EXTERNAL_CLIENT, NODE_IP, 3001, "DROP", false)
                .note("not an upstream row: the endpoint-change phase of this suite"),
            flow("pod to cluster IP still hits the remote endpoint", "10.0.0.2", "172.30.0.41", 80, "10.180.0.1:80", false)
                .note("not an upstream row: the endpoint-change phase of this suite"),
        ]);
        super::load_balancer::health_row(&mut report, hc, "local endpoint deleted", 30000, 503, 0);
        report.finish(&lab);
    }
}

const ETP_CLUSTER: &[Flow] = &[
    flow(
        "pod to cluster IP hits both endpoints, unmasqueraded",
        "10.0.0.2",
        "172.30.0.41",
        80,
        BOTH,
        false,
    ),
    flow(
        "pod to external IP hits both endpoints, masqueraded",
        "10.0.0.2",
        "192.168.99.11",
        80,
        BOTH,
        true,
    ),
    flow(
        "external to external IP hits both endpoints, masqueraded",
        EXTERNAL_CLIENT,
        "192.168.99.11",
        80,
        BOTH,
        true,
    ),
    flow(
        "pod to LB IP hits both endpoints, masqueraded",
        "10.0.0.2",
        "1.2.3.4",
        80,
        BOTH,
        true,
    ),
    flow(
        "external to LB IP hits both endpoints, masqueraded",
        EXTERNAL_CLIENT,
        "1.2.3.4",
        80,
        BOTH,
        true,
    ),
    flow(
        "pod to NodePort hits both endpoints, masqueraded",
        "10.0.0.2",
        NODE_IP,
        3001,
        BOTH,
        true,
    ),
    flow(
        "external to NodePort hits both endpoints, masqueraded",
        EXTERNAL_CLIENT,
        NODE_IP,
        3001,
        BOTH,
        true,
    ),
];

netns_test! {
    fn test_external_traffic_policy_cluster() {
        let lab = etp_lab(false);
        let mut report = Report::new("TestExternalTrafficPolicyCluster");
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestExternalTrafficPolicyCluster", "initial", ETP_CLUSTER);
        report.finish(&lab);
    }
}

/// One `TestInternalTrafficPolicy` subcase: policy, endpoints (address, node), its row.
type ItpCase = (
    &'static str,
    Option<&'static str>,
    [(&'static str, &'static str); 3],
    Flow,
);

const ITP: &[ItpCase] = &[
    (
        "internalTrafficPolicy is cluster",
        Some("Cluster"),
        [
            ("10.0.1.1", "edge-1"),
            ("10.0.1.2", "node1"),
            ("10.0.1.3", "node2"),
        ],
        flow(
            "pod to ClusterIP hits all endpoints",
            "10.0.0.2",
            "172.30.1.1",
            80,
            "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80",
            false,
        ),
    ),
    (
        "internalTrafficPolicy is local and there is one local endpoint",
        Some("Local"),
        [
            ("10.0.1.1", "edge-1"),
            ("10.0.1.2", "node1"),
            ("10.0.1.3", "node2"),
        ],
        flow(
            "pod to ClusterIP hits only local endpoint",
            "10.0.0.2",
            "172.30.1.1",
            80,
            "10.0.1.1:80",
            false,
        ),
    ),
    (
        "internalTrafficPolicy is local and there are multiple local endpoints",
        Some("Local"),
        [
            ("10.0.1.1", "edge-1"),
            ("10.0.1.2", "edge-1"),
            ("10.0.1.3", "node2"),
        ],
        flow(
            "pod to ClusterIP hits all local endpoints",
            "10.0.0.2",
            "172.30.1.1",
            80,
            "10.0.1.1:80, 10.0.1.2:80",
            false,
        ),
    ),
    (
        "internalTrafficPolicy is local and there are no local endpoints",
        Some("Local"),
        [
            ("10.0.1.1", "node0"),
            ("10.0.1.2", "node1"),
            ("10.0.1.3", "node2"),
        ],
        flow("no endpoints", "10.0.0.2", "172.30.1.1", 80, "DROP", false),
    ),
];

netns_test! {
    fn test_internal_traffic_policy() {
        // Where an address lives does not matter to the proxy (nodeName does): 10.0.1.1 and
        // 10.0.1.2 are pods here, 10.0.1.3 on the other node, whatever a subcase's nodeName.
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2", "10.0.1.1", "10.0.1.2"], &["10.0.1.3"]));
        let mut report = Report::new("TestInternalTrafficPolicy");
        let port = [("", "TCP", 80)];
        for (i, (case, policy, eps, row)) in ITP.iter().enumerate() {
            let svc = Svc::new("ns1", "svc1", "ClusterIP", &["172.30.1.1"]).port("", "TCP", 80, 80, 0);
            let svc = if *policy == Some("Local") { svc.itp_local() } else { svc };
            let endpoints: Vec<Ep> = eps.iter().map(|(ip, node)| Ep::new(ip).node(node).ready(true)).collect();
            let apply = |l: &Lab| {
                l.apply("services", svc.json());
                l.apply("endpointslices", slice("ns1", "svc1", 1, &endpoints, &port));
            };
            if i == 0 {
                apply(&lab);
                lab.start(UPSTREAM_KEYS);
                report.note_start(&lab);
            } else {
                lab.change(apply);
            }
            let test = format!("TestInternalTrafficPolicy/{case}");
            flow::run(&lab, &mut report, &test, "initial", &[*row]);
            lab.change(|l| l.delete("endpointslices", "ns1", "svc1-1"));
            flow::run(&lab, &mut report, &test, "endpoints deleted", &[
                flow("endpoints deleted", "10.0.0.2", "172.30.1.1", 80, "REJECT", false),
            ]);
        }
        report.finish(&lab);
    }
}

/// `TestInternalExternalMasquerade`'s rows, its "base" case (a working local-traffic
/// detector, no masquerade-all).
const MASQUERADE_BASE: &[Flow] = &[
    flow(
        "pod to ClusterIP",
        "10.0.0.2",
        "172.30.0.41",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        false,
    ),
    flow(
        "pod to NodePort",
        "10.0.0.2",
        NODE_IP,
        3001,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "pod to LB",
        "10.0.0.2",
        "1.2.3.4",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "node to ClusterIP",
        NODE_IP,
        "172.30.0.41",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "node to NodePort",
        NODE_IP,
        NODE_IP,
        3001,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "node to LB",
        NODE_IP,
        "1.2.3.4",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "external to ClusterIP",
        EXTERNAL_CLIENT,
        "172.30.0.41",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to NodePort",
        EXTERNAL_CLIENT,
        NODE_IP,
        3001,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "external to LB",
        EXTERNAL_CLIENT,
        "1.2.3.4",
        80,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "pod to ClusterIP with eTP:Local",
        "10.0.0.2",
        "172.30.0.42",
        80,
        "10.180.0.2:80, 10.180.1.2:80",
        false,
    ),
    flow(
        "pod to NodePort with eTP:Local",
        "10.0.0.2",
        NODE_IP,
        3002,
        "10.180.0.2:80, 10.180.1.2:80",
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "pod to LB with eTP:Local",
        "10.0.0.2",
        "5.6.7.8",
        80,
        "10.180.0.2:80, 10.180.1.2:80",
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "node to ClusterIP with eTP:Local",
        NODE_IP,
        "172.30.0.42",
        80,
        "10.180.0.2:80, 10.180.1.2:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    // Upstream's row sends to node port 3001 (svc1's), as written.
    flow(
        "node to NodePort with eTP:Local",
        NODE_IP,
        NODE_IP,
        3001,
        "10.180.0.1:80, 10.180.1.1:80",
        true,
    ),
    flow(
        "node to LB with eTP:Local",
        NODE_IP,
        "5.6.7.8",
        80,
        "10.180.0.2:80, 10.180.1.2:80",
        true,
    ),
    flow(
        "external to ClusterIP with eTP:Local",
        EXTERNAL_CLIENT,
        "172.30.0.42",
        80,
        "10.180.0.2:80, 10.180.1.2:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to NodePort with eTP:Local",
        EXTERNAL_CLIENT,
        NODE_IP,
        3002,
        "10.180.0.2:80",
        false,
    ),
    flow(
        "external to LB with eTP:Local",
        EXTERNAL_CLIENT,
        "5.6.7.8",
        80,
        "10.180.0.2:80",
        false,
    ),
    flow(
        "pod to ClusterIP with iTP:Local",
        "10.0.0.2",
        "172.30.0.43",
        80,
        "10.180.0.3:80",
        false,
    ),
    flow(
        "pod to NodePort with iTP:Local",
        "10.0.0.2",
        NODE_IP,
        3003,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
    flow(
        "pod to LB with iTP:Local",
        "10.0.0.2",
        "9.10.11.12",
        80,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
    flow(
        "node to ClusterIP with iTP:Local",
        NODE_IP,
        "172.30.0.43",
        80,
        "10.180.0.3:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "node to NodePort with iTP:Local",
        NODE_IP,
        NODE_IP,
        3003,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
    flow(
        "node to LB with iTP:Local",
        NODE_IP,
        "9.10.11.12",
        80,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
    flow(
        "external to ClusterIP with iTP:Local",
        EXTERNAL_CLIENT,
        "172.30.0.43",
        80,
        "10.180.0.3:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "external to NodePort with iTP:Local",
        EXTERNAL_CLIENT,
        NODE_IP,
        3003,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
    flow(
        "external to LB with iTP:Local",
        EXTERNAL_CLIENT,
        "9.10.11.12",
        80,
        "10.180.0.3:80, 10.180.1.3:80",
        true,
    ),
];

/// The "no LocalTrafficDetector" case: upstream's overrides of the base rows. (Its
/// "masqueradeAll" cases are not ported: edgenetd has no such setting; see docs/kubernetes.md,
/// "Deviations from kube-proxy".)
fn no_detector(f: &Flow) -> Flow {
    let mut f = *f;
    match f.name {
        "node to ClusterIP"
        | "node to ClusterIP with eTP:Local"
        | "node to ClusterIP with iTP:Local"
        | "external to ClusterIP"
        | "external to ClusterIP with eTP:Local"
        | "external to ClusterIP with iTP:Local" => f.masq = false,
        "pod to NodePort with eTP:Local" | "pod to LB with eTP:Local" => f.output = "10.180.0.2:80",
        _ => {}
    }
    // This case is the daemon without `cluster_cidrs`: nothing relies on the key.
    f.needs = &[];
    f
}

netns_test! {
    fn test_internal_external_masquerade() {
        let mut lab = Lab::new(&Spec::new(
            &["10.0.0.2", "10.180.0.1", "10.180.0.2", "10.180.0.3"],
            &["10.180.1.1", "10.180.1.2", "10.180.1.3"],
        ));
        let mut report = Report::new("TestInternalExternalMasquerade");
        lab.apply("services", Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.0.41"])
            .port("p80", "TCP", 80, 80, 3001).health_check_node_port(30001).lb(&["1.2.3.4"]).json());
        lab.apply("services", Svc::new("ns2", "svc2", "LoadBalancer", &["172.30.0.42"])
            .port("p80", "TCP", 80, 80, 3002).etp_local(30002).lb(&["5.6.7.8"]).json());
        lab.apply("services", Svc::new("ns3", "svc3", "LoadBalancer", &["172.30.0.43"])
            .port("p80", "TCP", 80, 80, 3003).health_check_node_port(30003).itp_local().lb(&["9.10.11.12"]).json());
        let p80 = [("p80", "TCP", 80)];
        for (i, svc) in ["svc1", "svc2", "svc3"].iter().enumerate() {
            let ns = format!("ns{}", i + 1);
            let local = format!("10.180.0.{}", i + 1);
            let remote = format!("10.180.1.{}", i + 1);
            lab.apply("endpointslices", slice(&ns, svc, 1,
                &[Ep::local(&local), Ep::new(&remote).node("remote")], &p80));
        }
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestInternalExternalMasquerade/base", "base", MASQUERADE_BASE);
        // Without a local-traffic detector: `cluster_cidrs = []` (left out, the detector
        // would default to this node's pod CIDRs, kube-proxy's NodeCIDR mode).
        lab.start(&[(Key::ClusterCidrs, "[]"), (Key::ServiceCidrs, UPSTREAM_KEYS[1].1)]);
        let rows: Vec<Flow> = MASQUERADE_BASE.iter().map(no_detector).collect();
        flow::run(&lab, &mut report, "TestInternalExternalMasquerade/no LocalTrafficDetector", "no detector", &rows);
        report.finish(&lab);
    }
}
