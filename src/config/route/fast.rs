//! Reading the plain `[[route]]` blocks most configs are made of without the TOML parser.
//!
//! At 100,000 routes, toml's parser (lexing, events, a tree per block, then serde over the
//! tree) was most of `edgenetd check` and of the time to `READY=1`. A block that is only
//! `[[route]]` followed by `key = value` lines (bare keys of `[[route]]`, basic or literal
//! strings without escapes, decimal integers, booleans, comments, blank lines) means one
//! thing in TOML, so it is read here straight into the raw route, with the spans toml would
//! give. Anything else (escapes, underscores in numbers, inline tables, a duplicate or
//! unknown key, a value of the wrong type, a missing `to`) returns `None`, and the block goes
//! to the TOML parser and serde, so every message comes from them exactly as before. The
//! loader's differential tests (`config/load_tests.rs`) hold the two paths equal.

use std::ops::Range;

use toml::Spanned;

use super::raw::{RawRoute, RawTable};

/// One value as written.
enum Scalar<'a> {
    /// A string without escapes (the text between the quotes).
    Str(&'a str),
    /// A decimal integer.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
}

/// The raw route of one block (`text`, at global offset `base`) and the span of its
/// `[[route]]` header, or `None` when the block is not plain (see the module docs).
///
/// One pass over the bytes with plain loops: at 100,000 routes every instruction per byte
/// counts, and the crate is built for size, where iterator chains stay slow.
pub(super) fn read(text: &str, base: usize) -> Option<(RawRoute, Range<usize>)> {
    const HEADER: &[u8] = b"[[route]]";
    let bytes = text.as_bytes();
    if !bytes.starts_with(HEADER) {
        return None;
    }
    let mut at = end_of_line(bytes, HEADER.len())?;
    let mut raw = Fields::default();
    while at < bytes.len() {
        let line = blanks(bytes, at);
        if let Some(next) = end_of_line(bytes, line) {
            at = next;
            continue;
        }
        let mut key_end = line;
        while key_end < bytes.len()
            && matches!(bytes[key_end], b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-')
        {
            key_end += 1;
        }
        let eq = blanks(bytes, key_end);
        if bytes.get(eq) != Some(&b'=') {
            return None;
        }
        let value_at = blanks(bytes, eq + 1);
        let (value, len) = scalar(&text[value_at..])?;
        at = end_of_line(bytes, value_at + len)?;
        let span = base + value_at..base + value_at + len;
        raw.set(&text[line..key_end], value, span)?;
    }
    let header = base..base + HEADER.len();
    Some((raw.finish()?, header))
}

/// The first position from `at` that is not a space or a tab.
fn blanks(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && matches!(bytes[at], b' ' | b'\t') {
        at += 1;
    }
    at
}

/// When the line holds nothing more from `at` than blanks and maybe a comment: the start of
/// the next line. `None` for anything else, and for a control character TOML forbids there
/// (tab is the only one allowed; CR only before LF).
fn end_of_line(bytes: &[u8], at: usize) -> Option<usize> {
    let mut at = blanks(bytes, at);
    if bytes.get(at) == Some(&b'#') {
        while at < bytes.len() && !matches!(bytes[at], b'\n' | b'\r') {
            if is_control(bytes[at]) {
                return None;
            }
            at += 1;
        }
    }
    match bytes.get(at) {
        None => Some(at),
        Some(b'\n') => Some(at + 1),
        Some(b'\r') if bytes.get(at + 1) == Some(&b'\n') => Some(at + 2),
        _ => None,
    }
}

/// A control character TOML forbids in strings and comments (tab is allowed).
fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// A value at the start of `text` and its length in bytes.
fn scalar(text: &str) -> Option<(Scalar<'_>, usize)> {
    let bytes = text.as_bytes();
    match *bytes.first()? {
        quote @ (b'"' | b'\'') => {
            let mut close = 1;
            while close < bytes.len() && bytes[close] != quote {
                // Escapes are the parser's (a literal string has none, but keep one rule),
                // and so are the control characters it refuses.
                if bytes[close] == b'\\' || is_control(bytes[close]) {
                    return None;
                }
                close += 1;
            }
            if close == bytes.len() {
                return None;
            }
            Some((Scalar::Str(&text[1..close]), close + 1))
        }
        b't' if text.starts_with("true") => Some((Scalar::Bool(true), 4)),
        b'f' if text.starts_with("false") => Some((Scalar::Bool(false), 5)),
        _ => {
            let sign = usize::from(matches!(bytes[0], b'+' | b'-'));
            let digits = bytes[sign..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            // No leading zeros (TOML forbids them), and no `_`, `.`, `e`, `x`... after.
            let next = bytes.get(sign + digits).copied();
            if digits == 0
                || (digits > 1 && bytes[sign] == b'0')
                || next.is_some_and(|b| !matches!(b, b' ' | b'\t' | b'#' | b'\r' | b'\n'))
            {
                return None;
            }
            let len = sign + digits;
            text[..len].parse().ok().map(|n| (Scalar::Int(n), len))
        }
    }
}

/// The keys of one block as they are read.
#[derive(Default)]
struct Fields {
    to: Option<Spanned<String>>,
    via: Option<Spanned<String>>,
    dev: Option<Spanned<String>>,
    metric: Option<Spanned<i64>>,
    table: Option<Spanned<RawTable>>,
    kind: Option<Spanned<String>>,
    src: Option<Spanned<String>>,
    onlink: Option<Spanned<bool>>,
    mtu: Option<Spanned<i64>>,
    track: Option<Spanned<String>>,
}

impl Fields {
    /// Sets one key; `None` for an unknown or repeated key or a value of the wrong type.
    fn set(&mut self, key: &str, value: Scalar<'_>, span: Range<usize>) -> Option<()> {
        fn put<T>(slot: &mut Option<Spanned<T>>, value: T, span: Range<usize>) -> Option<()> {
            if slot.is_some() {
                return None;
            }
            *slot = Some(Spanned::new(span, value));
            Some(())
        }
        match (key, value) {
            ("to", Scalar::Str(s)) => put(&mut self.to, s.to_string(), span),
            ("via", Scalar::Str(s)) => put(&mut self.via, s.to_string(), span),
            ("dev", Scalar::Str(s)) => put(&mut self.dev, s.to_string(), span),
            ("type", Scalar::Str(s)) => put(&mut self.kind, s.to_string(), span),
            ("src", Scalar::Str(s)) => put(&mut self.src, s.to_string(), span),
            ("track", Scalar::Str(s)) => put(&mut self.track, s.to_string(), span),
            ("metric", Scalar::Int(n)) => put(&mut self.metric, n, span),
            ("mtu", Scalar::Int(n)) => put(&mut self.mtu, n, span),
            ("onlink", Scalar::Bool(b)) => put(&mut self.onlink, b, span),
            ("table", Scalar::Int(n)) => put(&mut self.table, RawTable::Number(n), span),
            ("table", Scalar::Str(s)) => put(&mut self.table, RawTable::Name(s.to_string()), span),
            _ => None,
        }
    }

    fn finish(self) -> Option<RawRoute> {
        Some(RawRoute {
            to: self.to?,
            via: self.via,
            dev: self.dev,
            metric: self.metric,
            table: self.table,
            kind: self.kind,
            src: self.src,
            onlink: self.onlink,
            mtu: self.mtu,
            nexthops: None,
            track: self.track,
        })
    }
}
