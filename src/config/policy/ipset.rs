//! Address·port sets (fw4's ipsets with `match = ["src_ip", "dest_port"]`, its 05_ipsets):
//! the set's `match` and its pairs, and a rule's `ipset = "name"` that matches them.
//!
//! Only exact pairs of one address and one port: fw4's `net` fields (prefixes in a
//! concatenation) need the kernel's concatenated interval sets, which edgenetd does not
//! write yet; they are refused at their place rather than read as something else.

use std::net::IpAddr;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::model::*;
use super::rules::parse_port;

/// A set's `match`: one address field and one port field, in the order given; `Some(vec![])`
/// when absent (an address set), `None` when invalid (reported).
pub(super) fn tuple(
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
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
            Some(("dest", k)) => (false, k),
            // fw4 takes an undirected field from the source.
            _ => (true, f.get_ref().as_str()),
        };
        match kind {
            "ip" => fields.push(TupleField {
                address: true,
                source,
            }),
            "port" => fields.push(TupleField {
                address: false,
                source,
            }),
            "net" => {
                diags.error(
                    f.span(),
                    "prefixes in an address·port set are not supported yet: expected `ip` (single addresses) with a `port`",
                );
                ok = false;
            }
            other => {
                diags.error(
                    f.span(),
                    format!("invalid set match field `{other}`: expected `ip` or `port`, with `src_` or `dest_` before it (fw4's `src_ip`, `dest_port`)"),
                );
                ok = false;
            }
        }
    }
    let addresses = fields.iter().filter(|f| f.address).count();
    if ok && (fields.len() != 2 || addresses != 1) {
        diags.error(
            raw.span(),
            "a set's `match` is one address and one port, e.g. [\"dest_ip\", \"dest_port\"]",
        );
        ok = false;
    }
    ok.then_some(fields)
}

/// The pairs of an address·port set: each element `"ADDR PORT"` (or nft's `"ADDR . PORT"`)
/// in the order of `fields`, the address of the set's family.
pub(super) fn pairs(
    elements: &[Spanned<String>],
    fields: &[TupleField],
    family: SetFamily,
    diags: &mut Diagnostics,
) -> Vec<(IpAddr, u16)> {
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        match pair(e.get_ref(), fields, family) {
            Ok(p) => out.push(p),
            Err(msg) => diags.error(e.span(), msg),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One pair of an address·port set (see [`pairs`]), or what is wrong with it.
pub(super) fn pair(
    text: &str,
    fields: &[TupleField],
    family: SetFamily,
) -> Result<(IpAddr, u16), String> {
    let address_first = fields[0].address;
    // nft writes the pair `ADDR . PORT`; the dot then stands alone.
    let words: Vec<&str> = text.split_whitespace().filter(|w| *w != ".").collect();
    let parsed = match words.as_slice() {
        [a, b] => {
            let (addr, port) = if address_first { (a, b) } else { (b, a) };
            addr.parse::<IpAddr>().ok().zip(parse_port(port))
        }
        _ => None,
    };
    match parsed {
        Some((addr, port)) if addr.is_ipv4() == (family == SetFamily::Ipv4) => Ok((addr, port)),
        Some((addr, _)) => Err(format!(
            "element `{text}`: {addr} is not of the set's type (\"{}\")",
            if family == SetFamily::Ipv4 {
                "ipv4"
            } else {
                "ipv6"
            }
        )),
        None => Err(format!(
            "invalid element `{text}`: expected {}, e.g. \"{}\"",
            if address_first {
                "\"ADDRESS PORT\""
            } else {
                "\"PORT ADDRESS\""
            },
            if address_first {
                "192.0.2.10 443"
            } else {
                "443 192.0.2.10"
            }
        )),
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
