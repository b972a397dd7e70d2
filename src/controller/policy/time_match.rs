//! A rule's time keys as nftables matches. The kernel's `meta hour` and `meta day` read
//! the UTC clock; a local window is moved by the local zone's offset here, as nft does in
//! userspace when it loads `meta hour "08:00"`. Unlike nft, a local `weekdays` moves too:
//! where the local day straddles a UTC midnight, the rule splits into one match per UTC
//! day, so that "Monday 08:00-17:00 local" is exactly that in any zone.

use crate::calendar::DAY;
use crate::config::policy::TimeMatch;
use crate::dataplane::nft::ir::*;

use super::matches::Match;

/// The last second of a day.
const LAST: u32 = (DAY - 1) as u32;
/// The open end of a `start_date` without `stop_date`, 2200-01-01 00:00:00 UTC: nft reads
/// dates into signed 64-bit nanoseconds, which end in 2262.
const FAR_FUTURE_SECS: i64 = 7_258_118_400;

/// The matches of `t`, each an alternative (a rule of its own); `offset_at(utc)`: the local
/// zone's offset from UTC at that instant in seconds (ignored with `utc_time`), `now`: the
/// instant whose offset moves the daily window (a daylight-saving change moves it on the
/// next reprogramming, as nft's conversion at load time does).
pub(super) fn time_matches(t: &TimeMatch, now: i64, offset_at: &dyn Fn(i64) -> i32) -> Vec<Match> {
    let offset = |at: i64| if t.utc { 0 } else { i64::from(offset_at(at)) };
    let mut date = Vec::new();
    if t.start_date.is_some() || t.stop_date.is_some() {
        // A local date's instant: its offset is that of the date, not today's.
        let utc = |naive: i64| naive - offset(naive - offset(naive));
        let from = t.start_date.map_or(0, utc).max(0);
        let to = t.stop_date.map_or(FAR_FUTURE_SECS, utc).max(0);
        date.push(Stmt::Range {
            left: Expr::Meta(MetaKey::Time),
            negate: false,
            from: Value::Time(from as u64 * 1_000_000_000),
            to: Value::Time(to as u64 * 1_000_000_000),
        });
    }
    let off = offset(now);
    let (start, stop) = (t.start_time.unwrap_or(0), t.stop_time.unwrap_or(LAST));
    let pieces = if t.weekdays.is_empty() {
        // The same window every day: one circular interval of the UTC clock.
        let len = (i64::from(stop) - i64::from(start)).rem_euclid(DAY) + 1;
        let from = (i64::from(start) - off).rem_euclid(DAY) as u32;
        vec![(Vec::new(), circular(from, len))]
    } else {
        day_pieces(&t.weekdays, start, stop, off)
    };
    pieces
        .into_iter()
        .map(|(days, hours)| {
            let mut stmts = date.clone();
            stmts.extend(hours);
            stmts.extend(day_match(&days));
            Match {
                stmts,
                version: None,
            }
        })
        .collect()
}

/// `meta hour` for `len` seconds from `from` on the UTC clock, wrapping midnight as a
/// negated range; nothing for the whole day.
fn circular(from: u32, len: i64) -> Option<Stmt> {
    if len >= DAY {
        return None;
    }
    let to = ((i64::from(from) + len - 1) % DAY) as u32;
    Some(if from <= to {
        hour_range(false, from, to)
    } else {
        // [from, midnight) and [midnight, to]: all but (to, from).
        hour_range(true, to + 1, from - 1)
    })
}

fn hour_range(negate: bool, from: u32, to: u32) -> Stmt {
    Stmt::Range {
        left: Expr::Meta(MetaKey::Hour),
        negate,
        from: Value::Hour(from),
        to: Value::Hour(to),
    }
}

/// The local days `days` with the local window `start..=stop` (wrapping when `stop` is
/// before `start`) at offset `off`, as (UTC days, UTC hour match) pairs, one per UTC day
/// the window falls in.
fn day_pieces(days: &[u8], start: u32, stop: u32, off: i64) -> Vec<(Vec<u8>, Option<Stmt>)> {
    let local: Vec<(i64, i64)> = if start <= stop {
        vec![(start.into(), stop.into())]
    } else {
        vec![(start.into(), LAST.into()), (0, stop.into())]
    };
    // Per shift k of the day (the local day's part that is UTC yesterday, today, tomorrow),
    // the UTC seconds of that day it covers.
    let mut by_shift: Vec<(i64, Vec<(u32, u32)>)> = Vec::new();
    for k in [-1i64, 0, 1] {
        let mut spans = Vec::new();
        for (a, b) in &local {
            let lo = (a - off).max(k * DAY);
            let hi = (b - off).min(k * DAY + DAY - 1);
            if lo <= hi {
                spans.push(((lo - k * DAY) as u32, (hi - k * DAY) as u32));
            }
        }
        if !spans.is_empty() {
            spans.sort();
            by_shift.push((k, spans));
        }
    }
    let mut out = Vec::new();
    for (k, spans) in by_shift {
        let mut shifted: Vec<u8> = days
            .iter()
            .map(|d| (i64::from(*d) + k).rem_euclid(7) as u8)
            .collect();
        shifted.sort();
        match spans.as_slice() {
            // A window that wraps midnight within one UTC day: one negated range.
            [(0, y), (x, LAST)] if x > y => out.push((
                shifted,
                circular(*x, i64::from(LAST - x) + i64::from(*y) + 2),
            )),
            _ => {
                for (lo, hi) in spans {
                    out.push((shifted.clone(), circular(lo, i64::from(hi - lo) + 1)));
                }
            }
        }
    }
    out
}

/// `meta day` for `days` (UTC, 0 = Sunday); nothing for every day.
fn day_match(days: &[u8]) -> Option<Stmt> {
    match days {
        [] => None,
        d if d.len() >= 7 => None,
        [one] => Some(Stmt::Cmp {
            left: Expr::Meta(MetaKey::Day),
            op: CmpOp::Eq,
            right: Value::Day(*one),
        }),
        many => Some(Stmt::Lookup {
            left: Expr::Meta(MetaKey::Day),
            set: SetRef::Anonymous {
                key: KeyType::single(DataType::Day),
                interval: false,
                data: None,
                elements: many
                    .iter()
                    .map(|d| Element::key(ElemKey::Value(Value::Day(*d))))
                    .collect(),
            },
            negate: false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::nft::text::render_rule;

    fn t(start: Option<u32>, stop: Option<u32>, weekdays: &[u8], utc: bool) -> TimeMatch {
        TimeMatch {
            utc,
            start_time: start,
            stop_time: stop,
            weekdays: weekdays.to_vec(),
            start_date: None,
            stop_date: None,
        }
    }

    const H: u32 = 3600;

    /// Each alternative's statements as nft text.
    fn text(m: &TimeMatch, off: i32) -> Vec<String> {
        time_matches(m, 1_780_000_000, &|_| off)
            .into_iter()
            .map(|m| {
                render_rule(Family::Inet, &Rule::new("c", m.stmts))
                    .trim()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn fw4_09_time_rule_11_a_utc_window_is_one_range() {
        let m = t(Some(78_683), Some(85_883), &[], true);
        assert_eq!(text(&m, 0), [r#"meta hour "21:51:23"-"23:51:23""#]);
    }

    #[test]
    fn a_window_across_midnight_is_a_negated_range_without_nfts_off_by_one() {
        // 22:00:00 and 06:00:00 themselves are in the window (nft's own `"22:00"-"06:00"`
        // leaves both out).
        let m = t(Some(22 * H), Some(6 * H), &[], true);
        assert_eq!(text(&m, 0), [r#"meta hour != "06:00:01"-"21:59:59""#]);
    }

    #[test]
    fn a_local_window_moves_by_the_zones_offset_and_may_start_to_wrap() {
        // 08:00-17:00 at UTC+1 is 07:00-16:00 UTC; 00:30-05:00 at UTC+1 wraps the UTC
        // midnight; only start_time runs to local midnight.
        assert_eq!(
            text(&t(Some(8 * H), Some(17 * H), &[], false), 3600),
            [r#"meta hour "07:00:00"-"16:00:00""#]
        );
        assert_eq!(
            text(&t(Some(H / 2), Some(5 * H), &[], false), 3600),
            [r#"meta hour != "04:00:01"-"23:29:59""#]
        );
        assert_eq!(
            text(&t(Some(21 * H), None, &[], false), -5 * 3600),
            [r#"meta hour "02:00:00"-"04:59:59""#]
        );
        // With utc_time the offset is ignored.
        assert_eq!(
            text(&t(Some(8 * H), Some(17 * H), &[], true), 3600),
            [r#"meta hour "08:00:00"-"17:00:00""#]
        );
    }

    #[test]
    fn fw4_09_time_rule_12_weekdays_alone_are_a_day_set_in_utc() {
        assert_eq!(
            text(&t(None, None, &[0, 1, 2, 3, 4], true), 0),
            [r#"meta day { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday" }"#]
        );
        assert_eq!(
            text(&t(None, None, &[1], true), 0),
            [r#"meta day "Monday""#]
        );
    }

    #[test]
    fn a_local_weekday_is_split_where_it_straddles_the_utc_midnight() {
        // Local Monday at UTC+1: Sunday 23:00-23:59:59 UTC and Monday 00:00-22:59:59 UTC.
        assert_eq!(
            text(&t(None, None, &[1], false), 3600),
            [
                r#"meta hour "23:00:00"-"23:59:59" meta day "Sunday""#,
                r#"meta hour "00:00:00"-"22:59:59" meta day "Monday""#,
            ]
        );
        // Monday 08:00-17:00 at UTC+1 stays on Monday.
        assert_eq!(
            text(&t(Some(8 * H), Some(17 * H), &[1], false), 3600),
            [r#"meta hour "07:00:00"-"16:00:00" meta day "Monday""#]
        );
    }

    #[test]
    fn a_wrapping_window_on_a_weekday_stays_on_that_day_as_in_fw4() {
        assert_eq!(
            text(&t(Some(22 * H), Some(6 * H), &[1], true), 0),
            [r#"meta hour != "06:00:01"-"21:59:59" meta day "Monday""#]
        );
    }

    #[test]
    fn fw4_09_time_rule_10_a_date_range_and_open_ends() {
        let mut m = t(None, None, &[], true);
        m.start_date = Some(1_653_947_483);
        m.stop_date = Some(1_654_127_483);
        assert_eq!(
            text(&m, 0),
            [r#"meta time "2022-05-30 21:51:23"-"2022-06-01 23:51:23""#]
        );
        m.stop_date = None;
        assert_eq!(
            text(&m, 0),
            [r#"meta time "2022-05-30 21:51:23"-"2200-01-01 00:00:00""#]
        );
        // Local: the date's own offset.
        m.utc = false;
        assert_eq!(
            time_matches(&m, 0, &|at| if at > 1_600_000_000 { 7200 } else { 0 })[0].stmts[0],
            Stmt::Range {
                left: Expr::Meta(MetaKey::Time),
                negate: false,
                from: Value::Time((1_653_947_483 - 7200) * 1_000_000_000),
                to: Value::Time(FAR_FUTURE_SECS as u64 * 1_000_000_000),
            }
        );
    }

    #[test]
    fn a_window_of_the_whole_day_matches_no_hour() {
        assert_eq!(
            text(&t(Some(6 * H), Some(6 * H - 1), &[], false), 1800),
            [""]
        );
    }
}
