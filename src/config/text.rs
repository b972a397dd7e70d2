//! Reading one config file as text, and saying precisely why a file is not: a conf.d entry
//! that is a dangling symlink or a symlink loop names the link, and bytes that are not UTF-8
//! are located (line, column, byte offset) rather than reported as "stream did not contain
//! valid UTF-8".

use std::io;
use std::path::Path;

/// How many bytes of the offending line after the first invalid byte are shown.
const SHOWN_AFTER: usize = 40;

/// One file's content, or why there is none.
#[derive(Debug, PartialEq, Eq)]
pub enum FileText {
    /// The file, as text.
    Text(String),
    /// The file holds bytes that are not UTF-8.
    NotUtf8 {
        /// The text up to the end of the line of the first invalid byte (at most
        /// [`SHOWN_AFTER`] bytes past it), invalid bytes and control characters replaced by
        /// U+FFFD: enough to locate the problem and show its line, never parsed.
        shown: String,
        /// Where the first invalid byte's replacement starts in `shown`.
        at: usize,
        /// The first invalid byte's offset in the file.
        byte: usize,
    },
    /// The file cannot be read (the message names why).
    Unreadable(String),
}

/// Reads `path`.
pub fn read(path: &Path) -> FileText {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => FileText::Text(text),
            Err(e) => {
                let byte = e.utf8_error().valid_up_to();
                let (shown, at) = locate_invalid(e.as_bytes(), byte);
                FileText::NotUtf8 { shown, at, byte }
            }
        },
        Err(e) => FileText::Unreadable(unreadable(path, &e)),
    }
}

/// Why `path` cannot be read, naming a symlink that does not resolve as one.
fn unreadable(path: &Path, e: &io::Error) -> String {
    match std::fs::read_link(path) {
        Ok(target) => format!(
            "cannot read: a symlink to {} that does not resolve to a file: {e}",
            target.display()
        ),
        Err(_) => format!("cannot read: {e}"),
    }
}

/// The text that locates the first invalid byte at `valid` (see [`FileText::NotUtf8`]).
fn locate_invalid(bytes: &[u8], valid: usize) -> (String, usize) {
    let line_end = bytes[valid..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |i| valid + i)
        .min(valid + SHOWN_AFTER);
    // One char for one char: columns stay right, and no terminal sees a control sequence.
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    char::REPLACEMENT_CHARACTER
                } else {
                    c
                }
            })
            .collect()
    };
    let prefix = clean(std::str::from_utf8(&bytes[..valid]).unwrap_or_default());
    let rest = clean(&String::from_utf8_lossy(&bytes[valid..line_end]));
    let at = prefix.len();
    (prefix + &rest, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_invalid_byte_is_located_and_its_line_cut_short() {
        let mut bytes = b"[daemon]\nx = \"\x1b[31m".to_vec();
        let valid = bytes.len();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        bytes.extend_from_slice(&[b'a'; 100]);
        bytes.extend_from_slice(b"\nnext line\n");
        let (shown, at) = locate_invalid(&bytes, valid);
        assert_eq!(&shown[..at], "[daemon]\nx = \"\u{fffd}[31m");
        assert!(shown[at..].starts_with('\u{fffd}'), "{shown:?}");
        assert!(
            !shown.contains("next line") && shown.len() < 80,
            "{shown:?}"
        );
    }
}
