//! Plan, the pure decision of a policy sync: from what the cache says is installed and the
//! desired program, which write (if any) brings the kernel in line; and for an element-only
//! change, which elements to add and delete. Unit-tested with exact expectations.

use std::borrow::Cow;
use std::sync::Arc;

use crate::dataplane::nft::ir::Element;

use super::observe::Applied;
use super::program::Program;

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
