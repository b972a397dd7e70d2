//! Upstream's load balancer tests: `TestLoadBalancer`, `TestOverallNFTablesRules` (its
//! expected ruleset read as packet flows), `TestLoadBalancerIngressRouteTypeProxy` and
//! `TestBadIPs`.

use super::flow::{self, Flow, flow};
use super::lab::{
    EXTERNAL_CLIENT, EXTERNAL_CLIENT_BLOCKED, Key, Lab, NODE_IP, Spec, UPSTREAM_KEYS,
};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

const CLUSTER_CIDRS: &[Key] = &[Key::ClusterCidrs];

const LOAD_BALANCER: &[Flow] = &[
    flow(
        "pod to cluster IP",
        "10.0.0.2",
        "172.30.0.41",
        80,
        "10.180.0.1:80",
        false,
    ),
    flow(
        "external to nodePort",
        EXTERNAL_CLIENT,
        NODE_IP,
        3001,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "nodePort bypasses LoadBalancerSourceRanges",
        EXTERNAL_CLIENT_BLOCKED,
        NODE_IP,
        3001,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "accepted external to LB1",
        EXTERNAL_CLIENT,
        "1.2.3.4",
        80,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "accepted external to LB2",
        EXTERNAL_CLIENT,
        "5.6.7.8",
        80,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "blocked external to LB1",
        EXTERNAL_CLIENT_BLOCKED,
        "1.2.3.4",
        80,
        "DROP",
        false,
    ),
    flow(
        "blocked external to LB2",
        EXTERNAL_CLIENT_BLOCKED,
        "5.6.7.8",
        80,
        "DROP",
        false,
    ),
    flow(
        "pod to LB1 (blocked by LoadBalancerSourceRanges)",
        "10.0.0.2",
        "1.2.3.4",
        80,
        "DROP",
        false,
    ),
    flow(
        "pod to LB2 (blocked by LoadBalancerSourceRanges)",
        "10.0.0.2",
        "5.6.7.8",
        80,
        "DROP",
        false,
    ),
    flow(
        "node to LB1 (allowed by LoadBalancerSourceRanges)",
        NODE_IP,
        "1.2.3.4",
        80,
        "10.180.0.1:80",
        true,
    ),
    flow(
        "node to LB2 (allowed by LoadBalancerSourceRanges)",
        NODE_IP,
        "5.6.7.8",
        80,
        "10.180.0.1:80",
        true,
    ),
];

/// Upstream's comment: something outside kube-proxy SNATs the node's connection to a load
/// balancer IP to that IP; the suite gives the node the address for these two rows.
const LOAD_BALANCER_SNATTED: &[Flow] = &[
    flow(
        "same node to LB1, SNATted to LB1 (implicitly allowed)",
        "1.2.3.4",
        "1.2.3.4",
        80,
        "10.180.0.1:80",
        true,
    )
    .note(
        "the node holds 1.2.3.4 on its loopback for this row (the upstream comment's outside SNAT)",
    ),
    flow(
        "same node to LB2, SNATted to LB2 (implicitly allowed)",
        "5.6.7.8",
        "5.6.7.8",
        80,
        "10.180.0.1:80",
        true,
    )
    .note(
        "the node holds 5.6.7.8 on its loopback for this row (the upstream comment's outside SNAT)",
    ),
];

netns_test! {
    fn test_load_balancer() {
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2"], &["10.180.0.1"]));
        let mut report = Report::new("TestLoadBalancer");
        lab.apply("services", Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.0.41"])
            .port("p80", "TCP", 80, 80, 3001)
            .lb(&["1.2.3.4", "5.6.7.8"])
            .source_ranges(&["192.168.0.0/24", " 203.0.113.0/25"])
            .json());
        lab.apply("endpointslices", slice("ns1", "svc1", 1, &[Ep::new("10.180.0.1")], &[("p80", "TCP", 80)]));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestLoadBalancer", "initial", LOAD_BALANCER);
        lab.add_node_address("1.2.3.4");
        lab.add_node_address("5.6.7.8");
        flow::run(&lab, &mut report, "TestLoadBalancer", "initial", LOAD_BALANCER_SNATTED);
        lab.remove_node_address("1.2.3.4");
        lab.remove_node_address("5.6.7.8");
        lab.change(|l| l.delete("endpointslices", "ns1", "svc1-1"));
        flow::run(&lab, &mut report, "TestLoadBalancer", "endpoints deleted", &[
            flow("endpoints deleted: external to LB1", EXTERNAL_CLIENT, "1.2.3.4", 80, "REJECT", false)
                .note("not an upstream row: the endpoint-deletion phase of this suite"),
            flow("endpoints deleted: blocked external to LB1", EXTERNAL_CLIENT_BLOCKED, "1.2.3.4", 80, "DROP", false)
                .note("not an upstream row: the firewall comes before the no-endpoint reject"),
        ]);
        lab.change(|l| l.delete("services", "ns1", "svc1"));
        flow::run(&lab, &mut report, "TestLoadBalancer", "service deleted", &[
            flow("service deleted: external to LB1", EXTERNAL_CLIENT, "1.2.3.4", 80, "FORWARD", false)
                .note("not an upstream row: a load balancer IP nobody serves is routed on"),
        ]);
        report.finish(&lab);
    }
}

/// `TestOverallNFTablesRules` compares a ruleset; these rows are what that ruleset does to
/// packets (each row names the service whose rules it reads).
const OVERALL: &[Flow] = &[
    flow(
        "svc1: pod to cluster IP",
        "10.0.0.2",
        "172.30.0.41",
        80,
        "10.180.0.1:80",
        false,
    ),
    flow(
        "svc1: external to cluster IP (masquerade off-cluster traffic)",
        EXTERNAL_CLIENT,
        "172.30.0.41",
        80,
        "10.180.0.1:80",
        true,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "svc2: external to LB IP with only non-local endpoints (eTP:Local)",
        EXTERNAL_CLIENT,
        "1.2.3.4",
        80,
        "DROP",
        false,
    ),
    flow(
        "svc2: external to external IP with only non-local endpoints (eTP:Local)",
        EXTERNAL_CLIENT,
        "192.168.99.22",
        80,
        "DROP",
        false,
    ),
    flow(
        "svc2: external to NodePort with only non-local endpoints (eTP:Local)",
        EXTERNAL_CLIENT,
        NODE_IP,
        3001,
        "DROP",
        false,
    ),
    flow(
        "svc2: pod to LB IP (short-circuit pod traffic)",
        "10.0.0.2",
        "1.2.3.4",
        80,
        "10.180.0.2:80",
        false,
    )
    .needs(CLUSTER_CIDRS),
    flow(
        "svc2: node to LB IP (masquerade local traffic, short-circuit)",
        NODE_IP,
        "1.2.3.4",
        80,
        "10.180.0.2:80",
        true,
    ),
    flow(
        "svc2: pod to cluster IP (eTP does not apply)",
        "10.0.0.2",
        "172.30.0.42",
        80,
        "10.180.0.2:80",
        false,
    ),
    flow(
        "svc3: external to NodePort",
        EXTERNAL_CLIENT,
        NODE_IP,
        3003,
        "10.180.0.3:80",
        true,
    ),
    flow(
        "svc4: external to external IP",
        EXTERNAL_CLIENT,
        "192.168.99.33",
        80,
        "10.180.0.4:80, 10.180.0.5:80",
        true,
    ),
    flow(
        "svc5: accepted external to LB IP",
        EXTERNAL_CLIENT,
        "5.6.7.8",
        80,
        "10.180.0.3:80",
        true,
    ),
    flow(
        "svc5: blocked external to LB IP",
        EXTERNAL_CLIENT_BLOCKED,
        "5.6.7.8",
        80,
        "DROP",
        false,
    ),
    // Upstream's ruleset fences the output hook too (`filter-output-pre-dnat ct state new
    // jump firewall-check`) and svc5's one range holds no node address (no allowFromNode):
    // the node's own connection to the LB IP is dropped like any outside source's.
    flow(
        "svc5: node to LB IP (no range holds the node)",
        NODE_IP,
        "5.6.7.8",
        80,
        "DROP",
        false,
    ),
    flow(
        "svc5: external to NodePort (no firewall on node ports)",
        EXTERNAL_CLIENT_BLOCKED,
        NODE_IP,
        3002,
        "10.180.0.3:80",
        true,
    ),
    flow(
        "svc6: pod to cluster IP with no endpoints",
        "10.0.0.2",
        "172.30.0.46",
        80,
        "REJECT",
        false,
    ),
];

netns_test! {
    fn test_overall_nftables_rules() {
        let mut lab = Lab::new(&Spec::new(
            &["10.0.0.2", "10.180.0.5"],
            &["10.180.0.1", "10.180.0.2", "10.180.0.3", "10.180.0.4"],
        ));
        let mut report = Report::new("TestOverallNFTablesRules");
        let p80 = [("p80", "TCP", 80)];
        lab.apply("services", Svc::new("ns1", "svc1", "ClusterIP", &["172.30.0.41"])
            .port("p80", "TCP", 80, 80, 0).json());
        lab.apply("services", Svc::new("ns2", "svc2", "LoadBalancer", &["172.30.0.42"])
            .port("p80", "TCP", 80, 80, 3001)
            .etp_local(30000)
            .lb(&["1.2.3.4"])
            .external_ips(&["192.168.99.22"])
            .json());
        lab.apply("services", Svc::new("ns3", "svc3", "NodePort", &["172.30.0.43"])
            .port("p80", "TCP", 80, 80, 3003).json());
        lab.apply("services", Svc::new("ns4", "svc4", "NodePort", &["172.30.0.44"])
            .port("p80", "TCP", 80, 80, 0)
            .external_ips(&["192.168.99.33"])
            .json());
        lab.apply("services", Svc::new("ns5", "svc5", "LoadBalancer", &["172.30.0.45"])
            .port("p80", "TCP", 80, 80, 3002)
            .lb(&["5.6.7.8"])
            .health_check_node_port(30000)
            .source_ranges(&[" 203.0.113.0/25"])
            .client_ip_affinity(10800)
            .json());
        lab.apply("services", Svc::new("ns6", "svc6", "ClusterIP", &["172.30.0.46"])
            .port("p80", "TCP", 80, 80, 0).json());
        lab.apply("endpointslices", slice("ns1", "svc1", 1, &[Ep::new("10.180.0.1")], &p80));
        lab.apply("endpointslices", slice("ns2", "svc2", 1, &[Ep::new("10.180.0.2")], &p80));
        lab.apply("endpointslices", slice("ns3", "svc3", 1, &[Ep::new("10.180.0.3")], &p80));
        lab.apply("endpointslices", slice("ns4", "svc4", 1,
            &[Ep::new("10.180.0.4"), Ep::local("10.180.0.5")], &p80));
        lab.apply("endpointslices", slice("ns5", "svc5", 1, &[Ep::new("10.180.0.3")], &p80));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestOverallNFTablesRules", "initial", OVERALL);
        report.finish(&lab);
    }
}

netns_test! {
    /// Upstream's six cases are one Service each; only the three with the feature gate on
    /// (edgenetd always honours `ipMode`) are ported, on three Services at once.
    fn test_load_balancer_ingress_route_type_proxy() {
        let mut lab = Lab::new(&Spec::new(&[], &["10.180.0.1"]));
        let mut report = Report::new("TestLoadBalancerIngressRouteTypeProxy");
        let cases = [("svc1", "10.20.30.41", "1.2.3.4", Some("Proxy")),
                     ("svc2", "10.20.30.42", "1.2.3.5", Some("VIP")),
                     ("svc3", "10.20.30.43", "1.2.3.6", None)];
        for (name, ip, lb, mode) in cases {
            let svc = Svc::new("ns1", name, "LoadBalancer", &[ip]).port("p80", "TCP", 80, 80, 0);
            let svc = match mode {
                Some(m) => svc.lb_mode(lb, m),
                None => svc.lb(&[lb]),
            };
            lab.apply("services", svc.json());
            lab.apply("endpointslices", slice("ns1", name, 1, &[Ep::new("10.180.0.1")], &[("p80", "TCP", 80)]));
        }
        lab.start(&[]);
        report.note_start(&lab);
        let note = "one Service per case (upstream: ns1/svc1 in each subtest); upstream's node port 3001 left out so the three can coexist";
        flow::run(&lab, &mut report, "TestLoadBalancerIngressRouteTypeProxy", "initial", &[
            flow("LoadBalancerIPMode enabled, ipMode Proxy", EXTERNAL_CLIENT, "1.2.3.4", 80, "FORWARD", false).note(note),
            flow("LoadBalancerIPMode enabled, ipMode VIP", EXTERNAL_CLIENT, "1.2.3.5", 80, "10.180.0.1:80", true).note(note),
            flow("LoadBalancerIPMode enabled, ipMode nil", EXTERNAL_CLIENT, "1.2.3.6", 80, "10.180.0.1:80", true).note(note),
        ]);
        report.finish(&lab);
    }
}

netns_test! {
    /// `TestBadIPs` checks that addresses with leading zeros are read as their plain form;
    /// these rows are what its expected ruleset does to packets.
    fn test_bad_ips() {
        let mut lab = Lab::new(&Spec::new(&["10.0.0.2"], &["10.180.0.1"]));
        let mut report = Report::new("TestBadIPs");
        let mut svc = Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.0.041"])
            .port("p80", "TCP", 80, 80, 3001)
            .lb(&["1.2.3.004"])
            .external_ips(&["192.168.099.022"])
            .source_ranges(&["203.0.113.000/025"])
            .json();
        // The API server keeps what it was given in `clusterIPs` too.
        svc["spec"]["clusterIPs"] = serde_json::json!(["172.30.0.041"]);
        lab.apply("services", svc);
        lab.apply("endpointslices", slice("ns1", "svc1", 1, &[Ep::new("10.180.00.001")], &[("p80", "TCP", 80)]));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        flow::run(&lab, &mut report, "TestBadIPs", "initial", &[
            flow("cluster IP 172.30.0.041 to endpoint 10.180.00.001", "10.0.0.2", "172.30.0.41", 80, "10.180.0.1:80", false),
            flow("external IP 192.168.099.022", EXTERNAL_CLIENT, "192.168.99.22", 80, "10.180.0.1:80", true),
            flow("LB IP 1.2.3.004, source range 203.0.113.000/025 accepted", EXTERNAL_CLIENT, "1.2.3.4", 80, "10.180.0.1:80", true),
            flow("LB IP 1.2.3.004, source range 203.0.113.000/025 blocked", EXTERNAL_CLIENT_BLOCKED, "1.2.3.4", 80, "DROP", false),
            flow("node port", EXTERNAL_CLIENT, NODE_IP, 3001, "10.180.0.1:80", true),
        ]);
        report.finish(&lab);
    }
}

/// `TestHealthCheckNodePortWhenTerminating` counts the local endpoints that take new
/// connections; on a node that is what the health check node port answers (kube-proxy's
/// service health server: 200 with `localEndpoints`, 503 with none).
pub fn health_row(
    report: &mut Report,
    name: &str,
    phase: &str,
    port: u16,
    status: u16,
    local: u32,
) {
    let what = format!("GET http://{NODE_IP}:{port}/ expect {status} with localEndpoints {local}");
    let answer = crate::common::http::try_get(&format!("http://{NODE_IP}:{port}"), "/");
    let result = match answer {
        Ok((s, body)) => {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            if s == status && v["localEndpoints"] == local {
                Ok(format!("{s} {}", body.trim()))
            } else {
                Err(format!("got {s} {}", body.trim()))
            }
        }
        Err(e) => Err(format!("no answer on the health check node port: {e}")),
    };
    report.record(name, phase, &what, "", result);
}

netns_test! {
    fn test_health_check_node_port_when_terminating() {
        let mut lab = Lab::new(&Spec::new(&["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"], &[]));
        let mut report = Report::new("TestHealthCheckNodePortWhenTerminating");
        // Upstream's Service is a plain ClusterIP one (its test reads the endpoint map); a
        // health check node port needs an eTP:Local load balancer.
        lab.apply("services", Svc::new("ns1", "svc1", "LoadBalancer", &["172.30.1.1"])
            .port("", "TCP", 80, 80, 3001)
            .etp_local(30000)
            .lb(&["1.2.3.4"])
            .json());
        let port = [("", "TCP", 80)];
        lab.apply("endpointslices", slice("ns1", "svc1", 1, &[
            Ep::local("10.0.1.1").ready(true),
            Ep::local("10.0.1.2").ready(true),
            Ep::local("10.0.1.3").ready(true),
            Ep::local("10.0.1.4").ready(false),
        ], &port));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        let name = "TestHealthCheckNodePortWhenTerminating";
        health_row(&mut report, &format!("{name}/three local ready endpoints"), "ready", 30000, 200, 3);
        lab.change(|l| l.apply("endpointslices", slice("ns1", "svc1", 1, &[
            Ep::local("10.0.1.1").conditions(false, true, false),
            Ep::local("10.0.1.2").conditions(false, true, true),
            Ep::local("10.0.1.3").conditions(false, true, true),
            Ep::local("10.0.1.4").conditions(false, false, true),
        ], &port)));
        health_row(&mut report, &format!("{name}/all local endpoints terminating"), "terminating", 30000, 503, 0);
        report.finish(&lab);
    }
}
