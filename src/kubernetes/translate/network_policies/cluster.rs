//! ClusterNetworkPolicies (policy.networking.k8s.io/v1alpha2) -> the admin and baseline
//! tiers around the NetworkPolicies, for the pods on this node:
//!
//! - `tier: Admin` policies are checked before the NetworkPolicies, `tier: Baseline` ones
//!   after them (only for pods no NetworkPolicy isolates in the direction); within a tier by
//!   `priority` (lower first; the API leaves equal priorities to the implementation: here by
//!   name), within a policy by the order its rules are written. The first rule that matches
//!   decides: `Accept`, `Deny`, or `Pass` (on to the next tier).
//! - The subject is `namespaces` (every pod of those) or `pods` (namespaces AND pods); only
//!   the pods on this node are programmed here. Peers are `namespaces`, `pods` and, for
//!   egress, `networks`; anywhere in the cluster. Host-network pods take no part.
//! - `protocols` are `tcp`/`udp`/`sctp` with a port or a range, or a `destinationNamedPort`,
//!   which resolves through the subject's pods for ingress and through the peer pods for
//!   egress (as NetworkPolicies' named ports do). No `protocols`: all traffic.
//!
//! Failing closed, as the API asks of a peer an implementation cannot read: a peer with an
//! unknown field or none, a `nodes` or `domainNames` peer (not supported), or a selector,
//! prefix or port that does not read makes an `Accept` rule match nothing and a `Deny` or
//! `Pass` rule deny all traffic of the direction; each is reported. A policy whose tier,
//! priority or subject does not read is left out (nobody knows where it would apply).

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::select::{PodView, pod_views, selector};
use super::{Skipped, resolve};
use crate::config::kubernetes::selector::LabelSelector;
use crate::config::policy::pods::{Allow, L4Protocol, PortRange, TierAction, TierPolicy, TierRule};
use crate::kubernetes::compose::NAME_PREFIX;
use crate::kubernetes::objects::{
    self, ClusterNetworkPolicy, ClusterNetworkPolicyPeer, ClusterNetworkPolicyProtocol,
    ClusterNetworkPolicyRule, Namespace, NamespacedPod, Pod,
};
use crate::kubernetes::order;

/// The highest priority the API allows.
const MAX_PRIORITY: i64 = 1000;

/// The two tiers, each in the order checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tiers {
    /// `tier: Admin`.
    pub admin: Vec<TierPolicy>,
    /// `tier: Baseline`.
    pub baseline: Vec<TierPolicy>,
}

/// Translates every ClusterNetworkPolicy for the pods on `node_name`: the tiers (policies
/// that select no pod here left out) and what was left out or failed closed.
pub fn translate<'a>(
    policies: impl IntoIterator<Item = &'a ClusterNetworkPolicy>,
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    node_name: &str,
) -> (Tiers, Vec<Skipped>) {
    let empty = Default::default();
    let views = pod_views(pods, namespaces, node_name, &empty);
    let mut out = Tiers::default();
    let mut skipped = Vec::new();
    for policy in policies {
        let mut t = Translation {
            policy,
            pods: &views,
            skipped: &mut skipped,
        };
        if let Some((tier, p)) = t.policy() {
            match tier {
                Tier::Admin => out.admin.push(p),
                Tier::Baseline => out.baseline.push(p),
            }
        }
    }
    for tier in [&mut out.admin, &mut out.baseline] {
        order::sort_by(tier, |a, b| {
            (a.priority, &a.name).cmp(&(b.priority, &b.name))
        });
        tier.dedup_by(|a, b| a.name == b.name);
    }
    (out, skipped)
}

/// Which tier a policy is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    Admin,
    Baseline,
}

/// Which way a rule points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Traffic to the subject; named ports resolve through it.
    Ingress,
    /// Traffic from it; named ports resolve through the peers.
    Egress,
}

/// A pods selector (namespaces AND pods; `None` pods = every pod of the namespaces).
struct Selects {
    namespaces: LabelSelector,
    pods: Option<LabelSelector>,
}

impl Selects {
    fn matches(&self, p: &PodView<'_>) -> bool {
        self.namespaces.matches(p.namespace_labels)
            && self.pods.as_ref().is_none_or(|s| s.matches(p.labels))
    }
}

/// What one peer came to.
enum Peer<'v, 'p> {
    /// These prefixes, these pods among them.
    Read(Vec<IpNet>, Vec<&'v PodView<'p>>),
    /// It cannot be read (why): the rule fails closed.
    Unreadable(String),
}

/// One policy's translation.
struct Translation<'a, 'p, 's> {
    /// The policy.
    policy: &'a ClusterNetworkPolicy,
    /// Every pod that takes part.
    pods: &'a [PodView<'p>],
    /// Where problems go.
    skipped: &'s mut Vec<Skipped>,
}

impl<'a, 'p> Translation<'a, 'p, '_> {
    fn skip(&mut self, reason: String) {
        self.skipped.push(Skipped {
            policy: self.policy.metadata.name.clone(),
            reason,
        });
    }

    /// The tier and the policy, or `None` when it selects no pod here (or cannot be read).
    fn policy(&mut self) -> Option<(Tier, TierPolicy)> {
        let spec = &self.policy.spec;
        let tier = match spec.tier.as_str() {
            "Admin" => Tier::Admin,
            "Baseline" => Tier::Baseline,
            other => {
                self.skip(format!("left out: unknown tier `{other}`"));
                return None;
            }
        };
        let priority = match spec.priority {
            Some(p @ 0..=MAX_PRIORITY) => p as u32,
            Some(p) => {
                self.skip(format!(
                    "left out: priority {p} is not within 0-{MAX_PRIORITY}"
                ));
                return None;
            }
            None => {
                self.skip("left out: no priority".into());
                return None;
            }
        };
        let subject = match (&spec.subject.namespaces, &spec.subject.pods) {
            (Some(ns), None) => selects_namespaces(ns),
            (None, Some(p)) => selects_pods(p),
            _ => Err("the subject needs exactly one of `namespaces` and `pods`".into()),
        };
        let subject = match subject {
            Ok(s) => s,
            Err(e) => {
                self.skip(format!("left out: subject: {e}"));
                return None;
            }
        };
        let targets: Vec<&PodView<'p>> = self
            .pods
            .iter()
            .filter(|p| p.local && subject.matches(p))
            .collect();
        if targets.is_empty() {
            return None;
        }
        let pods: BTreeSet<IpAddr> = targets.iter().flat_map(|p| p.ips.iter().copied()).collect();
        let ingress = self.rules(&targets, &spec.ingress, Direction::Ingress);
        let egress = self.rules(&targets, &spec.egress, Direction::Egress);
        Some((
            tier,
            TierPolicy {
                name: format!("{NAME_PREFIX}{}", self.policy.metadata.name),
                priority,
                pods: pods.into_iter().collect(),
                ingress,
                egress,
            },
        ))
    }

    /// The rules of one direction, in order (one rule may become several, all alike).
    fn rules(
        &mut self,
        targets: &[&PodView<'p>],
        rules: &[ClusterNetworkPolicyRule],
        direction: Direction,
    ) -> Vec<TierRule> {
        let mut out = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let what = match &rule.name {
                Some(name) if !name.is_empty() => format!("rule `{name}`"),
                _ => format!("rule {i}"),
            };
            let action = match rule.action.as_str() {
                "Accept" => TierAction::Accept,
                "Deny" => TierAction::Deny,
                "Pass" => TierAction::Pass,
                other => {
                    self.skip(format!("{what}: unknown action `{other}`: denies all"));
                    out.push(deny_all());
                    continue;
                }
            };
            match self.rule(targets, rule, direction) {
                Ok(matches) => out.extend(
                    matches
                        .into_iter()
                        .map(|matches| TierRule { action, matches }),
                ),
                Err(e) if action == TierAction::Accept => {
                    self.skip(format!("{what}: {e}: matches nothing"));
                }
                Err(e) => {
                    self.skip(format!("{what}: {e}: denies all"));
                    out.push(deny_all());
                }
            }
        }
        out
    }

    /// What one rule matches, or why it cannot be read.
    fn rule(
        &mut self,
        targets: &[&PodView<'p>],
        rule: &ClusterNetworkPolicyRule,
        direction: Direction,
    ) -> Result<Vec<Allow>, String> {
        if rule.peers.is_empty() {
            return Err("no peers".into());
        }
        let mut nets: BTreeSet<IpNet> = BTreeSet::new();
        let mut peer_pods: Vec<&'a PodView<'p>> = Vec::new();
        for peer in &rule.peers {
            match self.peer(peer, direction) {
                Peer::Read(n, p) => {
                    nets.extend(n);
                    peer_pods.extend(p);
                }
                Peer::Unreadable(e) => return Err(e),
            }
        }
        let mut numbered = Vec::new();
        let mut named = Vec::new();
        for p in &rule.protocols {
            match protocol(p)? {
                Protocol::Numbered(r) => numbered.push(r),
                Protocol::Named(name) => named.push(name),
            }
        }
        let peers = Some(nets.into_iter().collect::<Vec<_>>());
        let mut out = Vec::new();
        if rule.protocols.is_empty() || !numbered.is_empty() {
            order::sort(&mut numbered);
            numbered.dedup();
            out.push(Allow {
                pods: None,
                peers: peers.clone(),
                ports: numbered,
            });
        }
        for name in named {
            // The API names no protocol: each one the port is declared with.
            for protocol in [L4Protocol::Tcp, L4Protocol::Udp, L4Protocol::Sctp] {
                let resolved = match direction {
                    Direction::Ingress => resolve(targets.iter().copied(), &name, protocol),
                    Direction::Egress => resolve(peer_pods.iter().copied(), &name, protocol),
                };
                for (number, ips) in resolved {
                    let ports = vec![PortRange {
                        protocol,
                        first: number,
                        last: number,
                    }];
                    out.push(match direction {
                        Direction::Ingress => Allow {
                            pods: Some(ips),
                            peers: peers.clone(),
                            ports,
                        },
                        Direction::Egress => Allow {
                            pods: None,
                            peers: Some(ips.into_iter().map(IpNet::from).collect()),
                            ports,
                        },
                    });
                }
            }
        }
        Ok(out)
    }

    /// One peer's prefixes and pods.
    fn peer(&mut self, peer: &ClusterNetworkPolicyPeer, direction: Direction) -> Peer<'a, 'p> {
        if let Some(field) = peer.unknown.first() {
            return Peer::Unreadable(format!("a peer of an unknown type `{field}`"));
        }
        let set = [
            peer.namespaces.is_some(),
            peer.pods.is_some(),
            !peer.networks.is_empty(),
            peer.nodes.is_some(),
            !peer.domain_names.is_empty(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if set != 1 {
            return Peer::Unreadable(format!(
                "a peer needs exactly one field, it has {set} (a newer API?)"
            ));
        }
        if peer.nodes.is_some() {
            return Peer::Unreadable("`nodes` peers are not supported".into());
        }
        if !peer.domain_names.is_empty() {
            return Peer::Unreadable("`domainNames` peers are not supported".into());
        }
        if !peer.networks.is_empty() {
            if direction == Direction::Ingress {
                return Peer::Unreadable("`networks` peers are for egress only".into());
            }
            let mut nets = Vec::new();
            for n in &peer.networks {
                match n.parse::<IpNet>() {
                    Ok(net) => nets.push(net.trunc()),
                    Err(_) => return Peer::Unreadable(format!("invalid network `{n}`")),
                }
            }
            return Peer::Read(nets, Vec::new());
        }
        let selects = match (&peer.namespaces, &peer.pods) {
            (Some(ns), _) => selects_namespaces(ns),
            (_, Some(p)) => selects_pods(p),
            _ => unreachable!("one field is set"),
        };
        match selects {
            Ok(s) => {
                let pods: Vec<&'a PodView<'p>> =
                    self.pods.iter().filter(|p| s.matches(p)).collect();
                let nets = pods
                    .iter()
                    .flat_map(|p| p.ips.iter().map(|ip| IpNet::from(*ip)))
                    .collect();
                Peer::Read(nets, pods)
            }
            Err(e) => Peer::Unreadable(format!("a peer: {e}")),
        }
    }
}

/// A rule that drops all traffic of its direction for every pod of its policy (fail closed).
fn deny_all() -> TierRule {
    TierRule {
        action: TierAction::Deny,
        matches: Allow::default(),
    }
}

fn selects_namespaces(ns: &objects::LabelSelector) -> Result<Selects, String> {
    Ok(Selects {
        namespaces: selector(ns)?,
        pods: None,
    })
}

fn selects_pods(p: &NamespacedPod) -> Result<Selects, String> {
    Ok(Selects {
        namespaces: selector(&p.namespace_selector)?,
        pods: Some(selector(&p.pod_selector)?),
    })
}

/// A protocol match, read.
enum Protocol {
    /// A protocol's port, range or every port.
    Numbered(PortRange),
    /// A container port name.
    Named(String),
}

/// One protocol match; `Err` when it cannot be read.
fn protocol(p: &ClusterNetworkPolicyProtocol) -> Result<Protocol, String> {
    if let Some(field) = p.unknown.first() {
        return Err(format!("a protocol of an unknown type `{field}`"));
    }
    let given = [
        (L4Protocol::Tcp, &p.tcp),
        (L4Protocol::Udp, &p.udp),
        (L4Protocol::Sctp, &p.sctp),
    ];
    let set: Vec<_> = given.iter().filter(|(_, v)| v.is_some()).collect();
    match (set.as_slice(), &p.destination_named_port) {
        ([], Some(name)) if !name.is_empty() => Ok(Protocol::Named(name.clone())),
        ([(protocol, Some(port))], None) => {
            let (first, last) = match &port.destination_port {
                None => (0, u16::MAX),
                Some(d) => port_range(d)?,
            };
            Ok(Protocol::Numbered(PortRange {
                protocol: *protocol,
                first,
                last,
            }))
        }
        _ => Err("a protocol needs exactly one field".into()),
    }
}

/// A destination port or range as an inclusive range.
fn port_range(d: &objects::PortOrRange) -> Result<(u16, u16), String> {
    let valid = |n: i64| u16::try_from(n).ok().filter(|n| *n > 0);
    match (d.number, d.range) {
        (Some(n), None) => valid(n)
            .map(|n| (n, n))
            .ok_or_else(|| format!("invalid port {n}")),
        (None, Some((start, end))) => match (valid(start), valid(end)) {
            (Some(s), Some(e)) if s < e => Ok((s, e)),
            _ => Err(format!("invalid port range {start}-{end}")),
        },
        _ => Err("a destinationPort needs exactly one of `number` and `range`".into()),
    }
}

#[cfg(test)]
mod tests;
