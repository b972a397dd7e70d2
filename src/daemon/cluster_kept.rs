//! The fragments of the `[kubernetes] config_map` version last confirmed, kept in the state
//! directory (`cluster-config.json`, written atomically and fsynced), so that a router
//! restarted or rebooted while its API server (or its node's proxy) is unreachable comes
//! up with them in force, as it ran before, and not with its local files alone.
//!
//! Only a confirmed version is kept: one that waits for its confirm, or was rolled back,
//! never is (a restart must not be the way back to a version that cut the router off). The
//! file names the ConfigMap and the node it was taken for; a file for another ConfigMap or
//! node, or one that cannot be read, is not used (with a warning), nor is one whose
//! fragments no longer load with the local files: the local files alone are then in force
//! until the ConfigMap is listed, as without the file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{info, warn};
use serde::{Deserialize, Serialize};

use crate::clock::rfc3339;
use crate::config::DesiredState;
use crate::config::fragments::{Fragment, load_with_fragments};
use crate::config::kubernetes::ConfigMapRef;
use crate::control::store::write_atomically;
use crate::kubernetes::config_map::Offer;

/// The file's name in the state directory.
pub const FILE: &str = "cluster-config.json";

/// The format written; a file of another format is not used.
const FORMAT: u32 = 1;

/// The file, as written.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// [`FORMAT`].
    format: u32,
    /// `namespace/name` of the ConfigMap.
    config_map: String,
    /// The node the keys were taken for.
    node: String,
    /// The confirmed version's resourceVersion (empty: no such ConfigMap).
    resource_version: String,
    /// When it was confirmed (seconds since the epoch).
    confirmed_unix: u64,
    /// Its fragments, in merge order.
    fragments: Vec<KeptFragment>,
}

/// One fragment, as written.
#[derive(Debug, Serialize, Deserialize)]
struct KeptFragment {
    /// What it is shown as (`configmap:NS/NAME:KEY`).
    name: String,
    /// Its TOML text.
    text: String,
}

/// A confirmed version read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The version and its fragments.
    pub offer: Offer,
    /// When it was confirmed.
    pub confirmed: SystemTime,
    /// The file it came from.
    pub path: PathBuf,
}

/// Keeps the confirmed versions of one ConfigMap for one node in one state directory.
#[derive(Debug)]
pub struct Keeper {
    /// The file.
    path: PathBuf,
    /// The ConfigMap.
    config_map: ConfigMapRef,
    /// The node.
    node: String,
    /// Numbers the keeps in the order the versions were confirmed.
    next: AtomicU64,
    /// The number of the keep last written: a later one is never overwritten by an
    /// earlier one whose thread ran late.
    written: Mutex<u64>,
}

impl Keeper {
    /// The keeper of `config_map`'s versions for `node` in `state_dir`.
    pub fn new(state_dir: &Path, config_map: ConfigMapRef, node: String) -> Keeper {
        Keeper {
            path: state_dir.join(FILE),
            config_map,
            node,
            next: AtomicU64::new(0),
            written: Mutex::new(0),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps `offer`, just confirmed, on a short-lived thread of its own (an fsync on slow
    /// flash must not stall the daemon's executor). A failure is logged: the router runs
    /// on, and a restart without the API server then runs the version kept before.
    pub fn keep(self: &Arc<Self>, offer: &Offer, now: SystemTime) {
        let seq = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let record = Record {
            format: FORMAT,
            config_map: self.config_map.to_string(),
            node: self.node.clone(),
            resource_version: offer.version.clone(),
            confirmed_unix: now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
            fragments: offer
                .fragments
                .iter()
                .map(|f| KeptFragment {
                    name: f.name.clone(),
                    text: f.text.clone(),
                })
                .collect(),
        };
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("cluster-config".into())
            .spawn(move || me.write(seq, &record));
        if let Err(e) = spawned {
            warn!("cannot start a thread to keep the confirmed config_map version: {e}");
        }
    }

    /// Writes keep number `seq` unless a later one was written already.
    fn write(&self, seq: u64, record: &Record) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if seq < *written {
            return;
        }
        match self.write_now(record) {
            Ok(()) => *written = seq,
            Err(e) => warn!(
                "cannot keep the confirmed config_map version in {}: {e}; a restart without the API server runs the version kept before",
                self.path.display()
            ),
        }
    }

    fn write_now(&self, record: &Record) -> io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let bytes = serde_json::to_vec(record)?;
        write_atomically(&self.path, &bytes, 0o600)
    }

    /// The version kept for this ConfigMap and node, if there is a usable one (a file that
    /// is not is named in a warning).
    pub fn restore(&self) -> Option<Restored> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                warn!("{}: not used: {e}", self.path.display());
                return None;
            }
        };
        let record: Record = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => {
                warn!(
                    "{}: not used: not a kept config_map version: {e}",
                    self.path.display()
                );
                return None;
            }
        };
        let wanted = self.config_map.to_string();
        let why = if record.format != FORMAT {
            Some(format!("format {}, not {FORMAT}", record.format))
        } else if record.config_map != wanted {
            Some(format!(
                "kept for configmap {}, not {wanted}",
                record.config_map
            ))
        } else if record.node != self.node {
            Some(format!("kept for node {}, not {}", record.node, self.node))
        } else {
            None
        };
        if let Some(why) = why {
            warn!("{}: not used: {why}", self.path.display());
            return None;
        }
        let confirmed = UNIX_EPOCH + Duration::from_secs(record.confirmed_unix);
        Some(Restored {
            offer: Offer {
                version: record.resource_version,
                fragments: record
                    .fragments
                    .into_iter()
                    .map(|f| Fragment {
                        name: f.name,
                        text: f.text,
                    })
                    .collect(),
                skipped: Vec::new(),
            },
            confirmed,
            path: self.path.clone(),
        })
    }
}

/// Where a start finds the kept version: the main config file and the state directory.
#[derive(Debug, Clone, Copy)]
pub struct Restore<'a> {
    /// The main config file (loaded again with the kept fragments).
    pub main: &'a Path,
    /// The state directory.
    pub state_dir: &'a Path,
}

/// What a start runs with a kept version.
pub struct AtStart {
    /// The local files' state, with the kept fragments when they load with them.
    pub toml: Arc<DesiredState>,
    /// Keeps the versions confirmed from now on.
    pub keeper: Arc<Keeper>,
    /// The version restored, and the keys the local files kept of it.
    pub restored: Option<(Offer, Vec<String>)>,
}

/// The start's state: `toml` (the local files alone) with the fragments of the version kept
/// for `config_map` and `node` in `restore.state_dir`, when there is one and it loads with
/// the local files (else the local files alone, with a warning naming the problems).
pub fn at_start(
    restore: Restore<'_>,
    config_map: &ConfigMapRef,
    node: &str,
    toml: Arc<DesiredState>,
) -> AtStart {
    let keeper = Arc::new(Keeper::new(
        restore.state_dir,
        config_map.clone(),
        node.to_string(),
    ));
    let Some(kept) = keeper.restore() else {
        return AtStart {
            toml,
            keeper,
            restored: None,
        };
    };
    let loaded = load_with_fragments(restore.main, &kept.offer.fragments)
        .map_err(|r| r.error)
        .and_then(|l| Ok((super::includes::vet(l.state)?, l.shadowed)));
    match loaded {
        Ok((state, shadowed)) => {
            kept.log_in_force(config_map);
            AtStart {
                toml: Arc::new(state),
                keeper,
                restored: Some((kept.offer, shadowed)),
            }
        }
        Err(e) => {
            warn!(
                "{}: the kept config_map version {} does not load with the local files ({} problem(s)); the local files alone are in force until the ConfigMap is listed:",
                kept.path.display(),
                kept.offer.version,
                e.count
            );
            for line in e.rendered.lines() {
                warn!("  {line}");
            }
            AtStart {
                toml,
                keeper,
                restored: None,
            }
        }
    }
}

impl Restored {
    /// The log line of a start that runs it.
    pub fn log_in_force(&self, source: &ConfigMapRef) {
        info!(
            "kubernetes config_map {source} at resourceVersion {}: {} fragment(s) restored from {} (confirmed {}) until the ConfigMap is listed",
            if self.offer.version.is_empty() {
                "(none)"
            } else {
                &self.offer.version
            },
            self.offer.fragments.len(),
            self.path.display(),
            rfc3339(self.confirmed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ConfigMapRef {
        ConfigMapRef {
            namespace: "kube-system".into(),
            name: name.into(),
        }
    }

    fn offer(version: &str) -> Offer {
        Offer {
            version: version.into(),
            fragments: vec![Fragment {
                name: "configmap:kube-system/fleet:00_base.toml".into(),
                text: "[[route]]\nto = \"10.40.0.0/16\"\ntype = \"blackhole\"\n".into(),
            }],
            skipped: Vec::new(),
        }
    }

    /// Waits for the keeper's threads (tests only).
    fn settled(k: &Keeper, seq: u64) {
        for _ in 0..500 {
            if *k.written.lock().unwrap() >= seq {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("keep {seq} not written");
    }

    #[test]
    fn a_kept_version_comes_back_for_its_config_map_and_node_only() {
        let dir = tempdir();
        let keeper = Arc::new(Keeper::new(&dir, cm("fleet"), "edge-1".into()));
        assert_eq!(keeper.restore(), None, "nothing kept yet");
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        keeper.keep(&offer("41"), at);
        keeper.keep(&offer("42"), at);
        settled(&keeper, 2);
        let back = keeper.restore().expect("kept");
        assert_eq!(back.offer, offer("42"), "the last confirmed");
        assert_eq!(back.confirmed, at);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join(FILE)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "fragments are the router's firewall");
        assert_eq!(
            Keeper::new(&dir, cm("other"), "edge-1".into()).restore(),
            None,
            "another ConfigMap's"
        );
        assert_eq!(
            Keeper::new(&dir, cm("fleet"), "edge-2".into()).restore(),
            None,
            "another node's keys"
        );
        std::fs::write(dir.join(FILE), b"{\"format\": 1, \"config_map\": ").unwrap();
        assert_eq!(keeper.restore(), None, "a torn file is not used");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bug_a_late_thread_of_an_earlier_confirm_does_not_overwrite_a_later_one() {
        let dir = tempdir();
        let keeper = Keeper::new(&dir, cm("fleet"), "edge-1".into());
        let record = |v: &str| Record {
            format: FORMAT,
            config_map: "kube-system/fleet".into(),
            node: "edge-1".into(),
            resource_version: v.into(),
            confirmed_unix: 0,
            fragments: Vec::new(),
        };
        keeper.write(2, &record("new"));
        keeper.write(1, &record("old"));
        assert_eq!(keeper.restore().unwrap().offer.version, "new");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_kept_version_that_no_longer_loads_with_the_local_files_leaves_them_alone_in_force() {
        let dir = tempdir();
        let main = dir.join("edgenetd.toml");
        std::fs::write(
            &main,
            "[[route]]\nto = \"10.40.0.0/16\"\ntype = \"blackhole\"\n",
        )
        .unwrap();
        let restore = Restore {
            main: &main,
            state_dir: &dir,
        };
        let local = Arc::new(crate::config::load(&main).unwrap());
        let keeper = Arc::new(Keeper::new(&dir, cm("fleet"), "edge-1".into()));
        // The local files now have the route the kept fragment adds: together they clash.
        keeper.keep(&offer("42"), SystemTime::now());
        settled(&keeper, 1);
        let start = at_start(restore, &cm("fleet"), "edge-1", local.clone());
        assert!(start.restored.is_none());
        assert!(Arc::ptr_eq(&start.toml, &local), "the local files alone");
        // Without the clash, the fragment joins them.
        std::fs::write(&main, "# nothing local\n").unwrap();
        let local = Arc::new(crate::config::load(&main).unwrap());
        let start = at_start(restore, &cm("fleet"), "edge-1", local);
        let (offer, _) = start.restored.expect("restored");
        assert_eq!(offer.version, "42");
        assert_eq!(start.toml.routing.routes.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        use std::sync::atomic::AtomicUsize;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "edgenetd-kept-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
