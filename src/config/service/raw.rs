//! The `[[service]]` table as written: serde structs deserialized entry by entry, so one bad
//! service does not hide the errors of the next.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    pub(super) name: Spanned<String>,
    pub(super) address: Spanned<String>,
    pub(super) port: Spanned<i64>,
    pub(super) protocol: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) backends: Vec<Spanned<toml::Value>>,
    pub(super) affinity: Option<Spanned<String>>,
    pub(super) affinity_timeout: Option<Spanned<String>>,
    pub(super) masquerade: Option<bool>,
    pub(super) source_ranges: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) when_empty: Option<Spanned<String>>,
    pub(super) fallback: Option<Spanned<String>>,
    pub(super) health: Option<RawHealth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealth {
    pub(super) check: Option<Spanned<String>>,
    pub(super) path: Option<Spanned<String>>,
    pub(super) expect: Option<Spanned<String>>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) rise: Option<Spanned<i64>>,
    pub(super) fall: Option<Spanned<i64>>,
    pub(super) initial: Option<Spanned<String>>,
    pub(super) send: Option<Spanned<String>>,
    pub(super) expect_bytes: Option<Spanned<String>>,
    pub(super) query_name: Option<Spanned<String>>,
    pub(super) sni: Option<Spanned<String>>,
}
