//! The elements other programs put in dynamic sets (`[policy.set.X] dynamic = true`), kept
//! across a full write of the table.
//!
//! A full write replaces the table in one batch (delete, then add), which would drop every
//! element fail2ban, CrowdSec or dnsmasq added. So right before it, the dynamic sets' elements
//! are read from the kernel and those that are not the config's go back into the same batch,
//! with their timeout and the expiry they had left. (The other way, keeping the set object
//! while rewriting the rest, would need deletes of whatever chains and sets the kernel holds,
//! each one able to fail when drift removed it, instead of one delete of the table.)
//!
//! A range another program added that overlaps one of the config's is not put back: an
//! interval set refuses overlaps, and the config's element covers it anyway.

use std::collections::BTreeMap;

use crate::dataplane::nft::ir::Set;
use crate::dataplane::nft::{ElemInfo, KeptElem, Nft, NftError, TableRef, raw_elements};

use super::program::{Program, keeps_foreign_elements};

/// Elements others added to the dynamic sets, and the ruleset generation they were read at.
#[derive(Debug, Default)]
pub struct Kept {
    /// Elements by set name.
    pub elements: BTreeMap<String, Vec<KeptElem>>,
    /// The generation before the reading, when there are dynamic sets: the rewrite is sent
    /// as a batch the kernel refuses if anyone committed since (an element added after the
    /// reading would be lost by the rewrite).
    pub generation: Option<u32>,
}

/// `NFT_SET_INTERVAL`.
const SET_INTERVAL: u32 = 0x4;
/// `NFT_SET_TIMEOUT`.
const SET_TIMEOUT: u32 = 0x10;

/// Reads the elements others added to `desired`'s dynamic sets, where the kernel's set of
/// that name is a dynamic set of the same type (a set that was static until now has only
/// the config's elements, or drift).
pub fn read(nft: &mut Nft, t: &TableRef, desired: &Program) -> Result<Kept, NftError> {
    let mut out = Kept::default();
    let dynamic: Vec<&Set> = desired
        .table
        .sets
        .iter()
        .filter(|s| keeps_foreign_elements(s))
        .collect();
    if dynamic.is_empty() {
        return Ok(out);
    }
    out.generation = Some(nft.generation()?);
    let listed = nft.list_sets(t)?;
    for set in dynamic {
        let same = listed.iter().any(|k| {
            k.name == set.name
                && k.key == (set.key.id(), set.key.byte_len())
                && k.flags & (SET_INTERVAL | SET_TIMEOUT) == SET_INTERVAL | SET_TIMEOUT
        });
        if !same {
            continue;
        }
        let want = raw_elements(set, &set.elements)?;
        let default = set.timeout.unwrap_or(0);
        let have = nft
            .list_kept_elements(t, &set.name)?
            .into_iter()
            .map(|e| e.with_default_timeout(default))
            .collect();
        let mut foreign = foreign(have, &want);
        if let Some(size) = set.size {
            // A `size` lowered below what the set holds: the set would be refused whole
            // (with the config's elements); the others' shortest-lived elements go first.
            let room = (size as usize).saturating_sub(set.elements.len());
            foreign.sort_by_key(|(s, _)| std::cmp::Reverse(s.expires_ms.unwrap_or(u64::MAX)));
            foreign.truncate(room);
        }
        if !foreign.is_empty() {
            let flat = foreign
                .into_iter()
                .flat_map(|(s, e)| [Some(s), e])
                .flatten();
            out.elements.insert(set.name.clone(), flat.collect());
        }
    }
    Ok(out)
}

/// One interval: its start and (unless it reaches the top of the key space) its end.
type Interval<T> = (T, Option<T>);

/// Pairs the elements of an interval set into intervals: sorted by key, an end sorts before
/// a start at the same key (adjacent intervals share that key).
fn intervals<T>(mut elems: Vec<T>, key: impl Fn(&T) -> (&[u8], bool)) -> Vec<Interval<T>> {
    elems.sort_by(|a, b| {
        let ((ka, ea), (kb, eb)) = (key(a), key(b));
        ka.cmp(kb).then(eb.cmp(&ea))
    });
    let mut out = Vec::new();
    let mut it = elems.into_iter().peekable();
    while let Some(e) = it.next() {
        if key(&e).1 {
            continue; // an end without a start: nothing to pair it with
        }
        let end = it.next_if(|n| key(n).1);
        out.push((e, end));
    }
    out
}

/// The kernel's intervals (`have`) that are neither the config's (`want`) nor overlap one of
/// them.
fn foreign(have: Vec<KeptElem>, want: &[ElemInfo]) -> Vec<Interval<KeptElem>> {
    let want = intervals(want.to_vec(), |e| (&e.key, e.interval_end));
    let bounds = |(s, e): &Interval<ElemInfo>| (s.key.clone(), e.as_ref().map(|e| e.key.clone()));
    let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = want.iter().map(bounds).collect();
    let mut out = Vec::new();
    for (start, end) in intervals(have, |e| (&e.elem.key, e.elem.interval_end)) {
        let (s, e) = (&start.elem.key, end.as_ref().map(|e| &e.elem.key));
        let overlaps = want.iter().any(|(ws, we)| {
            // [s, e) and [ws, we) overlap (a missing end is the top of the key space).
            e.is_none_or(|e| ws < e) && we.as_ref().is_none_or(|we| s < we)
        });
        if !overlaps {
            out.push((start, end));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elem(key: u8, end: bool) -> ElemInfo {
        ElemInfo {
            key: vec![10, 0, 0, key],
            interval_end: end,
            key_end: None,
            data: None,
            chain: None,
        }
    }

    fn kept(key: u8, end: bool) -> KeptElem {
        KeptElem {
            elem: elem(key, end),
            timeout_ms: 600_000,
            expires_ms: Some(500_000),
        }
    }

    #[test]
    fn foreign_elements_are_those_not_in_the_config_and_not_overlapping_it() {
        // config: 10.0.0.1 and (new) 10.0.0.8/30 (8..12); the kernel holds 10.0.0.1, and
        // from others 10.0.0.2 (adjacent to it), 10.0.0.9 (inside the new prefix) and
        // 10.0.0.20.
        let want = vec![
            elem(1, false),
            elem(2, true),
            elem(8, false),
            elem(12, true),
        ];
        let have = vec![
            kept(20, false),
            kept(21, true),
            kept(1, false),
            kept(2, true),
            kept(2, false),
            kept(3, true),
            kept(9, false),
            kept(10, true),
        ];
        let keys: Vec<(u8, Option<u8>)> = foreign(have, &want)
            .iter()
            .map(|(s, e)| (s.elem.key[3], e.as_ref().map(|e| e.elem.key[3])))
            .collect();
        assert_eq!(keys, [(2, Some(3)), (20, Some(21))]);
    }

    #[test]
    fn an_interval_to_the_top_of_the_key_space_has_no_end() {
        let pairs = intervals(vec![elem(250, false), elem(1, false), elem(2, true)], |e| {
            (&e.key, e.interval_end)
        });
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1].0.key[3], 250);
        assert!(pairs[1].1.is_none());
    }
}
