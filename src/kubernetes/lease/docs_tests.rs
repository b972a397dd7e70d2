//! The Lease's figures the docs state, read from the constants the writer runs, so a change
//! to one without the other fails here.

use super::annotations::MAX_ERROR;
use super::{DURATION_PERIODS, MIN_GAP, RENEW_EVERY};

#[test]
fn the_docs_state_the_lease_figures() {
    let root = env!("CARGO_MANIFEST_DIR");
    let kube = std::fs::read_to_string(format!("{root}/docs/kubernetes.md"))
        .unwrap()
        .replace('\n', " ");
    let duration = RENEW_EVERY.as_secs() * u64::from(DURATION_PERIODS);
    let thousands = |n: usize| format!("{},{:03}", n / 1000, n % 1000);
    for want in [
        format!(
            "renewed (`spec.renewTime`) every {} s",
            RENEW_EVERY.as_secs()
        ),
        format!("`spec.leaseDurationSeconds` is {duration}"),
        format!("whose `renewTime` plus {duration} s"),
        format!("at least {} s apart", MIN_GAP.as_secs()),
        format!("at most {} bytes", thousands(MAX_ERROR)),
        "at most three times in a row".to_string(),
        format!("every request is bounded ({} s)", super::writer::IDLE_SECS),
    ] {
        assert!(
            kube.contains(&want),
            "docs/kubernetes.md does not say {want:?}"
        );
    }
    assert_eq!(super::writer::TRIES_SAID, "three");
}
