//! Observe: reading the service table back from the kernel. The structure check (sets,
//! chains, rules by fingerprint) and the full compare: the kernel's elements checked against
//! the desired model, one kernel element at a time, without materializing the desired
//! elements (at 10k services that is 170k elements; building them twice over cost a few
//! hundred MiB).
//!
//! Each kernel element is decoded back into its service (and slot), and its value compared
//! with what the model says. What does not match is a stray (deleted by key); whatever the
//! model has that no kernel element matched is missing (added). What differs for a service
//! whose entry the mirror also holds unchanged is drift. Every set of the layout is covered:
//! the entries' own elements, the shared (reference-counted) ones, and the prefixes.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

use crate::dataplane::nft::encode::{element_keys, encode};
use crate::dataplane::nft::ir::{ElemKey, Element, Value, Verdict};
use crate::dataplane::nft::{ElemInfo, NftError};

use super::Kernel;
use super::layout::{self, SetId, SetRole, Shared};
use super::model::{Model, VipKey};
use super::plan::{Mirror, all_slots, shared_refs};

/// A set as compared: name, key type id and length, map data type id and length.
type SetShape = (String, u32, u32, Option<(u32, u32)>);

impl Kernel {
    pub(super) fn fingerprints_now(&mut self) -> Result<Vec<(String, String)>, NftError> {
        Ok(self
            .nft
            .socket()
            .list_rules(&self.table)?
            .into_iter()
            .map(|r| (r.chain, r.fingerprint))
            .collect())
    }

    /// When sets, chains and rules are what the skeleton installs with the chains on demand
    /// the kernel has (dispatch and recorder chains), those; `None` when anything differs.
    pub(super) fn structure_ok(&mut self) -> Result<Option<layout::Demand>, NftError> {
        let mut chains: Vec<String> = self
            .nft
            .socket()
            .list_chains(&self.table)?
            .into_iter()
            .map(|c| c.name)
            .collect();
        let demand: layout::Demand = chains
            .iter()
            .filter_map(|c| layout::OnDemand::parse(c))
            .collect();
        let skeleton = layout::skeleton_with(&self.table.name, &demand, self.local);
        let sets = self.nft.socket().list_sets(&self.table)?;
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
            Some(f) => Ok((*f == rules).then_some(demand)),
            None => {
                // Adopting a table from an earlier run: same rule count per chain and the same
                // comments; later checks compare full fingerprints.
                let listed = self.nft.socket().list_rules(&self.table)?;
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
                Ok(ok.then_some(demand))
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
    /// Differences in services (and shared elements) the mirror says were committed as
    /// they are still desired: changed behind our back.
    pub drift: u64,
    /// UDP backends the kernel still has slots for that their service no longer has: their
    /// conntrack entries must go, as after an incremental sync (UDP has no close).
    pub udp_gone: Vec<(VipKey, SocketAddr)>,
}

/// The kernel's slots: per service, slot number -> backend (both families' `backends` maps).
pub fn kernel_slots(
    nft: &mut crate::dataplane::nft::Nft,
    table: &crate::dataplane::nft::TableRef,
) -> Result<BTreeMap<VipKey, BTreeMap<u32, SocketAddr>>, NftError> {
    let out = std::cell::RefCell::new(BTreeMap::<VipKey, BTreeMap<u32, SocketAddr>>::new());
    for set in [SetId::Backends4, SetId::Backends6] {
        nft.for_each_element(
            table,
            set.name(),
            &mut |info| {
                let b = info.data.as_deref().and_then(backend_of);
                if let (Some((k, Some(slot))), Some(b)) = (decode_vip(set, &info.key), b) {
                    out.borrow_mut().entry(k).or_default().insert(slot, b);
                }
            },
            // A dump that starts again (the set changed meanwhile): what it read is forgotten.
            &mut || {
                out.borrow_mut()
                    .retain(|k, _| k.addr.is_ipv4() != set.is_v4())
            },
        )?;
    }
    Ok(out.into_inner())
}

/// The backend of map data `d` (address, then the port padded to 4 bytes).
fn backend_of(d: &[u8]) -> Option<SocketAddr> {
    let (ip, rest): (IpAddr, &[u8]) = match d.len() {
        8 => (IpAddr::from(<[u8; 4]>::try_from(&d[..4]).ok()?), &d[4..]),
        20 => (IpAddr::from(<[u8; 16]>::try_from(&d[..16]).ok()?), &d[16..]),
        _ => return None,
    };
    Some(SocketAddr::new(ip, u16::from_be_bytes([rest[0], rest[1]])))
}

/// The service (and slot) of a key of a set keyed by entry, read straight from the bytes.
fn decode_vip(set: SetId, key: &[u8]) -> Option<(VipKey, Option<u32>)> {
    use crate::config::service::Protocol;
    let k = match set {
        SetId::Ranges4 | SetId::Ranges6 | SetId::Hosts4 | SetId::Hosts6 => {
            // The source first, then the entry's address . protocol . port.
            let alen = if set.is_v4() { 4 } else { 16 };
            layout::key_parts(SetId::Services4.of_family(set.is_v4()), key.get(alen..)?)?
        }
        _ => layout::key_parts(set, key)?,
    };
    let proto = Protocol::from_number(k.proto)?;
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

/// True when kernel element `info` is `want` (key and value).
fn element_matches(info: &ElemInfo, want: &Element) -> bool {
    let ElemKey::Value(k) = &want.key else {
        return false;
    };
    if encode(k).ok().as_deref() != Some(&info.key[..]) {
        return false;
    }
    match &want.data {
        None => true,
        Some(Value::Verdict(v)) => verdict_matches(info, v),
        Some(_) => false,
    }
}

fn unchanged(believed: Option<&Mirror>, k: &VipKey, e: Option<&super::model::Entry>) -> bool {
    believed.is_some_and(|m| m.model.get(k) == e)
}

/// A kernel interval as (start, end) keys, the end exclusive (`None`: to the top).
type Interval = (Vec<u8>, Option<Vec<u8>>);

/// The intervals of an interval set's elements (start and end elements, in any order).
fn intervals(elems: &[(Vec<u8>, bool)]) -> Vec<Interval> {
    let mut v: Vec<&(Vec<u8>, bool)> = elems.iter().collect();
    // At one key an interval's end comes before the next one's start.
    v.sort_by(|a, b| (&a.0, !a.1).cmp(&(&b.0, !b.1)));
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for (key, end) in v {
        match (end, open.take()) {
            (true, Some(start)) => out.push((start, Some(key.clone()))),
            (true, None) => {}
            (false, Some(start)) => {
                out.push((start, None));
                open = Some(key.clone());
            }
            (false, None) => open = Some(key.clone()),
        }
    }
    if let Some(start) = open {
        out.push((start, None));
    }
    out
}

/// The element that deletes kernel interval `iv` of a family.
fn interval_element(v4: bool, iv: &Interval) -> Option<Element> {
    let ip = |b: &[u8]| -> Option<IpAddr> {
        Some(if v4 {
            IpAddr::from(<[u8; 4]>::try_from(b).ok()?)
        } else {
            IpAddr::from(<[u8; 16]>::try_from(b).ok()?)
        })
    };
    let start = ip(&iv.0)?;
    let last = match &iv.1 {
        Some(end) => {
            // The end key is exclusive: the last address is one below it.
            let mut b = end.clone();
            for byte in b.iter_mut().rev() {
                let (v, borrow) = byte.overflowing_sub(1);
                *byte = v;
                if !borrow {
                    break;
                }
            }
            ip(&b)?
        }
        None => ip(&vec![0xff; iv.0.len()])?,
    };
    Some(Element::key(ElemKey::Range(
        Value::ip(start),
        Value::ip(last),
    )))
}

/// Checks kernel elements, fed one at a time, against the desired model.
pub struct Verifier<'a> {
    desired: &'a Model,
    believed: Option<&'a Mirror>,
    /// Strays with whether each counts as drift.
    strays: Vec<(SetId, Element, bool)>,
    /// Entries' own elements seen, per entry: (set, index in `entry_elements`). Lists, not
    /// a set of triples: a few per entry, and a full compare of 5,000 services held 2 MB
    /// of hashed triples and single-element trees at the daemon's peak (issue 24).
    seen: HashMap<VipKey, Vec<(SetId, u32)>>,
    /// Slots seen per entry (sorted in `finish`).
    seen_slots: HashMap<VipKey, Vec<u32>>,
    /// The shared elements `desired` needs: the mirror's own count when it describes the same
    /// model (a periodic compare), else counted afresh.
    want_shared: Cow<'a, BTreeMap<Shared, u32>>,
    seen_shared: BTreeSet<Shared>,
    /// The interval sets' elements as listed: (key, interval end).
    prefixes: BTreeMap<SetId, Vec<(Vec<u8>, bool)>>,
    udp_gone: BTreeSet<(VipKey, SocketAddr)>,
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
            seen_slots: HashMap::new(),
            want_shared: match believed {
                Some(b) if std::ptr::eq(&b.model, desired) || b.model == *desired => {
                    Cow::Borrowed(&b.shared_refs)
                }
                _ => Cow::Owned(shared_refs(desired)),
            },
            seen_shared: BTreeSet::new(),
            prefixes: BTreeMap::new(),
            udp_gone: BTreeSet::new(),
        }
    }

    /// Forgets what was fed of `set` (its dump restarts).
    pub fn restart(&mut self, set: SetId) {
        self.strays.retain(|(s, _, _)| *s != set);
        let v4 = set.is_v4();
        match set.role() {
            SetRole::Entry if matches!(set, SetId::Backends4 | SetId::Backends6) => {
                self.seen_slots.retain(|k, _| k.addr.is_ipv4() != v4);
            }
            SetRole::Entry => {
                for seen in self.seen.values_mut() {
                    seen.retain(|(s, _)| *s != set);
                }
            }
            SetRole::Shared => self.seen_shared.retain(|m| m.element().0 != set),
            SetRole::Global => {
                self.prefixes.remove(&set);
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
        match set.role() {
            SetRole::Global => {
                self.prefixes
                    .entry(set)
                    .or_default()
                    .push((info.key.clone(), info.interval_end));
            }
            SetRole::Shared => match Shared::decode(set, &info.key) {
                Some(m) if self.want_shared.contains_key(&m) => {
                    self.seen_shared.insert(m);
                }
                m => {
                    let drift =
                        believed.is_some_and(|b| m.is_none_or(|m| !b.shared_refs.contains_key(&m)));
                    self.stray(set, info, drift);
                }
            },
            SetRole::Entry if matches!(set, SetId::Backends4 | SetId::Backends6) => {
                let Some((k, Some(slot))) = decode_vip(set, &info.key) else {
                    return;
                };
                let entry = self.desired.get(&k);
                let slots = entry.map(all_slots).unwrap_or_default();
                let want = slots.iter().find(|(s, _)| *s == slot);
                let ok = want.is_some_and(|(_, b)| {
                    info.data.as_deref().is_some_and(|d| backend_matches(d, b))
                });
                if ok {
                    self.seen_slots.entry(k).or_default().push(slot);
                } else {
                    // A changed value counts once, as missing, in `finish`; a slot the
                    // service does not have counts here.
                    let drift = want.is_none() && unchanged(believed, &k, entry);
                    self.stray(set, info, drift);
                    let gone =
                        info.data.as_deref().and_then(backend_of).filter(|b| {
                            entry.is_none_or(|e| e.backends().binary_search(b).is_err())
                        });
                    if let Some(b) = gone
                        && k.proto == crate::config::service::Protocol::Udp
                    {
                        self.udp_gone.insert((k, b));
                    }
                }
            }
            SetRole::Entry => {
                let Some((k, _)) = decode_vip(set, &info.key) else {
                    self.stray(set, info, believed.is_some());
                    return;
                };
                let entry = self.desired.get(&k);
                let els = entry
                    .map(|e| layout::entry_elements(&k, e))
                    .unwrap_or_default();
                let found = els
                    .iter()
                    .position(|(s, el)| *s == set && element_matches(info, el));
                match found {
                    Some(i) => {
                        self.seen.entry(k).or_default().push((set, i as u32));
                    }
                    None => {
                        // A changed value counts once, as missing, in `finish`.
                        let same_key = els.iter().any(|(s, el)| {
                            *s == set
                                && matches!(&el.key, ElemKey::Value(v)
                                    if encode(v).ok().as_deref() == Some(&info.key[..]))
                        });
                        let drift = !same_key && unchanged(believed, &k, entry);
                        self.stray(set, info, drift);
                    }
                }
            }
        }
    }

    /// What to delete and add, and the drift.
    pub fn finish(mut self) -> Findings {
        let mut f = Findings {
            udp_gone: self.udp_gone.into_iter().collect(),
            ..Findings::default()
        };
        for (s, el, drift) in self.strays {
            f.strays.push((s, el));
            f.drift += drift as u64;
        }
        for list in self.seen_slots.values_mut() {
            list.sort_unstable();
        }
        for list in self.seen.values_mut() {
            list.sort_unstable();
        }
        for (k, e) in self.desired.iter() {
            let drift = unchanged(self.believed, k, Some(e));
            let seen = self.seen.get(k).map_or(&[][..], Vec::as_slice);
            for (i, (set, el)) in layout::entry_elements(k, e).into_iter().enumerate() {
                if seen.binary_search(&(set, i as u32)).is_err() {
                    f.missing.push((set, el));
                    f.drift += drift as u64;
                }
            }
            let seen = self.seen_slots.get(k);
            for (slot, b) in all_slots(e) {
                if seen.is_none_or(|s| s.binary_search(&slot).is_err()) {
                    f.missing.push(layout::slot_element(k, slot, b));
                    f.drift += drift as u64;
                }
            }
        }
        for m in self.want_shared.keys() {
            if !self.seen_shared.contains(m) {
                f.missing.push(m.element());
                f.drift += self.believed.is_some_and(|b| b.shared_refs.contains_key(m)) as u64;
            }
        }
        for (cluster, set) in [
            (true, SetId::Cluster4),
            (true, SetId::Cluster6),
            (false, SetId::ServiceCidrs4),
            (false, SetId::ServiceCidrs6),
        ] {
            let v4 = set.is_v4();
            let want: Vec<ipnet::IpNet> = if cluster {
                &self.desired.cluster_cidrs
            } else {
                &self.desired.service_cidrs
            }
            .iter()
            .filter(|n| n.addr().is_ipv4() == v4)
            .copied()
            .collect();
            let mut want_keys = Vec::new();
            for n in &want {
                if let Ok(keys) = element_keys(&ElemKey::Prefix(*n), true) {
                    want_keys.extend(keys.into_iter().map(|k| (k.key, k.interval_end)));
                }
            }
            let have = self.prefixes.get(&set).cloned().unwrap_or_default();
            if intervals(&have) == intervals(&want_keys) {
                continue;
            }
            // Replaced as a whole: a few elements, and an interval set's elements are not
            // worth matching one by one.
            for iv in intervals(&have) {
                if let Some(el) = interval_element(v4, &iv) {
                    f.strays.push((set, el));
                }
            }
            for n in want {
                f.missing.push(layout::cidr_element(cluster, n));
            }
            let believed = self.believed.is_some_and(|b| {
                let old = if cluster {
                    &b.model.cluster_cidrs
                } else {
                    &b.model.service_cidrs
                };
                let new = if cluster {
                    &self.desired.cluster_cidrs
                } else {
                    &self.desired.service_cidrs
                };
                old == new
            });
            f.drift += believed as u64;
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
    let found = verify_kernel_until(nft, table, desired, believed, &|| false)?;
    Ok(found.expect("never stopped"))
}

/// Elements fed between two looks at `stop`: a look is an atomic read, the feed of an
/// element a few hash lookups, so this keeps the looks free and the stop prompt.
const STOP_EVERY: usize = 256;

/// [`verify_kernel`], stopping early (`Ok(None)`) once `stop` says so: it is asked between
/// sets and every 256 elements (`STOP_EVERY`). A set's dump that is under way is read to its
/// end (the socket must be drained), but its elements are no longer checked.
pub fn verify_kernel_until(
    nft: &mut crate::dataplane::nft::Nft,
    table: &crate::dataplane::nft::TableRef,
    desired: &Model,
    believed: Option<&Mirror>,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Findings>, crate::dataplane::nft::NftError> {
    let v = std::cell::RefCell::new(Verifier::new(desired, believed));
    let stopped = std::cell::Cell::new(false);
    let fed = std::cell::Cell::new(0usize);
    let slow = crate::fault_hook!(
        crate::fault::by_name::slow_compare(desired.values().map(|e| e.name.as_str())),
        false
    );
    for set in SetId::ALL {
        if slow {
            crate::fault_hook!(
                crate::fault::by_name::compare_pause(set == SetId::ALL[0], stop),
                ()
            );
        }
        if stop() {
            return Ok(None);
        }
        nft.for_each_element(
            table,
            set.name(),
            &mut |info| {
                if stopped.get() {
                    return;
                }
                fed.set(fed.get() + 1);
                if fed.get() % STOP_EVERY == 0 && stop() {
                    stopped.set(true);
                    return;
                }
                v.borrow_mut().feed(set, &info);
            },
            &mut || v.borrow_mut().restart(set),
        )?;
        if stopped.get() {
            return Ok(None);
        }
    }
    Ok(Some(v.into_inner().finish()))
}
