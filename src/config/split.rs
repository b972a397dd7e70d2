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

/// A pure block: the place of one `[[key]]` element's text, parsed again when it is read.
/// Small on purpose (one per element): the text is found from the file that holds `base`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    /// Global offset of the block's text (its header line to the next header line).
    pub base: usize,
    /// Length of the text.
    pub len: u32,
    /// Offset of the element's header in the text: its placeholder's span starts there.
    pub header: u32,
}

impl Block {
    /// Global start of the element's header.
    pub fn header_start(&self) -> usize {
        self.base + self.header as usize
    }
}

/// A file parsed block by block: the tree (global spans, placeholders for pure blocks) and
/// the pure blocks in file order.
pub(super) struct Split<'a> {
    /// The file's tree, as the whole-file parse would give it, but with placeholders.
    pub table: DeTable<'a>,
    /// The pure blocks, in file order.
    pub blocks: Vec<Block>,
}

/// Parses `text` (at global offset `base`) block by block; `None` = parse it whole.
pub(super) fn parse(text: &str, base: usize, min_blocks: usize) -> Option<Split<'_>> {
    let heads = headers(text);
    if heads.len() < min_blocks.max(1) || u32::try_from(text.len()).is_err() {
        return None;
    }
    let mut pure: Vec<Pure> = Vec::new();
    // Each distinct key, with the span of its first pure header's key.
    let mut keys: Vec<(&str, Range<usize>)> = Vec::new();
    let mut last_impure_end = heads[0];
    for (i, &start) in heads.iter().enumerate() {
        let end = heads.get(i + 1).copied().unwrap_or(text.len());
        let key = key_at(text, start);
        match pure_block(&text[start..end], key) {
            Some((key_span, header)) => {
                let k = match keys.iter().position(|(k, _)| *k == key) {
                    Some(k) => k,
                    None => {
                        keys.push((key, shift(key_span, start)));
                        keys.len() - 1
                    }
                };
                pure.push(Pure {
                    head: i as u32,
                    key: k as u32,
                    header: header.start as u32..header.end as u32,
                });
            }
            None => last_impure_end = end,
        }
    }
    if pure.is_empty() {
        return None;
    }
    let pure = Pures {
        text,
        heads: &heads,
        keys,
        pure,
    };
    let mut table = if pure.iter().all(|p| pure.range(p).start >= last_impure_end) {
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
        for range in pure.iter().map(|p| pure.range(p)) {
            if range.end > last_impure_end {
                break;
            }
            rest.push_str(&text[at..range.start]);
            let len = range.len();
            let newline = text[range.clone()].ends_with('\n');
            rest.extend(std::iter::repeat_n(' ', len - usize::from(newline)));
            if newline {
                rest.push('\n');
            }
            blanks.push(range.clone());
            at = range.end;
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
        .map(|p| {
            let range = pure.range(p);
            Block {
                base: range.start + base,
                len: range.len() as u32,
                header: p.header.start,
            }
        })
        .collect();
    place_stubs(&mut table, &pure, base);
    Some(Split { table, blocks })
}

/// A pure block while parsing: which header starts it, its key (index into
/// [`Pures::keys`]) and the header's span in the block.
struct Pure {
    head: u32,
    key: u32,
    header: Range<u32>,
}

/// The pure blocks of one file, with what their places are relative to.
struct Pures<'t> {
    text: &'t str,
    heads: &'t [usize],
    keys: Vec<(&'t str, Range<usize>)>,
    pure: Vec<Pure>,
}

impl<'t> Pures<'t> {
    fn iter(&self) -> std::slice::Iter<'_, Pure> {
        self.pure.iter()
    }

    /// The block's text range in the file.
    fn range(&self, p: &Pure) -> Range<usize> {
        let i = p.head as usize;
        self.heads[i]..self.heads.get(i + 1).copied().unwrap_or(self.text.len())
    }

    /// The blocks of key number `k`.
    fn of(&self, k: usize) -> impl Iterator<Item = &Pure> {
        self.pure.iter().filter(move |p| p.key as usize == k)
    }

    /// The block's header span in the file.
    fn header(&self, p: &Pure) -> Range<usize> {
        let start = self.heads[p.head as usize];
        start + p.header.start as usize..start + p.header.end as usize
    }
}

/// Line starts of top-level `[[key]]` headers with a bare key.
fn headers(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if header_key(line).is_some() {
            out.push(at);
        }
        at += line.len();
    }
    out
}

/// The key of the header line that starts at `start`.
fn key_at(text: &str, start: usize) -> &str {
    let line = text[start..].split_inclusive('\n').next().unwrap_or("");
    header_key(line).unwrap_or("")
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
fn keys_fit(rest: &DeTable<'_>, pure: &Pures<'_>, text: &str) -> bool {
    let is_header = |span: Range<usize>| text.get(span).is_some_and(|s| s.starts_with("[["));
    pure.keys.iter().enumerate().all(|(k, (key, _))| {
        let Some(value) = rest.get(*key) else {
            return true;
        };
        let DeValue::Array(items) = value.get_ref() else {
            return false;
        };
        if items.is_empty() || !is_header(value.span()) {
            return false;
        }
        let pure_heads: Vec<usize> = pure.of(k).map(|p| pure.header(p).start).collect();
        items.iter().enumerate().all(|(i, item)| {
            if !item.get_ref().is_table() || !is_header(item.span()) {
                return false;
            }
            let start = item.span().start;
            let next_rest = items.get(i + 1).map_or(usize::MAX, |n| n.span().start);
            let next_pure = pure_heads
                .get(pure_heads.partition_point(|h| *h <= start))
                .copied()
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
fn place_stubs(table: &mut DeTable<'_>, pure: &Pures<'_>, base: usize) {
    for (k, (key, first_key_span)) in pure.keys.iter().enumerate() {
        let key = *key;
        let mut stubs = pure.of(k).map(|p| shift(pure.header(p), base)).peekable();
        let first_stub = stubs.peek().map_or(usize::MAX, |h| h.start);
        let (key_span, rest_items) = match table.remove_entry(key) {
            Some((k, v)) => match v.into_inner() {
                DeValue::Array(items) => (Some(k.span()), items),
                _ => unreachable!("keys_fit checked that the rest's value is an array"),
            },
            None => (None, DeArray::new()),
        };
        let key_span = match key_span {
            Some(k)
                if rest_items
                    .first()
                    .is_some_and(|r| r.span().start < first_stub) =>
            {
                k
            }
            _ => shift(first_key_span.clone(), base),
        };
        let count = rest_items.len() + pure.of(k).count();
        let mut rest_items = rest_items.into_iter().peekable();
        let mut items = Vec::with_capacity(count);
        loop {
            let take_rest = match (rest_items.peek(), stubs.peek()) {
                (Some(r), Some(s)) => r.span().start < s.start,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_rest {
                items.push(rest_items.next().expect("peeked"));
            } else {
                let span = stubs.next().expect("peeked");
                items.push(Spanned::new(span, DeValue::Table(DeTable::new())));
            }
        }
        let array_span = items[0].span();
        table.insert(
            Spanned::new(key_span, Cow::Owned(key.to_string())),
            Spanned::new(array_span, DeValue::Array(items.into_iter().collect())),
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

    #[test]
    fn a_big_mixed_file_with_problems_is_identical() {
        let mut text = String::from("[daemon]\nlisten = \"127.0.0.1:9\"\n");
        for i in 0..300 {
            text.push_str(&format!(
                "[[route]]\nto = \"10.0.{i}.0/24\"\nvia = \"192.0.2.1\"\n"
            ));
            if i % 7 == 0 {
                text.push_str("vai = 1\n[[route.nexthops]]\nvia = \"2001:db8::1\"\n");
            }
            if i % 50 == 3 {
                text.push_str(&format!(
                    "[zone{i}]\nx = 0o17\n[[service]]\nname = \"s{i}\"\n"
                ));
            }
            if i % 90 == 5 {
                text.push_str("[[route_rule]]\npriority = 5\ntable = 100\n");
            }
        }
        assert!(same(&[&text]) > 250);
        let broken = format!("{text}[[route]]\nto = \n");
        assert_eq!(same(&[&broken]), 0);
    }
}
