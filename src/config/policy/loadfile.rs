//! A set's `loadfile` (fw4's ipset `loadfile`): more elements from a data file, one a line.
//! The file is read at load time (see `data_file`); every problem of it is reported at the
//! `loadfile` key, a bad line's message naming its place in the data file.

use std::path::Path;

use toml::Spanned;

use super::super::data_file::{self, DataFiles};
use super::super::diag::Diagnostics;

/// The bad lines of one data file reported one by one; the rest are counted.
pub(super) const SHOWN_BAD_LINES: usize = 20;

/// A data file that was read: its text, and the key that named it.
pub(super) struct LoadFile<'k, 'd> {
    /// The `loadfile` key's value (where its problems are reported).
    key: &'k Spanned<String>,
    /// The file's path.
    path: &'k Path,
    /// The file's text (as `data` keeps it: not copied, it may be megabytes).
    text: &'d str,
}

impl<'k, 'd> LoadFile<'k, 'd> {
    /// Reads the file `key` names; `None` when it cannot be (reported at `key`).
    pub(super) fn read(
        key: &'k Spanned<String>,
        data: &'d mut DataFiles,
        diags: &mut Diagnostics,
    ) -> Option<LoadFile<'k, 'd>> {
        let path = Path::new(key.get_ref());
        if !path.is_absolute() {
            diags.error(
                key.span(),
                format!(
                    "`loadfile` must be an absolute path: `{}` is relative, and would depend on the daemon's working directory",
                    key.get_ref()
                ),
            );
            return None;
        }
        match data.text(path) {
            Ok(text) => Some(LoadFile { key, path, text }),
            Err(why) => {
                diags.error(key.span(), why);
                None
            }
        }
    }

    /// The file's elements as `parse` reads them; each bad line is reported at the key as
    /// `PATH:LINE:COLUMN: why` (the first [`SHOWN_BAD_LINES`], then how many more).
    pub(super) fn elements<T>(
        &self,
        parse: impl Fn(&str) -> Result<T, String>,
        diags: &mut Diagnostics,
    ) -> Vec<T> {
        let mut out = Vec::new();
        let mut bad = 0usize;
        for (line, column, element) in data_file::lines(self.text) {
            match parse(element) {
                Ok(v) => out.push(v),
                Err(why) => {
                    bad += 1;
                    if bad <= SHOWN_BAD_LINES {
                        diags.error(
                            self.key.span(),
                            format!("{}:{line}:{column}: {why}", self.path.display()),
                        );
                    }
                }
            }
        }
        if bad > SHOWN_BAD_LINES {
            diags.error(
                self.key.span(),
                format!(
                    "{}: and {} more bad line(s) (the first {SHOWN_BAD_LINES} are shown)",
                    self.path.display(),
                    bad - SHOWN_BAD_LINES
                ),
            );
        }
        out
    }
}

#[cfg(test)]
#[path = "loadfile_tests.rs"]
mod tests;
