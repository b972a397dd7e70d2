//! Reading one file into the merged document: the `[[route]]` elements go to a sink as they
//! are read (never kept as a tree), everything else merges into the [`Doc`].
//!
//! A file that ends with a long run of `[[route]]` blocks takes the fast path (see `split`);
//! any other file, or one the fast path gives up on, is parsed whole with toml's recoverable
//! parser, so every syntax error of every file is reported. Either way a file's route
//! elements reach the sink in file order, and only when TOML would append them to the routes
//! of the files before (else the merge reports the conflict and they are dropped).
//!
//! `edgenetd check` on 100,000 `[[route]]` entries (5.0 MB), parsed whole: peak RSS 195 MiB.
//! With the fast path the heap holds the text (kept for diagnostics), the validated routes and
//! the duplicate-route index; see docs/routes.md for the figures.

use toml::de::DeTable;

use super::diag::Diagnostics;
use super::doc::{Doc, ElementSink, KeyClash, shift, shift_table, take_elements};
use super::limits::{self, ParseBudget};
use super::split;

/// The array of tables handed to the sink instead of the document.
pub const SINK_KEY: &str = "route";

/// Parses one file (its text starting at global offset `base`) and merges it into `doc`; the
/// `[[route]]` elements go to `sink`. Files whose route tail has fewer than `min_blocks`
/// blocks are parsed whole.
pub fn merge_file<'a, S: ElementSink>(
    doc: &mut Doc<'a>,
    sink: &mut S,
    text: &'a str,
    base: usize,
    min_blocks: usize,
    budget: &mut ParseBudget,
    diags: &mut Diagnostics,
) {
    let appends = doc.appends_to(SINK_KEY);
    if appends {
        let mark = sink.mark();
        let before = *budget;
        if let Some(table) = split::parse(text, base, SINK_KEY, min_blocks, budget, sink) {
            doc.merge(table, diags);
            return;
        }
        sink.rollback(mark);
        *budget = before;
    }
    let Some(mut table) = parse_whole(text, base, budget, doc.clashes(), diags) else {
        return;
    };
    if appends {
        take_elements(&mut table, SINK_KEY, sink);
    }
    doc.merge(table, diags);
}

/// Parses a whole file; syntax errors go to `diags`, what parsed is kept (global spans).
/// `None` (and a problem) when its weight does not fit in what is left of `budget`.
fn parse_whole<'a>(
    text: &'a str,
    base: usize,
    budget: &mut ParseBudget,
    clashes: &[KeyClash],
    diags: &mut Diagnostics,
) -> Option<DeTable<'a>> {
    let before = budget.used();
    if let Err(at) = budget.charge(text) {
        diags.error(base + at..base + at + 1, limits::weight_message(before));
        return None;
    }
    let (table, errors) = DeTable::parse_recoverable(text);
    let table = table.into_inner();
    for e in errors {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim_end();
        let clash = clashes
            .iter()
            .filter(|_| message == "duplicate key")
            .find_map(|c| Some((c, (c.syntax)(text, &span, &table)?)));
        match clash {
            Some((c, first)) => {
                diags.error_also(shift(span, base), c.message, shift(first, base), c.note)
            }
            None => diags.error(shift(span, base), format!("invalid TOML: {message}")),
        }
    }
    Some(shift_table(table, base))
}
