//! Plan, the pure decision of a policy sync: from what the cache says is installed and the
//! desired program, which write (if any) brings the kernel in line; and for an element-only
//! change, which elements to add and delete. Unit-tested with exact expectations.

use std::borrow::Cow;
use std::sync::Arc;

use crate::dataplane::nft::ir::Element;
use crate::dataplane::nft::read::dump::planned_chain;
use crate::dataplane::nft::{ChainInfo, TableRef, TableState};

use super::observe::{Applied, Baseline};
use super::program::Program;

/// `NFT_SET_ANONYMOUS`: a set the kernel made for one rule (`{ 22, 80 }`, a NAT range map).
const NFT_SET_ANONYMOUS: u32 = 0x1;

/// What a sync writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// No `[policy]`: delete the table if it exists.
    DeleteTable,
    /// The kernel already holds the desired program.
    Nothing,
    /// Only named sets' elements changed: one batch adds and deletes just those.
    ElementDelta,
    /// Replace the whole table atomically: first sync, drift, a structural change, or groups
    /// the kernel refused last time (retried).
    FullWrite,
}

/// The step for `desired` given what is installed (`None` = unknown) and whether a drift
/// check found the table changed behind our back.
pub fn step(installed: Option<&Applied>, desired: Option<&Arc<Program>>, drifted: bool) -> Step {
    let Some(desired) = desired else {
        return Step::DeleteTable;
    };
    match installed {
        Some(a) if a.failed.is_empty() && !drifted => {
            if Arc::ptr_eq(&a.program, desired) || *a.program == **desired {
                Step::Nothing
            } else if a.program.same_structure(desired) {
                Step::ElementDelta
            } else {
                Step::FullWrite
            }
        }
        _ => Step::FullWrite,
    }
}

/// Whether a table found at the first sync (of this process, or after the cache was
/// forgotten) can be trusted to hold the desired program without writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adoption {
    /// The table holds exactly what a full write of the program left: nothing to write.
    Adopt,
    /// Write it: no table, or one written for another program (or by an edgenetd that
    /// stored no tag).
    Rewrite(&'static str),
    /// Written for this program, but edited since: write it and count a drift repair.
    Drifted(&'static str),
}

/// The adoption decision for `found` (the table's flags and tag, `None` when there is no
/// table) listed as `listing`, given the desired program and its tag.
///
/// The tag says which program was written; the listing says whether anything changed since.
/// A full write creates the table afresh in one batch, so the kernel numbered its chains,
/// sets, rules, objects and flowtables 1..N, and every object added or replaced later got a
/// higher handle: an intact table has exactly the handles 1..N, the program's chains (a
/// chain policy is the one thing edited in place), its named sets, ct helper objects and
/// flowtables, and its rule count per chain. Set elements are not in the tag: the drift
/// check compares them.
pub fn adoption(
    found: Option<&TableState>,
    listing: &Baseline,
    desired: &Program,
    tag: &str,
) -> Adoption {
    let Some(found) = found else {
        return Adoption::Rewrite("no table");
    };
    match found.tag.as_deref() {
        None => return Adoption::Rewrite("the table has no tag (an older edgenetd wrote it)"),
        Some(t) if t != tag => return Adoption::Rewrite("the table holds another program"),
        Some(_) => {}
    }
    if found.flags != 0 {
        return Adoption::Drifted("the table's flags were changed");
    }
    let t = TableRef::from(&desired.table);
    let planned: Result<Vec<ChainInfo>, _> = desired
        .table
        .chains
        .iter()
        .map(|c| planned_chain(&t, c))
        .collect();
    let Ok(planned) = planned else {
        return Adoption::Rewrite("a chain cannot be encoded");
    };
    let shape = |c: &ChainInfo| (c.name.clone(), c.base.clone());
    let mut want: Vec<_> = planned.iter().map(shape).collect();
    let mut have: Vec<_> = listing.chains.iter().map(shape).collect();
    want.sort();
    have.sort();
    if want != have {
        return Adoption::Drifted("a chain was added, deleted or edited");
    }
    let t = &desired.table;
    // By flag, not by name: anonymous maps are `__mapN`, anonymous sets `__setN`.
    let named_sets = (listing.sets.iter())
        .filter(|s| s.flags & NFT_SET_ANONYMOUS == 0)
        .map(|s| s.name.as_str());
    if !same_names(t.sets.iter().map(|s| s.name.as_str()), named_sets) {
        return Adoption::Drifted("a named set was added or deleted");
    }
    if !same_names(
        t.rules.iter().map(|r| r.chain.as_str()),
        listing.rules.iter().map(|r| r.chain.as_str()),
    ) {
        return Adoption::Drifted("a rule was added or deleted");
    }
    let objects = (t.ct_helpers.iter().map(|h| h.name.as_str()))
        .chain(t.limits.iter().map(|l| l.name.as_str()));
    if !same_names(objects, listing.objects.iter().map(|o| o.name.as_str())) {
        return Adoption::Drifted("a ct helper or limit object was added or deleted");
    }
    if !same_names(
        t.flowtables.iter().map(|f| f.name.as_str()),
        listing.flowtables.iter().map(|f| f.name.as_str()),
    ) {
        return Adoption::Drifted("a flowtable was added or deleted");
    }
    if !handles_are_one_to_n(listing) {
        return Adoption::Drifted("an object was added or replaced after the write");
    }
    Adoption::Adopt
}

/// True when both lists hold the same names as often, in any order.
fn same_names<'a>(
    want: impl Iterator<Item = &'a str>,
    have: impl Iterator<Item = &'a str>,
) -> bool {
    let (mut want, mut have): (Vec<_>, Vec<_>) = (want.collect(), have.collect());
    want.sort_unstable();
    have.sort_unstable();
    want == have
}

/// True when the listed objects of the table have exactly the handles 1..N.
///
/// The kernel numbers everything a table holds from one counter of that table: chains,
/// sets (anonymous ones included), rules, stateful objects (our ct helpers) and flowtables
/// each take the next handle when created, and a handle is never reused. So all five kinds
/// must be counted: leaving one out (as an earlier version left out ct helpers) makes an
/// intact table look edited at every restart. Set elements take no handle.
fn handles_are_one_to_n(listing: &Baseline) -> bool {
    let mut handles: Vec<u64> = (listing.chains.iter().map(|c| c.handle))
        .chain(listing.sets.iter().map(|s| s.handle))
        .chain(listing.rules.iter().map(|r| r.handle))
        .chain(listing.objects.iter().map(|o| o.handle))
        .chain(listing.flowtables.iter().map(|f| f.handle))
        .collect();
    handles.sort_unstable();
    handles.iter().zip(1u64..).all(|(h, want)| *h == want)
}

/// The element changes of one named set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDelta {
    /// Index of the set in the program's table.
    pub set: usize,
    /// Elements to delete.
    pub deletes: Vec<Element>,
    /// Elements to add.
    pub adds: Vec<Element>,
}

/// The element changes from `old` to `new` (programs with the same structure), per set that
/// changed.
pub fn element_deltas(old: &Program, new: &Program) -> Vec<SetDelta> {
    old.table
        .sets
        .iter()
        .zip(&new.table.sets)
        .enumerate()
        .filter(|(_, (a, b))| a.elements != b.elements)
        .map(|(set, (a, b))| {
            let (deletes, adds) = sorted_difference(&a.elements, &b.elements);
            SetDelta { set, deletes, adds }
        })
        .collect()
}

/// Elements only in `old` and only in `new`, in one merge pass over sorted copies (planned
/// sets are already sorted, so no copy is sorted in practice).
pub fn sorted_difference(old: &[Element], new: &[Element]) -> (Vec<Element>, Vec<Element>) {
    fn sorted(v: &[Element]) -> Cow<'_, [Element]> {
        if v.is_sorted() {
            Cow::Borrowed(v)
        } else {
            let mut c = v.to_vec();
            c.sort();
            Cow::Owned(c)
        }
    }
    let (old, new) = (sorted(old), sorted(new));
    let (mut i, mut j) = (0, 0);
    let (mut del, mut add) = (Vec::new(), Vec::new());
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                del.push(a.clone());
                i += 1;
            }
            (Some(a), None) => {
                del.push(a.clone());
                i += 1;
            }
            (_, Some(b)) => {
                add.push(b.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    (del, add)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::dataplane::nft::ir::{ElemKey, Value};
    use crate::dataplane::nft::{FlowtableInfo, ObjectInfo, RuleInfo, SetInfo};

    fn program(toml: &str) -> Arc<Program> {
        let desired = crate::config::load_str(&[("edgenetd.toml", toml)]).unwrap();
        Arc::new(super::super::program::build(
            desired.policy.as_ref().unwrap(),
            "t",
        ))
    }

    fn installed(p: &Arc<Program>, failed: &[u32]) -> Applied {
        Applied {
            program: p.clone(),
            failed: failed.iter().copied().collect::<BTreeSet<u32>>(),
            generation: 1,
            baseline: None,
            want_elements: None,
            elements_checked_at: None,
            check_pending: false,
        }
    }

    fn el(last: u8) -> Element {
        Element::key(ElemKey::Value(Value::ip(std::net::IpAddr::from([
            192, 0, 2, last,
        ]))))
    }

    const BASE: &str =
        "[policy]\n[policy.set.blocked]\ntype = \"ipv4\"\nelements = [\"192.0.2.1\"]\n";

    #[test]
    fn steps_from_installed_and_desired() {
        let p = program(BASE);
        let more = program(&BASE.replace("\"192.0.2.1\"", "\"192.0.2.1\", \"192.0.2.2\""));
        let other = program(&BASE.replace("[policy]\n", "[policy]\nforward = \"accept\"\n"));
        assert!(!p.same_structure(&other), "a structural change");
        assert_eq!(step(None, None, false), Step::DeleteTable);
        assert_eq!(step(None, Some(&p), false), Step::FullWrite);
        assert_eq!(
            step(Some(&installed(&p, &[])), Some(&p), false),
            Step::Nothing
        );
        assert_eq!(
            step(Some(&installed(&p, &[])), Some(&more), false),
            Step::ElementDelta
        );
        assert_eq!(
            step(Some(&installed(&p, &[])), Some(&other), false),
            Step::FullWrite
        );
        assert_eq!(
            step(Some(&installed(&p, &[])), Some(&p), true),
            Step::FullWrite,
            "drift is repaired by a full write"
        );
        assert_eq!(
            step(Some(&installed(&p, &[1])), Some(&p), false),
            Step::FullWrite,
            "refused groups are retried"
        );
    }

    /// The listing a full write of `p` leaves: handles 1..N in the order of the batch.
    fn intact(p: &Program) -> Baseline {
        let t = TableRef::from(&p.table);
        let mut next = 0u64;
        let mut handle = || {
            next += 1;
            next
        };
        let chains = (p.table.chains.iter())
            .map(|c| ChainInfo {
                handle: handle(),
                ..planned_chain(&t, c).unwrap()
            })
            .collect();
        let sets = (p.table.sets.iter())
            .map(|s| SetInfo {
                name: s.name.clone(),
                flags: 0,
                key: (7, 4),
                data: None,
                handle: handle(),
            })
            .collect();
        let rules = (p.table.rules.iter())
            .map(|r| RuleInfo {
                chain: r.chain.clone(),
                handle: handle(),
                comment: r.comment.clone(),
                fingerprint: String::new(),
            })
            .collect();
        let helpers = p
            .table
            .ct_helpers
            .iter()
            .map(|h| (h.name.clone(), 3, h.helper.clone(), None));
        let limits = (p.table.limits.iter()).map(|l| {
            (
                l.name.clone(),
                4,
                String::new(),
                Some((l.rate, l.unit.seconds(), l.burst)),
            )
        });
        let objects = helpers
            .chain(limits)
            .map(|(name, kind, helper, limit)| ObjectInfo {
                name,
                kind,
                helper,
                limit,
                handle: handle(),
            })
            .collect();
        let flowtables = (p.table.flowtables.iter())
            .map(|f| FlowtableInfo {
                name: f.name.clone(),
                flags: 0,
                handle: handle(),
            })
            .collect();
        Baseline {
            chains,
            rules,
            sets,
            objects,
            flowtables,
        }
    }

    fn tagged(tag: &str) -> TableState {
        TableState {
            flags: 0,
            tag: Some(tag.into()),
        }
    }

    #[test]
    fn a_table_is_adopted_only_when_its_tag_and_listing_match_the_program() {
        let p = program(BASE);
        let tag = super::super::adopt::tag(&p, &BTreeSet::new());
        let ok = intact(&p);
        let found = tagged(&tag);
        assert_eq!(adoption(Some(&found), &ok, &p, &tag), Adoption::Adopt);
        assert!(matches!(
            adoption(None, &ok, &p, &tag),
            Adoption::Rewrite(_)
        ));
        let untagged = TableState {
            flags: 0,
            tag: None,
        };
        assert!(
            matches!(
                adoption(Some(&untagged), &ok, &p, &tag),
                Adoption::Rewrite(_)
            ),
            "a table an older edgenetd wrote"
        );
        assert!(matches!(
            adoption(Some(&tagged("edgenetd-policy 00")), &ok, &p, &tag),
            Adoption::Rewrite(_)
        ));
        let dormant = TableState {
            flags: 1,
            ..found.clone()
        };
        assert!(matches!(
            adoption(Some(&dormant), &ok, &p, &tag),
            Adoption::Drifted(_)
        ));
    }

    #[test]
    fn an_edited_table_with_the_right_tag_is_drift() {
        let p = program(BASE);
        let tag = super::super::adopt::tag(&p, &BTreeSet::new());
        let found = tagged(&tag);
        let drifted = |edit: &dyn Fn(&mut Baseline)| {
            let mut l = intact(&p);
            edit(&mut l);
            adoption(Some(&found), &l, &p, &tag)
        };
        type Edit = dyn Fn(&mut Baseline);
        let cases: [(&str, &Edit); 6] = [
            ("chain policy", &|l| {
                let base = l.chains.iter_mut().find_map(|c| c.base.as_mut()).unwrap();
                base.3 ^= 1;
            }),
            ("chain added", &|l| {
                let mut c = l.chains[0].clone();
                c.name = "extra".into();
                c.handle = 1000;
                l.chains.push(c);
            }),
            ("rule appended", &|l| {
                let mut r = l.rules[0].clone();
                r.handle = l.rules.last().unwrap().handle + 1;
                l.rules.push(r);
            }),
            ("last rule deleted", &|l| {
                l.rules.pop();
            }),
            ("rule replaced", &|l| {
                let last = l.rules.last().unwrap().handle;
                l.rules[0].handle = last + 1;
            }),
            ("set deleted", &|l| {
                l.sets.clear();
            }),
        ];
        for (what, edit) in cases {
            assert!(matches!(drifted(edit), Adoption::Drifted(_)), "{what}");
        }
        // A rule's anonymous set or map is numbered with the rest of the write.
        let max = |l: &Baseline| handles(l).into_iter().max().unwrap();
        for name in ["__set0", "__map0"] {
            let anonymous = |l: &mut Baseline| {
                let mut s = l.sets[0].clone();
                s.name = name.into();
                s.flags = NFT_SET_ANONYMOUS;
                s.handle = max(l) + 1;
                l.sets.push(s);
            };
            assert_eq!(drifted(&anonymous), Adoption::Adopt, "{name}");
        }
    }

    fn handles(l: &Baseline) -> Vec<u64> {
        (l.chains.iter().map(|c| c.handle))
            .chain(l.sets.iter().map(|s| s.handle))
            .chain(l.rules.iter().map(|r| r.handle))
            .chain(l.objects.iter().map(|o| o.handle))
            .chain(l.flowtables.iter().map(|f| f.handle))
            .collect()
    }

    #[test]
    fn ct_helper_objects_take_handles_from_the_tables_counter() {
        // The regression: the ct helper's handle was not counted, so a table with helpers
        // never had "exactly 1..N" and was rewritten at every restart.
        let p = program(
            "[policy]\nhelpers = [\"ftp\"]\n[policy.zone.lan]\ninterfaces = [\"lan0\"]\n\
             helpers = [\"ftp\"]\n",
        );
        assert!(!p.table.ct_helpers.is_empty());
        let tag = super::super::adopt::tag(&p, &BTreeSet::new());
        let found = tagged(&tag);
        let ok = intact(&p);
        assert_eq!(adoption(Some(&found), &ok, &p, &tag), Adoption::Adopt);
        let mut deleted = ok.clone();
        deleted.objects.clear();
        assert!(matches!(
            adoption(Some(&found), &deleted, &p, &tag),
            Adoption::Drifted(_)
        ));
        let mut replaced = ok.clone();
        replaced.objects[0].handle = handles(&ok).into_iter().max().unwrap() + 1;
        assert!(matches!(
            adoption(Some(&found), &replaced, &p, &tag),
            Adoption::Drifted(_)
        ));
    }

    #[test]
    fn element_deltas_name_only_the_changed_elements() {
        let p = program(BASE);
        let more = program(&BASE.replace("\"192.0.2.1\"", "\"192.0.2.2\", \"192.0.2.3\""));
        assert_eq!(
            element_deltas(&p, &more),
            [SetDelta {
                set: 0,
                deletes: vec![el(1)],
                adds: vec![el(2), el(3)],
            }]
        );
        assert_eq!(element_deltas(&p, &p), []);
    }

    #[test]
    fn sorted_difference_of_unsorted_lists() {
        let (del, add) = sorted_difference(&[el(3), el(1), el(2)], &[el(4), el(2)]);
        assert_eq!(del, [el(1), el(3)]);
        assert_eq!(add, [el(4)]);
    }
}
