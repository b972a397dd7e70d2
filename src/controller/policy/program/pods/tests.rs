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
                audit: false,
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
                audit: false,
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

#[test]
fn unknown_addresses_of_the_pod_prefixes_are_dropped_both_ways_before_any_policy() {
    use crate::config::policy::pods::UnknownPods;
    let pods = PodPolicies {
        unknown: Some(UnknownPods {
            cidrs: nets(&["10.1.0.0/24", "fd00::/64"]),
            known: ips(&["10.1.0.5", "fd00::5"]),
        }),
        ..PodPolicies::default()
    };
    assert!(
        !pods.is_empty(),
        "isolating unknown addresses alone makes a table"
    );
    let p = build_with_pods(None, &pods, "t", &RouterAddresses::default()).unwrap();
    let text = text::render_plan_block(&p.table);
    let order: Vec<usize> = [
        "ct state established,related accept",
        "ip saddr @pods.cidr4 ip saddr != @pods.known4 counter drop",
        "ip daddr @pods.cidr4 ip daddr != @pods.known4 counter drop",
        "ip6 saddr @pods.cidr6 ip6 saddr != @pods.known6 counter drop",
        "ip6 daddr @pods.cidr6 ip6 daddr != @pods.known6 counter drop",
        "ip daddr @pods.in4 jump pods-ingress",
    ]
    .iter()
    .map(|want| {
        text.find(want)
            .unwrap_or_else(|| panic!("missing {want:?} in\n{text}"))
    })
    .collect();
    assert!(
        order.is_sorted(),
        "replies first, then unknown addresses, then policies:\n{text}"
    );
    let set = |name: &str| {
        let i = p.table.sets.iter().position(|s| s.name == name).unwrap();
        (
            p.table.sets[i].elements.len(),
            p.set_groups[i],
            p.table.sets[i].interval,
        )
    };
    assert_eq!(set("pods.cidr4"), (1, 0, true));
    assert_eq!(set("pods.known4"), (1, 0, false));
    assert_eq!(set("pods.known6"), (1, 0, false));
}

#[test]
fn an_audit_unit_reports_in_its_own_chains_and_isolates_nobody() {
    let mut pods = sample();
    pods.policies[0].audit = true;
    let p = build_with_pods(None, &pods, "t", &RouterAddresses::default()).unwrap();
    let text = text::render_plan_block(&p.table);
    for want in [
        "ip daddr @pods.ain4 jump pods-audit-ingress",
        "ip daddr @np0.in4 ip saddr @np0.in0.p4 meta l4proto tcp th dport 80 counter return",
        "counter log prefix \"pods-audit ingress\" group 7026 comment",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let set = |name: &str| {
        let i = p.table.sets.iter().position(|s| s.name == name).unwrap();
        p.table.sets[i].elements.len()
    };
    assert_eq!(set("pods.in4"), 0, "the audit unit's pods are not isolated");
    assert_eq!((set("pods.ain4"), set("pods.ain6")), (2, 1));
    assert_eq!(set("pods.out4"), 1, "the enforcing unit still isolates");
    let audit_rules = p
        .table
        .rules
        .iter()
        .filter(|r| r.chain == PODS_AUDIT_INGRESS);
    assert!(
        audit_rules
            .clone()
            .all(|r| !r.stmts.contains(&Stmt::Verdict(Verdict::Drop))),
        "an audit chain never drops"
    );
}
