//! The parts of the table that follow the sticky services: one recorder chain per distinct
//! (timeout, family) and the base chains that reach them (added before the elements that
//! point at them, deleted after), and forgetting remembered clients whose backend is gone.
//!
//! A recorder change writes chains and rules only: no service's elements, and no remembered
//! client of another timeout, are touched.

use std::collections::BTreeSet;

use crate::config::service::Protocol;
use crate::dataplane::nft::ir::{Chain, Element, Rule};
use crate::dataplane::nft::{Batch, NftError, Op};
use crate::sync::SyncError;

use super::super::layout::{self, Remembered};
use super::super::model::{Model, VipKey};
use super::super::observe::Recorders;
use super::{Kernel, TAG_SHARED, nft_err};

/// Attempts at forgetting stale clients: an element may expire between the dump and the
/// delete, which fails the whole delete batch.
const SWEEP_ATTEMPTS: usize = 3;

/// Chains and rules of `with` that `without` lacks.
fn extra(with: &Recorders, without: &Recorders) -> (Vec<Chain>, Vec<Rule>) {
    let (chains, rules) = layout::recorder_objects(with);
    let (have, _) = layout::recorder_objects(without);
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

/// True when `r` names a live backend of its service, which is still sticky.
fn still_valid(desired: &Model, r: &Remembered) -> bool {
    let Some(proto) = Protocol::from_number(r.proto) else {
        return false;
    };
    let key = VipKey {
        addr: r.vip,
        proto,
        port: r.port,
    };
    desired.get(&key).is_some_and(|e| {
        e.sticky_timeout().is_some() && e.backends().binary_search(&r.backend).is_ok()
    })
}

impl Kernel {
    /// Adds the recorder chains `want` has and the table lacks (one batch).
    pub(in crate::controller::service) fn add_recorders(
        &mut self,
        want: &Recorders,
    ) -> Result<(), SyncError> {
        let have = self.recorders.clone().unwrap_or_default();
        let union: Recorders = have.union(want).copied().collect();
        let (chains, rules) = extra(&union, &have);
        if chains.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        for c in &chains {
            batch.chain(&self.table, c, Op::Add);
        }
        for r in &rules {
            batch
                .add_rule(&self.table, r)
                .map_err(|e| nft_err("compile recorder", e.into()))?;
        }
        self.commit_recorders(batch, union)
    }

    /// Deletes the recorder chains the table has beyond `want` (one batch; call once no
    /// element points at them).
    pub(in crate::controller::service) fn drop_recorders(
        &mut self,
        want: &Recorders,
    ) -> Result<(), SyncError> {
        let have = self.recorders.clone().unwrap_or_default();
        let (chains, _) = extra(&have, want);
        if chains.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        for c in &chains {
            batch.flush_chain(&self.table, &c.name);
            batch.chain(&self.table, c, Op::Delete);
        }
        let kept = have.intersection(want).copied().collect();
        self.commit_recorders(batch, kept)
    }

    fn commit_recorders(&mut self, batch: Batch, now: Recorders) -> Result<(), SyncError> {
        let commit = self
            .commit(batch)
            .map_err(|e| nft_err("sticky recorder chains", e))?;
        self.generation = Some(commit.generation);
        self.recorders = Some(now);
        self.fingerprints = Some(
            self.fingerprints_now()
                .map_err(|e| nft_err("list rules", e))?,
        );
        Ok(())
    }

    /// Forgets every remembered client whose backend is not a live backend of its (still
    /// sticky) service in `desired`: such a client's next connection is dealt anew instead
    /// of going to a removed, drained or down backend. Reads both sticky maps whole; called
    /// only when a sticky service lost a backend, and at each full compare.
    pub(in crate::controller::service) fn sweep_sticky(
        &mut self,
        desired: &Model,
    ) -> Result<(), SyncError> {
        for attempt in 1..=SWEEP_ATTEMPTS {
            let mut batch = Batch::new();
            batch.tag(TAG_SHARED);
            let mut stale_total = 0;
            for v4 in [true, false] {
                let stale = self
                    .stale_clients(v4, desired)
                    .map_err(|e| nft_err("list remembered clients", e))?;
                if stale.is_empty() {
                    continue;
                }
                stale_total += stale.len();
                let mut def = layout::sticky_map(v4);
                def.data = None;
                batch
                    .elements(&self.table, &def, &stale, Op::Delete)
                    .map_err(|e| nft_err("compile remembered clients", e.into()))?;
            }
            if stale_total == 0 {
                return Ok(());
            }
            match self.commit(batch) {
                Ok(c) => {
                    self.generation = Some(c.generation);
                    log::info!(
                        "service: forgot {stale_total} clients remembered with a backend no longer in use"
                    );
                    return Ok(());
                }
                Err(NftError::Rejected(_)) if attempt < SWEEP_ATTEMPTS => continue,
                Err(e) => return Err(nft_err("forget remembered clients", e)),
            }
        }
        Ok(())
    }

    /// Keys of the remembered clients of one family that `desired` no longer backs.
    fn stale_clients(&mut self, v4: bool, desired: &Model) -> Result<Vec<Element>, NftError> {
        let stale = std::cell::RefCell::new(Vec::new());
        self.nft.socket().for_each_element(
            &self.table,
            layout::sticky_map_name(v4),
            &mut |info| {
                let data = info.data.as_deref().unwrap_or(&[]);
                if let Some(r) = layout::remembered(v4, &info.key, data)
                    && !still_valid(desired, &r)
                {
                    stale.borrow_mut().push(r.key());
                }
            },
            &mut || stale.borrow_mut().clear(),
        )?;
        Ok(stale.into_inner())
    }
}
