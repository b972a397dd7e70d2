//! Rules that only count or log (fw4's rules without `target`), `log_limit` on rules and
//! zones, and the per-rule Prometheus counters (issue 23 item 4), with real packets. Tests
//! that port a case of openwrt/firewall4's `tests/01_configuration/01_ruleset`,
//! `tests/02_zones/08_log_limit` or `tests/03_rules/11_log` are named after it.

use crate::common;
use crate::netns_test;

use std::collections::BTreeMap;
use std::time::Duration;

use common::controller::Driver;
use common::daemon::{Daemon, Options};
use common::policy::{HOME, lan_wan, planned_policy_nft};
use common::scratch::ScratchDir;
use common::shell::sh;
use common::wait::wait_until;
use edgenetd::controller::policy::metrics::rule_totals;
use edgenetd::dataplane::nft::{Nft, TableRef, ir::Family};

/// `HOME` with `rules` (TOML `[[policy.rule]]` entries) before its `ssh-from-lan` rule.
fn home_with_rules_before_ssh(rules: &str) -> String {
    let at = "[[policy.rule]]\nname = \"ssh-from-lan\"";
    assert!(HOME.contains(at));
    HOME.replace(at, &format!("{rules}\n{at}"))
}

/// (packets, bytes) per config rule, read as the controller reads them after a sync.
fn totals() -> BTreeMap<String, (u64, u64)> {
    let mut nft = Nft::open().unwrap();
    let t = TableRef::new(Family::Inet, "edgenetd-policy");
    rule_totals(&nft.list_rule_counters(&t).unwrap())
}

/// The line of `chain`'s listing that holds `needle`.
fn line_with(chain: &str, needle: &str) -> String {
    let text = sh(&format!("nft list chain inet edgenetd-policy {chain}"));
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
        .trim()
        .to_string()
}

const COUNT_SSH: &str = r#"
[[policy.rule]]
name = "count-ssh"
from = "lan"
to = "self"
protocol = "tcp"
ports = [22]
"#;

netns_test! {
    fn fw4_01_ruleset_a_rule_without_target_counts_and_a_later_rule_accepts() {
        let t = lan_wan();
        let mut d = Driver::policy();
        d.sync(&home_with_rules_before_ssh(COUNT_SSH)).unwrap();
        t.serve(t.router(), "tcp", 22);
        // One connection: its SYN is new and goes through the rules; the rest of it is
        // established and accepted before them.
        assert_eq!(t.connect(t.host("lan"), "tcp", "10.0.0.1", 22), "10.0.0.2");
        let line = line_with("input", "count-ssh");
        assert!(line.contains("counter packets 1 "), "{line}");
        assert!(!line.contains("accept") && !line.contains("drop"), "no verdict: {line}");
        let got = totals();
        assert_eq!(got["count-ssh"].0, 1, "{got:?}");
        assert_eq!(got["ssh-from-lan"].0, 1, "the packet went on to the accepting rule: {got:?}");
        assert_eq!(got["count-ssh"].1, got["ssh-from-lan"].1, "the same SYN: {got:?}");
    }
}

netns_test! {
    fn fw4_11_log_a_rule_without_target_counts_and_logs_with_its_name_as_prefix() {
        let t = lan_wan();
        let mut d = Driver::policy();
        let rule = COUNT_SSH.replace("name = \"count-ssh\"\n", "name = \"log-ssh\"\nlog = true\n");
        d.sync(&home_with_rules_before_ssh(&rule)).unwrap();
        t.serve(t.router(), "tcp", 22);
        assert_eq!(t.connect(t.host("lan"), "tcp", "10.0.0.1", 22), "10.0.0.2");
        let line = line_with("input", "log-ssh");
        assert!(
            line.contains("counter packets 1 ") && line.contains("limit rate 10/minute log prefix \"log-ssh: \""),
            "{line}"
        );
        assert!(!line.contains("accept"), "no verdict: {line}");
        assert_eq!(totals()["log-ssh"].0, 1);
    }
}

netns_test! {
    fn fw4_11_log_a_rules_log_limit_sets_the_rate_of_its_log() {
        let _t = lan_wan();
        let mut d = Driver::policy();
        let cfg = HOME.replace(
            "name = \"ssh-from-lan\"\n",
            "name = \"ssh-from-lan\"\nlog = true\nlog_limit = \"5/minute\"\n",
        );
        d.sync(&cfg).unwrap();
        let line = line_with("input", "log prefix \"ssh-from-lan: \"");
        assert!(line.contains("limit rate 5/minute log prefix"), "{line}");
    }
}

netns_test! {
    fn fw4_08_log_limit_a_zones_log_limit_rates_its_drop_logs_and_its_rules_logs() {
        let _t = lan_wan();
        let mut d = Driver::policy();
        let zone = "[policy.zone.wan]\ninterfaces = [\"veth-wan\"]\nmasquerade = true\n";
        assert!(HOME.contains(zone));
        let cfg = HOME.replace(
            zone,
            &format!("{zone}log_drops = true\nlog_limit = \"1/minute\"\n"),
        ) + r#"
[[policy.rule]]
name = "log-wan-http"
from = "wan"
to = "self"
protocol = "tcp"
ports = [80]
log = true

[[policy.rule]]
name = "log-wan-dns"
from = "wan"
to = "self"
protocol = "udp"
ports = [53]
log = true
action = "drop"

[[policy.rule]]
name = "log-wan-own"
from = "wan"
to = "self"
protocol = "udp"
ports = [123]
log_limit = "3/hour"
action = "drop"

[[policy.rule]]
name = "log-to-wan"
to = "wan"
protocol = "tcp"
ports = [8443]
log = true

[[policy.rule]]
name = "log-self-to-wan"
from = "self"
to = "wan"
protocol = "tcp"
ports = [8444]
log = true

[[policy.rule]]
name = "log-lan-http"
from = "lan"
to = "self"
protocol = "tcp"
ports = [80]
log = true
"#;
        d.sync(&cfg).unwrap();
        // One named limit object, the zone's, shared by every log of the wan zone: its
        // rules' and its drop logs (so the zone logs at most 1 a minute in all).
        let table = sh("nft list table inet edgenetd-policy");
        assert!(table.contains("limit wan.log_limit {\n\t\trate 1/minute"), "{table}");
        let shared = "limit name \"wan.log_limit\" log prefix";
        for needle in ["log prefix \"log-wan-http: \"", "log prefix \"log-wan-dns: \"", "log prefix \"drop wan input: \""] {
            let line = line_with("input", needle);
            assert!(line.contains(shared), "{line}");
        }
        assert!(line_with("forward", "drop wan forward").contains(shared));
        // A forwarded rule from anywhere to the zone, and the router's own traffic to it.
        assert!(line_with("forward", "log prefix \"log-to-wan: \"").contains(shared));
        assert!(line_with("output", "log prefix \"log-self-to-wan: \"").contains(shared));
        // A rule's own log_limit wins; another zone's rules keep the default rate.
        assert!(line_with("input", "log prefix \"log-wan-own: \"").contains("limit rate 3/hour log"));
        assert!(line_with("input", "log prefix \"log-lan-http: \"").contains("limit rate 10/minute log"));
    }
}

netns_test! {
    fn per_rule_counters_are_prometheus_series_with_the_packets_sent() {
        const LISTEN: &str = "127.0.0.1:19763";
        let t = lan_wan();
        let rules = r#"
[[policy.rule]]
name = "count-ping"
from = "lan"
to = "self"
protocol = "icmp"
icmp_types = ["echo-request"]
"#;
        let policy = home_with_rules_before_ssh(rules);
        let cfg = format!(
            "[daemon]\nlisten = \"{LISTEN}\"\n[controller.policy]\nperiod = \"1s\"\n[controller.route]\nenabled = false\n[controller.service]\nenabled = false\n{policy}"
        );
        let opts = Options { listen: LISTEN, ..Options::default() };
        let mut daemon = Daemon::start_with("rule-counters", &cfg, opts);
        let series = |name: &str, rule: &str| daemon.metric(name, &[("rule", rule)]);
        wait_until("the policy table and its rule series", Duration::from_secs(15), || {
            series("edgenetd_policy_rule_packets_total", "ping-from-lan") == Some(0.0)
        });
        // Three pings, each its own ICMP id and so its own (new) connection.
        for _ in 0..3 {
            t.host("lan").sh("ping -c 1 -W 2 10.0.0.1");
        }
        wait_until("the counters of 3 pings", Duration::from_secs(15), || {
            series("edgenetd_policy_rule_packets_total", "ping-from-lan") == Some(3.0)
        });
        assert_eq!(series("edgenetd_policy_rule_packets_total", "count-ping"), Some(3.0));
        // An echo request of ping's default size is 84 bytes at the IP layer.
        assert_eq!(series("edgenetd_policy_rule_bytes_total", "count-ping"), Some(3.0 * 84.0));
        assert_eq!(series("edgenetd_policy_rule_packets_total", "dns-from-lan"), Some(0.0));
        daemon.stop();
    }
}

netns_test! {
    fn the_plan_of_count_only_rules_and_log_limits_is_nft_text_nft_accepts() {
        let rules = COUNT_SSH.to_string()
            + "\n[[policy.rule]]\nname = \"log-ssh\"\nfrom = \"lan\"\nlog_limit = \"5/minute\"\n";
        let cfg = home_with_rules_before_ssh(&rules)
            .replace("masquerade = true\n", "masquerade = true\nlog_drops = true\nlog_limit = \"2/second\"\n");
        let dir = ScratchDir::with_files("count-log-plan", &[("edgenetd.toml", &cfg)]);
        let (text, _) = planned_policy_nft(&dir);
        assert!(text.contains("limit rate 5/minute burst 5 packets log prefix \"log-ssh: \""), "{text}");
        assert!(text.contains("limit wan.log_limit {\n\t\trate 2/second burst 5 packets\n\t}"), "{text}");
        assert!(text.contains("limit name \"wan.log_limit\" log prefix \"drop wan input: \""), "{text}");
    }
}

/// `HOME` with the wan zone logging its drops at a `log_limit` of 1 a minute.
fn home_with_wan_log_limit() -> String {
    HOME.replace(
        "masquerade = true\n",
        "masquerade = true\nlog_drops = true\nlog_limit = \"1/minute\"\n",
    )
}

netns_test! {
    fn a_table_with_a_zone_log_limit_is_adopted_and_a_new_rate_rewrites_it() {
        let _t = lan_wan();
        let cfg = home_with_wan_log_limit();
        assert!(Driver::policy().sync(&cfg).unwrap().changes > 0);
        let mut d = Driver::policy();
        let report = d.sync(&cfg).unwrap();
        assert_eq!((report.changes, report.drift_repairs), (0, 0), "{report:?}");
        // Another rate in the config rewrites the object.
        d.sync(&cfg.replace("log_limit = \"1/minute\"", "log_limit = \"2/minute\"")).unwrap();
        let limits = sh("nft list limits table inet edgenetd-policy");
        assert!(limits.contains("rate 2/minute"), "{limits}");
    }
}

netns_test! {
    fn a_limit_object_added_behind_its_back_is_drift_and_removed() {
        let _t = lan_wan();
        let cfg = home_with_wan_log_limit();
        let mut d = Driver::policy();
        d.sync(&cfg).unwrap();
        sh("nft add limit inet edgenetd-policy extra '{ rate 1/second; }'");
        let report = d.sync(&cfg).unwrap();
        assert_eq!(report.drift_repairs, 1, "{report:?}");
        let limits = sh("nft list limits table inet edgenetd-policy");
        assert!(!limits.contains("extra") && limits.contains("wan.log_limit"), "{limits}");
    }
}
