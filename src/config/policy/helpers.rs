//! Conntrack helpers: `[policy] helpers = ["ftp", "sip"]` declares them, a zone's
//! `helpers = [...]` attaches them to new connections from the zone on the helper's port.
//!
//! The names are those of the kernel's `nf_conntrack_*` helpers (as fw4 names them; `h323`
//! stands for both of its helpers, `RAS` and `Q.931`), and `rtsp`, which fw4 offers from an
//! out-of-tree module: a kernel without it refuses it at the sync, which reports it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::model::{HelperPort, Protocol};
use super::raw::RawPort;
use super::rules::port_range;
use super::zones::valid_name;

/// The custom helpers by name, as [`defined`] reads them.
pub(super) type Custom = BTreeMap<String, HelperPort>;

/// Every helper edgenetd knows: its config name and what the kernel calls the helper(s), on
/// which protocol and port.
pub const KNOWN_HELPERS: &[(&str, &[HelperPort])] = &[
    ("amanda", &[port("amanda", Protocol::Udp, 10080)]),
    ("ftp", &[port("ftp", Protocol::Tcp, 21)]),
    (
        "h323",
        &[
            port("RAS", Protocol::Udp, 1719),
            port("Q.931", Protocol::Tcp, 1720),
        ],
    ),
    ("irc", &[port("irc", Protocol::Tcp, 6667)]),
    ("netbios-ns", &[port("netbios-ns", Protocol::Udp, 137)]),
    ("pptp", &[port("pptp", Protocol::Tcp, 1723)]),
    ("rtsp", &[port("rtsp", Protocol::Tcp, 554)]),
    ("sane", &[port("sane", Protocol::Tcp, 6566)]),
    ("sip", &[port("sip", Protocol::Udp, 5060)]),
    ("snmp", &[port("snmp", Protocol::Udp, 161)]),
    ("tftp", &[port("tftp", Protocol::Udp, 69)]),
];

const fn port(kernel: &'static str, protocol: Protocol, port: u16) -> HelperPort {
    HelperPort {
        kernel: Cow::Borrowed(kernel),
        protocol,
        port,
    }
}

/// What the kernel helper(s) of config name `name` are, if edgenetd knows it.
pub fn helper_ports(name: &str) -> Option<&'static [HelperPort]> {
    KNOWN_HELPERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, ports)| *ports)
}

fn known_list() -> String {
    KNOWN_HELPERS
        .iter()
        .map(|(n, _)| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// True when `h` names a helper edgenetd knows or the config defines; an error at its
/// place otherwise.
fn known(h: &Spanned<String>, custom: &Custom, diags: &mut Diagnostics) -> bool {
    let name = h.get_ref();
    let ok = helper_ports(name).is_some() || custom.contains_key(name);
    if !ok {
        diags.error(
            h.span(),
            format!(
                "unknown conntrack helper `{name}`: expected one of {}, or a helper defined as `[policy.helper.{name}]`",
                known_list()
            ),
        );
    }
    ok
}

/// `[policy.helper.<name>]`: fw4's `config helper`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHelper {
    /// The kernel's helper (`ftp`, `sip`): the `nf_conntrack_<type>` module provides it.
    #[serde(rename = "type")]
    kind: Spanned<String>,
    protocol: Spanned<String>,
    port: Spanned<RawPort>,
}

/// nf_conntrack's helper names are at most 15 bytes (`NF_CT_HELPER_NAME_LEN` 16).
const KERNEL_NAME_MAX: usize = 15;

/// One `[policy.helper.<name>]` table: a kernel helper on the protocol and port given
/// (a helper follows the connections a rule attaches it to, on any port).
pub(super) fn defined(
    (name, span): (&str, std::ops::Range<usize>),
    v: &Value<'_>,
    diags: &mut Diagnostics,
) -> Option<HelperPort> {
    if !valid_name(name) {
        diags.error(
            span.clone(),
            format!("invalid helper name `{name}`: expected a letter, then letters, digits, `_` or `-` (up to 32)"),
        );
        return None;
    }
    if helper_ports(name).is_some() {
        diags.error(
            span,
            format!("`{name}` is a built-in helper: give the definition another name (e.g. `{name}-alt`) and use that name in the zones"),
        );
        return None;
    }
    let raw: RawHelper = de(v, diags)?;
    let kernel = raw.kind.get_ref();
    let kernel_ok = !kernel.is_empty()
        && kernel.len() <= KERNEL_NAME_MAX
        && kernel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !kernel_ok {
        diags.error(
            raw.kind.span(),
            format!("invalid helper type `{kernel}`: expected a kernel helper's name (up to 15 letters, digits, `-`, `_` or `.`), e.g. \"ftp\" or \"sip\""),
        );
    }
    let protocol = match raw.protocol.get_ref().as_str() {
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        other => {
            diags.error(
                raw.protocol.span(),
                format!("invalid helper protocol `{other}`: expected \"tcp\" or \"udp\""),
            );
            None
        }
    };
    let port = match port_range(&raw.port, diags) {
        Some((p, end)) if p == end => Some(p),
        Some(_) => {
            diags.error(
                raw.port.span(),
                "a helper follows one server port: expected a single port, not a range",
            );
            None
        }
        None => None,
    };
    let (protocol, port) = (protocol?, port?);
    kernel_ok.then(|| HelperPort {
        kernel: Cow::Owned(kernel.clone()),
        protocol,
        port,
    })
}

/// `[policy] helpers`: the declared helpers, each known (built in or defined), each once.
pub(super) fn declared(v: &Value<'_>, custom: &Custom, diags: &mut Diagnostics) -> Vec<String> {
    let Some(raw) = de::<Vec<Spanned<String>>>(v, diags) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for h in &raw {
        let name = h.get_ref();
        if !known(h, custom, diags) {
            continue;
        }
        if out.contains(name) {
            diags.error(h.span(), format!("helper `{name}` is listed twice"));
        } else {
            out.push(name.clone());
        }
    }
    out
}

/// A zone's `helpers`: each declared in `[policy] helpers` or defined.
pub(super) fn of_zone(
    raw: &[Spanned<String>],
    declared: &[String],
    custom: &Custom,
    diags: &mut Diagnostics,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in raw {
        let name = h.get_ref();
        if !known(h, custom, diags) {
            continue;
        }
        if !declared.contains(name) {
            diags.error(
                h.span(),
                format!(
                    "helper `{name}` is not declared: add it to `[policy] helpers = [\"{name}\", ...]`"
                ),
            );
        } else if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}
