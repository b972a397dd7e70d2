//! Writing element changes: one batch for everything, and when the kernel refuses it, a
//! tagged retry that names the refused services so the rest can be committed without them
//! (joined errors: one broken service never keeps the others from working).

use std::collections::BTreeMap;

use crate::dataplane::nft::ir::Element;
use crate::dataplane::nft::{Batch, NftError, Op, TableRef};
use crate::sync::SyncError;

use super::super::layout::SetId;
use super::super::plan::ServiceChange;
use super::{Kernel, TAG_SHARED, nft_err};

/// Refused objects with the reason, and the generation after the last successful commit.
pub(in crate::controller::service) type WriteOutcome = (Vec<(String, String)>, Option<u32>);

impl Kernel {
    /// Writes the groups in one batch; when the kernel refuses it, finds the refused groups
    /// with a tagged retry and commits the others. Returns the refused objects with the
    /// reason, and the generation after the last successful commit.
    pub(in crate::controller::service) fn write(
        &mut self,
        groups: &[ServiceChange],
    ) -> Result<WriteOutcome, SyncError> {
        if groups
            .iter()
            .all(|g| g.deletes.is_empty() && g.adds.is_empty())
        {
            return Ok((Vec::new(), None));
        }
        let batch = self.grouped_batch(groups.iter())?;
        match self.commit(batch) {
            Ok(c) => return Ok((Vec::new(), Some(c.generation))),
            Err(NftError::Rejected(_)) => {}
            Err(e) => return Err(nft_err("service elements", e)),
        }
        // Tagged: each group's messages on their own.
        let mut batch = Batch::new();
        for (i, g) in groups.iter().enumerate() {
            batch.tag(i as u32);
            add_ops(&mut batch, &self.table, &g.deletes, &g.adds)
                .map_err(|e| nft_err(&g.name, e.into()))?;
        }
        let refused = match self.commit(batch) {
            Ok(c) => return Ok((Vec::new(), Some(c.generation))),
            Err(NftError::Rejected(f)) => f,
            Err(e) => return Err(nft_err("service elements", e)),
        };
        let mut bad: BTreeMap<usize, String> = BTreeMap::new();
        for f in &refused {
            if (f.tag as usize) < groups.len() {
                bad.entry(f.tag as usize).or_insert_with(|| f.to_string());
            }
        }
        if bad.is_empty() {
            // Refused without naming a group: nothing can be isolated.
            return Err(SyncError::whole(
                "service elements",
                NftError::Rejected(refused),
            ));
        }
        let failures: Vec<(String, String)> = bad
            .iter()
            .map(|(i, e)| {
                let g = &groups[*i];
                let what = match &g.key {
                    Some(k) => format!("service {} {k}", g.name),
                    None => g.name.clone(),
                };
                (what, e.clone())
            })
            .collect();
        let rest = groups
            .iter()
            .enumerate()
            .filter(|(i, _)| !bad.contains_key(i))
            .map(|(_, g)| g);
        let batch = self.grouped_batch(rest)?;
        match self.commit(batch) {
            Ok(c) => Ok((failures, Some(c.generation))),
            Err(e) => {
                let mut all = failures;
                all.push(("service elements".into(), e.to_string()));
                Ok((all, None))
            }
        }
    }

    pub(super) fn grouped_batch<'a>(
        &self,
        groups: impl Iterator<Item = &'a ServiceChange>,
    ) -> Result<Batch, SyncError> {
        let mut dels: Vec<Vec<Element>> = vec![Vec::new(); SetId::ALL.len()];
        let mut adds: Vec<Vec<Element>> = vec![Vec::new(); SetId::ALL.len()];
        for g in groups {
            for (s, e) in &g.deletes {
                dels[s.index()].push(e.clone());
            }
            for (s, e) in &g.adds {
                adds[s.index()].push(e.clone());
            }
        }
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        for (set, op, list) in SetId::ALL
            .iter()
            .map(|s| (s, Op::Delete, &dels[s.index()]))
            .chain(SetId::ALL.iter().map(|s| (s, Op::Add, &adds[s.index()])))
        {
            if !list.is_empty() {
                batch
                    .elements(&self.table, &definition(*set, op), list, op)
                    .map_err(|e| nft_err("compile elements", e.into()))?;
            }
        }
        Ok(batch)
    }
}

pub(super) fn add_ops(
    batch: &mut Batch,
    table: &TableRef,
    deletes: &[(SetId, Element)],
    adds: &[(SetId, Element)],
) -> Result<(), crate::dataplane::nft::CompileError> {
    for (list, op) in [(deletes, Op::Delete), (adds, Op::Add)] {
        for set in SetId::ALL {
            let els: Vec<Element> = list
                .iter()
                .filter(|(s, _)| *s == set)
                .map(|(_, e)| e.clone())
                .collect();
            if !els.is_empty() {
                batch.elements(table, &definition(set, op), &els, op)?;
            }
        }
    }
    Ok(())
}

/// The set's definition as an element message needs it: deletes carry keys only.
fn definition(set: SetId, op: Op) -> crate::dataplane::nft::ir::Set {
    let mut def = set.definition();
    if op == Op::Delete {
        def.data = None;
    }
    def
}
