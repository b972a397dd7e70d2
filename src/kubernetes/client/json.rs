//! Reading API objects field by field, straight out of the JSON text.
//!
//! A [`Reader`] walks the text once: each decoder asks for the fields it knows, as they come,
//! and skips the rest without building anything. No value tree of an object is ever made (a
//! `serde_json::Value` of an EndpointSlice takes several times its text), and the decoders
//! are plain functions over one concrete reader, not serde's derived code (generated per
//! struct and per deserializer: on the aarch64 build that was over 100 kB for twenty lean
//! structs).
//!
//! The conventions of the derived structs are kept: unknown fields are ignored, a missing
//! field and an explicit `null` both read as the default, a repeated field reads as its last
//! value, and a field of the wrong JSON type is an error naming the field's path
//! (`spec.ports[0].port: expected an integer, found a string`).

use std::borrow::Cow;
use std::collections::BTreeMap;

/// What is wrong with an object (the field's path and what was expected).
pub type Result<T> = std::result::Result<T, String>;

/// The deepest nesting read (serde_json's bound too): a hostile line cannot overflow the stack.
const MAX_DEPTH: u32 = 128;

/// A type read field by field out of JSON text.
pub trait Decode: Sized {
    /// Reads one value (an object, or `null` for the default) from `r`.
    fn decode(r: &mut Reader<'_>) -> Result<Self>;
}

/// A boxed value reads as the value: a store keeps its large objects boxed, so its B-tree's
/// nodes hold pointers, not objects (a node has room for eleven, and most are not full).
impl<T: Decode> Decode for Box<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        T::decode(r).map(Box::new)
    }
}

/// Reads the whole of `text` as one `T` (nothing but whitespace may follow it).
pub fn from_slice<T: Decode>(text: &[u8]) -> Result<T> {
    let mut r = Reader::new(text);
    let v = T::decode(&mut r).map_err(shown)?;
    r.end().map_err(shown)?;
    Ok(v)
}

/// [`from_slice`] for the text of the field `key` of an enclosing object, read apart: its
/// errors name the field as if it were read in place.
pub fn from_field<T: Decode>(text: &[u8], key: &str) -> Result<T> {
    let mut r = Reader::new(text);
    let v = T::decode(&mut r).and_then(|v| r.end().map(|()| v));
    v.map_err(|e| shown(under(format_args!(".{key}"), e)))
}

/// An error as shown, for a reader's caller: without the leading dot of a field path.
pub fn shown(e: String) -> String {
    match e.strip_prefix('.') {
        Some(rest) => rest.to_string(),
        None => e,
    }
}

/// `e` continued under a path segment: nested paths join, a leaf message follows a colon.
fn under(segment: std::fmt::Arguments<'_>, e: String) -> String {
    if e.starts_with('.') || e.starts_with('[') {
        format!("{segment}{e}")
    } else {
        format!("{segment}: {e}")
    }
}

/// A number as read: an integer, or the text of any other (a fraction, an exponent, too big).
enum Number<'a> {
    /// Fits an `i64`.
    Int(i64),
    /// Anything else, as written.
    Other(&'a str),
}

/// A cursor over JSON text.
pub struct Reader<'a> {
    /// The text.
    text: &'a [u8],
    /// The next byte to read.
    pos: usize,
    /// Objects and lists open around `pos`.
    depth: u32,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a [u8]) -> Reader<'a> {
        Reader {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// Fails unless only whitespace is left.
    pub fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.syntax("trailing characters")),
        }
    }

    /// A syntax error at the current position.
    fn syntax(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.pos)
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.text.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `b` (after whitespace) or fails with `what`.
    fn expect(&mut self, b: u8, what: &str) -> Result<()> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(what))
        }
    }

    /// What the next value is, for errors.
    fn found(&mut self) -> &'static str {
        match self.peek() {
            Some(b'{') => "an object",
            Some(b'[') => "a list",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            Some(b'-' | b'0'..=b'9') => "a number",
            _ => "invalid JSON",
        }
    }

    /// The error for `expected` where the next value is something else.
    fn wrong(&mut self, expected: &str) -> String {
        format!("expected {expected}, found {}", self.found())
    }

    /// Consumes the literal `word`.
    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.syntax("unknown literal"))
        }
    }

    /// Consumes a `null` if that is what comes next.
    pub fn null(&mut self) -> Result<bool> {
        if self.peek() != Some(b'n') {
            return Ok(false);
        }
        self.literal(b"null")?;
        Ok(true)
    }

    /// True when a string comes next.
    pub fn at_string(&mut self) -> bool {
        self.peek() == Some(b'"')
    }

    /// One more level of nesting, or an error past [`MAX_DEPTH`].
    fn deeper(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.syntax("nested too deep"));
        }
        Ok(())
    }

    /// A string (at its opening quote); borrowed from the text unless it has escapes.
    fn string(&mut self) -> Result<Cow<'a, str>> {
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.text.get(self.pos) {
                None => return Err(self.syntax("unterminated string")),
                Some(b'"') => {
                    let raw = &self.text[start..self.pos];
                    self.pos += 1;
                    return std::str::from_utf8(raw)
                        .map(Cow::Borrowed)
                        .map_err(|_| self.syntax("invalid UTF-8 in a string"));
                }
                Some(b'\\') => break,
                Some(&b) if b < 0x20 => return Err(self.syntax("control character in a string")),
                Some(_) => self.pos += 1,
            }
        }
        let mut out = self.text[start..self.pos].to_vec();
        loop {
            match self.text.get(self.pos) {
                None => return Err(self.syntax("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return String::from_utf8(out)
                        .map(Cow::Owned)
                        .map_err(|_| self.syntax("invalid UTF-8 in a string"));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(&b) if b < 0x20 => return Err(self.syntax("control character in a string")),
                Some(&b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    /// One escape (after its backslash), appended to `out` as UTF-8.
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let Some(&b) = self.text.get(self.pos) else {
            return Err(self.syntax("unterminated string"));
        };
        self.pos += 1;
        let plain = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let c = self.unicode_escape()?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                return Ok(());
            }
            _ => return Err(self.syntax("invalid escape")),
        };
        out.push(plain);
        Ok(())
    }

    /// The character of a `\uXXXX` escape (after its `u`), joining a surrogate pair.
    fn unicode_escape(&mut self) -> Result<char> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.text[self.pos..].starts_with(b"\\u") {
                return Err(self.syntax("lone surrogate in an escape"));
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(self.syntax("lone surrogate in an escape"));
            }
            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
        } else {
            high
        };
        char::from_u32(code).ok_or_else(|| self.syntax("lone surrogate in an escape"))
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.syntax("invalid \\u escape"))?;
        self.pos += 4;
        Ok(u32::from_str_radix(digits, 16).unwrap_or(0))
    }

    /// Skips a string (at its opening quote) without decoding it.
    fn skip_string(&mut self) -> Result<()> {
        self.pos += 1;
        loop {
            match self.text.get(self.pos) {
                None => return Err(self.syntax("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.text.get(self.pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        _ => return Err(self.syntax("invalid escape")),
                    }
                }
                Some(&b) if b < 0x20 => return Err(self.syntax("control character in a string")),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// A number (at its first character), checked against JSON's grammar.
    fn number(&mut self) -> Result<Number<'a>> {
        let start = self.pos;
        let digits = |r: &mut Reader<'_>| {
            let from = r.pos;
            while r.text.get(r.pos).is_some_and(u8::is_ascii_digit) {
                r.pos += 1;
            }
            r.pos - from
        };
        if self.text.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let first = self.text.get(self.pos).copied();
        let whole = digits(self);
        if whole == 0 || (first == Some(b'0') && whole > 1) {
            return Err(self.syntax("invalid number"));
        }
        let mut integer = true;
        if self.text.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            integer = false;
            if digits(self) == 0 {
                return Err(self.syntax("invalid number"));
            }
        }
        if matches!(self.text.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            integer = false;
            if matches!(self.text.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.syntax("invalid number"));
            }
        }
        // The grammar above admits only ASCII.
        let text = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
        Ok(match text.parse() {
            Ok(n) if integer => Number::Int(n),
            _ => Number::Other(text),
        })
    }

    /// Skips one value of any kind.
    pub fn skip(&mut self) -> Result<()> {
        match self.peek() {
            Some(b'{') => self.members(&mut |r, _| r.skip()),
            Some(b'[') => self.each(&mut |r| r.skip()),
            Some(b'"') => self.skip_string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            Some(_) => Err(self.syntax("expected a value")),
            None => Err(self.syntax("unexpected end")),
        }
    }

    /// Skips one value and returns its text (to be read later, or measured first).
    pub fn raw(&mut self) -> Result<&'a [u8]> {
        self.peek();
        let start = self.pos;
        self.skip()?;
        Ok(&self.text[start..self.pos])
    }

    /// An object's members (at its `{`), each handed to `field` with its key; `field` must
    /// read or skip the value. Errors are not put under the key (see [`Reader::object`]).
    fn members(
        &mut self,
        field: &mut dyn FnMut(&mut Reader<'a>, &str) -> Result<()>,
    ) -> Result<()> {
        self.deeper()?;
        self.pos += 1;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.syntax("expected a key"));
            }
            let key = self.string()?;
            self.expect(b':', "expected ':'")?;
            field(self, &key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.syntax("expected ',' or '}'")),
            }
        }
    }

    /// An object, each member handed to `field` with its key (`field` reads or skips the
    /// value); `null` is an object without members. An error in a member's value names it.
    pub fn object(
        &mut self,
        field: &mut dyn FnMut(&mut Reader<'a>, &str) -> Result<()>,
    ) -> Result<()> {
        if self.null()? {
            return Ok(());
        }
        if self.peek() != Some(b'{') {
            return Err(self.wrong("an object"));
        }
        self.members(&mut |r, key| field(r, key).map_err(|e| under(format_args!(".{key}"), e)))
    }

    /// A list (at its `[`), each element handed to `element`, which must read or skip it.
    fn each(&mut self, element: &mut dyn FnMut(&mut Reader<'a>) -> Result<()>) -> Result<()> {
        self.deeper()?;
        self.pos += 1;
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            element(self)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(self.syntax("expected ',' or ']'")),
            }
        }
    }

    /// A list, each element handed to `element`; `null` is an empty list. An error in an
    /// element names its index.
    pub fn elements(
        &mut self,
        element: &mut dyn FnMut(&mut Reader<'a>) -> Result<()>,
    ) -> Result<()> {
        if self.null()? {
            return Ok(());
        }
        if self.peek() != Some(b'[') {
            return Err(self.wrong("a list"));
        }
        let mut i = 0usize;
        self.each(&mut |r| {
            element(r).map_err(|e| under(format_args!("[{i}]"), e))?;
            i += 1;
            Ok(())
        })
    }

    /// A list, each element read by `f`; missing or `null` = empty.
    pub fn list<T>(&mut self, mut f: impl FnMut(&mut Reader<'a>) -> Result<T>) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.elements(&mut |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        // Kept for as long as the object: a one-address list grown by pushes holds room for
        // four, 100 endpoints room for 128 (together a tenth of a big store).
        out.shrink_to_fit();
        Ok(out)
    }

    /// A list of objects, each read by its [`Decode`]; `null` = empty.
    pub fn objects<T: Decode>(&mut self) -> Result<Vec<T>> {
        self.list(T::decode)
    }

    /// A string, `None` for `null`.
    pub fn opt_str(&mut self) -> Result<Option<String>> {
        if self.null()? {
            return Ok(None);
        }
        if !self.at_string() {
            return Err(self.wrong("a string"));
        }
        Ok(Some(self.string()?.into_owned()))
    }

    /// A string; `null` = empty.
    pub fn str(&mut self) -> Result<String> {
        Ok(self.opt_str()?.unwrap_or_default())
    }

    /// An integer, `None` for `null`.
    pub fn opt_int(&mut self) -> Result<Option<i64>> {
        if self.null()? {
            return Ok(None);
        }
        if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
            return Err(self.wrong("an integer"));
        }
        match self.number()? {
            Number::Int(n) => Ok(Some(n)),
            Number::Other(text) => Err(format!("{text} is not an integer")),
        }
    }

    /// A 32-bit integer, `None` for `null`.
    pub fn opt_i32(&mut self) -> Result<Option<i32>> {
        self.opt_int()?
            .map(|n| i32::try_from(n).map_err(|_| format!("{n} out of range")))
            .transpose()
    }

    /// A 32-bit integer; `null` = 0.
    pub fn i32(&mut self) -> Result<i32> {
        Ok(self.opt_i32()?.unwrap_or(0))
    }

    /// A boolean, `None` for `null`.
    pub fn opt_bool(&mut self) -> Result<Option<bool>> {
        match self.peek() {
            Some(b'n') => self.literal(b"null").map(|()| None),
            Some(b't') => self.literal(b"true").map(|()| Some(true)),
            Some(b'f') => self.literal(b"false").map(|()| Some(false)),
            _ => Err(self.wrong("a boolean")),
        }
    }

    /// A list of strings; `null` = empty.
    pub fn strings(&mut self) -> Result<Vec<String>> {
        self.list(Reader::str_element)
    }

    /// A list element that must be a string (`null` is not one).
    fn str_element(&mut self) -> Result<String> {
        if !self.at_string() {
            return Err(self.wrong("a string"));
        }
        Ok(self.string()?.into_owned())
    }

    /// A list of strings, `None` for `null`.
    pub fn opt_strings(&mut self) -> Result<Option<Vec<String>>> {
        if self.null()? {
            return Ok(None);
        }
        self.strings().map(Some)
    }

    /// A map of strings to strings, keeping the keys `keep` accepts (the others are skipped,
    /// whatever they hold); `null` = empty.
    pub fn string_map(&mut self, keep: fn(&str) -> bool) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        self.object(&mut |r, key| {
            if keep(key) {
                out.insert(key.to_string(), r.str_element()?);
                Ok(())
            } else {
                r.skip()
            }
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
