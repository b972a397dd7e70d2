//! Time, injectable: the daemon uses the system clock, tests move a fake one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A source of monotonic and wall-clock time.
pub trait Clock: Send + Sync {
    /// Monotonic now (liveness windows).
    fn now(&self) -> Instant;
    /// Wall-clock now (timestamps shown to people and Prometheus).
    fn wall(&self) -> SystemTime;
}

/// The real clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to; both clocks move together.
#[derive(Debug)]
pub struct FakeClock {
    start: Instant,
    start_wall: SystemTime,
    offset_nanos: AtomicU64,
}

impl FakeClock {
    /// A fake clock starting at the real now.
    pub fn new() -> Arc<FakeClock> {
        Arc::new(FakeClock {
            start: Instant::now(),
            start_wall: SystemTime::now(),
            offset_nanos: AtomicU64::new(0),
        })
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        self.offset_nanos
            .fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }

    fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.start + self.offset()
    }
    fn wall(&self) -> SystemTime {
        self.start_wall + self.offset()
    }
}

/// Seconds since the Unix epoch, as Prometheus wants timestamps.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-29T23:15:59.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, dd) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since the Unix epoch -> (year, month, day): Howard Hinnant's days-to-civil algorithm
/// (public domain), proleptic Gregorian calendar.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_994_159_123);
        assert_eq!(rfc3339(t), "2026-11-29T23:15:59.123Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn fake_clock_moves_only_when_told() {
        let c = FakeClock::new();
        let (a, w) = (c.now(), c.wall());
        c.advance(Duration::from_secs(5));
        assert_eq!(c.now() - a, Duration::from_secs(5));
        assert_eq!(c.wall().duration_since(w).unwrap(), Duration::from_secs(5));
    }
}
