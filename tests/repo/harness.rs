//! The test harness itself: a kernel test really runs in a namespace of its own, and the
//! metric reader matches exact series only.

use crate::common;
use crate::netns_test;

use common::metrics::{parse, value};
use common::shell::sh;
use common::topology::{Link, Topology};
use std::time::{Duration, Instant};

netns_test! {
    fn runs_in_a_fresh_namespace_with_only_loopback() {
        assert!(common::netns::in_child());
        let links = sh("ip -o link show");
        assert_eq!(links.lines().count(), 1, "a fresh namespace has only lo: {links}");
        assert!(sh("ip -o link show lo").contains("UP"), "lo is up");
        // Anything created here is gone with the namespace, never on the host.
        sh("nft add table inet edgenetd-harness-probe");
        assert!(sh("nft list tables").contains("edgenetd-harness-probe"));
    }
}

netns_test! {
    // CI: kube_proxy_conformance `e2e_dual_stack` saw its first forwarded IPv6 connections
    // to the other node time out: the router's new link had only a tentative link-local
    // address, and the kernel sends no neighbour solicitation for a forwarded packet until
    // duplicate address detection is over (2 s). Addresses are added after the link, as the
    // conformance lab adds them, so the topology's own neighbour warm-up does not help.
    fn e2e_dual_stack_first_forwarded_ipv6_packet_over_new_links_is_not_held_by_dad() {
        let mut net = Topology::new();
        net.forwarding();
        for (role, dev, n) in [("a", "ra", 1), ("b", "rb", 2)] {
            net.add_host(
                role,
                Link {
                    router_if: dev,
                    router_addrs: &[],
                    host_if: "eth0",
                    host_addrs: &[],
                    host_routes: &[],
                },
            );
            sh(&format!("ip -6 addr add fd0{n}::1/64 dev {dev} nodad"));
            net.host(role).sh(&format!(
                "ip -6 addr add fd0{n}::2/64 dev eth0 nodad && ip -6 route add default via fd0{n}::1"
            ));
        }
        common::links::wait_until_up(&["ra", "rb"]);
        let started = Instant::now();
        let (ok, out, _) = net.host("a").sh_status("ping -6 -c 1 -W 1 fd02::2");
        let took = started.elapsed();
        assert!(ok, "a's first ping to b, forwarded by the router, got no answer within 1 s: {out}");
        assert!(took < Duration::from_millis(900), "the first forwarded ping took {took:?}");
    }
}

const EXPOSITION: &str = r#"# HELP edgenetd_routes_installed_total Routes.
# TYPE edgenetd_routes_installed_total counter
edgenetd_routes_installed_total 7
edgenetd_routes_installed 3
edgenetd_controller_syncs_total{controller="route"} 4
edgenetd_controller_syncs_total{controller="route",result="ok"} 2
edgenetd_controller_syncs_total{controller="routes"} 9
edgenetd_sync_seconds_bucket{controller="a b, c=\"d\"",le="+Inf"} 5
edgenetd_build_info{version="1.2.3"} 1 1700000000000
"#;

#[test]
fn a_metric_name_that_is_a_prefix_of_a_longer_one_never_matches_it() {
    assert_eq!(
        value(EXPOSITION, "edgenetd_routes_installed", &[]),
        Some(3.0)
    );
    assert_eq!(value(EXPOSITION, "edgenetd_routes", &[]), None);
    assert_eq!(
        value(EXPOSITION, "edgenetd_routes_installed_tota", &[]),
        None
    );
}

#[test]
fn a_label_set_matches_exactly_never_as_a_subset_or_a_prefix() {
    let syncs = "edgenetd_controller_syncs_total";
    assert_eq!(
        value(EXPOSITION, syncs, &[("controller", "route")]),
        Some(4.0)
    );
    assert_eq!(
        value(
            EXPOSITION,
            syncs,
            &[("result", "ok"), ("controller", "route")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(EXPOSITION, syncs, &[("controller", "routes")]),
        Some(9.0)
    );
    assert_eq!(value(EXPOSITION, syncs, &[("controller", "rout")]), None);
    assert_eq!(
        value(EXPOSITION, syncs, &[]),
        None,
        "no labels is a label set too"
    );
    assert_eq!(value(EXPOSITION, "edgenetd_build_info", &[]), None);
    assert_eq!(
        value(EXPOSITION, "edgenetd_build_info", &[("version", "1.2.3")]),
        Some(1.0)
    );
}

#[test]
fn quoted_label_values_escapes_infinity_and_timestamps_parse() {
    let all = parse(EXPOSITION);
    assert_eq!(all.len(), 7);
    let bucket = &all[5];
    assert_eq!(bucket.labels["controller"], "a b, c=\"d\"");
    assert_eq!(bucket.labels["le"], "+Inf");
    assert_eq!(bucket.value, 5.0);
    assert_eq!(all[6].value, 1.0, "the timestamp is not the value");
    assert_eq!(parse("x +Inf\n")[0].value, f64::INFINITY);
}

#[test]
#[should_panic(expected = "not a Prometheus sample")]
fn a_line_that_is_not_exposition_text_is_an_error() {
    parse("edgenetd_x{controller=\"a\" 1\n");
}

#[test]
#[should_panic(expected = "appears more than once")]
fn a_series_listed_twice_is_an_error() {
    value("x{a=\"1\"} 1\nx{a=\"1\"} 2\n", "x", &[("a", "1")]);
}

#[test]
fn wait_for_returns_the_first_value_and_a_timeout_names_what_was_awaited() {
    use common::wait::{wait_for, wait_until};
    use std::time::Duration;
    let mut n = 0;
    let got = wait_for("n to reach 3", Duration::from_secs(1), || {
        n += 1;
        (n >= 3).then_some(n)
    });
    assert_eq!(got, 3);
    let panic = std::panic::catch_unwind(|| {
        wait_until("the impossible", Duration::from_millis(50), || false)
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("waiting for the impossible"), "{msg}");
}
