//! The one-shot verbs: `plan` (the ruleset the policy would load, then what differs from the
//! running kernel) and `cleanup` (deletes the policy table, nothing else).
//!
//! The differences: missing or extra chains, rules added or removed (rules are compared by
//! their comment, which carries the group's name and a hash of the rule's text), and set
//! elements to add or delete. The ruleset stands between the `# nft begin:` / `# nft end:`
//! markers (see [`text::PLAN_BEGIN`]); every other line starts with `#`, so the policy part
//! as a whole also loads with `nft -f`.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::config::{DaemonSettings, DesiredState};
use crate::controller::nft_core::{NftSession, OwnedTable};
use crate::dataplane::nft::{GenerationWatch, Nft, NftError, TableRef, raw_elements, text};

use super::addresses::{self, RouterAddresses};
use super::apply;
use super::includes::{self, IncludeError};
use super::program::{self, Program, keeps_foreign_elements};

/// Errors of `plan` and `cleanup`.
#[derive(Debug, thiserror::Error)]
pub enum PolicyCliError {
    /// Talking to nftables failed.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// nft refused an include's snippet.
    #[error(transparent)]
    Include(#[from] IncludeError),
}

/// Asks nft whether it takes the includes of `desired`'s policy (in the calling thread's
/// network namespace, which needs CAP_NET_ADMIN): `check` and a reload do, so a snippet nft
/// refuses is a rejected configuration, never a sync that cannot write. Blocking.
pub fn check_includes(desired: &DesiredState) -> Result<(), PolicyCliError> {
    let Some(policy) = desired.policy.as_ref().filter(|p| !p.includes.is_empty()) else {
        return Ok(());
    };
    let table = OwnedTable::Policy.of(&desired.daemon);
    let p = program::build(policy, &table.name);
    let mut nft = Nft::open()?;
    includes::resolve(&mut nft, &p)?;
    Ok(())
}

/// `edgenetd plan`: the ruleset the policy would load, in nft syntax between the plan markers
/// (loadable with `nft -c -f`), followed by what differs from the running kernel as `#`
/// comment lines.
/// Empty when there is no `[policy]` and no table. Writes nothing.
pub async fn plan(desired: &DesiredState) -> Result<String, PolicyCliError> {
    let table = OwnedTable::Policy.of(&desired.daemon);
    let addrs = router_addresses(desired).await;
    let program = program::build_with_pods(
        desired.policy.as_ref(),
        &desired.pod_policies,
        &table.name,
        &addrs,
    );
    let mut nft = Nft::open()?;
    if program.is_none() {
        // No [policy] and no table: nothing to say (other areas' plans stay uncluttered).
        let t = table.clone();
        if !smol::unblock(move || nft.table_exists(&t)).await? {
            return Ok(String::new());
        }
        nft = Nft::open()?;
    }
    let (text, diff) = smol::unblock(move || -> Result<(String, String), PolicyCliError> {
        let program = match program {
            Some(p) => Some(includes::resolve(&mut nft, &p)?),
            None => None,
        };
        let diff = diff(&mut nft, &table, program.as_ref())?;
        let text = match &program {
            Some(p) => text::render_plan_block(&p.table),
            None => format!(
                "# no [policy] section: no firewall table (inet {} is removed if present)\n{}",
                table.name,
                text::render_plan_removal(table.family, &table.name)
            ),
        };
        Ok((text, diff))
    })
    .await?;
    Ok(format!("# policy\n{text}{diff}"))
}

/// The router's addresses when a port forward reflects (none when they cannot be read: the
/// plan then shows no reflection, as the daemon would program it).
async fn router_addresses(desired: &DesiredState) -> RouterAddresses {
    if !addresses::needed(desired.policy.as_ref()) {
        return RouterAddresses::default();
    }
    let read = async {
        let socket = crate::dataplane::route::RouteSocket::open()?;
        addresses::read(&socket).await
    };
    read.await.unwrap_or_default()
}

/// `edgenetd cleanup`: deletes the policy table (and nothing else).
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, PolicyCliError> {
    let table = OwnedTable::Policy.of(settings);
    // A one-shot process: its commit need not be told from anybody's.
    let mut nft = NftSession::open(GenerationWatch::new())?;
    let n = smol::unblock(move || apply::delete_table(&mut nft, &table)).await?;
    Ok(if n > 0 {
        format!("policy: deleted table inet {}\n", settings.policy_table())
    } else {
        format!("policy: no table inet {}\n", settings.policy_table())
    })
}

/// The differences as `#` lines (a single "# no differences" line when there are none).
pub fn diff(nft: &mut Nft, t: &TableRef, desired: Option<&Program>) -> Result<String, NftError> {
    let mut out = String::from("# differences from the running kernel:\n");
    let exists = nft.table_exists(t)?;
    let Some(p) = desired else {
        if exists {
            let _ = writeln!(out, "#   - table inet {} (would be deleted)", t.name);
        } else {
            out.push_str("#   none\n");
        }
        return Ok(out);
    };
    if !exists {
        let _ = writeln!(
            out,
            "#   + table inet {} (not installed: {} rules, {} sets would be created)",
            t.name,
            p.table.rules.len(),
            p.table.sets.len()
        );
        return Ok(out);
    }
    let before = out.len();
    chain_lines(&mut out, nft, t, p)?;
    rule_lines(&mut out, nft, t, p)?;
    set_lines(&mut out, nft, t, p)?;
    if out.len() == before {
        out.push_str("#   none\n");
    }
    Ok(out)
}

/// Chains missing from or extra in the kernel.
fn chain_lines(out: &mut String, nft: &mut Nft, t: &TableRef, p: &Program) -> Result<(), NftError> {
    let chains = nft.list_chains(t)?;
    for c in &p.table.chains {
        if !chains.iter().any(|k| k.name == c.name) {
            let _ = writeln!(out, "#   + chain {}", c.name);
        }
    }
    for k in &chains {
        if !p.table.chains.iter().any(|c| c.name == k.name) {
            let _ = writeln!(out, "#   - chain {}", k.name);
        }
    }
    Ok(())
}

/// Rules to add and remove, by chain and comment.
fn rule_lines(out: &mut String, nft: &mut Nft, t: &TableRef, p: &Program) -> Result<(), NftError> {
    let mut kernel: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in nft.list_rules(t)? {
        *kernel
            .entry((r.chain, r.comment.unwrap_or_else(|| "(no comment)".into())))
            .or_default() += 1;
    }
    let mut want: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &p.table.rules {
        *want
            .entry((r.chain.clone(), r.comment.clone().unwrap_or_default()))
            .or_default() += 1;
    }
    for (sign, from, to) in [("+", &want, &kernel), ("-", &kernel, &want)] {
        for ((chain, comment), n) in from {
            let other = to
                .get(&(chain.clone(), comment.clone()))
                .copied()
                .unwrap_or(0);
            for _ in other..*n {
                let _ = writeln!(out, "#   {sign} rule {chain} \"{comment}\"");
            }
        }
    }
    Ok(())
}

/// Sets missing or extra, and element differences of sets present on both sides.
fn set_lines(out: &mut String, nft: &mut Nft, t: &TableRef, p: &Program) -> Result<(), NftError> {
    let sets = nft.list_sets(t)?;
    for s in &p.table.sets {
        if !sets.iter().any(|k| k.name == s.name) {
            let _ = writeln!(out, "#   + set {} ({} elements)", s.name, s.elements.len());
            continue;
        }
        let want = raw_elements(s, &s.elements)?;
        let have = nft.list_elements(t, &s.name)?;
        let add = want.iter().filter(|e| !have.contains(e)).count();
        let other = have.iter().filter(|e| !want.contains(e)).count();
        let (del, kept) = if keeps_foreign_elements(s) {
            (0, other)
        } else {
            (other, 0)
        };
        if add + del > 0 {
            let _ = writeln!(
                out,
                "#   ~ set {}: {add} kernel elements to add, {del} to delete",
                s.name
            );
        }
        if kept > 0 {
            let _ = writeln!(
                out,
                "#   = set {}: {kept} kernel elements added by other programs (kept)",
                s.name
            );
        }
    }
    for k in &sets {
        if !k.name.starts_with("__set") && !p.table.sets.iter().any(|s| s.name == k.name) {
            let _ = writeln!(out, "#   - set {}", k.name);
        }
    }
    Ok(())
}
