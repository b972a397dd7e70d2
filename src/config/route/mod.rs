//! `[[route]]` and `[[route_rule]]`: static routes and routing policy rules.
//!
//! Raw serde structs (unknown keys are errors) are validated into plain types. Every problem
//! points at the offending value: a gateway of the wrong family, a multipath route that also
//! sets `via`, a bad prefix, an unknown table name, a route or rule defined twice (naming both
//! places). Routes arrive one at a time while the files are read ([`RouteList`]), so a config
//! of 100,000 routes never holds them as a tree. Nothing here knows about netlink; the route
//! controller translates these types.

use super::diag::Diagnostics;
use super::doc::{Doc, ElementSink};

mod model;
mod raw;
mod routes;
mod rules;
mod values;

pub use model::*;
pub use routes::RouteList;

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
    RoutingConfig {
        routes: list.routes,
        rules,
    }
}

#[cfg(test)]
mod tests;
