//! `[daemon]` and `[controller.<name>]` as written (serde, unknown keys refused).

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaemon {
    pub(super) listen: Option<Spanned<String>>,
    pub(super) metrics_allow: Option<Vec<Spanned<String>>>,
    pub(super) nft_table_prefix: Option<Spanned<String>>,
    pub(super) route_protocol: Option<Spanned<i64>>,
    pub(super) management: Option<Vec<Spanned<String>>>,
}

/// The raw `[controller.<name>]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawController {
    pub(super) enabled: Option<bool>,
    pub(super) period: Option<Spanned<String>>,
    pub(super) sync_budget: Option<Spanned<String>>,
}
