//! Observe: what the policy controller believes is in the kernel (the cache's snapshot,
//! [`Applied`]) and the drift check that compares it with the kernel's listing.
//!
//! The check lists the table (rules with fingerprints, chains, sets, ct helper objects,
//! flowtables) and compares it with the listing taken right after our last full write, and
//! compares each named set's elements with the desired ones; any difference is drift, except
//! elements other programs added to a dynamic set (only the config's elements missing from
//! one is).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dataplane::nft::{
    ChainInfo, ElemInfo, FlowtableInfo, Nft, NftError, ObjectInfo, RuleInfo, SetInfo, TableRef,
    raw_elements,
};

use super::program::{Program, keeps_foreign_elements};

/// What the kernel held right after a full write (minus counters), to spot edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// Chains as listed.
    pub chains: Vec<ChainInfo>,
    /// Rules as listed, with fingerprints.
    pub rules: Vec<RuleInfo>,
    /// Sets as listed (definitions, not elements).
    pub sets: Vec<SetInfo>,
    /// Stateful objects (ct helpers) as listed.
    pub objects: Vec<ObjectInfo>,
    /// Flowtables as listed.
    pub flowtables: Vec<FlowtableInfo>,
}

/// What the last successful sync left in the kernel.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The program that was asked for.
    pub program: Arc<Program>,
    /// Groups the kernel refused (left out).
    pub failed: BTreeSet<u32>,
    /// Ruleset generation after our last commit (or our last check).
    pub generation: u32,
    /// Listing after the last full write (`None` if someone raced us while taking it).
    pub baseline: Option<Baseline>,
    /// Kernel form of each named set's elements, computed at the first drift check.
    pub want_elements: Option<Vec<Vec<ElemInfo>>>,
    /// When the elements were last compared with the kernel.
    pub elements_checked_at: Option<Instant>,
    /// A drift check whose element comparison was deferred is still owed.
    pub check_pending: bool,
}

/// Set elements are listed and compared at most this often (a listing of 100,000 elements
/// costs ~0.3 s); rules, chains and sets are compared every time. A deferred element check
/// runs at the next sync after the interval (the loop's period at the latest).
pub const ELEMENT_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// What a drift check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The kernel holds what we wrote.
    Clean,
    /// Something differs: a full write repairs it.
    Drifted,
    /// Rules, chains and sets are as written; the element comparison was deferred.
    Deferred,
}

/// Lists the table's chains, rules and sets.
pub fn take_baseline(nft: &mut Nft, t: &TableRef) -> Result<Baseline, NftError> {
    Ok(Baseline {
        chains: nft.list_chains(t)?,
        rules: nft.list_rules(t)?,
        sets: nft.list_sets(t)?,
        objects: nft.list_objects(t)?,
        flowtables: nft.list_flowtables(t)?,
    })
}

/// Compares the kernel's table with what we last wrote.
pub fn check_drift(nft: &mut Nft, applied: &mut Applied) -> Result<Check, NftError> {
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
    if elements_drifted(nft, applied, &t)? {
        return Ok(Check::Drifted);
    }
    Ok(Check::Clean)
}

/// True when a named set (of a group the kernel accepted) holds other elements than desired.
fn elements_drifted(nft: &mut Nft, applied: &mut Applied, t: &TableRef) -> Result<bool, NftError> {
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
        let have = nft.list_elements(t, &set.name)?;
        let drifted = if keeps_foreign_elements(set) {
            // Others' elements are no drift; the config's missing ones are.
            !is_sorted_subset(want, &have)
        } else {
            have != *want
        };
        if drifted {
            return Ok(true);
        }
    }
    Ok(false)
}

/// True when every element of `small` is in `big` (both sorted).
fn is_sorted_subset(small: &[ElemInfo], big: &[ElemInfo]) -> bool {
    let mut big = big.iter();
    small.iter().all(|s| big.any(|b| b == s))
}
