//! The systemd notify socket on the real binary (fault-injection build: a
//! `[[test_controller]]` syncs every 50 ms, as under churn): a service manager that stops
//! reading its socket does not block the daemon, WATCHDOG=1 goes out at most once per half
//! watchdog interval however often syncs and reloads wake the supervisor, and an `@abstract`
//! NOTIFY_SOCKET is reached. Each test runs in its own network namespace.
#![cfg(feature = "fault-injection")]

use crate::common;
use crate::netns_test;

use std::time::{Duration, Instant};

use common::daemon::{Daemon, NotifySocket, Options};
use common::wait::wait_until;

const LISTEN: &str = "127.0.0.1:9750";

const CONFIG: &str = r#"[daemon]
listen = "127.0.0.1:9750"

[controller.policy]
enabled = false
[controller.service]
enabled = false
[controller.route]
enabled = false

[[test_controller]]
name = "churn"
behaviour = "succeed"
period = "100ms"
"#;

fn start(tag: &str, notify: NotifySocket) -> Daemon {
    let opts = Options {
        listen: LISTEN,
        // 1 s: a ping is due every 0.5 s.
        watchdog_usec: Some(1_000_000),
        notify,
        ..Options::default()
    };
    Daemon::start_with(tag, CONFIG, opts)
}

fn syncs(d: &Daemon) -> f64 {
    d.metric(
        "edgenetd_controller_syncs_total",
        &[("controller", "churn")],
    )
    .unwrap_or(0.0)
}

/// SIGHUPs `d` every 50 ms for `dur`.
fn reload_storm(d: &Daemon, dur: Duration) -> usize {
    let until = Instant::now() + dur;
    let mut n = 0;
    while Instant::now() < until {
        d.signal("HUP");
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    n
}

netns_test! {
    fn a_notify_socket_nobody_reads_does_not_block_the_daemon() {
        let d = start("unread", NotifySocket::Unread);
        wait_until("/readyz 200", Duration::from_secs(10), || d.get("/readyz").0 == 200);
        // Each reload sends RELOADING=1, READY=1 and STATUS=: the socket's queue (10
        // datagrams) is full long before the storm ends.
        let hups = reload_storm(&d, Duration::from_secs(2));
        let (before, reloads) = (syncs(&d), d.metric("edgenetd_config_reloads_total", &[]));
        let t = Instant::now();
        let (status, _) = d.get("/healthz");
        assert_eq!(status, 200);
        assert!(t.elapsed() < Duration::from_secs(1), "/healthz took {:?}", t.elapsed());
        d.signal("HUP");
        std::thread::sleep(Duration::from_secs(1));
        let after = syncs(&d);
        assert!(after >= before + 5.0, "syncs stalled: {before} then {after}");
        assert!(
            d.metric("edgenetd_config_reloads_total", &[]) > reloads,
            "a reload after the queue filled was not handled"
        );
        let dropped = d
            .metric("edgenetd_systemd_notifications_dropped_total", &[])
            .unwrap_or(0.0);
        assert!(dropped >= 10.0, "{hups} reloads, only {dropped} notifications dropped");
        let log = d.log();
        let lines = log.matches("notification(s) dropped").count();
        assert!(lines == 1, "drops are logged once a minute, got {lines} lines");
    }
}

netns_test! {
    fn watchdog_pings_stay_at_one_per_half_interval_under_a_reload_storm() {
        let d = start("storm", NotifySocket::Read);
        let ready = d.wait_ready();
        let from = d.messages().len().max(ready);
        let t = Instant::now();
        let hups = reload_storm(&d, Duration::from_secs(3));
        let elapsed = t.elapsed();
        let messages = d.messages();
        let pings = messages[from..]
            .iter()
            .filter(|m| m.lines().any(|l| l == "WATCHDOG=1"))
            .count();
        let reloads = messages[from..].iter().filter(|m| m.contains("RELOADING=1")).count();
        let most = (elapsed.as_secs_f64() / 0.5).floor() as usize + 1;
        println!("{hups} SIGHUPs, {reloads} reloads, {pings} pings in {elapsed:?} (at most {most})");
        assert!(reloads >= 10, "the storm did reload: {reloads}");
        assert!(pings <= most, "{pings} pings in {elapsed:?}: more than one per 0.5 s");
        assert!(pings >= 3, "the watchdog is still fed: {pings} pings in {elapsed:?}");
    }
}

netns_test! {
    fn an_abstract_notify_socket_gets_ready_and_the_pings() {
        let d = start("abstract", NotifySocket::Abstract);
        let ready = d.wait_ready();
        d.wait_notify(ready, Duration::from_secs(3), |m| m.lines().any(|l| l == "WATCHDOG=1"))
            .unwrap_or_else(|| panic!("no WATCHDOG=1 after READY: {:?}", d.messages()));
    }
}
