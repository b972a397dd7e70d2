//! Where the queries come from: the Grafana dashboard shipped in packaging/grafana/ and the
//! alert rules published in docs/operations.md (the block the package installs as
//! examples/prometheus-alerts.yml).

use serde_json::Value;

/// The dashboard file, relative to the repository.
pub const DASHBOARD: &str = "packaging/grafana/edgenetd.json";

/// One query to check, named so a failure says where it is.
#[derive(Debug, Clone)]
pub struct Query {
    /// `panel 7 "Sync rate" A`, `alert EdgenetdDown`, `variable controller`.
    pub place: String,
    /// The PromQL, with template variables already replaced by sample values.
    pub expr: String,
}

/// Sample values for the dashboard's own variables, as a Prometheus scraping the test's daemon
/// would see them (job and instance of the scrape config the live test writes).
pub const VARIABLES: &[(&str, &str)] = &[
    ("job", "edgenetd"),
    ("instance", "127.0.0.1:9750"),
    ("controller", "route|policy|service"),
];

/// Grafana's built-in interval variables and what they stand for in the checks.
/// (The live test's Prometheus scrapes every second; Grafana's `$__rate_interval` is at least
/// four scrape intervals.)
const BUILTINS: &[(&str, &str)] = &[
    ("__rate_interval", "5s"),
    ("__interval", "1s"),
    ("__range", "1m"),
];

fn repo_file(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The dashboard JSON.
pub fn dashboard() -> Value {
    serde_json::from_str(&repo_file(DASHBOARD))
        .unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Every panel, those inside collapsed rows included.
pub fn panels(dash: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

/// Replaces `$name`, `${name}` and `[[name]]` for every variable in `values`; panics naming
/// `place` if a `$` is left (a variable the dashboard does not define).
pub fn substitute(place: &str, expr: &str, values: &[(&str, &str)]) -> String {
    let mut out = expr.to_string();
    // Longest names first, so `$__interval` does not eat the start of `$__interval_ms`.
    let mut all: Vec<(&str, &str)> = values.iter().chain(BUILTINS).copied().collect();
    all.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, value) in all {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("[[{name}]]"), value)
            .replace(&format!("${name}"), value);
    }
    assert!(
        !out.contains('$'),
        "{place}: a template variable the dashboard does not define is left in {out:?}"
    );
    out
}

/// Every panel target and every query variable of the dashboard, substituted.
pub fn dashboard_queries(dash: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for p in panels(dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let place = format!("panel {} {} {}", p["id"], p["title"], t["refId"]);
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{place}: no expr"));
            out.push(Query {
                expr: substitute(&place, expr, VARIABLES),
                place,
            });
        }
    }
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" {
            let place = format!("variable {}", v["name"]);
            let query = v["query"]["query"].as_str().expect("a variable's query");
            out.push(Query {
                expr: substitute(&place, &label_values_selector(query), VARIABLES),
                place,
            });
        }
    }
    out
}

/// `label_values(sel, label)` → `sel`: the PromQL part of Grafana's variable query.
fn label_values_selector(query: &str) -> String {
    let inner = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("variable query {query:?} is not label_values(selector, label)"));
    let (selector, _label) = inner
        .rsplit_once(',')
        .expect("label_values(selector, label)");
    selector.trim().to_string()
}

/// The alert rules YAML published in docs/operations.md ("Alert rules to copy"), extracted
/// as packaging/build-debs.sh and packaging/prometheus/check-alerts.sh extract it.
pub fn alert_rules_yaml() -> String {
    let doc = repo_file("docs/operations.md");
    let section = doc
        .split_once("### Alert rules to copy")
        .expect("docs/operations.md: no \"Alert rules to copy\" section")
        .1;
    let block = section
        .split_once("```yaml\n")
        .expect("no yaml block under \"Alert rules to copy\"")
        .1;
    block
        .split_once("```")
        .expect("unterminated yaml block")
        .0
        .to_string()
}

/// Every alert's expression (a one-line `expr:` or a `expr: |` block), named by its alert.
pub fn alert_queries(yaml: &str) -> Vec<Query> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    let mut alert = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            alert = name.trim().to_string();
        }
        let Some(rest) = trimmed.strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - trimmed.len();
        let rest = rest.trim();
        let expr = if rest == "|" || rest == ">" {
            lines[i + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            rest.trim_matches(['"', '\'']).to_string()
        };
        out.push(Query {
            place: format!("alert {alert}"),
            expr,
        });
    }
    out
}
