//! Which daemon a control socket and a state directory belong to: one instance per main
//! config file and network namespace.
//!
//! Two daemons on one host (a router that lives in a namespace beside the host's, a test
//! daemon beside the real one) must not share a control socket, or `edgenetd apply` changes
//! whichever daemon bound it first, nor a state directory, or one daemon's rollback is
//! restored over the other's config. The packaged daemon (main config
//! [`PACKAGED_CONFIG`], no `--netns`) keeps the paths its unit and tmpfiles.d set up; every
//! other instance gets its own pair, named after its netns and main config and a stable hash
//! of both. A client that names the same main config (`--target`) and netns derives the same
//! pair, so it reaches that daemon and no other.

use std::path::{Component, Path, PathBuf};

/// The main config file of the packaged daemon (and `--config`'s default).
pub const PACKAGED_CONFIG: &str = "/etc/edgenetd/edgenetd.toml";
/// The packaged daemon's control socket (its directory comes from tmpfiles.d).
pub const DEFAULT_SOCKET: &str = "/run/edgenetd/control.sock";
/// The packaged daemon's state directory (the unit's `StateDirectory=`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/edgenetd";
/// The control socket's file name in a derived runtime directory.
const SOCKET_NAME: &str = "control.sock";
/// Where derived runtime directories (`/run/edgenetd-ID`) and state directories
/// (`/var/lib/edgenetd-ID`) go: beside the packaged ones, never inside them.
const RUN_BASE: &str = "/run";
const STATE_BASE: &str = "/var/lib";
/// The longest netns or file-stem part of an instance name: a unix socket path has 108 bytes.
const PART_MAX: usize = 24;

/// One daemon's identity: its main config file and the namespace it programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The main config file, canonical (symlinks resolved), or absolute when it does not
    /// exist.
    pub config: PathBuf,
    /// `--netns`, if given.
    pub netns: Option<String>,
}

impl Instance {
    /// The instance that runs `config` (as given on the command line) in `netns`.
    pub fn new(config: &Path, netns: Option<&str>) -> Instance {
        Instance {
            config: canonical(config),
            netns: netns.map(str::to_string),
        }
    }

    /// Whether this is the packaged daemon, which keeps the unit's paths.
    pub fn is_packaged(&self) -> bool {
        self.netns.is_none() && self.config == canonical(Path::new(PACKAGED_CONFIG))
    }

    /// The name of a derived instance: `[NETNS-]STEM-HASH` (`None` for the packaged one).
    pub fn name(&self) -> Option<String> {
        if self.is_packaged() {
            return None;
        }
        let stem = self
            .config
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut key = self.config.as_os_str().as_encoded_bytes().to_vec();
        key.push(0);
        key.extend_from_slice(self.netns.as_deref().unwrap_or("").as_bytes());
        let hash = format!("{:08x}", fnv1a64(&key) as u32);
        let parts: Vec<String> = [self.netns.as_deref(), Some(stem.as_str()), Some(&hash)]
            .into_iter()
            .flatten()
            .map(safe_part)
            .filter(|p| !p.is_empty())
            .collect();
        Some(parts.join("-"))
    }

    /// The control socket this instance serves (and its clients connect to).
    pub fn control_socket(&self) -> PathBuf {
        match self.name() {
            None => PathBuf::from(DEFAULT_SOCKET),
            Some(name) => Path::new(RUN_BASE)
                .join(format!("edgenetd-{name}"))
                .join(SOCKET_NAME),
        }
    }

    /// The state directory this instance keeps its confirmed copy and pending deadline in.
    pub fn state_dir(&self) -> PathBuf {
        match self.name() {
            None => PathBuf::from(DEFAULT_STATE_DIR),
            Some(name) => Path::new(STATE_BASE).join(format!("edgenetd-{name}")),
        }
    }

    /// `netns`'s value as shown to the operator (`-` for the namespace edgenetd started in).
    pub fn netns_shown(&self) -> &str {
        self.netns.as_deref().unwrap_or("-")
    }
}

/// `path` with symlinks resolved; when it does not exist (yet), absolute with `.` and `..`
/// taken out by hand.
pub fn canonical(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A 64-bit FNV-1a hash: stable across builds and Rust versions (std's `DefaultHasher` is
/// not), so what one edgenetd writes another reads.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Letters, digits, `.`, `_` and `-` of `part`, at most [`PART_MAX`] of them.
fn safe_part(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(PART_MAX)
        .collect::<String>()
        .trim_start_matches('.')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packaged_daemon_keeps_the_units_paths() {
        let packaged = Instance::new(Path::new(PACKAGED_CONFIG), None);
        assert!(packaged.is_packaged());
        assert_eq!(packaged.control_socket(), Path::new(DEFAULT_SOCKET));
        assert_eq!(packaged.state_dir(), Path::new(DEFAULT_STATE_DIR));
    }

    /// Two daemons on one host shared /run/edgenetd/control.sock and /var/lib/edgenetd: the
    /// second ran without a socket and `apply` changed the first one's config.
    #[test]
    fn two_daemons_on_one_host_get_their_own_socket_and_state_directory() {
        let in_ns = Instance::new(Path::new(PACKAGED_CONFIG), Some("r1"));
        let test = Instance::new(Path::new("/tmp/x/edgenetd.toml"), None);
        let other_ns = Instance::new(Path::new(PACKAGED_CONFIG), Some("r2"));
        let mut sockets = vec![
            Instance::new(Path::new(PACKAGED_CONFIG), None).control_socket(),
            in_ns.control_socket(),
            test.control_socket(),
            other_ns.control_socket(),
        ];
        let mut states: Vec<_> = [&in_ns, &test, &other_ns]
            .iter()
            .map(|i| i.state_dir())
            .chain([PathBuf::from(DEFAULT_STATE_DIR)])
            .collect();
        for list in [&mut sockets, &mut states] {
            list.sort();
            list.dedup();
            assert_eq!(list.len(), 4, "{list:?}");
        }
        let socket = in_ns.control_socket().display().to_string();
        assert!(
            socket.starts_with("/run/edgenetd-r1-edgenetd-") && socket.ends_with("/control.sock"),
            "{socket}"
        );
        assert!(
            !in_ns.state_dir().starts_with(DEFAULT_STATE_DIR),
            "beside the packaged state directory, not in it"
        );
        // A client that names the same config and netns reaches the same daemon.
        let again = Instance::new(Path::new("/tmp/x/../x/edgenetd.toml"), None);
        assert_eq!(again.control_socket(), test.control_socket());
    }

    /// The derivation is a contract between versions (an older `apply` must find a newer
    /// daemon), and docs/operations.md shows this very path.
    #[test]
    fn the_derived_path_is_stable() {
        let i = Instance::new(Path::new("/srv/r1/edgenetd.toml"), Some("r1"));
        assert_eq!(
            i.control_socket(),
            Path::new("/run/edgenetd-r1-edgenetd-1dde13ed/control.sock")
        );
        assert_eq!(
            i.state_dir(),
            Path::new("/var/lib/edgenetd-r1-edgenetd-1dde13ed")
        );
    }

    #[test]
    fn odd_names_make_short_safe_paths() {
        let long = "n".repeat(300);
        let i = Instance::new(Path::new("/tmp/a b/../..conf*.toml"), Some(&long));
        let socket = i.control_socket().display().to_string();
        assert!(socket.len() < 108, "{socket}");
        assert!(!socket.contains(' ') && !socket.contains('*'), "{socket}");
    }

    #[test]
    fn the_hash_is_fnv1a() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
