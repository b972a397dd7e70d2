//! Apply: the only part of the route controller that writes to the kernel. Writes a plan in
//! its order, pipelined, and maps every failure back to its route or rule (joined errors).

use std::fmt::Write as _;

use crate::dataplane::route::{
    Links, RouteKey, RouteSocket, RouteSpec, RouteWrite, RuleSpec, RuleWrite, WriteOutcome,
};
use crate::sync::{Progress, SyncError};

use super::hash::FastSet;
use super::plan::{Plan, RouteChange, RuleChange};

/// What applying a plan did.
#[derive(Default)]
pub struct Applied<'a> {
    /// Kernel writes that succeeded.
    pub written: usize,
    /// Routes added.
    pub added: usize,
    /// Routes replaced.
    pub replaced: usize,
    /// Routes deleted.
    pub deleted: usize,
    /// Rules added.
    pub rules_added: usize,
    /// Rules deleted.
    pub rules_deleted: usize,
    /// Every route or rule whose write failed.
    failed: Vec<Failed<'a>>,
    /// The failures, joined.
    pub errors: SyncError,
}

/// A route or rule whose write failed.
enum Failed<'a> {
    /// A route.
    Route(&'a RouteSpec),
    /// A rule.
    Rule(&'a RuleSpec),
}

impl<'a> Applied<'a> {
    /// Keys of the routes whose write failed.
    pub fn failed_routes(&self) -> FastSet<RouteKey> {
        self.failed
            .iter()
            .filter_map(|f| match f {
                Failed::Route(r) => Some(r.key()),
                Failed::Rule(_) => None,
            })
            .collect()
    }

    /// The rules whose write failed.
    pub fn failed_rules(&self) -> impl Iterator<Item = &'a RuleSpec> + '_ {
        self.failed.iter().filter_map(|f| match f {
            Failed::Rule(r) => Some(*r),
            Failed::Route(_) => None,
        })
    }

    /// The counts for a log line, e.g. "3 added, 0 replaced, 1 deleted; 0 rules added, 0
    /// deleted".
    pub fn counts(&self) -> String {
        let mut s = format!(
            "{} added, {} replaced, {} deleted; {} rules added, {} deleted",
            self.added, self.replaced, self.deleted, self.rules_added, self.rules_deleted
        );
        if !self.failed.is_empty() {
            let _ = write!(s, "; {} failed", self.failed.len());
        }
        s
    }

    fn record_routes(&mut self, changes: &[RouteChange<'a>], outcome: WriteOutcome) {
        let mut failed = outcome.failures.iter().map(|f| f.index).peekable();
        for (i, change) in changes.iter().enumerate() {
            if failed.peek() == Some(&i) {
                failed.next();
                continue;
            }
            self.written += 1;
            match change {
                RouteChange::Add(_) => self.added += 1,
                RouteChange::Replace { .. } => self.replaced += 1,
                RouteChange::Delete(_) => self.deleted += 1,
            }
        }
        for f in outcome.failures {
            let change = &changes[f.index];
            let verb = match change {
                RouteChange::Add(_) => "add",
                RouteChange::Replace { .. } => "replace",
                RouteChange::Delete(_) => "delete",
            };
            self.errors
                .push(format!("{verb} route {}", change.route()), f.error);
            self.failed.push(Failed::Route(change.route()));
        }
    }

    fn record_rules(&mut self, changes: &[RuleChange<'a>], outcome: WriteOutcome) {
        let ok = changes.len() - outcome.failures.len();
        self.written += ok;
        match changes.first() {
            Some(RuleChange::Add(_)) => self.rules_added += ok,
            Some(RuleChange::Delete(_)) => self.rules_deleted += ok,
            None => {}
        }
        for f in outcome.failures {
            let (verb, rule) = match changes[f.index] {
                RuleChange::Add(r) => ("add", r),
                RuleChange::Delete(r) => ("delete", r),
            };
            self.errors.push(format!("{verb} rule {rule}"), f.error);
            self.failed.push(Failed::Rule(rule));
        }
    }
}

/// Applies a plan in its order: route adds/replaces, rule adds, rule deletes, route deletes.
pub async fn apply<'a>(
    socket: &RouteSocket,
    plan: &Plan<'a>,
    links: &Links,
    progress: &dyn Progress,
) -> Applied<'a> {
    let mut applied = Applied::default();
    let mut last_beat = 0;
    let mut beat = |answered: usize| {
        if answered >= last_beat + 1000 {
            last_beat = answered;
            progress.beat();
        }
    };
    if !plan.route_upserts.is_empty() {
        let writes: Vec<RouteWrite<'_>> = plan.route_upserts.iter().map(|c| c.write()).collect();
        let outcome = socket.write_routes(&writes, links, &mut beat).await;
        applied.record_routes(&plan.route_upserts, outcome);
    }
    for changes in [&plan.rule_adds, &plan.rule_deletes] {
        if !changes.is_empty() {
            let writes: Vec<RuleWrite<'_>> = changes.iter().map(|c| c.write()).collect();
            let outcome = socket.write_rules(&writes).await;
            applied.record_rules(changes, outcome);
        }
    }
    if !plan.route_deletes.is_empty() {
        let writes: Vec<RouteWrite<'_>> = plan.route_deletes.iter().map(|c| c.write()).collect();
        let outcome = socket.write_routes(&writes, links, &mut |_| {}).await;
        applied.record_routes(&plan.route_deletes, outcome);
    }
    applied
}
