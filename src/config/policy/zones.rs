//! `[policy.zone.*]` entries (and the zone references of rules and forwards).

use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::super::net::parse_prefix;
use super::super::nul::no_nul;
use super::model::*;
use super::raw::*;

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(super) fn validate_zone(
    (name, span): (&str, Range<usize>),
    v: &Value<'_>,
    declared_helpers: &[String],
    diags: &mut Diagnostics,
) -> Option<Zone> {
    if !valid_name(name) || name == "self" {
        diags.error(
            span.clone(),
            format!("invalid zone name `{name}`: expected letters, digits, `_` or `-` (up to 32, not \"self\")"),
        );
    }
    let raw: RawZone = de(v, diags)?;
    let mut interfaces = Vec::new();
    for i in &raw.interfaces {
        let s = i.get_ref();
        if !no_nul(i, "interface name", diags) {
            continue;
        }
        let stem = s.strip_suffix('*').unwrap_or(s);
        if stem.is_empty() || s.len() > 15 || stem.contains(['*', '"', '\'', ' ', '/']) {
            diags.error(
                i.span(),
                format!("invalid interface name `{s}`: expected up to 15 characters, a `*` only at the end (\"ppp*\")"),
            );
        } else {
            interfaces.push(s.clone());
        }
    }
    let networks = prefixes(&raw.networks, diags);
    let helpers = super::helpers::of_zone(&raw.helpers, declared_helpers, diags);
    if raw.interfaces.is_empty() && raw.networks.is_empty() {
        diags.error(
            span,
            format!("zone `{name}` has neither interfaces nor networks: expected at least one"),
        );
        return None;
    }
    Some(Zone {
        name: name.to_string(),
        interfaces,
        networks,
        masquerade: raw.masquerade,
        masquerade6: raw.masquerade6,
        mtu_fix: raw.mtu_fix,
        log_drops: raw.log_drops,
        helpers,
    })
}

pub(super) fn prefixes(items: &[Spanned<String>], diags: &mut Diagnostics) -> Vec<IpNet> {
    let mut out = Vec::new();
    for i in items {
        match parse_prefix(i.get_ref()) {
            Ok(n) => out.push(n),
            Err(e) => diags.error(i.span(), e),
        }
    }
    out
}

/// A zone used by a rule or forward: it must be defined.
pub(super) fn zone_ref(
    z: &Spanned<String>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<String> {
    let name = z.get_ref();
    if cfg.zones.contains_key(name) {
        Some(name.clone())
    } else {
        let known: Vec<String> = cfg.zones.keys().map(|k| format!("`{k}`")).collect();
        diags.error(
            z.span(),
            format!(
                "zone `{name}` is used but never defined: expected one of {} (define it with [policy.zone.{name}])",
                if known.is_empty() { "no zones yet".to_string() } else { known.join(", ") }
            ),
        );
        None
    }
}
