//! The packet's path through the hooks, in the kernel's order: prerouting (DNAT), the
//! routing decision (input or forward), the input or forward filter chains, postrouting
//! (SNAT, masquerade). Every table edgenetd programs takes part, its base chains of a hook
//! run by priority; at equal priority the policy table's come first (the kernel runs them
//! in the order they were registered, which edgenetd does not fix — port forwards and
//! service VIPs do not overlap in practice).

use crate::config::route::{RouteKind, RoutingConfig};
use crate::dataplane::nft::ir::*;

use super::error::ExplainError;
use super::eval::{ChainEnd, Final, Hit, NatEvent, RuleRef, Run, Trace};
use super::packet::Packet;
use super::pods::PodReport;
use super::route::{Addresses, Decision, decide};

/// Where a decision was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// A rule of a chain.
    Rule(RuleRef),
    /// The policy of a base chain (`table`, `chain`).
    Default(String, String),
    /// The routing decision (a blackhole/unreachable/prohibit route, or no route).
    Routing,
}

/// The whole answer.
#[derive(Debug)]
pub struct Explanation {
    /// The final verdict.
    pub verdict: Final,
    /// What decided it.
    pub decider: Decider,
    /// The hook whose chains decided (`prerouting`, `input`, `forward`, `routing`).
    pub hook: &'static str,
    /// The DNAT on the way in, if any.
    pub dnat: Option<NatEvent>,
    /// The configured service whose VIP the packet was addressed to, if any.
    pub service: Option<String>,
    /// The SNAT or masquerade on the way out, if any.
    pub snat: Option<NatEvent>,
    /// The routing decision, once taken.
    pub route: Option<Decision>,
    /// Jumps and notes on the way.
    pub steps: Vec<String>,
    /// Why the verdict may be wrong (included rules explain could not read), empty when it
    /// is what the kernel does.
    pub uncertain: Vec<String>,
    /// The packet as it leaves (or as it was when dropped).
    pub packet: Packet,
    /// Every rule that matched and did something, in order.
    pub hits: Vec<Hit>,
    /// Which pod policies decided, when an end is a pod here or some policy selects it.
    pub pods: Option<PodReport>,
    /// With audit policies selecting an end: the answer were they enforced.
    pub enforced: Option<Box<Enforced>>,
}

/// The answer with every audit NetworkPolicy enforced.
#[derive(Debug)]
pub struct Enforced {
    /// The verdict.
    pub verdict: Final,
    /// What decided it.
    pub decider: Decider,
    /// Which pod policies decided.
    pub pods: Option<PodReport>,
}

/// What the base chains of one hook did.
struct HookEnd {
    /// `None`: every chain let it pass.
    stop: Option<(Final, Decider)>,
    /// The last accepting filter decision (rule or default), for the report.
    accepted_by: Option<Decider>,
}

/// The tables, the routing config and the router's addresses: what a packet meets.
pub struct World<'a> {
    /// The nftables tables edgenetd programs.
    pub tables: &'a [Table],
    /// `[[route]]`, `[[route_rule]]`, `[[track]]`.
    pub routing: &'a RoutingConfig,
    /// The router's addresses.
    pub addresses: &'a Addresses,
}

impl World<'_> {
    /// Follows `pkt` from its arrival to its fate.
    pub fn explain(&self, mut pkt: Packet) -> Result<Explanation, ExplainError> {
        let mut trace = Trace::default();
        let done = |verdict, decider, hook, route, trace: Trace, pkt| {
            Ok(Explanation {
                verdict,
                decider,
                hook,
                dnat: trace.nat.iter().find(|n| n.kind == NatKind::Dnat).cloned(),
                service: None,
                snat: trace.nat.iter().find(|n| n.kind == NatKind::Snat).cloned(),
                route,
                steps: trace.steps,
                uncertain: trace.uncertain,
                packet: pkt,
                hits: trace.hits,
                pods: None,
                enforced: None,
            })
        };
        let pre = self.hook(Hook::Prerouting, &mut pkt, &mut trace)?;
        if let Some((f, d)) = pre.stop {
            return done(f, d, "prerouting", None, trace, pkt);
        }
        let route = decide(
            self.routing,
            self.addresses,
            pkt.saddr,
            pkt.daddr,
            &pkt.iif,
            pkt.mark,
        );
        let hook = match &route {
            Decision::Local => Hook::Input,
            Decision::Route(c) if c.kind == RouteKind::Unicast => {
                pkt.oif = c.dev.clone().unwrap_or_default();
                Hook::Forward
            }
            Decision::Route(c) if c.kind == RouteKind::Blackhole => {
                return done(
                    Final::Drop,
                    Decider::Routing,
                    "routing",
                    Some(route),
                    trace,
                    pkt,
                );
            }
            // unreachable, prohibit, no route: the kernel answers with an ICMP error.
            _ => {
                let (f, d) = self.routing_error(&pkt, &mut trace)?;
                return done(f, d, "routing", Some(route), trace, pkt);
            }
        };
        let name = if hook == Hook::Input {
            "input"
        } else {
            "forward"
        };
        let filter = self.hook(hook, &mut pkt, &mut trace)?;
        if let Some((f, d)) = filter.stop {
            return done(f, d, name, Some(route), trace, pkt);
        }
        if hook == Hook::Forward {
            let post = self.hook(Hook::Postrouting, &mut pkt, &mut trace)?;
            if let Some((f, d)) = post.stop {
                return done(f, d, "postrouting", Some(route), trace, pkt);
            }
        }
        let decider = filter
            .accepted_by
            .unwrap_or_else(|| Decider::Default(String::new(), name.to_string()));
        done(Final::Accept, decider, name, Some(route), trace, pkt)
    }

    /// A packet routing refuses: the router answers with an ICMP unreachable, which its
    /// own output chains see (as `ct state related` to the refused packet); when they drop
    /// it, the sender sees a drop.
    fn routing_error(
        &self,
        pkt: &Packet,
        trace: &mut Trace,
    ) -> Result<(Final, Decider), ExplainError> {
        let mut answer =
            pkt.icmp_error(self.addresses.on(&pkt.iif, pkt.saddr).unwrap_or(pkt.daddr));
        let out = self.hook(Hook::Output, &mut answer, trace)?;
        match out.stop {
            Some((_, by)) => {
                let who = match &by {
                    Decider::Rule(r) => format!("rule {:?} of {} {}", r.comment, r.table, r.chain),
                    _ => "the output default".into(),
                };
                trace.steps.push(format!(
                    "routing refuses it; the ICMP unreachable the router answers with is dropped by {who}"
                ));
                Ok((Final::Drop, Decider::Routing))
            }
            None => Ok((
                Final::Reject(Reject::IcmpxPortUnreachable),
                Decider::Routing,
            )),
        }
    }

    /// Runs every base chain of `hook`, by priority.
    fn hook(
        &self,
        hook: Hook,
        pkt: &mut Packet,
        trace: &mut Trace,
    ) -> Result<HookEnd, ExplainError> {
        let mut chains: Vec<(&Table, &Chain, BaseChain)> = self
            .tables
            .iter()
            .flat_map(|t| t.chains.iter().map(move |c| (t, c)))
            .filter_map(|(t, c)| c.base.filter(|b| b.hook == hook).map(|b| (t, c, b)))
            .collect();
        chains.sort_by_key(|(_, _, b)| b.priority);
        let mut end = HookEnd {
            stop: None,
            accepted_by: None,
        };
        let nat_kind = if hook == Hook::Postrouting {
            NatKind::Snat
        } else {
            NatKind::Dnat
        };
        let mut translated = false;
        for (table, chain, base) in chains {
            // The kernel runs a hook's NAT chains only until one of them translated, and
            // never for an untracked packet (NAT lives in the conntrack entry).
            if base.kind == ChainType::Nat && (translated || pkt.ct_state == CT_STATE_UNTRACKED) {
                continue;
            }
            let dev = if pkt.oif.is_empty() {
                &pkt.iif
            } else {
                &pkt.oif
            };
            let masq_addr = self.addresses.on(dev, pkt.saddr);
            let run = Run {
                table,
                local: self.addresses,
                masq_addr,
            };
            let before = trace.nat.len();
            let result = run.chain(&chain.name, pkt, trace)?;
            translated |= trace.nat[before..].iter().any(|n| n.kind == nat_kind);
            let decider = match result {
                ChainEnd::Verdict(Final::Accept, rule) => Decider::Rule(rule),
                ChainEnd::Verdict(f, rule) => {
                    end.stop = Some((f, Decider::Rule(rule)));
                    return Ok(end);
                }
                ChainEnd::Fallthrough => {
                    let d = Decider::Default(table.name.clone(), chain.name.clone());
                    if base.policy == ChainPolicy::Drop {
                        end.stop = Some((Final::Drop, d));
                        return Ok(end);
                    }
                    d
                }
            };
            if base.kind == ChainType::Filter {
                end.accepted_by = Some(decider);
            }
        }
        Ok(end)
    }
}
