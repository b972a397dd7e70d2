//! Pod isolation units as stored in the cache file. As in `records`, conversions destructure
//! the config types field by field, so a field added there does not compile here until the
//! cache stores it too.

use std::net::IpAddr;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::config::policy::pods::{
    Allow, Isolation, L4Protocol, PodPolicies, PodPolicy, PortRange, TierAction, TierPolicy,
    TierRule,
};

/// A [`PodPolicy`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PodPolicyRecord {
    /// `name`.
    name: String,
    /// `ingress`.
    ingress: Option<IsolationRecord>,
    /// `egress`.
    egress: Option<IsolationRecord>,
    /// A test hook that files written before it left the model still hold (always false
    /// for translated units); read and ignored, never written.
    #[serde(default, skip_serializing, rename = "inject_kernel_reject")]
    _inject_kernel_reject: Option<IgnoredAny>,
}

/// An [`Isolation`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IsolationRecord {
    /// `pods`.
    pods: Vec<IpAddr>,
    /// `allow`.
    allow: Vec<AllowRecord>,
}

/// An [`Allow`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowRecord {
    /// `pods`.
    pods: Option<Vec<IpAddr>>,
    /// `peers`, as prefixes.
    peers: Option<Vec<String>>,
    /// `ports`: (protocol `tcp`/`udp`/`sctp`, first, last).
    ports: Vec<(String, u16, u16)>,
}

/// A [`TierPolicy`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TierPolicyRecord {
    /// `admin` or `baseline`: the list it is in.
    tier: String,
    /// `name`.
    name: String,
    /// `priority`.
    priority: u32,
    /// `pods`.
    pods: Vec<IpAddr>,
    /// `ingress`.
    ingress: Vec<TierRuleRecord>,
    /// `egress`.
    egress: Vec<TierRuleRecord>,
}

/// A [`TierRule`] as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierRuleRecord {
    /// `action`: `accept`, `deny` or `pass`.
    action: String,
    /// `matches`.
    matches: AllowRecord,
}

/// Every unit as stored, and the tier policies (admin then baseline, each in order).
pub(super) fn records(p: &PodPolicies) -> (Vec<PodPolicyRecord>, Vec<TierPolicyRecord>) {
    let PodPolicies {
        policies,
        admin,
        baseline,
    } = p;
    let tiers = admin
        .iter()
        .map(|t| TierPolicyRecord::of("admin", t))
        .chain(baseline.iter().map(|t| TierPolicyRecord::of("baseline", t)))
        .collect();
    (policies.iter().map(PodPolicyRecord::from).collect(), tiers)
}

/// The units and tier policies stored in `records` and `tiers`.
pub(super) fn from_records(
    records: Vec<PodPolicyRecord>,
    tiers: Vec<TierPolicyRecord>,
) -> Result<PodPolicies, String> {
    let mut out = PodPolicies {
        policies: records
            .into_iter()
            .map(PodPolicy::try_from)
            .collect::<Result<_, _>>()?,
        ..PodPolicies::default()
    };
    for t in tiers {
        let list = match t.tier.as_str() {
            "admin" => &mut out.admin,
            "baseline" => &mut out.baseline,
            other => return Err(format!("unknown tier {other:?}")),
        };
        list.push(TierPolicy::try_from(t)?);
    }
    Ok(out)
}

impl TierPolicyRecord {
    fn of(tier: &str, t: &TierPolicy) -> TierPolicyRecord {
        let TierPolicy {
            name,
            priority,
            pods,
            ingress,
            egress,
        } = t;
        let rules = |rules: &[TierRule]| {
            rules
                .iter()
                .map(|r| {
                    let TierRule { action, matches } = r;
                    TierRuleRecord {
                        action: match action {
                            TierAction::Accept => "accept",
                            TierAction::Deny => "deny",
                            TierAction::Pass => "pass",
                        }
                        .to_string(),
                        matches: AllowRecord::from(matches),
                    }
                })
                .collect()
        };
        TierPolicyRecord {
            tier: tier.to_string(),
            name: name.clone(),
            priority: *priority,
            pods: pods.clone(),
            ingress: rules(ingress),
            egress: rules(egress),
        }
    }
}

impl TryFrom<TierPolicyRecord> for TierPolicy {
    type Error = String;

    fn try_from(r: TierPolicyRecord) -> Result<TierPolicy, String> {
        let rules = |rules: Vec<TierRuleRecord>| {
            rules
                .into_iter()
                .map(|r| {
                    let action = match r.action.as_str() {
                        "accept" => TierAction::Accept,
                        "deny" => TierAction::Deny,
                        "pass" => TierAction::Pass,
                        other => return Err(format!("unknown tier action {other:?}")),
                    };
                    Ok(TierRule {
                        action,
                        matches: Allow::try_from(r.matches)?,
                    })
                })
                .collect::<Result<Vec<_>, String>>()
        };
        Ok(TierPolicy {
            name: r.name,
            priority: r.priority,
            pods: r.pods,
            ingress: rules(r.ingress)?,
            egress: rules(r.egress)?,
        })
    }
}

fn protocol_word(p: L4Protocol) -> &'static str {
    match p {
        L4Protocol::Tcp => "tcp",
        L4Protocol::Udp => "udp",
        L4Protocol::Sctp => "sctp",
    }
}

fn protocol_of(w: &str) -> Result<L4Protocol, String> {
    match w {
        "tcp" => Ok(L4Protocol::Tcp),
        "udp" => Ok(L4Protocol::Udp),
        "sctp" => Ok(L4Protocol::Sctp),
        _ => Err(format!("unknown pod policy protocol {w:?}")),
    }
}

impl From<&PodPolicy> for PodPolicyRecord {
    fn from(p: &PodPolicy) -> PodPolicyRecord {
        let PodPolicy {
            name,
            ingress,
            egress,
        } = p;
        PodPolicyRecord {
            name: name.clone(),
            ingress: ingress.as_ref().map(IsolationRecord::from),
            egress: egress.as_ref().map(IsolationRecord::from),
            _inject_kernel_reject: None,
        }
    }
}

impl TryFrom<PodPolicyRecord> for PodPolicy {
    type Error = String;

    fn try_from(r: PodPolicyRecord) -> Result<PodPolicy, String> {
        Ok(PodPolicy {
            name: r.name,
            ingress: r.ingress.map(Isolation::try_from).transpose()?,
            egress: r.egress.map(Isolation::try_from).transpose()?,
        })
    }
}

impl From<&Isolation> for IsolationRecord {
    fn from(i: &Isolation) -> IsolationRecord {
        let Isolation { pods, allow } = i;
        IsolationRecord {
            pods: pods.clone(),
            allow: allow.iter().map(AllowRecord::from).collect(),
        }
    }
}

impl TryFrom<IsolationRecord> for Isolation {
    type Error = String;

    fn try_from(r: IsolationRecord) -> Result<Isolation, String> {
        Ok(Isolation {
            pods: r.pods,
            allow: r
                .allow
                .into_iter()
                .map(Allow::try_from)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl From<&Allow> for AllowRecord {
    fn from(a: &Allow) -> AllowRecord {
        let Allow { pods, peers, ports } = a;
        AllowRecord {
            pods: pods.clone(),
            peers: peers
                .as_ref()
                .map(|p| p.iter().map(|n| n.to_string()).collect()),
            ports: ports
                .iter()
                .map(|r| {
                    let PortRange {
                        protocol,
                        first,
                        last,
                    } = r;
                    (protocol_word(*protocol).to_string(), *first, *last)
                })
                .collect(),
        }
    }
}

impl TryFrom<AllowRecord> for Allow {
    type Error = String;

    fn try_from(r: AllowRecord) -> Result<Allow, String> {
        let peers = match r.peers {
            None => None,
            Some(p) => Some(
                p.iter()
                    .map(|n| n.parse().map_err(|_| format!("bad peer prefix {n:?}")))
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Allow {
            pods: r.pods,
            peers,
            ports: r
                .ports
                .into_iter()
                .map(|(p, first, last)| {
                    Ok(PortRange {
                        protocol: protocol_of(&p)?,
                        first,
                        last,
                    })
                })
                .collect::<Result<_, String>>()?,
        })
    }
}
