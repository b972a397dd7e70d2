//! Raw `[[service]]` entries -> [`ServicesConfig`], every problem at its `file:line:col`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use ipnet::IpNet;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::doc::Doc;
use super::super::duration::parse_duration;
use super::super::net::{parse_addr, parse_prefix};
use super::super::nul::no_nul;
use super::backend_check::backend_check;
use super::model::*;
use super::raw::RawService;

/// Validates every `[[service]]` of `doc`.
pub fn validate(doc: &Doc, diags: &mut Diagnostics) -> ServicesConfig {
    if let Some(Err(v)) = doc.array("service") {
        diags.error(
            v.span(),
            "`service` must be an array of tables: write [[service]]",
        );
        return ServicesConfig::default();
    }
    let raws: Vec<Spanned<RawService>> = doc.items("service", diags);
    let mut services = Vec::with_capacity(raws.len());
    let mut names: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut vips: BTreeMap<(IpAddr, u16, Protocol), Range<usize>> = BTreeMap::new();
    for raw in raws {
        let span = raw.span();
        let raw = raw.into_inner();
        let Some(service) = validate_one(&raw, diags) else {
            continue;
        };
        if let Some(first) = names.get(&service.name) {
            diags.error_also(
                raw.name.span(),
                format!("duplicate service name `{}`", service.name),
                first.clone(),
                "first used here",
            );
            continue;
        }
        names.insert(service.name.clone(), raw.name.span());
        let vip = (service.address, service.port, service.protocol);
        if let Some(first) = vips.get(&vip) {
            diags.error_also(
                raw.address.span(),
                format!(
                    "service `{}`: {} port {} {} is already used by another service",
                    service.name,
                    service.address,
                    service.port,
                    service.protocol.name()
                ),
                first.clone(),
                "first used here",
            );
            continue;
        }
        vips.insert(vip, span);
        services.push(std::sync::Arc::new(service));
    }
    ServicesConfig {
        services,
        ..ServicesConfig::default()
    }
}

fn validate_one(raw: &RawService, diags: &mut Diagnostics) -> Option<Service> {
    let before = diags.len();
    let name = raw.name.get_ref().clone();
    if name.is_empty() {
        diags.error(raw.name.span(), "empty service name: expected a name");
    }
    no_nul(&raw.name, "service name", diags);
    if name.starts_with(CLUSTER_NAME_PREFIX) {
        diags.error(
            raw.name.span(),
            format!("invalid service name `{name}`: names starting with `{CLUSTER_NAME_PREFIX}` are reserved for services from a Kubernetes cluster"),
        );
    }
    let address = parse_addr(raw.address.get_ref())
        .map_err(|e| diags.error(raw.address.span(), e))
        .ok();
    let port = match u16::try_from(*raw.port.get_ref()) {
        Ok(p) if p > 0 => p,
        _ => {
            diags.error(
                raw.port.span(),
                format!("invalid port {}: expected 1-65535", raw.port.get_ref()),
            );
            0
        }
    };
    let protocol = choice(
        raw.protocol.as_ref(),
        "protocol",
        &[
            ("tcp", Protocol::Tcp),
            ("udp", Protocol::Udp),
            ("sctp", Protocol::Sctp),
        ],
        diags,
    );
    let affinity = affinity(raw, diags);
    let when_empty = choice(
        raw.when_empty.as_ref(),
        "when_empty",
        &[("reject", WhenEmpty::Reject), ("drop", WhenEmpty::Drop)],
        diags,
    );
    let backends = backends(&raw.backends, address, diags);
    let source_ranges = raw
        .source_ranges
        .as_ref()
        .map(|r| source_ranges(r, diags))
        .unwrap_or_default();
    let fallback = raw
        .fallback
        .as_ref()
        .and_then(|f| fallback(f, address, diags));
    let backend_check = raw
        .health
        .as_ref()
        .map(|h| backend_check(h, diags))
        .unwrap_or_default();
    if protocol == Protocol::Sctp
        && backend_check.check != BackendCheckKind::None
        && let Some(check) = raw.health.as_ref().and_then(|h| h.check.as_ref())
    {
        // Every check is a TCP, UDP or TLS exchange, which an SCTP backend never answers
        // (and this kernel may have no SCTP sockets to probe with).
        diags.error(
            check.span(),
            format!(
                "check = \"{}\" cannot probe an SCTP backend: expected check = \"none\" for protocol = \"sctp\"",
                backend_check.check.name()
            ),
        );
    }
    if diags.len() != before {
        return None;
    }
    Some(Service {
        name,
        address: address?,
        port,
        protocol,
        backends,
        affinity,
        masquerade: if raw.masquerade.unwrap_or(false) {
            Masquerade::Always
        } else {
            Masquerade::Never
        },
        source_ranges,
        internal_backends: None,
        reject_unserved_ports: false,
        when_empty,
        fallback,
        backend_check,
    })
}

/// `source_ranges`: prefixes (or bare addresses) of either family, each once; an empty list
/// is an error (leaving the key out admits everybody, an empty list would read as nobody).
fn source_ranges(raw: &Spanned<Vec<Spanned<String>>>, diags: &mut Diagnostics) -> Vec<IpNet> {
    if raw.get_ref().is_empty() {
        diags.error(
            raw.span(),
            "empty source_ranges: leave the key out to admit every source",
        );
    }
    let mut seen: BTreeMap<IpNet, Range<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for r in raw.get_ref() {
        no_nul(r, "source range", diags);
        match parse_prefix(r.get_ref()) {
            Ok(net) => {
                if let Some(first) = seen.get(&net) {
                    diags.error_also(
                        r.span(),
                        format!("source range {net} is listed twice"),
                        first.clone(),
                        "first listed here",
                    );
                    continue;
                }
                seen.insert(net, r.span());
                out.push(net);
            }
            Err(e) => diags.error(r.span(), e),
        }
    }
    out
}

/// `fallback`: one `addr:port` of the VIP's family.
fn fallback(
    raw: &Spanned<String>,
    vip: Option<IpAddr>,
    diags: &mut Diagnostics,
) -> Option<SocketAddr> {
    let text = raw.get_ref();
    let addr = match parse_backend_addr(text) {
        Ok(a) if a.port() != 0 => a,
        Ok(_) => {
            diags.error(raw.span(), format!("invalid fallback `{text}`: port 0"));
            return None;
        }
        Err(_) => {
            diags.error(
                raw.span(),
                format!(
                    "invalid fallback `{text}`: expected \"address:port\", e.g. \"10.0.9.1:8080\""
                ),
            );
            return None;
        }
    };
    if let Some(vip) = vip
        && vip.is_ipv4() != addr.is_ipv4()
    {
        diags.error(
            raw.span(),
            format!(
                "fallback {addr} is {} but the service address {vip} is {}: expected the same family",
                family(addr.ip()),
                family(vip)
            ),
        );
        return None;
    }
    Some(addr)
}

/// `affinity` and, for `sticky` only, `affinity_timeout`.
fn affinity(raw: &RawService, diags: &mut Diagnostics) -> Affinity {
    let sticky = Affinity::Sticky {
        timeout: DEFAULT_AFFINITY_TIMEOUT,
    };
    let kind = choice(
        raw.affinity.as_ref(),
        "affinity",
        &[
            ("none", Affinity::None),
            ("source-ip", Affinity::SourceIp),
            ("sticky", sticky),
        ],
        diags,
    );
    let Some(t) = &raw.affinity_timeout else {
        return kind;
    };
    if kind != sticky {
        diags.error(
            t.span(),
            "`affinity_timeout` applies only to affinity = \"sticky\"",
        );
        return kind;
    }
    match parse_duration(t.get_ref()) {
        Ok(d)
            if (MIN_AFFINITY_TIMEOUT..=MAX_AFFINITY_TIMEOUT).contains(&d)
                && d.subsec_nanos() == 0 =>
        {
            Affinity::Sticky { timeout: d }
        }
        Ok(_) => {
            diags.error(
                t.span(),
                format!(
                    "invalid affinity_timeout `{}`: expected whole seconds from 1s to 24h",
                    t.get_ref()
                ),
            );
            kind
        }
        Err(e) => {
            diags.error(t.span(), e);
            kind
        }
    }
}

/// One of a few named values; absent = the first. An unknown name is an error listing them.
pub(super) fn choice<T: Copy>(
    raw: Option<&Spanned<String>>,
    what: &str,
    names: &[(&str, T)],
    diags: &mut Diagnostics,
) -> T {
    let Some(raw) = raw else {
        return names[0].1;
    };
    if let Some((_, value)) = names.iter().find(|(n, _)| n == raw.get_ref()) {
        return *value;
    }
    let expected: Vec<String> = names.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    diags.error(
        raw.span(),
        format!(
            "invalid {what} `{}`: expected {}",
            raw.get_ref(),
            expected.join(" or ")
        ),
    );
    names[0].1
}

/// The backends, each of the VIP's family and listed once.
fn backends(
    raw: &[Spanned<toml::Value>],
    address: Option<IpAddr>,
    diags: &mut Diagnostics,
) -> Vec<Backend> {
    let mut backends = Vec::with_capacity(raw.len());
    let mut seen: BTreeMap<SocketAddr, Range<usize>> = BTreeMap::new();
    if raw.len() > MAX_BACKENDS {
        diags.error(
            raw[MAX_BACKENDS].span(),
            format!("too many backends: at most {MAX_BACKENDS} per service"),
        );
    }
    for b in raw {
        let Some(backend) = backend(b, diags) else {
            continue;
        };
        if let Some(vip) = address
            && vip.is_ipv4() != backend.address.is_ipv4()
        {
            diags.error(
                b.span(),
                format!(
                    "backend {} is {} but the service address {vip} is {}: expected a backend of the same family",
                    backend.address,
                    family(backend.address.ip()),
                    family(vip)
                ),
            );
            continue;
        }
        if let Some(first) = seen.get(&backend.address) {
            diags.error_also(
                b.span(),
                format!("backend {} is listed twice", backend.address),
                first.clone(),
                "first listed here",
            );
            continue;
        }
        seen.insert(backend.address, b.span());
        backends.push(backend);
    }
    backends
}

fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() { "IPv4" } else { "IPv6" }
}

fn parse_backend_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!(
            "invalid backend `{text}`: expected \"address:port\", e.g. \"10.0.1.5:8080\" or \"[2001:db8::5]:8080\""
        )
    })
}

fn backend(b: &Spanned<toml::Value>, diags: &mut Diagnostics) -> Option<Backend> {
    let expected = "expected \"address:port\" or { address = \"address:port\", weight = N }";
    match b.get_ref() {
        toml::Value::String(s) => match parse_backend_addr(s) {
            Ok(address) if address.port() != 0 => Some(Backend { address, weight: 1 }),
            Ok(_) => {
                diags.error(b.span(), format!("invalid backend `{s}`: port 0"));
                None
            }
            Err(e) => {
                diags.error(b.span(), e);
                None
            }
        },
        toml::Value::Table(t) => {
            if let Some(k) = t.keys().find(|k| *k != "address" && *k != "weight") {
                diags.error(
                    b.span(),
                    format!("unknown backend key `{k}`, expected `address` or `weight`"),
                );
                return None;
            }
            let Some(toml::Value::String(s)) = t.get("address") else {
                diags.error(b.span(), format!("backend without an address: {expected}"));
                return None;
            };
            let address = match parse_backend_addr(s) {
                Ok(a) if a.port() != 0 => a,
                Ok(_) => {
                    diags.error(b.span(), format!("invalid backend `{s}`: port 0"));
                    return None;
                }
                Err(e) => {
                    diags.error(b.span(), e);
                    return None;
                }
            };
            let weight = match t.get("weight") {
                None => 1,
                Some(toml::Value::Integer(w)) if (0..=MAX_WEIGHT as i64).contains(w) => *w as u32,
                Some(w) => {
                    diags.error(
                        b.span(),
                        format!(
                            "invalid weight {w}: expected an integer 0-{MAX_WEIGHT} (0 = draining)"
                        ),
                    );
                    return None;
                }
            };
            Some(Backend { address, weight })
        }
        other => {
            diags.error(
                b.span(),
                format!("invalid backend of type {}: {expected}", other.type_str()),
            );
            None
        }
    }
}

pub(super) fn duration(
    v: &Option<Spanned<String>>,
    default: Duration,
    diags: &mut Diagnostics,
) -> Duration {
    match v {
        None => default,
        Some(s) => match parse_duration(s.get_ref()) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                diags.error(
                    s.span(),
                    "a zero duration: expected more than 0, e.g. \"2s\"",
                );
                default
            }
            Err(e) => {
                diags.error(s.span(), e);
                default
            }
        },
    }
}

pub(super) fn count(
    v: &Option<Spanned<i64>>,
    default: u32,
    what: &str,
    diags: &mut Diagnostics,
) -> u32 {
    match v {
        None => default,
        Some(n) => match u32::try_from(*n.get_ref()) {
            Ok(c) if (1..=100).contains(&c) => c,
            _ => {
                diags.error(
                    n.span(),
                    format!("invalid {what} {}: expected 1-100", n.get_ref()),
                );
                default
            }
        },
    }
}
