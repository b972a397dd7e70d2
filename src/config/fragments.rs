//! Fragments: TOML texts that are not files of this router (the data keys of a ConfigMap,
//! `[kubernetes] config_map`), merged after the main file and `conf.d` as more `conf.d`
//! files would be, with one difference: **the local files stay the authority**. A key a
//! fragment sets again keeps the local value; the clash is not an error but a note
//! ([`Loaded::shadowed`]), as a cluster service on a TOML service's address keeps the TOML
//! one. Arrays of tables append as ever (a fragment's `[[policy.rule]]` entries come after
//! the local ones). Two fragments setting one key is the same mistake as two `conf.d` files
//! doing so: an error.
//!
//! A fragment may not hold `[daemon]` or `[kubernetes]`: both are read once, at start, so a
//! change from the cluster would come into force at some later restart, out of sight of the
//! confirm that guards every change from the cluster.
//!
//! Each problem names the fragment as its file (`configmap:NS/NAME:KEY:LINE:COL`), and the
//! count of problems in the fragments tells a refused fragment from a broken local file.

use std::path::{Path, PathBuf};

use super::data_file::DataFiles;
use super::diag::Diagnostics;
use super::doc::{Doc, Shadowed};
use super::source_map::SourceMap;
use super::{
    ConfigError, ConfigTexts, DesiredState, KEY_CLASHES, Read, limits, read_files, split,
    validate_into,
};

/// The top-level sections a fragment may not set.
pub const LOCAL_ONLY: &[&str] = &["daemon", "kubernetes"];

/// Why, after "`[section]` ".
pub const LOCAL_ONLY_WHY: &str = "cannot come from the cluster: it is read at start only, so a change would come into force at a restart, unconfirmed; set it in the local files";

/// One fragment: what it is shown as (its "file" in every message) and its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Shown as the file of its problems, e.g. `configmap:kube-system/edgenetd-fleet:10_fw.toml`.
    pub name: String,
    /// The TOML text.
    pub text: String,
}

/// A valid load of the files with fragments.
#[derive(Debug)]
pub struct Loaded {
    /// The desired state (`files` lists the local files only).
    pub state: DesiredState,
    /// The local files' texts (what is kept as the last good configuration).
    pub texts: ConfigTexts,
    /// Each key a fragment set again where a local file set it, one line each:
    /// `FRAGMENT:LINE:COL: `KEY` is set in FILE:LINE:COL too: the local setting wins`.
    pub shadowed: Vec<String>,
}

/// A load with problems.
#[derive(Debug)]
pub struct Rejected {
    /// Every problem, rendered.
    pub error: ConfigError,
    /// How many of them are in the fragments (0: the local files alone are to blame).
    pub in_fragments: usize,
}

/// Loads the files rooted at `main`, then `fragments` after them.
pub fn load_with_fragments(main: &Path, fragments: &[Fragment]) -> Result<Loaded, Rejected> {
    load(main, None, fragments)
}

/// [`load_with_fragments`] with `text` in place of the main file, shown as `shown_as` (what
/// `edgenetd apply` validates while fragments from the cluster are in force).
pub fn load_replacing_main_with_fragments(
    main: &Path,
    shown_as: &Path,
    text: String,
    fragments: &[Fragment],
) -> Result<Loaded, Rejected> {
    load(main, Some((shown_as, text)), fragments)
}

/// Reads the files rooted at `main` (the main file's text replaced by `replace`'s, shown as
/// its path) and then `fragments`, which give way to the files.
fn load(
    main: &Path,
    replace: Option<(&Path, String)>,
    fragments: &[Fragment],
) -> Result<Loaded, Rejected> {
    let mut read = read_files(main, replace);
    let from = add(&mut read, fragments);
    let mut data = DataFiles::from_disk();
    let mut doc = Doc::new(KEY_CLASHES);
    if let Some(from) = from {
        doc.yield_from(from, LOCAL_ONLY, LOCAL_ONLY_WHY);
    }
    let state = validate_into(
        &mut doc,
        &read.sources,
        &read.unparsed,
        split::MIN_BLOCKS,
        &mut data,
        &mut read.diags,
    );
    let shadowed = render_shadowed(doc.shadowed(), &read.sources);
    drop(doc);
    let in_fragments = from.map_or(0, |from| count_from(&read.diags, from));
    match read.finish(state, data) {
        Ok((state, texts)) => Ok(Loaded {
            state,
            texts,
            shadowed,
        }),
        Err(error) => Err(Rejected {
            error,
            in_fragments,
        }),
    }
}

/// Adds the fragments to the sources after the files (a fragment over what is left of the
/// size budget is a problem, unread, as a file would be); returns where they start.
fn add(read: &mut Read, fragments: &[Fragment]) -> Option<usize> {
    let mut from = None;
    for f in fragments {
        let budget = limits::budget(read.total);
        let size = f.text.len() as u64;
        let base = if size > budget {
            let base = read.sources.add(PathBuf::from(&f.name), String::new());
            read.diags
                .error(base..base, limits::size_message(size, false, read.total));
            read.unparsed.push(base);
            base
        } else {
            read.total += size;
            read.sources.add(PathBuf::from(&f.name), f.text.clone())
        };
        from.get_or_insert(base);
    }
    from
}

/// How many problems are placed at or after global offset `from`.
fn count_from(diags: &Diagnostics, from: usize) -> usize {
    let counted = diags
        .items()
        .iter()
        .filter(|d| d.span.as_ref().is_some_and(|s| s.start >= from))
        .count();
    // Problems past the kept ones are not placed: counted with the fragments when any kept
    // one is, since a flood of problems comes from one text.
    let unplaced = diags.len() - diags.items().len();
    counted + if counted > 0 { unplaced } else { 0 }
}

/// One line per shadowed key, both places located.
fn render_shadowed(shadowed: &[Shadowed], sources: &SourceMap) -> Vec<String> {
    let at = |span: &std::ops::Range<usize>| {
        sources.locate(span).map_or_else(String::new, |l| {
            format!("{}:{}:{}", l.path.display(), l.line, l.column)
        })
    };
    shadowed
        .iter()
        .map(|s| {
            format!(
                "{}: `{}` is set in {} too: the local setting wins",
                at(&s.at),
                s.key,
                at(&s.kept)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A main file and a `conf.d` file in a scratch directory.
    fn files(tag: &str, main: &str, conf_d: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgenetd-fragments-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("edgenetd.toml"), main).unwrap();
        for (name, text) in conf_d {
            std::fs::write(dir.join("conf.d").join(name), text).unwrap();
        }
        dir.join("edgenetd.toml")
    }

    fn fragment(key: &str, text: &str) -> Fragment {
        Fragment {
            name: format!("configmap:kube-system/fleet:{key}"),
            text: text.to_string(),
        }
    }

    const POLICY: &str =
        "[policy]\ninput = \"drop\"\n\n[policy.zone.lan]\ninterfaces = [\"eth1\"]\n";

    #[test]
    fn a_fragment_merges_after_the_local_files_and_its_rules_come_after_theirs() {
        let main = files(
            "merge",
            POLICY,
            &[(
                "10-a.toml",
                "[[policy.rule]]\nname = \"local\"\nfrom = \"lan\"\nto = \"self\"\naction = \"accept\"\n",
            )],
        );
        let loaded = load_with_fragments(
            &main,
            &[fragment(
                "fw.toml",
                "[[policy.rule]]\nname = \"fleet\"\nfrom = \"lan\"\nto = \"self\"\nprotocol = \"tcp\"\nports = [\"22\"]\naction = \"drop\"\n",
            )],
        )
        .unwrap();
        let rules: Vec<&str> = loaded
            .state
            .policy
            .as_ref()
            .unwrap()
            .rules
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(rules, ["local", "fleet"]);
        assert_eq!(loaded.state.files.len(), 2, "the local files only");
        assert_eq!(loaded.texts.files.len(), 2, "the local texts only");
        assert!(loaded.shadowed.is_empty());
        std::fs::remove_dir_all(main.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_key_set_locally_and_in_a_fragment_keeps_the_local_value_and_says_so() {
        let main = files("clash", POLICY, &[]);
        let loaded = load_with_fragments(
            &main,
            &[fragment(
                "fw.toml",
                "[policy]\ninput = \"accept\"\nforward_default = \"drop\"\n",
            )],
        )
        .unwrap();
        let policy = loaded.state.policy.unwrap();
        assert_eq!(format!("{:?}", policy.input).to_lowercase(), "drop");
        assert_eq!(
            format!("{:?}", policy.forward).to_lowercase(),
            "drop",
            "the key only the fragment sets is taken"
        );
        let main_shown = main.display().to_string();
        assert_eq!(
            loaded.shadowed,
            [format!(
                "configmap:kube-system/fleet:fw.toml:2:1: `policy.input` is set in {main_shown}:2:1 too: the local setting wins"
            )]
        );
        std::fs::remove_dir_all(main.parent().unwrap()).unwrap();
    }

    #[test]
    fn problems_in_a_fragment_name_it_as_their_file_and_are_counted_apart() {
        let main = files("bad", POLICY, &[]);
        let e = load_with_fragments(
            &main,
            &[
                fragment("a.toml", "[policy]\nforward_default = \"maybe\"\n"),
                fragment("b.toml", "[daemon]\nroute_protocol = 191\n[[route]\n"),
            ],
        )
        .unwrap_err();
        assert_eq!(e.in_fragments, e.error.count, "{}", e.error);
        let out = &e.error.rendered;
        assert!(
            out.contains("configmap:kube-system/fleet:a.toml:2:19: error:"),
            "{out}"
        );
        assert!(
            out.contains("configmap:kube-system/fleet:b.toml:3:"),
            "the syntax error: {out}"
        );
        assert!(out.contains("configmap:kube-system/fleet:b.toml:1:2: error: `[daemon]` cannot come from the cluster"), "{out}");
        // Two fragments setting one key: the conf.d rule.
        let e = load_with_fragments(
            &main,
            &[
                fragment("a.toml", "[policy]\noutput = \"drop\"\n"),
                fragment("b.toml", "[policy]\noutput = \"accept\"\n"),
            ],
        )
        .unwrap_err();
        assert!(
            e.error
                .rendered
                .contains("configmap:kube-system/fleet:b.toml:2:1: error: `output` is set twice"),
            "{}",
            e.error
        );
        // A broken local file: not the fragments' fault.
        std::fs::write(&main, "[policy\n").unwrap();
        let e = load_with_fragments(&main, &[fragment("a.toml", "[policy]\n")]).unwrap_err();
        assert_eq!(e.in_fragments, 0, "{}", e.error);
        std::fs::remove_dir_all(main.parent().unwrap()).unwrap();
    }
}
