//! The manual page the package installs (packaging/man/edgenetd.8) against the real binary's
//! `--help`: the same verbs, the same options, the same defaults and the same exit codes, and
//! roff that groff formats without a warning. A verb or flag added to the CLI without the man
//! page (or the other way round) fails here, not in an operator's terminal.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

fn man_page_path() -> String {
    format!("{}/packaging/man/edgenetd.8", env!("CARGO_MANIFEST_DIR"))
}

fn man_source() -> String {
    std::fs::read_to_string(man_page_path()).expect("read packaging/man/edgenetd.8")
}

fn help() -> String {
    let run = common::bin::edgenetd(&["--help"]);
    assert_eq!(run.code, 0, "edgenetd --help: {}", run.stderr);
    run.stdout
}

/// The roff source as plain words: escapes for `-` and the no-hyphenation mark undone.
fn unescape(roff: &str) -> String {
    roff.replace("\\-", "-")
        .replace("\\%", "")
        .replace("\\&", "")
}

/// The indented lines of a `NAME:` section of the help text, up to the next blank line.
fn help_section<'a>(help: &'a str, name: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| l.trim_end() != format!("{name}:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// The lines of a `.SH NAME` section of the man page, up to the next `.SH`.
fn man_section<'a>(man: &'a str, name: &str) -> Vec<&'a str> {
    man.lines()
        .skip_while(|l| *l != format!(".SH {name}"))
        .skip(1)
        .take_while(|l| !l.starts_with(".SH "))
        .collect()
}

/// The tags of a man section's `.TP` paragraphs: the line after each `.TP`, macro stripped.
fn man_tags(section: &[&str]) -> Vec<String> {
    section
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .map(|w| {
            let tag = w[1].split_once(' ').map_or("", |(_, rest)| rest);
            unescape(tag).trim_matches('"').to_string()
        })
        .collect()
}

/// Every `--flag` in a text.
fn flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if !name.is_empty() {
            found.insert(format!("--{name}"));
        }
    }
    found
}

#[test]
fn man_page_names_every_verb_of_help_and_no_other() {
    let help = help();
    let help_verbs: BTreeSet<String> = help_section(&help, "VERBS")
        .iter()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(
        help_verbs.contains("run") && help_verbs.len() >= 5,
        "{help_verbs:?}"
    );
    let man = man_source();
    let commands: BTreeSet<String> = man_tags(&man_section(&man, "COMMANDS"))
        .into_iter()
        .collect();
    assert_eq!(
        commands, help_verbs,
        "COMMANDS of edgenetd.8 vs VERBS of --help"
    );
    let synopsis: BTreeSet<String> = man_section(&man, "SYNOPSIS")
        .iter()
        .filter_map(|l| l.strip_prefix(".B edgenetd "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        synopsis, help_verbs,
        "SYNOPSIS of edgenetd.8 vs VERBS of --help"
    );
}

#[test]
fn man_page_names_every_flag_of_help_and_no_other() {
    let help = help();
    let man = unescape(&man_source());
    assert_eq!(
        flags(&man),
        flags(&help),
        "flags of edgenetd.8 vs flags of --help"
    );
    let options: BTreeSet<String> = man_tags(&man_section(&man_source(), "OPTIONS"))
        .iter()
        .filter_map(|tag| tag.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(options, flags(&help), "OPTIONS of edgenetd.8 vs --help");
}

/// The OPTIONS section of packaging/man/edgenetd.8, as committed.
fn man_options_section(man: &str) -> &str {
    let start = man.find(".SH OPTIONS\n").expect(".SH OPTIONS") + ".SH OPTIONS\n".len();
    let len = man[start..].find(".SH ").expect("a section after OPTIONS");
    &man[start..start + len]
}

/// A flag is defined once, in src/cli/flags.rs: the man page's OPTIONS are rendered from that
/// table. `EDGENETD_BLESS=1 cargo test --test repo man_page` writes them into the page.
#[test]
fn man_page_options_are_rendered_from_the_flag_table() {
    let man = man_source();
    let rendered = edgenetd::cli::flags::man_options();
    if std::env::var_os("EDGENETD_BLESS").is_some() {
        let now = man.replacen(man_options_section(&man), &rendered, 1);
        std::fs::write(man_page_path(), now).expect("write packaging/man/edgenetd.8");
        return;
    }
    assert!(
        man_options_section(&man) == rendered,
        "packaging/man/edgenetd.8's OPTIONS are not src/cli/flags.rs's: run \
         EDGENETD_BLESS=1 cargo test --test repo man_page, and review the diff"
    );
}

#[test]
fn man_page_states_the_defaults_of_help() {
    let help = help();
    let man = unescape(&man_source());
    let defaults: Vec<&str> = help
        .match_indices("[default: ")
        .map(|(at, m)| {
            let rest = &help[at + m.len()..];
            rest[..rest.find([',', ']']).expect("closed default")].trim()
        })
        .collect();
    assert!(
        defaults.contains(&"/etc/edgenetd/edgenetd.toml"),
        "{defaults:?}"
    );
    for default in defaults {
        assert!(
            man.contains(default),
            "edgenetd.8 does not state default {default}"
        );
    }
}

#[test]
fn man_page_exit_status_matches_help_exit_codes() {
    let help = help();
    let help_codes: Vec<(String, String)> = help_section(&help, "EXIT CODES")
        .iter()
        .map(|l| {
            let (code, meaning) = l.trim().split_once(' ').expect("code and meaning");
            (code.to_string(), meaning.trim().to_string())
        })
        .collect();
    assert_eq!(
        help_codes
            .iter()
            .map(|(c, _)| c.as_str())
            .collect::<Vec<_>>(),
        ["0", "1", "2", "3"]
    );
    let man = man_source();
    let section = man_section(&man, "EXIT STATUS");
    let man_codes: Vec<(String, String)> = section
        .windows(3)
        .filter(|w| w[0] == ".TP")
        .map(|w| (man_tags(&w[..2])[0].clone(), unescape(w[2])))
        .collect();
    assert_eq!(
        man_codes, help_codes,
        "EXIT STATUS of edgenetd.8 vs EXIT CODES of --help"
    );
}

#[test]
fn man_page_has_the_sections_an_operator_looks_for() {
    let man = man_source();
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "OPTIONS",
        "HEALTH",
        "SIGNALS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ] {
        assert!(
            !man_section(&man, section).is_empty(),
            "edgenetd.8 lacks section {section}"
        );
    }
    let signals = man_tags(&man_section(&man, "SIGNALS")).join(" ");
    for signal in ["SIGHUP", "SIGTERM", "SIGINT"] {
        assert!(signals.contains(signal), "SIGNALS lacks {signal}");
    }
    let files = man_tags(&man_section(&man, "FILES")).join(" ");
    assert!(files.contains("/etc/edgenetd/edgenetd.toml"), "{files}");
}

/// `groff -ww` warns about every roff mistake (unknown macros, bad escapes, broken fonts);
/// lintian's `groff-message` check runs the same formatter.
#[test]
fn man_page_formats_without_groff_warnings() {
    let out = Command::new("groff")
        .args(["-man", "-ww", "-z", "-Tutf8"])
        .arg(man_page_path())
        .output()
        .expect("run groff (package groff-base; scripts/install-deps.sh --test installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "groff: {stderr}"
    );
}
