//! A scratch directory per test and tag, holding config files; removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Numbers the scratch dirs of this process, so two with the same tag never share one.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, unique to this process.
pub struct ScratchDir {
    /// The directory.
    path: PathBuf,
}

impl ScratchDir {
    /// Creates `edgenetd-test-<tag>-<pid>-<n>`, empty.
    pub fn new(tag: &str) -> ScratchDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let path = std::env::temp_dir().join(format!("edgenetd-test-{tag}-{pid}-{n}"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        ScratchDir { path }
    }

    /// A scratch dir with `files` (relative paths, parent directories created) written in it.
    pub fn with_files(tag: &str, files: &[(&str, &str)]) -> ScratchDir {
        let dir = ScratchDir::new(tag);
        for (name, text) in files {
            dir.write(name, text);
        }
        dir
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The main config file, `edgenetd.toml`.
    pub fn config(&self) -> PathBuf {
        self.join("edgenetd.toml")
    }

    /// Writes `name` (creating its parent directories).
    pub fn write(&self, name: &str, text: &str) {
        let file = self.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    /// Replaces `name` atomically (write beside it, rename over), as an editor saves.
    pub fn replace(&self, name: &str, text: &str) {
        let tmp = self.join(&format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.join(name)).unwrap();
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
