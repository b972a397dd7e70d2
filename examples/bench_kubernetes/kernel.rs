//! What a table costs the kernel, counted from `nft -j list table`: chains, rules, the
//! elements of its named sets and maps, and the elements of the anonymous sets and maps
//! inside its rules (kube-proxy's per-service `numgen ... vmap { ... }`). Each is a kernel
//! object with its own allocation, so their sum is the figure to compare layouts by.

use std::fmt;
use std::process::Command;

use serde_json::Value;

/// The objects of one table.
#[derive(Debug, Default, Clone)]
pub struct Objects {
    /// Chains.
    pub chains: usize,
    /// Rules.
    pub rules: usize,
    /// Elements of named sets and maps.
    pub elements: usize,
    /// Elements of anonymous sets and maps (inside rules).
    pub anonymous: usize,
    /// The named sets and maps that have elements, most first.
    pub sets: Vec<(String, usize)>,
}

impl Objects {
    /// Every kernel object counted.
    pub fn total(&self) -> usize {
        self.chains + self.rules + self.elements + self.anonymous
    }
}

impl fmt::Display for Objects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} objects: {} chains, {} rules, {} set elements, {} anonymous elements",
            self.total(),
            self.chains,
            self.rules,
            self.elements,
            self.anonymous
        )?;
        if !self.sets.is_empty() {
            let sets: Vec<String> = self
                .sets
                .iter()
                .take(6)
                .map(|(n, k)| format!("{n} {k}"))
                .collect();
            write!(f, "; biggest sets: {}", sets.join(", "))?;
        }
        Ok(())
    }
}

/// Counts the objects of table `family name` in the current network namespace.
pub fn count(family: &str, name: &str) -> Objects {
    let out = Command::new("nft")
        .args(["-j", "list", "table", family, name])
        .output()
        .expect("nft -j list table");
    assert!(
        out.status.success(),
        "nft -j list table {family} {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("nft's JSON");
    of_json(&json)
}

/// The same, from `nft -j` output.
fn of_json(json: &Value) -> Objects {
    let mut o = Objects::default();
    for item in json["nftables"].as_array().into_iter().flatten() {
        if item.get("chain").is_some() {
            o.chains += 1;
        } else if let Some(set) = item.get("set").or_else(|| item.get("map")) {
            let n = set["elem"].as_array().map_or(0, Vec::len);
            o.elements += n;
            if n > 0 {
                o.sets
                    .push((set["name"].as_str().unwrap_or("?").to_string(), n));
            }
        } else if let Some(rule) = item.get("rule") {
            o.rules += 1;
            o.anonymous += anonymous_elements(&rule["expr"]);
        }
    }
    o.sets
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    o
}

/// Elements of the anonymous sets written inline in an expression (`{"set": [...]}`).
fn anonymous_elements(expr: &Value) -> usize {
    match expr {
        Value::Array(items) => items.iter().map(anonymous_elements).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match (k.as_str(), v) {
                ("set", Value::Array(items)) => items.len(),
                _ => anonymous_elements(v),
            })
            .sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::of_json;

    #[test]
    fn a_vmap_in_a_rule_counts_its_elements() {
        let json = serde_json::json!({"nftables": [
            {"metainfo": {}},
            {"table": {"family": "ip", "name": "t"}},
            {"chain": {"name": "a"}},
            {"chain": {"name": "b"}},
            {"map": {"name": "m", "elem": [[1, 2], [3, 4]]}},
            {"set": {"name": "s"}},
            {"rule": {"chain": "a", "expr": [{"vmap": {"key": {}, "data": {"set": [[0, {"goto": {"target": "b"}}], [1, {"goto": {"target": "b"}}], [2, {"goto": {"target": "b"}}]]}}}]}},
            {"rule": {"chain": "b", "expr": [{"accept": null}]}}
        ]});
        let o = of_json(&json);
        assert_eq!((o.chains, o.rules, o.elements, o.anonymous), (2, 2, 2, 3));
        assert_eq!(o.sets, vec![("m".to_string(), 2)]);
    }
}
