//! Label selectors as the API server reads them: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x,y)`, `a`, `!a`, joined by commas (all must hold).

use std::collections::BTreeMap;

/// One requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    /// The label has one of these values.
    In(String, Vec<String>),
    /// The label is absent or has none of these values.
    NotIn(String, Vec<String>),
    /// The label is present.
    Exists(String),
    /// The label is absent.
    Absent(String),
}

/// A parsed selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Req>);

impl Selector {
    /// Parses `text`; `Err` with a message the server returns as 400.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for part in split_top(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_req(part)?);
        }
        Ok(Selector(reqs))
    }

    /// True when every requirement holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Req::Exists(k) => labels.contains_key(k),
            Req::Absent(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// One requirement.
fn parse_req(part: &str) -> Result<Req, String> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Req::Absent(k.trim().to_string()));
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (k.trim().to_string(), vec![v.trim().to_string()]);
            return Ok(if neg { Req::NotIn(k, v) } else { Req::In(k, v) });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let rest = rest.trim();
        let (neg, list) = if let Some(l) = rest.strip_prefix("notin") {
            (true, l)
        } else if let Some(l) = rest.strip_prefix("in") {
            (false, l)
        } else {
            return Err(format!("unable to parse requirement: {part:?}"));
        };
        let list = list
            .trim()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| format!("unable to parse requirement: {part:?}"))?;
        let values = list.split(',').map(|v| v.trim().to_string()).collect();
        let key = key.to_string();
        return Ok(if neg {
            Req::NotIn(key, values)
        } else {
            Req::In(key, values)
        });
    }
    Ok(Req::Exists(part.to_string()))
}
