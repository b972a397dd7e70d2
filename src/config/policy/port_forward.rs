//! `[[policy.port_forward]]` entries: the router's port or port range, the inner host and
//! its same-size range, the protocols and the sources allowed.

use std::net::{IpAddr, SocketAddr};

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::matches::{addresses, protocol};
use super::model::*;
use super::raw::*;
use super::rule_match::{address_versions, and, net_versions};
use super::rules::port_range;
use super::zones::zone_ref;

pub(super) fn validate_port_forward(
    raw: RawPortForward,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<PortForward> {
    let from = zone_ref(&raw.from, cfg, diags);
    let protocol = forward_protocol(raw.protocol.as_ref(), &raw.name, diags);
    let Some(port) = &raw.port else {
        diags.error(
            raw.to.span(),
            "a port forward to a host needs `port` (only a redirect to the router, `to = \"self:PORT\"`, takes every port)",
        );
        return None;
    };
    let ports = port_range(port, diags);
    let from_addresses = addresses("from_addresses", raw.from_addresses.as_ref(), cfg, diags);
    let to = target(&raw.to, ports, diags);
    let reflection = raw.reflection.as_ref().is_none_or(|r| *r.get_ref());
    let reflection_zones = reflection_zones(&raw, reflection, cfg, diags);
    let reflection_external = reflection_src(&raw, reflection, diags);
    let to_addresses = addresses("to_addresses", raw.to_addresses.as_ref(), cfg, diags);
    let (from, protocol, (port, port_end), to, from_addresses, reflection_zones) = (
        from?,
        protocol?,
        ports?,
        to?,
        from_addresses?,
        reflection_zones?,
    );
    let (reflection_external, to_addresses) = (reflection_external?, to_addresses?);
    let (d4, d6) = address_versions(&to_addresses, cfg);
    if let Some(list) = raw
        .to_addresses
        .as_ref()
        .filter(|_| (to.is_ipv4() && !d4) || (to.is_ipv6() && !d6))
    {
        diags.error(
            list.span(),
            format!(
                "no entry of `to_addresses` is IPv{} like the target `{to}`: the port forward could never match",
                if to.is_ipv4() { 4 } else { 6 }
            ),
        );
        return None;
    }
    let zone = &cfg.zones[&from];
    let (z4, z6) = net_versions(&zone.networks);
    if (to.is_ipv4() && !z4) || (to.is_ipv6() && !z6) {
        diags.error(
            raw.to.span(),
            format!(
                "target `{to}` is IPv{}, but zone `{}` only has IPv{} networks: the port forward could never match",
                if to.is_ipv4() { 4 } else { 6 },
                zone.name,
                if to.is_ipv4() { 6 } else { 4 }
            ),
        );
        return None;
    }
    let (a4, a6) = and(
        address_versions(&from_addresses, cfg),
        (to.is_ipv4(), to.is_ipv6()),
    );
    if let (false, false, Some(list)) = (a4, a6, &raw.from_addresses) {
        diags.error(
            list.span(),
            format!(
                "no entry of `from_addresses` is IPv{} like the target `{to}`: the port forward could never match",
                if to.is_ipv4() { 4 } else { 6 }
            ),
        );
        return None;
    }
    Some(PortForward {
        name: raw.name.into_inner(),
        from,
        protocol,
        port,
        port_end,
        to,
        from_addresses,
        reflection,
        reflection_zones,
        reflection_external,
        to_addresses,
    })
}

/// `reflection_src`: `"internal"` (the default) or `"external"`, only with reflection.
/// `Some(true)` for external; `None` when invalid (reported).
fn reflection_src(raw: &RawPortForward, reflection: bool, diags: &mut Diagnostics) -> Option<bool> {
    let Some(src) = &raw.reflection_src else {
        return Some(false);
    };
    let external = match src.get_ref().as_str() {
        "internal" => false,
        "external" => true,
        other => {
            diags.error(src.span(), format!("invalid reflection_src `{other}`: expected \"internal\" (the router's address towards the inner host) or \"external\" (its address on the `from` zone)"));
            return None;
        }
    };
    if external && !reflection {
        diags.error(src.span(), "`reflection_src = \"external\"` chooses the source of reflected traffic, but `reflection = false` turns reflection off: drop one of them");
        return None;
    }
    Some(external)
}

/// `reflection_zones`: defined zones, and only where there is reflection.
fn reflection_zones(
    raw: &RawPortForward,
    reflection: bool,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Vec<String>> {
    let Some(list) = &raw.reflection_zones else {
        return Some(Vec::new());
    };
    if !reflection && !list.get_ref().is_empty() {
        diags.error(
            list.span(),
            "`reflection_zones` widens the reflection, but `reflection = false` turns it off: drop one of them",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for z in list.get_ref() {
        match zone_ref(z, cfg, diags) {
            Some(name) if !out.contains(&name) => out.push(name),
            Some(_) => {}
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// TCP when absent; tcp, udp or both.
pub(super) fn forward_protocol(
    raw: Option<&Spanned<RawFrom>>,
    name: &Spanned<String>,
    diags: &mut Diagnostics,
) -> Option<Protocol> {
    match protocol(raw, diags) {
        None => None,
        Some(Protocol::Any) if raw.is_none() => Some(Protocol::Tcp),
        Some(p @ (Protocol::Tcp | Protocol::Udp | Protocol::TcpUdp)) => Some(p),
        Some(_) => {
            let span = raw.map(|p| p.span()).unwrap_or(name.span());
            diags.error(
                span,
                "a port forward's protocol must be \"tcp\" or \"udp\" (or both: [\"tcp\", \"udp\"])",
            );
            None
        }
    }
}

/// The inner host of a port forward of the router's `ports`: `"addr"` (same ports),
/// `"addr:port"` or `"addr:first-last"` (`[v6]:...`), a range the same size as `ports`.
/// Returns the address with the first inner port.
/// With `ports` unknown (invalid, reported), only the form is checked.
fn target(
    raw: &Spanned<String>,
    ports: Option<(u16, u16)>,
    diags: &mut Diagnostics,
) -> Option<SocketAddr> {
    let text = raw.get_ref().trim();
    let Some((addr, inner)) = split_target(text) else {
        diags.error(
            raw.span(),
            format!("invalid target `{text}`: expected \"address:port\", \"address:first-last\" or \"address\", e.g. \"10.0.0.10:80\", \"10.0.0.10:9000-9100\" or \"[fd00::10]:80\""),
        );
        return None;
    };
    let ports = ports?;
    let inner = inner.unwrap_or(ports);
    let (size, inner_size) = (ports.1 - ports.0, inner.1 - inner.0);
    if size != inner_size {
        let suggestion = inner
            .0
            .checked_add(size)
            .map(|end| format!("; did you mean \"{}:{}-{end}\"?", fmt_addr(addr), inner.0))
            .unwrap_or_default();
        diags.error(
            raw.span(),
            format!(
                "target `{text}` has {} port{} but `port` has {}: expected a range of the same size{suggestion}",
                inner_size as u32 + 1,
                if inner_size == 0 { "" } else { "s" },
                size as u32 + 1
            ),
        );
        return None;
    }
    Some(SocketAddr::new(addr, inner.0))
}

fn fmt_addr(a: IpAddr) -> String {
    match a {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

/// `addr`, `v4:ports`, `[v6]:ports` -> the address and the port range, if any.
fn split_target(text: &str) -> Option<(IpAddr, Option<(u16, u16)>)> {
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(a) = bare.parse::<IpAddr>() {
        return Some((a, None));
    }
    let (addr, ports) = match text.strip_prefix('[') {
        Some(rest) => {
            let (a, p) = rest.split_once("]:")?;
            (IpAddr::V6(a.parse().ok()?), p)
        }
        None => {
            let (a, p) = text.rsplit_once(':')?;
            (IpAddr::V4(a.parse().ok()?), p)
        }
    };
    let (a, b) = ports.split_once('-').unwrap_or((ports, ports));
    let port = |s: &str| s.trim().parse::<u16>().ok().filter(|p| *p > 0);
    match (port(a), port(b)) {
        (Some(a), Some(b)) if a <= b => Some((addr, Some((a, b)))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_with_and_without_ports() {
        let v4 = |s: &str| IpAddr::V4(s.parse().unwrap());
        assert_eq!(split_target("10.0.0.2"), Some((v4("10.0.0.2"), None)));
        assert_eq!(
            split_target("10.0.0.2:9000-9100"),
            Some((v4("10.0.0.2"), Some((9000, 9100))))
        );
        assert_eq!(
            split_target("[fd00::2]:80"),
            Some((IpAddr::V6("fd00::2".parse().unwrap()), Some((80, 80))))
        );
        assert_eq!(
            split_target("fd00::2"),
            Some((IpAddr::V6("fd00::2".parse().unwrap()), None))
        );
        assert_eq!(
            split_target("[fd00::2]"),
            Some((IpAddr::V6("fd00::2".parse().unwrap()), None))
        );
        assert_eq!(split_target("10.0.0.2:9100-9000"), None);
        assert_eq!(split_target("10.0.0.2:0"), None);
        assert_eq!(split_target("host:80"), None);
    }
}
