//! Imports point one way: every module-to-module reference in `src/` must be an edge of
//! [`ALLOWED`], the edges in use must form no cycle, and every edge of [`ALLOWED`] must be in
//! use (so the table stays the true picture of the code, not a list of what once was).
//!
//! What counts as a reference: a path through `crate::`, `super::`, `self::`, a child
//! module's name, or (in `main.rs`) `edgenetd::`, in code and in `use` trees (comments do not
//! count). Each reference is resolved to the module it names. Two granularities are checked:
//! - top level (`config`, `daemon`, `sync`, ...): every reference between two of them;
//! - inside each module of [`FINE`]: references between its children (`config::diag` ->
//!   `config::source_map`). References between a module and its own parent (the `mod.rs`
//!   facade that declares and re-exports the children) are not edges at this level.
//!
//! To change the layering, edit [`ALLOWED`]; keep it a DAG (the test checks that too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The edges allowed: (from, to). Top-level modules first, then the finer ones.
const ALLOWED: &[(&str, &str)] = &[
    // The binary.
    ("main", "cli"),
    // The C math symbols the binary defines itself (no libm mapped).
    ("main", "math"),
    // The verbs.
    ("cli", "config"),
    // `apply` and `confirm` talk to the daemon through the control socket.
    ("cli", "control"),
    ("cli", "daemon"),
    ("cli", "logging"),
    ("cli", "status"),
    // `explain`: the controllers' nftables IR, built from the config, run by an interpreter.
    ("cli", "explain"),
    ("explain", "config"),
    ("explain", "controller"),
    ("explain", "dataplane"),
    ("explain", "names"),
    // `explain --netns`: its reading thread enters the namespace.
    ("explain", "sys"),
    // `explain` with the cluster state the daemon cached (feature `kubernetes`), and the
    // config_map version it kept, in the state directory the daemon derives (`control`) and
    // with the time it was confirmed (`clock`).
    ("explain", "kubernetes"),
    ("explain", "control"),
    ("explain", "clock"),
    // Orchestration of `edgenetd run`: everything below it.
    ("daemon", "clock"),
    ("daemon", "config"),
    // The daemon serves the control socket and supplies what apply and confirm do.
    ("daemon", "control"),
    ("daemon", "controller"),
    // The daemon creates the one nftables generation watch the nft controllers share.
    ("daemon", "dataplane"),
    ("daemon", "liveness"),
    ("daemon", "http"),
    // The Kubernetes source's wiring (feature `kubernetes`).
    ("daemon", "kubernetes"),
    ("daemon", "metrics"),
    ("daemon", "shutdown"),
    ("daemon", "source"),
    ("daemon", "sync"),
    ("daemon", "systemd"),
    // Presentation: HTTP endpoints and systemd notifications read the registries.
    ("http", "clock"),
    ("http", "liveness"),
    ("http", "metrics"),
    ("http", "sys"),
    ("systemd", "clock"),
    ("systemd", "liveness"),
    ("systemd", "shutdown"),
    ("systemd", "sync"),
    // Recording: metrics reads liveness (derived gauges) and writes outcomes into it; liveness
    // knows nothing of metrics.
    ("metrics", "clock"),
    ("metrics", "liveness"),
    ("metrics", "sync"),
    ("liveness", "clock"),
    ("liveness", "sync"),
    // The Kubernetes source (feature `kubernetes`): its reflectors fire sync triggers.
    ("kubernetes", "sync"),
    // Its watcher thread stops with the daemon.
    ("kubernetes", "shutdown"),
    // The router's Lease writes its times as the API does (RFC 3339).
    ("kubernetes", "clock"),
    // Config files in, "loaded" or "rejected" out.
    ("source", "config"),
    ("source", "shutdown"),
    ("source", "sync"),
    // The controllers: desired state in, kernel changes out through the dataplane.
    ("controller", "config"),
    ("controller", "dataplane"),
    ("controller", "sync"),
    // WAN failover: the route controller reads the track probers' board.
    ("controller", "track"),
    // The probe engine (checks, rise/fall, schedule, heartbeat hookup), one for the uplink
    // tracks and the service controller's backend checks; it beats a `sync::Progress`.
    ("controller", "probe"),
    ("track", "probe"),
    ("probe", "sync"),
    // The track probers: `[[track]]` in, up/down on their board out; the supervisor reports
    // to the liveness registry and stops with the daemon.
    ("track", "clock"),
    ("track", "config"),
    ("track", "liveness"),
    ("track", "shutdown"),
    ("track", "sync"),
    ("daemon", "track"),
    // The Kubernetes source (feature `kubernetes`): cluster objects -> the config's model.
    ("kubernetes", "config"),
    // The shared names (zones, families, ...) sit below both config and dataplane.
    ("config", "names"),
    // Test hooks (feature `fault-injection`), two layers of the one `fault` module (see
    // [`SPLIT`]). Its side tables use nothing: the config parser fills them (the rule key
    // `inject_kernel_reject`, the track key `inject_hang`), the policy program builder, the
    // service layout, the backend checks and the track probers consult them.
    ("config", "fault::kernel_reject"),
    ("config", "fault::hang"),
    // The Lease's renewal period, shortened by the `[kubernetes]` key `inject_status_renew_ms`
    // and read by the daemon when it starts the Lease writer.
    ("config", "fault::lease"),
    ("daemon", "fault::lease"),
    ("controller", "fault::kernel_reject"),
    ("controller", "fault::by_name"),
    ("track", "fault::hang"),
    // `[[test_controller]]` sits above config and the controllers: its section reaches the
    // config through `config::extension`, its controller implements `Controller`; the binary
    // installs the section and the daemon's registry starts the controllers.
    ("fault::test_controller", "config"),
    ("fault::test_controller", "controller"),
    ("fault::test_controller", "sync"),
    ("daemon", "fault::test_controller"),
    ("main", "fault::test_controller"),
    ("dataplane", "names"),
    // Dates and times of day for the time rules: config parses them, the policy controller
    // turns them to UTC, nft text writes them, explain reads `--at`.
    ("config", "calendar"),
    ("controller", "calendar"),
    ("dataplane", "calendar"),
    ("explain", "calendar"),
    // The local time zone's offset (`localtime_r`) for the time rules' local times.
    ("controller", "sys"),
    // `sys`: the few libc calls outside the nftables FFI that need `unsafe` (a leaf).
    ("daemon", "sys"),
    // The reflector hands a big list's freed memory back (`trim_heap`).
    ("kubernetes", "sys"),
    // The control socket: peer credentials and the admin group's id; it stops with the daemon.
    ("control", "sys"),
    ("control", "shutdown"),
    ("dataplane", "sys"),
    // Inside config: source_map (files, offsets) <- diag (problems, rendered with their
    // lines) <- split and doc (parsing) <- the sections' validators.
    ("config::diag", "config::source_map"),
    ("config::nul", "config::diag"),
    ("config::doc", "config::diag"),
    ("config::split", "config::doc"),
    ("config::text", "config::limits"),
    ("config::limits_tests", "config::limits"),
    ("config::limits_tests", "config::diag"),
    // `super::load` there is the function `config::load`, read here as the module.
    ("config::limits_tests", "config::load"),
    ("config::load", "config::diag"),
    ("config::load", "config::doc"),
    ("config::load", "config::split"),
    // What toml may parse whole is weighed first (`limits::ParseBudget`).
    ("config::load", "config::limits"),
    ("config::split", "config::limits"),
    ("config::load_tests", "config::limits"),
    ("config::load_tests", "config::load"),
    ("config::load_tests", "config::split"),
    // `[daemon] management` names interfaces: no NUL byte.
    ("config::daemon", "config::nul"),
    // The boot fallback: kept texts loaded again, `[daemon]` and `[controller.*]` read on
    // their own, the lockdown's policy (its unit test reads the policy model).
    ("config::boot", "config::daemon"),
    ("config::boot", "config::diag"),
    ("config::boot", "config::doc"),
    ("config::boot", "config::limits"),
    ("config::boot", "config::policy"),
    ("config::boot", "config::source_map"),
    ("config::boot", "config::text"),
    // Kept data files (`loadfile`) are served to a load of kept texts.
    ("config::boot", "config::data_file"),
    // A data file is read bounded and checked as a config file is; a set reads its own.
    ("config::data_file", "config::limits"),
    ("config::data_file", "config::text"),
    ("config::policy", "config::data_file"),
    // The sections registered from above (`[[test_controller]]`) are validated like the others.
    ("config::extension", "config::diag"),
    ("config::extension", "config::doc"),
    ("config::daemon", "config::diag"),
    ("config::daemon", "config::doc"),
    ("config::daemon", "config::duration"),
    ("config::daemon", "config::net"),
    ("config::policy", "config::diag"),
    ("config::policy", "config::doc"),
    ("config::policy", "config::net"),
    ("config::policy", "config::nul"),
    ("config::policy", "config::duration"),
    ("config::route", "config::diag"),
    ("config::route", "config::duration"),
    ("config::route", "config::doc"),
    ("config::route", "config::net"),
    ("config::route", "config::nul"),
    ("config::service", "config::diag"),
    ("config::service", "config::doc"),
    ("config::service", "config::duration"),
    ("config::service", "config::net"),
    ("config::service", "config::nul"),
    // A cluster's fragments load after the files as `load` does: the data files, the
    // `[[route]]` fast path's threshold.
    ("config::fragments", "config::data_file"),
    ("config::fragments", "config::diag"),
    ("config::fragments", "config::doc"),
    ("config::fragments", "config::limits"),
    ("config::fragments", "config::source_map"),
    ("config::fragments", "config::split"),
    // `[kubernetes]` (its label selector grammar is its child, `config::kubernetes::selector`).
    ("config::kubernetes", "config::diag"),
    ("config::kubernetes", "config::doc"),
    ("config::kubernetes", "config::duration"),
    ("config::kubernetes", "config::net"),
    ("config::kubernetes", "config::nul"),
    ("config::tests", "config::service"),
    // Inside nftables, named by stage: ir (the IR) and error at the bottom; encode (constants
    // as kernel bytes) and expr (kernel expressions); build (IR -> libnftnl objects); batch
    // (messages); socket (talking to the kernel); read (kernel -> listings) and watch
    // (foreign commits) above it; text (IR -> nft syntax) beside them all.
    // ffi: every libnftnl call, behind owners and borrowed views; knows only the errors.
    ("dataplane::nft::ffi", "dataplane::nft::error"),
    // The header fields' one table (a leaf), which the IR re-exports.
    ("dataplane::nft::ir", "dataplane::nft::fields"),
    ("dataplane::nft::table_ref", "dataplane::nft::ir"),
    ("dataplane::nft::encode", "dataplane::nft::error"),
    ("dataplane::nft::encode", "dataplane::nft::ir"),
    ("dataplane::nft::expr", "dataplane::nft::error"),
    ("dataplane::nft::expr", "dataplane::nft::ffi"),
    ("dataplane::nft::build", "dataplane::nft::encode"),
    ("dataplane::nft::build", "dataplane::nft::error"),
    ("dataplane::nft::build", "dataplane::nft::expr"),
    ("dataplane::nft::build", "dataplane::nft::ffi"),
    ("dataplane::nft::build", "dataplane::nft::ir"),
    ("dataplane::nft::build", "dataplane::nft::table_ref"),
    // The rule compiler's tests compare what it emits with the text nft would load.
    ("dataplane::nft::build", "dataplane::nft::text"),
    ("dataplane::nft::batch", "dataplane::nft::build"),
    ("dataplane::nft::batch", "dataplane::nft::encode"),
    ("dataplane::nft::batch", "dataplane::nft::error"),
    ("dataplane::nft::batch", "dataplane::nft::ffi"),
    ("dataplane::nft::batch", "dataplane::nft::ir"),
    ("dataplane::nft::batch", "dataplane::nft::table_ref"),
    ("dataplane::nft::socket", "dataplane::nft::batch"),
    ("dataplane::nft::socket", "dataplane::nft::error"),
    ("dataplane::nft::socket", "dataplane::nft::ffi"),
    // Snippets (`[[policy.include]]`): compiled by nft in a scratch table, read back raw.
    // The lift reads an included rule's expressions through the batch's own rule shell.
    ("dataplane::nft::lift", "dataplane::nft::build"),
    ("dataplane::nft::lift", "dataplane::nft::encode"),
    ("dataplane::nft::lift", "dataplane::nft::ffi"),
    ("dataplane::nft::lift", "dataplane::nft::fields"),
    ("dataplane::nft::lift", "dataplane::nft::ir"),
    ("dataplane::nft::lift", "dataplane::nft::table_ref"),
    ("dataplane::nft::snippet", "dataplane::nft::batch"),
    ("dataplane::nft::snippet", "dataplane::nft::build"),
    ("dataplane::nft::snippet", "dataplane::nft::error"),
    ("dataplane::nft::snippet", "dataplane::nft::ffi"),
    ("dataplane::nft::snippet", "dataplane::nft::ir"),
    ("dataplane::nft::snippet", "dataplane::nft::read"),
    ("dataplane::nft::snippet", "dataplane::nft::socket"),
    ("dataplane::nft::snippet", "dataplane::nft::table_ref"),
    ("dataplane::nft::snippet", "dataplane::nft::text"),
    ("dataplane::nft::read", "dataplane::nft::build"),
    ("dataplane::nft::read", "dataplane::nft::error"),
    ("dataplane::nft::read", "dataplane::nft::ffi"),
    ("dataplane::nft::read", "dataplane::nft::ir"),
    ("dataplane::nft::read", "dataplane::nft::socket"),
    ("dataplane::nft::read", "dataplane::nft::table_ref"),
    ("dataplane::nft::watch", "dataplane::nft::socket"),
    ("dataplane::nft::table_tag", "dataplane::nft::build"),
    ("dataplane::nft::table_tag", "dataplane::nft::error"),
    ("dataplane::nft::table_tag", "dataplane::nft::ffi"),
    ("dataplane::nft::table_tag", "dataplane::nft::read"),
    ("dataplane::nft::table_tag", "dataplane::nft::socket"),
    ("dataplane::nft::table_tag", "dataplane::nft::table_ref"),
    ("dataplane::nft::kept", "dataplane::nft::batch"),
    ("dataplane::nft::kept", "dataplane::nft::build"),
    ("dataplane::nft::kept", "dataplane::nft::encode"),
    ("dataplane::nft::kept", "dataplane::nft::error"),
    ("dataplane::nft::kept", "dataplane::nft::ffi"),
    ("dataplane::nft::kept", "dataplane::nft::ir"),
    ("dataplane::nft::kept", "dataplane::nft::read"),
    ("dataplane::nft::kept", "dataplane::nft::socket"),
    ("dataplane::nft::kept", "dataplane::nft::table_ref"),
    ("dataplane::nft::text", "dataplane::nft::ir"),
    // Inside build: a rule's statements fill the rule object the objects module makes.
    (
        "dataplane::nft::build::rule",
        "dataplane::nft::build::objects",
    ),
    // Inside read: the dump module's listing machinery serves the other listings.
    (
        "dataplane::nft::read::elements",
        "dataplane::nft::read::dump",
    ),
    (
        "dataplane::nft::read::objects",
        "dataplane::nft::read::dump",
    ),
    // Inside the dataplane: the conntrack and nflog sockets write to the kernel through one
    // `sendto` wrapper (the one unsafe send of a netlink message outside rtnetlink and nftnl).
    ("dataplane::conntrack", "dataplane::netlink_send"),
    ("dataplane::nflog", "dataplane::netlink_send"),
    // Inside the daemon.
    ("daemon::kubernetes", "daemon::snapshots"),
    // Router config from the cluster: its state (read by the reloads and the confirmer),
    // and the task that confirms it (which drives the confirmer).
    ("daemon::kubernetes", "daemon::cluster_config"),
    // The confirmed version of the cluster's config, kept in the state directory.
    ("daemon::kubernetes", "daemon::cluster_kept"),
    ("daemon::cluster_config", "daemon::cluster_kept"),
    ("daemon::cluster_kept", "daemon::includes"),
    ("daemon::kubernetes", "daemon::cluster_confirm"),
    ("daemon::kubernetes", "daemon::confirm"),
    ("daemon::cluster_confirm", "daemon::confirm"),
    ("daemon::confirm", "daemon::cluster_config"),
    ("daemon::reload", "daemon::cluster_config"),
    ("daemon::registry", "daemon::spawner"),
    ("daemon::registry", "daemon::tracks"),
    ("daemon::reload", "daemon::snapshots"),
    // A reload whose includes nft refuses is a rejected one.
    ("daemon::reload", "daemon::includes"),
    ("daemon::confirm", "daemon::includes"),
    ("daemon::includes", "daemon::netns"),
    // Apply with automatic rollback: the shared confirm state (the reloader refuses while
    // a confirm is pending), the plan shown before applying, the sink it publishes to.
    ("daemon::reload", "daemon::confirm_state"),
    ("daemon::confirm", "daemon::confirm_state"),
    ("daemon::confirm", "daemon::plan"),
    ("daemon::confirm", "daemon::snapshots"),
    ("daemon::plan", "daemon::registry"),
    ("daemon::runner", "daemon::observed"),
    ("daemon::runner", "daemon::snapshots"),
    ("daemon::spawner", "daemon::runner"),
    ("daemon::spawner", "daemon::snapshots"),
    ("daemon::tracks", "daemon::spawner"),
    // /healthz: every component joins it through `daemon::healthz` (the one list), which
    // shows the confirm state's `config` object.
    ("daemon::healthz", "daemon::confirm_state"),
    ("daemon::kubernetes", "daemon::healthz"),
    ("daemon::spawner", "daemon::healthz"),
    // Issue 23: degraded mode (a fallback runs instead of invalid files) is shown in
    // /healthz's `config` object, ended by a reload or an apply, and returned to by a
    // rollback; every configuration in force is kept as the last good one.
    ("daemon::healthz", "daemon::degraded"),
    ("daemon::confirm_state", "daemon::degraded"),
    ("daemon::confirm", "daemon::degraded"),
    ("daemon::confirm", "daemon::last_good"),
    ("daemon::reload", "daemon::degraded"),
    ("daemon::reload", "daemon::last_good"),
];

/// Modules whose children are nodes of the top-level graph on their own, each with its edges:
/// `fault` has a layer below everything (side tables the production code consults) and one
/// above config and the controllers (the test controller); its `mod.rs` is only a facade
/// (checked by [`the_fault_module_is_a_facade_over_its_layers`]).
const SPLIT: &[&str] = &["fault"];

/// Modules whose children are checked against each other too.
const FINE: &[&str] = &[
    "config",
    "daemon",
    "dataplane",
    "dataplane::nft",
    "dataplane::nft::build",
    "dataplane::nft::read",
];

/// One reference: where it is, and the two modules it joins at one granularity.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

#[test]
fn every_import_follows_an_allowed_edge_and_the_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&src);
    let modules = module_set(&src, &files);
    let mut edges = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let module = file_module(&src, file);
        for (line, target) in references(&module, &text, &modules) {
            let at = format!("{}:{line}", file.strip_prefix(&src).unwrap().display());
            edges.extend(edges_of(&module, &target, &at));
        }
    }
    let allowed: BTreeSet<(&str, &str)> = ALLOWED.iter().copied().collect();
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for e in &edges {
        let key = (e.from.as_str(), e.to.as_str());
        used.insert((e.from.clone(), e.to.clone()));
        if !allowed.contains(&key) {
            problems.push(format!("{} -> {} ({})", e.from, e.to, e.at));
        }
    }
    for (from, to) in ALLOWED {
        if !used.contains(&(from.to_string(), to.to_string())) {
            problems.push(format!(
                "{from} -> {to} is in ALLOWED but no code uses it: delete it from ALLOWED"
            ));
        }
    }
    if let Some(cycle) = find_cycle(&used) {
        problems.push(format!("cycle: {}", cycle.join(" -> ")));
    }
    let table: BTreeSet<(String, String)> = ALLOWED
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    if let Some(cycle) = find_cycle(&table) {
        problems.push(format!("ALLOWED has a cycle: {}", cycle.join(" -> ")));
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "layering violations (edit ALLOWED in tests/repo/layering.rs only if the new edge keeps \
         the graph a DAG):\n  {}",
        problems.join("\n  ")
    );
}

/// Where `feature = "fault-injection"` may be named outside `src/fault/` (which is compiled
/// only in that build and so never needs to), and how often: the module's declaration and
/// `fault_hook!` in lib.rs, the two serde keys only that build accepts (a field attribute
/// has no `fault_hook!` form), the policy memo's check of the side table's generation, and
/// the build-info label. Everything else reaches the module through `fault_hook!`. A new
/// site means editing this table, in review, on purpose; a removed one, deleting its row.
const FAULT_FEATURE_SITES: &[(&str, usize)] = &[
    ("lib.rs", 3),
    ("config/policy/raw.rs", 1),
    // A `[[policy.nat]]` entry's match keys become a `RawRule`, whose test-only field is
    // set off there (a nat entry has no `inject_kernel_reject`).
    ("config/policy/nat.rs", 1),
    ("config/route/raw.rs", 1),
    ("config/kubernetes/raw.rs", 1),
    ("controller/policy/model.rs", 3),
    ("metrics.rs", 1),
];

#[test]
fn the_fault_injection_feature_is_named_only_in_its_few_entry_points() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for file in rust_files(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let n = text
            .lines()
            .map(without_comment_line)
            .filter(|l| l.contains("feature = \"fault-injection\""))
            .count();
        if n > 0 {
            let rel = file.strip_prefix(&src).unwrap().display().to_string();
            found.insert(rel, n);
        }
    }
    let want: BTreeMap<String, usize> = FAULT_FEATURE_SITES
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    assert_eq!(
        found, want,
        "`feature = \"fault-injection\"` outside its entry points (use `fault_hook!`, or edit \
         FAULT_FEATURE_SITES in tests/repo/layering.rs on purpose)"
    );
}

/// The line, or nothing for a comment line (string literals kept: a `cfg` names its feature
/// in one).
fn without_comment_line(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with("//") { "" } else { line }
}

/// `src/fault/mod.rs` declares the layers and documents them; code there would be a node
/// of its own that the split graph does not see.
#[test]
fn the_fault_module_is_a_facade_over_its_layers() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fault/mod.rs");
    let text = std::fs::read_to_string(&file).unwrap();
    let code: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .filter(|l| !(l.starts_with("pub mod ") && l.ends_with(';')))
        .collect();
    assert!(code.is_empty(), "src/fault/mod.rs holds code: {code:?}");
    assert_eq!(top("fault::hang::tests"), "fault::hang");
    assert_eq!(top("fault"), "fault");
    assert_eq!(top("config::policy"), "config");
}

/// The layers below config never name what is built on it: no Kubernetes source, controller,
/// daemon or test controller in `src/config/` (the `[kubernetes]` section is config's own;
/// the cluster client is not).
#[test]
fn config_names_nothing_built_on_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let above = [
        "crate::kubernetes",
        "crate::controller",
        "crate::daemon",
        "crate::source",
        "crate::fault::test_controller",
    ];
    let mut found = Vec::new();
    for file in rust_files(&src.join("config")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = strip_strings_and_comments(line);
            if let Some(name) = above.iter().find(|a| code.contains(*a)) {
                let at = file.strip_prefix(&src).unwrap().display();
                found.push(format!("{at}:{}: {name}", i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "config names a layer above it:\n  {}",
        found.join("\n  ")
    );
}

/// Test and fuzz oracles live outside `src/` (`tests/oracle/`) and are mounted with `#[path]`
/// only in test and fuzz builds: every `#[path]` in `src/` that leaves `src/` is such a mount,
/// under `#[cfg(any(test, fuzzing))]`, and every oracle is mounted.
#[test]
fn oracles_outside_src_are_mounted_only_in_test_and_fuzz_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut mounted = BTreeSet::new();
    let mut problems = Vec::new();
    for file in rust_files(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line.trim().strip_prefix("#[path = \"") else {
                continue;
            };
            let target = rest.trim_end_matches("\"]");
            let at = format!("{}:{}", file.strip_prefix(&src).unwrap().display(), i + 1);
            let path = file.parent().unwrap().join(target);
            let resolved = path.canonicalize().unwrap_or(path);
            if resolved.starts_with(src.canonicalize().unwrap()) {
                // A file of `src/` under another name (a module's tests beside it).
                continue;
            }
            match resolved.strip_prefix(root.join("tests/oracle").canonicalize().unwrap()) {
                Ok(name) => {
                    mounted.insert(name.display().to_string());
                }
                Err(_) => problems.push(format!("{at}: mounts {target}, not a tests/oracle file")),
            }
            let attrs = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim().starts_with("#[") || l.trim().starts_with("///"));
            if !attrs
                .into_iter()
                .any(|l| l.trim() == "#[cfg(any(test, fuzzing))]")
            {
                problems.push(format!("{at}: mounted without #[cfg(any(test, fuzzing))]"));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("tests/oracle")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !mounted.contains(&name) {
            problems.push(format!("tests/oracle/{name} is mounted nowhere"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A match arm on a header field (`Field::IpSaddr => ...`, `Expr::Payload(Field::TcpDport)
/// => ...`): the tables of per-field facts that `Field::def` replaced.
fn is_field_arm(line: &str) -> bool {
    let t = line.trim_start();
    (t.starts_with("Field::") || t.starts_with("Expr::Payload(Field::")) && t.contains("=>")
}

/// Every fact about a header field (its nft text, where it is loaded from, its protocol
/// dependencies, what `explain` reads for it) is in `src/dataplane/nft/fields.rs`: a match
/// on `Field` anywhere else is a second table, which a new field would have to find.
#[test]
fn header_fields_are_described_only_by_their_one_table() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = src.join("dataplane/nft/fields.rs");
    let mut found = Vec::new();
    for file in rust_files(&src).into_iter().filter(|f| *f != table) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if is_field_arm(line) {
                let at = file.strip_prefix(&src).unwrap().display();
                found.push(format!("{at}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a match on `Field` outside dataplane/nft/fields.rs (put the fact in `Field::def`):\n  {}",
        found.join("\n  ")
    );
    assert!(is_field_arm(
        "            Field::IcmpType => out.push((MetaKey::L4Proto, 1)),"
    ));
    assert!(is_field_arm(
        "        Expr::Payload(Field::IpSaddr | Field::IpDaddr) => 4,"
    ));
    assert!(!is_field_arm(
        "        (true, IpVersion::V4) => Field::IpSaddr,"
    ));
}

/// The checker itself: resolution of each kind of path, and cycle finding.
#[test]
fn references_resolve_every_kind_of_path() {
    let modules: BTreeSet<String> = [
        "config",
        "config::diag",
        "config::policy",
        "config::policy::rules",
        "daemon",
        "sync",
        "metrics",
        "metrics::tests",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let text = "\
use super::super::diag::Diagnostics;
use crate::{sync::{self, Trigger}, metrics};
// use crate::daemon; (a comment)
fn f() { crate::daemon::run(); let s = \"crate::daemon\"; }
";
    let refs: Vec<(usize, String)> = references("config::policy::rules", text, &modules);
    let targets: Vec<&str> = refs.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        targets,
        ["config::diag", "sync", "sync", "metrics", "daemon"],
        "{refs:?}"
    );
    // A use tree over several lines counts, at its first line.
    let text = "use crate::{\n    daemon,\n    metrics::{self},\n};\nfn g() {}\n";
    let refs = references("config", text, &modules);
    assert_eq!(refs, [(1, "daemon".into()), (1, "metrics".into())]);
    let text = "use diag::Diagnostics;\nmod tests {\n    use super::*;\n}\n";
    let refs = references("config", text, &modules);
    assert_eq!(refs, [(1, "config::diag".into()), (3, "config".into())]);
    let edges = edges_of("config::policy::rules", "config::diag", "x");
    let pairs: Vec<(&str, &str)> = edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(pairs, [("config::policy", "config::diag")]);
    let cyclic: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(find_cycle(&cyclic).unwrap().len(), 4);
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `src/a/b.rs` and `src/a/b/mod.rs` -> `a::b`; `src/lib.rs` -> ``; `src/main.rs` -> `main`.
fn file_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// Every module: one per file, plus the inline `mod NAME {` blocks at the start of a line.
fn module_set(src: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for file in files {
        let module = file_module(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            if let Some(name) = inline_module(line) {
                set.insert(join(&module, name));
            }
        }
        set.insert(module);
    }
    set
}

/// `mod tests {` (rustfmt puts an inline module's braces at the start of a line).
fn inline_module(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("pub mod ")
        .or_else(|| line.strip_prefix("mod "))?;
    rest.strip_suffix(" {")
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}::{b}")
    }
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

/// The modules `text` (the file of `module`) refers to, with line numbers, in order.
fn references(module: &str, text: &str, modules: &BTreeSet<String>) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current = module.to_string();
    // A `use` tree spread over several lines is read as one line, at its first line's number.
    let mut pending_use: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        if let Some(name) = inline_module(raw) {
            current = join(module, name);
        } else if raw == "}" {
            current = module.to_string();
        }
        let stripped = strip_strings_and_comments(raw);
        let (at, line) = match pending_use.take() {
            Some((at, mut joined)) => {
                joined.push(' ');
                joined.push_str(stripped.trim());
                (at, joined)
            }
            None => (i + 1, stripped),
        };
        if starts_use(&line) && !line.contains(';') {
            pending_use = Some((at, line));
            continue;
        }
        for path in paths(&line) {
            if let Some(target) = resolve(&current, &path, modules) {
                out.push((at, target));
            }
        }
    }
    out
}

/// True for the start of a `use` item (`use`, `pub use`, `pub(crate) use`).
fn starts_use(line: &str) -> bool {
    let t = line.trim_start();
    let t = t
        .strip_prefix("pub(crate) ")
        .or_else(|| t.strip_prefix("pub "))
        .unwrap_or(t);
    t.starts_with("use ")
}

/// The line without `// comments` and with string literals emptied.
fn strip_strings_and_comments(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_string = false;
                    out.push('"');
                }
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push('"');
        } else if c == '/' && chars.peek() == Some(&'/') {
            break;
        } else {
            out.push(c);
        }
    }
    out
}

/// Every path in a line, use trees expanded: `crate::{a::{self, b}, c}` -> `crate::a`,
/// `crate::a::b`, `crate::c`. Paths are segment lists.
fn paths(line: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = is_ident(chars[i])
            && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':' || chars[i - 1] == '$'));
        if starts_word {
            let (end, found) = parse_tree(&chars, i, Vec::new());
            out.extend(found.into_iter().filter(|p| p.len() > 1));
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Parses `seg::seg::{tree, tree}` from `i`; returns where it ended and the full paths.
fn parse_tree(chars: &[char], mut i: usize, prefix: Vec<String>) -> (usize, Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        while i < chars.len() && chars[i] == ' ' {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            let mut out = Vec::new();
            i += 1;
            loop {
                while i < chars.len() && (chars[i] == ' ' || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    return (i + 1, out);
                }
                let (end, found) = parse_tree(chars, i, path.clone());
                out.extend(found);
                i = end.max(i + 1);
                while i < chars.len() && chars[i] != ',' && chars[i] != '}' {
                    i += 1;
                }
            }
        }
        let start = i;
        while i < chars.len() && (is_ident(chars[i]) || chars[i] == '*') {
            i += 1;
        }
        if i == start {
            return (i, vec![path]);
        }
        let seg: String = chars[start..i].iter().collect();
        if seg != "self" || path.is_empty() {
            path.push(seg);
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            return (i, vec![path]);
        }
    }
}

/// The module a path from `module` names (the longest known module prefix), if any.
fn resolve(module: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let (mut base, rest): (String, &[String]) = match path[0].as_str() {
        "crate" => (String::new(), &path[1..]),
        "edgenetd" if module == "main" => (String::new(), &path[1..]),
        "self" => (module.to_string(), &path[1..]),
        "super" => {
            let mut base = module;
            let mut n = 0;
            while path.get(n).is_some_and(|s| s == "super") {
                base = parent(base);
                n += 1;
            }
            (base.to_string(), &path[n..])
        }
        child if modules.contains(&join(module, child)) => (module.to_string(), path),
        _ => return None,
    };
    for seg in rest {
        let next = join(&base, seg);
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    (!base.is_empty()).then_some(base)
}

/// The top-level node of `module`: its first segment, or its first two under a [`SPLIT`]
/// module (`fault::hang::tests` -> `fault::hang`).
fn top(module: &str) -> &str {
    let first = module.split("::").next().unwrap();
    if !SPLIT.contains(&first) {
        return first;
    }
    match module.match_indices("::").nth(1) {
        Some((end, _)) => &module[..end],
        None => module,
    }
}

/// The edges one reference makes: between top-level modules, and between children of each
/// module in [`FINE`].
fn edges_of(from: &str, to: &str, at: &str) -> Vec<Edge> {
    let mut out = Vec::new();
    let edge = |from: &str, to: &str| Edge {
        from: from.to_string(),
        to: to.to_string(),
        at: at.to_string(),
    };
    if top(from) != top(to) {
        out.push(edge(top(from), top(to)));
    }
    for fine in FINE {
        let child = |m: &str| -> Option<String> {
            let rest = m.strip_prefix(fine)?.strip_prefix("::")?;
            Some(join(fine, rest.split("::").next().unwrap()))
        };
        if let (Some(a), Some(b)) = (child(from), child(to)) {
            if a != b {
                out.push(edge(&a, &b));
            }
        }
    }
    out
}

/// A cycle in `edges`, as the list of modules around it (first repeated last), if any.
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        graph.entry(a).or_default().push(b);
    }
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new();
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(node, 1);
        stack.push(node);
        for &next in graph.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| *n == next).unwrap();
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|s| s.to_string()).collect();
                    cycle.push(next.to_string());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node, 2);
        None
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    for node in nodes {
        if state.get(node).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(node, &graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}
