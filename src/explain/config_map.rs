//! The fragments of `[kubernetes] config_map` in what `explain` evaluates: the version the
//! daemon last confirmed, as it keeps it in its state directory (`cluster-config.json`), read
//! and loaded after the local files as the daemon loads it. Without it an answer for a
//! router whose firewall comes partly from the cluster would be an answer for its local
//! files alone. A version still waiting for its confirm is not kept, so not in the answer;
//! the line says which version is.

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

use crate::config::DesiredState;

/// Which version of the ConfigMap the answer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `namespace/name`.
    pub name: String,
    /// The kept file looked for.
    pub path: PathBuf,
    /// The version in the answer and when it was confirmed (`None`: the local files alone).
    pub kept: Option<(String, String)>,
    /// Why a kept file was not used (unreadable, another ConfigMap or node, or it no longer
    /// loads with the local files).
    pub not_used: Option<String>,
}

impl Source {
    /// The line the text answer starts with.
    pub fn line(&self) -> String {
        let path = self.path.display();
        match (&self.kept, &self.not_used) {
            (Some((version, at)), _) => format!(
                "config map   {} version {} confirmed {at}, kept in {path} (a version waiting for its confirm is not in this answer)",
                self.name,
                shown(version)
            ),
            (None, Some(why)) => format!(
                "config map   {}: {path} not used: {why}: the local files alone",
                self.name
            ),
            (None, None) => format!(
                "config map   {}: no confirmed version kept in {path}: the local files alone",
                self.name
            ),
        }
    }

    /// The `configMap` object of `--json`.
    pub fn json(&self) -> Json {
        json!({
            "name": self.name,
            "path": self.path.display().to_string(),
            "found": self.kept.is_some(),
            "resourceVersion": self.kept.as_ref().map(|(v, _)| v),
            "confirmed": self.kept.as_ref().map(|(_, at)| at),
            "notUsed": self.not_used,
        })
    }
}

/// A resourceVersion as shown: `(none)` for a ConfigMap that did not exist.
fn shown(version: &str) -> &str {
    if version.is_empty() {
        "(none)"
    } else {
        version
    }
}

/// `desired` (loaded from `main`) with the fragments of the version kept in `state_dir`
/// when its config has a `config_map`; unchanged, with no source, when it has none.
#[cfg(feature = "kubernetes")]
pub fn load(
    desired: DesiredState,
    main: &Path,
    state_dir: &Path,
) -> (DesiredState, Option<Source>) {
    use crate::clock::rfc3339;
    use crate::config::fragments::load_with_fragments;
    use crate::kubernetes::kept_config::{self, FILE};

    let Some(k8s) = desired.kubernetes.as_ref() else {
        return (desired, None);
    };
    let Some(cm) = k8s.config_map.clone() else {
        return (desired, None);
    };
    let mut source = Source {
        name: cm.to_string(),
        path: state_dir.join(FILE),
        kept: None,
        not_used: None,
    };
    let node = match crate::kubernetes::watch::local::node_name(k8s.node_name.as_deref()) {
        Ok(node) => node,
        Err(why) => {
            source.not_used = Some(why.to_string());
            return (desired, Some(source));
        }
    };
    let kept = match kept_config::read(&source.path, &cm, &node) {
        Ok(Some(kept)) => kept,
        Ok(None) => return (desired, Some(source)),
        Err(why) => {
            source.not_used = Some(why);
            return (desired, Some(source));
        }
    };
    match load_with_fragments(main, &kept.offer.fragments) {
        Ok(loaded) => {
            source.kept = Some((kept.offer.version, rfc3339(kept.confirmed)));
            (loaded.state, Some(source))
        }
        Err(rejected) => {
            source.not_used = Some(format!(
                "version {} does not load with the local files ({} problem(s), the first: {})",
                shown(&kept.offer.version),
                rejected.error.count,
                rejected.error.rendered.lines().next().unwrap_or("")
            ));
            (desired, Some(source))
        }
    }
}

/// Without the `kubernetes` feature a config has no `config_map` a daemon runs.
#[cfg(not(feature = "kubernetes"))]
pub fn load(
    desired: DesiredState,
    _main: &Path,
    _state_dir: &Path,
) -> (DesiredState, Option<Source>) {
    (desired, None)
}

#[cfg(all(test, feature = "kubernetes"))]
mod tests {
    use super::*;
    use crate::config::fragments::Fragment;
    use crate::kubernetes::config_map::Offer;
    use crate::kubernetes::kept_config::tests::cm;
    use crate::kubernetes::kept_config::{FILE, encode};
    use std::time::{Duration, UNIX_EPOCH};

    const MAIN: &str = "[kubernetes]\nserver = \"http://127.0.0.1:10550\"\nnode_name = \"edge-1\"\nconfig_map = \"kube-system/fleet\"\n";

    fn kept(dir: &Path, node: &str, route: &str) {
        let offer = Offer {
            version: "42".into(),
            fragments: vec![Fragment {
                name: "configmap:kube-system/fleet:00_base.toml".into(),
                text: format!("[[route]]\nto = {route:?}\ntype = \"blackhole\"\n"),
            }],
            skipped: Vec::new(),
        };
        let cm = cm("fleet");
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        std::fs::write(dir.join(FILE), encode(&cm, node, &offer, at)).unwrap();
    }

    fn run(main_text: &str, setup: impl FnOnce(&Path)) -> (DesiredState, Option<Source>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "edgenetd-explain-cm-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("edgenetd.toml");
        std::fs::write(&main, main_text).unwrap();
        setup(&dir);
        let desired = crate::config::load(&main).unwrap();
        let out = load(desired, &main, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        out
    }

    #[test]
    fn the_kept_version_joins_the_local_files_and_is_named() {
        let (desired, source) = run(MAIN, |d| kept(d, "edge-1", "10.77.0.0/16"));
        assert_eq!(desired.routing.routes.len(), 1);
        let line = source.unwrap().line();
        assert!(
            line.starts_with(
                "config map   kube-system/fleet version 42 confirmed 2027-01-15T08:00:00.000Z, kept in "
            ),
            "{line}"
        );
    }

    #[test]
    fn without_a_usable_version_the_local_files_alone_and_why() {
        let (desired, source) = run(MAIN, |_| {});
        assert!(desired.routing.routes.is_empty());
        let line = source.unwrap().line();
        assert!(line.contains("no confirmed version kept in"), "{line}");

        let (desired, source) = run(MAIN, |d| kept(d, "edge-2", "10.77.0.0/16"));
        assert!(desired.routing.routes.is_empty());
        let line = source.unwrap().line();
        assert!(
            line.contains("not used: kept for node edge-2, not edge-1"),
            "{line}"
        );

        let local_route = "[[route]]\nto = \"10.77.0.0/16\"\ntype = \"blackhole\"\n";
        let (desired, source) = run(&format!("{local_route}{MAIN}"), |d| {
            kept(d, "edge-1", "10.77.0.0/16")
        });
        assert_eq!(desired.routing.routes.len(), 1, "the local route alone");
        let source = source.unwrap();
        let why = source.not_used.clone().unwrap();
        assert!(
            why.starts_with("version 42 does not load with the local files (1 problem(s)"),
            "{why}"
        );
        assert_eq!(source.json()["found"], false);
    }

    #[test]
    fn a_config_without_config_map_reads_nothing() {
        let main = "[kubernetes]\nserver = \"http://127.0.0.1:10550\"\nnode_name = \"edge-1\"\n";
        let (_, source) = run(main, |d| kept(d, "edge-1", "10.77.0.0/16"));
        assert_eq!(source, None);
    }
}
