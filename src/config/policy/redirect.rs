//! `[[policy.port_forward]]` with `to = "self"` or `"self:PORT"`: fw4's redirect to the
//! router itself (`dest_port` without `dest_ip`), e.g. every DNS query from the lan, to
//! whatever server, answered by the router's resolver.

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::matches::addresses;
use super::model::*;
use super::port_forward::forward_protocol;
use super::raw::*;
use super::rules::{parse_port, port_range};
use super::zones::zone_ref;

/// True when the port forward's target is the router (`"self"`, `"self:PORT"`).
pub(super) fn to_router(raw: &RawPortForward) -> bool {
    let t = raw.to.get_ref().trim();
    t == "self" || t.starts_with("self:")
}

pub(super) fn validate_redirect(
    raw: RawPortForward,
    cfg: &PolicyConfig,
    diags: &mut Diagnostics,
) -> Option<Redirect> {
    let from = zone_ref(&raw.from, cfg, diags);
    let protocol = forward_protocol(raw.protocol.as_ref(), &raw.name, diags);
    let ports = match &raw.port {
        Some(p) => port_range(p, diags).map(Some),
        None => Some(None),
    };
    let from_addresses = addresses("from_addresses", raw.from_addresses.as_ref(), cfg, diags);
    let to_addresses = addresses("to_addresses", raw.to_addresses.as_ref(), cfg, diags);
    let to_port = to_port(&raw.to, diags);
    let mut ok = true;
    let reflection_keys = [
        ("reflection", raw.reflection.as_ref().map(|r| r.span())),
        (
            "reflection_zones",
            raw.reflection_zones.as_ref().map(|r| r.span()),
        ),
        (
            "reflection_src",
            raw.reflection_src.as_ref().map(|r| r.span()),
        ),
    ];
    for (key, span) in reflection_keys {
        if let Some(span) = span {
            diags.error(span, format!("`{key}` is for a port forward to a host: a redirect to the router (`to = \"self\"`) has no hairpin"));
            ok = false;
        }
    }
    let (from, protocol, ports, from_addresses, to_addresses, to_port) = (
        from?,
        protocol?,
        ports?,
        from_addresses?,
        to_addresses?,
        to_port?,
    );
    if ports.is_none() && to_port.is_none() {
        diags.error(
            raw.to.span(),
            "a redirect of every port needs the router's port: expected \"self:PORT\", e.g. \"self:3128\" (or give `port`)",
        );
        return None;
    }
    ok.then(|| Redirect {
        name: raw.name.into_inner(),
        from,
        protocol,
        ports,
        to_port,
        from_addresses,
        to_addresses,
    })
}

/// `"self"` (`None`: the same port) or `"self:PORT"`; `Some(None)` for the first, `None`
/// when invalid (reported).
fn to_port(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<Option<u16>> {
    let text = raw.get_ref().trim();
    let Some(port) = text.strip_prefix("self:") else {
        return Some(None);
    };
    match parse_port(port) {
        Some(p) => Some(Some(p)),
        None => {
            diags.error(
                raw.span(),
                format!("invalid target `{text}`: expected \"self\" or \"self:PORT\" (one port 1-65535), e.g. \"self:53\""),
            );
            None
        }
    }
}
