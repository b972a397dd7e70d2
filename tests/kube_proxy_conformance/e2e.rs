//! A handful of upstream e2e tests (`test/e2e/network/service.go`, `conntrack.go`,
//! `dual_stack.go`, `traffic_distribution.go`), named after their `It(...)`, on this lab:
//! pods on this node and the other one, the client a pod on this node.

use std::time::{Duration, Instant};

use super::flow::{self, Flow, Got, Seen, flow, probe, probe_from_port};
use super::lab::{EXTERNAL_CLIENT, Key, Lab, NODE_IP, NODE_IP6, Spec, UPSTREAM_KEYS};
use super::objects::{Ep, Svc, slice};
use super::report::Report;
use crate::netns_test;

const CLUSTER_CIDRS: &[Key] = &[Key::ClusterCidrs];
const CLIENT: &str = "10.0.0.2";

/// How long a conntrack test waits for the traffic to move (upstream: a minute).
const CONNTRACK_WAIT: Duration = Duration::from_secs(10);

fn record(
    report: &mut Report,
    test: &str,
    phase: &str,
    what: &str,
    note: &str,
    result: Result<String, String>,
) {
    report.record(test, phase, what, note, result);
}

/// Every attempt answered by an endpoint, and the endpoints hit.
fn hits(seen: &Seen) -> Result<Vec<String>, String> {
    if seen.got.iter().all(|g| matches!(g, Got::Hit(..))) {
        Ok(seen.endpoints().iter().map(ToString::to_string).collect())
    } else {
        Err(format!(
            "not every attempt reached an endpoint: {}",
            seen.output()
        ))
    }
}

/// `n` sequential connections all land on one endpoint.
fn sticky(lab: &Lab, dst: &str, n: usize) -> Result<String, String> {
    let eps = hits(&probe(lab, CLIENT, "tcp", dst, 80, n, false))?;
    if eps.len() == 1 {
        Ok(format!("{n} connections, all to {}", eps[0]))
    } else {
        Err(format!("{n} connections reached {eps:?}"))
    }
}

/// `n` sequential connections spread over more than one endpoint.
fn spread(lab: &Lab, dst: &str, n: usize) -> Result<String, String> {
    let eps = hits(&probe(lab, CLIENT, "tcp", dst, 80, n, false))?;
    if eps.len() > 1 {
        Ok(format!("{n} connections reached {eps:?}"))
    } else {
        Err(format!("{n} connections all went to {eps:?}"))
    }
}

/// No attempt reaches an endpoint of the Service.
fn not_served(lab: &Lab, dst: &str) -> Result<String, String> {
    let seen = probe(lab, CLIENT, "tcp", dst, 80, 3, true);
    if seen.endpoints().is_empty() {
        Ok(format!("not served: {}", seen.output()))
    } else {
        Err(format!("served: {}", seen.output()))
    }
}

/// Reachable: every attempt reaches one of the endpoints.
fn served(lab: &Lab, dst: &str) -> Result<String, String> {
    hits(&probe(lab, CLIENT, "tcp", dst, 80, 6, true)).map(|eps| format!("served by {eps:?}"))
}

const AFFINITY_EPS: [&str; 3] = ["10.180.0.41", "10.180.0.42", "10.180.0.43"];

fn affinity_slice(ns: &str, svc: &str, eps: &[&str]) -> serde_json::Value {
    let eps: Vec<Ep> = eps.iter().map(|e| Ep::local(e)).collect();
    slice(ns, svc, 1, &eps, &[("", "TCP", 80)])
}

netns_test! {
    fn e2e_service() {
        let mut pods = vec![CLIENT, "10.180.0.11", "10.180.0.12"];
        pods.extend(AFFINITY_EPS);
        let mut lab = Lab::new(&Spec::new(&pods, &[]));
        let mut report = Report::new("e2e-service");
        let multi = "[sig-network] Services should serve multiport endpoints from pods";
        lab.apply("services", Svc::new("ns", "multi-endpoint-test", "ClusterIP", &["172.30.0.70"])
            .port("portname1", "TCP", 80, 100, 0)
            .port("portname2", "TCP", 81, 101, 0)
            .json());
        lab.apply("services", Svc::new("ns", "no-pods", "ClusterIP", &["172.30.0.71"])
            .port("", "TCP", 80, 80, 0).json());
        lab.apply("services", Svc::new("ns", "affinity-clusterip", "ClusterIP", &["172.30.0.72"])
            .port("", "TCP", 80, 80, 0).client_ip_affinity(10800).json());
        lab.apply("endpointslices", affinity_slice("ns", "affinity-clusterip", &AFFINITY_EPS));
        let transition = Svc::new("ns", "affinity-clusterip-transition", "ClusterIP", &["172.30.0.73"])
            .port("", "TCP", 80, 80, 0);
        lab.apply("services", transition.json());
        lab.apply("endpointslices", affinity_slice("ns", "affinity-clusterip-transition", &AFFINITY_EPS));
        lab.apply("services", Svc::new("ns", "service-proxy-toggled", "ClusterIP", &["172.30.0.74"])
            .port("", "TCP", 80, 80, 0)
            .label("service.kubernetes.io/service-proxy-name", "foo-bar")
            .json());
        lab.apply("endpointslices", affinity_slice("ns", "service-proxy-toggled", &AFFINITY_EPS));
        lab.apply("services", Svc::new("ns", "service-proxy-not-tied", "ClusterIP", &["172.30.0.75"])
            .port("", "TCP", 80, 80, 0).json());
        lab.apply("endpointslices", affinity_slice("ns", "service-proxy-not-tied", &AFFINITY_EPS));
        lab.apply("services", Svc::new("ns", "service-headless", "ClusterIP", &["172.30.0.76"])
            .port("", "TCP", 80, 80, 0)
            .label("service.kubernetes.io/headless", "")
            .json());
        lab.apply("endpointslices", affinity_slice("ns", "service-headless", &AFFINITY_EPS));
        let toggled = Svc::new("ns", "service-headless-toggled", "ClusterIP", &["172.30.0.77"])
            .port("", "TCP", 80, 80, 0);
        lab.apply("services", toggled.json());
        lab.apply("endpointslices", affinity_slice("ns", "service-headless-toggled", &AFFINITY_EPS));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);

        // Multiport: pods come and go one by one, as the e2e test creates and deletes them.
        let both = |a: &'static str, b: &'static str| -> [Flow; 2] {
            [flow("portname1", CLIENT, "172.30.0.70", 80, a, false),
             flow("portname2", CLIENT, "172.30.0.70", 81, b, false)]
        };
        flow::run(&lab, &mut report, multi, "no pods", &both("REJECT", "REJECT"));
        let s1 = |l: &Lab| l.apply("endpointslices", slice("ns", "multi-endpoint-test", 1,
            &[Ep::local("10.180.0.11")], &[("portname1", "TCP", 100)]));
        lab.change(s1);
        flow::run(&lab, &mut report, multi, "pod1", &both("10.180.0.11:100", "REJECT"));
        lab.change(|l| l.apply("endpointslices", slice("ns", "multi-endpoint-test", 2,
            &[Ep::local("10.180.0.12")], &[("portname2", "TCP", 101)])));
        flow::run(&lab, &mut report, multi, "pod1, pod2", &both("10.180.0.11:100", "10.180.0.12:101"));
        lab.change(|l| l.delete("endpointslices", "ns", "multi-endpoint-test-1"));
        flow::run(&lab, &mut report, multi, "pod1 deleted", &both("REJECT", "10.180.0.12:101"));
        lab.change(|l| l.delete("endpointslices", "ns", "multi-endpoint-test-2"));
        flow::run(&lab, &mut report, multi, "pod2 deleted", &both("REJECT", "REJECT"));

        flow::run(&lab, &mut report, "[sig-network] Services should be rejected when no endpoints exist", "initial", &[
            flow("connection refused", CLIENT, "172.30.0.71", 80, "REJECT", false),
            flow("UDP to the TCP-only Service is refused too", CLIENT, "172.30.0.71", 80, "REJECT", false).udp()
                .note("not an e2e row: the Service has no UDP port (kube-proxy's unserved-port reject)"),
        ]);

        let work = "[sig-network] Services should have session affinity work for service with type clusterIP";
        let sticky_note = "edgenetd's sticky affinity: a client keeps its endpoint until timeoutSeconds after its last new connection, as in kube-proxy; unlike kube-proxy it is remembered per address (here the cluster IP), not per Service port";
        record(&mut report, work, "initial", "15 connections from one client to 172.30.0.72:80", sticky_note,
            sticky(&lab, "172.30.0.72", 15));
        // Not an e2e step: the remembered endpoint goes away, the client moves on.
        let remembered = probe(&lab, CLIENT, "tcp", "172.30.0.72", 80, 1, false).endpoints();
        if let Some(gone) = remembered.iter().next() {
            let gone = gone.ip().to_string();
            let rest: Vec<&str> = AFFINITY_EPS.iter().copied().filter(|e| *e != gone).collect();
            lab.change(|l| l.apply("endpointslices", affinity_slice("ns", "affinity-clusterip", &rest)));
            let result = hits(&probe(&lab, CLIENT, "tcp", "172.30.0.72", 80, 6, false)).and_then(|eps| {
                if eps.len() == 1 && !eps[0].starts_with(&format!("{gone}:")) {
                    Ok(format!("moved to {}", eps[0]))
                } else {
                    Err(format!("after {gone} went: {eps:?}"))
                }
            });
            record(&mut report, &format!("{work} (remembered endpoint deleted)"), "endpoint deleted",
                "the client's remembered endpoint leaves the slice: 6 connections go to one remaining endpoint",
                "not an e2e step: kube-proxy drops a deleted endpoint's affinity set", result);
        }

        let switch = "[sig-network] Services should be able to switch session affinity for service with type clusterIP";
        record(&mut report, switch, "affinity None", "30 connections to 172.30.0.73:80 reach more than one endpoint", "",
            spread(&lab, "172.30.0.73", 30));
        lab.change(|l| l.apply("services", transition.clone().client_ip_affinity(10800).json()));
        record(&mut report, switch, "affinity ClientIP", "15 connections all reach one endpoint", sticky_note,
            sticky(&lab, "172.30.0.73", 15));
        lab.change(|l| l.apply("services", transition.json()));
        record(&mut report, switch, "affinity None again", "30 connections reach more than one endpoint", "",
            spread(&lab, "172.30.0.73", 30));

        let proxy_name = "[sig-network] Services should implement service.kubernetes.io/service-proxy-name";
        record(&mut report, proxy_name, "labelled", "service-proxy-not-tied (172.30.0.75) is served", "",
            served(&lab, "172.30.0.75"));
        record(&mut report, proxy_name, "labelled", "service-proxy-toggled (172.30.0.74, service-proxy-name=foo-bar) is not", "",
            not_served(&lab, "172.30.0.74"));
        lab.change(|l| l.apply("services", Svc::new("ns", "service-proxy-toggled", "ClusterIP", &["172.30.0.74"])
            .port("", "TCP", 80, 80, 0).json()));
        record(&mut report, proxy_name, "label removed", "service-proxy-toggled is served", "",
            served(&lab, "172.30.0.74"));

        let headless = "[sig-network] Services should implement service.kubernetes.io/headless";
        record(&mut report, headless, "labelled", "service-headless (172.30.0.76, labelled headless) is not served", "",
            not_served(&lab, "172.30.0.76"));
        record(&mut report, headless, "labelled", "service-headless-toggled (172.30.0.77) is served", "",
            served(&lab, "172.30.0.77"));
        lab.change(|l| l.apply("services", toggled.clone().label("service.kubernetes.io/headless", "").json()));
        record(&mut report, headless, "label added", "service-headless-toggled is not served", "",
            not_served(&lab, "172.30.0.77"));
        lab.change(|l| l.apply("services", toggled.json()));
        record(&mut report, headless, "label removed", "service-headless-toggled is served again", "",
            served(&lab, "172.30.0.77"));
        report.finish(&lab);
    }
}

/// Sends a datagram from `src`:`sport` to `dst:port` every 200 ms until `want` answers or
/// [`CONNTRACK_WAIT`] passes.
fn udp_until(
    lab: &Lab,
    src: &str,
    sport: u16,
    dst: &str,
    port: u16,
    want: &str,
) -> Result<String, String> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < CONNTRACK_WAIT {
        let seen = probe_from_port(lab, src, Some(sport), "udp", dst, port, 1, false);
        if seen.endpoints().iter().any(|e| e.ip().to_string() == want) {
            return Ok(format!(
                "{want} answered after {:.1} s",
                start.elapsed().as_secs_f64()
            ));
        }
        last = seen.output();
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "{want} did not answer within {CONNTRACK_WAIT:?}; last: {last}"
    ))
}

netns_test! {
    fn e2e_conntrack() {
        let mut lab = Lab::new(&Spec::new(
            &[CLIENT, "10.180.0.21", "10.180.0.22", "10.180.0.23", "10.180.0.24", "10.180.0.25"], &[]));
        let mut report = Report::new("e2e-conntrack");
        let udp = [("udp", "UDP", 80)];
        lab.apply("services", Svc::new("ns", "svc-udp", "ClusterIP", &["172.30.0.80"])
            .port("udp", "UDP", 80, 80, 0).json());
        lab.apply("endpointslices", slice("ns", "svc-udp", 1, &[Ep::local("10.180.0.21")], &udp));
        lab.apply("services", Svc::new("ns", "svc-udp-np", "NodePort", &["172.30.0.81"])
            .port("udp", "UDP", 80, 80, 30080).json());
        lab.apply("endpointslices", slice("ns", "svc-udp-np", 1, &[Ep::local("10.180.0.23")], &udp));
        lab.apply("services", Svc::new("ns", "svc-udp-unready", "ClusterIP", &["172.30.0.82"])
            .port("udp", "UDP", 80, 80, 0).json());
        lab.apply("endpointslices", slice("ns", "svc-udp-unready", 1,
            &[Ep::local("10.180.0.25").conditions(false, false, false)], &udp));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);

        let cip = "[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service";
        record(&mut report, cip, "backend 1", "udp 10.0.0.2:54321 -> 172.30.0.80:80 reaches backend 1 (10.180.0.21)", "",
            udp_until(&lab, CLIENT, 54321, "172.30.0.80", 80, "10.180.0.21"));
        lab.change(|l| l.apply("endpointslices", slice("ns", "svc-udp", 1, &[Ep::local("10.180.0.22")], &udp)));
        lab.stop_pod("10.180.0.21");
        record(&mut report, cip, "backend 1 deleted", "the same flow reaches backend 2 (10.180.0.22)", "",
            udp_until(&lab, CLIENT, 54321, "172.30.0.80", 80, "10.180.0.22"));

        let np = "[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service";
        record(&mut report, np, "backend 1", "udp 203.0.113.2:54322 -> 192.168.0.2:30080 reaches backend 1 (10.180.0.23)", "",
            udp_until(&lab, EXTERNAL_CLIENT, 54322, NODE_IP, 30080, "10.180.0.23"));
        lab.change(|l| l.apply("endpointslices", slice("ns", "svc-udp-np", 1, &[Ep::local("10.180.0.24")], &udp)));
        lab.stop_pod("10.180.0.23");
        record(&mut report, np, "backend 1 deleted", "the same flow reaches backend 2 (10.180.0.24)", "",
            udp_until(&lab, EXTERNAL_CLIENT, 54322, NODE_IP, 30080, "10.180.0.24"));

        let unready = "[sig-network] Conntrack should be able to preserve UDP traffic when initial unready endpoints get ready";
        let before = probe_from_port(&lab, CLIENT, Some(54323), "udp", "172.30.0.82", 80, 3, false);
        record(&mut report, unready, "unready", "udp 10.0.0.2:54323 -> 172.30.0.82:80 while the only endpoint is not ready: rejected", "",
            if before.got.iter().all(|g| *g == Got::Reject) { Ok(before.output()) } else { Err(before.output()) });
        lab.change(|l| l.apply("endpointslices", slice("ns", "svc-udp-unready", 1,
            &[Ep::local("10.180.0.25").conditions(true, true, false)], &udp)));
        record(&mut report, unready, "ready", "the same flow reaches 10.180.0.25 once it is ready", "",
            udp_until(&lab, CLIENT, 54323, "172.30.0.82", 80, "10.180.0.25"));
        report.finish(&lab);
    }
}

netns_test! {
    fn e2e_dual_stack() {
        let mut lab = Lab::new(&Spec {
            pods: vec![vec![CLIENT, "fd00:10::2"], vec!["10.180.0.31", "fd00:10:180::31"]],
            remote: vec!["10.180.1.31", "fd00:10:180:1::31"],
        });
        let mut report = Report::new("e2e-dual-stack");
        lab.apply("services", Svc::new("ns", "dual", "ClusterIP", &["172.30.0.90", "fd00:172:30::90"])
            .port("http", "TCP", 80, 80, 0)
            .port("udp", "UDP", 80, 80, 0)
            .json());
        let ports = [("http", "TCP", 80), ("udp", "UDP", 80)];
        lab.apply("endpointslices", slice("ns", "dual", 1,
            &[Ep::local("10.180.0.31"), Ep::new("10.180.1.31").node("node2")], &ports));
        lab.apply("endpointslices", slice("ns", "dual", 2,
            &[Ep::local("fd00:10:180::31"), Ep::new("fd00:10:180:1::31").node("node2")], &ports));
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        let v4 = "10.180.0.31:80, 10.180.1.31:80";
        let v6 = "[fd00:10:180::31]:80, [fd00:10:180:1::31]:80";
        flow::run(&lab, &mut report, "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family should function for pod-Service: http", "initial", &[
            flow("IPv4 cluster IP", CLIENT, "172.30.0.90", 80, v4, false),
            flow("IPv6 cluster IP", "fd00:10::2", "fd00:172:30::90", 80, v6, false),
        ]);
        flow::run(&lab, &mut report, "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family should function for pod-Service: udp", "initial", &[
            flow("IPv4 cluster IP", CLIENT, "172.30.0.90", 80, v4, false).udp(),
            flow("IPv6 cluster IP", "fd00:10::2", "fd00:172:30::90", 80, v6, false).udp(),
        ]);
        flow::run(&lab, &mut report, "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family should function for node-Service: http", "initial", &[
            flow("IPv4 cluster IP", NODE_IP, "172.30.0.90", 80, v4, true).needs(CLUSTER_CIDRS),
            flow("IPv6 cluster IP", NODE_IP6, "fd00:172:30::90", 80, v6, true).needs(CLUSTER_CIDRS),
        ]);
        // The IPv6 endpoints go: the IPv6 half rejects, the IPv4 one is untouched.
        lab.change(|l| l.delete("endpointslices", "ns", "dual-2"));
        flow::run(&lab, &mut report, "dual-stack: one family's endpoints deleted", "IPv6 slice deleted", &[
            flow("IPv4 cluster IP still served", CLIENT, "172.30.0.90", 80, v4, false)
                .note("not an e2e row: the endpoint-change phase of this suite"),
            flow("IPv6 cluster IP rejects", "fd00:10::2", "fd00:172:30::90", 80, "REJECT", false)
                .note("not an e2e row: the endpoint-change phase of this suite"),
        ]);
        report.finish(&lab);
    }
}

netns_test! {
    fn e2e_traffic_distribution() {
        let mut lab = Lab::new(&Spec::new(&[CLIENT, "10.180.0.51"], &["10.180.1.51", "10.180.1.52"]));
        let mut report = Report::new("e2e-traffic-distribution");
        let svc = Svc::new("ns", "td", "ClusterIP", &["172.30.0.95"])
            .port("", "TCP", 80, 80, 0)
            .traffic_distribution("PreferClose");
        lab.apply("services", svc.json());
        let port = [("", "TCP", 80)];
        let hinted = |l: &Lab, zones: [&str; 3]| l.apply("endpointslices", slice("ns", "td", 1, &[
            Ep::local("10.180.0.51").zone_hints("zone-a", &[zones[0]]),
            Ep::new("10.180.1.51").node("node2").zone_hints("zone-b", &[zones[1]]),
            Ep::new("10.180.1.52").node("node3").zone_hints("zone-c", &[zones[2]]),
        ], &port));
        hinted(&lab, ["zone-a", "zone-b", "zone-c"]);
        lab.start(UPSTREAM_KEYS);
        report.note_start(&lab);
        let all = "10.180.0.51:80, 10.180.1.51:80, 10.180.1.52:80";
        flow::run(&lab, &mut report, "[sig-network] Traffic Distribution should route traffic to an endpoint in the same zone when using PreferClose", "hints", &[
            flow("client in zone-a reaches the zone-a endpoint", CLIENT, "172.30.0.95", 80, "10.180.0.51:80", false),
        ]);
        // kube-proxy's topology rules (pkg/proxy/topology.go), not e2e rows.
        lab.change(|l| hinted(l, ["zone-b", "zone-b", "zone-c"]));
        flow::run(&lab, &mut report, "kube-proxy topology: no endpoint hinted for this zone", "no hint for zone-a", &[
            flow("falls back to every endpoint", CLIENT, "172.30.0.95", 80, all, false)
                .note("kube-proxy's topology.go rule, not an upstream row"),
        ]);
        lab.change(|l| l.apply("endpointslices", slice("ns", "td", 1, &[
            Ep::local("10.180.0.51").zone_hints("zone-a", &["zone-a"]),
            Ep::new("10.180.1.51").node("node2"),
            Ep::new("10.180.1.52").node("node3").zone_hints("zone-c", &["zone-c"]),
        ], &port)));
        flow::run(&lab, &mut report, "kube-proxy topology: an endpoint without hints", "one endpoint unhinted", &[
            flow("hints are ignored: every endpoint", CLIENT, "172.30.0.95", 80, all, false)
                .note("kube-proxy's topology.go rule, not an upstream row"),
        ]);
        report.finish(&lab);
    }
}
