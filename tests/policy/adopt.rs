//! A restarted policy controller (a fresh one, with no snapshot) adopts the table an earlier
//! one wrote when it holds exactly the desired program, and writes nothing; a table edited
//! behind its back, written for another config, or written without the program's tag (by an
//! older edgenetd) is rewritten. Read back with the real `nft`.

use crate::common;
use crate::netns_test;

use common::controller::Driver;
use common::policy::HOME;
use common::policy::lan_wan;
use common::shell::{sh, sh_status};
use edgenetd::dataplane::nft::Nft;

fn generation() -> u32 {
    Nft::open().unwrap().generation().unwrap()
}

/// Writes the table with one controller, runs `edit`, then syncs a fresh controller: its
/// report and how many nf_tables commits that first sync made.
fn restart_after(edit: &str, config: &str) -> (edgenetd::sync::SyncReport, u32) {
    restart_after_with(
        || {
            if !edit.is_empty() {
                sh(edit);
            }
        },
        config,
    )
}

/// [`restart_after`] with an edit made by `edit`.
fn restart_after_with(edit: impl FnOnce(), config: &str) -> (edgenetd::sync::SyncReport, u32) {
    let first = Driver::policy().sync(HOME).unwrap();
    assert!(first.changes > 0, "{first:?}");
    edit();
    let before = generation();
    let report = Driver::policy().sync(config).unwrap();
    (report, generation().wrapping_sub(before))
}

/// A fresh controller's first sync commits nothing (the table as it is now is adopted).
fn adopted_by_a_fresh_controller() {
    let before = generation();
    let report = Driver::policy().sync(HOME).unwrap();
    assert_eq!(report.changes, 0, "{report:?}");
    assert_eq!(generation(), before, "no commit");
}

netns_test! {
    fn an_intact_table_is_adopted_with_zero_writes() {
        let (report, commits) = restart_after("", HOME);
        assert_eq!((report.changes, report.drift_repairs, commits), (0, 0, 0), "{report:?}");
        assert!(report.summary.contains("no change"), "{report:?}");
        let listed = sh("nft list table inet edgenetd-policy");
        assert!(listed.contains("ssh-from-lan"), "{listed}");
    }
}

netns_test! {
    fn a_tagged_table_with_an_edited_chain_is_rewritten_as_drift() {
        let (report, commits) = restart_after(
            "nft add rule inet edgenetd-policy input tcp dport 9999 accept",
            HOME,
        );
        assert!(report.changes > 0 && commits == 1, "{report:?} {commits}");
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(!input.contains("9999"), "{input}");
        adopted_by_a_fresh_controller();
    }
}

netns_test! {
    fn a_tagged_table_whose_chain_policy_was_changed_is_rewritten() {
        let (report, _) = restart_after(
            "nft 'chain inet edgenetd-policy input { policy accept; }'",
            HOME,
        );
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(input.contains("policy drop"), "{input}");
    }
}

netns_test! {
    fn a_tagged_table_with_a_replaced_rule_is_rewritten() {
        // A replaced rule keeps its place and comment but gets a new handle.
        let (report, _) = restart_after_with(
            || {
                let handle = sh("nft -a list chain inet edgenetd-policy input | \
                                 sed -n 's/.*ssh-from-lan.*# handle \\([0-9]*\\)$/\\1/p'");
                let handle = handle.lines().next().unwrap_or_default().trim().to_string();
                assert!(!handle.is_empty());
                sh(&format!(
                    "nft replace rule inet edgenetd-policy input handle {handle} \
                     tcp dport 22 accept comment ssh-from-lan"
                ));
            },
            HOME,
        );
        assert_eq!(report.drift_repairs, 1, "{report:?}");
    }
}

netns_test! {
    fn a_tagged_table_with_a_foreign_set_element_is_rewritten() {
        let (report, _) = restart_after(
            "nft add element inet edgenetd-policy blocklist '{ 198.51.100.7 }'",
            HOME,
        );
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let set = sh("nft list set inet edgenetd-policy blocklist");
        assert!(!set.contains("198.51.100.7"), "{set}");
    }
}

netns_test! {
    fn a_table_without_the_tag_is_rewritten_once_then_adopted() {
        // `nft -f` of the listing recreates the same rules without edgenetd's tag, as a table
        // an older edgenetd wrote.
        let (report, commits) = restart_after(
            "nft list table inet edgenetd-policy > /tmp/adopt-untagged.nft && \
             nft delete table inet edgenetd-policy && nft -f /tmp/adopt-untagged.nft",
            HOME,
        );
        assert!(report.changes > 0 && commits == 1, "{report:?} {commits}");
        assert_eq!(report.drift_repairs, 0, "not drift: {report:?}");
        adopted_by_a_fresh_controller();
    }
}

netns_test! {
    fn a_table_written_for_another_config_is_rewritten() {
        let other = HOME.replace("input = \"drop\"", "input = \"accept\"");
        let (report, commits) = restart_after("", &other);
        assert!(report.changes > 0 && commits == 1, "{report:?} {commits}");
        assert_eq!(report.drift_repairs, 0, "{report:?}");
        let input = sh("nft list chain inet edgenetd-policy input");
        assert!(input.contains("policy accept"), "{input}");
    }
}

/// Every object kind issue 11 added to a table: ct helper objects, a dynamic set, marks in
/// `mangle_prerouting`, an anonymous map for a port-forward range, SNAT and destination
/// address sets. Each takes handles from the table's counter.
const FEATURES: &str = r#"
[policy]
input = "drop"
forward_default = "drop"
helpers = ["ftp"]

[policy.zone.lan]
interfaces = ["veth-lan"]
networks = ["10.0.0.0/24"]
helpers = ["ftp"]

[policy.zone.wan]
interfaces = ["veth-wan"]
snat = "203.0.113.7"

[policy.set.banned]
type = "ipv4"
dynamic = true
elements = ["198.51.100.1"]

[[policy.rule]]
name = "drop-banned"
from = "@banned"
action = "drop"

[[policy.rule]]
name = "https-via-wan2"
from = "lan"
protocol = "tcp"
ports = [443]
set_mark = "0x10/0xff"

[[policy.rule]]
name = "dns-out"
from = "lan"
to = "wan"
protocol = "udp"
ports = [53]
to_addresses = ["9.9.9.9", "149.112.112.112"]
action = "accept"

[[policy.port_forward]]
name = "games"
from = "wan"
protocol = "udp"
port = "27015-27020"
to = "10.0.0.20:28015-28020"
"#;

/// Writes `config` with one controller, runs `edit`, and syncs a fresh controller against the
/// same config: its report and how many nf_tables commits that first sync made.
fn restart_with(config: &str, edit: &str) -> (edgenetd::sync::SyncReport, u32) {
    let first = Driver::policy().sync(config);
    if let Ok(first) = &first {
        assert!(first.changes > 0, "{first:?}");
    }
    if !edit.is_empty() {
        sh(edit);
    }
    let before = generation();
    let report = Driver::policy().sync(config).unwrap();
    (report, generation().wrapping_sub(before))
}

netns_test! {
    fn a_table_with_helpers_marks_ranges_snat_and_dynamic_sets_is_adopted() {
        let (report, commits) = restart_with(FEATURES, "");
        assert_eq!((report.changes, report.drift_repairs, commits), (0, 0, 0), "{report:?}");
        let listed = sh("nft list table inet edgenetd-policy");
        for want in ["ct helper", "mangle_prerouting", "snat ip to 203.0.113.7", "28015"] {
            assert!(listed.contains(want), "{want} missing:\n{listed}");
        }
    }
}

netns_test! {
    fn adoption_keeps_a_foreign_element_of_a_dynamic_set() {
        // fail2ban's ban: not the config's, not drift, and it must survive the restart.
        let (report, commits) = restart_with(
            FEATURES,
            "nft add element inet edgenetd-policy banned '{ 192.0.2.99 }'",
        );
        assert_eq!((report.changes, report.drift_repairs, commits), (0, 0, 0), "{report:?}");
        let set = sh("nft list set inet edgenetd-policy banned");
        assert!(set.contains("192.0.2.99") && set.contains("198.51.100.1"), "{set}");
    }
}

netns_test! {
    fn a_config_element_deleted_from_a_dynamic_set_is_drift() {
        let (report, commits) = restart_with(
            FEATURES,
            "nft add element inet edgenetd-policy banned '{ 192.0.2.99 }' && \
             nft delete element inet edgenetd-policy banned '{ 198.51.100.1 }'",
        );
        assert_eq!((report.drift_repairs, commits), (1, 1), "{report:?}");
        let set = sh("nft list set inet edgenetd-policy banned");
        assert!(set.contains("192.0.2.99") && set.contains("198.51.100.1"), "{set}");
    }
}

netns_test! {
    fn a_ct_helper_object_added_to_the_table_is_drift() {
        // An object takes a handle and is not in the program: adopting would keep it.
        let (report, commits) = restart_with(
            FEATURES,
            "nft add ct helper inet edgenetd-policy extra '{ type \"ftp\" protocol tcp; }'",
        );
        assert_eq!((report.drift_repairs, commits), (1, 1), "{report:?}");
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(!helpers.contains("extra") && helpers.contains("helper-ftp"), "{helpers}");
        adopted_by_a_fresh_controller_of(FEATURES);
    }
}

netns_test! {
    fn a_running_controller_sees_a_ct_helper_object_added_behind_its_back() {
        let mut driver = Driver::policy();
        driver.sync(FEATURES).unwrap();
        assert_eq!(driver.sync(FEATURES).unwrap().changes, 0);
        sh("nft add ct helper inet edgenetd-policy extra '{ type \"ftp\" protocol tcp; }'");
        let report = driver.sync(FEATURES).unwrap();
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let helpers = sh("nft list ct helpers table inet edgenetd-policy");
        assert!(!helpers.contains("extra"), "{helpers}");
    }
}

/// [`adopted_by_a_fresh_controller`] for `config`.
fn adopted_by_a_fresh_controller_of(config: &str) {
    let before = generation();
    let report = Driver::policy().sync(config).unwrap();
    assert_eq!(report.changes, 0, "{report:?}");
    assert_eq!(generation(), before, "no commit");
}

/// True when this kernel creates flowtables (probed in the test's namespace).
fn kernel_has_flowtables() -> bool {
    let (ok, _, _) = sh_status(
        "printf 'table inet probe-ft {\\n flowtable f { hook ingress priority 0; devices = { lo }; }\\n}\\n' | nft -f -",
    );
    sh_status("nft delete table inet probe-ft");
    ok
}

netns_test! {
    fn a_restart_with_flow_offload_adopts_or_only_retries_the_refused_flowtable() {
        // The flowtable hooks real devices: the zones' veths must exist.
        let _t = lan_wan();
        let cfg = FEATURES.replacen("[policy]\n", "[policy]\nflow_offload = true\n", 1);
        let first = Driver::policy().sync(&cfg);
        let before = generation();
        let restarted = Driver::policy().sync(&cfg);
        let commits = generation().wrapping_sub(before);
        if kernel_has_flowtables() {
            // The flowtable takes a handle like the rest: an intact table is adopted.
            first.unwrap();
            let report = restarted.unwrap();
            assert_eq!((report.changes, commits), (0, 0), "{report:?}");
            assert!(sh("nft list flowtables").contains("flowtable ft"));
            return;
        }
        // Refused here. The table was tagged as written without the flowtable group, which
        // is not the program asked for: the restarted controller rewrites it once, as the
        // retry every sync of a running controller makes for a refused group (the module may
        // be loaded later), never as drift, and reports the refusal again.
        let err = first.unwrap_err();
        assert_eq!(err.failures[0].object, "policy flow-offload", "{err}");
        let err = restarted.unwrap_err();
        assert_eq!(err.failures.len(), 1, "{err}");
        assert_eq!(err.failures[0].object, "policy flow-offload", "{err}");
        assert_eq!((err.report.drift_repairs, commits), (0, 1), "{err}");
        // And no more than that retry per sync, restarted or not.
        let mut running = Driver::policy();
        for _ in 0..3 {
            let before = generation();
            assert!(running.sync(&cfg).is_err());
            assert_eq!(generation().wrapping_sub(before), 1, "one write per sync");
        }
        let table = sh("nft list table inet edgenetd-policy");
        assert!(table.contains("helper-ftp") && !table.contains("flowtable"), "{table}");
    }
}
