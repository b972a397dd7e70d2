//! The router's Lease (`[kubernetes] status_namespace`) in the fake API server: created and
//! renewed while every loop is live, its annotations following a reload, renewals stopping
//! when a loop wedges, a 409 conflict read again, and refused writes leaving the dataplane
//! alone. Each test runs the real daemon in a network namespace of its own; the renewal
//! period is 500 ms (the fault-injection key `inject_status_renew_ms`) where it is timed.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use serde_json::{Value, json};

use common::daemon::Daemon;
use common::fake_apiserver::FakeApiServer;
use common::kube::{self, node, ready, service, slice};
use common::scratch::ScratchDir;
use common::shell::sh_status;
use common::wait::{wait_for, wait_until};

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(15);
/// The status namespace of the tests.
const NS: &str = "edgenetd";
/// The cluster IP of the test service.
const VIP: &str = "10.96.0.10";

/// The fake with this node, the `web` service, and a cache directory.
fn cluster() -> (FakeApiServer, ScratchDir) {
    let fake = FakeApiServer::start();
    fake.apply("nodes", node(kube::NODE, "192.168.10.1", "10.244.1.0/24"));
    fake.apply("services", service("web", VIP, 80));
    fake.apply("endpointslices", slice("web", &[ready("10.0.1.2")]));
    (fake, ScratchDir::new("k8s-lease-cache"))
}

/// The config: policy and route controllers off, services from the fake, the Lease in
/// [`NS`], renewed every `renew_ms` (0: the real period), then `extra`.
fn config(fake: &FakeApiServer, cache: &ScratchDir, renew_ms: u64, extra: &str) -> String {
    let inject = if renew_ms > 0 {
        format!("inject_status_renew_ms = {renew_ms}\n")
    } else {
        String::new()
    };
    format!(
        "[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n\n{}status_namespace = {NS:?}\n{inject}\n{extra}",
        kube::section(fake, cache, &["services"])
    )
}

/// The Lease as the fake holds it.
fn lease(fake: &FakeApiServer) -> Option<Value> {
    fake.get("leases", NS, kube::NODE)
}

/// Waits for the Lease to exist and satisfy `ok`.
fn wait_lease(fake: &FakeApiServer, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, STEP, || lease(fake).filter(|l| ok(l)))
}

fn annotation<'a>(lease: &'a Value, name: &str) -> &'a str {
    lease["metadata"]["annotations"][format!("edgenetd.io/{name}")]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} annotation: {lease}"))
}

fn renew_time(lease: &Value) -> String {
    lease["spec"]["renewTime"].as_str().unwrap().to_string()
}

/// The documented content hash of one config file, computed apart (Python's hashlib).
fn digest_of(path: &std::path::Path) -> String {
    let script = "import hashlib,sys\np=sys.argv[1]\nb=open(p,'rb').read()\n\
                  h=hashlib.sha256(p.encode()+b'\\0'+str(len(b)).encode()+b'\\0'+b)\n\
                  print('sha256:'+h.hexdigest())";
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn service_table() -> String {
    sh_status("nft list table inet edgenetd-service").1
}

/// The Lease writes the fake answered, as (method, code).
fn writes(fake: &FakeApiServer) -> Vec<(String, u16)> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path.contains("/leases") && r.method != "GET")
        .map(|r| (r.method, r.code))
        .collect()
}

netns_test! {
    fn the_lease_is_created_renewed_while_live_and_follows_a_reload() {
        let (fake, cache) = cluster();
        let cfg = config(&fake, &cache, 500, "");
        let d = Daemon::start("k8s-lease-live", &cfg);
        d.wait_ready();
        let first = wait_lease(&fake, "the Lease, current and every loop ready", |l| {
            annotation(l, "cluster-state") == "current"
                && annotation(l, "controllers").contains("service=ready")
                && annotation(l, "controllers").contains("kubernetes=ready")
        });
        assert_eq!(first["spec"]["holderIdentity"], kube::NODE, "{first}");
        assert_eq!(first["spec"]["leaseDurationSeconds"], 2, "four periods of 500 ms: {first}");
        assert_eq!(first["metadata"]["labels"]["app.kubernetes.io/managed-by"], "edgenetd");
        assert_eq!(annotation(&first, "config-generation"), "1");
        assert_eq!(annotation(&first, "config-hash"), digest_of(&d.dir().config()));
        assert_eq!(annotation(&first, "last-sync-error"), "");
        assert_eq!(writes(&fake).first(), Some(&("POST".to_string(), 201)), "created once");
        // Renewed: renewTime moves on, each write at a new resourceVersion.
        let renewed = wait_lease(&fake, "a later renewal", |l| renew_time(l) > renew_time(&first));
        assert_ne!(renewed["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
        assert_eq!(renewed["spec"]["acquireTime"], first["spec"]["acquireTime"], "acquired once");
        let renewals = d.metric("edgenetd_kubernetes_status_writes_total", &[("result", "ok")]);
        assert!(renewals.is_some_and(|n| n >= 2.0), "{renewals:?}");

        // The official client reads the Lease as a typed V1Lease, and finds the fake's
        // conflicts where a real API server has them.
        let (cert, key) = fake.client_cert_files();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/common/scripts/k8s_python_lease.py");
        let out = std::process::Command::new("/usr/bin/python3")
            .arg(&script)
            .args([&fake.url(), fake.ca_file().to_str().unwrap()])
            .args([cert.to_str().unwrap(), key.to_str().unwrap(), NS, kube::NODE])
            .output()
            .expect("/usr/bin/python3 (scripts/install-deps.sh --test installs python3-kubernetes)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "python client failed: {stderr}");
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(seen["holder"], kube::NODE, "{seen}");
        assert_eq!(seen["duration"], 2, "{seen}");
        assert!(seen["renew"].as_str().unwrap().contains("+00:00"), "a UTC datetime: {seen}");
        assert_eq!(seen["annotations"]["edgenetd.io/config-generation"], "1", "{seen}");
        assert_eq!((&seen["create_again"], &seen["stale_update"]), (&json!(409), &json!(409)), "{seen}");
        assert_eq!((&seen["updated_duration"], &seen["versions_differ"]), (&json!(20), &json!(true)), "{seen}");

        // A reload of other content: the next generation, the new files' hash.
        d.reload(&format!("{cfg}\n# edited\n"));
        let after = wait_lease(&fake, "generation 2", |l| annotation(l, "config-generation") == "2");
        assert_eq!(annotation(&after, "config-hash"), digest_of(&d.dir().config()));
        assert_ne!(annotation(&after, "config-hash"), annotation(&first, "config-hash"));
        // The same content again (a SIGHUP alone) is no new generation.
        d.signal("HUP");
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(annotation(&lease(&fake).unwrap(), "config-generation"), "2");
    }
}

netns_test! {
    fn a_conflict_is_read_again_and_the_lease_written() {
        let (fake, cache) = cluster();
        let d = Daemon::start("k8s-lease-conflict", &config(&fake, &cache, 500, ""));
        d.wait_ready();
        let mine = wait_lease(&fake, "the Lease", |_| true);
        // Another writer changes the Lease: the daemon's next update is at a stale version.
        let mut theirs = mine.clone();
        theirs["metadata"]["annotations"]["someone.else/was-here"] = json!("yes");
        fake.apply("leases", theirs);
        let back = wait_lease(&fake, "the daemon's Lease again", |l| {
            l["metadata"]["annotations"].get("someone.else/was-here").is_none()
        });
        assert!(renew_time(&back) > renew_time(&mine), "{back}");
        let w = writes(&fake);
        let conflict = w.iter().position(|x| *x == ("PUT".to_string(), 409));
        let conflict = conflict.unwrap_or_else(|| panic!("no 409 among {w:?}"));
        assert_eq!(w.get(conflict + 1), Some(&("PUT".to_string(), 200)), "{w:?}");
        let reads_after: Vec<u16> = fake
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with(&format!("/leases/{}", kube::NODE)))
            .map(|r| r.code)
            .collect();
        assert!(reads_after.windows(3).any(|x| x == [409, 200, 200]), "PUT 409, GET, PUT: {reads_after:?}");
        assert_eq!(
            d.metric("edgenetd_kubernetes_status_writes_total", &[("result", "conflict")]),
            Some(1.0)
        );
    }
}

netns_test! {
    fn refused_writes_leave_the_dataplane_alone_and_are_counted() {
        let (fake, cache) = cluster();
        fake.refuse_writes(true);
        let d = Daemon::start("k8s-lease-403", &config(&fake, &cache, 500, ""));
        d.wait_ready();
        wait_until("the service in the kernel", STEP, || service_table().contains(VIP));
        wait_until("three refused writes", STEP, || {
            d.metric("edgenetd_kubernetes_status_writes_total", &[("result", "forbidden")])
                .is_some_and(|n| n >= 3.0)
        });
        assert!(lease(&fake).is_none());
        // The cluster still flows to the kernel, and the daemon is healthy.
        fake.apply("endpointslices", slice("web", &[ready("10.0.1.2"), ready("10.0.2.2")]));
        wait_until("the new endpoint in the kernel", STEP, || service_table().contains("10.0.2.2"));
        assert_eq!(d.get("/healthz").0, 200);
        assert_eq!(d.get("/readyz").0, 200);
        let log = d.log();
        let warned = log.lines().filter(|l| l.contains("WARN") && l.contains("cannot write the Lease")).count();
        assert_eq!(warned, 1, "warned once, then quietly: {log}");
        assert!(log.contains("grant get, create and update on leases"), "{log}");
        // Refused writes are retried a period apart, not in a loop.
        let refused = writes(&fake).len();
        assert!(refused <= 12, "{refused} writes in a few seconds");
        fake.refuse_writes(false);
        wait_lease(&fake, "the Lease once writes are allowed", |_| true);
        wait_until("logged as written again", STEP, || d.log().contains("is written again"));
        assert!(service_table().contains("10.0.2.2"), "{}", service_table());
    }
}

#[cfg(feature = "fault-injection")]
netns_test! {
    fn a_wedged_loop_stops_the_renewals_and_the_lease_says_which() {
        let (fake, cache) = cluster();
        // Window 1 s: the first sync succeeds (READY), the second hangs for an hour.
        let wedge = "[[test_controller]]\nname = \"wedged\"\nbehaviour = \"hang\"\nhang = \"1h\"\n\
                     succeed_first = 1\nperiod = \"300ms\"\nsync_budget = \"700ms\"\n";
        // No READY=1 to wait for: the hang comes with the cluster's first snapshot.
        let d = Daemon::start("k8s-lease-wedged", &config(&fake, &cache, 500, wedge));
        let stalled = wait_lease(&fake, "the Lease naming the stalled loop", |l| {
            annotation(l, "controllers").contains("wedged=stalled")
        });
        assert!(annotation(&stalled, "controllers").contains("service=ready"), "{stalled}");
        let renewed_at = d.metric("edgenetd_kubernetes_status_renew_timestamp_seconds", &[]);
        // Eight periods: no renewal, and the Lease runs out (renewTime + 2 s is past).
        std::thread::sleep(Duration::from_secs(4));
        let now = lease(&fake).unwrap();
        assert_eq!(renew_time(&now), renew_time(&stalled), "not renewed while a loop is wedged");
        assert_eq!(
            d.metric("edgenetd_kubernetes_status_renew_timestamp_seconds", &[]),
            renewed_at
        );
        assert_eq!(annotation(&now, "controllers"), annotation(&stalled, "controllers"));
    }
}
