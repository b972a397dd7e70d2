//! Fleets: the router fed through a node-local list/watch proxy on loopback over plain HTTP,
//! in the two shapes edge fleets run: KubeEdge's MetaServer (edgecore, `127.0.0.1:10550`,
//! no credentials) and OpenYurt's YurtHub (`127.0.0.1:10261`, which authenticates upstream
//! with the node's certificate and passes a bearer token along); and offline autonomy across
//! a reboot: the cache on persistent storage brings the last cluster state back while the
//! control plane is unreachable, unless it is older than `cache_max_age`. Real packets: the
//! test's namespace is the router, whose loopback no one else shares, so the proxies' own
//! ports are free there.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::time::Duration;

use common::daemon::{Daemon, Options};
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, node, ready, service, slice};
use common::local_proxy::LocalProxy;
use common::routes::has_owned_route;
use common::scratch::ScratchDir;
use common::service_lab::{Family, client_and_three_backends};
use common::shell::sh;
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

/// No connection to the VIP reaches a backend (refused, timed out, or not answered).
fn unserved(lab: &Lab) -> bool {
    let h = lab
        .net
        .hits_within(lab.net.host("cl"), "tcp", VIP, 80, 3, 1.0);
    !h.keys().any(|answer| answer.starts_with('b'))
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

/// A router's two kinds of storage: `/run/edgenetd` (tmpfs: the control socket, emptied by a
/// reboot) and `/var/lib/edgenetd` (persistent: the state directory and, here, the cache).
struct Storage {
    run: ScratchDir,
    var_lib: ScratchDir,
}

impl Storage {
    fn new() -> Storage {
        Storage {
            run: ScratchDir::new("k8s-run-edgenetd"),
            var_lib: ScratchDir::new("k8s-var-lib-edgenetd"),
        }
    }

    /// The cache on persistent storage, as the packaged unit's StateDirectory= allows.
    fn cache_file(&self) -> std::path::PathBuf {
        self.var_lib.join("kubernetes-state.json")
    }

    /// Starts the daemon on `config` with its socket in "/run" and its state in "/var/lib".
    fn daemon(&self, tag: &str, config: &str) -> Daemon {
        let socket = self.run.join("control.sock").display().to_string();
        let state = self.var_lib.join("state").display().to_string();
        let args = [
            "--control-socket",
            socket.as_str(),
            "--state-dir",
            state.as_str(),
        ];
        let opts = Options {
            args: &args,
            ..Options::default()
        };
        Daemon::start_with(tag, config, opts)
    }

    /// A reboot as far as edgenetd can tell: /run emptied, the kernel's tables and routes
    /// gone (the test's own namespace: its ruleset and edgenetd's routes only).
    fn reboot(&self) {
        for entry in std::fs::read_dir(self.run.path()).unwrap() {
            let path = entry.unwrap().path();
            let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
        }
        assert_eq!(std::fs::read_dir(self.run.path()).unwrap().count(), 0);
        sh("nft flush ruleset");
        sh("ip route flush proto 190 table all");
    }
}

/// `[kubernetes]` keys for a cache on persistent storage, with `cache_max_age` when given.
fn persistent(storage: &Storage, max_age: Option<&str>) -> String {
    let mut keys = format!(
        "cache_file = {:?}\n",
        storage.cache_file().display().to_string()
    );
    if let Some(age) = max_age {
        keys.push_str(&format!("cache_max_age = {age:?}\n"));
    }
    keys
}

/// The daemon's config against the TLS `fake`, its cache as `keys` say.
fn config_with_cache(fake: &FakeApiServer, keys: &str) -> String {
    let (cert, key) = fake.client_cert_files();
    format!(
        "[controller.policy]\nenabled = false\n\n[kubernetes]\nserver = {:?}\nca_file = {:?}\n\
         client_cert = {:?}\nclient_key = {:?}\nnode_name = {:?}\n\
         feeds = [\"services\", \"routes\"]\n{keys}",
        fake.url(),
        fake.ca_file().display().to_string(),
        cert.display().to_string(),
        key.display().to_string(),
        kube::NODE,
    )
}

/// Runs a daemon until the cluster state is in force, cached on persistent storage and
/// current, then stops it and the API server: the control plane is unreachable from now on
/// (the server returned, stopped, keeps its address and certificates for the next config).
fn run_until_cached_then_lose_the_control_plane(
    lab: &Lab,
    storage: &Storage,
    keys: &str,
) -> FakeApiServer {
    let mut apiserver = FakeApiServer::start();
    lab.serve(&apiserver);
    let mut d = storage.daemon("k8s-before-reboot", &config_with_cache(&apiserver, keys));
    d.wait_ready();
    lab.wait_served_by(&["b1", "b2"], 40);
    wait_until("the pod route", STEP, || has_owned_route(POD_CIDR));
    wait_until("current and cached", STEP, || {
        healthz(&d)["kubernetes"]["state"] == "current" && storage.cache_file().exists()
    });
    assert!(d.stop().success());
    drop(d);
    apiserver.stop();
    apiserver
}

/// The stamp of the cache file, moved `back` into the past.
fn age_the_cache(storage: &Storage, back: Duration) {
    let path = storage.cache_file();
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    file["as_of"] = (now - back.as_secs()).into();
    std::fs::write(&path, file.to_string()).unwrap();
}

netns_test! {
    /// Offline autonomy (issue 25): the router reboots while its control plane is
    /// unreachable (daemon stopped, /run emptied, the kernel's rules and routes gone, the API
    /// server down) and comes up with the last cluster state in force from the cache on
    /// persistent storage; /healthz says the state is the cache's and as of when.
    fn a_reboot_while_the_api_server_is_unreachable_comes_up_with_the_persistent_cache_in_force() {
        let lab = Lab::new();
        let storage = Storage::new();
        let unreachable =
            run_until_cached_then_lose_the_control_plane(&lab, &storage, &persistent(&storage, None));
        storage.reboot();
        assert!(unserved(&lab), "the reboot left nothing programmed");
        assert!(!has_owned_route(POD_CIDR));
        // The same config, with a limit the cache is within; the API server is still down.
        let config = config_with_cache(&unreachable, &persistent(&storage, Some("24h")));
        let d = storage.daemon("k8s-after-reboot", &config);
        d.wait_ready();
        let log = d.log();
        assert!(log.contains("restored from") && log.contains("until the cluster answers"), "{log}");
        let h = lab.wait_served_by(&["b1", "b2"], 40);
        assert_eq!(h.values().sum::<u32>(), 40, "{h:?}");
        assert!(has_owned_route(POD_CIDR), "the cached pod route is back");
        assert_eq!(d.get("/readyz").0, 200, "the cache makes the daemon ready");
        let v = healthz(&d);
        let k = &v["kubernetes"];
        assert_eq!(k["state"], "cached", "{v}");
        assert!(k["asOf"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
        assert!(k["ageSeconds"].as_u64().is_some_and(|a| a < 120), "{v}");
        assert_eq!(k["kinds"]["services"]["state"], "backing off", "{v}");
    }
}

netns_test! {
    /// `cache_max_age`: after the same reboot, a cache stamped longer ago than the limit is
    /// not used (the cluster state comes from the first list; until then the TOML alone is
    /// in force), one within it is.
    fn a_cache_older_than_cache_max_age_is_not_used_after_a_reboot_one_within_it_is() {
        let lab = Lab::new();
        let storage = Storage::new();
        let unreachable =
            run_until_cached_then_lose_the_control_plane(&lab, &storage, &persistent(&storage, None));
        storage.reboot();
        age_the_cache(&storage, Duration::from_secs(2 * 3600 + 5));
        let config = config_with_cache(&unreachable, &persistent(&storage, Some("1h")));
        let mut d = storage.daemon("k8s-too-old", &config);
        d.wait_ready();
        let log = d.log();
        // 2 h 5 s, or a second more if the clock ticked since the stamp was moved.
        assert!(log.contains("is not used: it is 2h5s old, more than cache_max_age 1h")
            || log.contains("is not used: it is 2h6s old, more than cache_max_age 1h"), "{log}");
        assert!(unserved(&lab), "a state too old is not put in force");
        assert!(!has_owned_route(POD_CIDR));
        assert_eq!(d.get("/readyz").0, 503, "not ready before the cluster answers");
        let v = healthz(&d);
        assert_eq!(v["kubernetes"]["state"], "listing", "{v}");
        assert_eq!(v["kubernetes"]["asOf"], serde_json::Value::Null, "{v}");
        assert!(d.stop().success());
        drop(d);
        // Within the limit: used.
        storage.reboot();
        age_the_cache(&storage, Duration::from_secs(30 * 60));
        let d = storage.daemon("k8s-young-enough", &config);
        d.wait_ready();
        let log = d.log();
        assert!(log.contains("restored from") && log.contains("(30m"), "{log}");
        lab.wait_served_by(&["b1", "b2"], 20);
        assert!(has_owned_route(POD_CIDR));
        let v = healthz(&d);
        assert_eq!(v["kubernetes"]["state"], "cached", "{v}");
        let age = v["kubernetes"]["ageSeconds"].as_u64().unwrap();
        assert!((1800..1900).contains(&age), "{v}");
    }
}
