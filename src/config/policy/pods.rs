//! Pod isolation: which local addresses (pods behind this node) are isolated in which
//! direction, and the traffic each isolating unit allows. The policy controller programs this
//! without knowing where it came from (today: Kubernetes NetworkPolicies, translated in the
//! `kubernetes` feature); TOML cannot write it, so a config read from files has none.
//!
//! Semantics, per direction (ingress = traffic to a pod, egress = traffic from it): a pod in
//! any unit's `pods` is isolated, and then only traffic some unit's `allow` admits passes;
//! a pod in no unit is open. Replies of admitted connections always pass, and so does
//! traffic from the node itself. Each [`PodPolicy`] is programmed as one rule group: if the
//! kernel refuses it, its allows are missing while its pods stay isolated (fail closed).
//!
//! Around the units, two tiers of cluster-wide policies ([`TierPolicy`], Kubernetes'
//! ClusterNetworkPolicies), each checked policy by policy (by priority, then name) and rule by
//! rule, the first matching rule deciding:
//!
//! - the **admin** tier first: `Accept` admits the traffic (no unit nor baseline rule is
//!   checked for that direction), `Deny` drops it, `Pass` skips the rest of the admin tier;
//! - then the units, for a pod some unit isolates in that direction (their verdict is final);
//! - then, for a pod no unit isolates, the **baseline** tier: `Accept` admits, `Deny` drops,
//!   `Pass` skips the rest of the tier;
//! - what no tier decides passes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

/// Every isolating unit, in a canonical order (by name), and the cluster-wide tiers around
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPolicies {
    /// The units, sorted by name (names unique).
    pub policies: Vec<PodPolicy>,
    /// Addresses of this node's pod prefixes that belong to no known pod are dropped both
    /// ways (`None`: they are not).
    pub unknown: Option<UnknownPods>,
    /// What an enforcing unit (or the drop of unknown addresses) drops is reported: a log
    /// line and a counter per packet, by the daemon. Audit units report whatever this says.
    pub report_denied: bool,
    /// The names (`namespace/name`) of the pods on this node, by address, for the reports
    /// and `edgenetd explain` (kept where something is programmed).
    pub names: BTreeMap<IpAddr, String>,
    /// The admin tier, checked before the units: in the order checked (priority, then name).
    pub admin: Vec<TierPolicy>,
    /// The baseline tier, checked after the units for pods no unit isolates in the
    /// direction: in the order checked (priority, then name).
    pub baseline: Vec<TierPolicy>,
}

impl PodPolicies {
    /// True when no pod is isolated by anything, no tier policy selects one and no unknown
    /// address is dropped.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty() && !self.has_tiers() && self.unknown.is_none()
    }

    /// True when some cluster-wide tier policy selects a pod here.
    pub fn has_tiers(&self) -> bool {
        !self.admin.is_empty() || !self.baseline.is_empty()
    }
}

/// The pod prefixes of this node and the addresses in them that are known pods': every other
/// address of the prefixes is dropped, to and from, until its pod is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownPods {
    /// This node's pod prefixes.
    pub cidrs: Vec<IpNet>,
    /// The addresses within them of known pods (sorted, unique).
    pub known: Vec<IpAddr>,
}

/// One cluster-wide policy of a tier (a ClusterNetworkPolicy) for the pods on this node it
/// selects: its rules in the order written, the first match deciding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierPolicy {
    /// Unique name, shown in rule comments and failures (e.g. `k8s:cnp/name`).
    pub name: String,
    /// Precedence within the tier: lower is checked first.
    pub priority: u32,
    /// The local addresses it selects (its subject on this node; sorted, unique).
    pub pods: Vec<IpAddr>,
    /// Rules for traffic to [`TierPolicy::pods`], in order.
    pub ingress: Vec<TierRule>,
    /// Rules for traffic from [`TierPolicy::pods`], in order.
    pub egress: Vec<TierRule>,
}

/// One rule of a tier policy: what it matches and what it does with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierRule {
    /// What it does with the traffic it matches.
    pub action: TierAction,
    /// The traffic it matches; `pods: None` = every pod of its [`TierPolicy`].
    pub matches: Allow,
}

/// What a tier rule does with the traffic it matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TierAction {
    /// Admitted: no later rule of this or a later tier is checked for the direction.
    Accept,
    /// Dropped.
    #[default]
    Deny,
    /// The rest of the tier is skipped; the next tier decides.
    Pass,
}

/// One isolating unit (a NetworkPolicy) and what it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodPolicy {
    /// Unique name, shown in rule comments and failures (e.g. `k8s:ns/name`).
    pub name: String,
    /// Isolation of traffic to its pods; `None` = it does not isolate ingress.
    pub ingress: Option<Isolation>,
    /// Isolation of traffic from its pods; `None` = it does not isolate egress.
    pub egress: Option<Isolation>,
    /// Audit: what it would drop is reported and passes (it isolates nobody for real).
    pub audit: bool,
}

/// The pods a unit isolates in one direction, and the traffic it allows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Local addresses isolated (sorted, unique).
    pub pods: Vec<IpAddr>,
    /// Traffic allowed; empty = nothing (the pods are only isolated).
    pub allow: Vec<Allow>,
}

/// One allowed kind of traffic: all three parts must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allow {
    /// The local addresses it applies to: `None` = every pod of the [`Isolation`]; `Some` = a
    /// subset (a named port resolves to this number on these pods only).
    pub pods: Option<Vec<IpAddr>>,
    /// The remote side (source for ingress, destination for egress): `None` = anywhere;
    /// `Some` = these prefixes (possibly none: matches nothing until peers appear).
    pub peers: Option<Vec<IpNet>>,
    /// Protocols and destination ports; empty = all traffic.
    pub ports: Vec<PortRange>,
}

/// A protocol and an inclusive range of destination ports (`0-65535` = the whole protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    /// The transport protocol.
    pub protocol: L4Protocol,
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

impl PortRange {
    /// True when the range covers every port of the protocol.
    pub fn is_whole_protocol(&self) -> bool {
        self.first == 0 && self.last == u16::MAX
    }
}

/// Transport protocols a pod policy can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum L4Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl L4Protocol {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            L4Protocol::Tcp => 6,
            L4Protocol::Udp => 17,
            L4Protocol::Sctp => 132,
        }
    }
}
