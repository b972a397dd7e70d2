//! `[policy]`: the router's firewall, validated into plain types ([`PolicyConfig`]).
//!
//! Knows nothing of nftables: the policy controller turns this model into a ruleset.
//! Every problem is reported at its `file:line:col`, all at once: unknown keys, bad values,
//! a zone or set used but never defined, duplicate names, an address of the wrong family.
//!
//! `forward` under `[policy]` is either the default verdict for forwarded traffic
//! (`forward = "drop"`) or the zone-to-zone forwards (`[[policy.forward]]`, or an inline
//! array `forward = [{ from = "lan", to = "wan" }]`): one key cannot be both, so a file with
//! forwards writes the verdict as `forward_default` (the loader explains this when a file
//! tries both: `FORWARD_CLASH`, this section's diagnosis of the clash, which the generic
//! merge asks).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::data_file::DataFiles;
use super::diag::Diagnostics;
use super::doc::{Doc, Value, de, de_each};

mod dual_forward;
mod helpers;
mod include;
mod ipset;
mod loadfile;
mod masq;
mod matches;
mod model;
mod nat;
mod offload;
pub mod pods;
mod port_forward;
mod raw;
mod redirect;
mod rule_match;
mod rules;
mod sets;
mod synflood;
mod time_match;
mod zones;

pub(crate) use dual_forward::FORWARD_CLASH;
pub use helpers::{KNOWN_HELPERS, helper_ports};
pub use model::*;
use offload::validate_offload;
use port_forward::validate_port_forward;
use raw::*;
pub use rule_match::RuleMatch;
use rules::{parse_action, validate_rule};
use sets::validate_set;
use synflood::validate_synflood;
pub use time_match::TimeMatch;
use zones::{validate_zone, zone_ref};

const KEYS: &[&str] = &[
    "input",
    "forward",
    "output",
    "forward_default",
    "zone",
    "set",
    "rule",
    "port_forward",
    "nat",
    "forward_foreign_dnat",
    "log_drops",
    "helpers",
    "helper",
    "flow_offload",
    "flow_offload_hw",
    "synflood_protect",
    "synflood_rate",
    "synflood_burst",
    "include",
];

/// Validates `[policy]`; `None` when the section is absent (no firewall table at all). The
/// sets' `loadfile`s are read from `data`.
pub fn validate(
    doc: &Doc<'_>,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> Option<PolicyConfig> {
    let section = doc.value("policy")?;
    let DeValue::Table(table) = section.get_ref() else {
        diags.error(
            section.span(),
            "`policy` must be a table: expected `[policy]`",
        );
        return None;
    };
    let mut cfg = PolicyConfig {
        input: Action::Drop,
        forward: Action::Drop,
        output: Action::Accept,
        zones: BTreeMap::new(),
        sets: BTreeMap::new(),
        rules: Vec::new(),
        forwards: Vec::new(),
        port_forwards: Vec::new(),
        nat: Vec::new(),
        redirects: Vec::new(),
        forward_foreign_dnat: false,
        log_drops: false,
        helpers: Vec::new(),
        custom_helpers: BTreeMap::new(),
        flow_offload: false,
        flow_offload_hw: false,
        synflood: None,
        includes: Vec::new(),
    };
    let forward_is_verdict = defaults(table, &mut cfg, diags);
    validate_offload(table, &mut cfg, diags);
    validate_synflood(table, &mut cfg, diags);
    unknown_keys(table, diags);
    if let Some(v) = table.get("helper") {
        for (name, name_span, value) in subtables(v, "policy.helper", diags) {
            if let Some(h) = helpers::defined((&name, name_span), value, diags) {
                cfg.custom_helpers.insert(name, h);
            }
        }
    }
    if let Some(v) = table.get("helpers") {
        cfg.helpers = helpers::declared(v, &cfg.custom_helpers, diags);
    }
    // A definition is a declaration: its helper is there for the zones to attach.
    for name in cfg.custom_helpers.keys() {
        if !cfg.helpers.contains(name) {
            cfg.helpers.push(name.clone());
        }
    }
    zones_and_sets(table, &mut cfg, data, diags);
    let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
    if let Some(v) = table.get("rule") {
        for raw in de_each::<RawRule>(v, diags) {
            let raw = raw.into_inner();
            unique_name(&raw.name, &mut names, diags);
            if let Some(r) = validate_rule(raw, &cfg, diags) {
                cfg.rules.push(r);
            }
        }
    }
    if let Some(v) = table.get("forward").filter(|_| !forward_is_verdict) {
        forwards(v, &mut cfg, diags);
    }
    if let Some(v) = table.get("port_forward") {
        for raw in de_each::<RawPortForward>(v, diags) {
            let raw = raw.into_inner();
            unique_name(&raw.name, &mut names, diags);
            if redirect::to_router(&raw) {
                if let Some(r) = redirect::validate_redirect(raw, &cfg, diags) {
                    cfg.redirects.push(r);
                }
            } else if let Some(pf) = validate_port_forward(raw, &cfg, diags) {
                cfg.port_forwards.push(pf);
            }
        }
    }
    if let Some(v) = table.get("nat") {
        for raw in de_each::<RawNat>(v, diags) {
            let raw = raw.into_inner();
            unique_name(&raw.name, &mut names, diags);
            if let Some(n) = nat::validate_nat(raw, &cfg, diags) {
                cfg.nat.push(n);
            }
        }
    }
    if let Some(v) = table.get("include") {
        cfg.includes = include::validate_includes(v, data, diags);
    }
    Some(cfg)
}

/// The default verdicts; returns whether `forward` is the verdict (a string), not the list.
fn defaults(table: &DeTable<'_>, cfg: &mut PolicyConfig, diags: &mut Diagnostics) -> bool {
    if let Some(v) = table.get("input") {
        cfg.input = action(v, diags, "input").unwrap_or(cfg.input);
    }
    if let Some(v) = table.get("output") {
        cfg.output = action(v, diags, "output").unwrap_or(cfg.output);
    }
    if let Some(v) = table.get("forward_foreign_dnat") {
        cfg.forward_foreign_dnat = de(v, diags).unwrap_or(false);
    }
    if let Some(v) = table.get("log_drops") {
        cfg.log_drops = de(v, diags).unwrap_or(false);
    }
    let mut forward_is_verdict = false;
    if let Some(v) = table.get("forward")
        && let DeValue::String(_) = v.get_ref()
    {
        forward_is_verdict = true;
        cfg.forward = action(v, diags, "forward").unwrap_or(cfg.forward);
    }
    if let Some(v) = table.get("forward_default") {
        if forward_is_verdict {
            diags.error(
                v.span(),
                "`forward_default` and `forward = \"...\"` both set the forward default: keep one",
            );
        }
        cfg.forward = action(v, diags, "forward_default").unwrap_or(cfg.forward);
    }
    forward_is_verdict
}

fn unknown_keys(table: &DeTable<'_>, diags: &mut Diagnostics) {
    for (key, _) in table.iter() {
        let key_name: &str = key.get_ref().as_ref();
        if !KEYS.contains(&key_name) {
            let expected: Vec<String> = KEYS.iter().map(|k| format!("`{k}`")).collect();
            diags.error(
                key.span(),
                format!(
                    "unknown key `{}` in [policy], expected one of {}",
                    key.get_ref(),
                    expected.join(", ")
                ),
            );
        }
    }
}

fn zones_and_sets(
    table: &DeTable<'_>,
    cfg: &mut PolicyConfig,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) {
    if let Some(v) = table.get("zone") {
        for (name, name_span, value) in subtables(v, "policy.zone", diags) {
            let helpers = (&cfg.helpers[..], &cfg.custom_helpers);
            if let Some(z) = validate_zone((&name, name_span), value, helpers, diags) {
                cfg.zones.insert(name, z);
            }
        }
    }
    if let Some(v) = table.get("set") {
        for (name, name_span, value) in subtables(v, "policy.set", diags) {
            if let Some(s) = validate_set(&name, name_span, value, data, diags) {
                cfg.sets.insert(name, s);
            }
        }
    }
}

/// `[[policy.forward]]` (or the inline array): zone-to-zone forwards.
fn forwards(v: &Value<'_>, cfg: &mut PolicyConfig, diags: &mut Diagnostics) {
    for raw in de_each::<RawForward>(v, diags) {
        let raw = raw.into_inner();
        let from = zone_ref(&raw.from, cfg, diags);
        let to = zone_ref(&raw.to, cfg, diags);
        let family = matches::family(raw.family.as_ref(), diags);
        if let (Some(from), Some(to), Some(family)) = (from, to, family) {
            let agrees = [(&from, "`from`"), (&to, "`to`")]
                .into_iter()
                .all(|(z, key)| {
                    let what = format!("{key} zone `{z}`");
                    let versions = rule_match::zone_versions(&cfg.zones[z]);
                    matches::family_agrees(raw.family.as_ref(), family, versions, &what, diags)
                });
            if agrees {
                cfg.forwards.push(ZoneForward { from, to, family });
            }
        }
    }
}

fn action(v: &Value<'_>, diags: &mut Diagnostics, key: &str) -> Option<Action> {
    let s: String = de(v, diags)?;
    parse_action(&s).or_else(|| {
        diags.error(
            v.span(),
            format!("invalid {key} `{s}`: expected \"accept\", \"drop\" or \"reject\""),
        );
        None
    })
}

fn subtables<'v, 'a>(
    v: &'v Value<'a>,
    what: &str,
    diags: &mut Diagnostics,
) -> Vec<(String, Range<usize>, &'v Value<'a>)> {
    match v.get_ref() {
        DeValue::Table(t) => t
            .iter()
            .map(|(k, v)| (k.get_ref().to_string(), k.span(), v))
            .collect(),
        _ => {
            diags.error(
                v.span(),
                format!("`{what}` must be a table of named tables, e.g. `[{what}.name]`"),
            );
            Vec::new()
        }
    }
}

fn unique_name(
    name: &Spanned<String>,
    seen: &mut BTreeMap<String, Range<usize>>,
    diags: &mut Diagnostics,
) {
    let n = name.get_ref();
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
    if !ok {
        diags.error(
            name.span(),
            format!("invalid name `{n}`: expected up to 64 letters, digits, `_`, `-`, `.` or `:`"),
        );
    }
    if let Some(first) = seen.get(n) {
        diags.error_also(
            name.span(),
            format!("duplicate name `{n}`: rule, port forward and nat names must be unique"),
            first.clone(),
            "first used here",
        );
    } else {
        seen.insert(n.clone(), name.span());
    }
}
