//! Apply: the only part of the policy controller that writes to the kernel (blocking; run it
//! in `smol::unblock`). Every commit's generation is recorded in the shared
//! [`GenerationWatch`](crate::dataplane::nft::GenerationWatch) (see
//! [`crate::controller::nft_core`]), so neither controller mistakes it for somebody else's.
//!
//! - A full write replaces the table in one atomic batch. If the kernel refuses it, the
//!   refused messages name their rule groups; the table is written again without them
//!   (fail closed, see [`super::program`]) until the kernel accepts, and the sync reports
//!   every refused group.
//! - When only named sets' elements changed, one batch adds and deletes just those elements.
//! - Elements other programs added to dynamic sets survive both (see `kept.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::controller::nft_core::NftSession;
use crate::dataplane::nft::ir::Table;
use crate::dataplane::nft::{Batch, Nft, NftError, Op, TAG_BATCH, TableRef};
use crate::sync::SyncError;

use super::adopt::tag;
use super::kept::{self, Kept};
use super::observe::{Applied, take_baseline};
use super::plan::element_deltas;
use super::program::Program;

/// How often a full write reads the dynamic sets again when commits by others keep racing
/// it, before it gives up for this sync.
const MAX_RESTARTS: u32 = 5;

/// Deletes the table if it exists; returns the number of kernel writes.
pub fn delete_table(nft: &mut NftSession, t: &TableRef) -> Result<u64, NftError> {
    if !nft.socket().table_exists(t)? {
        return Ok(0);
    }
    let mut batch = Batch::new();
    batch.table(t, Op::Add);
    batch.table(t, Op::Delete);
    nft.commit(batch)?;
    Ok(1)
}

/// Adds and deletes the elements that differ between the installed and the desired program
/// (same structure); returns the kernel writes and a summary.
pub fn element_delta(
    nft: &mut NftSession,
    a: &mut Applied,
    desired: &Arc<Program>,
) -> Result<(u64, String), NftError> {
    let t = TableRef::from(&desired.table);
    let mut batch = Batch::new();
    let (mut added, mut deleted) = (0usize, 0usize);
    for delta in element_deltas(&a.program, desired) {
        let set = &desired.table.sets[delta.set];
        if !delta.deletes.is_empty() {
            batch.elements(&t, set, &delta.deletes, Op::Delete)?;
        }
        if !delta.adds.is_empty() {
            batch.elements(&t, set, &delta.adds, Op::Add)?;
        }
        added += delta.adds.len();
        deleted += delta.deletes.len();
    }
    let done = nft.commit(batch)?;
    a.program = desired.clone();
    a.generation = done.generation;
    a.want_elements = None;
    Ok((
        done.messages as u64,
        format!("set elements: {added} added, {deleted} deleted"),
    ))
}

/// Writes the whole table, leaving out groups the kernel refuses. Returns the new state, the
/// number of kernel writes and the refused groups (as a not-yet-final SyncError).
pub fn full_write(
    nft: &mut NftSession,
    t: &TableRef,
    desired: &Arc<Program>,
) -> Result<(Applied, u64, SyncError), SyncError> {
    let mut failed: BTreeSet<u32> = BTreeSet::new();
    let mut failures = SyncError::default();
    let read_kept = |nft: &mut Nft| {
        kept::read(nft, t, desired).map_err(|e| SyncError::whole("nftables listing", e))
    };
    let mut kept = read_kept(nft.socket())?;
    let mut restarts = 0;
    loop {
        let Some(batch) = table_batch(desired, &kept, &mut failed, &mut failures)? else {
            continue;
        };
        match nft.commit(batch) {
            // Somebody committed after the dynamic sets were read: read them again.
            Err(e) if e.is_restart() && restarts < MAX_RESTARTS => {
                restarts += 1;
                kept = read_kept(nft.socket())?;
            }
            Ok(done) => {
                let applied = after_full_write(nft.socket(), t, desired, failed, done.generation);
                return Ok((applied, done.messages as u64, failures));
            }
            Err(NftError::Rejected(refused)) => {
                // A refused include makes the kernel refuse rules of other groups too (its
                // table does not validate as a whole): leave the includes out first, and
                // only then judge what is still refused.
                let includes = desired
                    .groups
                    .iter()
                    .position(|g| g.label == super::includes::GROUP)
                    .map(|g| g as u32);
                if let Some(g) = includes
                    && let Some(f) = refused.iter().find(|f| f.tag == g)
                    && failed.insert(g)
                {
                    failures.push(
                        format!("policy {}", group_label(desired, g)),
                        format!("refused by the kernel: {f}"),
                    );
                    continue;
                }
                let mut progress = false;
                for f in &refused {
                    if f.tag == 0 || f.tag == TAG_BATCH {
                        return Err(whole_table(t, NftError::Rejected(refused.clone())));
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
                    return Err(whole_table(t, NftError::Rejected(refused)));
                }
            }
            Err(e) => return Err(SyncError::whole("nftables", e)),
        }
    }
}

fn whole_table(t: &TableRef, e: NftError) -> SyncError {
    SyncError::whole(format!("table {}", t.name), e)
}

/// The batch that replaces the table without the `failed` groups; `None` when a group could
/// not even be encoded (it is added to `failed`: build again).
fn table_batch(
    desired: &Program,
    kept: &Kept,
    failed: &mut BTreeSet<u32>,
    failures: &mut SyncError,
) -> Result<Option<Batch>, SyncError> {
    let (table, rule_groups, set_groups) = desired.without(failed);
    let mut batch = kept
        .generation
        .map_or_else(Batch::new, Batch::at_generation);
    batch.tag(0);
    let tref = TableRef::from(&table);
    batch.table(&tref, Op::Add);
    batch.table(&tref, Op::Delete);
    batch.table_tagged(&tref, &tag(desired, failed));
    for chain in &table.chains {
        batch.chain(&tref, chain, Op::Add);
    }
    let unbuildable = add_objects(
        &mut batch,
        &tref,
        (desired, &table, kept),
        (&rule_groups, &set_groups),
        |g, e| {
            failures.push(format!("policy {}", group_label(desired, g)), e);
            failed.insert(g);
        },
    );
    if unbuildable && failed.contains(&0) {
        return Err(std::mem::take(failures));
    }
    Ok((!unbuildable).then_some(batch))
}

/// Adds the table's sets (with the elements others added to its dynamic sets, `kept`), ct
/// helpers, flowtables and rules, each after its group's tag; `on_error` gets each group that
/// cannot be encoded. True when one could not.
fn add_objects(
    batch: &mut Batch,
    tref: &TableRef,
    (desired, table, kept): (&Program, &Table, &Kept),
    (rule_groups, set_groups): (&[u32], &[u32]),
    mut on_error: impl FnMut(u32, crate::dataplane::nft::CompileError),
) -> bool {
    let mut unbuildable = false;
    for (set, g) in table.sets.iter().zip(set_groups) {
        batch.tag(*g);
        let mut r = batch.add_set(tref, set);
        if let (Ok(()), Some(k)) = (&r, kept.elements.get(&set.name)) {
            r = batch.add_kept_elements(tref, set, k);
        }
        if let Err(e) = r {
            on_error(*g, e);
            unbuildable = true;
        }
    }
    for h in &table.ct_helpers {
        let g = desired.helper_group(&h.name);
        batch.tag(g);
        if let Err(e) = batch.add_ct_helper(tref, h) {
            on_error(g, e);
            unbuildable = true;
        }
    }
    // The zones' log limits belong to the skeleton: every log of a zone refers to its one.
    for l in &table.limits {
        batch.tag(0);
        if let Err(e) = batch.add_limit(tref, l) {
            on_error(0, e);
            unbuildable = true;
        }
    }
    // A kernel without flowtables refuses the flowtable (and the rule that offloads to
    // it): their group is left out and the write retried, like any refused group.
    for ft in &table.flowtables {
        let g = desired.flowtable_group(&ft.name);
        batch.tag(g);
        if let Err(e) = batch.add_flowtable(tref, ft) {
            on_error(g, e);
            unbuildable = true;
        }
    }
    for (rule, g) in table.rules.iter().zip(rule_groups) {
        batch.tag(*g);
        if let Err(e) = batch.add_rule(tref, rule) {
            on_error(*g, e);
            unbuildable = true;
        }
    }
    unbuildable
}

/// The snapshot after a full write: the listing taken right after it is the baseline of later
/// drift checks (unless somebody committed in between, then it is not trusted).
fn after_full_write(
    nft: &mut Nft,
    t: &TableRef,
    desired: &Arc<Program>,
    failed: BTreeSet<u32>,
    generation: u32,
) -> Applied {
    let baseline = take_baseline(nft, t).ok();
    let generation_now = nft.generation().ok();
    Applied {
        program: desired.clone(),
        failed,
        generation,
        baseline: baseline.filter(|_| generation_now == Some(generation)),
        want_elements: None,
        elements_checked_at: None,
        check_pending: false,
    }
}

fn group_label(p: &Program, g: u32) -> String {
    p.groups
        .get(g as usize)
        .map(|g| g.label.clone())
        .unwrap_or_else(|| format!("group {g}"))
}
