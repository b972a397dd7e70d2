//! The pod report over the real pod chains (`build_with_pods`) run by the interpreter: who
//! selects each end, which policy decided, and the answer with audit policies enforced.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use super::{Decision, Outcome, PodReport, Tier};
use crate::config::DesiredState;
use crate::config::policy::pods::{
    Allow, Isolation, L4Protocol, PodPolicies, PodPolicy, PortRange, TierAction, TierPolicy,
    TierRule, UnknownPods,
};
use crate::explain::eval::Final;
use crate::explain::{explain, query};

const WEB: &str = "10.1.0.5";
const DB: &str = "10.1.0.6";
const OTHER: &str = "10.1.0.7";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn tcp(p: u16) -> PortRange {
    PortRange {
        protocol: L4Protocol::Tcp,
        first: p,
        last: p,
    }
}

/// The pods of this node: shop/web, shop/db, lab/other.
fn names() -> BTreeMap<IpAddr, String> {
    [(WEB, "shop/web"), (DB, "shop/db"), (OTHER, "lab/other")]
        .into_iter()
        .map(|(a, n)| (ip(a), n.to_string()))
        .collect()
}

/// A NetworkPolicy isolating `pods` for ingress and admitting `from` on tcp `port`.
fn ingress(name: &str, pods: &[&str], from: &[&str], port: u16, audit: bool) -> PodPolicy {
    PodPolicy {
        name: name.into(),
        ingress: Some(Isolation {
            pods: pods.iter().map(|p| ip(p)).collect(),
            allow: vec![Allow {
                pods: None,
                peers: Some(from.iter().map(|a| net(&format!("{a}/32"))).collect()),
                ports: vec![tcp(port)],
            }],
        }),
        egress: None,
        audit,
    }
}

fn desired(pods: PodPolicies) -> DesiredState {
    DesiredState {
        pod_policies: PodPolicies {
            names: names(),
            ..pods
        },
        ..DesiredState::default()
    }
}

/// tcp from `from` to `to`:`port`, arriving on `cni0` (the pods' bridge, 10.1.0.1/24).
fn ask(d: &DesiredState, from: &str, to: &str, port: u16) -> crate::explain::walk::Explanation {
    let args: Vec<String> = [
        "--in",
        "cni0",
        "--from",
        from,
        "--to",
        to,
        "--proto",
        "tcp",
        "--dport",
        &port.to_string(),
        "--addresses",
        "cni0=10.1.0.1/24",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let q = query::parse(&args, "unused").unwrap();
    explain(d, &q).unwrap()
}

fn pods_of(e: &crate::explain::walk::Explanation) -> &PodReport {
    e.pods.as_ref().expect("a pod report")
}

#[test]
fn a_pod_pair_no_policy_selects_is_open_both_ways_and_named() {
    let d = desired(PodPolicies {
        policies: vec![ingress("k8s:lab/x", &[OTHER], &[], 1, false)],
        ..PodPolicies::default()
    });
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(e.verdict, Final::Accept);
    let r = pods_of(&e);
    let (out, inn) = (r.egress.as_ref().unwrap(), r.ingress.as_ref().unwrap());
    assert_eq!(out.end.pod.as_deref(), Some("shop/web"));
    assert_eq!(inn.end.pod.as_deref(), Some("shop/db"));
    assert!(!out.selected() && !inn.selected());
    assert_eq!((out.outcome, inn.outcome), (Outcome::Open, Outcome::Open));
    assert!(e.enforced.is_none(), "no audit policy: no second answer");
}

#[test]
fn every_policy_isolating_a_pod_is_named_and_the_one_that_allows_decides() {
    let d = desired(PodPolicies {
        policies: vec![
            ingress("k8s:shop/db-from-web", &[DB], &[WEB], 5432, false),
            ingress("k8s:shop/db-metrics", &[DB], &[OTHER], 9187, false),
        ],
        ..PodPolicies::default()
    });
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(e.verdict, Final::Accept);
    let inn = pods_of(&e).ingress.clone().unwrap();
    assert_eq!(
        inn.isolated_by,
        ["k8s:shop/db-from-web", "k8s:shop/db-metrics"]
    );
    assert_eq!(
        inn.decisions,
        [Decision::Allowed("k8s:shop/db-from-web".into())]
    );
    assert_eq!(inn.outcome, Outcome::Passed);
    // The same pods on a port no policy admits: both isolate it, none allows it.
    let e = ask(&d, WEB, DB, 22);
    assert_eq!(e.verdict, Final::Drop);
    let inn = pods_of(&e).ingress.clone().unwrap();
    assert_eq!(inn.decisions, [Decision::Denied]);
    assert_eq!(inn.outcome, Outcome::Dropped);
    // The other policy's peer on its own port: allowed by that one.
    let e = ask(&d, OTHER, DB, 9187);
    assert_eq!(
        pods_of(&e).ingress.as_ref().unwrap().decisions,
        [Decision::Allowed("k8s:shop/db-metrics".into())]
    );
}

#[test]
fn the_destinations_ingress_is_checked_first_and_a_side_not_reached_says_so() {
    let d = desired(PodPolicies {
        policies: vec![
            PodPolicy {
                name: "k8s:shop/web-out".into(),
                ingress: None,
                egress: Some(Isolation {
                    pods: vec![ip(WEB)],
                    allow: vec![Allow {
                        pods: None,
                        peers: Some(vec![net("10.1.0.6/32")]),
                        ports: vec![tcp(5432)],
                    }],
                }),
                audit: false,
            },
            ingress("k8s:lab/other-in", &[OTHER], &[DB], 80, false),
        ],
        ..PodPolicies::default()
    });
    // Both would drop it: the pods chain jumps to the ingress checks first.
    let e = ask(&d, WEB, OTHER, 80);
    assert_eq!(e.verdict, Final::Drop);
    let r = pods_of(&e);
    let inn = r.ingress.as_ref().unwrap();
    assert_eq!(inn.isolated_by, ["k8s:lab/other-in"]);
    assert_eq!(inn.outcome, Outcome::Dropped);
    let out = r.egress.as_ref().unwrap();
    assert_eq!(out.isolated_by, ["k8s:shop/web-out"]);
    assert_eq!(out.outcome, Outcome::NotReached, "{:?}", e.steps);
    // The destination open: the source's egress policy decides.
    let e = ask(&d, WEB, DB, 80);
    assert_eq!(e.verdict, Final::Drop);
    let r = pods_of(&e);
    assert_eq!(r.ingress.as_ref().unwrap().outcome, Outcome::Open);
    let out = r.egress.as_ref().unwrap();
    assert_eq!(
        (out.decisions.as_slice(), out.outcome),
        (&[Decision::Denied][..], Outcome::Dropped)
    );
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(
        pods_of(&e).egress.as_ref().unwrap().decisions,
        [Decision::Allowed("k8s:shop/web-out".into())]
    );
}

#[test]
fn an_audit_policy_would_drop_what_passes_and_enforced_it_drops_it() {
    let d = desired(PodPolicies {
        policies: vec![ingress("k8s:shop/db-audit", &[DB], &[WEB], 5432, true)],
        ..PodPolicies::default()
    });
    // What it would drop: passes, reported.
    let e = ask(&d, OTHER, DB, 5432);
    assert_eq!(e.verdict, Final::Accept);
    let inn = pods_of(&e).ingress.clone().unwrap();
    assert_eq!(inn.audited_by, ["k8s:shop/db-audit"]);
    assert!(inn.isolated_by.is_empty());
    assert_eq!(inn.decisions, [Decision::AuditWouldDrop]);
    assert_eq!(inn.outcome, Outcome::Passed);
    let x = e
        .enforced
        .as_ref()
        .expect("the answer with the audit enforced");
    assert_eq!(x.verdict, Final::Drop);
    let inn = x.pods.as_ref().unwrap().ingress.clone().unwrap();
    assert_eq!(inn.isolated_by, ["k8s:shop/db-audit"]);
    assert_eq!(inn.decisions, [Decision::Denied]);
    // What it allows: passes unreported, and passes enforced.
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(
        pods_of(&e).ingress.as_ref().unwrap().decisions,
        [Decision::AuditAllowed("k8s:shop/db-audit".into())]
    );
    let x = e.enforced.as_ref().unwrap();
    assert_eq!(x.verdict, Final::Accept);
    assert_eq!(
        x.pods.as_ref().unwrap().ingress.as_ref().unwrap().decisions,
        [Decision::Allowed("k8s:shop/db-audit".into())]
    );
}

#[test]
fn where_an_enforcing_policy_isolates_the_pod_it_decides_and_enforcing_the_audit_one_adds_its_allows()
 {
    let d = desired(PodPolicies {
        policies: vec![
            ingress("k8s:shop/db-audit", &[DB], &[OTHER], 5432, true),
            ingress("k8s:shop/db-from-web", &[DB], &[WEB], 5432, false),
        ],
        ..PodPolicies::default()
    });
    let e = ask(&d, OTHER, DB, 5432);
    assert_eq!(
        e.verdict,
        Final::Drop,
        "the enforcing policy admits web only"
    );
    let inn = pods_of(&e).ingress.clone().unwrap();
    assert_eq!(inn.isolated_by, ["k8s:shop/db-from-web"]);
    assert_eq!(inn.audited_by, ["k8s:shop/db-audit"]);
    assert_eq!(inn.decisions, [Decision::Denied]);
    let x = e.enforced.as_ref().unwrap();
    assert_eq!(
        x.verdict,
        Final::Accept,
        "enforced, the audit policy's allow counts"
    );
    assert_eq!(
        x.pods.as_ref().unwrap().ingress.as_ref().unwrap().decisions,
        [Decision::Allowed("k8s:shop/db-audit".into())]
    );
}

fn tier(name: &str, priority: u32, pods: &[&str], rules: Vec<(TierAction, &str)>) -> TierPolicy {
    TierPolicy {
        name: name.into(),
        priority,
        pods: pods.iter().map(|p| ip(p)).collect(),
        ingress: rules
            .into_iter()
            .map(|(action, from)| TierRule {
                action,
                matches: Allow {
                    pods: None,
                    peers: Some(vec![net(&format!("{from}/32"))]),
                    ports: Vec::new(),
                },
            })
            .collect(),
        egress: Vec::new(),
    }
}

#[test]
fn the_admin_tier_decides_before_the_policies_and_pass_hands_over_to_them() {
    let d = desired(PodPolicies {
        policies: vec![ingress("k8s:shop/db-from-web", &[DB], &[WEB], 5432, false)],
        admin: vec![tier(
            "k8s:cnp/guard",
            10,
            &[DB],
            vec![(TierAction::Deny, OTHER), (TierAction::Pass, WEB)],
        )],
        baseline: vec![tier(
            "k8s:cnp/floor",
            5,
            &[DB],
            vec![(TierAction::Deny, WEB)],
        )],
        ..PodPolicies::default()
    });
    let e = ask(&d, OTHER, DB, 5432);
    assert_eq!(e.verdict, Final::Drop);
    let inn = pods_of(&e).ingress.clone().unwrap();
    assert_eq!(inn.admin, ["k8s:cnp/guard"]);
    assert_eq!(inn.baseline, ["k8s:cnp/floor"]);
    assert_eq!(
        inn.decisions,
        [Decision::Tier {
            tier: Tier::Admin,
            policy: "k8s:cnp/guard".into(),
            action: Some(TierAction::Deny)
        }]
    );
    assert_eq!(inn.outcome, Outcome::Dropped);
    // Pass: the NetworkPolicies decide (the baseline tier is for pods they do not isolate).
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(e.verdict, Final::Accept);
    assert_eq!(
        pods_of(&e).ingress.as_ref().unwrap().decisions,
        [
            Decision::Tier {
                tier: Tier::Admin,
                policy: "k8s:cnp/guard".into(),
                action: Some(TierAction::Pass)
            },
            Decision::Allowed("k8s:shop/db-from-web".into())
        ]
    );
}

#[test]
fn the_baseline_tier_decides_for_a_pod_no_policy_isolates() {
    let d = desired(PodPolicies {
        baseline: vec![tier(
            "k8s:cnp/floor",
            5,
            &[DB],
            vec![(TierAction::Accept, WEB), (TierAction::Deny, OTHER)],
        )],
        ..PodPolicies::default()
    });
    let e = ask(&d, OTHER, DB, 5432);
    assert_eq!(e.verdict, Final::Drop);
    assert_eq!(
        pods_of(&e).ingress.as_ref().unwrap().decisions,
        [Decision::Tier {
            tier: Tier::Baseline,
            policy: "k8s:cnp/floor".into(),
            action: Some(TierAction::Deny)
        }]
    );
    let e = ask(&d, WEB, DB, 5432);
    assert_eq!(e.verdict, Final::Accept);
    assert_eq!(
        pods_of(&e).ingress.as_ref().unwrap().decisions,
        [Decision::Tier {
            tier: Tier::Baseline,
            policy: "k8s:cnp/floor".into(),
            action: Some(TierAction::Accept)
        }]
    );
}

#[test]
fn an_unknown_address_of_the_pod_prefixes_is_named_as_such() {
    let d = desired(PodPolicies {
        unknown: Some(UnknownPods {
            cidrs: vec![net("10.1.0.0/24")],
            known: vec![ip(WEB), ip(DB), ip(OTHER)],
        }),
        ..PodPolicies::default()
    });
    let e = ask(&d, WEB, "10.1.0.99", 80);
    assert_eq!(e.verdict, Final::Drop);
    let r = pods_of(&e);
    assert_eq!(r.egress.as_ref().unwrap().outcome, Outcome::Open);
    let inn = r.ingress.as_ref().unwrap();
    assert_eq!(inn.end.pod, None);
    assert_eq!(inn.decisions, [Decision::UnknownAddress]);
}

#[test]
fn pods_are_named_by_the_cluster_states_names_and_take_the_other_ends_family() {
    let mut names = names();
    names.insert(ip("fd00::5"), "shop/web".into());
    names.insert(ip("fd00::6"), "shop/db".into());
    let args = |extra: &[&str]| -> Vec<String> {
        ["--in", "cni0", "--proto", "tcp", "--dport", "80"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let mut q = query::parse(
        &args(&["--from-pod", "shop/web", "--to-pod", "shop/db"]),
        "c",
    )
    .unwrap();
    q.name_pods(&names).unwrap();
    assert_eq!((q.packet.saddr, q.packet.daddr), (ip(WEB), ip(DB)));
    let mut q = query::parse(&args(&["--from-pod", "shop/web", "--to", "fd00::9"]), "c").unwrap();
    q.name_pods(&names).unwrap();
    assert_eq!(q.packet.saddr, ip("fd00::5"), "the family of --to");
    let mut q = query::parse(&args(&["--from-pod", "shop/gone", "--to", "10.1.0.6"]), "c").unwrap();
    let e = q.name_pods(&names).unwrap_err();
    assert!(
        e.contains("--from-pod shop/gone: no such pod on this node"),
        "{e}"
    );
    assert!(e.contains("with --from"), "{e}");
    for bad in [
        &["--from-pod", "web", "--to", "10.1.0.6"][..],
        &[
            "--from-pod",
            "shop/web",
            "--from",
            "10.1.0.5",
            "--to",
            "10.1.0.6",
        ],
        &["--to-pod", "a/b/c", "--from", "10.1.0.5"],
    ] {
        assert!(query::parse(&args(bad), "c").is_err(), "{bad:?}");
    }
}
