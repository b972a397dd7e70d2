//! The Grafana dashboard (packaging/grafana/edgenetd.json) and the alert rules
//! (docs/operations.md) are checked here, since Grafana itself cannot run on these machines:
//! the dashboard has the fields Grafana needs, every query parses (`promtool check rules` on
//! the queries written as recording rules), and every metric they read is exported by the real
//! daemon (its live /metrics, in a throwaway network namespace), and a real Prometheus
//! scraping that daemon answers every panel's query with data.

use crate::common;
use crate::netns_test;

#[path = "dashboard/grafana.rs"]
mod grafana;
#[path = "dashboard/prometheus.rs"]
mod prometheus;
#[path = "dashboard/promql.rs"]
mod promql;
#[path = "dashboard/sources.rs"]
mod sources;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use common::daemon::Daemon;
use common::metrics;
use common::netns::skips_are_failures;
use common::scratch::ScratchDir;
use common::wait::wait_until;
use sources::Query;

/// Series Prometheus makes itself for every scrape: a query may read them, the daemon does not
/// export them.
const SCRAPE_SERIES: &[&str] = &["up"];

/// What the dashboard must show an operator (the list): every one of these is read by
/// some panel.
const MUST_SHOW: &[&str] = &[
    "edgenetd_controller_live",
    "edgenetd_controller_syncs_total",
    "edgenetd_controller_sync_failures_total",
    "edgenetd_controller_sync_last_success",
    "edgenetd_controller_sync_duration_seconds_bucket",
    "edgenetd_routes_installed",
    "edgenetd_policy_rules",
    "edgenetd_services",
    "edgenetd_service_backends",
    "edgenetd_route_drift_repairs_total",
    "edgenetd_policy_drift_repairs_total",
    "edgenetd_service_drift_repairs_total",
    "edgenetd_config_last_reload_successful",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
];

/// Functions whose argument must be a counter (or a histogram's buckets, sum or count).
const COUNTER_FUNCTIONS: &[&str] = &["rate", "irate", "increase", "resets"];

/// The daemon of the live test: every controller on, nothing to program.
const CONFIG: &str = "[daemon]\nlisten = \"127.0.0.1:9750\"\n";

fn all_queries() -> Vec<Query> {
    let mut queries = sources::dashboard_queries(&sources::dashboard());
    queries.extend(sources::alert_queries(&sources::alert_rules_yaml()));
    queries
}

/// Runs promtool; `None` when it is not installed (a failure under CI).
fn promtool(args: &[&str]) -> Option<(bool, String)> {
    match Command::new("promtool").args(args).output() {
        Ok(out) => Some((
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )),
        Err(e) => {
            assert!(
                !skips_are_failures(),
                "promtool is required here (apt-get install prometheus): {e}"
            );
            eprintln!("SKIPPED: promtool not installed ({e})");
            None
        }
    }
}

/// Writes `queries` as recording rules (JSON is YAML) and runs `promtool check rules` on them.
fn check_as_rules(dir: &ScratchDir, queries: &[Query]) -> Option<(bool, String)> {
    let rules: Vec<_> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| serde_json::json!({ "record": format!("edgenetd_check:query_{i}"), "expr": q.expr }))
        .collect();
    let file = serde_json::json!({ "groups": [{ "name": "dashboard", "rules": rules }] });
    dir.write("rules.yml", &file.to_string());
    let path = dir.join("rules.yml");
    promtool(&["check", "rules", path.to_str().unwrap()])
}

#[test]
fn the_dashboard_has_the_fields_grafana_needs() {
    let problems = grafana::shape_problems(&sources::dashboard());
    assert!(
        problems.is_empty(),
        "{}:\n{}",
        sources::DASHBOARD,
        problems.join("\n")
    );
}

#[test]
fn the_alert_rules_and_the_dashboard_queries_are_found() {
    let alerts = sources::alert_queries(&sources::alert_rules_yaml());
    let names: Vec<&str> = alerts.iter().map(|q| q.place.as_str()).collect();
    assert_eq!(
        names,
        [
            "alert EdgenetdSyncFailing",
            "alert EdgenetdControllerNotLive",
            "alert EdgenetdDown",
            "alert EdgenetdConfigReloadFailing",
            "alert EdgenetdConfigDegraded",
            "alert EdgenetdRestarting",
        ]
    );
    assert!(alerts[0].expr.lines().count() == 3, "{:?}", alerts[0].expr);
    for q in all_queries() {
        assert!(
            !promql::metric_uses(&q.expr).is_empty(),
            "{} reads no metric: {}",
            q.place,
            q.expr
        );
    }
}

#[test]
fn every_dashboard_and_alert_query_parses_under_promtool() {
    let dir = ScratchDir::new("dashboard-promtool");
    // The check can fail: a query that does not parse is refused.
    let broken = Query {
        place: "broken".into(),
        expr: "sum(rate(x[5m])".into(),
    };
    let Some((ok, out)) = check_as_rules(&dir, &[broken]) else {
        return;
    };
    assert!(!ok, "promtool accepted an unbalanced parenthesis: {out}");
    let queries = all_queries();
    let (ok, out) = check_as_rules(&dir, &queries).unwrap();
    let named: Vec<String> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| format!("query_{i}: {}: {}", q.place, q.expr))
        .collect();
    assert!(
        ok,
        "promtool check rules:\n{out}\nthe queries:\n{}",
        named.join("\n")
    );
    dir.write("alerts.yml", &sources::alert_rules_yaml());
    let alerts = dir.join("alerts.yml");
    let (ok, out) = promtool(&["check", "rules", alerts.to_str().unwrap()]).unwrap();
    assert!(
        ok,
        "promtool check rules on the published alert rules:\n{out}"
    );
}

#[test]
fn the_dashboard_shows_liveness_syncs_state_drift_reloads_and_the_process() {
    let queries = sources::dashboard_queries(&sources::dashboard());
    let read: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| promql::metric_uses(&q.expr))
        .map(|u| u.name)
        .collect();
    let missing: Vec<_> = MUST_SHOW.iter().filter(|m| !read.contains(**m)).collect();
    assert!(missing.is_empty(), "no panel reads {missing:?}");
    assert!(
        queries
            .iter()
            .any(|q| q.expr.contains("histogram_quantile(")
                && q.expr
                    .contains("edgenetd_controller_sync_duration_seconds_bucket")),
        "no sync duration quantile panel"
    );
}

/// Every metric family of an exposition and its `# TYPE`.
fn families(exposition: &str) -> BTreeMap<String, String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.trim().to_string()))
        .collect()
}

/// What is wrong with `use_` against the exposition, if anything.
fn check_use(
    place: &str,
    use_: &promql::Use,
    families: &BTreeMap<String, String>,
    samples: &BTreeSet<String>,
) -> Option<String> {
    let name = use_.name.as_str();
    if SCRAPE_SERIES.contains(&name) {
        return None;
    }
    let histogram_part = ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .find(|base| families.get(*base).is_some_and(|k| k == "histogram"));
    let kind = match (families.get(name), histogram_part) {
        (Some(kind), _) => kind.as_str(),
        (None, Some(_)) => "histogram",
        (None, None) => {
            return Some(format!(
                "{place} reads {name}, which the daemon does not export"
            ));
        }
    };
    if !samples.contains(name) {
        return Some(format!(
            "{place} reads {name}: described by the daemon but without a sample"
        ));
    }
    let counter_like = kind == "counter" || histogram_part.is_some();
    if COUNTER_FUNCTIONS.contains(&use_.function.as_str()) && !counter_like {
        return Some(format!(
            "{place} applies {}() to {name}, a {kind}",
            use_.function
        ));
    }
    None
}

netns_test! {
    fn every_metric_the_dashboard_and_alert_rules_read_is_exported_by_the_daemon() {
        let d = Daemon::start("dashboard", CONFIG);
        d.wait_ready();
        // The duration histogram has series once each controller's first sync is recorded.
        for c in ["policy", "service", "route"] {
            wait_until(&format!("the {c} controller's first sync in the histogram"), Duration::from_secs(10), || {
                d.metric("edgenetd_controller_sync_duration_seconds_count", &[("controller", c)]).is_some_and(|n| n >= 1.0)
            });
        }
        let (status, body) = d.get("/metrics");
        assert_eq!(status, 200, "{body}");
        let families = families(&body);
        let samples: BTreeSet<String> = metrics::parse(&body).into_iter().map(|s| s.name).collect();
        // The check can fail: a name the daemon does not have is reported.
        let bogus = promql::Use { name: "edgenetd_process_open_fds".into(), function: String::new() };
        assert!(check_use("self-check", &bogus, &families, &samples).is_some());
        let mut problems = Vec::new();
        for q in all_queries() {
            for u in promql::metric_uses(&q.expr) {
                problems.extend(check_use(&q.place, &u, &families, &samples));
            }
        }
        assert!(problems.is_empty(), "{}\n/metrics:\n{body}", problems.join("\n"));
    }
}

netns_test! {
    fn every_panel_shows_data_from_a_prometheus_scraping_the_daemon() {
        let d = Daemon::start("dashboard-prometheus", CONFIG);
        d.wait_ready();
        // Six scrapes a second apart: enough for rates over `$__rate_interval` (5 s here).
        let Some(prom) = prometheus::Prometheus::start("edgenetd", common::daemon::DEFAULT_LISTEN, 6) else {
            assert!(!skips_are_failures(), "prometheus is required here (apt-get install prometheus)");
            eprintln!("SKIPPED: prometheus not installed");
            return;
        };
        // The check can fail: a selector the daemon does not match is empty.
        assert!(prom.query("process_open_fds{job=\"edgenetd\",instance=\"elsewhere:9750\"}").is_empty());
        let mut empty = Vec::new();
        for q in sources::dashboard_queries(&sources::dashboard()) {
            if prom.query(&q.expr).is_empty() {
                empty.push(format!("{}: {}", q.place, q.expr));
            }
        }
        // Alerts are quiet on a healthy daemon; Prometheus must still take each one.
        for q in sources::alert_queries(&sources::alert_rules_yaml()) {
            prom.query(&q.expr);
        }
        assert!(empty.is_empty(), "no data for:\n{}\nPrometheus log:\n{}", empty.join("\n"), prom.log());
    }
}
