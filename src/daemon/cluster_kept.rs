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
use std::time::SystemTime;

use log::{info, warn};

use crate::clock::rfc3339;
use crate::config::DesiredState;
use crate::config::fragments::load_with_fragments;
use crate::config::kubernetes::ConfigMapRef;
use crate::control::store::write_atomically;
use crate::kubernetes::config_map::Offer;
use crate::kubernetes::kept_config::{self, Kept};

pub use crate::kubernetes::kept_config::FILE;

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
        let bytes = kept_config::encode(&self.config_map, &self.node, offer, now);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("cluster-config".into())
            .spawn(move || me.write(seq, &bytes));
        if let Err(e) = spawned {
            warn!("cannot start a thread to keep the confirmed config_map version: {e}");
        }
    }

    /// Writes keep number `seq` unless a later one was written already.
    fn write(&self, seq: u64, bytes: &[u8]) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if seq < *written {
            return;
        }
        match self.write_now(bytes) {
            Ok(()) => *written = seq,
            Err(e) => warn!(
                "cannot keep the confirmed config_map version in {}: {e}; a restart without the API server runs the version kept before",
                self.path.display()
            ),
        }
    }

    fn write_now(&self, bytes: &[u8]) -> io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        write_atomically(&self.path, bytes, 0o600)
    }

    /// The version kept for this ConfigMap and node, if there is a usable one (a file that
    /// is not is named in a warning).
    pub fn restore(&self) -> Option<Kept> {
        kept_config::read(&self.path, &self.config_map, &self.node).unwrap_or_else(|why| {
            warn!("{}: not used: {why}", self.path.display());
            None
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
            log_in_force(&kept, config_map);
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

/// The log line of a start that runs `kept`.
fn log_in_force(kept: &Kept, source: &ConfigMapRef) {
    info!(
        "kubernetes config_map {source} at resourceVersion {}: {} fragment(s) restored from {} (confirmed {}) until the ConfigMap is listed",
        if kept.offer.version.is_empty() {
            "(none)"
        } else {
            &kept.offer.version
        },
        kept.offer.fragments.len(),
        kept.path.display(),
        rfc3339(kept.confirmed)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fragments::Fragment;
    use crate::kubernetes::kept_config::tests::cm;
    use std::time::{Duration, UNIX_EPOCH};

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
        let record = |v: &str| kept_config::encode(&cm("fleet"), "edge-1", &offer(v), UNIX_EPOCH);
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
