//! `[policy.set.*]` entries: named address sets, static or `dynamic` (shared with other
//! programs that add elements of their own).

use std::ops::Range;
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;

use super::super::data_file::DataFiles;
use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::super::duration::parse_duration;
use super::super::net::parse_prefix;
use super::model::*;
use super::raw::*;
use super::zones::valid_name;

/// The longest element timeout taken: longer ones are more likely a typo than a wish, and
/// the kernel's timer arithmetic stays far from its limits.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The largest `size`: the kernel counts elements in a u32, and a million addresses is far
/// beyond any blocklist an edge router holds.
const MAX_SIZE: i64 = 16_777_216;

pub(super) fn validate_set(
    name: &str,
    span: Range<usize>,
    v: &Value<'_>,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> Option<NamedSet> {
    if !valid_name(name) {
        diags.error(
            span.clone(),
            format!("invalid set name `{name}`: expected a letter, then letters, digits, `_` or `-` (up to 32)"),
        );
    }
    let raw: RawSet = de(v, diags)?;
    let family = match raw.kind.get_ref().as_str() {
        "ipv4" => SetFamily::Ipv4,
        "ipv6" => SetFamily::Ipv6,
        other => {
            diags.error(
                raw.kind.span(),
                format!("invalid set type `{other}`: expected \"ipv4\" or \"ipv6\""),
            );
            return None;
        }
    };
    let tuple = super::ipset::tuple(raw.tuple.as_ref(), family, diags)?;
    let loaded = raw
        .loadfile
        .as_ref()
        .and_then(|f| super::loadfile::LoadFile::read(f, data, diags));
    let (elements, tuples) = if tuple.is_empty() {
        let mut elements = elements(name, &raw, family, diags);
        if let Some(file) = &loaded {
            let kind = raw.kind.get_ref();
            elements.extend(file.elements(|e| element(e, name, kind, family), diags));
        }
        (elements, Vec::new())
    } else {
        if raw.dynamic {
            diags.error(
                raw.tuple.as_ref().expect("a tuple").span(),
                "an address·port set holds the config's pairs only: expected no `dynamic` with `match`",
            );
            return None;
        }
        let mut tuples = super::ipset::tuples(&raw.elements, &tuple, family, diags);
        if let Some(file) = &loaded {
            let from_file = file.elements(|e| super::ipset::tuple_value(e, &tuple, family), diags);
            tuples.extend(from_file.into_iter().map(|t| (t, None)));
        }
        let whole = raw.loadfile.as_ref().map_or(span.clone(), |f| f.span());
        let tuples = super::ipset::settle(tuples, &tuple, whole, diags);
        (Vec::new(), tuples)
    };
    let timeout = raw
        .timeout
        .as_ref()
        .and_then(|t| dynamic_only(t, "timeout", raw.dynamic, diags))
        .and_then(|t| timeout(t, diags));
    let size = raw
        .size
        .as_ref()
        .and_then(|s| dynamic_only(s, "size", raw.dynamic, diags))
        .and_then(|s| size(s, elements.len(), diags));
    Some(NamedSet {
        name: name.to_string(),
        family,
        elements,
        dynamic: raw.dynamic,
        timeout,
        size,
        tuple,
        tuples,
    })
}

/// The config's elements, each of the set's family.
fn elements(name: &str, raw: &RawSet, family: SetFamily, diags: &mut Diagnostics) -> Vec<IpNet> {
    let mut out = Vec::with_capacity(raw.elements.len());
    for e in &raw.elements {
        match element(e.get_ref(), name, raw.kind.get_ref(), family) {
            Ok(n) => out.push(n),
            Err(msg) => diags.error(e.span(), msg),
        }
    }
    out
}

/// One address or prefix of set `name` (of type `kind`), or what is wrong with it.
fn element(text: &str, name: &str, kind: &str, family: SetFamily) -> Result<IpNet, String> {
    let n = parse_prefix(text)?;
    if matches!(
        (family, n),
        (SetFamily::Ipv4, IpNet::V4(_)) | (SetFamily::Ipv6, IpNet::V6(_))
    ) {
        return Ok(n);
    }
    Err(format!(
        "element `{text}` is not an {} address or prefix, but set `{name}` has type \"{kind}\"",
        if family == SetFamily::Ipv4 {
            "IPv4"
        } else {
            "IPv6"
        },
    ))
}

/// `timeout` and `size` describe elements others add: a static set has none, and its own
/// elements expiring would only make edgenetd put them back as drift.
fn dynamic_only<'a, T>(
    v: &'a Spanned<T>,
    key: &str,
    dynamic: bool,
    diags: &mut Diagnostics,
) -> Option<&'a Spanned<T>> {
    if dynamic {
        return Some(v);
    }
    diags.error(
        v.span(),
        format!("`{key}` is for sets other programs fill: add `dynamic = true` or remove `{key}`"),
    );
    None
}

fn timeout(t: &Spanned<String>, diags: &mut Diagnostics) -> Option<Duration> {
    match parse_duration(t.get_ref()) {
        Ok(d) if d < Duration::from_secs(1) || d > MAX_TIMEOUT => {
            diags.error(
                t.span(),
                format!(
                    "invalid timeout `{}`: expected from 1s to 365 days (8760h)",
                    t.get_ref()
                ),
            );
            None
        }
        Ok(d) => Some(d),
        Err(e) => {
            diags.error(t.span(), e);
            None
        }
    }
}

fn size(s: &Spanned<i64>, config_elements: usize, diags: &mut Diagnostics) -> Option<u32> {
    let n = *s.get_ref();
    if !(1..=MAX_SIZE).contains(&n) {
        diags.error(
            s.span(),
            format!("invalid size {n}: expected 1 to {MAX_SIZE} elements"),
        );
        return None;
    }
    if (n as usize) < config_elements {
        diags.error(
            s.span(),
            format!("size {n} is smaller than the set's own {config_elements} elements"),
        );
        return None;
    }
    u32::try_from(n).ok()
}
