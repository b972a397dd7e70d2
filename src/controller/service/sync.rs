//! The service controller's sync: the controller, its constructor, and one sync against the
//! kernel-side state it keeps ([`Kernel`]).
//!
//! A sync is incremental (the mirror's delta, one batch) unless the cache says a full compare
//! is due (see [`crate::controller::cache`]): at startup, after a failed batch, when another
//! process committed to nftables since our last look, and once per period. The full compare
//! checks the table's structure (sets, chains, rules by fingerprint) and streams every element
//! through [`super::observe`]; a broken structure replaces the table in one atomic batch, stray
//! or missing elements are fixed by delta. What differs from what this process had committed
//! counts as drift. The writes themselves are [`super::apply`]'s.
//!
//! The periodic compare gives way to changes (a change waiting for the loop goes first, by
//! delta), within a bound: [`super::defer`] says how and why so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::DesiredState;
use crate::controller::Controller;
use crate::controller::cache::{Decision, KernelCache};
use crate::controller::nft_core::{NftCore, NftSession, OwnedTable};
use crate::dataplane::nft::{Batch, GenerationWatch, NftError, Op, TableRef};
use crate::sync::{Progress, SyncError, SyncReport, Trigger};

use super::apply::{groups_of, joined, nft_err};
use super::defer::Deferral;
use super::elements::{group, stream_elements, vip_of};
use super::layout::Demand;
use super::model::{self, Model, VipKey};
use super::observe;
use super::plan::{Delta, Mirror, ServiceChange};
use super::rebuild::{Desired, Memo};
use super::{backend_check, local};

/// The service controller (see the module docs).
pub struct ServiceController {
    /// The socket, the mirror and its cache; opened at the first sync.
    kernel: Option<Kernel>,
    /// Checks of the backends that have them.
    backend_checks: backend_check::BackendChecks,
    /// What the mirror's model was built from: unchanged services keep their entries.
    memo: Memo,
    /// The foreign-commit watch, shared with the policy controller (its flag is handed to
    /// each kernel opened).
    core: NftCore,
    /// Wakes the loop again at once after a sync that put the periodic compare off.
    resume: Trigger,
}

impl ServiceController {
    /// A controller; the kernel socket is opened on the first sync (in the caller's netns).
    /// Call it on the thread (network namespace) the controller programs: it starts a watch
    /// that fires `trigger` within
    /// [`WATCH_INTERVAL`](crate::controller::nft_core::WATCH_INTERVAL) whenever another
    /// process commits to nftables, so a table edited or deleted by hand is repaired at once,
    /// not at the period.
    pub fn new(trigger: Trigger, watch: GenerationWatch) -> ServiceController {
        ServiceController {
            kernel: None,
            memo: Memo::default(),
            core: NftCore::new(OwnedTable::Service, watch, trigger.clone()),
            backend_checks: backend_check::BackendChecks::new(trigger.clone()),
            resume: trigger,
        }
    }

    /// Attaches the heartbeat of the backend check probes (`service-health`): beaten every
    /// second while every probe finishes its checks on time.
    pub fn with_probe_heartbeat(
        mut self,
        heartbeat: std::sync::Arc<dyn crate::sync::Progress + Send + Sync>,
    ) -> ServiceController {
        self.backend_checks.watch(heartbeat);
        self
    }

    /// Backends their checks currently hold down.
    pub fn down_backends(&self) -> Vec<std::net::SocketAddr> {
        self.backend_checks.down()
    }

    /// Kernel writes (element and table messages) of the last sync; 0 for a no-op.
    pub fn last_writes(&self) -> u64 {
        self.kernel.as_ref().map(|k| k.last_writes).unwrap_or(0)
    }
}

impl Controller for ServiceController {
    fn name(&self) -> &'static str {
        "service"
    }

    async fn sync(
        &mut self,
        desired: &DesiredState,
        progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        let table = OwnedTable::Service.of(&desired.daemon);
        let period = desired.controller("service").period;
        self.backend_checks.reconcile(&desired.services.services);
        let checks = &self.backend_checks;
        // The committed slots are the previous assignment: surviving backends keep theirs.
        let previous = self
            .kernel
            .as_ref()
            .and_then(|k| k.mirror())
            .map(|m| &m.model);
        let mut model = self
            .memo
            .build(&desired.services, &|s, b| checks.is_up(s, b), previous);
        checks.publish(&desired.services.services);
        let (desired_counts, exempt) = match (&model, previous) {
            (Desired::Patch(p), Some(base)) => (
                counts(p.view(base)),
                local::of_entries(desired.daemon.listen, p.view(base)),
            ),
            (m, _) => {
                let whole = match m {
                    Desired::Whole(w) => w,
                    Desired::Patch(_) => unreachable!("a patch is made only against a mirror"),
                };
                (
                    counts(whole.iter()),
                    local::of(desired.daemon.listen, whole),
                )
            }
        };
        let reused = self
            .kernel
            .as_ref()
            .is_some_and(|k| k.table == table && k.local == exempt);
        if !reused {
            // A new socket has no mirror to patch.
            model = Desired::Whole(model.into_model(previous));
        }
        progress.beat();
        let mut kernel = match self.kernel.take() {
            Some(k) if k.table == table && k.local == exempt => k,
            other => {
                // First sync, the table prefix changed, or the loopback exemption of the
                // daemon's listener came or went: start over (the full compare replaces a
                // table of another shape; an old table's prefix stays for `cleanup`).
                drop(other);
                Kernel::open(table, &self.core)
                    .map_err(|e| SyncError::whole("nftables socket", e))?
                    .with_local(exempt)
            }
        };
        let waiting = progress.waiting();
        let (kernel, result) = crate::sync::unblock(move || {
            let r = kernel.sync_desired(model, period, Instant::now(), &|| waiting.now());
            (kernel, r)
        })
        .await;
        progress.beat();
        if result.is_ok() && kernel.compare_put_off() {
            // The compare is still due: come back for it as soon as the change is in (a
            // change that keeps waiting stops it again).
            self.resume.fire();
        }
        // What is programmed: everything desired after a clean sync, else what the mirror
        // knows (unknown after a failure: left as it was).
        let counts = match (&result, kernel.mirror()) {
            (Ok(_), _) => Some(desired_counts),
            (Err(_), Some(m)) => Some(counts(m.model.iter())),
            (Err(_), None) => None,
        };
        if let Some((services, backends)) = counts {
            super::metrics::record_programmed(services, backends);
        }
        self.memo
            .synced(result.is_ok() && kernel.mirror().is_some());
        self.kernel = Some(kernel);
        result
    }
}

/// Services, and backends with slots summed over services.
fn counts<'a>(entries: impl Iterator<Item = (&'a VipKey, &'a model::Entry)>) -> (usize, usize) {
    entries.fold((0, 0), |(n, b), (_, e)| (n + 1, b + e.backend_count()))
}

/// Kernel-side state of the controller: the socket, the mirror and what we last saw.
pub struct Kernel {
    /// Our table.
    pub table: TableRef,
    /// The socket.
    pub(super) nft: NftSession,
    /// What this process committed (the mirror), and whether to trust it.
    pub(super) cache: KernelCache<Mirror>,
    /// Ruleset generation right after our last commit or check.
    pub(super) generation: Option<u32>,
    /// Rule fingerprints of our skeleton as the kernel lists them after we installed it.
    pub(super) fingerprints: Option<Vec<(String, String)>>,
    /// Generation at which the table was last seen absent while no service was desired.
    pub(super) absent_at: Option<u32>,
    /// The chains on demand (dispatch and recorder chains) the table has, when known (after
    /// an install or a structure check).
    pub(super) on_demand: Option<Demand>,
    /// Kernel messages written by the last sync.
    pub last_writes: u64,
    /// The loopback exemption of the daemon's listener the table carries (see `local`).
    pub local: Option<super::local::Local>,
    /// How long the periodic compare has given way to changes (see [`super::defer`]).
    deferral: Deferral,
}

impl Kernel {
    /// Opens the socket (in the calling thread's network namespace) through `core`, whose
    /// watch records this process's commits and invalidates the cache on another's.
    pub fn open(table: TableRef, core: &NftCore) -> Result<Kernel, NftError> {
        Ok(Kernel {
            table,
            nft: core.open()?,
            cache: core.cache(),
            generation: None,
            fingerprints: None,
            absent_at: None,
            on_demand: None,
            last_writes: 0,
            local: None,
            deferral: Deferral::default(),
        })
    }

    /// The same, with the loopback exemption `local` in its table.
    pub fn with_local(mut self, local: Option<super::local::Local>) -> Kernel {
        self.local = local;
        self
    }

    /// What this process committed, if known.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.cache.snapshot()
    }

    /// True when the periodic full compare gave way to a change and is still due.
    pub fn compare_put_off(&self) -> bool {
        self.deferral.pending()
    }

    /// One sync against `desired` (blocking); a periodic full compare runs to the end.
    pub fn sync(
        &mut self,
        desired: Model,
        period: Duration,
        now: Instant,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(Desired::Whole(desired), period, now, &|| false)
    }

    /// [`Kernel::sync_desired`] of a whole model.
    pub fn sync_giving_way(
        &mut self,
        desired: Model,
        period: Duration,
        now: Instant,
        waiting: &dyn Fn() -> bool,
    ) -> Result<SyncReport, SyncError> {
        self.sync_desired(Desired::Whole(desired), period, now, waiting)
    }

    /// One sync against `desired` (blocking), a whole model or a patch of the mirror's: an
    /// incremental sync applies a patch to the mirror's model in place and compares its keys
    /// alone. A periodic full compare gives way to a change, within the bound of
    /// [`super::defer`]: it is put off when `desired` differs from the mirror (the delta runs
    /// instead), and stops partway, writing nothing, once `waiting` says newer work waits
    /// (see [`Kernel::compare_put_off`]).
    pub fn sync_desired(
        &mut self,
        desired: Desired,
        period: Duration,
        now: Instant,
        waiting: &dyn Fn() -> bool,
    ) -> Result<SyncReport, SyncError> {
        self.last_writes = 0;
        let generation = self
            .nft
            .generation()
            .map_err(|e| nft_err("nftables generation", e))?;
        let desired = match desired {
            Desired::Patch(p) => match self.mirror() {
                Some(m) if p.view(&m.model).next().is_some() || !p.service_cidrs.is_empty() => {
                    Desired::Patch(p)
                }
                // Nothing left (the table goes), or no mirror to patch (not expected: a
                // patch is made against the mirror): the whole model.
                base => Desired::Whole(Desired::Patch(p).into_model(base.map(|m| &m.model))),
            },
            whole => whole,
        };
        if let Desired::Whole(m) = &desired
            && m.needs_no_table()
        {
            return self.ensure_absent(generation);
        }
        let check = self
            .nft
            .check(&mut self.cache, self.generation, generation, now, period);
        if check.decision == Decision::Trusted && self.on_demand.is_some() {
            let (model, delta) = self.plan_delta(desired);
            return self.sync_delta(model, delta);
        }
        // Only the periodic compare may give way: the mirror is known and no other process
        // committed, so it is as good for a delta as before the compare fell due.
        let periodic = !check.foreign
            && self.cache.is_complete()
            && self.on_demand.is_some()
            && self.cache.snapshot().is_some();
        let may_yield = periodic && self.deferral.may_yield(now, period);
        let desired = if may_yield {
            let (model, delta) = self.plan_delta(desired);
            if !delta.is_empty() {
                self.deferral.yielded(now);
                log::debug!("service: a change goes before the periodic full compare");
                return self.sync_delta(model, delta);
            }
            // Nothing goes first: the mirror keeps the model (a patch took it out), and the
            // compare checks the kernel against the same.
            let mirror = self
                .cache
                .snapshot_mut()
                .expect("periodic implies a mirror");
            mirror.model = model;
            Against::Mirror
        } else {
            Against::Model(desired.into_model(self.mirror().map(|m| &m.model)))
        };
        // Every full compare at info, whatever it finds: a change that arrived meanwhile
        // waited for it (unless it stopped for it), and an operator must see why.
        let services = match &desired {
            Against::Model(m) => m.len(),
            Against::Mirror => self.mirror().map_or(0, |m| m.model.len()),
        };
        let why = match (check.foreign, self.cache.snapshot().is_some()) {
            (true, _) => "another process committed, or the first look",
            (false, false) => "after a failed batch or at startup",
            (false, true) => "the period",
        };
        let started = Instant::now();
        let stop = || may_yield && waiting();
        let result = self.full_sync(desired, now, &stop);
        let took = started.elapsed();
        let result = match result {
            Ok(None) => {
                self.deferral.yielded(now);
                super::metrics::record_interrupted_compare();
                log::info!(
                    "service: full compare of {services} services with the kernel interrupted after {} ms ({why}): a change waits; it goes first, the compare starts again after it",
                    took.as_millis()
                );
                return Ok(SyncReport {
                    changes: 0,
                    drift_repairs: 0,
                    summary: "full compare interrupted: a change goes first".into(),
                });
            }
            Ok(Some(r)) => Ok(r),
            Err(e) => Err(e),
        };
        super::metrics::record_full_compare(took);
        let put_off = match self.deferral.done(now) {
            Some((d, n)) => format!(
                ", put off {n} time{} over {} ms",
                if n == 1 { "" } else { "s" },
                d.as_millis()
            ),
            None => String::new(),
        };
        let outcome = match &result {
            Ok(r) => r.summary.clone(),
            Err(e) => format!("failed: {e}"),
        };
        log::info!(
            "service: full compare of {services} services with the kernel took {} ms ({why}{put_off}): {outcome}",
            took.as_millis()
        );
        result
    }

    /// The desired model and the mirror's delta to it. A patch is applied to the mirror's
    /// model in place: until the commit (or [`Kernel::sync_delta`] on no change) puts a model
    /// back, the mirror holds none, and every failure after forgets it.
    fn plan_delta(&mut self, desired: Desired) -> (Model, Delta) {
        let mirror = self.cache.snapshot_mut().expect("trusted implies a mirror");
        match desired {
            Desired::Whole(m) => {
                let delta = mirror.diff(&m);
                (m, delta)
            }
            Desired::Patch(p) => {
                let mut model = std::mem::take(&mut mirror.model);
                let (old, keys) = p.apply(&mut model);
                let before = Mirror {
                    model: old,
                    shared_refs: std::mem::take(&mut mirror.shared_refs),
                };
                let delta = before.diff_keys(&model, &keys);
                mirror.shared_refs = before.shared_refs;
                (model, delta)
            }
        }
    }

    /// An incremental sync: the mirror's `delta` (to `desired`), in one batch.
    fn sync_delta(&mut self, desired: Model, delta: Delta) -> Result<SyncReport, SyncError> {
        let mirror = self.cache.snapshot_mut().expect("trusted implies a mirror");
        if delta.is_empty() {
            mirror.model = desired;
            return Ok(SyncReport {
                changes: 0,
                drift_repairs: 0,
                summary: "no change".into(),
            });
        }
        let report = SyncReport {
            changes: delta.writes() as u64,
            drift_repairs: 0,
            summary: summarize(&delta),
        };
        let want = model::on_demand(&desired);
        if let Err(e) = self.add_on_demand(&want) {
            self.cache.forget();
            return Err(e);
        }
        let (failures, commit) = match self.write(&groups_of(&delta)) {
            Ok(x) => x,
            Err(e) => {
                // Whatever happened, the kernel is compared in full next time.
                self.cache.forget();
                return Err(e);
            }
        };
        self.conntrack_flush(&delta.udp_drained);
        if failures.is_empty() {
            self.generation = commit;
            let after =
                self.drop_on_demand(&want)
                    .and_then(|()| match delta.sticky_lost.is_empty() {
                        true => Ok(()),
                        false => self.sweep_sticky(&desired),
                    });
            if let Err(e) = after {
                self.cache.forget();
                return Err(e);
            }
            let mirror = self.cache.snapshot_mut().expect("trusted implies a mirror");
            mirror.commit(desired, &delta);
            return Ok(report);
        }
        // Some services were refused: what committed is not what the mirror can describe
        // cheaply, so the next sync compares everything with the kernel.
        self.cache.forget();
        joined(failures).into_result(report)
    }

    /// No services and no service CIDRs: no table at all (no NAT hooks registered for
    /// nothing).
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
            .socket()
            .table_exists(&self.table)
            .map_err(|e| nft_err("list tables", e))?
        {
            let mut batch = Batch::new();
            batch.table(&self.table, Op::Delete);
            self.commit(batch)
                .map_err(|e| nft_err("delete service table", e))?;
            changes = 1;
        }
        self.absent_at = Some(
            self.nft
                .generation()
                .map_err(|e| nft_err("nftables generation", e))?,
        );
        // The next sync with services installs the table (a full sync).
        self.cache.forget();
        self.deferral = Deferral::default();
        self.generation = None;
        self.fingerprints = None;
        self.on_demand = None;
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

    /// The full dump-and-diff (see the module docs); `None` when `stop` stopped it before it
    /// wrote anything (the mirror is put back, the compare stays due).
    fn full_sync(
        &mut self,
        against: Against,
        now: Instant,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<SyncReport>, SyncError> {
        let known = self.cache.take();
        // `None`: the desired model is the mirror's own (`known`'s).
        let mut owned = match against {
            Against::Model(m) => Some(m),
            Against::Mirror => None,
        };
        let table = self.table.clone();
        let exists = self
            .nft
            .socket()
            .table_exists(&table)
            .map_err(|e| nft_err("list tables", e))?;
        let structure = match exists {
            true => self.structure_ok().map_err(|e| nft_err("list table", e))?,
            false => None,
        };
        let mut drift = 0u64;
        let Some(have) = structure else {
            if known.is_some() {
                drift += 1;
            }
            let desired = match owned {
                Some(m) => m,
                None => known.map(|k| k.model).unwrap_or_default(),
            };
            return self.install(desired, drift).map(Some);
        };
        self.on_demand = Some(have);
        if known.is_none() {
            // Nothing committed known (a restart, a failed batch): the slots were planned
            // without the kernel's, so adopt the kernel's places; dealt afresh, they would
            // move the source-ip clients of backends that only changed place.
            let kernel = observe::kernel_slots(self.nft.socket(), &table)
                .map_err(|e| nft_err("list slots", e))?;
            if let Some(m) = owned.as_mut() {
                model::rebase_slots(m, &kernel);
            }
        }
        let empty = Model::new();
        let desired: &Model = match (&owned, &known) {
            (Some(m), _) => m,
            (None, Some(k)) => &k.model,
            // Not expected: a compare against the mirror is made only while there is one.
            (None, None) => &empty,
        };
        let want = model::on_demand(desired);
        self.add_on_demand(&want)?;
        // Structure intact: check every kernel element against the model; differences in
        // services the mirror holds unchanged are drift.
        let found =
            observe::verify_kernel_until(self.nft.socket(), &table, desired, known.as_ref(), stop)
                .map_err(|e| nft_err("list elements", e))?;
        let Some(mut found) = found else {
            // Stopped before writing anything: what this process committed is what it was.
            if let Some(known) = known {
                self.cache.put_back(known);
            }
            return Ok(None);
        };
        drift += found.drift;
        let changes = (found.strays.len() + found.missing.len()) as u64;
        let udp_gone = std::mem::take(&mut found.udp_gone);
        let mut groups: BTreeMap<Option<VipKey>, ServiceChange> = BTreeMap::new();
        for (set, el) in found.strays {
            let key = vip_of(set, &el);
            group(&mut groups, key, desired).deletes.push((set, el));
        }
        for (set, el) in found.missing {
            let key = vip_of(set, &el);
            group(&mut groups, key, desired).adds.push((set, el));
        }
        let groups: Vec<ServiceChange> = groups.into_values().collect();
        let (failures, commit) = self.write(&groups)?;
        let report = SyncReport {
            changes,
            drift_repairs: drift,
            summary: format!("full compare: {changes} element writes, {drift} drift repairs"),
        };
        if drift > 0 {
            super::metrics::record_drift_repairs(drift);
        }
        // Found in the kernel, not in the mirror (a restart, a failed sync, a change while
        // no one watched): a UDP backend's conntrack entries go with its last slot all the
        // same.
        self.conntrack_flush(&udp_gone);
        if !failures.is_empty() {
            return joined(failures).into_result(report).map(Some);
        }
        self.drop_on_demand(&want)?;
        // Clients remembered with a backend that is no longer a live one of their sticky
        // service (changed while no one watched, or a sweep that failed) are forgotten.
        self.sweep_sticky(desired)?;
        self.generation = match commit {
            Some(g) => Some(g),
            None => Some(
                self.nft
                    .generation()
                    .map_err(|e| nft_err("nftables generation", e))?,
            ),
        };
        // Compared against the mirror's own model, the mirror is right as it is: its shared
        // counts need no counting again.
        let mirror = match (owned, known) {
            (Some(m), _) => Mirror::of(m),
            (None, Some(k)) => k,
            (None, None) => Mirror::of(Model::new()),
        };
        self.cache.store_verified(mirror, true, now);
        Ok(Some(report))
    }

    /// Replaces the whole table with the skeleton and every desired element (one batch).
    fn install(&mut self, desired: Model, drift: u64) -> Result<SyncReport, SyncError> {
        let mut batch = self.skeleton_batch(&model::on_demand(&desired))?;
        let elements = stream_elements(&mut batch, &self.table, &desired)
            .map_err(|e| nft_err("compile service elements", e.into()))?;
        let commit = match self.commit(batch) {
            Ok(c) => c,
            Err(NftError::Rejected(_)) => {
                // One or more services refused: install the bare skeleton, then add the
                // services by delta with isolation.
                return self.install_isolated(desired, drift);
            }
            Err(e) => return Err(nft_err("install service table", e)),
        };
        self.after_install(desired, commit.generation)?;
        if drift > 0 {
            super::metrics::record_drift_repairs(drift);
        }
        Ok(SyncReport {
            changes: elements as u64 + 1,
            drift_repairs: drift,
            summary: format!("installed table with {elements} elements"),
        })
    }

    fn install_isolated(&mut self, desired: Model, drift: u64) -> Result<SyncReport, SyncError> {
        let want = model::on_demand(&desired);
        let batch = self.skeleton_batch(&want)?;
        let commit = self
            .commit(batch)
            .map_err(|e| nft_err("install service table", e))?;
        self.after_install(Model::new(), commit.generation)?;
        self.on_demand = Some(want);
        let mirror = self.cache.snapshot().expect("just installed");
        let delta = mirror.diff(&desired);
        let groups = groups_of(&delta);
        let (failures, _) = self.write(&groups)?;
        self.cache.forget(); // compare with the kernel next time
        joined(failures).into_result(SyncReport {
            changes: delta.writes() as u64 + 1,
            drift_repairs: drift,
            summary: "installed table; some services refused".into(),
        })
    }

    fn after_install(&mut self, desired: Model, generation: u32) -> Result<(), SyncError> {
        self.on_demand = Some(model::on_demand(&desired));
        self.fingerprints = Some(
            self.fingerprints_now()
                .map_err(|e| nft_err("list rules", e))?,
        );
        self.cache
            .store_verified(Mirror::of(desired), true, Instant::now());
        self.generation = Some(generation);
        Ok(())
    }
}

/// What a full compare checks the kernel against.
enum Against {
    /// This model.
    Model(Model),
    /// The mirror's own model (the periodic compare, with no change to go first): not a copy
    /// of it, which at 5,000 services was 1.5 MB of the daemon's peak (issue 24).
    Mirror,
}

fn summarize(delta: &Delta) -> String {
    let n = delta.services.len();
    format!("{n} services changed, {} element writes", delta.writes())
}
