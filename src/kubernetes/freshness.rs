//! How fresh the cluster state in force is: from this run's lists and watches, or from the
//! cache a run before left, and as of when. /healthz shows it; the cache file carries the
//! stamp, so a start after a reboot during an outage knows how old the state it restores is.
//!
//! The stamp is the last moment the state was known to be the cluster's: the moment every
//! enabled kind had been listed in this run, then every compose while every watch is live
//! (the watcher composes at least every 5 s). A state that stops being confirmed (a watch
//! failing) keeps the stamp of its last confirmation. The cache is written at every change
//! of the state; a state that does not change is written again only to move its stamp on:
//! every [`REFRESH`] while confirmed, and once when confirmation stops (at most every
//! [`MIN_GAP`]), so the stamp on disk lags the truth by at most [`REFRESH`] and, at the start
//! of an outage, by at most [`MIN_GAP`].
//!
//! Pure: the caller passes the clock's reading and the watch states.

use std::time::{Duration, SystemTime};

/// How often an unchanged, confirmed state's stamp is written again.
pub const REFRESH: Duration = Duration::from_secs(600);
/// The shortest gap between two writes made only for the stamp.
pub const MIN_GAP: Duration = Duration::from_secs(60);

/// Where the cluster state in force comes from, as /healthz says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Nothing is listed yet and no cache was loaded: the TOML state (and whatever kinds
    /// have listed) is in force.
    Listing,
    /// Some kind is not listed in this run yet: the cache a run before left is in force
    /// (for those kinds at least), as of its stamp.
    Cached,
    /// Every kind was listed in this run and every watch is live.
    Current,
    /// Every kind was listed in this run, but a watch is failing: the last state seen stays
    /// in force, as of its last confirmation.
    Stale,
}

impl Source {
    /// The word /healthz uses.
    pub fn word(self) -> &'static str {
        match self {
            Source::Listing => "listing",
            Source::Cached => "cached",
            Source::Current => "current",
            Source::Stale => "stale",
        }
    }
}

/// The state in force as the router's Lease says it (`edgenetd.io/cluster-state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Listed and watched: the cluster's state now.
    Current,
    /// A state kept through an outage, or loaded from the cache at start, last known to be
    /// the cluster's at `since` (`None`: a cache of unknown age).
    Cached {
        /// When the state was last known to be the cluster's.
        since: Option<SystemTime>,
    },
    /// Nothing listed and no cache loaded: the TOML alone is in force.
    None,
}

/// The state's freshness, kept across composes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// A cache was loaded at start.
    restored: bool,
    /// Every enabled kind has been listed in this run.
    listed: bool,
    /// Every watch was live at the last observation.
    live: bool,
    /// The last moment the state in force was known to be the cluster's (the cache's stamp
    /// until this run confirms it).
    confirmed: Option<SystemTime>,
}

impl Freshness {
    /// At start: `cached` is `Some(stamp)` when a cache was loaded (the stamp `None` for a
    /// file without one).
    pub fn start(cached: Option<Option<SystemTime>>) -> Freshness {
        Freshness {
            restored: cached.is_some(),
            listed: false,
            live: false,
            confirmed: cached.flatten(),
        }
    }

    /// Takes in the watches' state at `now`: `listed`, every enabled kind listed in this
    /// run; `live`, every watch open or reopening without a failure.
    pub fn observe(&mut self, listed: bool, live: bool, now: SystemTime) {
        // The first complete listing confirms the state whatever the watches do next.
        let first_listing = listed && !self.listed;
        self.listed = listed;
        self.live = live;
        if first_listing || (listed && live) {
            self.confirmed = Some(now);
        }
    }

    /// Where the state in force comes from.
    pub fn source(&self) -> Source {
        match (self.listed, self.live, self.restored) {
            (true, true, _) => Source::Current,
            (true, false, _) => Source::Stale,
            (false, _, true) => Source::Cached,
            (false, _, false) => Source::Listing,
        }
    }

    /// When the state in force was last known to be the cluster's (`None`: unknown, or
    /// nothing listed yet).
    pub fn as_of(&self) -> Option<SystemTime> {
        match self.source() {
            Source::Listing => None,
            _ => self.confirmed,
        }
    }

    /// The state in force as the Lease says it.
    pub fn standing(&self) -> Standing {
        match self.source() {
            Source::Current => Standing::Current,
            Source::Listing => Standing::None,
            Source::Cached | Source::Stale => Standing::Cached {
                since: self.as_of(),
            },
        }
    }

    /// The stamp a cache write records: the last confirmation; `None` while the state in
    /// force was never confirmed (a cache without a stamp, partly replaced by this run's
    /// lists: its age stays unknown, and the file says so).
    pub fn stamp(&self) -> Option<SystemTime> {
        self.confirmed
    }

    /// Whether the unchanged state's stamp, `written` on disk, is due to be written again.
    pub fn stamp_due(&self, written: Option<SystemTime>) -> bool {
        let Some(confirmed) = self.confirmed else {
            return false;
        };
        let behind = match written {
            Some(w) => confirmed.duration_since(w).unwrap_or(Duration::ZERO),
            None => return self.listed,
        };
        let gap = if self.listed && self.live {
            REFRESH
        } else {
            MIN_GAP
        };
        !behind.is_zero() && behind >= gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    #[test]
    fn a_cache_is_in_force_as_of_its_stamp_until_every_kind_is_listed() {
        let mut f = Freshness::start(Some(Some(at(0))));
        assert_eq!((f.source(), f.as_of()), (Source::Cached, Some(at(0))));
        f.observe(false, false, at(100));
        assert_eq!((f.source(), f.as_of()), (Source::Cached, Some(at(0))));
        f.observe(true, true, at(200));
        assert_eq!((f.source(), f.as_of()), (Source::Current, Some(at(200))));
    }

    #[test]
    fn without_a_cache_nothing_is_claimed_until_listed() {
        let mut f = Freshness::start(None);
        f.observe(false, true, at(5));
        assert_eq!((f.source(), f.as_of()), (Source::Listing, None));
        assert!(!f.stamp_due(None));
        // Listed, though a watch failed right after: the list confirmed the state.
        f.observe(true, false, at(10));
        assert_eq!((f.source(), f.as_of()), (Source::Stale, Some(at(10))));
    }

    #[test]
    fn a_failing_watch_freezes_the_stamp_at_the_last_confirmation() {
        let mut f = Freshness::start(None);
        f.observe(true, true, at(0));
        f.observe(true, true, at(5));
        f.observe(true, false, at(10));
        f.observe(true, false, at(500));
        assert_eq!((f.source(), f.as_of()), (Source::Stale, Some(at(5))));
        f.observe(true, true, at(600));
        assert_eq!((f.source(), f.as_of()), (Source::Current, Some(at(600))));
    }

    #[test]
    fn an_unchanged_state_is_stamped_again_every_refresh_and_once_when_an_outage_starts() {
        let mut f = Freshness::start(None);
        f.observe(true, true, at(0));
        let written = Some(at(0));
        f.observe(true, true, at(REFRESH.as_secs() - 5));
        assert!(!f.stamp_due(written), "live: every REFRESH only");
        f.observe(true, true, at(REFRESH.as_secs()));
        assert!(f.stamp_due(written));
        // An outage 2 minutes after a write: the last confirmation is written once.
        let written = Some(at(1000));
        f.observe(true, true, at(1120));
        f.observe(true, false, at(1125));
        assert!(f.stamp_due(written), "the outage's start is written");
        assert!(!f.stamp_due(Some(at(1120))), "then nothing more to write");
        // Within MIN_GAP of the last write, the outage's start is not worth a write.
        let mut f = Freshness::start(None);
        f.observe(true, true, at(0));
        f.observe(true, true, at(30));
        f.observe(true, false, at(35));
        assert!(!f.stamp_due(Some(at(0))));
    }

    /// docs/kubernetes.md states the two figures; a change to one without the other fails.
    #[test]
    fn the_docs_state_the_stamp_figures() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kubernetes.md"))
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
        for want in [
            format!("written again every {} minutes", REFRESH.as_secs() / 60),
            format!(
                "lags the truth by at most {} minutes",
                REFRESH.as_secs() / 60
            ),
        ] {
            assert!(
                docs.contains(&want),
                "docs/kubernetes.md does not say {want:?}"
            );
        }
        assert_eq!(
            MIN_GAP,
            Duration::from_secs(60),
            "the docs say \"once a minute\""
        );
        assert!(docs.contains("(at most once a minute)"));
    }

    #[test]
    fn a_cache_without_a_stamp_has_no_age_until_confirmed() {
        let mut f = Freshness::start(Some(None));
        assert_eq!((f.source(), f.as_of()), (Source::Cached, None));
        assert!(!f.stamp_due(None));
        f.observe(true, true, at(7));
        assert_eq!(f.as_of(), Some(at(7)));
        assert!(f.stamp_due(None), "the first stamp is written");
    }
}
