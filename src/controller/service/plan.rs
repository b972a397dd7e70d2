//! Plan: what was committed (the mirror, the cache's snapshot) against what is desired, as
//! element deletes and adds that touch only the services that changed.
//!
//! Pure and deterministic: services in key order, slots in slot order, deletes before adds
//! of the same key. Elements shared by the entries of one address or backend (hairpin,
//! unserved, owned) are reference-counted over entries; the cluster and service prefixes
//! are diffed as lists. Nothing here keys by name: the entries of one Kubernetes Service
//! port share one.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use ipnet::IpNet;

use crate::config::service::Protocol;
use crate::dataplane::nft::ir::{ElemKey, Element};

use super::layout::{self, INTERNAL_SLOT_BASE, SetId, Shared};
use super::model::{Action, Entry, MasqPath, Model, Selection, VipKey, slots_of};

/// One service's element changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceChange {
    /// The service (key and name), for reports and joined errors.
    pub key: Option<VipKey>,
    /// The name as configured (or as last committed, for a removed service).
    pub name: String,
    /// `+ name`, `- name` or `~ name` plus what changed (plan output).
    pub summary: String,
    /// Elements to delete (keys only), in order.
    pub deletes: Vec<(SetId, Element)>,
    /// Elements to add, in order.
    pub adds: Vec<(SetId, Element)>,
}

/// Everything one sync writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// Per changed service, in key order.
    pub services: Vec<ServiceChange>,
    /// Shared elements whose reference count crossed zero, and changed prefixes.
    pub shared: ServiceChange,
    /// Reference count changes to apply to the mirror after a commit.
    pub shared_refs: BTreeMap<Shared, i64>,
    /// UDP backends that lost every slot of a service (their conntrack entries must go).
    pub udp_drained: Vec<(VipKey, SocketAddr)>,
    /// Backends a sticky service stopped using (removed, drained, down, or the service is no
    /// longer sticky): clients remembered with them must be forgotten.
    pub sticky_lost: Vec<(VipKey, SocketAddr)>,
}

impl Delta {
    /// Number of element writes.
    pub fn writes(&self) -> usize {
        self.services
            .iter()
            .chain(std::iter::once(&self.shared))
            .map(|c| c.deletes.len() + c.adds.len())
            .sum()
    }

    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.writes() == 0
    }
}

/// What is committed in the kernel (as far as this process knows).
#[derive(Debug, Clone, Default)]
pub struct Mirror {
    /// Committed services and prefixes.
    pub model: Model,
    /// How many committed entries use each shared element.
    pub shared_refs: BTreeMap<Shared, u32>,
}

/// Reference counts of the shared elements of a whole model.
pub fn shared_refs(model: &Model) -> BTreeMap<Shared, u32> {
    let mut refs = BTreeMap::new();
    for (k, e) in model.iter() {
        for m in layout::shared_keys(k, e) {
            *refs.entry(m).or_insert(0) += 1;
        }
    }
    refs
}

/// The `backends` slots of an entry: (slot number, backend), the internal ones from
/// [`INTERNAL_SLOT_BASE`].
pub fn all_slots(e: &Entry) -> Vec<(u32, SocketAddr)> {
    let mut v: Vec<(u32, SocketAddr)> = slots_of(&e.action)
        .iter()
        .enumerate()
        .map(|(i, b)| (i as u32, *b))
        .collect();
    if let Some(internal) = &e.internal {
        v.extend(
            slots_of(internal)
                .iter()
                .enumerate()
                .map(|(i, b)| (INTERNAL_SLOT_BASE + i as u32, *b)),
        );
    }
    v
}

fn describe_action(a: &Action) -> String {
    match a {
        Action::Balance { selection, slots } => {
            let mut counts: BTreeMap<SocketAddr, usize> = BTreeMap::new();
            for b in slots {
                *counts.entry(*b).or_insert(0) += 1;
            }
            let list: Vec<String> = counts.iter().map(|(b, n)| format!("{b}×{n}")).collect();
            let how = match selection {
                Selection::Random => "random".to_string(),
                Selection::SourceHash => "source-ip".to_string(),
                Selection::Sticky { timeout } => format!("sticky {timeout}s, else random"),
            };
            let unit = if slots.len() == 1 { "slot" } else { "slots" };
            format!("{how} over {} {unit}: {}", slots.len(), list.join(" "))
        }
        Action::Reject => "no backend: reject".into(),
        Action::Drop => "no backend: drop".into(),
    }
}

/// What a service's entry does, as `plan` prints it.
pub(super) fn describe(e: &Entry) -> String {
    let mut s = describe_action(&e.action);
    if let Some(i) = &e.internal {
        s.push_str(&format!("; cluster and this node: {}", describe_action(i)));
    }
    match e.masquerade {
        MasqPath::Never => {}
        MasqPath::Always => s.push_str(", masquerade"),
        MasqPath::OffCluster => s.push_str(", masquerade off-cluster sources"),
    }
    if let Some(r) = &e.source_ranges {
        let list: Vec<String> = r.iter().map(|n| n.to_string()).collect();
        s.push_str(&format!(", sources {{{}}} and this node", list.join(", ")));
    }
    if e.reject_unserved_ports {
        s.push_str(", other ports rejected");
    }
    s
}

impl Mirror {
    /// The mirror of a committed model.
    pub fn of(model: Model) -> Mirror {
        Mirror {
            shared_refs: shared_refs(&model),
            model,
        }
    }

    /// The changes that turn the committed state into `desired`.
    pub fn diff(&self, desired: &Model) -> Delta {
        let mut delta = Delta::default();
        let mut old_it = self.model.iter().peekable();
        let mut new_it = desired.iter().peekable();
        loop {
            let pick = match (old_it.peek(), new_it.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((a, _)), Some((b, _))) => a.cmp(b),
            };
            match pick {
                std::cmp::Ordering::Less => {
                    let (k, old) = old_it.next().unwrap();
                    delta.change(k, Some(old), None);
                }
                std::cmp::Ordering::Greater => {
                    let (k, new) = new_it.next().unwrap();
                    delta.change(k, None, Some(new));
                }
                std::cmp::Ordering::Equal => {
                    let (k, old) = old_it.next().unwrap();
                    let (_, new) = new_it.next().unwrap();
                    if old != new {
                        delta.change(k, Some(old), Some(new));
                    }
                }
            }
        }
        self.shared_changes(desired, delta)
    }

    /// [`Mirror::diff`] when only the entries of `keys` may differ (the service controller
    /// knows which it built again): the same delta, found without comparing the others.
    pub fn diff_keys(&self, desired: &Model, keys: &BTreeSet<VipKey>) -> Delta {
        let mut delta = Delta::default();
        // In key order, as the full diff walks them.
        for k in keys {
            match (self.model.get(k), desired.get(k)) {
                (None, None) => {}
                (old, new) if old != new => delta.change(k, old, new),
                _ => {}
            }
        }
        self.shared_changes(desired, delta)
    }

    /// The shared elements whose reference count crosses zero with `delta`'s entry changes,
    /// and the prefix changes.
    fn shared_changes(&self, desired: &Model, mut delta: Delta) -> Delta {
        let (mut added, mut removed) = (0, 0);
        for (m, d) in &delta.shared_refs {
            let before = self.shared_refs.get(m).copied().unwrap_or(0) as i64;
            let after = before + d;
            if before == 0 && after > 0 {
                delta.shared.adds.push(m.element());
                added += 1;
            } else if before > 0 && after <= 0 {
                delta.shared.deletes.push(m.element());
                removed += 1;
            }
        }
        for (cluster, old, new) in [
            (true, &self.model.cluster_cidrs, &desired.cluster_cidrs),
            (false, &self.model.service_cidrs, &desired.service_cidrs),
        ] {
            prefix_change(&mut delta.shared, cluster, old, new);
        }
        if !delta.shared.adds.is_empty() || !delta.shared.deletes.is_empty() {
            delta.shared.name = "shared".into();
            delta.shared.summary = format!(
                "~ shared: +{added} -{removed} address elements; cluster {:?} service {:?}",
                desired
                    .cluster_cidrs
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>(),
                desired
                    .service_cidrs
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
            );
        }
        delta
    }

    /// Records a committed delta: the mirror becomes `desired`.
    pub fn commit(&mut self, desired: Model, delta: &Delta) {
        for (m, d) in &delta.shared_refs {
            let n = self.shared_refs.get(m).copied().unwrap_or(0) as i64 + d;
            if n > 0 {
                self.shared_refs.insert(*m, n as u32);
            } else {
                self.shared_refs.remove(m);
            }
        }
        self.model = desired;
    }
}

/// The prefix elements that turn `old` into `new` (both normalized: none inside another, so
/// each is one kernel interval).
fn prefix_change(c: &mut ServiceChange, cluster: bool, old: &[IpNet], new: &[IpNet]) {
    for n in old.iter().filter(|n| !new.contains(n)) {
        c.deletes.push(layout::cidr_element(cluster, *n));
    }
    for n in new.iter().filter(|n| !old.contains(n)) {
        c.adds.push(layout::cidr_element(cluster, *n));
    }
}

fn same_key(a: &(SetId, Element), b: &(SetId, Element)) -> bool {
    a.0 == b.0 && a.1.key == b.1.key
}

fn key_only(el: &(SetId, Element)) -> (SetId, Element) {
    (el.0, Element::key(el.1.key.clone()))
}

impl Delta {
    /// The backends whose remembered clients must be forgotten: those a sticky service had
    /// and no longer has as a sticky service.
    fn sticky_change(&mut self, k: &VipKey, old: Option<&Entry>, new: Option<&Entry>) {
        if let Some(o) = old.filter(|o| o.sticky_timeout().is_some()) {
            let keep = new
                .filter(|n| n.sticky_timeout().is_some())
                .map(|n| n.backends())
                .unwrap_or_default();
            for b in o.backends() {
                if keep.binary_search(&b).is_err() {
                    self.sticky_lost.push((*k, b));
                }
            }
        }
    }

    fn change(&mut self, k: &VipKey, old: Option<&Entry>, new: Option<&Entry>) {
        let mut c = ServiceChange {
            key: Some(*k),
            name: new.or(old).map(|e| e.name.clone()).unwrap_or_default(),
            ..Default::default()
        };
        c.summary = match (old, new) {
            (None, Some(n)) => format!("+ service {} {k}: {}", c.name, describe(n)),
            (Some(o), None) => format!("- service {} {k} (was {})", c.name, describe(o)),
            (Some(o), Some(n)) => {
                format!(
                    "~ service {} {k}: {} -> {}",
                    c.name,
                    describe(o),
                    describe(n)
                )
            }
            (None, None) => String::new(),
        };
        // The entry's own elements: verdicts, sticky recorder, masquerade path, short-circuit,
        // fence. A changed value is a delete and an add of its key.
        let old_els = old
            .map(|o| layout::entry_elements(k, o))
            .unwrap_or_default();
        let new_els = new
            .map(|n| layout::entry_elements(k, n))
            .unwrap_or_default();
        for o in &old_els {
            if !new_els.iter().any(|n| n == o) {
                c.deletes.push(key_only(o));
            }
        }
        for n in &new_els {
            if !old_els.iter().any(|o| o == n) {
                c.adds.push(n.clone());
            }
        }
        debug_assert!(
            c.adds
                .iter()
                .all(|a| !old_els.iter().any(|o| same_key(o, a) && o != a)
                    || c.deletes.iter().any(|d| same_key(d, a)))
        );
        self.sticky_change(k, old, new);
        // The slots (the service's, then the internal ones).
        let os = old.map(all_slots).unwrap_or_default();
        let ns = new.map(all_slots).unwrap_or_default();
        let (mut i, mut j) = (0, 0);
        while i < os.len() || j < ns.len() {
            match (os.get(i), ns.get(j)) {
                (Some(a), Some(b)) if a.0 == b.0 => {
                    if a.1 != b.1 {
                        c.deletes.push(layout::slot_key(k, a.0));
                        c.adds.push(layout::slot_element(k, b.0, b.1));
                    }
                    i += 1;
                    j += 1;
                }
                (Some(a), b) if b.is_none_or(|b| a.0 < b.0) => {
                    c.deletes.push(layout::slot_key(k, a.0));
                    i += 1;
                }
                (_, Some(b)) => {
                    c.adds.push(layout::slot_element(k, b.0, b.1));
                    j += 1;
                }
                (Some(_), None) | (None, None) => unreachable!(),
            }
        }
        // Shared elements and UDP conntrack cleanup.
        for m in old.map(|o| layout::shared_keys(k, o)).unwrap_or_default() {
            *self.shared_refs.entry(m).or_insert(0) -= 1;
        }
        for m in new.map(|n| layout::shared_keys(k, n)).unwrap_or_default() {
            *self.shared_refs.entry(m).or_insert(0) += 1;
        }
        self.shared_refs.retain(|_, d| *d != 0);
        if k.proto == Protocol::Udp {
            let keep = new.map(|n| n.backends()).unwrap_or_default();
            for b in old.map(|o| o.backends()).unwrap_or_default() {
                if keep.binary_search(&b).is_err() {
                    self.udp_drained.push((*k, b));
                }
            }
        }
        if !c.deletes.is_empty() || !c.adds.is_empty() {
            self.services.push(c);
        }
    }
}

/// The element of a prefix, for callers outside the plan (the full compare's repairs).
pub fn prefix_element(cluster: bool, net: IpNet) -> (SetId, Element) {
    layout::cidr_element(cluster, net)
}

/// True when `el` is a prefix element (an interval set's).
pub fn is_prefix(el: &Element) -> bool {
    matches!(el.key, ElemKey::Prefix(_) | ElemKey::Range(..))
}
