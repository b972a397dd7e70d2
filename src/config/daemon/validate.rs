//! `[daemon]` and `[controller.*]` validated key by key, missing keys at their defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Doc, de};
use super::super::duration::parse_duration;
use super::super::net::parse_prefix;
use super::super::nul::no_nul;
use super::model::*;
use super::raw::{RawController, RawDaemon};

impl ControllerSettings {
    /// The settings the keys `enabled`, `period` and `sync_budget` give, defaults where
    /// absent; a bad duration is a problem at its place (and leaves the default). For
    /// `[controller.*]` and for sections that embed these keys (`[[test_controller]]`).
    pub fn from_keys(
        enabled: Option<bool>,
        period: Option<Spanned<String>>,
        sync_budget: Option<Spanned<String>>,
        diags: &mut Diagnostics,
    ) -> ControllerSettings {
        let mut s = ControllerSettings {
            enabled: enabled.unwrap_or(true),
            ..Default::default()
        };
        let mut duration = |v: Option<Spanned<String>>, what: &str, into: &mut Duration| {
            let Some(v) = v else { return };
            match parse_duration(v.get_ref()) {
                Ok(d) if d >= Duration::from_millis(100) => *into = d,
                Ok(_) => diags.error(
                    v.span(),
                    format!(
                        "{what} `{}` is too short: expected at least 100ms",
                        v.get_ref()
                    ),
                ),
                Err(msg) => diags.error(v.span(), msg),
            }
        };
        duration(period, "period", &mut s.period);
        duration(sync_budget, "sync_budget", &mut s.sync_budget);
        s
    }
}

/// Validates `[daemon]`; missing keys take their defaults.
pub fn validate_daemon(doc: &Doc<'_>, diags: &mut Diagnostics) -> DaemonSettings {
    let mut out = DaemonSettings::default();
    let Some(raw) = doc.table::<RawDaemon>("daemon", diags) else {
        return out;
    };
    let raw = raw.into_inner();
    if let Some(listen) = raw.listen {
        match listen.get_ref().parse() {
            Ok(addr) => out.listen = addr,
            Err(_) => diags.error(
                listen.span(),
                format!("invalid listen address `{}`: expected address:port, e.g. \"127.0.0.1:9750\" or \"[::1]:9750\"", listen.get_ref()),
            ),
        }
    }
    if let Some(allow) = raw.metrics_allow {
        let mut nets = Vec::with_capacity(allow.len());
        for item in allow {
            match parse_prefix(item.get_ref()) {
                Ok(net) => nets.push(net),
                Err(msg) => diags.error(item.span(), msg),
            }
        }
        out.metrics_allow = Some(nets);
    }
    if let Some(prefix) = raw.nft_table_prefix {
        let p = prefix.get_ref();
        let ok = !p.is_empty()
            && p.len() <= 64
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if ok {
            out.nft_table_prefix = p.clone();
        } else {
            diags.error(prefix.span(), format!("invalid nft_table_prefix `{p}`: expected 1 to 64 characters of letters, digits, '-' or '_'"));
        }
    }
    for name in raw.management.unwrap_or_default() {
        if !no_nul(&name, "interface name", diags) {
            continue;
        }
        let s = name.get_ref();
        let stem = s.strip_suffix('*').unwrap_or(s);
        if stem.is_empty() || s.len() > 15 || stem.contains(['*', '"', '\'', ' ', '/']) {
            diags.error(
                name.span(),
                format!("invalid interface name `{s}` in `management`: expected up to 15 characters, a `*` only at the end (\"eth*\")"),
            );
        } else if !out.management.contains(s) {
            out.management.push(s.clone());
        }
    }
    if let Some(proto) = raw.route_protocol {
        match u8::try_from(*proto.get_ref()) {
            Ok(p) if p > 4 => out.route_protocol = p,
            _ => diags.error(
                proto.span(),
                format!("invalid route_protocol {}: expected a number from 5 to 255 (0-4 belong to the kernel and iproute2)", proto.get_ref()),
            ),
        }
    }
    out
}

/// Validates `[controller.*]`: every built-in controller gets settings, defaults where absent.
pub fn validate_controllers(
    doc: &Doc<'_>,
    diags: &mut Diagnostics,
) -> BTreeMap<&'static str, ControllerSettings> {
    let mut out: BTreeMap<&'static str, ControllerSettings> = CONTROLLERS
        .iter()
        .map(|n| (*n, ControllerSettings::default()))
        .collect();
    let Some(table) = doc.value("controller") else {
        return out;
    };
    let Some(entries) = table.get_ref().as_table() else {
        diags.error(
            table.span(),
            "invalid type: expected a table such as [controller.route]",
        );
        return out;
    };
    for (name, value) in entries.iter() {
        let Some(known) = CONTROLLERS.iter().find(|c| **c == &**name.get_ref()) else {
            diags.error(
                name.span(),
                format!(
                    "unknown controller `{}`, expected one of `policy`, `service`, `route`",
                    name.get_ref()
                ),
            );
            continue;
        };
        if let Some(raw) = de::<RawController>(value, diags) {
            out.insert(known, controller_settings(raw, diags));
        }
    }
    out
}

/// Turns a raw controller table into settings, checking durations.
fn controller_settings(raw: RawController, diags: &mut Diagnostics) -> ControllerSettings {
    ControllerSettings::from_keys(raw.enabled, raw.period, raw.sync_budget, diags)
}
