//! Apply: the only part of the service controller that talks to the kernel.
//!
//! A sync is incremental (the mirror's delta, one batch) unless a full compare is due: at
//! startup, after a failed batch, when another process committed to nftables since our last
//! look, and once per period. The full compare checks the table's structure (sets, chains,
//! rules by fingerprint) and streams every element through [`super::verify`]; a broken
//! structure replaces the table in one atomic batch, stray or missing elements are fixed by
//! delta. What differs from what this process had committed counts as drift.
//!
//! Writing (with the isolation of refused services) is in [`super::write`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::controller::{SyncError, SyncReport};
use crate::dataplane::nft::{Batch, Nft, NftError, Op, TableRef, monitor};

use super::diff::{Delta, Mirror, ServiceChange, masq_refs};
use super::elements::{group, stream_elements, vip_of};
use super::layout;
use super::model::{Model, VipKey};
use super::verify;

/// A set as compared: name, key type id and length, map data type id and length.
type SetShape = (String, u32, u32, Option<(u32, u32)>);

/// Tag of messages that belong to no single service (table structure, masquerade).
pub(super) const TAG_SHARED: u32 = u32::MAX - 1;

/// Kernel-side state of the controller: the socket, the mirror and what we last saw.
pub struct Kernel {
    /// Our table.
    pub table: TableRef,
    pub(super) nft: Nft,
    /// What this process committed; `None` = unknown (a full compare is due).
    pub mirror: Option<Mirror>,
    /// Ruleset generation right after our last commit or check.
    generation: Option<u32>,
    /// Rule fingerprints of our skeleton as the kernel lists them after we installed it.
    fingerprints: Option<Vec<(String, String)>>,
    last_full: Option<Instant>,
    /// Generation at which the table was last seen absent while no service was desired.
    absent_at: Option<u32>,
    /// Kernel messages written by the last sync.
    pub last_writes: u64,
}

/// Gives memory freed after a large batch or dump back to the system (glibc keeps it
/// otherwise; a router's RSS should reflect what the daemon holds, not its peak).
fn trim_heap() {
    crate::sys::trim_heap();
}

pub(super) fn nft_err(what: &str, e: NftError) -> SyncError {
    SyncError::whole(what, e)
}

impl Kernel {
    /// Opens the socket (in the calling thread's network namespace).
    pub fn open(table: TableRef) -> Result<Kernel, NftError> {
        Ok(Kernel {
            table,
            nft: Nft::open()?,
            mirror: None,
            generation: None,
            fingerprints: None,
            last_full: None,
            absent_at: None,
            last_writes: 0,
        })
    }

    /// One sync against `desired` (blocking).
    pub fn sync(
        &mut self,
        desired: Model,
        period: Duration,
        now: Instant,
    ) -> Result<SyncReport, SyncError> {
        self.last_writes = 0;
        let generation = self
            .nft
            .generation()
            .map_err(|e| nft_err("nftables generation", e))?;
        if desired.is_empty() {
            return self.ensure_absent(generation);
        }
        // The generation moves with every commit; only one by another process (not this
        // controller's, not the policy controller's) can have touched our table.
        let foreign = match self.generation {
            Some(g) => g != generation && monitor::foreign_between(g, generation),
            None => true,
        };
        let full = self.mirror.is_none()
            || foreign
            || self
                .last_full
                .is_none_or(|t| now.duration_since(t) >= period);
        if full {
            return self.full_sync(desired, now);
        }
        let mirror = self.mirror.as_ref().expect("mirror known");
        let delta = mirror.diff(&desired);
        if delta.is_empty() {
            let mirror = self.mirror.as_mut().expect("mirror known");
            mirror.model = desired;
            return Ok(SyncReport {
                changes: 0,
                drift_repairs: 0,
                summary: "no change".into(),
            });
        }
        let changes = delta.writes() as u64;
        let summary = summarize(&delta);
        let groups = groups_of(&delta);
        let drained = delta.udp_drained.clone();
        let (failures, commit) = match self.write(&groups) {
            Ok(x) => x,
            Err(e) => {
                // Whatever happened, the kernel is compared in full next time.
                self.mirror = None;
                return Err(e);
            }
        };
        self.conntrack_flush(&drained);
        if failures.is_empty() {
            let mirror = self.mirror.as_mut().expect("mirror known");
            mirror.commit(desired, &delta);
            self.generation = commit;
            return Ok(SyncReport {
                changes,
                drift_repairs: 0,
                summary,
            });
        }
        // Some services were refused: what committed is not what the mirror can describe
        // cheaply, so the next sync compares everything with the kernel.
        self.mirror = None;
        let mut err = SyncError::default();
        for (obj, e) in failures {
            err.push(obj, e);
        }
        err.into_result(SyncReport {
            changes,
            drift_repairs: 0,
            summary,
        })
    }

    /// No services: no table at all (no NAT hooks registered for nothing).
    fn ensure_absent(&mut self, generation: u32) -> Result<SyncReport, SyncError> {
        if self.absent_at == Some(generation) {
            return Ok(SyncReport {
                changes: 0,
                drift_repairs: 0,
                summary: "no services".into(),
            });
        }
        let mut changes = 0;
        if self
            .nft
            .table_exists(&self.table)
            .map_err(|e| nft_err("list tables", e))?
        {
            let mut batch = Batch::new();
            batch.table(&self.table, Op::Delete);
            let c = self
                .nft
                .execute(batch)
                .map_err(|e| nft_err("delete service table", e))?;
            self.last_writes += c.messages as u64;
            changes = 1;
        }
        self.absent_at = Some(
            self.nft
                .generation()
                .map_err(|e| nft_err("nftables generation", e))?,
        );
        // The next sync with services installs the table (a full sync).
        self.mirror = None;
        self.generation = None;
        self.fingerprints = None;
        Ok(SyncReport {
            changes,
            drift_repairs: 0,
            summary: if changes > 0 {
                "no services: deleted the table".into()
            } else {
                "no services".into()
            },
        })
    }

    /// The full dump-and-diff (see the module docs).
    fn full_sync(&mut self, desired: Model, now: Instant) -> Result<SyncReport, SyncError> {
        let known = self.mirror.take();
        let table = self.table.clone();
        let exists = self
            .nft
            .table_exists(&table)
            .map_err(|e| nft_err("list tables", e))?;
        let structure_ok = exists && self.structure_ok().map_err(|e| nft_err("list table", e))?;
        let mut drift = 0u64;
        if !structure_ok {
            if known.is_some() {
                drift += 1;
            }
            return self.install(desired, drift);
        }
        // Structure intact: check every kernel element against the model; differences in
        // services the mirror holds unchanged are drift.
        let found = verify::verify_kernel(&mut self.nft, &table, &desired, known.as_ref())
            .map_err(|e| nft_err("list elements", e))?;
        drift += found.drift;
        let changes = (found.strays.len() + found.missing.len()) as u64;
        let mut groups: BTreeMap<Option<VipKey>, ServiceChange> = BTreeMap::new();
        for (set, el) in found.strays {
            let key = vip_of(set, &el);
            group(&mut groups, key, &desired).deletes.push((set, el));
        }
        for (set, el) in found.missing {
            let key = vip_of(set, &el);
            group(&mut groups, key, &desired).adds.push((set, el));
        }
        let groups: Vec<ServiceChange> = groups.into_values().collect();
        let (failures, commit) = self.write(&groups)?;
        let report = SyncReport {
            changes,
            drift_repairs: drift,
            summary: format!("full compare: {changes} element writes, {drift} drift repairs"),
        };
        if drift > 0 {
            metrics::counter!("edgenetd_service_drift_repairs_total").increment(drift);
        }
        if !failures.is_empty() {
            let mut err = SyncError::default();
            for (obj, e) in failures {
                err.push(obj, e);
            }
            return err.into_result(report);
        }
        self.generation = match commit {
            Some(g) => Some(g),
            None => Some(
                self.nft
                    .generation()
                    .map_err(|e| nft_err("nftables generation", e))?,
            ),
        };
        let refs = masq_refs(&desired);
        self.mirror = Some(Mirror {
            model: desired,
            masq_refs: refs,
        });
        self.last_full = Some(now);
        trim_heap();
        Ok(report)
    }

    /// Replaces the whole table with the skeleton and every desired element (one batch).
    fn install(&mut self, desired: Model, drift: u64) -> Result<SyncReport, SyncError> {
        let skeleton = layout::skeleton(&self.table.name);
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        batch
            .replace_table(&skeleton)
            .map_err(|e| nft_err("compile service table", e.into()))?;
        let elements = stream_elements(&mut batch, &self.table, &desired)
            .map_err(|e| nft_err("compile service elements", e.into()))?;
        let commit = match self.nft.execute(batch) {
            Ok(c) => c,
            Err(NftError::Rejected(_)) => {
                // One or more services refused: install the bare skeleton, then add the
                // services by delta with isolation.
                return self.install_isolated(desired, drift);
            }
            Err(e) => return Err(nft_err("install service table", e)),
        };
        self.last_writes += commit.messages as u64;
        self.after_install(desired, commit.generation)?;
        trim_heap();
        if drift > 0 {
            metrics::counter!("edgenetd_service_drift_repairs_total").increment(drift);
        }
        Ok(SyncReport {
            changes: elements as u64 + 1,
            drift_repairs: drift,
            summary: format!("installed table with {elements} elements"),
        })
    }

    fn install_isolated(&mut self, desired: Model, drift: u64) -> Result<SyncReport, SyncError> {
        let skeleton = layout::skeleton(&self.table.name);
        let mut batch = Batch::new();
        batch.tag(TAG_SHARED);
        batch
            .replace_table(&skeleton)
            .map_err(|e| nft_err("compile service table", e.into()))?;
        let commit = self
            .nft
            .execute(batch)
            .map_err(|e| nft_err("install service table", e))?;
        self.last_writes += commit.messages as u64;
        self.after_install(Model::new(), commit.generation)?;
        let mirror = self.mirror.as_ref().expect("just installed");
        let delta = mirror.diff(&desired);
        let groups = groups_of(&delta);
        let (failures, _) = self.write(&groups)?;
        self.mirror = None; // compare with the kernel next time
        let mut err = SyncError::default();
        for (obj, e) in failures {
            err.push(obj, e);
        }
        err.into_result(SyncReport {
            changes: delta.writes() as u64 + 1,
            drift_repairs: drift,
            summary: "installed table; some services refused".into(),
        })
    }

    fn after_install(&mut self, desired: Model, generation: u32) -> Result<(), SyncError> {
        self.fingerprints = Some(
            self.fingerprints_now()
                .map_err(|e| nft_err("list rules", e))?,
        );
        let refs = masq_refs(&desired);
        self.mirror = Some(Mirror {
            model: desired,
            masq_refs: refs,
        });
        self.generation = Some(generation);
        self.last_full = Some(Instant::now());
        Ok(())
    }

    fn fingerprints_now(&mut self) -> Result<Vec<(String, String)>, NftError> {
        Ok(self
            .nft
            .list_rules(&self.table)?
            .into_iter()
            .map(|r| (r.chain, r.fingerprint))
            .collect())
    }

    /// True when sets, chains and rules are what the skeleton installs.
    fn structure_ok(&mut self) -> Result<bool, NftError> {
        let skeleton = layout::skeleton(&self.table.name);
        let sets = self.nft.list_sets(&self.table)?;
        let mut want_sets: Vec<SetShape> = skeleton
            .sets
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.key.id(),
                    s.key.byte_len(),
                    s.data
                        .as_ref()
                        .map(|d| (if s.is_vmap() { 0xffffff00 } else { d.id() }, d.byte_len())),
                )
            })
            .collect();
        let mut have_sets: Vec<SetShape> = sets
            .iter()
            .filter(|s| !s.name.starts_with("__set"))
            .map(|s| (s.name.clone(), s.key.0, s.key.1, s.data))
            .collect();
        want_sets.sort();
        have_sets.sort();
        if want_sets.len() != have_sets.len()
            || want_sets.iter().zip(&have_sets).any(|(w, h)| {
                w.0 != h.0 || w.1 != h.1 || w.2 != h.2 || w.3.is_some() != h.3.is_some()
            })
        {
            return Ok(false);
        }
        let mut chains: Vec<String> = self
            .nft
            .list_chains(&self.table)?
            .into_iter()
            .map(|c| c.name)
            .collect();
        let mut want_chains: Vec<String> = skeleton.chains.iter().map(|c| c.name.clone()).collect();
        chains.sort();
        want_chains.sort();
        if chains != want_chains {
            return Ok(false);
        }
        let rules = self.fingerprints_now()?;
        match &self.fingerprints {
            Some(f) => Ok(*f == rules),
            None => {
                // Adopting a table from an earlier run: same rule count per chain and the same
                // comments; later checks compare full fingerprints.
                let listed = self.nft.list_rules(&self.table)?;
                let mut have: Vec<(String, Option<String>)> =
                    listed.into_iter().map(|r| (r.chain, r.comment)).collect();
                let mut want: Vec<(String, Option<String>)> = skeleton
                    .rules
                    .iter()
                    .map(|r| (r.chain.clone(), r.comment.clone()))
                    .collect();
                have.sort();
                want.sort();
                let ok = have == want;
                if ok {
                    self.fingerprints = Some(rules);
                }
                Ok(ok)
            }
        }
    }

    fn conntrack_flush(&mut self, drained: &[(VipKey, SocketAddr)]) {
        for (vip, backend) in drained {
            if let Err(e) =
                crate::dataplane::conntrack::delete_udp_flows(vip.addr, vip.port, *backend)
            {
                log::warn!("service {vip}: deleting conntrack entries of {backend}: {e}");
            }
        }
    }
}

fn summarize(delta: &Delta) -> String {
    let n = delta.services.len();
    format!("{n} services changed, {} element writes", delta.writes())
}

fn groups_of(delta: &Delta) -> Vec<ServiceChange> {
    let mut v = delta.services.clone();
    if !delta.masquerade.adds.is_empty() || !delta.masquerade.deletes.is_empty() {
        v.push(delta.masquerade.clone());
    }
    v
}
