//! `[[policy.include]]` (fw4's `config include` of type `nftables`): a snippet of nft's own
//! language read from an absolute file at load time (as a `loadfile` is: bounded, UTF-8, kept
//! in the last good copy, followed by the file watch), placed at a `position` of the table.
//!
//! Only the file is read here; whether nft takes the snippet is decided where the kernel
//! is (the policy controller compiles it, `check` and a reload ask it first).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::super::data_file::DataFiles;
use super::super::diag::Diagnostics;
use super::super::doc::{Value, de_each};
use super::model::{Include, IncludePosition};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInclude {
    path: Spanned<String>,
    position: Option<Spanned<String>>,
    chain: Option<Spanned<String>>,
    #[serde(rename = "type")]
    kind: Option<Spanned<String>>,
    #[serde(default = "yes")]
    enabled: bool,
}

fn yes() -> bool {
    true
}

/// Every enabled `[[policy.include]]` of `v`, its file read from `data`.
pub(super) fn validate_includes(
    v: &Value<'_>,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> Vec<Include> {
    let mut out = Vec::new();
    for raw in de_each::<RawInclude>(v, diags) {
        let raw = raw.into_inner();
        if !raw.enabled {
            continue;
        }
        if let Some(i) = validate_include(raw, data, diags) {
            out.push(i);
        }
    }
    out
}

fn validate_include(
    raw: RawInclude,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> Option<Include> {
    let mut ok = true;
    if let Some(k) = &raw.kind
        && k.get_ref() != "nftables"
    {
        diags.error(
            k.span(),
            format!(
                "include type `{}` is not supported: only \"nftables\" (a snippet of nft rules); fw4's \"script\" includes run shell code, which edgenetd never does",
                k.get_ref()
            ),
        );
        ok = false;
    }
    let position = match &raw.position {
        None => Some(IncludePosition::TablePost),
        Some(p) => {
            let got = position_of(p.get_ref());
            if got.is_none() {
                diags.error(
                    p.span(),
                    format!(
                        "unknown include position `{}`: expected \"table-pre\", \"table-post\", \"chain-pre\" or \"chain-post\"",
                        p.get_ref()
                    ),
                );
            }
            got
        }
    };
    let chain = raw.chain.as_ref().map(|c| c.get_ref().clone());
    match (position, &raw.chain) {
        (Some(IncludePosition::ChainPre | IncludePosition::ChainPost), None) => {
            let at = raw.position.as_ref().map_or(raw.path.span(), |p| p.span());
            diags.error(
                at,
                "position chain-pre and chain-post need `chain`: the chain the snippet's rules go into, e.g. chain = \"forward\"",
            );
            ok = false;
        }
        (Some(IncludePosition::TablePre | IncludePosition::TablePost), Some(c)) => {
            diags.error(
                c.span(),
                "`chain` is for position chain-pre and chain-post: a table-level snippet declares its own chains",
            );
            ok = false;
        }
        _ => {}
    }
    let path = Path::new(raw.path.get_ref());
    if !path.is_absolute() {
        diags.error(
            raw.path.span(),
            format!(
                "include `path` must be an absolute path: `{}` is relative, and would depend on the daemon's working directory",
                raw.path.get_ref()
            ),
        );
        return None;
    }
    let text = match data.text(path) {
        Ok(t) => t.to_string(),
        Err(why) => {
            diags.error(raw.path.span(), why);
            return None;
        }
    };
    let position = position?;
    ok.then(|| Include {
        path: PathBuf::from(path),
        position,
        chain,
        text,
        span: raw.path.span(),
        at: String::new(),
    })
}

/// fw4's names for a position (and its aliases).
fn position_of(s: &str) -> Option<IncludePosition> {
    Some(match s {
        "table-pre" | "table-prepend" => IncludePosition::TablePre,
        "table-post" | "table-postpend" | "table-append" => IncludePosition::TablePost,
        "chain-pre" | "chain-prepend" => IncludePosition::ChainPre,
        "chain-post" | "chain-postpend" | "chain-append" => IncludePosition::ChainPost,
        _ => return None,
    })
}
