//! A series of timed changes and its figures: median, p99 and worst, and how the changes that
//! met a full compare fared; the gaps between changes come from a seeded generator, so every
//! run spreads its changes the same way.

use std::time::Duration;

use crate::ms;

/// The shortest and longest gap between two changes of a series.
const GAP: (u64, u64) = (100, 900);

/// Timed changes, in the order they were made.
#[derive(Debug, Default)]
pub struct Series {
    /// How long each took to reach the kernel, and whether a full compare ended meanwhile.
    runs: Vec<(Duration, bool)>,
}

impl Series {
    /// One change more.
    pub fn push(&mut self, took: Duration, met_full_compare: bool) {
        self.runs.push((took, met_full_compare));
    }

    /// The `q` quantile (nearest rank) of `sorted`.
    fn quantile(sorted: &[Duration], q: f64) -> Duration {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    /// "median …, p99 …, worst … over N changes (M met a full compare, their worst …)".
    pub fn summary(&self) -> String {
        let mut all: Vec<Duration> = self.runs.iter().map(|r| r.0).collect();
        all.sort();
        if all.is_empty() {
            return "no changes".into();
        }
        let mut met: Vec<Duration> = self.runs.iter().filter(|r| r.1).map(|r| r.0).collect();
        met.sort();
        let met = match met.last() {
            Some(worst) => format!(
                "{} met a full compare, their worst {}",
                met.len(),
                ms(*worst).trim()
            ),
            None => "none met a full compare".into(),
        };
        format!(
            "{} median, p99 {}, worst {} over {} changes ({met})",
            ms(Self::quantile(&all, 0.5)),
            ms(Self::quantile(&all, 0.99)).trim(),
            ms(*all.last().unwrap()).trim(),
            all.len()
        )
    }
}

/// Gaps between changes, uniform in [`GAP`] (xorshift64, seeded).
pub struct Gaps(u64);

impl Gaps {
    /// A generator from `seed` (not 0).
    pub fn new(seed: u64) -> Gaps {
        Gaps(seed.max(1))
    }

    /// The next gap.
    pub fn next(&mut self) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(GAP.0 + self.0 % (GAP.1 - GAP.0 + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(Series::quantile(&d, 0.5), Duration::from_millis(50));
        assert_eq!(Series::quantile(&d, 0.99), Duration::from_millis(99));
        assert_eq!(Series::quantile(&d[..50], 0.99), Duration::from_millis(50));
    }

    #[test]
    fn gaps_stay_in_their_bounds() {
        let mut g = Gaps::new(7);
        for _ in 0..1000 {
            let ms = g.next().as_millis() as u64;
            assert!((GAP.0..=GAP.1).contains(&ms), "{ms}");
        }
    }
}
