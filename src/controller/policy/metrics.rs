//! The policy controller's metrics: names, descriptions, and what one sync records.

use std::collections::BTreeMap;

use crate::dataplane::nft::RuleCounters;
use crate::sync::{SyncError, SyncReport};

/// Counter of drift repairs.
pub const DRIFT_REPAIRS: &str = "edgenetd_policy_drift_repairs_total";
/// Gauge of kernel rules in the policy table.
pub const RULES: &str = "edgenetd_policy_rules";

/// Counter of packets each `[[policy.rule]]` matched (label `rule`).
pub const RULE_PACKETS: &str = "edgenetd_policy_rule_packets_total";
/// Counter of bytes each `[[policy.rule]]` matched (label `rule`).
pub const RULE_BYTES: &str = "edgenetd_policy_rule_bytes_total";

/// Describes the policy metrics and sets them to their initial values.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DRIFT_REPAIRS,
        "Times the policy table was found changed or missing and was restored."
    );
    metrics::describe_gauge!(
        RULES,
        "Kernel rules in the policy table after the last successful write."
    );
    metrics::describe_counter!(
        RULE_PACKETS,
        "Packets a [[policy.rule]] matched, summed over its kernel rules, read at each policy sync (starts again from 0 when the table is rewritten)."
    );
    metrics::describe_counter!(
        RULE_BYTES,
        "Bytes of the packets a [[policy.rule]] matched, read with its packets."
    );
    metrics::counter!(DRIFT_REPAIRS).absolute(0);
    metrics::gauge!(RULES).set(0.0);
}

/// Records one sync's outcome: its drift repairs, and the rules after a successful one.
pub fn record(result: &Result<SyncReport, SyncError>, rules: usize) {
    let report = match result {
        Ok(r) => r,
        Err(e) => &e.report,
    };
    if report.drift_repairs > 0 {
        metrics::counter!(DRIFT_REPAIRS).increment(report.drift_repairs);
    }
    if result.is_ok() {
        metrics::gauge!(RULES).set(rules as f64);
    }
}

/// Packets and bytes per config rule name, from the kernel's rule counters: the counted
/// kernel rules labelled `rule NAME` summed (a config rule becomes one per chain, protocol
/// and address family), or, for a rule that only marks, those labelled `mark NAME` (or, for
/// one that only rewrites DSCP, `dscp NAME`: one of the two, as both count the same packets).
pub fn rule_totals(listed: &[RuleCounters]) -> BTreeMap<String, (u64, u64)> {
    let (mut rules, mut marks, mut dscps) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for c in listed.iter().filter(|c| c.counted) {
        let comment = c.comment.as_deref().unwrap_or("");
        let label = comment.rsplit_once(" #").map_or(comment, |(l, _)| l);
        let (map, name) = if let Some(n) = label.strip_prefix("rule ") {
            (&mut rules, n)
        } else if let Some(n) = label.strip_prefix("mark ") {
            (&mut marks, n)
        } else if let Some(n) = label.strip_prefix("dscp ") {
            (&mut dscps, n)
        } else {
            continue;
        };
        let sum: &mut (u64, u64) = map.entry(name.to_string()).or_default();
        sum.0 += c.packets;
        sum.1 += c.bytes;
    }
    for (name, sum) in marks.into_iter().chain(dscps) {
        rules.entry(name).or_insert(sum);
    }
    rules
}

/// Sets the per-rule series to what the kernel's counters say now.
pub fn record_rule_counters(listed: &[RuleCounters]) {
    for (rule, (packets, bytes)) in rule_totals(listed) {
        metrics::counter!(RULE_PACKETS, "rule" => rule.clone()).absolute(packets);
        metrics::counter!(RULE_BYTES, "rule" => rule).absolute(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(chain: &str, comment: &str, packets: u64, counted: bool) -> RuleCounters {
        RuleCounters {
            chain: chain.into(),
            comment: Some(comment.into()),
            packets,
            bytes: packets * 100,
            counted,
        }
    }

    #[test]
    fn a_rules_kernel_rules_are_summed_and_marks_count_only_for_rules_that_only_mark() {
        let got = rule_totals(&[
            listed("input", "rule ssh #0000aaaa", 2, true),
            listed("forward", "rule ssh #0000bbbb", 3, true),
            // Its log rule has no counter.
            listed("input", "rule ssh #0000cccc", 0, false),
            listed("mangle_prerouting", "mark ssh #0000dddd", 7, true),
            listed("mangle_prerouting", "mark voip #0000eeee", 4, true),
            listed("mangle_prerouting", "dscp voip #0000ffff", 4, true),
            listed("mangle_forward", "dscp video #00001111", 5, true),
            listed("input", "log-drops wan #0000ffff", 9, true),
        ]);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got["ssh"], (5, 500), "its filter rules, not its mark");
        assert_eq!(
            got["voip"],
            (4, 400),
            "a rule that only marks: its mark rules, not its mark and its DSCP rules summed"
        );
        assert_eq!(got["video"], (5, 500), "a rule that only rewrites DSCP");
    }
}
