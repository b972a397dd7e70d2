//! A configuration whose `[[policy.include]]` snippets nft refuses is a rejected one: at
//! boot (the last good copy or the lockdown runs), on reload (the configuration in force
//! stays) and in `edgenetd check`, reported at the include's `path` key. So the policy
//! controller never holds a program it cannot write, and the router is never left without
//! its firewall by a bad snippet.

use crate::config::{ConfigError, DesiredState};
use crate::controller::policy::PolicyCliError;
use crate::controller::policy::verbs::check_includes;

/// `state` when nft takes its includes (none: no question asked), else the rejection.
pub fn vet(state: DesiredState) -> Result<DesiredState, ConfigError> {
    match check_includes(&state) {
        Ok(()) => Ok(state),
        Err(e) => Err(rejection(&e)),
    }
}

fn rejection(e: &PolicyCliError) -> ConfigError {
    let (first, rendered) = match e {
        PolicyCliError::Include(i) => {
            let mut lines = i.message.lines();
            let head = lines.next().unwrap_or("nft refused it");
            let first = format!("{}: include {}: {head}", i.at, i.path);
            let mut rendered = format!(
                "{}: error: include {}: nft refused the snippet:\n",
                i.at, i.path
            );
            for l in i.message.lines() {
                rendered.push_str("  ");
                rendered.push_str(l.trim_start());
                rendered.push('\n');
            }
            (first, rendered)
        }
        other => {
            let m = format!("the includes could not be checked with nft: {other}");
            (m.clone(), format!("error: {m}\n"))
        }
    };
    ConfigError {
        rendered,
        count: 1,
        first,
        data_files: Vec::new(),
    }
}
