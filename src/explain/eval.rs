//! The interpreter: one table's chains run over a [`Packet`] as the kernel runs them —
//! rules in order, a failed match skips to the next rule, jump/goto/return, verdict maps,
//! NAT statements ending the chain with accept. `meta mark set` changes the mark the
//! routing decision matches next. Counters, logs, limits (assumed under their rate), MSS
//! clamping and dynamic-map updates change nothing `explain` reports; a conntrack helper
//! and a flow offload change no verdict either, but the path names them. An included rule
//! (nft's compile of a snippet) runs as the statements its expressions lift to; one that
//! does not lift is taken as not matching and makes the verdict uncertain.

use std::net::IpAddr;

use crate::dataplane::nft::ir::*;
use crate::dataplane::nft::lift::lift;
use crate::dataplane::nft::text::render_rule;

use super::error::ExplainError;
use super::packet::Packet;
use super::values::{Locality, any_bit, element_matches, equal, load, masked_equal};

/// The kernel's limit on nested jumps.
const MAX_DEPTH: usize = 16;

/// A verdict that ends a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Final {
    /// Accept (in this chain; later base chains of the hook still see the packet).
    Accept,
    /// Drop silently.
    Drop,
    /// Drop with an answer.
    Reject(Reject),
}

/// A rule as `explain` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    /// The table.
    pub table: String,
    /// The chain.
    pub chain: String,
    /// The rule's comment (edgenetd's carries the config object's name).
    pub comment: Option<String>,
    /// The rule in nft syntax.
    pub text: String,
}

/// A translation a NAT statement did.
#[derive(Debug, Clone, PartialEq)]
pub struct NatEvent {
    /// SNAT (masquerade included) or DNAT.
    pub kind: NatKind,
    /// True for `masquerade` (the address is the outgoing interface's).
    pub masquerade: bool,
    /// The new address (`None` for a masquerade whose interface address is unknown).
    pub addr: Option<IpAddr>,
    /// The new port, if the statement sets one.
    pub port: Option<u16>,
    /// For a DNAT through a slot map (services): each (address, port, share) it may pick.
    pub shares: Vec<(IpAddr, Option<u16>, f64)>,
    /// The rule that did it.
    pub rule: RuleRef,
}

/// How a chain ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainEnd {
    /// A verdict, by this rule.
    Verdict(Final, RuleRef),
    /// No rule decided (the end of the chain, or `return`).
    Fallthrough,
}

/// What a run records besides the verdict.
#[derive(Debug, Default)]
pub struct Trace {
    /// Every translation, in order.
    pub nat: Vec<NatEvent>,
    /// Human-readable steps (`jump`, `goto`, notes).
    pub steps: Vec<String>,
    /// Why the verdict may be wrong: each included rule met that `explain` could not read.
    pub uncertain: Vec<String>,
    /// Every rule that matched and did something, in order: the path as data, which the
    /// pod report reads policy by policy.
    pub hits: Vec<Hit>,
}

/// A rule that matched, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The rule.
    pub rule: RuleRef,
    /// What it did.
    pub did: Did,
}

/// What a matched rule did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Did {
    /// Ended the base chain with this verdict.
    End(Final),
    /// Returned to the calling chain.
    Return,
    /// Jumped to this chain.
    Jump(String),
    /// Went to this chain.
    Goto(String),
    /// Counted (and maybe logged or reported) without a verdict.
    Counted,
}

/// One table being run.
pub struct Run<'a> {
    /// The table.
    pub table: &'a Table,
    /// The router's own addresses.
    pub local: &'a dyn Locality,
    /// The address NAT to the router picks, if known: masquerade's on the outgoing
    /// interface; before routing (no outgoing interface yet), redirect's on the incoming one.
    pub masq_addr: Option<IpAddr>,
}

/// What one rule (or statement) did.
pub(super) enum Flow {
    /// Go on (with the next statement or rule).
    Next,
    /// The chain ends with this verdict.
    End(Final),
    /// Back to the calling chain.
    Return,
    /// Run that chain, then go on.
    Jump(String),
    /// Run that chain instead of the rest of this one.
    Goto(String),
}

/// What a matched rule that ends in a counter or a log (a rule without `action`, a zone's
/// drop log) did: it decides nothing, the chain goes on. `None` for other rules.
fn count_only(rule: &Rule) -> Option<String> {
    if !matches!(rule.stmts.last(), Some(Stmt::Counter | Stmt::Log { .. })) {
        return None;
    }
    let logged = rule.stmts.iter().find_map(|s| match s {
        Stmt::Log {
            prefix,
            group: None,
        } => Some(format!(", logged with prefix {prefix:?}")),
        Stmt::Log {
            prefix,
            group: Some(g),
        } => Some(format!(", reported to nflog group {g} as {prefix:?}")),
        _ => None,
    });
    let name = rule.comment.as_deref().unwrap_or("");
    let name = name.rsplit_once(" #").map_or(name, |(label, _)| label);
    Some(format!(
        "{}: {name} matched: counted{}, no verdict: evaluation goes on",
        rule.chain,
        logged.unwrap_or_default()
    ))
}

impl Run<'_> {
    /// Runs `chain` over `pkt` (which NAT rewrites) and says how it ended.
    pub fn chain(
        &self,
        chain: &str,
        pkt: &mut Packet,
        trace: &mut Trace,
    ) -> Result<ChainEnd, ExplainError> {
        self.chain_at(chain, pkt, trace, 0)
    }

    fn chain_at(
        &self,
        chain: &str,
        pkt: &mut Packet,
        trace: &mut Trace,
        depth: usize,
    ) -> Result<ChainEnd, ExplainError> {
        if depth > MAX_DEPTH {
            return Err(ExplainError::TooDeep(MAX_DEPTH, self.table.name.clone()));
        }
        if !self.table.chains.iter().any(|c| c.name == chain) {
            return Err(self.missing("chain", chain));
        }
        for rule in self.table.rules.iter().filter(|r| r.chain == chain) {
            let flow = self.rule(rule, pkt, trace)?;
            let next = match flow {
                Flow::Next => continue,
                Flow::End(f) => return Ok(ChainEnd::Verdict(f, self.rule_ref(rule))),
                Flow::Return => return Ok(ChainEnd::Fallthrough),
                Flow::Jump(c) => {
                    trace.steps.push(format!("{chain}: jump {c}"));
                    self.chain_at(&c, pkt, trace, depth + 1)?
                }
                Flow::Goto(c) => {
                    trace.steps.push(format!("{chain}: goto {c}"));
                    return self.chain_at(&c, pkt, trace, depth + 1);
                }
            };
            if let ChainEnd::Verdict(..) = next {
                return Ok(next);
            }
        }
        Ok(ChainEnd::Fallthrough)
    }

    fn missing(&self, what: &'static str, name: &str) -> ExplainError {
        ExplainError::Missing {
            table: self.table.name.clone(),
            what,
            name: name.to_string(),
        }
    }

    fn rule_ref(&self, rule: &Rule) -> RuleRef {
        RuleRef {
            table: self.table.name.clone(),
            chain: rule.chain.clone(),
            comment: rule.comment.clone(),
            text: render_rule(self.table.family, rule),
        }
    }

    /// Runs one rule's statements until one does not match or one ends it.
    fn rule(&self, rule: &Rule, pkt: &mut Packet, trace: &mut Trace) -> Result<Flow, ExplainError> {
        for stmt in &rule.stmts {
            match self.stmt(stmt, rule, pkt, trace) {
                Ok(Some(flow)) => {
                    let did = match &flow {
                        Flow::Next => None,
                        Flow::End(f) => Some(Did::End(*f)),
                        Flow::Return => Some(Did::Return),
                        Flow::Jump(c) => Some(Did::Jump(c.clone())),
                        Flow::Goto(c) => Some(Did::Goto(c.clone())),
                    };
                    if let Some(did) = did {
                        trace.hits.push(Hit {
                            rule: self.rule_ref(rule),
                            did,
                        });
                    }
                    return Ok(flow);
                }
                Ok(None) => {}
                Err(ExplainError::Unsupported(what)) => {
                    return Err(ExplainError::Unsupported(format!(
                        "{what} in rule {:?} of chain {} (table {})",
                        rule.comment.as_deref().unwrap_or(""),
                        rule.chain,
                        self.table.name
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(step) = count_only(rule) {
            trace.steps.push(step);
            trace.hits.push(Hit {
                rule: self.rule_ref(rule),
                did: Did::Counted,
            });
        }
        Ok(Flow::Next)
    }

    /// One statement: `None` to go on with the next one.
    fn stmt(
        &self,
        stmt: &Stmt,
        rule: &Rule,
        pkt: &mut Packet,
        trace: &mut Trace,
    ) -> Result<Option<Flow>, ExplainError> {
        let matched = match stmt {
            Stmt::Cmp { left, op, right } => {
                load(left, pkt, self.local)?.is_some_and(|v| equal(&v, right) == (*op == CmpOp::Eq))
            }
            Stmt::Range {
                left,
                negate,
                from,
                to,
            } => load(left, pkt, self.local)?
                .is_some_and(|v| super::values::in_range(&v, from, to) != *negate),
            Stmt::Flags { left, bits, negate } => {
                load(left, pkt, self.local)?.is_some_and(|v| any_bit(&v, bits) != *negate)
            }
            Stmt::MaskedCmp { left, mask, right } => {
                load(left, pkt, self.local)?.is_some_and(|v| masked_equal(&v, mask, right))
            }
            Stmt::Lookup { left, set, negate } => match load(left, pkt, self.local)? {
                Some(v) => self.lookup(set, &v)?.is_some() != *negate,
                None => false,
            },
            Stmt::Verdict(v) => return Ok(Some(flow_of(v))),
            Stmt::Opaque(o) => return self.included(o, rule, pkt, trace),
            Stmt::Vmap { key, map } => {
                let Some(k) = load(key, pkt, self.local)? else {
                    return Ok(Some(Flow::Next));
                };
                return Ok(Some(match self.lookup(map, &k)? {
                    Some(Some(Value::Verdict(v))) => flow_of(&v),
                    _ => Flow::Next,
                }));
            }
            Stmt::Reject(r) => return Ok(Some(Flow::End(Final::Reject(*r)))),
            Stmt::Masquerade => {
                self.snat(pkt, trace, rule, None, None);
                return Ok(Some(Flow::End(Final::Accept)));
            }
            // Before routing `masq_addr` is the incoming interface's address: the one the
            // kernel's redirect picks.
            Stmt::Redirect { port } => {
                let event = self.nat_event(NatKind::Dnat, rule, self.masq_addr, *port, Vec::new());
                apply_nat(pkt, &event);
                trace.nat.push(event);
                return Ok(Some(Flow::End(Final::Accept)));
            }
            // In an inet table a NAT of the other family does nothing, not even end the
            // rule: the kernel's nat expression checks the packet's family.
            Stmt::Nat { addr, .. } if addr.is_ipv4() != pkt.is_v4() => true,
            Stmt::NatMap { version, .. } if (*version == IpVersion::V4) != pkt.is_v4() => true,
            Stmt::Nat { kind, addr, port } => {
                let event = self.nat_event(*kind, rule, Some(*addr), *port, Vec::new());
                apply_nat(pkt, &event);
                trace.nat.push(event);
                return Ok(Some(Flow::End(Final::Accept)));
            }
            Stmt::NatMap { kind, key, map, .. } => {
                return self.nat_map(*kind, key, map, rule, pkt, trace);
            }
            Stmt::CtMarkOr(bits) => {
                pkt.ct_mark |= bits;
                true
            }
            Stmt::MetaMarkSet { and, xor } => {
                pkt.mark = (pkt.mark & and) ^ xor;
                // `set_mark` (the value's bits all cleared first) reads as VALUE/BITS-OWNED;
                // `set_xmark` as the bitwise step it is.
                let change = if and & xor == 0 {
                    format!("{xor:#x}/{:#x}", !and)
                } else {
                    format!("(mark & {and:#x}) ^ {xor:#x}")
                };
                trace.steps.push(format!(
                    "{}: mark set {change} by {} (the packet's mark is now {:#x})",
                    rule.chain,
                    super::report::rule_name(&self.rule_ref(rule)),
                    pkt.mark
                ));
                true
            }
            Stmt::FieldSet { field, value } => {
                // The field's dependencies (`meta nfproto ipv4` for `ip dscp`) as a load's.
                if load(&Expr::Payload(*field), pkt, self.local)?.is_none() {
                    return Ok(Some(Flow::Next));
                }
                let def = field.def();
                match def.reads {
                    crate::dataplane::nft::fields::Reads::Dscp => pkt.dscp = (*value & 63) as u8,
                    _ => return Err(ExplainError::Unsupported(format!("`{} set`", def.text))),
                }
                let mut shown = String::new();
                crate::dataplane::nft::text::render_value(
                    &mut shown,
                    &Value::Field(*field, *value),
                );
                trace.steps.push(format!(
                    "{}: {} set {shown} by {}",
                    rule.chain,
                    def.text,
                    super::report::rule_name(&self.rule_ref(rule)),
                ));
                true
            }
            Stmt::CtHelperSet(name) => {
                // The kernel attaches a helper only to a connection still unconfirmed.
                let name = name.strip_prefix("helper-").unwrap_or(name);
                trace.steps.push(if pkt.established() {
                    format!(
                        "{}: helper {name} (already attached when the connection was new)",
                        rule.chain
                    )
                } else {
                    format!("{}: helper {name}", rule.chain)
                });
                true
            }
            Stmt::Notrack => {
                // Untracked: no `ct state established` accepts it later and no NAT chain
                // sees it (the service table exempts only connections no service
                // translates).
                pkt.ct_state = CT_STATE_UNTRACKED;
                trace.steps.push(format!(
                    "{}: notrack: this connection is not tracked (no conntrack entry)",
                    rule.chain
                ));
                true
            }
            Stmt::FlowOffload(flowtable) => {
                // No verdict: the packet goes on through the chain; later packets of the
                // connection skip the forward path, decided as this one was.
                trace.steps.push(format!(
                    "{}: flow add @{flowtable}: this established connection would be offloaded (its later packets bypass the forward chain)",
                    rule.chain
                ));
                true
            }
            Stmt::Counter
            | Stmt::Log { .. }
            | Stmt::Limit { over: false, .. }
            | Stmt::LimitRef(_)
            | Stmt::ClampMssToRoute
            | Stmt::MapUpdate { .. } => true,
            // Under its rate (what `explain` assumes), `limit rate over` does not match.
            Stmt::Limit { over: true, .. } => false,
        };
        Ok((!matched).then_some(Flow::Next))
    }

    /// An included rule (nft's compile of an operator's snippet): lifted back to the
    /// statements it means and run as they are; when it does not lift, named as what makes
    /// the verdict uncertain and taken as not matching.
    fn included(
        &self,
        o: &Opaque,
        rule: &Rule,
        pkt: &mut Packet,
        trace: &mut Trace,
    ) -> Result<Option<Flow>, ExplainError> {
        let origin = rule.comment.as_deref().unwrap_or("no comment");
        let origin = origin.rsplit_once(" #").map_or(origin, |(label, _)| label);
        let lifted = lift(self.table.family, &o.exprs).filter(|s| self.sets_fit(s));
        let Some(stmts) = lifted else {
            trace.steps.push(format!(
                "{}: included rule `{}` ({origin}) is not evaluated: taken as not matching",
                rule.chain, o.text
            ));
            trace.uncertain.push(format!(
                "included rule `{}` ({origin}, chain {}) holds an expression explain does not read: it was taken as not matching",
                o.text, rule.chain
            ));
            return Ok(Some(Flow::Next));
        };
        for stmt in &stmts {
            if let Some(flow) = self.stmt(stmt, rule, pkt, trace)? {
                return Ok(Some(flow));
            }
        }
        trace.steps.push(format!(
            "{}: included rule `{}` ({origin}) matched, no verdict: evaluation goes on",
            rule.chain, o.text
        ));
        Ok(None)
    }

    /// Every named set a lifted rule looks up is one of the table's, of the key's type (a
    /// set of concatenations is never met by one field, which the lift would mean).
    fn sets_fit(&self, stmts: &[Stmt]) -> bool {
        stmts.iter().all(|s| match s {
            Stmt::Lookup {
                left,
                set: SetRef::Named(name),
                ..
            } => self.table.set(name).is_some_and(|set| {
                !set.key.is_concat() && set.key.byte_len() == left.byte_len() && set.data.is_none()
            }),
            Stmt::Vmap {
                key,
                map: SetRef::Named(name),
            } => self.table.set(name).is_some_and(|set| {
                !set.key.is_concat() && set.key.byte_len() == key.byte_len() && set.is_vmap()
            }),
            _ => true,
        })
    }

    pub(super) fn nat_event(
        &self,
        kind: NatKind,
        rule: &Rule,
        addr: Option<IpAddr>,
        port: Option<u16>,
        shares: Vec<(IpAddr, Option<u16>, f64)>,
    ) -> NatEvent {
        NatEvent {
            kind,
            masquerade: false,
            addr,
            port,
            shares,
            rule: self.rule_ref(rule),
        }
    }

    fn snat(
        &self,
        pkt: &mut Packet,
        trace: &mut Trace,
        rule: &Rule,
        addr: Option<IpAddr>,
        port: Option<u16>,
    ) {
        let mut event = self.nat_event(NatKind::Snat, rule, addr.or(self.masq_addr), port, vec![]);
        event.masquerade = addr.is_none();
        apply_nat(pkt, &event);
        trace.nat.push(event);
    }

    /// The element of `set` whose key holds `v`: `Some(data)` when found (`data` is `None`
    /// for a plain set).
    pub(super) fn lookup(
        &self,
        set: &SetRef,
        v: &Value,
    ) -> Result<Option<Option<Value>>, ExplainError> {
        let elements = match set {
            SetRef::Named(name) => {
                &self
                    .table
                    .set(name)
                    .ok_or_else(|| self.missing("set", name))?
                    .elements
            }
            SetRef::Anonymous { elements, .. } => elements,
        };
        Ok(elements
            .iter()
            .find(|e| element_matches(v, &e.key))
            .map(|e| e.data.clone()))
    }
}

fn flow_of(v: &Verdict) -> Flow {
    match v {
        Verdict::Accept => Flow::End(Final::Accept),
        Verdict::Drop => Flow::End(Final::Drop),
        Verdict::Continue => Flow::Next,
        Verdict::Return => Flow::Return,
        Verdict::Jump(c) => Flow::Jump(c.clone()),
        Verdict::Goto(c) => Flow::Goto(c.clone()),
    }
}

/// Rewrites the packet as the translation says and marks the connection.
pub fn apply_nat(pkt: &mut Packet, event: &NatEvent) {
    match event.kind {
        NatKind::Dnat => {
            if let Some(a) = event.addr {
                pkt.daddr = a;
            }
            if let Some(p) = event.port {
                pkt.dport = p;
            }
            pkt.ct_status |= CT_STATUS_DNAT;
        }
        NatKind::Snat => {
            if let Some(a) = event.addr {
                pkt.saddr = a;
            }
            if let Some(p) = event.port {
                pkt.sport = p;
            }
            pkt.ct_status |= CT_STATUS_SNAT;
        }
    }
}
