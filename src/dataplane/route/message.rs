//! The kernel's interfaces by name and index, and the pure entry point from a kernel answer
//! (one datagram) to the route and rule specs it holds.

use std::collections::HashMap;

use super::codec::{self, Messages};
use super::spec::{RouteSpec, RuleSpec};

/// The kernel's interfaces, by name and by index, as one dump found them.
#[derive(Debug, Clone, Default)]
pub struct Links {
    by_name: HashMap<String, u32>,
    by_index: HashMap<u32, String>,
}

impl Links {
    /// Records one interface.
    pub fn insert(&mut self, index: u32, name: String) {
        self.by_name.insert(name.clone(), index);
        self.by_index.insert(index, name);
    }

    /// The index of interface `name`.
    pub fn index(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The name of interface `index`.
    pub fn name(&self, index: u32) -> Option<&str> {
        self.by_index.get(&index).map(String::as_str)
    }

    /// Number of interfaces.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when no interface is known.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The name of interface `index`, or `if<index>` for one the dump did not see (it came
    /// and went since).
    pub(super) fn name_of(&self, index: u32) -> String {
        match self.name(index) {
            Some(name) => name.to_string(),
            None => format!("if{index}"),
        }
    }
}

/// What a kernel answer (one datagram: netlink messages back to back) holds, read the way a
/// dump's replies are: each route and rule message turned into its spec, anything else or
/// anything that does not decode skipped, a truncated message ending the datagram. A pure
/// entry point, so the fuzz target can hand it arbitrary bytes.
pub fn specs_in_datagram(bytes: &[u8], links: &Links) -> (Vec<RouteSpec>, Vec<RuleSpec>) {
    let (mut routes, mut rules) = (Vec::new(), Vec::new());
    for msg in Messages::new(bytes).map_while(Result::ok) {
        match msg.kind {
            codec::route::RTM_NEWROUTE => {
                routes.extend(codec::route::parse(msg.body, links).ok().flatten())
            }
            codec::rule::RTM_NEWRULE => rules.extend(codec::rule::parse(msg.body).ok().flatten()),
            _ => {}
        }
    }
    (routes, rules)
}
