//! The service controller's sync against the real kernel, without packets: restart adoption,
//! drift repair and counting, plan and cleanup. Each test runs in a fresh network namespace.

use std::sync::Arc;

use crate::common;
use crate::netns_test;

use common::controller::{Driver, load};
use common::scratch::ScratchDir;
use common::shell::{sh, sh_status};
use common::wait::wait_until;
use edgenetd::controller::service::{self, ServiceController};
use edgenetd::dataplane::nft::GenerationWatch;
use edgenetd::sync::trigger;

const CONFIG: &str = r#"
[[service]]
name = "web"
address = "10.96.0.10"
port = 80
backends = ["10.0.1.2:8080", "10.0.2.2:8080"]

[[service]]
name = "dns"
address = "fd96::53"
port = 53
protocol = "udp"
backends = ["[fd01::2]:53"]
masquerade = true
"#;

fn elements(map: &str) -> usize {
    let v: serde_json::Value =
        serde_json::from_str(&sh(&format!("nft -j list set inet edgenetd-service {map} 2>/dev/null || nft -j list map inet edgenetd-service {map}"))).unwrap();
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|o| o.get("map").or_else(|| o.get("set")))
        .and_then(|m| m.get("elem"))
        .map(|e| e.as_array().unwrap().len())
        .unwrap_or(0)
}

netns_test! {
    fn a_restarted_controller_adopts_an_intact_table_without_writing() {
        let d = load(CONFIG);
        let mut first = Driver::service();
        let r = first.sync_state(&d).unwrap();
        assert!(r.changes > 10, "{r:?}");
        drop(first);
        let mut second = Driver::service();
        let r = second.sync_state(&d).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        assert_eq!(second.controller.last_writes(), 0);
        assert_eq!(elements("backends4"), 2);
        assert_eq!(elements("backends6"), 1);
        assert_eq!(elements("masqvips6"), 1, "the masquerading address, once");
    }
}

netns_test! {
    fn hand_edits_are_repaired_and_counted() {
        let d = load(CONFIG);
        let mut c = Driver::service();
        c.sync_state(&d).unwrap();
        // A changed value, a foreign element and a deleted verdict.
        sh("nft delete element inet edgenetd-service backends4 '{ 10.96.0.10 . tcp . 80 . 0x00000001 }'");
        sh("nft add element inet edgenetd-service backends4 '{ 10.96.0.10 . tcp . 80 . 0x00000001 : 10.9.9.9 . 1 }'");
        sh("nft add element inet edgenetd-service backends4 '{ 10.96.0.77 . tcp . 80 . 0x00000001 : 10.9.9.9 . 1 }'");
        sh("nft delete element inet edgenetd-service services6 '{ fd96::53 . udp . 53 }'");
        let r = c.sync_state(&d).unwrap();
        assert_eq!(r.drift_repairs, 3, "{r:?}");
        assert_eq!(elements("backends4"), 2);
        assert_eq!(elements("services6"), 1);
        let listed = sh("nft list map inet edgenetd-service backends4");
        assert!(!listed.contains("10.9.9.9") && !listed.contains("10.96.0.77"), "{listed}");
        // Nothing left to do.
        let r = c.sync_state(&d).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        // A rule edited by hand: the structure is replaced.
        sh("nft flush chain inet edgenetd-service postrouting");
        let r = c.sync_state(&d).unwrap();
        assert!(r.drift_repairs >= 1, "{r:?}");
        assert!(sh("nft list chain inet edgenetd-service postrouting").contains("masquerade"));
    }
}

netns_test! {
    fn plan_shows_changes_and_cleanup_removes_only_our_table() {
        sh("nft add table inet other && nft add chain inet other c '{ type filter hook input priority 10; }'");
        let d = load(CONFIG);
        let text = smol::block_on(service::plan(&d)).unwrap();
        assert!(text.contains("+ table inet edgenetd-service"), "{text}");
        assert!(text.contains("+ service web 10.96.0.10:80/tcp: random over 2 slots: 10.0.1.2:8080×1 10.0.2.2:8080×1"), "{text}");
        assert!(text.contains("+ service dns [fd96::53]:53/udp: random over 1 slot: [fd01::2]:53×1, masquerade"), "{text}");
        let layout = &text[text.find("\ntable inet").unwrap() + 1..];
        let dir = ScratchDir::with_files("service-plan", &[("plan.nft", layout)]);
        let (ok, _, err) = sh_status(&format!("nft -c -f {}", dir.join("plan.nft").display()));
        assert!(ok, "plan layout does not load: {err}");
        let mut c = Driver::service();
        c.sync_state(&d).unwrap();
        let text = smol::block_on(service::plan(&d)).unwrap();
        assert!(text.contains("no changes"), "{text}");
        let changed = load(&CONFIG.replace("10.0.2.2:8080", "10.0.3.2:8080"));
        let text = smol::block_on(service::plan(&changed)).unwrap();
        assert!(text.contains("~ service web 10.96.0.10:80/tcp: delete 1, add 1 elements"), "{text}");
        let before = sh("nft list table inet other");
        let out = smol::block_on(service::cleanup(&d.daemon)).unwrap();
        assert!(out.contains("deleted table inet edgenetd-service"), "{out}");
        assert!(!sh("nft list tables").contains("edgenetd-service"));
        assert_eq!(sh("nft list table inet other"), before);
    }
}

netns_test! {
    fn no_services_means_no_table() {
        let mut c = Driver::service();
        let none = load("");
        let r = c.sync_state(&none).unwrap();
        assert_eq!(r.changes, 0);
        assert!(!sh("nft list tables").contains("edgenetd-service"));
        let r = c.sync_state(&none).unwrap();
        assert_eq!((r.changes, c.controller.last_writes()), (0, 0));
        c.sync_state(&load(CONFIG)).unwrap();
        assert_eq!(elements("backends4"), 2);
        let r = c.sync_state(&none).unwrap();
        assert_eq!(r.changes, 1, "{r:?}");
        assert!(!sh("nft list tables").contains("edgenetd-service"));
        c.sync_state(&load(CONFIG)).unwrap();
        assert_eq!(elements("backends4"), 2);
    }
}

netns_test! {
    fn a_foreign_commit_wakes_the_controller_and_a_policy_commit_costs_no_full_compare() {
        let (t, rx) = trigger();
        let watch = GenerationWatch::new();
        let mut c = Driver::with(ServiceController::new(t, watch.clone()), None);
        let d = load(CONFIG);
        c.sync_state(&d).unwrap();
        // Drain wake-ups caused so far. A wake-up carries nothing to tell it from a later one,
        // so the only observable end is silence: 1.5 s without one.
        while smol::block_on(futures_lite::future::or(async { rx.recv().await.map(|_| true) }, async {
            smol::Timer::after(std::time::Duration::from_millis(1500)).await;
            None
        })).is_some() {}
        // Another controller of this process commits (e.g. the policy table): no full compare.
        {
            use edgenetd::dataplane::nft::{Batch, Nft, Op, TableRef, ir::Family};
            let other = TableRef::new(Family::Inet, "edgenetd-policy");
            let mut nft = Nft::open().unwrap();
            let mut b = Batch::new();
            b.table(&other, Op::Add);
            // Every controller records its commits in the process's shared watch.
            watch.record_own(nft.execute(b).unwrap().generation);
        }
        let r = c.sync_state(&d).unwrap();
        assert_eq!(r.summary, "no change", "{r:?}");
        sh("nft delete table inet edgenetd-service");
        let woke = smol::block_on(futures_lite::future::or(async { rx.recv().await.is_some() }, async {
            smol::Timer::after(std::time::Duration::from_secs(5)).await;
            false
        }));
        assert!(woke, "the watch fires the trigger after a foreign commit");
        let r = c.sync_state(&d).unwrap();
        assert!(r.drift_repairs >= 1, "{r:?}");
        assert_eq!(elements("backends4"), 2);
    }
}

/// Waits (up to 3 s) until `n` threads are named `nft-watch` (a new thread names itself once
/// it runs; an ending one is gone once it noticed).
fn wait_for_watch_threads(n: usize) {
    wait_until(
        &format!("{n} nft-watch threads"),
        std::time::Duration::from_secs(3),
        || watch_threads() == n,
    );
}

/// Threads of this process named `nft-watch`.
fn watch_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "nft-watch")
        .count()
}

netns_test! {
    fn the_generation_watch_calls_back_on_foreign_commits_only_and_ends_with_its_last_clone() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;

        use edgenetd::dataplane::nft::{Batch, Nft, Op, TableRef, ir::Family};

        let watch = GenerationWatch::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        watch
            .subscribe(Duration::from_millis(100), move || {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        wait_for_watch_threads(1);
        // This process's commit, recorded in the watch: not foreign.
        let mut nft = Nft::open().unwrap();
        let mut batch = Batch::new();
        batch.table(&TableRef::new(Family::Inet, "ours"), Op::Add);
        watch.record_own(nft.execute(batch).unwrap().generation);
        // Nothing may happen here: four polls of the watch see only our commit.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(calls.load(Ordering::SeqCst), 0, "our own commit is not foreign");
        // Another process's commit.
        sh("nft add table inet theirs");
        wait_until("a callback after a foreign commit", Duration::from_secs(3), || {
            calls.load(Ordering::SeqCst) > 0
        });
        // The thread holds no strong reference: dropping the last clone ends it.
        let clone = watch.clone();
        drop(watch);
        // Nothing may happen here either: three polls later the thread still runs.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(watch_threads(), 1, "a clone keeps the watch alive");
        drop(clone);
        wait_for_watch_threads(0);
    }
}

/// `CONFIG` with every per-path part: cluster and service prefixes, off-cluster masquerade,
/// internal backends, source ranges, unserved ports.
fn everything() -> edgenetd::config::DesiredState {
    use edgenetd::config::service::{Backend, Masquerade};
    let mut d = load(CONFIG);
    let c = &mut d.services;
    c.cluster_cidrs = vec!["10.0.0.0/16".parse().unwrap(), "fd00::/12".parse().unwrap()];
    c.service_cidrs = vec![
        "10.96.0.0/16".parse().unwrap(),
        "fd96::/64".parse().unwrap(),
    ];
    let web = Arc::make_mut(&mut c.services[0]);
    web.masquerade = Masquerade::OffCluster;
    web.reject_unserved_ports = true;
    web.source_ranges = vec![
        "192.0.2.0/24".parse().unwrap(),
        "2001:db8::7/128".parse().unwrap(),
    ];
    Arc::make_mut(&mut c.services[1]).internal_backends = Some(vec![Backend {
        address: "[fd02::2]:53".parse().unwrap(),
        weight: 1,
    }]);
    d
}

netns_test! {
    fn a_restart_adopts_every_per_path_set_and_hand_edits_of_them_are_repaired() {
        let d = everything();
        let mut first = Driver::service();
        first.sync_state(&d).unwrap();
        drop(first);
        let mut c = Driver::service();
        let r = c.sync_state(&d).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        assert_eq!(c.controller.last_writes(), 0);
        for (set, n) in [("offcluster4", 1), ("unserved4", 1), ("owned4", 1), ("owned6", 1), ("fenced4", 1),
                         ("ranges4", 1), ("internal6", 1), ("shortcut6", 1), ("hairpin6", 2), ("masqvips6", 1)] {
            assert_eq!(elements(set), n, "{set}");
        }
        let cluster = sh("nft list set inet edgenetd-service cluster4");
        assert!(cluster.contains("10.0.0.0/16"), "{cluster}");
        // Shared, per-entry and prefix elements changed by hand.
        sh("nft delete element inet edgenetd-service hairpin6 '{ fd02::2 . fd02::2 }'");
        sh("nft delete element inet edgenetd-service offcluster4 '{ 10.96.0.10 . tcp . 80 }'");
        sh("nft add element inet edgenetd-service servicecidrs4 '{ 10.97.0.0/16 }'");
        sh("nft add element inet edgenetd-service owned4 '{ 10.96.0.77 }'");
        let r = c.sync_state(&d).unwrap();
        assert_eq!(r.drift_repairs, 4, "{r:?}");
        assert_eq!(elements("hairpin6"), 2);
        assert_eq!(elements("offcluster4"), 1);
        assert_eq!(elements("owned4"), 1);
        let cidrs = sh("nft list set inet edgenetd-service servicecidrs4");
        assert!(cidrs.contains("10.96.0.0/16") && !cidrs.contains("10.97.0.0"), "{cidrs}");
        let r = c.sync_state(&d).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
    }
}

netns_test! {
    fn plan_shows_the_per_path_parts() {
        let text = smol::block_on(service::plan(&everything())).unwrap();
        for want in [
            "+ service web 10.96.0.10:80/tcp: random over 2 slots: 10.0.1.2:8080×1 10.0.2.2:8080×1, masquerade off-cluster sources, sources {192.0.2.0/24} and this node, other ports rejected",
            "+ service dns [fd96::53]:53/udp: random over 1 slot: [fd01::2]:53×1; cluster and this node: random over 1 slot: [fd02::2]:53×1, masquerade",
            "elements = { 10.0.0.0/16 }",
            "elements = { 10.96.0.0/16 }",
            "192.0.2.128 . 10.96.0.10 . tcp . 80",
        ] {
            assert!(text.contains(want), "missing `{want}` in:\n{text}");
        }
    }
}
