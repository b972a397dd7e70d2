//! `[policy.zone.*]` entries (and the zone references of rules and forwards).

use std::ops::Range;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::super::net::parse_addr;
use super::super::nul::no_nul;
use super::matches::parse_subnet;
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
    (declared_helpers, custom_helpers): (&[String], &super::helpers::Custom),
    diags: &mut Diagnostics,
) -> Option<Zone> {
    if !valid_name(name) || name == "self" {
        diags.error(
            span.clone(),
            format!("invalid zone name `{name}`: expected letters, digits, `_` or `-` (up to 32, not \"self\")"),
        );
    }
    let raw: RawZone = de(v, diags)?;
    let (interfaces, excluded_interfaces) = interfaces(&raw.interfaces, diags);
    let family = super::matches::family(raw.family.as_ref(), diags);
    let (networks, masked_networks) = networks(&raw.networks, family, diags);
    let helpers = super::helpers::of_zone(&raw.helpers, declared_helpers, custom_helpers, diags);
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
        excluded_interfaces,
        networks,
        masked_networks,
        family: family?,
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

/// A zone's `interfaces`: (those it holds, those it leaves out), each reported at its
/// place when invalid. A name is exact, or a stem ending in `*` or fw4's `+` (stored as
/// `*`); `"+"` alone is every interface (stored as `"*"`); `!` before a name or stem leaves
/// it out. With only names left out, the zone holds every other interface.
fn interfaces(raw: &[Spanned<String>], diags: &mut Diagnostics) -> (Vec<String>, Vec<String>) {
    let (mut held, mut excluded) = (Vec::new(), Vec::new());
    for i in raw {
        let s = i.get_ref();
        if !no_nul(i, "interface name", diags) {
            continue;
        }
        let (negated, name) = match s.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, s.as_str()),
        };
        if name == "+" {
            if negated {
                diags.error(
                    i.span(),
                    "`\"!+\"` leaves out every interface: expected names or stems to leave out, e.g. \"!eth1\" or \"!wg+\"",
                );
            } else {
                held.push("*".to_string());
            }
            continue;
        }
        let name = match name.strip_suffix('+') {
            Some(stem) => format!("{stem}*"),
            None => name.to_string(),
        };
        let stem = name.strip_suffix('*').unwrap_or(&name);
        if stem.is_empty() || name.len() > 15 || stem.contains(['*', '+', '!', '"', '\'', ' ', '/'])
        {
            diags.error(
                i.span(),
                format!("invalid interface name `{s}`: expected up to 15 characters, a `*` or `+` only at the end (\"ppp*\"), a `!` only at the start (\"!eth1\"), or \"+\" for every interface"),
            );
        } else if negated {
            excluded.push(name);
        } else {
            held.push(name);
        }
    }
    if held.is_empty() && !excluded.is_empty() {
        held.push("*".to_string());
    }
    (held, excluded)
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

/// A zone's `networks`: its prefixes and its addresses under non-contiguous masks (fw4's
/// `"10.0.0.1/255.0.0.255"`, `"::1/::ffff"`). Each invalid entry, and each of the other IP
/// version than `family`'s, is reported at its place (and left out).
fn networks(
    raw: &[Spanned<String>],
    family: Option<Family>,
    diags: &mut Diagnostics,
) -> (Vec<IpNet>, Vec<MaskedAddr>) {
    let (v4, v6) = family.map_or((true, true), Family::versions);
    let (mut prefixes, mut masked) = (Vec::new(), Vec::new());
    for r in raw {
        let text = r.get_ref().trim();
        let (is_v4, entry) = match parse_subnet(text) {
            Ok(AddressMatch::Prefix(n)) => (n.addr().is_ipv4(), Ok(n)),
            Ok(AddressMatch::Masked(m)) => (m.addr.is_ipv4(), Err(m)),
            Ok(AddressMatch::Suffix { addr, mask }) => (
                false,
                Err(MaskedAddr {
                    addr: addr.into(),
                    mask: mask.into(),
                }),
            ),
            Ok(AddressMatch::Set(_)) => unreachable!("parse_subnet reads no set"),
            Err(e) => {
                diags.error(r.span(), e);
                continue;
            }
        };
        if (is_v4 && !v4) || (!is_v4 && !v6) {
            let (version, family) = if is_v4 {
                ("IPv4", "ipv6")
            } else {
                ("IPv6", "ipv4")
            };
            diags.error(
                r.span(),
                format!("{version} network `{text}` in a zone with `family = \"{family}\"`: expected {family} networks (or family \"any\")"),
            );
            continue;
        }
        match entry {
            Ok(n) => prefixes.push(n),
            Err(m) => masked.push(m),
        }
    }
    (prefixes, masked)
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
