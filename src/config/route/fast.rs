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
pub(super) fn read(text: &str, base: usize) -> Option<(RawRoute, Range<usize>)> {
    if has_control(text) {
        return None;
    }
    let mut lines = Lines { text, at: 0 };
    let (header, _) = lines.next()?;
    let rest = header.strip_prefix("[[route]]")?;
    end_of_line(rest)?;
    let mut raw = Fields::default();
    for (line, start) in lines {
        let body = line.trim_start_matches([' ', '\t']);
        if end_of_line(body).is_some() {
            continue;
        }
        let key_len = body
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
            .unwrap_or(body.len());
        let (key, after) = body.split_at(key_len);
        let after = after.trim_start_matches([' ', '\t']).strip_prefix('=')?;
        let value_text = after.trim_start_matches([' ', '\t']);
        let value_at = base + start + (line.len() - value_text.len());
        let (value, len) = scalar(value_text)?;
        end_of_line(&value_text[len..])?;
        raw.set(key, value, value_at..value_at + len)?;
    }
    let header = base..base + "[[route]]".len();
    Some((raw.finish()?, header))
}

/// The lines of a block with their offsets, without their line ending.
struct Lines<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (&'a str, usize);

    fn next(&mut self) -> Option<(&'a str, usize)> {
        if self.at >= self.text.len() {
            return None;
        }
        let rest = &self.text[self.at..];
        let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let start = self.at;
        self.at += len;
        let line = rest[..len].strip_suffix('\n').unwrap_or(&rest[..len]);
        Some((line.strip_suffix('\r').unwrap_or(line), start))
    }
}

/// True when `text` holds a control character TOML forbids in a line (tab is the only one
/// allowed; a CR only before a LF), or one this reader leaves to the parser.
fn has_control(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| match b {
        b'\t' | b'\n' => false,
        b'\r' => bytes.get(i + 1) != Some(&b'\n'),
        b => b < 0x20 || b == 0x7f,
    })
}

/// `Some` when `rest` is only whitespace and maybe a comment.
fn end_of_line(rest: &str) -> Option<()> {
    let rest = rest.trim_start_matches([' ', '\t']);
    (rest.is_empty() || rest.starts_with('#')).then_some(())
}

/// A value at the start of `text` and its length in bytes.
fn scalar(text: &str) -> Option<(Scalar<'_>, usize)> {
    let bytes = text.as_bytes();
    match *bytes.first()? {
        quote @ (b'"' | b'\'') => {
            let inner = &text[1..];
            let close = inner.find(quote as char)?;
            let s = &inner[..close];
            // Escapes are the parser's (a literal string has none, but keep one rule).
            if s.contains('\\') {
                return None;
            }
            Some((Scalar::Str(s), close + 2))
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
                || next.is_some_and(|b| !matches!(b, b' ' | b'\t' | b'#'))
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
