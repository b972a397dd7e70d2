//! Files of lesser authority (fragments from a cluster, feature `kubernetes`): merged from a
//! global offset on, they give way to the files before. A key set in both keeps the earlier
//! file's value (the clash is noted, not an error), and some top-level sections may not come
//! from them at all.

use std::ops::Range;

use toml::de::DeTable;

use super::super::diag::Diagnostics;

/// How the files from `from` on give way.
pub(super) struct Yielding {
    /// Where the files of lesser authority start (global offset).
    from: usize,
    /// Top-level sections they may not set.
    refused: &'static [&'static str],
    /// Why, for the error at such a section.
    why: &'static str,
    /// The keys set in both, with both places.
    pub(super) shadowed: Vec<Shadowed>,
}

/// A key a file of lesser authority set again: the earlier file's value stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The key's dotted path, e.g. `policy.input`.
    pub key: String,
    /// Where the file of lesser authority set it (global span).
    pub at: Range<usize>,
    /// Where it was set first, and stays set (global span).
    pub kept: Range<usize>,
}

impl Yielding {
    /// Files from `from` on give way; the sections `refused` are errors there, saying `why`.
    pub(super) fn new(from: usize, refused: &'static [&'static str], why: &'static str) -> Self {
        Yielding {
            from,
            refused,
            why,
            shadowed: Vec::new(),
        }
    }

    /// Takes the refused sections out of a file's `table`, each an error.
    pub(super) fn refuse_sections(&self, table: &mut DeTable<'_>, diags: &mut Diagnostics) {
        let refused: Vec<(String, Range<usize>)> = table
            .iter()
            .filter(|(k, _)| k.span().start >= self.from && self.refused.contains(&&**k.get_ref()))
            .map(|(k, _)| (k.get_ref().to_string(), k.span()))
            .collect();
        for (key, span) in refused {
            diags.error(span, format!("`[{key}]` {}", self.why));
            table.remove(key.as_str());
        }
    }

    /// True when a key first set at `first` and set again at `again` keeps its first value.
    pub(super) fn yields(&self, first: usize, again: usize) -> bool {
        first < self.from && again >= self.from
    }

    /// Notes the key `key` under `path`, set again at `at`, kept as set at `kept`.
    pub(super) fn note(
        &mut self,
        path: &[String],
        key: &str,
        at: Range<usize>,
        kept: Range<usize>,
    ) {
        let mut dotted = path.join(".");
        if !dotted.is_empty() {
            dotted.push('.');
        }
        dotted.push_str(key);
        self.shadowed.push(Shadowed {
            key: dotted,
            at,
            kept,
        });
    }
}
