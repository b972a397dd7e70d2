//! Parsing a big file block by block, so that no whole-file token list or tree ever exists.
//!
//! toml's parser lexes the whole text into tokens, turns them into events and then builds the
//! tree, all three alive at once: for 100,000 `[[route]]` entries that is ~220 MB, most of it
//! for data that validation reads one entry at a time. So a file with many top-level
//! `[[key]]` headers is cut at those header lines into *blocks*. A block that parses on its
//! own, without error, into exactly one `[[key]]` element is *pure*: it is parsed here only
//! to check that, then dropped, and the merged document holds a placeholder (an empty table
//! with the element's header span); [`super::Doc`] parses the block again when validation
//! reads the element. Everything else (the text before the first header, impure blocks) is
//! parsed as one document in which the pure blocks are blanked (same length, so spans hold).
//!
//! The result must equal what parsing the whole file would give, or this returns `None` and
//! the caller parses the whole file. It does whenever: the rest has a syntax error (so every
//! error message comes from the whole-file parse); a value of the rest spans a blanked block
//! (the cut was inside a multi-line string or array); `key` is also defined in the rest other
//! than by `[[key]]` headers (TOML would refuse to append); or content of an element of the
//! rest lies after a later block's header (TOML would attach it to that later element).

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::doc::{Value, shift, shift_table};

/// Files with fewer top-level `[[key]]` headers than this are parsed whole.
pub(super) const MIN_BLOCKS: usize = 64;

/// A pure block: the text of one `[[key]]` element, parsed again when it is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block<'a> {
    /// Global start of the element's header: where its placeholder's span starts.
    pub header: usize,
    /// The block's text, from its header line to the next header line.
    pub text: &'a str,
    /// Global offset of `text`.
    pub base: usize,
}

/// A file parsed block by block: the tree (global spans, placeholders for pure blocks) and
/// the pure blocks in file order.
pub(super) struct Split<'a> {
    /// The file's tree, as the whole-file parse would give it, but with placeholders.
    pub table: DeTable<'a>,
    /// The pure blocks, in file order.
    pub blocks: Vec<Block<'a>>,
}

/// Parses `text` (at global offset `base`) block by block; `None` = parse it whole.
pub(super) fn parse(text: &str, base: usize, min_blocks: usize) -> Option<Split<'_>> {
    let heads = headers(text);
    if heads.len() < min_blocks.max(1) {
        return None;
    }
    let mut pure: Vec<Pure<'_>> = Vec::new();
    let mut last_impure_end = heads[0].0;
    for (i, &(start, key)) in heads.iter().enumerate() {
        let end = heads.get(i + 1).map_or(text.len(), |h| h.0);
        match pure_block(&text[start..end], key) {
            Some((key_span, header)) => pure.push(Pure {
                key,
                range: start..end,
                key_span: shift(key_span, start),
                header: shift(header, start),
            }),
            None => last_impure_end = end,
        }
    }
    if pure.is_empty() {
        return None;
    }
    let mut table = if pure.iter().all(|p| p.range.start >= last_impure_end) {
        // Nothing impure: the rest is the text before the first header, borrowed as is.
        let rest = &text[..last_impure_end];
        let (table, errors) = DeTable::parse_recoverable(rest);
        let table = table.into_inner();
        if !errors.is_empty() || !keys_fit(&table, &pure, rest) {
            return None;
        }
        shift_table(table, base)
    } else {
        let mut rest = String::with_capacity(last_impure_end);
        let mut at = 0;
        let mut blanks = Vec::new();
        for p in pure.iter().filter(|p| p.range.end <= last_impure_end) {
            rest.push_str(&text[at..p.range.start]);
            let len = p.range.len();
            let newline = text[p.range.clone()].ends_with('\n');
            rest.extend(std::iter::repeat_n(' ', len - usize::from(newline)));
            if newline {
                rest.push('\n');
            }
            blanks.push(p.range.clone());
            at = p.range.end;
        }
        rest.push_str(&text[at..last_impure_end]);
        let (table, errors) = DeTable::parse_recoverable(&rest);
        let table = table.into_inner();
        if !errors.is_empty()
            || table.iter().any(|(_, v)| covers_blank(v, &blanks))
            || !keys_fit(&table, &pure, &rest)
        {
            return None;
        }
        let rebase = Rebase {
            text,
            buf: rest.as_ptr() as usize,
            base,
        };
        rebase.table(table)?
    };
    let blocks = pure
        .iter()
        .map(|p| Block {
            header: p.header.start + base,
            text: &text[p.range.clone()],
            base: p.range.start + base,
        })
        .collect();
    place_stubs(&mut table, &pure, base);
    Some(Split { table, blocks })
}

/// A pure block, in file-local offsets.
struct Pure<'a> {
    key: &'a str,
    range: Range<usize>,
    key_span: Range<usize>,
    header: Range<usize>,
}

/// Line starts of top-level `[[key]]` headers with a bare key, and the key.
fn headers(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(key) = header_key(line) {
            out.push((at, key));
        }
        at += line.len();
    }
    out
}

fn header_key(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches([' ', '\t']).strip_prefix("[[")?;
    let end = rest.find("]]")?;
    let key = &rest[..end];
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let tail = rest[end + 2..].trim_start_matches([' ', '\t']);
    let ends = tail.is_empty() || tail.starts_with(['#', '\n']) || tail.starts_with("\r\n");
    (bare && ends).then_some(key)
}

/// Parses a block alone: pure when error-free with `key` as its only key, holding one table.
/// Returns the key's span and the element's (header's) span, local to the block.
fn pure_block(text: &str, key: &str) -> Option<(Range<usize>, Range<usize>)> {
    let (table, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return None;
    }
    let table = table.into_inner();
    let mut entries = table.iter();
    let (k, v) = entries.next()?;
    if entries.next().is_some() || &**k.get_ref() != key {
        return None;
    }
    match v.get_ref() {
        DeValue::Array(items) if items.len() == 1 && items[0].get_ref().is_table() => {
            Some((k.span(), items[0].span()))
        }
        _ => None,
    }
}

/// True when a value (or anything in it) overlaps a blanked block: the cut was inside it.
fn covers_blank(value: &Spanned<DeValue<'_>>, blanks: &[Range<usize>]) -> bool {
    let span = value.span();
    let i = blanks.partition_point(|b| b.end <= span.start);
    if blanks.get(i).is_some_and(|b| b.start < span.end) {
        return true;
    }
    match value.get_ref() {
        DeValue::Array(items) => items.iter().any(|v| covers_blank(v, blanks)),
        DeValue::Table(t) => t.iter().any(|(_, v)| covers_blank(v, blanks)),
        _ => false,
    }
}

/// Checks the rest against the pure blocks' keys: a key that has pure blocks is absent from
/// the rest or an array made by `[[key]]` headers only, and each of its elements ends before
/// the next element's header (else TOML would attach the tail to a pure block's element).
fn keys_fit(rest: &DeTable<'_>, pure: &[Pure<'_>], text: &str) -> bool {
    let is_header = |span: Range<usize>| text.get(span).is_some_and(|s| s.starts_with("[["));
    let mut keys: Vec<&str> = pure.iter().map(|p| p.key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().all(|key| {
        let Some(value) = rest.get(key) else {
            return true;
        };
        let DeValue::Array(items) = value.get_ref() else {
            return false;
        };
        if items.is_empty() || !is_header(value.span()) {
            return false;
        }
        items.iter().enumerate().all(|(i, item)| {
            if !item.get_ref().is_table() || !is_header(item.span()) {
                return false;
            }
            let start = item.span().start;
            let next_rest = items.get(i + 1).map_or(usize::MAX, |n| n.span().start);
            let next_pure = pure
                .iter()
                .filter(|p| p.key == key && p.header.start > start)
                .map(|p| p.header.start)
                .next()
                .unwrap_or(usize::MAX);
            max_end(item) <= next_rest.min(next_pure)
        })
    })
}

/// The furthest end of any span in a value (keys included).
fn max_end(value: &Spanned<DeValue<'_>>) -> usize {
    let inner = match value.get_ref() {
        DeValue::Array(items) => items.iter().map(max_end).max().unwrap_or(0),
        DeValue::Table(t) => t
            .iter()
            .map(|(k, v)| k.span().end.max(max_end(v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    };
    inner.max(value.span().end)
}

/// Puts a placeholder for each pure block into the tree, in header order among the rest's
/// elements; the key and array spans are those of the first header, as TOML sets them.
fn place_stubs(table: &mut DeTable<'_>, pure: &[Pure<'_>], base: usize) {
    let mut keys: Vec<&str> = pure.iter().map(|p| p.key).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let existing = table.remove_entry(key);
        let mut stubs = pure.iter().filter(|p| p.key == key).peekable();
        let first_stub = stubs.peek().map(|p| p.header.start + base);
        let (key_span, mut rest_items) = match existing {
            Some((k, v)) => match v.into_inner() {
                DeValue::Array(items) => (Some(k.span()), items.into_iter().peekable()),
                _ => unreachable!("keys_fit checked that the rest's value is an array"),
            },
            None => (None, DeArray::new().into_iter().peekable()),
        };
        let rest_first = rest_items.peek().map(|v| v.span().start);
        let key_span = match (key_span, rest_first, first_stub) {
            (Some(k), Some(r), Some(s)) if r < s => k,
            _ => {
                let p = pure.iter().find(|p| p.key == key).expect("key has a block");
                shift(p.key_span.clone(), base)
            }
        };
        let mut items = DeArray::new();
        loop {
            let take_rest = match (rest_items.peek(), stubs.peek()) {
                (Some(r), Some(s)) => r.span().start < s.header.start + base,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_rest {
                items.push(rest_items.next().expect("peeked"));
            } else {
                let s = stubs.next().expect("peeked");
                let span = shift(s.header.clone(), base);
                items.push(Spanned::new(span, DeValue::Table(DeTable::new())));
            }
        }
        let array_span = items[0].span();
        table.insert(
            Spanned::new(key_span, Cow::Owned(key.to_string())),
            Spanned::new(array_span, DeValue::Array(items)),
        );
    }
}

/// Moves a tree parsed from a scratch copy of the text (the rest with blanks) onto the
/// original text: borrowed strings are re-pointed at the same bytes of `text`, numbers are
/// re-read from their place in `text`, spans are shifted by `base`.
struct Rebase<'a> {
    text: &'a str,
    buf: usize,
    base: usize,
}

impl<'a> Rebase<'a> {
    fn str<'b>(&self, s: Cow<'b, str>) -> Cow<'a, str> {
        match s {
            Cow::Borrowed(b) => {
                let off = (b.as_ptr() as usize).wrapping_sub(self.buf);
                let same = off
                    .checked_add(b.len())
                    .and_then(|end| self.text.get(off..end))
                    .filter(|t| *t == b);
                match same {
                    Some(t) => Cow::Borrowed(t),
                    None => Cow::Owned(b.to_owned()),
                }
            }
            Cow::Owned(o) => Cow::Owned(o),
        }
    }

    fn table<'b>(&self, table: DeTable<'b>) -> Option<DeTable<'a>> {
        let mut out = DeTable::new();
        for (key, value) in table {
            let span = shift(key.span(), self.base);
            let key = Spanned::new(span, self.str(key.into_inner()));
            out.insert(key, self.value(value)?);
        }
        Some(out)
    }

    fn value<'b>(&self, value: Spanned<DeValue<'b>>) -> Option<Value<'a>> {
        let local = value.span();
        let inner = match value.into_inner() {
            DeValue::String(s) => DeValue::String(self.str(s)),
            DeValue::Integer(_) | DeValue::Float(_) => {
                DeValue::parse(self.text.get(local.clone())?)
                    .ok()?
                    .into_inner()
            }
            DeValue::Boolean(b) => DeValue::Boolean(b),
            DeValue::Datetime(d) => DeValue::Datetime(d),
            DeValue::Array(items) => {
                let mut out = DeArray::new();
                for item in items {
                    out.push(self.value(item)?);
                }
                DeValue::Array(out)
            }
            DeValue::Table(t) => DeValue::Table(self.table(t)?),
        };
        Some(Spanned::new(shift(local, self.base), inner))
    }
}

#[cfg(test)]
mod tests {
    use super::super::diag::Diagnostics;
    use super::super::doc::Doc;
    use super::super::source_map::SourceMap;

    /// Everything validation can observe of a document: keys with spans, full values, and
    /// the rendered diagnostics.
    fn observe(files: &[&str], min_blocks: usize) -> (String, usize) {
        let mut sources = SourceMap::default();
        for (i, text) in files.iter().enumerate() {
            sources.add(format!("f{i}.toml").into(), text.to_string());
        }
        let mut diags = Diagnostics::default();
        let mut doc = Doc::default();
        for file in sources.files() {
            doc.merge_file_split(
                SourceMap::parse_text(file),
                file.base,
                &mut diags,
                min_blocks,
            );
        }
        let mut out = diags.render(&sources);
        for (key, span) in doc.keys() {
            out.push_str(&format!("{key} {span:?} = {:?}\n", doc.value(key)));
            if let Some(Ok(items)) = doc.array(key) {
                for item in items {
                    out.push_str(&format!("  {item:?}\n"));
                }
            }
        }
        (out, doc.lazy_elements())
    }

    /// Block by block gives exactly what the whole-file parse gives; returns how many
    /// elements were held as text.
    fn same(files: &[&str]) -> usize {
        let (whole, none) = observe(files, usize::MAX);
        assert_eq!(none, 0);
        let (split, lazy) = observe(files, 1);
        assert_eq!(split, whole, "block-by-block parse differs for {files:?}");
        lazy
    }

    const ROUTES: &str = "[[route]]\nto = \"10.0.0.0/24\"\nvia = \"192.0.2.1\"\n\n[[route]] # second\nto = \"10.0.1.0/24\"\nmetric = 0x1F\n[[route.nexthops]]\nvia = \"192.0.2.2\"\n[route.extra]\nq = 1.5e3\n";

    #[test]
    fn routes_after_a_prefix_are_held_as_text() {
        let text = format!("[daemon]\nlisten = \"x\"\n\n{ROUTES}");
        assert_eq!(same(&[&text]), 2);
        assert_eq!(same(&[ROUTES]), 2);
    }

    #[test]
    fn blocks_followed_by_other_sections_keep_the_rest_identical() {
        let text = format!(
            "{ROUTES}[[route]]\nto = \"10.0.2.0/24\"\n[daemon]\nport = 0x1F\nf = 1.5e3\nd = 1979-05-27T07:32:00Z\ns = \"esc\\n\\u00e9\"\n'lit key' = 'x'\nt = {{ a = [1, 2], b = \"é\" }}\n[[service]]\nname = \"a\"\n[[route]]\nto = \"10.0.3.0/24\"\n[[service]]\nname = \"b\"\n[policy]\nforward = \"drop\"\n[[policy.forward]]\nfrom = \"lan\"\n[[route]]\nto = \"10.0.4.0/24\"\n"
        );
        assert!(same(&[&text]) >= 3);
    }

    #[test]
    fn cuts_inside_strings_or_arrays_fall_back_to_the_whole_parse() {
        same(&[&format!("s = \"\"\"\n{ROUTES}\"\"\"\n")]);
        same(&[&format!("s = '''\n{ROUTES}'''\n")]);
        same(&[&format!(
            "{ROUTES}[daemon]\ns = \"\"\"\n[[route]]\nto = \"x\"\n[[service]]\n\"\"\"\n"
        )]);
        same(&[&format!("x = [\n{ROUTES}]\n")]);
        same(&[&format!("[[route]]\nx = [\n[[route]]\n]\n{ROUTES}")]);
    }

    #[test]
    fn conflicting_definitions_give_the_whole_parse_errors() {
        same(&[&format!("route = [{{ to = \"a\" }}]\n{ROUTES}")]);
        same(&[&format!("route = []\n{ROUTES}")]);
        same(&[&format!("route.a = 1\n{ROUTES}")]);
        same(&[&format!("[route]\na = 1\n{ROUTES}")]);
        same(&[&format!("{ROUTES}[route]\na = 1\n")]);
        same(&[&format!("{ROUTES}[daemon]\n[route.late]\na = 1\n")]);
        same(&[&format!(
            "[[route]]\nto = \"a\"\n[daemon]\n{ROUTES}[[service]]\n[route.late]\na = 1\n"
        )]);
        same(&[&format!("{ROUTES}[[route]]\nto = \"a\"\nto = \"b\"\n")]);
        same(&[&format!(
            "{ROUTES}[[route]]\nto = \n[[route]]\nto = \"c\"\n"
        )]);
        same(&[&format!("{ROUTES}[[route]]\n[route]\n")]);
        same(&[&format!("{ROUTES}[[route]]\n[[route.extra]]\n")]);
    }

    #[test]
    fn odd_layouts_and_several_files() {
        same(&["[[route]]\r\nto = \"a\"\r\n  [[route]]\t# c\r\nto = \"b\""]);
        same(&["[[route]]\n[[route]]\n[[route]]\n"]);
        same(&["[[bogus]]\nx = 1\n[[bogus]]\nx = 2\n[[daemon]]\n[[daemon]]\n"]);
        same(&[ROUTES, ROUTES, "[[route]]\nto = \"z\"\n"]);
        same(&[ROUTES, "route = 5\n", ROUTES]);
        same(&["[[route]]\nto = \"a\"\n", ROUTES]);
        same(&[&format!("[[ route ]]\nto = \"q\"\n{ROUTES}")]);
        same(&[&format!(
            "[[\"route\"]]\nto = \"q\"\n{ROUTES}[[ route ]]\nto = \"r\"\n"
        )]);
    }
}
