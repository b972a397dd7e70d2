//! `[[track]]` entries: uplink probes that `[[route]] track = "NAME"` ties routes to.
//!
//! Each track gets a private table, a socket mark and a rule (mark -> table) of its own, so
//! its probe leaves through the uplink it checks even while that uplink's routes are
//! withdrawn from the main table. Those default by position so a config names none of them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::super::diag::Diagnostics;
use super::super::duration::parse_duration;
use super::super::net::parse_addr;
use super::model::{Track, TrackCheck};
use super::raw::RawTrack;
use super::values::{addr_family_name, ifname, mark, number, table};

/// The private table of the first track; the next ones count up.
pub const TRACK_TABLE_BASE: u32 = 32000;
/// The socket mark of the first track; the next ones count up.
pub const TRACK_MARK_BASE: u32 = 0x0e0d_0000;
/// The rule priority of the first track (before `main` at 32766); the next ones count up.
pub const TRACK_PRIORITY_BASE: u32 = 90;
/// Time between probes when `interval` is not set.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// The longest default probe timeout (the interval when that is shorter).
pub const MAX_DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Validates every `[[track]]`; returns them with where each name was defined.
pub(super) fn validate_tracks(raws: Vec<Spanned<RawTrack>>, diags: &mut Diagnostics) -> Vec<Track> {
    let mut seen: HashMap<String, Range<usize>> = HashMap::new();
    let mut tracks = Vec::new();
    for (index, item) in raws.into_iter().enumerate() {
        let errors_before = diags.len();
        let raw = item.into_inner();
        let name_span = raw.name.span();
        let track = validate_track(raw, index as u32, diags);
        let Some(track) = track.filter(|_| diags.len() == errors_before) else {
            continue;
        };
        if let Some(first) = seen.get(&track.name) {
            diags.error_also(
                name_span,
                format!("track `{}` is defined twice", track.name),
                first.clone(),
                "first defined here",
            );
            continue;
        }
        if let Some(other) = tracks
            .iter()
            .find(|t: &&Track| t.table == track.table || t.fwmark == track.fwmark)
        {
            diags.error(
                name_span,
                format!(
                    "track `{}` shares its table ({}) or fwmark ({:#x}) with track `{}`: each track needs its own",
                    track.name, track.table, track.fwmark, other.name
                ),
            );
            continue;
        }
        seen.insert(track.name.clone(), name_span);
        tracks.push(track);
    }
    tracks
}

fn check(raw: &Spanned<String>, diags: &mut Diagnostics) -> Option<TrackCheck> {
    match raw.get_ref().as_str() {
        "tcp" => Some(TrackCheck::Tcp),
        "dns" => Some(TrackCheck::Dns),
        "icmp" => Some(TrackCheck::Icmp),
        other => {
            diags.error(
                raw.span(),
                format!("unknown check `{other}`: expected one of `tcp`, `dns`, `icmp`"),
            );
            None
        }
    }
}

/// `ADDR:PORT` (`[V6]:PORT`); dns defaults to port 53, icmp takes a bare address.
fn target(raw: &Spanned<String>, check: TrackCheck, diags: &mut Diagnostics) -> Option<SocketAddr> {
    let text = raw.get_ref();
    if let Ok(addr) = text.parse::<SocketAddr>() {
        if check == TrackCheck::Icmp {
            diags.error(
                raw.span(),
                "an icmp target is an address without a port, e.g. \"1.1.1.1\"",
            );
            return None;
        }
        return Some(addr);
    }
    match (parse_addr(text), check) {
        (Ok(ip), TrackCheck::Icmp) => Some(SocketAddr::new(ip, 0)),
        (Ok(ip), TrackCheck::Dns) => Some(SocketAddr::new(ip, 53)),
        _ => {
            let example = match check {
                TrackCheck::Tcp => "\"1.1.1.1:443\"",
                TrackCheck::Dns => "\"1.1.1.1:53\" or \"1.1.1.1\"",
                TrackCheck::Icmp => "\"1.1.1.1\"",
            };
            diags.error(
                raw.span(),
                format!(
                    "invalid {} target `{text}`: expected e.g. {example}",
                    check.name()
                ),
            );
            None
        }
    }
}

fn duration(
    raw: Option<&Spanned<String>>,
    what: &str,
    diags: &mut Diagnostics,
) -> Option<Duration> {
    let raw = raw?;
    match parse_duration(raw.get_ref()) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => {
            diags.error(raw.span(), format!("{what} must be longer than 0"));
            None
        }
        Err(msg) => {
            diags.error(raw.span(), msg);
            None
        }
    }
}

fn validate_track(raw: RawTrack, index: u32, diags: &mut Diagnostics) -> Option<Track> {
    let name = raw.name.get_ref().clone();
    if name.is_empty() || name.chars().any(|c| c.is_control()) {
        diags.error(raw.name.span(), "a track name must be non-empty text");
    }
    let check = check(&raw.check, diags);
    let target = check.and_then(|c| target(&raw.target, c, diags));
    let via = parse_addr(raw.via.get_ref())
        .map_err(|msg| diags.error(raw.via.span(), msg))
        .ok();
    if let (Some(t), Some(v)) = (target, via)
        && t.is_ipv4() != v.is_ipv4()
    {
        diags.error(
            raw.via.span(),
            format!(
                "gateway {v} is {} but the target {} is {}: the probe's route needs one family",
                addr_family_name(&v),
                t.ip(),
                addr_family_name(&t.ip())
            ),
        );
    }
    let dev = ifname(&raw.dev, diags);
    let interval = duration(raw.interval.as_ref(), "interval", diags).unwrap_or(DEFAULT_INTERVAL);
    let timeout = duration(raw.timeout.as_ref(), "timeout", diags)
        .unwrap_or(interval.min(MAX_DEFAULT_TIMEOUT));
    let count = |raw: Option<&Spanned<i64>>, what, diags: &mut Diagnostics| {
        raw.and_then(|n| number(n, 1..=1000, what, diags))
            .unwrap_or(3) as u32
    };
    let fall = count(raw.fall.as_ref(), "fall", diags);
    let rise = count(raw.rise.as_ref(), "rise", diags);
    let table = match &raw.table {
        Some(t) => table(t, diags)?,
        None => TRACK_TABLE_BASE + index,
    };
    let fwmark = match &raw.fwmark {
        Some(m) => match mark(m, diags)? {
            (m, None) if m != 0 => m,
            _ => {
                diags.error(
                    m.span(),
                    "a track's fwmark is one non-zero mark, without a mask",
                );
                return None;
            }
        },
        None => TRACK_MARK_BASE + index,
    };
    let priority = match &raw.priority {
        Some(p) => number(p, 1..=32765, "priority", diags)? as u32,
        None => TRACK_PRIORITY_BASE + index,
    };
    // The test hook goes to the fault module's side table, not into the track.
    crate::fault_hook!(crate::fault::hang::set_track(&name, raw.inject_hang), ());
    Some(Track {
        name,
        check: check?,
        target: target?,
        via: via?,
        dev: dev?,
        interval,
        timeout,
        fall,
        rise,
        table,
        fwmark,
        priority,
    })
}
