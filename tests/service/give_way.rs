//! The periodic full compare gives way to changes (issue 24): a change that waits stops it
//! and goes first, the compare runs again after it, drift is still found under a stream of
//! changes (the bound), and the compares that make the mirror trustworthy never give way.
//! Time is the sync's `now`, moved by hand, so nothing here waits for a period.

use crate::common;
use crate::netns_test;

use std::cell::Cell;
use std::time::{Duration, Instant};

use common::controller::load;
use common::shell::{sh, sh_status};
use edgenetd::controller::nft_core::NftCore;
use edgenetd::controller::service::model::{self, Model};
use edgenetd::controller::service::{Kernel, defer};
use edgenetd::dataplane::nft::ir::Family;
use edgenetd::dataplane::nft::{GenerationWatch, Nft, TableRef};

const PERIOD: Duration = Duration::from_secs(30);

const CONFIG: &str = r#"
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

/// The service model of `CONFIG` with web's second backend at `second`.
fn model_with(second: &str) -> Model {
    model::build(&load(&CONFIG.replace("10.0.2.2:8080", second)).services)
}

fn kernel(watch: &GenerationWatch) -> Kernel {
    let table = TableRef::new(Family::Inet, "edgenetd-service");
    Kernel::open(table, &NftCore::unwatched(watch.clone())).expect("nft socket")
}

/// The `backends4` map as listed; empty while there is no table (the daemon's first sync).
fn backends4() -> String {
    sh_status("nft list map inet edgenetd-service backends4").1
}

/// A `waiting` that says "a change waits" from its `after`-th look on (the compare stops
/// partway, not at its first look).
fn waits_after(after: u32) -> impl Fn() -> bool {
    let looks = Cell::new(0);
    move || {
        looks.set(looks.get() + 1);
        looks.get() > after
    }
}

netns_test! {
    fn a_waiting_change_stops_the_periodic_compare_goes_first_and_the_compare_runs_after_it() {
        let watch = GenerationWatch::new();
        let mut k = kernel(&watch);
        let t0 = Instant::now();
        k.sync(model_with("10.0.2.2:8080"), PERIOD, t0).unwrap();
        let due = t0 + PERIOD;
        // The compare falls due with nothing changed; partway through, a change waits: it
        // stops, having written nothing, and stays due.
        let r = k
            .sync_giving_way(model_with("10.0.2.2:8080"), PERIOD, due, &waits_after(3))
            .unwrap();
        assert!(r.summary.contains("full compare interrupted"), "{r:?}");
        assert_eq!((r.changes, k.last_writes), (0, 0));
        assert!(k.compare_put_off());
        // The change goes first, by delta, though the compare is due.
        let r = k
            .sync_giving_way(model_with("10.0.3.2:8080"), PERIOD, due, &|| true)
            .unwrap();
        assert!(r.summary.contains("services changed"), "{r:?}");
        assert!(backends4().contains("10.0.3.2 . 8080"), "{}", backends4());
        assert!(k.compare_put_off(), "the compare is still due");
        // Nothing waits any more: the compare runs to the end, finds the kernel as committed.
        let r = k
            .sync_giving_way(model_with("10.0.3.2:8080"), PERIOD, due, &|| false)
            .unwrap();
        assert!(r.summary.starts_with("full compare:"), "{r:?}");
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        assert!(!k.compare_put_off());
        // Verified: trusted again, however much waits.
        let r = k
            .sync_giving_way(model_with("10.0.3.2:8080"), PERIOD, due, &|| true)
            .unwrap();
        assert_eq!(r.summary, "no change");
    }
}

netns_test! {
    fn drift_is_repaired_within_the_bound_while_changes_keep_coming() {
        let watch = GenerationWatch::new();
        let mut k = kernel(&watch);
        let t0 = Instant::now();
        k.sync(model_with("10.0.2.2:8080"), PERIOD, t0).unwrap();
        // Deleted by hand, the commit taken for one of this process's (as the policy
        // controller's would be): only the periodic compare can find it.
        sh("nft delete element inet edgenetd-service services4 '{ 10.96.0.53 . udp . 53 }'");
        watch.record_own(Nft::open().unwrap().generation().unwrap());
        // A change every second from the time the compare falls due, each one waiting before
        // the sync even starts.
        let due = t0 + PERIOD;
        let mut put_off = 0;
        let mut repaired_at = None;
        for s in 0..PERIOD.as_secs() {
            let second = if s % 2 == 0 { "10.0.3.2:8080" } else { "10.0.2.2:8080" };
            let now = due + Duration::from_secs(s);
            let r = k.sync_giving_way(model_with(second), PERIOD, now, &|| true).unwrap();
            assert!(backends4().contains(&second.replace(':', " . ")), "{r:?}");
            if r.drift_repairs > 0 {
                assert!(r.summary.starts_with("full compare:"), "{r:?}");
                repaired_at = Some(now - due);
                break;
            }
            assert!(r.summary.contains("services changed"), "{r:?}");
            put_off += 1;
        }
        let repaired_at = repaired_at.expect("the deleted element was never repaired");
        assert_eq!(repaired_at, defer::bound(PERIOD), "repaired at the bound, not later");
        assert_eq!(put_off, defer::bound(PERIOD).as_secs(), "changes went first until then");
        assert!(!k.compare_put_off());
        let services4 = sh("nft list map inet edgenetd-service services4");
        assert!(services4.contains("10.96.0.53 . udp . 53"), "{services4}");
    }
}

netns_test! {
    fn the_compares_that_make_the_mirror_trustworthy_never_give_way() {
        let watch = GenerationWatch::new();
        let mut k = kernel(&watch);
        let t0 = Instant::now();
        k.sync(model_with("10.0.2.2:8080"), PERIOD, t0).unwrap();
        // Another process committed: the compare runs to the end though a change waits.
        sh("nft delete element inet edgenetd-service services4 '{ 10.96.0.53 . udp . 53 }'");
        let r = k
            .sync_giving_way(model_with("10.0.2.2:8080"), PERIOD, t0, &|| true)
            .unwrap();
        assert!(r.summary.starts_with("full compare:"), "{r:?}");
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        // A new process (nothing committed known) adopting the table: likewise, and the
        // change it brings is in.
        drop(k);
        let mut k = kernel(&watch);
        let r = k
            .sync_giving_way(model_with("10.0.3.2:8080"), PERIOD, t0, &|| true)
            .unwrap();
        assert!(r.summary.starts_with("full compare:"), "{r:?}");
        assert!(backends4().contains("10.0.3.2 . 8080"), "{}", backends4());
        assert!(!k.compare_put_off());
    }
}

/// The slowed compare's line as it starts (`fault::by_name::compare_pause`).
#[cfg(feature = "fault-injection")]
const SLOWED: &str = "fault: the full compare is slowed (fault-slow-compare*): started";

#[cfg(feature = "fault-injection")]
netns_test! {
    fn a_change_during_a_slow_periodic_compare_reaches_the_kernel_before_the_compare_ends() {
        use common::daemon::Daemon;
        use common::wait::wait_until;
        const STEP: Duration = Duration::from_secs(10);
        const DONE: &str = "edgenetd_service_full_compares_total";
        const INTERRUPTED: &str = "edgenetd_service_full_compares_interrupted_total";
        // A service of the reserved name makes every full compare pause 200 ms before each of
        // the table's 28 sets: over 5 s, where a change that waited for it would be seen.
        let config = format!(
            "[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n\
             [controller.service]\nperiod = \"2s\"\n{CONFIG}\n\
             [[service]]\nname = \"fault-slow-compare\"\naddress = \"10.96.0.99\"\nport = 80\n\
             backends = [\"10.0.9.2:80\"]\n"
        );
        let d = Daemon::start("service-give-way", &config);
        wait_until("the table", STEP, || backends4().contains("10.0.9.2 . 80"));
        wait_until("a periodic compare under way", STEP, || d.log().contains(SLOWED));
        let done = d.metric(DONE, &[]).unwrap();
        let interrupted = d.metric(INTERRUPTED, &[]).unwrap();
        d.reload(&config.replace("10.0.2.2:8080", "10.0.3.2:8080"));
        let took = wait_until("the change", STEP, || backends4().contains("10.0.3.2 . 8080"));
        // In before the compare under way (or the one started again after the change) ended:
        // the change did not wait for a compare.
        assert_eq!(d.metric(DONE, &[]), Some(done), "after {took:?}:\n{}", d.log());
        assert!(d.metric(INTERRUPTED, &[]).unwrap() > interrupted, "{}", d.log());
        // The drift check still happens: a compare runs to the end after the change.
        wait_until("a compare to the end", STEP * 2, || {
            d.metric(DONE, &[]).is_some_and(|n| n > done)
        });
        let log = d.log();
        assert!(log.contains("with the kernel interrupted after"), "{log}");
        assert!(log.contains("(the period, put off "), "{log}");
    }
}

#[cfg(feature = "fault-injection")]
netns_test! {
    fn under_a_stream_of_changes_the_slow_compare_still_runs_to_the_end_and_drift_is_repaired() {
        use common::daemon::Daemon;
        use common::wait::wait_until;
        const STEP: Duration = Duration::from_secs(10);
        const DONE: &str = "edgenetd_service_full_compares_total";
        // Period 2 s: the compare may give way for 1 s, then runs to the end (over 5 s).
        let config = format!(
            "[controller.policy]\nenabled = false\n[controller.route]\nenabled = false\n\
             [controller.service]\nperiod = \"2s\"\n{CONFIG}\n\
             [[service]]\nname = \"fault-slow-compare\"\naddress = \"10.96.0.99\"\nport = 80\n\
             backends = [\"10.0.9.2:80\"]\n"
        );
        let d = Daemon::start("service-give-way-stream", &config);
        wait_until("the table installed", STEP, || {
            d.metric(DONE, &[]).is_some_and(|n| n >= 1.0)
        });
        let done = d.metric(DONE, &[]).unwrap();
        let repaired = || {
            sh_status("nft list map inet edgenetd-service services4")
                .1
                .contains("10.96.0.53 . udp . 53")
        };
        let mut deleted = false;
        let started = Instant::now();
        let mut n = 0u32;
        // A change every 300 ms, never a pause as long as a compare.
        while !(deleted && repaired()) {
            let late = started.elapsed() > STEP * 4;
            assert!(!late, "no compare to the end, or no repair:\n{}", d.log());
            n += 1;
            let second = format!("10.0.{}.2:8080", 3 + n % 2);
            d.reload(&config.replace("10.0.2.2:8080", &second));
            std::thread::sleep(Duration::from_millis(300));
            if !deleted && d.metric(DONE, &[]).unwrap() > done {
                // Deleted by hand meanwhile: another process's commit, so a compare that
                // never gives way repairs it.
                sh("nft delete element inet edgenetd-service services4 \
                    '{ 10.96.0.53 . udp . 53 }'");
                deleted = true;
            }
        }
        let log = d.log();
        assert!(log.contains("(the period, put off "), "{log}");
        assert!(log.contains("(another process committed"), "{log}");
        assert!(d.metric("edgenetd_service_drift_repairs_total", &[]).unwrap() >= 1.0);
    }
}
