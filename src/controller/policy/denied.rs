//! Denied flows, named: the packets the policy table's reporting statements send to nflog
//! (see [`super::program::denied`]) are read by a thread of the daemon, named (the rule, the
//! ClusterNetworkPolicy, or the NetworkPolicies that isolate the pod; the zones or pods on
//! each side), counted in
//! `edgenetd_denied_packets_total` (every packet) and logged (at most [`BURST`] lines at once
//! and [`PER_MINUTE`] a minute per rule or policy and direction).
//!
//! The listener is bound on the controller's thread (so in the daemon's network namespace)
//! at the first sync whose program reports, and lives as long as the daemon. What it names
//! packets with is the view of the last sync ([`Reporter::update`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use log::{info, warn};

use super::program::Program;
use super::program::denied::{NFLOG_GROUP, PodDirection, Reported, reports};
use crate::config::DesiredState;
use crate::config::policy::Zone;
use crate::config::policy::pods::{PodPolicies, TierPolicy};
use crate::dataplane::nflog::{self, Flow, Logged};

/// Counter of denied packets, by `policy` (with `direction` and `mode`) or `rule` (with
/// `direction`).
pub const DENIED: &str = "edgenetd_denied_packets_total";
/// Counter of reported packets the kernel could not hand over (the socket's buffer was full).
pub const LOST: &str = "edgenetd_denied_packets_lost_total";
/// Lines logged at once per rule or policy and direction.
pub const BURST: f64 = 5.0;
/// Lines logged a minute per rule or policy and direction, after the burst.
pub const PER_MINUTE: f64 = 10.0;

/// Describes the counters.
pub fn describe() {
    metrics::describe_counter!(
        DENIED,
        "Packets dropped (mode=\"audit\": that an audit NetworkPolicy would drop, and let pass), by the NetworkPolicy or ClusterNetworkPolicy (policy, direction ingress/egress) or the [policy] rule or default (rule, direction = chain), as the daemon read them from nflog."
    );
    metrics::describe_counter!(
        LOST,
        "Denied packets the kernel could not hand to the daemon (its nflog socket's buffer was full): not counted in edgenetd_denied_packets_total."
    );
}

/// What packets are named with: the last sync's zones and pod isolation.
#[derive(Debug, Default)]
struct View {
    /// `[policy]`'s zones.
    zones: Vec<Zone>,
    /// The pod isolation.
    pods: PodPolicies,
}

/// The controller's end: keeps the view current and starts the listener once needed.
#[derive(Default)]
pub struct Reporter {
    /// Shared with the listener's thread.
    view: Arc<Mutex<View>>,
    /// The listener runs (or could not be bound: not tried again).
    started: bool,
}

impl Reporter {
    /// After a sync that programmed `program` for `desired`: the view follows, and the
    /// listener starts if the program reports and it is not running yet.
    pub fn update(&mut self, desired: &DesiredState, program: Option<&Program>) {
        let wanted = program.is_some_and(|p| p.table.rules.iter().any(|r| reports(&r.stmts)));
        {
            let mut v = self.view.lock().unwrap_or_else(|p| p.into_inner());
            if v.pods != desired.pod_policies {
                v.pods = desired.pod_policies.clone();
            }
            let zones = desired.policy.as_ref().map(|p| &p.zones);
            if zones.is_none_or(|z| !z.values().eq(v.zones.iter())) {
                v.zones = zones
                    .map(|z| z.values().cloned().collect())
                    .unwrap_or_default();
            }
        }
        if wanted && !self.started {
            self.started = true;
            self.start();
        }
    }

    fn start(&self) {
        let mut listener = match nflog::Listener::bind(NFLOG_GROUP) {
            Ok(l) => l,
            Err(e) => {
                warn!(
                    "denied flows: cannot bind nflog group {NFLOG_GROUP} ({e}): drops are not reported"
                );
                return;
            }
        };
        describe();
        let view = self.view.clone();
        let spawned = std::thread::Builder::new()
            .name("denied-flows".into())
            .spawn(move || {
                let mut limits = Limits::default();
                loop {
                    let r = listener.read(&mut |l| report(&view, &mut limits, &l, Instant::now()));
                    match r {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                            metrics::counter!(LOST).increment(1);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            warn!("denied flows: nflog read failed ({e}): no more reports");
                            return;
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => info!("denied flows: reading nflog group {NFLOG_GROUP}"),
            Err(e) => warn!("denied flows: cannot start the reader thread: {e}"),
        }
    }
}

/// One packet, named: what denied it (the series' labels) and the line to log.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// `("policy", names)` or `("rule", name)`.
    pub by: (&'static str, String),
    /// `ingress`/`egress` for pods, the chain for rules and defaults.
    pub direction: String,
    /// `enforce`/`audit` for pods; `None` for rules.
    pub mode: Option<&'static str>,
    /// The log line (without the count of lines left out).
    pub line: String,
}

/// Names `l` with `view`; `None` for a prefix edgenetd did not write.
fn name(view: &View, l: &Logged) -> Option<Named> {
    let what = Reported::parse(&l.prefix)?;
    let flow = l.flow.as_ref().map_or("?".to_string(), tuple);
    let hook = match l.hook {
        1 => "input",
        2 => "forward",
        3 => "output",
        _ => "?",
    };
    Some(match what {
        Reported::Rule(rule) => Named {
            line: format!("denied: rule {rule} ({hook}) {flow}{}", zones(view, l)),
            by: ("rule", rule),
            direction: hook.into(),
            mode: None,
        },
        Reported::Default(chain) => Named {
            line: format!("denied: {chain} default {flow}{}", zones(view, l)),
            by: ("rule", "default".into()),
            direction: chain,
            mode: None,
        },
        Reported::Unknown(d) => Named {
            line: format!(
                "denied: isolate_unknown_pods {} {flow}{} (an address of this node's pod prefixes that no known pod has)",
                d.word(),
                pods(view, l)
            ),
            by: ("rule", "isolate_unknown_pods".into()),
            direction: d.word().into(),
            mode: None,
        },
        Reported::Cluster(d, policy) => Named {
            line: format!(
                "denied: cluster network policy {policy} ({} tier) {} {flow}{}",
                tier_of(view, &policy),
                d.word(),
                pods(view, l)
            ),
            by: ("policy", policy),
            direction: d.word().into(),
            mode: Some("enforce"),
        },
        Reported::Pods(d) | Reported::Audit(d) => {
            let audit = matches!(what, Reported::Audit(_));
            let policies = isolating(view, l.flow.as_ref(), d, audit);
            let verb = if audit {
                "audit: would deny"
            } else {
                "denied:"
            };
            Named {
                line: format!(
                    "{verb} policy {policies} {} {flow}{}",
                    d.word(),
                    pods(view, l)
                ),
                by: ("policy", policies),
                direction: d.word().into(),
                mode: Some(if audit { "audit" } else { "enforce" }),
            }
        }
    })
}

/// The tier of the cluster-wide policy `name` (`?` when it is gone meanwhile).
fn tier_of(view: &View, name: &str) -> &'static str {
    let has = |tier: &[TierPolicy]| tier.iter().any(|p| p.name == name);
    if has(&view.pods.admin) {
        "admin"
    } else if has(&view.pods.baseline) {
        "baseline"
    } else {
        "?"
    }
}

/// `tcp 10.0.3.2:40000 -> 10.0.1.2:8080`.
fn tuple(f: &Flow) -> String {
    let proto = match f.protocol {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        132 => "sctp".to_string(),
        1 => "icmp".to_string(),
        58 => "icmpv6".to_string(),
        n => format!("proto {n}"),
    };
    let at = |ip: IpAddr, port: Option<u16>| match (ip, port) {
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
        (a, Some(p)) => format!("{a}:{p}"),
        (a, None) => a.to_string(),
    };
    let (sp, dp) = f.ports.map_or((None, None), |(s, d)| (Some(s), Some(d)));
    format!("{proto} {} -> {}", at(f.src, sp), at(f.dst, dp))
}

/// The policies (of `audit`'s mode) isolating the pod of `flow` in direction `d`, joined
/// with `,` (sorted: they are by name); `?` when none is known (it changed meanwhile).
fn isolating(view: &View, flow: Option<&Flow>, d: PodDirection, audit: bool) -> String {
    let Some(f) = flow else {
        return "?".into();
    };
    let local = match d {
        PodDirection::Ingress => f.dst,
        PodDirection::Egress => f.src,
    };
    let names: Vec<&str> = view
        .pods
        .policies
        .iter()
        .filter(|p| p.audit == audit)
        .filter(|p| {
            let iso = match d {
                PodDirection::Ingress => p.ingress.as_ref(),
                PodDirection::Egress => p.egress.as_ref(),
            };
            iso.is_some_and(|i| i.pods.binary_search(&local).is_ok())
        })
        .map(|p| p.name.as_str())
        .collect();
    if names.is_empty() {
        "?".into()
    } else {
        names.join(",")
    }
}

/// `, pods other/probe-1 -> shop/web-1` (an address without a known pod as itself).
fn pods(view: &View, l: &Logged) -> String {
    let Some(f) = &l.flow else {
        return String::new();
    };
    let n = |ip: &IpAddr| {
        view.pods
            .names
            .get(ip)
            .cloned()
            .unwrap_or_else(|| ip.to_string())
    };
    format!(", pods {} -> {}", n(&f.src), n(&f.dst))
}

/// `, zones lan -> wan` (`-` for a side in no zone); empty without zones.
fn zones(view: &View, l: &Logged) -> String {
    if view.zones.is_empty() {
        return String::new();
    }
    let Some(f) = &l.flow else {
        return String::new();
    };
    let (in_if, out_if) = (nflog::if_name(l.in_if), nflog::if_name(l.out_if));
    let side = |ifname: Option<&String>, ip: IpAddr| {
        let names: Vec<&str> = view
            .zones
            .iter()
            .filter(|z| z.admits(ip))
            .filter(|z| {
                let by_if = z.interfaces.is_empty() || ifname.is_some_and(|i| z.has_interface(i));
                let by_net = z.networks.is_empty() || z.networks.iter().any(|n| n.contains(&ip));
                (!z.interfaces.is_empty() || !z.networks.is_empty()) && by_if && by_net
            })
            .map(|z| z.name.as_str())
            .collect();
        if names.is_empty() {
            "-".to_string()
        } else {
            names.join(",")
        }
    };
    format!(
        ", zones {} -> {}",
        side(in_if.as_ref(), f.src),
        side(out_if.as_ref(), f.dst)
    )
}

/// A series: (rule or policy, direction, mode).
type SeriesKey = (String, String, Option<&'static str>);

/// A token bucket per series: [`BURST`] lines at once, [`PER_MINUTE`] a minute after.
#[derive(Default)]
struct Limits {
    /// (tokens, last refill, lines left out since the last one logged) per series.
    buckets: BTreeMap<SeriesKey, (f64, Instant, u64)>,
}

impl Limits {
    /// True when a line of `key` may be logged at `now`; else counts it as left out. With
    /// `true`, how many were left out since the last.
    fn take(&mut self, key: SeriesKey, now: Instant) -> Option<u64> {
        let b = self.buckets.entry(key).or_insert((BURST, now, 0));
        let refill = now.saturating_duration_since(b.1).as_secs_f64() * PER_MINUTE / 60.0;
        b.0 = (b.0 + refill).min(BURST);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            Some(std::mem::take(&mut b.2))
        } else {
            b.2 += 1;
            None
        }
    }
}

/// Counts and (within the rate) logs one packet.
fn report(view: &Mutex<View>, limits: &mut Limits, l: &Logged, now: Instant) {
    let named = {
        let v = view.lock().unwrap_or_else(|p| p.into_inner());
        name(&v, l)
    };
    let Some(n) = named else {
        return;
    };
    let (label, value) = n.by.clone();
    match n.mode {
        Some(mode) => metrics::counter!(DENIED, label => value.clone(), "direction" => n.direction.clone(), "mode" => mode)
            .increment(1),
        None => metrics::counter!(DENIED, label => value.clone(), "direction" => n.direction.clone())
            .increment(1),
    }
    if let Some(left_out) = limits.take((value, n.direction, n.mode), now) {
        if left_out > 0 {
            warn!("{} ({left_out} more not logged)", n.line);
        } else {
            warn!("{}", n.line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::policy::pods::{Isolation, PodPolicy};
    use std::time::Duration;

    fn view() -> View {
        let iso = |ips: &[&str]| Isolation {
            pods: ips.iter().map(|i| i.parse().unwrap()).collect(),
            allow: Vec::new(),
        };
        View {
            zones: Vec::new(),
            pods: PodPolicies {
                policies: vec![
                    PodPolicy {
                        name: "k8s:shop/a".into(),
                        ingress: Some(iso(&["10.0.1.2"])),
                        egress: None,
                        audit: false,
                    },
                    PodPolicy {
                        name: "k8s:shop/b".into(),
                        ingress: Some(iso(&["10.0.1.2", "10.0.2.2"])),
                        egress: None,
                        audit: false,
                    },
                    PodPolicy {
                        name: "k8s:shop/c".into(),
                        ingress: Some(iso(&["10.0.1.2"])),
                        egress: None,
                        audit: true,
                    },
                ],
                names: [("10.0.1.2".parse().unwrap(), "shop/web-1".to_string())]
                    .into_iter()
                    .collect(),
                ..PodPolicies::default()
            },
        }
    }

    fn logged(prefix: &str) -> Logged {
        Logged {
            prefix: prefix.into(),
            hook: 2,
            in_if: 0,
            out_if: 0,
            flow: Some(Flow {
                protocol: 6,
                src: "10.0.3.2".parse().unwrap(),
                dst: "10.0.1.2".parse().unwrap(),
                ports: Some((40000, 8080)),
            }),
        }
    }

    #[test]
    fn a_pod_drop_names_every_policy_of_its_mode_that_isolates_the_pod() {
        let n = name(&view(), &logged("pods ingress")).unwrap();
        assert_eq!(n.by, ("policy", "k8s:shop/a,k8s:shop/b".to_string()));
        assert_eq!((n.direction.as_str(), n.mode), ("ingress", Some("enforce")));
        assert_eq!(
            n.line,
            "denied: policy k8s:shop/a,k8s:shop/b ingress tcp 10.0.3.2:40000 -> 10.0.1.2:8080, pods 10.0.3.2 -> shop/web-1"
        );
        let a = name(&view(), &logged("pods-audit ingress")).unwrap();
        assert_eq!(a.by, ("policy", "k8s:shop/c".to_string()));
        assert!(
            a.line.starts_with("audit: would deny policy k8s:shop/c"),
            "{}",
            a.line
        );
        let r = name(&view(), &logged("rule block-ssh")).unwrap();
        assert_eq!(
            (r.by, r.direction.as_str(), r.mode),
            (("rule", "block-ssh".to_string()), "forward", None)
        );
        assert_eq!(name(&view(), &logged("drop wan input: ")), None, "not ours");
    }

    #[test]
    fn a_tier_deny_names_its_cluster_network_policy_and_tier() {
        let mut v = view();
        v.pods.admin.push(TierPolicy {
            name: "k8s:guard".into(),
            ..TierPolicy::default()
        });
        let n = name(&v, &logged("cnp ingress k8s:guard")).unwrap();
        assert_eq!(n.by, ("policy", "k8s:guard".to_string()));
        assert_eq!((n.direction.as_str(), n.mode), ("ingress", Some("enforce")));
        assert_eq!(
            n.line,
            "denied: cluster network policy k8s:guard (admin tier) ingress tcp 10.0.3.2:40000 -> 10.0.1.2:8080, pods 10.0.3.2 -> shop/web-1"
        );
        let gone = name(&view(), &logged("cnp egress k8s:gone")).unwrap();
        assert!(
            gone.line.contains("k8s:gone (? tier) egress"),
            "{}",
            gone.line
        );
    }

    #[test]
    fn lines_are_limited_per_series_and_say_how_many_were_left_out() {
        let mut l = Limits::default();
        let t0 = Instant::now();
        let key = || {
            (
                "k8s:shop/a".to_string(),
                "ingress".to_string(),
                Some("enforce"),
            )
        };
        for _ in 0..5 {
            assert_eq!(l.take(key(), t0), Some(0));
        }
        assert_eq!(l.take(key(), t0), None);
        assert_eq!(l.take(key(), t0), None);
        assert_eq!(
            l.take(("other".into(), "ingress".into(), None), t0),
            Some(0),
            "another series has its own bucket"
        );
        assert_eq!(l.take(key(), t0 + Duration::from_secs(6)), Some(2));
    }
}
