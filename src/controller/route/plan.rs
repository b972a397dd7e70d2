//! The route planner: desired routes and rules + what a dump found -> the writes that bring
//! the kernel in line. Pure (no I/O), so it is tested with exact expected output.
//!
//! Rules of the plan:
//! - A route is identified by family, table, prefix and metric ([`RouteKey`]); the metric is
//!   part of a route's identity in Linux, so a changed metric is an add of the new route and a
//!   delete of the old one, never a replace.
//! - Equal is equal: a desired route already installed with every attribute edgenetd sets
//!   ([`RouteSpec::is_satisfied_by`]) costs nothing, so a no-op resync of 100,000 routes sends
//!   zero writes.
//! - Order is stable and safe: route adds/replaces first (a new path exists before an old one
//!   goes), then rule adds (a rule never points at a table before its routes are there), then
//!   rule deletes, then route deletes; each group sorted by key.
//! - Only what was dumped (routes and rules with edgenetd's protocol) can ever be deleted.
//! - A trusted cache plans only what changed: [`changed_routes`] finds the desired routes that
//!   differ from the previous sync's by position, without building a spec or hashing a key
//!   per unchanged route, so a one-route change with 100,000 installed costs about one write.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, BuildHasherDefault};

use super::hash::{FastMap, FastSet, WordHasher};
use super::model::{route_key, route_spec};
use std::fmt;

use crate::config::route::{Route, Routes};
use crate::dataplane::route::{RouteKey, RouteSpec, RouteWrite, RuleSpec, RuleWrite};

/// One route write of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteChange<'a> {
    /// Install a route that is not there.
    Add(&'a RouteSpec),
    /// Replace an installed route (same key) whose attributes differ.
    Replace {
        /// What is installed now.
        from: &'a RouteSpec,
        /// What replaces it.
        to: &'a RouteSpec,
    },
    /// Remove an owned route that is not desired.
    Delete(&'a RouteSpec),
}

impl<'a> RouteChange<'a> {
    /// The kernel write that carries out this change.
    pub fn write(&self) -> RouteWrite<'a> {
        match *self {
            RouteChange::Add(r) => RouteWrite::Add(r),
            RouteChange::Replace { to, .. } => RouteWrite::Replace(to),
            RouteChange::Delete(r) => RouteWrite::Delete(r),
        }
    }

    /// The route the change is about (the new one for a replace).
    pub fn route(&self) -> &'a RouteSpec {
        match *self {
            RouteChange::Add(r) | RouteChange::Delete(r) => r,
            RouteChange::Replace { to, .. } => to,
        }
    }
}

impl fmt::Display for RouteChange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteChange::Add(r) => write!(f, "add route {r}"),
            RouteChange::Replace { from, to } => {
                write!(f, "replace route {to} (was: {from})")
            }
            RouteChange::Delete(r) => write!(f, "delete route {r}"),
        }
    }
}

/// One rule write of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleChange<'a> {
    /// Add a rule that is not there.
    Add(&'a RuleSpec),
    /// Remove an owned rule that is not desired.
    Delete(&'a RuleSpec),
}

impl<'a> RuleChange<'a> {
    /// The kernel write that carries out this change.
    pub fn write(&self) -> RuleWrite<'a> {
        match *self {
            RuleChange::Add(r) => RuleWrite::Add(r),
            RuleChange::Delete(r) => RuleWrite::Delete(r),
        }
    }
}

impl fmt::Display for RuleChange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleChange::Add(r) => write!(f, "add rule {r}"),
            RuleChange::Delete(r) => write!(f, "delete rule {r}"),
        }
    }
}

/// Every write a sync would make, grouped in the order they must be applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan<'a> {
    /// Route adds and replaces, by key.
    pub route_upserts: Vec<RouteChange<'a>>,
    /// Rule adds, by rule order.
    pub rule_adds: Vec<RuleChange<'a>>,
    /// Rule deletes, by rule order.
    pub rule_deletes: Vec<RuleChange<'a>>,
    /// Route deletes, by key.
    pub route_deletes: Vec<RouteChange<'a>>,
    /// Desired routes left out because an earlier desired route has their key (the first
    /// one wins); 0 when every desired key is unique.
    pub duplicate_routes: usize,
}

impl<'a> Plan<'a> {
    /// Plans routes and rules. `desired` rules must be normalized ([`RuleSpec::normalized`]),
    /// as dumped rules are.
    pub fn new(
        desired_routes: &'a [RouteSpec],
        installed_routes: &'a [RouteSpec],
        desired_rules: &'a [RuleSpec],
        installed_rules: &'a [RuleSpec],
    ) -> Plan<'a> {
        let routes = plan_routes(desired_routes, installed_routes);
        let (rule_adds, rule_deletes) = plan_rules(desired_rules, installed_rules);
        Plan {
            route_upserts: routes.upserts,
            rule_adds,
            rule_deletes,
            route_deletes: routes.deletes,
            duplicate_routes: routes.duplicates,
        }
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.route_upserts.len()
            + self.rule_adds.len()
            + self.rule_deletes.len()
            + self.route_deletes.len()
    }

    /// True when the kernel already matches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Route adds/replaces that are drift repairs: the route was installed by an earlier sync
    /// exactly as it is desired now (`previous` gives what that sync installed for a key), so
    /// the write is needed only because somebody removed or changed it. A route whose config
    /// changed is not drift.
    pub fn drift_repairs<'p>(
        &self,
        previous: impl Fn(&RouteKey) -> Option<&'p RouteSpec>,
    ) -> usize {
        self.route_upserts
            .iter()
            .filter(|c| previous(&c.route().key()) == Some(c.route()))
            .count()
    }

    /// One line per write, in apply order (what `edgenetd plan` prints).
    pub fn lines(&self) -> Vec<String> {
        let routes = self.route_upserts.iter().map(ToString::to_string);
        let rules = self
            .rule_adds
            .iter()
            .chain(&self.rule_deletes)
            .map(ToString::to_string);
        let deletes = self.route_deletes.iter().map(ToString::to_string);
        routes.chain(rules).chain(deletes).collect()
    }
}

/// The route writes of a plan.
#[derive(Debug, Default)]
pub struct RoutePlan<'a> {
    /// Adds and replaces, sorted by key.
    pub upserts: Vec<RouteChange<'a>>,
    /// Deletes, sorted by key.
    pub deletes: Vec<RouteChange<'a>>,
    /// Desired routes left out because an earlier one has their key.
    pub duplicates: usize,
}

/// Routes: adds and replaces, deletes, each sorted by key.
///
/// Linear in the number of routes with a fast hash; only the changes are sorted, so a no-op
/// plan of 100k routes is one map build and one pass.
pub fn plan_routes<'a>(desired: &'a [RouteSpec], installed: &'a [RouteSpec]) -> RoutePlan<'a> {
    // Each installed route, and whether a desired route claimed it.
    let mut by_key: FastMap<RouteKey, (&RouteSpec, bool)> =
        FastMap::with_capacity_and_hasher(installed.len(), Default::default());
    let mut deletes = Vec::new();
    for route in installed {
        // Two owned routes with one key (e.g. appended by hand): keep the first, drop the rest.
        match by_key.entry(route.key()) {
            Entry::Occupied(_) => deletes.push(RouteChange::Delete(route)),
            Entry::Vacant(slot) => {
                slot.insert((route, false));
            }
        }
    }
    let mut upserts = Vec::with_capacity(desired.len().saturating_sub(installed.len()));
    let mut duplicates = 0;
    let mut added: FastSet<RouteKey> = FastSet::with_capacity_and_hasher(
        desired.len().saturating_sub(installed.len()),
        Default::default(),
    );
    for route in desired {
        let key = route.key();
        match by_key.get_mut(&key) {
            // A second desired route with a key already planned: the first one wins.
            Some((_, true)) => duplicates += 1,
            Some((have, claimed)) => {
                *claimed = true;
                if !route.is_satisfied_by(have) {
                    upserts.push(RouteChange::Replace {
                        from: have,
                        to: route,
                    });
                }
            }
            None if added.insert(key) => upserts.push(RouteChange::Add(route)),
            None => duplicates += 1,
        }
    }
    deletes.extend(
        by_key
            .into_values()
            .filter(|(_, claimed)| !claimed)
            .map(|(route, _)| RouteChange::Delete(route)),
    );
    upserts.sort_by_key(|c| c.route().key());
    deletes.sort_by_key(|c| c.route().key());
    RoutePlan {
        upserts,
        deletes,
        duplicates,
    }
}

/// More changed positions than this are planned in full (then one pass over everything costs
/// about as much as the bookkeeping of the changes).
pub const INCREMENTAL_LIMIT: usize = 4096;

/// The desired routes that changed between two syncs, by position in the configured list.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Positions whose route differs, ascending (positions past the end of one list count).
    pub positions: Vec<usize>,
    /// The specs at those positions before (none for a position the list grew by).
    pub before: Vec<RouteSpec>,
    /// The specs at those positions now (none for a position the list shrank by).
    pub after: Vec<RouteSpec>,
}

/// What changed from `before` (the configured routes of a sync whose outcome is installed
/// exactly, every key unique) to `after`, when it can be planned on its own: then
/// `Plan::new(&changed.after, &changed.before, ..)` makes exactly the route writes a plan of
/// all of `after` against the kernel would. `None` when it cannot: more than
/// [`INCREMENTAL_LIMIT`] changes, two changed routes with one key, or a changed route taking
/// the key of an unchanged one (plan everything then).
///
/// Cost: the two lists' fingerprints compared (8 bytes a route, a block at a time; no route
/// is read), then a spec per changed position. When a key moved or the list grew, the hashed
/// keys of `before` are scanned too, and a key computed only of the changed routes (`before_keys` keeps the kernel key of each
/// route of `before`, hashed, from the first such sync on). A route whose fingerprint is the previous sync's at its position is taken as
/// unchanged ([`crate::config::route::fingerprint`]: 2^-64 of a miss, which the periodic full
/// resync repairs).
pub fn changed_routes(
    before: &Routes,
    before_keys: &mut Option<KeyPrints>,
    after: &Routes,
    protocol: u8,
) -> Option<Changed> {
    let common = before.len().min(after.len());
    let longest = before.len().max(after.len());
    if longest - common > INCREMENTAL_LIMIT {
        return None;
    }
    let mut positions: Vec<usize> = Vec::new();
    differing(
        &before.fingerprints()[..common],
        &after.fingerprints()[..common],
        &mut positions,
    )?;
    positions.extend(common..longest);
    let mut new_keys: FastSet<RouteKey> = FastSet::default();
    let mut moved = after.len() > before.len();
    for &i in &positions {
        if let Some(route) = after.get(i) {
            let key = route_key(route);
            if !new_keys.insert(key) {
                return None;
            }
            moved |= before.get(i).is_some_and(|b| route_key(b) != key);
        }
    }
    // A key that moved may now be an unchanged route's key: then that one is a duplicate.
    // The unchanged routes are the same in both lists: `before`'s keys are looked at.
    if moved {
        let prints = before_keys.get_or_insert_with(|| KeyPrints::of(before));
        if taken_by_unchanged(prints, before, &positions, &new_keys) {
            return None;
        }
    }
    let specs = |list: &[Route]| -> Vec<RouteSpec> {
        positions
            .iter()
            .filter_map(|&i| list.get(i).map(|r| route_spec(r, protocol)))
            .collect()
    };
    Some(Changed {
        before: specs(before.as_slice()),
        after: specs(after.as_slice()),
        positions,
    })
}

/// Fingerprints compared a block at a time: equal blocks (all but the changed ones) cost one
/// `memcmp` of 2 KiB.
const BLOCK: usize = 256;

/// Appends the positions where `before` and `after` (equally long) differ; `None` past
/// [`INCREMENTAL_LIMIT`] of them.
fn differing(before: &[u64], after: &[u64], positions: &mut Vec<usize>) -> Option<()> {
    let blocks = before.chunks(BLOCK).zip(after.chunks(BLOCK));
    for (block, (b, a)) in blocks.enumerate() {
        if b == a {
            continue;
        }
        for (i, (b, a)) in b.iter().zip(a).enumerate() {
            if b != a {
                if positions.len() == INCREMENTAL_LIMIT {
                    return None;
                }
                positions.push(block * BLOCK + i);
            }
        }
    }
    Some(())
}

/// The kernel key of each route of a list by position, hashed: what tells whether a key a
/// change moved is an unchanged route's, without computing 100,000 keys per sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPrints(Vec<u64>);

impl KeyPrints {
    /// The hashed keys of `routes`.
    pub fn of(routes: &[Route]) -> KeyPrints {
        KeyPrints(routes.iter().map(|r| key_print(&route_key(r))).collect())
    }

    /// Brings the prints to `now` given the positions that changed (ascending), as
    /// [`super::observe::Snapshot::update_routes`] brings the routes.
    pub fn update(&mut self, now: &[Route], positions: &[usize]) {
        self.0.truncate(now.len());
        for &i in positions {
            let Some(route) = now.get(i) else { continue };
            let print = key_print(&route_key(route));
            match self.0.get_mut(i) {
                Some(slot) => *slot = print,
                None => self.0.push(print),
            }
        }
    }
}

fn key_print(key: &RouteKey) -> u64 {
    BuildHasherDefault::<WordHasher>::default().hash_one(key)
}

/// True when a route of `routes` (whose hashed keys are `prints`) outside `positions`
/// (ascending) has a key in `keys`; a print that matches is checked against the key itself.
fn taken_by_unchanged(
    prints: &KeyPrints,
    routes: &[Route],
    positions: &[usize],
    keys: &FastSet<RouteKey>,
) -> bool {
    let wanted: Vec<u64> = keys.iter().map(key_print).collect();
    // A few keys are found faster in a list than in a set.
    let set: FastSet<u64> = match wanted.len() {
        0..=8 => FastSet::default(),
        _ => wanted.iter().copied().collect(),
    };
    let hit = |print: &u64| match wanted.len() {
        0..=8 => wanted.contains(print),
        _ => set.contains(print),
    };
    let mut changed = positions.iter().peekable();
    prints.0.iter().enumerate().any(|(i, print)| {
        if changed.peek() == Some(&&i) {
            changed.next();
            return false;
        }
        hit(print) && keys.contains(&route_key(&routes[i]))
    })
}

/// Rules: (adds, deletes), each sorted.
pub fn plan_rules<'a>(
    desired: &'a [RuleSpec],
    installed: &'a [RuleSpec],
) -> (Vec<RuleChange<'a>>, Vec<RuleChange<'a>>) {
    let mut have: HashMap<&RuleSpec, usize> = HashMap::new();
    for rule in installed {
        *have.entry(rule).or_default() += 1;
    }
    let mut wanted: Vec<&RuleSpec> = desired.iter().collect();
    wanted.sort();
    wanted.dedup();
    let mut adds = Vec::new();
    for rule in wanted {
        match have.get_mut(rule) {
            Some(n) if *n > 0 => *n -= 1,
            _ => adds.push(RuleChange::Add(rule)),
        }
    }
    let mut deletes: Vec<&RuleSpec> = Vec::new();
    for rule in installed {
        if let Some(n) = have.get_mut(rule)
            && *n > 0
        {
            *n -= 1;
            deletes.push(rule);
        }
    }
    deletes.sort();
    (adds, deletes.into_iter().map(RuleChange::Delete).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::route::{Family, NextHop, RouteType};

    fn route(dst: &str) -> RouteSpec {
        RouteSpec::new(dst.parse().unwrap(), 190)
    }

    fn via(dst: &str, gw: &str) -> RouteSpec {
        RouteSpec {
            via: Some(gw.parse().unwrap()),
            ..route(dst)
        }
    }

    fn lines(desired: &[RouteSpec], installed: &[RouteSpec]) -> Vec<String> {
        Plan::new(desired, installed, &[], &[]).lines()
    }

    #[test]
    fn cold_start_adds_everything_in_key_order() {
        let desired = [
            via("10.2.0.0/16", "192.0.2.1"),
            RouteSpec {
                kind: RouteType::Blackhole,
                ..route("2001:db8::/32")
            },
            via("10.1.0.0/16", "192.0.2.1"),
            RouteSpec {
                table: 100,
                ..via("0.0.0.0/0", "192.0.2.254")
            },
        ];
        assert_eq!(
            lines(&desired, &[]),
            [
                "add route 0.0.0.0/0 via 192.0.2.254 table 100 metric 0 proto 190",
                "add route 10.1.0.0/16 via 192.0.2.1 table main metric 0 proto 190",
                "add route 10.2.0.0/16 via 192.0.2.1 table main metric 0 proto 190",
                "add route blackhole 2001:db8::/32 table main metric 1024 proto 190",
            ]
        );
    }

    #[test]
    fn installed_equals_desired_is_a_no_op_even_with_kernel_chosen_devices() {
        let desired: Vec<RouteSpec> = (0..1000)
            .map(|i| via(&format!("10.{}.{}.0/24", i / 256, i % 256), "192.0.2.1"))
            .collect();
        let installed: Vec<RouteSpec> = desired
            .iter()
            .rev()
            .map(|r| RouteSpec {
                dev: Some("eth0".into()),
                ..r.clone()
            })
            .collect();
        assert!(Plan::new(&desired, &installed, &[], &[]).is_empty());
    }

    #[test]
    fn changed_attributes_replace_and_a_changed_metric_adds_then_deletes() {
        let installed = [
            via("10.1.0.0/16", "192.0.2.1"),
            RouteSpec {
                metric: 100,
                ..via("10.2.0.0/16", "192.0.2.1")
            },
            via("10.3.0.0/16", "192.0.2.1"),
        ];
        let desired = [
            via("10.1.0.0/16", "192.0.2.2"),
            RouteSpec {
                metric: 50,
                ..via("10.2.0.0/16", "192.0.2.1")
            },
        ];
        assert_eq!(
            lines(&desired, &installed),
            [
                "replace route 10.1.0.0/16 via 192.0.2.2 table main metric 0 proto 190 (was: 10.1.0.0/16 via 192.0.2.1 table main metric 0 proto 190)",
                "add route 10.2.0.0/16 via 192.0.2.1 table main metric 50 proto 190",
                "delete route 10.2.0.0/16 via 192.0.2.1 table main metric 100 proto 190",
                "delete route 10.3.0.0/16 via 192.0.2.1 table main metric 0 proto 190",
            ]
        );
    }

    #[test]
    fn multipath_weights_and_order_are_compared() {
        let hop = |gw: &str, weight| NextHop {
            via: Some(gw.parse().unwrap()),
            dev: None,
            weight,
            onlink: false,
        };
        let desired = [RouteSpec {
            nexthops: vec![hop("192.0.2.1", 1), hop("192.0.2.2", 2)],
            ..route("10.0.0.0/8")
        }];
        let same = [RouteSpec {
            nexthops: vec![
                NextHop {
                    dev: Some("eth0".into()),
                    ..hop("192.0.2.1", 1)
                },
                hop("192.0.2.2", 2),
            ],
            ..route("10.0.0.0/8")
        }];
        assert!(lines(&desired, &same).is_empty());
        let reweighted = [RouteSpec {
            nexthops: vec![hop("192.0.2.1", 1), hop("192.0.2.2", 3)],
            ..route("10.0.0.0/8")
        }];
        assert_eq!(lines(&desired, &reweighted).len(), 1);
        assert!(lines(&desired, &reweighted)[0].starts_with("replace route 10.0.0.0/8"));
    }

    #[test]
    fn duplicate_installed_keys_keep_one_and_delete_the_rest() {
        let installed = [
            via("10.1.0.0/16", "192.0.2.1"),
            via("10.1.0.0/16", "192.0.2.9"),
        ];
        let desired = [via("10.1.0.0/16", "192.0.2.1")];
        assert_eq!(
            lines(&desired, &installed),
            ["delete route 10.1.0.0/16 via 192.0.2.9 table main metric 0 proto 190"]
        );
    }

    #[test]
    fn drift_repairs_count_only_routes_installed_before_exactly_as_desired_now() {
        let before = [
            via("10.1.0.0/16", "192.0.2.1"),
            via("10.3.0.0/16", "192.0.2.1"),
        ];
        let desired = [
            via("10.1.0.0/16", "192.0.2.1"), // deleted by someone: drift
            via("10.2.0.0/16", "192.0.2.1"), // new in the config: not drift
            via("10.3.0.0/16", "192.0.2.9"), // changed in the config: not drift
        ];
        let plan = Plan::new(&desired, &[], &[], &[]);
        assert_eq!(plan.route_upserts.len(), 3);
        let previous = |k: &RouteKey| before.iter().find(|r| r.key() == *k);
        assert_eq!(plan.drift_repairs(previous), 1);
    }

    #[test]
    fn rules_add_before_deleting_and_equal_rules_are_left_alone() {
        let rule = |prio, table| RuleSpec::new(Family::Ipv4, prio, table, 190).normalized();
        let from = |prio, net: &str| {
            RuleSpec {
                from: Some(net.parse().unwrap()),
                ..rule(prio, 100)
            }
            .normalized()
        };
        let installed = [from(1000, "10.0.5.0/24"), rule(2000, 200), rule(2000, 200)];
        let desired = [from(1000, "10.0.5.0/24"), rule(1500, 150), rule(2000, 200)];
        let routes = [via("0.0.0.0/0", "192.0.2.1")];
        assert_eq!(
            Plan::new(&routes, &routes, &desired, &installed).lines(),
            [
                "add rule 1500: ipv4 from all lookup 150 proto 190",
                "delete rule 2000: ipv4 from all lookup 200 proto 190",
            ]
        );
    }

    #[test]
    fn apply_order_is_upserts_rule_adds_rule_deletes_route_deletes() {
        let old_rule = [RuleSpec::new(Family::Ipv4, 10, 7, 190)];
        let new_rule = [RuleSpec::new(Family::Ipv4, 10, 8, 190)];
        let old_route = [RouteSpec {
            table: 7,
            ..via("0.0.0.0/0", "192.0.2.1")
        }];
        let new_route = [RouteSpec {
            table: 8,
            ..via("0.0.0.0/0", "192.0.2.1")
        }];
        assert_eq!(
            Plan::new(&new_route, &old_route, &new_rule, &old_rule).lines(),
            [
                "add route 0.0.0.0/0 via 192.0.2.1 table 8 metric 0 proto 190",
                "add rule 10: ipv4 from all lookup 8 proto 190",
                "delete rule 10: ipv4 from all lookup 7 proto 190",
                "delete route 0.0.0.0/0 via 192.0.2.1 table 7 metric 0 proto 190",
            ]
        );
    }

    fn configured(to: &str, gw: &str) -> Route {
        Route {
            to: to.parse().unwrap(),
            via: Some(gw.parse().unwrap()),
            dev: None,
            metric: None,
            table: 254,
            kind: crate::config::route::RouteKind::Unicast,
            src: None,
            onlink: false,
            mtu: None,
            nexthops: Vec::new(),
        }
    }

    fn hundred() -> Vec<Route> {
        (0..100)
            .map(|i| configured(&format!("10.0.{i}.0/24"), "192.0.2.1"))
            .collect()
    }

    /// [`changed_routes`] of two plain lists (their fingerprints taken here).
    fn changed(before: &[Route], after: &[Route]) -> Option<Changed> {
        changed_routes(
            &before.to_vec().into(),
            &mut None,
            &after.to_vec().into(),
            190,
        )
    }

    /// The incremental plan's lines, checked against the plan of everything.
    fn incremental_lines(before: &[Route], after: &[Route]) -> Option<Vec<String>> {
        let changed = changed(before, after)?;
        let lines = Plan::new(&changed.after, &changed.before, &[], &[]).lines();
        let all_after = crate::controller::route::model::route_specs(after, 190);
        let all_before = crate::controller::route::model::route_specs(before, 190);
        assert_eq!(
            lines,
            Plan::new(&all_after, &all_before, &[], &[]).lines(),
            "the incremental plan is the full plan"
        );
        Some(lines)
    }

    #[test]
    fn unchanged_routes_are_not_planned_at_all() {
        let routes = hundred();
        let changed = changed(&routes, &routes).unwrap();
        assert_eq!(changed, Changed::default());
    }

    #[test]
    fn one_changed_gateway_is_one_replace() {
        let before = hundred();
        let mut after = before.clone();
        after[42].via = Some("192.0.2.9".parse().unwrap());
        assert_eq!(changed(&before, &after).unwrap().positions, [42]);
        assert_eq!(
            incremental_lines(&before, &after).unwrap(),
            [
                "replace route 10.0.42.0/24 via 192.0.2.9 table main metric 0 proto 190 (was: 10.0.42.0/24 via 192.0.2.1 table main metric 0 proto 190)"
            ]
        );
    }

    /// `/32 via+dev` routes as operators write them, 1,000 of them (four blocks of
    /// fingerprints).
    fn hosts() -> Vec<Route> {
        (0..1000u32)
            .map(|i| Route {
                dev: Some("eth0".into()),
                ..configured(
                    &format!("{}/32", std::net::Ipv4Addr::from(0x0a00_0000 + i)),
                    "192.0.2.1",
                )
            })
            .collect()
    }

    /// A change made to the route at a position.
    type Edit = (usize, fn(&mut Route));

    #[test]
    fn a_one_route_difference_plans_exactly_one_write() {
        let before = hosts();
        // Each attribute of a route, at the ends of the list and of a block of fingerprints.
        let edits: [Edit; 6] = [
            (0, |r| r.via = Some("192.0.2.9".parse().unwrap())),
            (255, |r| r.dev = Some("eth1".into())),
            (256, |r| r.mtu = Some(1400)),
            (511, |r| r.src = Some("192.0.2.1".parse().unwrap())),
            (700, |r| r.onlink = true),
            (999, |r| r.via = Some("192.0.2.8".parse().unwrap())),
        ];
        for (at, edit) in edits {
            let mut after = before.clone();
            edit(&mut after[at]);
            let changed = changed(&before, &after).unwrap();
            assert_eq!(changed.positions, [at]);
            let plan = Plan::new(&changed.after, &changed.before, &[], &[]);
            assert_eq!(plan.len(), 1, "{:?}", plan.lines());
            assert!(matches!(
                plan.route_upserts[..],
                [RouteChange::Replace { .. }]
            ));
            assert_eq!(incremental_lines(&before, &after).unwrap().len(), 1);
        }
    }

    #[test]
    fn an_appended_route_is_one_add_and_the_kept_key_prints_follow_the_list() {
        let before: Routes = hosts().into();
        let mut after = before.clone();
        after.push(configured("10.9.0.0/16", "192.0.2.1"));
        let mut prints = None;
        let changed = changed_routes(&before, &mut prints, &after, 190).unwrap();
        assert_eq!(changed.positions, [1000]);
        assert_eq!(
            Plan::new(&changed.after, &changed.before, &[], &[]).lines(),
            ["add route 10.9.0.0/16 via 192.0.2.1 table main metric 0 proto 190"]
        );
        let mut prints = prints.expect("a grown list needs the keys");
        prints.update(&after, &changed.positions);
        assert_eq!(prints, KeyPrints::of(&after));
        // The kept prints still find an appended route taking an unchanged route's key.
        let mut taken = after.clone();
        taken.push(Route {
            via: Some("192.0.2.7".parse().unwrap()),
            ..after[5].clone()
        });
        assert_eq!(changed_routes(&after, &mut Some(prints), &taken, 190), None);
    }

    #[test]
    fn a_changed_metric_adds_and_deletes_and_growing_or_shrinking_adds_or_deletes() {
        let before = hundred();
        let mut after = before.clone();
        after[3].metric = Some(10);
        after.push(configured("10.1.0.0/16", "192.0.2.1"));
        assert_eq!(
            incremental_lines(&before, &after).unwrap(),
            [
                "add route 10.0.3.0/24 via 192.0.2.1 table main metric 10 proto 190",
                "add route 10.1.0.0/16 via 192.0.2.1 table main metric 0 proto 190",
                "delete route 10.0.3.0/24 via 192.0.2.1 table main metric 0 proto 190",
            ]
        );
        let shrunk = &before[..98];
        assert_eq!(
            incremental_lines(&before, shrunk).unwrap(),
            [
                "delete route 10.0.98.0/24 via 192.0.2.1 table main metric 0 proto 190",
                "delete route 10.0.99.0/24 via 192.0.2.1 table main metric 0 proto 190",
            ]
        );
    }

    #[test]
    fn swapped_routes_are_planned_as_nothing_to_write() {
        let before = hundred();
        let mut after = before.clone();
        after.swap(10, 20);
        assert_eq!(
            incremental_lines(&before, &after).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_key_taken_from_an_unchanged_route_is_planned_in_full() {
        let before = hundred();
        let mut after = before.clone();
        after[5] = configured("10.0.6.0/24", "192.0.2.7");
        assert_eq!(changed(&before, &after), None);
        let mut grown = before.clone();
        grown.push(configured("10.0.1.0/24", "192.0.2.7"));
        assert_eq!(changed(&before, &grown), None);
        let mut twice = before.clone();
        twice[1] = configured("10.9.0.0/24", "192.0.2.7");
        twice[2] = configured("10.9.0.0/24", "192.0.2.8");
        assert_eq!(changed(&before, &twice), None);
    }

    #[test]
    fn too_many_changes_are_planned_in_full() {
        let before: Vec<Route> = (0..INCREMENTAL_LIMIT as u32 + 1)
            .map(|i| {
                let a = std::net::Ipv4Addr::from(0x0a00_0000 + i * 256);
                configured(&format!("{a}/24"), "192.0.2.1")
            })
            .collect();
        let after: Vec<Route> = before
            .iter()
            .map(|r| Route {
                via: Some("192.0.2.2".parse().unwrap()),
                ..r.clone()
            })
            .collect();
        assert_eq!(changed(&before, &after), None);
        assert!(changed(&before[1..], &after[1..]).is_some());
    }

    #[test]
    fn duplicate_desired_keys_are_counted() {
        let desired = [
            via("10.1.0.0/16", "192.0.2.1"),
            via("10.1.0.0/16", "192.0.2.2"),
        ];
        assert_eq!(Plan::new(&desired, &[], &[], &[]).duplicate_routes, 1);
        assert_eq!(
            Plan::new(&desired, &desired[..1], &[], &[]).duplicate_routes,
            1
        );
        assert_eq!(Plan::new(&desired[..1], &[], &[], &[]).duplicate_routes, 0);
    }

    #[test]
    fn bug_8a_an_installed_metric_1024_route_satisfies_a_desired_ipv6_metric_0() {
        let desired = [RouteSpec {
            metric: 0,
            ..route("2001:db8:5::/48")
        }];
        let installed = [route("2001:db8:5::/48")];
        assert_eq!(lines(&desired, &installed), Vec::<String>::new());
    }
}
