//! A set's `loadfile` (fw4's ipset `loadfile`) in the running daemon: an edit of the data file
//! takes effect (the file watch follows it; SIGHUP reloads it), and the last good copy keeps the data file's text, so a start on a
//! broken data file runs the set as it was. Each test in its own network namespace.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::{Daemon, Options};
use common::scratch::ScratchDir;
use common::shell::{sh, wait_output_holds};
use common::wait::wait_until;

/// A firewall whose only set is filled from `data` (and a rule that uses it).
fn config(data: &std::path::Path) -> String {
    format!(
        r#"
[controller.service]
enabled = false
[controller.route]
enabled = false

[policy]
input = "accept"

[policy.set.blocked]
type = "ipv4"
elements = ["203.0.113.1"]
loadfile = "{}"

[[policy.rule]]
name = "drop-blocked"
from = "@blocked"
action = "drop"
"#,
        data.display()
    )
}

const KERNEL_SET: &str = "nft list set inet edgenetd-policy blocked";

/// The elements line(s) of the kernel's set, once it exists.
fn kernel_set() -> String {
    sh(&format!("{KERNEL_SET} 2>/dev/null || true"))
}

/// How long a reload may take on a loaded machine (the file watch waits for its events to
/// settle first).
const WAIT: Duration = Duration::from_secs(20);

fn wait_set_holds(what: &str) {
    wait_output_holds(KERNEL_SET, what, WAIT);
}

netns_test! {
    fn fw4_ipset_loadfile_an_edit_of_the_data_file_takes_effect_by_the_watch_and_by_sighup() {
        let data_dir = ScratchDir::new("loadfile-data");
        let data = data_dir.join("blocklist.txt");
        std::fs::write(&data, "# blocklist\n192.0.2.1\n").unwrap();
        let d = Daemon::start("loadfile-reload", &config(&data));
        d.wait_ready();
        wait_set_holds("192.0.2.1");
        assert!(kernel_set().contains("203.0.113.1"), "the config's own element: {}", kernel_set());
        // The data file changes; the config file does not. The file watch follows it.
        std::fs::write(&data, "# blocklist\n192.0.2.1\n198.51.100.7   # new\n").unwrap();
        wait_set_holds("198.51.100.7");
        // So does SIGHUP (`systemctl reload`).
        std::fs::write(&data, "192.0.2.1\n198.51.100.7\n198.51.100.8\n").unwrap();
        d.signal("HUP");
        wait_set_holds("198.51.100.8");
        // A bad line is a rejected reload naming the data file's line; the set stays.
        std::fs::write(&data, "192.0.2.1\n198.51.100.7\n198.51.100\n").unwrap();
        d.signal("HUP");
        wait_until("the rejected reload", WAIT, || {
            d.metric("edgenetd_config_reload_failures_total", &[]) == Some(1.0)
        });
        let want = format!("{}:3:1: invalid prefix `198.51.100`", data.display());
        assert!(d.log().contains(&want), "missing {want:?} in\n{}", d.log());
        // Another bad data file is another failure, not "unchanged since rejected": the
        // rejected content covers the data files.
        std::fs::write(&data, "192.0.2.1\n198.51.100.7\n198.51\n").unwrap();
        wait_until("a second rejected reload", WAIT, || {
            d.metric("edgenetd_config_reload_failures_total", &[]) == Some(2.0)
        });
        assert!(kernel_set().contains("198.51.100.7"), "{}", kernel_set());
    }
}

netns_test! {
    fn a_start_on_a_broken_data_file_runs_the_last_good_copy_of_its_set() {
        let data_dir = ScratchDir::new("loadfile-boot-data");
        let data = data_dir.join("blocklist.txt");
        std::fs::write(&data, "198.51.100.7\n").unwrap();
        let mut d = Daemon::start("loadfile-boot", &config(&data));
        d.wait_ready();
        wait_set_holds("198.51.100.7");
        let kept = d.dir().join("state/last-good.json");
        wait_until("the data file kept with the last good configuration", Duration::from_secs(10), || {
            std::fs::read_to_string(&kept).is_ok_and(|k| k.contains("198.51.100.7\\n"))
        });
        // A reboot: no table in the kernel, and the data file on disk is now broken.
        assert!(d.stop().success());
        sh("nft delete table inet edgenetd-policy");
        std::fs::write(&data, "not an address\n").unwrap();
        let d = d.start_again("loadfile-boot", Options::default());
        let ready = d.wait_ready();
        assert!(d.message(ready).contains("DEGRADED: running the last good configuration"), "{}", d.message(ready));
        // The kept text, not the disk: the set holds what it held.
        wait_set_holds("198.51.100.7");
    }
}
