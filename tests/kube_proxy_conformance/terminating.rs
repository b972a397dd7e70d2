//! Upstream's `TestTerminatingEndpointsTrafficPolicyLocal` and
//! `TestTerminatingEndpointsTrafficPolicyCluster`: which of ready, serving-and-terminating
//! and not-serving endpoints take new connections, per traffic policy; each subcase then
//! deletes the slice (everything rejects).

use super::flow::{self, Flow, flow};
use super::lab::{EXTERNAL_CLIENT, Lab, Spec, UPSTREAM_KEYS};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

/// (address, ready, serving, terminating, node)
type E = (&'static str, bool, bool, bool, &'static str);

/// One subcase: name, endpoints, rows.
type Case = (&'static str, &'static [E], [Flow; 2]);

const LOCAL_CASES: &[Case] = &[
    (
        "ready endpoints exist",
        &[
            ("10.0.1.1", true, true, false, "edge-1"),
            ("10.0.1.2", true, true, false, "edge-1"),
            ("10.0.1.3", false, true, true, "edge-1"),
            ("10.0.1.4", false, false, true, "edge-1"),
            ("10.0.1.5", true, true, false, "node-1"),
        ],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "10.0.1.1:80, 10.0.1.2:80",
                false,
            ),
        ],
    ),
    (
        "only terminating endpoints exist",
        &[
            ("10.0.1.2", false, true, true, "edge-1"),
            ("10.0.1.3", false, true, true, "edge-1"),
            ("10.0.1.4", false, false, true, "edge-1"),
            ("10.0.1.5", true, true, false, "node-1"),
        ],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "10.0.1.2:80, 10.0.1.3:80",
                false,
            ),
        ],
    ),
    (
        "terminating endpoints on remote node",
        &[("10.0.1.5", false, true, true, "node-1")],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB, no locally-usable endpoints",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "DROP",
                false,
            ),
        ],
    ),
    (
        "no usable endpoints on any node",
        &[
            ("10.0.1.5", false, false, true, "edge-1"),
            ("10.0.1.5", false, false, true, "node-1"),
        ],
        [
            flow(
                "pod to clusterIP, no usable endpoints",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "REJECT",
                false,
            ),
            flow(
                "external to LB, no usable endpoints",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "REJECT",
                false,
            ),
        ],
    ),
];

const CLUSTER_CASES: &[Case] = &[
    (
        "ready endpoints exist",
        &[
            ("10.0.1.1", true, true, false, "edge-1"),
            ("10.0.1.2", true, true, false, "edge-1"),
            ("10.0.1.3", false, true, true, "another-node"),
            ("10.0.1.4", false, false, true, "another-node"),
            ("10.0.1.5", true, true, false, "another-node"),
        ],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
                true,
            ),
        ],
    ),
    (
        "only terminating endpoints exist",
        &[
            ("10.0.1.2", false, true, true, "edge-1"),
            ("10.0.1.3", false, true, true, "edge-1"),
            ("10.0.1.4", false, false, true, "another-node"),
            ("10.0.1.5", false, true, true, "another-node"),
        ],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80",
                true,
            ),
        ],
    ),
    (
        "terminating endpoints on remote node",
        &[("10.0.1.5", false, true, true, "node-1")],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "10.0.1.5:80",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "10.0.1.5:80",
                true,
            ),
        ],
    ),
    (
        "no usable endpoints on any node",
        &[
            ("10.0.1.5", false, false, true, "edge-1"),
            ("10.0.1.5", false, false, true, "node-1"),
        ],
        [
            flow(
                "pod to clusterIP",
                "10.0.0.2",
                "172.30.1.1",
                80,
                "REJECT",
                false,
            ),
            flow(
                "external to LB",
                EXTERNAL_CLIENT,
                "1.2.3.4",
                80,
                "REJECT",
                false,
            ),
        ],
    ),
];

fn run(test: &str, local: bool, cases: &[Case]) {
    // Where an address lives does not matter to the proxy (nodeName does): 10.0.1.1-4 are
    // pods here, 10.0.1.5 is on the other node.
    let mut lab = Lab::new(&Spec::new(
        &["10.0.0.2", "10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"],
        &["10.0.1.5"],
    ));
    let mut report = Report::new(test);
    let svc = Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.1.1"])
        .port("", "TCP", 80, 80, 0)
        .lb(&["1.2.3.4"]);
    let svc = if local {
        svc.etp_local(30000)
    } else {
        svc.health_check_node_port(30000)
    };
    let port = [("", "TCP", 80)];
    for (i, (case, eps, rows)) in cases.iter().enumerate() {
        let endpoints: Vec<Ep> = eps
            .iter()
            .map(|(ip, r, s, t, node)| Ep::new(ip).node(node).conditions(*r, *s, *t))
            .collect();
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
        let sub = format!("{test}/{case}");
        flow::run(&lab, &mut report, &sub, "initial", rows);
        lab.change(|l| l.delete("endpointslices", "ns1", "svc1-1"));
        flow::run(
            &lab,
            &mut report,
            &sub,
            "endpoints deleted",
            &[
                flow(
                    "pod to clusterIP after endpoints deleted",
                    "10.0.0.2",
                    "172.30.1.1",
                    80,
                    "REJECT",
                    false,
                ),
                flow(
                    "external to LB after endpoints deleted",
                    EXTERNAL_CLIENT,
                    "1.2.3.4",
                    80,
                    "REJECT",
                    false,
                ),
            ],
        );
    }
    report.finish(&lab);
}

netns_test! {
    fn test_terminating_endpoints_traffic_policy_local() {
        run("TestTerminatingEndpointsTrafficPolicyLocal", true, LOCAL_CASES);
    }
}

netns_test! {
    fn test_terminating_endpoints_traffic_policy_cluster() {
        run("TestTerminatingEndpointsTrafficPolicyCluster", false, CLUSTER_CASES);
    }
}

netns_test! {
    /// Not an upstream test: one Service through the phases a rollout takes (both endpoints
    /// ready, one terminating, both terminating, one deleted, the slice deleted, the Service
    /// deleted), each phase judged by the rules the upstream tests above pin down.
    fn endpoint_lifecycle() {
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2", "10.0.1.1"], &["10.0.1.5"]));
        let mut report = Report::new("endpoint-lifecycle");
        let test = "endpoint lifecycle (not an upstream test)";
        let port = [("", "TCP", 80)];
        let set = |l: &Lab, eps: &[Ep]| l.apply("endpointslices", slice("ns1", "svc1", 1, eps, &port));
        let a = |r, s, t| Ep::local("10.0.1.1").conditions(r, s, t);
        let b = |r, s, t| Ep::new("10.0.1.5").node("node-1").conditions(r, s, t);
        lab.apply("services", Svc::new("ns1", "svc1", "ClusterIP", &["172.30.1.1"]).port("", "TCP", 80, 80, 0).json());
        set(&lab, &[a(true, true, false), b(true, true, false)]);
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        let row = |name, output| flow(name, "10.0.0.2", "172.30.1.1", 80, output, false);
        flow::run(&lab, &mut report, test, "both ready", &[row("both endpoints take new connections", "10.0.1.1:80, 10.0.1.5:80")]);
        lab.change(|l| set(l, &[a(true, true, false), b(false, true, true)]));
        flow::run(&lab, &mut report, test, "one terminating", &[row("only the ready endpoint takes new connections", "10.0.1.1:80")]);
        lab.change(|l| set(l, &[a(false, true, true), b(false, true, true)]));
        flow::run(&lab, &mut report, test, "both terminating", &[row("with none ready, the serving terminating ones do", "10.0.1.1:80, 10.0.1.5:80")]);
        lab.change(|l| set(l, &[a(false, true, true)]));
        flow::run(&lab, &mut report, test, "one deleted", &[row("the one left serves", "10.0.1.1:80")]);
        lab.change(|l| l.delete("endpointslices", "ns1", "svc1-1"));
        flow::run(&lab, &mut report, test, "slice deleted", &[row("no endpoints: rejected", "REJECT")]);
        lab.change(|l| l.delete("services", "ns1", "svc1"));
        flow::run(&lab, &mut report, test, "service deleted", &[
            row("the Service gone: its cluster IP is unallocated", "DROP").needs(&[super::lab::Key::ServiceCidrs]),
        ]);
        report.finish(&lab);
    }
}
