//! Conntrack helpers: `[policy] helpers = ["ftp", "sip"]` declares them, a zone's
//! `helpers = [...]` attaches them to new connections from the zone on the helper's port.
//!
//! The names are those of the kernel's `nf_conntrack_*` helpers (as fw4 names them; `h323`
//! stands for both of its helpers, `RAS` and `Q.931`), and `rtsp`, which fw4 offers from an
//! out-of-tree module: a kernel without it refuses it at the sync, which reports it.

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::{Value, de};
use super::model::{HelperPort, Protocol};

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
        kernel,
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

/// True when `h` names a helper edgenetd knows; an error at its place otherwise.
fn known(h: &Spanned<String>, diags: &mut Diagnostics) -> bool {
    let name = h.get_ref();
    let ok = helper_ports(name).is_some();
    if !ok {
        diags.error(
            h.span(),
            format!(
                "unknown conntrack helper `{name}`: expected one of {}",
                known_list()
            ),
        );
    }
    ok
}

/// `[policy] helpers`: the declared helpers, each known, each once.
pub(super) fn declared(v: &Value<'_>, diags: &mut Diagnostics) -> Vec<String> {
    let Some(raw) = de::<Vec<Spanned<String>>>(v, diags) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for h in &raw {
        let name = h.get_ref();
        if !known(h, diags) {
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

/// A zone's `helpers`: each declared in `[policy] helpers`.
pub(super) fn of_zone(
    raw: &[Spanned<String>],
    declared: &[String],
    diags: &mut Diagnostics,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in raw {
        let name = h.get_ref();
        if !known(h, diags) {
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
