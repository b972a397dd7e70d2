//! The kernel's routes and rules, read back with `ip -j`.

use serde_json::Value;

use super::shell::sh;

/// The JSON array an `ip -j ...` command prints.
pub fn ip_json(cmd: &str) -> Vec<Value> {
    serde_json::from_str(&sh(cmd)).unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// edgenetd's routes (protocol 190) in every table.
pub fn owned_routes() -> Vec<Value> {
    ip_json("ip -j route show proto 190 table all")
}

/// True when edgenetd has a route to `dst` in some table.
pub fn has_owned_route(dst: &str) -> bool {
    owned_routes().iter().any(|r| r["dst"] == dst)
}

/// Routes of both families in every table whose protocol is none of `protocols` (leave out
/// `kernel`: IPv6 link-local routes come and go by themselves as interfaces configure).
pub fn routes_except(protocols: &[&str]) -> Vec<Value> {
    let mut all = ip_json("ip -j route show table all");
    all.extend(ip_json("ip -6 -j route show table all"));
    all.retain(|r| !protocols.iter().any(|p| r["protocol"] == *p));
    all
}

/// Rules of both families whose protocol is none of `protocols`.
pub fn rules_except(protocols: &[&str]) -> Vec<Value> {
    let mut all = ip_json("ip -j rule show");
    all.extend(ip_json("ip -6 -j rule show"));
    all.retain(|r| !protocols.iter().any(|p| r["protocol"] == *p));
    all
}
