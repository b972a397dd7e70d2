//! Figures the README states that are constants in the code: each is defined once, in the
//! code, and this test holds the README to it (issue 21 item 7). The watch's figures are
//! held by `kubernetes::watch::docs_tests`, the config limits by `config::limits_tests`.

use std::time::Duration;

/// `200 ms`, `5 s`: how the docs write a duration.
fn said(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[test]
fn the_readme_states_the_config_reload_figures() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .unwrap()
        .replace('\n', " ");
    let want = format!(
        "events has been quiet for {}; where inotify is unavailable, a {} poll",
        said(edgenetd::source::SETTLE),
        said(edgenetd::source::POLL_INTERVAL)
    );
    assert!(readme.contains(&want), "README.md does not say {want:?}");
}
