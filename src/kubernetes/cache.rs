//! The last composed cluster state on disk, so that a daemon restarted while the API server
//! is unreachable keeps programming the cluster-derived services, routes and pod isolation
//! instead of removing them.
//!
//! Only the cluster part is stored (the TOML part is read from its files at every start), as
//! JSON of the plain records below, with a format version. Writing is atomic: a temporary file
//! beside the target is written and fsynced, then renamed over it (and the directory fsynced),
//! so a crash or a full disk leaves either the old file or the new one, never half of one.
//! Reading back never fails the start: a missing file means "no cache", and an unreadable or
//! corrupt one is ignored with a warning (the cluster state then comes from the first list).
//!
//! The records (`records`) destructure the config types field by field: a field added to
//! `Service` or `Route` does not compile there until the cache stores it too.
//!
//! The file carries a stamp, `as_of`: when its state was last known to be the cluster's (the
//! daemon moves it on while every watch is live). With `[kubernetes] cache_max_age`, a file
//! stamped longer ago than that, or not stamped at all (written before stamps: its age is
//! unknown), is not used at start; a stamp ahead of the clock (a board without a real-time
//! clock, started before its time is set) counts as age zero. Without the key, any age is
//! used. A file without the stamp still loads: the field is optional.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use log::{info, warn};

use self::records::{CacheFile, CacheFileOut, VERSION};
use super::compose::ClusterState;

mod pod_records;
mod records;

/// Where the daemon keeps the cache (tmpfs: it outlives a restart, not a reboot, which is
/// what an outage needs: after a reboot nothing was programmed that the cache could keep).
pub const DEFAULT_PATH: &str = "/run/edgenetd/kubernetes-state.json";

/// Why the cache could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A file operation failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a cache of this format.
    #[error("{path}: not a readable cache: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A cache read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The cluster state.
    pub state: ClusterState,
    /// When it was last known to be the cluster's; `None` in a file written before stamps.
    pub as_of: Option<SystemTime>,
}

/// Whether a cache of stamp `as_of` may be used at `now` under `max_age`: `Ok` with its age
/// (`None` when unknown and no limit asks for it), or why not.
pub fn judge(
    as_of: Option<SystemTime>,
    max_age: Option<Duration>,
    now: SystemTime,
) -> Result<Option<Duration>, String> {
    // A stamp ahead of the clock: the clock is behind (no real-time clock, no time yet), not
    // the cache ahead; its true age is unknown but small, since it was written by this host.
    let age = as_of.map(|t| now.duration_since(t).unwrap_or(Duration::ZERO));
    match (age, max_age) {
        (Some(age), Some(max)) if age > max => Err(format!(
            "it is {} old, more than cache_max_age {}",
            said(age),
            said(max)
        )),
        (None, Some(max)) => Err(format!(
            "it has no stamp (written by an older edgenetd), so its age is unknown and cannot be held to cache_max_age {}",
            said(max)
        )),
        (age, _) => Ok(age),
    }
}

/// A duration to the second as the config writes one: `"26h3m9s"`, `"0s"`.
pub fn said(d: Duration) -> String {
    let s = d.as_secs();
    let parts = [(s / 3600, "h"), (s / 60 % 60, "m"), (s % 60, "s")];
    let text: String = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if text.is_empty() { "0s".into() } else { text }
}

/// The cache file.
#[derive(Debug, Clone)]
pub struct Cache {
    /// The file's path; its temporary sibling is `<path>.tmp`.
    path: PathBuf,
}

/// A new cache written to its temporary file, not yet in place.
#[derive(Debug)]
pub struct Staged {
    /// The temporary file (written and fsynced).
    tmp: PathBuf,
    /// Where it goes.
    path: PathBuf,
}

impl Staged {
    /// Puts the new cache in place of the old one, atomically.
    pub fn commit(self) -> Result<(), CacheError> {
        fs::rename(&self.tmp, &self.path).map_err(|e| io(&self.path, "rename", e))?;
        // The rename is durable only once the directory is; /run is tmpfs, but a path on a
        // real disk must not lose the rename to a power cut.
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io(dir, "fsync", e))?;
        }
        Ok(())
    }
}

impl Cache {
    /// The cache at `path` (the daemon passes [`DEFAULT_PATH`]).
    pub fn new(path: impl Into<PathBuf>) -> Cache {
        Cache { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `state`, last known to be the cluster's at `as_of` (`None`: unknown),
    /// atomically.
    pub fn store(&self, state: &ClusterState, as_of: Option<SystemTime>) -> Result<(), CacheError> {
        self.stage(state, as_of)?.commit()
    }

    /// Writes `state` to the temporary file; the old cache stays in force until
    /// [`Staged::commit`].
    pub fn stage(
        &self,
        state: &ClusterState,
        as_of: Option<SystemTime>,
    ) -> Result<Staged, CacheError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| io(dir, "create directory", e))?;
        }
        let mut name = self.path.clone().into_os_string();
        name.push(".tmp");
        let tmp = PathBuf::from(name);
        let file = File::create(&tmp).map_err(|e| io(&tmp, "create", e))?;
        // Written as it is serialized: the text of a large cluster is never held whole.
        let mut out = std::io::BufWriter::new(file);
        serde_json::to_writer(&mut out, &CacheFileOut::new(state, as_of))
            .map_err(std::io::Error::from)
            .and_then(|()| out.flush())
            .and_then(|()| out.get_ref().sync_all())
            .map_err(|e| io(&tmp, "write", e))?;
        Ok(Staged {
            tmp,
            path: self.path.clone(),
        })
    }

    /// Reads the cache: `None` when there is none, or when it cannot be used: unreadable,
    /// or older than `max_age` at `now` (both logged).
    pub fn load(&self, max_age: Option<Duration>, now: SystemTime) -> Option<Loaded> {
        let loaded = match self.read_stamped() {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return None,
            Err(e) => {
                warn!("kubernetes: the cached cluster state is ignored: {e}");
                return None;
            }
        };
        let age = match judge(loaded.as_of, max_age, now) {
            Ok(age) => age,
            Err(why) => {
                warn!(
                    "kubernetes: the cached cluster state in {} is not used: {why}; the cluster state comes from the first list",
                    self.path.display()
                );
                return None;
            }
        };
        let age = age.map_or_else(
            || "of unknown age".to_string(),
            |a| format!("{} old", said(a)),
        );
        info!(
            "kubernetes: {} service(s) and {} route(s) restored from {} ({age}) until the cluster answers",
            loaded.state.services.len(),
            loaded.state.routes.len(),
            self.path.display()
        );
        Some(loaded)
    }

    /// Reads the cache's state: `Ok(None)` when the file does not exist.
    pub fn read(&self) -> Result<Option<ClusterState>, CacheError> {
        Ok(self.read_stamped()?.map(|l| l.state))
    }

    /// Reads the cache with its stamp: `Ok(None)` when the file does not exist.
    pub fn read_stamped(&self) -> Result<Option<Loaded>, CacheError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&self.path, "read", e)),
        };
        let corrupt = |reason: String| CacheError::Corrupt {
            path: self.path.clone(),
            reason,
        };
        let file: CacheFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if file.version != VERSION {
            return Err(corrupt(format!(
                "format version {}, this edgenetd reads {VERSION}",
                file.version
            )));
        }
        let as_of = file.as_of();
        let state = ClusterState::try_from(file).map_err(corrupt)?;
        Ok(Some(Loaded { state, as_of }))
    }
}

fn io(path: &Path, op: &'static str, source: std::io::Error) -> CacheError {
    CacheError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

#[cfg(test)]
mod tests;
