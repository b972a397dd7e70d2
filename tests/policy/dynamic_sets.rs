//! Dynamic sets (`[policy.set.X] dynamic = true`, issue 11 item 7) against the real kernel:
//! elements other programs add (as fail2ban does, with `nft add element`) block at once and
//! are kept by element syncs, full table rewrites, SIGHUP reloads and daemon restarts, and are
//! no drift; the config's own elements are still added and deleted; timeouts show in the
//! kernel as written.

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::controller::Driver;
use common::daemon::Daemon;
use common::policy::{HOME, lan_wan, planned_policy_nft};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::topology::failed;
use common::wait::wait_until;

const DYNAMIC: &str = "type = \"ipv4\"\nelements = [\"203.0.113.0/24\"]\ndynamic = true\ntimeout = \"1h\"\nsize = 1000\n";

/// HOME with its blocklist made dynamic.
fn dynamic_home() -> String {
    HOME.replace(
        "type = \"ipv4\"\nelements = [\"203.0.113.0/24\"]\n",
        DYNAMIC,
    )
}

fn blocklist() -> String {
    sh("nft list set inet edgenetd-policy blocklist")
}

/// What fail2ban does on a ban.
fn ban(addr: &str, timeout: &str) {
    sh(&format!(
        "nft add element inet edgenetd-policy blocklist '{{ {addr} timeout {timeout} }}'"
    ));
}

netns_test! {
    fn dynamic_set_renders_its_flags_timeout_and_size_and_keeps_others_elements() {
        let _t = lan_wan();
        let mut d = Driver::policy();
        d.sync(&dynamic_home()).unwrap();
        let set = blocklist();
        assert!(set.contains("flags interval,timeout"), "{set}");
        assert!(set.contains("timeout 1h"), "{set}");
        assert!(set.contains("size 1000"), "{set}");
        // The config's element never expires (no `expires` next to it).
        let own = set.lines().find(|l| l.contains("203.0.113.0/24")).unwrap();
        assert!(!own.contains("203.0.113.0/24 expires"), "{set}");
        // Another program's elements: one with its own timeout, one taking the default.
        ban("198.51.100.7", "10m");
        sh("nft add element inet edgenetd-policy blocklist '{ 198.51.100.9 }'");
        let set = blocklist();
        assert!(set.contains("198.51.100.7 timeout 10m expires"), "{set}");
        assert!(set.contains("198.51.100.9 expires"), "{set}");
        // A sync that finds them is no drift and writes nothing.
        let r = d.sync(&dynamic_home()).unwrap();
        assert_eq!((r.changes, r.drift_repairs), (0, 0), "{r:?}");
        // A config element added and one removed: an element sync; the others' stay.
        let more = dynamic_home().replace("[\"203.0.113.0/24\"]", "[\"192.0.2.200\"]");
        let r = d.sync(&more).unwrap();
        assert_eq!(r.drift_repairs, 0, "{r:?}");
        assert!(r.summary.contains("set elements"), "{r:?}");
        let set = blocklist();
        assert!(!set.contains("203.0.113.0/24"), "removed from the config: {set}");
        assert!(set.contains("192.0.2.200"), "{set}");
        assert!(set.contains("198.51.100.7 timeout 10m expires"), "{set}");
        assert!(set.contains("198.51.100.9 expires"), "{set}");
        // A structural change rewrites the table: the others' elements come back with their
        // timeouts and what was left of them.
        let structural = more.replace("forward_default = \"drop\"", "forward_default = \"reject\"");
        let r = d.sync(&structural).unwrap();
        assert!(r.summary.contains("table written"), "{r:?}");
        let set = blocklist();
        assert!(set.contains("198.51.100.7 timeout 10m expires 9m"), "{set}");
        assert!(set.contains("198.51.100.9 expires 59m"), "{set}");
        assert!(set.contains("192.0.2.200"), "{set}");
        // Deleting the config's own element is drift: put back at the next check.
        sh("nft delete element inet edgenetd-policy blocklist '{ 192.0.2.200 }'");
        std::thread::sleep(Duration::from_secs(11));
        let r = d.sync(&structural).unwrap();
        assert_eq!(r.drift_repairs, 1, "{r:?}");
        let set = blocklist();
        assert!(set.contains("192.0.2.200"), "{set}");
        assert!(set.contains("198.51.100.7 timeout 10m"), "{set}");
    }
}

netns_test! {
    fn a_config_prefix_over_an_element_others_added_replaces_it() {
        let _t = lan_wan();
        let mut d = Driver::policy();
        d.sync(&dynamic_home()).unwrap();
        ban("198.51.100.7", "10m");
        ban("198.51.100.77", "10m");
        // The interval set refuses the overlap an element sync would make; the rewrite
        // that follows leaves out the covered element and keeps the other.
        let cover = dynamic_home().replace(
            "[\"203.0.113.0/24\"]",
            "[\"203.0.113.0/24\", \"198.51.100.0/26\"]",
        );
        d.sync(&cover).unwrap();
        let set = blocklist();
        assert!(set.contains("198.51.100.0/26"), "{set}");
        assert!(!set.contains("198.51.100.7 "), "{set}");
        assert!(set.contains("198.51.100.77 timeout 10m"), "{set}");
    }
}

/// The wan host's answer from the port forward (wan -> router:8080 -> lan 10.0.0.10:80).
fn through_forward(t: &common::topology::Topology) -> String {
    t.connect(t.host("wan"), "tcp", "192.0.2.1", 8080)
}

/// Waits until the daemon's policy loop has synced more than `n` times.
fn wait_syncs(d: &Daemon, n: f64) -> f64 {
    let mut now = 0.0;
    wait_until("a policy sync", Duration::from_secs(20), || {
        now = d
            .metric(
                "edgenetd_controller_syncs_total",
                &[("controller", "policy")],
            )
            .unwrap_or(0.0);
        now > n
    });
    now
}

netns_test! {
    fn an_element_others_add_blocks_at_once_and_survives_reload_rewrite_and_restart() {
        let t = lan_wan();
        t.serve(t.host("lan"), "tcp", 80);
        let config = dynamic_home();
        let mut d = Daemon::start("dynset-0", &config);
        d.wait_ready();
        let n = wait_syncs(&d, 0.0);
        assert!(!failed(&through_forward(&t)), "the port forward works");
        // fail2ban bans the wan host: blocked at once.
        ban("192.0.2.2", "10m");
        let answer = through_forward(&t);
        assert!(failed(&answer), "banned, yet answered: {answer}");
        // SIGHUP with a config element added: an element sync keeps the ban.
        let reloaded = config.replace("[\"203.0.113.0/24\"]", "[\"203.0.113.0/24\", \"192.0.2.99\"]");
        d.reload(&reloaded);
        wait_until("the new config element", Duration::from_secs(20), || {
            blocklist().contains("192.0.2.99")
        });
        assert!(blocklist().contains("192.0.2.2 timeout 10m"), "{}", blocklist());
        assert!(failed(&through_forward(&t)), "the ban survives a reload");
        // SIGHUP with a structural change: the table is rewritten, the ban kept.
        let structural = format!(
            "{reloaded}\n[[policy.rule]]\nname = \"extra\"\nfrom = \"lan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [2222]\naction = \"accept\"\n"
        );
        d.reload(&structural);
        wait_until("the structural change", Duration::from_secs(20), || {
            sh("nft list chain inet edgenetd-policy input").contains("2222")
        });
        assert!(blocklist().contains("192.0.2.2 timeout 10m"), "{}", blocklist());
        assert!(failed(&through_forward(&t)), "the ban survives a rewrite");
        // No drift was counted for the others' element.
        wait_syncs(&d, n + 2.0);
        assert_eq!(d.metric("edgenetd_policy_drift_repairs_total", &[]), Some(0.0));
        // A restart (SIGTERM, then a new daemon): still banned.
        d.stop();
        drop(d);
        let d = Daemon::start("dynset-1", &structural);
        d.wait_ready();
        wait_syncs(&d, 0.0);
        assert!(blocklist().contains("192.0.2.2 timeout 10m"), "{}", blocklist());
        assert!(failed(&through_forward(&t)), "the ban survives a restart");
        // The config element removed from the config is deleted; the ban stays.
        d.reload(&structural.replace(", \"192.0.2.99\"", ""));
        wait_until("the removed config element", Duration::from_secs(20), || {
            !blocklist().contains("192.0.2.99")
        });
        assert!(blocklist().contains("192.0.2.2 timeout 10m"), "{}", blocklist());
        // Unbanned by its owner: through again.
        sh("nft delete element inet edgenetd-policy blocklist '{ 192.0.2.2 }'");
        assert!(!failed(&through_forward(&t)), "unbanned");
    }
}

netns_test! {
    fn the_plan_of_a_dynamic_set_is_nft_text_nft_accepts() {
        let dir = ScratchDir::with_files("dynset-plan", &[("edgenetd.toml", &dynamic_home())]);
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("flags interval,timeout\n"), "{text}");
        assert!(text.contains("timeout 1h\n"), "{text}");
        assert!(text.contains("size 1000\n"), "{text}");
    }
}

netns_test! {
    fn a_batch_at_a_stale_generation_is_refused_whole_and_one_at_the_current_applies() {
        use edgenetd::dataplane::nft::ir::Family;
        use edgenetd::dataplane::nft::{Batch, Nft, Op, TableRef};
        let mut nft = Nft::open().unwrap();
        let t = TableRef::new(Family::Inet, "genid");
        let stale = nft.generation().unwrap();
        sh("nft add table inet other");
        let mut batch = Batch::at_generation(stale);
        batch.table(&t, Op::Add);
        let err = nft.execute(batch).unwrap_err();
        assert!(err.is_restart(), "{err}");
        assert!(!nft.table_exists(&t).unwrap(), "nothing of a refused batch applies");
        let mut batch = Batch::at_generation(nft.generation().unwrap());
        batch.table(&t, Op::Add);
        nft.execute(batch).unwrap();
        assert!(nft.table_exists(&t).unwrap());
    }
}

netns_test! {
    fn a_lowered_size_keeps_the_longest_lived_elements_others_added_and_the_configs() {
        let _t = lan_wan();
        let mut d = Driver::policy();
        let sized = |n: u32| dynamic_home().replace("size = 1000", &format!("size = {n}"));
        d.sync(&sized(4)).unwrap();
        ban("198.51.100.1", "5m");
        ban("198.51.100.2", "50m");
        ban("198.51.100.3", "20m");
        let r = d.sync(&sized(2)).unwrap();
        assert!(r.summary.contains("table written"), "{r:?}");
        let set = blocklist();
        assert!(set.contains("size 2"), "{set}");
        assert!(set.contains("203.0.113.0/24"), "{set}");
        assert!(set.contains("198.51.100.2 timeout 50m"), "{set}");
        assert!(!set.contains("198.51.100.1 "), "{set}");
        assert!(!set.contains("198.51.100.3 "), "{set}");
    }
}
