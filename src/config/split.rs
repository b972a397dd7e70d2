//! The fast path for a file that ends with a long run of `[[route]]` blocks.
//!
//! toml's parser lexes the whole text into tokens, turns them into events and then builds the
//! tree, all three alive at once: for 100,000 `[[route]]` entries (5 MB) that is ~200 MB, for
//! entries that validation reads one at a time. So when a file's tail is a run of at least
//! [`MIN_BLOCKS`] `[[key]]` blocks, the head (the text before the run) is parsed on its own,
//! then each block (a header line up to the next one) is parsed on its own and its one
//! element handed to an [`ElementSink`] at once; no tree of the tail ever exists.
//!
//! Why that equals the whole-file parse: the head and every block end at a line start, so when
//! each parses without error, no string, array or table is open where the next one begins,
//! and each block's content belongs to its own `[[key]]` element (sub-tables such as
//! `[key.extra]` included). A block that does not parse alone may be a cut inside one of its
//! multi-line strings; it is tried with the next few blocks appended. The elements append to the head's `key` array, which TOML allows
//! only when the head has no `key` or made it with `[[key]]` headers. Anything else (an error
//! anywhere, a block holding more than its element, a head that sets `key` otherwise) returns
//! `None`, and the caller parses the whole file, so every message comes from that parse.

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::doc::{ElementSink, Value, shift, shift_table, shift_value, take_elements};
use super::limits::ParseBudget;

/// Files whose tail has fewer `[[key]]` blocks than this are parsed whole.
pub const MIN_BLOCKS: usize = 64;

/// Parses `text` (at global offset `base`) as a head plus a tail of `[[key]]` blocks: the
/// elements of `key` go to `sink`, in file order, and the returned table (global spans) holds
/// `key` with an empty array. `None` (with elements possibly pushed: roll back) = parse it
/// whole.
pub fn parse<'a, S: ElementSink>(
    text: &'a str,
    base: usize,
    key: &str,
    min_blocks: usize,
    budget: &mut ParseBudget,
    sink: &mut S,
) -> Option<DeTable<'a>> {
    let heads = tail_headers(text, key);
    if heads.len() < min_blocks.max(1) {
        return None;
    }
    let head = &text[..heads[0]];
    // Over the allowance: the whole-file parse refuses it with the problem's place.
    budget.charge(head).ok()?;
    let (table, errors) = DeTable::parse_recoverable(head);
    let table = table.into_inner();
    if !errors.is_empty() || !appendable(&table, key, head) {
        return None;
    }
    let mut table = shift_table(table, base);
    take_elements(&mut table, key, sink);
    sink.reserve(heads.len());
    let mut first = None;
    let mut i = 0;
    while i < heads.len() {
        let start = heads[i];
        let end = heads.get(i + 1).copied().unwrap_or(text.len());
        // A plain block is read by the sink itself (no tree); its header is `[[key]]`.
        if let Some(header) = sink.push_text(&text[start..end], base + start) {
            let key_span = header.start + 2..header.end - 2;
            first.get_or_insert((key_span, header));
            i += 1;
            continue;
        }
        // A block's tree lives until the sink has read it, so it only has to fit beside what
        // is charged (a block that swallows the next headers is a multi-line string's cut).
        budget.fits(&text[start..end]).ok()?;
        let (next, key_span, element) = block_from(text, &heads, i, key)?;
        let element = shift_value(element, base + start);
        first.get_or_insert((shift(key_span, base + start), element.span()));
        sink.push(element);
        i = next;
    }
    if !table.contains_key(key) {
        let (key_span, array_span) = first?;
        table.insert(
            Spanned::new(key_span, Cow::Owned(key.to_string())),
            Spanned::new(array_span, DeValue::Array(DeArray::new())),
        );
    }
    Some(table)
}

/// True when `[[key]]` blocks may follow `head`: it has no `key`, or an array of tables made
/// by `[[key]]` headers (an inline array cannot be extended).
fn appendable(head: &DeTable<'_>, key: &str, text: &str) -> bool {
    let Some(value) = head.get(key) else {
        return true;
    };
    let by_headers = |span: Range<usize>| text.get(span).is_some_and(|s| s.starts_with("[["));
    match value.get_ref() {
        DeValue::Array(items) => {
            by_headers(value.span())
                && items
                    .iter()
                    .all(|i| i.get_ref().is_table() && by_headers(i.span()))
        }
        _ => false,
    }
}

/// How many following headers a block may swallow when a header line turns out to be inside
/// a multi-line string of the block (`note = """` ... `[[route]]` ... `"""`).
const MAX_SWALLOWED: usize = 4;

/// The element whose block starts at header `i`: the text up to the next header, or, when
/// that does not parse on its own, up to one of the few after it. Returns the index of the
/// header after the block, the key's span and the element (spans local to the block).
fn block_from<'a>(
    text: &'a str,
    heads: &[usize],
    i: usize,
    key: &str,
) -> Option<(usize, Range<usize>, Value<'a>)> {
    let start = heads[i];
    (i + 1..=heads.len())
        .take(MAX_SWALLOWED + 1)
        .find_map(|next| {
            let end = heads.get(next).copied().unwrap_or(text.len());
            block(&text[start..end], key).map(|(k, v)| (next, k, v))
        })
}

/// Parses one block alone: it must be error-free and hold exactly one `key` element. Returns
/// the key's span and the element (spans local to the block).
fn block<'a>(text: &'a str, key: &str) -> Option<(Range<usize>, Value<'a>)> {
    let (table, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return None;
    }
    let mut entries = table.into_inner().into_iter();
    let (k, v) = entries.next()?;
    if entries.next().is_some() || &**k.get_ref() != key {
        return None;
    }
    let DeValue::Array(items) = v.into_inner() else {
        return None;
    };
    let mut items = items.into_iter();
    let element = items.next()?;
    (items.next().is_none() && element.get_ref().is_table()).then(|| (k.span(), element))
}

/// Line starts of the `[[key]]` headers of the file's tail: those after the last line that
/// opens any other table (`[key.sub]` and `[[key.sub]]` belong to an element and do not
/// count). Purely lexical: a line inside a multi-line string may be taken for a header; the
/// parses that follow catch that.
fn tail_headers(text: &str, key: &str) -> Vec<usize> {
    let mut heads = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        match classify(line, key) {
            Line::Header => heads.push(at),
            Line::Other => heads.clear(),
            Line::Content => {}
        }
        at += line.len();
    }
    heads
}

/// What a line is, for [`tail_headers`].
enum Line {
    /// `[[key]]`, maybe with spaces and a comment.
    Header,
    /// Any other line that starts with `[`.
    Other,
    /// Anything else (keys, values, comments, `[key.sub]` headers).
    Content,
}

fn classify(line: &str, key: &str) -> Line {
    let line = skip_blanks(line);
    if !line.starts_with('[') {
        return Line::Content;
    }
    let inner = skip_blanks(line.trim_start_matches('['));
    let Some(rest) = inner.strip_prefix(key) else {
        return Line::Other;
    };
    let rest = skip_blanks(rest);
    if rest.starts_with('.') && !line.starts_with("[[[") {
        return Line::Content;
    }
    let Some(after) = rest.strip_prefix("]]").filter(|_| line.starts_with("[[")) else {
        return Line::Other;
    };
    let after = skip_blanks(after);
    if after.is_empty() || after.starts_with(['#', '\n']) || after.starts_with("\r\n") {
        Line::Header
    } else {
        Line::Other
    }
}

/// `text` without its leading spaces and tabs, byte by byte (every line of a 100,000-route
/// file goes through here; the generic pattern search is several times slower).
fn skip_blanks(text: &str) -> &str {
    let n = text
        .bytes()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    &text[n..]
}
