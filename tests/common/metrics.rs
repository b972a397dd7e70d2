//! Reads the Prometheus text exposition by exact series: a metric name and its whole label
//! set, never a prefix (`edgenetd_routes` must not find `edgenetd_routes_installed`, and a
//! series without labels must not find one with labels).

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The metric name (for histograms including `_bucket`, `_sum`, `_count`).
    pub name: String,
    /// Every label, by name.
    pub labels: BTreeMap<String, String>,
    /// The sample value.
    pub value: f64,
}

impl Series {
    /// True when this is exactly `name` with exactly `labels` (in any order).
    pub fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name
            && self.labels.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| self.labels.get(*k).map(String::as_str) == Some(*v))
    }
}

/// Every sample of an exposition, in order. Panics on a line that is not valid exposition
/// text: the daemon's output must parse.
pub fn parse(text: &str) -> Vec<Series> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("not a Prometheus sample: {l:?}")))
        .collect()
}

/// The value of exactly `name` with exactly `labels`; `None` when no such series exists.
/// Panics when the series appears twice (invalid exposition).
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = parse(text).into_iter().filter(|s| s.is(name, labels));
    let first = found.next()?;
    assert!(
        found.next().is_none(),
        "{name}{labels:?} appears more than once"
    );
    Some(first.value)
}

fn parse_line(line: &str) -> Option<Series> {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..name_end];
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid_name {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    // An optional timestamp, then nothing.
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().ok()?;
    }
    fields.next().is_none().then_some(Series {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `k="v",...}`; returns the labels and the text after the closing brace.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let mut chars = s[eq + 1..].trim_start().char_indices();
        let start = s.len() - s[eq + 1..].trim_start().len();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let mut escaped = false;
        let mut end = None;
        for (i, c) in chars {
            if escaped {
                value.push(if c == 'n' { '\n' } else { c });
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(start + i + 1);
                break;
            } else {
                value.push(c);
            }
        }
        if labels.insert(key, value).is_some() {
            return None;
        }
        s = s[end?..].trim_start();
        match s.strip_prefix(',') {
            Some(after) => s = after,
            None if s.starts_with('}') => {}
            None => return None,
        }
    }
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}
