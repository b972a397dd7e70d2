//! The route dataplane against the real kernel, each test in a fresh network namespace:
//! what it writes is what `ip -j route`/`ip -j rule` show, what it dumps is what it wrote,
//! foreign routes are never touched, and one bad route never stops the others.

use crate::common;
use crate::netns_test;

use common::routes::{ip_json, owned_routes, routes_except};
use common::shell::sh;
use common::topology::Topology;
use edgenetd::controller::route::plan::Plan;
use edgenetd::dataplane::route::{
    Family, LinkKind, NextHop, RouteSocket, RouteSpec, RouteType, RouteWrite, RuleSpec, RuleWrite,
};
use serde_json::Value;

const PROTO: u8 = 190;

/// The addresses of r0, the router's end of the r0 <-> r1 veth pair every test uses.
const R0: &[&str] = &["192.0.2.1/24", "2001:db8:ff::1/64"];

fn find<'a>(routes: &'a [Value], dst: &str) -> &'a Value {
    routes
        .iter()
        .find(|r| r["dst"] == dst)
        .unwrap_or_else(|| panic!("{dst} not in {routes:?}"))
}

fn r(dst: &str) -> RouteSpec {
    RouteSpec::new(dst.parse().unwrap(), PROTO)
}

fn gw(s: &str) -> Option<std::net::IpAddr> {
    Some(s.parse().unwrap())
}

fn every_kind() -> Vec<RouteSpec> {
    let hop = |via: &str, weight| NextHop {
        via: gw(via),
        dev: Some("r0".into()),
        weight,
        onlink: false,
    };
    vec![
        RouteSpec {
            via: gw("192.0.2.2"),
            dev: Some("r0".into()),
            metric: 5,
            mtu: Some(1400),
            src: gw("192.0.2.1"),
            ..r("10.1.0.0/16")
        },
        RouteSpec {
            dev: Some("r0".into()),
            table: 1000,
            ..r("10.2.0.0/16")
        },
        RouteSpec {
            kind: RouteType::Blackhole,
            ..r("10.3.0.0/16")
        },
        RouteSpec {
            kind: RouteType::Unreachable,
            ..r("10.4.0.0/16")
        },
        RouteSpec {
            kind: RouteType::Prohibit,
            ..r("10.5.0.0/16")
        },
        RouteSpec {
            kind: RouteType::Throw,
            table: 100,
            ..r("10.6.0.0/16")
        },
        RouteSpec {
            nexthops: vec![hop("192.0.2.2", 1), hop("192.0.2.3", 3)],
            ..r("10.7.0.0/16")
        },
        RouteSpec {
            via: gw("198.51.100.1"),
            dev: Some("r0".into()),
            onlink: true,
            table: 100,
            ..r("0.0.0.0/0")
        },
        RouteSpec {
            via: gw("2001:db8:ff::2"),
            ..r("2001:db8:1::/48")
        },
        RouteSpec {
            dev: Some("r0".into()),
            metric: 7,
            mtu: Some(1300),
            ..r("2001:db8:2::/48")
        },
        RouteSpec {
            kind: RouteType::Blackhole,
            ..r("2001:db8:3::/48")
        },
        RouteSpec {
            kind: RouteType::Unreachable,
            ..r("2001:db8:4::/48")
        },
        RouteSpec {
            kind: RouteType::Prohibit,
            table: 100,
            ..r("2001:db8:5::/48")
        },
        RouteSpec {
            kind: RouteType::Throw,
            table: 100,
            ..r("2001:db8:6::/48")
        },
        RouteSpec {
            nexthops: vec![hop("2001:db8:ff::2", 2), hop("2001:db8:ff::3", 1)],
            ..r("2001:db8:7::/48")
        },
    ]
}

fn add_all(sock: &RouteSocket, routes: &[RouteSpec]) -> edgenetd::dataplane::route::WriteOutcome {
    smol::block_on(async {
        let links = sock.links().await.unwrap();
        let writes: Vec<RouteWrite<'_>> = routes.iter().map(RouteWrite::Add).collect();
        sock.write_routes(&writes, &links, &mut |_| {}).await
    })
}

fn dump(sock: &RouteSocket) -> Vec<RouteSpec> {
    smol::block_on(async {
        let links = sock.links().await.unwrap();
        sock.dump_routes(PROTO, &links).await.unwrap()
    })
}

netns_test! {
    fn routes_of_every_type_and_family_are_installed_as_ip_shows_them() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let desired = every_kind();
        let outcome = add_all(&sock, &desired);
        assert_eq!(outcome.failures, vec![], "every route installs");
        assert_eq!(outcome.sent, desired.len());

        let shown = owned_routes();
        assert_eq!(shown.len(), desired.len(), "{shown:#?}");
        let v = find(&shown, "10.1.0.0/16");
        assert_eq!(
            (&v["gateway"], &v["dev"], &v["metric"], &v["metrics"][0]["mtu"], &v["prefsrc"]),
            (&"192.0.2.2".into(), &"r0".into(), &5.into(), &1400.into(), &"192.0.2.1".into())
        );
        let v = find(&shown, "10.2.0.0/16");
        assert_eq!((&v["table"], &v["scope"]), (&"1000".into(), &"link".into()));
        for (dst, kind) in [
            ("10.3.0.0/16", "blackhole"),
            ("10.4.0.0/16", "unreachable"),
            ("10.5.0.0/16", "prohibit"),
            ("10.6.0.0/16", "throw"),
            ("2001:db8:3::/48", "blackhole"),
            ("2001:db8:4::/48", "unreachable"),
            ("2001:db8:5::/48", "prohibit"),
            ("2001:db8:6::/48", "throw"),
        ] {
            assert_eq!(find(&shown, dst)["type"], kind, "{dst}");
        }
        let v = find(&shown, "10.7.0.0/16");
        assert_eq!(v["nexthops"][0]["weight"], 1);
        assert_eq!(v["nexthops"][1]["weight"], 3);
        assert_eq!(v["nexthops"][1]["gateway"], "192.0.2.3");
        let v = find(&shown, "default");
        assert_eq!((&v["table"], &v["flags"][0]), (&"100".into(), &"onlink".into()));
        let v = find(&shown, "2001:db8:1::/48");
        assert_eq!((&v["gateway"], &v["metric"]), (&"2001:db8:ff::2".into(), &1024.into()));
        let v = find(&shown, "2001:db8:2::/48");
        assert_eq!((&v["metric"], &v["metrics"][0]["mtu"]), (&7.into(), &1300.into()));
        let v = find(&shown, "2001:db8:7::/48");
        assert_eq!(v["nexthops"][0]["weight"], 2);
        assert_eq!(v["nexthops"][1]["gateway"], "2001:db8:ff::3");

        // What the dump reads back is what was written: a second plan is empty.
        let installed = dump(&sock);
        assert_eq!(installed.len(), desired.len());
        let plan = Plan::new(&desired, &installed, &[], &[]);
        assert!(plan.is_empty(), "no-op resync plans nothing: {:#?}", plan.lines());
    }
}

netns_test! {
    fn replace_changes_a_route_in_place_and_delete_removes_only_it() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let routes = every_kind();
        assert_eq!(add_all(&sock, &routes).failures, vec![]);
        let changed = RouteSpec {
            via: gw("192.0.2.3"),
            mtu: None,
            ..routes[0].clone()
        };
        let outcome = smol::block_on(async {
            let links = sock.links().await.unwrap();
            sock.write_routes(
                &[RouteWrite::Replace(&changed), RouteWrite::Delete(&routes[10])],
                &links,
                &mut |_| {},
            )
            .await
        });
        assert_eq!(outcome.failures, vec![]);
        let shown = owned_routes();
        assert_eq!(shown.len(), routes.len() - 1);
        let v = find(&shown, "10.1.0.0/16");
        assert_eq!(v["gateway"], "192.0.2.3");
        assert!(v.get("metrics").is_none(), "the MTU went with the replace: {v}");
        assert!(shown.iter().all(|r| r["dst"] != "2001:db8:3::/48"));
    }
}

netns_test! {
    fn rules_are_installed_as_ip_rule_shows_them_and_foreign_rules_stay() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip rule add from 10.0.5.0/24 lookup 100 pref 1000 proto static");
        let before = sh("ip -j rule show; ip -6 -j rule show");
        let sock = RouteSocket::open().unwrap();
        let desired = vec![
            RuleSpec {
                from: Some("10.0.5.0/24".parse().unwrap()),
                ..RuleSpec::new(Family::Ipv4, 1000, 100, PROTO)
            }
            .normalized(),
            RuleSpec {
                to: Some("10.9.0.0/16".parse().unwrap()),
                iif: Some("r0".into()),
                fwmark: Some(0x10),
                fwmask: Some(0xff),
                ..RuleSpec::new(Family::Ipv4, 1001, 1000, PROTO)
            }
            .normalized(),
            RuleSpec {
                from: Some("2001:db8:5::/48".parse().unwrap()),
                oif: Some("r0".into()),
                fwmark: Some(7),
                ..RuleSpec::new(Family::Ipv6, 1002, 100, PROTO)
            }
            .normalized(),
        ];
        let writes: Vec<RuleWrite<'_>> = desired.iter().map(RuleWrite::Add).collect();
        let outcome = smol::block_on(sock.write_rules(&writes));
        assert_eq!(outcome.failures, vec![]);

        let v4 = ip_json("ip -j rule show");
        let ours: Vec<&Value> = v4.iter().filter(|r| r["protocol"] == "190").collect();
        assert_eq!(ours.len(), 2, "{v4:#?}");
        assert_eq!(
            (&ours[0]["priority"], &ours[0]["src"], &ours[0]["srclen"], &ours[0]["table"]),
            (&1000.into(), &"10.0.5.0".into(), &24.into(), &"100".into())
        );
        assert_eq!(
            (&ours[1]["dst"], &ours[1]["iif"], &ours[1]["fwmark"], &ours[1]["fwmask"], &ours[1]["table"]),
            (&"10.9.0.0".into(), &"r0".into(), &"0x10".into(), &"0xff".into(), &"1000".into())
        );
        let v6 = ip_json("ip -6 -j rule show");
        let ours6: Vec<&Value> = v6.iter().filter(|r| r["protocol"] == "190").collect();
        assert_eq!(ours6.len(), 1, "{v6:#?}");
        assert_eq!((&ours6[0]["oif"], &ours6[0]["fwmark"]), (&"r0".into(), &"0x7".into()));

        let installed = smol::block_on(sock.dump_rules(PROTO)).unwrap();
        let mut sorted = desired.clone();
        sorted.sort();
        let mut got = installed.clone();
        got.sort();
        assert_eq!(got, sorted, "dumped rules equal the written ones");
        assert!(Plan::new(&[], &[], &desired, &installed).is_empty());

        // Deleting every owned rule leaves the foreign one (same priority and match) alone.
        let deletes: Vec<RuleWrite<'_>> = installed.iter().map(RuleWrite::Delete).collect();
        assert_eq!(smol::block_on(sock.write_rules(&deletes)).failures, vec![]);
        assert_eq!(sh("ip -j rule show; ip -6 -j rule show"), before);
    }
}

netns_test! {
    fn foreign_routes_with_the_same_prefix_and_foreign_tables_are_never_touched() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip route add 10.50.0.0/16 via 192.0.2.2 proto static");
        sh("ip route add 10.51.0.0/16 via 192.0.2.2 table 100");
        sh("ip -6 route add 2001:db8:50::/48 via 2001:db8:ff::2 proto boot");
        let foreign = routes_except(&["kernel", "190"]);
        let sock = RouteSocket::open().unwrap();
        let same_key = RouteSpec {
            via: gw("192.0.2.3"),
            ..r("10.50.0.0/16")
        };
        let other_metric = RouteSpec {
            via: gw("192.0.2.3"),
            metric: 10,
            ..r("10.50.0.0/16")
        };
        let same_key6 = RouteSpec {
            kind: RouteType::Blackhole,
            ..r("2001:db8:50::/48")
        };
        let outcome = add_all(&sock, &[same_key.clone(), other_metric.clone(), same_key6]);
        let failed: Vec<(usize, String)> = outcome
            .failures
            .iter()
            .map(|f| (f.index, f.error.to_string()))
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert_eq!(failed[0].0, 0);
        assert!(failed[0].1.starts_with("File exists"), "{failed:?}");
        assert_eq!(failed[1].0, 2);
        // Only the route with its own metric went in.
        let ours = owned_routes();
        assert_eq!(ours.len(), 1);
        assert_eq!(ours[0]["metric"], 10);

        // The dump sees only owned routes; deleting all of them leaves the foreign ones as
        // they were, byte for byte.
        let installed = dump(&sock);
        assert_eq!(installed.len(), 1);
        let deletes: Vec<RouteWrite<'_>> = installed.iter().map(RouteWrite::Delete).collect();
        let outcome = smol::block_on(async {
            let links = sock.links().await.unwrap();
            sock.write_routes(&deletes, &links, &mut |_| {}).await
        });
        assert_eq!(outcome.failures, vec![]);
        assert_eq!(routes_except(&["kernel", "190"]), foreign);
        // A delete of a route that exists only with another protocol fails and changes nothing.
        let foreign_only = RouteSpec { ..r("10.51.0.0/16") };
        let outcome = smol::block_on(async {
            let links = sock.links().await.unwrap();
            let spec = RouteSpec { table: 100, ..foreign_only };
            sock.write_routes(&[RouteWrite::Delete(&spec)], &links, &mut |_| {}).await
        });
        assert_eq!(outcome.failures.len(), 1);
        assert_eq!(routes_except(&["kernel", "190"]), foreign);
    }
}

netns_test! {
    fn one_route_with_an_unreachable_gateway_among_fifty_good_ones_fails_alone() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let mut routes: Vec<RouteSpec> = (0..50)
            .map(|i| RouteSpec {
                via: gw("192.0.2.2"),
                ..r(&format!("10.60.{i}.0/24"))
            })
            .collect();
        routes.insert(
            17,
            RouteSpec {
                via: gw("198.51.100.1"),
                ..r("10.61.0.0/16")
            },
        );
        let outcome = add_all(&sock, &routes);
        assert_eq!(outcome.failures.len(), 1, "{:?}", outcome.failures);
        assert_eq!(outcome.failures[0].index, 17);
        assert_eq!(outcome.failures[0].error.errno(), Some(libc::ENETUNREACH));
        let text = outcome.failures[0].error.to_string();
        assert!(text.contains("unreachable"), "{text}");
        assert_eq!(owned_routes().len(), 50);
        // A route on a device that does not exist fails before reaching the kernel.
        let missing = RouteSpec {
            dev: Some("eth9".into()),
            ..r("10.62.0.0/16")
        };
        let outcome = add_all(&sock, &[missing]);
        assert_eq!(outcome.sent, 0);
        assert_eq!(outcome.failures[0].error.to_string(), "device eth9 does not exist");
    }
}

netns_test! {
    fn pipelined_writes_map_every_error_to_its_route_across_chunks() {
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let bad = [0usize, 255, 256, 257, 1023, 1024, 2500, 4999];
        let routes: Vec<RouteSpec> = (0..5000)
            .map(|i| RouteSpec {
                via: if bad.contains(&i) { gw("198.51.100.1") } else { gw("192.0.2.2") },
                ..r(&format!("10.{}.{}.0/24", 100 + i / 256, i % 256))
            })
            .collect();
        let mut answered = 0;
        let outcome = smol::block_on(async {
            let links = sock.links().await.unwrap();
            let writes: Vec<RouteWrite<'_>> = routes.iter().map(RouteWrite::Add).collect();
            sock.write_routes(&writes, &links, &mut |n| answered = n).await
        });
        let failed: Vec<usize> = outcome.failures.iter().map(|f| f.index).collect();
        assert_eq!(failed, bad);
        assert_eq!(answered, 5000);
        assert_eq!(dump(&sock).len(), 5000 - bad.len());
        let count = sh("ip route show proto 190 | wc -l");
        assert_eq!(count.trim(), (5000 - bad.len()).to_string());
    }
}

netns_test! {
    fn dumps_dropped_after_one_poll_do_not_stop_the_next_one() {
        // The kernel runs one dump per socket at a time and refuses another while one is
        // running (EBUSY): a dump whose future is dropped before its end must be read to its
        // end before the next request. (The kernel queues each datagram of a dump as the
        // previous one is read, so a poll mostly reads a dump whole; this holds both cases.)
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let routes: Vec<RouteSpec> = (0..3000)
            .map(|i| RouteSpec {
                via: gw("192.0.2.2"),
                ..r(&format!("10.{}.{}.0/24", 100 + i / 256, i % 256))
            })
            .collect();
        assert!(add_all(&sock, &routes).failures.is_empty());
        let links = smol::block_on(sock.links()).unwrap();
        for _ in 0..3 {
            let abandoned = Box::pin(sock.dump_routes(PROTO, &links));
            let _ = smol::block_on(futures_lite::future::poll_once(abandoned));
        }
        assert_eq!(dump(&sock).len(), 3000);
        let rules = smol::block_on(sock.dump_rules(PROTO)).unwrap();
        assert!(rules.is_empty(), "{rules:?}");
    }
}

netns_test! {
    fn links_and_addresses_are_read_as_ip_shows_them() {
        let _net = Topology::with_veth("r0", "r1", R0);
        // (No VLAN: the test kernel may lack 8021q; the codec's unit tests read a VLAN's
        // kind and parent from a hand-built message.)
        sh("ip link add br-t type bridge && ip link add d0 type veth peer name d1 \
            && ip link set d0 master br-t \
            && ip addr add 10.9.9.1/24 dev d1 && ip addr add 2001:db8:9::1/64 dev d1 nodad \
            && ip link set d0 up && ip link set d1 up");
        let index = |name: &str| -> u32 {
            // (/sys shows the host's links: the namespace's come from `ip`.)
            let out = sh(&format!("ip -o link show {name}"));
            out.split(':').next().unwrap().trim().parse().unwrap()
        };
        let sock = RouteSocket::open().unwrap();
        let table = smol::block_on(sock.link_table()).unwrap();
        let link = |name: &str| {
            table
                .links
                .iter()
                .find(|l| l.name == name)
                .unwrap_or_else(|| panic!("{name} not in {table:?}"))
                .clone()
        };
        assert_eq!(link("br-t").kind, LinkKind::Bridge);
        assert_eq!(link("d0").master, Some(index("br-t")));
        // A veth's IFLA_LINK names its peer, not a parent.
        assert_eq!((link("d1").kind, link("d1").parent), (LinkKind::Other, None));
        assert_eq!(link("d1").master, None);
        let links = smol::block_on(sock.links()).unwrap();
        assert_eq!(links.index("d1"), Some(index("d1")));
        assert_eq!(links.len(), table.links.len());
        let nets = smol::block_on(sock.address_networks()).unwrap();
        for net in ["10.9.9.1/24", "2001:db8:9::1/64"] {
            assert!(
                nets.contains(&(index("d1"), net.parse().unwrap())),
                "{net} not in {nets:?}"
            );
        }
        assert!(nets.contains(&(index("r0"), "192.0.2.1/24".parse().unwrap())), "{nets:?}");
    }
}

netns_test! {
    fn every_kind_of_change_converges_in_one_sync_and_then_plans_nothing() {
        let _net = Topology::with_veth("r0", "r1", R0);
        sh("ip addr add 192.0.2.9/24 dev r0 && ip addr add 2001:db8:ff::9/64 dev r0 nodad");
        let sock = RouteSocket::open().unwrap();
        let before = every_kind();
        assert_eq!(add_all(&sock, &before).failures, vec![]);
        let hop = |via: &str, weight| NextHop {
            via: gw(via),
            dev: Some("r0".into()),
            weight,
            onlink: false,
        };
        // Change something in every route: gateways, devices, types, weights, MTU, source,
        // single path <-> multipath, and one metric (a different route: add + delete).
        let mut after = before.clone();
        after[0].via = gw("192.0.2.3");
        after[0].mtu = Some(1300);
        after[0].src = gw("192.0.2.9");
        after[1].kind = RouteType::Blackhole;
        after[1].dev = None;
        after[2].kind = RouteType::Unicast;
        after[2].via = gw("192.0.2.2");
        after[3].kind = RouteType::Prohibit;
        after[4].metric = 50;
        after[5].kind = RouteType::Unreachable;
        after[6].nexthops = vec![hop("192.0.2.2", 5), hop("192.0.2.3", 1), hop("192.0.2.4", 2)];
        after[7].onlink = false;
        after[7].via = gw("192.0.2.2");
        after[8].via = None;
        after[8].nexthops = vec![hop("2001:db8:ff::2", 1), hop("2001:db8:ff::3", 4)];
        after[9].mtu = None;
        after[9].src = gw("2001:db8:ff::9");
        after[10].kind = RouteType::Unicast;
        after[10].via = gw("2001:db8:ff::2");
        after[11].kind = RouteType::Throw;
        after[13].kind = RouteType::Blackhole;
        after[14].nexthops = vec![hop("2001:db8:ff::3", 3), hop("2001:db8:ff::2", 1)];

        let installed = dump(&sock);
        let plan = Plan::new(&after, &installed, &[], &[]);
        let writes: Vec<RouteWrite<'_>> = plan
            .route_upserts
            .iter()
            .chain(&plan.route_deletes)
            .map(|c| c.write())
            .collect();
        // 14 routes changed (the IPv6 prohibit route did not), one of them by metric: 15 writes.
        assert_eq!(writes.len(), 15, "{:#?}", plan.lines());
        let outcome = smol::block_on(async {
            let links = sock.links().await.unwrap();
            sock.write_routes(&writes, &links, &mut |_| {}).await
        });
        assert_eq!(outcome.failures, vec![], "{:#?}", plan.lines());

        let now = dump(&sock);
        let again = Plan::new(&after, &now, &[], &[]);
        assert!(again.is_empty(), "converged in one sync: {:#?}\n{now:#?}", again.lines());
        assert_eq!(now.len(), after.len());
        let shown = owned_routes();
        assert_eq!(find(&shown, "10.5.0.0/16")["metric"], 50);
        assert_eq!(find(&shown, "10.7.0.0/16")["nexthops"].as_array().unwrap().len(), 3);
        assert_eq!(find(&shown, "2001:db8:1::/48")["nexthops"][1]["weight"], 4);
        assert_eq!(find(&shown, "2001:db8:7::/48")["nexthops"][0]["gateway"], "2001:db8:ff::3");
    }
}

netns_test! {
    fn the_monitor_reports_foreign_changes_but_not_edgenetds_own_writes() {
        use edgenetd::dataplane::route::{RouteEvent, RouteMonitor};
        let _net = Topology::with_veth("r0", "r1", R0);
        let sock = RouteSocket::open().unwrap();
        let mut monitor = RouteMonitor::open(PROTO, Some(sock.port())).unwrap();
        let routes: Vec<RouteSpec> = (0..5000)
            .map(|i| RouteSpec {
                via: gw("192.0.2.2"),
                ..r(&format!("10.{}.{}.0/24", 100 + i / 256, i % 256))
            })
            .collect();
        assert_eq!(add_all(&sock, &routes).failures, vec![]);
        sh("ip route add 10.250.0.0/16 via 192.0.2.2 proto static"); // foreign: not reported
        sh("ip route del 10.100.7.0/24 proto 190"); // someone else deletes an owned route
        // Link and address events (the veth pair's carrier and IPv6 link-local addresses
        // settle in the background) may come first; the first route event must be the delete.
        let next_route_event = async {
            loop {
                match monitor.next().await {
                    Some(RouteEvent::Link { .. } | RouteEvent::Address { .. }) => continue,
                    other => return other,
                }
            }
        };
        let event = smol::block_on(futures_lite::future::or(next_route_event, async {
            smol::Timer::after(std::time::Duration::from_secs(5)).await;
            None
        }));
        assert_eq!(event, Some(RouteEvent::OwnedRoute { removed: true }));
    }
}
