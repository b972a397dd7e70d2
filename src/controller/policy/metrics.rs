//! The policy controller's metrics: names, descriptions, and what one sync records.

use crate::sync::{SyncError, SyncReport};

/// Counter of drift repairs.
pub const DRIFT_REPAIRS: &str = "edgenetd_policy_drift_repairs_total";
/// Gauge of kernel rules in the policy table.
pub const RULES: &str = "edgenetd_policy_rules";

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
