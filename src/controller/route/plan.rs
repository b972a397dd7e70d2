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

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::hash::{FastMap, FastSet};
use std::fmt;

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
        let (route_upserts, route_deletes) = plan_routes(desired_routes, installed_routes);
        let (rule_adds, rule_deletes) = plan_rules(desired_rules, installed_rules);
        Plan {
            route_upserts,
            rule_adds,
            rule_deletes,
            route_deletes,
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

/// Routes: (adds and replaces, deletes), each sorted by key.
///
/// Linear in the number of routes with a fast hash; only the changes are sorted, so a no-op
/// plan of 100k routes is one map build and one pass.
pub fn plan_routes<'a>(
    desired: &'a [RouteSpec],
    installed: &'a [RouteSpec],
) -> (Vec<RouteChange<'a>>, Vec<RouteChange<'a>>) {
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
    let mut upserts = Vec::new();
    let mut added: FastSet<RouteKey> = FastSet::default();
    for route in desired {
        let key = route.key();
        match by_key.get_mut(&key) {
            // A second desired route with a key already planned: the first one wins.
            Some((_, true)) => {}
            Some((have, claimed)) => {
                *claimed = true;
                if !route.is_satisfied_by(have) {
                    upserts.push(RouteChange::Replace {
                        from: have,
                        to: route,
                    });
                }
            }
            None => {
                if added.insert(key) {
                    upserts.push(RouteChange::Add(route));
                }
            }
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
    (upserts, deletes)
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
}
