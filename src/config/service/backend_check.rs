//! `[service.health]`: how a service's backends are checked, validated into
//! [`BackendCheck`].

use std::net::IpAddr;
use std::ops::Range;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::model::*;
use super::raw::RawHealth;
use super::validate::{choice, count, duration};

pub(super) fn backend_check(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheck {
    let defaults = BackendCheck::default();
    let check = check_kind(h, diags);
    // Keys of one check kind are an error with any other, so a typo'd kind is not silent.
    let owners: [(&str, &Option<Spanned<String>>, &str); 6] = [
        ("path", &h.path, "http"),
        ("expect", &h.expect, "http"),
        ("send", &h.send, "udp"),
        ("expect_bytes", &h.expect_bytes, "udp"),
        ("query_name", &h.query_name, "dns"),
        ("sni", &h.sni, "tls"),
    ];
    for (key, v, owner) in owners {
        if let Some(v) = v
            && check.name() != owner
        {
            diags.error(
                v.span(),
                format!("`{key}` applies only to check = \"{owner}\""),
            );
        }
    }
    let interval = duration(&h.interval, defaults.interval, diags);
    let timeout = duration(&h.timeout, defaults.timeout, diags);
    if timeout > interval
        && let Some(t) = &h.timeout
    {
        diags.error(
            t.span(),
            "timeout is longer than interval: expected a timeout up to the interval",
        );
    }
    BackendCheck {
        check,
        interval,
        timeout,
        rise: count(&h.rise, defaults.rise, "rise", diags),
        fall: count(&h.fall, defaults.fall, "fall", diags),
        initial: choice(
            h.initial.as_ref(),
            "initial",
            &[("up", Initial::Up), ("down", Initial::Down)],
            diags,
        ),
    }
}

/// `check` and the keys of its kind.
fn check_kind(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheckKind {
    let kind = h.check.as_ref().map(|c| (c.get_ref().as_str(), c.span()));
    match kind {
        None | Some(("none", _)) => BackendCheckKind::None,
        Some(("tcp", _)) => BackendCheckKind::Tcp,
        Some(("http", _)) => http_check(h, diags),
        Some(("udp", _)) => BackendCheckKind::Udp {
            send: h
                .send
                .as_ref()
                .map(|s| s.get_ref().as_bytes().to_vec())
                .unwrap_or_default(),
            expect: h.expect_bytes.as_ref().map(|e| {
                if e.get_ref().is_empty() {
                    diags.error(
                        e.span(),
                        "empty expect_bytes: leave it out to accept any reply",
                    );
                }
                e.get_ref().as_bytes().to_vec()
            }),
        },
        Some(("dns", span)) => BackendCheckKind::Dns {
            query_name: dns_name(h.query_name.as_ref(), span, diags),
        },
        Some(("tls", _)) => BackendCheckKind::Tls {
            sni: h.sni.as_ref().map(|s| {
                if !valid_host_name(s.get_ref()) {
                    diags.error(
                        s.span(),
                        format!(
                            "invalid sni `{}`: expected a host name, e.g. \"www.example.com\"",
                            s.get_ref()
                        ),
                    );
                }
                s.get_ref().clone()
            }),
        },
        Some((other, span)) => {
            diags.error(
                span,
                format!(
                    "invalid check `{other}`: expected \"none\", \"tcp\", \"http\", \"udp\", \"dns\" or \"tls\""
                ),
            );
            BackendCheckKind::None
        }
    }
}

fn http_check(h: &RawHealth, diags: &mut Diagnostics) -> BackendCheckKind {
    let path = match &h.path {
        None => "/".to_string(),
        Some(p) if p.get_ref().starts_with('/') => p.get_ref().clone(),
        Some(p) => {
            diags.error(
                p.span(),
                format!(
                    "invalid path `{}`: expected a path starting with /",
                    p.get_ref()
                ),
            );
            "/".into()
        }
    };
    let expect = match &h.expect {
        None => (200, 399),
        Some(e) => match parse_status_range(e.get_ref()) {
            Some(r) => r,
            None => {
                diags.error(
                    e.span(),
                    format!(
                        "invalid expect `{}`: expected a status or a range, e.g. \"200\" or \"200-399\"",
                        e.get_ref()
                    ),
                );
                (200, 399)
            }
        },
    };
    BackendCheckKind::Http { path, expect }
}

/// The `query_name` of a DNS check: required, a name of labels of 1-63 bytes, 253 at most.
fn dns_name(raw: Option<&Spanned<String>>, check: Range<usize>, diags: &mut Diagnostics) -> String {
    let Some(raw) = raw else {
        diags.error(
            check,
            "check = \"dns\" needs query_name, e.g. query_name = \"example.com\"",
        );
        return String::new();
    };
    let name = raw.get_ref().trim_end_matches('.');
    let ok = name.len() <= 253
        && name
            .split('.')
            .all(|l| (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_graphic()));
    if !ok {
        diags.error(
            raw.span(),
            format!(
                "invalid query_name `{}`: expected a DNS name, e.g. \"example.com\"",
                raw.get_ref()
            ),
        );
    }
    name.to_string()
}

/// A host name for SNI: letters, digits, `-` and `.`, not an IP address (SNI carries names).
fn valid_host_name(s: &str) -> bool {
    s.parse::<IpAddr>().is_err()
        && (1..=253).contains(&s.len())
        && s.split('.').all(|l| {
            (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn parse_status_range(text: &str) -> Option<(u16, u16)> {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    let a: u16 = a.trim().parse().ok()?;
    let b: u16 = b.trim().parse().ok()?;
    ((100..=599).contains(&a) && (a..=599).contains(&b)).then_some((a, b))
}
