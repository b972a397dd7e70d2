//! Durations as operators write them: `"500ms"`, `"30s"`, `"5m"`, `"1h"`, or a sum such as
//! `"1m30s"`.

use std::time::Duration;

/// Parses a duration string; the error says what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = || {
        format!(
            "invalid duration `{text}`: expected a number with a unit (ms, s, m, h), e.g. \"500ms\", \"30s\", \"5m\""
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(expected());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(expected());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| expected())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(expected()),
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Formats a duration the way it is written in the config (for messages and /healthz).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        format!("{ms}ms")
    } else if ms % 60_000 != 0 || ms == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}m", ms / 60_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        for bad in ["", "30", "s", "3 s", "10sec", "-1s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "30s", "5m", "0s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
