//! Address·port sets (fw4's ipsets with `match = ["src_ip", "dest_port"]`, its 05_ipsets):
//! the set's `match` and its tuples, and a rule's `ipset = "name"` that matches them.
//!
//! A field is an address (`ip`), a prefix (`net`) or a port. A set with a `net` field is a
//! concatenated interval set in the kernel, which refuses two elements that overlap (each
//! field of one meets the same field of the other): those are refused here, at their place.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::model::*;
use super::rules::parse_port;

/// The kernel's longest key (`NFT_DATA_VALUE_MAXLEN`): the fields' lengths, each padded
/// to 4 bytes, must fit it (four IPv6 fields, or sixteen ports).
const MAX_KEY_BYTES: usize = 64;

/// A set's `match`: two or more fields, at least one of them an address and one a port, in
/// the order given; `Some(vec![])` when absent (an address set), `None` when invalid
/// (reported).
pub(super) fn tuple(
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
    family: SetFamily,
    diags: &mut Diagnostics,
) -> Option<Vec<TupleField>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let mut fields = Vec::new();
    let mut ok = true;
    for f in raw.get_ref() {
        let (source, kind) = match f.get_ref().split_once('_') {
            Some(("src", k)) => (true, k),
            Some(("dest" | "dst", k)) => (false, k),
            // fw4 takes an undirected field from the source.
            _ => (true, f.get_ref().as_str()),
        };
        let kind = match kind {
            "ip" => TupleKind::Ip,
            "net" => TupleKind::Net,
            "port" => TupleKind::Port,
            other => {
                diags.error(
                    f.span(),
                    format!("invalid set match field `{other}`: expected `ip`, `net` or `port`, with `src_` or `dest_` before it (fw4's `src_ip`, `dest_net`, `dest_port`)"),
                );
                ok = false;
                continue;
            }
        };
        fields.push(TupleField { kind, source });
    }
    let addresses = fields.iter().filter(|f| f.is_address()).count();
    if ok && (fields.len() < 2 || addresses == 0 || addresses == fields.len()) {
        diags.error(
            raw.span(),
            "a set's `match` is two or more fields, addresses (`ip`, `net`) and at least one `port`, e.g. [\"dest_ip\", \"dest_port\"]",
        );
        ok = false;
    }
    let address_bytes = if family == SetFamily::Ipv4 { 4 } else { 16 };
    let bytes = addresses * address_bytes + (fields.len() - addresses) * 4;
    if ok && bytes > MAX_KEY_BYTES {
        diags.error(
            raw.span(),
            format!("a set's `match` of {} fields makes a key of {bytes} bytes: the kernel takes at most {MAX_KEY_BYTES}", fields.len()),
        );
        ok = false;
    }
    ok.then_some(fields)
}

/// The tuples of an address·port set: each element its values separated by blanks (or by
/// nft's ` . `), in the order of `fields`, the addresses of the set's family. Duplicates are
/// dropped; elements that overlap in a set with prefixes are reported at the later one.
pub(super) fn tuples(
    elements: &[Spanned<String>],
    fields: &[TupleField],
    family: SetFamily,
    diags: &mut Diagnostics,
) -> Vec<(Vec<TupleValue>, Option<Range<usize>>)> {
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        match tuple_value(e.get_ref(), fields, family) {
            Ok(t) => out.push((t, Some(e.span()))),
            Err(msg) => diags.error(e.span(), msg),
        }
    }
    out
}

/// The set's tuples, sorted, once each; when a field holds prefixes, two tuples that overlap
/// are an error (at the later one's place, or at `whole` for one of the loadfile).
pub(super) fn settle(
    mut all: Vec<(Vec<TupleValue>, Option<Range<usize>>)>,
    fields: &[TupleField],
    whole: Range<usize>,
    diags: &mut Diagnostics,
) -> Vec<Vec<TupleValue>> {
    if fields.iter().any(|f| f.kind == TupleKind::Net) {
        for (later, earlier) in overlaps(&all, fields) {
            let (t, span) = &all[later];
            diags.error(
                span.clone().unwrap_or(whole.clone()),
                format!(
                    "element `{}` overlaps element `{}`: the kernel refuses overlapping elements of a set with `net` fields (make them disjoint, or drop the narrower one)",
                    show(t),
                    show(&all[earlier].0)
                ),
            );
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|a, b| a.0 == b.0);
    all.into_iter().map(|(t, _)| t).collect()
}

/// A tuple as an element is written: its values separated by blanks.
fn show(t: &[TupleValue]) -> String {
    let parts: Vec<String> = t
        .iter()
        .map(|v| match v {
            TupleValue::Address(n) if n.prefix_len() == n.max_prefix_len() => n.addr().to_string(),
            TupleValue::Address(n) => n.to_string(),
            TupleValue::Port(p) => p.to_string(),
        })
        .collect();
    parts.join(" ")
}

/// Pairs `(later, earlier)` of indexes of distinct tuples that overlap. Tuples can only
/// overlap when their exact fields (ports, single addresses) are equal, so they are grouped
/// by those first; prefixes of one field either nest or are disjoint.
fn overlaps(
    all: &[(Vec<TupleValue>, Option<Range<usize>>)],
    fields: &[TupleField],
) -> Vec<(usize, usize)> {
    let exact = |t: &[TupleValue]| -> Vec<TupleValue> {
        (t.iter().zip(fields))
            .filter(|(_, f)| f.kind != TupleKind::Net)
            .map(|(v, _)| *v)
            .collect()
    };
    let mut groups: BTreeMap<Vec<TupleValue>, Vec<usize>> = BTreeMap::new();
    for (i, (t, _)) in all.iter().enumerate() {
        groups.entry(exact(t)).or_default().push(i);
    }
    let meets = |a: &TupleValue, b: &TupleValue| match (a, b) {
        (TupleValue::Address(x), TupleValue::Address(y)) => x.contains(y) || y.contains(x),
        _ => a == b,
    };
    let mut out = Vec::new();
    for members in groups.values() {
        // Each distinct tuple once: a duplicate is merely dropped.
        let mut seen: Vec<usize> = Vec::with_capacity(members.len());
        for &i in members {
            if seen.iter().any(|&j| all[j].0 == all[i].0) {
                continue;
            }
            if let Some(&j) = seen
                .iter()
                .find(|&&j| all[i].0.iter().zip(&all[j].0).all(|(a, b)| meets(a, b)))
            {
                out.push((i, j));
            }
            seen.push(i);
        }
    }
    out
}

/// One tuple of an address·port set (see [`tuples`]), or what is wrong with it.
pub(super) fn tuple_value(
    text: &str,
    fields: &[TupleField],
    family: SetFamily,
) -> Result<Vec<TupleValue>, String> {
    // nft writes the tuple `A . B . C`; the dot then stands alone.
    let words: Vec<&str> = text.split_whitespace().filter(|w| *w != ".").collect();
    if words.len() != fields.len() {
        return Err(format!(
            "invalid element `{text}`: expected {} values separated by blanks ({}), e.g. \"{}\"",
            fields.len(),
            fields.iter().map(field_name).collect::<Vec<_>>().join(" "),
            fields
                .iter()
                .map(|f| example(f.kind, family))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    let want_v4 = family == SetFamily::Ipv4;
    let mut out = Vec::with_capacity(fields.len());
    for (word, f) in words.iter().zip(fields) {
        let v = match f.kind {
            TupleKind::Port => TupleValue::Port(parse_port(word).ok_or_else(|| {
                format!("invalid element `{text}`: `{word}` is not a port (1-65535)")
            })?),
            kind => {
                let net = parse_prefix(word).map_err(|e| format!("element `{text}`: {e}"))?;
                if net.addr().is_ipv4() != want_v4 {
                    return Err(format!(
                        "element `{text}`: {word} is not of the set's type (\"{}\")",
                        if want_v4 { "ipv4" } else { "ipv6" }
                    ));
                }
                if kind == TupleKind::Ip && net.prefix_len() != net.max_prefix_len() {
                    return Err(format!(
                        "element `{text}`: {word} is a prefix, but its field is `ip` (one address): make the field `net` to hold prefixes"
                    ));
                }
                TupleValue::Address(net)
            }
        };
        out.push(v);
    }
    Ok(out)
}

/// A field's name in messages.
fn field_name(f: &TupleField) -> &'static str {
    match f.kind {
        TupleKind::Ip => "ADDRESS",
        TupleKind::Net => "PREFIX",
        TupleKind::Port => "PORT",
    }
}

/// An example value of a field.
fn example(kind: TupleKind, family: SetFamily) -> &'static str {
    match (kind, family) {
        (TupleKind::Ip, SetFamily::Ipv4) => "192.0.2.10",
        (TupleKind::Ip, SetFamily::Ipv6) => "2001:db8::10",
        (TupleKind::Net, SetFamily::Ipv4) => "192.0.2.0/24",
        (TupleKind::Net, SetFamily::Ipv6) => "2001:db8::/64",
        (TupleKind::Port, _) => "443",
    }
}

/// A rule's `ipset`: `"name"`, `"!name"`, and optionally one direction per field of the set
/// (`"name dst src"`, `"name src,dest"`: fw4's override of the set's directions).
pub(super) fn ipset(
    raw: Option<&Spanned<String>>,
    protocol: Option<Protocol>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Option<IpsetMatch>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let text = raw.get_ref().trim();
    let (negate, text) = match text.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, text),
    };
    let mut words = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty());
    let name = words.next().unwrap_or("");
    let Some(set) = cfg.sets.get(name) else {
        diags.error(
            raw.span(),
            format!("set `{name}` is used but never defined: expected an address·port set of [policy.set.*]"),
        );
        return None;
    };
    if set.tuple.is_empty() {
        diags.error(
            raw.span(),
            format!("set `{name}` holds addresses, not address·port pairs: match it with `from = \"@{name}\"` or `to_addresses`, or give it a `match`"),
        );
        return None;
    }
    let mut fields = set.tuple.clone();
    let directions: Vec<&str> = words.collect();
    if !directions.is_empty() {
        if directions.len() != fields.len() {
            diags.error(
                raw.span(),
                format!(
                    "`ipset` gives {} direction{} for the {} fields of set `{name}`: expected one per field or none",
                    directions.len(),
                    if directions.len() == 1 { "" } else { "s" },
                    fields.len()
                ),
            );
            return None;
        }
        for (f, d) in fields.iter_mut().zip(&directions) {
            f.source = match *d {
                "src" => true,
                "dst" | "dest" => false,
                other => {
                    diags.error(
                        raw.span(),
                        format!("invalid direction `{other}` in `ipset`: expected `src` or `dst`"),
                    );
                    return None;
                }
            };
        }
    }
    // A port field needs a protocol with ports.
    if !matches!(
        protocol,
        Some(Protocol::Tcp | Protocol::Udp | Protocol::TcpUdp)
    ) {
        if protocol.is_some() {
            diags.error(
                raw.span(),
                format!("set `{name}` matches ports: expected `protocol` \"tcp\", \"udp\" or both"),
            );
        }
        return None;
    }
    Some(Some(IpsetMatch {
        set: name.to_string(),
        fields,
        negate,
    }))
}
