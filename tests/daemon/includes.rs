//! `[[policy.include]]` in the running daemon: an edit of the snippet file takes effect (the
//! file watch follows it), an edit nft refuses is a rejected reload at the include's place
//! that leaves the running table as it was, and a start on a refused snippet runs the last
//! good copy, whose kept snippet text is what nft compiles. Each test in its own namespace.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::daemon::{Daemon, Options};
use common::scratch::ScratchDir;
use common::shell::{sh, wait_output_holds};
use common::wait::wait_until;

/// A firewall whose input chain starts with the snippet at `path`.
fn config(path: &std::path::Path) -> String {
    format!(
        r#"
[controller.service]
enabled = false
[controller.route]
enabled = false

[policy]
input = "drop"

[[policy.include]]
path = "{}"
position = "chain-pre"
chain = "input"
"#,
        path.display()
    )
}

const INPUT_CHAIN: &str = "nft list chain inet edgenetd-policy input";

fn input_chain() -> String {
    sh(&format!("{INPUT_CHAIN} 2>/dev/null || true"))
}

const WAIT: Duration = Duration::from_secs(20);

fn wait_input_holds(what: &str) {
    wait_output_holds(INPUT_CHAIN, what, WAIT);
}

netns_test! {
    fn fw4_06_includes_a_refused_snippet_edit_is_a_rejected_reload_and_the_table_stays() {
        let dir = ScratchDir::new("includes-reload-data");
        let path = dir.join("ssh.nft");
        std::fs::write(&path, "tcp dport 2222 counter accept\n").unwrap();
        let d = Daemon::start("includes-reload", &config(&path));
        d.wait_ready();
        wait_input_holds("tcp dport 2222");
        // The file watch follows the snippet file.
        std::fs::write(&path, "tcp dport 2223 counter accept\n").unwrap();
        wait_input_holds("tcp dport 2223");
        let before = sh("nft list table inet edgenetd-policy");
        // nft refuses the next edit: a rejected reload naming the include and the line.
        std::fs::write(&path, "tcp dport 2224 counter accept\ntcp dport 2225 frobnicate\n").unwrap();
        d.signal("HUP");
        wait_until("the rejected reload", WAIT, || {
            d.metric("edgenetd_config_reload_failures_total", &[]).is_some_and(|n| n >= 1.0)
        });
        let log = d.log();
        assert!(log.contains(&format!("error: include {}", path.display())), "{log}");
        assert!(log.contains(&format!("{}:2:", path.display())), "{log}");
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(sh("nft list table inet edgenetd-policy"), before, "the table changed");
    }
}

netns_test! {
    fn fw4_06_includes_a_start_on_a_refused_snippet_runs_the_last_good_copy() {
        let dir = ScratchDir::new("includes-boot-data");
        let path = dir.join("ssh.nft");
        std::fs::write(&path, "tcp dport 2222 counter accept\n").unwrap();
        let mut d = Daemon::start("includes-boot", &config(&path));
        d.wait_ready();
        wait_input_holds("tcp dport 2222");
        let kept = d.dir().join("state/last-good.json");
        wait_until("the snippet kept with the last good configuration", Duration::from_secs(10), || {
            std::fs::read_to_string(&kept).is_ok_and(|k| k.contains("tcp dport 2222 counter accept"))
        });
        // A reboot: no table, and the snippet on disk is now one nft refuses.
        assert!(d.stop().success());
        sh("nft delete table inet edgenetd-policy");
        std::fs::write(&path, "tcp dport 2222 frobnicate\n").unwrap();
        let d = d.start_again("includes-boot", Options::default());
        let ready = d.wait_ready();
        assert!(d.message(ready).contains("DEGRADED: running the last good configuration"), "{}", d.message(ready));
        wait_input_holds("tcp dport 2222 counter packets");
        assert!(!input_chain().contains("frobnicate"), "{}", input_chain());
    }
}
