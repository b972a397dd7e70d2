//! Single values of routes and rules: addresses of the right family, interface names, table
//! names, numbers in range, firewall marks.

use std::net::IpAddr;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_addr;
use super::super::nul::no_nul;
use super::model::TABLE_MAIN;
use super::raw::{RawMark, RawTable};

pub(super) fn family_name(net: &IpNet) -> &'static str {
    match net {
        IpNet::V4(_) => "IPv4",
        IpNet::V6(_) => "IPv6",
    }
}

pub(super) fn addr_family_name(addr: &IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

pub(super) fn same_family(net: &IpNet, addr: &IpAddr) -> bool {
    matches!(
        (net, addr),
        (IpNet::V4(_), IpAddr::V4(_)) | (IpNet::V6(_), IpAddr::V6(_))
    )
}

/// Parses an address of the route's family; errors name both.
pub(super) fn route_addr(
    raw: &Spanned<String>,
    to: Option<&IpNet>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<IpAddr> {
    match parse_addr(raw.get_ref()) {
        Ok(addr) => match to {
            Some(to) if !same_family(to, &addr) => {
                diags.error(
                    raw.span(),
                    format!(
                        "{what} {addr} is {} but the route to {to} is {}: expected an {} address",
                        addr_family_name(&addr),
                        family_name(to),
                        family_name(to)
                    ),
                );
                None
            }
            _ => Some(addr),
        },
        Err(msg) => {
            diags.error(raw.span(), msg);
            None
        }
    }
}

/// Checks a Linux interface name: 1 to 15 bytes, no '/', ':' or whitespace.
pub(super) fn ifname(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<String> {
    if !no_nul(raw, "interface name", diags) {
        return None;
    }
    let name = raw.get_ref();
    // Names are ASCII almost always: checked by byte, the char walk only for the others.
    let bad = |c: char| c == '/' || c == ':' || c.is_whitespace();
    let clean = if name.is_ascii() {
        !name.bytes().any(|b| bad(char::from(b)))
    } else {
        !name.chars().any(bad)
    };
    let ok = !name.is_empty() && name.len() <= 15 && name != "." && name != ".." && clean;
    if ok {
        Some(name.clone())
    } else {
        diags.error(
            raw.span(),
            format!("invalid interface name `{name}`: expected 1 to 15 characters without '/', ':' or spaces"),
        );
        None
    }
}

pub(super) fn table(raw: &Spanned<RawTable>, diags: &mut Diagnostics) -> Option<u32> {
    match raw.get_ref() {
        RawTable::Number(n) => match u32::try_from(*n) {
            Ok(t) if t > 0 => Some(t),
            _ => {
                diags.error(
                    raw.span(),
                    format!(
                        "invalid table {n}: expected a number from 1 to 4294967295, or \"main\""
                    ),
                );
                None
            }
        },
        RawTable::Name(name) => match name.as_str() {
            "main" => Some(TABLE_MAIN),
            "default" => Some(253),
            "local" => Some(255),
            other => {
                diags.error(
                    raw.span(),
                    format!("unknown table name `{other}`: expected a number from 1 to 4294967295, or \"main\", \"default\", \"local\""),
                );
                None
            }
        },
    }
}

pub(super) fn number(
    raw: &Spanned<i64>,
    range: std::ops::RangeInclusive<i64>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<i64> {
    let n = *raw.get_ref();
    if range.contains(&n) {
        Some(n)
    } else {
        diags.error(
            raw.span(),
            format!(
                "invalid {what} {n}: expected a number from {} to {}",
                range.start(),
                range.end()
            ),
        );
        None
    }
}

pub(super) fn mark(raw: &Spanned<RawMark>, diags: &mut Diagnostics) -> Option<(u32, Option<u32>)> {
    fn num(text: &str) -> Option<u32> {
        let t = text.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        }
    }
    let parsed = match raw.get_ref() {
        RawMark::Number(n) => u32::try_from(*n).ok().map(|m| (m, None)),
        RawMark::Text(t) => match t.split_once('/') {
            Some((m, mask)) => num(m).zip(num(mask)).map(|(m, k)| (m, Some(k))),
            None => num(t).map(|m| (m, None)),
        },
    };
    if parsed.is_none() {
        diags.error(
            raw.span(),
            "invalid fwmark: expected a number or a string \"MARK\" or \"MARK/MASK\" (decimal or 0x hex), e.g. \"0x10/0xff\"",
        );
    }
    parsed
}

/// A mark in the kernel's terms, so that equal rules compare equal: a mark without a mask
/// matches under all ones (`"16"` is `"0x10/0xffffffff"`), and mark 0 without a mask matches
/// every packet, as no `fwmark` does.
pub(super) fn kernel_mark((mark, mask): (u32, Option<u32>)) -> Option<(u32, Option<u32>)> {
    match (mark, mask) {
        (0, None) => None,
        (m, Some(u32::MAX)) if m != 0 => Some((m, None)),
        other => Some(other),
    }
}
