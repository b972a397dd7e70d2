//! The pod isolation part of the policy table, rule by rule.

use std::collections::BTreeSet;

use super::*;
use crate::config::policy::pods::L4Protocol;
use crate::dataplane::nft::text;

fn ips(v: &[&str]) -> Vec<IpAddr> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn nets(v: &[&str]) -> Vec<IpNet> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn tcp(p: u16) -> PortRange {
    PortRange {
        protocol: L4Protocol::Tcp,
        first: p,
        last: p,
    }
}

/// `web` admits `front` on tcp/80 and, by a named port, 8080 on one pod; `out` lets
/// `10.1.0.6` reach 0.0.0.0/0 except 10/8 on any port.
pub(crate) fn sample() -> PodPolicies {
    PodPolicies {
        policies: vec![
            PodPolicy {
                name: "k8s:shop/web".into(),
                ingress: Some(Isolation {
                    pods: ips(&["10.1.0.5", "10.1.0.9", "fd00::5"]),
                    allow: vec![
                        Allow {
                            pods: None,
                            peers: Some(nets(&["10.2.0.7/32", "10.2.0.8/32"])),
                            ports: vec![tcp(80)],
                        },
                        Allow {
                            pods: Some(ips(&["10.1.0.9"])),
                            peers: None,
                            ports: vec![tcp(8080)],
                        },
                    ],
                }),
                egress: None,
            },
            PodPolicy {
                name: "k8s:shop/out".into(),
                ingress: None,
                egress: Some(Isolation {
                    pods: ips(&["10.1.0.6"]),
                    allow: vec![Allow {
                        pods: None,
                        peers: Some(nets(&["0.0.0.0/5", "11.0.0.0/8", "12.0.0.0/6"])),
                        ports: vec![],
                    }],
                }),
            },
        ],
        ..PodPolicies::default()
    }
}

#[test]
fn neither_policy_nor_pods_is_no_table() {
    assert_eq!(
        build_with_pods(
            None,
            &PodPolicies::default(),
            "t",
            &RouterAddresses::default()
        ),
        None
    );
}

#[test]
fn pods_alone_make_a_table_of_pod_chains_only() {
    let p = build_with_pods(None, &sample(), "t", &RouterAddresses::default()).unwrap();
    let chains: Vec<&str> = p.table.chains.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(chains, [PODS, PODS_INGRESS, PODS_EGRESS]);
    let text = text::render_plan_block(&p.table);
    println!("{text}");
    for want in [
        "type filter hook forward priority -1; policy accept;",
        "ct state established,related accept",
        "ip daddr @pods.in4 jump pods-ingress",
        "ip6 daddr @pods.in6 jump pods-ingress",
        "ip saddr @pods.out4 jump pods-egress",
        "ip daddr @np0.in4 ip saddr @np0.in0.p4 meta l4proto tcp th dport 80 counter",
        "ip daddr @np0.in1.l4 meta l4proto tcp th dport 8080 counter",
        "ip saddr @np1.out4 ip daddr @np1.out0.p4 counter",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let groups: Vec<&str> = p.groups.iter().map(|g| g.label.as_str()).collect();
    assert_eq!(
        groups,
        [
            "base",
            "network-policy k8s:shop/web",
            "network-policy k8s:shop/out"
        ]
    );
}

#[test]
fn isolated_sets_are_the_skeleton_and_unit_sets_their_group() {
    let p = build_with_pods(None, &sample(), "t", &RouterAddresses::default()).unwrap();
    let set = |name: &str| {
        let i = p.table.sets.iter().position(|s| s.name == name).unwrap();
        (p.table.sets[i].elements.len(), p.set_groups[i])
    };
    assert_eq!(set("pods.in4"), (2, 0));
    assert_eq!(set("pods.in6"), (1, 0));
    assert_eq!(set("pods.out4"), (1, 0));
    assert_eq!(set("np0.in0.p4"), (2, 1));
    assert_eq!(set("np1.out0.p4"), (3, 2));
}

#[test]
fn a_refused_unit_leaves_its_pods_isolated() {
    let p = build_with_pods(None, &sample(), "t", &RouterAddresses::default()).unwrap();
    let (table, rule_groups, _) = p.without(&BTreeSet::from([1]));
    assert!(table.sets.iter().any(|s| s.name == "pods.in4"));
    assert!(!table.sets.iter().any(|s| s.name.starts_with("np0.")));
    assert!(!rule_groups.contains(&1));
    let drop_last = table
        .rules
        .iter()
        .rfind(|r| r.chain == PODS_INGRESS)
        .unwrap();
    assert_eq!(
        drop_last.stmts,
        [Stmt::Counter, Stmt::Verdict(Verdict::Drop)]
    );
}

#[test]
fn pod_churn_changes_set_elements_only() {
    let a = build_with_pods(None, &sample(), "t", &RouterAddresses::default()).unwrap();
    let mut more = sample();
    let iso = more.policies[0].ingress.as_mut().unwrap();
    iso.pods.push("10.1.0.11".parse().unwrap());
    iso.allow[0]
        .peers
        .as_mut()
        .unwrap()
        .push("10.2.0.20/32".parse().unwrap());
    let b = build_with_pods(None, &more, "t", &RouterAddresses::default()).unwrap();
    assert!(a.same_structure(&b));
    assert_ne!(a, b);
}

#[test]
fn with_a_policy_section_the_pod_chains_come_after_its_own() {
    let desired = crate::config::load_str(&[("e.toml", "[policy]\n")]).unwrap();
    let cfg = desired.policy.as_ref().unwrap();
    let plain = super::super::build(cfg, "t");
    let both = build_with_pods(Some(cfg), &sample(), "t", &RouterAddresses::default()).unwrap();
    assert_eq!(
        both.table.chains[..plain.table.chains.len()],
        plain.table.chains[..]
    );
    assert_eq!(
        both.table.rules[..plain.table.rules.len()],
        plain.table.rules[..]
    );
    assert_eq!(
        build_with_pods(
            Some(cfg),
            &PodPolicies::default(),
            "t",
            &RouterAddresses::default()
        )
        .unwrap(),
        plain,
        "no pods: exactly the [policy] table"
    );
}

#[test]
fn a_policy_over_many_pods_is_a_few_rules_over_sets() {
    let many = |n: u32| {
        let mut p = sample();
        let iso = p.policies[0].ingress.as_mut().unwrap();
        iso.pods = (0..n)
            .map(|i| IpAddr::from([10, 1, (i / 250) as u8, (i % 250 + 1) as u8]))
            .collect();
        iso.allow[0].peers = Some(
            (0..n)
                .map(|i| IpNet::from(IpAddr::from([10, 2, (i / 250) as u8, (i % 250 + 1) as u8])))
                .collect(),
        );
        build_with_pods(None, &p, "t", &RouterAddresses::default()).unwrap()
    };
    let (small, big) = (many(2), many(2000));
    assert_eq!(small.rule_count(), big.rule_count());
    assert!(big.same_structure(&small), "only set elements grow");
    let peers = big
        .table
        .sets
        .iter()
        .find(|s| s.name == "np0.in0.p4")
        .unwrap();
    assert_eq!(peers.elements.len(), 2000);
}

/// [`sample`] with an admin policy (accept, deny, pass) and a baseline one over `web`.
fn tiered() -> PodPolicies {
    use crate::config::policy::pods::{TierAction, TierPolicy, TierRule};
    let rule = |action, peers: &[&str], ports: Vec<PortRange>| TierRule {
        action,
        matches: Allow {
            pods: None,
            peers: Some(nets(peers)),
            ports,
        },
    };
    let mut p = sample();
    p.admin.push(TierPolicy {
        name: "k8s:admin".into(),
        priority: 3,
        pods: ips(&["10.1.0.5", "10.1.0.7"]),
        ingress: vec![
            rule(TierAction::Accept, &["10.2.2.0/24"], vec![]),
            rule(TierAction::Deny, &["10.2.3.0/24"], vec![tcp(80)]),
            rule(TierAction::Pass, &["10.2.4.0/24"], vec![]),
        ],
        egress: vec![rule(TierAction::Deny, &["0.0.0.0/0", "::/0"], vec![])],
    });
    p.baseline.push(TierPolicy {
        name: "k8s:default".into(),
        priority: 10,
        pods: ips(&["10.1.0.7"]),
        ingress: vec![
            rule(TierAction::Pass, &["10.2.4.0/24"], vec![]),
            rule(TierAction::Deny, &["10.2.0.0/16"], vec![]),
        ],
        egress: Vec::new(),
    });
    p
}

#[test]
fn tiers_wrap_the_units_admin_first_baseline_for_pods_no_unit_isolates() {
    let p = build_with_pods(None, &tiered(), "t", &RouterAddresses::default()).unwrap();
    let chains: Vec<&str> = p.table.chains.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        chains,
        [
            PODS,
            PODS_INGRESS,
            PODS_EGRESS,
            PODS_INGRESS_ADMIN,
            PODS_INGRESS_BASELINE,
            PODS_EGRESS_ADMIN,
            PODS_EGRESS_BASELINE
        ]
    );
    let text = text::render_plan_block(&p.table);
    let chain = |name: &str| -> Vec<String> {
        let start = text.find(&format!("chain {name} {{")).unwrap();
        let end = start + text[start..].find("\n\t}").unwrap();
        text[start..end]
            .lines()
            .skip(1)
            .map(|l| l.trim().split(" comment").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        chain(PODS),
        [
            "type filter hook forward priority -1; policy accept;",
            "ct state established,related accept",
            "ip daddr @tiers.in4 jump pods-ingress-admin",
            "ip6 daddr @tiers.in6 jump pods-ingress-admin",
            "ip saddr @tiers.out4 jump pods-egress-admin",
            "ip6 saddr @tiers.out6 jump pods-egress-admin",
        ]
    );
    assert_eq!(
        chain(PODS_INGRESS_ADMIN),
        [
            "ip daddr @admin0.in4 ip saddr @admin0.in0.p4 counter return",
            "ip6 daddr @admin0.in6 ip6 saddr @admin0.in0.p6 counter return",
            "ip daddr @admin0.in4 ip saddr @admin0.in1.p4 meta l4proto tcp th dport 80 counter drop",
            "ip6 daddr @admin0.in6 ip6 saddr @admin0.in1.p6 meta l4proto tcp th dport 80 counter drop",
            "ip daddr @admin0.in4 ip saddr @admin0.in2.p4 counter goto pods-ingress-baseline",
            "ip6 daddr @admin0.in6 ip6 saddr @admin0.in2.p6 counter goto pods-ingress-baseline",
            "goto pods-ingress-baseline",
        ]
    );
    assert_eq!(
        chain(PODS_INGRESS_BASELINE),
        [
            "ip daddr @pods.in4 goto pods-ingress",
            "ip6 daddr @pods.in6 goto pods-ingress",
            "ip daddr @baseline0.in4 ip saddr @baseline0.in0.p4 counter return",
            "ip6 daddr @baseline0.in6 ip6 saddr @baseline0.in0.p6 counter return",
            "ip daddr @baseline0.in4 ip saddr @baseline0.in1.p4 counter drop",
            "ip6 daddr @baseline0.in6 ip6 saddr @baseline0.in1.p6 counter drop",
        ]
    );
    assert_eq!(chain(PODS_EGRESS_BASELINE).len(), 2, "the units' way only");
    let set = |name: &str| {
        let i = p.table.sets.iter().position(|s| s.name == name).unwrap();
        (p.table.sets[i].elements.len(), p.set_groups[i])
    };
    assert_eq!(
        set("tiers.in4"),
        (3, 0),
        "web's two and the admin's 10.1.0.7"
    );
    assert_eq!(set("pods.in4"), (2, 0), "the units' alone");
    assert_eq!(
        set("tiers.out4"),
        (3, 0),
        "out's 10.1.0.6 and the admin's two"
    );
    let groups: Vec<(&str, bool)> = p
        .groups
        .iter()
        .map(|g| (g.label.as_str(), g.deny))
        .collect();
    assert_eq!(
        groups[3..],
        [
            ("cluster-network-policy k8s:admin", true),
            ("cluster-network-policy k8s:default", true)
        ]
    );
}

#[test]
fn without_tiers_the_layout_is_the_units_alone() {
    let mut p = tiered();
    p.admin.clear();
    p.baseline.clear();
    assert_eq!(
        build_with_pods(None, &p, "t", &RouterAddresses::default()),
        build_with_pods(None, &sample(), "t", &RouterAddresses::default())
    );
}

#[test]
fn a_refused_tier_policy_with_a_deny_leaves_a_drop_in_its_place() {
    let p = build_with_pods(None, &tiered(), "t", &RouterAddresses::default()).unwrap();
    let (table, _, _) = p.without(&BTreeSet::from([3]));
    let first = table
        .rules
        .iter()
        .find(|r| r.chain == PODS_INGRESS_ADMIN)
        .unwrap();
    assert_eq!(first.stmts, [Stmt::Counter, Stmt::Verdict(Verdict::Drop)]);
}
