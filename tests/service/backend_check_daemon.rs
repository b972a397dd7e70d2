//! Backend checks inside the real daemon (fresh network namespace, backends on loopback):
//! per-backend metrics, /healthz's up and down backends, one log line per transition with its
//! reason, a reload of another service that leaves the states (and metrics) as they were,
//! and (fault-injection builds) a wedged probe detected and named by /healthz.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::shell::sh_status;
use common::topology::Topology;
use common::wait::wait_until;

const STEP: Duration = Duration::from_secs(15);

fn config(other_backend: &str) -> String {
    format!(
        r#"
[controller.policy]
enabled = false
[controller.route]
enabled = false

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["127.0.0.1:8080", "127.0.0.1:8081"]
[service.health]
check = "tcp"
interval = "300ms"
timeout = "200ms"
rise = 1
fall = 2

[[service]]
name = "other"
address = "10.96.0.11"
port = 80
backends = ["{other_backend}"]
"#
    )
}

fn labels(backend: &str) -> [(&'static str, &str); 2] {
    [("service", "web"), ("backend", backend)]
}

fn healthz(d: &Daemon) -> (u16, serde_json::Value) {
    let (status, body) = d.get("/healthz");
    (status, serde_json::from_str(&body).expect("JSON"))
}

netns_test! {
    fn backend_metrics_healthz_and_transition_logs_and_a_reload_of_another_service_does_not_flap() {
        let net = Topology::new();
        let _server = net.serve(net.router(), "tcp", 8080);
        let d = Daemon::start("health", &config("10.0.9.1:80"));
        let (up, down) = ("127.0.0.1:8080", "127.0.0.1:8081");
        wait_until("8081 down in the metrics", STEP, || {
            d.metric("edgenetd_backend_up", &labels(down)) == Some(0.0)
        });
        assert_eq!(d.metric("edgenetd_backend_up", &labels(up)), Some(1.0));
        assert_eq!(d.metric("edgenetd_backend_transitions_total", &labels(down)), Some(1.0));
        assert_eq!(d.metric("edgenetd_backend_transitions_total", &labels(up)), Some(0.0));
        assert_eq!(d.metric("edgenetd_backend_check_failures_total", &labels(up)), Some(0.0));
        assert!(d.metric("edgenetd_backend_check_failures_total", &labels(down)).unwrap() >= 2.0);
        // The table follows: only 8080 has slots.
        wait_until("8081 out of the table", STEP, || {
            !sh_status("nft list map inet edgenetd-service backends4").1.contains("127.0.0.1 . 8081")
        });
        let (status, h) = healthz(&d);
        assert_eq!(status, 200, "{h}");
        assert_eq!(h["services"]["backends"]["web"]["up"], serde_json::json!([up]), "{h}");
        assert_eq!(h["services"]["backends"]["web"]["down"], serde_json::json!([down]), "{h}");
        assert_eq!(h["controllers"]["service-health"]["live"], true, "{h}");
        assert_eq!(h["controllers"]["service"]["live"], true, "existing keys stay: {h}");
        let log = std::fs::read_to_string(d.dir().join("stderr.log")).unwrap();
        let line = "service web: backend 127.0.0.1:8081 is down (tcp check): refused (2 failed checks)";
        assert_eq!(log.matches(line).count(), 1, "one line per transition:\n{log}");
        // A reload changing another service keeps web's probes and states.
        let failures = d.metric("edgenetd_backend_check_failures_total", &labels(down)).unwrap();
        d.reload(&config("10.0.9.2:80"));
        wait_until("the other service's new backend", STEP, || {
            sh_status("nft list map inet edgenetd-service backends4").1.contains("10.0.9.2 . 80")
        });
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(d.metric("edgenetd_backend_up", &labels(down)), Some(0.0));
        assert_eq!(d.metric("edgenetd_backend_up", &labels(up)), Some(1.0));
        assert_eq!(d.metric("edgenetd_backend_transitions_total", &labels(down)), Some(1.0), "no flap");
        assert_eq!(d.metric("edgenetd_backend_transitions_total", &labels(up)), Some(0.0), "no flap");
        assert!(
            d.metric("edgenetd_backend_check_failures_total", &labels(down)).unwrap() > failures,
            "the same probe keeps counting"
        );
        let log = std::fs::read_to_string(d.dir().join("stderr.log")).unwrap();
        assert_eq!(log.matches("is down (tcp check)").count(), 1, "{log}");
        assert!(!log.contains("is up (tcp check)"), "{log}");
    }
}

#[cfg(feature = "fault-injection")]
netns_test! {
    fn a_wedged_probe_stops_the_probe_heartbeat_and_healthz_names_it() {
        let net = Topology::new();
        let _server = net.serve(net.router(), "tcp", 8080);
        let config = r#"
[controller.policy]
enabled = false
[controller.route]
enabled = false

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["127.0.0.1:8080"]
[service.health]
check = "http"
path = "/fault-hang"
interval = "1s"
timeout = "500ms"
"#;
        let d = Daemon::start("wedge", config);
        let (status, h) = healthz(&d);
        assert_eq!(status, 200, "live before the probe is late: {h}");
        // Late after its deadline (offset < 1 s + timeout + 5 s grace), stale 10 s later.
        wait_until("service-health not live", Duration::from_secs(30), || {
            healthz(&d).1["controllers"]["service-health"]["live"] == false
        });
        let (status, h) = healthz(&d);
        assert_eq!(status, 503, "{h}");
        assert_eq!(h["services"]["lateProbes"], serde_json::json!(["127.0.0.1:8080 (http)"]), "{h}");
        assert_eq!(h["controllers"]["service"]["live"], true, "the sync loop itself is fine: {h}");
        let (_, livez) = d.get("/livez");
        assert!(livez.contains("service-health"), "{livez}");
    }
}
