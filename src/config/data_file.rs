//! The data files a config names (`loadfile` of a `[policy.set.*]`, fw4's ipset `loadfile`):
//! read once per path at load time, bounded and checked as UTF-8 like a config file, and never
//! parsed as TOML (their lines are the set's elements).
//!
//! A load of kept texts (the last good copy) serves them from those texts and never from
//! disk: the file on disk may be what broke the config that start could not load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{limits, text};

/// Where one load takes its data files from, and what it read.
#[derive(Debug, Default)]
pub struct DataFiles {
    /// The texts a load of kept texts serves (taken out as they are used); `None`: the disk.
    kept: Option<BTreeMap<PathBuf, String>>,
    /// What this load read, in the order first asked for.
    read: Vec<(PathBuf, String)>,
    /// Every path asked for, read or not, in the order first asked for.
    named: Vec<PathBuf>,
    /// Bytes of the data files read so far, against [`limits::MAX_DATA_TOTAL_BYTES`].
    total: u64,
}

impl DataFiles {
    /// Data files read from disk.
    pub fn from_disk() -> DataFiles {
        DataFiles::default()
    }

    /// Data files served from `kept` (path, text) only.
    pub fn from_kept(kept: &[(PathBuf, String)]) -> DataFiles {
        DataFiles {
            kept: Some(kept.iter().cloned().collect()),
            ..DataFiles::default()
        }
    }

    /// The text of the data file at `path` (absolute), or why there is none: a message for the
    /// key that names it. A path asked for twice is read once.
    pub fn text(&mut self, path: &Path) -> Result<&str, String> {
        if let Some(i) = self.read.iter().position(|(p, _)| p == path) {
            return Ok(&self.read[i].1);
        }
        if !self.named.iter().any(|p| p == path) {
            self.named.push(path.to_path_buf());
        }
        let text = match &mut self.kept {
            Some(kept) => kept.remove(path).ok_or_else(|| {
                format!(
                    "{}: not in the kept copy of the configuration",
                    path.display()
                )
            })?,
            None => self.read_disk(path)?,
        };
        self.total += text.len() as u64;
        self.read.push((path.to_path_buf(), text));
        Ok(&self.read.last().expect("just pushed").1)
    }

    fn read_disk(&self, path: &Path) -> Result<String, String> {
        let shown = path.display();
        // A FIFO or a device would block the read, or never end: only regular files.
        if let Ok(meta) = std::fs::metadata(path)
            && !meta.is_file()
        {
            return Err(format!("{shown}: not a regular file"));
        }
        match text::read_at_most(path, limits::data_budget(self.total)) {
            text::FileText::Text(t) => Ok(t),
            text::FileText::NotUtf8 {
                shown: head,
                at,
                byte,
            } => {
                let before = &head[..at];
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
                Err(format!(
                    "{shown}:{line}:{column}: not UTF-8 text: invalid byte at offset {byte}"
                ))
            }
            text::FileText::TooLarge { size, at_least } => Err(format!(
                "{shown}: {}",
                limits::data_size_message(size, at_least, self.total)
            )),
            text::FileText::Unreadable(why) => Err(format!("{shown}: {why}")),
        }
    }

    /// What this load read, (path, text), in the order first asked for.
    pub fn into_read(self) -> Vec<(PathBuf, String)> {
        self.read
    }

    /// Every data file this load asked for, read or not.
    pub fn named(&self) -> &[PathBuf] {
        &self.named
    }
}

/// The elements of a data file's `text`: (line, column, element) of each line that holds one,
/// 1-based; `#` starts a comment, blank lines hold none.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let content = line.split('#').next().unwrap_or("");
        let element = content.trim();
        if element.is_empty() {
            return None;
        }
        let lead = content.len() - content.trim_start().len();
        let column = content[..lead].chars().count() + 1;
        Some((i + 1, column, element))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_blank_lines_hold_no_element_and_columns_count_from_one() {
        let text = "# blocklist\n192.0.2.1\n\n  198.51.100.0/24  # a net\n\t#\n2001:db8::1\r\n";
        let got: Vec<_> = lines(text).collect();
        assert_eq!(
            got,
            [
                (2, 1, "192.0.2.1"),
                (4, 3, "198.51.100.0/24"),
                (6, 1, "2001:db8::1")
            ]
        );
    }

    #[test]
    fn kept_data_files_are_served_without_the_disk_and_others_are_missing() {
        let gone = PathBuf::from("/nonexistent/edgenetd/blocklist.txt");
        let mut data = DataFiles::from_kept(&[(gone.clone(), "192.0.2.1\n".into())]);
        assert_eq!(data.text(&gone).unwrap(), "192.0.2.1\n");
        assert_eq!(data.text(&gone).unwrap(), "192.0.2.1\n", "asked twice");
        let e = data.text(Path::new("/etc/passwd")).unwrap_err();
        assert!(e.contains("not in the kept copy"), "{e}");
        assert_eq!(data.into_read(), [(gone, "192.0.2.1\n".to_string())]);
    }

    #[test]
    fn a_data_file_that_is_not_a_regular_file_is_refused_unopened() {
        let e = DataFiles::from_disk()
            .text(Path::new("/dev/zero"))
            .unwrap_err();
        assert_eq!(e, "/dev/zero: not a regular file");
        let e = DataFiles::from_disk().text(Path::new("/tmp")).unwrap_err();
        assert_eq!(e, "/tmp: not a regular file");
    }

    #[test]
    fn a_data_file_over_its_limit_is_refused_unread() {
        let e = DataFiles::from_disk()
            .read_disk(Path::new("/proc/self/status"))
            .map(|_| ());
        assert!(e.is_ok(), "a small file reads: {e:?}");
        let mut data = DataFiles::from_disk();
        data.total = limits::MAX_DATA_TOTAL_BYTES - 3;
        let e = data.read_disk(Path::new("/proc/self/status")).unwrap_err();
        assert!(
            e.starts_with("/proc/self/status: the data file is at least 4 bytes"),
            "{e}"
        );
        assert!(e.contains("for all data files of one load"), "{e}");
    }
}
