//! Router config from the cluster (issue 25, items 4 and 5): `[kubernetes] config_map`'s
//! fragments merged after the local files, refused with their place when they do not load,
//! and confirmed by the router itself only once it has reached the API server again with
//! them in force; one that cuts it off is rolled back within `config_confirm`.
//!
//! The API server is the TLS fake in a namespace of its own (`api`, 10.0.9.2, behind the
//! router's `a0`): the router's firewall and routes stand between them, as they would
//! between a real router and its control plane (its own loopback they never do).
//!
//! With `status_namespace`, a renewal of the node's Lease opened after the change is the
//! confirm's second proof, and the Lease shows the ConfigMap's version.

use crate::common;
use crate::netns_test;

use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::NODE;
use common::routes::has_owned_route;
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::{Link, Topology};
use common::wait::{wait_for, wait_until};
use serde_json::{Value, json};

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(20);
/// The API server's address, in its own namespace.
const API: &str = "10.0.9.2";
/// The ConfigMap.
const CM: &str = "kube-system/edgenetd-fleet";
/// `config_confirm` in these tests.
const CONFIRM: Duration = Duration::from_secs(5);

/// The router (the test's namespace), the API server's namespace, the fake, a cache dir.
struct Lab {
    _net: Topology,
    fake: FakeApiServer,
    cache: ScratchDir,
}

impl Lab {
    fn new() -> Lab {
        let mut net = Topology::new();
        net.add_host(
            "api",
            Link {
                router_if: "a0",
                router_addrs: &["10.0.9.1/24"],
                host_if: "eth0",
                host_addrs: &["10.0.9.2/24"],
                host_routes: &[],
            },
        );
        common::links::wait_until_up(&["a0"]);
        let fake = FakeApiServer::start_in_netns(net.host("api").netns().unwrap(), API);
        Lab {
            _net: net,
            fake,
            cache: ScratchDir::new("k8s-config-cache"),
        }
    }

    /// The API server's TCP port.
    fn api_port(&self) -> u16 {
        self.fake.url().rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Writes the ConfigMap with `data`.
    fn config_map(&self, data: Value) -> u64 {
        let (ns, name) = CM.split_once('/').unwrap();
        self.fake.apply(
            "configmaps",
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": name},
                "data": data,
            }),
        )
    }

    /// The daemon's config: `local` (TOML of the router's own), then `[kubernetes]` with the
    /// routes feed, the ConfigMap and `config_confirm` ([`CONFIRM`]).
    fn config(&self, local: &str) -> String {
        self.config_confirmed_within(local, CONFIRM)
    }

    /// [`Lab::config`] with `config_confirm = confirm`.
    fn config_confirmed_within(&self, local: &str, confirm: Duration) -> String {
        let (cert, key) = self.fake.client_cert_files();
        format!(
            "{local}\n[kubernetes]\nserver = {:?}\nca_file = {:?}\nclient_cert = {:?}\n\
             client_key = {:?}\nnode_name = {NODE:?}\nfeeds = [\"routes\"]\ncache_file = {:?}\n\
             config_map = {CM:?}\nconfig_confirm = \"{}s\"\n",
            self.fake.url(),
            self.fake.ca_file().display().to_string(),
            cert.display().to_string(),
            key.display().to_string(),
            self.cache.join("cluster.json").display().to_string(),
            confirm.as_secs(),
        )
    }
}

fn healthz(d: &Daemon) -> Value {
    let (_, body) = d.get("/healthz");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `kubernetes.configMap` of /healthz.
fn config_map(d: &Daemon) -> Value {
    healthz(d)["kubernetes"]["configMap"].clone()
}

/// Waits until `kubernetes.configMap` satisfies `ok`; returns it.
fn wait_config_map(d: &Daemon, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    wait_until(what, STEP, || {
        last = config_map(d);
        ok(&last)
    });
    last
}

/// A route fragment: `to` via the API server's address.
fn route(to: &str) -> String {
    format!("[[route]]\nto = {to:?}\nvia = {API:?}\n")
}

/// A firewall fragment: the router's new connections to the API server's `port` dropped.
fn rule(name: &str, port: u16) -> String {
    format!(
        "[[policy.rule]]\nname = {name:?}\nfrom = \"self\"\nto_addresses = [{API:?}]\n\
         protocol = \"tcp\"\nports = [{port}]\naction = \"drop\"\n"
    )
}

/// The policy rules in the kernel, as `nft` lists them.
fn ruleset() -> String {
    sh("nft list ruleset")
}

netns_test! {
    /// A fragment for every router and this node's own are applied (their routes appear),
    /// another node's is not; the version is confirmed once the router reached the API server
    /// again. A bad version is refused with its place in /healthz, the log and the metric,
    /// and the last good config stays. A key set locally and in a fragment keeps the local
    /// value, noted and counted.
    fn a_config_map_fragment_is_applied_a_bad_one_is_refused_and_the_local_file_wins_a_clash() {
        let lab = Lab::new();
        lab.config_map(json!({
            "00_fleet.toml": route("10.77.0.0/16"),
            format!("{NODE}.toml"): route("10.78.0.0/16"),
            "edge-2.toml": route("10.79.0.0/16"),
            "README": "not TOML",
        }));
        let local = "[policy]\ninput = \"accept\"\nforward = \"accept\"\noutput = \"accept\"\n";
        let d = Daemon::start("k8s-config-map", &lab.config(local));
        d.wait_ready();
        wait_until("the fleet's and this node's routes", STEP, || {
            has_owned_route("10.77.0.0/16") && has_owned_route("10.78.0.0/16")
        });
        assert!(!has_owned_route("10.79.0.0/16"), "another node's key is not taken");
        let cm = wait_config_map(&d, "the version confirmed", |c| c["state"] == "confirmed");
        assert_eq!(cm["name"], CM, "{cm}");
        assert_eq!(cm["keys"], json!(["00_fleet.toml", format!("{NODE}.toml")]), "{cm}");
        assert_eq!(
            cm["skippedKeys"],
            json!(["README: not a .toml key", "edge-2.toml: for node edge-2"]),
            "{cm}"
        );
        assert_eq!(cm["inForce"], cm["confirmed"], "{cm}");
        assert!(d.log().contains("confirmed: the router reached the API server"), "{}", d.log());

        // A bad version: refused with its place, the good one stays in force.
        let bad = lab.config_map(json!({
            "00_fleet.toml": format!("{}\n[[route]]\nto = \"10.80.0.0/33\"\nvia = {API:?}\n", route("10.81.0.0/16")),
        }));
        let cm = wait_config_map(&d, "the bad version refused", |c| c["state"] == "rejected");
        assert_eq!(cm["rejected"]["resourceVersion"], bad.to_string(), "{cm}");
        assert_eq!(cm["rejected"]["what"], "refused", "{cm}");
        let problems = cm["rejected"]["problems"].to_string();
        assert!(
            problems.contains("configmap:kube-system/edgenetd-fleet:00_fleet.toml:6:6: error:"),
            "{cm}"
        );
        assert!(d.log().contains("configmap:kube-system/edgenetd-fleet:00_fleet.toml:6:6: error:"), "{}", d.log());
        assert!(d.metric("edgenetd_kubernetes_config_map_problems", &[]).unwrap() >= 1.0);
        assert!(has_owned_route("10.77.0.0/16") && has_owned_route("10.78.0.0/16"), "last good kept");
        assert!(!has_owned_route("10.81.0.0/16"), "nothing of it half-applied");

        // A clash with a local key: the local value stays; noted and counted.
        lab.config_map(json!({
            "00_fleet.toml": format!("{}\n[policy]\ninput = \"drop\"\n", route("10.82.0.0/16")),
        }));
        wait_until("the new fleet route", STEP, || has_owned_route("10.82.0.0/16"));
        let cm = wait_config_map(&d, "confirmed", |c| c["state"] == "confirmed");
        assert!(
            cm["clashes"].to_string().contains("`policy.input` is set in"),
            "{cm}"
        );
        assert!(ruleset().contains("hook input priority filter; policy accept;"), "{}", ruleset());
        assert_eq!(
            d.metric("edgenetd_kubernetes_conflicts_total", &[("kind", "config")]),
            Some(1.0)
        );
        assert_eq!(d.metric("edgenetd_kubernetes_config_map_problems", &[]), Some(0.0));
        assert!(!has_owned_route("10.77.0.0/16"), "the earlier fleet route went with its version");
    }
}

netns_test! {
    /// A fragment that keeps the router's path to the API server is confirmed and stays; one
    /// whose firewall rule drops the router's connections to the API server is rolled back
    /// within `config_confirm`, the reason in /healthz, and the router is back on its own.
    fn a_fragment_that_cuts_the_router_off_the_api_server_is_rolled_back_one_that_keeps_it_is_confirmed() {
        let lab = Lab::new();
        // Keeps the path: drops another port.
        lab.config_map(json!({ "10_fw.toml": rule("fleet-keeps", 9) }));
        let local = "[policy]\ninput = \"accept\"\nforward = \"accept\"\noutput = \"accept\"\n";
        let d = Daemon::start("k8s-config-cut", &lab.config(local));
        d.wait_ready();
        wait_config_map(&d, "the harmless rule confirmed", |c| c["state"] == "confirmed");
        assert!(ruleset().contains("fleet-keeps"), "{}", ruleset());

        // Cuts the path: the router's new connections to the API server are dropped.
        let cut = lab.config_map(json!({ "10_fw.toml": rule("fleet-cuts", lab.api_port()) }));
        wait_until("the cutting rule in force", STEP, || ruleset().contains("fleet-cuts"));
        let applied = Instant::now();
        let cm = wait_config_map(&d, "the cutting version rolled back", |c| {
            c["rejected"]["what"] == "rolled back"
        });
        let took = applied.elapsed();
        assert!(took < CONFIRM + Duration::from_secs(5), "rolled back after {took:?}");
        assert_eq!(cm["rejected"]["resourceVersion"], cut.to_string(), "{cm}");
        assert!(
            cm["rejected"]["reason"].as_str().unwrap().contains("did not reach the API server again"),
            "{cm}"
        );
        assert_eq!(cm["state"], "rejected", "{cm}");
        let rules = ruleset();
        assert!(!rules.contains("fleet-cuts") && rules.contains("fleet-keeps"), "{rules}");
        let config = &healthz(&d)["config"];
        assert!(config["lastRollback"]["reason"].as_str().unwrap().contains("configmap:"), "{config}");
        assert_eq!(d.metric("edgenetd_kubernetes_config_map_rollbacks_total", &[]), Some(1.0));
        // The router is back: it watches the API server again, and a good version comes in.
        lab.config_map(json!({ "10_fw.toml": rule("fleet-after", 9) }));
        wait_config_map(&d, "the next version confirmed", |c| {
            c["state"] == "confirmed" && c["rejected"]["what"] == "rolled back"
        });
        assert!(ruleset().contains("fleet-after"), "{}", ruleset());
        assert!(d.log().contains("did not reach the API server again"), "{}", d.log());
    }
}

/// The status namespace of the Lease test.
const STATUS_NS: &str = "edgenetd";

/// The Lease's `edgenetd.io/config-map`, once the Lease exists.
fn lease_config_map(lab: &Lab) -> Option<String> {
    let lease = lab.fake.get("leases", STATUS_NS, NODE)?;
    let value = &lease["metadata"]["annotations"]["edgenetd.io/config-map"];
    Some(
        value
            .as_str()
            .unwrap_or_else(|| panic!("no config-map annotation: {lease}"))
            .to_string(),
    )
}

netns_test! {
    /// With `status_namespace`, a version waits for a renewal of the node's Lease opened after
    /// it, not only for the watch: while the API server refuses the Lease's writes (403), a
    /// version is rolled back although its watch is answered. Once writes are allowed, the
    /// Lease says which version was rolled back and why, and the next version is confirmed
    /// after a renewal opened after it, well within `config_confirm` although the renewal
    /// period is 10 s (the confirm asks the writer for one); the Lease then says so.
    fn with_a_lease_the_confirm_waits_for_a_renewal_and_the_lease_shows_the_version() {
        let lab = Lab::new();
        let confirm = Duration::from_secs(8);
        lab.fake.refuse_writes(true);
        let first = lab.config_map(json!({ "00_fleet.toml": route("10.77.0.0/16") }));
        let local = "[policy]\ninput = \"accept\"\nforward = \"accept\"\noutput = \"accept\"\n";
        let config = format!(
            "{}status_namespace = {STATUS_NS:?}\n",
            lab.config_confirmed_within(local, confirm)
        );
        let d = Daemon::start("k8s-config-lease", &config);
        d.wait_ready();
        wait_until("the fleet route applied", STEP, || has_owned_route("10.77.0.0/16"));
        let cm = wait_config_map(&d, "the version rolled back: no renewal", |c| {
            c["rejected"]["what"] == "rolled back"
        });
        assert_eq!(cm["rejected"]["resourceVersion"], first.to_string(), "{cm}");
        assert!(!has_owned_route("10.77.0.0/16"), "the route went with its version");
        // The watch alone was there: the ConfigMap watch was opened again and answered. (A
        // watch, not the first streamed list, which goes on as the watch: not "opened after
        // the route was seen", which a CI run's daemon opened before the test saw the route.)
        let watched = lab.fake.requests().into_iter().filter(|r| {
            r.path.ends_with("/configmaps") && r.is_watch() && r.code == 200
        });
        assert!(watched.count() >= 1, "the watch was opened again and answered");
        assert!(lease_config_map(&lab).is_none(), "no Lease while writes are refused");

        lab.fake.refuse_writes(false);
        let said = wait_for("the Lease saying why", STEP, || {
            lease_config_map(&lab).filter(|v| v.starts_with("rejected"))
        });
        assert_eq!(
            said,
            format!(
                "rejected {first}, in force none: rolled back: configmap:{CM} at resourceVersion \
                 {first} did not reach the API server again before its deadline (config_confirm)"
            )
        );
        let changed = Instant::now();
        let second = lab.config_map(json!({ "00_fleet.toml": route("10.78.0.0/16") }));
        let rv = second.to_string();
        wait_config_map(&d, "the next version confirmed", |c| {
            c["state"] == "confirmed" && c["inForce"] == rv.as_str()
        });
        assert!(changed.elapsed() < confirm, "{:?}", changed.elapsed());
        let renewals = lab.fake.requests().into_iter().filter(|r| {
            r.path.ends_with(&format!("/leases/{NODE}"))
                && r.method == "PUT"
                && r.code == 200
                && r.at > changed
        });
        assert!(renewals.count() >= 1, "a renewal opened after the change");
        assert!(has_owned_route("10.78.0.0/16"));
        wait_for("the Lease saying it is confirmed", STEP, || {
            lease_config_map(&lab).filter(|v| *v == format!("confirmed {second}"))
        });
    }
}

/// `edgenetd explain` evaluates the local files with the version `d` kept (`rv`: a blackhole
/// route to 10.77.0.0/16), and the local files alone with no version kept.
fn explain_takes_the_kept_version(d: &Daemon, rv: &str) {
    let config = d.dir().config();
    let explain = |state_dir: &std::path::Path, json: bool| {
        let mut args = vec![
            "explain".to_string(),
            "--config".into(),
            config.display().to_string(),
            "--state-dir".into(),
            state_dir.display().to_string(),
            "--in".into(),
            "a0".into(),
            "--from".into(),
            API.into(),
            "--to".into(),
            "10.77.1.1".into(),
            "--proto".into(),
            "tcp".into(),
            "--dport".into(),
            "80".into(),
            "--addresses".into(),
            "a0=10.0.9.1/24".into(),
        ];
        if json {
            args.push("--json".into());
        }
        let out = common::bin::edgenetd(&args);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        out.stdout
    };
    let kept = explain(&d.dir().join("state"), false);
    assert!(
        kept.contains(&format!("config map   {CM} version {rv} confirmed ")),
        "{kept}"
    );
    let route = kept.lines().find(|l| l.starts_with("route")).unwrap_or("");
    assert!(route.contains("blackhole 10.77.0.0/16"), "{kept}");
    let j: Value = serde_json::from_str(&explain(&d.dir().join("state"), true)).unwrap();
    assert_eq!(j["configMap"]["resourceVersion"], rv, "{j}");
    assert_eq!(j["configMap"]["found"], true, "{j}");

    let empty = ScratchDir::new("k8s-config-no-kept");
    let alone = explain(empty.path(), false);
    assert!(
        alone.contains("no confirmed version kept") && alone.contains("the local files alone"),
        "{alone}"
    );
    assert!(!alone.contains("blackhole"), "{alone}");
}

/// A blackhole route fragment: installed whether or not the API server is reachable.
fn blackhole(to: &str) -> String {
    format!("[[route]]\nto = {to:?}\ntype = \"blackhole\"\n")
}

netns_test! {
    /// The confirmed version survives a restart without the API server: a router killed and
    /// started again (its routes flushed, as by a reboot) while the link to its API server is
    /// down comes up with the confirmed fragments from its state directory in force, not its
    /// local files alone; when the API server answers again with the same version, nothing
    /// is reloaded or confirmed again. A version rolled back is never the one kept.
    fn the_confirmed_version_is_in_force_after_a_restart_while_the_api_server_is_unreachable() {
        let lab = Lab::new();
        let first = lab.config_map(json!({ "00_fleet.toml": blackhole("10.77.0.0/16") }));
        let local = "[policy]\ninput = \"accept\"\nforward = \"accept\"\noutput = \"accept\"\n";
        let d = Daemon::start("k8s-config-kept", &lab.config(local));
        d.wait_ready();
        let rv = first.to_string();
        wait_config_map(&d, "the version confirmed", |c| {
            c["state"] == "confirmed" && c["confirmed"] == rv.as_str()
        });
        let kept = d.dir().join("state").join("cluster-config.json");
        wait_until("the confirmed version kept", STEP, || kept.exists());
        // A version that cuts the router off is rolled back: the kept one stays the first.
        let cut = rule("fleet-cuts", lab.api_port());
        let fleet = blackhole("10.77.0.0/16");
        let cutting = lab.config_map(json!({ "00_fleet.toml": fleet, "01_cut.toml": cut }));
        let cutting = cutting.to_string();
        wait_config_map(&d, "the cutting version rolled back", |c| {
            c["rejected"]["resourceVersion"] == cutting.as_str()
        });
        let on_disk = std::fs::read_to_string(&kept).unwrap();
        assert!(on_disk.contains(&format!("\"resource_version\":\"{rv}\"")), "{on_disk}");
        assert!(!on_disk.contains("fleet-cuts"), "{on_disk}");
        explain_takes_the_kept_version(&d, &rv);
        lab.config_map(json!({ "00_fleet.toml": blackhole("10.77.0.0/16") }));

        // The API server is out of reach; the router restarts with nothing programmed.
        sh("ip link set a0 down");
        sh("ip route flush proto 190 table all");
        sh("nft flush ruleset");
        let d = d.start_again("k8s-config-kept-again", Default::default());
        d.wait_ready();
        wait_until("the kept fragment's route", STEP, || has_owned_route("10.77.0.0/16"));
        let log = d.log();
        assert!(log.contains("restored from") && log.contains("cluster-config.json"), "{log}");
        let cm = config_map(&d);
        assert_eq!(cm["state"], "listing", "{cm}");
        assert_eq!(cm["inForce"], rv.as_str(), "{cm}");
        assert_eq!(cm["confirmed"], rv.as_str(), "{cm}");
        assert_eq!(cm["keys"], json!(["00_fleet.toml"]), "{cm}");

        // The API server answers again with a version of the same fragments (written after
        // the rollback): taken and confirmed as any new version, the route kept throughout.
        sh("ip link set a0 up");
        wait_config_map(&d, "the ConfigMap listed and confirmed", |c| {
            c["state"] == "confirmed" && c["pending"].is_null() && c["offered"] == c["inForce"]
        });
        assert!(has_owned_route("10.77.0.0/16"));
    }
}
