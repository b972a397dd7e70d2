//! The fields Grafana needs to import and draw a dashboard, checked without Grafana: a
//! title, a uid, a schemaVersion, a Prometheus data source every query names through a
//! variable, panels with unique ids on the 24-column grid without overlapping, and targets
//! with an expression and a unique refId.

use std::collections::BTreeSet;

use serde_json::Value;

use super::sources::{VARIABLES, panels};

/// The oldest schema that takes data sources as `{type, uid}` objects.
const MIN_SCHEMA_VERSION: u64 = 36;

/// Panel types the dashboard may use (all built into Grafana).
const PANEL_TYPES: &[&str] = &[
    "row",
    "timeseries",
    "stat",
    "gauge",
    "table",
    "bargauge",
    "state-timeline",
    "text",
];

/// A panel's place on the grid: x, y, w, h.
type Rect = (u64, u64, u64, u64);

/// Everything wrong with `dash`, one line each; empty when Grafana can take it.
pub fn shape_problems(dash: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    need(
        dash["title"].as_str().is_some_and(|t| !t.is_empty()),
        "no title".into(),
    );
    let uid = dash["uid"].as_str().unwrap_or("");
    need(
        (1..=40).contains(&uid.len())
            && uid
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        format!("uid {uid:?}: 1 to 40 letters, digits, - or _"),
    );
    need(
        dash["schemaVersion"]
            .as_u64()
            .is_some_and(|v| v >= MIN_SCHEMA_VERSION),
        format!(
            "schemaVersion {} (at least {MIN_SCHEMA_VERSION})",
            dash["schemaVersion"]
        ),
    );
    need(
        dash["time"]["from"].is_string() && dash["time"]["to"].is_string(),
        "no time range".into(),
    );
    let datasources = datasource_refs(dash);
    need(
        !datasources.is_empty(),
        "no Prometheus data source variable or ${DS_…} input".into(),
    );
    problems.extend(variable_problems(dash, &datasources));
    let mut ids = BTreeSet::new();
    let mut rects: Vec<(String, Rect)> = Vec::new();
    for p in panels(dash) {
        let name = format!("panel {} {}", p["id"], p["title"]);
        if !p["id"].as_u64().is_some_and(|id| ids.insert(id)) {
            problems.push(format!("{name}: id missing or not unique"));
        }
        problems.extend(panel_problems(&name, p, &datasources));
        match rect(p) {
            Some(r) => {
                for (other, o) in &rects {
                    if overlap(r, *o) {
                        problems.push(format!("{name} overlaps {other}"));
                    }
                }
                rects.push((name, r));
            }
            None => problems.push(format!(
                "{name}: gridPos needs x, y, w > 0, h > 0 with x + w <= 24"
            )),
        }
    }
    if panels(dash).iter().filter(|p| p["type"] != "row").count() < 2 {
        problems.push("fewer than two panels".into());
    }
    problems
}

/// The data source references queries may use: `${var}` of a Prometheus data source variable,
/// `${DS_…}` of a Prometheus import input.
fn datasource_refs(dash: &Value) -> BTreeSet<String> {
    let vars = dash["templating"]["list"].as_array().into_iter().flatten();
    let from_vars = vars
        .filter(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        .filter_map(|v| v["name"].as_str());
    let inputs = dash["__inputs"].as_array().into_iter().flatten();
    let from_inputs = inputs
        .filter(|i| i["type"] == "datasource" && i["pluginId"] == "prometheus")
        .filter_map(|i| i["name"].as_str());
    from_vars
        .chain(from_inputs)
        .map(|n| format!("${{{n}}}"))
        .collect()
}

fn names_prometheus(ds: &Value, datasources: &BTreeSet<String>) -> bool {
    ds["type"] == "prometheus" && ds["uid"].as_str().is_some_and(|u| datasources.contains(u))
}

/// The query variables are exactly the ones the checks substitute, each on the data source.
fn variable_problems(dash: &Value, datasources: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        let name = v["name"].as_str().unwrap_or("");
        match v["type"].as_str() {
            Some("datasource") => {}
            Some("query") => {
                names.insert(name);
                if !names_prometheus(&v["datasource"], datasources) {
                    problems.push(format!("variable {name}: datasource {}", v["datasource"]));
                }
                if !v["query"]["query"]
                    .as_str()
                    .is_some_and(|q| q.starts_with("label_values("))
                {
                    problems.push(format!("variable {name}: query {}", v["query"]));
                }
            }
            other => problems.push(format!(
                "variable {name}: type {other:?} is not checked here"
            )),
        }
    }
    let expected: BTreeSet<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
    if names != expected {
        problems.push(format!(
            "query variables {names:?}, the checks substitute {expected:?}"
        ));
    }
    problems
}

fn panel_problems(name: &str, p: &Value, datasources: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let kind = p["type"].as_str().unwrap_or("");
    if !PANEL_TYPES.contains(&kind) {
        problems.push(format!("{name}: type {kind:?}"));
    }
    if p["title"].as_str().is_none_or(str::is_empty) {
        problems.push(format!("{name}: no title"));
    }
    if kind == "row" {
        let nested = p["panels"].as_array().map_or(0, Vec::len);
        if p["collapsed"] == false && nested > 0 {
            problems.push(format!(
                "{name}: an open row keeps its panels at the top level"
            ));
        }
        return problems;
    }
    if !names_prometheus(&p["datasource"], datasources) {
        problems.push(format!("{name}: datasource {}", p["datasource"]));
    }
    let targets = p["targets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if targets.is_empty() {
        problems.push(format!("{name}: no targets"));
    }
    let mut ref_ids = BTreeSet::new();
    for t in targets {
        if !t["refId"].as_str().is_some_and(|r| ref_ids.insert(r)) {
            problems.push(format!("{name}: refId {} missing or repeated", t["refId"]));
        }
        if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
            problems.push(format!("{name}: target {} has no expr", t["refId"]));
        }
        if !t["datasource"].is_null() && !names_prometheus(&t["datasource"], datasources) {
            problems.push(format!(
                "{name}: target {} datasource {}",
                t["refId"], t["datasource"]
            ));
        }
    }
    problems
}

fn rect(p: &Value) -> Option<Rect> {
    let g = &p["gridPos"];
    let (x, y, w, h) = (
        g["x"].as_u64()?,
        g["y"].as_u64()?,
        g["w"].as_u64()?,
        g["h"].as_u64()?,
    );
    (w > 0 && h > 0 && x + w <= 24).then_some((x, y, w, h))
}

fn overlap(a: Rect, b: Rect) -> bool {
    a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3
}
