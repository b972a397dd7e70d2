//! The file that keeps the `[kubernetes] config_map` version last confirmed
//! (`cluster-config.json` in the state directory): its format, written by the daemon's
//! keeper and read back by a start without the API server and by `edgenetd explain`, so
//! both take the same version the same way.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::fragments::Fragment;
use crate::config::kubernetes::ConfigMapRef;
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
pub struct Kept {
    /// The version and its fragments.
    pub offer: Offer,
    /// When it was confirmed.
    pub confirmed: SystemTime,
    /// The file it came from.
    pub path: PathBuf,
}

/// The bytes that keep `offer`, `config_map`'s version taken for `node`, confirmed at `at`.
pub fn encode(config_map: &ConfigMapRef, node: &str, offer: &Offer, at: SystemTime) -> Vec<u8> {
    let record = Record {
        format: FORMAT,
        config_map: config_map.to_string(),
        node: node.to_string(),
        resource_version: offer.version.clone(),
        confirmed_unix: at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
        fragments: offer
            .fragments
            .iter()
            .map(|f| KeptFragment {
                name: f.name.clone(),
                text: f.text.clone(),
            })
            .collect(),
    };
    serde_json::to_vec(&record).expect("strings and numbers encode")
}

/// The version kept in `path` for `config_map` and `node`: `Ok(None)` when there is no
/// file; an error (why it is not used) for a file that cannot be read, is not one, or was
/// kept for another ConfigMap, node or format.
pub fn read(path: &Path, config_map: &ConfigMapRef, node: &str) -> Result<Option<Kept>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let record: Record = serde_json::from_slice(&bytes)
        .map_err(|e| format!("not a kept config_map version: {e}"))?;
    let wanted = config_map.to_string();
    if record.format != FORMAT {
        return Err(format!("format {}, not {FORMAT}", record.format));
    }
    if record.config_map != wanted {
        return Err(format!(
            "kept for configmap {}, not {wanted}",
            record.config_map
        ));
    }
    if record.node != node {
        return Err(format!("kept for node {}, not {node}", record.node));
    }
    Ok(Some(Kept {
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
        confirmed: UNIX_EPOCH + Duration::from_secs(record.confirmed_unix),
        path: path.to_path_buf(),
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `kube-system/NAME` (the tests of the keeper and of explain share it).
    pub(crate) fn cm(name: &str) -> ConfigMapRef {
        ConfigMapRef {
            namespace: "kube-system".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_version_reads_back_for_its_config_map_node_and_format_only() {
        let dir = std::env::temp_dir().join(format!("edgenetd-kept-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE);
        assert_eq!(read(&path, &cm("fleet"), "edge-1"), Ok(None), "no file");
        let offer = Offer {
            version: "42".into(),
            fragments: vec![Fragment {
                name: "configmap:kube-system/fleet:edge-1.toml".into(),
                text: "# mine\n".into(),
            }],
            skipped: Vec::new(),
        };
        let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        std::fs::write(&path, encode(&cm("fleet"), "edge-1", &offer, at)).unwrap();
        let back = read(&path, &cm("fleet"), "edge-1").unwrap().unwrap();
        assert_eq!((back.offer, back.confirmed), (offer, at));
        let other = read(&path, &cm("other"), "edge-1").unwrap_err();
        assert!(
            other.contains("kept for configmap kube-system/fleet"),
            "{other}"
        );
        let node = read(&path, &cm("fleet"), "edge-2").unwrap_err();
        assert!(node.contains("kept for node edge-1, not edge-2"), "{node}");
        let text = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        std::fs::write(&path, text.replace("\"format\":1", "\"format\":2")).unwrap();
        assert_eq!(
            read(&path, &cm("fleet"), "edge-1"),
            Err("format 2, not 1".to_string())
        );
        std::fs::write(&path, b"{\"format\": 1, \"config_map\": ").unwrap();
        let torn = read(&path, &cm("fleet"), "edge-1").unwrap_err();
        assert!(torn.starts_with("not a kept config_map version"), "{torn}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
