//! Adoption: a restarted daemon trusts a policy table that already holds exactly the desired
//! program instead of rewriting it (a rewrite is atomic and drops no connection, but it is a
//! write nobody asked for, and it resets the rules' counters).
//!
//! A full write stores the program's tag (a stable hash of its structure, see [`tag`]) in
//! the table's user data; the first sync reads it back, and [`plan::adoption`] and the drift
//! check decide from the kernel's listing whether the table is still as written.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::dataplane::nft::ir::Set;
use crate::dataplane::nft::{Nft, NftError, TableRef};

use super::observe::{Applied, Check, check_drift, take_baseline};
use super::plan::{self, Adoption};
use super::program::Program;

/// The tag of `program` written without the `failed` groups: a 128-bit FNV-1a hash of its
/// structure (table, chains, rules, groups, set definitions, ct helper objects, flowtables;
/// not set elements, which the drift check compares and which other programs may add to
/// dynamic sets) and of this edgenetd's version (another version may encode the same
/// program differently).
pub fn tag(program: &Program, failed: &BTreeSet<u32>) -> String {
    let mut h = Fnv128::default();
    let t = &program.table;
    // Writing into the hasher cannot fail.
    let _ = write!(
        h,
        "{} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        env!("CARGO_PKG_VERSION"),
        t.family,
        t.name,
        t.chains,
        t.rules,
        program.groups,
        program.rule_groups,
        program.set_groups,
        failed,
    );
    // Helper objects and flowtables (with their devices, which follow the links: a link
    // that appeared while no edgenetd ran makes another program) are structure too.
    let _ = write!(
        h,
        " {:?} {:?} {:?} {:?} {:?}",
        t.ct_helpers, program.helper_groups, t.flowtables, program.flowtable_groups, t.limits,
    );
    for set in &t.sets {
        let definition = Set {
            elements: Vec::new(),
            ..set.clone()
        };
        let _ = write!(h, " {definition:?}");
    }
    format!("edgenetd-policy {:032x}", h.0)
}

/// FNV-1a over the text written into it: stable across processes, builds and platforms
/// (std's hashers promise none of that).
struct Fnv128(u128);

impl Default for Fnv128 {
    fn default() -> Self {
        Fnv128(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }
}

impl std::fmt::Write for Fnv128 {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for b in s.bytes() {
            self.0 =
                (self.0 ^ u128::from(b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
        }
        Ok(())
    }
}

/// What the first sync found.
#[derive(Debug)]
pub enum Found {
    /// The table holds the desired program: the snapshot to trust.
    Adopted(Box<Applied>),
    /// Write the table; `drifted` when it held the desired program but was edited since.
    Write {
        /// Counted as a drift repair.
        drifted: bool,
    },
}

/// Reads the table `t` and decides whether it holds `desired` as a full write left it.
pub fn find(nft: &mut Nft, t: &TableRef, desired: &Arc<Program>) -> Result<Found, NftError> {
    let generation = nft.generation()?;
    let state = nft.table_state(t)?;
    if state.is_none() {
        return Ok(Found::Write { drifted: false });
    }
    let listing = take_baseline(nft, t)?;
    match plan::adoption(
        state.as_ref(),
        &listing,
        desired,
        &tag(desired, &BTreeSet::new()),
    ) {
        Adoption::Adopt => {}
        Adoption::Rewrite(why) => {
            log::info!("policy: table {} is rewritten: {why}", t.name);
            return Ok(Found::Write { drifted: false });
        }
        Adoption::Drifted(why) => {
            log::warn!(
                "policy: table {} changed behind edgenetd's back: {why}",
                t.name
            );
            return Ok(Found::Write { drifted: true });
        }
    }
    if nft.generation()? != generation {
        // Somebody committed while we listed: the listing may be half old, half new.
        return Ok(Found::Write { drifted: false });
    }
    let mut applied = Applied {
        program: desired.clone(),
        failed: BTreeSet::new(),
        generation,
        baseline: Some(listing),
        want_elements: None,
        elements_checked_at: None,
        check_pending: false,
    };
    match check_drift(nft, &mut applied)? {
        Check::Clean => {
            log::info!("policy: table {} adopted as it is", t.name);
            Ok(Found::Adopted(Box::new(applied)))
        }
        Check::Drifted | Check::Deferred => {
            log::warn!(
                "policy: table {} changed behind edgenetd's back: set elements differ",
                t.name
            );
            Ok(Found::Write { drifted: true })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(toml: &str) -> Program {
        let desired = crate::config::load_str(&[("edgenetd.toml", toml)]).unwrap();
        super::super::program::build(desired.policy.as_ref().unwrap(), "t")
    }

    const BASE: &str =
        "[policy]\n[policy.set.blocked]\ntype = \"ipv4\"\nelements = [\"192.0.2.1\"]\n";

    #[test]
    fn the_tag_names_the_structure_not_the_elements() {
        let p = program(BASE);
        let none = BTreeSet::new();
        assert_eq!(tag(&p, &none), tag(&program(BASE), &none), "stable");
        assert!(tag(&p, &none).starts_with("edgenetd-policy "));
        let more = program(&BASE.replace("\"192.0.2.1\"", "\"192.0.2.1\", \"192.0.2.2\""));
        assert_eq!(tag(&p, &none), tag(&more, &none), "elements are left out");
        let other = program(&BASE.replace("[policy]\n", "[policy]\nforward = \"accept\"\n"));
        assert_ne!(tag(&p, &none), tag(&other, &none), "a structural change");
        assert_ne!(
            tag(&p, &none),
            tag(&p, &BTreeSet::from([1])),
            "a table written without refused groups is another table"
        );
    }

    #[test]
    fn the_tag_is_the_same_in_every_process() {
        // A hash seeded per process would make every restart rewrite the table: the hasher
        // is plain FNV-1a (the published 128-bit test vector for "a").
        let mut h = Fnv128::default();
        let _ = h.write_str("a");
        assert_eq!(h.0, 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
        let t = tag(&program(BASE), &BTreeSet::new());
        assert_eq!(t.len(), "edgenetd-policy ".len() + 32);
    }
}
