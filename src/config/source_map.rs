//! Every config file read for one snapshot, laid end to end in one *global* byte space.
//!
//! The loader shifts every span of every file by that file's base, so a single `Range<usize>`
//! names a place in any file. This lets the merged document mix values from several files
//! while each value still knows where it came from, and lets validation code report a place
//! with nothing but the `toml::Spanned` value in hand.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// One config file's text and where it sits in the global span space.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as it was opened (shown in errors).
    pub path: PathBuf,
    /// The file's full text, as the operator wrote it (what diagnostics show).
    pub text: String,
    /// Global offset of the file's first byte.
    pub base: usize,
}

/// A resolved place: file, 1-based line and column, and the text of that line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location<'a> {
    /// The file the place is in.
    pub path: &'a Path,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The whole line, without its newline.
    pub line_text: &'a str,
}

/// All files of one load, in the order they were read.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// Adds a file and returns its base offset. One byte of gap separates files so that an
    /// end-of-file span never reads as the next file's start.
    pub fn add(&mut self, path: PathBuf, text: String) -> usize {
        let base = self.files.last().map_or(0, |f| f.base + f.text.len() + 1);
        self.files.push(SourceFile { path, text, base });
        base
    }

    /// The files' texts, in the order they were added (the map is gone).
    pub fn into_texts(self) -> Vec<String> {
        self.files.into_iter().map(|f| f.text).collect()
    }

    /// The files, in the order they were added.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The file that contains global offset `at`.
    pub fn file_at(&self, at: usize) -> Option<&SourceFile> {
        let idx = self.files.partition_point(|f| f.base <= at);
        self.files.get(idx.checked_sub(1)?)
    }

    /// Resolves the start of a global span to file, line and column.
    pub fn locate(&self, span: &Range<usize>) -> Option<Location<'_>> {
        let file = self.file_at(span.start)?;
        let local = (span.start - file.base).min(file.text.len());
        let before = &file.text[..floor_char_boundary(&file.text, local)];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before[line_start..].chars().count() + 1;
        let line_end = file.text[line_start..]
            .find('\n')
            .map_or(file.text.len(), |i| line_start + i);
        Some(Location {
            path: &file.path,
            line,
            column,
            line_text: file.text[line_start..line_end].trim_end_matches('\r'),
        })
    }

    /// The source text a global span covers (empty if it crosses files).
    pub fn snippet(&self, span: &Range<usize>) -> &str {
        let Some(file) = self.file_at(span.start) else {
            return "";
        };
        let start = span.start - file.base;
        let end = span.end.saturating_sub(file.base).min(file.text.len());
        file.text.get(start..end).unwrap_or("")
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_lines_and_columns_across_files() {
        let mut map = SourceMap::default();
        let a = map.add("a.toml".into(), "x = 1\ny = 2\n".into());
        let b = map.add("b.toml".into(), "[daemon]\nlisten = 3\n".into());
        assert_eq!(a, 0);
        assert_eq!(b, 13);
        let loc = map.locate(&(a + 6..a + 7)).unwrap();
        assert_eq!(
            (loc.path, loc.line, loc.column, loc.line_text),
            (Path::new("a.toml"), 2, 1, "y = 2")
        );
        let loc = map.locate(&(b + 18..b + 19)).unwrap();
        assert_eq!(
            (loc.path, loc.line, loc.column, loc.line_text),
            (Path::new("b.toml"), 2, 10, "listen = 3")
        );
        assert_eq!(map.snippet(&(b + 9..b + 15)), "listen");
    }
}
