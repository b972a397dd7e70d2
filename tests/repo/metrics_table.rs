//! docs/operations.md's metrics table against the code and the live daemon: a metric added
//! without its row (or a row left behind by a removed metric) fails here, not on an
//! operator's dashboard. Two metrics of the `kubernetes` feature had no row when this was
//! written (`edgenetd_kubernetes_objects_refused_total`, `edgenetd_kubernetes_skipped_total`).

use crate::common;
use crate::netns_test;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::daemon::Daemon;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The metric names of the table under `| metric | type | meaning |` in docs/operations.md:
/// every backticked name of a row's first column, labels (`{…}`) dropped.
fn documented(operations_md: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let rows = operations_md
        .lines()
        .skip_while(|l| !l.starts_with("| metric | type | meaning |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'));
    for row in rows {
        let first = row.split('|').nth(1).unwrap_or_default();
        for (i, quoted) in first.split('`').enumerate() {
            if i % 2 == 1 {
                let name = quoted.split('{').next().unwrap_or_default();
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Every string literal in `text` that is an `edgenetd_…` metric name.
fn named_in(text: &str) -> BTreeSet<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.strip_prefix("edgenetd_").is_some_and(|rest| {
                !rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        })
        .map(str::to_string)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn named_in_the_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files
        .iter()
        .flat_map(|f| named_in(&std::fs::read_to_string(f).unwrap()))
        .collect()
}

fn table() -> BTreeSet<String> {
    documented(&std::fs::read_to_string(root().join("docs/operations.md")).unwrap())
}

#[test]
fn the_table_reader_and_the_name_finder_see_what_they_should() {
    let md = "text\n| metric | type | meaning |\n|---|---|---|\n\
              | `edgenetd_a_total{x}`, `edgenetd_b` | counter | two |\n\
              | `process_c` | gauge | `edgenetd_not_a_name` |\n\nafter `edgenetd_d`\n";
    let names: Vec<String> = documented(md).into_iter().collect();
    assert_eq!(names, ["edgenetd_a_total", "edgenetd_b", "process_c"]);
    let code = r#"const A: &str = "edgenetd_a_total"; gauge!("edgenetd_b"); "edgenetd-policy"; "EDGENETD_LOG""#;
    let names: Vec<String> = named_in(code).into_iter().collect();
    assert_eq!(names, ["edgenetd_a_total", "edgenetd_b"]);
}

#[test]
fn every_metric_named_in_the_code_has_a_row_in_the_operations_metrics_table() {
    let table = table();
    let missing: Vec<String> = named_in_the_code().difference(&table).cloned().collect();
    assert!(
        missing.is_empty(),
        "metrics in src/ without a row in docs/operations.md's metrics table: {missing:?}"
    );
}

#[test]
fn every_edgenetd_row_of_the_operations_metrics_table_is_a_metric_of_the_code() {
    let code = named_in_the_code();
    let stale: Vec<String> = table()
        .into_iter()
        .filter(|n| n.starts_with("edgenetd_") && !code.contains(n))
        .collect();
    assert!(
        stale.is_empty(),
        "rows of docs/operations.md's metrics table no code names: {stale:?}"
    );
}

netns_test! {
    // Names the code builds at run time, and the process collector's, are only in /metrics.
    fn every_metric_family_the_daemon_exports_has_a_row_and_every_process_row_is_exported() {
        let d = Daemon::start("metrics-table", "[daemon]\nlisten = \"127.0.0.1:9750\"\n");
        d.wait_ready();
        let (status, body) = d.get("/metrics");
        assert_eq!(status, 200, "{body}");
        let exported: BTreeSet<String> = body
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string)
            .collect();
        assert!(exported.contains("edgenetd_controller_syncs_total"), "{body}");
        let table = table();
        let missing: Vec<&String> = exported.difference(&table).collect();
        assert!(missing.is_empty(), "exported without a row in docs/operations.md: {missing:?}");
        let absent: Vec<&String> = table
            .iter()
            .filter(|n| n.starts_with("process_") && !exported.contains(*n))
            .collect();
        assert!(absent.is_empty(), "process rows the daemon does not export: {absent:?}\n{body}");
    }
}
