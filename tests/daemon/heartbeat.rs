//! The heartbeat contract end to end, on the real binary with a real notify socket
//! (fault-injection build: `[[test_controller]]` sets what syncs do). Each test runs in its
//! own network namespace, so its 127.0.0.1:9750 is its own.

use crate::common;
use crate::netns_test;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Options};
use common::metrics;
use common::netns::skips_are_failures;
use common::wait::{wait_for, wait_until};

const LISTEN: &str = "127.0.0.1:9750";

fn config(test_controllers: &str) -> String {
    format!(
        r#"[daemon]
listen = "{LISTEN}"

[controller.policy]
enabled = false
[controller.service]
enabled = false
[controller.route]
enabled = false

{test_controllers}"#
    )
}

/// Starts the daemon on `LISTEN`, with a watchdog of `watchdog_usec` if given.
fn start(tag: &str, config: &str, watchdog_usec: Option<u64>) -> Daemon {
    let opts = Options {
        listen: LISTEN,
        watchdog_usec,
        ..Options::default()
    };
    Daemon::start_with(tag, config, opts)
}

fn controller(name: &str) -> [(&'static str, &str); 1] {
    [("controller", name)]
}

fn healthz(d: &Daemon) -> (u16, serde_json::Value) {
    let (status, body) = d.get("/healthz");
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("healthz JSON: {e}: {body}")),
    )
}

netns_test! {
    fn ready_then_watchdog_pings_while_every_controller_is_live() {
        let cfg = config("[[test_controller]]\nname = \"ok\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n");
        let d = start("ready", &cfg, Some(1_000_000));
        let ready = d.wait_ready();
        assert!(d.messages()[..ready].iter().all(|m| !m.contains("WATCHDOG=1")), "no ping before READY: {:?}", d.messages());
        d.wait_notify(ready, Duration::from_secs(3), |m| m.lines().any(|l| l == "WATCHDOG=1"))
            .unwrap_or_else(|| panic!("no WATCHDOG=1 after READY: {:?}", d.messages()));
        // Half the interval: about 4 pings in 2 s (the 2 s of counting are the test).
        let pings = d.count_notify_for(Duration::from_secs(2), |m| m.contains("WATCHDOG=1"));
        assert!(pings >= 3, "expected ~4 pings in 2 s at a 1 s watchdog, got {pings}");
        assert!(d.message(ready).contains("STATUS=1/1 controllers in sync"), "{:?}", d.message(ready));
        let (status, doc) = healthz(&d);
        assert_eq!(status, 200);
        assert_eq!(doc["controllers"]["ok"]["live"], true);
        assert_eq!(d.get("/readyz").0, 200);
    }
}

netns_test! {
    fn a_failing_controller_stays_healthy_while_failures_rise_and_last_success_stays_zero() {
        let cfg = config(
            "[[test_controller]]\nname = \"flaky\"\nbehaviour = \"fail\"\nmessage = \"gateway 192.0.2.1 unreachable\"\nperiod = \"200ms\"\nsync_budget = \"1s\"\n",
        );
        let d = start("failing", &cfg, Some(1_000_000));
        // Degraded, not fatal: READY comes after the first (failed) attempt.
        d.wait_ready();
        let failures = || d.metric("edgenetd_controller_sync_failures_total", &controller("flaky")).unwrap();
        let first = wait_for("the first failure to be counted", Duration::from_secs(2), || Some(failures()).filter(|&n| n >= 1.0));
        let later = wait_for("failures to rise", Duration::from_millis(800), || Some(failures()).filter(|&n| n > first));
        assert!(first >= 1.0 && later > first, "failures must rise: {first} -> {later}");
        assert_eq!(d.metric("edgenetd_controller_sync_last_success", &controller("flaky")), Some(0.0));
        let (status, doc) = healthz(&d);
        assert_eq!(status, 200, "a failing sync is not a wedged loop: {doc}");
        assert_eq!(doc["controllers"]["flaky"]["lastError"], "test flaky: gateway 192.0.2.1 unreachable");
        assert_eq!(d.get("/readyz").0, 503, "never succeeded: not ready");
        // Counting for 1.2 s is the test: pings go on while syncs fail.
        let pings = d.count_notify_for(Duration::from_millis(1200), |m| m.contains("WATCHDOG=1"));
        assert!(pings >= 1, "the watchdog keeps being fed while syncs fail");
    }
}

netns_test! {
    fn a_hanging_controller_turns_healthz_503_within_its_window_and_watchdog_pings_stop() {
        // Window = period + budget = 300ms + 700ms = 1s. The first sync succeeds (READY), the
        // second hangs for an hour.
        let cfg = config(
            "[[test_controller]]\nname = \"ok\"\nbehaviour = \"succeed\"\nperiod = \"200ms\"\n\n\
             [[test_controller]]\nname = \"wedged\"\nbehaviour = \"hang\"\nhang = \"1h\"\nsucceed_first = 1\nperiod = \"300ms\"\nsync_budget = \"700ms\"\n",
        );
        let d = start("hang", &cfg, Some(400_000));
        d.wait_ready();
        let hang_starts = Instant::now() + Duration::from_millis(300);
        let doc = wait_for("healthz to turn 503", Duration::from_secs(5), || {
            let (status, doc) = healthz(&d);
            (status == 503).then_some(doc)
        });
        let took = Instant::now().saturating_duration_since(hang_starts);
        assert!(took < Duration::from_secs(3), "503 came {took:?} after the hang began; window is 1s");
        assert_eq!(doc["controllers"]["wedged"]["live"], false);
        assert_eq!(doc["controllers"]["ok"]["live"], true);
        assert_eq!(d.get("/livez").0, 503);
        // Pings every 200ms while live; none after the supervisor saw the wedged loop. It
        // sends the STATUS= naming it NOT LIVE in that same round, before the ping it now
        // withholds, so every ping sent earlier arrived before that message.
        let stale = d
            .wait_notify(0, Duration::from_secs(2), |m| m.contains("wedged: NOT LIVE"))
            .unwrap_or_else(|| panic!("no STATUS= naming the wedged controller: {:?}", d.messages()));
        // Listening for 1.5 s is the test: no ping comes any more.
        std::thread::sleep(Duration::from_millis(1500));
        let messages = d.messages();
        let pings = messages[stale..].iter().filter(|m| m.contains("WATCHDOG=1")).count();
        assert_eq!(pings, 0, "no WATCHDOG=1 while a controller is wedged: {:?}", &messages[stale..]);
        assert!(d.log().contains("NOT pinging systemd: controller not live: wedged"), "{}", d.log());
        assert_eq!(d.metric("edgenetd_controller_live", &controller("wedged")), Some(0.0));
    }
}

netns_test! {
    fn a_bad_config_on_sighup_keeps_the_old_state_and_a_good_one_is_taken() {
        let good = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"200ms\"\n");
        let d = start("sighup", &good, None);
        let ready = d.wait_ready();
        // Rewrite with a syntax error and send SIGHUP at once (before the file poll sees it).
        d.reload(&format!("{good}\n[[test_controller]\n"));
        let reloading = d
            .wait_notify(ready + 1, Duration::from_secs(3), |m| m.contains("RELOADING=1"))
            .unwrap_or_else(|| panic!("no RELOADING=1: {:?}", d.messages()));
        assert!(d.message(reloading).contains("MONOTONIC_USEC="), "{:?}", d.message(reloading));
        let after = d
            .wait_notify(reloading, Duration::from_secs(3), |m| m.contains("READY=1"))
            .expect("READY=1 after the rejected reload");
        assert!(d.message(after).contains("config rejected: "), "STATUS shows the rejection: {:?}", d.message(after));
        assert!(d.message(after).contains("edgenetd.toml:"), "with its place: {:?}", d.message(after));
        assert!(d.metric("edgenetd_config_reload_failures_total", &[]).unwrap() >= 1.0);
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(0.0));
        let (status, doc) = healthz(&d);
        assert_eq!(status, 200);
        assert_eq!(doc["controllers"]["t"]["failures"], 0, "still running the old, good config");
        assert!(d.log().contains("the last good configuration stays in force"), "{}", d.log());
        // A good config that makes the controller fail proves the new snapshot is in force.
        let failing = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nmessage = \"now failing\"\nperiod = \"200ms\"\n");
        d.reload(&failing);
        wait_until("the good reload to be taken", Duration::from_secs(3), || {
            healthz(&d).1["controllers"]["t"]["lastError"] == "test t: now failing"
        });
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(1.0));
        let ts = d.metric("edgenetd_config_last_reload_success_timestamp_seconds", &[]).unwrap();
        assert!(ts > 1.7e9, "timestamp of the accepted reload: {ts}");
    }
}

netns_test! {
    fn a_config_file_change_is_noticed_within_two_seconds_without_sighup() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"5m\"\n");
        let d = start("watch", &cfg, None);
        d.wait_ready();
        assert_eq!(d.metric("edgenetd_config_reloads_total", &[]), Some(0.0));
        // A new file in conf.d counts as a change too.
        std::fs::create_dir_all(d.dir().join("conf.d")).unwrap();
        let changed = Instant::now();
        d.dir().write("conf.d/10-fail.toml", "");
        d.write_config(&config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nperiod = \"5m\"\n"));
        let left = Duration::from_millis(2500).saturating_sub(changed.elapsed());
        wait_until("the change to be picked up within 2 s", left, || {
            healthz(&d).1["controllers"]["t"]["failures"].as_u64() >= Some(1)
        });
        assert_eq!(d.metric("edgenetd_config_reloads_total", &[]), Some(1.0), "one change, one reload");
    }
}

netns_test! {
    fn sigterm_sends_stopping_and_exits_zero_even_with_a_wedged_controller() {
        let cfg = config("[[test_controller]]\nname = \"wedged\"\nbehaviour = \"hang\"\nhang = \"1h\"\nsucceed_first = 1\nperiod = \"100ms\"\n");
        let mut d = start("sigterm", &cfg, None);
        d.wait_ready();
        // Wedged: the loop beats every 100 ms between syncs, so a beat older than three
        // periods means the hanging sync has begun.
        wait_until("the hanging sync to begin", Duration::from_secs(5), || {
            healthz(&d).1["controllers"]["wedged"]["secondsSinceBeat"].as_f64() > Some(0.3)
        });
        let from = d.messages().len();
        let sent = Instant::now();
        let status = d.stop();
        assert!(status.success(), "exit code {status}");
        assert!(sent.elapsed() < Duration::from_secs(5));
        d.wait_notify(from, Duration::from_millis(500), |m| m.contains("STOPPING=1")).expect("STOPPING=1");
    }
}

netns_test! {
    fn slow_huge_and_garbage_clients_never_stall_answers_to_others() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n");
        let d = start("http", &cfg, None);
        d.wait_ready();
        // Slowloris: 20 connections that send half a request and then nothing.
        let mut slow: Vec<TcpStream> = (0..20)
            .map(|_| {
                let mut s = TcpStream::connect(LISTEN).unwrap();
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
                s
            })
            .collect();
        // A 1 MB header, sent from a thread (the server may stop reading it).
        let huge = std::thread::spawn(|| {
            if let Ok(mut s) = TcpStream::connect(LISTEN) {
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nX-Huge: ");
                let _ = s.write_all(&vec![b'a'; 1 << 20]);
                let _ = s.write_all(b"\r\n\r\n");
            }
        });
        // Garbage bytes.
        let mut junk = TcpStream::connect(LISTEN).unwrap();
        junk.write_all(&[0xff, 0x00, 0x13, 0x37, b'\r', b'\n', b'\r', b'\n']).unwrap();
        for _ in 0..10 {
            let t = Instant::now();
            let (status, _) = d.get("/livez");
            assert_eq!(status, 200);
            assert!(t.elapsed() < Duration::from_secs(1), "an answer took {:?} while bad clients were connected", t.elapsed());
        }
        for s in &mut slow {
            let _ = s.write_all(b"1");
        }
        huge.join().unwrap();
        assert_eq!(d.get("/healthz").0, 200);
    }
}

netns_test! {
    fn http_rejects_other_methods_unknown_paths_and_sources_outside_metrics_allow() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\n")
            .replace("[daemon]\n", "[daemon]\nmetrics_allow = [\"10.9.9.0/24\"]\n");
        let d = start("allow", &cfg, None);
        d.wait_ready();
        assert_eq!(d.get("/metrics").0, 403, "127.0.0.1 is not in metrics_allow");
        let open = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\n");
        let opts = Options { listen: "127.0.0.1:9751", ..Options::default() };
        let d2 = Daemon::start_with("open", &open.replace("9750", "9751"), opts);
        assert_eq!(d2.get("/nope").0, 404);
        let mut s = TcpStream::connect("127.0.0.1:9751").unwrap();
        s.write_all(b"POST /healthz HTTP/1.0\r\nContent-Length: 0\r\n\r\n").unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.0 405") || answer.starts_with("HTTP/1.1 405"), "{answer}");
        assert!(answer.contains("Allow: GET, HEAD"), "{answer}");
    }
}

netns_test! {
    fn metrics_output_passes_promtool_check_and_has_every_series_from_startup() {
        let cfg = config("[[test_controller]]\nname = \"never\"\nbehaviour = \"fail\"\n");
        let d = start("promtool", &cfg, None);
        d.wait_ready();
        let (status, body) = d.get("/metrics");
        assert_eq!(status, 200);
        let never: &[(&str, &str)] = &[("controller", "never")];
        let fault_injection = if cfg!(feature = "fault-injection") { "true" } else { "false" };
        let build: &[(&str, &str)] = &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("arch", std::env::consts::ARCH),
            ("fault_injection", fault_injection),
        ];
        for (name, labels, want) in [
            ("edgenetd_controller_sync_last_success", never, Some(0.0)),
            ("edgenetd_controller_syncs_total", never, None),
            ("edgenetd_controller_sync_failures_total", never, None),
            ("edgenetd_controller_live", never, Some(1.0)),
            ("edgenetd_controller_last_heartbeat_timestamp_seconds", never, None),
            ("edgenetd_controller_sync_duration_seconds_bucket", &[("controller", "never"), ("le", "+Inf")], None),
            ("edgenetd_config_reloads_total", &[], Some(0.0)),
            ("edgenetd_config_reload_failures_total", &[], Some(0.0)),
            ("edgenetd_config_last_reload_successful", &[], Some(1.0)),
            ("edgenetd_config_last_reload_success_timestamp_seconds", &[], None),
            ("edgenetd_build_info", build, Some(1.0)),
            ("process_resident_memory_bytes", &[], None),
            ("process_virtual_memory_bytes", &[], None),
            ("process_cpu_seconds_total", &[], None),
            ("process_open_fds", &[], None),
            ("process_max_fds", &[], None),
            ("process_start_time_seconds", &[], None),
            ("process_threads", &[], None),
        ] {
            let got = metrics::value(&body, name, labels);
            assert!(got.is_some(), "missing {name}{labels:?} in\n{body}");
            if want.is_some() {
                assert_eq!(got, want, "{name}{labels:?}");
            }
        }
        // The standard process names, unprefixed: no `edgenetd_process_*` beside them.
        let prefixed: Vec<_> = metrics::parse(&body).into_iter().filter(|s| s.name.starts_with("edgenetd_process_")).collect();
        assert!(prefixed.is_empty(), "process series under the old prefix: {prefixed:?}");
        let promtool = std::process::Command::new("promtool").arg("check").arg("metrics").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn();
        let Ok(mut promtool) = promtool else {
            assert!(!skips_are_failures(), "promtool is required here (apt-get install prometheus)");
            eprintln!("SKIPPED promtool check: promtool not installed");
            return;
        };
        std::io::Write::write_all(promtool.stdin.as_mut().unwrap(), body.as_bytes()).unwrap();
        let out = promtool.wait_with_output().unwrap();
        let complaints = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && complaints.trim().is_empty(), "promtool check metrics: {complaints}");
    }
}

netns_test! {
    fn an_editor_save_by_rename_is_noticed_and_loaded_once() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"5m\"\n");
        let d = start("rename", &cfg, None);
        d.wait_ready();
        // Write a new file beside the old one and rename it over (vim, sed -i, most editors).
        d.dir().replace("edgenetd.toml", &config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nperiod = \"5m\"\n"));
        wait_until("the rename-over save to be picked up within 2 s", Duration::from_secs(2), || {
            healthz(&d).1["controllers"]["t"]["failures"].as_u64() >= Some(1)
        });
        // Waiting 600 ms is the test: no second reload follows the one save.
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(d.metric("edgenetd_config_reloads_total", &[]), Some(1.0), "one save, one reload");
    }
}

/// `[[test_controller]]` validated into the snapshot once installed, each problem at its
/// place. In this binary, not the library's unit tests: installing changes every later
/// load of the process (the section becomes known), which raced the library's config
/// differential test (its two loads of one text saw different known sections).
#[test]
fn an_installed_test_controller_section_is_validated_with_each_problem_at_its_place() {
    use edgenetd::config::load_str;
    use edgenetd::fault::test_controller::{enabled, install, settings};
    install();
    let text = "[[test_controller]]\nname = \"ok\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n\
                [[test_controller]]\nname = \"off\"\nbehaviour = \"fail\"\nenabled = false\n";
    let desired = load_str(&[("main.toml", text)]).unwrap();
    assert_eq!(settings(&desired, "ok").period.as_secs(), 1);
    assert!(!settings(&desired, "off").enabled);
    let names: Vec<String> = enabled(&desired)
        .iter()
        .map(|c| edgenetd::controller::Controller::name(c).to_string())
        .collect();
    assert_eq!(names, ["ok"], "a disabled test controller is not started");
    let bad = "[[test_controller]]\nname = \"t\"\nbehaviour = \"sulk\"\nperiod = \"1ms\"\n";
    let e = load_str(&[("main.toml", bad)]).unwrap_err().rendered;
    assert!(
        e.contains("main.toml:3:13: error: unknown behaviour `sulk`"),
        "{e}"
    );
    let e = load_str(&[(
        "main.toml",
        "[[test_controller]]\nname = \"t\"\nbehaviour = \"hang\"\nhang = \"soon\"\n",
    )])
    .unwrap_err()
    .rendered;
    assert!(e.contains("main.toml:4:8: error:"), "{e}");
}
