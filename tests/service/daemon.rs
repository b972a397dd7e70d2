//! The service controller inside the real daemon, in a fresh network namespace: the table
//! appears with the config's services, the gauges follow, a reload changes only what
//! changed, a table deleted by hand is restored within seconds (foreign-commit watch), and
//! /healthz reports the controller.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::shell::{sh, sh_status};
use common::wait::wait_until;

/// How long the daemon gets for each step.
const STEP: Duration = Duration::from_secs(10);

const CONFIG: &str = r#"
[controller.policy]
enabled = false
[controller.route]
enabled = false

[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:53"]
"#;

fn table() -> String {
    sh_status("nft list table inet edgenetd-service").1
}

netns_test! {
    fn the_daemon_programs_services_reloads_and_repairs() {
        let d = Daemon::start("service", CONFIG);
        wait_until("the service table", STEP, || table().contains("10.96.0.53 . udp . 53"));
        wait_until("the gauges", STEP, || d.metric("edgenetd_services", &[]) == Some(2.0));
        assert_eq!(d.metric("edgenetd_service_backends", &[]), Some(3.0));
        assert_eq!(d.metric("edgenetd_service_drift_repairs_total", &[]), Some(0.0));
        let (status, body) = d.get("/healthz");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"service\""), "{body}");
        // A reload that swaps one backend.
        d.reload(&CONFIG.replace("10.0.2.2:8080", "10.0.3.2:8080"));
        wait_until("the new backend", STEP, || table().contains("10.0.3.2 . 8080"));
        assert!(!table().contains("10.0.2.2 . 8080"));
        // Deleted by hand: back within seconds, counted.
        sh("nft delete table inet edgenetd-service");
        wait_until("the restored table", STEP, || table().contains("10.0.3.2 . 8080"));
        wait_until("the drift counter", STEP, || {
            d.metric("edgenetd_service_drift_repairs_total", &[]).is_some_and(|v| v >= 1.0)
        });
        // No services left: no table.
        d.reload("[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n");
        wait_until("the table to go", STEP, || !sh("nft list tables").contains("edgenetd-service"));
        wait_until("the gauges", STEP, || d.metric("edgenetd_services", &[]) == Some(0.0));
    }
}
