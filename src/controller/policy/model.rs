//! Model: `[policy]` -> the program (the table the policy controller installs), memoized so an
//! unchanged config is not planned again and a change of set elements only rebuilds those
//! sets. Pure; the program itself is built by [`super::program`].

use std::sync::Arc;

use crate::config::policy::PolicyConfig;

use super::program::{self, Program};

/// The last config planned and its program.
#[derive(Default)]
pub struct Model {
    /// `(config, table name, program)` of the last call; `None` before the first.
    last: Option<(Option<PolicyConfig>, String, Option<Arc<Program>>)>,
}

impl Model {
    /// The program for `config` in table `table` (`None` = no `[policy]`, no table). The same
    /// `Arc` as last time when nothing changed.
    pub fn program(&mut self, config: Option<&PolicyConfig>, table: &str) -> Option<Arc<Program>> {
        let program = match &self.last {
            Some((cfg, name, p)) if cfg.as_ref() == config && name == table => return p.clone(),
            // Only set elements changed: patch those sets instead of planning everything.
            Some((Some(old), name, Some(p)))
                if name == table
                    && config.is_some_and(|new| program::only_set_elements_differ(old, new)) =>
            {
                let new = config.expect("checked");
                Some(Arc::new(program::with_set_elements(p, old, new)))
            }
            _ => config.map(|cfg| Arc::new(program::build(cfg, table))),
        };
        self.last = Some((config.cloned(), table.to_string(), program.clone()));
        program
    }
}
