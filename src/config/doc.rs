//! The merged configuration document and the helpers that deserialize parts of it.
//!
//! Files are merged in load order: tables merge key by key, arrays of tables append, and any
//! other key set twice is an error that names both places. Validation code then deserializes
//! each piece on its own ([`Doc::items`], [`de`]), so one bad entry does not hide the errors of
//! the next one. Every span is global (see [`super::SourceMap`]).

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue, ValueDeserializer};

use super::diag::Diagnostics;

#[cfg(feature = "kubernetes")]
mod yielding;
#[cfg(feature = "kubernetes")]
pub use yielding::Shadowed;
#[cfg(feature = "kubernetes")]
use yielding::Yielding;

/// Without the `kubernetes` feature no file yields (fragments come from a cluster only): a
/// type with no value, so the merge's yielding branches are compiled out.
#[cfg(not(feature = "kubernetes"))]
enum Yielding {}

#[cfg(not(feature = "kubernetes"))]
impl Yielding {
    fn refuse_sections(&self, _: &mut DeTable<'_>, _: &mut Diagnostics) {
        match *self {}
    }

    fn yields(&self, _: usize, _: usize) -> bool {
        match *self {}
    }

    fn note(&mut self, _: &[String], _: &str, _: Range<usize>, _: Range<usize>) {
        match *self {}
    }
}

/// A value of the merged document, with its global span.
pub type Value<'a> = Spanned<DeValue<'a>>;

/// Takes the elements of a top-level array of tables that the loader hands over instead of
/// keeping them in the document (`[[route]]`: 100,000 of them must not be held as a tree).
pub trait ElementSink {
    /// Where the sink stands now, to go back to with [`ElementSink::rollback`].
    type Mark: Copy;

    /// Room for `additional` more elements (sized once: doubling would hold two copies).
    fn reserve(&mut self, additional: usize);

    /// Takes one element, in document order.
    fn push(&mut self, element: Value<'_>);

    /// Takes the element of one `[[key]]` block (`text`, at global offset `base`) straight
    /// from its text, when the sink can read it without the TOML parser exactly as the parse
    /// would give it; returns the span of its header then. `None`: the block is parsed and
    /// given to [`ElementSink::push`] (the default: every block is parsed).
    fn push_text(&mut self, text: &str, base: usize) -> Option<Range<usize>> {
        let _ = (text, base);
        None
    }

    /// The current position.
    fn mark(&self) -> Self::Mark;

    /// Forgets every element pushed since `mark` (a file's fast parse gave up half way).
    fn rollback(&mut self, mark: Self::Mark);
}

/// A section's own account of a key set twice, which the generic merge would only call "set
/// twice" and the parser "duplicate key": each section that has such a case registers it
/// (`config::KEY_CLASHES`), and the merge and the parser ask every one.
pub struct KeyClash {
    /// True when merging `key` at `path` (its table's keys from the root) from another file,
    /// `new` over `existing`, is this case.
    pub merge: fn(path: &[String], key: &str, existing: &DeValue<'_>, new: &DeValue<'_>) -> bool,
    /// For a parser's "duplicate key" error at `span` of one file's `text` (local spans) that
    /// parsed into `table`: the span of the first of the two places, when it is this case.
    pub syntax: fn(text: &str, span: &Range<usize>, table: &DeTable<'_>) -> Option<Range<usize>>,
    /// The error, shown at the second place.
    pub message: &'static str,
    /// The note, shown at the first place.
    pub note: &'static str,
}

/// The merged document of every config file of one load.
pub struct Doc<'a> {
    root: DeTable<'a>,
    clashes: &'static [KeyClash],
    /// Set once the files of lesser authority (fragments from a cluster) start merging.
    yielding: Option<Yielding>,
}

impl std::fmt::Debug for Doc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doc").field("root", &self.root).finish()
    }
}

impl<'a> Doc<'a> {
    /// An empty document whose merge asks `clashes` about a key set twice.
    pub fn new(clashes: &'static [KeyClash]) -> Doc<'a> {
        Doc {
            root: DeTable::new(),
            clashes,
            yielding: None,
        }
    }

    /// From global offset `from` on, files give way to the ones merged before: a key set in
    /// both keeps its first value (see [`Doc::shadowed`]), and the top-level sections
    /// `refused` are errors there, saying `why`.
    #[cfg(feature = "kubernetes")]
    pub fn yield_from(&mut self, from: usize, refused: &'static [&'static str], why: &'static str) {
        self.yielding = Some(Yielding::new(from, refused, why));
    }

    /// The keys files of lesser authority set again, in merge order.
    #[cfg(feature = "kubernetes")]
    pub fn shadowed(&self) -> &[Shadowed] {
        self.yielding.as_ref().map_or(&[], |y| &y.shadowed)
    }

    /// Merges one file's table (global spans) into the document; conflicts go to `diags`.
    pub fn merge(&mut self, mut table: DeTable<'a>, diags: &mut Diagnostics) {
        if let Some(y) = &self.yielding {
            y.refuse_sections(&mut table, diags);
        }
        merge_tables(
            &mut self.root,
            table,
            &mut Vec::new(),
            self.clashes,
            &mut self.yielding,
            diags,
        );
    }

    /// The sections' accounts of a key set twice (for the parser's "duplicate key").
    pub fn clashes(&self) -> &'static [KeyClash] {
        self.clashes
    }

    /// True when a file's `[[key]]` entries would be appended: `key` is unset or already an
    /// array of tables.
    pub fn appends_to(&self, key: &str) -> bool {
        self.root
            .get(key)
            .is_none_or(|v| is_array_of_tables(v.get_ref()))
    }

    /// The top-level keys, with the span of each key.
    pub fn keys(&self) -> impl Iterator<Item = (&str, Range<usize>)> {
        self.root.iter().map(|(k, _)| (&**k.get_ref(), k.span()))
    }

    /// A top-level value.
    pub fn value(&self, key: &str) -> Option<&Value<'a>> {
        self.root.get(key)
    }

    /// The elements of top-level array `key`; `Err` with the value when it is not an array.
    pub fn array(&self, key: &str) -> Option<Result<&DeArray<'a>, &Value<'a>>> {
        let value = self.root.get(key)?;
        Some(match value.get_ref() {
            DeValue::Array(items) => Ok(items),
            _ => Err(value),
        })
    }

    /// Deserializes a top-level table (e.g. `[daemon]`) on its own.
    pub fn table<T: DeserializeOwned>(
        &self,
        key: &str,
        diags: &mut Diagnostics,
    ) -> Option<Spanned<T>> {
        let value = self.value(key)?;
        de(value, diags).map(|v| Spanned::new(value.span(), v))
    }

    /// Deserializes each entry of a top-level array of tables (e.g. `[[service]]`) on its own.
    pub fn items<T: DeserializeOwned>(
        &self,
        key: &str,
        diags: &mut Diagnostics,
    ) -> Vec<Spanned<T>> {
        self.value(key)
            .map_or_else(Vec::new, |value| de_each(value, diags))
    }
}

/// Deserializes one value; a failure is recorded at its place and yields `None`.
pub fn de<T: DeserializeOwned>(value: &Value<'_>, diags: &mut Diagnostics) -> Option<T> {
    de_owned(value.clone(), diags)
}

/// [`de`] for a value the caller gives away (no copy).
pub fn de_owned<T: DeserializeOwned>(value: Value<'_>, diags: &mut Diagnostics) -> Option<T> {
    let whole = value.span();
    match T::deserialize(ValueDeserializer::from(value)) {
        Ok(v) => Some(v),
        Err(e) => {
            let span = e.span().unwrap_or(whole);
            diags.error(span, e.message().trim_end().to_string());
            None
        }
    }
}

/// Deserializes each element of an array value on its own (a non-array is an error).
pub fn de_each<T: DeserializeOwned>(value: &Value<'_>, diags: &mut Diagnostics) -> Vec<Spanned<T>> {
    match value.get_ref() {
        DeValue::Array(items) => items
            .iter()
            .filter_map(|item| de(item, diags).map(|v| Spanned::new(item.span(), v)))
            .collect(),
        other => {
            diags.error(
                value.span(),
                format!("invalid type: {}, expected an array", other.type_str()),
            );
            Vec::new()
        }
    }
}

/// A span moved by `base` (file-local to global).
pub fn shift(span: Range<usize>, base: usize) -> Range<usize> {
    span.start + base..span.end + base
}

/// A value with every span in it moved by `base`.
pub fn shift_value(value: Value<'_>, base: usize) -> Value<'_> {
    let span = shift(value.span(), base);
    let inner = match value.into_inner() {
        DeValue::Array(items) => DeValue::Array(
            items
                .into_iter()
                .map(|v| shift_value(v, base))
                .collect::<DeArray<'_>>(),
        ),
        DeValue::Table(table) => DeValue::Table(shift_table(table, base)),
        scalar => scalar,
    };
    Spanned::new(span, inner)
}

/// A table with every span in it moved by `base`.
pub fn shift_table(table: DeTable<'_>, base: usize) -> DeTable<'_> {
    let mut out = DeTable::new();
    for (key, value) in table {
        let key_span = shift(key.span(), base);
        out.insert(
            Spanned::new(key_span, key.into_inner()),
            shift_value(value, base),
        );
    }
    out
}

/// An array whose elements are all tables (an empty array counts: it can still be appended to).
pub fn is_array_of_tables(v: &DeValue<'_>) -> bool {
    matches!(v, DeValue::Array(items) if items.iter().all(|i| i.get_ref().is_table()))
}

fn merge_tables<'a>(
    dst: &mut DeTable<'a>,
    src: DeTable<'a>,
    path: &mut Vec<String>,
    clashes: &'static [KeyClash],
    yielding: &mut Option<Yielding>,
    diags: &mut Diagnostics,
) {
    for (key, value) in src {
        let first_set = dst.get_key_value(&**key.get_ref()).map(|(k, _)| k.span());
        let Some(first_set) = first_set else {
            dst.insert(key, value);
            continue;
        };
        let existing = dst.get_mut(&**key.get_ref()).expect("key present");
        let appendable =
            is_array_of_tables(existing.get_ref()) && is_array_of_tables(value.get_ref());
        let clash = clashes
            .iter()
            .find(|c| (c.merge)(path, key.get_ref(), existing.get_ref(), value.get_ref()));
        match (existing.get_mut(), value.into_inner()) {
            (DeValue::Table(into), DeValue::Table(from)) => {
                path.push(key.get_ref().to_string());
                merge_tables(into, from, path, clashes, yielding, diags);
                path.pop();
            }
            (DeValue::Array(into), DeValue::Array(from)) if appendable => {
                for item in from {
                    into.push(item);
                }
            }
            _ => match clash {
                // The file of more authority keeps its value; the clash is noted.
                _ if yielding
                    .as_ref()
                    .is_some_and(|y| y.yields(first_set.start, key.span().start)) =>
                {
                    if let Some(y) = yielding.as_mut() {
                        y.note(path, key.get_ref(), key.span(), first_set);
                    }
                }
                Some(c) => diags.error_also(key.span(), c.message, first_set, c.note),
                None => diags.error_also(
                    key.span(),
                    format!(
                        "`{}` is set twice: a key may be set in one file only",
                        key.get_ref()
                    ),
                    first_set,
                    "first set here",
                ),
            },
        }
    }
}

/// Moves the elements of `table`'s array of tables `key` into `sink`, leaving the key with an
/// empty array (which merges like the full one). Anything else under `key` stays.
pub fn take_elements<S: ElementSink>(table: &mut DeTable<'_>, key: &str, sink: &mut S) {
    let Some(value) = table.get_mut(key) else {
        return;
    };
    if !is_array_of_tables(value.get_ref()) {
        return;
    }
    if let DeValue::Array(items) = value.get_mut() {
        let items = std::mem::replace(items, DeArray::new());
        sink.reserve(items.len());
        for item in items {
            sink.push(item);
        }
    }
}
