//! The program, the policy controller's model (see [`super::model`]): `[policy]` -> the
//! nftables table that enforces it, every kernel rule tagged with the *rule group* it
//! belongs to (pure).
//!
//! # Layout and order of evaluation (`table inet <prefix>-policy`)
//!
//! - `input` (filter, priority 0, policy from `input`): loopback accepted; established and
//!   related accepted; invalid dropped; IPv6 neighbour discovery accepted; then every rule
//!   whose `to` is `"self"` or omitted, in config order; then the drop logs of `log_drops`
//!   zones; then the default (`reject` is a final rule: TCP reset for TCP, ICMP port
//!   unreachable otherwise).
//! - `forward` (filter, priority 0, policy from `forward`): MSS clamping of `mtu_fix`
//!   zones (before anything accepts: a SYN-ACK is already established); with
//!   `flow_offload`, established TCP/UDP offloaded to the flowtable (see `flowtable.rs`);
//!   established/related accepted; invalid dropped; rules whose `to` is a zone or omitted, in config order; then
//!   `ct status dnat` with edgenetd's conntrack mark bit ([`OWN_DNAT_MARK`]) accepted —
//!   traffic edgenetd DNATed (service VIPs, port forwards) passes unless a rule above said
//!   otherwise (any DNAT with `forward_foreign_dnat`); then zone-to-zone forwards; then the
//!   drop logs of `log_drops` zones; then the default.
//! - `output` (filter, priority 0, policy from `output`): loopback, established/related,
//!   neighbour discovery accepted; rules with `from = "self"`; the default.
//! - `prerouting` (nat, priority -100): port forwards for traffic from their zone to any of
//!   the router's addresses, and (reflection) from the inner host's zone and the
//!   `reflection_zones` to the router's addresses on the forward's zone; each marks the
//!   connection as edgenetd's; then redirects to the router (`to = "self"`), which also
//!   add an input rule accepting what they redirected (after the rules).
//! - `postrouting` (nat, priority 100): hairpin masquerade of port-forwarded traffic from
//!   the reflecting zones; `[[policy.nat]]` entries in config order (SNAT, masquerade, or
//!   accept = no source NAT); masquerade of IPv4 leaving through zones with
//!   `masquerade = true` and of IPv6 through zones with `masquerade6 = true`; SNAT of zones
//!   with `snat` (both narrowed by `masq_src` / `masq_dest`).
//! - `forward_invalid` (regular; only when a zone has `masq_allow_invalid`): the forward
//!   chain jumps here for `ct state invalid`; traffic leaving through such a zone returns,
//!   the rest is dropped.
//! - `mangle_prerouting` (filter, priority -150; only when a rule has `set_mark`, or
//!   `set_dscp` without `to`): the marks, set before the routing decision so route rules
//!   can match them; DSCP rewrites.
//! - `mangle_forward`, `mangle_input` (filter), `mangle_output` (route), priority -150,
//!   each only when a `set_dscp` rule's path is there: DSCP rewrites (`program/dscp.rs`).
//! - `helpers` (filter prerouting, priority 0; only with `[policy] helpers`): `ct helper set`
//!   for new connections from the zones that ask for a helper, on its port (see
//!   `program/helpers.rs`).
//!
//! Zones with a `log_limit` get a named limit object, `<zone>.log_limit`, that every log of
//! the zone refers to (`limit name "<zone>.log_limit"`): one rate for all of them, as fw4.
//!
//! # Rule groups
//!
//! Group 0 is the skeleton (table, chains, the always-present rules, the defaults). Every
//! named set, `[[policy.rule]]` (and its marking), `[[policy.forward]]`,
//! `[[policy.port_forward]]`, zone masquerade, zone SNAT, MSS clamping, drop log, conntrack
//! helper and the flowtable (with its offload rule) is a group of its own: the kernel rules
//! it produces carry its tag, so a group the kernel refuses can be left out on its own
//! ([`Program::without`]). Leaving out an accepting group is fail-closed by itself; a refused
//! *drop/reject* group is replaced by a barrier that drops everything reaching its place, so
//! its traffic is never let through by a later rule.

use std::collections::BTreeSet;

use crate::config::policy::{
    Action, Destination, NamedSet, PolicyConfig, PolicyRule, Protocol, Rate, SetFamily, Source,
    TupleValue, Zone,
};
use crate::dataplane::nft::intervals::normalize_prefixes;

use super::addresses::RouterAddresses;
use super::matches::{Match, combine, restrict, zone_match};
use super::rule_match::rule_matches;
use crate::controller::marks::OWN_DNAT_MARK;
use crate::dataplane::nft::ir::*;
use crate::dataplane::nft::text::render_rule;

mod dscp;
mod flowtable;
mod helpers;
mod marks;
mod masq;
mod nat;
mod notrack;
mod pods;
mod port_forward;
mod redirect;
mod snat;
mod synflood;
pub use dscp::{MANGLE_FORWARD, MANGLE_INPUT, MANGLE_OUTPUT};
pub use flowtable::{FLOWTABLE, flowtable_devices};
pub use helpers::HELPERS;
pub use marks::MANGLE_PREROUTING;
pub use notrack::{RAW_OUTPUT, RAW_PREROUTING};
pub use pods::{
    PODS, PODS_EGRESS, PODS_EGRESS_ADMIN, PODS_EGRESS_BASELINE, PODS_INGRESS, PODS_INGRESS_ADMIN,
    PODS_INGRESS_BASELINE, build_with_pods,
};
pub use synflood::SYN_FLOOD;

/// One rule group (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// How an operator names it, e.g. `rule ssh-from-lan`.
    pub label: String,
    /// True when the group drops or rejects (a refusal installs a barrier in its place).
    pub deny: bool,
}

/// The table for a policy, with the group of every kernel object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The complete table.
    pub table: Table,
    /// Group of each rule of `table.rules`.
    pub rule_groups: Vec<u32>,
    /// Group of each set of `table.sets`.
    pub set_groups: Vec<u32>,
    /// Group of each ct helper object of `table.ct_helpers`.
    pub helper_groups: Vec<u32>,
    /// Group of each flowtable of `table.flowtables`.
    pub flowtable_groups: Vec<u32>,
    /// Groups by id; 0 is the skeleton.
    pub groups: Vec<Group>,
    /// `[[policy.include]]` snippets still to be compiled into `table` (by nft, where the
    /// kernel is: [`super::includes`]); empty once they are.
    pub includes: Vec<crate::config::policy::Include>,
}

/// Chain names.
pub const INPUT: &str = "input";
/// Forward chain.
pub const FORWARD: &str = "forward";
/// Output chain.
pub const OUTPUT: &str = "output";
/// NAT prerouting chain.
pub const PREROUTING: &str = "prerouting";
/// NAT postrouting chain.
pub const POSTROUTING: &str = "postrouting";
/// The regular chain the forward chain jumps to for `ct state invalid` when a zone has
/// `masq_allow_invalid`: it returns what leaves through such a zone and drops the rest.
pub const FORWARD_INVALID: &str = "forward_invalid";
/// Log rate (per minute) of a log without a `log_limit` of its own or of its zone.
pub const LOG_PER_MINUTE: u64 = 10;
/// `meta nfproto ipv4`.
const NFPROTO_IPV4: u8 = 2;
/// `meta nfproto ipv6`.
const NFPROTO_IPV6: u8 = 10;
/// The chain a fault-injected rule jumps to; it never exists, so the kernel refuses the rule.
pub const FAULT_CHAIN: &str = "edgenetd-fault-injected";

impl Program {
    /// True when both programs differ at most in the elements of named sets.
    pub fn same_structure(&self, other: &Program) -> bool {
        self.table.name == other.table.name
            && self.table.chains == other.table.chains
            && self.table.rules == other.table.rules
            && self.groups == other.groups
            && self.rule_groups == other.rule_groups
            && self.set_groups == other.set_groups
            && self.table.ct_helpers == other.table.ct_helpers
            && self.table.limits == other.table.limits
            && self.helper_groups == other.helper_groups
            && self.table.flowtables == other.table.flowtables
            && self.flowtable_groups == other.flowtable_groups
            && self.table.sets.len() == other.table.sets.len()
            && self
                .table
                .sets
                .iter()
                .zip(&other.table.sets)
                .all(|(a, b)| a.same_definition(b))
    }

    /// The table without the `failed` groups: their sets and rules are left out, and a
    /// refused deny group leaves a drop barrier at the place of its first rule in each chain
    /// (the barrier belongs to the skeleton, group 0). Returns the table with the group of
    /// each of its rules and sets.
    pub fn without(&self, failed: &BTreeSet<u32>) -> (Table, Vec<u32>, Vec<u32>) {
        let mut t = Table::new(self.table.family, self.table.name.clone());
        t.chains = self.table.chains.clone();
        let mut set_groups = Vec::new();
        for (set, g) in self.table.sets.iter().zip(&self.set_groups) {
            if !failed.contains(g) {
                t.sets.push(set.clone());
                set_groups.push(*g);
            }
        }
        for (h, g) in self.table.ct_helpers.iter().zip(&self.helper_groups) {
            if !failed.contains(g) {
                t.ct_helpers.push(h.clone());
            }
        }
        t.limits = self.table.limits.clone();
        t.flowtables = self
            .table
            .flowtables
            .iter()
            .zip(&self.flowtable_groups)
            .filter(|(_, g)| !failed.contains(g))
            .map(|(ft, _)| ft.clone())
            .collect();
        let mut rule_groups = Vec::new();
        let mut barriers: BTreeSet<(u32, String)> = BTreeSet::new();
        for (rule, g) in self.table.rules.iter().zip(&self.rule_groups) {
            if !failed.contains(g) {
                t.rules.push(rule.clone());
                rule_groups.push(*g);
                continue;
            }
            let group = &self.groups[*g as usize];
            if group.deny && barriers.insert((*g, rule.chain.clone())) {
                t.rules.push(
                    Rule::new(
                        rule.chain.clone(),
                        vec![Stmt::Counter, Stmt::Verdict(Verdict::Drop)],
                    )
                    .with_comment(format!(
                        "{} refused by the kernel: fail closed",
                        group.label
                    )),
                );
                rule_groups.push(0);
            }
        }
        (t, rule_groups, set_groups)
    }

    /// The group of ct helper object `name` (0 when there is none).
    pub fn helper_group(&self, name: &str) -> u32 {
        self.table
            .ct_helpers
            .iter()
            .zip(&self.helper_groups)
            .find(|(h, _)| h.name == name)
            .map_or(0, |(_, g)| *g)
    }

    /// The group of flowtable `name` (0 when there is none).
    pub fn flowtable_group(&self, name: &str) -> u32 {
        self.table
            .flowtables
            .iter()
            .zip(&self.flowtable_groups)
            .find(|(ft, _)| ft.name == name)
            .map_or(0, |(_, g)| *g)
    }

    /// Number of kernel rules.
    pub fn rule_count(&self) -> usize {
        self.table.rules.len()
    }
}

/// The start of a source-NAT rule of the postrouting chain: the family test when the
/// zone's match does not imply one, never through `lo`, the zone's outgoing match, a counter.
fn leaving_zone(nfproto: Option<u8>, zone_match: Vec<Stmt>) -> Vec<Stmt> {
    let mut stmts: Vec<Stmt> = nfproto
        .map(|p| Stmt::Cmp {
            left: Expr::Meta(MetaKey::NfProto),
            op: CmpOp::Eq,
            right: Value::Proto(p),
        })
        .into_iter()
        .collect();
    stmts.push(Stmt::Cmp {
        left: Expr::Meta(MetaKey::OifName),
        op: CmpOp::Neq,
        right: Value::IfName("lo".into()),
    });
    stmts.extend(zone_match);
    stmts.push(Stmt::Counter);
    stmts
}

/// Whether the fault-injection build's side table makes the group of `name` (`unit`: a pod
/// isolation unit, else a `[[policy.rule]]`) one the kernel refuses; never in other builds.
fn refused_by_test(name: &str, unit: bool) -> bool {
    crate::fault_hook!(
        if unit {
            crate::fault::kernel_reject::unit_refused(name)
        } else {
            crate::fault::kernel_reject::rule_refused(name)
        },
        {
            let _ = (name, unit);
            false
        }
    )
}

fn verdict(action: Action, protocol: Protocol) -> Stmt {
    match action {
        Action::Accept => Stmt::Verdict(Verdict::Accept),
        Action::Drop => Stmt::Verdict(Verdict::Drop),
        Action::Reject if protocol == Protocol::Tcp => Stmt::Reject(Reject::TcpReset),
        Action::Reject => Stmt::Reject(Reject::IcmpxPortUnreachable),
    }
}

/// True for a rule with `set_mark` or `set_dscp` and no `action` nor log: it only marks (in
/// the mangle chains, where it is counted) and adds nothing to the filter chains. A notrack
/// rule too: it lives in the raw chains only.
pub fn is_mark_only(r: &PolicyRule) -> bool {
    r.notrack || (r.set_mark.is_some() || r.set_dscp.is_some()) && r.action.is_none() && !r.log
}

/// Builds rules into a program, tagging each with the current group.
struct Builder {
    p: Program,
    group: u32,
}

impl Builder {
    fn group(&mut self, label: String, deny: bool) {
        self.p.groups.push(Group { label, deny });
        self.group = (self.p.groups.len() - 1) as u32;
    }

    fn rule(&mut self, chain: &str, stmts: Vec<Stmt>) {
        let label = &self.p.groups[self.group as usize].label;
        let mut rule = Rule::new(chain, stmts);
        let hash = fnv1a(render_rule(self.p.table.family, &rule).as_bytes());
        rule.comment = Some(format!("{label} #{hash:08x}"));
        self.p.table.rules.push(rule);
        self.p.rule_groups.push(self.group);
    }
}

/// The 32-bit FNV-1a hash a rule's comment carries (`label #hash`), so a listing shows a
/// changed rule by its comment alone.
pub(crate) fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x01000193)
    })
}

fn est_related() -> Stmt {
    Stmt::Flags {
        left: Expr::Ct(CtKey::State),
        bits: Value::CtState(CT_STATE_ESTABLISHED | CT_STATE_RELATED),
        negate: false,
    }
}

fn ct_invalid() -> Stmt {
    Stmt::Flags {
        left: Expr::Ct(CtKey::State),
        bits: Value::CtState(CT_STATE_INVALID),
        negate: false,
    }
}

fn nd_types() -> Stmt {
    Stmt::Lookup {
        left: Expr::Payload(Field::Icmpv6Type),
        set: SetRef::Anonymous {
            key: KeyType::single(DataType::Icmpv6Type),
            interval: false,
            data: None,
            elements: [133u8, 134, 135, 136]
                .into_iter()
                .map(|t| Element::key(ElemKey::Value(Value::Icmpv6Type(t))))
                .collect(),
        },
        negate: false,
    }
}

fn policy_of(a: Action) -> ChainPolicy {
    match a {
        Action::Accept => ChainPolicy::Accept,
        Action::Drop | Action::Reject => ChainPolicy::Drop,
    }
}

/// A named set: a hash set while every element is a single address (constant-time
/// lookups, cheaper commits), an interval set once any element is a prefix. Changing between
/// the two rewrites the table (atomically) instead of updating elements.
///
/// A dynamic set is always an interval set with timeouts (`flags interval,timeout`): others
/// add addresses and ranges (CrowdSec does), with timeouts of their own (fail2ban's ban
/// time), and its definition never changes with the config's elements, so no config edit
/// turns it into a type the elements others added no longer fit. It is not `flags dynamic`:
/// that asks for a packet-path-updatable hash, which can hold no prefix, and no rule of
/// edgenetd updates the set from the packet path.
fn named_set(s: &NamedSet) -> Set {
    let addr = match s.family {
        SetFamily::Ipv4 => DataType::Ipv4Addr,
        SetFamily::Ipv6 => DataType::Ipv6Addr,
    };
    if !s.tuple.is_empty() {
        return pair_set(s, addr);
    }
    let mut set = Set::new(s.name.clone(), KeyType::single(addr));
    let nets = normalize_prefixes(s.elements.iter().copied());
    set.interval = s.dynamic || nets.iter().any(|n| n.prefix_len() < n.max_prefix_len());
    if s.dynamic {
        set.timeout = Some(s.timeout.map_or(0, |t| t.as_millis() as u64));
        set.size = s.size;
    }
    set.elements = nets
        .into_iter()
        .map(|n| {
            Element::key(if set.interval {
                ElemKey::Prefix(n)
            } else {
                ElemKey::Value(Value::ip(n.addr()))
            })
        })
        .collect();
    set
}

/// An address·port set (`match`): its key the fields' types in the set's field order, each
/// element the concatenation of its tuple in that order. Exact tuples make a hash set; with
/// a `net` field it is a concatenated interval set, each element the range from the tuple's
/// lowest key to its highest (a prefix spans its network to its broadcast address).
fn pair_set(s: &NamedSet, addr: DataType) -> Set {
    let of = |f: &crate::config::policy::TupleField| {
        if f.is_address() {
            addr
        } else {
            DataType::InetService
        }
    };
    let key = KeyType(s.tuple.iter().map(of).collect());
    let mut set = Set::new(s.name.clone(), key);
    set.interval = s.has_prefix_field();
    let bound = |v: &TupleValue, last: bool| match v {
        TupleValue::Address(n) => Value::ip(if last { n.broadcast() } else { n.network() }),
        TupleValue::Port(p) => Value::Port(*p),
    };
    set.elements = s
        .tuples
        .iter()
        .map(|t| {
            let low = Value::Concat(t.iter().map(|v| bound(v, false)).collect());
            Element::key(if set.interval {
                ElemKey::Range(
                    low,
                    Value::Concat(t.iter().map(|v| bound(v, true)).collect()),
                )
            } else {
                ElemKey::Value(low)
            })
        })
        .collect();
    set
}

/// True when `a` and `b` differ at most in the elements of named sets (same set names and
/// families, same everything else).
pub fn only_set_elements_differ(a: &PolicyConfig, b: &PolicyConfig) -> bool {
    // Every field by name, none by `..`: a key added to `[policy]` is a compile error here
    // until it is compared (one was once missed, and its change was taken for an element
    // change: the sync kept the old rules).
    let PolicyConfig {
        input,
        forward,
        output,
        zones,
        sets,
        rules,
        forwards,
        port_forwards,
        nat,
        redirects,
        forward_foreign_dnat,
        helpers,
        custom_helpers,
        flow_offload,
        flow_offload_hw,
        synflood,
        includes,
    } = a;
    (input, forward, output) == (&b.input, &b.forward, &b.output)
        && zones == &b.zones
        && rules == &b.rules
        && forwards == &b.forwards
        && port_forwards == &b.port_forwards
        && nat == &b.nat
        && redirects == &b.redirects
        && forward_foreign_dnat == &b.forward_foreign_dnat
        && helpers == &b.helpers
        && custom_helpers == &b.custom_helpers
        && (flow_offload, flow_offload_hw) == (&b.flow_offload, &b.flow_offload_hw)
        && synflood == &b.synflood
        && includes == &b.includes
        && sets.len() == b.sets.len()
        && sets.iter().zip(&b.sets).all(|((n, x), (m, y))| {
            // As above: every field by name; only the elements may differ.
            let NamedSet {
                name: _,
                family,
                elements: _,
                dynamic,
                timeout,
                size,
                tuple,
                tuples: _,
            } = x;
            n == m
                && (family, dynamic, timeout, size) == (&y.family, &y.dynamic, &y.timeout, &y.size)
                && tuple == &y.tuple
        })
}

/// True when `set` (of a policy program) is a dynamic set: other programs add elements to it,
/// which a sync keeps. Only dynamic sets have timeouts.
pub fn keeps_foreign_elements(set: &Set) -> bool {
    set.timeout.is_some()
}

/// `p` (planned from `old`) with the named sets whose elements changed in `new` rebuilt:
/// the same program [`build`] would return for `new`, at the cost of the changed sets only.
pub fn with_set_elements(p: &Program, old: &PolicyConfig, new: &PolicyConfig) -> Program {
    let mut out = p.clone();
    for set in out.table.sets.iter_mut() {
        if let (Some(o), Some(n)) = (old.sets.get(&set.name), new.sets.get(&set.name))
            && (o.elements != n.elements || o.tuples != n.tuples)
        {
            *set = named_set(n);
        }
    }
    out
}

/// [`build_with`] without any router address known: port forwards do not reflect.
pub fn build(cfg: &PolicyConfig, table_name: &str) -> Program {
    build_with(cfg, table_name, &RouterAddresses::default())
}

/// The table that enforces `cfg`, named `table_name` (family inet): the chains, the named
/// sets, then the rules in the order of evaluation described in the module docs. Port
/// forwards reflect to the router's addresses (`addrs`) on their `from` zone.
pub fn build_with(cfg: &PolicyConfig, table_name: &str, addrs: &RouterAddresses) -> Program {
    let mut b = Builder {
        p: Program {
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
        group: 0,
    };
    b.p.table.chains = base_chains(cfg);
    b.named_sets(cfg);
    b.ct_helpers(cfg);
    b.log_limits(cfg);
    b.mtu_fixes(cfg);
    b.flow_offload(cfg, addrs.links());
    b.always_present(cfg);
    b.invalid_exemptions(cfg);
    b.synflood(cfg);
    b.notracks(cfg);
    b.set_marks(cfg);
    b.set_dscps(cfg);
    b.config_rules(cfg);
    b.dnat_passes(cfg);
    b.zone_forwards(cfg);
    for pf in &cfg.port_forwards {
        b.port_forward(cfg, pf, addrs);
    }
    for r in &cfg.redirects {
        b.redirect(cfg, r);
    }
    b.nat_rules(cfg);
    b.masquerades(cfg);
    b.snats(cfg);
    b.drop_logs(cfg);
    b.reject_defaults(cfg);
    b.p.includes = cfg.includes.clone();
    b.p
}

/// The five base chains, with the policies of `cfg`.
fn base_chains(cfg: &PolicyConfig) -> Vec<Chain> {
    let filter =
        |name, hook, action| Chain::base(name, ChainType::Filter, hook, 0, policy_of(action));
    vec![
        filter(INPUT, Hook::Input, cfg.input),
        filter(FORWARD, Hook::Forward, cfg.forward),
        filter(OUTPUT, Hook::Output, cfg.output),
        Chain::base(
            PREROUTING,
            ChainType::Nat,
            Hook::Prerouting,
            -100,
            ChainPolicy::Accept,
        ),
        Chain::base(
            POSTROUTING,
            ChainType::Nat,
            Hook::Postrouting,
            100,
            ChainPolicy::Accept,
        ),
    ]
}

/// The rate of a log statement: its own `log_limit` (`own`, inline), else its zone's (the
/// zone's named limit object, shared by all of the zone's logs), else [`LOG_PER_MINUTE`],
/// burst 5.
fn log_limit(own: Option<Rate>, zone: Option<&Zone>) -> Stmt {
    if own.is_none()
        && let Some(z) = zone.filter(|z| z.log_limit.is_some())
    {
        return Stmt::LimitRef(log_limit_name(z));
    }
    let (rate, unit) = own.map_or((LOG_PER_MINUTE, RateUnit::Minute), |r| {
        (r.count, rate_unit(r))
    });
    Stmt::Limit {
        rate,
        unit,
        burst: 5,
        over: false,
    }
}

/// The name of zone `z`'s limit object (fw4's).
pub fn log_limit_name(z: &Zone) -> String {
    format!("{}.log_limit", z.name)
}

pub(super) fn rate_unit(r: Rate) -> RateUnit {
    match r.per_seconds {
        1 => RateUnit::Second,
        60 => RateUnit::Minute,
        3600 => RateUnit::Hour,
        _ => RateUnit::Day,
    }
}

/// The log statement of rule `r`: its `log_prefix` or else `"<name>: "`.
fn rule_log(r: &PolicyRule) -> Stmt {
    Stmt::Log {
        prefix: r
            .log_prefix
            .clone()
            .unwrap_or_else(|| format!("{}: ", r.name)),
    }
}

/// The kernel rules of one match of a config rule in a chain whose logs are `zone`'s (its
/// `log_limit` is the rate of a log without a `log_limit` of its own).
///
/// With an action: a rate-limited log rule first when it logs, then the rule itself (limit,
/// counter, verdict). Without one: a single rule (limit, counter, rate-limited log) and no
/// verdict, so the packet goes on to the next rule.
fn rule_statements(
    r: &PolicyRule,
    zone: Option<&Zone>,
    protocol: Protocol,
    m: Match,
) -> Vec<Vec<Stmt>> {
    let mut built = Vec::new();
    if r.log && r.action.is_some() {
        let mut stmts = m.stmts.clone();
        stmts.push(log_limit(r.log_limit, zone));
        stmts.push(rule_log(r));
        built.push(stmts);
    }
    let mut stmts = m.stmts;
    if let Some(l) = r.limit {
        stmts.push(Stmt::Limit {
            rate: l.count,
            unit: rate_unit(l),
            burst: 0,
            over: false,
        });
    }
    stmts.push(Stmt::Counter);
    if refused_by_test(&r.name, false) {
        stmts.push(Stmt::Verdict(Verdict::Jump(FAULT_CHAIN.into())));
    } else if let Some(action) = r.action {
        stmts.push(verdict(action, protocol));
    } else if r.log {
        stmts.push(log_limit(r.log_limit, zone));
        stmts.push(rule_log(r));
    }
    built.push(stmts);
    built
}

/// The zone whose `log_limit` the logs of rule `r` in `chain` share (fw4's): its `from`
/// zone in input and forward, else (a forwarded rule from anywhere) its `to` zone; its `to`
/// zone in output.
fn log_zone<'a>(cfg: &'a PolicyConfig, r: &PolicyRule, chain: &str) -> Option<&'a Zone> {
    let name = match (chain, &r.matches.from, &r.matches.to) {
        (INPUT | FORWARD, Source::Zone(z), _) => z,
        (OUTPUT | FORWARD, _, Destination::Zone(z)) => z,
        _ => return None,
    };
    cfg.zones.get(name)
}

impl Builder {
    /// Every named set, each a group of its own.
    fn named_sets(&mut self, cfg: &PolicyConfig) {
        for s in cfg.sets.values() {
            self.group(format!("set {}", s.name), false);
            self.p.table.sets.push(named_set(s));
            self.p.set_groups.push(self.group);
        }
    }

    /// A named limit object for every zone with a `log_limit` (in the skeleton: the logs of
    /// many groups share it).
    fn log_limits(&mut self, cfg: &PolicyConfig) {
        for z in cfg.zones.values() {
            if let Some(r) = z.log_limit {
                self.p.table.limits.push(LimitObject {
                    name: log_limit_name(z),
                    rate: r.count,
                    unit: rate_unit(r),
                    burst: 5,
                });
            }
        }
    }

    /// The skeleton's early rules: loopback, established/related, invalid, neighbour
    /// discovery.
    fn always_present(&mut self, cfg: &PolicyConfig) {
        self.group = 0;
        let lo = |key| Stmt::Cmp {
            left: Expr::Meta(key),
            op: CmpOp::Eq,
            right: Value::IfName("lo".into()),
        };
        self.rule(
            INPUT,
            vec![lo(MetaKey::IifName), Stmt::Verdict(Verdict::Accept)],
        );
        self.rule(
            OUTPUT,
            vec![lo(MetaKey::OifName), Stmt::Verdict(Verdict::Accept)],
        );
        for chain in [INPUT, FORWARD, OUTPUT] {
            self.rule(chain, vec![est_related(), Stmt::Verdict(Verdict::Accept)]);
            if chain == FORWARD && masq::allows_invalid(cfg) {
                let to = Verdict::Jump(FORWARD_INVALID.into());
                self.rule(chain, vec![ct_invalid(), Stmt::Verdict(to)]);
                continue;
            }
            self.rule(
                chain,
                vec![ct_invalid(), Stmt::Counter, Stmt::Verdict(Verdict::Drop)],
            );
        }
        for chain in [INPUT, OUTPUT] {
            self.rule(chain, vec![nd_types(), Stmt::Verdict(Verdict::Accept)]);
        }
    }

    /// `[[policy.rule]]`, in config order; each goes to the chains its from/to select (a
    /// rule that only marks, to none; see [`is_mark_only`]). The forward chain's share comes after every
    /// input/output rule was added (kernel rule order within a chain is what matters;
    /// groups keep their tags).
    fn config_rules(&mut self, cfg: &PolicyConfig) {
        let mut forward_rules = Vec::new();
        for r in &cfg.rules {
            let deny = matches!(r.action, Some(Action::Drop | Action::Reject));
            self.group(format!("rule {}", r.name), deny);
            let chains: &[&str] = match (&r.matches.from, &r.matches.to) {
                _ if is_mark_only(r) => &[],
                (Source::Router, _) => &[OUTPUT],
                (_, Destination::Router) => &[INPUT],
                (_, Destination::Zone(_)) => &[FORWARD],
                (_, Destination::Any) => &[INPUT, FORWARD],
            };
            for chain in chains {
                let sees_oif = matches!(*chain, FORWARD | OUTPUT);
                let zone = log_zone(cfg, r, chain);
                let mut built = Vec::new();
                for (protocol, matches) in rule_matches(cfg, &r.matches, sees_oif) {
                    for m in matches {
                        built.extend(rule_statements(r, zone, protocol, m));
                    }
                }
                if *chain == FORWARD {
                    forward_rules.push((self.group, built));
                } else {
                    for stmts in built {
                        self.rule(chain, stmts);
                    }
                }
            }
        }
        for (group, rules) in forward_rules {
            self.group = group;
            for stmts in rules {
                self.rule(FORWARD, stmts);
            }
        }
    }

    /// Traffic edgenetd DNATed (it carries [`OWN_DNAT_MARK`]) passes unless a rule above
    /// decided otherwise; with `forward_foreign_dnat`, traffic other tables DNATed too.
    fn dnat_passes(&mut self, cfg: &PolicyConfig) {
        self.group = 0;
        let mut stmts = vec![Stmt::Flags {
            left: Expr::Ct(CtKey::Status),
            bits: Value::CtStatus(CT_STATUS_DNAT),
            negate: false,
        }];
        if !cfg.forward_foreign_dnat {
            stmts.push(Stmt::Flags {
                left: Expr::Ct(CtKey::Mark),
                bits: Value::Mark(OWN_DNAT_MARK),
                negate: false,
            });
        }
        stmts.extend([Stmt::Counter, Stmt::Verdict(Verdict::Accept)]);
        self.rule(FORWARD, stmts);
    }

    /// `[[policy.forward]]`: zone-to-zone accepts.
    fn zone_forwards(&mut self, cfg: &PolicyConfig) {
        for f in &cfg.forwards {
            self.group(format!("forward {}->{}", f.from, f.to), false);
            let m = restrict(
                combine(
                    &zone_match(&cfg.zones[&f.from], true),
                    &zone_match(&cfg.zones[&f.to], false),
                ),
                f.family,
            );
            for m in m {
                let mut stmts = m.stmts;
                stmts.push(Stmt::Counter);
                stmts.push(Stmt::Verdict(Verdict::Accept));
                self.rule(FORWARD, stmts);
            }
        }
    }

    /// `mtu_fix`: the MSS of TCP SYNs (and SYN-ACKs) forwarded out of or into the zone is
    /// lowered to what the route allows. First in the forward chain: a SYN-ACK is already
    /// "established", so it would never reach a rule after the established accept.
    fn mtu_fixes(&mut self, cfg: &PolicyConfig) {
        for z in cfg.zones.values().filter(|z| z.mtu_fix) {
            self.group(format!("mtu-fix {}", z.name), false);
            for source in [false, true] {
                for m in zone_match(z, source) {
                    let mut stmts = m.stmts;
                    stmts.push(Stmt::Flags {
                        left: Expr::Payload(Field::TcpFlags),
                        bits: Value::TcpFlags(TCP_SYN),
                        negate: false,
                    });
                    stmts.push(Stmt::ClampMssToRoute);
                    self.rule(FORWARD, stmts);
                }
            }
        }
    }

    /// `log_drops`: traffic from the zone that reaches a dropping or rejecting default of the
    /// input or forward chain is counted and logged (rate-limited like rule logs) with a
    /// prefix naming the zone, e.g. `"drop wan forward: "`. Last before the default, so only
    /// what no rule decided on is logged.
    fn drop_logs(&mut self, cfg: &PolicyConfig) {
        for z in cfg.zones.values().filter(|z| z.log_drops) {
            self.group(format!("log-drops {}", z.name), false);
            for (chain, action) in [(INPUT, cfg.input), (FORWARD, cfg.forward)] {
                let verb = match action {
                    Action::Accept => continue,
                    Action::Drop => "drop",
                    Action::Reject => "reject",
                };
                for m in zone_match(z, true) {
                    // The counter sees every such packet, also those over the log rate: how
                    // much of the zone's traffic the default drops.
                    let mut stmts = m.stmts;
                    stmts.push(Stmt::Counter);
                    stmts.push(log_limit(None, Some(z)));
                    stmts.push(Stmt::Log {
                        prefix: format!("{verb} {} {chain}: ", z.name),
                    });
                    self.rule(chain, stmts);
                }
            }
        }
    }

    /// Defaults that a chain policy cannot express: `reject` as final rules.
    fn reject_defaults(&mut self, cfg: &PolicyConfig) {
        self.group = 0;
        for (chain, action) in [
            (INPUT, cfg.input),
            (FORWARD, cfg.forward),
            (OUTPUT, cfg.output),
        ] {
            if action == Action::Reject {
                self.rule(
                    chain,
                    vec![
                        Stmt::Cmp {
                            left: Expr::Meta(MetaKey::L4Proto),
                            op: CmpOp::Eq,
                            right: Value::Proto(6),
                        },
                        Stmt::Counter,
                        Stmt::Reject(Reject::TcpReset),
                    ],
                );
                self.rule(
                    chain,
                    vec![Stmt::Counter, Stmt::Reject(Reject::IcmpxPortUnreachable)],
                );
            }
        }
    }
}
