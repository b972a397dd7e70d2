//! `flow_offload` and `flow_offload_hw` under `[policy]`: offload of established forwarded
//! connections to a flowtable.

use toml::de::DeTable;

use super::super::diag::Diagnostics;
use super::super::doc::de;
use super::model::PolicyConfig;

/// Reads both keys into `cfg`. Hardware offload is an option of the software flowtable, so
/// `flow_offload_hw = true` without `flow_offload = true` is an error (at the hw key).
pub(super) fn validate_offload(
    table: &DeTable<'_>,
    cfg: &mut PolicyConfig,
    diags: &mut Diagnostics,
) {
    if let Some(v) = table.get("flow_offload") {
        cfg.flow_offload = de(v, diags).unwrap_or(false);
    }
    if let Some(v) = table.get("flow_offload_hw") {
        cfg.flow_offload_hw = de(v, diags).unwrap_or(false);
        if cfg.flow_offload_hw && !cfg.flow_offload {
            diags.error(
                v.span(),
                "`flow_offload_hw = true` needs `flow_offload = true`: hardware offload is an option of the flowtable",
            );
        }
    }
}
