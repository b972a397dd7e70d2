//! The policy controller's sync: the controller, its constructor, and one sync in named
//! steps (a renamed table goes; no `[policy]`: no table; at the first sync, adopt a table a
//! full write left; otherwise verify unless the cache is trusted, then nothing, an element
//! delta or a full write). Blocking steps run on a thread of their own (`sync::unblock`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::observe::{self, Applied, Check};
use super::plan::{self, Step};
use super::program::Program;
use super::{addresses, adopt, apply, includes, model};
use crate::config::DesiredState;
use crate::config::policy::pods::PodPolicies;
use crate::controller::Controller;
use crate::controller::cache::{Decision, KernelCache};
use crate::controller::nft_core::{NftCore, NftSession, OwnedTable};
use crate::dataplane::nft::{GenerationWatch, NftError, TableRef};
use crate::sync::{Progress, SyncError, SyncReport, Trigger};

/// Told, right after each sync that committed the table, the pod isolation it holds (the
/// Kubernetes source times new pods to it).
pub type PodCommits = Arc<dyn Fn(&PodPolicies, Instant) + Send + Sync>;

/// The policy controller.
pub struct PolicyController {
    /// The last config planned and its program.
    memo: model::Memo,
    /// The nftables socket, opened at the first sync (in the daemon's namespace).
    nft: Option<NftSession>,
    /// The router's addresses (port-forward reflection is scoped to them), read when a port
    /// forward reflects.
    addresses: addresses::AddressWatch,
    /// What the last sync left installed, and whether to trust it.
    cache: KernelCache<Applied>,
    /// The foreign-commit watch, shared with the service controller.
    core: NftCore,
    /// Wakes the loop early (the watch's callback and the address monitor fire it).
    trigger: Trigger,
    /// The last program with includes and what it compiled to (nft runs once per change).
    resolved: Option<(Arc<Program>, Arc<Program>)>,
    /// Who is told of each commit of the pod isolation, if anyone.
    pod_commits: Option<PodCommits>,
    /// Reads the denied flows the table reports, once it does.
    denied: super::denied::Reporter,
}

impl PolicyController {
    /// A controller; `trigger` wakes its loop early. Call it on the thread (network
    /// namespace) the controller programs: it subscribes to `watch`, which invalidates the
    /// cache and fires `trigger` within
    /// [`WATCH_INTERVAL`](crate::controller::nft_core::WATCH_INTERVAL) whenever another process
    /// commits to nftables, so drift is repaired at once rather than at the next period.
    pub fn new(trigger: Trigger, watch: GenerationWatch) -> PolicyController {
        let core = NftCore::new(OwnedTable::Policy, watch, trigger.clone());
        PolicyController {
            memo: model::Memo::default(),
            nft: None,
            addresses: addresses::AddressWatch::default(),
            cache: core.cache(),
            core,
            trigger,
            resolved: None,
            pod_commits: None,
            denied: super::denied::Reporter::default(),
        }
    }

    /// Tells `hook` of every sync that committed the table (see [`PodCommits`]).
    pub fn with_pod_commits(mut self, hook: Option<PodCommits>) -> PolicyController {
        self.pod_commits = hook;
        self
    }
}

impl Controller for PolicyController {
    fn name(&self) -> &'static str {
        "policy"
    }

    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let table = OwnedTable::Policy.of(&desired.daemon);
        let period = desired.controller("policy").period;
        let addrs = if addresses::needed(desired.policy.as_ref()) {
            self.addresses.get(&self.trigger).await
        } else {
            addresses::RouterAddresses::default()
        };
        let program = self.memo.program(
            desired.policy.as_ref(),
            &desired.pod_policies,
            &table.name,
            &addrs,
        );
        progress.beat();
        let mut kernel = Kernel {
            // Opened here, on the daemon's thread, so it lives in the daemon's namespace.
            nft: match self.nft.take() {
                Some(nft) => nft,
                None => self
                    .core
                    .open()
                    .map_err(|e| SyncError::whole("nftables", e))?,
            },
            cache: std::mem::take(&mut self.cache),
        };
        let rules = program.as_ref().map_or(0, |p| p.rule_count());
        // Before the write, on this thread (the daemon's namespace): the listener is bound
        // by the time the first reporting rule can send it a packet.
        self.denied.update(desired, program.as_deref());
        let mut resolved = self.resolved.take();
        let (kernel, resolved, result) = crate::sync::unblock(move || {
            let program = match resolve(&mut kernel.nft, &mut resolved, program) {
                Ok(p) => p,
                // Nothing is written: the table in force stays as it is.
                Err(e) => return (kernel, resolved, Err(SyncError::whole("includes", e))),
            };
            let r = kernel.sync(&table, program, period);
            if r.is_ok() {
                kernel.record_rule_counters();
            }
            (kernel, resolved, r)
        })
        .await;
        self.resolved = resolved;
        self.nft = Some(kernel.nft);
        self.cache = kernel.cache;
        // Committed: in full, or without the groups the kernel refused (the skeleton, which
        // holds the known pods, went in).
        let committed =
            result.is_ok() || self.cache.snapshot().is_some_and(|a| !a.failed.is_empty());
        if let (true, Some(hook)) = (committed, &self.pod_commits) {
            hook(&desired.pod_policies, Instant::now());
        }
        super::metrics::record(&result, rules);
        result
    }
}

/// `program` with its includes compiled (nft is asked again only when it changed).
fn resolve(
    nft: &mut NftSession,
    memo: &mut Option<(Arc<Program>, Arc<Program>)>,
    program: Option<Arc<Program>>,
) -> Result<Option<Arc<Program>>, includes::IncludeError> {
    let p = match program {
        Some(p) if !p.includes.is_empty() => p,
        other => {
            *memo = None;
            return Ok(other);
        }
    };
    if let Some((from, to)) = memo {
        if Arc::ptr_eq(from, &p) || **from == *p {
            return Ok(Some(Arc::clone(to)));
        }
        // Only set elements changed (a blocklist update): the snippets compile as before,
        // and the sets' new elements go in as they are. nft is not asked again.
        if from.includes == p.includes && from.same_structure(&p) {
            let mut next = (**to).clone();
            next.table.sets.clone_from(&p.table.sets);
            let next = Arc::new(next);
            *memo = Some((p, Arc::clone(&next)));
            return Ok(Some(next));
        }
    }
    let to = Arc::new(includes::resolve(nft.socket(), &p)?);
    *memo = Some((p, Arc::clone(&to)));
    Ok(Some(to))
}

/// What one (blocking) sync works with.
struct Kernel {
    /// The socket.
    nft: NftSession,
    /// The controller's cache (moved in for the sync, moved back after).
    cache: KernelCache<Applied>,
}

impl Kernel {
    /// Reads the rules' counters (one rule dump, after the sync's own work) into the
    /// per-rule series; a failed dump leaves the series as they were (the next sync tries
    /// again). No table (no `[policy]`) or no config rule: nothing to read.
    fn record_rule_counters(&mut self) {
        // A table without `[[policy.rule]]`s (only pod isolation, say) has no series to read.
        let Some(t) = self
            .cache
            .snapshot()
            .filter(|a| {
                a.program
                    .groups
                    .iter()
                    .any(|g| g.label.starts_with("rule "))
            })
            .map(|a| TableRef::from(&a.program.table))
        else {
            return;
        };
        match self.nft.socket().list_rule_counters(&t) {
            Ok(listed) => super::metrics::record_rule_counters(&listed),
            Err(e) => log::debug!("policy rule counters not read: {e}"),
        }
    }

    /// One sync: brings the table in line with `desired` (`None` = no table).
    fn sync(
        &mut self,
        table: &TableRef,
        desired: Option<Arc<Program>>,
        period: Duration,
    ) -> Result<SyncReport, SyncError> {
        self.delete_renamed(table)?;
        let Some(desired) = desired else {
            return self.delete_table(table);
        };
        if self.adopt(table, &desired)? {
            return self.full_write(table, &desired, true);
        }
        let drifted = self.verify(period)?;
        match plan::step(self.cache.snapshot(), Some(&desired), drifted) {
            Step::Nothing => Ok(self.no_change()),
            Step::ElementDelta => self.element_delta(table, &desired),
            Step::FullWrite | Step::DeleteTable => self.full_write(table, &desired, drifted),
        }
    }

    /// A renamed table (new prefix): the old one goes.
    fn delete_renamed(&mut self, table: &TableRef) -> Result<(), SyncError> {
        let Some(old) = self
            .cache
            .snapshot()
            .map(|a| TableRef::from(&a.program.table))
        else {
            return Ok(());
        };
        if old.name != table.name {
            apply::delete_table(&mut self.nft, &old)
                .map_err(|e| SyncError::whole(format!("table {}", old.name), e))?;
            self.cache.forget();
        }
        Ok(())
    }

    /// Without a snapshot (the first sync), trusts a table that holds `desired` as a full
    /// write left it. True when the table held `desired` but was edited since (drift).
    fn adopt(&mut self, table: &TableRef, desired: &Arc<Program>) -> Result<bool, SyncError> {
        if self.cache.snapshot().is_some() {
            return Ok(false);
        }
        let now = Instant::now();
        match adopt::find(self.nft.socket(), table, desired)
            .map_err(|e| SyncError::whole("nftables listing", e))?
        {
            adopt::Found::Adopted(applied) => {
                self.cache.store_verified(*applied, true, now);
                Ok(false)
            }
            adopt::Found::Write { drifted } => Ok(drifted),
        }
    }

    /// No `[policy]`: no table.
    fn delete_table(&mut self, table: &TableRef) -> Result<SyncReport, SyncError> {
        let n = apply::delete_table(&mut self.nft, table)
            .map_err(|e| SyncError::whole(format!("table {}", table.name), e))?;
        self.cache.forget();
        Ok(SyncReport {
            changes: n,
            drift_repairs: 0,
            summary: if n > 0 {
                "no [policy]: table deleted".into()
            } else {
                "no [policy]: no table".into()
            },
        })
    }

    /// Compares the table with the kernel unless the cache is trusted (see
    /// [`NftSession::check`]; a deferred element check is due too); true when it drifted.
    fn verify(&mut self, period: Duration) -> Result<bool, SyncError> {
        let generation = self
            .nft
            .generation()
            .map_err(|e| SyncError::whole("nftables", e))?;
        let Some(a) = self.cache.snapshot().filter(|a| a.failed.is_empty()) else {
            return Ok(false);
        };
        let (seen, pending) = (a.generation, a.check_pending);
        if pending {
            self.cache.invalidate();
        }
        let check = self.nft.check(
            &mut self.cache,
            Some(seen),
            generation,
            Instant::now(),
            period,
        );
        if !check.foreign {
            self.cache.snapshot_mut().expect("checked above").generation = generation;
        }
        if check.decision == Decision::Trusted {
            return Ok(false);
        }
        let now = Instant::now();
        let a = self.cache.snapshot_mut().expect("checked above");
        let check = observe::check_drift(self.nft.socket(), a)
            .map_err(|e| SyncError::whole("nftables listing", e))?;
        if check == Check::Drifted {
            return Ok(true);
        }
        a.check_pending = check == Check::Deferred;
        a.generation = generation;
        self.cache.mark_verified(now);
        Ok(false)
    }

    fn no_change(&self) -> SyncReport {
        let pending = self.cache.snapshot().is_some_and(|a| a.check_pending);
        SyncReport {
            changes: 0,
            drift_repairs: 0,
            summary: if pending {
                "no change (set element check deferred)".into()
            } else {
                "no change".into()
            },
        }
    }

    fn element_delta(
        &mut self,
        table: &TableRef,
        desired: &Arc<Program>,
    ) -> Result<SyncReport, SyncError> {
        let a = self.cache.snapshot_mut().expect("a delta needs a snapshot");
        match apply::element_delta(&mut self.nft, a, desired) {
            Ok((changes, summary)) => Ok(SyncReport {
                changes,
                drift_repairs: 0,
                summary,
            }),
            // The kernel disagreed with our snapshot: rewrite everything.
            Err(NftError::Rejected(_)) => self.full_write(table, desired, true),
            Err(e) => {
                self.cache.invalidate();
                Err(SyncError::whole("nftables", e))
            }
        }
    }

    fn full_write(
        &mut self,
        table: &TableRef,
        desired: &Arc<Program>,
        drifted: bool,
    ) -> Result<SyncReport, SyncError> {
        let written_at = Instant::now();
        let (new, changes, failures) = match apply::full_write(&mut self.nft, table, desired) {
            Ok(done) => done,
            Err(e) => {
                self.cache.forget();
                return Err(e);
            }
        };
        let summary = format!(
            "table written: {} rules, {} sets{}{}",
            desired.rule_count(),
            desired.table.sets.len(),
            if new.failed.is_empty() {
                String::new()
            } else {
                format!(", {} groups refused (fail closed)", new.failed.len())
            },
            if drifted { ", drift repaired" } else { "" }
        );
        let complete = new.failed.is_empty();
        self.cache.store_verified(new, complete, written_at);
        failures.into_result(SyncReport {
            changes,
            drift_repairs: u64::from(drifted),
            summary,
        })
    }
}
