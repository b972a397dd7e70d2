//! The time keys of a `[[policy.rule]]`, fw4's names and forms: `start_time` / `stop_time`
//! (`"HH[:MM[:SS]]"`), `weekdays` (`"Monday tuEsday wed"` or a list, `"!"` first to invert),
//! `start_date` / `stop_date` (`"YYYY[-MM[-DD[THH[:MM[:SS]]]]]"`) and `utc_time`, all in the
//! local time zone unless `utc_time = true`. fw4's `monthdays` is refused here: nftables
//! cannot match the day of the month (fw4 drops the key with a warning, which lets the
//! rule match every day).

use std::ops::Range;

use serde::de::IgnoredAny;
use toml::Spanned;

use super::super::diag::Diagnostics;
use super::raw::RawFrom;
use crate::calendar::{self, WEEKDAYS};

/// The raw time keys, as `with_raw_match_keys!` splices them into the raw rule.
pub(super) struct RawTime<'a> {
    pub(super) start_time: Option<&'a Spanned<String>>,
    pub(super) stop_time: Option<&'a Spanned<String>>,
    pub(super) weekdays: Option<&'a Spanned<RawFrom>>,
    pub(super) start_date: Option<&'a Spanned<String>>,
    pub(super) stop_date: Option<&'a Spanned<String>>,
    pub(super) utc_time: Option<&'a Spanned<bool>>,
    pub(super) monthdays: Option<&'a Spanned<IgnoredAny>>,
}

/// When a rule applies: every given condition must hold, each on the same calendar day of
/// the chosen clock (as nftables and fw4 check them: `start_time = "22:00"`,
/// `stop_time = "06:00"`, `weekdays = "Mon"` is Monday 00:00-06:00 and Monday 22:00-24:00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeMatch {
    /// `utc_time = true`: the times, days and dates are UTC; otherwise the local time zone's.
    pub utc: bool,
    /// `start_time`: seconds since midnight; `None` = midnight.
    pub start_time: Option<u32>,
    /// `stop_time`: seconds since midnight, inclusive; `None` = 23:59:59. Before
    /// `start_time`, the window wraps midnight.
    pub stop_time: Option<u32>,
    /// `weekdays`, 0 = Sunday, sorted, an inverted list already turned into the days it
    /// leaves; empty = every day.
    pub weekdays: Vec<u8>,
    /// `start_date`: seconds since 1970-01-01 00:00 of the chosen clock (no zone applied).
    pub start_date: Option<i64>,
    /// `stop_date`, inclusive, same clock.
    pub stop_date: Option<i64>,
}

/// The rule's time keys; `Some(None)` when it has none, `None` when any is invalid
/// (reported at its place).
pub(super) fn time_match(raw: RawTime<'_>, diags: &mut Diagnostics) -> Option<Option<TimeMatch>> {
    if let Some(m) = raw.monthdays {
        diags.error(
            m.span(),
            "`monthdays` is not supported: nftables cannot match the day of the month (fw4 ignores the key, so its rule would match every day); use `weekdays`, or `start_date` and `stop_date`",
        );
        return None;
    }
    let start_time = time_of_day("start_time", raw.start_time, diags);
    let stop_time = time_of_day("stop_time", raw.stop_time, diags);
    let weekdays = weekdays(raw.weekdays, diags);
    let start_date = date("start_date", raw.start_date, diags);
    let stop_date = date("stop_date", raw.stop_date, diags);
    let (start_date, stop_date) = (start_date?, stop_date?);
    if let (Some(a), Some(b), Some(span)) = (start_date, stop_date, raw.stop_date.map(|s| s.span()))
    {
        if b < a {
            diags.error(
                span,
                "`stop_date` is before `start_date`: the rule would never match",
            );
            return None;
        }
    }
    let t = TimeMatch {
        utc: raw.utc_time.is_some_and(|u| *u.get_ref()),
        start_time: start_time?,
        stop_time: stop_time?,
        weekdays: weekdays?,
        start_date,
        stop_date,
    };
    let none = t.start_time.is_none()
        && t.stop_time.is_none()
        && t.weekdays.is_empty()
        && t.start_date.is_none()
        && t.stop_date.is_none();
    Some((!none).then_some(t))
}

fn time_of_day(
    key: &str,
    raw: Option<&Spanned<String>>,
    diags: &mut Diagnostics,
) -> Option<Option<u32>> {
    let Some(raw) = raw else { return Some(None) };
    match calendar::parse_time_of_day(raw.get_ref().trim()) {
        Some(t) => Some(Some(t)),
        None => {
            diags.error(
                raw.span(),
                format!(
                    "invalid `{key}` \"{}\": expected a time of day HH[:MM[:SS]], hours 0-23, e.g. \"08:30\"",
                    raw.get_ref()
                ),
            );
            None
        }
    }
}

fn date(key: &str, raw: Option<&Spanned<String>>, diags: &mut Diagnostics) -> Option<Option<i64>> {
    let Some(raw) = raw else { return Some(None) };
    match calendar::parse_date_time(raw.get_ref().trim()) {
        Some(t) => Some(Some(t)),
        None => {
            diags.error(
                raw.span(),
                format!(
                    "invalid `{key}` \"{}\": expected YYYY[-MM[-DD[THH[:MM[:SS]]]]], a real date in 1970-2038, e.g. \"2026-12-24T18:00\"",
                    raw.get_ref()
                ),
            );
            None
        }
    }
}

/// `weekdays`: names or unique prefixes in any case (`"Mon"`, `"tuEsday"`, `"Th"`), in one
/// string separated by spaces or in a list; a leading `!` keeps the other days.
fn weekdays(raw: Option<&Spanned<RawFrom>>, diags: &mut Diagnostics) -> Option<Vec<u8>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let words: Vec<&str> = match raw.get_ref() {
        RawFrom::One(s) => s.split_whitespace().collect(),
        RawFrom::Many(list) => list.iter().flat_map(|s| s.split_whitespace()).collect(),
    };
    let (invert, words) = match words.split_first() {
        Some((first, rest)) if first.starts_with('!') => {
            let mut w = Vec::with_capacity(words.len());
            let first = first.trim_start_matches('!');
            if !first.is_empty() {
                w.push(first);
            }
            w.extend(rest);
            (true, w)
        }
        _ => (false, words),
    };
    let span = raw.span();
    if words.is_empty() {
        diags.error(
            span,
            "empty `weekdays`: expected day names, e.g. \"Mon Tue Wed\" (or leave `weekdays` out)",
        );
        return None;
    }
    let mut days = Vec::new();
    let mut ok = true;
    for w in words {
        match weekday(w) {
            Ok(d) => days.push(d),
            Err(e) => {
                diags.error(span.clone(), e);
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    days.sort();
    days.dedup();
    if invert {
        days = (0..7).filter(|d| !days.contains(d)).collect();
        if days.is_empty() {
            never(span, diags);
            return None;
        }
    }
    Some(days)
}

fn never(span: Range<usize>, diags: &mut Diagnostics) {
    diags.error(span, "`weekdays` leaves no day: the rule would never match");
}

/// One day name or a unique prefix of one, any case.
fn weekday(word: &str) -> Result<u8, String> {
    let lower = word.to_ascii_lowercase();
    let hits: Vec<u8> = (0..7u8)
        .filter(|d| {
            WEEKDAYS[usize::from(*d)]
                .to_ascii_lowercase()
                .starts_with(&lower)
        })
        .collect();
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!(
            "unknown weekday \"{word}\": expected Monday, Tuesday, Wednesday, Thursday, Friday, Saturday or Sunday (or a prefix, any case)"
        )),
        _ => Err(format!(
            "ambiguous weekday \"{word}\": it begins {}; write more of the name",
            hits.iter()
                .map(|d| WEEKDAYS[usize::from(*d)])
                .collect::<Vec<_>>()
                .join(" and ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::TimeMatch;
    use crate::config::load_str;

    const ZONES: &str = "[policy]\n[policy.zone.lan]\ninterfaces = [\"br-lan\"]\n";

    /// A rule with `keys` (one per line) on line 7 onwards.
    fn rule(keys: &str) -> String {
        format!(
            "{ZONES}[[policy.rule]]\nname = \"evening\"\nfrom = \"lan\"\n{keys}\naction = \"accept\"\n"
        )
    }

    fn time_of(keys: &str) -> Option<TimeMatch> {
        let d = load_str(&[("main.toml", &rule(keys))]).unwrap();
        d.policy.unwrap().rules[0].matches.time.clone()
    }

    fn error_of(keys: &str) -> String {
        load_str(&[("main.toml", &rule(keys))])
            .expect_err("config must be rejected")
            .rendered
    }

    #[test]
    fn fw4_09_time_the_forms_of_its_rules_are_read() {
        let t = time_of(
            "start_time = \"21\"\nstop_time = \"23:51:23\"\nweekdays = \"Monday tuEsday wed SUN Th\"\nstart_date = \"2022-05\"\nstop_date = \"2022-06-01T23:51\"\nutc_time = true",
        )
        .unwrap();
        assert_eq!(
            t,
            TimeMatch {
                utc: true,
                start_time: Some(75_600),
                stop_time: Some(85_883),
                weekdays: vec![0, 1, 2, 3, 4],
                start_date: Some(1_651_363_200),
                stop_date: Some(1_654_127_460),
            }
        );
        assert!(time_of("").is_none(), "no time keys: no time match");
        // Local unless utc_time; a list works as well as one string; `!` keeps the others.
        let t = time_of("weekdays = [\"!Sat\", \"sunday\"]").unwrap();
        assert_eq!((t.utc, t.weekdays), (false, vec![1, 2, 3, 4, 5]));
    }

    #[test]
    fn a_stop_time_before_the_start_time_is_a_window_across_midnight() {
        let t = time_of("start_time = \"22:00\"\nstop_time = \"06:00\"").unwrap();
        assert_eq!((t.start_time, t.stop_time), (Some(79_200), Some(21_600)));
    }

    #[test]
    fn bad_time_keys_are_reported_at_their_place() {
        for (keys, expected) in [
            (
                "start_time = \"25:00\"",
                "main.toml:7:14: error: invalid `start_time` \"25:00\": expected a time of day HH[:MM[:SS]], hours 0-23",
            ),
            (
                "stop_time = \"12:60\"",
                "main.toml:7:13: error: invalid `stop_time` \"12:60\"",
            ),
            (
                "weekdays = \"Mon Funday\"",
                "main.toml:7:12: error: unknown weekday \"Funday\": expected Monday, Tuesday",
            ),
            (
                "weekdays = \"T\"",
                "main.toml:7:12: error: ambiguous weekday \"T\": it begins Tuesday and Thursday",
            ),
            (
                "weekdays = \"! Mon Tue Wed Thu Fri Sat Sun\"",
                "main.toml:7:12: error: `weekdays` leaves no day",
            ),
            ("weekdays = []", "main.toml:7:12: error: empty `weekdays`"),
            (
                "start_date = \"2022-02-30\"",
                "main.toml:7:14: error: invalid `start_date` \"2022-02-30\": expected YYYY[-MM[-DD[THH[:MM[:SS]]]]]",
            ),
            (
                "start_date = \"2023\"\nstop_date = \"2022\"",
                "main.toml:8:13: error: `stop_date` is before `start_date`",
            ),
            (
                "monthdays = \"1 15\"",
                "main.toml:7:13: error: `monthdays` is not supported: nftables cannot match the day of the month",
            ),
            (
                "utc_time = \"yes\"",
                "main.toml:7:12: error: invalid type: string \"yes\", expected a boolean",
            ),
        ] {
            let out = error_of(keys);
            assert!(out.contains(expected), "{keys}: {out}");
        }
    }
}
