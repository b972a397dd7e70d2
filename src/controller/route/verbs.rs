//! The one-shot verbs: `plan` (the writes a sync would make now, without making them) and
//! `cleanup` (deletes every owned route and rule, nothing else).

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::config::{DaemonSettings, DesiredState};
use crate::dataplane::route::{RouteError, RouteSocket};
use crate::sync::{SyncError, SyncReport};

use super::apply::apply;
use super::model;
use super::observe::observe;
use super::plan::Plan;
use super::tracks;

/// `edgenetd plan`: the route and rule writes a sync would make now, one per line in apply
/// order, without making them.
pub async fn plan(desired: &DesiredState) -> Result<String, RouteError> {
    let protocol = desired.daemon.route_protocol;
    if !desired.controller("route").enabled {
        return Ok("route: controller disabled (it owns nothing and changes nothing)\n".into());
    }
    let socket = RouteSocket::open()?;
    let links = socket.links().await?;
    let installed = socket.dump_routes(protocol, &links).await?;
    // `plan` runs no probe: every track counts as up, as it does when the daemon starts.
    let effective = tracks::effective(&desired.routing, &Default::default());
    let routes = model::route_specs(&effective.routes, protocol);
    let rules = model::rule_specs_of(&effective.rules, protocol);
    let mut out = String::new();
    let installed_rules = match socket.dump_rules(protocol).await {
        Ok(r) => r,
        // Without rules to configure, a kernel that cannot list rules has none of ours.
        Err(e) if rules.is_empty() => {
            let _ = writeln!(
                out,
                "route: cannot read routing rules ({e}); none configured"
            );
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let plan = Plan::new(&routes, &installed, &rules, &installed_rules);
    for line in plan.lines() {
        out.push_str(&line);
        out.push('\n');
    }
    if plan.is_empty() {
        let _ = writeln!(
            out,
            "route: in sync ({} routes, {} rules with protocol {protocol})",
            routes.len(),
            rules.len()
        );
    }
    out.push_str(&track_lines(desired, protocol));
    Ok(out)
}

/// One line per route each track withdraws while it is down.
pub fn track_lines(desired: &DesiredState, protocol: u8) -> String {
    let mut out = String::new();
    for track in &desired.routing.tracks {
        let tied = tracks::tied_routes(&desired.routing, &track.name);
        let _ = write!(
            out,
            "track {}: {} {} via {} dev {} every {:?} (fall {}, rise {}): ",
            track.name,
            track.check.name(),
            track.target_text(),
            track.via,
            track.dev,
            track.interval,
            track.fall,
            track.rise
        );
        if tied.is_empty() {
            out.push_str("no route names it; down withdraws nothing\n");
            continue;
        }
        out.push_str("while down, withdraws\n");
        for route in tied {
            let _ = writeln!(out, "  route {}", model::route_spec(route, protocol));
        }
    }
    out
}

/// `edgenetd cleanup`: deletes every route and rule carrying the route protocol, and nothing
/// else; one line per deletion. Every deletion is tried; failures are joined into the error.
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, SyncError> {
    let protocol = settings.route_protocol;
    let socket = RouteSocket::open().map_err(|e| SyncError::whole("route netlink", e))?;
    let state = observe(&socket, protocol).await?;
    let mut plan = Plan::new(&[], &state.routes, &[], &state.rules);
    // Cleanup removes rules first, so no rule is left pointing at an emptied table.
    plan.route_upserts.clear();
    let mut applied = apply(&socket, &plan, &state.links, &crate::sync::NoProgress).await;
    if let Some(e) = &state.rules_error {
        applied.errors.push(
            "route: routing rules",
            format!("cannot read the kernel's rules, none removed: {e}"),
        );
    }
    let failed: HashSet<String> = applied
        .errors
        .failures
        .iter()
        .map(|f| f.object.clone())
        .collect();
    let mut out = String::new();
    for line in plan.lines() {
        let object = line.clone();
        if !failed.contains(&object) {
            let _ = writeln!(out, "{}", line.replacen("delete", "deleted", 1));
        }
    }
    let _ = writeln!(
        out,
        "route: removed {} routes and {} rules with protocol {protocol}",
        applied.deleted, applied.rules_deleted
    );
    let summary = out.clone();
    applied.errors.into_result(SyncReport {
        summary,
        ..Default::default()
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    #[test]
    fn plan_shows_which_routes_a_down_track_withdraws() {
        let desired = load_str(&[(
            "e.toml",
            r#"
[[track]]
name = "wan1"
check = "tcp"
target = "1.1.1.1:53"
via = "203.0.113.1"
dev = "eth0"
interval = "2s"
[[track]]
name = "spare"
check = "icmp"
target = "1.0.0.1"
via = "198.51.100.1"
dev = "eth1"
[[route]]
to = "default"
via = "203.0.113.1"
dev = "eth0"
metric = 10
track = "wan1"
[[route]]
to = "default"
via = "198.51.100.1"
dev = "eth1"
metric = 20
"#,
        )])
        .unwrap();
        assert_eq!(
            track_lines(&desired, 190),
            "track wan1: tcp 1.1.1.1:53 via 203.0.113.1 dev eth0 every 2s (fall 3, rise 3): while down, withdraws\n  route 0.0.0.0/0 via 203.0.113.1 dev eth0 table main metric 10 proto 190\ntrack spare: icmp 1.0.0.1 via 198.51.100.1 dev eth1 every 5s (fall 3, rise 3): no route names it; down withdraws nothing\n"
        );
    }
}
