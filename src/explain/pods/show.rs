//! The pod report as text (lines under the path) and as the `pods` object of `--json`.

use std::fmt::Write;

use serde_json::{Value as Json, json};

use crate::config::policy::pods::TierAction;

use super::{Decision, Outcome, PodReport, Side};

fn action_word(a: Option<TierAction>) -> &'static str {
    match a {
        Some(TierAction::Accept) => "Accept",
        Some(TierAction::Deny) => "Deny",
        Some(TierAction::Pass) => "Pass",
        None => "Accept or Pass",
    }
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Open => "open",
        Outcome::NotReached => "not reached",
        Outcome::Passed => "passed",
        Outcome::Dropped => "dropped",
    }
}

/// One decision as a person reads it.
fn decision_text(d: &Decision) -> String {
    match d {
        Decision::UnknownAddress => {
            "in this node's pod prefixes but no known pod's: dropped until its Pod is known".into()
        }
        Decision::Tier {
            tier,
            policy,
            action,
        } => format!(
            "{} tier: {policy} matches: {}",
            tier.word(),
            action_word(*action)
        ),
        Decision::Allowed(p) => format!("allowed by {p}"),
        Decision::Denied => "none of the policies isolating it allows it: dropped".into(),
        Decision::AuditAllowed(p) => format!("audit: allowed by {p}"),
        Decision::AuditWouldDrop => {
            "audit: none of the audit policies allows it: they would drop it (reported, passes)"
                .into()
        }
    }
}

fn selection(s: &Side) -> String {
    if !s.selected() {
        return "no policy selects it".into();
    }
    let parts = [
        ("admin tier", &s.admin),
        ("isolated by", &s.isolated_by),
        ("audit", &s.audited_by),
        ("baseline tier", &s.baseline),
    ];
    parts
        .iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(what, names)| format!("{what} {}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn side_lines(out: &mut String, label: &str, s: &Side) {
    let _ = writeln!(
        out,
        "{label:<12} {} {}: {}",
        s.direction.word(),
        s.end.shown(),
        selection(s)
    );
    for d in &s.decisions {
        let _ = writeln!(out, "{:<12}   {}", "", decision_text(d));
    }
    let end = match s.outcome {
        Outcome::Open => "not checked: passes",
        Outcome::NotReached => "not reached: the packet was dropped before",
        Outcome::Passed if s.decisions.is_empty() => "no rule decides: passes",
        Outcome::Passed => "passes",
        Outcome::Dropped => "dropped",
    };
    let _ = writeln!(out, "{:<12}   {}: {end}", "", s.direction.word());
}

/// The lines of `report` under the label `label` (`pods`, or `enforced`).
pub fn human(out: &mut String, label: &str, report: &PodReport) {
    let mut label = label;
    for s in [&report.egress, &report.ingress].into_iter().flatten() {
        side_lines(out, label, s);
        label = "";
    }
}

fn decision_json(d: &Decision) -> Json {
    match d {
        Decision::UnknownAddress => json!({"kind": "unknown address"}),
        Decision::Tier {
            tier,
            policy,
            action,
        } => json!({
            "kind": "tier", "tier": tier.word(), "policy": policy,
            "action": action.map(|a| action_word(Some(a))),
        }),
        Decision::Allowed(p) => json!({"kind": "allowed", "policy": p}),
        Decision::Denied => json!({"kind": "denied"}),
        Decision::AuditAllowed(p) => json!({"kind": "audit allowed", "policy": p}),
        Decision::AuditWouldDrop => json!({"kind": "audit would drop"}),
    }
}

fn side_json(s: &Side) -> Json {
    json!({
        "addr": s.end.addr.to_string(),
        "pod": s.end.pod,
        "admin": s.admin,
        "isolatedBy": s.isolated_by,
        "auditedBy": s.audited_by,
        "baseline": s.baseline,
        "decisions": s.decisions.iter().map(decision_json).collect::<Vec<_>>(),
        "outcome": outcome_word(s.outcome),
    })
}

/// The `pods` object: `egress` and `ingress`, each `null` when not reported.
pub fn json(report: &PodReport) -> Json {
    json!({
        "egress": report.egress.as_ref().map(side_json),
        "ingress": report.ingress.as_ref().map(side_json),
    })
}
