//! Apply, the kernel half of the policy controller (blocking; run it in `smol::unblock`).
//!
//! - A full write replaces the table in one atomic batch. If the kernel refuses it, the
//!   refused messages name their rule groups; the table is written again without them
//!   (fail closed, see [`super::program`]) until the kernel accepts, and the sync reports
//!   every refused group.
//! - When only named sets' elements changed, one batch adds and deletes just those elements.
//! - Nothing changed and the ruleset generation is the one of our last commit: no write.
//! - The generation moved: someone committed something. The table is listed and compared
//!   with the listing taken right after our last full write (rules with fingerprints, chains,
//!   sets) and with the desired set elements; any difference is drift, repaired by a full
//!   write and counted.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dataplane::nft::ir::Element;

use crate::controller::{SyncError, SyncReport};
use crate::dataplane::nft::{
    Batch, ChainInfo, ElemInfo, Nft, NftError, Op, RuleInfo, SetInfo, TAG_BATCH, TableRef, monitor,
    raw_elements,
};

use super::program::Program;

/// What the kernel held right after a full write (minus counters), to spot edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    chains: Vec<ChainInfo>,
    rules: Vec<RuleInfo>,
    sets: Vec<SetInfo>,
}

/// What the last successful sync left in the kernel.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The program that was asked for.
    pub program: Arc<Program>,
    /// Groups the kernel refused (left out).
    pub failed: BTreeSet<u32>,
    /// Ruleset generation after our last commit.
    pub generation: u32,
    /// Listing after the last full write (`None` if someone raced us while taking it).
    pub baseline: Option<Baseline>,
    /// Kernel form of each named set's elements, computed at the first drift check.
    pub want_elements: Option<Vec<Vec<ElemInfo>>>,
    /// When the elements were last compared with the kernel.
    pub elements_checked_at: Option<Instant>,
    /// A foreign commit happened whose element check was deferred.
    pub check_pending: bool,
}

/// Set elements are listed and compared at most this often after foreign commits (a listing
/// of 100,000 elements costs ~0.3 s); rules, chains and sets are compared every time. A
/// deferred element check runs at the next sync after the interval (the loop's period at the
/// latest).
pub const ELEMENT_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// What a drift check found.
#[derive(Debug, PartialEq, Eq)]
enum Check {
    Clean,
    Drifted,
    /// Rules, chains and sets are as written; the element comparison was deferred.
    Deferred,
}

fn take_baseline(nft: &mut Nft, t: &TableRef) -> Result<Baseline, NftError> {
    Ok(Baseline {
        chains: nft.list_chains(t)?,
        rules: nft.list_rules(t)?,
        sets: nft.list_sets(t)?,
    })
}

fn whole(what: &str, e: impl std::fmt::Display) -> SyncError {
    SyncError::whole(what, e)
}

/// Deletes the table if it exists; returns the number of kernel writes.
pub fn delete_table(nft: &mut Nft, t: &TableRef) -> Result<u64, NftError> {
    if !nft.table_exists(t)? {
        return Ok(0);
    }
    let mut batch = Batch::new();
    batch.table(t, Op::Add);
    batch.table(t, Op::Delete);
    nft.execute(batch)?;
    Ok(1)
}

/// Compares the kernel's table with what we last wrote.
fn check_drift(nft: &mut Nft, applied: &mut Applied) -> Result<Check, NftError> {
    let t = TableRef::from(&applied.program.table);
    let Some(baseline) = &applied.baseline else {
        return Ok(Check::Drifted);
    };
    if take_baseline(nft, &t)? != *baseline {
        return Ok(Check::Drifted);
    }
    if applied
        .elements_checked_at
        .is_some_and(|at| at.elapsed() < ELEMENT_CHECK_INTERVAL)
    {
        return Ok(Check::Deferred);
    }
    applied.elements_checked_at = Some(Instant::now());
    if applied.want_elements.is_none() {
        let mut all = Vec::with_capacity(applied.program.table.sets.len());
        for set in &applied.program.table.sets {
            all.push(raw_elements(set, &set.elements)?);
        }
        applied.want_elements = Some(all);
    }
    let want = applied.want_elements.as_ref().expect("computed above");
    let sets = applied
        .program
        .table
        .sets
        .iter()
        .zip(&applied.program.set_groups);
    for ((set, g), want) in sets.zip(want) {
        if applied.failed.contains(g) {
            continue;
        }
        if nft.list_elements(&t, &set.name)? != *want {
            return Ok(Check::Drifted);
        }
    }
    Ok(Check::Clean)
}

/// One sync: brings the table in line with `desired` (`None` = no table).
pub fn sync(
    nft: &mut Nft,
    applied: &mut Option<Applied>,
    table: &TableRef,
    desired: Option<Arc<Program>>,
) -> Result<SyncReport, SyncError> {
    // A renamed table (new prefix): the old one goes.
    if let Some(a) = applied.as_ref()
        && a.program.table.name != table.name
    {
        let old = TableRef::from(&a.program.table);
        delete_table(nft, &old).map_err(|e| whole(&format!("table {}", old.name), e))?;
        *applied = None;
    }
    let Some(desired) = desired else {
        let n = delete_table(nft, table).map_err(|e| whole(&format!("table {}", table.name), e))?;
        *applied = None;
        return Ok(SyncReport {
            changes: n,
            drift_repairs: 0,
            summary: if n > 0 {
                "no [policy]: table deleted".into()
            } else {
                "no [policy]: no table".into()
            },
        });
    };
    let generation = nft.generation().map_err(|e| whole("nftables", e))?;
    let mut drift = 0;
    if let Some(a) = applied.as_mut()
        && a.failed.is_empty()
    {
        // Only another process's commit can have changed our table: this process's other
        // commits (e.g. the service controller's) never touch it.
        if a.generation != generation && !monitor::foreign_between(a.generation, generation) {
            a.generation = generation;
        }
        if a.generation != generation || a.check_pending {
            match check_drift(nft, a).map_err(|e| whole("nftables listing", e))? {
                Check::Drifted => drift = 1,
                Check::Clean => a.check_pending = false,
                Check::Deferred => a.check_pending = true,
            }
            if drift == 0 {
                a.generation = generation;
            }
        }
        if drift == 0 {
            if Arc::ptr_eq(&a.program, &desired) || *a.program == *desired {
                return Ok(SyncReport {
                    changes: 0,
                    drift_repairs: 0,
                    summary: if a.check_pending {
                        "no change (set element check deferred)".into()
                    } else {
                        "no change".into()
                    },
                });
            }
            if a.program.same_structure(&desired) {
                match element_delta(nft, a, &desired) {
                    Ok((n, summary)) => {
                        return Ok(SyncReport {
                            changes: n,
                            drift_repairs: 0,
                            summary,
                        });
                    }
                    // The kernel disagreed with our mirror: rewrite everything.
                    Err(NftError::Rejected(_)) => drift = 1,
                    Err(e) => return Err(whole("nftables", e)),
                }
            }
        }
    }
    let result = full_write(nft, table, &desired);
    match result {
        Ok((new, changes, failures)) => {
            let summary = format!(
                "table written: {} rules, {} sets{}{}",
                desired.rule_count(),
                desired.table.sets.len(),
                if new.failed.is_empty() {
                    String::new()
                } else {
                    format!(", {} groups refused (fail closed)", new.failed.len())
                },
                if drift > 0 { ", drift repaired" } else { "" }
            );
            *applied = Some(new);
            let report = SyncReport {
                changes,
                drift_repairs: drift,
                summary,
            };
            failures.into_result(report)
        }
        Err(e) => {
            *applied = None;
            Err(e)
        }
    }
}

fn element_delta(
    nft: &mut Nft,
    a: &mut Applied,
    desired: &Arc<Program>,
) -> Result<(u64, String), NftError> {
    let t = TableRef::from(&desired.table);
    let mut batch = Batch::new();
    let (mut added, mut deleted) = (0usize, 0usize);
    for (old, new) in a.program.table.sets.iter().zip(&desired.table.sets) {
        if old.elements == new.elements {
            continue;
        }
        let (del, add) = sorted_difference(&old.elements, &new.elements);
        if !del.is_empty() {
            batch.elements(&t, new, &del, Op::Delete)?;
        }
        if !add.is_empty() {
            batch.elements(&t, new, &add, Op::Add)?;
        }
        added += add.len();
        deleted += del.len();
    }
    let commit = nft.execute(batch)?;
    a.program = desired.clone();
    a.generation = commit.generation;
    a.want_elements = None;
    Ok((
        commit.messages as u64,
        format!("set elements: {added} added, {deleted} deleted"),
    ))
}

/// Writes the whole table, leaving out groups the kernel refuses. Returns the new state, the
/// number of kernel writes and the refused groups (as a not-yet-final SyncError).
fn full_write(
    nft: &mut Nft,
    t: &TableRef,
    desired: &Arc<Program>,
) -> Result<(Applied, u64, SyncError), SyncError> {
    let mut failed: BTreeSet<u32> = BTreeSet::new();
    let mut failures = SyncError::default();
    loop {
        let (table, rule_groups, set_groups) = desired.without(&failed);
        let mut batch = Batch::new();
        batch.tag(0);
        let tref = TableRef::from(&table);
        batch.table(&tref, Op::Add);
        batch.table(&tref, Op::Delete);
        batch.table(&tref, Op::Add);
        for chain in &table.chains {
            batch.chain(&tref, chain, Op::Add);
        }
        let mut unbuildable = false;
        for (set, g) in table.sets.iter().zip(&set_groups) {
            batch.tag(*g);
            if let Err(e) = batch.add_set(&tref, set) {
                failures.push(format!("policy {}", group_label(desired, *g)), e);
                failed.insert(*g);
                unbuildable = true;
            }
        }
        for (rule, g) in table.rules.iter().zip(&rule_groups) {
            batch.tag(*g);
            if let Err(e) = batch.add_rule(&tref, rule) {
                failures.push(format!("policy {}", group_label(desired, *g)), e);
                failed.insert(*g);
                unbuildable = true;
            }
        }
        if unbuildable {
            if failed.contains(&0) {
                return Err(failures);
            }
            continue;
        }
        match nft.execute(batch) {
            Ok(commit) => {
                let baseline = take_baseline(nft, t).ok();
                let gen_now = nft.generation().ok();
                let baseline = baseline.filter(|_| gen_now == Some(commit.generation));
                let applied = Applied {
                    program: desired.clone(),
                    failed,
                    generation: commit.generation,
                    baseline,
                    want_elements: None,
                    elements_checked_at: None,
                    check_pending: false,
                };
                return Ok((applied, commit.messages as u64, failures));
            }
            Err(NftError::Rejected(refused)) => {
                let mut progress = false;
                for f in &refused {
                    if f.tag == 0 || f.tag == TAG_BATCH {
                        return Err(whole(
                            &format!("table {}", t.name),
                            NftError::Rejected(refused.clone()),
                        ));
                    }
                    if failed.insert(f.tag) {
                        progress = true;
                        failures.push(
                            format!("policy {}", group_label(desired, f.tag)),
                            format!("refused by the kernel: {f}"),
                        );
                    }
                }
                if !progress {
                    return Err(whole(
                        &format!("table {}", t.name),
                        NftError::Rejected(refused),
                    ));
                }
            }
            Err(e) => return Err(whole("nftables", e)),
        }
    }
}

/// Elements only in `old` and only in `new`, in one merge pass over sorted copies (planned
/// sets are already sorted, so no copy is sorted in practice).
fn sorted_difference(old: &[Element], new: &[Element]) -> (Vec<Element>, Vec<Element>) {
    fn sorted(v: &[Element]) -> std::borrow::Cow<'_, [Element]> {
        if v.is_sorted() {
            std::borrow::Cow::Borrowed(v)
        } else {
            let mut c = v.to_vec();
            c.sort();
            std::borrow::Cow::Owned(c)
        }
    }
    let (old, new) = (sorted(old), sorted(new));
    let (mut i, mut j) = (0, 0);
    let (mut del, mut add) = (Vec::new(), Vec::new());
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                del.push(a.clone());
                i += 1;
            }
            (Some(_), Some(b)) => {
                add.push(b.clone());
                j += 1;
            }
            (Some(a), None) => {
                del.push(a.clone());
                i += 1;
            }
            (None, Some(b)) => {
                add.push(b.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    (del, add)
}

fn group_label(p: &Program, g: u32) -> String {
    p.groups
        .get(g as usize)
        .map(|g| g.label.clone())
        .unwrap_or_else(|| format!("group {g}"))
}
