//! kube-proxy's health-check node ports served by the real daemon fed by the fake API
//! server: the test's namespace is the router (the daemon runs there, without `--netns`),
//! and the probes come from the client host `cl` in a namespace of its own, over its veth,
//! to the router's 192.168.10.1, as a load balancer's would.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use serde_json::{Value, json};

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, endpoint, node, slice};
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::topology::Topology;
use common::wait::{wait_for, wait_until};

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);
/// The router's address on the client's link.
const NODE_IP: &str = "192.168.10.1";
/// The health-check node ports the tests give the Service.
const HCP: u16 = 32_101;
const HCP2: u16 = 32_102;

/// The namespaces, the fake API server and the daemon's cache directory.
struct Lab {
    net: Topology,
    fake: FakeApiServer,
    cache: ScratchDir,
}

impl Lab {
    fn new() -> Lab {
        Lab::with(Family::V4)
    }

    /// The lab with hosts of `family`.
    fn with(family: Family) -> Lab {
        let (net, _servers) = client_and_three_backends(family);
        let fake = FakeApiServer::start();
        fake.apply("nodes", node(kube::NODE, NODE_IP, "10.244.1.0/24"));
        Lab {
            net,
            fake,
            cache: ScratchDir::new("k8s-cache"),
        }
    }

    /// Starts the daemon (policy off, services from the fake) and waits for READY=1.
    fn daemon(&self, tag: &str) -> Daemon {
        let config = format!(
            "[controller.policy]\nenabled = false\n\n{}",
            kube::section(&self.fake, &self.cache, &["services"])
        );
        let d = Daemon::start(tag, &config);
        d.wait_ready();
        d
    }

    /// `web`: a LoadBalancer Service with `externalTrafficPolicy: Local` and health-check
    /// node port `hcp`.
    fn web(&self, name: &str, hcp: u16) {
        self.fake.apply(
            "services",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "type": "LoadBalancer", "externalTrafficPolicy": "Local",
                    "healthCheckNodePort": hcp,
                    "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                    "ports": [{"name": "http", "protocol": "TCP", "port": 80,
                               "targetPort": 8080, "nodePort": 30080}]
                },
                "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
            }),
        );
    }

    /// The client's GET of `port` on the router: (status, headers, body), or None when the
    /// connection is refused.
    fn probe(&self, port: u16) -> Option<(u16, String, Value)> {
        self.probe_at(NODE_IP, port)
    }

    /// The client's GET of `port` on the router's address `host` (`[v6]` for IPv6).
    fn probe_at(&self, host: &str, port: u16) -> Option<(u16, String, Value)> {
        let (ok, out, _) = self
            .net
            .host("cl")
            .sh_status(&format!("curl -sS -m 3 -i http://{host}:{port}/healthz"));
        if !ok {
            return None;
        }
        let (head, body) = out.split_once("\r\n\r\n")?;
        let status = head.get(9..12)?.parse().ok()?;
        // A port closed between the accept and the answer says so in text (503): not JSON,
        // and no port state a wait could be looking for (CI saw it while HCP moved).
        let body = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.into()));
        Some((status, head.to_string(), body))
    }

    /// Waits until `port` answers `status` with `count` local endpoints.
    fn wait_answer(&self, port: u16, status: u16, count: u64) -> (String, Value) {
        let what = format!("port {port} to answer {status} with {count} local endpoints");
        wait_for(&what, STEP, || {
            let (s, head, body) = self.probe(port)?;
            (s == status && body["localEndpoints"] == count).then_some((head, body))
        })
    }
}

/// An endpoint on this node, with conditions (`ready`, `serving`, `terminating`).
fn local(ip: &str, ready: bool, serving: bool, terminating: bool) -> Value {
    let mut e = endpoint(ip, ready, serving, terminating);
    e["nodeName"] = json!(kube::NODE);
    e
}

netns_test! {
    fn a_local_load_balancer_health_check_port_follows_its_local_endpoints() {
        let lab = Lab::new();
        lab.web("web", HCP);
        // One local ready endpoint; another node's ready endpoint does not count.
        lab.fake.apply(
            "endpointslices",
            slice("web", &[local("10.0.1.2", true, true, false), kube::ready("10.0.2.2")]),
        );
        let d = lab.daemon("k8s-hcp");
        let (head, body) = lab.wait_answer(HCP, 200, 1);
        assert_eq!(body["service"]["namespace"], "default", "{body}");
        assert_eq!(body["service"]["name"], "web", "{body}");
        assert_eq!(body["serviceProxyHealthy"], true, "{body}");
        for header in [
            "Content-Type: application/json",
            "X-Content-Type-Options: nosniff",
            "X-Load-Balancing-Endpoint-Weight: 1",
        ] {
            assert!(head.contains(header), "{header} in {head}");
        }
        assert_eq!(d.metric("edgenetd_health_check_ports", &[]), Some(1.0));

        // The local endpoint starts terminating: this node is no target any more.
        lab.fake.apply(
            "endpointslices",
            slice("web", &[local("10.0.1.2", false, true, true), kube::ready("10.0.2.2")]),
        );
        let (head, _) = lab.wait_answer(HCP, 503, 0);
        assert!(head.contains("X-Load-Balancing-Endpoint-Weight: 0"), "{head}");

        // Gone altogether.
        lab.fake.apply("endpointslices", slice("web", &[kube::ready("10.0.2.2")]));
        lab.wait_answer(HCP, 503, 0);
        lab.fake.apply("endpointslices", slice("web", &[local("10.0.1.2", true, true, false)]));
        lab.wait_answer(HCP, 200, 1);

        // A new healthCheckNodePort moves the listener.
        lab.web("web", HCP2);
        lab.wait_answer(HCP2, 200, 1);
        wait_until("the old port to close", STEP, || lab.probe(HCP).is_none());

        // The Service deleted: the port closes.
        lab.fake.delete("services", "default", "web");
        wait_until("the port to close with its Service", STEP, || lab.probe(HCP2).is_none());
        assert_eq!(d.metric("edgenetd_health_check_ports", &[]), Some(0.0));
        assert_eq!(
            d.metric("edgenetd_health_check_port_bind_failures_total", &[]),
            Some(0.0)
        );
    }
}

netns_test! {
    fn a_health_check_port_already_taken_is_counted_and_the_others_keep_serving() {
        let lab = Lab::new();
        // Something else on the router holds the first Service's port.
        let taken = std::net::TcpListener::bind(("0.0.0.0", HCP)).unwrap();
        lab.web("web", HCP);
        lab.web("api", HCP2);
        lab.fake.apply("endpointslices", slice("web", &[local("10.0.1.2", true, true, false)]));
        lab.fake.apply("endpointslices", slice("api", &[local("10.0.2.2", true, true, false)]));
        let d = lab.daemon("k8s-hcp-taken");
        let (_, body) = lab.wait_answer(HCP2, 200, 1);
        assert_eq!(body["service"]["name"], "api", "{body}");
        wait_until("the failed bind counted", STEP, || {
            d.metric("edgenetd_health_check_port_bind_failures_total", &[])
                .is_some_and(|n| n >= 1.0)
        });
        assert_eq!(d.metric("edgenetd_health_check_ports", &[]), Some(1.0));
        assert_eq!(d.get("/livez").0, 200, "not fatal");
        drop(taken);
    }
}

netns_test! {
    fn a_dual_stack_service_answers_each_family_with_its_own_count() {
        let lab = Lab::with(Family::Dual);
        lab.fake.apply(
            "services",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "dual", "namespace": "default"},
                "spec": {
                    "type": "LoadBalancer", "externalTrafficPolicy": "Local",
                    "healthCheckNodePort": HCP,
                    "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd96::10"],
                    "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack",
                    "ports": [{"name": "http", "protocol": "TCP", "port": 80,
                               "targetPort": 8080, "nodePort": 30080}]
                }
            }),
        );
        lab.fake.apply(
            "endpointslices",
            slice("dual", &[local("10.0.1.2", true, true, false), local("10.0.2.2", true, true, false)]),
        );
        let mut v6 = slice("dual", &[local("fd01::2", true, true, false)]);
        v6["metadata"]["name"] = json!("dual-v6");
        v6["addressType"] = json!("IPv6");
        lab.fake.apply("endpointslices", v6);
        let _d = lab.daemon("k8s-hcp-dual");
        lab.wait_answer(HCP, 200, 2);
        let what = "the IPv6 probe to get the IPv6 count";
        let (status, _, body) = wait_for(what, STEP, || {
            lab.probe_at("[fd10::1]", HCP)
                .filter(|(_, _, b)| b["localEndpoints"] == 1)
        });
        assert_eq!(status, 200, "{body}");
    }
}
