//! Proleptic Gregorian dates and times of day, as the time rules (`start_time`, `weekdays`,
//! `start_date`, ...) and `explain --at` write them, and the UTC numbers nftables'
//! `meta hour`, `meta day` and `meta time` compare. A leaf: no time zone here (the local
//! offset comes from `sys::utc_offset_at`), no clock.

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// Day names as nft writes them, indexed by `meta day`'s number (0 = Sunday).
pub const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Days from 1970-01-01 to `year-month-day` (negative before it). `month` 1-12, `day` 1-31,
/// not checked against the month's length (the 31st of a 30-day month is the 1st of the
/// next).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Years start in March, so that the leap day is the last day of its year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of day `days` since 1970-01-01: (year, month 1-12, day 1-31).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The date and the second of that day of `secs` since the epoch.
pub fn civil_from_unix(secs: i64) -> ((i64, u32, u32), u32) {
    (
        civil_from_days(secs.div_euclid(DAY)),
        secs.rem_euclid(DAY) as u32,
    )
}

/// The day of the week of day `days` since 1970-01-01 (a Thursday), 0 = Sunday.
pub fn weekday_from_days(days: i64) -> u8 {
    (days + 4).rem_euclid(7) as u8
}

/// A time of day `H[H][:MM[:SS]]` (fw4's form: `"21"`, `"21:51"`, `"21:51:23"`) as seconds
/// since midnight; `None` when malformed or out of range (hours 0-23, minutes and seconds
/// 0-59).
pub fn parse_time_of_day(s: &str) -> Option<u32> {
    let mut parts = s.split(':');
    let mut next = |max: u32, required: bool| -> Option<Option<u32>> {
        match parts.next() {
            None if !required => Some(None),
            None => None,
            Some(p) if (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) => {
                let n: u32 = p.parse().ok()?;
                (n <= max).then_some(Some(n))
            }
            Some(_) => None,
        }
    };
    let h = next(23, true)??;
    let m = next(59, false)?.unwrap_or(0);
    let sec = next(59, false)?.unwrap_or(0);
    if parts.next().is_some() {
        return None;
    }
    Some(h * 3600 + m * 60 + sec)
}

/// A date, perhaps with a time, `YYYY[-MM[-DD[THH[:MM[:SS]]]]]` (fw4's form; a space may
/// stand for the `T`), as seconds since 1970-01-01 00:00 of the same clock (no zone applied);
/// what is left out is the earliest value (`"2022-05"` is 2022-05-01 00:00:00). Years
/// 1970-2038 as fw4 allows; `None` when malformed or out of range.
pub fn parse_date_time(s: &str) -> Option<i64> {
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, parse_time_of_day(t)?),
        None => (s, 0),
    };
    let mut parts = date.split('-');
    let year = parts.next()?;
    if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let year: i64 = year.parse().ok()?;
    let mut next = |max: u32| -> Option<u32> {
        match parts.next() {
            None => Some(1),
            Some(p) if (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) => {
                let n: u32 = p.parse().ok()?;
                (1..=max).contains(&n).then_some(n)
            }
            Some(_) => None,
        }
    };
    let month = next(12)?;
    let day = next(31)?;
    if parts.next().is_some() || !(1970..=2038).contains(&year) {
        return None;
    }
    // A time needs the whole date before it, as in fw4.
    if s.contains(['T', ' ']) && date.split('-').count() != 3 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // The 31st of a 30-day month would silently be the 1st of the next.
    if civil_from_days(days) != (year, month, day) {
        return None;
    }
    Some(days * DAY + i64::from(time))
}

/// `"YYYY-MM-DD HH:MM:SS"` of `secs` since the epoch.
pub fn format_date_time(secs: i64) -> String {
    let ((y, mo, d), t) = civil_from_unix(secs);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// `"HH:MM:SS"` of `secs` since midnight.
pub fn format_time_of_day(secs: u32) -> String {
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_know_their_weekday() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for days in [-1, 0, 59, 10_957, 11_016, 11_017, 20_789, 24_855] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        // 2026-12-02 is a Wednesday.
        assert_eq!(weekday_from_days(days_from_civil(2026, 12, 2)), 3);
        assert_eq!(weekday_from_days(0), 4);
    }

    #[test]
    fn times_of_day_take_fw4s_three_forms_and_refuse_the_rest() {
        assert_eq!(parse_time_of_day("21:51:23"), Some(78_683));
        assert_eq!(parse_time_of_day("21:51"), Some(78_660));
        assert_eq!(parse_time_of_day("21"), Some(75_600));
        assert_eq!(parse_time_of_day("0:5"), Some(300));
        for bad in [
            "25:00", "24", "12:60", "12:00:60", "", "12:", "1:2:3:4", "ab", "123",
        ] {
            assert_eq!(parse_time_of_day(bad), None, "{bad}");
        }
    }

    #[test]
    fn dates_take_fw4s_six_forms_and_refuse_impossible_days() {
        let at = |s| parse_date_time(s).map(format_date_time);
        assert_eq!(at("2022-05-30T21:51:23").unwrap(), "2022-05-30 21:51:23");
        assert_eq!(at("2022-05-30T21:51").unwrap(), "2022-05-30 21:51:00");
        assert_eq!(at("2022-05-30T21").unwrap(), "2022-05-30 21:00:00");
        assert_eq!(at("2022-05-30").unwrap(), "2022-05-30 00:00:00");
        assert_eq!(at("2022-05").unwrap(), "2022-05-01 00:00:00");
        assert_eq!(at("2022").unwrap(), "2022-01-01 00:00:00");
        assert_eq!(at("2026-12-02 13:05").unwrap(), "2026-12-02 13:05:00");
        for bad in [
            "2022-02-30",
            "2022-13",
            "1969",
            "2039",
            "22-05-30",
            "2022-05T10",
            "2022-05-30T25",
        ] {
            assert_eq!(parse_date_time(bad), None, "{bad}");
        }
    }
}
