//! `[[policy.nat]]` (fw4's `config nat`): source NAT of selected connections — SNAT to an
//! address, masquerade, or `accept` to exempt them — with the match keys of a rule.

use std::net::IpAddr;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_addr;
use super::model::*;
use super::raw::*;
use super::rule_match::{RuleMatch, Versions, address_versions, and, net_versions};
use super::rules::port_range;

pub(super) fn validate_nat(
    raw: RawNat,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<NatRule> {
    let (rule, nat) = split(raw);
    let matches = RuleMatch::parse(&rule, cfg, diags);
    let mut ok = true;
    if let Some(f) = &rule.from
        && matches!(f.get_ref(), RawFrom::One(s) if s == "self")
    {
        diags.error(f.span(), "a nat entry cannot be `from = \"self\"`: source NAT is for traffic the router forwards (expected a zone, \"@set\" or prefixes)");
        ok = false;
    }
    if let Some(t) = &rule.to
        && t.get_ref() == "self"
    {
        diags.error(t.span(), "a nat entry cannot be `to = \"self\"`: `to` is the zone the traffic leaves through (fw4's `src`), e.g. \"wan\"");
        ok = false;
    }
    let action = action(&nat, diags);
    let (matches, action) = (matches?, action?);
    if !ok || !matches.can_match(&rule.name, cfg, diags) {
        return None;
    }
    if let NatAction::Snat { address, .. } = action {
        let (v4, v6) = and(
            versions(&matches, cfg),
            (address.is_ipv4(), address.is_ipv6()),
        );
        if !v4 && !v6 {
            diags.error(
                nat.snat_address.as_ref().map_or(rule.name.span(), |a| a.span()),
                format!("`snat_address = \"{address}\"` is IPv{}, but the entry only matches IPv{} traffic: it could never apply", if address.is_ipv4() { 4 } else { 6 }, if address.is_ipv4() { 6 } else { 4 }),
            );
            return None;
        }
    }
    Some(NatRule {
        name: rule.name.into_inner(),
        matches,
        action,
    })
}

/// The keys that say what to do, apart from the match keys.
struct NatKeys {
    name: Spanned<String>,
    action: Spanned<String>,
    snat_address: Option<Spanned<String>>,
    snat_port: Option<Spanned<RawPort>>,
}

/// `raw` as the rule its match keys make (nothing else of a rule set), and its own keys.
fn split(raw: RawNat) -> (RawRule, NatKeys) {
    let keys = NatKeys {
        name: raw.name.clone(),
        action: raw.action,
        snat_address: raw.snat_address,
        snat_port: raw.snat_port,
    };
    let rule = RawRule {
        name: raw.name,
        from: raw.from,
        to: raw.to,
        protocol: raw.protocol,
        ports: raw.ports,
        source_ports: raw.source_ports,
        to_addresses: raw.to_addresses,
        icmp_types: raw.icmp_types,
        dscp: raw.dscp,
        ipset: raw.ipset,
        family: raw.family,
        start_time: raw.start_time,
        stop_time: raw.stop_time,
        weekdays: raw.weekdays,
        start_date: raw.start_date,
        stop_date: raw.stop_date,
        utc_time: raw.utc_time,
        monthdays: raw.monthdays,
        action: None,
        set_mark: None,
        set_xmark: None,
        set_dscp: None,
        log: false,
        log_prefix: None,
        log_limit: None,
        limit: None,
        #[cfg(feature = "fault-injection")]
        inject_kernel_reject: false,
    };
    (rule, keys)
}

/// `action` with `snat_address` / `snat_port`, which only `snat` takes (`snat_address`
/// required). `None` when invalid (reported).
fn action(k: &NatKeys, diags: &mut Diagnostics) -> Option<NatAction> {
    let stray = |key: &str, span, diags: &mut Diagnostics| {
        diags.error(
            span,
            format!(
                "`{key}` is only for `action = \"snat\"`: drop it, or make the action \"snat\""
            ),
        );
    };
    match k.action.get_ref().as_str() {
        "snat" => {
            let Some(a) = &k.snat_address else {
                diags.error(k.action.span(), format!("nat entry `{}`: `action = \"snat\"` needs `snat_address`, e.g. snat_address = \"203.0.113.7\"", k.name.get_ref()));
                return None;
            };
            let address: Option<IpAddr> = parse_addr(a.get_ref().trim())
                .map_err(|e| diags.error(a.span(), e))
                .ok();
            let port = match &k.snat_port {
                None => Some(None),
                Some(p) => {
                    match port_range(p, diags) {
                        Some((a, b)) if a == b => Some(Some(a)),
                        Some(_) => {
                            diags.error(p.span(), "`snat_port` is one port here, e.g. 1000: a range is not supported yet");
                            None
                        }
                        None => None,
                    }
                }
            };
            Some(NatAction::Snat {
                address: address?,
                port: port?,
            })
        }
        a @ ("masquerade" | "accept") => {
            let mut ok = true;
            if let Some(s) = &k.snat_address {
                stray("snat_address", s.span(), diags);
                ok = false;
            }
            if let Some(p) = &k.snat_port {
                stray("snat_port", p.span(), diags);
                ok = false;
            }
            ok.then_some(if a == "accept" {
                NatAction::Accept
            } else {
                NatAction::Masquerade
            })
        }
        other => {
            diags.error(k.action.span(), format!("invalid nat action `{other}`: expected \"snat\", \"masquerade\" or \"accept\" (fw4's SNAT, MASQUERADE, ACCEPT)"));
            None
        }
    }
}

/// The IP versions the entry's traffic can have (its source, outgoing zone, destinations
/// and protocol).
fn versions(m: &RuleMatch, cfg: &PolicyConfig) -> Versions {
    let from = match &m.from {
        Source::Zone(z) => net_versions(&cfg.zones[z].networks),
        Source::Set(s) => match cfg.sets[s].family {
            SetFamily::Ipv4 => (true, false),
            SetFamily::Ipv6 => (false, true),
        },
        Source::Prefixes(nets) => net_versions(nets),
        Source::Addresses(list) => address_versions(list, cfg),
        Source::Any | Source::Router => (true, true),
    };
    let to = match &m.to {
        Destination::Zone(z) => net_versions(&cfg.zones[z].networks),
        _ => (true, true),
    };
    let proto = match m.protocol {
        Protocol::Icmp => (true, false),
        Protocol::Icmpv6 => (false, true),
        _ => (true, true),
    };
    and(
        and(from, to),
        and(proto, address_versions(&m.to_addresses, cfg)),
    )
}
