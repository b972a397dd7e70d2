//! The richer matches of rules and port forwards: protocols (lists, names and numbers),
//! destination and source address lists (prefixes, `@sets`, IPv6 suffixes, masked
//! addresses), address families and marks.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::net::parse_prefix;
use super::model::*;
use super::raw::*;
use super::rule_match::RawValues;
use crate::names::ip_protocol_by_name;

/// `protocol`: one name, or a list of "tcp" and "udp" (both = [`Protocol::TcpUdp`]).
/// `Some(Any)` when absent, `None` when invalid (reported).
pub(super) fn protocol(p: Option<&Spanned<RawFrom>>, diags: &mut Diagnostics) -> Option<Protocol> {
    let Some(p) = p else {
        return Some(Protocol::Any);
    };
    let one = |name: &str, diags: &mut Diagnostics| match name {
        "any" => Some(Protocol::Any),
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        "icmp" => Some(Protocol::Icmp),
        "icmpv6" => Some(Protocol::Icmpv6),
        other => {
            diags.error(
                p.span(),
                format!("invalid protocol `{other}`: expected \"tcp\", \"udp\", \"icmp\", \"icmpv6\", \"any\" or [\"tcp\", \"udp\"]"),
            );
            None
        }
    };
    let list = match p.get_ref() {
        RawFrom::One(name) => return one(name, diags),
        RawFrom::Many(list) => list,
    };
    let (mut tcp, mut udp) = (false, false);
    for name in list {
        match name.as_str() {
            "tcp" => tcp = true,
            "udp" => udp = true,
            other => {
                diags.error(
                    p.span(),
                    format!("invalid protocol `{other}` in a list: a protocol list holds \"tcp\" and/or \"udp\", e.g. [\"tcp\", \"udp\"]"),
                );
                return None;
            }
        }
    }
    match (tcp, udp) {
        (true, true) => Some(Protocol::TcpUdp),
        (true, false) => Some(Protocol::Tcp),
        (false, true) => Some(Protocol::Udp),
        (false, false) => {
            diags.error(
                p.span(),
                "empty protocol list: expected [\"tcp\", \"udp\"] or one protocol name",
            );
            None
        }
    }
}

/// A rule's `protocol`: one name of `/etc/protocols` (any case; `"any"`/`"all"` for any)
/// or number 0-255, or a list of "tcp" and "udp" (both = [`Protocol::TcpUdp`]). `Some(Any)`
/// when absent, `None` when invalid (reported).
pub(super) fn rule_protocol(
    p: Option<&Spanned<RawValues>>,
    diags: &mut Diagnostics,
) -> Option<Protocol> {
    let Some(p) = p else {
        return Some(Protocol::Any);
    };
    let one = match p.get_ref() {
        RawValues::One(one) => one,
        RawValues::Many(list) => {
            // The list form is the TCP+UDP pair; its names are checked as before.
            let names = list
                .iter()
                .map(|v| match v {
                    RawPort::Text(t) => t.to_ascii_lowercase(),
                    RawPort::Number(n) => n.to_string(),
                })
                .collect();
            return protocol(Some(&Spanned::new(p.span(), RawFrom::Many(names))), diags);
        }
    };
    let number = match one {
        RawPort::Number(n) => u8::try_from(*n).ok(),
        RawPort::Text(t) if matches!(t.trim().to_ascii_lowercase().as_str(), "any" | "all") => {
            return Some(Protocol::Any);
        }
        RawPort::Text(t) => ip_protocol_by_name(t.trim()),
    };
    let Some(number) = number else {
        let shown = match one {
            RawPort::Number(n) => n.to_string(),
            RawPort::Text(t) => format!("`{t}`"),
        };
        diags.error(
            p.span(),
            format!("invalid protocol {shown}: expected a name such as \"tcp\", \"udp\", \"icmp\", \"icmpv6\", \"gre\", \"esp\", \"ah\", \"igmp\", \"sctp\" (those of /etc/protocols), a number 0-255, \"any\", or [\"tcp\", \"udp\"]"),
        );
        return None;
    };
    Some(match number {
        6 => Protocol::Tcp,
        17 => Protocol::Udp,
        1 => Protocol::Icmp,
        58 => Protocol::Icmpv6,
        n => Protocol::Other(n),
    })
}

/// `family`: "ipv4", "ipv6" or "any" (any case, as fw4 reads "IPv6"). `Some(Any)` when
/// absent, `None` when invalid (reported).
pub(super) fn family(raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Family> {
    let Some(raw) = raw else {
        return Some(Family::Any);
    };
    match raw.get_ref().trim().to_ascii_lowercase().as_str() {
        "any" => Some(Family::Any),
        "ipv4" => Some(Family::Ipv4),
        "ipv6" => Some(Family::Ipv6),
        _ => {
            diags.error(
                raw.span(),
                format!(
                    "invalid family `{}`: expected \"ipv4\", \"ipv6\" or \"any\"",
                    raw.get_ref()
                ),
            );
            None
        }
    }
}

/// The error for an explicit `family` (`raw`, read as `family`) that rules out every IP
/// version `what` (a key and its value, e.g. "`from` zone `lan`") allows (`allowed`).
/// True when they agree.
pub(super) fn family_agrees(
    raw: Option<&Spanned<String>>,
    family: Family,
    allowed: (bool, bool),
    what: &str,
    diags: &mut Diagnostics,
) -> bool {
    let (f4, f6) = family.versions();
    if (f4 && allowed.0) || (f6 && allowed.1) {
        return true;
    }
    if let Some(raw) = raw {
        let only = if allowed.0 { "IPv4" } else { "IPv6" };
        diags.error(
            raw.span(),
            format!(
                "`family = \"{}\"` conflicts with {what}, which is {only} only: expected family \"{}\" or \"any\" (or leave `family` out)",
                family.name(),
                only.to_ascii_lowercase(),
            ),
        );
    }
    false
}

/// True for protocols whose rules may match ports.
pub(super) fn has_ports(p: Option<Protocol>) -> bool {
    matches!(p, Some(Protocol::Tcp | Protocol::Udp | Protocol::TcpUdp))
}

/// `to_addresses` / `from_addresses`: prefixes, `"@set"`s and IPv6 suffixes. `Some(empty)`
/// when absent; `None` when any entry is invalid (each reported at its place).
pub(super) fn addresses(
    key: &str,
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Vec<AddressMatch>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    if list.get_ref().is_empty() {
        diags.error(
            list.span(),
            format!("empty `{key}`: expected addresses, prefixes, \"@set\" names or IPv6 suffixes, e.g. [\"10.0.0.0/8\", \"@servers\"] (or leave `{key}` out)"),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in list.get_ref() {
        match address(item, cfg, diags) {
            Some(a) => out.push(a),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn address(
    item: &Spanned<String>,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<AddressMatch> {
    let text = item.get_ref().trim();
    if let Some(name) = text.strip_prefix('@') {
        return super::rule_match::known_set(name, item.span(), cfg, diags).map(AddressMatch::Set);
    }
    match parse_subnet(text) {
        Ok(a) => Some(a),
        Err(e) => {
            diags.error(item.span(), e);
            None
        }
    }
}

/// An address, a prefix, or an address under a mask (fw4's subnets): an IPv4 mask in dotted
/// form (`"10.0.0.1/255.0.0.255"`; a contiguous one is the prefix it stands for), an IPv6
/// suffix (`"::1234/::ffff"`, `"::1234/-64"`).
pub(super) fn parse_subnet(text: &str) -> Result<AddressMatch, String> {
    let Some((addr, mask)) = text.split_once('/') else {
        return parse_prefix(text).map(AddressMatch::Prefix);
    };
    if mask.starts_with('-') || mask.contains(':') {
        let (addr, mask) = parse_suffix(addr, mask)?;
        return Ok(AddressMatch::Suffix { addr, mask });
    }
    if !mask.contains('.') {
        return parse_prefix(text).map(AddressMatch::Prefix);
    }
    let expected = "expected an IPv4 address and mask, e.g. \"192.168.1.0/255.255.0.255\"";
    let (Ok(a), Ok(m)) = (addr.parse::<Ipv4Addr>(), mask.parse::<Ipv4Addr>()) else {
        return Err(format!("invalid masked address `{text}`: {expected}"));
    };
    let (bits, m) = (u32::from(a), u32::from(m));
    if m == 0 {
        return Err(format!(
            "invalid masked address `{text}`: the mask is 0.0.0.0, which matches every address; {expected}"
        ));
    }
    if bits & !m != 0 {
        return Err(format!(
            "invalid masked address `{text}`: the address has bits outside the mask; did you mean \"{}/{}\"?",
            Ipv4Addr::from(bits & m),
            Ipv4Addr::from(m)
        ));
    }
    if m.leading_ones() + m.trailing_zeros() == 32 {
        let net = ipnet::Ipv4Net::new(a, m.leading_ones() as u8).expect("a length of 0-32");
        return Ok(AddressMatch::Prefix(IpNet::V4(net)));
    }
    Ok(AddressMatch::Masked(MaskedAddr {
        addr: a.into(),
        mask: Ipv4Addr::from(m).into(),
    }))
}

/// `"::1234/::ffff:ffff:ffff:ffff"` (a mask) or `"::1234/-64"` (the last 64 bits).
pub(super) fn parse_suffix(addr: &str, mask: &str) -> Result<(Ipv6Addr, Ipv6Addr), String> {
    let text = format!("{addr}/{mask}");
    let expected = "expected an IPv6 suffix \"ADDRESS/MASK\" or \"ADDRESS/-BITS\", e.g. \"::1234/::ffff:ffff:ffff:ffff\" or \"::1234/-64\"";
    let addr: Ipv6Addr = addr
        .parse()
        .map_err(|_| format!("invalid suffix `{text}`: {expected}"))?;
    let mask: u128 = match mask.strip_prefix('-') {
        Some(bits) => match bits.parse::<u32>() {
            Ok(b @ 1..=128) => u128::MAX >> (128 - b),
            _ => {
                return Err(format!(
                    "invalid suffix `{text}`: the bits after `-` must be 1-128; {expected}"
                ));
            }
        },
        None => match mask.parse::<Ipv6Addr>() {
            Ok(m) if u128::from(m) != 0 => u128::from(m),
            _ => return Err(format!("invalid suffix `{text}`: {expected}")),
        },
    };
    let bits = u128::from(addr);
    if bits & !mask != 0 {
        return Err(format!(
            "invalid suffix `{text}`: the address has bits outside the mask; did you mean \"{}/{}\"?",
            Ipv6Addr::from(bits & mask),
            Ipv6Addr::from(mask)
        ));
    }
    Ok((addr, Ipv6Addr::from(mask)))
}

/// `set_mark` (`xor` false) or `set_xmark` (`xor` true): `"MARK/MASK"` or a bare mark (all
/// 32 bits), decimal or `0x` hex, read as fw4 reads them. `Some(None)` when absent, `None`
/// when invalid (reported).
pub(super) fn mark_set(
    raw: Option<&Spanned<RawPort>>,
    xor: bool,
    diags: &mut Diagnostics,
) -> Option<Option<MarkSet>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let key = if xor { "set_xmark" } else { "set_mark" };
    fn num(text: &str) -> Option<u32> {
        let t = text.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        }
    }
    let parsed = match raw.get_ref() {
        RawPort::Number(n) => u32::try_from(*n).ok().map(|v| (v, u32::MAX)),
        RawPort::Text(t) => match t.split_once('/') {
            Some((v, m)) => num(v).zip(num(m)),
            None => num(t).map(|v| (v, u32::MAX)),
        },
    };
    let Some((value, mask)) = parsed else {
        diags.error(
            raw.span(),
            format!("invalid {key}: expected a number or a string \"MARK\" or \"MARK/MASK\" (decimal or 0x hex), e.g. \"0x10/0xff\""),
        );
        return None;
    };
    // A zero mask only ORs (`set_mark`) — say so rather than guess — or, with a zero value
    // too, changes nothing.
    if !xor && mask == 0 {
        diags.error(
            raw.span(),
            format!("invalid set_mark 0x{value:x}/0x0: expected a non-zero mask (the bits cleared before the mark's are set); to set bits and keep all others write set_xmark = \"0x{value:x}/0x{value:x}\""),
        );
        return None;
    }
    if xor && mask == 0 && value == 0 {
        diags.error(
            raw.span(),
            "invalid set_xmark 0x0/0x0: it changes no bit of the mark; expected a non-zero mark or mask",
        );
        return None;
    }
    Some(Some(MarkSet { value, mask, xor }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_by_mask_and_by_bits_are_one_match() {
        let a = parse_suffix("::1234", "::ffff:ffff:ffff:ffff").unwrap();
        let b = parse_suffix("::1234", "-64").unwrap();
        assert_eq!(a, b);
        assert_eq!(b.1, "::ffff:ffff:ffff:ffff".parse::<Ipv6Addr>().unwrap());
        assert!(
            parse_suffix("2001:db8::1234", "-64")
                .unwrap_err()
                .contains("did you mean \"::1234/::ffff:ffff:ffff:ffff\"")
        );
        assert!(parse_suffix("::1", "-0").unwrap_err().contains("1-128"));
        assert!(parse_suffix("::1", "::").is_err());
        assert!(parse_suffix("10.0.0.1", "-8").is_err());
    }
}
