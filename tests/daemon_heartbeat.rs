//! The heartbeat contract end to end, on the real binary with a real notify socket
//! (fault-injection build: `[[test_controller]]` sets what syncs do). Each test runs in its
//! own network namespace, so its 127.0.0.1:9750 is its own.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::daemon::Daemon;

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
        let mut d = Daemon::start("ready", &cfg, LISTEN, Some(1_000_000));
        let ready = d.wait_notify(0, Duration::from_secs(5), |m| m.lines().any(|l| l == "READY=1"))
            .unwrap_or_else(|| panic!("no READY=1: {:?}\n{}", d.messages, d.log()));
        assert!(d.messages[..ready].iter().all(|m| !m.contains("WATCHDOG=1")), "no ping before READY: {:?}", d.messages);
        d.wait_notify(ready, Duration::from_secs(3), |m| m.lines().any(|l| l == "WATCHDOG=1"))
            .unwrap_or_else(|| panic!("no WATCHDOG=1 after READY: {:?}", d.messages));
        // Half the interval: about 4 pings in 2 s.
        let pings = d.count_notify_for(Duration::from_secs(2), |m| m.contains("WATCHDOG=1"));
        assert!(pings >= 3, "expected ~4 pings in 2 s at a 1 s watchdog, got {pings}");
        assert!(d.messages[ready].contains("STATUS=1/1 controllers in sync"), "{:?}", d.messages[ready]);
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
        let mut d = Daemon::start("failing", &cfg, LISTEN, Some(1_000_000));
        // Degraded, not fatal: READY comes after the first (failed) attempt.
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1 despite failing syncs");
        std::thread::sleep(Duration::from_millis(500));
        let first = d.metric("edgenetd_controller_sync_failures_total{controller=\"flaky\"}").unwrap();
        std::thread::sleep(Duration::from_millis(800));
        let later = d.metric("edgenetd_controller_sync_failures_total{controller=\"flaky\"}").unwrap();
        assert!(first >= 1.0 && later > first, "failures must rise: {first} -> {later}");
        assert_eq!(d.metric("edgenetd_controller_sync_last_success{controller=\"flaky\"}"), Some(0.0));
        let (status, doc) = healthz(&d);
        assert_eq!(status, 200, "a failing sync is not a wedged loop: {doc}");
        assert_eq!(doc["controllers"]["flaky"]["lastError"], "test flaky: gateway 192.0.2.1 unreachable");
        assert_eq!(d.get("/readyz").0, 503, "never succeeded: not ready");
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
        let mut d = Daemon::start("hang", &cfg, LISTEN, Some(400_000));
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        let hang_starts = Instant::now() + Duration::from_millis(300);
        let deadline = Instant::now() + Duration::from_secs(5);
        let doc = loop {
            let (status, doc) = healthz(&d);
            if status == 503 {
                break doc;
            }
            assert!(Instant::now() < deadline, "healthz never turned 503: {doc}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let took = Instant::now().saturating_duration_since(hang_starts);
        assert!(took < Duration::from_secs(3), "503 came {took:?} after the hang began; window is 1s");
        assert_eq!(doc["controllers"]["wedged"]["live"], false);
        assert_eq!(doc["controllers"]["ok"]["live"], true);
        assert_eq!(d.get("/livez").0, 503);
        // Pings every 200ms while live; none now.
        std::thread::sleep(Duration::from_millis(300));
        let pings = d.count_notify_for(Duration::from_millis(1500), |m| m.contains("WATCHDOG=1"));
        assert_eq!(pings, 0, "no WATCHDOG=1 while a controller is wedged: {:?}", &d.messages[d.messages.len().saturating_sub(8)..]);
        assert!(d.log().contains("NOT pinging systemd: controller not live: wedged"), "{}", d.log());
        assert_eq!(d.metric("edgenetd_controller_live{controller=\"wedged\"}"), Some(0.0));
    }
}

netns_test! {
    fn a_bad_config_on_sighup_keeps_the_old_state_and_a_good_one_is_taken() {
        let good = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"200ms\"\n");
        let mut d = Daemon::start("sighup", &good, LISTEN, None);
        let ready = d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        // Rewrite with a syntax error and send SIGHUP at once (before the file poll sees it).
        d.write_config(&format!("{good}\n[[test_controller]\n"));
        d.signal("HUP");
        let reloading = d
            .wait_notify(ready + 1, Duration::from_secs(3), |m| m.contains("RELOADING=1"))
            .unwrap_or_else(|| panic!("no RELOADING=1: {:?}", d.messages));
        assert!(d.messages[reloading].contains("MONOTONIC_USEC="), "{:?}", d.messages[reloading]);
        let after = d
            .wait_notify(reloading, Duration::from_secs(3), |m| m.contains("READY=1"))
            .expect("READY=1 after the rejected reload");
        assert!(d.messages[after].contains("config rejected: "), "STATUS shows the rejection: {:?}", d.messages[after]);
        assert!(d.messages[after].contains("edgenetd.toml:"), "with its place: {:?}", d.messages[after]);
        assert!(d.metric("edgenetd_config_reload_failures_total").unwrap() >= 1.0);
        assert_eq!(d.metric("edgenetd_config_last_reload_successful"), Some(0.0));
        let (status, doc) = healthz(&d);
        assert_eq!(status, 200);
        assert_eq!(doc["controllers"]["t"]["failures"], 0, "still running the old, good config");
        assert!(d.log().contains("the last good configuration stays in force"), "{}", d.log());
        // A good config that makes the controller fail proves the new snapshot is in force.
        let failing = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nmessage = \"now failing\"\nperiod = \"200ms\"\n");
        d.write_config(&failing);
        d.signal("HUP");
        let deadline = Instant::now() + Duration::from_secs(3);
        while healthz(&d).1["controllers"]["t"]["lastError"] != "test t: now failing" {
            assert!(Instant::now() < deadline, "the good reload was not taken");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(d.metric("edgenetd_config_last_reload_successful"), Some(1.0));
        let ts = d.metric("edgenetd_config_last_reload_success_timestamp_seconds").unwrap();
        assert!(ts > 1.7e9, "timestamp of the accepted reload: {ts}");
    }
}

netns_test! {
    fn a_config_file_change_is_noticed_within_two_seconds_without_sighup() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"5m\"\n");
        let mut d = Daemon::start("watch", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        assert_eq!(d.metric("edgenetd_config_reloads_total"), Some(0.0));
        // A new file in conf.d counts as a change too.
        std::fs::create_dir_all(d.dir.join("conf.d")).unwrap();
        let changed = Instant::now();
        std::fs::write(d.dir.join("conf.d/10-fail.toml"), "").unwrap();
        d.write_config(&config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nperiod = \"5m\"\n"));
        let deadline = changed + Duration::from_millis(2500);
        loop {
            let (_, doc) = healthz(&d);
            if doc["controllers"]["t"]["failures"].as_u64() >= Some(1) {
                break;
            }
            assert!(Instant::now() < deadline, "change not picked up within 2 s: {doc}\n{}", d.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(d.metric("edgenetd_config_reloads_total"), Some(1.0), "one change, one reload");
    }
}

netns_test! {
    fn sigterm_sends_stopping_and_exits_zero_even_with_a_wedged_controller() {
        let cfg = config("[[test_controller]]\nname = \"wedged\"\nbehaviour = \"hang\"\nhang = \"1h\"\nsucceed_first = 1\nperiod = \"100ms\"\n");
        let mut d = Daemon::start("sigterm", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        std::thread::sleep(Duration::from_millis(300));
        let from = d.messages.len();
        let sent = Instant::now();
        d.signal("TERM");
        let status = d.wait_exit(Duration::from_secs(5)).expect("exit within 5 s of SIGTERM");
        assert!(status.success(), "exit code {status}");
        assert!(sent.elapsed() < Duration::from_secs(5));
        d.wait_notify(from, Duration::from_millis(500), |m| m.contains("STOPPING=1")).expect("STOPPING=1");
    }
}

netns_test! {
    fn slow_huge_and_garbage_clients_never_stall_answers_to_others() {
        let cfg = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\nperiod = \"1s\"\n");
        let mut d = Daemon::start("http", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
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
        let mut d = Daemon::start("allow", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        assert_eq!(d.get("/metrics").0, 403, "127.0.0.1 is not in metrics_allow");
        let open = config("[[test_controller]]\nname = \"t\"\nbehaviour = \"succeed\"\n");
        let d2 = Daemon::start("open", &open.replace("9750", "9751"), "127.0.0.1:9751", None);
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
        let mut d = Daemon::start("promtool", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        let (status, body) = d.get("/metrics");
        assert_eq!(status, 200);
        for series in [
            "edgenetd_controller_sync_last_success{controller=\"never\"} 0",
            "edgenetd_controller_syncs_total{controller=\"never\"} ",
            "edgenetd_controller_sync_failures_total{controller=\"never\"} ",
            "edgenetd_controller_live{controller=\"never\"} 1",
            "edgenetd_controller_last_heartbeat_timestamp_seconds{controller=\"never\"} ",
            "edgenetd_controller_sync_duration_seconds_bucket{controller=\"never\",le=\"+Inf\"} ",
            "edgenetd_config_reloads_total 0",
            "edgenetd_config_reload_failures_total 0",
            "edgenetd_config_last_reload_successful 1",
            "edgenetd_config_last_reload_success_timestamp_seconds ",
            "edgenetd_build_info{version=\"",
            "edgenetd_process_resident_memory_bytes ",
            "edgenetd_process_cpu_seconds_total ",
            "edgenetd_process_open_fds ",
            "edgenetd_process_start_time_seconds ",
        ] {
            assert!(body.contains(series), "missing {series:?} in\n{body}");
        }
        let promtool = std::process::Command::new("promtool").arg("check").arg("metrics").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn();
        let Ok(mut promtool) = promtool else {
            let required = std::env::var_os("CI").is_some() || std::env::var("EDGENETD_KERNEL_TESTS").as_deref() == Ok("required");
            assert!(!required, "promtool is required here (apt-get install prometheus)");
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
        let mut d = Daemon::start("rename", &cfg, LISTEN, None);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        // Write a new file beside the old one and rename it over (vim, sed -i, most editors).
        let tmp = d.dir.join(".edgenetd.toml.swp");
        std::fs::write(&tmp, config("[[test_controller]]\nname = \"t\"\nbehaviour = \"fail\"\nperiod = \"5m\"\n")).unwrap();
        std::fs::rename(&tmp, d.dir.join("edgenetd.toml")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while healthz(&d).1["controllers"]["t"]["failures"].as_u64() < Some(1) {
            assert!(Instant::now() < deadline, "rename-over save not picked up within 2 s:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(d.metric("edgenetd_config_reloads_total"), Some(1.0), "one save, one reload");
    }
}
