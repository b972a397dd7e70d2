//! Apply: the only part of the service controller that writes to the kernel: every commit
//! (its generation recorded in the shared generation watch, see
//! [`crate::controller::nft_core`]), the table's skeleton, the batch writer (`write`, which
//! isolates refused services), the chains on demand (`on_demand`: dispatch chains of the
//! slot classes in use, recorder chains of sticky services), forgetting remembered clients
//! (`recorders`), and the conntrack entries of drained UDP backends.

mod on_demand;
mod recorders;
mod write;

use std::net::SocketAddr;

use crate::dataplane::nft::{Batch, Commit, NftError};
use crate::sync::SyncError;

use super::layout;
use super::layout::Demand;
use super::model::VipKey;
use super::plan::{Delta, ServiceChange};
use super::sync::Kernel;

/// Tag of messages that belong to no single service (table structure, shared elements).
pub(super) const TAG_SHARED: u32 = u32::MAX - 1;

/// A whole-sync failure of `what`.
pub(super) fn nft_err(what: &str, e: NftError) -> SyncError {
    SyncError::whole(what, e)
}

impl Kernel {
    /// Executes `batch`, records its generation as this process's own, counts its messages.
    pub(super) fn commit(&mut self, batch: Batch) -> Result<Commit, NftError> {
        let commit = self.nft.commit(batch)?;
        self.last_writes += commit.messages as u64;
        Ok(commit)
    }

    /// A batch that replaces the table with the bare skeleton (no service elements yet) and
    /// the chains on demand of `demand`.
    pub(super) fn skeleton_batch(&self, demand: &Demand) -> Result<Batch, SyncError> {
        let skeleton = layout::skeleton_with(&self.table.name, demand, self.local);
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        batch
            .replace_table(&skeleton)
            .map_err(|e| nft_err("compile service table", e.into()))?;
        Ok(batch)
    }

    pub(super) fn conntrack_flush(&mut self, drained: &[(VipKey, SocketAddr)]) {
        for (vip, backend) in drained {
            if let Err(e) =
                crate::dataplane::conntrack::delete_udp_flows(vip.addr, vip.port, *backend)
            {
                log::warn!("service {vip}: deleting conntrack entries of {backend}: {e}");
            }
        }
    }
}

/// Refused objects with the reason, joined into one error.
pub(super) fn joined(failures: Vec<(String, String)>) -> SyncError {
    let mut err = SyncError::default();
    for (obj, e) in failures {
        err.push(obj, e);
    }
    err
}

/// The write groups of `delta`: one per changed service, then the shared elements if any.
pub(super) fn groups_of(delta: &Delta) -> Vec<ServiceChange> {
    let mut v = delta.services.clone();
    if !delta.shared.adds.is_empty() || !delta.shared.deletes.is_empty() {
        v.push(delta.shared.clone());
    }
    v
}
