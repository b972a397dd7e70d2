//! The groups of the policy program that are made ones the kernel refuses (their rules jump
//! to a chain that does not exist), to exercise fail-closed isolation on a real kernel.
//!
//! The table is process-wide: the config parser and the program builder meet here without a
//! test-only field in the rule model between them. Every change bumps a generation, so the
//! policy model's memo rebuilds the program when only the table changed.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Group labels (as the program builder names them) made to be refused.
static REFUSED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Bumped on every change of [`REFUSED`].
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The group label of `[[policy.rule]] name`.
fn rule_label(name: &str) -> String {
    format!("rule {name}")
}

/// The group label of a pod isolation unit `name`.
fn unit_label(name: &str) -> String {
    format!("network-policy {name}")
}

/// Sets whether the group of the labelled object is refused.
fn set(label: String, refused: bool) {
    // A poisoned lock only means a test panicked while holding it; the set itself is intact.
    let mut table = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    let changed = if refused {
        table.insert(label)
    } else {
        table.remove(&label)
    };
    if changed {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Makes the kernel refuse (or, with `false`, accept again) the group of policy rule `name`.
pub fn refuse_rule(name: &str, refused: bool) {
    set(rule_label(name), refused);
}

/// Makes the kernel refuse (or, with `false`, accept again) the group of pod isolation unit
/// `name` (e.g. `k8s:db/pg-open`).
pub fn refuse_unit(name: &str, refused: bool) {
    set(unit_label(name), refused);
}

/// Whether the group of policy rule `name` is to be refused.
pub fn rule_refused(name: &str) -> bool {
    refused(&rule_label(name))
}

/// Whether the group of pod isolation unit `name` is to be refused.
pub fn unit_refused(name: &str) -> bool {
    refused(&unit_label(name))
}

fn refused(label: &str) -> bool {
    REFUSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(label)
}

/// The table's generation: differs from an earlier value when the table changed since.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_rule_is_refused_until_cleared_and_each_change_bumps_the_generation() {
        let g = generation();
        assert!(!rule_refused("fault-test-rule"));
        refuse_rule("fault-test-rule", true);
        assert!(rule_refused("fault-test-rule"));
        assert!(
            !unit_refused("fault-test-rule"),
            "rules and units are apart"
        );
        let g1 = generation();
        assert_ne!(g1, g);
        refuse_rule("fault-test-rule", true);
        assert_eq!(generation(), g1, "no change, same generation");
        refuse_rule("fault-test-rule", false);
        assert!(!rule_refused("fault-test-rule"));
        assert_ne!(generation(), g1);
    }
}
