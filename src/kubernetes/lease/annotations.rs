//! What the Lease's annotations say, made from what the daemon knows (pure; the writer
//! compares the result with what it last wrote, so only a change is news).
//!
//! | annotation | value |
//! |---|---|
//! | `edgenetd.io/config-hash` | `sha256:<hex>` of the TOML in force ([`super::in_force::digest`]); empty when not known |
//! | `edgenetd.io/config-generation` | 1 for the configuration the daemon started with, one more at each change of content |
//! | `edgenetd.io/cluster-state` | `current`, `cached since <RFC 3339>` (`cached`, of unknown age), or `none` |
//! | `edgenetd.io/controllers` | `<loop>=<state>,...` in registration order; state `ready`, `failing`, `starting` or `stalled` |
//! | `edgenetd.io/last-sync-error` | `<loop>: <error>` of each loop whose last sync failed, joined by `; `; empty when none |
//! | `edgenetd.io/config-map` | with `config_map` only: `listing`, `confirmed <rv>`, `pending <rv>, confirmed <rv>` or `rejected <rv>, in force <rv>: <why>` ([`ConfigMapStatus`]) |

use std::collections::BTreeMap;

use super::PREFIX;
use crate::clock::rfc3339;
use crate::kubernetes::freshness::Standing;

/// The longest `last-sync-error` and `config-map` (the rest is cut, at a character
/// boundary, and ends `…`).
pub const MAX_ERROR: usize = 1024;

/// A loop's state, as the Lease shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopState {
    /// Live, and its last sync succeeded.
    Ready,
    /// Live, and its last sync failed.
    Failing,
    /// Live, with no sync finished yet.
    Starting,
    /// Not live (wedged, or a change waited too long): the Lease is not renewed.
    Stalled,
}

impl LoopState {
    /// The word in `controllers`.
    pub fn word(self) -> &'static str {
        match self {
            LoopState::Ready => "ready",
            LoopState::Failing => "failing",
            LoopState::Starting => "starting",
            LoopState::Stalled => "stalled",
        }
    }
}

/// One loop of the liveness registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// Its name (`policy`, `service`, `route`, `kubernetes`, ...).
    pub name: String,
    /// Its state.
    pub state: LoopState,
    /// Its last sync's error, while the last sync failed.
    pub error: Option<String>,
}

/// The ConfigMap of `[kubernetes] config_map`: which version is in force, whether it waits
/// for its confirm, and the one refused or rolled back, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigMapStatus {
    /// Not listed yet: the local files are in force, with the version confirmed before
    /// the start when the state directory kept one.
    Listing {
        /// The version kept from before the start and in force (`None`: the local files
        /// alone).
        kept: Option<String>,
    },
    /// The version in force is confirmed (its resourceVersion; empty: no such ConfigMap).
    Confirmed {
        /// The version in force.
        in_force: String,
    },
    /// The version in force waits for the router to reach the API server with it.
    Pending {
        /// The version in force, waiting.
        in_force: String,
        /// The version a rollback returns to.
        confirmed: String,
    },
    /// The version offered was refused (problems) or rolled back (not confirmed in time).
    Rejected {
        /// The version rejected.
        version: String,
        /// `refused` or `rolled back`.
        what: String,
        /// Why (the first problem, or the rollback's reason).
        reason: String,
        /// The version in force instead.
        in_force: String,
    },
}

impl ConfigMapStatus {
    /// The annotation's value, at most [`MAX_ERROR`] bytes: the versions first, so a cut
    /// takes from the reason alone.
    pub fn text(&self) -> String {
        let rv = |v: &str| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.to_string()
            }
        };
        let text = match self {
            ConfigMapStatus::Listing { kept: None } => "listing".to_string(),
            ConfigMapStatus::Listing { kept: Some(v) } => {
                format!("listing, in force {} (kept)", rv(v))
            }
            ConfigMapStatus::Confirmed { in_force } => format!("confirmed {}", rv(in_force)),
            ConfigMapStatus::Pending {
                in_force,
                confirmed,
            } => format!("pending {}, confirmed {}", rv(in_force), rv(confirmed)),
            ConfigMapStatus::Rejected {
                version,
                what,
                reason,
                in_force,
            } => format!(
                "rejected {}, in force {}: {what}: {reason}",
                rv(version),
                rv(in_force)
            ),
        };
        cut(text, MAX_ERROR)
    }
}

/// Everything the annotations say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The generation of the TOML in force.
    pub generation: u64,
    /// Its content hash, when known.
    pub hash: Option<String>,
    /// Where the cluster state in force comes from.
    pub cluster: Standing,
    /// Every loop, in registration order.
    pub loops: Vec<Loop>,
    /// The ConfigMap's version, with `config_map`.
    pub config_map: Option<ConfigMapStatus>,
}

/// The annotations of `report`.
pub fn annotations(report: &Report) -> BTreeMap<String, String> {
    let key = |name: &str| format!("{PREFIX}{name}");
    let cluster = match report.cluster {
        Standing::Current => "current".to_string(),
        Standing::Cached { since: Some(t) } => format!("cached since {}", rfc3339(t)),
        Standing::Cached { since: None } => "cached".to_string(),
        Standing::None => "none".to_string(),
    };
    let controllers: Vec<String> = report
        .loops
        .iter()
        .map(|l| format!("{}={}", l.name, l.state.word()))
        .collect();
    let errors: Vec<String> = report
        .loops
        .iter()
        .filter_map(|l| Some(format!("{}: {}", l.name, l.error.as_ref()?)))
        .collect();
    let mut out = BTreeMap::from([
        (key("config-hash"), report.hash.clone().unwrap_or_default()),
        (key("config-generation"), report.generation.to_string()),
        (key("cluster-state"), cluster),
        (key("controllers"), controllers.join(",")),
        (key("last-sync-error"), cut(errors.join("; "), MAX_ERROR)),
    ]);
    if let Some(c) = &report.config_map {
        out.insert(key("config-map"), c.text());
    }
    out
}

/// `text` cut to at most `max` bytes, at a character boundary, ending `…` when cut.
fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn lp(name: &str, state: LoopState, error: Option<&str>) -> Loop {
        Loop {
            name: name.into(),
            state,
            error: error.map(String::from),
        }
    }

    #[test]
    fn every_annotation_is_there_in_its_documented_form() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let a = annotations(&Report {
            generation: 3,
            hash: Some("sha256:ab".into()),
            cluster: Standing::Cached { since: Some(since) },
            loops: vec![
                lp("policy", LoopState::Ready, None),
                lp("service", LoopState::Failing, Some("nft: refused")),
                lp("route", LoopState::Stalled, None),
                lp("kubernetes", LoopState::Starting, Some("not listed yet")),
            ],
            config_map: None,
        });
        let want = [
            ("edgenetd.io/config-hash", "sha256:ab"),
            ("edgenetd.io/config-generation", "3"),
            (
                "edgenetd.io/cluster-state",
                "cached since 2023-11-14T22:13:20.000Z",
            ),
            (
                "edgenetd.io/controllers",
                "policy=ready,service=failing,route=stalled,kubernetes=starting",
            ),
            (
                "edgenetd.io/last-sync-error",
                "service: nft: refused; kubernetes: not listed yet",
            ),
        ];
        let want: BTreeMap<String, String> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(a, want);
        let quiet = annotations(&Report {
            generation: 1,
            hash: None,
            cluster: Standing::Current,
            loops: vec![lp("policy", LoopState::Ready, None)],
            config_map: None,
        });
        assert_eq!(quiet["edgenetd.io/config-hash"], "");
        assert_eq!(quiet["edgenetd.io/cluster-state"], "current");
        assert_eq!(quiet["edgenetd.io/last-sync-error"], "");
    }

    #[test]
    fn a_long_error_is_cut_at_a_character_boundary() {
        let long = "é".repeat(2000);
        let a = annotations(&Report {
            generation: 1,
            hash: None,
            cluster: Standing::None,
            loops: vec![lp("route", LoopState::Failing, Some(&long))],
            config_map: None,
        });
        let e = &a["edgenetd.io/last-sync-error"];
        assert!(e.len() <= MAX_ERROR && e.ends_with('…'), "{}", e.len());
        assert!(e.starts_with("route: éé"));
    }

    #[test]
    fn the_config_map_says_which_version_is_in_force_waits_or_was_rejected_and_why() {
        let with = |c: ConfigMapStatus| {
            annotations(&Report {
                generation: 1,
                hash: None,
                cluster: Standing::Current,
                loops: vec![lp("policy", LoopState::Ready, None)],
                config_map: Some(c),
            })["edgenetd.io/config-map"]
                .clone()
        };
        assert_eq!(with(ConfigMapStatus::Listing { kept: None }), "listing");
        assert_eq!(
            with(ConfigMapStatus::Listing {
                kept: Some("48213".into())
            }),
            "listing, in force 48213 (kept)"
        );
        let confirmed = ConfigMapStatus::Confirmed {
            in_force: "48213".into(),
        };
        assert_eq!(with(confirmed), "confirmed 48213");
        let gone = ConfigMapStatus::Confirmed {
            in_force: String::new(),
        };
        assert_eq!(with(gone), "confirmed none", "no such ConfigMap");
        let pending = ConfigMapStatus::Pending {
            in_force: "48214".into(),
            confirmed: "48213".into(),
        };
        assert_eq!(with(pending), "pending 48214, confirmed 48213");
        let rolled_back = ConfigMapStatus::Rejected {
            version: "48214".into(),
            what: "rolled back".into(),
            reason: "did not reach the API server again before its deadline (config_confirm)"
                .into(),
            in_force: "48213".into(),
        };
        assert_eq!(
            with(rolled_back),
            "rejected 48214, in force 48213: rolled back: did not reach the API server again before its deadline (config_confirm)"
        );
        // A long reason is cut; the versions stay.
        let refused = ConfigMapStatus::Rejected {
            version: "48215".into(),
            what: "refused".into(),
            reason: format!("1 problem(s): {}", "ü".repeat(1000)),
            in_force: "48213".into(),
        };
        let text = with(refused);
        assert!(
            text.len() <= MAX_ERROR && text.ends_with('…'),
            "{}",
            text.len()
        );
        assert!(text.starts_with("rejected 48215, in force 48213: refused: 1 problem(s): üü"));
        let without = annotations(&Report {
            generation: 1,
            hash: None,
            cluster: Standing::Current,
            loops: Vec::new(),
            config_map: None,
        });
        assert!(
            !without.contains_key("edgenetd.io/config-map"),
            "no annotation without config_map"
        );
    }
}
