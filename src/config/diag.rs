//! Configuration diagnostics: every problem of a load, each with its place.
//!
//! Validation never stops at the first problem: syntax errors of every file, unknown keys of
//! every section and every semantic problem are collected, then rendered together as
//! `file:line:col: message`, the offending line and a caret, like a compiler would.

use std::fmt::{self, Write as _};
use std::ops::Range;

use super::source_map::SourceMap;

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

/// The problems of one load, in the order they were found.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Records a problem at a place.
    pub fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.items.push(Diagnostic {
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
        self.items.push(Diagnostic {
            span: Some(span),
            message: message.into(),
            related: Some((related, note.into())),
        });
    }

    /// Records a problem that has no place in a file (e.g. a file that cannot be read).
    pub fn error_nowhere(&mut self, message: impl Into<String>) {
        self.items.push(Diagnostic {
            span: None,
            message: message.into(),
            related: None,
        });
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The number of problems.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Forgets the problems recorded after the first `len`.
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
    }

    /// Moves every problem of `other` to the end of this list.
    pub fn append(&mut self, other: &mut Diagnostics) {
        self.items.append(&mut other.items);
    }

    /// Every problem recorded.
    pub fn items(&self) -> &[Diagnostic] {
        &self.items
    }

    /// Renders every problem with its place, line and caret.
    pub fn render(&self, sources: &SourceMap) -> String {
        let mut out = String::new();
        for d in &self.items {
            render_one(&mut out, sources, d.span.as_ref(), &d.message, "error");
            if let Some((span, note)) = &d.related {
                render_one(&mut out, sources, Some(span), note, "note");
            }
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
    let gutter = loc.line.to_string().len();
    let width = sources
        .snippet(span)
        .lines()
        .next()
        .map_or(1, |l| l.chars().count().max(1));
    let _ = writeln!(out, "{:gutter$} |", "");
    let _ = writeln!(out, "{} | {}", loc.line, loc.line_text);
    let _ = writeln!(
        out,
        "{:gutter$} | {}{}",
        "",
        " ".repeat(loc.column - 1),
        "^".repeat(width)
    );
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
                    d.message
                ),
                None => d.message.clone(),
            })
            .unwrap_or_default();
        ConfigError {
            rendered: diags.render(sources),
            count: diags.len(),
            first,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.rendered.trim_end())
    }
}
