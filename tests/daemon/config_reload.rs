//! Config reloads end to end, on the real binary, each test in its own network namespace
//! (every controller disabled: nothing touches the kernel).

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::Daemon;
use common::wait::wait_until;

const GOOD: &str = r#"[daemon]
listen = "127.0.0.1:9750"

[controller.policy]
enabled = false
[controller.service]
enabled = false
[controller.route]
enabled = false
"#;

/// How long a reload may take on a loaded machine (the file watch waits for its events to
/// settle first).
const WAIT: Duration = Duration::from_secs(10);

/// Waits until the (label-less) metric reaches `at_least`.
fn wait_metric(d: &Daemon, name: &str, at_least: f64, timeout: Duration) {
    wait_until(&format!("{name} >= {at_least}"), timeout, || {
        d.metric(name, &[]).unwrap_or(0.0) >= at_least
    });
}

netns_test! {
    /// Bug 8c: a SIGHUP and the file watch both loaded one rejected edit, and
    /// `edgenetd_config_reload_failures_total` counted it twice.
    fn a_rejected_edit_loaded_by_sighup_and_the_file_watch_counts_one_failure() {
        let d = Daemon::start("reload-8c", GOOD);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        // The file watch loads the edit first, on its own. (A SIGHUP sent right after the
        // edit would race the watch: one reload request pending absorbs the other, and the
        // edit may be loaded once or twice.)
        d.replace_config(&format!("{GOOD}\n[daemon\n"));
        wait_metric(&d, "edgenetd_config_reloads_total", 1.0, WAIT);
        assert_eq!(d.metric("edgenetd_config_reload_failures_total", &[]), Some(1.0));
        assert!(d.log().contains("config files changed; reloading"), "{}", d.log());
        // A SIGHUP loads the very same files again, and so does a second one.
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_reloads_total", 2.0, WAIT);
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_reloads_total", 3.0, WAIT);
        assert_eq!(d.metric("edgenetd_config_reload_failures_total", &[]), Some(1.0), "{}", d.log());
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(0.0));
        assert!(d.log().contains("unchanged since they were rejected"), "{}", d.log());
        // A good load resets: the same bad edit made again counts again.
        d.reload(GOOD);
        wait_metric(&d, "edgenetd_config_last_reload_successful", 1.0, WAIT);
        d.reload(&format!("{GOOD}\n[daemon\n"));
        wait_metric(&d, "edgenetd_config_reload_failures_total", 2.0, WAIT);
    }
}

netns_test! {
    /// The file watch was set up by its task's first run, after READY=1: an edit made in
    /// between was already in the watch's starting fingerprint and came before its inotify
    /// watch, so it was never reloaded.
    fn bug_an_edit_made_right_after_ready_was_missed_by_the_file_watch() {
        for round in 0..5 {
            let d = Daemon::start(&format!("reload-ready-{round}"), GOOD);
            d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
            d.replace_config(&format!("{GOOD}\n[daemon\n"));
            wait_metric(&d, "edgenetd_config_reload_failures_total", 1.0, WAIT);
        }
    }
}

netns_test! {
    /// A conf.d/*.toml symlink that dangles was filtered out by `is_file()`: the reload
    /// succeeded with one file fewer and said nothing.
    fn a_conf_d_symlink_that_dangles_is_a_rejected_reload_naming_it() {
        let d = Daemon::start("reload-dangling", GOOD);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        std::fs::create_dir_all(d.dir().join("conf.d")).unwrap();
        let link = d.dir().join("conf.d/50-routes.toml");
        std::os::unix::fs::symlink("/nonexistent/edgenetd-routes.toml", &link).unwrap();
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_reload_failures_total", 1.0, WAIT);
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(0.0));
        let want = format!("{}: cannot read: a symlink to /nonexistent/edgenetd-routes.toml", link.display());
        assert!(d.log().contains(&want), "missing {want:?} in\n{}", d.log());
    }
}

#[cfg(feature = "fault-injection")]
netns_test! {
    /// Bug: a reload of a config that is one 52 MB line parsed it (3.9 GB) and logged the whole
    /// line. It is refused by its size, in a short message, and the old config stays in force.
    fn bug_a_reload_of_a_52_mb_config_line_is_refused_and_the_old_config_stays() {
        let old = format!("{GOOD}\n[[test_controller]]\nname = \"old\"\nbehaviour = \"succeed\"\nperiod = \"200ms\"\n");
        let d = Daemon::start("reload-52mb", &old);
        d.wait_notify(0, Duration::from_secs(5), |m| m.contains("READY=1")).expect("READY=1");
        let mut line = String::with_capacity(52 << 20);
        line.push_str("k = [");
        while line.len() < 52_000_000 {
            line.push_str("1,");
        }
        line.push_str("1]\n");
        d.reload(&line);
        drop(line);
        wait_metric(&d, "edgenetd_config_reload_failures_total", 1.0, WAIT);
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(0.0));
        let log = d.log();
        assert!(log.contains("over the limit of 16,777,216 bytes (16 MiB) for one config file"), "{log}");
        // The daemon's own peak, since it started: the file was never held in memory.
        let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
        let peak_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM");
        assert!(peak_kib < 64 * 1024, "the daemon peaked at {peak_kib} KiB (limit 64 MiB)");
        assert!(log.len() < 20_000, "{} bytes of log", log.len());
        // The old config is in force: its controller still syncs.
        let body = d.get("/healthz").1;
        assert!(body.contains("\"old\""), "{body}");
        let synced = d.metric("edgenetd_controller_syncs_total", &[("controller", "old")]).unwrap_or(0.0);
        wait_until("the old config's controller still syncs", WAIT, || {
            d.metric("edgenetd_controller_syncs_total", &[("controller", "old")]).unwrap_or(0.0) > synced
        });
        let status = d.messages().into_iter().rev().find(|m| m.contains("STATUS=")).unwrap_or_default();
        assert!(status.contains("over the limit") && status.len() < 2000, "{} bytes of STATUS: {status:.2000}", status.len());
    }
}
