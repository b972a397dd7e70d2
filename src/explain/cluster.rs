//! The cluster's part of what a router programs, for `explain`: the state the daemon keeps
//! in its cache file (`[kubernetes] cache_file`, or `--cluster-state`), composed with the
//! config as the daemon composes it. The daemon writes the file when its state is first
//! complete, then at most every 5 s after a change, so it lags the kernel by that at most.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};

use crate::config::DesiredState;

/// Where the cluster state came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// How long ago it was last known to be the cluster's (`None`: not stamped, or no file).
    pub age: Option<Duration>,
    /// False when there was no file (explain then runs on the config alone).
    pub found: bool,
}

impl Source {
    /// The line the text answer starts with.
    pub fn line(&self) -> String {
        match (self.found, self.age) {
            (false, _) => format!(
                "cluster      no cluster state at {}: the config alone (is the daemon running with [kubernetes]?)",
                self.path.display()
            ),
            (true, Some(age)) => format!(
                "cluster      state of {} ({} s old)",
                self.path.display(),
                age.as_secs()
            ),
            (true, None) => format!(
                "cluster      state of {} (age unknown)",
                self.path.display()
            ),
        }
    }

    /// The `cluster` object of `--json`.
    pub fn json(&self) -> Json {
        json!({
            "path": self.path.display().to_string(),
            "found": self.found,
            "ageSeconds": self.age.map(|a| a.as_secs()),
        })
    }
}

/// `desired` with the cluster state composed in, read from `flag` or from the config's
/// `[kubernetes] cache_file` (its default path without the key); unchanged, with no source,
/// when the config has no `[kubernetes]` and no file is given. An unreadable file is an
/// error: an answer without the state the router runs would mislead.
#[cfg(feature = "kubernetes")]
pub fn compose(
    desired: DesiredState,
    flag: Option<&Path>,
) -> Result<(DesiredState, Option<Source>), String> {
    use crate::kubernetes::cache::{Cache, DEFAULT_PATH};
    use crate::kubernetes::compose::Composer;
    use std::sync::Arc;

    let configured = desired.kubernetes.as_ref().map(|k| {
        k.cache_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
    });
    let Some(path) = flag.map(Path::to_path_buf).or(configured) else {
        return Ok((desired, None));
    };
    let loaded = Cache::new(&path)
        .read_stamped()
        .map_err(|e| e.to_string())?;
    let Some(loaded) = loaded else {
        if flag.is_some() {
            return Err(format!("--cluster-state {}: no such file", path.display()));
        }
        let source = Source {
            path,
            age: None,
            found: false,
        };
        return Ok((desired, Some(source)));
    };
    let now = std::time::SystemTime::now();
    let age = loaded
        .as_of
        .map(|t| now.duration_since(t).unwrap_or(Duration::ZERO));
    let (_, first) = Composer::start(Arc::new(desired), Some(loaded.state));
    let composed = Arc::try_unwrap(first).unwrap_or_else(|shared| (*shared).clone());
    let source = Source {
        path,
        age,
        found: true,
    };
    Ok((composed, Some(source)))
}

/// Without the `kubernetes` feature there is no cluster state to read: asking for one is an
/// error, and a config's `[kubernetes]` (which such a build does not run) adds nothing.
#[cfg(not(feature = "kubernetes"))]
pub fn compose(
    desired: DesiredState,
    flag: Option<&Path>,
) -> Result<(DesiredState, Option<Source>), String> {
    match flag {
        Some(_) => {
            Err("--cluster-state: this edgenetd is built without the kubernetes feature".into())
        }
        None => Ok((desired, None)),
    }
}
