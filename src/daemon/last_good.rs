//! The last good configuration (issue 23): every time a configuration comes into force —
//! the start, a reload, an apply that needs no confirm, a confirm, a rollback — all its
//! files are kept in the state directory (`last-good.json`, written atomically). A start
//! whose config does not validate runs that copy instead of nothing; with no copy (or one
//! that no longer loads), it runs the built-in lockdown. Never an open box.
//!
//! A configuration applied with `edgenetd apply --confirm` is kept only once confirmed: a
//! restart while it waits rolls it back, and the copy must not be the way back to it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{error, info, warn};

use crate::clock::rfc3339;
use crate::config::{self, ConfigError, ConfigTexts, DesiredState};
use crate::control::instance::canonical;
use crate::control::store::Store;

/// Keeps the last good configuration of one daemon (its main file, its state directory).
pub struct LastGood {
    /// The state directory.
    store: Store,
    /// The canonical main config file the copies are bound to.
    main: String,
    /// What was last kept: the fingerprint of the texts (or of those found kept), so an
    /// unchanged config is not written again, and the number of the keep that wrote it.
    kept: Mutex<Kept>,
    /// Numbers the keeps in the order configurations came into force.
    next: AtomicU64,
    /// The data files (`loadfile`) of the configuration last come into force: the file
    /// watch follows them besides the config files.
    data_paths: Mutex<Vec<PathBuf>>,
}

/// What the last write kept.
#[derive(Default)]
struct Kept {
    /// Fingerprint of the texts.
    print: Option<u64>,
    /// The keep's number (a later one is never overwritten by an earlier one).
    seq: u64,
}

impl LastGood {
    /// The keeper of `main`'s copies in `store`.
    pub fn new(main: &Path, store: Store) -> LastGood {
        LastGood {
            store,
            main: canonical(main).display().to_string(),
            kept: Mutex::new(Kept::default()),
            next: AtomicU64::new(0),
            data_paths: Mutex::new(Vec::new()),
        }
    }

    /// Keeps `texts`, a configuration that has just come into force, on a short-lived
    /// thread of its own: writing and fsyncing a large config (100,000 routes are 5 MB) must
    /// neither delay READY=1 nor stall the controller loops' executor. A failure is logged
    /// (the daemon runs on; the previous copy stays).
    pub fn keep(self: &Arc<Self>, texts: ConfigTexts, now: SystemTime) {
        self.set_data_paths(&texts);
        let seq = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("last-good".into())
            .spawn(move || me.write(seq, &texts, now));
        if let Err(e) = spawned {
            warn!("cannot start a thread to keep the configuration in force: {e}");
        }
    }

    /// Writes keep number `seq` unless a later one was written already.
    fn write(&self, seq: u64, texts: &ConfigTexts, now: SystemTime) {
        let print = digest(texts);
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if seq < kept.seq {
            return;
        }
        kept.seq = seq;
        if kept.print == Some(print) {
            return;
        }
        let paths: Vec<String> = texts
            .files
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        let files: Vec<(&str, &str)> = paths
            .iter()
            .zip(&texts.files)
            .map(|(p, (_, t))| (p.as_str(), t.as_str()))
            .collect();
        let data_paths: Vec<String> = texts
            .data
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        let data: Vec<(&str, &str)> = data_paths
            .iter()
            .zip(&texts.data)
            .map(|(p, (_, t))| (p.as_str(), t.as_str()))
            .collect();
        let saved_unix = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        match self
            .store
            .save_last_good(&self.main, saved_unix, &files, &data)
        {
            Ok(()) => {
                log::debug!(
                    "kept the configuration in force as {}",
                    self.store.last_good_path().display()
                );
                kept.print = Some(print);
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
        let paths = |files: Vec<(String, String)>| {
            files
                .into_iter()
                .map(|(p, t)| (PathBuf::from(p), t))
                .collect()
        };
        let texts = ConfigTexts {
            files: paths(record.files),
            data: paths(record.data),
        };
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
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).print = Some(digest(&texts));
        self.set_data_paths(&texts);
        let saved = UNIX_EPOCH + Duration::from_secs(record.saved_unix);
        info!(
            "loaded the last good configuration, kept {} ({} file(s), {} data file(s))",
            rfc3339(saved),
            texts.files.len(),
            texts.data.len()
        );
        Ok((state, saved))
    }
}

impl LastGood {
    /// The data files of the configuration last come into force (or loaded from the copy).
    pub fn data_paths(&self) -> Vec<PathBuf> {
        self.data_paths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_data_paths(&self, texts: &ConfigTexts) {
        *self.data_paths.lock().unwrap_or_else(|p| p.into_inner()) =
            texts.data.iter().map(|(p, _)| p.clone()).collect();
    }
}

impl LastGood {
    /// Waits until every keep asked for so far is written (tests).
    #[cfg(test)]
    pub fn settle(&self) {
        while self.kept.lock().unwrap_or_else(|p| p.into_inner()).seq
            < self.next.load(Ordering::SeqCst)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A digest of every path and text (compared within this process only; no copy of them).
fn digest(texts: &ConfigTexts) -> u64 {
    let mut hasher = DefaultHasher::new();
    texts.hash(&mut hasher);
    hasher.finish()
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
        let keeper = Arc::new(LastGood::new(&a, Store::new(dir.join("state"))));
        assert!(keeper.load().is_err(), "nothing kept yet");
        keeper.keep(texts, SystemTime::now());
        keeper.settle();
        let (state, _) = keeper.load().unwrap();
        assert_eq!(state.daemon.route_protocol, 191);
        let other = LastGood::new(&b, Store::new(dir.join("state")));
        assert!(other.load().unwrap_err().contains("was kept for"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A change of a data file alone is another configuration: kept again, and the copy
    /// loads with the new text whatever the disk holds.
    #[test]
    fn a_change_of_a_loadfile_alone_is_kept_and_the_copy_runs_its_text() {
        let dir = scratch("data");
        let (main, data) = (dir.join("edgenetd.toml"), dir.join("blocklist.txt"));
        std::fs::write(
            &main,
            format!(
                "[policy]\n[policy.set.b]\ntype = \"ipv4\"\nloadfile = \"{}\"\n",
                data.display()
            ),
        )
        .unwrap();
        let keeper = Arc::new(LastGood::new(&main, Store::new(dir.join("state"))));
        for address in ["192.0.2.1", "192.0.2.2"] {
            std::fs::write(&data, format!("{address}\n")).unwrap();
            let (_, texts) = config::load_keeping_texts(&main).unwrap();
            keeper.keep(texts, SystemTime::now());
            keeper.settle();
        }
        assert_eq!(
            keeper.data_paths(),
            std::slice::from_ref(&data),
            "what the watch follows"
        );
        std::fs::write(&data, "garbage\n").unwrap();
        let (state, _) = keeper.load().unwrap();
        let set = &state.policy.unwrap().sets["b"];
        assert_eq!(
            set.elements,
            ["192.0.2.2/32".parse::<ipnet::IpNet>().unwrap()]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
