//! NetworkPolicies (+ Pods and Namespaces) -> pod isolation for the pods on this node, as
//! kube-router's nftables mode reads them:
//!
//! - A policy selects the pods of its own namespace that match `podSelector` (empty = all).
//!   Only pods on this node (`spec.nodeName`) are isolated here; pods anywhere are peers.
//! - `policyTypes` as the API defines it when absent: `Ingress` always, `Egress` when the
//!   policy has egress rules. A pod selected by any policy of a direction is isolated in that
//!   direction: only what some policy's rules allow passes. Unselected pods stay open.
//! - A rule allows traffic from (to) any of its peers on any of its ports; no peers =
//!   anywhere, no ports = every port. A peer is `podSelector` (the policy's namespace),
//!   `namespaceSelector` (all pods of those namespaces), both (AND), or `ipBlock` minus its
//!   `except`. A port is a number, a range (`endPort`) or a container port name: named
//!   ports resolve through the *target* pods for ingress and the *peer* pods for egress, so
//!   one name may stand for different numbers on different pods.
//! - Each policy stays one unit ([`PodPolicy`]), so a policy the kernel refuses fails closed
//!   for the pods it selects only. Host-network pods and finished pods take no part.
//!
//! Beside the policies ([`translate_for`]): a policy annotated `edgenetd.io/mode: audit` (or
//! every policy, with [`Options::mode`] audit) only reports what it would drop; with
//! [`Options::unknown_cidrs`], the addresses of those prefixes that are no known pod's are to
//! be dropped (the known ones are listed); the local pods' names go along for the reports and
//! `edgenetd explain`.
//!
//! What cannot be read is reported in [`Skipped`]: a policy whose `podSelector` is invalid is
//! left out (nobody knows which pods it would isolate); an invalid peer or port is left out of
//! its rule, which then allows less, never more.

pub mod cluster;
mod select;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::kubernetes::PolicyMode;
use crate::config::kubernetes::selector::LabelSelector;
use crate::config::policy::pods::{
    Allow, Isolation, L4Protocol, PodPolicies, PodPolicy, PortRange, UnknownPods,
};
use crate::kubernetes::client::Labels;
use crate::kubernetes::compose::NAME_PREFIX;
use crate::kubernetes::objects::{
    IntOrString, Namespace, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, Pod,
};
use crate::kubernetes::order;
use select::{PodView, ip_block, parse_protocol, pod_views, selector};

/// One thing left out, by policy (`<namespace>/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `<namespace>/<name>` of the NetworkPolicy.
    pub policy: String,
    /// What was left out and why.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "networkpolicy {}: {}", self.policy, self.reason)
    }
}

/// Which way a rule points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Traffic to the selected pods; named ports resolve through them.
    Ingress,
    /// Traffic from them; named ports resolve through the peers.
    Egress,
}

/// The annotation that puts one NetworkPolicy in audit (`audit`) or enforce mode
/// (`enforce`), whatever `network_policy_mode` says.
pub const MODE_ANNOTATION: &str = "edgenetd.io/mode";

/// What the translation needs to know of this node beside the objects.
#[derive(Debug, Clone, Default)]
pub struct Options<'a> {
    /// This node's Node name.
    pub node_name: &'a str,
    /// `network_policy_mode`: the mode of a policy without the annotation.
    pub mode: PolicyMode,
    /// `log_denied`: drops are reported.
    pub report_denied: bool,
    /// `isolate_unknown_pods` with this node's pod prefixes: the addresses in them that are
    /// no known pod's are dropped (`None`: not isolated).
    pub unknown_cidrs: Option<Vec<IpNet>>,
}

/// Translates every NetworkPolicy for the pods on `node_name`: the isolation units (sorted by
/// name, `k8s:<namespace>/<name>`) and what was left out. Every policy enforces.
pub fn translate<'a>(
    policies: impl IntoIterator<Item = &'a NetworkPolicy>,
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    node_name: &str,
) -> (PodPolicies, Vec<Skipped>) {
    translate_for(
        policies,
        pods,
        namespaces,
        &Options {
            node_name,
            ..Options::default()
        },
    )
}

/// [`translate`] with the modes, the reports and the isolation of unknown addresses `opts`
/// asks for.
pub fn translate_for<'a>(
    policies: impl IntoIterator<Item = &'a NetworkPolicy>,
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    opts: &Options<'_>,
) -> (PodPolicies, Vec<Skipped>) {
    let empty = Labels::default();
    let views = pod_views(pods, namespaces, opts.node_name, &empty);
    let mut out = PodPolicies {
        report_denied: opts.report_denied,
        unknown: opts.unknown_cidrs.as_ref().map(|cidrs| UnknownPods {
            cidrs: cidrs.clone(),
            known: views
                .iter()
                .flat_map(|p| p.ips.iter().copied())
                .filter(|ip| cidrs.iter().any(|c| c.contains(ip)))
                .collect::<BTreeSet<IpAddr>>()
                .into_iter()
                .collect(),
        }),
        ..PodPolicies::default()
    };
    let mut skipped = Vec::new();
    for policy in policies {
        let mut t = Translation {
            policy,
            pods: &views,
            skipped: &mut skipped,
        };
        let audit = t.audit(opts.mode);
        out.policies
            .extend(t.policy().map(|p| PodPolicy { audit, ..p }));
    }
    order::sort_by(&mut out.policies, |a, b| a.name.cmp(&b.name));
    out.policies.dedup_by(|a, b| a.name == b.name);
    // The names serve the reports and `edgenetd explain`, which read them only where
    // something is programmed: where nothing is they would only be held, cached and
    // compared at every pod's change.
    if !out.is_empty() {
        out.names = names_of(&views);
    }
    (out, skipped)
}

/// The names (`namespace/name`) of the pods on `node_name`, by address: what
/// [`translate_for`] keeps where it programs something, for a caller that adds the tiers.
pub fn local_pod_names<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    node_name: &str,
) -> BTreeMap<IpAddr, String> {
    let empty = Labels::default();
    names_of(&pod_views(pods, namespaces, node_name, &empty))
}

fn names_of(views: &[PodView<'_>]) -> BTreeMap<IpAddr, String> {
    views
        .iter()
        .filter(|p| p.local)
        .flat_map(|p| p.ips.iter().map(move |ip| (*ip, p.name())))
        .collect()
}

/// One policy's translation.
struct Translation<'a, 'p, 's> {
    /// The policy.
    policy: &'a NetworkPolicy,
    /// Every pod that takes part.
    pods: &'a [PodView<'p>],
    /// Where problems go.
    skipped: &'s mut Vec<Skipped>,
}

impl<'a, 'p> Translation<'a, 'p, '_> {
    fn skip(&mut self, reason: String) {
        let m = &self.policy.metadata;
        self.skipped.push(Skipped {
            policy: format!("{}/{}", m.namespace, m.name),
            reason,
        });
    }

    fn namespace(&self) -> &str {
        &self.policy.metadata.namespace
    }

    /// True when the policy only audits: its annotation says so, or (without one) `mode`.
    fn audit(&mut self, mode: PolicyMode) -> bool {
        match self
            .policy
            .metadata
            .annotations
            .get(MODE_ANNOTATION)
            .map(String::as_str)
        {
            Some("audit") => true,
            Some("enforce") => false,
            None => mode == PolicyMode::Audit,
            Some(other) => {
                self.skip(format!(
                    "annotation {MODE_ANNOTATION}: `{other}` is neither `audit` nor `enforce`: the policy is in {} mode",
                    mode.word()
                ));
                mode == PolicyMode::Audit
            }
        }
    }

    /// The unit, or `None` when the policy selects no pod on this node (or cannot be read).
    fn policy(&mut self) -> Option<PodPolicy> {
        let spec = &self.policy.spec;
        let targets_selector = match selector(&spec.pod_selector) {
            Ok(s) => s,
            Err(e) => {
                self.skip(format!("left out: podSelector: {e}"));
                return None;
            }
        };
        let targets: Vec<&PodView<'p>> = self
            .pods
            .iter()
            .filter(|p| p.local && p.namespace == self.namespace())
            .filter(|p| targets_selector.matches(p.labels))
            .collect();
        if targets.is_empty() {
            return None;
        }
        let (ingress, egress) = match &spec.policy_types {
            Some(types) => (
                types.iter().any(|t| t == "Ingress"),
                types.iter().any(|t| t == "Egress"),
            ),
            None => (true, !spec.egress.is_empty()),
        };
        let ingress = ingress.then(|| {
            let rules: Vec<_> = spec.ingress.iter().map(|r| (&r.from, &r.ports)).collect();
            self.isolation(&targets, &rules, Direction::Ingress)
        });
        let egress = egress.then(|| {
            let rules: Vec<_> = spec.egress.iter().map(|r| (&r.to, &r.ports)).collect();
            self.isolation(&targets, &rules, Direction::Egress)
        });
        Some(PodPolicy {
            name: format!(
                "{NAME_PREFIX}{}/{}",
                self.namespace(),
                self.policy.metadata.name
            ),
            ingress,
            egress,
            audit: false,
        })
    }

    /// The isolation of `targets` in one direction with `rules` (peers, ports) as allows.
    fn isolation(
        &mut self,
        targets: &[&PodView<'p>],
        rules: &[(&Vec<NetworkPolicyPeer>, &Vec<NetworkPolicyPort>)],
        direction: Direction,
    ) -> Isolation {
        let pods: BTreeSet<IpAddr> = targets.iter().flat_map(|p| p.ips.iter().copied()).collect();
        let mut allow = Vec::new();
        for (peers, ports) in rules {
            allow.extend(self.rule(targets, peers, ports, direction));
        }
        Isolation {
            pods: pods.into_iter().collect(),
            allow,
        }
    }

    /// One rule's allows: numbered ports with every peer, and one allow per number a named
    /// port resolves to (restricted to the targets or peers it resolves on).
    fn rule(
        &mut self,
        targets: &[&PodView<'p>],
        peers: &[NetworkPolicyPeer],
        ports: &[NetworkPolicyPort],
        direction: Direction,
    ) -> Vec<Allow> {
        let (peer_nets, peer_pods) = self.peers(peers);
        let mut numbered = Vec::new();
        let mut named = Vec::new();
        for port in ports {
            match self.port(port) {
                Some(Port::Numbered(r)) => numbered.push(r),
                Some(Port::Named(name, protocol)) => named.push((name, protocol)),
                None => {}
            }
        }
        let mut out = Vec::new();
        if ports.is_empty() || !numbered.is_empty() {
            order::sort(&mut numbered);
            numbered.dedup();
            out.push(Allow {
                pods: None,
                peers: peer_nets.clone(),
                ports: numbered,
            });
        }
        for (name, protocol) in named {
            let resolved = match direction {
                Direction::Ingress => resolve(targets.iter().copied(), &name, protocol),
                Direction::Egress => match &peer_pods {
                    Some(p) => resolve(p.iter().copied(), &name, protocol),
                    None => resolve(self.pods.iter(), &name, protocol),
                },
            };
            for (number, ips) in resolved {
                let range = PortRange {
                    protocol,
                    first: number,
                    last: number,
                };
                out.push(match direction {
                    Direction::Ingress => Allow {
                        pods: Some(ips),
                        peers: peer_nets.clone(),
                        ports: vec![range],
                    },
                    Direction::Egress => Allow {
                        pods: None,
                        peers: Some(ips.into_iter().map(IpNet::from).collect()),
                        ports: vec![range],
                    },
                });
            }
        }
        out
    }

    /// The peers as prefixes (`None` = anywhere), and the pods among them (`None` = no
    /// peers given: every pod; ipBlocks add no pods).
    #[allow(clippy::type_complexity)]
    fn peers(
        &mut self,
        peers: &[NetworkPolicyPeer],
    ) -> (Option<Vec<IpNet>>, Option<Vec<&'a PodView<'p>>>) {
        if peers.is_empty() {
            return (None, None);
        }
        let mut nets: BTreeSet<IpNet> = BTreeSet::new();
        let mut pods: Vec<&'a PodView<'p>> = Vec::new();
        let all = self.pods;
        for peer in peers {
            if let Some(block) = &peer.ip_block {
                match ip_block(block) {
                    Ok(b) => nets.extend(b),
                    Err(e) => self.skip(format!("a peer left out: ipBlock: {e}")),
                }
                continue;
            }
            let Some(matcher) = self.peer_matcher(peer) else {
                continue;
            };
            for p in all.iter().filter(|p| matcher.matches(p)) {
                nets.extend(p.ips.iter().map(|ip| IpNet::from(*ip)));
                pods.push(p);
            }
        }
        (Some(nets.into_iter().collect()), Some(pods))
    }

    /// What a pod/namespace selector peer matches; `None` (reported) when it cannot be read.
    fn peer_matcher(&mut self, peer: &NetworkPolicyPeer) -> Option<PeerMatcher> {
        let pod = peer.pod_selector.as_ref().map(selector).transpose();
        let ns = peer.namespace_selector.as_ref().map(selector).transpose();
        match (pod, ns) {
            (Ok(pod), Ok(namespaces)) => Some(PeerMatcher {
                own_namespace: namespaces.is_none().then(|| self.namespace().to_string()),
                pod,
                namespaces,
            }),
            (Err(e), _) | (_, Err(e)) => {
                self.skip(format!("a peer left out: {e}"));
                None
            }
        }
    }

    /// A policy port as a numbered range or a name to resolve; `None` (reported) if invalid.
    fn port(&mut self, p: &NetworkPolicyPort) -> Option<Port> {
        let Some(protocol) = parse_protocol(p.protocol.as_deref()) else {
            self.skip(format!(
                "a port left out: unknown protocol `{}`",
                p.protocol.as_deref().unwrap_or_default()
            ));
            return None;
        };
        let whole = PortRange {
            protocol,
            first: 0,
            last: u16::MAX,
        };
        let valid = |n: i32| u16::try_from(n).ok().filter(|n| *n > 0);
        match (&p.port, p.end_port) {
            (None, _) => Some(Port::Numbered(whole)),
            (Some(IntOrString::String(name)), None) => Some(Port::Named(name.clone(), protocol)),
            (Some(IntOrString::Int(n)), end) => match (valid(*n), end.map(valid)) {
                (Some(first), None) => Some(Port::Numbered(PortRange {
                    protocol,
                    first,
                    last: first,
                })),
                (Some(first), Some(Some(last))) if last >= first => {
                    Some(Port::Numbered(PortRange {
                        protocol,
                        first,
                        last,
                    }))
                }
                _ => {
                    self.skip(format!("a port left out: invalid port {n}-{end:?}"));
                    None
                }
            },
            (Some(IntOrString::String(name)), Some(_)) => {
                self.skip(format!("a port left out: endPort with named port `{name}`"));
                None
            }
        }
    }
}

/// A policy port, read.
enum Port {
    /// A number or a range.
    Numbered(PortRange),
    /// A container port name and its protocol.
    Named(String, L4Protocol),
}

/// A pod/namespace selector peer.
struct PeerMatcher {
    /// The policy's namespace when the peer has no namespaceSelector.
    own_namespace: Option<String>,
    /// The pods' selector (`None` = every pod of the namespaces).
    pod: Option<LabelSelector>,
    /// The namespaces' selector (`None` = the policy's namespace).
    namespaces: Option<LabelSelector>,
}

impl PeerMatcher {
    fn matches(&self, p: &PodView<'_>) -> bool {
        let in_namespace = match (&self.own_namespace, &self.namespaces) {
            (Some(own), _) => p.namespace == own,
            (None, Some(ns)) => ns.matches(p.namespace_labels),
            (None, None) => true,
        };
        in_namespace && self.pod.as_ref().is_none_or(|s| s.matches(p.labels))
    }
}

/// The numbers `name` resolves to on `pods`, each with the addresses of the pods it does.
fn resolve<'a, 'p: 'a>(
    pods: impl Iterator<Item = &'a PodView<'p>>,
    name: &str,
    protocol: L4Protocol,
) -> BTreeMap<u16, Vec<IpAddr>> {
    let mut by_number: BTreeMap<u16, BTreeSet<IpAddr>> = BTreeMap::new();
    for p in pods {
        if let Some(n) = p.named_port(name, protocol) {
            by_number
                .entry(n)
                .or_default()
                .extend(p.ips.iter().copied());
        }
    }
    by_number
        .into_iter()
        .map(|(n, ips)| (n, ips.into_iter().collect()))
        .collect()
}

#[cfg(test)]
mod tests;
