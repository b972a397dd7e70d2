//! The figures of the watch that the docs state, read from the constants the daemon runs, so a
//! change to one without the other fails here.

use std::time::Duration;

use super::{IDLE_TIMEOUT, MAX_WAIT, QUIET, TICK, WINDOW};

/// `200 ms`, `1 s`, `150 s`: how the docs write a duration.
fn said(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[test]
fn the_docs_state_the_watch_figures() {
    let root = env!("CARGO_MANIFEST_DIR");
    let read = |p: &str| {
        std::fs::read_to_string(format!("{root}/{p}"))
            .unwrap()
            .replace('\n', " ")
    };
    let kube = read("docs/kubernetes.md");
    for want in [
        format!(
            "after a quiet gap of {}, at most {} after the first change",
            said(QUIET),
            said(MAX_WAIT)
        ),
        format!("the {} pacing gap included", said(QUIET)),
        format!("for {} is taken for dead", said(IDLE_TIMEOUT)),
        format!("`controllers.kubernetes` (window {})", said(WINDOW)),
        format!("read from the kernel every {}", said(TICK)),
    ] {
        assert!(
            kube.contains(&want),
            "docs/kubernetes.md does not say {want:?}"
        );
    }
    let bench = read("docs/benchmarks.md");
    let want = format!("(the {} pacing gap included)", said(QUIET));
    assert!(
        bench.contains(&want),
        "docs/benchmarks.md does not say {want:?}"
    );
}

#[test]
fn durations_are_said_as_the_docs_write_them() {
    assert_eq!(said(Duration::from_millis(200)), "200 ms");
    assert_eq!(said(Duration::from_secs(150)), "150 s");
}
