//! Backend-check behaviour with real packets: a client, the router (the test's namespace) and
//! three backend hosts joined by veth pairs, the service controller driven sync by sync.
//! `initial = "down"` sends nothing before `rise` good checks (the default sends at once), and
//! a fallback gets new connections only while no backend is up; a `udp` check drives a UDP
//! service.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::service_lab::{Family, client_and_three_backends};
use common::topology::{ServerId, Topology};
use common::wait::wait_until;
use edgenetd::controller::service::ServiceController;

struct Lab {
    net: Topology,
    servers: Vec<ServerId>,
    ctrl: Driver<ServiceController>,
}

impl Lab {
    fn new() -> Lab {
        let (net, servers) = client_and_three_backends(Family::V4);
        Lab {
            net,
            servers,
            ctrl: Driver::service(),
        }
    }

    fn hits(&self, n: u32) -> std::collections::BTreeMap<String, u32> {
        self.net
            .hits(self.net.host("cl"), "tcp", "10.96.0.10", 80, n)
    }

    /// Probe connections a backend's server accepted from the router.
    fn probes(&self, i: usize) -> usize {
        let router = format!("10.0.{}.1", i + 1);
        self.net
            .connections(self.servers[i])
            .iter()
            .filter(|a| a.ends_with(&router))
            .count()
    }
}

const STEP: Duration = Duration::from_secs(10);

fn web(health: &str) -> String {
    format!(
        r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080"]
[service.health]
check = "tcp"
{health}
"#
    )
}

netns_test! {
    fn initial_down_sends_nothing_before_rise_good_checks_and_the_default_sends_at_once() {
        let mut t = Lab::new();
        let toml = web(
            "interval = \"300ms\"\ntimeout = \"200ms\"\nrise = 3\nfall = 2\ninitial = \"down\"",
        );
        t.ctrl.sync(&toml).unwrap();
        assert_eq!(t.ctrl.controller.down_backends(), vec!["10.0.1.2:8080".parse().unwrap()]);
        let h = t.hits(5);
        assert_eq!(h.get("b1"), None, "nothing reaches b1 before its checks: {h:?}");
        assert_eq!(h.get("refused"), Some(&5), "when_empty applies: {h:?}");
        wait_until("b1 to be up", STEP, || t.ctrl.controller.down_backends().is_empty());
        assert!(t.probes(0) >= 3, "up only after rise = 3 good checks: {}", t.probes(0));
        t.ctrl.sync(&toml).unwrap();
        assert_eq!(t.hits(5).get("b1"), Some(&5));
        // The default: a fresh controller on an empty kernel sends at once, before any check
        // finished.
        drop(std::mem::replace(&mut t.ctrl, Driver::service()));
        common::shell::sh("nft delete table inet edgenetd-service");
        let mut fresh = Driver::<ServiceController>::service();
        fresh.sync(&web("rise = 3\ninterval = \"5s\"\ntimeout = \"1s\"")).unwrap();
        assert!(fresh.controller.down_backends().is_empty());
        assert_eq!(t.hits(5).get("b1"), Some(&5), "traffic at once with the default");
    }
}

netns_test! {
    fn all_backends_down_the_fallback_gets_new_connections_one_back_up_it_gets_none() {
        let mut t = Lab::new();
        let toml = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
fallback = "10.0.3.2:8080"
[service.health]
check = "tcp"
interval = "300ms"
timeout = "200ms"
rise = 1
fall = 1
"#;
        t.ctrl.sync(toml).unwrap();
        let h = t.hits(40);
        assert_eq!(h.get("b3"), None, "the fallback gets nothing while backends are up: {h:?}");
        assert_eq!(h.get("b1").unwrap_or(&0) + h.get("b2").unwrap_or(&0), 40, "{h:?}");
        t.net.stop(t.servers[0]);
        t.net.stop(t.servers[1]);
        wait_until("both backends down", STEP, || t.ctrl.controller.down_backends().len() == 2);
        t.ctrl.sync(toml).unwrap();
        let h = t.hits(20);
        assert_eq!(h.get("b3"), Some(&20), "the fallback gets the new connections: {h:?}");
        t.servers[1] = t.net.serve_named(t.net.host("b2"), "b2", 8080);
        wait_until("b2 back up", STEP, || t.ctrl.controller.down_backends().len() == 1);
        t.ctrl.sync(toml).unwrap();
        let h = t.hits(20);
        assert_eq!(h.get("b2"), Some(&20), "one backend up: the fallback gets none: {h:?}");
    }
}

netns_test! {
    fn a_udp_service_with_a_udp_check_takes_a_stopped_backend_out_and_back_in() {
        let mut t = Lab::new();
        let toml = r#"
[[service]]
name = "dns"
address = "10.96.0.53"
port = 53
protocol = "udp"
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]
[service.health]
check = "udp"
send = "hello"
expect_bytes = "b"
interval = "300ms"
timeout = "200ms"
rise = 1
fall = 2
"#;
        t.ctrl.sync(toml).unwrap();
        let udp = |t: &Lab| t.net.hits(t.net.host("cl"), "udp", "10.96.0.53", 53, 30);
        let h = udp(&t);
        assert_eq!(h.get("b1").unwrap_or(&0) + h.get("b2").unwrap_or(&0), 30, "{h:?}");
        t.net.stop(t.servers[0]);
        wait_until("b1 down by its UDP check", STEP, || {
            t.ctrl.controller.down_backends() == vec!["10.0.1.2:8080".parse().unwrap()]
        });
        t.ctrl.sync(toml).unwrap();
        assert_eq!(udp(&t).get("b2"), Some(&30), "only b2 answers");
        t.servers[0] = t.net.serve_named(t.net.host("b1"), "b1", 8080);
        wait_until("b1 up again", STEP, || t.ctrl.controller.down_backends().is_empty());
        t.ctrl.sync(toml).unwrap();
        assert!(udp(&t).get("b1").copied().unwrap_or(0) > 3, "b1 is back");
    }
}
