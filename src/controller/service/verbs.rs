//! The one-shot verbs: `plan` (what a sync would change as `#` lines, then the whole table as
//! the sync would leave it, in nft syntax between the plan markers; writes nothing) and
//! `cleanup` (deletes the table, nothing else).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::config::{DaemonSettings, DesiredState};
use crate::dataplane::nft::{Batch, Nft, NftError, Op, TableRef, text};

use super::elements::{full_table, vip_of};
use super::model::{self, Model, VipKey};
use super::plan::{Mirror, describe};
use crate::controller::nft_core::OwnedTable;

/// Errors of the one-shot verbs (`plan`, `cleanup`).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Talking to nf_tables failed.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// A blocking task could not run.
    #[error("{0}")]
    Other(String),
}

/// `edgenetd plan`: what a sync would change, and the nft text of the table after the sync
/// (every service's elements included). Writes nothing.
pub async fn plan(desired: &DesiredState) -> Result<String, ServiceError> {
    let table = OwnedTable::Service.of(&desired.daemon);
    let model = model::build(&desired.services);
    let mut nft = Nft::open()?;
    let local = super::local::of(desired.daemon.listen, &model);
    smol::unblock(move || plan_blocking(&mut nft, &table, &model, local))
        .await
        .map_err(ServiceError::from)
}

/// `edgenetd cleanup`: deletes table `inet <prefix>-service` (and nothing else).
pub async fn cleanup(settings: &DaemonSettings) -> Result<String, ServiceError> {
    let table = OwnedTable::Service.of(settings);
    let mut nft = Nft::open()?;
    smol::unblock(move || cleanup_blocking(&mut nft, &table))
        .await
        .map_err(ServiceError::from)
}
use super::observe;

/// `plan`: the service changes against the running kernel as `#` lines, then the table as the
/// sync would leave it between the plan markers (loadable with `nft -f`), so the whole part
/// loads with `nft -f` too.
/// `local`: the loopback exemption of the daemon's listener the table gets.
pub fn plan_blocking(
    nft: &mut Nft,
    table: &TableRef,
    desired: &Model,
    local: Option<super::local::Local>,
) -> Result<String, NftError> {
    let mut out = String::new();
    let exists = nft.table_exists(table)?;
    if desired.needs_no_table() && !exists {
        // No services and no table: nothing to say (and no layout to show).
        return Ok(out);
    }
    let mut lines: Vec<String> = Vec::new();
    if desired.needs_no_table() {
        if exists {
            lines.push(format!("- table inet {} (no services)", table.name));
        }
    } else if !exists {
        lines.push(format!("+ table inet {}", table.name));
        let d = Mirror::default().diff(desired);
        lines.extend(d.services.iter().map(|c| c.summary.clone()));
    } else {
        let found = observe::verify_kernel(nft, table, desired, None)?;
        let mut per: BTreeMap<Option<VipKey>, (usize, usize)> = BTreeMap::new();
        for (set, el) in &found.strays {
            per.entry(vip_of(*set, el)).or_default().0 += 1;
        }
        for (set, el) in &found.missing {
            per.entry(vip_of(*set, el)).or_default().1 += 1;
        }
        for (k, (del, add)) in per {
            lines.push(match (k, k.and_then(|k| desired.get(&k))) {
                (Some(k), None) => format!("- service {k}: delete {del} elements"),
                (Some(k), Some(e)) if del == 0 => {
                    format!(
                        "+ service {} {k}: add {add} elements ({})",
                        e.name,
                        describe(e)
                    )
                }
                (Some(k), Some(e)) => format!(
                    "~ service {} {k}: delete {del}, add {add} elements (now {})",
                    e.name,
                    describe(e)
                ),
                (None, _) => format!("~ shared and prefix elements: delete {del}, add {add}"),
            });
        }
    }
    let _ = writeln!(
        out,
        "# service: table inet {} ({} services)",
        table.name,
        desired.len()
    );
    if lines.is_empty() {
        out.push_str("#   no changes\n");
    }
    for l in lines {
        let _ = writeln!(out, "#   {l}");
    }
    if desired.needs_no_table() {
        out.push_str(&text::render_plan_removal(table.family, &table.name));
    } else {
        out.push_str("# the table after the sync (services are elements of its maps):\n");
        out.push_str(&text::render_plan_block(&full_table(
            &table.name,
            desired,
            local,
        )));
    }
    Ok(out)
}

/// `cleanup`: deletes the table if it exists.
pub fn cleanup_blocking(nft: &mut Nft, table: &TableRef) -> Result<String, NftError> {
    if !nft.table_exists(table)? {
        return Ok(format!("service: table inet {} absent\n", table.name));
    }
    let mut batch = Batch::new();
    batch.table(table, Op::Delete);
    nft.execute(batch)?;
    Ok(format!("service: deleted table inet {}\n", table.name))
}
