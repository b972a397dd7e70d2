//! Where desired state comes from: the TOML files (this module) and, with the `kubernetes`
//! feature, the cluster (`crate::kubernetes`; its config fragments load here with the files,
//! `load_with`, in `kubernetes` builds).
//!
//! A reload is asked for by SIGHUP or by a change to any config file (the main file, any
//! `conf.d/*.toml`, or the set of files in `conf.d`) or to a data file the configuration in
//! force names (a set's `loadfile`). Changes are noticed through inotify on the config
//! directory, `conf.d` and the data files' directories (no wake-up while nothing changes); once events have been
//! quiet for [`SETTLE`] (an editor saves in steps), the files' fingerprints decide whether
//! anything really changed. Where inotify is unavailable, the files are polled every
//! [`POLL_INTERVAL`] instead.
//!
//! [`load`] reads the files once and says only "loaded" or "rejected, with problems" (plus
//! what the files held); what follows (publishing, metrics, systemd) is the daemon's reload
//! reaction. An invalid new config never replaces the last good one.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures_lite::future;
use log::{info, warn};

use crate::config::{self, ConfigError, ConfigTexts, DesiredState};
use crate::shutdown::{Shutdown, unless_shutdown};
use crate::sync::Trigger;

mod inotify;

/// How often config files are checked for changes when inotify is unavailable.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long change events must be quiet before the files are compared.
pub const SETTLE: Duration = Duration::from_millis(200);

/// A file's modification time, size and inode: what changes when it is edited or replaced.
type FileStamp = (SystemTime, u64, u64);

/// What identifies one version of the config files on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(Vec<(PathBuf, Option<FileStamp>)>);

/// Reads the fingerprint of every file a load of `main` would read, and of the `data` files.
pub fn fingerprint(main: &Path, data: &[PathBuf]) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    Fingerprint(
        config::config_files(main)
            .into_iter()
            .chain(data.iter().cloned())
            .map(|p| {
                let meta = std::fs::metadata(&p).ok().map(|m| {
                    (
                        m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        m.len(),
                        m.ino(),
                    )
                });
                (p, meta)
            })
            .collect(),
    )
}

/// Fires `reload` whenever the config files change, or the data files `data` names (those of
/// the configuration in force, asked again at every change; until shutdown).
///
/// The watch is set up and the files fingerprinted *here*, before the returned future is
/// first polled: the daemon calls this before it can send READY=1, so an edit made right
/// after READY is always a change. (Set up inside the future, an edit made between READY
/// and the task's first poll was already in the starting fingerprint and came before the
/// inotify watch, so it was never reloaded.)
pub fn watch_files(
    main: PathBuf,
    data: impl Fn() -> Vec<PathBuf> + 'static,
    reload: Trigger,
    shutdown: Shutdown,
) -> impl Future<Output = ()> + 'static {
    let dir = main
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let watch = inotify::DirWatch::new().and_then(|w| w.add(&dir).map(|()| w));
    let watch = match watch {
        Ok(watch) => {
            // conf.d may not exist yet; it is added again after every event (adding twice is
            // harmless).
            let _ = watch.add(&config::conf_d_dir(&main));
            add_data_dirs(&watch, &data());
            Some(watch)
        }
        Err(e) => {
            warn!(
                "cannot watch {} with inotify ({e}); polling the config files every {POLL_INTERVAL:?}",
                dir.display()
            );
            None
        }
    };
    // After the watch is in place: any later edit either differs from this or raises an event.
    let seen = fingerprint(&main, &data());
    async move {
        match watch {
            Some(watch) => watch_with_inotify(&main, &data, watch, seen, reload, shutdown).await,
            None => poll_files(main, &data, seen, reload, shutdown).await,
        }
    }
}

/// Watches the directories of the data files too (adding one twice is harmless; one that
/// cannot be watched is still compared at every other change, and polled by nothing).
fn add_data_dirs(watch: &inotify::DirWatch, data: &[PathBuf]) {
    for dir in data.iter().filter_map(|p| p.parent()) {
        let _ = watch.add(dir);
    }
}

async fn watch_with_inotify(
    main: &Path,
    data: &impl Fn() -> Vec<PathBuf>,
    watch: inotify::DirWatch,
    mut seen: Fingerprint,
    reload: Trigger,
    shutdown: Shutdown,
) {
    let conf_d = config::conf_d_dir(main);
    loop {
        let changed = async {
            if let Err(e) = watch.changed().await {
                warn!("config watch failed ({e}); retrying in {POLL_INTERVAL:?}");
                smol::Timer::after(POLL_INTERVAL).await;
            }
        };
        if unless_shutdown(&shutdown, changed).await.is_none() {
            return;
        }
        // Let the burst of an editor's save settle.
        while future::or(async { watch.changed().await.is_ok() }, async {
            smol::Timer::after(SETTLE).await;
            false
        })
        .await
        {}
        let _ = watch.add(&conf_d);
        let data = data();
        add_data_dirs(&watch, &data);
        let now = fingerprint(main, &data);
        if now != seen {
            info!("config files changed; reloading");
            seen = now;
            reload.fire();
        }
    }
}

/// The fallback: compare fingerprints every [`POLL_INTERVAL`], starting from `seen`.
async fn poll_files(
    main: PathBuf,
    data: &impl Fn() -> Vec<PathBuf>,
    mut seen: Fingerprint,
    reload: Trigger,
    shutdown: Shutdown,
) {
    let mut pending: Option<Fingerprint> = None;
    loop {
        if unless_shutdown(&shutdown, smol::Timer::after(POLL_INTERVAL))
            .await
            .is_none()
        {
            return;
        }
        let now = fingerprint(&main, &data());
        if now == seen {
            pending = None;
            continue;
        }
        // Take a change once it held still for one poll (editors write in steps).
        if pending.as_ref() == Some(&now) {
            info!("config files changed; reloading");
            seen = now;
            pending = None;
            reload.fire();
        } else {
            pending = Some(now);
        }
    }
}

/// Identifies the bytes of one set of config files (paths and contents, or the error that
/// kept a file from being read), so a reload of the very same rejected files can be told
/// from a new attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(u64);

/// Hashes every file a load of `main` would read.
pub fn content_hash(main: &Path) -> ContentHash {
    ContentHash(hash_files(config::config_files(main), DefaultHasher::new()))
}

impl ContentHash {
    /// This content with the data files at `data` (those a load of it named).
    fn with_data(self, data: &[PathBuf]) -> ContentHash {
        if data.is_empty() {
            return self;
        }
        let mut hasher = DefaultHasher::new();
        self.0.hash(&mut hasher);
        ContentHash(hash_files(data.iter().cloned(), hasher))
    }
}

/// Hashes each path and its bytes (or the error that kept it from being read) into `hasher`.
fn hash_files(paths: impl IntoIterator<Item = PathBuf>, mut hasher: DefaultHasher) -> u64 {
    for path in paths {
        path.hash(&mut hasher);
        if let Err(e) = hash_file(&path, &mut hasher) {
            e.kind().hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Hashes a file's bytes a block at a time: a file far over the size limit (which the load
/// refuses unread) is not held in memory for this either.
fn hash_file(path: &Path, hasher: &mut DefaultHasher) -> std::io::Result<()> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut block = [0u8; 16 << 10];
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            return Ok(());
        }
        hasher.write(&block[..n]);
    }
}

/// What one load of the config files produced.
#[derive(Debug)]
pub enum Outcome {
    /// The files are valid: the new desired state, and the texts it was read from (what the
    /// daemon keeps once it is in force).
    Loaded(Box<DesiredState>, ConfigTexts),
    /// The files are invalid: every problem, with file:line:col.
    Rejected(ConfigError),
}

/// One load of the config files.
#[derive(Debug)]
pub struct Load {
    /// The files' contents as the load read them; `None` when they changed while it ran
    /// (then nobody can say which version the outcome belongs to).
    pub content: Option<ContentHash>,
    /// Valid or not.
    pub outcome: Outcome,
}

/// Loads the config files once. Knows nothing of what happens next: the daemon publishes a
/// loaded state or keeps the old one.
pub fn load(main: &Path) -> Load {
    let before = content_hash(main);
    let outcome = match config::load_keeping_texts(main) {
        Ok((state, texts)) => Outcome::Loaded(Box::new(state), texts),
        Err(e) => Outcome::Rejected(e),
    };
    // Hashing again, rather than hashing what the load read, keeps this out of `config`;
    // a file replaced in between makes the two differ. The data files are known only once
    // the config is read: hashed after (a data file changed during the load goes unseen).
    let data: Vec<PathBuf> = match &outcome {
        Outcome::Loaded(_, texts) => texts.data.iter().map(|(p, _)| p.clone()).collect(),
        Outcome::Rejected(e) => e.data_files.clone(),
    };
    let content = (content_hash(main) == before).then(|| before.with_data(&data));
    Load { content, outcome }
}

/// [`load`] with fragments from the cluster after the files; also the keys the local files
/// kept (one line each) and how many problems are in the fragments.
#[cfg(feature = "kubernetes")]
pub fn load_with(
    main: &Path,
    fragments: &[config::fragments::Fragment],
) -> (Load, Vec<String>, usize) {
    let before = content_hash(main);
    let (outcome, shadowed, in_fragments) =
        match config::fragments::load_with_fragments(main, fragments) {
            Ok(l) => (Outcome::Loaded(Box::new(l.state), l.texts), l.shadowed, 0),
            Err(r) => (Outcome::Rejected(r.error), Vec::new(), r.in_fragments),
        };
    let data: Vec<PathBuf> = match &outcome {
        Outcome::Loaded(_, texts) => texts.data.iter().map(|(p, _)| p.clone()).collect(),
        Outcome::Rejected(e) => e.data_files.clone(),
    };
    let content = (content_hash(main) == before).then(|| before.with_data(&data));
    (Load { content, outcome }, shadowed, in_fragments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_names_the_content_it_read_and_any_file_change_changes_it() {
        let dir = std::env::temp_dir().join(format!("edgenetd-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        let main = dir.join("edgenetd.toml");
        std::fs::write(&main, "[daemon]\nroute_protocol = 300\n").unwrap();
        let first = load(&main);
        assert!(matches!(first.outcome, Outcome::Rejected(_)));
        assert_eq!(first.content, Some(content_hash(&main)));
        assert_eq!(
            load(&main).content,
            first.content,
            "same bytes, same content"
        );
        std::fs::write(dir.join("conf.d/10-x.toml"), "").unwrap();
        assert_ne!(load(&main).content, first.content, "a file added to conf.d");
        std::fs::write(&main, "[daemon]\nroute_protocol = 191\n").unwrap();
        assert!(matches!(load(&main).outcome, Outcome::Loaded(..)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The watch was set up by its task's first run, which comes after the daemon's READY=1:
    /// an edit made in between was already in its starting fingerprint and came before its
    /// inotify watch, so it was never reloaded.
    #[test]
    fn bug_an_edit_made_before_the_watch_task_first_ran_was_never_reloaded() {
        let dir = std::env::temp_dir().join(format!("edgenetd-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("edgenetd.toml");
        std::fs::write(&main, "").unwrap();
        let (reload, requests) = crate::sync::trigger();
        let (_stop, shutdown) = async_channel::bounded::<()>(1);
        let watch = watch_files(main.clone(), Vec::new, reload, shutdown);
        std::fs::write(&main, "[daemon]\nroute_protocol = 191\n").unwrap();
        let fired = smol::block_on(future::or(
            future::or(async { requests.recv().await.is_some() }, async {
                watch.await;
                false
            }),
            async {
                smol::Timer::after(Duration::from_secs(10)).await;
                false
            },
        ));
        assert!(fired, "the edit asked for a reload");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The content of a rejected load covered the config files only: a data file edited
    /// from one bad line to another was "unchanged since rejected", and not counted.
    #[test]
    fn a_rejected_loads_content_covers_the_data_files_it_named() {
        let dir = std::env::temp_dir().join(format!("edgenetd-source-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (main, data) = (dir.join("edgenetd.toml"), dir.join("blocklist.txt"));
        std::fs::write(
            &main,
            format!(
                "[policy]\n[policy.set.b]\ntype = \"ipv4\"\nloadfile = \"{}\"\n",
                data.display()
            ),
        )
        .unwrap();
        std::fs::write(&data, "1.2.3\n").unwrap();
        let first = load(&main);
        assert!(matches!(first.outcome, Outcome::Rejected(_)));
        assert!(first.content.is_some());
        assert_eq!(
            load(&main).content,
            first.content,
            "same bytes, same content"
        );
        std::fs::write(&data, "4.5.6\n").unwrap();
        assert_ne!(load(&main).content, first.content, "another bad data file");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_edit_of_a_data_file_of_the_config_in_force_asks_for_a_reload() {
        let dir = std::env::temp_dir().join(format!("edgenetd-watch-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The data file lives apart from the config: its directory is watched too.
        std::fs::create_dir_all(dir.join("config")).unwrap();
        std::fs::create_dir_all(dir.join("lists")).unwrap();
        let main = dir.join("config/edgenetd.toml");
        let data = dir.join("lists/blocklist.txt");
        std::fs::write(&main, "").unwrap();
        std::fs::write(&data, "192.0.2.1\n").unwrap();
        let (reload, requests) = crate::sync::trigger();
        let (_stop, shutdown) = async_channel::bounded::<()>(1);
        let named = data.clone();
        let watch = watch_files(main.clone(), move || vec![named.clone()], reload, shutdown);
        let fired = smol::block_on(future::or(
            future::or(
                async {
                    // After the watch's first poll (its setup is done already).
                    smol::Timer::after(Duration::from_millis(50)).await;
                    std::fs::write(&data, "192.0.2.1\n192.0.2.2\n").unwrap();
                    requests.recv().await.is_some()
                },
                async {
                    watch.await;
                    false
                },
            ),
            async {
                smol::Timer::after(Duration::from_secs(10)).await;
                false
            },
        ));
        assert!(fired, "the data file's edit asked for a reload");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
