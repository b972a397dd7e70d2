//! Reading one config file as text, and saying precisely why a file is not: a conf.d entry
//! that is a dangling symlink or a symlink loop names the link, and bytes that are not UTF-8
//! are located (line, column, byte offset) rather than reported as "stream did not contain
//! valid UTF-8". A file over its size budget is not read at all (see `limits`).

use std::io::{self, Read as _};
use std::path::Path;

use super::limits;

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
        /// `SHOWN_AFTER` bytes past it), invalid bytes and control characters replaced by
        /// U+FFFD: enough to locate the problem and show its line, never parsed.
        shown: String,
        /// Where the first invalid byte's replacement starts in `shown`.
        at: usize,
        /// The first invalid byte's offset in the file.
        byte: usize,
    },
    /// The file is larger than it may be: nothing of it was kept.
    TooLarge {
        /// Its size in bytes, from its metadata, or the bytes read before the read stopped.
        size: u64,
        /// The file grew while it was read: `size` is a lower bound.
        at_least: bool,
    },
    /// The file cannot be read (the message names why).
    Unreadable(String),
}

/// Reads `path`, at most [`limits::MAX_FILE_BYTES`] of it.
pub fn read(path: &Path) -> FileText {
    read_at_most(path, limits::MAX_FILE_BYTES)
}

/// Reads `path` if it has at most `budget` bytes: its size is checked before it is read, and
/// the read stops one byte past the budget (a file that grows while it is read, or a device
/// whose metadata says 0).
pub fn read_at_most(path: &Path, budget: u64) -> FileText {
    match read_bytes(path, budget) {
        Ok(Err(too_large)) => too_large,
        Ok(Ok(bytes)) => match String::from_utf8(bytes) {
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

/// The bytes of `path`, or [`FileText::TooLarge`].
fn read_bytes(path: &Path, budget: u64) -> io::Result<Result<Vec<u8>, FileText>> {
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    if size > budget {
        return Ok(Err(FileText::TooLarge {
            size,
            at_least: false,
        }));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(budget + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > budget {
        return Ok(Err(FileText::TooLarge {
            size: bytes.len() as u64,
            at_least: true,
        }));
    }
    Ok(Ok(bytes))
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
    fn a_file_over_its_budget_is_refused_by_its_size_and_not_kept() {
        let path = std::env::temp_dir().join(format!("edgenetd-text-{}.toml", std::process::id()));
        std::fs::write(&path, "k = 1\n").unwrap();
        assert_eq!(read_at_most(&path, 6), FileText::Text("k = 1\n".into()));
        assert_eq!(
            read_at_most(&path, 5),
            FileText::TooLarge {
                size: 6,
                at_least: false
            }
        );
        std::fs::remove_file(&path).unwrap();
        // Its metadata says 0 bytes: the read itself stops past the budget.
        assert_eq!(
            read_at_most(Path::new("/proc/self/status"), 10),
            FileText::TooLarge {
                size: 11,
                at_least: true
            }
        );
    }

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
