//! `[[route]]`, `[[route_rule]]` and `[[track]]`: static routes, routing policy rules and the
//! uplink probes routes can be tied to.
//!
//! Raw serde structs (unknown keys are errors) are validated into plain types. Every problem
//! points at the offending value: a gateway of the wrong family, a multipath route that also
//! sets `via`, a bad prefix, an unknown table name, a route or rule defined twice (naming both
//! places). Routes arrive one at a time while the files are read ([`RouteList`]), so a config
//! of 100,000 routes never holds them as a tree. Nothing here knows about netlink; the route
//! controller translates these types.

use std::collections::BTreeMap;

use super::diag::Diagnostics;
use super::doc::{Doc, ElementSink};

mod fast;
mod fingerprint;
mod model;
mod raw;
mod routes;
mod rules;
mod track;
mod values;

pub use fingerprint::{Routes, RoutesMut, fingerprint};
pub use model::*;
pub use routes::RouteList;
pub use track::{
    DEFAULT_INTERVAL, MAX_DEFAULT_TIMEOUT, TRACK_MARK_BASE, TRACK_PRIORITY_BASE, TRACK_TABLE_BASE,
};

/// Finishes the routes (`list`, filled while the files were read) and validates every
/// `[[route_rule]]`. The problems of the routes are reported here, after those of the
/// sections validated before.
pub fn validate(doc: &Doc<'_>, mut list: RouteList, diags: &mut Diagnostics) -> RoutingConfig {
    match doc.array("route") {
        // Only what the loader could not take: entries of an array that is not all tables.
        Some(Ok(items)) => {
            for item in items.iter() {
                list.push(item.clone());
            }
        }
        Some(Err(value)) => diags.error(
            value.span(),
            format!(
                "invalid type: {}, expected an array of tables such as [[route]]",
                value.get_ref().type_str()
            ),
        ),
        None => {}
    }
    diags.append(&mut list.diags);
    let rules = rules::validate_rules(doc.items("route_rule", diags), diags);
    let tracks = track::validate_tracks(doc.items("track", diags), diags);
    let tracked = tracked_routes(&list, &tracks, diags);
    RoutingConfig {
        routes: Routes::from(list.routes),
        rules,
        tracks,
        tracked,
    }
}

/// The routes that name a track, by identity; an unknown track name is an error at its place.
fn tracked_routes(
    list: &RouteList,
    tracks: &[Track],
    diags: &mut Diagnostics,
) -> BTreeMap<RouteId, String> {
    let mut tracked = BTreeMap::new();
    for (index, name) in &list.tracks {
        if tracks.iter().any(|t| t.name == *name.get_ref()) {
            tracked.insert(list.routes[*index].id(), name.get_ref().clone());
            continue;
        }
        let known: Vec<String> = tracks.iter().map(|t| format!("`{}`", t.name)).collect();
        let hint = if known.is_empty() {
            "no [[track]] is defined".to_string()
        } else {
            format!("defined tracks: {}", known.join(", "))
        };
        diags.error(
            name.span(),
            format!("unknown track `{}`: {hint}", name.get_ref()),
        );
    }
    tracked
}

#[cfg(test)]
mod tests;
