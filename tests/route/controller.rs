//! The route controller's sync against the real kernel (fresh network namespace each):
//! a no-op resync writes nothing, whether it dumps the kernel or trusts its last sync, and a
//! one-route change writes one route.

use crate::common;
use crate::netns_test;

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::links::wait_until_up;
use common::shell::sh;
use common::topology::Topology;
use common::wait::{wait_for, wait_until};
use edgenetd::config::DesiredState;
use edgenetd::config::route::{Route, RouteKind, Routes, RoutingConfig};
use edgenetd::controller::Controller;
use edgenetd::controller::route::RouteController;
use edgenetd::sync::{NoProgress, trigger};
use ipnet::{IpNet, Ipv4Net};

const N: usize = 20_000;

fn desired(gateway_of: impl Fn(usize) -> [u8; 4]) -> DesiredState {
    let routes = (0..N)
        .map(|i| Route {
            to: IpNet::V4(Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i as u32) * 16), 28).unwrap()),
            via: Some(IpAddr::from(gateway_of(i))),
            dev: None,
            metric: None,
            table: 254,
            kind: RouteKind::Unicast,
            src: None,
            onlink: false,
            mtu: None,
            nexthops: Vec::new(),
        })
        .collect();
    DesiredState {
        routing: RoutingConfig {
            routes,
            rules: Vec::new(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `ip -o monitor route` in the background, its lines collected by a thread.
struct Monitor {
    /// The `ip monitor` process.
    child: Child,
    /// Every line printed so far.
    lines: Arc<Mutex<Vec<String>>>,
    /// Canaries sent so far (each gets its own prefix).
    canaries: u8,
}

impl Monitor {
    /// Starts the monitor and returns once it is subscribed: it has printed a canary route
    /// added after it started.
    fn start() -> Monitor {
        let mut child = Command::new("ip")
            .args(["-o", "monitor", "route"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("ip monitor");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut m = Monitor {
            child,
            lines,
            canaries: 0,
        };
        m.canary();
        m
    }

    /// Adds and deletes a foreign route and waits until the monitor printed both: every
    /// route event the kernel sent before it has been printed too (one socket, in order).
    /// Returns how many lines came before the canary's.
    fn canary(&mut self) -> usize {
        self.canaries += 1;
        let dst = format!("198.18.{}.0/24", self.canaries);
        // `ip monitor` may not be subscribed yet: repeat until it prints the canary.
        wait_until(
            "ip monitor to print a canary route",
            Duration::from_secs(10),
            || {
                sh(&format!(
                    "ip route add blackhole {dst} proto static && ip route del blackhole {dst} proto static"
                ));
                let lines = self.lines.lock().unwrap();
                lines
                    .iter()
                    .any(|l| l.starts_with("Deleted ") && l.contains(&dst))
            },
        );
        let lines = self.lines.lock().unwrap();
        lines.iter().position(|l| l.contains(&dst)).unwrap()
    }

    /// Notifications about routes with protocol 190 while `f` runs, framed by canaries so
    /// that none can be missed (the kernel's own IPv6 link-local routes come and go in the
    /// background and are left out).
    fn route_events_during(&mut self, f: impl FnOnce()) -> Vec<String> {
        let before = self.lines.lock().unwrap().len();
        f();
        let until = self.canary();
        self.lines.lock().unwrap()[before..until]
            .iter()
            .filter(|l| l.contains("proto 190"))
            .cloned()
            .collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

netns_test! {
    fn a_no_op_resync_of_twenty_thousand_routes_writes_nothing_and_one_change_writes_one() {
        let _net = Topology::with_veth("r0", "r1", &["192.0.2.1/24"]);
        let state = desired(|_| [192, 0, 2, 2]);
        let mut controller = RouteController::new(trigger().0);
        let cold = smol::block_on(controller.sync(&state, &NoProgress)).expect("cold sync");
        assert_eq!(cold.changes as usize, N);
        assert_eq!(sh("ip route show proto 190 | wc -l").trim(), N.to_string());

        // Trusting the last sync (no kernel event since) and dumping in full (a controller
        // that never saw this kernel): both write nothing, and the kernel sees nothing.
        let mut fresh = RouteController::new(trigger().0);
        let mut monitor = Monitor::start();
        let events = monitor.route_events_during(|| {
            let cached = smol::block_on(controller.sync(&state, &NoProgress)).unwrap();
            assert_eq!(cached.changes, 0, "{}", cached.summary);
            let full = smol::block_on(fresh.sync(&state, &NoProgress)).unwrap();
            assert_eq!(full.changes, 0, "{}", full.summary);
        });
        assert_eq!(events, Vec::<String>::new(), "no route notification during no-op syncs");

        // One changed route: one write, one notification.
        let changed = desired(|i| if i == 777 { [192, 0, 2, 3] } else { [192, 0, 2, 2] });
        let events = monitor.route_events_during(|| {
            let report = smol::block_on(controller.sync(&changed, &NoProgress)).unwrap();
            assert_eq!(report.changes, 1, "{}", report.summary);
        });
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(sh("ip route show 10.0.48.144/28").contains("via 192.0.2.3"));
    }
}

fn ipv6_route_metric_0() -> DesiredState {
    DesiredState {
        routing: RoutingConfig {
            routes: Routes::from(vec![Route {
                to: "2001:db8:1::/48".parse().unwrap(),
                via: Some("2001:db8:ff::2".parse().unwrap()),
                dev: None,
                metric: Some(0),
                table: 254,
                kind: RouteKind::Unicast,
                src: None,
                onlink: false,
                mtu: None,
                nexthops: Vec::new(),
            }]),
            rules: Vec::new(),
            ..Default::default()
        },
        ..Default::default()
    }
}

netns_test! {
    fn bug_8a_an_ipv6_route_with_metric_0_survives_full_resyncs_without_a_write() {
        sh("ip link add d0 type veth peer name d0p && ip link set d0 up && ip link set d0p up");
        sh("ip -6 addr add 2001:db8:ff::1/64 dev d0 nodad");
        let state = ipv6_route_metric_0();
        let mut controller = RouteController::new(trigger().0);
        let first = smol::block_on(controller.sync(&state, &NoProgress)).expect("first sync");
        assert_eq!(first.changes, 1, "{}", first.summary);
        let shown = sh("ip -6 route show 2001:db8:1::/48 proto 190");
        assert!(shown.contains("metric 1024"), "the kernel stores metric 1024: {shown}");

        // A full resync by a controller that never saw this kernel: nothing to write.
        let mut fresh = RouteController::new(trigger().0);
        let full = smol::block_on(fresh.sync(&state, &NoProgress)).expect("full resync");
        assert_eq!(full.changes, 0, "{}", full.summary);
        assert!(!full.summary.contains("not dumped"), "{}", full.summary);

        // A link event invalidates the first controller's cache: its resync dumps, and
        // writes nothing either.
        sh("ip link add d1 type veth peer name d1p && ip link set d1 up");
        // The monitor task takes the event on another thread, some time later: resync until
        // one dumps (a trusted one before it writes nothing either).
        let after_event = wait_for(
            "a resync that dumps after the link event",
            Duration::from_secs(10),
            || {
                let report = smol::block_on(controller.sync(&state, &NoProgress)).expect("resync");
                (!report.summary.contains("not dumped")).then_some(report)
            },
        );
        assert_eq!(after_event.changes, 0, "{}", after_event.summary);
        let shown = sh("ip -6 route show 2001:db8:1::/48 proto 190");
        assert!(shown.contains("via 2001:db8:ff::2"), "the route is still there: {shown}");
    }
}

netns_test! {
    fn a_trusted_cache_plans_only_what_changed_and_a_full_resync_agrees() {
        // No IPv6 link-local addresses appearing mid-test: their events (rightly) invalidate
        // the cache, and this test is about the trusted path.
        sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
        sh("ip link add r0 type veth peer name r1");
        sh("ip addr add 192.0.2.1/24 dev r0 && ip link set r0 up && ip link set r1 up");
        // Nor the pair's carrier coming up after the cold sync (the kernel reports it late).
        wait_until_up(&["r0", "r1"]);
        let mut state = desired(|_| [192, 0, 2, 2]);
        let mut controller = RouteController::new(trigger().0);
        smol::block_on(controller.sync(&state, &NoProgress)).expect("cold sync");
        // A changed metric (a new key), a removed route and an appended one.
        let mut routes = state.routing.routes.edit();
        routes[10].metric = Some(7);
        let removed = routes.remove(20);
        let mut added = removed.clone();
        added.to = "10.200.0.0/16".parse().unwrap();
        routes.push(added);
        drop(routes);
        let report = smol::block_on(controller.sync(&state, &NoProgress)).expect("change");
        assert!(report.summary.contains("not dumped"), "{}", report.summary);
        assert_eq!(report.changes, 4, "{}", report.summary);
        assert!(sh("ip route show 10.0.0.160/28 proto 190").contains("metric 7"));
        assert_eq!(sh(&format!("ip route show {} proto 190", removed.to)), "");
        assert!(sh("ip route show 10.200.0.0/16 proto 190").contains("via 192.0.2.2"));
        // What the cache believes is what a full dump finds: a fresh controller writes nothing.
        let mut fresh = RouteController::new(trigger().0);
        let full = smol::block_on(fresh.sync(&state, &NoProgress)).expect("full resync");
        assert_eq!(full.changes, 0, "{}", full.summary);
    }
}
