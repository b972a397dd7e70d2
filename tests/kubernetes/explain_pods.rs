//! `edgenetd explain` for a pod pair (issue 26, item 3) against the real daemon fed by the
//! fake API server: explain reads the cluster state the daemon cached, and for every case
//! its verdict is the one real packets meet; it names the policies that decide, in enforce
//! and in audit, and its answer "with every audit policy enforced" is what the kernel does
//! once the audit policy is switched to enforce.
//!
//! The lab is `pod_guard`'s: the node's pods shop/web-1 (b1, 10.0.1.2), shop/db-1 (b2,
//! 10.0.2.2) and other/probe-1 (b3, 10.0.3.2); `cl` (192.168.10.2) is frontend/ui-1 on
//! another node. In force: the admin-tier ClusterNetworkPolicy `guard-shop` (ingress to
//! `shop`: `other` denied, `shop` accepted; egress accepted), the NetworkPolicy
//! `shop/web-from-frontend` (enforce) and `shop/db-from-shop` (audit).

use crate::common;
use crate::netns_test;

use std::time::Duration;

use common::bin::edgenetd;
use common::daemon::Daemon;
use common::kube::admit_namespace;
use common::wait::wait_until;
use serde_json::{Value, json};

use super::pod_guard::{Lab, guard_shop};

/// How long the daemon (and its cache, written at most every 5 s) gets for each step.
const STEP: Duration = Duration::from_secs(20);

/// One end of a case: the lab host that sends or answers, and how explain is told of it.
#[derive(Clone, Copy)]
struct End {
    /// The host (its router-side interface has the same name, `cl`'s is `c0`).
    host: &'static str,
    /// Its address.
    addr: &'static str,
    /// `namespace/name` for a pod of this node (`--from-pod`/`--to-pod`); `None`: the
    /// address (`--from`/`--to`).
    pod: Option<&'static str>,
}

const WEB: End = End {
    host: "b1",
    addr: "10.0.1.2",
    pod: Some("shop/web-1"),
};
const DB: End = End {
    host: "b2",
    addr: "10.0.2.2",
    pod: Some("shop/db-1"),
};
const PROBE: End = End {
    host: "b3",
    addr: "10.0.3.2",
    pod: Some("other/probe-1"),
};
const UI: End = End {
    host: "cl",
    addr: "192.168.10.2",
    pod: None,
};

/// One pair and what explain must say of it.
struct Case {
    /// The case.
    name: &'static str,
    from: End,
    to: End,
    /// `accept` or `drop`: explain's verdict and the real packets' fate.
    verdict: &'static str,
    /// The direction whose decisions are checked.
    side: &'static str,
    /// Its `decisions`, as `--json` writes them.
    decisions: Value,
    /// The verdict with every audit policy enforced (`None`: no audit policy selects an end).
    enforced: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let tier = |action: &str| json!([{"kind": "tier", "tier": "admin", "policy": "k8s:guard-shop", "action": action}]);
    vec![
        Case {
            name: "admin_tier_deny_decides_before_any_network_policy",
            from: PROBE,
            to: WEB,
            verdict: "drop",
            side: "ingress",
            decisions: tier("Deny"),
            enforced: None,
        },
        Case {
            name: "a_network_policy_allows_a_pod_of_another_node",
            from: UI,
            to: WEB,
            verdict: "accept",
            side: "ingress",
            decisions: json!([{"kind": "allowed", "policy": "k8s:shop/web-from-frontend"}]),
            enforced: None,
        },
        Case {
            name: "an_audit_policy_would_drop_it_and_it_passes",
            from: UI,
            to: DB,
            verdict: "accept",
            side: "ingress",
            decisions: json!([{"kind": "audit would drop"}]),
            enforced: Some("drop"),
        },
        Case {
            name: "admin_tier_accept_is_final_for_the_audited_pod_too",
            from: WEB,
            to: DB,
            verdict: "accept",
            side: "ingress",
            decisions: tier("Accept"),
            enforced: Some("accept"),
        },
        Case {
            name: "the_sources_egress_is_accepted_by_the_admin_tier",
            from: DB,
            to: PROBE,
            verdict: "accept",
            side: "egress",
            decisions: tier("Accept"),
            // db-1 is audited for ingress only: no audit policy selects this direction.
            enforced: None,
        },
    ]
}

/// `edgenetd explain` on the daemon's config for `from` -> `to`:8080, with `extra` flags.
fn explain(d: &Daemon, from: End, to: End, extra: &[&str]) -> common::bin::Outcome {
    let config = d.dir().config();
    let mut args = vec![
        "explain",
        "--config",
        config.to_str().unwrap(),
        "--in",
        if from.host == "cl" { "c0" } else { from.host },
        "--proto",
        "tcp",
        "--dport",
        "8080",
    ];
    match from.pod {
        Some(p) => args.extend(["--from-pod", p]),
        None => args.extend(["--from", from.addr]),
    }
    match to.pod {
        Some(p) => args.extend(["--to-pod", p]),
        None => args.extend(["--to", to.addr]),
    }
    args.extend(extra);
    edgenetd(&args)
}

fn explain_json(d: &Daemon, from: End, to: End) -> Value {
    let out = explain(d, from, to, &["--json"]);
    assert!(out.ok(), "explain failed: {}{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// Whether 3 connections from `from` to `to`:8080 are all answered by `to`.
fn answered(lab: &Lab, from: End, to: End) -> bool {
    lab.web(from.host, to.addr).get(to.host) == Some(&3)
}

netns_test! {
    /// Every case: explain's verdict equals the real packets', and it names the deciding
    /// policies; an audit case gives the enforced answer, which real packets meet once the
    /// policy enforces.
    fn explain_answers_for_a_pod_pair_which_policies_decide_it_in_enforce_and_in_audit() {
        let lab = Lab::new();
        lab.local_pod("shop", "web-1", 1, "web");
        lab.local_pod("shop", "db-1", 2, "db");
        lab.local_pod("other", "probe-1", 3, "probe");
        lab.fake.apply("networkpolicies", admit_namespace("shop", "web", "frontend"));
        let mut audited = admit_namespace("shop", "db", "shop");
        audited["metadata"]["annotations"] = json!({"edgenetd.io/mode": "audit"});
        lab.fake.apply("networkpolicies", audited);
        lab.fake.apply("clusternetworkpolicies", guard_shop());
        let d = lab.daemon("k8s-explain-pods", "");
        wait_until("the admin tier in force", STEP, || !answered(&lab, PROBE, WEB));
        wait_until("the cache holds the policies", STEP, || {
            explain(&d, PROBE, WEB, &["--json"]).ok()
        });
        let mut failed = Vec::new();
        for c in cases() {
            let j = explain_json(&d, c.from, c.to);
            let real = if answered(&lab, c.from, c.to) { "accept" } else { "drop" };
            let got = (
                j["verdict"].as_str().unwrap_or("?"),
                &j["pods"][c.side]["decisions"],
                j["enforced"]["verdict"].as_str(),
            );
            if got != (c.verdict, &c.decisions, c.enforced) || real != c.verdict {
                failed.push(format!(
                    "{}: real packets {real}; explain {:?}, want ({}, {}, {:?})\n{j:#}",
                    c.name, got, c.verdict, c.decisions, c.enforced
                ));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));

        // The text names the policies and the enforced answer.
        let text = explain(&d, UI, DB, &[]).stdout;
        for line in [
            "ingress shop/db-1 (10.0.2.2): admin tier k8s:guard-shop; audit k8s:shop/db-from-shop",
            "audit: none of the audit policies allows it: they would drop it (reported, passes)",
            "enforced     with every audit policy enforced: drop",
            "none of the policies isolating it allows it: dropped",
            "cluster      state of ",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }

        // A pod of another node is not in this node's state: an error naming the way out.
        let out = explain(&d, End { pod: Some("frontend/ui-1"), ..UI }, WEB, &[]);
        assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("--from-pod frontend/ui-1: no such pod on this node"), "{}", out.stderr);

        // The audit policy enforced: explain's enforced answer is now the kernel's.
        lab.fake.apply("networkpolicies", admit_namespace("shop", "db", "shop"));
        wait_until("the policy enforces", STEP, || !answered(&lab, UI, DB));
        wait_until("the cache follows", STEP, || {
            explain_json(&d, UI, DB)["verdict"] == "drop"
        });
        let j = explain_json(&d, UI, DB);
        assert_eq!(j["pods"]["ingress"]["decisions"], json!([{"kind": "denied"}]), "{j:#}");
        assert_eq!(j["pods"]["ingress"]["isolatedBy"], json!(["k8s:shop/db-from-shop"]), "{j:#}");
        assert!(j["enforced"].is_null(), "no audit policy left: {j:#}");
    }
}
