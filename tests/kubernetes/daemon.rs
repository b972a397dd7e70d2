//! The real daemon fed by the fake API server, with real packets: the test's namespace is the
//! router, a client and three backends are hosts joined to it by veth pairs, and the fake
//! listens on 127.0.0.1 inside the test's namespace (where the daemon, started without
//! `--netns`, both programs the kernel and connects to the API).

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, admit_namespace, endpoint, namespace, node, pod, ready, service, slice};
use common::routes::has_owned_route;
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::shell::sh_status;
use common::topology::Topology;
use common::wait::wait_until;

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);
/// The cluster IP of the test service.
const VIP: &str = "10.96.0.10";
/// The pod CIDR of the other node.
const POD_CIDR: &str = "10.244.2.0/24";

/// Client `cl` (192.168.10.2, via the router's 192.168.10.1), backends b1..b3 at 10.0.i.2
/// answering with their names on 8080, the fake API server and a cache directory.
struct Lab {
    /// The namespaces and servers.
    net: Topology,
    /// The API server.
    fake: FakeApiServer,
    /// Holds the daemon's cluster-state cache.
    cache: ScratchDir,
}

impl Lab {
    fn new() -> Lab {
        Lab::of(Family::V4)
    }

    fn of(family: Family) -> Lab {
        let (net, _servers) = client_and_three_backends(family);
        let fake = FakeApiServer::start();
        fake.apply("nodes", node(kube::NODE, "192.168.10.1", "10.244.1.0/24"));
        Lab {
            net,
            fake,
            cache: ScratchDir::new("k8s-cache"),
        }
    }

    /// The daemon's config: policy off, services and routes from the fake, `extra` TOML.
    fn config(&self, extra: &str) -> String {
        format!(
            "[controller.policy]\nenabled = false\n\n{}\n{extra}",
            kube::section(&self.fake, &self.cache, &["services", "routes"])
        )
    }

    /// Starts the daemon and waits for READY=1.
    fn daemon(&self, tag: &str, extra: &str) -> Daemon {
        let d = Daemon::start(tag, &self.config(extra));
        d.wait_ready();
        d
    }

    /// The `web` service on [`VIP`]:80 with `endpoints`.
    fn web(&self, endpoints: &[serde_json::Value]) {
        self.fake.apply("services", service("web", VIP, 80));
        self.fake.apply("endpointslices", slice("web", endpoints));
    }

    /// `n` new TCP connections from the client to the VIP: answers per backend name.
    fn hits(&self, n: u32) -> BTreeMap<String, u32> {
        self.net.hits(self.net.host("cl"), "tcp", VIP, 80, n)
    }

    /// Waits until `n` connections are answered by exactly the backends `names`.
    fn wait_served_by(&self, names: &[&str], n: u32) -> BTreeMap<String, u32> {
        let mut last = BTreeMap::new();
        let what = format!("connections served by exactly {names:?}");
        wait_until(&what, STEP, || {
            last = self.hits(n);
            last.keys().map(String::as_str).eq(names.iter().copied())
        });
        last
    }
}

fn service_table() -> String {
    sh_status("nft list table inet edgenetd-service").1
}

fn healthz(d: &Daemon) -> serde_json::Value {
    let (status, body) = d.get("/healthz");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

netns_test! {
    fn a_service_with_two_ready_endpoints_balances_to_both() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        let d = lab.daemon("k8s-balance", "");
        let h = lab.wait_served_by(&["b1", "b2"], 60);
        assert_eq!(h.values().sum::<u32>(), 60, "every connection answered: {h:?}");
        assert!(service_table().contains(VIP), "{}", service_table());
        let v = healthz(&d);
        assert_eq!(v["ready"], true, "{v}");
        for kind in ["services", "endpointslices", "nodes"] {
            assert_eq!(v["kubernetes"]["kinds"][kind]["synced"], true, "{v}");
            assert_eq!(v["kubernetes"]["kinds"][kind]["state"], "watching", "{v}");
        }
        assert_eq!(d.metric("edgenetd_kubernetes_synced", &[("kind", "services")]), Some(1.0));
        assert_eq!(d.metric("edgenetd_kubernetes_objects", &[("kind", "endpointslices")]), Some(1.0));
        assert_eq!(d.metric("edgenetd_kubernetes_objects", &[("kind", "nodes")]), Some(1.0));
        assert_eq!(d.get("/readyz").0, 200);
    }
}

netns_test! {
    fn an_endpoint_turning_not_ready_stops_getting_new_connections() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        let d = lab.daemon("k8s-not-ready", "");
        lab.wait_served_by(&["b1", "b2"], 40);
        lab.fake.apply(
            "endpointslices",
            slice("web", &[ready("10.0.1.2"), endpoint("10.0.2.2", false, false, false)]),
        );
        let h = lab.wait_served_by(&["b1"], 40);
        assert_eq!(h["b1"], 40, "{h:?}");
        wait_until("the MODIFIED event counted", STEP, || {
            d.metric(
                "edgenetd_kubernetes_events_total",
                &[("kind", "endpointslices"), ("type", "MODIFIED")],
            ) == Some(1.0)
        });
    }
}

/// Holds one TCP connection through the VIP that landed on `b2` until told to go on, then
/// sends a line on it and prints the echo.
const HOLD_ON_B2: &str = r#"
import socket, sys
while True:
    s = socket.create_connection(("10.96.0.10", 80), timeout=3)
    f = s.makefile("rwb")
    if f.readline().strip() == b"b2":
        break
    s.close()
print("held", flush=True)
sys.stdin.readline()
s.sendall(b"ping\n")
print(f.readline().decode().strip(), flush=True)
"#;

netns_test! {
    fn a_terminating_endpoint_drains_while_others_are_ready() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        let _d = lab.daemon("k8s-terminating", "");
        lab.wait_served_by(&["b1", "b2"], 40);
        let mut held = lab
            .net
            .host("cl")
            .command("python3")
            .args(["-c", HOLD_ON_B2])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(held.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "held");
        lab.fake.apply(
            "endpointslices",
            slice("web", &[ready("10.0.1.2"), endpoint("10.0.2.2", false, true, true)]),
        );
        // No new connection goes to the terminating endpoint...
        let h = lab.wait_served_by(&["b1"], 40);
        assert_eq!(h["b1"], 40, "{h:?}");
        // ...while the one it has keeps going.
        writeln!(held.stdin.take().unwrap(), "go").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "b2:ping", "the draining connection still works");
        assert!(held.wait().unwrap().success());
    }
}

netns_test! {
    fn a_nodes_pod_cidr_becomes_a_route_and_goes_with_the_node() {
        let lab = Lab::new();
        // 10.0.3.2 (b3) is on the router's directly connected 10.0.3.0/24.
        lab.fake.apply("nodes", node("worker-2", "10.0.3.2", POD_CIDR));
        // Not connected: counted as skipped, never routed.
        lab.fake.apply("nodes", node("worker-3", "172.31.0.9", "10.244.3.0/24"));
        let _d = lab.daemon("k8s-routes", "");
        wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
        let route = sh_status(&format!("ip route show {POD_CIDR}")).1;
        assert!(route.contains("via 10.0.3.2"), "{route}");
        assert!(!has_owned_route("10.244.3.0/24"));
        assert!(!has_owned_route("10.244.1.0/24"), "this node's own pods are not routed");
        lab.fake.delete("nodes", "", "worker-2");
        wait_until("the route removed", STEP, || !has_owned_route(POD_CIDR));
    }
}

netns_test! {
    fn an_api_outage_keeps_everything_programmed_and_healthz_200_across_a_restart() {
        let mut lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        lab.fake.apply("nodes", node("worker-2", "10.0.3.2", POD_CIDR));
        let mut d = lab.daemon("k8s-outage", "");
        lab.wait_served_by(&["b1", "b2"], 40);
        wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
        lab.fake.stop();
        wait_until("the watch to notice", STEP, || {
            healthz(&d)["kubernetes"]["kinds"]["services"]["state"] == "backing off"
        });
        // Longer than the watcher's 5 s tick later: still beating (an API server that is down
        // is not a wedged loop), still programmed.
        std::thread::sleep(Duration::from_secs(7));
        let v = healthz(&d);
        assert_eq!(v["live"], true, "{v}");
        let since = v["controllers"]["kubernetes"]["secondsSinceBeat"].as_f64().unwrap();
        assert!(since < 5.5, "the watcher keeps beating during the outage: {v}");
        assert!(v["kubernetes"]["kinds"]["services"]["lastError"].is_string(), "{v}");
        // The metrics follow within the watcher's refresh period.
        wait_until("the request errors counted", STEP, || {
            d.metric("edgenetd_kubernetes_request_errors_total", &[("kind", "services"), ("code", "io")])
                .is_some_and(|n| n >= 1.0)
        });
        assert_eq!(d.metric("edgenetd_kubernetes_connected", &[("kind", "services")]), Some(0.0));
        lab.wait_served_by(&["b1", "b2"], 40);
        assert!(has_owned_route(POD_CIDR));
        // A restart of edgenetd during the outage: the cache keeps the cluster entries.
        assert!(d.stop().success());
        drop(d);
        let d = lab.daemon("k8s-outage-2", "");
        let log = d.log();
        assert!(log.contains("restored from"), "{log}");
        // The first snapshot already held the cached entries: the first sync kept the route.
        assert!(log.contains("route: sync (Start) ok: 1 routes"), "{log}");
        assert_eq!(d.get("/readyz").0, 200, "the cache makes the daemon ready");
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(healthz(&d)["live"], true);
        lab.wait_served_by(&["b1", "b2"], 40);
        assert!(has_owned_route(POD_CIDR), "the cached route is kept");
        // The API comes back: a change reaches the kernel again.
        lab.fake.restart();
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.3.2")]));
        lab.wait_served_by(&["b3"], 20);
    }
}

netns_test! {
    /// The unit is ordered before network-pre.target: an API server that only answers once
    /// the network is up must not hold READY=1 (and with it the boot) forever.
    fn an_api_server_down_at_boot_does_not_hold_ready_but_readyz_waits_for_the_cluster() {
        let mut lab = Lab::new();
        lab.web(&[ready("10.0.1.2")]);
        lab.fake.stop();
        let d = Daemon::start("k8s-down-at-boot", &lab.config(""));
        d.wait_notify(0, STEP, |m| m.lines().any(|l| l == "READY=1"))
            .unwrap_or_else(|| panic!("no READY=1: {:?}\n{}", d.messages(), d.log()));
        assert!(d.log().contains("not listed yet"), "{}", d.log());
        assert_eq!(d.get("/readyz").0, 503, "not ready before the cluster answered");
        assert_eq!(healthz(&d)["live"], true);
        lab.fake.restart();
        wait_until("/readyz once the kinds are listed", STEP, || d.get("/readyz").0 == 200);
        lab.wait_served_by(&["b1"], 20);
    }
}

netns_test! {
    /// Pods b1 (`shop`, app=web) and b2 (`shop`, app=db) on this node, clients `cl`
    /// (namespace `frontend`) and b3 (namespace `other`): a policy admitting `frontend` to
    /// the web pods lets `cl` through and blocks b3; the unselected db pod stays open; the
    /// policy's deletion opens the web pod again.
    fn a_network_policy_admitting_one_namespace_lets_it_through_and_blocks_another() {
        let lab = Lab::new();
        for ns in ["shop", "frontend", "other"] {
            lab.fake.apply("namespaces", namespace(ns));
        }
        let pods = [
            ("shop", "web-1", "10.0.1.2", "web"),
            ("shop", "db-1", "10.0.2.2", "db"),
            ("other", "probe-1", "10.0.3.2", "probe"),
            ("frontend", "ui-1", "192.168.10.2", "ui"),
        ];
        for (ns, name, ip, app) in pods {
            let node = if ns == "shop" { kube::NODE } else { "worker-2" };
            lab.fake
                .apply("pods", pod(ns, name, node, ip, serde_json::json!({"app": app})));
        }
        lab.fake
            .apply("networkpolicies", admit_namespace("shop", "web", "frontend"));
        let config = kube::section(&lab.fake, &lab.cache, &["network_policies"]);
        let d = Daemon::start("k8s-netpol", &config);
        d.wait_ready();
        let (cl, b3) = (lab.net.host("cl"), lab.net.host("b3"));
        let web = |from| lab.net.hits_within(from, "tcp", "10.0.1.2", 8080, 3, 1.0);
        wait_until("the policy in force", STEP, || !web(b3).contains_key("b1"));
        assert_eq!(web(cl).get("b1"), Some(&3), "the admitted namespace gets through");
        assert_eq!(web(b3).get("b1"), None, "another namespace is blocked");
        let db = lab.net.hits(b3, "tcp", "10.0.2.2", 8080, 3);
        assert_eq!(db.get("b2"), Some(&3), "an unselected pod stays open");
        let table = sh_status("nft list table inet edgenetd-policy").1;
        assert!(table.contains("pods-ingress"), "{table}");
        // The metrics follow within the watcher's refresh period.
        wait_until("the pods counted", STEP, || {
            d.metric("edgenetd_kubernetes_objects", &[("kind", "pods")]) == Some(4.0)
        });
        lab.fake.delete("networkpolicies", "shop", "web-from-frontend");
        wait_until("the web pod open again", STEP, || web(b3).get("b1") == Some(&3));
    }
}

netns_test! {
    fn restarting_the_api_server_resumes_the_watch_without_a_relist() {
        let mut lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        let d = lab.daemon("k8s-resume", "");
        lab.wait_served_by(&["b1", "b2"], 20);
        let paths = [
            "/api/v1/services",
            "/apis/discovery.k8s.io/v1/endpointslices",
            "/api/v1/nodes",
        ];
        for p in paths {
            wait_until(&format!("a watch of {p}"), STEP, || !kube::watches(&lab.fake, p).is_empty());
        }
        let lists_before: Vec<usize> = paths.iter().map(|p| kube::lists(&lab.fake, p).len()).collect();
        assert_eq!(lists_before, [1, 1, 1]);
        let watches_before: Vec<usize> = paths.iter().map(|p| kube::watches(&lab.fake, p).len()).collect();
        lab.fake.stop();
        std::thread::sleep(Duration::from_secs(1));
        lab.fake.restart();
        // A change made while nobody watched arrives through the resumed watch.
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.2.2")]));
        lab.wait_served_by(&["b2"], 20);
        for (i, p) in paths.iter().enumerate() {
            wait_until(&format!("{p} watched again"), STEP, || {
                kube::watches(&lab.fake, p).len() > watches_before[i]
            });
            assert_eq!(kube::lists(&lab.fake, p).len(), 1, "{p} was listed again");
        }
        for kind in ["services", "endpointslices", "nodes"] {
            assert_eq!(
                d.metric("edgenetd_kubernetes_relists_total", &[("kind", kind), ("reason", "gone")]),
                Some(0.0)
            );
        }
    }
}

netns_test! {
    fn a_toml_reload_keeps_the_cluster_entries_and_a_clash_keeps_the_toml_one() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        lab.fake.apply("nodes", node("worker-2", "10.0.3.2", POD_CIDR));
        let d = lab.daemon("k8s-reload", "");
        lab.wait_served_by(&["b1", "b2"], 20);
        wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
        assert_eq!(d.metric("edgenetd_kubernetes_conflicts_total", &[("kind", "services")]), Some(0.0));
        // A reload that adds an unrelated TOML service keeps the cluster's entries.
        let other = "[[service]]\nname = \"other\"\naddress = \"10.96.0.99\"\nport = 80\nbackends = [\"10.0.3.2:8080\"]\n";
        d.reload(&lab.config(other));
        wait_until("the TOML service", STEP, || service_table().contains("10.96.0.99"));
        lab.wait_served_by(&["b1", "b2"], 20);
        assert!(has_owned_route(POD_CIDR));
        // A TOML service on the cluster service's VIP:port/protocol wins, and is counted.
        let clash = "[[service]]\nname = \"mine\"\naddress = \"10.96.0.10\"\nport = 80\nbackends = [\"10.0.3.2:8080\"]\n";
        d.reload(&lab.config(clash));
        lab.wait_served_by(&["b3"], 20);
        wait_until("the conflict counted", STEP, || {
            d.metric("edgenetd_kubernetes_conflicts_total", &[("kind", "services")]) == Some(1.0)
        });
        assert!(has_owned_route(POD_CIDR), "the cluster route stays");
        // The TOML one removed: the cluster service comes back.
        d.reload(&lab.config(""));
        lab.wait_served_by(&["b1", "b2"], 20);
        // A changed [kubernetes] section waits for a restart (the old one stays in force).
        let narrowed = lab.config("").replace("node_name", "service_selector = \"app=none\"\nnode_name");
        d.reload(&narrowed);
        wait_until("the restart warning", STEP, || {
            d.log().contains("[kubernetes] settings changed; they take effect at the next restart")
        });
        lab.wait_served_by(&["b1", "b2"], 20);
    }
}

netns_test! {
    fn a_burst_of_a_thousand_endpoint_updates_makes_a_few_syncs() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2"), ready("10.0.2.2")]);
        let d = lab.daemon("k8s-burst", "");
        lab.wait_served_by(&["b1", "b2"], 20);
        let syncs = || d.metric("edgenetd_controller_syncs_total", &[("controller", "service")]).unwrap();
        let before = syncs();
        for i in 0..1000 {
            // Every update changes the backends: each one alone would be a sync.
            let eps = if i % 2 == 0 { [ready("10.0.1.2")] } else { [ready("10.0.3.2")] };
            lab.fake.apply("endpointslices", slice("web", &eps));
        }
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.2.2")]));
        lab.wait_served_by(&["b2"], 20);
        wait_until("the events counted", STEP, || {
            d.metric("edgenetd_kubernetes_events_total", &[("kind", "endpointslices"), ("type", "MODIFIED")])
                == Some(1001.0)
        });
        let made = syncs() - before;
        eprintln!("1,001 updates made {made} service syncs");
        assert!((1.0..=10.0).contains(&made), "{made} syncs for 1,001 updates");
    }
}

/// The watcher alone, as the daemon runs it, with a compose step that never returns: the
/// health registry catches the wedged thread like a wedged controller.
#[test]
fn a_wedged_watcher_thread_stops_beating_and_is_not_live() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use edgenetd::clock::FakeClock;
    use edgenetd::kubernetes::client::{Auth, Endpoint, Transport};
    use edgenetd::kubernetes::watch::{Settings, WINDOW, Watcher};
    use edgenetd::liveness::Liveness;

    let fake = FakeApiServer::start();
    fake.apply("nodes", node("worker-2", "10.0.3.2", POD_CIDR));
    let (cert, key) = fake.client_cert_files();
    let port: u16 = fake.url().rsplit_once(':').unwrap().1.parse().unwrap();
    let settings = Settings {
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port,
            transport: Transport::Tls {
                ca_file: fake.ca_file(),
            },
            auth: Auth::ClientCert { cert, key },
        },
        path_prefix: String::new(),
        node_name: kube::NODE.into(),
        feeds: [edgenetd::config::kubernetes::Feed::Routes]
            .into_iter()
            .collect(),
        service_selector: None,
        node_selector: None,
        network_policy_selector: None,
        service_cidrs: Vec::new(),
        cluster_cidrs: None,
        node_port_addresses: Default::default(),
        isolate_unknown_pods: false,
        pod_cidrs: None,
        log_denied: false,
        network_policy_mode: Default::default(),
    };
    let clock = FakeClock::new();
    let liveness = Liveness::new(clock.clone());
    let wedged = Arc::new(AtomicBool::new(false));
    let (_stop, shutdown) = async_channel::bounded::<()>(1);
    // Two watchers on one API server: one whose compose step wedges its thread, one that
    // works (the contrast: the same waits with a working thread stay live).
    for (name, wedge) in [("wedged", true), ("working", false)] {
        let handle = liveness.register(name, WINDOW);
        let mut watcher = Watcher::new(settings.clone());
        let statuses = watcher.statuses();
        let (flag, shutdown) = (wedged.clone(), shutdown.clone());
        std::thread::spawn(move || {
            watcher.run(handle, shutdown, statuses, |_parts| {
                if wedge {
                    flag.store(true, Ordering::SeqCst);
                    loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                }
            });
        });
    }
    wait_until("the first compose", STEP, || wedged.load(Ordering::SeqCst));
    clock.advance(WINDOW + Duration::from_secs(1));
    // Longer than the watcher's tick: a live thread would have beaten by now.
    std::thread::sleep(Duration::from_secs(6));
    let report = liveness.report();
    assert_eq!(report.stale(), ["wedged"], "{report:?}");
}

netns_test! {
    /// The bug: the composer took every address of a Service port after the first for "another
    /// service named ..." and dropped it (one WARN per port): only the first address was served.
    fn only_one_address_of_a_service_port_is_served() {
        let lab = Lab::of(Family::Dual);
        lab.fake.apply("nodes", serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": kube::NODE},
            "spec": {"podCIDRs": ["10.244.1.0/24", "fd44:1::/64"]},
            "status": {"addresses": [
                {"type": "InternalIP", "address": "192.168.10.1"},
                {"type": "InternalIP", "address": "fd10::1"},
                {"type": "ExternalIP", "address": "192.168.10.99"}
            ]}
        }));
        lab.fake.apply("services", serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "shop", "namespace": "default"},
            "spec": {
                "type": "LoadBalancer", "clusterIP": "10.96.0.20",
                "clusterIPs": ["10.96.0.20", "fd00::20"], "ipFamilies": ["IPv4", "IPv6"],
                "externalIPs": ["192.0.2.7"],
                "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080,
                           "nodePort": 30080}]
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}]}}
        }));
        lab.fake.apply("endpointslices", slice("shop", &[ready("10.0.1.2")]));
        let mut v6 = slice("shop", &[ready("fd01::2")]);
        v6["metadata"]["name"] = "shop-v6".into();
        v6["addressType"] = "IPv6".into();
        lab.fake.apply("endpointslices", v6);
        let d = lab.daemon("k8s-every-address", "");
        let cl = lab.net.host("cl");
        for (address, port) in [
            ("10.96.0.20", 80),
            ("fd00::20", 80),
            ("192.0.2.7", 80),
            ("198.51.100.1", 80),
            ("192.168.10.1", 30080),
            ("fd10::1", 30080),
        ] {
            let mut last = BTreeMap::new();
            wait_until(&format!("{address} port {port} served by b1"), STEP, || {
                last = lab.net.hits(cl, "tcp", address, port, 4);
                last.keys().map(String::as_str).eq(["b1"])
            });
        }
        let table = service_table();
        assert!(
            !table.contains("192.168.10.99"),
            "node ports on the primary addresses only, not the ExternalIP: {table}"
        );
        let log = d.log();
        assert!(!log.contains("is left out"), "{log}");
        assert_eq!(
            d.metric("edgenetd_kubernetes_conflicts_total", &[("kind", "services")]),
            Some(0.0)
        );
    }
}

netns_test! {
    /// An API server without ServiceCIDRs (before Kubernetes 1.33) answers 404: that is "none",
    /// the configured `service_cidrs` stand alone, readiness does not wait, and nothing retries
    /// in a loop or warns.
    fn a_cluster_without_servicecidrs_is_ready_without_an_error_storm() {
        let lab = Lab::new();
        lab.fake.set_absent("servicecidrs");
        lab.web(&[ready("10.0.1.2")]);
        let d = lab.daemon("k8s-no-servicecidrs", "");
        lab.wait_served_by(&["b1"], 10);
        let v = healthz(&d);
        assert_eq!(v["ready"], true, "{v}");
        assert_eq!(v["kubernetes"]["kinds"]["servicecidrs"]["synced"], true, "{v}");
        assert_eq!(v["kubernetes"]["kinds"]["servicecidrs"]["state"], "absent", "{v}");
        // Longer than the first back-offs (0.8 s, 1.6 s, 3.2 s): a retry loop would show.
        std::thread::sleep(Duration::from_secs(6));
        let path = "/apis/networking.k8s.io/v1/servicecidrs";
        assert_eq!(kube::lists(&lab.fake, path).len(), 1, "listed once, then left for minutes");
        let log = d.log();
        assert_eq!(log.matches("not served by this API server (404)").count(), 1, "{log}");
        let warned = log.lines().any(|l| l.contains("servicecidrs") && l.contains("WARN"));
        assert!(!warned, "{log}");
    }
}

netns_test! {
    /// A cluster that serves ServiceCIDRs has them listed and watched like any other kind.
    fn servicecidrs_are_listed_and_watched_where_the_cluster_serves_them() {
        let lab = Lab::new();
        lab.fake.apply("servicecidrs", serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": "kubernetes"},
            "spec": {"cidrs": ["10.96.0.0/12"]}
        }));
        lab.web(&[ready("10.0.1.2")]);
        let d = lab.daemon("k8s-servicecidrs", "service_cidrs = [\"10.200.0.0/16\"]\n");
        lab.wait_served_by(&["b1"], 10);
        let path = "/apis/networking.k8s.io/v1/servicecidrs";
        wait_until("a watch of servicecidrs", STEP, || !kube::watches(&lab.fake, path).is_empty());
        assert_eq!(d.metric("edgenetd_kubernetes_objects", &[("kind", "servicecidrs")]), Some(1.0));
    }
}

/// Sends SCTP INIT packets from a raw socket (this kernel has no SCTP sockets): argv VIP PORT.
const SCTP_SEND: &str = r#"
import socket, struct, sys, time
def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff
init = struct.pack('!BBHIIHHI', 1, 0, 20, 0x11223344, 65535, 10, 10, 1)
head = struct.pack('!HHI', 40000, int(sys.argv[2]), 0)
packet = head + struct.pack('<I', crc32c(head + b'\0\0\0\0' + init)) + init
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 132)
for _ in range(10):
    s.sendto(packet, (sys.argv[1], 0))
    time.sleep(0.3)
"#;

/// Prints `src dst sport dport` of the first SCTP packet a raw socket receives.
const SCTP_RECEIVE: &str = r#"
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 132)
s.settimeout(10)
print('listening', flush=True)
data, _ = s.recvfrom(2048)
ihl = (data[0] & 15) * 4
sport, dport = struct.unpack('!HH', data[ihl:ihl + 4])
print(socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20]), sport, dport, flush=True)
"#;

netns_test! {
    /// SCTP Service ports are proxied: their elements are in the service table, and an SCTP
    /// packet to the cluster IP is DNATed to the endpoint in another namespace.
    fn an_sctp_service_port_is_programmed_and_dnats_an_sctp_packet() {
        let lab = Lab::new();
        let mut svc = service("diameter", VIP, 3868);
        svc["spec"]["ports"][0]["protocol"] = "SCTP".into();
        svc["spec"]["ports"][0]["name"] = "diameter".into();
        lab.fake.apply("services", svc);
        let mut eps = slice("diameter", &[ready("10.0.1.2")]);
        eps["ports"] = serde_json::json!([{"name": "diameter", "protocol": "SCTP", "port": 3868}]);
        lab.fake.apply("endpointslices", eps);
        let _d = lab.daemon("k8s-sctp", "");
        wait_until("the SCTP service in the table", STEP, || {
            service_table().contains("sctp . 3868")
        });
        let table = service_table();
        assert!(table.contains(&format!("{VIP} . sctp . 3868")), "{table}");
        // Connection tracking checks SCTP checksums; the hand-made packets need not pass it.
        sh_status("sysctl -qw net.netfilter.nf_conntrack_checksum=0");
        let send = lab.net.script("sctp_send.py", SCTP_SEND);
        let receive = lab.net.script("sctp_receive.py", SCTP_RECEIVE);
        let out = lab.cache.join("sctp-received.txt");
        let (b1, cl) = (lab.net.host("b1"), lab.net.host("cl"));
        let mut receiver = b1.spawn(&format!("exec python3 -u {receive} > {}", out.display()));
        wait_until("the raw receiver", STEP, || {
            std::fs::read_to_string(&out).is_ok_and(|t| t.starts_with("listening"))
        });
        cl.sh(&format!("python3 {send} {VIP} 3868"));
        let _ = receiver.wait();
        let got = std::fs::read_to_string(&out).unwrap();
        let fields: Vec<&str> = got.lines().nth(1).unwrap_or("").split(' ').collect();
        assert_eq!(
            fields.get(1..).map(|f| f.to_vec()),
            Some(vec!["10.0.1.2", "40000", "3868"]),
            "DNATed to the endpoint: {got}"
        );
    }
}

netns_test! {
    /// Topology-aware routing: with every endpoint hinted for a zone and this node's Node
    /// labelled with one of them, the cluster IP balances over that zone's endpoints only;
    /// hints that leave the zone without an endpoint are ignored.
    fn zone_hints_keep_the_cluster_ip_in_this_nodes_zone() {
        let lab = Lab::new();
        let mut me = node(kube::NODE, "192.168.10.1", "10.244.1.0/24");
        me["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-a".into();
        lab.fake.apply("nodes", me);
        let hinted = |ip: &str, zone: &str| {
            let mut e = ready(ip);
            e["hints"] = serde_json::json!({"forZones": [{"name": zone}]});
            e
        };
        lab.web(&[hinted("10.0.1.2", "zone-a"), hinted("10.0.2.2", "zone-b"), hinted("10.0.3.2", "zone-a")]);
        let _d = lab.daemon("k8s-zones", "");
        lab.wait_served_by(&["b1", "b3"], 60);
        lab.fake.apply(
            "endpointslices",
            slice("web", &[hinted("10.0.1.2", "zone-b"), hinted("10.0.2.2", "zone-b"), hinted("10.0.3.2", "zone-c")]),
        );
        lab.wait_served_by(&["b1", "b2", "b3"], 90);
    }
}

netns_test! {
    /// `node_port_addresses` as prefixes: NodePorts on this host's interface addresses within
    /// them (the router's 192.168.10.1 here, not its 10.0.i.1 addresses).
    fn node_port_addresses_prefixes_pick_this_hosts_addresses() {
        let lab = Lab::new();
        let mut svc = service("web", VIP, 80);
        svc["spec"]["type"] = "NodePort".into();
        svc["spec"]["ports"][0]["nodePort"] = 30080.into();
        lab.fake.apply("services", svc);
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.1.2")]));
        let _d = lab.daemon("k8s-node-port-cidrs", "node_port_addresses = [\"192.168.10.0/24\"]\n");
        let cl = lab.net.host("cl");
        wait_until("the node port on 192.168.10.1", STEP, || {
            lab.net.hits(cl, "tcp", "192.168.10.1", 30080, 4).keys().map(String::as_str).eq(["b1"])
        });
        let table = service_table();
        assert!(!table.contains("10.0.1.1 . tcp . 30080"), "{table}");
        assert!(table.contains("192.168.10.1 . tcp . 30080"), "{table}");
    }
}

netns_test! {
    /// The bug: a Service with `clusterIP: "not-an-ip"` was skipped with no metric, nothing
    /// in /healthz and only a debug line. Now: one info line, one count, listed in /healthz,
    /// however many composes follow while it stays broken.
    fn skips_nobody_can_see_are_logged_counted_and_listed_once() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2")]);
        lab.fake.apply("services", service("broken", "not-an-ip", 80));
        let d = lab.daemon("k8s-skips", "");
        lab.wait_served_by(&["b1"], 10);
        let count = || {
            d.metric("edgenetd_kubernetes_skipped_total", &[("kind", "services"), ("reason", "bad_address")])
        };
        wait_until("the skip counted", STEP, || count() == Some(1.0));
        // More composes while the Service stays broken.
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.2.2")]));
        lab.wait_served_by(&["b2"], 10);
        lab.fake.apply("endpointslices", slice("web", &[ready("10.0.3.2")]));
        lab.wait_served_by(&["b3"], 10);
        assert_eq!(count(), Some(1.0), "counted once while it lasts");
        let v = healthz(&d);
        let skipped = &v["kubernetes"]["skipped"];
        assert_eq!(skipped["active"], 1, "{v}");
        assert_eq!(skipped["recent"][0]["object"], "default/broken", "{v}");
        assert_eq!(skipped["recent"][0]["reason"], "bad_address", "{v}");
        let lines = d.log().lines().filter(|l| l.contains("default/broken: skipped")).count();
        assert_eq!(lines, 1, "logged once at the default level:\n{}", d.log());
    }
}

/// The slice `huge-1` of Service `huge`: 100,000 ready endpoints, about 20 MB of JSON (over
/// the 4 MiB one-object cap).
fn huge_slice() -> serde_json::Value {
    let endpoints: Vec<serde_json::Value> = (0..100_000u32)
        .map(|i| {
            ready(&format!(
                "10.{}.{}.{}",
                100 + i / 65536,
                (i / 256) % 256,
                i % 256
            ))
        })
        .collect();
    slice("huge", &endpoints)
}

netns_test! {
    /// The bug: one EndpointSlice with 100,000 endpoints (about 20 MB) in a list page took the
    /// daemon to ~300 MiB (an OOM kill under `MemoryMax=128M`, and the same list again at
    /// restart). Now it is refused unparsed and counted, the rest is served, and the daemon
    /// stays under 64 MiB.
    fn one_huge_endpointslice_does_not_take_the_daemon_over_64_mib() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2")]);
        lab.fake.apply("services", service("huge", "10.96.7.7", 80));
        lab.fake.apply("endpointslices", huge_slice());
        let d = lab.daemon("k8s-huge-slice", "");
        lab.wait_served_by(&["b1"], 10);
        let (peak, now) = d.memory_kib();
        eprintln!("a 100,000-endpoint slice: peak {peak} KiB, now {now} KiB");
        assert!(peak < 64 * 1024, "peak {peak} KiB");
        assert!(now < 48 * 1024, "held after the list {now} KiB");
        assert_eq!(
            d.metric("edgenetd_kubernetes_objects_refused_total", &[("kind", "endpointslices"), ("reason", "too_large")]),
            Some(1.0)
        );
        assert!(d.log().contains("default/huge-1 is "), "the refusal names the object:\n{}", d.log());
    }
}

netns_test! {
    /// The bug: a 100,000-endpoint EndpointSlice arriving by watch (a 20 MB line, over the
    /// 4 MiB one-object cap) failed the watch of every EndpointSlice, and again at each resume
    /// (the same event came back): no endpoint change was seen after it. Now it is refused,
    /// counted and logged once, the watch goes on with the next change, and the daemon stays
    /// under 64 MiB.
    fn one_huge_endpointslice_by_watch_is_refused_once_and_the_watch_goes_on() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2")]);
        lab.fake.apply("services", service("huge", "10.96.7.7", 80));
        let d = lab.daemon("k8s-huge-watch", "");
        lab.wait_served_by(&["b1"], 10);
        lab.fake.apply("endpointslices", huge_slice());
        let refused = || {
            d.metric("edgenetd_kubernetes_objects_refused_total", &[("kind", "endpointslices"), ("reason", "too_large")])
        };
        wait_until("the huge slice refused", STEP, || refused() == Some(1.0));
        lab.web(&[ready("10.0.2.2")]);
        lab.wait_served_by(&["b2"], 10);
        let (peak, now) = d.memory_kib();
        eprintln!("a 100,000-endpoint slice by watch: peak {peak} KiB, now {now} KiB");
        assert!(peak < 64 * 1024, "peak {peak} KiB");
        assert!(now < 48 * 1024, "held after the line {now} KiB");
        assert_eq!(refused(), Some(1.0), "counted once");
        let warned = d.log().lines().filter(|l| l.contains("default/huge-1 is ")).count();
        assert_eq!(warned, 1, "named and logged once:\n{}", d.log());
        assert!(!d.log().contains("watch line longer"), "the watch did not fail:\n{}", d.log());
    }
}

netns_test! {
    /// The figure of the list path for ordinary objects: 5,000 EndpointSlices of 100
    /// endpoints each (no Service selects them, so only the reflector and its store hold
    /// them: the figure is the list's, not the dataplane's). Prints the daemon's peak and
    /// resident memory; the ceiling is the one docs/kubernetes.md quotes.
    fn a_list_of_5000_slices_of_100_endpoints_stays_under_its_memory_ceiling() {
        let lab = Lab::new();
        lab.web(&[ready("10.0.1.2")]);
        for s in 0..5_000u32 {
            let endpoints: Vec<serde_json::Value> = (0..100u32)
                .map(|i| ready(&format!("10.{}.{}.{}", 100 + s / 2560, (s / 10) % 256, (s % 10) * 25 + i / 4)))
                .collect();
            lab.fake.apply("endpointslices", slice(&format!("bulk-{s}"), &endpoints));
        }
        // A debug build on a loaded builder takes longer than `Lab::daemon`'s 5 s to list
        // half a million endpoints.
        let d = Daemon::start("k8s-bulk-slices", &lab.config(""));
        d.wait_notify(0, Duration::from_secs(300), |m| m.lines().any(|l| l == "READY=1"))
            .unwrap_or_else(|| panic!("no READY=1:\n{}", d.log()));
        lab.wait_served_by(&["b1"], 10);
        wait_until("every slice listed", STEP, || {
            d.metric("edgenetd_kubernetes_objects", &[("kind", "endpointslices")]) == Some(5_001.0)
        });
        let (peak, now) = d.memory_kib();
        eprintln!("5,000 slices of 100 endpoints: peak {peak} KiB, now {now} KiB");
        // 161 MiB here; 198 MiB while every item was parsed into a value tree first.
        assert!(peak < 180 * 1024, "peak {peak} KiB");
    }
}
