//! Observe: reading the service table back from the kernel. The structure check (sets,
//! chains, rules by fingerprint) and the full compare: the kernel's elements checked against
//! the desired model, one kernel element at a time, without materializing the desired
//! elements (at 10k services that is 170k elements; building them twice over cost a few
//! hundred MiB).
//!
//! Each kernel element is decoded back into its service (and slot), and its value compared
//! with what the model says. What does not match is a stray (deleted by key); whatever the
//! model has that no kernel element matched is missing (added). What differs for a service
//! whose entry the mirror also holds unchanged is drift.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};

use crate::dataplane::nft::ir::{ElemKey, Element, Value, Verdict};
use crate::dataplane::nft::{ElemInfo, NftError};

use super::Kernel;
use super::layout::{self, MasqKey, SetId};
use super::model::{Action, Entry, Model, VipKey};
use super::plan::{Mirror, masq_refs};

/// The (timeout, family) pairs of recorder chains.
pub(super) type Recorders = std::collections::BTreeSet<(u32, bool)>;

/// A set as compared: name, key type id and length, map data type id and length.
type SetShape = (String, u32, u32, Option<(u32, u32)>);

impl Kernel {
    pub(super) fn fingerprints_now(&mut self) -> Result<Vec<(String, String)>, NftError> {
        Ok(self
            .nft
            .list_rules(&self.table)?
            .into_iter()
            .map(|r| (r.chain, r.fingerprint))
            .collect())
    }

    /// When sets, chains and rules are what the skeleton installs with the recorder chains
    /// the kernel has, those recorders' (timeout, family) pairs; `None` when anything differs.
    pub(super) fn structure_ok(&mut self) -> Result<Option<Recorders>, NftError> {
        let mut chains: Vec<String> = self
            .nft
            .list_chains(&self.table)?
            .into_iter()
            .map(|c| c.name)
            .collect();
        let recorders: Recorders = chains
            .iter()
            .filter_map(|c| layout::parse_recorder_chain(c))
            .collect();
        let skeleton = layout::skeleton_with(&self.table.name, &recorders, self.local);
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
            return Ok(None);
        }
        let mut want_chains: Vec<String> = skeleton.chains.iter().map(|c| c.name.clone()).collect();
        chains.sort();
        want_chains.sort();
        if chains != want_chains {
            return Ok(None);
        }
        let rules = self.fingerprints_now()?;
        match &self.fingerprints {
            Some(f) => Ok((*f == rules).then_some(recorders)),
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
                Ok(ok.then_some(recorders))
            }
        }
    }
}

/// Kernel verdict codes (`NFT_GOTO`, `NF_DROP`).
const NFT_GOTO: i32 = -4;
const NF_DROP: i32 = 0;

/// What the kernel has that it should not, and lacks.
#[derive(Debug, Default)]
pub struct Findings {
    /// Elements to delete (keys only).
    pub strays: Vec<(SetId, Element)>,
    /// Elements to add.
    pub missing: Vec<(SetId, Element)>,
    /// Differences in services (and masquerade elements) the mirror says were committed as
    /// they are still desired: changed behind our back.
    pub drift: u64,
}

#[derive(Default)]
struct Seen {
    verdict: bool,
    sticky: bool,
    slots: Vec<bool>,
}

/// The service (and slot) of a `services` or `backends` key, read straight from the bytes.
fn decode_vip(set: SetId, key: &[u8]) -> Option<(VipKey, Option<u32>)> {
    use crate::config::service::Protocol;
    if matches!(set, SetId::Masquerade4 | SetId::Masquerade6) {
        return None;
    }
    let k = layout::key_parts(set, key)?;
    let proto = match k.proto {
        6 => Protocol::Tcp,
        17 => Protocol::Udp,
        _ => return None,
    };
    let vip = VipKey {
        addr: k.addr,
        proto,
        port: k.port,
    };
    Some((vip, k.slot))
}

/// True when map data `d` (address, then the port padded to 4 bytes) is backend `b`.
fn backend_matches(d: &[u8], b: &SocketAddr) -> bool {
    let alen = match b.ip() {
        IpAddr::V4(a) => {
            if d.len() != 8 || d[..4] != a.octets() {
                return false;
            }
            4
        }
        IpAddr::V6(a) => {
            if d.len() != 20 || d[..16] != a.octets() {
                return false;
            }
            16
        }
    };
    d[alen..alen + 2] == b.port().to_be_bytes()
}

fn verdict_matches(info: &ElemInfo, want: &Verdict) -> bool {
    let code = info
        .data
        .as_ref()
        .and_then(|d| d.get(..4))
        .map(|d| i32::from_ne_bytes([d[0], d[1], d[2], d[3]]));
    match want {
        Verdict::Goto(chain) => code == Some(NFT_GOTO) && info.chain.as_deref() == Some(chain),
        Verdict::Drop => code == Some(NF_DROP) && info.chain.is_none(),
        _ => false,
    }
}

fn unchanged(believed: Option<&Mirror>, k: &VipKey, e: Option<&Entry>) -> bool {
    believed.is_some_and(|m| m.model.get(k) == e)
}

/// Checks kernel elements, fed one at a time, against the desired model.
pub struct Verifier<'a> {
    desired: &'a Model,
    believed: Option<&'a Mirror>,
    /// Strays with whether each counts as drift.
    strays: Vec<(SetId, Element, bool)>,
    seen: HashMap<VipKey, Seen>,
    want_masq: BTreeMap<MasqKey, u32>,
    seen_masq: BTreeMap<MasqKey, bool>,
}

impl<'a> Verifier<'a> {
    /// A verifier of the kernel against `desired`; `believed` is what this process committed
    /// (differences in services it holds unchanged are drift).
    pub fn new(desired: &'a Model, believed: Option<&'a Mirror>) -> Verifier<'a> {
        Verifier {
            desired,
            believed,
            strays: Vec::new(),
            seen: HashMap::new(),
            want_masq: masq_refs(desired),
            seen_masq: BTreeMap::new(),
        }
    }

    /// Forgets what was fed of `set` (its dump restarts).
    pub fn restart(&mut self, set: SetId) {
        self.strays.retain(|(s, _, _)| *s != set);
        let v4 = set.is_v4();
        match set {
            SetId::Services4 | SetId::Services6 => {
                for (k, s) in self.seen.iter_mut() {
                    if k.addr.is_ipv4() == v4 {
                        s.verdict = false;
                    }
                }
            }
            SetId::Backends4 | SetId::Backends6 => {
                for (k, s) in self.seen.iter_mut() {
                    if k.addr.is_ipv4() == v4 {
                        s.slots.clear();
                    }
                }
            }
            SetId::Masquerade4 | SetId::Masquerade6 => {
                self.seen_masq.retain(|m, _| m.backend.is_ipv4() != v4);
            }
            SetId::StickyVips4 | SetId::StickyVips6 => {
                for (k, s) in self.seen.iter_mut() {
                    if k.addr.is_ipv4() == v4 {
                        s.sticky = false;
                    }
                }
            }
        }
    }

    fn stray(&mut self, set: SetId, info: &ElemInfo, drift: bool) {
        if let Some(el) = layout::decode_key(set, &info.key) {
            self.strays.push((set, el, drift));
        }
    }

    /// Checks one kernel element of `set`.
    pub fn feed(&mut self, set: SetId, info: &ElemInfo) {
        let believed = self.believed;
        match set {
            SetId::Masquerade4 | SetId::Masquerade6 => {
                let Some(el) = layout::decode_key(set, &info.key) else {
                    return;
                };
                let ElemKey::Value(Value::Concat(p)) = &el.key else {
                    return;
                };
                let (ip, proto, port) = match (&p[0], &p[1], &p[2]) {
                    (Value::Ipv4(a), Value::Proto(pr), Value::Port(po)) => {
                        (IpAddr::from(*a), *pr, *po)
                    }
                    (Value::Ipv6(a), Value::Proto(pr), Value::Port(po)) => {
                        (IpAddr::from(*a), *pr, *po)
                    }
                    _ => return,
                };
                let m = MasqKey {
                    backend: SocketAddr::new(ip, port),
                    proto,
                };
                if self.want_masq.contains_key(&m) {
                    self.seen_masq.insert(m, true);
                } else {
                    let drift = believed.is_some_and(|b| !b.masq_refs.contains_key(&m));
                    self.stray(set, info, drift);
                }
            }
            SetId::Services4 | SetId::Services6 => {
                let Some((k, _)) = decode_vip(set, &info.key) else {
                    return;
                };
                let entry = self.desired.get(&k);
                match entry {
                    Some(e) if verdict_matches(info, &layout::verdict(&k, e)) => {
                        self.seen.entry(k).or_default().verdict = true;
                    }
                    _ => {
                        // A changed verdict counts once, as missing, in `finish`.
                        let drift = entry.is_none() && unchanged(believed, &k, entry);
                        self.stray(set, info, drift);
                    }
                }
            }
            SetId::StickyVips4 | SetId::StickyVips6 => {
                let Some((k, _)) = decode_vip(set, &info.key) else {
                    return;
                };
                let entry = self.desired.get(&k);
                let want = entry.and_then(|e| layout::sticky_vip_element(&k, e));
                match want.as_ref().and_then(|(_, el)| el.data.as_ref()) {
                    Some(Value::Verdict(v)) if verdict_matches(info, v) => {
                        self.seen.entry(k).or_default().sticky = true;
                    }
                    _ => {
                        // A changed recorder counts once, as missing, in `finish`.
                        let drift = want.is_none() && unchanged(believed, &k, entry);
                        self.stray(set, info, drift);
                    }
                }
            }
            SetId::Backends4 | SetId::Backends6 => {
                let Some((k, Some(slot))) = decode_vip(set, &info.key) else {
                    return;
                };
                let entry = self.desired.get(&k);
                let ok = match entry.map(|e| &e.action) {
                    Some(Action::Balance { slots, .. }) => {
                        slots.get(slot as usize).is_some_and(|b| {
                            info.data.as_deref().is_some_and(|d| backend_matches(d, b))
                        })
                    }
                    _ => false,
                };
                if ok {
                    let s = self.seen.entry(k).or_default();
                    if s.slots.len() <= slot as usize {
                        s.slots.resize(slot as usize + 1, false);
                    }
                    s.slots[slot as usize] = true;
                } else {
                    // A changed value counts once, as missing, in `finish`; a slot the
                    // service does not have counts here.
                    let beyond = match entry.map(|e| &e.action) {
                        Some(Action::Balance { slots, .. }) => slot as usize >= slots.len(),
                        _ => true,
                    };
                    let drift = beyond && unchanged(believed, &k, entry);
                    self.stray(set, info, drift);
                }
            }
        }
    }

    /// What to delete and add, and the drift.
    pub fn finish(self) -> Findings {
        let mut f = Findings::default();
        for (s, el, drift) in self.strays {
            f.strays.push((s, el));
            f.drift += drift as u64;
        }
        for (k, e) in self.desired {
            let s = self.seen.get(k);
            let drift = unchanged(self.believed, k, Some(e));
            if !s.is_some_and(|s| s.verdict) {
                f.missing.push(layout::service_element(k, e));
                f.drift += drift as u64;
            }
            if let Some(el) = layout::sticky_vip_element(k, e)
                && !s.is_some_and(|s| s.sticky)
            {
                f.missing.push(el);
                f.drift += drift as u64;
            }
            if let Action::Balance { slots, .. } = &e.action {
                for (i, b) in slots.iter().enumerate() {
                    if !s.is_some_and(|s| s.slots.get(i).copied().unwrap_or(false)) {
                        f.missing.push(layout::slot_element(k, i as u32, *b));
                        f.drift += drift as u64;
                    }
                }
            }
        }
        for m in self.want_masq.keys() {
            if !self.seen_masq.contains_key(m) {
                f.missing.push(layout::masquerade_element(m));
                f.drift += self.believed.is_some_and(|b| b.masq_refs.contains_key(m)) as u64;
            }
        }
        f
    }
}

/// Compares the kernel's elements (`kernel[i]` = elements of `SetId::ALL[i]`) with `desired`.
pub fn verify(kernel: &[Vec<ElemInfo>], desired: &Model, believed: Option<&Mirror>) -> Findings {
    let mut v = Verifier::new(desired, believed);
    for (set, elems) in SetId::ALL.iter().zip(kernel) {
        for info in elems {
            v.feed(*set, info);
        }
    }
    v.finish()
}

/// Streams every element of the table's sets from the kernel through a [`Verifier`].
pub fn verify_kernel(
    nft: &mut crate::dataplane::nft::Nft,
    table: &crate::dataplane::nft::TableRef,
    desired: &Model,
    believed: Option<&Mirror>,
) -> Result<Findings, crate::dataplane::nft::NftError> {
    let v = std::cell::RefCell::new(Verifier::new(desired, believed));
    for set in SetId::ALL {
        nft.for_each_element(
            table,
            set.name(),
            &mut |info| v.borrow_mut().feed(set, &info),
            &mut || v.borrow_mut().restart(set),
        )?;
    }
    Ok(v.into_inner().finish())
}
