//! Raw serde shapes of `[[route]]`, `[[route_rule]]` and `[[track]]`, as written (spans for error places).

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawTable {
    Number(i64),
    Name(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawMark {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNextHop {
    pub(super) via: Option<Spanned<String>>,
    pub(super) dev: Option<Spanned<String>>,
    pub(super) weight: Option<Spanned<i64>>,
    pub(super) onlink: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) to: Spanned<String>,
    pub(super) via: Option<Spanned<String>>,
    pub(super) dev: Option<Spanned<String>>,
    pub(super) metric: Option<Spanned<i64>>,
    pub(super) table: Option<Spanned<RawTable>>,
    #[serde(rename = "type")]
    pub(super) kind: Option<Spanned<String>>,
    pub(super) src: Option<Spanned<String>>,
    pub(super) onlink: Option<Spanned<bool>>,
    pub(super) mtu: Option<Spanned<i64>>,
    pub(super) nexthops: Option<Spanned<Vec<Spanned<RawNextHop>>>>,
    pub(super) track: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrack {
    pub(super) name: Spanned<String>,
    pub(super) check: Spanned<String>,
    pub(super) target: Spanned<String>,
    pub(super) via: Spanned<String>,
    pub(super) dev: Spanned<String>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) fall: Option<Spanned<i64>>,
    pub(super) rise: Option<Spanned<i64>>,
    pub(super) table: Option<Spanned<RawTable>>,
    pub(super) fwmark: Option<Spanned<RawMark>>,
    pub(super) priority: Option<Spanned<i64>>,
    #[cfg(feature = "fault-injection")]
    #[serde(default)]
    pub(super) inject_hang: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) priority: Spanned<i64>,
    pub(super) from: Option<Spanned<String>>,
    pub(super) to: Option<Spanned<String>>,
    pub(super) iif: Option<Spanned<String>>,
    pub(super) oif: Option<Spanned<String>>,
    pub(super) fwmark: Option<Spanned<RawMark>>,
    pub(super) table: Spanned<RawTable>,
    pub(super) family: Option<Spanned<String>>,
}
