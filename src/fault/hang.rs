//! The `[[track]]` probers made to wedge after their first probe (the rule key `inject_hang`),
//! so the supervisor's heartbeat contract is tested on the real binary.
//!
//! Process-wide, like [`super::kernel_reject`]: the config parser sets it, the prober reads it
//! before each probe, and the track model carries no test-only field.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Names of the tracks whose prober hangs.
static HANGING: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Makes the prober of track `name` hang after its first probe (or, with `false`, not).
pub fn set_track(name: &str, hang: bool) {
    // A poisoned lock only means a test panicked while holding it; the set itself is intact.
    let mut table = HANGING.lock().unwrap_or_else(|e| e.into_inner());
    if hang {
        table.insert(name.to_string());
    } else {
        table.remove(name);
    }
}

/// Whether the prober of track `name` is to hang.
pub fn track_hangs(name: &str) -> bool {
    HANGING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hanging_track_hangs_until_cleared() {
        assert!(!track_hangs("fault-test-track"));
        set_track("fault-test-track", true);
        assert!(track_hangs("fault-test-track"));
        set_track("fault-test-track", false);
        assert!(!track_hangs("fault-test-track"));
    }
}
