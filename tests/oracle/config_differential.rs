//! The differential check of the `[[route]]` fast path: for any input, the fast path and the
//! whole-file parse give the same document, the same route elements (values and places), the
//! same diagnostics and the same validated state. Used by the loader's tests
//! (`src/config/load_tests.rs`) and by the cargo-fuzz target `route_tail` (built with
//! `--cfg fuzzing`). It reads the loader's internals, so it is mounted as `config::differential`
//! (`#[path]` in `src/config/mod.rs`) in test and fuzz builds only; the daemon never has it.

use super::diag::Diagnostics;
use super::doc::{Doc, ElementSink, Value};
use super::limits::ParseBudget;
use super::load::{SINK_KEY, merge_file};
use super::source_map::SourceMap;
use super::{load_str_split, split};

/// A sink that keeps what it is given, printed with its spans.
#[derive(Default)]
pub struct Recorder(
    /// Each element pushed, as `{:?}` prints it (spans included).
    pub Vec<String>,
);

impl ElementSink for Recorder {
    type Mark = usize;
    fn reserve(&mut self, _: usize) {}
    fn push(&mut self, element: Value<'_>) {
        self.0.push(format!("{element:?}"));
    }
    fn mark(&self) -> usize {
        self.0.len()
    }
    fn rollback(&mut self, mark: usize) {
        self.0.truncate(mark);
    }
}

/// Everything the loader produces for `files` (the route fast path tried from `min_blocks`
/// blocks on): the rendered diagnostics, the document, the route elements, then the validated
/// state (or its errors).
pub fn observe(files: &[&str], min_blocks: usize) -> String {
    let mut sources = SourceMap::default();
    for (i, text) in files.iter().enumerate() {
        sources.add(format!("f{i}.toml").into(), text.to_string());
    }
    let mut diags = Diagnostics::default();
    let mut doc = Doc::new(super::KEY_CLASHES);
    let mut routes = Recorder::default();
    for file in sources.files() {
        merge_file(
            &mut doc,
            &mut routes,
            &file.text,
            file.base,
            min_blocks,
            &mut ParseBudget::default(),
            &mut diags,
        );
    }
    let mut out = diags.render(&sources);
    out.push_str(&format!("{doc:#?}\n"));
    for r in &routes.0 {
        out.push_str(r);
        out.push('\n');
    }
    let named: Vec<(String, &str)> = files
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("f{i}.toml"), *t))
        .collect();
    let named: Vec<(&str, &str)> = named.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    match load_str_split(&named, min_blocks) {
        Ok(state) => out.push_str(&format!("{state:#?}")),
        Err(e) => out.push_str(&e.rendered),
    }
    out
}

/// How many of `files` take the fast path (for `min_blocks` = 1).
fn fast_files(files: &[&str]) -> usize {
    files
        .iter()
        .filter(|t| {
            split::parse(
                t,
                0,
                SINK_KEY,
                1,
                &mut ParseBudget::default(),
                &mut Recorder::default(),
            )
            .is_some()
        })
        .count()
}

/// Asserts the fast path gives what the whole-file parse gives (each file tried on the fast
/// path from one block on); returns how many files took it.
pub fn same(files: &[&str]) -> usize {
    let whole = observe(files, usize::MAX);
    let split = observe(files, 1);
    assert_eq!(split, whole, "the fast path differs for {files:?}");
    fast_files(files)
}
