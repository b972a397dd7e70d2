//! Fleets: the router fed through a node-local list/watch proxy on loopback over plain HTTP,
//! in the two shapes edge fleets run: KubeEdge's MetaServer (edgecore, `127.0.0.1:10550`,
//! no credentials) and OpenYurt's YurtHub (`127.0.0.1:10261`, which authenticates upstream
//! with the node's certificate and passes a bearer token along). Real packets: the test's
//! namespace is the router, whose loopback no one else shares, so the proxies' own ports are
//! free there.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::time::Duration;

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, node, ready, service, slice};
use common::local_proxy::LocalProxy;
use common::routes::has_owned_route;
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::topology::Topology;
use common::wait::wait_until;

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);
/// The cluster IP of the test service.
const VIP: &str = "10.96.0.10";
/// The pod CIDR of the other node (on b3's directly connected subnet).
const POD_CIDR: &str = "10.244.2.0/24";

/// The namespaces (client `cl`, backends b1..b3) and the cache directory.
struct Lab {
    net: Topology,
    cache: ScratchDir,
}

impl Lab {
    fn new() -> Lab {
        let (net, _servers) = client_and_three_backends(Family::V4);
        Lab {
            net,
            cache: ScratchDir::new("k8s-fleet-cache"),
        }
    }

    /// The objects every test serves: this node, `web` on b1 and b2, worker-2's pod CIDR.
    fn serve(&self, fake: &FakeApiServer) {
        fake.apply("nodes", node(kube::NODE, "192.168.10.1", "10.244.1.0/24"));
        fake.apply("nodes", node("worker-2", "10.0.3.2", POD_CIDR));
        fake.apply("services", service("web", VIP, 80));
        fake.apply(
            "endpointslices",
            slice("web", &[ready("10.0.1.2"), ready("10.0.2.2")]),
        );
    }

    /// The daemon's config: policy off, services and routes from `server`, `extra` keys.
    fn config(&self, server: &str, extra: &str) -> String {
        format!(
            "[controller.policy]\nenabled = false\n\n[kubernetes]\nserver = {server:?}\n{extra}\
             node_name = {:?}\nfeeds = [\"services\", \"routes\"]\ncache_file = {:?}\n",
            kube::NODE,
            self.cache.join("cluster.json").display().to_string(),
        )
    }

    /// Waits until `n` connections to the VIP are answered by exactly the backends `names`.
    fn wait_served_by(&self, names: &[&str], n: u32) -> BTreeMap<String, u32> {
        let mut last = BTreeMap::new();
        let what = format!("connections served by exactly {names:?}");
        wait_until(&what, STEP, || {
            last = self.net.hits(self.net.host("cl"), "tcp", VIP, 80, n);
            last.keys().map(String::as_str).eq(names.iter().copied())
        });
        last
    }
}

fn healthz(d: &Daemon) -> serde_json::Value {
    let (status, body) = d.get("/healthz");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

netns_test! {
    /// KubeEdge: edgecore's MetaServer answers list and watch on http://127.0.0.1:10550 from
    /// the node's local store, without credentials. The daemon lists, watches, programs the
    /// service and the pod route, and follows a change.
    fn kubeedge_metaserver_shape_plain_http_on_127_0_0_1_10550_feeds_the_router() {
        let lab = Lab::new();
        let metaserver = FakeApiServer::start_plain_at("127.0.0.1:10550");
        lab.serve(&metaserver);
        let d = Daemon::start("k8s-metaserver", &lab.config("http://127.0.0.1:10550", ""));
        d.wait_ready();
        let h = lab.wait_served_by(&["b1", "b2"], 40);
        assert_eq!(h.values().sum::<u32>(), 40, "{h:?}");
        wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
        let log = d.log();
        assert!(
            log.contains("watching 127.0.0.1:10550 over plain HTTP to a node-local proxy"),
            "{log}"
        );
        let v = healthz(&d);
        for kind in ["services", "endpointslices", "nodes"] {
            assert_eq!(v["kubernetes"]["kinds"][kind]["state"], "watching", "{v}");
        }
        assert!(metaserver.requests().iter().all(|r| r.authorization.is_none()));
        // A change made upstream reaches the kernel through the proxy's watch.
        metaserver.apply("endpointslices", slice("web", &[ready("10.0.3.2")]));
        lab.wait_served_by(&["b3"], 20);
    }
}

netns_test! {
    /// OpenYurt: YurtHub on http://localhost:10261 forwards to the API server over TLS with
    /// the node's client certificate, and passes the bearer token edgenetd sends (the API
    /// server here requires one or a certificate: the proxy's certificate lets it in). The
    /// API server going away behind the proxy keeps everything programmed.
    fn openyurt_yurthub_shape_plain_http_on_localhost_10261_feeds_the_router() {
        let lab = Lab::new();
        let mut apiserver = FakeApiServer::start();
        apiserver.require_token("edgenetd-sa-token");
        lab.serve(&apiserver);
        let yurthub = LocalProxy::start("127.0.0.1:10261", &apiserver);
        let token = lab.cache.join("token");
        std::fs::write(&token, "edgenetd-sa-token\n").unwrap();
        let extra = format!("token_file = {:?}\n", token.display().to_string());
        let d = Daemon::start("k8s-yurthub", &lab.config("http://localhost:10261", &extra));
        d.wait_ready();
        lab.wait_served_by(&["b1", "b2"], 40);
        wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
        assert!(yurthub.forwarded() >= 3, "every list went through the proxy");
        let requests = apiserver.requests();
        assert!(
            requests.iter().all(|r| r.authorization.as_deref() == Some("Bearer edgenetd-sa-token")),
            "the token passed along: {requests:?}"
        );
        apiserver.apply("endpointslices", slice("web", &[ready("10.0.3.2")]));
        lab.wait_served_by(&["b3"], 20);
        // The cloud goes away behind the proxy: nothing is removed.
        apiserver.stop();
        wait_until("the watch to notice", STEP, || {
            healthz(&d)["kubernetes"]["kinds"]["services"]["state"] == "backing off"
        });
        lab.wait_served_by(&["b3"], 20);
        assert!(has_owned_route(POD_CIDR));
    }
}
