//! Pod isolation (see [`crate::config::policy::pods`]) in the policy table: pods are addresses
//! behind the node, so their traffic passes the forward hook (the node's own traffic to them
//! is output-hook traffic and never meets these rules).
//!
//! # Layout
//!
//! - `pods` (filter forward, priority -1, policy accept: it only ever drops, the other
//!   chains of the hook still decide): established/related accepted; with unknown-address
//!   isolation, traffic from or to an address of `pods.cidr4`/`pods.cidr6` (this node's pod
//!   prefixes) that is not in `pods.known4`/`pods.known6` dropped; traffic *to* an address
//!   in `pods.in4`/`pods.in6` (isolated for ingress) jumps to `pods-ingress`, traffic *from*
//!   one in `pods.out4`/`pods.out6` to `pods-egress`.
//! - `pods-ingress` / `pods-egress`: every enforcing unit's allows as `return` rules (the
//!   packet goes on to the next check), then `drop`.
//! - `pods-audit-ingress` / `pods-audit-egress` (only with audit units): the audit units'
//!   allows as `return` rules, then a report of what they would drop and no verdict (it
//!   passes). `pods` jumps here for the addresses in `pods.ain*`/`pods.aout*`: those audit
//!   units select and no enforcing unit does (where one does, it decides, and an audit unit
//!   could only allow more).
//!
//! With cluster-wide tiers (ClusterNetworkPolicies), each direction has two more chains and
//! the `pods` chain jumps to the first of them for every pod a tier or a unit selects
//! (`tiers.in4`, ...):
//!
//! - `pods-ingress-admin` / `pods-egress-admin`: the admin tier's rules in order (`Accept`:
//!   `return`, the direction is done; `Deny`: `drop`; `Pass`: `goto` the baseline chain), then
//!   `goto` the baseline chain;
//! - `pods-ingress-baseline` / `pods-egress-baseline`: a pod only audit units select jumps to
//!   the audit chain (which reports and comes back), a pod a unit isolates `goto`es the
//!   units' chain (whose `return` then ends the direction, and whose `drop` is final); for the
//!   others, the baseline tier's rules in order (`Accept` and `Pass`: `return`; `Deny`:
//!   `drop`); the end of the chain returns: nothing decided, the traffic passes.
//!
//! Without tiers the layout is the one above, unchanged. The order, in short: replies, then
//! unknown addresses (a pod not yet known has no identity any rule could admit it by, so even
//! an admin `Accept` comes after), then the admin tier, the units (audit units reporting what
//! they would drop where the units would decide), the baseline tier. A tier's `Deny` rules
//! report what they drop (`cnp <direction> <policy>`) as the units' final drop does.
//!
//! Every lookup is a named set, so a policy over many pods costs a few rules, and pods coming
//! and going change set elements only (an element delta, not a table rewrite). The isolated
//! sets belong to the skeleton (group 0); each unit's sets and rules are one group of its
//! own. A unit the kernel refuses is left out: its allows are missing while its pods stay in
//! the isolated sets, so it fails closed for exactly the pods it selects (others' allows
//! still apply to them, as they would with the unit in place).
//!
//! Set names contain `.`, which TOML set names cannot, so they never collide.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::policy::PolicyConfig;
use crate::config::policy::pods::{
    Allow, Isolation, PodPolicies, PodPolicy, PortRange, TierAction, TierPolicy, TierRule,
    UnknownPods,
};
use crate::dataplane::nft::intervals::{normalize_port_ranges, normalize_prefixes};
use crate::dataplane::nft::ir::*;

use super::super::matches::port_match;
use super::denied::{PodDirection, Reported};
use super::{Builder, FAULT_CHAIN, Group, Program, RouterAddresses, build_with, est_related};

/// The base chain of pod isolation.
pub const PODS: &str = "pods";
/// Ingress checks of isolated pods.
pub const PODS_INGRESS: &str = "pods-ingress";
/// Egress checks of isolated pods.
pub const PODS_EGRESS: &str = "pods-egress";
/// Ingress checks of audit units.
pub const PODS_AUDIT_INGRESS: &str = "pods-audit-ingress";
/// Egress checks of audit units.
pub const PODS_AUDIT_EGRESS: &str = "pods-audit-egress";
/// Priority of [`PODS`] on the forward hook (before the `[policy]` forward chain).
pub const PODS_PRIORITY: i32 = -1;
/// The admin tier's ingress rules.
pub const PODS_INGRESS_ADMIN: &str = "pods-ingress-admin";
/// The baseline tier's ingress rules (and the way to the units' checks).
pub const PODS_INGRESS_BASELINE: &str = "pods-ingress-baseline";
/// The admin tier's egress rules.
pub const PODS_EGRESS_ADMIN: &str = "pods-egress-admin";
/// The baseline tier's egress rules (and the way to the units' checks).
pub const PODS_EGRESS_BASELINE: &str = "pods-egress-baseline";

/// A tier of cluster-wide policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    /// Before the units.
    Admin,
    /// After them, for pods they do not isolate.
    Baseline,
}

/// One direction of isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// To the pods: the local address is the destination.
    In,
    /// From the pods: the local address is the source.
    Out,
}

impl Dir {
    fn word(self) -> &'static str {
        match self {
            Dir::In => "in",
            Dir::Out => "out",
        }
    }

    fn chain(self) -> &'static str {
        match self {
            Dir::In => PODS_INGRESS,
            Dir::Out => PODS_EGRESS,
        }
    }

    /// The header field of the local (`true`) or remote address.
    fn field(self, local: bool, v: IpVersion) -> Field {
        let source = (self == Dir::Out) == local;
        match (source, v) {
            (true, IpVersion::V4) => Field::IpSaddr,
            (false, IpVersion::V4) => Field::IpDaddr,
            (true, IpVersion::V6) => Field::Ip6Saddr,
            (false, IpVersion::V6) => Field::Ip6Daddr,
        }
    }

    /// The chain of `audit` units' checks in this direction.
    fn chain_of(self, audit: bool) -> &'static str {
        match (self, audit) {
            (d, false) => d.chain(),
            (Dir::In, true) => PODS_AUDIT_INGRESS,
            (Dir::Out, true) => PODS_AUDIT_EGRESS,
        }
    }

    fn reported(self) -> PodDirection {
        match self {
            Dir::In => PodDirection::Ingress,
            Dir::Out => PodDirection::Egress,
        }
    }

    fn isolation(self, p: &PodPolicy) -> Option<&Isolation> {
        match self {
            Dir::In => p.ingress.as_ref(),
            Dir::Out => p.egress.as_ref(),
        }
    }

    fn tier_chain(self, tier: Tier) -> &'static str {
        match (self, tier) {
            (Dir::In, Tier::Admin) => PODS_INGRESS_ADMIN,
            (Dir::In, Tier::Baseline) => PODS_INGRESS_BASELINE,
            (Dir::Out, Tier::Admin) => PODS_EGRESS_ADMIN,
            (Dir::Out, Tier::Baseline) => PODS_EGRESS_BASELINE,
        }
    }

    fn tier_rules(self, p: &TierPolicy) -> &[TierRule] {
        match self {
            Dir::In => &p.ingress,
            Dir::Out => &p.egress,
        }
    }
}

const VERSIONS: [IpVersion; 2] = [IpVersion::V4, IpVersion::V6];

fn suffix(v: IpVersion) -> &'static str {
    match v {
        IpVersion::V4 => "4",
        IpVersion::V6 => "6",
    }
}

/// The table for `cfg` (if any) with the pod isolation `pods`; `None` when there is neither
/// a `[policy]` nor any pod policy (no table at all, as without `[policy]` before).
pub fn build_with_pods(
    cfg: Option<&PolicyConfig>,
    pods: &PodPolicies,
    table_name: &str,
    addrs: &RouterAddresses,
) -> Option<Program> {
    let base = match cfg {
        Some(cfg) => build_with(cfg, table_name, addrs),
        None if pods.is_empty() => return None,
        None => Program {
            table: Table::new(Family::Inet, table_name),
            rule_groups: Vec::new(),
            set_groups: Vec::new(),
            helper_groups: Vec::new(),
            flowtable_groups: Vec::new(),
            groups: vec![Group {
                label: "base".into(),
                deny: false,
            }],
            includes: Vec::new(),
        },
    };
    if pods.is_empty() {
        return Some(base);
    }
    Some(with_units(base, pods))
}

/// `base` with the pod chains of `pods` (not empty). Its own function, never inlined: only
/// a router fed by a cluster runs it, and the release link places it with the code an idle
/// daemon never runs (packaging/link/cold-text-last.ld).
#[inline(never)]
fn with_units(base: Program, pods: &PodPolicies) -> Program {
    let mut b = Builder { p: base, group: 0 };
    let audit = pods.policies.iter().any(|p| p.audit);
    let tiered = pods.has_tiers();
    b.pod_chains(audit, tiered);
    b.isolated_sets(pods);
    for (i, p) in pods.policies.iter().enumerate() {
        b.pod_policy(i, p);
    }
    for (i, p) in pods.admin.iter().enumerate() {
        b.tier_policy(Tier::Admin, i, p, pods.report_denied);
    }
    b.group = 0;
    for dir in [Dir::In, Dir::Out] {
        let mut stmts = vec![Stmt::Counter];
        if pods.report_denied {
            stmts.push(Reported::Pods(dir.reported()).stmt());
        }
        stmts.push(Stmt::Verdict(Verdict::Drop));
        b.rule(dir.chain(), stmts);
        if audit {
            // No verdict: what the audit units would drop is reported and goes on.
            b.rule(
                dir.chain_of(true),
                vec![Stmt::Counter, Reported::Audit(dir.reported()).stmt()],
            );
        }
    }
    if tiered {
        for dir in [Dir::In, Dir::Out] {
            let baseline = dir.tier_chain(Tier::Baseline);
            b.rule(
                dir.tier_chain(Tier::Admin),
                vec![Stmt::Verdict(Verdict::Goto(baseline.into()))],
            );
            // A pod only audit units select: they report what they would drop, had the admin
            // tier not decided, and the baseline tier goes on as if they were not there.
            if audit {
                for v in VERSIONS {
                    b.audit_jump(baseline, dir, v);
                }
            }
            // A pod a unit isolates: the units decide (their verdict is final).
            for v in VERSIONS {
                let isolated = format!("pods.{}{}", dir.word(), suffix(v));
                b.rule(
                    baseline,
                    vec![
                        lookup(dir.field(true, v), &isolated),
                        Stmt::Verdict(Verdict::Goto(dir.chain().into())),
                    ],
                );
            }
        }
        for (i, p) in pods.baseline.iter().enumerate() {
            b.tier_policy(Tier::Baseline, i, p, pods.report_denied);
        }
    }
    b.p
}

/// A hash set of addresses of one family.
fn address_set(name: String, v: IpVersion, addrs: &[IpAddr]) -> Set {
    let (key, want_v4) = match v {
        IpVersion::V4 => (DataType::Ipv4Addr, true),
        IpVersion::V6 => (DataType::Ipv6Addr, false),
    };
    let mut set = Set::new(name, KeyType::single(key));
    let mut elements: Vec<Element> = addrs
        .iter()
        .filter(|a| a.is_ipv4() == want_v4)
        .map(|a| Element::key(ElemKey::Value(Value::ip(*a))))
        .collect();
    elements.sort();
    elements.dedup();
    set.elements = elements;
    set
}

/// An interval set of prefixes of one family.
fn prefix_set(name: String, v: IpVersion, nets: &[IpNet]) -> Set {
    let (key, want_v4) = match v {
        IpVersion::V4 => (DataType::Ipv4Addr, true),
        IpVersion::V6 => (DataType::Ipv6Addr, false),
    };
    let mut set = Set::new(name, KeyType::single(key));
    set.interval = true;
    set.elements = normalize_prefixes(
        nets.iter()
            .copied()
            .filter(|n| n.addr().is_ipv4() == want_v4),
    )
    .into_iter()
    .map(|n| Element::key(ElemKey::Prefix(n)))
    .collect();
    set
}

fn lookup(field: Field, set: &str) -> Stmt {
    Stmt::Lookup {
        left: Expr::Payload(field),
        set: SetRef::Named(set.to_string()),
        negate: false,
    }
}

/// The statements matching `ports` (one protocol each): one list per protocol; a single
/// empty list for all traffic.
fn port_matches(ports: &[PortRange]) -> Vec<Vec<Stmt>> {
    if ports.is_empty() {
        return vec![Vec::new()];
    }
    let mut by_proto: BTreeMap<_, Vec<(u16, u16)>> = BTreeMap::new();
    for r in ports {
        by_proto
            .entry(r.protocol)
            .or_default()
            .push((r.first, r.last));
    }
    by_proto
        .into_iter()
        .map(|(proto, ranges)| {
            let mut stmts = vec![Stmt::Cmp {
                left: Expr::Meta(MetaKey::L4Proto),
                op: CmpOp::Eq,
                right: Value::Proto(proto.number()),
            }];
            // Every port of the protocol: the protocol match alone.
            if normalize_port_ranges(ranges.iter().copied()) != [(0, u16::MAX)] {
                stmts.extend(port_match(Field::ThDport, &ranges));
            }
            stmts
        })
        .collect()
}

impl Builder {
    /// The chains (skeleton): the three of pod isolation, the audit chains when some unit
    /// audits, and the tiers' four when `tiered`.
    fn pod_chains(&mut self, audit: bool, tiered: bool) {
        self.group = 0;
        self.p.table.chains.push(Chain::base(
            PODS,
            ChainType::Filter,
            Hook::Forward,
            PODS_PRIORITY,
            ChainPolicy::Accept,
        ));
        self.p.table.chains.push(Chain::regular(PODS_INGRESS));
        self.p.table.chains.push(Chain::regular(PODS_EGRESS));
        if audit {
            self.p.table.chains.push(Chain::regular(PODS_AUDIT_INGRESS));
            self.p.table.chains.push(Chain::regular(PODS_AUDIT_EGRESS));
        }
        if tiered {
            for dir in [Dir::In, Dir::Out] {
                for tier in [Tier::Admin, Tier::Baseline] {
                    self.p
                        .table
                        .chains
                        .push(Chain::regular(dir.tier_chain(tier)));
                }
            }
        }
    }

    /// The isolated addresses per direction and family, and the jumps that use them: to the
    /// units' chain, or with tiers to the admin chain for every pod a tier or a unit selects.
    fn isolated_sets(&mut self, pods: &PodPolicies) {
        self.group = 0;
        self.rule(PODS, vec![est_related(), Stmt::Verdict(Verdict::Accept)]);
        if let Some(unknown) = &pods.unknown {
            self.unknown_drops(unknown, pods.report_denied);
        }
        let tiered = pods.has_tiers();
        let selected = |dir: Dir, audit: bool| -> std::collections::BTreeSet<IpAddr> {
            pods.policies
                .iter()
                .filter(|p| p.audit == audit)
                .filter_map(|p| dir.isolation(p))
                .flat_map(|i| i.pods.iter().copied())
                .collect()
        };
        let any_audit = pods.policies.iter().any(|p| p.audit);
        // Per direction: the pods an enforcing unit isolates, and those only audit units do.
        let views: Vec<(Dir, Vec<IpAddr>, Vec<IpAddr>)> = [Dir::In, Dir::Out]
            .into_iter()
            .map(|dir| {
                let enforced = selected(dir, false);
                let audited = if any_audit {
                    selected(dir, true).difference(&enforced).copied().collect()
                } else {
                    Vec::new()
                };
                (dir, enforced.into_iter().collect(), audited)
            })
            .collect();
        for (dir, enforced, audited) in &views {
            let dir = *dir;
            // With tiers, every pod a tier or a unit (enforcing or auditing) selects starts at
            // the admin tier; the audit units are then checked where the units are.
            let mut in_tiers = enforced.clone();
            in_tiers.extend(audited);
            in_tiers.extend(
                pods.admin
                    .iter()
                    .chain(&pods.baseline)
                    .filter(|p| !dir.tier_rules(p).is_empty())
                    .flat_map(|p| p.pods.iter().copied()),
            );
            for v in VERSIONS {
                let name = format!("pods.{}{}", dir.word(), suffix(v));
                self.p
                    .table
                    .sets
                    .push(address_set(name.clone(), v, enforced));
                self.p.set_groups.push(0);
                let (set, chain) = if tiered {
                    let name = format!("tiers.{}{}", dir.word(), suffix(v));
                    self.p
                        .table
                        .sets
                        .push(address_set(name.clone(), v, &in_tiers));
                    self.p.set_groups.push(0);
                    (name, dir.tier_chain(Tier::Admin))
                } else {
                    (name, dir.chain())
                };
                self.rule(
                    PODS,
                    vec![
                        lookup(dir.field(true, v), &set),
                        Stmt::Verdict(Verdict::Jump(chain.into())),
                    ],
                );
            }
        }
        if !any_audit {
            return;
        }
        for (dir, _, audited) in &views {
            for v in VERSIONS {
                let name = format!("pods.a{}{}", dir.word(), suffix(v));
                self.p.table.sets.push(address_set(name, v, audited));
                self.p.set_groups.push(0);
                // With tiers, the baseline chain jumps there instead (after the admin tier).
                if !tiered {
                    self.audit_jump(PODS, *dir, v);
                }
            }
        }
    }

    /// The jump from `chain` to the audit units' checks for the pods only they select.
    fn audit_jump(&mut self, chain: &str, dir: Dir, v: IpVersion) {
        let name = format!("pods.a{}{}", dir.word(), suffix(v));
        self.rule(
            chain,
            vec![
                lookup(dir.field(true, v), &name),
                Stmt::Verdict(Verdict::Jump(dir.chain_of(true).into())),
            ],
        );
    }

    /// Addresses of the pod prefixes that are no known pod's: dropped from and to, before
    /// any policy or tier (skeleton: the sets change by element as pods come and go). A pod
    /// not yet known has no identity any policy could admit it by, not even an admin tier's
    /// `Accept`. The node's own traffic (input and output hooks) never meets these rules.
    fn unknown_drops(&mut self, unknown: &UnknownPods, report: bool) {
        for v in VERSIONS {
            let s = suffix(v);
            let (cidrs, known) = (format!("pods.cidr{s}"), format!("pods.known{s}"));
            self.p
                .table
                .sets
                .push(prefix_set(cidrs.clone(), v, &unknown.cidrs));
            self.p.set_groups.push(0);
            self.p
                .table
                .sets
                .push(address_set(known.clone(), v, &unknown.known));
            self.p.set_groups.push(0);
            for dir in [Dir::Out, Dir::In] {
                let field = dir.field(true, v);
                let mut stmts = vec![
                    lookup(field, &cidrs),
                    Stmt::Lookup {
                        left: Expr::Payload(field),
                        set: SetRef::Named(known.clone()),
                        negate: true,
                    },
                    Stmt::Counter,
                ];
                if report {
                    stmts.push(Reported::Unknown(dir.reported()).stmt());
                }
                stmts.push(Stmt::Verdict(Verdict::Drop));
                self.rule(PODS, stmts);
            }
        }
    }

    /// One cluster-wide policy of `tier`: its group, sets and rules in its tier's chains.
    /// A refused policy with a `Deny` or `Pass` rule leaves a drop in its place (the API's
    /// "fail closed" for those), one with only `Accept` rules matches nothing. With `report`,
    /// what its `Deny` rules drop is reported by name.
    fn tier_policy(&mut self, tier: Tier, i: usize, p: &TierPolicy, report: bool) {
        let deny = p
            .ingress
            .iter()
            .chain(&p.egress)
            .any(|r| r.action != TierAction::Accept);
        let word = match tier {
            Tier::Admin => "admin",
            Tier::Baseline => "baseline",
        };
        self.group(format!("cluster-network-policy {}", p.name), deny);
        for dir in [Dir::In, Dir::Out] {
            let rules = dir.tier_rules(p);
            if rules.is_empty() {
                continue;
            }
            let chain = dir.tier_chain(tier);
            let targets = format!("{word}{i}.{}", dir.word());
            for v in VERSIONS {
                self.unit_set(address_set(format!("{targets}{}", suffix(v)), v, &p.pods));
            }
            for (j, rule) in rules.iter().enumerate() {
                let verdict = match (rule.action, tier) {
                    (TierAction::Accept, _) | (TierAction::Pass, Tier::Baseline) => Verdict::Return,
                    (TierAction::Deny, _) => Verdict::Drop,
                    (TierAction::Pass, Tier::Admin) => {
                        Verdict::Goto(dir.tier_chain(Tier::Baseline).into())
                    }
                };
                let mut end = Vec::new();
                if report && rule.action == TierAction::Deny {
                    end.push(Reported::Cluster(dir.reported(), p.name.clone()).stmt());
                }
                end.push(Stmt::Verdict(verdict));
                let prefix = format!("{targets}{j}");
                self.matching(dir, chain, &prefix, &targets, &rule.matches, &end);
            }
            if super::refused_by_test(&p.name, true) {
                self.rule(
                    chain,
                    vec![
                        Stmt::Counter,
                        Stmt::Verdict(Verdict::Jump(FAULT_CHAIN.into())),
                    ],
                );
            }
        }
    }

    /// One unit: its group, sets and `return` rules.
    fn pod_policy(&mut self, i: usize, p: &PodPolicy) {
        self.group(format!("network-policy {}", p.name), false);
        for dir in [Dir::In, Dir::Out] {
            let Some(iso) = dir.isolation(p) else {
                continue;
            };
            let targets = format!("np{i}.{}", dir.word());
            for v in VERSIONS {
                self.unit_set(address_set(format!("{targets}{}", suffix(v)), v, &iso.pods));
            }
            for (j, allow) in iso.allow.iter().enumerate() {
                self.allow(dir, p.audit, &format!("{targets}{j}"), &targets, allow);
            }
            if super::refused_by_test(&p.name, true) {
                self.rule(
                    dir.chain_of(p.audit),
                    vec![
                        Stmt::Counter,
                        Stmt::Verdict(Verdict::Jump(FAULT_CHAIN.into())),
                    ],
                );
            }
        }
    }

    fn unit_set(&mut self, set: Set) {
        self.p.table.sets.push(set);
        self.p.set_groups.push(self.group);
    }

    /// The rules of one allow (per family, per protocol), with its sets named after `prefix`.
    fn allow(&mut self, dir: Dir, audit: bool, prefix: &str, targets: &str, allow: &Allow) {
        let end = [Stmt::Verdict(Verdict::Return)];
        self.matching(dir, dir.chain_of(audit), prefix, targets, allow, &end);
    }

    /// The rules matching `allow` (per family, per protocol) in `chain`, each ending (after
    /// its counter) with `end`; its sets named after `prefix`, its pods by default those of
    /// set `targets`.
    fn matching(
        &mut self,
        dir: Dir,
        chain: &str,
        prefix: &str,
        targets: &str,
        allow: &Allow,
        end: &[Stmt],
    ) {
        for v in VERSIONS {
            let s = suffix(v);
            let mut stmts = Vec::new();
            match &allow.pods {
                None => stmts.push(lookup(dir.field(true, v), &format!("{targets}{s}"))),
                Some(pods) => {
                    let name = format!("{prefix}.l{s}");
                    self.unit_set(address_set(name.clone(), v, pods));
                    stmts.push(lookup(dir.field(true, v), &name));
                }
            }
            if let Some(peers) = &allow.peers {
                let name = format!("{prefix}.p{s}");
                self.unit_set(prefix_set(name.clone(), v, peers));
                stmts.push(lookup(dir.field(false, v), &name));
            }
            for ports in port_matches(&allow.ports) {
                let mut rule = stmts.clone();
                rule.extend(ports);
                rule.push(Stmt::Counter);
                rule.extend_from_slice(end);
                self.rule(chain, rule);
            }
        }
    }
}

#[cfg(test)]
mod tests;
