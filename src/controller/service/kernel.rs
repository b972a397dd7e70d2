//! Apply: the only part of the service controller that talks to the kernel.
//!
//! A sync is incremental (the mirror's delta, one batch) unless a full compare is due: at
//! startup, after a failed batch, when the ruleset generation moved since our last commit,
//! and once per period. The full compare checks the table's structure (sets, chains, rules
//! by fingerprint) and dumps every element; a broken structure replaces the table in one
//! atomic batch, stray or missing elements are fixed by delta. Either way, what differs
//! from what this process had committed counts as drift.
//!
//! A refused batch is retried with each service's messages tagged, so the services the
//! kernel refuses are found, left out, and reported together while the rest is committed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::controller::{SyncError, SyncReport};
use crate::dataplane::nft::ir::{Element, Table};
use crate::dataplane::nft::{Batch, Nft, NftError, Op, TableRef, monitor, render};

use super::diff::{Delta, Mirror, ServiceChange, masq_refs};
use super::layout::{self, SetId};
use super::model::{Model, VipKey};
use super::verify;

/// A set as compared: name, key type id and length, map data type id and length.
type SetShape = (String, u32, u32, Option<(u32, u32)>);
/// Refused objects with the reason, and the generation after the last successful commit.
type WriteOutcome = (Vec<(String, String)>, Option<u32>);

/// Tag of messages that belong to no single service (table structure, masquerade).
const TAG_SHARED: u32 = u32::MAX - 1;

/// Kernel-side state of the controller: the socket, the mirror and what we last saw.
pub struct Kernel {
    /// Our table.
    pub table: TableRef,
    nft: Nft,
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
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn nft_err(what: &str, e: NftError) -> SyncError {
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

    /// Writes the groups in one batch; when the kernel refuses it, finds the refused groups
    /// with a tagged retry and commits the others. Returns the refused objects with the
    /// reason, and the generation after the last successful commit.
    fn write(&mut self, groups: &[ServiceChange]) -> Result<WriteOutcome, SyncError> {
        if groups
            .iter()
            .all(|g| g.deletes.is_empty() && g.adds.is_empty())
        {
            return Ok((Vec::new(), None));
        }
        let batch = self.grouped_batch(groups.iter())?;
        match self.nft.execute(batch) {
            Ok(c) => {
                self.last_writes += c.messages as u64;
                return Ok((Vec::new(), Some(c.generation)));
            }
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
        let refused = match self.nft.execute(batch) {
            Ok(c) => {
                self.last_writes += c.messages as u64;
                return Ok((Vec::new(), Some(c.generation)));
            }
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
        match self.nft.execute(batch) {
            Ok(c) => {
                self.last_writes += c.messages as u64;
                Ok((failures, Some(c.generation)))
            }
            Err(e) => {
                let mut all = failures;
                all.push(("service elements".into(), e.to_string()));
                Ok((all, None))
            }
        }
    }

    fn grouped_batch<'a>(
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

fn add_ops(
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

fn vip_of(set: SetId, el: &Element) -> Option<VipKey> {
    use crate::config::service::Protocol;
    use crate::dataplane::nft::ir::{ElemKey, Value};
    if matches!(set, SetId::Masquerade4 | SetId::Masquerade6) {
        return None;
    }
    let ElemKey::Value(Value::Concat(parts)) = &el.key else {
        return None;
    };
    let addr = match parts.first()? {
        Value::Ipv4(a) => (*a).into(),
        Value::Ipv6(a) => (*a).into(),
        _ => return None,
    };
    let proto = match parts.get(1)? {
        Value::Proto(6) => Protocol::Tcp,
        Value::Proto(17) => Protocol::Udp,
        _ => return None,
    };
    let Value::Port(port) = parts.get(2)? else {
        return None;
    };
    Some(VipKey {
        addr,
        proto,
        port: *port,
    })
}

fn group<'a>(
    groups: &'a mut BTreeMap<Option<VipKey>, ServiceChange>,
    key: Option<VipKey>,
    desired: &Model,
) -> &'a mut ServiceChange {
    groups.entry(key).or_insert_with(|| ServiceChange {
        key,
        name: match key {
            Some(k) => desired
                .get(&k)
                .map(|e| e.name.clone())
                .unwrap_or_else(|| "(removed)".into()),
            None => "masquerade".into(),
        },
        ..Default::default()
    })
}

/// Every element of `model`, set by set, in model order.
fn each_element(model: &Model, mut f: impl FnMut(SetId, Element)) {
    for (k, e) in model {
        let (s, el) = layout::service_element(k, e);
        f(s, el);
        if let super::model::Action::Balance { slots, .. } = &e.action {
            for (i, b) in slots.iter().enumerate() {
                let (s, el) = layout::slot_element(k, i as u32, *b);
                f(s, el);
            }
        }
    }
    for m in masq_refs(model).keys() {
        let (s, el) = layout::masquerade_element(m);
        f(s, el);
    }
}

/// Adds every element of `model` to `batch` in chunks, so a cold install never holds all of
/// them as IR at once. Returns the element count.
fn stream_elements(
    batch: &mut Batch,
    table: &TableRef,
    model: &Model,
) -> Result<usize, crate::dataplane::nft::CompileError> {
    const CHUNK: usize = 2000;
    let defs: Vec<_> = SetId::ALL.iter().map(|s| s.definition()).collect();
    let mut pending: Vec<Vec<Element>> = vec![Vec::new(); SetId::ALL.len()];
    let mut count = 0;
    let mut result = Ok(());
    each_element(model, |s, el| {
        count += 1;
        let list = &mut pending[s.index()];
        list.push(el);
        if list.len() >= CHUNK && result.is_ok() {
            result = batch.elements(table, &defs[s.index()], list, Op::Add);
            list.clear();
        }
    });
    result?;
    for (i, list) in pending.iter().enumerate() {
        if !list.is_empty() {
            batch.elements(table, &defs[i], list, Op::Add)?;
        }
    }
    Ok(count)
}

/// The skeleton with every desired element (the text a cold install is equivalent to).
pub fn full_table(name: &str, model: &Model) -> Table {
    let mut t = layout::skeleton(name);
    each_element(model, |s, el| t.sets[s.index()].elements.push(el));
    t
}

/// The layout as loadable `nft -f` text: nft's text syntax cannot type a numgen/jhash slot
/// as `mark`, so the backends maps are written with `typeof` (same kernel bytes).
pub fn render_text(table: &Table) -> String {
    render::render_table(table)
        .replace(
            "type ipv4_addr . inet_proto . inet_service . mark : ipv4_addr . inet_service",
            "typeof ip daddr . meta l4proto . th dport . numgen random mod 16 : ip daddr . th dport",
        )
        .replace(
            "type ipv6_addr . inet_proto . inet_service . mark : ipv6_addr . inet_service",
            "typeof ip6 daddr . meta l4proto . th dport . numgen random mod 16 : ip6 daddr . th dport",
        )
}

/// `plan`: the service changes against the running kernel, then the layout's text.
pub fn plan(nft: &mut Nft, table: &TableRef, desired: &Model) -> Result<String, NftError> {
    let mut out = String::new();
    let exists = nft.table_exists(table)?;
    if desired.is_empty() && !exists {
        // No services and no table: nothing to say (and no layout to show).
        return Ok(out);
    }
    let mut lines: Vec<String> = Vec::new();
    if desired.is_empty() {
        if exists {
            lines.push(format!("- table inet {} (no services)", table.name));
        }
    } else if !exists {
        lines.push(format!("+ table inet {}", table.name));
        let d = Mirror::default().diff(desired);
        lines.extend(d.services.iter().map(|c| c.summary.clone()));
    } else {
        let found = verify::verify_kernel(nft, table, desired, None)?;
        let mut per: BTreeMap<Option<VipKey>, (usize, usize)> = BTreeMap::new();
        for (set, el) in &found.strays {
            per.entry(vip_of(*set, el)).or_default().0 += 1;
        }
        for (set, el) in &found.missing {
            per.entry(vip_of(*set, el)).or_default().1 += 1;
        }
        for (k, (del, add)) in per {
            lines.push(match (k, k.and_then(|k| desired.get(&k))) {
                (Some(k), None) => format!("- service {k}: delete {del} elements"),
                (Some(k), Some(e)) if del == 0 => {
                    format!("+ service {} {k}: add {add} elements", e.name)
                }
                (Some(k), Some(e)) => {
                    format!("~ service {} {k}: delete {del}, add {add} elements", e.name)
                }
                (None, _) => format!("~ masquerade: delete {del}, add {add} elements"),
            });
        }
    }
    out.push_str(&format!(
        "service: table inet {} ({} services)\n",
        table.name,
        desired.len()
    ));
    if lines.is_empty() {
        out.push_str("  no changes\n");
    }
    for l in lines {
        out.push_str("  ");
        out.push_str(&l);
        out.push('\n');
    }
    if !desired.is_empty() {
        out.push_str("service: layout (nft syntax; services are elements of the maps):\n");
        out.push_str(&render_text(&layout::skeleton(&table.name)));
    }
    Ok(out)
}

/// `cleanup`: deletes the table if it exists.
pub fn cleanup(nft: &mut Nft, table: &TableRef) -> Result<String, NftError> {
    if !nft.table_exists(table)? {
        return Ok(format!("service: table inet {} absent\n", table.name));
    }
    let mut batch = Batch::new();
    batch.table(table, Op::Delete);
    nft.execute(batch)?;
    Ok(format!("service: deleted table inet {}\n", table.name))
}
