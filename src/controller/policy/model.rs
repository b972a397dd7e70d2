//! Model: `[policy]` -> the program (the table the policy controller installs), memoized so an
//! unchanged config is not planned again and a change of set elements only rebuilds those
//! sets. Pure; the program itself is built by [`super::program`].

use std::sync::Arc;

use crate::config::policy::PolicyConfig;

use super::addresses::RouterAddresses;
use super::program::{self, Program};

/// What the last program was planned from: the config, the table name and the router's
/// addresses (port-forward reflection is scoped to them).
type Inputs = (Option<PolicyConfig>, String, RouterAddresses);

/// The last config planned and its program.
#[derive(Default)]
pub struct Model {
    /// The inputs and the program of the last call; `None` before the first.
    last: Option<(Inputs, Option<Arc<Program>>)>,
}

impl Model {
    /// The program for `config` in table `table` (`None` = no `[policy]`, no table). The same
    /// `Arc` as last time when nothing changed.
    pub fn program(
        &mut self,
        config: Option<&PolicyConfig>,
        table: &str,
        addrs: &RouterAddresses,
    ) -> Option<Arc<Program>> {
        let program = match &self.last {
            Some(((cfg, name, a), p)) if cfg.as_ref() == config && name == table && a == addrs => {
                return p.clone();
            }
            // Only set elements changed: patch those sets instead of planning everything.
            Some(((Some(old), name, a), Some(p)))
                if name == table
                    && a == addrs
                    && config.is_some_and(|new| program::only_set_elements_differ(old, new)) =>
            {
                let new = config.expect("checked");
                Some(Arc::new(program::with_set_elements(p, old, new)))
            }
            _ => config.map(|cfg| Arc::new(program::build_with(cfg, table, addrs))),
        };
        self.last = Some((
            (config.cloned(), table.to_string(), addrs.clone()),
            program.clone(),
        ));
        program
    }
}
