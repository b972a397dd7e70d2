//! Which of the cluster's policies decide a packet between pods.
//!
//! The decisions are read off the path the interpreter took through the pod chains (see
//! `controller::policy::program` and its `pods` layout), rule by rule, so they are what the
//! kernel does; who selects each pod is read from the pod isolation the chains were built
//! from. A direction is reported for each end that is a pod on this node, or that some
//! policy selects: egress for the source, ingress for the destination. Policies are named as
//! their rule comments name them (`k8s:<namespace>/<name>`, `k8s:cnp/<name>`).

mod show;
#[cfg(test)]
mod tests;

use std::net::IpAddr;

use crate::config::policy::pods::{Isolation, PodPolicies, PodPolicy, TierAction, TierPolicy};
use crate::controller::policy::program::{
    PODS, PODS_AUDIT_EGRESS, PODS_AUDIT_INGRESS, PODS_EGRESS, PODS_EGRESS_ADMIN,
    PODS_EGRESS_BASELINE, PODS_INGRESS, PODS_INGRESS_ADMIN, PODS_INGRESS_BASELINE,
};

use super::eval::{Did, Final, Hit};
use super::report::rule_name;

pub use show::{human, json};

/// The label of a NetworkPolicy's rules (before its name).
const UNIT_LABEL: &str = "network-policy ";
/// The label of a ClusterNetworkPolicy's rules (before its name).
const TIER_LABEL: &str = "cluster-network-policy ";

/// One end of the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// Its address.
    pub addr: IpAddr,
    /// `namespace/name` when it is a pod of this node the cluster state names.
    pub pod: Option<String>,
}

impl End {
    /// `ns/name (addr)`, or the address alone.
    pub fn shown(&self) -> String {
        match &self.pod {
            Some(name) => format!("{name} ({})", self.addr),
            None => self.addr.to_string(),
        }
    }
}

/// A direction of pod isolation, seen from the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Traffic from the pod (the packet's source).
    Egress,
    /// Traffic to the pod (the packet's destination).
    Ingress,
}

impl Direction {
    /// `egress` or `ingress`.
    pub fn word(self) -> &'static str {
        match self {
            Direction::Egress => "egress",
            Direction::Ingress => "ingress",
        }
    }

    fn isolation(self, p: &PodPolicy) -> Option<&Isolation> {
        match self {
            Direction::Egress => p.egress.as_ref(),
            Direction::Ingress => p.ingress.as_ref(),
        }
    }

    fn has_rules(self, p: &TierPolicy) -> bool {
        match self {
            Direction::Egress => !p.egress.is_empty(),
            Direction::Ingress => !p.ingress.is_empty(),
        }
    }

    /// The chains of this direction: admin tier, units, audit units, baseline tier.
    fn chains(self) -> [&'static str; 4] {
        match self {
            Direction::Egress => [
                PODS_EGRESS_ADMIN,
                PODS_EGRESS,
                PODS_AUDIT_EGRESS,
                PODS_EGRESS_BASELINE,
            ],
            Direction::Ingress => [
                PODS_INGRESS_ADMIN,
                PODS_INGRESS,
                PODS_AUDIT_INGRESS,
                PODS_INGRESS_BASELINE,
            ],
        }
    }
}

/// A tier of ClusterNetworkPolicies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Before the NetworkPolicies.
    Admin,
    /// After them, for pods none isolates.
    Baseline,
}

impl Tier {
    /// `admin` or `baseline`.
    pub fn word(self) -> &'static str {
        match self {
            Tier::Admin => "admin",
            Tier::Baseline => "baseline",
        }
    }
}

/// One decision on the way, in the order taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The address is in this node's pod prefixes but no known pod's: dropped.
    UnknownAddress,
    /// A ClusterNetworkPolicy's rule: `action` is `None` where the path cannot tell
    /// `Accept` from `Pass` (in the baseline tier both let the packet through).
    Tier {
        /// Its tier.
        tier: Tier,
        /// Its name.
        policy: String,
        /// What its rule did.
        action: Option<TierAction>,
    },
    /// Allowed by this NetworkPolicy (one of those isolating the pod).
    Allowed(String),
    /// Isolated, and none of its NetworkPolicies allows it: dropped.
    Denied,
    /// Allowed by this audit NetworkPolicy.
    AuditAllowed(String),
    /// The audit NetworkPolicies selecting the pod allow none of it: they would drop it (it
    /// is reported and passes).
    AuditWouldDrop,
}

/// How one direction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No policy selects the pod in this direction: nothing is checked, it passes.
    Open,
    /// The other direction, or an unknown address, ended the packet first.
    NotReached,
    /// Checked, and let through.
    Passed,
    /// Checked, and dropped.
    Dropped,
}

/// What the policies said of one end in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// Which direction.
    pub direction: Direction,
    /// The pod's end.
    pub end: End,
    /// The admin-tier ClusterNetworkPolicies that select it here, in the order checked.
    pub admin: Vec<String>,
    /// The enforcing NetworkPolicies that isolate it here.
    pub isolated_by: Vec<String>,
    /// The audit NetworkPolicies that select it here.
    pub audited_by: Vec<String>,
    /// The baseline-tier ClusterNetworkPolicies that select it here, in the order checked.
    pub baseline: Vec<String>,
    /// The decisions on the way, in order.
    pub decisions: Vec<Decision>,
    /// How it ended.
    pub outcome: Outcome,
}

impl Side {
    /// True when some policy selects the pod in this direction.
    pub fn selected(&self) -> bool {
        !(self.admin.is_empty()
            && self.isolated_by.is_empty()
            && self.audited_by.is_empty()
            && self.baseline.is_empty())
    }
}

/// The pod report of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodReport {
    /// The source's egress, when the source is a pod here or something selects it.
    pub egress: Option<Side>,
    /// The destination's ingress, likewise.
    pub ingress: Option<Side>,
}

impl PodReport {
    /// True when some audit NetworkPolicy selects an end: a run with them enforced can tell
    /// a different story.
    pub fn audited(&self) -> bool {
        [&self.egress, &self.ingress]
            .into_iter()
            .flatten()
            .any(|s| !s.audited_by.is_empty())
    }
}

/// The report for a packet from `from` to `to` under `pods`, its run having taken `hits` to
/// `verdict`; `None` when neither end is a pod here nor selected by any policy.
pub fn report(
    pods: &PodPolicies,
    from: IpAddr,
    to: IpAddr,
    hits: &[Hit],
    verdict: Final,
) -> Option<PodReport> {
    let side = |direction, addr| side(pods, direction, addr, hits, verdict);
    let report = PodReport {
        egress: side(Direction::Egress, from),
        ingress: side(Direction::Ingress, to),
    };
    (report.egress.is_some() || report.ingress.is_some()).then_some(report)
}

fn unknown(pods: &PodPolicies, addr: IpAddr) -> bool {
    pods.unknown.as_ref().is_some_and(|u| {
        u.cidrs.iter().any(|c| c.contains(&addr)) && u.known.binary_search(&addr).is_err()
    })
}

fn side(
    pods: &PodPolicies,
    direction: Direction,
    addr: IpAddr,
    hits: &[Hit],
    verdict: Final,
) -> Option<Side> {
    let selecting = |audit: bool| -> Vec<String> {
        pods.policies
            .iter()
            .filter(|p| p.audit == audit)
            .filter(|p| {
                direction
                    .isolation(p)
                    .is_some_and(|i| i.pods.contains(&addr))
            })
            .map(|p| p.name.clone())
            .collect()
    };
    let tier = |list: &[TierPolicy]| -> Vec<String> {
        list.iter()
            .filter(|p| direction.has_rules(p) && p.pods.contains(&addr))
            .map(|p| p.name.clone())
            .collect()
    };
    let mut side = Side {
        direction,
        end: End {
            addr,
            pod: pods.names.get(&addr).cloned(),
        },
        admin: tier(&pods.admin),
        isolated_by: selecting(false),
        audited_by: selecting(true),
        baseline: tier(&pods.baseline),
        decisions: Vec::new(),
        outcome: Outcome::Open,
    };
    let is_unknown = unknown(pods, addr);
    if side.end.pod.is_none() && !side.selected() && !is_unknown {
        return None;
    }
    let chains = direction.chains();
    let field = match direction {
        Direction::Egress => "saddr",
        Direction::Ingress => "daddr",
    };
    let mut entered = false;
    for hit in hits {
        let chain = hit.rule.chain.as_str();
        if chain == PODS {
            match &hit.did {
                // The unknown-address drops are one per direction: the source's matches
                // on `saddr`, the destination's on `daddr`.
                Did::End(Final::Drop) if is_unknown && hit.rule.text.contains(field) => {
                    side.decisions.push(Decision::UnknownAddress);
                    side.outcome = Outcome::Dropped;
                    return Some(side);
                }
                Did::Jump(to) if chains.contains(&to.as_str()) => entered = true,
                _ => {}
            }
            continue;
        }
        if !chains.contains(&chain) {
            continue;
        }
        entered = true;
        if let Some(d) = decision(pods, direction, chain, hit) {
            side.decisions.push(d);
        }
    }
    side.outcome = if !entered {
        if side.selected() && verdict != Final::Accept {
            Outcome::NotReached
        } else {
            Outcome::Open
        }
    } else if side.decisions.iter().any(|d| {
        matches!(
            d,
            Decision::Denied
                | Decision::Tier {
                    action: Some(TierAction::Deny),
                    ..
                }
        )
    }) {
        Outcome::Dropped
    } else {
        Outcome::Passed
    };
    Some(side)
}

/// What one matched rule of `direction`'s `chain` decided, if anything a person would name.
fn decision(pods: &PodPolicies, direction: Direction, chain: &str, hit: &Hit) -> Option<Decision> {
    let [admin, units, audit, _] = direction.chains();
    let label = rule_name(&hit.rule);
    if let Some(policy) = label.strip_prefix(TIER_LABEL) {
        let tier = if chain == admin {
            Tier::Admin
        } else {
            Tier::Baseline
        };
        let action = match (&hit.did, tier) {
            (Did::End(_), _) => Some(TierAction::Deny),
            (Did::Goto(_), Tier::Admin) => Some(TierAction::Pass),
            (Did::Return, Tier::Admin) => Some(TierAction::Accept),
            // A baseline `Accept` and `Pass` both return: the policy's rules tell which
            // only when they are all of one kind.
            (Did::Return, Tier::Baseline) => baseline_action(pods, direction, policy),
            _ => None,
        };
        return Some(Decision::Tier {
            tier,
            policy: policy.to_string(),
            action,
        });
    }
    let unit = label.strip_prefix(UNIT_LABEL).map(str::to_string);
    match (chain, &hit.did, unit) {
        (c, Did::Return, Some(policy)) if c == units => Some(Decision::Allowed(policy)),
        (c, Did::End(_), None) if c == units => Some(Decision::Denied),
        (c, Did::Return, Some(policy)) if c == audit => Some(Decision::AuditAllowed(policy)),
        (c, Did::Counted, None) if c == audit => Some(Decision::AuditWouldDrop),
        // The tiers' own jumps (to the baseline, the units, the audit units) decide nothing.
        _ => None,
    }
}

/// The action of `policy`'s baseline rules in `direction` that let a packet through, when
/// they are all one.
fn baseline_action(pods: &PodPolicies, direction: Direction, policy: &str) -> Option<TierAction> {
    let p = pods.baseline.iter().find(|p| p.name == policy)?;
    let rules = match direction {
        Direction::Egress => &p.egress,
        Direction::Ingress => &p.ingress,
    };
    let mut through = rules
        .iter()
        .map(|r| r.action)
        .filter(|a| *a != TierAction::Deny);
    let first = through.next()?;
    through.all(|a| a == first).then_some(first)
}
