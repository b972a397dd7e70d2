//! Configuration: TOML files -> one validated, immutable [`DesiredState`].
//!
//! Parse into raw serde types, then validate into rich ones. The steps:
//! 1. [`load`] reads the main file and `conf.d/*.toml` beside it, in name order, into a
//!    [`SourceMap`] (one global span space for all files). A file over its size budget is
//!    refused unread, and one nested deeper than [`limits::MAX_DEPTH`] unparsed (`limits`).
//! 2. `load` parses each file (toml's recoverable parser, or block by block for a file that
//!    ends with a long run of `[[route]]` entries) and merges them into a [`Doc`]: tables merge
//!    key by key, `[[arrays]]` append, a key set in two files is an error naming both places
//!    (or what the section says instead, where a section registered its own account of the
//!    clash: `KEY_CLASHES`). `[[route]]` entries are validated as they are read, never kept
//!    as a tree.
//! 3. Each section validates itself, one folder each in one shape (`raw`, `model`,
//!    validators): `daemon`, [`policy`], [`service`], [`route`], [`kubernetes`]; then the
//!    sections registered from above ([`extension`]). Every problem goes to [`Diagnostics`]
//!    instead of stopping at the first.
//! 4. No problem: a [`DesiredState`]. Any problem: a [`ConfigError`] that lists them all with
//!    `file:line:col`, the line and a caret.
//!
//! Nothing here knows about netlink; controllers translate the validated types.

// `fuzzing` is the cfg cargo-fuzz builds with: it mounts `differential` for fuzz/.
#![allow(unexpected_cfgs)]

pub mod boot;
mod daemon;
mod data_file;
mod diag;
pub(crate) mod doc;
mod duration;
pub mod extension;
#[cfg(feature = "kubernetes")]
pub mod fragments;
pub mod kubernetes;
pub mod limits;
mod load;
mod net;
mod nul;
pub mod policy;
pub mod route;
pub mod service;
mod source_map;
mod split;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use boot::ConfigTexts;
pub use daemon::{CONTROLLERS, ControllerSettings, DaemonSettings};
use data_file::DataFiles;
pub use diag::{ConfigError, Diagnostic, Diagnostics};
pub use doc::{Doc, Value, de, de_each, de_owned};
pub use duration::{format_duration, parse_duration};
pub use net::{parse_addr, parse_prefix};
pub use source_map::{Location, SourceFile, SourceMap};

/// Top-level sections of every build; with those of the registered extensions, anything else
/// is an error.
const SECTIONS: &[&str] = &[
    "daemon",
    "controller",
    "policy",
    "service",
    "route",
    "route_rule",
    "track",
    "kubernetes",
];

/// Each section's own accounts of a key set twice, which the generic merge and parser ask
/// (`[policy]`: `forward` as both the verdict and the zone forwards).
const KEY_CLASHES: &[doc::KeyClash] = &[policy::FORWARD_CLASH];

/// One validated, immutable snapshot of everything edgenetd should make true.
#[derive(Debug, Clone, Default)]
pub struct DesiredState {
    /// `[daemon]`.
    pub daemon: DaemonSettings,
    /// `[[route]]` and `[[route_rule]]`.
    pub routing: route::RoutingConfig,
    /// `[controller.*]`, one entry per built-in controller.
    pub controllers: BTreeMap<&'static str, ControllerSettings>,
    /// `[policy]`: the firewall; `None` = no section = no firewall table at all.
    pub policy: Option<policy::PolicyConfig>,
    /// Pod isolation (NetworkPolicies from a cluster); always empty when read from TOML.
    /// Programmed in the policy table, which exists whenever this or `policy` is non-empty.
    pub pod_policies: policy::pods::PodPolicies,
    /// `[[service]]`: load-balanced virtual addresses.
    pub services: service::ServicesConfig,
    /// `[kubernetes]`: the cluster this node takes services, routes and policies from;
    /// `None` = fed by TOML only. Only a build with the `kubernetes` feature accepts it.
    pub kubernetes: Option<kubernetes::KubernetesConfig>,
    /// The sections of modules above config that registered one ([`extension`]; the
    /// fault-injection build's `[[test_controller]]`); empty in a build that registers none.
    pub extensions: extension::Extensions,
    /// The files this snapshot was read from (watched for changes).
    pub files: Vec<PathBuf>,
    /// Controllers that leave the kernel as it is instead of syncing this snapshot: the
    /// built-in lockdown holds the routes and services a previous run programmed, which a
    /// snapshot without any would otherwise remove. Empty for every config read from files.
    pub held: Vec<&'static str>,
}

impl DesiredState {
    /// Settings of a built-in controller (defaults if it has none).
    pub fn controller(&self, name: &str) -> ControllerSettings {
        self.controllers.get(name).copied().unwrap_or_default()
    }
}

/// The drop-in directory that belongs to a main config file: `conf.d` beside it.
pub fn conf_d_dir(main: &Path) -> PathBuf {
    main.parent().unwrap_or(Path::new(".")).join("conf.d")
}

/// The files of one load: the main file, then `conf.d/*.toml` in name order.
pub fn config_files(main: &Path) -> Vec<PathBuf> {
    let mut files = vec![main.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(conf_d_dir(main)) {
        // A `*.toml` that does not resolve (a dangling symlink, a loop) is kept: the load
        // names it as a problem instead of silently reading one file fewer. Directories and
        // other non-files (a FIFO would block the read) are not config files.
        let mut extra: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .filter(|p| std::fs::metadata(p).map_or(true, |m| m.is_file()))
            .collect();
        extra.sort();
        files.extend(extra);
    }
    files
}

/// Loads and validates the configuration rooted at `main`.
pub fn load(main: &Path) -> Result<DesiredState, ConfigError> {
    load_files(main, None).map(|(state, _)| state)
}

/// [`load`], with the texts it read (what the daemon keeps of a configuration that comes
/// into force).
pub fn load_keeping_texts(main: &Path) -> Result<(DesiredState, ConfigTexts), ConfigError> {
    load_files(main, None)
}

/// [`load_replacing_main`], with the texts (`text` under `main`'s own path).
pub fn load_replacing_main_keeping_texts(
    main: &Path,
    shown_as: &Path,
    text: String,
) -> Result<(DesiredState, ConfigTexts), ConfigError> {
    load_files(main, Some((shown_as, text)))
}

/// Loads the configuration rooted at `main` as it would be with `text` in place of the main
/// file (`conf.d` beside `main` merged as usual); problems in `text` are shown as `shown_as`.
/// What `edgenetd apply` validates before anything changes.
pub fn load_replacing_main(
    main: &Path,
    shown_as: &Path,
    text: String,
) -> Result<DesiredState, ConfigError> {
    load_files(main, Some((shown_as, text))).map(|(state, _)| state)
}

/// Loads the files rooted at `main`, the main file's text replaced by `replace`'s (shown as
/// its path).
fn load_files(
    main: &Path,
    replace: Option<(&Path, String)>,
) -> Result<(DesiredState, ConfigTexts), ConfigError> {
    let mut read = read_files(main, replace);
    let mut data = DataFiles::from_disk();
    let state = validate_sources(
        &read.sources,
        &read.unparsed,
        split::MIN_BLOCKS,
        &mut data,
        &mut read.diags,
    );
    read.finish(state, data)
}

/// The files of one load, read: one source per file, in order (a cluster's fragments may
/// follow them, feature `kubernetes`), and the problems met reading them.
struct Read {
    /// The files, in load order.
    files: Vec<PathBuf>,
    /// Their texts.
    sources: SourceMap,
    /// The problems so far.
    diags: Diagnostics,
    /// Sources that are only there to locate a problem (not text): never parsed.
    unparsed: Vec<usize>,
    /// Bytes read so far, against `limits::MAX_TOTAL_BYTES` (what may follow the files
    /// counts on).
    #[cfg(feature = "kubernetes")]
    total: u64,
}

impl Read {
    /// The validated `state` with the texts of the files, or every problem.
    fn finish(
        self,
        state: DesiredState,
        data: DataFiles,
    ) -> Result<(DesiredState, ConfigTexts), ConfigError> {
        if self.diags.is_empty() {
            // A valid load read every file as text, one source per file, in order (what
            // follows the files is no file: not kept with them).
            let texts = ConfigTexts {
                files: self
                    .files
                    .iter()
                    .cloned()
                    .zip(self.sources.into_texts())
                    .collect(),
                data: data.into_read(),
            };
            let files = self.files;
            Ok((DesiredState { files, ..state }, texts))
        } else {
            Err(ConfigError {
                data_files: data.named().to_vec(),
                ..ConfigError::new(&self.diags, &self.sources)
            })
        }
    }
}

/// Reads the files rooted at `main`, the main file's text replaced by `replace`'s.
fn read_files(main: &Path, replace: Option<(&Path, String)>) -> Read {
    let mut sources = SourceMap::default();
    let mut diags = Diagnostics::default();
    let files = config_files(main);
    let mut unparsed = Vec::new();
    let mut replace = replace;
    let mut total = 0u64;
    for (i, path) in files.iter().enumerate() {
        let budget = limits::budget(total);
        let read = match replace.take().filter(|_| i == 0) {
            Some((shown_as, text)) => {
                let size = text.len() as u64;
                if size > budget {
                    let base = sources.add(shown_as.to_path_buf(), String::new());
                    diags.error(base..base, limits::size_message(size, false, total));
                    unparsed.push(base);
                } else {
                    total += size;
                    sources.add(shown_as.to_path_buf(), text);
                }
                continue;
            }
            None => text::read_at_most(path, budget),
        };
        match read {
            text::FileText::Text(text) => {
                total += text.len() as u64;
                sources.add(path.clone(), text);
            }
            text::FileText::NotUtf8 { shown, at, byte } => {
                let base = sources.add(path.clone(), shown);
                let start = base + at;
                diags.error(
                    start..start + char::REPLACEMENT_CHARACTER.len_utf8(),
                    format!("not UTF-8 text: invalid byte at offset {byte}"),
                );
                unparsed.push(base);
            }
            text::FileText::TooLarge { size, at_least } => {
                // Placed at 1:1 of a file with no text: nothing of it is kept to quote.
                let base = sources.add(path.clone(), String::new());
                diags.error(base..base, limits::size_message(size, at_least, total));
                unparsed.push(base);
            }
            text::FileText::Unreadable(why) => {
                diags.error_nowhere(format!("{}: {why}", path.display()));
            }
        }
    }
    Read {
        files,
        sources,
        diags,
        unparsed,
        #[cfg(feature = "kubernetes")]
        total,
    }
}

/// Loads from in-memory files (name, text); for tests and embedded defaults. Data files
/// (`loadfile`) are read from disk.
pub fn load_str(files: &[(&str, &str)]) -> Result<DesiredState, ConfigError> {
    load_str_with(files, DataFiles::from_disk())
}

/// [`load_str`] with the data files taken from `data`.
fn load_str_with(files: &[(&str, &str)], data: DataFiles) -> Result<DesiredState, ConfigError> {
    load_str_split_with(files, split::MIN_BLOCKS, data)
}

/// [`load_str`] that takes the `[[route]]` fast path from `min_blocks` blocks on (the
/// differential oracle's and the route tests' way in).
#[cfg(any(test, fuzzing))]
fn load_str_split(files: &[(&str, &str)], min_blocks: usize) -> Result<DesiredState, ConfigError> {
    load_str_split_with(files, min_blocks, DataFiles::from_disk())
}

fn load_str_split_with(
    files: &[(&str, &str)],
    min_blocks: usize,
    mut data: DataFiles,
) -> Result<DesiredState, ConfigError> {
    let mut sources = SourceMap::default();
    for (name, text) in files {
        sources.add(PathBuf::from(name), text.to_string());
    }
    let mut diags = Diagnostics::default();
    let state = validate_sources(&sources, &[], min_blocks, &mut data, &mut diags);
    if diags.is_empty() {
        Ok(state)
    } else {
        Err(ConfigError::new(&diags, &sources))
    }
}

/// Merges and validates every file of `sources` but those whose base is in `unparsed`.
fn validate_sources(
    sources: &SourceMap,
    unparsed: &[usize],
    min_blocks: usize,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> DesiredState {
    let mut doc = Doc::new(KEY_CLASHES);
    validate_into(&mut doc, sources, unparsed, min_blocks, data, diags)
}

/// [`validate_sources`] into `doc` (one the caller prepared, and reads after).
fn validate_into<'a>(
    doc: &mut Doc<'a>,
    sources: &'a SourceMap,
    unparsed: &[usize],
    min_blocks: usize,
    data: &mut DataFiles,
    diags: &mut Diagnostics,
) -> DesiredState {
    let mut routes = route::RouteList::default();
    let mut budget = limits::ParseBudget::default();
    for file in sources
        .files()
        .iter()
        .filter(|f| !unparsed.contains(&f.base))
    {
        // Before toml's parser, whose recursion has a cost of its own per level.
        if let Some(at) = limits::too_deep(&file.text) {
            let start = file.base + at;
            diags.error(start..start + 1, limits::depth_message());
            continue;
        }
        load::merge_file(
            doc,
            &mut routes,
            &file.text,
            file.base,
            min_blocks,
            &mut budget,
            diags,
        );
    }
    let extensions = extension::registered();
    let known = || {
        SECTIONS
            .iter()
            .copied()
            .chain(extensions.iter().map(|e| e.section))
    };
    for (key, span) in doc.keys() {
        if !known().any(|s| s == key) {
            let expected: Vec<String> = known().map(|s| format!("`{s}`")).collect();
            diags.error(
                span,
                format!(
                    "unknown section `{key}`, expected one of {}",
                    expected.join(", ")
                ),
            );
        }
    }
    let mut state = DesiredState {
        daemon: daemon::validate_daemon(doc, diags),
        controllers: daemon::validate_controllers(doc, diags),
        policy: policy::validate(doc, data, diags),
        pod_policies: policy::pods::PodPolicies::default(),
        services: service::validate(doc, diags),
        routing: route::validate(doc, routes, diags),
        kubernetes: kubernetes::validate(doc, diags),
        extensions: extension::validate(&extensions, doc, diags),
        files: Vec::new(),
        held: Vec::new(),
    };
    // The kernel's verdict on a snippet comes after the load: keep where to report it.
    for inc in state.policy.iter_mut().flat_map(|p| p.includes.iter_mut()) {
        if let Some(l) = sources.locate(&inc.span) {
            inc.at = format!("{}:{}:{}", l.path.display(), l.line, l.column);
        }
    }
    state
}

/// The differential oracle of the `[[route]]` fast path: a test and fuzz oracle, not part of
/// the daemon, so its file lives outside `src/` and only test and fuzz builds mount it.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
#[path = "../../tests/oracle/config_differential.rs"]
pub mod differential;
#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod load_tests;
#[cfg(test)]
mod tests;
