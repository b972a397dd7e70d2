//! `[policy.zone.*]` entries (and the zone references of rules and forwards).

use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::super::net::{parse_addr, parse_prefix};
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
    let log_limit = super::rules::limit("log_limit", raw.log_limit.as_ref(), diags);
    let snat = snat(&raw, diags);
    let (masq_src, masq_dest, masq_allow_invalid) = super::masq::restrictions(&raw, diags)?;
    let snat = snat?;
    Some(Zone {
        name: name.to_string(),
        interfaces,
        networks,
        masquerade: raw.masquerade,
        masquerade6: raw.masquerade6,
        mtu_fix: raw.mtu_fix,
        log_drops: raw.log_drops,
        log_limit: log_limit?,
        snat,
        helpers,
        masq_src,
        masq_dest,
        masq_allow_invalid,
    })
}

/// `snat`: one address or a list, at most one per IP version, and not for a version the
/// zone also masquerades. `None` when invalid (reported).
fn snat(raw: &RawZone, diags: &mut Diagnostics) -> Option<Vec<std::net::IpAddr>> {
    let Some(list) = &raw.snat else {
        return Some(Vec::new());
    };
    let texts = match list.get_ref() {
        RawFrom::One(a) => vec![a.clone()],
        RawFrom::Many(l) => l.clone(),
    };
    let mut out: Vec<std::net::IpAddr> = Vec::new();
    let mut ok = !texts.is_empty();
    if !ok {
        diags.error(list.span(), "empty `snat`: expected an address, e.g. \"203.0.113.7\", or one IPv4 and one IPv6 address");
    }
    for t in &texts {
        match parse_addr(t.trim()) {
            Ok(a) if out.iter().any(|o| o.is_ipv4() == a.is_ipv4()) => {
                diags.error(
                    list.span(),
                    format!(
                        "`snat` has two IPv{} addresses: expected at most one per IP version",
                        if a.is_ipv4() { 4 } else { 6 }
                    ),
                );
                ok = false;
            }
            Ok(a) if (a.is_ipv4() && raw.masquerade) || (a.is_ipv6() && raw.masquerade6) => {
                diags.error(list.span(), format!("`snat = \"{a}\"` and `{}` both choose the source of the zone's IPv{} traffic: keep one", if a.is_ipv4() { "masquerade = true" } else { "masquerade6 = true" }, if a.is_ipv4() { 4 } else { 6 }));
                ok = false;
            }
            Ok(a) => out.push(a),
            Err(e) => {
                diags.error(list.span(), e);
                ok = false;
            }
        }
    }
    ok.then_some(out)
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
