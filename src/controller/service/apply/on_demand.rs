//! The chains that exist only while some service needs them (`layout::OnDemand`): the
//! dispatch chains of the slot classes in use and the recorder chains of sticky services
//! (with the base chains that reach those). Added in one batch before the elements that
//! point at them, deleted in one batch after the last such element is gone: the kernel
//! refuses an element whose verdict names a missing chain, and deleting a chain still
//! referenced.
//!
//! Such a change writes chains and rules only: no service's elements, and no other chain,
//! are touched.

use std::collections::BTreeSet;

use crate::dataplane::nft::ir::{Chain, Rule};
use crate::dataplane::nft::{Batch, Op};
use crate::sync::SyncError;

use super::super::layout::{self, Demand};
use super::{Kernel, TAG_SHARED, nft_err};

/// Chains and rules of `with` that `without` lacks.
fn extra(with: &Demand, without: &Demand) -> (Vec<Chain>, Vec<Rule>) {
    let (chains, rules) = layout::on_demand_objects(with);
    let (have, _) = layout::on_demand_objects(without);
    let have: BTreeSet<String> = have.into_iter().map(|c| c.name).collect();
    let chains: Vec<Chain> = chains
        .into_iter()
        .filter(|c| !have.contains(&c.name))
        .collect();
    let names: BTreeSet<&str> = chains.iter().map(|c| c.name.as_str()).collect();
    let rules = rules
        .into_iter()
        .filter(|r| names.contains(r.chain.as_str()))
        .collect();
    (chains, rules)
}

impl Kernel {
    /// Adds the chains on demand `want` has and the table lacks (one batch).
    pub(in crate::controller::service) fn add_on_demand(
        &mut self,
        want: &Demand,
    ) -> Result<(), SyncError> {
        let have = self.on_demand.clone().unwrap_or_default();
        let union: Demand = have.union(want).copied().collect();
        let (chains, rules) = extra(&union, &have);
        if chains.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        // Every chain before any rule: a sticky chain's rule jumps to a random one.
        for c in &chains {
            batch.chain(&self.table, c, Op::Add);
        }
        for r in &rules {
            batch
                .add_rule(&self.table, r)
                .map_err(|e| nft_err("compile chain on demand", e.into()))?;
        }
        self.commit_on_demand(batch, union)
    }

    /// Deletes the chains on demand the table has beyond `want` (one batch; call once no
    /// element points at them).
    pub(in crate::controller::service) fn drop_on_demand(
        &mut self,
        want: &Demand,
    ) -> Result<(), SyncError> {
        let have = self.on_demand.clone().unwrap_or_default();
        let (chains, _) = extra(&have, want);
        if chains.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        // Every flush before any delete: a random chain is still referenced by the sticky
        // chain of its class until that one's rules are gone.
        for c in &chains {
            batch.flush_chain(&self.table, &c.name);
        }
        for c in &chains {
            batch.chain(&self.table, c, Op::Delete);
        }
        let kept = have.intersection(want).copied().collect();
        self.commit_on_demand(batch, kept)
    }

    fn commit_on_demand(&mut self, batch: Batch, now: Demand) -> Result<(), SyncError> {
        let commit = self
            .commit(batch)
            .map_err(|e| nft_err("chains on demand", e))?;
        self.generation = Some(commit.generation);
        self.on_demand = Some(now);
        self.fingerprints = Some(
            self.fingerprints_now()
                .map_err(|e| nft_err("list rules", e))?,
        );
        Ok(())
    }
}
