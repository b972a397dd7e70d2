//! The route controller inside the real daemon, each test in a fresh network namespace:
//! drift repair through kernel events, a route on a late device, a failing route among good
//! ones, and removal on reload.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::bin::edgenetd;
use common::daemon::Daemon;
use common::routes::{has_owned_route, owned_routes, routes_except, rules_except};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::Topology;
use common::wait::wait_until;
use serde_json::Value;

const FAILURES: &str = "edgenetd_controller_sync_failures_total";
const ROUTE: &[(&str, &str)] = &[("controller", "route")];

/// Every route and rule but the kernel's own.
fn non_kernel_state() -> Vec<Value> {
    [routes_except(&["kernel"]), rules_except(&["kernel"])].concat()
}

/// The addresses of r0, the router's end of the r0 <-> r1 veth pair every test uses.
const R0: &[&str] = &["192.0.2.1/24"];

const HEAD: &str = "[controller.route]\nperiod = \"1h\"\nsync_budget = \"30s\"\n\n";

netns_test! {
    fn an_owned_route_deleted_by_hand_is_back_within_two_seconds_and_counted() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let config = format!(
            "{HEAD}[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.2\"\n\n[[route]]\nto = \"10.2.0.0/16\"\ndev = \"r0\"\nmetric = 20\n\n[[route]]\nto = \"2001:db8:1::/48\"\ntype = \"blackhole\"\n"
        );
        let d = Daemon::start("route", &config);
        wait_until("the first sync", Duration::from_secs(5), || owned_routes().len() == 3);
        wait_until("the gauges", Duration::from_secs(2), || {
            d.metric("edgenetd_routes_installed", &[]) == Some(3.0)
        });
        assert_eq!(d.metric("edgenetd_routes_desired", &[]), Some(3.0));
        assert_eq!(d.metric("edgenetd_route_drift_repairs_total", &[]), Some(0.0));

        // `ip route del` succeeding proves it was gone (the repair can be back before the next
        // `ip` even runs).
        sh("ip route del 10.1.0.0/16 proto 190");
        let took = wait_until("the repair", Duration::from_secs(2), || has_owned_route("10.1.0.0/16"));
        eprintln!("route repaired after {took:?}");
        wait_until("the repair to be counted", Duration::from_secs(2), || {
            d.metric("edgenetd_route_drift_repairs_total", &[]).is_some_and(|v| v == 1.0)
        });

        // A change (not a deletion) is drift too: a hand-made replace is undone.
        sh("ip route replace 10.2.0.0/16 dev r0 metric 20 proto 190 mtu 1300");
        wait_until("the changed route to be restored", Duration::from_secs(2), || {
            owned_routes()
                .iter()
                .any(|r| r["dst"] == "10.2.0.0/16" && r.get("metrics").is_none())
        });
        wait_until("the second repair to be counted", Duration::from_secs(2), || {
            d.metric("edgenetd_route_drift_repairs_total", &[]).is_some_and(|v| v == 2.0)
        });
        assert_eq!(owned_routes().len(), 3);
    }
}

netns_test! {
    fn a_route_on_a_device_created_after_startup_is_installed_when_it_appears() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let config = format!(
            "{HEAD}[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.2\"\n\n[[route]]\nto = \"10.9.0.0/16\"\ndev = \"late0\"\n"
        );
        let d = Daemon::start("route", &config);
        wait_until("the first sync", Duration::from_secs(5), || has_owned_route("10.1.0.0/16"));
        wait_until("the failure to be recorded", Duration::from_secs(5), || {
            d.metric(FAILURES, ROUTE).is_some_and(|v| v >= 1.0)
        });
        let (status, body) = d.get("/healthz");
        assert_eq!(status, 200, "a failing route never makes the daemon unhealthy: {body}");
        assert!(body.contains("device late0 does not exist"), "{body}");
        assert!(!has_owned_route("10.9.0.0/16"));

        sh("ip link add late0 type veth peer name late1 && ip link set late0 up && ip link set late1 up");
        let took = wait_until("the late route", Duration::from_secs(2), || has_owned_route("10.9.0.0/16"));
        eprintln!("late-device route installed {took:?} after the device appeared");
    }
}

netns_test! {
    fn one_unreachable_gateway_among_fifty_good_routes_fails_alone_and_health_stays_200() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let mut config = String::from(HEAD);
        for i in 0..50 {
            config.push_str(&format!("[[route]]\nto = \"10.60.{i}.0/24\"\nvia = \"192.0.2.2\"\n\n"));
        }
        config.push_str("[[route]]\nto = \"10.61.0.0/16\"\nvia = \"198.51.100.1\"\n");
        let d = Daemon::start("route", &config);
        wait_until("the failed sync", Duration::from_secs(5), || {
            d.metric(FAILURES, ROUTE).is_some_and(|v| v >= 1.0)
        });
        assert_eq!(owned_routes().len(), 50);
        let (status, body) = d.get("/healthz");
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("add route 10.61.0.0/16 via 198.51.100.1") && body.contains("unreachable"),
            "the error names the route and the kernel's reason: {body}"
        );
        assert_eq!(
            d.metric("edgenetd_controller_sync_last_success", ROUTE),
            Some(0.0)
        );
    }
}

netns_test! {
    fn removing_a_route_from_the_config_and_reloading_removes_only_it() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip route add 10.1.0.0/16 via 192.0.2.3 metric 50 proto static");
        sh("ip route add 10.7.0.0/16 via 192.0.2.3 table 100");
        sh("ip rule add from 10.0.9.0/24 lookup 100 pref 900");
        // Foreign = every route and rule not edgenetd's (the kernel's own link-local routes
        // come and go with IPv6 address configuration, so they are left out).
        let foreign = || [routes_except(&["190", "kernel"]), rules_except(&["190", "kernel"])].concat();
        let rule = "[[route_rule]]\npriority = 1000\nfrom = \"10.0.5.0/24\"\ntable = 100\n\n";
        let routes = [
            "[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.2\"\n\n",
            "[[route]]\nto = \"10.2.0.0/16\"\nvia = \"192.0.2.2\"\ntable = 100\n\n",
            "[[route]]\nto = \"2001:db8:3::/48\"\ntype = \"prohibit\"\n\n",
        ];
        let d = Daemon::start("route", &format!("{HEAD}{rule}{}", routes.concat()));
        wait_until("the first sync", Duration::from_secs(5), || owned_routes().len() == 3);
        let before_foreign = foreign();
        let before: Vec<Value> = owned_routes();
        assert!(sh("ip rule show").contains("from 10.0.5.0/24 lookup 100 proto 190"));

        d.reload(&format!("{HEAD}{rule}{}{}", routes[0], routes[2]));
        wait_until("the removal", Duration::from_secs(5), || !has_owned_route("10.2.0.0/16"));
        let after = owned_routes();
        let expected: Vec<Value> = before
            .into_iter()
            .filter(|r| r["dst"] != "10.2.0.0/16")
            .collect();
        assert_eq!(after, expected, "nothing else changed");
        assert_eq!(foreign(), before_foreign, "foreign routes and rules untouched");
        assert!(sh("ip rule show").contains("from 10.0.5.0/24 lookup 100 proto 190"));

        // Dropping the rule from the config removes it too; the foreign rule stays.
        d.reload(&format!("{HEAD}{}{}", routes[0], routes[2]));
        wait_until("the rule removal", Duration::from_secs(5), || {
            !sh("ip rule show").contains("proto 190")
        });
        assert_eq!(foreign(), before_foreign);
        assert_eq!(owned_routes().len(), 2);
    }
}

netns_test! {
    fn plan_lists_changes_without_making_them_and_cleanup_removes_exactly_what_is_owned() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip route add 10.1.0.0/16 via 192.0.2.3 metric 50 proto static");
        sh("ip route add 10.5.0.0/16 via 192.0.2.2 proto 190");
        let dir = ScratchDir::with_files("plan", &[(
            "edgenetd.toml",
            "[controller.policy]\nenabled = false\n[controller.service]\nenabled = false\n\n[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.2\"\n\n[[route_rule]]\npriority = 1000\nfwmark = \"0x10\"\ntable = 100\nfamily = \"ipv4\"\n",
        )]);
        let cfg = dir.config();
        let cfg = cfg.to_str().unwrap();
        let before = non_kernel_state();
        let plan = edgenetd(&["plan", "--config", cfg]);
        assert!(plan.ok(), "{plan:?}");
        let plan = plan.stdout;
        assert_eq!(
            plan,
            "add route 10.1.0.0/16 via 192.0.2.2 table main metric 0 proto 190\n\
             add rule 1000: ipv4 from all fwmark 0x10 lookup 100 proto 190\n\
             delete route 10.5.0.0/16 via 192.0.2.2 dev r0 table main metric 0 proto 190\n"
        );
        assert_eq!(non_kernel_state(), before, "plan writes nothing");

        // Install, then clean up: only protocol-190 objects go.
        sh("ip route add 10.1.0.0/16 via 192.0.2.2 proto 190");
        sh("ip rule add fwmark 0x10 lookup 100 pref 1000 proto 190");
        let out = edgenetd(&["cleanup", "--config", cfg]);
        assert!(out.ok(), "{out:?}");
        let out = out.stdout;
        assert!(out.contains("deleted rule 1000: ipv4 from all fwmark 0x10 lookup 100 proto 190"), "{out}");
        assert!(out.contains("deleted route 10.1.0.0/16 via 192.0.2.2 dev r0 table main metric 0 proto 190"), "{out}");
        assert!(out.contains("route: removed 2 routes and 1 rules with protocol 190"), "{out}");
        assert_eq!(sh("ip route show proto 190 table all"), "");
        assert!(!sh("ip rule show").contains("proto 190"));
        assert!(sh("ip route show").contains("10.1.0.0/16 via 192.0.2.3 dev r0 proto static metric 50"));
    }
}

netns_test! {
    fn a_route_dropped_silently_with_its_source_address_comes_back_with_the_address() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip addr add 192.0.2.9/24 dev r0");
        let config = format!(
            "{HEAD}[[route]]\nto = \"10.1.0.0/16\"\nvia = \"192.0.2.2\"\nsrc = \"192.0.2.9\"\n\n[[route]]\nto = \"10.2.0.0/16\"\nvia = \"192.0.2.2\"\n"
        );
        let d = Daemon::start("route", &config);
        wait_until("the first sync", Duration::from_secs(5), || owned_routes().len() == 2);
        // The kernel drops the route with the address, without a route notification.
        sh("ip addr del 192.0.2.9/24 dev r0");
        wait_until("the kernel to drop the route", Duration::from_secs(2), || {
            !has_owned_route("10.1.0.0/16")
        });
        // Until the address is back, the route cannot be installed (and the sync says why).
        wait_until("the failure to be recorded", Duration::from_secs(5), || {
            d.metric(FAILURES, ROUTE).is_some_and(|v| v >= 1.0)
        });
        assert_eq!(
            d.metric("edgenetd_route_drift_repairs_total", &[]),
            Some(0.0),
            "a repair that failed is not counted"
        );
        sh("ip addr add 192.0.2.9/24 dev r0");
        wait_until("the route to come back", Duration::from_secs(2), || has_owned_route("10.1.0.0/16"));
        assert_eq!(owned_routes().len(), 2);
    }
}
