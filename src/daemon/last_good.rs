//! The last good configuration (issue 23): every time a configuration comes into force —
//! the start, a reload, an apply that needs no confirm, a confirm, a rollback — all its
//! files are kept in the state directory (`last-good.json`, written atomically). A start
//! whose config does not validate runs that copy instead of nothing; with no copy (or one
//! that no longer loads), it runs the built-in lockdown. Never an open box.
//!
//! A configuration applied with `edgenetd apply --confirm` is kept only once confirmed: a
//! restart while it waits rolls it back, and the copy must not be the way back to it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{error, info, warn};

use crate::clock::rfc3339;
use crate::config::{self, ConfigError, ConfigTexts, DesiredState};
use crate::control::instance::canonical;
use crate::control::store::{LastGoodRecord, Store, fingerprint};

/// Keeps the last good configuration of one daemon (its main file, its state directory).
pub struct LastGood {
    /// The state directory.
    store: Store,
    /// The canonical main config file the copies are bound to.
    main: String,
    /// The fingerprint of what was last kept (or found kept), so an unchanged config is not
    /// written again.
    kept: Mutex<Option<String>>,
}

impl LastGood {
    /// The keeper of `main`'s copies in `store`.
    pub fn new(main: &Path, store: Store) -> LastGood {
        LastGood {
            store,
            main: canonical(main).display().to_string(),
            kept: Mutex::new(None),
        }
    }

    /// Keeps `texts`, a configuration that has just come into force. A failure is logged
    /// (the daemon runs on; the previous copy stays).
    pub fn keep(&self, texts: &ConfigTexts, now: SystemTime) {
        let print = digest(texts);
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.as_deref() == Some(print.as_str()) {
            return;
        }
        let record = LastGoodRecord {
            main: self.main.clone(),
            saved_unix: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            files: texts
                .0
                .iter()
                .map(|(p, t)| (p.display().to_string(), t.clone()))
                .collect(),
        };
        match self.store.save_last_good(&record) {
            Ok(()) => {
                log::debug!(
                    "kept the configuration in force as {}",
                    self.store.last_good_path().display()
                );
                *kept = Some(print);
            }
            Err(e) => warn!(
                "cannot keep the configuration in force as {}: {e}; a start on an invalid config would run the older copy or the lockdown",
                self.store.last_good_path().display()
            ),
        }
    }

    /// The kept copy, when there is one for this main file that still loads; otherwise why
    /// not (logged by the caller).
    pub fn load(&self) -> Result<(DesiredState, SystemTime), String> {
        let record = match self.store.read_last_good() {
            Ok(Some(Ok(record))) => record,
            Ok(Some(Err(why))) => {
                return Err(format!(
                    "{} cannot be read: {why}",
                    self.store.last_good_path().display()
                ));
            }
            Ok(None) => return Err("no configuration has come into force here yet".into()),
            Err(e) => {
                return Err(format!("{}: {e}", self.store.last_good_path().display()));
            }
        };
        if record.main != self.main {
            return Err(format!(
                "{} was kept for {}, not for {}",
                self.store.last_good_path().display(),
                record.main,
                self.main
            ));
        }
        let texts = ConfigTexts(
            record
                .files
                .into_iter()
                .map(|(p, t)| (PathBuf::from(p), t))
                .collect(),
        );
        let state = config::boot::load_texts(&texts).map_err(|e: ConfigError| {
            error!("the last good configuration does not load with this edgenetd:");
            for line in e.rendered.lines() {
                error!("  {line}");
            }
            format!(
                "the last good configuration does not load ({} problem(s))",
                e.count
            )
        })?;
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(digest(&texts));
        let saved = UNIX_EPOCH + Duration::from_secs(record.saved_unix);
        info!(
            "loaded the last good configuration, kept {} ({} file(s))",
            rfc3339(saved),
            texts.0.len()
        );
        Ok((state, saved))
    }
}

/// A digest of every path and text.
fn digest(texts: &ConfigTexts) -> String {
    let mut bytes = Vec::new();
    for (p, t) in &texts.0 {
        bytes.extend_from_slice(p.as_os_str().as_encoded_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&(t.len() as u64).to_le_bytes());
        bytes.extend_from_slice(t.as_bytes());
    }
    fingerprint(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgenetd-last-good-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_kept_configuration_loads_again_for_its_own_main_file_only() {
        let dir = scratch("own");
        let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
        std::fs::write(&a, "[daemon]\nroute_protocol = 191\n").unwrap();
        std::fs::write(&b, "").unwrap();
        let (_, texts) = config::load_keeping_texts(&a).unwrap();
        let keeper = LastGood::new(&a, Store::new(dir.join("state")));
        assert!(keeper.load().is_err(), "nothing kept yet");
        keeper.keep(&texts, SystemTime::now());
        let (state, _) = keeper.load().unwrap();
        assert_eq!(state.daemon.route_protocol, 191);
        let other = LastGood::new(&b, Store::new(dir.join("state")));
        assert!(other.load().unwrap_err().contains("was kept for"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
