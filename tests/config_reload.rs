//! Config reloads end to end, on the real binary, each test in its own network namespace
//! (every controller disabled: nothing touches the kernel).

mod common;

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
        d.write_config(&format!("{GOOD}\n[daemon\n"));
        d.signal("HUP");
        // The file watch notices the same edit once it has settled (the second load); a
        // second SIGHUP loads the same files yet again (the third).
        wait_metric(&d, "edgenetd_config_reloads_total", 2.0, Duration::from_secs(3));
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_reloads_total", 3.0, Duration::from_secs(3));
        assert_eq!(d.metric("edgenetd_config_reload_failures_total", &[]), Some(1.0), "{}", d.log());
        assert_eq!(d.metric("edgenetd_config_last_reload_successful", &[]), Some(0.0));
        assert!(d.log().contains("unchanged since they were rejected"), "{}", d.log());
        // A good load resets: the same bad edit made again counts again.
        d.write_config(GOOD);
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_last_reload_successful", 1.0, Duration::from_secs(3));
        d.write_config(&format!("{GOOD}\n[daemon\n"));
        d.signal("HUP");
        wait_metric(&d, "edgenetd_config_reload_failures_total", 2.0, Duration::from_secs(3));
    }
}
