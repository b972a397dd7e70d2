//! Plan: what was committed (the mirror, the cache's snapshot) against what is desired, as
//! element deletes and adds that touch only the services that changed.
//!
//! Pure and deterministic: services in key order, slots in slot order, deletes before adds
//! of the same key. Shared `masquerade` elements are reference-counted over services.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::config::service::Protocol;
use crate::dataplane::nft::ir::Element;

use super::layout::{self, MasqKey, SetId};
use super::model::{Action, Entry, Model, Selection, VipKey};

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
    /// Shared `masquerade` elements whose reference count crossed zero.
    pub masquerade: ServiceChange,
    /// Reference count changes to apply to the mirror after a commit.
    pub masq_refs: BTreeMap<MasqKey, i64>,
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
            .chain(std::iter::once(&self.masquerade))
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
    /// Committed services.
    pub model: Model,
    /// How many committed masquerading services use each `masquerade` element.
    pub masq_refs: BTreeMap<MasqKey, u32>,
}

fn masq_keys(key: &VipKey, e: &Entry) -> Vec<MasqKey> {
    if !e.masquerade {
        return Vec::new();
    }
    e.backends()
        .into_iter()
        .map(|backend| MasqKey {
            backend,
            proto: key.proto.number(),
        })
        .collect()
}

/// Reference counts of `masquerade` elements for a whole model.
pub fn masq_refs(model: &Model) -> BTreeMap<MasqKey, u32> {
    let mut refs = BTreeMap::new();
    for (k, e) in model {
        for m in masq_keys(k, e) {
            *refs.entry(m).or_insert(0) += 1;
        }
    }
    refs
}

fn slots(e: &Entry) -> &[SocketAddr] {
    match &e.action {
        Action::Balance { slots, .. } => slots,
        _ => &[],
    }
}

/// What a service's entry does, as `plan` prints it.
pub(super) fn describe(e: &Entry) -> String {
    let mut s = match &e.action {
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
            format!("{how} over {} slots: {}", slots.len(), list.join(" "))
        }
        Action::Reject => "no backend: reject".into(),
        Action::Drop => "no backend: drop".into(),
    };
    if e.masquerade {
        s.push_str(", masquerade");
    }
    s
}

impl Mirror {
    /// The mirror of a committed model.
    pub fn of(model: Model) -> Mirror {
        Mirror {
            masq_refs: masq_refs(&model),
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
        for (m, d) in &delta.masq_refs {
            let before = self.masq_refs.get(m).copied().unwrap_or(0) as i64;
            let after = before + d;
            if before == 0 && after > 0 {
                delta.masquerade.adds.push(layout::masquerade_element(m));
            } else if before > 0 && after <= 0 {
                delta.masquerade.deletes.push(layout::masquerade_element(m));
            }
        }
        if !delta.masquerade.adds.is_empty() || !delta.masquerade.deletes.is_empty() {
            delta.masquerade.name = "masquerade".into();
            delta.masquerade.summary = format!(
                "~ masquerade: +{} -{} backends",
                delta.masquerade.adds.len(),
                delta.masquerade.deletes.len()
            );
        }
        delta
    }

    /// Records a committed delta: the mirror becomes `desired`.
    pub fn commit(&mut self, desired: Model, delta: &Delta) {
        for (m, d) in &delta.masq_refs {
            let n = self.masq_refs.get(m).copied().unwrap_or(0) as i64 + d;
            if n > 0 {
                self.masq_refs.insert(*m, n as u32);
            } else {
                self.masq_refs.remove(m);
            }
        }
        self.model = desired;
    }
}

impl Delta {
    /// A sticky service's recorder element, and the backends whose remembered clients must
    /// be forgotten: those it had while sticky and no longer has as a sticky service.
    fn sticky_change(
        &mut self,
        c: &mut ServiceChange,
        k: &VipKey,
        old: Option<&Entry>,
        new: Option<&Entry>,
    ) {
        let old_sticky = old.and_then(|o| layout::sticky_vip_element(k, o));
        let new_sticky = new.and_then(|n| layout::sticky_vip_element(k, n));
        if old_sticky != new_sticky {
            if old_sticky.is_some() {
                c.deletes.push(layout::sticky_vip_key(k));
            }
            if let Some(el) = new_sticky {
                c.adds.push(el);
            }
        }
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
        // The verdict element.
        let old_verdict = old.map(|o| layout::verdict(k, o));
        let new_verdict = new.map(|n| layout::verdict(k, n));
        if old_verdict != new_verdict {
            if old.is_some() {
                c.deletes.push(layout::service_key(k));
            }
            if let Some(n) = new {
                c.adds.push(layout::service_element(k, n));
            }
        }
        self.sticky_change(&mut c, k, old, new);
        // The slots.
        let (os, ns) = (old.map(slots).unwrap_or(&[]), new.map(slots).unwrap_or(&[]));
        for i in 0..os.len().max(ns.len()) {
            match (os.get(i), ns.get(i)) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => {
                    if a.is_some() {
                        c.deletes.push(layout::slot_key(k, i as u32));
                    }
                    if let Some(b) = b {
                        c.adds.push(layout::slot_element(k, i as u32, *b));
                    }
                }
            }
        }
        // Shared masquerade elements and UDP conntrack cleanup.
        let old_masq = old.map(|o| masq_keys(k, o)).unwrap_or_default();
        let new_masq = new.map(|n| masq_keys(k, n)).unwrap_or_default();
        for m in &old_masq {
            *self.masq_refs.entry(*m).or_insert(0) -= 1;
        }
        for m in &new_masq {
            *self.masq_refs.entry(*m).or_insert(0) += 1;
        }
        self.masq_refs.retain(|_, d| *d != 0);
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
