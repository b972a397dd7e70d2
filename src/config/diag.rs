//! Configuration diagnostics: every problem of a load, each with its place.
//!
//! Validation never stops at the first problem: syntax errors of every file, unknown keys of
//! every section and every semantic problem are collected, then rendered together as
//! `file:line:col: message`, the offending line and a caret, like a compiler would.
//!
//! What is quoted is bounded, whatever the input: a long line is cut to a window around the
//! column (a one-line 52 MB file once put its whole line in the log), and a message that
//! quotes a long value is cut too.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::ops::Range;

use super::source_map::SourceMap;

/// The most characters of a line a diagnostic quotes; a longer line is cut around the column.
pub const QUOTE_CHARS: usize = 100;

/// Of a cut line, how many characters are shown before the column.
const QUOTE_BEFORE: usize = 40;

/// The longest message shown whole, in bytes.
pub const MESSAGE_BYTES: usize = 1000;

/// The most problems rendered: each is located by a walk of its file, and 50,000 syntax
/// errors (a 100 KB file of `x` lines) took 99 s and 5 MB to render in full.
pub const MAX_RENDERED: usize = 100;

/// The most problems kept; the rest are counted. A 16 MiB file of one-character lines has 8
/// million syntax errors, and each kept costs about 150 bytes.
pub const MAX_KEPT: usize = 1000;

/// Marks where a quoted line or a message was cut.
const CUT: char = '…';

/// One problem found while loading the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where it is (global span), if it has a place in a file.
    pub span: Option<Range<usize>>,
    /// What is wrong and, where it helps, what was expected.
    pub message: String,
    /// A second place that explains the first (e.g. where a key was set before).
    pub related: Option<(Range<usize>, String)>,
}

/// The problems of one load, in the order they were found: the first `MAX_KEPT` (1,000), and how
/// many more.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    /// Problems recorded after the first [`MAX_KEPT`]: counted, not kept.
    dropped: usize,
}

impl Diagnostics {
    /// Keeps `d` if there is room, else counts it.
    fn push(&mut self, d: Diagnostic) {
        if self.items.len() < MAX_KEPT {
            self.items.push(d);
        } else {
            self.dropped += 1;
        }
    }

    /// Records a problem at a place.
    pub fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.push(Diagnostic {
            span: Some(span),
            message: message.into(),
            related: None,
        });
    }

    /// Records a problem at a place with a note at another place.
    pub fn error_also(
        &mut self,
        span: Range<usize>,
        message: impl Into<String>,
        related: Range<usize>,
        note: impl Into<String>,
    ) {
        self.push(Diagnostic {
            span: Some(span),
            message: message.into(),
            related: Some((related, note.into())),
        });
    }

    /// Records a problem that has no place in a file (e.g. a file that cannot be read).
    pub fn error_nowhere(&mut self, message: impl Into<String>) {
        self.push(Diagnostic {
            span: None,
            message: message.into(),
            related: None,
        });
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of problems (kept or only counted).
    pub fn len(&self) -> usize {
        self.items.len() + self.dropped
    }

    /// Forgets the problems recorded after the first `len`.
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
        self.dropped = len.saturating_sub(self.items.len()).min(self.dropped);
    }

    /// Moves every problem of `other` to the end of this list.
    pub fn append(&mut self, other: &mut Diagnostics) {
        for d in other.items.drain(..) {
            self.push(d);
        }
        self.dropped += std::mem::take(&mut other.dropped);
    }

    /// The problems kept (the first `MAX_KEPT`; [`Diagnostics::len`] counts them all).
    pub fn items(&self) -> &[Diagnostic] {
        &self.items
    }

    /// Renders the first `MAX_RENDERED` (100) problems with their place, line and caret, and how
    /// many more there are.
    pub fn render(&self, sources: &SourceMap) -> String {
        let mut out = String::new();
        for d in self.items.iter().take(MAX_RENDERED) {
            render_one(&mut out, sources, d.span.as_ref(), &d.message, "error");
            if let Some((span, note)) = &d.related {
                render_one(&mut out, sources, Some(span), note, "note");
            }
        }
        if let Some(more) = self.len().checked_sub(MAX_RENDERED).filter(|n| *n > 0) {
            let _ = writeln!(
                out,
                "error: {more} more problem(s) not shown (the first {MAX_RENDERED} are)"
            );
        }
        out
    }
}

fn render_one(
    out: &mut String,
    sources: &SourceMap,
    span: Option<&Range<usize>>,
    msg: &str,
    kind: &str,
) {
    let msg = shorten(msg);
    let Some(loc) = span.and_then(|s| sources.locate(s)) else {
        let _ = writeln!(out, "{kind}: {msg}");
        return;
    };
    let span = span.expect("located");
    let _ = writeln!(
        out,
        "{}:{}:{}: {kind}: {msg}",
        loc.path.display(),
        loc.line,
        loc.column
    );
    // A file that was not read (over a size limit) has no line to quote.
    if sources
        .file_at(span.start)
        .is_some_and(|f| f.text.is_empty())
    {
        return;
    }
    let gutter = loc.line.to_string().len();
    let width = sources
        .snippet(span)
        .lines()
        .next()
        .map_or(1, |l| l.chars().take(QUOTE_CHARS + 1).count().max(1));
    let quote = Quote::of(loc.line_text, loc.column, width);
    let _ = writeln!(out, "{:gutter$} |", "");
    let _ = writeln!(out, "{} | {}", loc.line, quote.text);
    let _ = writeln!(
        out,
        "{:gutter$} | {}{}",
        "",
        " ".repeat(quote.caret),
        "^".repeat(quote.width)
    );
}

/// `msg`, cut after [`MESSAGE_BYTES`] bytes, saying how much was left out.
fn shorten(msg: &str) -> Cow<'_, str> {
    if msg.len() <= MESSAGE_BYTES {
        return Cow::Borrowed(msg);
    }
    let mut end = MESSAGE_BYTES;
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}{CUT} ({} more bytes)",
        &msg[..end],
        msg.len() - end
    ))
}

/// The part of a line a diagnostic shows, and where its caret goes.
#[derive(Debug, PartialEq, Eq)]
struct Quote {
    /// The line, or a window of at most [`QUOTE_CHARS`] characters of it marked with [`CUT`]
    /// where it was cut.
    text: String,
    /// Characters of `text` before the caret.
    caret: usize,
    /// Carets to draw (at least one, at most to the end of `text` and one past it).
    width: usize,
}

impl Quote {
    /// The window of `line` around 1-based `column`, `width` characters marked.
    fn of(line: &str, column: usize, width: usize) -> Quote {
        let at = column.saturating_sub(1);
        // Counting stops past the window: a 50 MB line is not walked to its end for this.
        let needed = at.saturating_add(QUOTE_CHARS + 1);
        let total = line.chars().take(needed).count();
        let (text, caret, shown) = if total <= QUOTE_CHARS {
            (line.to_string(), at, total)
        } else {
            let start = at.saturating_sub(QUOTE_BEFORE);
            let rest = line.chars().skip(start);
            let mut text = String::new();
            if start > 0 {
                text.push(CUT);
            }
            let window: String = rest.clone().take(QUOTE_CHARS).collect();
            let shown = window.chars().count();
            text.push_str(&window);
            if rest.clone().nth(QUOTE_CHARS).is_some() {
                text.push(CUT);
            }
            let lead = usize::from(start > 0);
            (text, at - start + lead, shown + lead)
        };
        let width = width.min((shown + 1).saturating_sub(caret)).max(1);
        Quote { text, caret, width }
    }
}

/// A failed load: every diagnostic, rendered against the files that were read.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError {
    /// The rendered report (what `check` prints and the log shows).
    pub rendered: String,
    /// How many problems were found.
    pub count: usize,
    /// The first problem's one-line summary (for the systemd STATUS line).
    pub first: String,
    /// The data files the config named (`loadfile`), read or not: with the config files,
    /// what the rejected content was (a reload tells a new attempt from the same one by them).
    pub data_files: Vec<std::path::PathBuf>,
}

impl ConfigError {
    /// Builds the error from a non-empty set of diagnostics.
    pub fn new(diags: &Diagnostics, sources: &SourceMap) -> ConfigError {
        let first = diags
            .items()
            .first()
            .map(|d| match d.span.as_ref().and_then(|s| sources.locate(s)) {
                Some(l) => format!(
                    "{}:{}:{}: {}",
                    l.path.display(),
                    l.line,
                    l.column,
                    shorten(&d.message)
                ),
                None => shorten(&d.message).into_owned(),
            })
            .unwrap_or_default();
        ConfigError {
            rendered: diags.render(sources),
            count: diags.len(),
            first,
            data_files: Vec::new(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rendered.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_line_is_quoted_whole() {
        let q = Quote::of("listen = \"nowhere\"", 10, 9);
        assert_eq!(
            (q.text.as_str(), q.caret, q.width),
            ("listen = \"nowhere\"", 9, 9)
        );
        // At the end of the line (a missing value): one caret past the text.
        let q = Quote::of("k =", 4, 1);
        assert_eq!((q.caret, q.width), (3, 1));
    }

    #[test]
    fn a_long_line_is_cut_to_a_window_around_the_column() {
        let line = format!("k = [{}\"x\"]", "1,".repeat(1_000_000));
        let column = line.len() - 3;
        let q = Quote::of(&line, column, 3);
        assert!(
            q.text.starts_with(CUT) && !q.text.ends_with(CUT),
            "{}",
            q.text
        );
        assert!(q.text.chars().count() <= QUOTE_CHARS + 2, "{}", q.text);
        let marked: String = q.text.chars().skip(q.caret).take(q.width).collect();
        assert_eq!(marked, "\"x\"");
        // Near the start: cut at the end only; in the middle: both ends.
        let q = Quote::of(&line, 5, 1);
        assert!(
            q.text.starts_with("k = [1,1") && q.text.ends_with(CUT),
            "{}",
            q.text
        );
        assert_eq!(q.text.chars().nth(q.caret), Some('['));
        let q = Quote::of(&line, 1_000_000, 1_000_000);
        assert!(
            q.text.starts_with(CUT) && q.text.ends_with(CUT),
            "{}",
            q.text
        );
        assert_eq!(q.caret, QUOTE_BEFORE + 1);
        assert_eq!(
            q.caret + q.width,
            q.text.chars().count(),
            "carets end with the text"
        );
    }

    #[test]
    fn bug_50000_syntax_errors_render_the_first_hundred_and_a_count() {
        let text = "x\n".repeat(50_000);
        let mut sources = SourceMap::default();
        sources.add("e.toml".into(), text);
        let mut diags = Diagnostics::default();
        for line in 0..50_000 {
            diags.error(2 * line..2 * line + 1, "invalid TOML: expected `=`");
        }
        let started = std::time::Instant::now();
        let e = ConfigError::new(&diags, &sources);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(e.count, 50_000);
        assert_eq!(
            e.rendered.matches(": error: invalid TOML").count(),
            MAX_RENDERED
        );
        assert!(e.rendered.contains("e.toml:100:1: error"), "{}", e.rendered);
        assert!(!e.rendered.contains("e.toml:101:1"), "{}", e.rendered);
        assert!(
            e.rendered
                .ends_with("error: 49900 more problem(s) not shown (the first 100 are)\n"),
            "{}",
            &e.rendered[e.rendered.len() - 200..]
        );
    }

    #[test]
    fn problems_past_the_kept_ones_are_counted_and_rolled_back_by_count() {
        let mut diags = Diagnostics::default();
        for i in 0..MAX_KEPT + 10 {
            diags.error(i..i + 1, "x");
        }
        assert_eq!(
            (diags.len(), diags.items().len()),
            (MAX_KEPT + 10, MAX_KEPT)
        );
        diags.truncate(MAX_KEPT + 4);
        assert_eq!(diags.len(), MAX_KEPT + 4);
        diags.truncate(MAX_KEPT - 1);
        assert_eq!(
            (diags.len(), diags.items().len()),
            (MAX_KEPT - 1, MAX_KEPT - 1)
        );
        let mut other = Diagnostics::default();
        for i in 0..5 {
            other.error(i..i + 1, "y");
        }
        diags.append(&mut other);
        assert_eq!((diags.len(), diags.items().len()), (MAX_KEPT + 4, MAX_KEPT));
        assert_eq!((other.len(), other.items().len()), (0, 0));
    }

    #[test]
    fn a_long_message_is_cut_saying_how_much_is_left_out() {
        let msg = format!("invalid name \"{}\"", "é".repeat(2000));
        let short = shorten(&msg);
        assert!(short.len() < MESSAGE_BYTES + 40, "{short}");
        assert!(
            short.ends_with(&format!("{CUT} ({} more bytes)", msg.len() - MESSAGE_BYTES)),
            "{short}"
        );
        assert_eq!(shorten("short"), "short");
    }
}
