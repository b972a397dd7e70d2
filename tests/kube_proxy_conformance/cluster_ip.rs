//! Upstream's ClusterIP tests: `TestClusterIPGeneral` and `TestNoEndpointsReject`.

use super::flow::{self, Flow, flow};
use super::lab::{Key, Lab, Spec, UPSTREAM_KEYS};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

const SERVICE_CIDRS: &[Key] = &[Key::ServiceCidrs];

/// `TestClusterIPGeneral`'s rows (SCTP apart: see [`sctp_row`]).
const CLUSTER_IP_GENERAL: &[Flow] = &[
    flow(
        "simple clusterIP",
        "10.180.0.2",
        "172.30.0.41",
        80,
        "10.180.0.1:80",
        false,
    ),
    flow(
        "hairpin to cluster IP",
        "10.180.0.1",
        "172.30.0.41",
        80,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "clusterIP with multiple endpoints",
        "10.180.0.2",
        "172.30.0.42",
        80,
        "10.180.0.1:80, 10.180.2.1:80",
        false,
    ),
    flow(
        "clusterIP with TargetPort",
        "10.180.0.2",
        "172.30.0.42",
        443,
        "10.180.0.1:8443, 10.180.2.1:8443",
        false,
    ),
    flow(
        "clusterIP with TCP, UDP, and SCTP on same port (TCP)",
        "10.180.0.2",
        "172.30.0.42",
        53,
        "10.180.0.1:5353, 10.180.2.1:5353",
        false,
    ),
    // Upstream names the UDP row "(TCP)" as well; kept as written.
    flow(
        "clusterIP with TCP, UDP, and SCTP on same port (TCP)",
        "10.180.0.2",
        "172.30.0.42",
        53,
        "10.180.0.1:53, 10.180.2.1:53",
        false,
    )
    .udp(),
    flow(
        "TCP-only port does not match UDP traffic",
        "10.180.0.2",
        "172.30.0.42",
        80,
        "REJECT",
        false,
    )
    .udp(),
    flow(
        "svc1 does not accept svc2's ports",
        "10.180.0.2",
        "172.30.0.41",
        443,
        "REJECT",
        false,
    ),
    flow(
        "packet to unallocated cluster ip",
        "10.180.0.2",
        "172.30.0.50",
        80,
        "DROP",
        false,
    )
    .needs(SERVICE_CIDRS),
];

/// Not an upstream row: the brief's deletion phase, svc1 gone.
const CLUSTER_IP_GENERAL_DELETED: &[Flow] = &[
    flow(
        "svc1 deleted: its cluster IP is unallocated",
        "10.180.0.2",
        "172.30.0.41",
        80,
        "DROP",
        false,
    )
    .needs(SERVICE_CIDRS)
    .note("not an upstream row: the Service-deletion phase of this suite"),
    flow(
        "svc1 deleted: svc2 unaffected",
        "10.180.0.2",
        "172.30.0.42",
        80,
        "10.180.0.1:80, 10.180.2.1:80",
        false,
    )
    .note("not an upstream row: the Service-deletion phase of this suite"),
];

fn sctp_row(lab: &Lab, report: &mut Report) {
    let name = "TestClusterIPGeneral/clusterIP with TCP, UDP, and SCTP on same port (SCTP)";
    let what =
        "sctp 10.180.0.2 -> 172.30.0.42:53 expect \"10.180.0.1:53, 10.180.2.1:53\" masq false";
    let kernel_has_sctp = lab
        .net
        .router()
        .sh_status(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)'",
        )
        .0;
    if kernel_has_sctp {
        let f = flow(
            "clusterIP with TCP, UDP, and SCTP on same port (SCTP)",
            "10.180.0.2",
            "172.30.0.42",
            53,
            "10.180.0.1:53, 10.180.2.1:53",
            false,
        );
        let f = Flow { proto: "sctp", ..f };
        report.record(name, "initial", what, "", flow::check(lab, &f));
        return;
    }
    // Without SCTP in the kernel no packet can be sent: the row is judged on the ruleset.
    let rules = super::lab::ruleset();
    let ok = rules
        .lines()
        .any(|l| l.contains("sctp") && (l.contains("172.30.0.42") || l.contains("10.180.0.1")));
    let result = if ok {
        Ok("an SCTP entry for 172.30.0.42:53 is in the ruleset (no SCTP in this kernel: judged on the ruleset, not on packets)".into())
    } else {
        Err("no SCTP entry for 172.30.0.42:53 in the ruleset (no SCTP in this kernel: judged on the ruleset)".into())
    };
    report.record(name, "initial", what, "", result);
}

netns_test! {
    fn test_cluster_ip_general() {
        let mut lab = Lab::new(&Spec::new(&["10.180.0.1", "10.180.0.2"], &["10.180.2.1"]));
        let mut report = Report::new("TestClusterIPGeneral");
        lab.apply("services", Svc::new("ns1", "svc1", "ClusterIP", &["172.30.0.41"])
            .port("http", "TCP", 80, 80, 0).json());
        lab.apply("services", Svc::new("ns2", "svc2", "ClusterIP", &["172.30.0.42"])
            .port("http", "TCP", 80, 80, 0)
            .port("https", "TCP", 443, 8443, 0)
            .port("dns-udp", "UDP", 53, 53, 0)
            .port("dns-tcp", "TCP", 53, 5353, 0)
            .port("dns-sctp", "SCTP", 53, 53, 0)
            .json());
        lab.apply("endpointslices", slice("ns1", "svc1", 1, &[Ep::local("10.180.0.1")], &[("http", "TCP", 80)]));
        lab.apply("endpointslices", slice("ns2", "svc2", 1,
            &[Ep::local("10.180.0.1"), Ep::new("10.180.2.1").node("node2")],
            &[("http", "TCP", 80), ("https", "TCP", 8443), ("dns-udp", "UDP", 53),
              ("dns-tcp", "TCP", 5353), ("dns-sctp", "SCTP", 53)]));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestClusterIPGeneral", "initial", CLUSTER_IP_GENERAL);
        sctp_row(&lab, &mut report);
        lab.change(|l| l.delete("services", "ns1", "svc1"));
        flow::run(&lab, &mut report, "TestClusterIPGeneral", "svc1 deleted", CLUSTER_IP_GENERAL_DELETED);
        report.finish(&lab);
    }
}

netns_test! {
    fn test_no_endpoints_reject() {
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2"], &[]));
        let mut report = Report::new("TestNoEndpointsReject");
        lab.apply("services", Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.0.41"])
            .external_ips(&["192.168.99.11"])
            .port("p80", "TCP", 80, 80, 3001)
            .lb(&["1.2.3.4"])
            .json());
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        use super::lab::{EXTERNAL_CLIENT as EXT, NODE_IP};
        flow::run(&lab, &mut report, "TestNoEndpointsReject", "initial", &[
            flow("pod to cluster IP with no endpoints", "10.0.0.2", "172.30.0.41", 80, "REJECT", false),
            flow("external to external IP with no endpoints", EXT, "192.168.99.11", 80, "REJECT", false),
            flow("pod to NodePort with no endpoints", "10.0.0.2", NODE_IP, 3001, "REJECT", false),
            flow("external to NodePort with no endpoints", EXT, NODE_IP, 3001, "REJECT", false),
            flow("pod to LoadBalancer IP with no endpoints", "10.0.0.2", "1.2.3.4", 80, "REJECT", false),
            flow("external to LoadBalancer IP with no endpoints", EXT, "1.2.3.4", 80, "REJECT", false),
        ]);
        report.finish(&lab);
    }
}

netns_test! {
    /// `TestBuildServiceMapServiceHeadless` and `TestBuildServiceMapServiceTypeExternalName`
    /// check that neither kind reaches the proxy's service map; with packets: their
    /// addresses are unallocated cluster IPs (dropped), and the headless Service's endpoints
    /// are never reached through any address.
    fn test_build_service_map_headless_and_external_name() {
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2", "10.180.0.1"], &[]));
        let mut report = Report::new("TestBuildServiceMapServiceHeadless");
        lab.apply("services", Svc::new("somewhere-else", "headless", "ClusterIP", &["None"])
            .port("rpc", "UDP", 1234, 1234, 0).json());
        lab.apply("services", Svc::new("somewhere-else", "headless-without-port", "ClusterIP", &["None"]).json());
        let mut ext = Svc::new("somewhere-else", "external-name", "ExternalName", &["172.30.55.4"])
            .port("blah", "UDP", 1235, 5321, 0).json();
        ext["spec"]["externalName"] = serde_json::json!("foo2.bar.com");
        lab.apply("services", ext);
        lab.apply("endpointslices", slice("somewhere-else", "headless", 1,
            &[Ep::local("10.180.0.1")], &[("rpc", "UDP", 53)]));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestBuildServiceMapServiceTypeExternalName", "initial", &[
            flow("the external-name Service's cluster IP is not served", "10.0.0.2", "172.30.55.4", 1235, "DROP", false)
                .udp()
                .needs(SERVICE_CIDRS),
        ]);
        let leaked = super::lab::ruleset().contains("10.180.0.1");
        report.record("TestBuildServiceMapServiceHeadless/headless Service is ignored", "initial",
            "no rule of the node's ruleset sends to the headless Service's endpoint 10.180.0.1", "",
            if leaked { Err("10.180.0.1 is in the ruleset".into()) } else { Ok("10.180.0.1 is in no rule".into()) });
        report.finish(&lab);
    }
}
