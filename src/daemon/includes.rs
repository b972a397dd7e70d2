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

/// [`vet`] in network namespace `netns` (the one `run --netns` programs), from a thread of
/// its own: the first load comes before the daemon enters it. A namespace that cannot be
/// entered leaves the question to the start, which fails on it.
pub fn vet_in(netns: Option<&str>, state: DesiredState) -> Result<DesiredState, ConfigError> {
    let Some(ns) = netns.filter(|_| has_includes(&state)) else {
        return vet(state);
    };
    let ns = ns.to_string();
    let asked = std::thread::Builder::new()
        .name("includes".into())
        .spawn(move || match super::netns::enter_netns(&ns) {
            Ok(()) => vet(state),
            Err(_) => Ok(state),
        });
    match asked.map(|t| t.join()) {
        Ok(Ok(r)) => r,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => Err(ConfigError {
            rendered: format!("error: the includes could not be checked: {e}\n"),
            count: 1,
            first: format!("the includes could not be checked: {e}"),
            data_files: Vec::new(),
        }),
    }
}

fn has_includes(state: &DesiredState) -> bool {
    state
        .policy
        .as_ref()
        .is_some_and(|p| !p.includes.is_empty())
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
